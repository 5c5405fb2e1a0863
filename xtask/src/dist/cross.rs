//! Cross-compiling from this Linux machine: `cargo zigbuild` with Zig as the C compiler and
//! linker for every target (the C in the dependency tree: SQLite, mimalloc, aws-lc), both
//! from PyPI, pinned, in a virtual environment in the tools cache.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::targets::Target;
use crate::cmd::{cargo, cmd, root};
use crate::tools::{cache_dir, find_in_path};

const ZIGLANG_VERSION: &str = "0.17.1";
const CARGO_ZIGBUILD_VERSION: &str = "0.24.1";

/// The virtual environment holding `zig` and `cargo-zigbuild`; its `bin/` goes first on PATH
/// for the builds, so cargo-zigbuild finds its Zig.
pub fn ensure_zigbuild() -> Result<PathBuf> {
    let venv = cache_dir().join(format!(
        "zigbuild-{ZIGLANG_VERSION}-{CARGO_ZIGBUILD_VERSION}"
    ));
    let bin = venv.join("bin");
    if !bin.join("cargo-zigbuild").exists() || !bin.join("python-zig").exists() {
        let python = find_in_path("python3")
            .context("python3 is needed for Zig (PyPI): run `apt-get install -y python3-venv`")?;
        eprintln!(
            "installing ziglang {ZIGLANG_VERSION} and cargo-zigbuild {CARGO_ZIGBUILD_VERSION} into {}",
            venv.display()
        );
        cmd(&python, &["-m", "venv"]).arg_path(&venv).run()?;
        cmd(
            bin.join("pip"),
            &[
                "install",
                "--quiet",
                &format!("ziglang=={ZIGLANG_VERSION}"),
                &format!("cargo-zigbuild=={CARGO_ZIGBUILD_VERSION}"),
            ],
        )
        .run()?;
        // cargo-zigbuild runs `python3 -m ziglang` when no `zig` is on PATH; this marks the
        // install complete only once both are in.
        std::fs::write(bin.join("python-zig"), "")?;
    }
    Ok(bin)
}

/// The rustup target for `target`, added when missing.
pub fn ensure_rust_target(triple: &str) -> Result<()> {
    let installed = cmd("rustup", &["target", "list", "--installed"]).read()?;
    if !installed.lines().any(|t| t.trim() == triple) {
        cmd("rustup", &["target", "add", triple]).run()?;
    }
    Ok(())
}

/// Builds `packages` for `target` in release, from the lockfile, in one cargo run (their
/// shared dependencies compile once); answers where the binary `bin` of each lands.
pub fn build(zig_bin: &Path, packages: &[&str], target: &Target) -> Result<()> {
    ensure_rust_target(target.triple)?;
    let path = std::env::join_paths(std::iter::once(zig_bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    let mut args = vec![
        "zigbuild",
        "--locked",
        "--release",
        "--target",
        target.triple,
    ];
    for package in packages {
        args.extend(["-p", package]);
    }
    cargo(&args)
        .env("PATH", path)
        // No machine's paths in the binaries: panics and debug info name the sources by
        // their place in the workspace and the registry, whoever built them.
        .env("RUSTFLAGS", remap_flags())
        .run()
}

/// Where [`build`] put the binary `bin` for `target`.
pub fn built(bin: &str, target: &Target) -> Result<PathBuf> {
    let exe = if target.is_windows() {
        format!("{bin}.exe")
    } else {
        bin.to_owned()
    };
    let path = root()
        .join("target")
        .join(target.triple)
        .join("release")
        .join(exe);
    anyhow::ensure!(path.is_file(), "{} was not built", path.display());
    Ok(path)
}

fn remap_flags() -> String {
    let home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
    format!(
        "--remap-path-prefix={}=/sealpost --remap-path-prefix={home}=/cargo",
        root().display()
    )
}

/// One macOS binary for both architectures (a Mach-O fat file), which MCPB needs because it
/// names platforms, not architectures.
pub fn universal_macos(arm64: &Path, x86_64: &Path, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let out = dir.join("sealpost");
    let mut fat = fat_macho::FatWriter::new();
    for slice in [arm64, x86_64] {
        fat.add(std::fs::read(slice)?)
            .map_err(|e| anyhow::anyhow!("{} is not a Mach-O binary: {e}", slice.display()))?;
    }
    fat.write_to_file(&out)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?;
    Ok(out)
}
