//! The platforms Sealpost ships for, and what each packaging format calls them.

/// One platform the plugin is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Rust's target triple.
    pub triple: &'static str,
    /// Node's `process.platform` (and npm's `os`).
    pub node_os: &'static str,
    /// Node's `process.arch` (and npm's `cpu`).
    pub node_cpu: &'static str,
    /// The wheel's platform tags (PEP 425/600/656), joined with `.` in the file name.
    pub wheel_platforms: &'static [&'static str],
    /// MCPB's platform (`compatibility.platforms`, `platform_overrides`).
    pub mcpb_platform: &'static str,
}

impl Target {
    pub fn is_windows(&self) -> bool {
        self.node_os == "win32"
    }

    /// The plugin's file name on this platform.
    pub fn plugin_exe(&self) -> &'static str {
        if self.is_windows() {
            "sealpost.exe"
        } else {
            "sealpost"
        }
    }

    /// `linux-x64`, `darwin-arm64`, `win32-x64`: the npm package's suffix, and the name the
    /// artifacts of this platform carry.
    pub fn short_name(&self) -> String {
        format!("{}-{}", self.node_os, self.node_cpu)
    }
}

/// The plugin's platforms. Linux binaries are static (musl), so one binary serves every
/// distribution; the wheels say so by naming both the glibc and the musl tags.
pub const PLUGIN_TARGETS: [Target; 5] = [
    Target {
        triple: "x86_64-unknown-linux-musl",
        node_os: "linux",
        node_cpu: "x64",
        wheel_platforms: &[
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
            "musllinux_1_1_x86_64",
        ],
        mcpb_platform: "linux",
    },
    Target {
        triple: "aarch64-unknown-linux-musl",
        node_os: "linux",
        node_cpu: "arm64",
        wheel_platforms: &[
            "manylinux_2_17_aarch64",
            "manylinux2014_aarch64",
            "musllinux_1_1_aarch64",
        ],
        mcpb_platform: "linux",
    },
    Target {
        triple: "aarch64-apple-darwin",
        node_os: "darwin",
        node_cpu: "arm64",
        wheel_platforms: &["macosx_11_0_arm64"],
        mcpb_platform: "darwin",
    },
    Target {
        triple: "x86_64-apple-darwin",
        node_os: "darwin",
        node_cpu: "x64",
        wheel_platforms: &["macosx_10_12_x86_64"],
        mcpb_platform: "darwin",
    },
    Target {
        triple: "x86_64-pc-windows-gnu",
        node_os: "win32",
        node_cpu: "x64",
        wheel_platforms: &["win_amd64"],
        mcpb_platform: "win32",
    },
];

/// The relay's platforms: Linux only (a server), static.
pub const RELAY_TARGETS: [Target; 2] = [PLUGIN_TARGETS[0], PLUGIN_TARGETS[1]];

/// The target a short name (`linux-x64`) or triple names.
pub fn find(name: &str) -> Option<Target> {
    PLUGIN_TARGETS
        .into_iter()
        .find(|t| t.triple == name || t.short_name() == name)
}

/// This machine's own Linux target, which the release checks run natively.
pub fn native_linux() -> Target {
    match std::env::consts::ARCH {
        "aarch64" => PLUGIN_TARGETS[1],
        _ => PLUGIN_TARGETS[0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_platform_has_one_npm_name_and_every_mcpb_platform_is_covered() {
        let mut names: Vec<_> = PLUGIN_TARGETS.iter().map(Target::short_name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PLUGIN_TARGETS.len());
        for platform in ["linux", "darwin", "win32"] {
            assert!(PLUGIN_TARGETS.iter().any(|t| t.mcpb_platform == platform));
        }
        assert_eq!(find("win32-x64").unwrap().plugin_exe(), "sealpost.exe");
        assert_eq!(
            find("aarch64-apple-darwin").unwrap().short_name(),
            "darwin-arm64"
        );
    }
}
