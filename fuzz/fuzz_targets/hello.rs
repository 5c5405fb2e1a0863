//! Arbitrary bytes as a session hello: refuse without panicking; nothing forged verifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sealpost_seal::{PairingSecret, verify_hello};
use sealpost_time::UnixMillis;

fuzz_target!(|data: &[u8]| {
    let secret = PairingSecret::from_bytes([1; 32]);
    assert!(verify_hello(&secret, data, UnixMillis::from_ms(2_000)).is_err(), "forged a hello");
});
