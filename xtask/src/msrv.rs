//! The minimum supported Rust version: `rust-version` in the root Cargo.toml is checked, not
//! just declared. `cargo xtask test` builds every target with exactly that toolchain, in a
//! target folder of its own (`target/msrv`) so the main one is not rebuilt.

use anyhow::{Context as _, Result, bail};

use crate::cmd::{cmd, root};

/// `rust-version` of `[workspace.package]` in the root Cargo.toml.
pub fn rust_version() -> Result<String> {
    let manifest =
        std::fs::read_to_string(root().join("Cargo.toml")).context("reading Cargo.toml")?;
    parse_rust_version(&manifest)
        .context("the root Cargo.toml has no [workspace.package] rust-version")
}

fn parse_rust_version(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[workspace.package]";
            continue;
        }
        if !in_package {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim() == "rust-version" {
            let value = value.split('#').next()?.trim();
            return value
                .strip_prefix('"')?
                .strip_suffix('"')
                .map(str::to_owned);
        }
    }
    None
}

/// Installs the toolchain `rust-version` names, when it is missing.
pub fn ensure_toolchain() -> Result<String> {
    let version = rust_version()?;
    let toolchains = cmd("rustup", &["toolchain", "list"]).read()?;
    let prefix = format!("{version}-");
    if !toolchains.lines().any(|t| t.starts_with(&prefix)) {
        cmd(
            "rustup",
            &["toolchain", "install", &version, "--profile", "minimal"],
        )
        .run()?;
    }
    Ok(version)
}

/// `cargo check --workspace --all-targets` with the minimum toolchain.
pub fn check(version: &str) -> Result<()> {
    if version.is_empty() {
        bail!("empty rust-version");
    }
    let target_dir = root().join("target").join("msrv");
    // `rustup run` rather than `cargo +VERSION`: the `cargo` running xtask may not be rustup's
    // proxy. What the outer cargo put in the environment would point at its own toolchain.
    cmd(
        "rustup",
        &[
            "run",
            version,
            "cargo",
            "check",
            "--workspace",
            "--all-targets",
            "--locked",
            "--target-dir",
        ],
    )
    .arg_path(target_dir)
    .env_remove("CARGO")
    .env_remove("RUSTC")
    .env_remove("RUSTDOC")
    .env_remove("RUSTUP_TOOLCHAIN")
    .run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_version_is_read_from_the_workspace_package_table_only() {
        let manifest = r#"
[workspace]
members = ["crates/*"]

[package]
rust-version = "1.60"

[workspace.package]
version = "0.1.0"
rust-version = "1.94"   # sqlx
license = "Apache-2.0"

[workspace.dependencies]
rust-version = "9.9"
"#;
        assert_eq!(parse_rust_version(manifest).as_deref(), Some("1.94"));
        assert_eq!(
            parse_rust_version("[workspace.package]\nversion = \"1\"\n"),
            None
        );
        assert_eq!(
            parse_rust_version("[package]\nrust-version = \"1.80\"\n"),
            None
        );
    }

    #[test]
    fn the_workspace_declares_a_rust_version() {
        let version = rust_version().unwrap();
        assert!(
            version.split('.').all(|part| part.parse::<u32>().is_ok()),
            "{version:?}"
        );
    }
}
