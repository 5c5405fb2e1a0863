//! The relay's OCI image: podman builds the Dockerfile's final stage over `image-root/`
//! (`--build-arg ARTIFACTS=dist`), so the image holds exactly the binary and app
//! `cargo xtask dist` built; `podman save` writes it as an OCI archive (`docker load` and
//! `podman load` read it). podman runs here with a `containers.conf` of its own
//! (`default_ulimits = []`) and, for containers, `--runtime runc`: these machines refuse crun
//! and the default ulimits.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::VERSION;
use super::relay::docker_arch;
use super::targets::Target;
use crate::cmd::{Cmd, cmd, root};
use crate::tools::find_in_path;

/// The tag the image of `target` is built under.
pub fn tag(target: &Target) -> String {
    format!("localhost/sealpost-relay:{VERSION}-{}", docker_arch(target))
}

/// This project's `containers.conf` for podman, written when missing.
pub fn containers_conf() -> Result<PathBuf> {
    let conf = root().join("target/podman/containers.conf");
    std::fs::create_dir_all(conf.parent().expect("a folder"))?;
    std::fs::write(&conf, "[containers]\ndefault_ulimits = []\n")?;
    Ok(conf)
}

/// `podman ARGS` with this project's `containers.conf`.
pub fn podman(args: &[&str]) -> Result<Cmd> {
    let podman = find_in_path("podman").context(
        "podman is not installed: run `apt-get install -y podman buildah runc` (as root)",
    )?;
    Ok(cmd(podman, args).env("CONTAINERS_CONF", containers_conf()?))
}

/// Builds the image of `target` from `out/image-root/` and saves it into `out`.
pub fn build_and_save(out: &Path, target: &Target) -> Result<PathBuf> {
    build(out, target)?;
    let archive = out.join(format!(
        "sealpost-relay-{VERSION}-{}.oci.tar",
        target.short_name()
    ));
    let _ = std::fs::remove_file(&archive);
    podman(&["save", "--format", "oci-archive", "-o"])?
        .arg_path(&archive)
        .arg_path(tag(target))
        .run()?;
    Ok(archive)
}

/// Builds the image of `target` from `out/image-root/`; answers its tag.
pub fn build(out: &Path, target: &Target) -> Result<String> {
    let tag = tag(target);
    podman(&[
        "build",
        "--quiet",
        "--format",
        "oci",
        "--build-arg",
        "ARTIFACTS=dist",
        "--platform",
        &format!("linux/{}", docker_arch(target)),
        "--timestamp",
        &super::archive::source_date()?.to_string(),
        "-t",
        &tag,
        "-f",
    ])?
    .arg_path(root().join("Dockerfile"))
    .arg_path(out.join("image-root"))
    .run()?;
    Ok(tag)
}
