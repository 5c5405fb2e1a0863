//! `cargo xtask dist`: every release artifact into `target/dist/`, with `SHA256SUMS`, from the
//! lockfile. Nothing is published; a release job uploads these files.
//!
//! - the plugin for each platform (`targets.rs`), cross-compiled with `cargo zigbuild`
//!   (`cross.rs`), as a plain archive, an npm platform package and a wheel;
//! - the npm launcher `@sealpost/plugin` (`npm.rs`) and one `.mcpb` bundle for all platforms;
//! - the relay for each Linux architecture as a tarball with the built app (`relay.rs`) and
//!   as an OCI image built by podman from the Dockerfile's final stage (`image.rs`).
//!
//! `cargo xtask dist --only linux-x64,win32-x64 --no-image` builds a subset; `cargo xtask
//! dist check` builds what this machine can run and checks it (`check.rs`); `cargo xtask dist
//! image-root` lays out only the image's root folder for this machine's architecture (the
//! Dockerfile's build stage).

pub mod archive;
mod check;
mod cross;
pub mod image;
pub mod npm;
pub mod relay;
pub mod targets;
pub mod wheel;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Result, bail};
use sha2::Digest as _;

use crate::cmd::{root, step};
use crate::mcpb;
use archive::Entry;
use targets::{PLUGIN_TARGETS, RELAY_TARGETS, Target};

pub use check::run as check;

/// The version every artifact carries (the workspace shares one).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the artifacts go.
pub fn out_dir() -> PathBuf {
    root().join("target/dist")
}

/// What `cargo xtask dist` builds.
#[derive(Debug)]
pub struct Plan {
    pub plugin_targets: Vec<Target>,
    pub image: bool,
}

impl Plan {
    pub fn everything() -> Self {
        Self {
            plugin_targets: PLUGIN_TARGETS.to_vec(),
            image: true,
        }
    }

    /// `[--only NAME,NAME] [--no-image]`.
    pub fn parse(args: &[&str]) -> Result<Self> {
        let mut plan = Self::everything();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match *arg {
                "--no-image" => plan.image = false,
                "--only" => {
                    let Some(names) = args.next() else {
                        bail!(
                            "--only takes a list: linux-x64,linux-arm64,darwin-arm64,darwin-x64,win32-x64"
                        );
                    };
                    plan.plugin_targets = names
                        .split(',')
                        .map(|name| {
                            targets::find(name).ok_or_else(|| {
                                anyhow::anyhow!("no platform {name:?}: one of linux-x64, linux-arm64, darwin-arm64, darwin-x64, win32-x64")
                            })
                        })
                        .collect::<Result<_>>()?;
                }
                other => bail!("cargo xtask dist: unknown argument {other:?}"),
            }
        }
        Ok(plan)
    }

    fn relay_targets(&self) -> Vec<Target> {
        RELAY_TARGETS
            .into_iter()
            .filter(|t| self.plugin_targets.contains(t))
            .collect()
    }
}

/// The plugin binaries of one run, by target.
#[derive(Debug, Default)]
struct Plugins(Vec<(Target, PathBuf)>);

impl Plugins {
    fn of(&self, short_name: &str) -> Option<&Path> {
        self.0
            .iter()
            .find(|(t, _)| t.short_name() == short_name)
            .map(|(_, p)| p.as_path())
    }
}

/// `cargo xtask dist [...]`.
pub fn run(args: &[&str]) -> Result<()> {
    match args {
        ["image-root"] => image_root_only().map(|_| ()),
        ["check"] => check(&crate::tools::ensure_all(true)?),
        _ => build(&Plan::parse(args)?).map(|_| ()),
    }
}

/// Builds `plan` into [`out_dir`], replacing what was there; answers the files written.
pub fn build(plan: &Plan) -> Result<Vec<PathBuf>> {
    let started = Instant::now();
    let zig = cross::ensure_zigbuild()?;
    let out = out_dir();
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)?;
    let mut files = Vec::new();

    let relay_targets = plan.relay_targets();
    let mut plugins = Plugins::default();
    let mut relays = Vec::new();
    let darwin_both = ["darwin-arm64", "darwin-x64"]
        .iter()
        .all(|name| plan.plugin_targets.iter().any(|t| t.short_name() == *name));
    let mut universal = None;
    for target in &plan.plugin_targets {
        let with_relay = relay_targets.contains(target);
        let packages: &[&str] = if with_relay {
            &["sealpost", "sealpost-relay"]
        } else {
            &["sealpost"]
        };
        step(
            &format!("{} for {}", packages.join(" and "), target.triple),
            || cross::build(&zig, packages, target),
        )?;
        plugins.0.push((*target, cross::built("sealpost", target)?));
        if with_relay {
            relays.push((*target, cross::built("sealpost-relay", target)?));
        }
    }
    if darwin_both {
        let fat = step("the plugin for macOS, universal", || {
            cross::universal_macos(
                plugins.of("darwin-arm64").expect("built"),
                plugins.of("darwin-x64").expect("built"),
                &out.join("universal"),
            )
        })?;
        // In any order: fat-macho sorts its slices by CPU type (x86_64 first).
        let mut holds = macho_cpus(&std::fs::read(&fat)?);
        holds.sort_unstable();
        let mut both = [MACHO_ARM64, MACHO_X86_64];
        both.sort_unstable();
        anyhow::ensure!(
            holds == both,
            "the universal binary holds {holds:x?}, not arm64 and x86_64"
        );
        universal = Some(fat);
    }
    for (target, binary) in &plugins.0 {
        check_binary_format(target, binary)?;
        files.push(plugin_archive(&out, target, binary)?);
        files.push(npm::pack_platform(&out, VERSION, target, binary)?);
        files.push(wheel::write(&out, VERSION, target, binary)?);
    }
    files.push(npm::pack_launcher(&out, VERSION)?);
    if let Some(bundle) = bundle(&out, &plugins, universal.as_deref())? {
        files.push(bundle);
    }

    if !relays.is_empty() {
        let web = step("the browser module and the web app", || {
            crate::web::build().map(|_| crate::web::out_dir())
        })?;
        for (target, binary) in &relays {
            files.push(relay::tarball(&out, VERSION, target, binary, &web)?);
            relay::image_root(&out, target, binary, &web)?;
            if plan.image {
                files.push(step(
                    &format!("the image for {}", target.short_name()),
                    || image::build_and_save(&out, target),
                )?);
            }
        }
    }
    if let Some(dir) = universal.as_ref().and_then(|p| p.parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
    write_sums(&out, &files)?;
    report(&files, started);
    Ok(files)
}

/// The image's root folder alone, for this machine's architecture (the Dockerfile's build
/// stage runs this).
pub fn image_root_only() -> Result<PathBuf> {
    let zig = cross::ensure_zigbuild()?;
    let target = targets::native_linux();
    cross::ensure_rust_target("wasm32-unknown-unknown")?;
    crate::web::build()?;
    cross::build(&zig, &["sealpost-relay"], &target)?;
    let binary = cross::built("sealpost-relay", &target)?;
    relay::image_root(&out_dir(), &target, &binary, &crate::web::out_dir())
}

const MACHO_ARM64: u32 = 0x0100_000c;
const MACHO_X86_64: u32 = 0x0100_0007;

/// The CPU types a Mach-O file holds: one for a thin 64-bit file, each slice's for a fat one;
/// none for anything else.
fn macho_cpus(bytes: &[u8]) -> Vec<u32> {
    let word = |at: usize, big: bool| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    match word(0, true) {
        Some(0xcffa_edfe) => word(4, false).into_iter().collect(),
        Some(0xcafe_babe) => {
            let count = word(4, true).unwrap_or(0) as usize;
            (0..count).filter_map(|i| word(8 + i * 20, true)).collect()
        }
        _ => Vec::new(),
    }
}

/// What this machine cannot run is at least checked for its format: a macOS build is a
/// Mach-O file for its CPU, a Windows build a PE file.
fn check_binary_format(target: &Target, binary: &Path) -> Result<()> {
    let bytes = std::fs::read(binary)?;
    let ok = match (target.node_os, target.node_cpu) {
        ("darwin", "arm64") => macho_cpus(&bytes) == [MACHO_ARM64],
        ("darwin", _) => macho_cpus(&bytes) == [MACHO_X86_64],
        ("win32", _) => bytes.starts_with(b"MZ"),
        _ => bytes.starts_with(b"\x7fELF"),
    };
    anyhow::ensure!(ok, "{} is not a {} binary", binary.display(), target.triple);
    Ok(())
}

fn plugin_archive(out: &Path, target: &Target, binary: &Path) -> Result<PathBuf> {
    let name = format!("sealpost-{VERSION}-{}", target.short_name());
    let entry = Entry::executable(
        format!("{name}/{}", target.plugin_exe()),
        std::fs::read(binary)?,
    );
    if target.is_windows() {
        let path = out.join(format!("{name}.zip"));
        archive::zip(&path, &[entry])?;
        Ok(path)
    } else {
        let path = out.join(format!("{name}.tar.gz"));
        archive::tar_gz(&path, &[entry])?;
        Ok(path)
    }
}

/// One bundle for every platform built: macOS only with both architectures (one universal
/// binary), Linux with each architecture built, Windows.
fn bundle(out: &Path, plugins: &Plugins, universal: Option<&Path>) -> Result<Option<PathBuf>> {
    let mut platforms = Vec::new();
    if let Some(universal) = universal {
        platforms.push(mcpb::Platform::binary(
            "darwin",
            "sealpost",
            std::fs::read(universal)?,
        ));
    }
    if let Some(windows) = plugins.of("win32-x64") {
        platforms.push(mcpb::Platform::binary(
            "win32",
            "sealpost.exe",
            std::fs::read(windows)?,
        ));
    }
    let mut linux = Vec::new();
    for (short, arch) in [("linux-x64", "x86_64"), ("linux-arm64", "aarch64")] {
        if let Some(binary) = plugins.of(short) {
            linux.push((arch, std::fs::read(binary)?));
        }
    }
    if !linux.is_empty() {
        platforms.push(mcpb::Platform::linux_by_arch(linux));
    }
    if platforms.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = platforms.iter().map(|p| p.name).collect();
    let path = out.join(format!("sealpost-{VERSION}.mcpb"));
    mcpb::package(&path, VERSION, platforms)?;
    mcpb::verify(&path, &names)?;
    Ok(Some(path))
}

/// `SHA256SUMS` in the format `sha256sum --check` reads.
fn write_sums(out: &Path, files: &[PathBuf]) -> Result<()> {
    let mut names: Vec<_> = files.iter().collect();
    names.sort();
    let mut text = String::new();
    for file in names {
        let digest = sha2::Sha256::digest(std::fs::read(file)?);
        let name = file.file_name().expect("a file").to_string_lossy();
        text.push_str(&format!("{}  {name}\n", hex::encode(digest)));
    }
    std::fs::write(out.join("SHA256SUMS"), text)?;
    Ok(())
}

fn report(files: &[PathBuf], started: Instant) {
    eprintln!("\nartifacts in {}:", out_dir().display());
    for file in files {
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "  {:>8.1} MiB  {}",
            size as f64 / 1_048_576.0,
            file.file_name().unwrap_or_default().to_string_lossy()
        );
    }
    eprintln!(
        "  and SHA256SUMS; built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mach_o_headers_name_their_cpus() {
        let mut thin = vec![0xcf, 0xfa, 0xed, 0xfe];
        thin.extend(MACHO_ARM64.to_le_bytes());
        assert_eq!(macho_cpus(&thin), [MACHO_ARM64]);
        let mut fat = vec![0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2];
        for cpu in [MACHO_ARM64, MACHO_X86_64] {
            fat.extend(cpu.to_be_bytes());
            fat.extend([0; 16]);
        }
        assert_eq!(macho_cpus(&fat), [MACHO_ARM64, MACHO_X86_64]);
        assert!(macho_cpus(b"\x7fELF\x02\x01").is_empty());
    }
}
