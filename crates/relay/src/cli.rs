//! The command line: `serve`, `owner add|list|disable|link`, `migrate`, `healthcheck`. Every flag also reads
//! an environment variable so containers need no arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use crate::clock::now_ms;
use crate::config::{Config, Limits};
use crate::ids::random_id;
use crate::origins::AppOrigin;
use crate::scope::AppScope;
use crate::store;

/// Where `/metrics` is served when `--metrics-listen` is not given (9464: the port commonly used
/// by Prometheus exporters).
const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9464";

#[derive(Debug, Parser)]
#[command(
    name = "sealpost-relay",
    version,
    about = "Sealpost relay: holds sealed envelopes between an MCP plugin and a browser tab."
)]
struct Cli {
    /// Database: sqlite://PATH (created if missing) or postgres://USER@HOST/DB.
    #[arg(long, default_value = "sqlite://./sealpost-relay.db", global = true)]
    database_url: String,
    /// Origin used in sign-in links (default: http://LISTEN).
    #[arg(long, global = true)]
    public_url: Option<String>,
    /// An origin whose pages may use this relay's API from the browser, exactly as the browser
    /// writes it: http(s)://host[:port], e.g. https://app.example.com. Repeat the flag, or
    /// separate origins with commas. Without any, the relay sends no CORS headers and checks no
    /// Origin; with some, requests from other origins than these and the relay's own are
    /// refused (403 origin_not_allowed). `owner add|link --app` makes links for these only.
    #[arg(
        long = "app-origin",
        value_name = "ORIGIN",
        env = "SEALPOST_APP_ORIGINS",
        value_delimiter = ',',
        value_parser = AppOrigin::parse,
        global = true
    )]
    app_origins: Vec<AppOrigin>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the relay.
    Serve(Box<ServeArgs>),
    /// Manage owners (the people who may use this relay).
    Owner {
        #[command(subcommand)]
        command: OwnerCommand,
    },
    /// Create or update the database schema, then exit.
    Migrate,
    /// Exit 0 when the relay on this machine answers /readyz (a container's health check).
    Healthcheck {
        /// The address the relay listens on (`serve --listen`); 0.0.0.0 and :: are checked on
        /// loopback.
        #[arg(long, env = "SEALPOST_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Seconds to wait for the answer.
        #[arg(long, default_value_t = 3)]
        timeout_s: u64,
    },
}

/// `serve`'s flags. Each one's variable is derived from its name (`with_variable`), as are
/// the limits', which are the fields of [`Limits`].
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address the API listens on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Folder of the web app to serve at `/`.
    #[arg(long)]
    web: Option<PathBuf>,
    /// Take client addresses (for per-address rate limits and logs) from the last entry of
    /// Forwarded or X-Forwarded-For. Only behind a proxy that sets it: without the flag those
    /// headers are ignored.
    #[arg(long)]
    trust_proxy: bool,
    /// Address that serves /metrics alone, or `off` [default: 127.0.0.1:9464; when that
    /// default is taken the relay starts without it and says so].
    #[arg(long)]
    metrics_listen: Option<String>,
    /// File holding a token that lets /metrics be scraped on the main address too, as
    /// `Authorization: Bearer TOKEN` (at least 16 characters).
    #[arg(long)]
    metrics_token_file: Option<PathBuf>,
    /// File holding the token signing key (at least 32 bytes). Default: generated once and
    /// stored in the database.
    #[arg(long)]
    signing_key_file: Option<PathBuf>,
    #[command(flatten)]
    oidc: crate::oidc::OidcArgs,
    #[command(flatten)]
    limits: Limits,
}

#[derive(Debug, Subcommand)]
enum OwnerCommand {
    /// Add an owner and print their one-time sign-in link.
    Add {
        name: String,
        #[command(flatten)]
        app: AppArg,
    },
    /// List owners.
    List,
    /// Disable an owner: their tokens stop working at once.
    Disable { name: String },
    /// Enable a disabled owner again (they sign in with a fresh link: `owner link NAME`).
    Enable { name: String },
    /// Print a fresh one-time sign-in link for an owner.
    Link {
        name: String,
        #[command(flatten)]
        app: AppArg,
    },
}

/// How a printed link names a host app (nothing for the relay's own).
fn for_app(app: &AppScope) -> String {
    app.origin()
        .map(|origin| format!(" to the app at {origin}"))
        .unwrap_or_default()
}

/// The app a sign-in link opens, and how long it works.
#[derive(Debug, clap::Args)]
struct AppArg {
    /// Seconds the link works: the relay's own setting, so one variable serves both.
    #[arg(long, env = "SEALPOST_SIGNIN_CODE_TTL_S", default_value_t = Limits::default().signin_code_ttl_s)]
    signin_code_ttl_s: u64,
    /// Make the link for the host app on ORIGIN, one of the relay's --app-origin
    /// (SEALPOST_APP_ORIGINS), instead of the relay's own app: it opens
    /// ORIGIN/#signin=CODE&relay=PUBLIC_URL, and the sign-in is scoped to that app (its own
    /// sessions, pairings and tokens only).
    #[arg(long, value_name = "ORIGIN")]
    app: Option<String>,
}

/// The command line, each flag with its variable: `SEALPOST_` and the flag's name in upper snake
/// case (`--max-connections` reads `SEALPOST_MAX_CONNECTIONS`), unless the flag names its own
/// (`--app-origin` reads the list `SEALPOST_APP_ORIGINS`).
fn command() -> clap::Command {
    Cli::command()
        .mut_args(with_variable)
        .mut_subcommand("serve", |serve| serve.mut_args(with_variable))
}

fn variable_of(flag: &str) -> String {
    format!("SEALPOST_{}", flag.replace('-', "_").to_uppercase())
}

fn with_variable(arg: clap::Arg) -> clap::Arg {
    match (arg.get_env(), arg.get_long()) {
        (None, Some(flag)) => {
            let variable = variable_of(flag);
            arg.env(variable)
        }
        _ => arg,
    }
}

/// The command line read from `args` and the environment.
fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command().try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches).map_err(|error| error.format(&mut command()))
}

/// A variable spelled after a flag's old name (its alias: old command lines keep working) stops
/// the relay with the new name, rather than leave that setting at its default unseen.
fn refuse_renamed_variables(is_set: impl Fn(&str) -> bool) -> Result<(), String> {
    let command = command();
    let serve = command
        .find_subcommand("serve")
        .expect("serve is a command");
    for arg in serve.get_arguments() {
        let (Some(flag), Some(aliases)) = (arg.get_long(), arg.get_all_aliases()) else {
            continue;
        };
        if let Some(old) = aliases.into_iter().map(variable_of).find(|old| is_set(old)) {
            return Err(format!(
                "{old} was renamed {new} (the flag --{flag}); set {new} instead",
                new = variable_of(flag)
            ));
        }
    }
    Ok(())
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = match parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    if let Err(renamed) = refuse_renamed_variables(|name| std::env::var_os(name).is_some()) {
        eprintln!("error: {renamed}");
        return ExitCode::from(2);
    }
    let log = crate::logging::Log::install();
    let outcome = tokio::runtime::Runtime::new()
        .map_err(|error| anyhow::anyhow!("cannot start the async runtime: {error}"))
        .and_then(|runtime| runtime.block_on(run(cli)));
    let code = if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    log.finish(outcome.err().map(|error| format!("{error:#}")));
    code
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            let mut config = Config::new(cli.database_url);
            config.public_url = cli
                .public_url
                .unwrap_or_else(|| format!("http://{}", args.listen));
            config.listen = args.listen;
            config.web_dir = args.web;
            config.trust_proxy = args.trust_proxy;
            config.app_origins = cli.app_origins;
            config.oidc = args.oidc.clone().into_config()?;
            match args.metrics_listen.as_deref() {
                Some("off") => {}
                Some(addr) => {
                    config.metrics_listen = Some(addr.parse().with_context(|| {
                        format!("--metrics-listen {addr:?} is not an address (or `off`)")
                    })?);
                }
                None => {
                    config.metrics_listen = Some(DEFAULT_METRICS_LISTEN.parse().expect("static"));
                    config.metrics_listen_optional = true;
                }
            }
            if let Some(path) = args.metrics_token_file {
                let token = std::fs::read_to_string(&path)
                    .with_context(|| format!("read {}", path.display()))?;
                let token = token.trim().to_owned();
                anyhow::ensure!(
                    token.len() >= 16,
                    "the metrics token in {} must be at least 16 characters",
                    path.display()
                );
                config.metrics_token = Some(token);
            }
            if let Some(path) = args.signing_key_file {
                config.signing_key =
                    Some(std::fs::read(&path).with_context(|| format!("read {}", path.display()))?);
            }
            // Tests lower these to run fast; an operator cannot serve clients with them lowered.
            args.limits.check().map_err(anyhow::Error::msg)?;
            config.limits = args.limits;
            crate::app::serve(config).await
        }
        Command::Healthcheck { listen, timeout_s } => {
            crate::healthcheck::check(listen, std::time::Duration::from_secs(timeout_s)).await
        }
        Command::Migrate => {
            store::open(&cli.database_url).await?;
            println!("database is up to date");
            Ok(())
        }
        Command::Owner { command } => {
            // Only adding an owner may make the database (setting a relay up before its first
            // start); the other commands read owners, which an empty database has none of.
            let adds = matches!(command, OwnerCommand::Add { .. });
            if let Some(path) = store::missing_sqlite_file(&cli.database_url)?.filter(|_| !adds) {
                anyhow::bail!(
                    "no relay database at {}. `owner` works on the database the relay serves \
                     from: pass the same --database-url (or SEALPOST_DATABASE_URL) as to `serve`; \
                     `cargo xtask run` uses sqlite://target/dev/sealpost-relay.db. The relay \
                     makes its database on its first start (or `migrate`, or `owner add`).",
                    path.display()
                );
            }
            let store = store::open(&cli.database_url).await?;
            let public_url = cli
                .public_url
                .unwrap_or_else(|| "http://127.0.0.1:8080".into());
            // Checked before anything is written: a refused `--app` adds no owner.
            let app_of = |app: &AppArg| {
                AppScope::named(app.app.as_deref(), &cli.app_origins).map_err(|not_listed| {
                    anyhow::anyhow!(
                        "--app {not_listed}. List it for the relay first (--app-origin or \
                         SEALPOST_APP_ORIGINS, here and where the relay serves), or leave --app \
                         out for a link to the relay's own app."
                    )
                })
            };
            match command {
                OwnerCommand::Add { name, app: link } => {
                    let app = app_of(&link)?;
                    let to = for_app(&app);
                    let ttl = link.signin_code_ttl_s;
                    let validity = crate::accounts::validity_in_words(ttl);
                    let id = random_id();
                    store
                        .create_owner(id, &name, now_ms())
                        .await
                        .map_err(|e| match e {
                            store::StoreError::Duplicate => {
                                anyhow::anyhow!("an owner named {name:?} already exists")
                            }
                            other => other.into(),
                        })?;
                    let (link, _) = crate::accounts::create_app_signin_link(
                        store.as_ref(),
                        &public_url,
                        id,
                        &app,
                        ttl,
                        None,
                    )
                    .await?;
                    println!(
                        "Owner {name:?} added. One-time sign-in link{to} (valid {validity}):\n  {link}"
                    );
                }
                OwnerCommand::List => {
                    for owner in store.list_owners().await? {
                        println!(
                            "{}\t{}\t{}",
                            owner.name,
                            owner.id,
                            if owner.disabled { "disabled" } else { "active" }
                        );
                    }
                }
                OwnerCommand::Disable { name } => {
                    anyhow::ensure!(
                        store.disable_owner(&name, now_ms()).await?,
                        "no owner named {name:?}"
                    );
                    println!("Owner {name:?} disabled; their tokens no longer work.");
                }
                OwnerCommand::Enable { name } => {
                    anyhow::ensure!(store.enable_owner(&name).await?, "no owner named {name:?}");
                    println!(
                        "Owner {name:?} enabled. Their old sign-ins stay revoked: give them a new link (`sealpost-relay owner link {name}`)."
                    );
                }
                OwnerCommand::Link { name, app: link } => {
                    let app = app_of(&link)?;
                    let to = for_app(&app);
                    let ttl = link.signin_code_ttl_s;
                    let validity = crate::accounts::validity_in_words(ttl);
                    let owner = store
                        .owner_by_name(&name)
                        .await?
                        .with_context(|| format!("no owner named {name:?}"))?;
                    anyhow::ensure!(!owner.disabled, "owner {name:?} is disabled");
                    let (link, _) = crate::accounts::create_app_signin_link(
                        store.as_ref(),
                        &public_url,
                        owner.id,
                        &app,
                        ttl,
                        None,
                    )
                    .await?;
                    println!(
                        "One-time sign-in link for {name:?}{to} (valid {validity}):\n  {link}"
                    );
                }
            }
            Ok(())
        }
    }
}

/// docs/RELAY.md's table of limits (written and checked by a test), made from [`Limits`] itself: each limit's flag and
/// variable, its default, and its doc comment (what it limits and the answer past it).
#[cfg(test)]
fn limits_table() -> String {
    use clap::Args as _;
    let ids: Vec<_> = Limits::augment_args(clap::Command::new("limits"))
        .get_arguments()
        .map(|arg| arg.get_id().clone())
        .collect();
    let command = command();
    let serve = command
        .find_subcommand("serve")
        .expect("serve is a command");
    let mut table = String::from(
        "| flag and variable | default | what it limits, and the answer past it |\n|---|---|---|\n",
    );
    for arg in serve
        .get_arguments()
        .filter(|arg| ids.contains(arg.get_id()))
    {
        let flag = arg.get_long().expect("every limit is a flag");
        let variable = arg.get_env().expect("every limit has a variable");
        let default = arg.get_default_values()[0].to_string_lossy();
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .expect("every limit says what it is");
        table.push_str(&format!(
            "| `--{flag}`<br>`{}` | {} | {} |\n",
            variable.to_string_lossy(),
            in_words(flag, &default),
            help.to_string().replace('\n', " ").replace('|', "\\|"),
        ));
    }
    table
}

/// A default as the table shows it: digits grouped, and a size or a time in the unit a person
/// thinks in when the flag's name gives the unit (`bytes`, `-s`, `-ms`).
#[cfg(test)]
fn in_words(flag: &str, default: &str) -> String {
    let Ok(value) = default.parse::<u64>() else {
        return default.to_owned();
    };
    let digits = value.to_string();
    let mut grouped = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let seconds = if flag.ends_with("-ms") && value.is_multiple_of(1000) {
        Some(value / 1000)
    } else if flag.ends_with("-s") {
        Some(value)
    } else {
        None
    };
    let unit = |of: u64, units: &[(u64, &str)]| {
        units
            .iter()
            .find(|(size, _)| of >= *size && of.is_multiple_of(*size))
            .map(|(size, name)| {
                let count = of / size;
                let plural = if count == 1 || name.ends_with('B') {
                    ""
                } else {
                    "s"
                };
                format!(" ({count} {name}{plural})")
            })
    };
    let words = match seconds {
        Some(s) if s >= 60 => unit(s, &[(86_400, "day"), (3_600, "hour"), (60, "minute")]),
        Some(s) if flag.ends_with("-ms") => Some(format!(" ({s} s)")),
        _ if flag.contains("bytes") && value >= 1024 => {
            unit(value, &[(1 << 20, "MiB"), (1 << 10, "KiB")])
        }
        _ => None,
    };
    format!("{grouped}{}", words.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE_START: &str = "<!-- The table below is made from crates/relay/src/config.rs: `SEALPOST_BLESS=1 cargo test -p sealpost-relay --lib limits` writes it again. -->\n";
    const TABLE_END: &str = "<!-- End of the made table. -->";

    /// The docs table is the struct's: a limit added, renamed or given another default or
    /// meaning changes it, and this test says so until it is written again.
    #[test]
    fn the_limits_table_in_docs_relay_md_is_made_from_the_limits() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/RELAY.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let start = doc
            .find(TABLE_START)
            .expect("docs/RELAY.md marks its limits table")
            + TABLE_START.len();
        let end = start
            + doc[start..]
                .find(TABLE_END)
                .expect("the table's end is marked");
        let made = limits_table();
        if std::env::var_os("SEALPOST_BLESS").is_some() {
            std::fs::write(&path, format!("{}{made}{}", &doc[..start], &doc[end..])).unwrap();
            return;
        }
        assert_eq!(
            doc[start..end],
            made,
            "docs/RELAY.md's limits table differs from crates/relay/src/config.rs: run \
             SEALPOST_BLESS=1 cargo test -p sealpost-relay --lib limits"
        );
    }

    /// One rule names every variable, so a flag cannot drift from its variable.
    #[test]
    fn every_serve_flag_reads_sealpost_and_its_name() {
        let command = command();
        let serve = command.find_subcommand("serve").unwrap();
        let mut checked = 0;
        for arg in serve.get_arguments().filter(|arg| arg.get_long().is_some()) {
            let flag = arg.get_long().unwrap();
            let variable = arg.get_env().map(|v| v.to_string_lossy().into_owned());
            let expected = match flag {
                "app-origin" => "SEALPOST_APP_ORIGINS".to_owned(),
                _ => variable_of(flag),
            };
            assert_eq!(variable.as_deref(), Some(expected.as_str()), "--{flag}");
            checked += 1;
        }
        assert!(checked > 40, "only {checked} flags were checked");
    }

    /// `owner add|link` make links that last as long as the relay's own: the same flag and
    /// variable, and the same default.
    #[test]
    fn owner_links_read_the_relays_own_sign_in_lifetime() {
        let command = command();
        let serve = command.find_subcommand("serve").unwrap();
        let of = |cmd: &clap::Command| {
            let arg = cmd
                .get_arguments()
                .find(|arg| arg.get_long() == Some("signin-code-ttl-s"))
                .unwrap();
            (
                arg.get_env().map(|v| v.to_owned()),
                arg.get_default_values().to_vec(),
            )
        };
        let owner = command.find_subcommand("owner").unwrap();
        for name in ["add", "link"] {
            assert_eq!(
                of(owner.find_subcommand(name).unwrap()),
                of(serve),
                "owner {name}"
            );
        }
    }

    #[test]
    fn a_limit_is_set_by_its_flag_and_an_old_flag_name_still_works() {
        let cli = parse([
            "sealpost-relay",
            "serve",
            "--max-connections",
            "7",
            "--rate-burst",
            "9",
        ])
        .unwrap();
        let Command::Serve(serve) = cli.command else {
            panic!("serve")
        };
        assert_eq!(serve.limits.max_connections, 7);
        assert_eq!(
            serve.limits.rate_burst_per_token, 9,
            "--rate-burst is --rate-burst-per-token"
        );
        assert_eq!(
            Limits {
                max_connections: 1_024,
                rate_burst_per_token: 200,
                ..serve.limits
            },
            Limits::default(),
            "every other limit keeps its default"
        );
    }

    #[test]
    fn a_variable_of_an_old_name_stops_the_relay_with_the_new_one() {
        assert_eq!(refuse_renamed_variables(|_| false), Ok(()));
        let refused = refuse_renamed_variables(|name| name == "SEALPOST_RATE_BURST").unwrap_err();
        assert_eq!(
            refused,
            "SEALPOST_RATE_BURST was renamed SEALPOST_RATE_BURST_PER_TOKEN (the flag \
             --rate-burst-per-token); set SEALPOST_RATE_BURST_PER_TOKEN instead"
        );
    }

    #[test]
    fn defaults_read_in_the_units_people_think_in() {
        assert_eq!(
            in_words("max-call-envelope-bytes", "262144"),
            "262,144 (256 KiB)"
        );
        assert_eq!(
            in_words("max-bytes-held-per-owner", "268435456"),
            "268,435,456 (256 MiB)"
        );
        assert_eq!(in_words("max-session-ttl-s", "86400"), "86,400 (1 day)");
        assert_eq!(in_words("sweep-grace-ms", "600000"), "600,000 (10 minutes)");
        assert_eq!(in_words("fallback-poll-ms", "5000"), "5,000 (5 s)");
        assert_eq!(in_words("max-connections", "1024"), "1,024");
    }
}
