//! Relay tasks: `cargo xtask run` (the relay on SQLite serving `web/`) and
//! `cargo xtask bench relay` (the load benchmark on SQLite and on a throwaway PostgreSQL).

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};

use crate::postgres::TestCluster;

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The database `cargo xtask run` serves from, relative to the repository's root.
const DEV_DATABASE: &str = "sqlite://target/dev/sealpost-relay.db";

/// Builds the web app, then starts the relay at 127.0.0.1:8080 on
/// `target/dev/sealpost-relay.db` serving it. On the first start the relay creates a local
/// owner and prints a sign-in link.
pub fn run() -> Result<()> {
    crate::web::build()?;
    let root = workspace();
    std::fs::create_dir_all(root.join("target/dev"))?;
    let mut command = cargo();
    command
        .current_dir(root)
        .args([
            "run",
            "--release",
            "-p",
            "sealpost-relay",
            "--",
            "serve",
            "--listen",
            "127.0.0.1:8080",
        ])
        .env("SEALPOST_DATABASE_URL", DEV_DATABASE);
    command.arg("--web").arg(crate::web::out_dir());
    eprintln!(
        "A sign-in link later, from another terminal: SEALPOST_DATABASE_URL={DEV_DATABASE} \
         cargo run -p sealpost-relay -- owner link owner"
    );
    let status = command.status()?;
    if !status.success() {
        bail!("the relay exited with {status}");
    }
    Ok(())
}

/// Runs the relay benchmark (tests/benches/relay/) on SQLite and on a throwaway
/// PostgreSQL cluster, each beside its same-run ceilings; on PostgreSQL also beside
/// `pgbench -N` on the same cluster.
pub fn bench() -> Result<()> {
    let cluster = TestCluster::start()?;
    // The idle-channels row runs the relay as a process of its own, to read its memory alone.
    let built = cargo()
        .current_dir(workspace())
        .args(["build", "--release", "-p", "sealpost-relay"])
        .status()?;
    if !built.success() {
        bail!("building the relay failed ({built})");
    }
    let status = cargo()
        .current_dir(workspace())
        .args(["bench", "-p", "sealpost-e2e", "--bench", "relay"])
        .env(
            "SEALPOST_BENCH_RELAY_BIN",
            workspace().join("target/release/sealpost-relay"),
        )
        .env("SEALPOST_BENCH_POSTGRES_URL", cluster.url())
        .env("SEALPOST_BENCH_PGBENCH", cluster.tool("pgbench"))
        .status()?;
    if !status.success() {
        bail!("the relay benchmark failed ({status})");
    }
    Ok(())
}
