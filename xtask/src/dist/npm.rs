//! `@sealpost/plugin` for npm, shipped the way esbuild and Biome ship native tools: a small
//! launcher package (`crates/plugin/npm/`) whose optional dependencies are one package per
//! platform, each holding that platform's binary and naming its `os` and `cpu`, so npm installs
//! only the one that fits. `npm pack` makes the tarballs (fixed times, normalised modes).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde_json::json;

use super::targets::{PLUGIN_TARGETS, Target};
use crate::cmd::{cmd, root};
use crate::tools::find_in_path;

pub const LAUNCHER: &str = "@sealpost/plugin";

/// The platform package's name: `@sealpost/plugin-linux-x64`.
pub fn platform_package(target: &Target) -> String {
    format!("{LAUNCHER}-{}", target.short_name())
}

/// `npm pack`'s file name for a package.
pub fn tarball_name(package: &str, version: &str) -> String {
    format!(
        "{}-{version}.tgz",
        package.trim_start_matches('@').replace('/', "-")
    )
}

/// Packs the platform package of `target` holding `binary` into `out`.
pub fn pack_platform(out: &Path, version: &str, target: &Target, binary: &Path) -> Result<PathBuf> {
    let name = platform_package(target);
    let stage = staging(&name)?;
    std::fs::create_dir_all(stage.join("bin"))?;
    let exe = stage.join("bin").join(target.plugin_exe());
    std::fs::copy(binary, &exe)?;
    set_executable(&exe)?;
    let manifest = json!({
        "name": name,
        "version": version,
        "description": format!("The Sealpost plugin for {}: installed by {LAUNCHER}.", target.short_name()),
        "license": "Apache-2.0",
        "os": [target.node_os],
        "cpu": [target.node_cpu],
        "preferUnplugged": true,
        "files": ["bin"],
    });
    std::fs::write(
        stage.join("package.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    pack(&stage, out, &name, version)
}

/// Packs the launcher, whose optional dependencies are every platform package at `version`.
pub fn pack_launcher(out: &Path, version: &str) -> Result<PathBuf> {
    let stage = staging(LAUNCHER)?;
    let source = root().join("crates/plugin/npm");
    std::fs::create_dir_all(stage.join("bin"))?;
    std::fs::copy(
        source.join("bin/sealpost.js"),
        stage.join("bin/sealpost.js"),
    )?;
    set_executable(&stage.join("bin/sealpost.js"))?;
    std::fs::copy(source.join("README.md"), stage.join("README.md"))?;
    let optional: serde_json::Map<String, serde_json::Value> = PLUGIN_TARGETS
        .iter()
        .map(|t| (platform_package(t), json!(version)))
        .collect();
    let manifest = json!({
        "name": LAUNCHER,
        "version": version,
        "description": "Sealpost's local plugin: an MCP stdio server that seals every tool call to the paired browser tab. `npx -y @sealpost/plugin mcp`.",
        "license": "Apache-2.0",
        "keywords": ["mcp", "model-context-protocol", "end-to-end-encryption"],
        "bin": {"sealpost": "bin/sealpost.js"},
        "files": ["bin", "README.md"],
        "engines": {"node": ">=18"},
        "optionalDependencies": optional,
    });
    std::fs::write(
        stage.join("package.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    pack(&stage, out, LAUNCHER, version)
}

/// A package's folder before `npm pack`, beside `target/dist/` rather than in it: only what
/// a release uploads goes there.
fn staging(package: &str) -> Result<PathBuf> {
    let stage = crate::cmd::root()
        .join("target/npm-staging")
        .join(package.trim_start_matches('@').replace('/', "-"));
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage)?;
    Ok(stage)
}

fn pack(stage: &Path, out: &Path, package: &str, version: &str) -> Result<PathBuf> {
    let npm = find_in_path("npm")
        .context("npm is not installed: run `apt-get install -y nodejs npm` (as root)")?;
    cmd(npm, &["pack", "--silent", "--pack-destination"])
        .arg_path(out)
        .dir(stage)
        .read()?;
    let tarball = out.join(tarball_name(package, version));
    anyhow::ensure!(tarball.is_file(), "npm pack made no {}", tarball.display());
    std::fs::remove_dir_all(stage)?;
    Ok(tarball)
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_are_named_as_npm_files_them() {
        assert_eq!(
            platform_package(&PLUGIN_TARGETS[4]),
            "@sealpost/plugin-win32-x64"
        );
        assert_eq!(tarball_name(LAUNCHER, "0.1.0"), "sealpost-plugin-0.1.0.tgz");
        assert_eq!(
            tarball_name("@sealpost/plugin-darwin-arm64", "0.1.0"),
            "sealpost-plugin-darwin-arm64-0.1.0.tgz"
        );
    }
}
