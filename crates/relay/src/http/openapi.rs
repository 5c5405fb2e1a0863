//! The OpenAPI description served at `/openapi.json` (kept beside this file as JSON so it
//! can be read and diffed). Hand-written: keep it in step with `router()` in `http/mod.rs`.

pub const SPEC: &str = include_str!("openapi.json");
