//! The browser benchmarks, in headless Chromium against a release relay on loopback:
//!
//! - `cargo xtask bench browser`: the module's search (beside MiniSearch on the same corpus
//!   and queries, same run), the executor's claimed-envelope to reply time, and the tab's
//!   memory after indexing (`web/bench/browser.mjs`, page `web/bench/browser.html`).
//! - `cargo xtask bench web`: MCP client → the `sealpost` plugin → the relay → the web app's
//!   tab → back, beside bare HTTP round trips to the same relay (`web/bench/web.mjs`).
//!
//! The corpus and queries are the executor benchmark's own (`crates/executor/benches`, which
//! writes them as JSON when `SEALPOST_BENCH_CORPUS` names a file), so the figures compare.
//! The relay serves `target/bench-web/`: the built app plus `bench/` (the page, MiniSearch
//! from `web/node_modules`, the corpus). The app's own build (`target/web/`) carries none of it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::cmd::{cargo, cmd, root, step};
use crate::tools::find_in_path;

fn out_dir() -> PathBuf {
    root().join("target/bench-web")
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Builds the app, generates the corpus and assembles what the relay serves; answers the
/// corpus file.
fn assemble() -> Result<PathBuf> {
    crate::web::build_with(&["bench"])?;
    let out = out_dir();
    let _ = std::fs::remove_dir_all(&out);
    copy_dir(&crate::web::out_dir(), &out)?;
    let bench = out.join("bench");
    std::fs::create_dir_all(&bench)?;
    for page in ["browser.html", "browser.js"] {
        std::fs::copy(root().join("web/bench").join(page), bench.join(page))?;
    }
    std::fs::copy(
        root().join("web/node_modules/minisearch/dist/es/index.js"),
        bench.join("minisearch.js"),
    )
    .context("MiniSearch is missing from web/node_modules")?;
    let corpus = bench.join("corpus.json");
    step("generate the executor benchmark's corpus", || {
        cargo(&["bench", "-p", "sealpost-executor", "--bench", "executor"])
            .env("SEALPOST_BENCH_CORPUS", &corpus)
            .run()
    })?;
    Ok(corpus)
}

fn release_binaries() -> Result<PathBuf> {
    cargo(&[
        "build",
        "--release",
        "-p",
        "sealpost",
        "-p",
        "sealpost-relay",
    ])
    .run()?;
    Ok(root().join("target/release"))
}

/// Runs a bench script; `postgres` is a cluster's URL for the loop on PostgreSQL.
fn node(script: &str, corpus: &Path, release: &Path, postgres: Option<&str>) -> Result<()> {
    let node = find_in_path("node")
        .context("Node.js is not installed: run `apt-get install -y nodejs npm` (as root)")?;
    let chromium = find_in_path("chromium")
        .context("Chromium is not installed: run `apt-get install -y chromium` (as root)")?;
    let mut command = cmd(node, &[script]);
    if let Some(url) = postgres {
        command = command.env("SEALPOST_BENCH_POSTGRES_URL", url);
    }
    command
        .dir(root().join("web"))
        .env("SEALPOST_RELAY_BIN", release.join("sealpost-relay"))
        .env("SEALPOST_BIN", release.join("sealpost"))
        .env("SEALPOST_WEB_DIR", out_dir())
        .env("SEALPOST_CHROMIUM", chromium)
        .env("SEALPOST_BENCH_CORPUS", corpus)
        .run()
}

pub fn browser() -> Result<()> {
    let corpus = assemble()?;
    let release = release_binaries()?;
    step("bench browser", || {
        node("bench/browser.mjs", &corpus, &release, None)
    })
}

/// The loop on SQLite, and on a throwaway PostgreSQL cluster when one starts here (the bench
/// says so when it does not).
pub fn web() -> Result<()> {
    let corpus = assemble()?;
    let release = release_binaries()?;
    let cluster = crate::postgres::TestCluster::start()
        .inspect_err(|error| eprintln!("the loop on PostgreSQL is not measured: {error:#}"))
        .ok();
    let postgres = cluster.as_ref().map(|c| c.url());
    step("bench web", || {
        node("bench/web.mjs", &corpus, &release, postgres.as_deref())
    })
}
