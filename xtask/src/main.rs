//! `cargo xtask`: the project's one entry point for building, running, testing and measuring.
//!
//! - `cargo xtask test [--no-postgres]`   every suite: format, lints, native tests (SQLite and
//!   a throwaway PostgreSQL), wasm tests in headless Chromium, wasm32 builds of the pure crates,
//!   an independent Python implementation against the vectors, the release checks (`dist
//!   check`), fuzz smoke. Without PostgreSQL
//!   it fails unless `--no-postgres` is given; then the PostgreSQL tests skip and are counted.
//! - `cargo xtask run`    the relay on SQLite at 127.0.0.1:8080 serving the web app.
//! - `cargo xtask bench [seal|relay|executor|plugin|browser|web|all]` (`browser` and `web` run
//!   in headless Chromium and are not part of `all`).
//! - `cargo xtask fuzz [SECONDS]`  each fuzz target for SECONDS (default 20).
//! - `cargo xtask mutants [seal|relay|all]`  mutation testing of the seal and the relay's auth
//!   and call states (not part of `test`).
//! - `cargo xtask tools`  installs and checks the prerequisites only.
//! - `cargo xtask postgres`  starts a throwaway PostgreSQL cluster, queries it, removes it.
//! - `cargo xtask mcpb [--debug]`  the plugin as an MCP Bundle in `target/mcpb/`.
//! - `cargo xtask dist [--only PLATFORMS] [--no-image] | dist image-root`  every release
//!   artifact into `target/dist/` with `SHA256SUMS` (the plugin for Linux, macOS and Windows,
//!   its npm packages, wheels and bundle; the relay's tarballs and images).
//! - `cargo xtask dist check`  builds this machine's Linux and the Windows artifacts and uses
//!   each as people do (npx, uvx, pip, Wine, the image under podman).
//! - `cargo xtask web`  the browser module and the web app into `target/web/`.
//! - `cargo xtask package`  the browser module as an npm package,
//!   `target/npm/sealpost-browser-<version>.tgz`.

mod bench_web;
mod cmd;
mod dist;
mod executor;
mod fuzz;
mod mcpb;
mod msrv;
mod mutants;
mod package;
mod postgres;
mod relay;
mod skips;
mod tools;
mod wasm;
mod web;

use anyhow::{Context as _, Result, bail};

use crate::cmd::{cargo, cmd, step};

const USAGE: &str = "usage: cargo xtask <test [--no-postgres] | run | bench [seal|relay|executor|plugin|browser|web|all] | fuzz [SECONDS] | mutants [seal|relay|all] | tools | postgres | mcpb [--debug] | dist [--only PLATFORMS] [--no-image] | dist image-root | dist check | web | package>";

/// Crates that must build for `wasm32-unknown-unknown` (pure: no I/O, no clock).
const PURE_CRATES: [&str; 5] = [
    "sealpost-time",
    "sealpost-ids",
    "sealpost-seal",
    "sealpost-protocol",
    "sealpost-executor",
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["test"] => test(Postgres::Required),
        ["test", "--no-postgres"] => test(Postgres::Skipped),
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
        ["mutants"] => mutants::run("all"),
        ["mutants", part] => mutants::run(part),
        ["tools"] => tools::ensure_all(true).map(|_| ()),
        ["postgres"] => postgres::check(),
        ["web"] => web::build().map(|_| ()),
        ["package"] => package::build().map(|_| ()),
        ["dist", rest @ ..] => dist::run(rest),
        ["mcpb"] => mcpb::build(true).map(|_| ()),
        ["mcpb", "--debug"] => mcpb::build(false).map(|_| ()),
        _ => bail!("{USAGE}"),
    }
}

/// Whether `cargo xtask test` runs the PostgreSQL tests. Skipping is explicit, never a fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Postgres {
    Required,
    Skipped,
}

fn test(postgres: Postgres) -> Result<()> {
    let tools = tools::ensure_all(postgres == Postgres::Required)?;
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
    // With the benchmarks' surface too (`bench`), which the shipped build leaves out and no
    // other step compiles.
    step("lints of the browser module (wasm32)", || {
        cargo(&[
            "clippy",
            "-p",
            "sealpost-browser",
            "--target",
            "wasm32-unknown-unknown",
            "--features",
            "bench",
            "--",
            "-D",
            "warnings",
        ])
        .run()
    })?;
    step(
        "dependencies: bans, licenses and sources (cargo deny, offline)",
        || {
            // `--offline` also keeps it from fetching the advisory database, which cannot be
            // fetched here; `advisories` is therefore not checked. cargo-deny reads the
            // metadata of every platform's dependencies, and a build downloads only this
            // platform's, so a fresh machine fetches the rest from the registry first.
            cargo(&["fetch", "--locked"]).run()?;
            cmd(
                &tools.cargo_deny,
                &["deny", "--offline", "check", "bans", "licenses", "sources"],
            )
            .run()
        },
    )?;
    let msrv = msrv::rust_version()?;
    step(
        &format!("everything builds with the minimum supported Rust ({msrv})"),
        || msrv::check(&msrv),
    )?;
    step("wasm32 builds of the pure crates", || {
        let mut args = vec!["check", "--target", "wasm32-unknown-unknown"];
        for krate in PURE_CRATES {
            args.extend(["-p", krate]);
        }
        cargo(&args).run()
    })?;
    // Before the native tests: the relay's team sign-in tests run a real OpenID provider
    // (`oidc-provider`, from web/package-lock.json).
    step("the web tests' packages (npm ci)", web::npm_ci)?;
    let skipped = step(
        "native tests (unit, contract on SQLite and PostgreSQL, integration)",
        || native_tests(postgres),
    )?;
    step("the plugin packs as an MCP Bundle", || {
        mcpb::pack_tested().map(|_| ())
    })?;
    step("wasm tests in headless Chromium", || wasm::test(&tools))?;
    step("the browser module and the web app build", || {
        web::build().map(|_| ())
    })?;
    let tarball = step("the browser module packs as an npm package", package::pack)?;
    let web_skipped = step(
        "the web app end to end: Chromium, Firefox ESR, the relay and the real plugin",
        || web::test(&tools, &tarball),
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
    // Last: its release builds are the slowest step, and everything before gives quicker news.
    // The image runs against PostgreSQL, so without it the whole step is left out (and said).
    if postgres == Postgres::Required {
        step(
            "the release artifacts as people use them (cargo xtask dist check)",
            || dist::check(&tools),
        )?;
    }
    let mut skips = Vec::new();
    if web_skipped.total() > 0 {
        skips.push(format!(
            "in the web specs (the browser here lacks what they test):\n{}",
            web_skipped.summary()
        ));
    }
    if postgres == Postgres::Skipped {
        skips.push(format!(
            "--no-postgres:\n{}\n  the release checks (`cargo xtask dist check`: the image \
             runs against PostgreSQL)",
            skipped.summary()
        ));
    }
    if skips.is_empty() {
        eprintln!("\nall suites passed");
    } else {
        eprintln!("\nall suites passed, but SKIPPED {}", skips.join("\nand "));
    }
    Ok(())
}

/// `cargo test --workspace` against a throwaway cluster, or with the PostgreSQL tests told to
/// skip. Returns what skipped; fails when anything skipped that was not asked to.
fn native_tests(postgres: Postgres) -> Result<skips::Skips> {
    let log = cmd::root().join("target").join("xtask").join("skipped.log");
    std::fs::create_dir_all(log.parent().expect("the log has a folder"))?;
    let _ = std::fs::remove_file(&log);
    let tests = cargo(&["test", "--workspace"]).env(skips::LOG_VAR, &log);
    let allowed: &[&str] = match postgres {
        Postgres::Required => {
            let cluster = postgres::TestCluster::start().context(
                "PostgreSQL is needed for the native tests; `cargo xtask test --no-postgres` \
                 skips them (and says so)",
            )?;
            tests
                .env("SEALPOST_TEST_POSTGRES_URL", cluster.url())
                .env_remove("SEALPOST_SKIP_POSTGRES")
                .run_within(cmd::SUITE_DEADLINE)?;
            cluster.stop();
            &[]
        }
        Postgres::Skipped => {
            tests
                .env("SEALPOST_SKIP_POSTGRES", "1")
                .env_remove("SEALPOST_TEST_POSTGRES_URL")
                .run_within(cmd::SUITE_DEADLINE)?;
            &["postgres"]
        }
    };
    let skipped = skips::Skips::read(&log)?;
    let unexpected = skipped.other_than(allowed);
    if unexpected.total() > 0 {
        bail!("tests skipped that must run:\n{}", unexpected.summary());
    }
    eprintln!("skipped: {} tests", skipped.total());
    if skipped.total() > 0 {
        eprintln!("{}", skipped.summary());
    }
    Ok(skipped)
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
