//! The executor through its public surface: envelopes in, sealed replies out, opened with
//! `sealpost-seal` exactly as the plugin opens them.

mod calls;
mod catalog;
mod proposals;
mod search_quality;
mod support;
mod tools;
