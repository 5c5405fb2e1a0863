//! `sealpost` for PyPI: one wheel per platform holding the binary as a script (PEP 427's
//! `.data/scripts`, the layout maturin's `bin` bindings give), so `uvx sealpost mcp` and
//! `pipx install sealpost` put the plugin itself on PATH, with no Python between the client
//! and the plugin.

use std::path::{Path, PathBuf};

use anyhow::Result;
use base64::Engine as _;
use sha2::Digest as _;

use super::archive::{self, Entry};
use super::targets::Target;

const SUMMARY: &str = "Sealpost's local plugin: an MCP stdio server that seals every tool call to the paired browser tab.";

/// The wheel's file name for `target`.
pub fn file_name(version: &str, target: &Target) -> String {
    format!(
        "sealpost-{version}-py3-none-{}.whl",
        target.wheel_platforms.join(".")
    )
}

/// Writes the wheel for `binary` (built for `target`) into `dir`; answers its path.
pub fn write(dir: &Path, version: &str, target: &Target, binary: &Path) -> Result<PathBuf> {
    let data = format!("sealpost-{version}.data/scripts/{}", target.plugin_exe());
    let info = format!("sealpost-{version}.dist-info");
    let mut entries = vec![
        Entry::executable(data, std::fs::read(binary)?),
        Entry::file(format!("{info}/METADATA"), metadata(version)),
        Entry::file(format!("{info}/WHEEL"), wheel(target)),
    ];
    let record = record(&entries, &format!("{info}/RECORD"));
    entries.push(Entry::file(format!("{info}/RECORD"), record));
    let out = dir.join(file_name(version, target));
    archive::zip(&out, &entries)?;
    Ok(out)
}

fn metadata(version: &str) -> String {
    format!(
        "Metadata-Version: 2.1\nName: sealpost\nVersion: {version}\nSummary: {SUMMARY}\n\
         License: Apache-2.0\nKeywords: mcp,model-context-protocol,end-to-end-encryption\n\
         Description-Content-Type: text/markdown\n\n\
         # sealpost\n\nThe plugin an MCP client starts: `uvx sealpost mcp`. Pair it once with \
         `uvx sealpost pair` and the code your Sealpost tab shows.\n"
    )
}

fn wheel(target: &Target) -> String {
    let mut text =
        String::from("Wheel-Version: 1.0\nGenerator: sealpost-xtask\nRoot-Is-Purelib: false\n");
    for platform in target.wheel_platforms {
        text.push_str(&format!("Tag: py3-none-{platform}\n"));
    }
    text
}

/// PEP 376's RECORD: each file with its SHA-256 (urlsafe base64, unpadded) and size; the
/// RECORD itself without either.
fn record(entries: &[Entry], record_path: &str) -> String {
    let mut text = String::new();
    for entry in entries {
        let digest = sha2::Sha256::digest(&entry.bytes);
        let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        text.push_str(&format!(
            "{},sha256={digest},{}\n",
            entry.path,
            entry.bytes.len()
        ));
    }
    text.push_str(&format!("{record_path},,\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::targets::PLUGIN_TARGETS;

    #[test]
    fn a_wheel_names_its_platforms_and_records_every_file() {
        let linux = PLUGIN_TARGETS[0];
        assert_eq!(
            file_name("1.2.3", &linux),
            "sealpost-1.2.3-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64.whl"
        );
        assert!(wheel(&linux).contains("Tag: py3-none-musllinux_1_1_x86_64\n"));
        let entries = [Entry::executable(
            "s.data/scripts/sealpost",
            b"abc".to_vec(),
        )];
        assert_eq!(
            record(&entries, "s.dist-info/RECORD"),
            "s.data/scripts/sealpost,sha256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0,3\n\
             s.dist-info/RECORD,,\n"
        );
    }
}
