//! The `sealpost` binary: parses arguments and calls the library.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sealpost::commands::{self, exit_codes_help};
use sealpost::config::ConfigDir;
use sealpost::{Options, Plugin};

/// Sealpost's local plugin: lets an MCP client call tools in your Sealpost browser tab.
#[derive(Debug, Parser)]
#[command(name = "sealpost", version, after_help = exit_codes_help())]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pair with a browser tab: reads the pairing code from stdin (or SEALPOST_PAIRING_CODE).
    #[command(after_help = exit_codes_help())]
    Pair {
        /// The pairing code. Prefer pasting it when asked: an argument lands in shell history.
        code: Option<String>,
        /// Replace a different pairing that is already stored.
        #[arg(long)]
        replace: bool,
    },
    /// Revoke this plugin's token at the relay and delete the pairing.
    #[command(after_help = exit_codes_help())]
    Unpair,
    /// Is the plugin paired, the relay reachable, the token live, the tab open?
    #[command(after_help = exit_codes_help())]
    Status {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve MCP on stdin and stdout (what an MCP client runs).
    Mcp {
        /// Longest a tool call waits for the tab, in seconds (keep it below the client's own
        /// limit: 60 s for Codex and Claude Desktop).
        #[arg(long, env = "SEALPOST_CALL_TIMEOUT_S", default_value_t = 55,
              value_parser = clap::value_parser!(u64).range(1..=3600))]
        call_timeout_s: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // stdout belongs to the protocol under `mcp`: logs always go to stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SEALPOST_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let config = match ConfigDir::locate() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(1);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Pair { code, replace } => {
                let plugin = Plugin::new(config, Options::default());
                commands::pair(&plugin, code, replace).await.code()
            }
            Command::Unpair => {
                let plugin = Plugin::new(config, Options::default());
                commands::unpair(&plugin).await.code()
            }
            Command::Status { json } => {
                let plugin = Plugin::new(config, Options::default());
                let report = commands::status_report(&plugin).await;
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&report).expect("serialises")
                    );
                } else {
                    println!("{}", report.for_person());
                }
                report.exit.code()
            }
            Command::Mcp { call_timeout_s } => {
                let options = Options {
                    call_timeout: Duration::from_secs(call_timeout_s),
                    ..Options::default()
                };
                let mut plugin = Plugin::new(config, options);
                commands::pair_from_environment(&mut plugin);
                let plugin = Arc::new(plugin);
                match sealpost::server::serve_stdio(plugin).await {
                    Ok(()) => 0,
                    Err(error) => {
                        eprintln!("sealpost mcp stopped: {error:#}");
                        1
                    }
                }
            }
        }
    });
    // Requests still waiting on the relay are abandoned: the client is gone. Exiting here
    // (not dropping the runtime) keeps the exit within moments of stdin closing.
    std::process::exit(i32::from(code));
}
