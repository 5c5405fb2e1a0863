//! The command line: `serve`, `owner add|list|disable|link`, `migrate`. Every flag also reads
//! an environment variable so containers need no arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

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
    #[arg(
        long,
        env = "SEALPOST_DATABASE_URL",
        default_value = "sqlite://./sealpost-relay.db",
        global = true
    )]
    database_url: String,
    /// Origin used in sign-in links (default: http://LISTEN).
    #[arg(long, env = "SEALPOST_PUBLIC_URL", global = true)]
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
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    #[arg(long, env = "SEALPOST_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Folder of the web app to serve at `/`.
    #[arg(long, env = "SEALPOST_WEB")]
    web: Option<PathBuf>,
    /// Take client addresses (for per-address rate limits and logs) from the last entry of
    /// Forwarded or X-Forwarded-For. Only behind a proxy that sets it: without the flag those
    /// headers are ignored.
    #[arg(long, env = "SEALPOST_TRUST_PROXY")]
    trust_proxy: bool,
    /// Address that serves /metrics alone, or `off` [default: 127.0.0.1:9464; when that
    /// default is taken the relay starts without it and says so].
    #[arg(long, env = "SEALPOST_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// File holding a token that lets /metrics be scraped on the main address too, as
    /// `Authorization: Bearer TOKEN` (at least 16 characters).
    #[arg(long, env = "SEALPOST_METRICS_TOKEN_FILE")]
    metrics_token_file: Option<PathBuf>,
    /// File holding the token signing key (at least 32 bytes). Default: generated once and
    /// stored in the database.
    #[arg(long, env = "SEALPOST_SIGNING_KEY_FILE")]
    signing_key_file: Option<PathBuf>,
    /// Sustained requests per second per token, per replica (0: unlimited).
    #[arg(long, env = "SEALPOST_RATE_PER_TOKEN", default_value_t = Limits::default().rate_per_token_per_s)]
    rate_per_token: u32,
    /// Burst of requests per token above the sustained rate.
    #[arg(long, env = "SEALPOST_RATE_BURST", default_value_t = Limits::default().rate_burst_per_token)]
    rate_burst: u32,
    /// Sustained requests per second of all of one owner's tokens together, per replica (0:
    /// unlimited).
    #[arg(long, env = "SEALPOST_RATE_PER_OWNER", default_value_t = Limits::default().rate_per_owner_per_s)]
    rate_per_owner: u32,
    /// Burst of requests per owner above the sustained rate.
    #[arg(long, env = "SEALPOST_RATE_BURST_PER_OWNER", default_value_t = Limits::default().rate_burst_per_owner)]
    rate_burst_per_owner: u32,
    /// Bytes one owner's calls and replies may hold at once, per replica (0: no quota).
    #[arg(long, env = "SEALPOST_MAX_BYTES_PER_OWNER", default_value_t = Limits::default().max_bytes_held_per_owner)]
    max_bytes_per_owner: u64,
    /// Live MCP tokens one owner may hold.
    #[arg(long, env = "SEALPOST_MAX_MCP_TOKENS", default_value_t = Limits::default().max_live_mcp_tokens_per_owner)]
    max_mcp_tokens: u32,
    /// Unused sign-in links one owner may hold (made in the web app; `owner link` is not
    /// counted).
    #[arg(long, env = "SEALPOST_MAX_SIGNIN_LINKS", default_value_t = Limits::default().max_live_signin_codes_per_owner)]
    max_signin_links: u32,
    /// Seconds a sign-in lapses after its last use (each use renews it).
    #[arg(long, env = "SEALPOST_OWNER_TOKEN_TTL_S", default_value_t = Limits::default().owner_token_ttl_s)]
    owner_token_ttl_s: u64,
    /// Seconds a sign-in lives at most from the sign-in, however often it is used.
    #[arg(long, env = "SEALPOST_OWNER_TOKEN_LIFETIME_S", default_value_t = Limits::default().owner_token_lifetime_s)]
    owner_token_lifetime_s: u64,
    /// Sign-in attempts per minute per client address, per replica (0: unlimited).
    #[arg(long, env = "SEALPOST_SIGNIN_RATE_PER_ADDRESS", default_value_t = Limits::default().signin_rate_per_address_per_min)]
    signin_rate_per_address: u32,
    /// Pending calls one session may hold.
    #[arg(long, env = "SEALPOST_MAX_PENDING_CALLS", default_value_t = Limits::default().max_pending_calls_per_session)]
    max_pending_calls: u32,
    /// Live sessions one owner may hold.
    #[arg(long, env = "SEALPOST_MAX_LIVE_SESSIONS", default_value_t = Limits::default().max_live_sessions_per_owner)]
    max_live_sessions: u32,
    /// Long-polls re-check the database at least this often, in milliseconds (covers a lost
    /// cross-replica notification).
    #[arg(long, env = "SEALPOST_FALLBACK_POLL_MS", default_value_t = Limits::default().fallback_poll_ms)]
    fallback_poll_ms: u64,
    /// How often the sweeper runs, in milliseconds.
    #[arg(long, env = "SEALPOST_SWEEP_INTERVAL_MS", default_value_t = Limits::default().sweep_interval_ms)]
    sweep_interval_ms: u64,
    /// Connections open at once; past it, new ones are answered 503 and closed.
    #[arg(long, env = "SEALPOST_MAX_CONNECTIONS", default_value_t = Limits::default().max_connections)]
    max_connections: u32,
    /// Connections open at once from one peer address (0: no cap; ignored with --trust-proxy).
    #[arg(long, env = "SEALPOST_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = Limits::default().max_connections_per_address)]
    max_connections_per_address: u32,
    /// Claims and reads waiting at once with one token (0: no cap).
    #[arg(long, env = "SEALPOST_MAX_LONG_POLLS_PER_TOKEN", default_value_t = Limits::default().max_long_polls_per_token)]
    max_long_polls_per_token: u32,
    /// Claims and reads waiting at once with all of one owner's tokens (0: no cap).
    #[arg(long, env = "SEALPOST_MAX_LONG_POLLS_PER_OWNER", default_value_t = Limits::default().max_long_polls_per_owner)]
    max_long_polls_per_owner: u32,
    /// Large request bodies (above 64 KiB, or chunked) read at once for one owner (0: no cap).
    #[arg(long, env = "SEALPOST_MAX_LARGE_BODIES_PER_OWNER", default_value_t = Limits::default().max_large_bodies_per_owner)]
    max_large_bodies_per_owner: u32,
    /// Session channels (WebSockets) one owner may hold open (0: offer none; tabs use HTTP).
    #[arg(long, env = "SEALPOST_MAX_CHANNELS_PER_OWNER", default_value_t = Limits::default().max_channels_per_owner)]
    max_channels_per_owner: u32,
    /// Milliseconds a connection has to send a request's headers, from when it opens or from
    /// its previous response (also the keep-alive idle timeout).
    #[arg(long, env = "SEALPOST_HEADER_READ_TIMEOUT_MS", default_value_t = Limits::default().header_read_timeout_ms)]
    header_read_timeout_ms: u64,
    /// Milliseconds a write to a client may make no progress before the connection is dropped.
    #[arg(long, env = "SEALPOST_WRITE_TIMEOUT_MS", default_value_t = Limits::default().write_timeout_ms)]
    write_timeout_ms: u64,
    /// Milliseconds in-flight requests get on SIGTERM before their connections are dropped.
    #[arg(long, env = "SEALPOST_SHUTDOWN_DEADLINE_MS", default_value_t = Limits::default().shutdown_deadline_ms)]
    shutdown_deadline_ms: u64,
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

/// The app a sign-in link opens.
#[derive(Debug, clap::Args)]
struct AppArg {
    /// Make the link for the host app on ORIGIN, one of the relay's --app-origin
    /// (SEALPOST_APP_ORIGINS), instead of the relay's own app: it opens
    /// ORIGIN/#signin=CODE&relay=PUBLIC_URL, and the sign-in is scoped to that app (its own
    /// sessions, pairings and tokens only).
    #[arg(long, value_name = "ORIGIN")]
    app: Option<String>,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SEALPOST_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
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
            config.limits.rate_per_token_per_s = args.rate_per_token;
            config.limits.rate_burst_per_token = args.rate_burst;
            config.limits.rate_per_owner_per_s = args.rate_per_owner;
            config.limits.rate_burst_per_owner = args.rate_burst_per_owner;
            config.limits.max_live_mcp_tokens_per_owner = args.max_mcp_tokens;
            config.limits.max_bytes_held_per_owner = args.max_bytes_per_owner;
            config.limits.max_live_signin_codes_per_owner = args.max_signin_links;
            config.limits.owner_token_ttl_s = args.owner_token_ttl_s;
            config.limits.owner_token_lifetime_s = args.owner_token_lifetime_s;
            config.limits.signin_rate_per_address_per_min = args.signin_rate_per_address;
            config.limits.max_pending_calls_per_session = args.max_pending_calls;
            config.limits.max_live_sessions_per_owner = args.max_live_sessions;
            config.limits.sweep_interval_ms = args.sweep_interval_ms;
            config.limits.fallback_poll_ms = args.fallback_poll_ms;
            config.limits.max_connections = args.max_connections;
            config.limits.max_connections_per_address = args.max_connections_per_address;
            config.limits.max_channels_per_owner = args.max_channels_per_owner;
            config.limits.max_long_polls_per_token = args.max_long_polls_per_token;
            config.limits.max_long_polls_per_owner = args.max_long_polls_per_owner;
            config.limits.max_large_bodies_per_owner = args.max_large_bodies_per_owner;
            config.limits.header_read_timeout_ms = args.header_read_timeout_ms;
            config.limits.write_timeout_ms = args.write_timeout_ms;
            config.limits.shutdown_deadline_ms = args.shutdown_deadline_ms;
            crate::app::serve(config).await
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
            let ttl = Limits::default().signin_code_ttl_s;
            let validity = crate::accounts::validity_in_words(ttl);
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
                OwnerCommand::Add { name, app } => {
                    let app = app_of(&app)?;
                    let to = for_app(&app);
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
                OwnerCommand::Link { name, app } => {
                    let app = app_of(&app)?;
                    let to = for_app(&app);
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
