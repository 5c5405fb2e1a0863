//! `sealpost-seal`'s tests: bytes in, bytes out. `vectors` runs natively and in headless
//! Chromium (wasm32) against the same `tests/vectors.json`; the rest are native.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod support;
mod vectors;

#[cfg(not(target_arch = "wasm32"))]
mod attacks;
#[cfg(not(target_arch = "wasm32"))]
mod boundaries;
#[cfg(not(target_arch = "wasm32"))]
mod limits;
#[cfg(not(target_arch = "wasm32"))]
mod pairing;
