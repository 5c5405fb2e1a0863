//! `cargo xtask mcpb`: the plugin as an MCP Bundle (`.mcpb`, manifest 0.3), for people who
//! install it into Claude Desktop without a terminal.
//!
//! The bundle is a zip: `manifest.json` and `server/sealpost` with its execute bit kept (zip
//! stores Unix modes in the external attributes). `compatibility.platforms` names only the
//! platform the binary was built for. The bundle's `user_config` asks for the pairing code
//! (`sensitive`) and passes it as `SEALPOST_PAIRING_CODE`, from which `sealpost mcp` pairs on
//! its first start.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};
use zip::write::SimpleFileOptions;

use crate::cmd::{cargo, root};

/// The plugin's version (the workspace shares one).
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Where the binary sits inside the bundle.
const ENTRY_POINT: &str = "server/sealpost";

/// This machine's platform as MCPB names it.
pub fn platform() -> Result<&'static str> {
    Ok(match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        "windows" => "win32",
        other => bail!("MCP Bundles do not name the platform {other}"),
    })
}

/// The bundle's manifest for a binary built for `platform`.
pub fn manifest(version: &str, platform: &str) -> Value {
    json!({
        "manifest_version": "0.3",
        "name": "sealpost",
        "display_name": "Sealpost",
        "version": version,
        "description": "Call the tools of your Sealpost browser tab: your documents stay in the tab, the relay sees only ciphertext.",
        "author": {"name": "Sealpost"},
        "license": "Apache-2.0",
        "server": {
            "type": "binary",
            "entry_point": ENTRY_POINT,
            "mcp_config": {
                "command": format!("${{__dirname}}/{ENTRY_POINT}"),
                "args": ["mcp"],
                "env": {"SEALPOST_PAIRING_CODE": "${user_config.pairing_code}"}
            }
        },
        "tools_generated": true,
        "compatibility": {"platforms": [platform]},
        "user_config": {
            "pairing_code": {
                "type": "string",
                "title": "Pairing code",
                "description": "The code the Sealpost tab shows under AI access (one line starting with sppair1_). Leave empty if you paired with `sealpost pair`.",
                "sensitive": true,
                "required": false
            }
        }
    })
}

/// Writes the bundle for `binary` to `out`.
pub fn package(binary: &Path, version: &str, platform: &str, out: &Path) -> Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut zip =
        zip::ZipWriter::new(File::create(out).with_context(|| out.display().to_string())?);
    let manifest = serde_json::to_vec_pretty(&manifest(version, platform))?;
    zip.start_file(
        "manifest.json",
        SimpleFileOptions::default().unix_permissions(0o644),
    )?;
    zip.write_all(&manifest)?;
    let mut bytes = Vec::new();
    File::open(binary)
        .with_context(|| format!("open {}", binary.display()))?
        .read_to_end(&mut bytes)?;
    zip.start_file(
        ENTRY_POINT,
        SimpleFileOptions::default().unix_permissions(0o755),
    )?;
    zip.write_all(&bytes)?;
    zip.finish()?;
    Ok(())
}

/// Reads a bundle back and checks what a host relies on: the manifest's fields and the
/// binary's execute bit.
pub fn verify(bundle: &Path, platform: &str) -> Result<()> {
    let mut zip = zip::ZipArchive::new(File::open(bundle)?)?;
    let manifest: Value = {
        let mut file = zip.by_name("manifest.json")?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        serde_json::from_str(&text)?
    };
    ensure!(manifest["manifest_version"] == "0.3", "manifest_version");
    ensure!(manifest["server"]["type"] == "binary", "server.type");
    ensure!(manifest["tools_generated"] == true, "tools_generated");
    ensure!(
        manifest["compatibility"]["platforms"] == json!([platform]),
        "compatibility.platforms names only {platform}"
    );
    let field = &manifest["user_config"]["pairing_code"];
    ensure!(field["sensitive"] == true, "the pairing code is sensitive");
    ensure!(
        manifest["server"]["mcp_config"]["env"]["SEALPOST_PAIRING_CODE"]
            == "${user_config.pairing_code}",
        "the pairing code reaches the plugin"
    );
    let binary = zip.by_name(ENTRY_POINT)?;
    let mode = binary.unix_mode().context("the binary has a Unix mode")?;
    ensure!(mode & 0o111 == 0o111, "the binary is executable ({mode:o})");
    Ok(())
}

/// The bundle's path for this version and platform.
pub fn bundle_path(platform: &str) -> PathBuf {
    root().join("target/mcpb").join(format!(
        "sealpost-{VERSION}-{platform}-{}.mcpb",
        std::env::consts::ARCH
    ))
}

/// `cargo xtask mcpb [--debug]`: builds the plugin and packs it.
pub fn build(release: bool) -> Result<PathBuf> {
    let mut args = vec!["build", "-p", "sealpost", "--bin", "sealpost"];
    if release {
        args.push("--release");
    }
    cargo(&args).run()?;
    let profile = if release { "release" } else { "debug" };
    pack(&root().join("target").join(profile).join("sealpost"))
}

/// Packs the debug binary `cargo xtask test`'s native step has just built (building it
/// alone would rebuild its dependencies without the test-only features).
pub fn pack_tested() -> Result<PathBuf> {
    let binary = root().join("target/debug/sealpost");
    if !binary.exists() {
        return build(false);
    }
    pack(&binary)
}

fn pack(binary: &Path) -> Result<PathBuf> {
    let mode = std::fs::metadata(binary)?.permissions().mode();
    ensure!(mode & 0o111 != 0, "{} is not executable", binary.display());
    let platform = platform()?;
    let out = bundle_path(platform);
    package(binary, VERSION, platform, &out)?;
    verify(&out, platform)?;
    eprintln!("wrote {}", out.display());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_keeps_the_manifest_fields_and_the_execute_bit() {
        let dir = std::env::temp_dir().join(format!("sealpost-mcpb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let binary = dir.join("sealpost");
        std::fs::write(&binary, b"#!/bin/sh\necho sealpost\n").unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = dir.join("out.mcpb");
        package(&binary, "1.2.3", "linux", &out).unwrap();
        verify(&out, "linux").unwrap();
        assert!(verify(&out, "darwin").is_err(), "only the built platform");
        let mut zip = zip::ZipArchive::new(File::open(&out).unwrap()).unwrap();
        let mut text = String::new();
        zip.by_name("manifest.json")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let manifest: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(manifest["version"], "1.2.3");
        assert_eq!(manifest["server"]["mcp_config"]["args"], json!(["mcp"]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
