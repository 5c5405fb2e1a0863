//! The executor through its public surface: envelopes in, sealed replies out, opened with
//! `sealpost-seal` exactly as the plugin opens them. The same suite runs natively and, compiled
//! to wasm32, in headless Chromium.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod calls;
mod catalog;
mod grant_binding;
mod index_snapshot;
mod proposals;
mod schemas;
mod search_grants;
mod search_quality;
mod support;
mod tools;
