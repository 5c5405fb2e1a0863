//! Sealpost relay: stores sealed envelopes and hands them between a person's MCP plugin and
//! their browser tab, holding only ciphertext and never a key.

pub mod clock;
pub mod store;
pub mod wake;
