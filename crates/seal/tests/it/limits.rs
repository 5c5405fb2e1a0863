//! `seal` may depend on crypto crates only, so it restates the limits the protocol crate owns.
//! This keeps the two copies equal.

use sealpost_protocol::limits;

#[test]
fn seal_and_protocol_agree_on_every_shared_limit() {
    assert_eq!(
        sealpost_seal::MAX_CALL_ENVELOPE_BYTES,
        limits::MAX_CALL_ENVELOPE_BYTES
    );
    assert_eq!(
        sealpost_seal::MAX_REPLY_ENVELOPE_BYTES,
        limits::MAX_REPLY_ENVELOPE_BYTES
    );
    assert_eq!(sealpost_seal::MAX_HELLO_BYTES, limits::MAX_HELLO_BYTES);
    assert_eq!(sealpost_seal::CLOCK_SKEW_MS, limits::CLOCK_SKEW_MS);
}
