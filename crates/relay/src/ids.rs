//! Random ids made by the relay (owners, token rows).

use sealpost_protocol::ids::Id16;

/// 16 bytes from the OS random source.
pub fn random_id() -> Id16 {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    Id16(bytes)
}
