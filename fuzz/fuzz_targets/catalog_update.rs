//! Arbitrary bytes as a live session's catalog update: refuse without panicking; nothing forged
//! opens against a genuine hello.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sealpost_seal::{BrowserSession, PairingSecret, SessionId, VerifiedHello, open_catalog_update, verify_hello};
use sealpost_time::UnixMillis;

fn hello() -> &'static (PairingSecret, VerifiedHello) {
    static HELLO: OnceLock<(PairingSecret, VerifiedHello)> = OnceLock::new();
    HELLO.get_or_init(|| {
        let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
        let secret = PairingSecret::from_bytes([1; 32]);
        let (_, hello) = BrowserSession::start(&secret, SessionId::from_bytes([2; 16]), UnixMillis::from_ms(1_000), UnixMillis::from_ms(3_600_000), b"", &mut rng).unwrap();
        let verified = verify_hello(&secret, &hello, UnixMillis::from_ms(2_000)).unwrap();
        (secret, verified)
    })
}

fuzz_target!(|data: &[u8]| {
    let (secret, hello) = hello();
    assert!(open_catalog_update(secret, hello, data).is_err(), "forged a catalog update");
});
