//! The release checks, `cargo xtask dist check`: `cargo xtask dist` for this machine's Linux
//! and for Windows (the platforms that run here), then each artifact used as its users use it.
//!
//! - `SHA256SUMS` checked by `sha256sum --check`; the bundle by the official `mcpb validate`.
//! - The static Linux plugin runs the plugin's stdio and live suites (`stdio::`, `live::`).
//! - `web/tests/dist/`, through the official TypeScript MCP SDK, with the relay and web app
//!   unpacked from the release tarball: `npx -y @sealpost/plugin` from a loopback registry
//!   holding only the packed tarballs, `uvx sealpost` and `pip install` of the wheel, the
//!   Windows plugin under Wine, and the image under podman against a throwaway PostgreSQL.
//!
//! macOS binaries are built only by `cargo xtask dist` (their Mach-O headers are checked
//! there); nothing here can run them.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::targets::{self, Target};
use super::{Plan, VERSION, image, out_dir};
use crate::cmd::{SUITE_DEADLINE, cargo, cmd, root, step};
use crate::postgres::TestCluster;
use crate::tools::{self, find_in_path};

/// What the checks need that a fresh machine lacks, with the command that installs it.
fn require_system_tools() -> Result<()> {
    let packages = "apt-get install -y podman buildah runc wine wine64 gcc-mingw-w64-x86-64 unzip";
    for tool in ["podman", "unzip", "sha256sum", "x86_64-w64-mingw32-gcc"] {
        find_in_path(tool).with_context(|| {
            format!("`{tool}` is needed for the release checks: run `{packages}` (as root)")
        })?;
    }
    Ok(())
}

pub fn run(tools: &tools::Tools) -> Result<()> {
    require_system_tools()?;
    // `mcpb validate`, the TypeScript SDK and the specs' other packages.
    crate::web::npm_ci()?;
    let native = targets::native_linux();
    let windows = targets::find("win32-x64").expect("a platform");
    super::build(&Plan {
        plugin_targets: vec![native, windows],
        image: true,
    })?;
    let dist = out_dir();
    step("SHA256SUMS", || {
        cmd("sha256sum", &["--check", "--strict", "SHA256SUMS"])
            .dir(&dist)
            .run()
    })?;
    step("the bundle passes `mcpb validate`", || mcpb_validate(&dist))?;
    let plugin = root()
        .join("target")
        .join(native.triple)
        .join("release/sealpost");
    let cluster = TestCluster::start().context("the release checks need PostgreSQL")?;
    let result = checks_on(tools, &dist, &native, &plugin, &cluster.url());
    cluster.stop();
    result
}

/// Everything after the build, with a throwaway PostgreSQL at `postgres`.
fn checks_on(
    tools: &tools::Tools,
    dist: &Path,
    native: &Target,
    plugin: &Path,
    postgres: &str,
) -> Result<()> {
    step(
        "the released Linux plugin runs the stdio and live suites",
        || {
            // `--workspace`, as the native step built it (the plugin's package alone would
            // rebuild its dependencies with other features); only the plugin's `it` has these.
            cargo(&[
                "test",
                "--workspace",
                "--test",
                "it",
                "--",
                "stdio::",
                "live::",
            ])
            .env("SEALPOST_PLUGIN_UNDER_TEST", plugin)
            .env("SEALPOST_TEST_POSTGRES_URL", postgres)
            .run_within(SUITE_DEADLINE)
        },
    )?;
    let relay = unpack_relay(dist, native)?;
    let uvx = ensure_uv()?;
    let wine_prefix = ensure_wine_prefix()?;
    let node = find_in_path("node").context("Node.js is not installed")?;
    let args = crate::web::node_test_args("tests/dist")?;
    step("the artifacts as people use them (web/tests/dist)", || {
        cmd(&node, &args.iter().map(String::as_str).collect::<Vec<_>>())
            .dir(root().join("web"))
            .env("SEALPOST_DIST_DIR", dist)
            .env("SEALPOST_VERSION", VERSION)
            .env("SEALPOST_RELAY_BIN", relay.join("sealpost-relay"))
            .env("SEALPOST_WEB_DIR", relay.join("web"))
            .env("SEALPOST_BIN", plugin)
            .env("SEALPOST_CHROMIUM", &tools.chromium)
            .env("SEALPOST_UVX", &uvx)
            .env("SEALPOST_WINEPREFIX", &wine_prefix)
            .env("SEALPOST_WINE", wine64()?)
            .env("SEALPOST_IMAGE", image::tag(native))
            .env("CONTAINERS_CONF", image::containers_conf()?)
            .env("SEALPOST_TEST_POSTGRES_URL", postgres)
            .run_within(SUITE_DEADLINE)
    })
}

/// The relay tarball unpacked as an operator would; answers its folder.
fn unpack_relay(dist: &Path, target: &Target) -> Result<PathBuf> {
    let into = root().join("target/dist-check");
    let _ = std::fs::remove_dir_all(&into);
    std::fs::create_dir_all(&into)?;
    let folder = format!("sealpost-relay-{VERSION}-{}", target.short_name());
    cmd("tar", &["-xzf"])
        .arg_path(dist.join(format!("{folder}.tar.gz")))
        .arg_path("-C")
        .arg_path(&into)
        .run()?;
    Ok(into.join(folder))
}

/// The official validator, pinned in `web/package-lock.json`, on the bundle's manifest.
fn mcpb_validate(dist: &Path) -> Result<()> {
    let bundle = dist.join(format!("sealpost-{VERSION}.mcpb"));
    let into = root().join("target/dist-check-mcpb");
    let _ = std::fs::remove_dir_all(&into);
    std::fs::create_dir_all(&into)?;
    cmd("unzip", &["-q"])
        .arg_path(&bundle)
        .arg_path("-d")
        .arg_path(&into)
        .run()?;
    cmd(root().join("web/node_modules/.bin/mcpb"), &["validate"])
        .arg_path(into.join("manifest.json"))
        .run()
}

const UV_VERSION: &str = "0.13.10";

/// `uvx`, from PyPI, pinned, in a virtual environment in the tools cache.
fn ensure_uv() -> Result<PathBuf> {
    let venv = tools::cache_dir().join(format!("uv-{UV_VERSION}"));
    let uvx = venv.join("bin/uvx");
    if !uvx.exists() {
        let python = find_in_path("python3").context("python3 is needed for uv")?;
        cmd(&python, &["-m", "venv"]).arg_path(&venv).run()?;
        cmd(
            venv.join("bin/pip"),
            &["install", "--quiet", &format!("uv=={UV_VERSION}")],
        )
        .run()?;
    }
    Ok(uvx)
}

/// Wine's 64-bit loader: Debian keeps it out of PATH.
fn wine64() -> Result<PathBuf> {
    find_in_path("wine64")
        .or_else(|| Some(PathBuf::from("/usr/lib/wine/wine64")).filter(|p| p.is_file()))
        .context(
            "Wine is needed for the Windows checks: run `apt-get install -y wine wine64` (as root)",
        )
}

/// Rust's standard library asks Windows 10+ for randomness through `ProcessPrng` in
/// `bcryptprimitives.dll`, which Wine 8 (Debian 12's) does not have yet; without it no Rust
/// program for Windows starts under that Wine. The checks give their Wine folder a stand-in
/// built from these lines with mingw-w64: the same call on `RtlGenRandom`.
const PROCESS_PRNG_C: &str = r#"#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) { return RtlGenRandom(data, (ULONG)len); }
"#;

/// Wine's folder for the Windows checks (64-bit), made once in the cache (`wineboot` takes a
/// while), with the `ProcessPrng` stand-in when this Wine lacks it.
fn ensure_wine_prefix() -> Result<PathBuf> {
    let prefix = tools::cache_dir().join("wine-prefix");
    if !prefix.join("system.reg").exists() {
        std::fs::create_dir_all(&prefix)?;
        cmd(wine64()?, &["wineboot", "--init"])
            .env("WINEPREFIX", &prefix)
            .env("WINEARCH", "win64")
            .env("WINEDEBUG", "-all")
            .run()?;
    }
    let dll = prefix.join("drive_c/windows/system32/bcryptprimitives.dll");
    if !dll.exists() {
        let gcc = find_in_path("x86_64-w64-mingw32-gcc").context(
            "mingw-w64 builds Wine's ProcessPrng stand-in: run `apt-get install -y gcc-mingw-w64-x86-64`",
        )?;
        let dir = root().join("target/wine-prng");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("prng.c"), PROCESS_PRNG_C)?;
        std::fs::write(
            dir.join("prng.def"),
            "LIBRARY bcryptprimitives.dll\nEXPORTS\nProcessPrng\n",
        )?;
        cmd(gcc, &["-O2", "-shared", "-o"])
            .arg_path(&dll)
            .arg_path(dir.join("prng.c"))
            .arg_path(dir.join("prng.def"))
            .arg_path("-ladvapi32")
            .run()?;
    }
    Ok(prefix)
}
