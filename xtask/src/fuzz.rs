//! Fuzz smoke runs: each `fuzz/` target for a bounded time with the nightly toolchain. Longer
//! campaigns: `cd fuzz && cargo +nightly fuzz run <target>`.

use anyhow::Result;

use crate::cmd::{cmd, root};
use crate::tools;

pub const TARGETS: [&str; 4] = ["envelope", "pairing_code", "hello", "catalog_update"];

pub fn smoke(seconds: u32) -> Result<()> {
    let tools = tools::ensure_all(false)?;
    for target in TARGETS {
        cmd(
            &tools.cargo_fuzz,
            &[
                "fuzz",
                "run",
                target,
                "--",
                &format!("-max_total_time={seconds}"),
            ],
        )
        .dir(root().join("fuzz"))
        .env("RUSTUP_TOOLCHAIN", "nightly")
        .run()?;
    }
    Ok(())
}
