//! Executor tasks: `cargo xtask bench executor`.

use anyhow::{Result, bail};

pub fn bench() -> Result<()> {
    bail!("the executor is not part of this build yet")
}
