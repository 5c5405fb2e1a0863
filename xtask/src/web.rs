//! Builds what the relay serves at `/`: the browser module (`crates/browser`, wasm-bindgen
//! `--target web`, then binaryen's `wasm-opt -Oz`) and the web app (`web/`), into `target/web/`.
//! The module and its JavaScript (`crates/browser/js`: `sealpost.js`, `auth.js`, their `.d.ts`,
//! `worker.js`, `store.js`) land in `target/web/sealpost/`.
//!
//! `wasm-opt` comes from npm (`binaryen`, pinned in `web/package-lock.json`), not from Debian:
//! Debian's binaryen 108 predates wasm-bindgen's reference-types output and emits a module
//! whose function table Chromium rejects.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::cmd::{SUITE_DEADLINE, cargo, cmd, root};
use crate::skips;
use crate::tools::{self, find_in_path};

/// Installs `web/`'s pinned packages (playwright-core, axe-core, binaryen, oidc-provider) when
/// missing, or older than the lockfile.
pub fn npm_ci() -> Result<()> {
    let web = root().join("web");
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    if let (Some(installed), Some(locked)) = (
        modified(web.join("node_modules/.package-lock.json")),
        modified(web.join("package-lock.json")),
    ) && installed >= locked
    {
        return Ok(());
    }
    let npm = find_in_path("npm")
        .context("npm is not installed: run `apt-get install -y nodejs npm` (as root)")?;
    cmd(npm, &["ci", "--no-audit", "--no-fund"]).dir(&web).run()
}

/// Where the built app goes (the relay's `--web`).
pub fn out_dir() -> PathBuf {
    root().join("target/web")
}

fn copy_dir(from: &Path, to: &Path, skip: &[&str]) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if skip.contains(&name.as_ref()) || name.starts_with('.') {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target, skip)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn gzip_len(bytes: &[u8]) -> Result<usize> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes)?;
    Ok(encoder.finish()?.len())
}

/// Sizes of the module, for the build's report.
#[derive(Debug)]
pub struct Built {
    pub wasm_bytes: usize,
    pub wasm_gzip_bytes: usize,
    pub optimised: bool,
}

/// Builds the module and the app into [`out_dir`].
pub fn build() -> Result<Built> {
    build_with(&[])
}

/// [`build`], with the browser module's `features` (`bench` for the benchmarks).
pub fn build_with(features: &[&str]) -> Result<Built> {
    let bindgen = tools::ensure_wasm_bindgen()?;
    let features = features.join(",");
    cargo(&[
        "build",
        "-p",
        "sealpost-browser",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        "wasm",
        "--features",
        &features,
    ])
    .run()?;
    let out = out_dir();
    let _ = std::fs::remove_dir_all(&out);
    let module = out.join("sealpost");
    let pkg = module.join("pkg");
    let optimised = bound_and_optimised(&bindgen)?;
    copy_dir(&pkg_cache(), &pkg, &[STAMP])?;
    let bg = pkg.join("sealpost_browser_bg.wasm");
    copy_dir(&root().join("crates/browser/js"), &module, &[])?;
    let app = root().join("web");
    if app.is_dir() {
        copy_dir(
            &app,
            &out,
            &[
                "tests",
                "bench",
                "node_modules",
                "package.json",
                "package-lock.json",
            ],
        )?;
    }
    let bytes = std::fs::read(&bg)?;
    let built = Built {
        wasm_bytes: bytes.len(),
        wasm_gzip_bytes: gzip_len(&bytes)?,
        optimised,
    };
    eprintln!(
        "browser module: {} KiB, {} KiB gzipped{} (target ≤ 600 KiB gzipped); app in {}",
        built.wasm_bytes / 1024,
        built.wasm_gzip_bytes / 1024,
        if built.optimised {
            " after wasm-opt -Oz"
        } else {
            ""
        },
        out.display()
    );
    Ok(built)
}

/// Where the bound and optimised module is kept between builds, with a stamp of the wasm it
/// came from: `wasm-bindgen` and `wasm-opt -Oz` take a while, and most runs
/// (`cargo xtask run`, the specs) find the module unchanged.
fn pkg_cache() -> PathBuf {
    root().join("target/web-pkg")
}
const STAMP: &str = ".built-from";

/// Binds (wasm-bindgen) and optimises (wasm-opt, when installed) the browser module into
/// [`pkg_cache`], unless it already holds this very build. Answers whether it is optimised.
fn bound_and_optimised(bindgen: &Path) -> Result<bool> {
    let wasm = root().join("target/wasm32-unknown-unknown/wasm/sealpost_browser.wasm");
    npm_ci()?;
    let wasm_opt = root().join("web/node_modules/.bin/wasm-opt");
    let optimised = wasm_opt.exists();
    let meta = std::fs::metadata(&wasm).with_context(|| format!("read {}", wasm.display()))?;
    let modified = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let stamp = format!(
        "{} bytes, modified {modified}, optimised {optimised}",
        meta.len()
    );
    let cache = pkg_cache();
    if std::fs::read_to_string(cache.join(STAMP)).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(optimised);
    }
    let _ = std::fs::remove_dir_all(&cache);
    cmd(bindgen, &["--target", "web", "--out-dir"])
        .arg_path(&cache)
        .arg_path(&wasm)
        .run()?;
    let bg = cache.join("sealpost_browser_bg.wasm");
    if optimised {
        cmd(
            wasm_opt,
            &[
                "-Oz",
                "--enable-bulk-memory",
                "--enable-sign-ext",
                "--enable-mutable-globals",
                "--enable-nontrapping-float-to-int",
                "--enable-reference-types",
                "--enable-multivalue",
                "-o",
            ],
        )
        .arg_path(&bg)
        .arg_path(&bg)
        .run()?;
    } else {
        eprintln!(
            "wasm-opt not found (apt-get install binaryen): the module is not size-optimised"
        );
    }
    std::fs::write(cache.join(STAMP), stamp)?;
    Ok(optimised)
}

/// The specs in `web/tests/`: Debian's Chromium through playwright-core against a relay they
/// start on the built app, with the real `sealpost` plugin. Screenshots go to
/// `target/screenshots/`. First, `tsc` checks the typed host-app example (`web/tests/typed/`).
/// `npm_tarball` is the packed module (`cargo xtask package`), which `package.spec.mjs`
/// installs into `examples/host-app/` and builds with Vite.
/// Answers what the specs skipped (`SKIPPED:` lines, as the native tests write them): a spec
/// that needs what this browser lacks says so, and the run's summary repeats it.
pub fn test(tools: &tools::Tools, npm_tarball: &Path) -> Result<skips::Skips> {
    npm_ci()?;
    let debug = root().join("target/debug");
    // The native step has just built both binaries; building them alone would rebuild their
    // dependencies without the test-only features. So in `cargo xtask test` the web suite runs
    // the relay's test build, which also turns an undocumented error into a 500 naming it
    // (`documented-errors`); the shipped build differs from it in nothing else.
    if !debug.join("sealpost").exists() || !debug.join("sealpost-relay").exists() {
        cargo(&["build", "-p", "sealpost", "-p", "sealpost-relay"]).run()?;
    }
    let node = find_in_path("node")
        .context("Node.js is not installed: run `apt-get install -y nodejs npm` (as root)")?;
    // The typed host-app example against the declarations the build shipped.
    cmd(
        &node,
        &["node_modules/typescript/bin/tsc", "-p", "tests/typed"],
    )
    .dir(root().join("web"))
    .run()?;
    let args = node_test_args("tests")?;
    let log = root().join("target/xtask/web-skipped.log");
    std::fs::create_dir_all(log.parent().expect("the log has a folder"))?;
    let _ = std::fs::remove_file(&log);
    cmd(node, &args.iter().map(String::as_str).collect::<Vec<_>>())
        .dir(root().join("web"))
        .env("SEALPOST_RELAY_BIN", debug.join("sealpost-relay"))
        .env("SEALPOST_BIN", debug.join("sealpost"))
        .env("SEALPOST_WEB_DIR", out_dir())
        .env("SEALPOST_CHROMIUM", &tools.chromium)
        .env("SEALPOST_FIREFOX", &tools.firefox)
        .env("SEALPOST_NPM_TARBALL", npm_tarball)
        .env(skips::LOG_VAR, &log)
        .run_within(SUITE_DEADLINE)?;
    skips::Skips::read(&log)
}

/// `node --test` over every `*.spec.mjs` directly in `web/FOLDER`, one file at a time. A test
/// that hangs fails on its own after five minutes and names itself, rather than using up the
/// suite's deadline unnamed.
pub fn node_test_args(folder: &str) -> Result<Vec<String>> {
    let mut args: Vec<String> = ["--test", "--test-concurrency=1", "--test-timeout=300000"]
        .map(String::from)
        .to_vec();
    for entry in std::fs::read_dir(root().join("web").join(folder))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".spec.mjs") {
            args.push(format!("{folder}/{name}"));
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::copy_dir;
    use crate::cmd::root;

    /// A host app serves the module's folder as the build writes it: the page's API and its
    /// sign-in helpers side by side, with their declarations (docs/HOST.md).
    #[test]
    fn the_module_folder_carries_the_page_api_and_the_sign_in_helpers() {
        let to = std::env::temp_dir().join(format!("sealpost-module-{}", std::process::id()));
        copy_dir(&root().join("crates/browser/js"), &to, &[]).unwrap();
        for file in [
            "sealpost.js",
            "sealpost.d.ts",
            "auth.js",
            "auth.d.ts",
            "worker.js",
            "store.js",
        ] {
            assert!(to.join(file).is_file(), "{file} is not beside sealpost.js");
        }
        std::fs::remove_dir_all(&to).unwrap();
    }
}
