//! `cargo xtask`: the project's one entry point for building, running, testing and measuring.
//!
//! - `cargo xtask test`   every suite: format, lints, native tests (SQLite and a throwaway
//!   PostgreSQL), wasm tests in headless Chromium, wasm32 builds of the pure crates, an
//!   independent Python implementation against the vectors, fuzz smoke.
//! - `cargo xtask run`    the relay on SQLite at 127.0.0.1:8080 serving the web app.
//! - `cargo xtask bench [seal|relay|executor|plugin|browser|web|all]` (`browser` and `web` run
//!   in headless Chromium and are not part of `all`).
//! - `cargo xtask fuzz [SECONDS]`  each fuzz target for SECONDS (default 20).
//! - `cargo xtask tools`  installs and checks the prerequisites only.
//! - `cargo xtask postgres`  starts a throwaway PostgreSQL cluster, queries it, removes it.
//! - `cargo xtask mcpb [--debug]`  the plugin as an MCP Bundle in `target/mcpb/`.
//! - `cargo xtask web`  the browser module and the web app into `target/web/`.

mod bench_web;
mod cmd;
mod executor;
mod fuzz;
mod mcpb;
mod postgres;
mod relay;
mod tools;
mod wasm;
mod web;

use anyhow::{Result, bail};

use crate::cmd::{cargo, cmd, step};

const USAGE: &str = "usage: cargo xtask <test | run | bench [seal|relay|executor|plugin|browser|web|all] | fuzz [SECONDS] | tools | postgres | mcpb [--debug] | web>";

/// Crates that must build for `wasm32-unknown-unknown` (pure: no I/O, no clock).
const PURE_CRATES: [&str; 3] = ["sealpost-seal", "sealpost-protocol", "sealpost-executor"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["test"] => test(),
        ["run"] => relay::run(),
        ["bench"] | ["bench", "all"] => bench_all(),
        ["bench", "seal"] => bench_seal(),
        ["bench", "relay"] => relay::bench(),
        ["bench", "executor"] => executor::bench(),
        ["bench", "plugin"] => bench_plugin(),
        ["bench", "browser"] => bench_web::browser(),
        ["bench", "web"] => bench_web::web(),
        ["fuzz"] => fuzz::smoke(20),
        ["fuzz", seconds] => fuzz::smoke(seconds.parse()?),
        ["tools"] => tools::ensure_all().map(|_| ()),
        ["postgres"] => postgres::check(),
        ["web"] => web::build().map(|_| ()),
        ["mcpb"] => mcpb::build(true).map(|_| ()),
        ["mcpb", "--debug"] => mcpb::build(false).map(|_| ()),
        _ => bail!("{USAGE}"),
    }
}

fn test() -> Result<()> {
    let tools = tools::ensure_all()?;
    step("format", || cargo(&["fmt", "--all", "--check"]).run())?;
    step("lints", || {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
        .run()
    })?;
    step("lints of the browser module (wasm32)", || {
        cargo(&[
            "clippy",
            "-p",
            "sealpost-browser",
            "--target",
            "wasm32-unknown-unknown",
            "--",
            "-D",
            "warnings",
        ])
        .run()
    })?;
    step("wasm32 builds of the pure crates", || {
        let mut args = vec!["check", "--target", "wasm32-unknown-unknown"];
        for krate in PURE_CRATES {
            args.extend(["-p", krate]);
        }
        cargo(&args).run()
    })?;
    let cluster = step("start a throwaway PostgreSQL", postgres::TestCluster::start)?;
    step(
        "native tests (unit, contract on SQLite and PostgreSQL, integration)",
        || {
            cargo(&["test", "--workspace"])
                .env("SEALPOST_TEST_POSTGRES_URL", cluster.url())
                .run()
        },
    )?;
    cluster.stop();
    step("the plugin packs as an MCP Bundle", || {
        mcpb::pack_tested().map(|_| ())
    })?;
    step("wasm tests in headless Chromium", || wasm::test(&tools))?;
    step("the browser module and the web app build", || {
        web::build().map(|_| ())
    })?;
    step(
        "the web app end to end: Chromium, the relay and the real plugin",
        || web::test(&tools),
    )?;
    step(
        "an independent implementation (Python, libsodium) agrees with the vectors",
        || {
            cmd(
                &tools.python,
                &["crates/seal/tests/second_implementation.py"],
            )
            .run()
        },
    )?;
    step("fuzz smoke", || fuzz::smoke(5))?;
    eprintln!("\nall suites passed");
    Ok(())
}

fn bench_seal() -> Result<()> {
    step("bench seal", || {
        cargo(&["bench", "-p", "sealpost-seal", "--bench", "seal"]).run()
    })
}

fn bench_plugin() -> Result<()> {
    step("bench plugin", || {
        cargo(&["bench", "-p", "sealpost", "--bench", "plugin"]).run()
    })
}

fn bench_all() -> Result<()> {
    bench_seal()?;
    bench_plugin()?;
    executor::bench()?;
    relay::bench()
}
