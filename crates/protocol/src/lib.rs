//! Sealpost's shared vocabulary, pure serde types that build for `wasm32-unknown-unknown`.
//!
//! - [`content`]: the plaintext carried *inside* sealed envelopes (tool calls, results,
//!   refusals, the tool catalog). Only the plugin and the browser ever see these.
//! - [`api`]: the relay's HTTP request and response types and its stable error codes.
//! - [`ids`]: 16-byte random ids written as unpadded base64url.
//! - [`limits`]: every size, count and time limit the parts agree on, in one place.

#![warn(missing_docs)]

pub mod api;
pub mod content;
pub mod ids;
pub mod limits;
mod wire;
