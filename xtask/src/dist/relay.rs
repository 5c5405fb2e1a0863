//! The relay as teams deploy it: a tarball per Linux architecture (the static binary and the
//! **built** app beside it) and the root folder of its container image, which the
//! Dockerfile's final stage copies as it is (`image-root/ARCH/`).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::archive::{self, Entry};
use super::targets::Target;

/// The image's user: no name is needed in an image without a shell; a number no base image
/// hands out.
pub const IMAGE_UID: u32 = 10_001;

/// Docker's name for the architecture of `target` (`TARGETARCH`).
pub fn docker_arch(target: &Target) -> &'static str {
    match target.node_cpu {
        "arm64" => "arm64",
        _ => "amd64",
    }
}

/// `sealpost-relay-VERSION-linux-x64.tar.gz`: `sealpost-relay` and `web/` in one folder, so
/// `./sealpost-relay serve --web web` serves the app from where it was unpacked.
pub fn tarball(
    out: &Path,
    version: &str,
    target: &Target,
    binary: &Path,
    web: &Path,
) -> Result<PathBuf> {
    let folder = format!("sealpost-relay-{version}-{}", target.short_name());
    let mut entries = vec![Entry::executable(
        format!("{folder}/sealpost-relay"),
        std::fs::read(binary)?,
    )];
    entries.extend(archive::tree(web, &format!("{folder}/web"))?);
    entries.push(Entry::file(
        format!("{folder}/README"),
        tarball_readme(version),
    ));
    let path = out.join(format!("{folder}.tar.gz"));
    archive::tar_gz(&path, &entries)?;
    Ok(path)
}

fn tarball_readme(version: &str) -> String {
    format!(
        "Sealpost relay {version}: a static binary for Linux and the web app it serves.\n\n\
         Start it (SQLite in the current folder; `--database-url postgres://…` for a team):\n\n  \
         ./sealpost-relay serve --web web --listen 0.0.0.0:8080 --public-url https://relay.example.com\n\n\
         Add people: ./sealpost-relay owner add NAME (prints a one-time sign-in link).\n\
         Every flag also reads a SEALPOST_* variable: ./sealpost-relay serve --help.\n"
    )
}

/// Lays out `image-root/ARCH/`: the binary, the app, a CA bundle (for an identity provider
/// over HTTPS), and the user the image runs as; `image-root/writable/`, an empty
/// folder the Dockerfile copies as `/data` and `/tmp` owned by that user.
pub fn image_root(out: &Path, target: &Target, binary: &Path, web: &Path) -> Result<PathBuf> {
    let root = out.join("image-root").join(docker_arch(target));
    let _ = std::fs::remove_dir_all(&root);
    let put = |path: &str, bytes: &[u8], mode: u32| -> Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder"))?;
        std::fs::write(&path, bytes)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put(
        "usr/local/bin/sealpost-relay",
        &std::fs::read(binary)?,
        0o755,
    )?;
    for entry in archive::tree(web, "srv/sealpost/web")? {
        put(&entry.path, &entry.bytes, 0o644)?;
    }
    let certificates = Path::new(CA_BUNDLE);
    let bundle = std::fs::read(certificates).with_context(|| {
        format!("{CA_BUNDLE} (the image's CA certificates) is missing: run `apt-get install -y ca-certificates`")
    })?;
    put("etc/ssl/certs/ca-certificates.crt", &bundle, 0o644)?;
    put(
        "etc/passwd",
        format!("root:x:0:0:root:/root:/sbin/nologin\nsealpost:x:{IMAGE_UID}:{IMAGE_UID}:Sealpost relay:/data:/sbin/nologin\n").as_bytes(),
        0o644,
    )?;
    put(
        "etc/group",
        format!("root:x:0:\nsealpost:x:{IMAGE_UID}:\n").as_bytes(),
        0o644,
    )?;
    // The folders the relay writes to (the SQLite file, a volume in production; SQLite's
    // temporary files) come empty from here; the Dockerfile gives them to the image's user.
    let writable = out.join("image-root").join("writable");
    std::fs::create_dir_all(&writable)?;
    Ok(root)
}

/// Where Debian keeps the CA certificates the image carries.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

#[cfg(test)]
mod tests {
    use crate::cmd::root;

    /// The Dockerfile names the places `image_root` fills, the user it makes, and the health
    /// check the image needs instead of curl; docker-compose.yml names the same check.
    #[test]
    fn the_dockerfile_and_the_compose_file_name_what_the_image_root_holds() {
        let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
        for needed in [
            "SEALPOST_WEB=/srv/sealpost/web",
            "ENTRYPOINT [\"/usr/local/bin/sealpost-relay\"]",
            "CMD [\"/usr/local/bin/sealpost-relay\", \"healthcheck\"]",
            &format!("USER {0}:{0}", super::IMAGE_UID),
            &format!("--chown={0}:{0} writable/ /data/", super::IMAGE_UID),
            "FROM scratch",
        ] {
            assert!(dockerfile.contains(needed), "the Dockerfile lacks {needed}");
        }
        let instructions = dockerfile
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'));
        assert!(
            !instructions.clone().any(|l| l.contains("curl")),
            "the image has no curl to call"
        );
        let compose = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
        assert!(
            compose.contains(r#"test: ["CMD", "/usr/local/bin/sealpost-relay", "healthcheck"]"#)
        );
    }
}
