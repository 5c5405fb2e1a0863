//! MCP Bundles (`.mcpb`, manifest 0.3): the plugin for people who install it into Claude
//! Desktop without a terminal. `cargo xtask mcpb` packs this machine's build; `cargo xtask
//! dist` packs one bundle with every platform's binary.
//!
//! The bundle is a zip: `manifest.json` and each platform's binaries under `server/PLATFORM/`
//! with their execute bit kept (zip stores Unix modes in the external attributes). The
//! manifest's command is the first platform's; `platform_overrides` gives every other its own.
//! MCPB names platforms, not architectures: macOS gets one universal binary, and Linux a small
//! `sh` launcher that starts the binary for `uname -m`. `compatibility.platforms` names only
//! the platforms the bundle carries. Its `user_config` asks for the pairing code (`sensitive`)
//! and passes it as `SEALPOST_PAIRING_CODE`, from which `sealpost mcp` pairs on its first start.

use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::cmd::{cargo, root};
use crate::dist::archive::{self, Entry};

/// The plugin's version (the workspace shares one).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// This machine's platform as MCPB names it.
pub fn platform() -> Result<&'static str> {
    Ok(match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        "windows" => "win32",
        other => bail!("MCP Bundles do not name the platform {other}"),
    })
}

/// One platform a bundle carries: its MCPB name, the files under `server/PLATFORM/`, and
/// which of them the host starts.
#[derive(Debug)]
pub struct Platform {
    pub name: &'static str,
    pub files: Vec<Entry>,
    pub command: String,
}

impl Platform {
    /// A platform served by one binary.
    pub fn binary(name: &'static str, file_name: &str, bytes: Vec<u8>) -> Self {
        Self {
            name,
            files: vec![Entry::executable(
                format!("server/{name}/{file_name}"),
                bytes,
            )],
            command: format!("server/{name}/{file_name}"),
        }
    }

    /// Linux on several architectures: `(uname -m, binary)` pairs behind an `sh` launcher.
    pub fn linux_by_arch(binaries: Vec<(&str, Vec<u8>)>) -> Self {
        let mut files = vec![Entry::executable("server/linux/sealpost", LINUX_LAUNCHER)];
        for (arch, bytes) in binaries {
            files.push(Entry::executable(
                format!("server/linux/sealpost-{arch}"),
                bytes,
            ));
        }
        Self {
            name: "linux",
            files,
            command: "server/linux/sealpost".into(),
        }
    }
}

/// Starts the Linux binary for this machine's architecture (`arm64` is how some systems
/// spell `aarch64`).
const LINUX_LAUNCHER: &str = r#"#!/bin/sh
arch=$(uname -m)
[ "$arch" = arm64 ] && arch=aarch64
here=$(dirname "$0")
[ -x "$here/sealpost-$arch" ] || { echo "sealpost: this bundle has no Linux binary for $arch" >&2; exit 1; }
exec "$here/sealpost-$arch" "$@"
"#;

/// The bundle's manifest for `platforms` (at least one; the first is the default command).
pub fn manifest(version: &str, platforms: &[Platform]) -> Value {
    let config =
        |platform: &Platform| json!({"command": format!("${{__dirname}}/{}", platform.command)});
    let mut mcp_config = json!({
        "command": config(&platforms[0])["command"],
        "args": ["mcp"],
        "env": {"SEALPOST_PAIRING_CODE": "${user_config.pairing_code}"}
    });
    if platforms.len() > 1 {
        let overrides: serde_json::Map<String, Value> = platforms[1..]
            .iter()
            .map(|p| (p.name.to_owned(), config(p)))
            .collect();
        mcp_config["platform_overrides"] = Value::Object(overrides);
    }
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
            "entry_point": platforms[0].command,
            "mcp_config": mcp_config,
        },
        "tools_generated": true,
        "compatibility": {"platforms": platforms.iter().map(|p| p.name).collect::<Vec<_>>()},
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

/// Writes the bundle of `platforms` to `out`.
pub fn package(out: &Path, version: &str, platforms: Vec<Platform>) -> Result<()> {
    ensure!(
        !platforms.is_empty(),
        "a bundle carries at least one platform"
    );
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let manifest = serde_json::to_vec_pretty(&manifest(version, &platforms))?;
    let mut entries = vec![Entry::file("manifest.json", manifest)];
    entries.extend(platforms.into_iter().flat_map(|p| p.files));
    archive::zip(out, &entries)
}

/// Reads a bundle back and checks what a host relies on: the manifest's fields, exactly
/// `platforms`, and each platform's command present and executable.
pub fn verify(bundle: &Path, platforms: &[&str]) -> Result<Value> {
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
        manifest["compatibility"]["platforms"] == json!(platforms),
        "compatibility.platforms names exactly {platforms:?}"
    );
    let field = &manifest["user_config"]["pairing_code"];
    ensure!(field["sensitive"] == true, "the pairing code is sensitive");
    let config = &manifest["server"]["mcp_config"];
    ensure!(
        config["env"]["SEALPOST_PAIRING_CODE"] == "${user_config.pairing_code}",
        "the pairing code reaches the plugin"
    );
    for (i, platform) in platforms.iter().enumerate() {
        let command = if i == 0 {
            &config["command"]
        } else {
            &config["platform_overrides"][platform]["command"]
        };
        let path = command
            .as_str()
            .and_then(|c| c.strip_prefix("${__dirname}/"))
            .with_context(|| format!("{platform} has a command in the bundle"))?;
        let file = zip
            .by_name(path)
            .with_context(|| format!("{platform}'s command {path}"))?;
        let mode = file.unix_mode().context("the binary has a Unix mode")?;
        ensure!(mode & 0o111 == 0o111, "{path} is executable ({mode:o})");
    }
    Ok(manifest)
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
    let bytes = std::fs::read(binary)?;
    package(
        &out,
        VERSION,
        vec![Platform::binary(platform, "sealpost", bytes)],
    )?;
    verify(&out, &[platform])?;
    eprintln!("wrote {}", out.display());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sealpost-mcpb-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("out.mcpb")
    }

    #[test]
    fn a_bundle_keeps_the_manifest_fields_and_the_execute_bit() {
        let out = temp("one");
        package(
            &out,
            "1.2.3",
            vec![Platform::binary("linux", "sealpost", b"\x7fELF".to_vec())],
        )
        .unwrap();
        let manifest = verify(&out, &["linux"]).unwrap();
        assert!(
            verify(&out, &["darwin"]).is_err(),
            "only the built platform"
        );
        assert_eq!(manifest["version"], "1.2.3");
        assert_eq!(manifest["server"]["mcp_config"]["args"], json!(["mcp"]));
        assert!(manifest["server"]["mcp_config"]["platform_overrides"].is_null());
    }

    #[test]
    fn every_platform_of_a_bundle_starts_its_own_binary() {
        let out = temp("all");
        package(
            &out,
            "1.2.3",
            vec![
                Platform::binary("darwin", "sealpost", b"\xcf\xfa\xed\xfe".to_vec()),
                Platform::binary("win32", "sealpost.exe", b"MZ".to_vec()),
                Platform::linux_by_arch(vec![
                    ("x86_64", b"\x7fELF".to_vec()),
                    ("aarch64", b"\x7fELF".to_vec()),
                ]),
            ],
        )
        .unwrap();
        let manifest = verify(&out, &["darwin", "win32", "linux"]).unwrap();
        let config = &manifest["server"]["mcp_config"];
        assert_eq!(config["command"], "${__dirname}/server/darwin/sealpost");
        assert_eq!(
            config["platform_overrides"]["win32"]["command"],
            "${__dirname}/server/win32/sealpost.exe"
        );
        assert_eq!(
            config["platform_overrides"]["linux"]["command"],
            "${__dirname}/server/linux/sealpost"
        );
    }

    /// The Linux launcher starts the binary named for this machine's architecture.
    #[test]
    fn the_linux_launcher_starts_this_architectures_binary() {
        let dir = temp("launcher").parent().unwrap().to_path_buf();
        let arch = std::process::Command::new("uname")
            .arg("-m")
            .output()
            .unwrap();
        let arch = String::from_utf8(arch.stdout).unwrap().trim().to_owned();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        };
        let launcher = write("sealpost", LINUX_LAUNCHER);
        write(
            &format!("sealpost-{arch}"),
            "#!/bin/sh\necho \"started $*\"\n",
        );
        let out = std::process::Command::new(&launcher)
            .args(["mcp", "x"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started mcp x\n");
    }
}
