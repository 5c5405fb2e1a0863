//! The OpenAPI description served at `/openapi.json` (kept beside this file as JSON so it
//! can be read and diffed; a test checks every route in the router appears in it).

pub const SPEC: &str = include_str!("openapi.json");
