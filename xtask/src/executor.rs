//! Executor tasks: `cargo xtask bench executor` runs the executor's benchmark binary, which
//! generates a seeded 10,000-document workspace and reports index build time, query latency
//! and `handle()` throughput.

use anyhow::Result;

use crate::cmd::{cargo, step};

pub fn bench() -> Result<()> {
    step("bench executor", || {
        cargo(&["bench", "-p", "sealpost-executor", "--bench", "executor"]).run()
    })
}
