//! Random ids made by the relay (owners, token rows).

use sealpost_protocol::ids::Id;

/// An id of the kind the caller names, 16 bytes from the OS random source.
pub fn random_id<I: Id>() -> I {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    I::from_bytes(bytes)
}
