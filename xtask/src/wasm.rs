//! The wasm test suites: the same integration tests, compiled for `wasm32-unknown-unknown` and
//! run by `wasm-bindgen-test-runner` in headless Chromium through ChromeDriver, with the
//! Chromium flags in `xtask/webdriver.json` (headless, no sandbox as root, no background
//! networking on a closed network).

use anyhow::Result;

use crate::cmd::{SUITE_DEADLINE, cargo, root};
use crate::tools::Tools;

/// Crates whose `tests/it` suite also runs in the browser.
const WASM_TEST_CRATES: [&str; 2] = ["sealpost-seal", "sealpost-executor"];

pub fn test(tools: &Tools) -> Result<()> {
    for krate in WASM_TEST_CRATES {
        cargo(&[
            "test",
            "-p",
            krate,
            "--target",
            "wasm32-unknown-unknown",
            "--test",
            "it",
        ])
        .env(
            "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
            &tools.wasm_bindgen_test_runner,
        )
        .env("CHROMEDRIVER", &tools.chromedriver)
        .env(
            "WASM_BINDGEN_TEST_WEBDRIVER_JSON",
            root().join("xtask").join("webdriver.json"),
        )
        .env("WASM_BINDGEN_TEST_TIMEOUT", "120")
        .run_within(SUITE_DEADLINE)?;
    }
    Ok(())
}
