//! Prerequisites: installs what can be installed without root-level package changes (the wasm
//! target, the toolchain `rust-version` names, wasm-bindgen-cli pinned to Cargo.lock,
//! cargo-fuzz, cargo-deny; cargo-mutants when `cargo xtask mutants` first runs) and names the
//! command for what cannot (Chromium, ChromeDriver, Firefox ESR, PostgreSQL, the nightly
//! toolchain).
//!
//! Cargo-installed tools go to a cache outside the checkout (`$SEALPOST_TOOLS_DIR`, default
//! `~/.cache/sealpost`) so fresh clones of the repository reuse them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::{cargo, cmd, root, step};

/// What the suites need, located.
#[derive(Debug)]
pub struct Tools {
    pub wasm_bindgen_test_runner: PathBuf,
    pub chromedriver: PathBuf,
    pub chromium: PathBuf,
    /// The web specs run the app and the WebMCP bridge in Firefox too; without it the suite
    /// fails here rather than passing on Chromium alone.
    pub firefox: PathBuf,
    pub cargo_fuzz: PathBuf,
    pub cargo_deny: PathBuf,
    /// A Python with PyNaCl, for the independent implementation of the protocol.
    pub python: PathBuf,
}

/// `postgres`: whether PostgreSQL must be installed (`cargo xtask test --no-postgres` does not
/// need it).
pub fn ensure_all(postgres: bool) -> Result<Tools> {
    step("prerequisites", || {
        ensure_wasm_target()?;
        ensure_nightly()?;
        crate::msrv::ensure_toolchain()?;
        let chromedriver = require_system_binary(
            "chromedriver",
            "apt-get install -y chromium chromium-driver",
        )?;
        let chromium =
            require_system_binary("chromium", "apt-get install -y chromium chromium-driver")?;
        let firefox = require_system_binary("firefox-esr", "apt-get install -y firefox-esr")?;
        require_system_binary("node", "apt-get install -y nodejs npm")?;
        require_system_binary("npm", "apt-get install -y nodejs npm")?;
        if postgres {
            require_postgres()?;
        }
        let wasm_bindgen_test_runner = ensure_wasm_bindgen_cli()?;
        let cargo_fuzz = ensure_cargo_fuzz()?;
        let cargo_deny = ensure_cargo_deny()?;
        let python = ensure_python_with_pynacl()?;
        Ok(Tools {
            wasm_bindgen_test_runner,
            chromedriver,
            chromium,
            firefox,
            cargo_fuzz,
            cargo_deny,
            python,
        })
    })
}

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SEALPOST_TOOLS_DIR") {
        return dir.into();
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".tools"));
    home.join(".cache").join("sealpost")
}

fn ensure_wasm_target() -> Result<()> {
    let installed = cmd("rustup", &["target", "list", "--installed"]).read()?;
    if !installed
        .lines()
        .any(|t| t.trim() == "wasm32-unknown-unknown")
    {
        cmd("rustup", &["target", "add", "wasm32-unknown-unknown"]).run()?;
    }
    Ok(())
}

fn ensure_nightly() -> Result<()> {
    let toolchains = cmd("rustup", &["toolchain", "list"]).read()?;
    if !toolchains.lines().any(|t| t.starts_with("nightly")) {
        bail!(
            "the nightly toolchain (for cargo fuzz) is missing: run `rustup toolchain install nightly`"
        );
    }
    Ok(())
}

fn require_system_binary(name: &str, install: &str) -> Result<PathBuf> {
    find_in_path(name)
        .with_context(|| format!("`{name}` is not installed: run `{install}` (as root)"))
}

fn require_postgres() -> Result<()> {
    let bindir = cmd("pg_config", &["--bindir"]).read().context(
        "PostgreSQL is not installed: run `apt-get install -y postgresql` (as root), or \
             `cargo xtask test --no-postgres` to skip its tests",
    )?;
    for tool in ["initdb", "pg_ctl", "postgres"] {
        if !Path::new(bindir.trim()).join(tool).exists() {
            bail!(
                "PostgreSQL's `{tool}` is missing from {}: run `apt-get install -y postgresql`",
                bindir.trim()
            );
        }
    }
    Ok(())
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// The `wasm-bindgen` version in Cargo.lock: the CLI must match it exactly.
fn locked_wasm_bindgen_version() -> Result<String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).context("reading Cargo.lock")?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == "name = \"wasm-bindgen\"" {
            let version = lines
                .next()
                .and_then(|l| l.strip_prefix("version = \"")?.strip_suffix('"'));
            return version
                .map(str::to_owned)
                .context("Cargo.lock has no version for wasm-bindgen");
        }
    }
    bail!("Cargo.lock does not name wasm-bindgen: build a wasm crate first")
}

/// `wasm-bindgen` itself (same install as the test runner).
pub fn ensure_wasm_bindgen() -> Result<PathBuf> {
    let runner = ensure_wasm_bindgen_cli()?;
    Ok(runner.with_file_name("wasm-bindgen"))
}

fn ensure_wasm_bindgen_cli() -> Result<PathBuf> {
    let version = locked_wasm_bindgen_version()?;
    let install_root = cache_dir().join(format!("wasm-bindgen-{version}"));
    let runner = install_root.join("bin").join("wasm-bindgen-test-runner");
    if !runner.exists() {
        eprintln!(
            "installing wasm-bindgen-cli {version} into {} (takes a few minutes once)",
            install_root.display()
        );
        // Not `--locked`: the CLI's own lock file can name a patch release the registry mirror
        // lacks; the version of the CLI itself is still pinned exactly.
        cargo(&[
            "install",
            "wasm-bindgen-cli",
            "--version",
            &format!("={version}"),
            "--root",
        ])
        .arg_path(&install_root)
        .run()?;
    }
    Ok(runner)
}

fn ensure_cargo_fuzz() -> Result<PathBuf> {
    if let Some(path) = find_in_path("cargo-fuzz") {
        return Ok(path);
    }
    let install_root = cache_dir().join("cargo-fuzz");
    let binary = install_root.join("bin").join("cargo-fuzz");
    if !binary.exists() {
        eprintln!("installing cargo-fuzz into {}", install_root.display());
        cargo(&["install", "cargo-fuzz", "--root"])
            .arg_path(&install_root)
            .run()?;
    }
    Ok(binary)
}

/// cargo-deny, for `cargo deny check bans licenses sources` (deny.toml).
const CARGO_DENY_VERSION: &str = "0.20.2";
/// cargo-mutants, for `cargo xtask mutants`.
const CARGO_MUTANTS_VERSION: &str = "27.1.0";

fn ensure_cargo_deny() -> Result<PathBuf> {
    ensure_pinned("cargo-deny", CARGO_DENY_VERSION, "cargo-deny")
}

pub fn ensure_cargo_mutants() -> Result<PathBuf> {
    ensure_pinned("cargo-mutants", CARGO_MUTANTS_VERSION, "cargo-mutants")
}

/// A cargo-installed tool at an exact version with its own lock file, in a folder of the cache
/// named by both, so bumping the version installs beside the old one instead of over it.
fn ensure_pinned(krate: &str, version: &str, binary: &str) -> Result<PathBuf> {
    let install_root = cache_dir().join(format!("{krate}-{version}"));
    let path = install_root.join("bin").join(binary);
    if !path.exists() {
        eprintln!(
            "installing {krate} {version} into {} (takes a few minutes once)",
            install_root.display()
        );
        cargo(&[
            "install",
            krate,
            "--version",
            &format!("={version}"),
            "--locked",
            "--root",
        ])
        .arg_path(&install_root)
        .run()?;
    }
    Ok(path)
}

/// PyNaCl version the second implementation is checked with.
const PYNACL_VERSION: &str = "1.6.2";

fn ensure_python_with_pynacl() -> Result<PathBuf> {
    let venv = cache_dir().join(format!("python-pynacl-{PYNACL_VERSION}"));
    let python = venv.join("bin").join("python3");
    if !python.exists() {
        let system_python =
            require_system_binary("python3", "apt-get install -y python3 python3-venv")?;
        cmd(&system_python, &["-m", "venv"]).arg_path(&venv).run()?;
    }
    // Checked by import, not by a file, so an install interrupted half-way is repaired.
    if cmd(&python, &["-c", "import nacl.bindings"])
        .read()
        .is_err()
    {
        let pip = venv.join("bin").join("pip");
        cmd(
            pip,
            &["install", "--quiet", &format!("pynacl=={PYNACL_VERSION}")],
        )
        .run()?;
    }
    Ok(python)
}
