//! Each check at its edge: the last value accepted and the first refused, with the refusal's
//! own error, and what accessors and `Debug` give back. Written against the mutants that the
//! other tests let through (`cargo xtask mutants seal`).

use sealpost_seal::{
    BrowserSession, CLOCK_SKEW_MS, CallId, MAX_HELLO_BYTES, PairingSecret, PluginSession,
    RelayOrigin, RelayOriginError, SealError, SessionId, seal_reply, validate_relay_origin,
    verify_hello,
};
use sealpost_time::UnixMillis;

const fn at(ms: u64) -> UnixMillis {
    UnixMillis::from_ms(ms)
}

fn secret() -> PairingSecret {
    PairingSecret::from_bytes([3; 32])
}

fn hello(catalog: &[u8]) -> Result<(BrowserSession, Vec<u8>), SealError> {
    BrowserSession::start(
        &secret(),
        SessionId::from_bytes([8; 16]),
        at(1_000),
        at(600_000),
        catalog,
        &mut rand::rng(),
    )
}

#[test]
fn a_hello_of_exactly_the_largest_size_is_made_and_verified_and_one_byte_more_is_not() {
    let overhead = hello(b"").unwrap().1.len();
    let largest = vec![b'x'; MAX_HELLO_BYTES - overhead];
    let (_, bytes) = hello(&largest).unwrap();
    assert_eq!(bytes.len(), MAX_HELLO_BYTES);
    let verified = verify_hello(&secret(), &bytes, at(2_000)).unwrap();
    assert_eq!(verified.catalog(), largest.as_slice());
    let one_more = vec![b'x'; MAX_HELLO_BYTES - overhead + 1];
    assert_eq!(hello(&one_more).unwrap_err(), SealError::TooLong);
    // Past the cap, the size alone refuses it: nothing is parsed.
    let mut oversized = bytes;
    oversized.push(0);
    assert_eq!(
        verify_hello(&secret(), &oversized, at(2_000)).unwrap_err(),
        SealError::TooLong
    );
}

#[test]
fn a_hello_whose_length_field_disagrees_with_its_size_is_refused_as_such() {
    let (_, mut bytes) = hello(b"{}").unwrap();
    bytes.extend_from_slice(&[0; 8]);
    assert_eq!(
        verify_hello(&secret(), &bytes, at(2_000)).unwrap_err(),
        SealError::BadLength
    );
}

#[test]
fn a_hello_is_good_until_its_expiry_plus_the_clock_skew_and_not_a_millisecond_more() {
    let (_, bytes) = hello(b"{}").unwrap();
    let last = at(600_000 + CLOCK_SKEW_MS);
    let verified = verify_hello(&secret(), &bytes, last).unwrap();
    assert_eq!(
        (verified.created_at_ms(), verified.expires_at_ms()),
        (at(1_000), at(600_000))
    );
    assert_eq!(
        verify_hello(&secret(), &bytes, at(600_001 + CLOCK_SKEW_MS)).unwrap_err(),
        SealError::Expired
    );
}

#[test]
fn a_hello_made_up_to_the_clock_skew_ahead_of_the_reader_is_accepted_and_no_further() {
    let (_, bytes) = BrowserSession::start(
        &secret(),
        SessionId::from_bytes([8; 16]),
        at(200_000),
        at(600_000),
        b"{}",
        &mut rand::rng(),
    )
    .unwrap();
    assert!(verify_hello(&secret(), &bytes, at(200_000 - CLOCK_SKEW_MS)).is_ok());
    assert_eq!(
        verify_hello(&secret(), &bytes, at(199_999 - CLOCK_SKEW_MS)).unwrap_err(),
        SealError::BadTimes
    );
}

#[test]
fn sessions_read_back_what_they_were_started_with_and_print_nothing_secret() {
    let (browser, bytes) = hello(b"{}").unwrap();
    let verified = verify_hello(&secret(), &bytes, at(2_000)).unwrap();
    let plugin = PluginSession::start(&secret(), &verified, &mut rand::rng()).unwrap();
    assert_eq!(browser.session_id(), &SessionId::from_bytes([8; 16]));
    assert_eq!(plugin.session_id(), &SessionId::from_bytes([8; 16]));
    assert_eq!(browser.expires_at_ms(), at(600_000));
    assert_eq!(plugin.expires_at_ms(), at(600_000));
    let keys = browser.keys_for(plugin.plugin_public()).unwrap();
    for (name, printed) in [
        ("BrowserSession", format!("{browser:?}")),
        ("PluginSession", format!("{plugin:?}")),
        ("SessionKeys", format!("{keys:?}")),
        ("PairingSecret", format!("{:?}", secret())),
    ] {
        assert!(printed.contains(name), "{printed}");
        assert!(!printed.contains("3, 3, 3"), "{printed}");
    }
    assert!(format!("{:?}", secret()).contains("redacted"));
    assert!(format!("{keys:?}").contains("redacted"));
}

#[test]
fn a_reply_moved_to_another_call_of_the_same_session_is_refused_as_the_wrong_call() {
    let (browser, bytes) = hello(b"{}").unwrap();
    let verified = verify_hello(&secret(), &bytes, at(2_000)).unwrap();
    let plugin = PluginSession::start(&secret(), &verified, &mut rand::rng()).unwrap();
    let keys = browser.keys_for(plugin.plugin_public()).unwrap();
    let first = plugin.call_header(CallId::from_bytes([1; 16]), at(2_000), at(60_000));
    let second = plugin.call_header(CallId::from_bytes([2; 16]), at(2_000), at(60_000));
    let answer = seal_reply(&keys, &first, b"{}", at(3_000), &mut rand::rng()).unwrap();
    assert_eq!(plugin.open_reply(&first, &answer).unwrap(), b"{}");
    assert_eq!(
        plugin.open_reply(&second, &answer).unwrap_err(),
        SealError::WrongCall
    );
    // The same call id with another expiry is another call too.
    let longer = plugin.call_header(CallId::from_bytes([1; 16]), at(2_000), at(70_000));
    let answer = seal_reply(&keys, &longer, b"{}", at(3_000), &mut rand::rng()).unwrap();
    assert_eq!(
        plugin.open_reply(&first, &answer).unwrap_err(),
        SealError::WrongCall
    );
}

#[test]
fn an_origin_prints_and_reads_as_the_text_it_was_made_from() {
    let origin = RelayOrigin::parse("https://relay.example.com:8443").unwrap();
    assert_eq!(origin.to_string(), "https://relay.example.com:8443");
    assert_eq!(AsRef::<str>::as_ref(&origin), origin.as_str());
}

#[test]
fn a_bracketed_host_must_be_a_non_empty_ip_literal() {
    for good in [
        "https://[::1]:8443",
        "https://[2001:db8::1]",
        "http://[::1]:8080",
    ] {
        assert!(validate_relay_origin(good).is_ok(), "{good}");
    }
    for bad in [
        "https://[]",
        "https://[fe80::zz]",
        "https://[relay.example]",
    ] {
        assert_eq!(
            validate_relay_origin(bad).map(|_| ()).unwrap_err(),
            RelayOriginError::Malformed,
            "{bad}"
        );
    }
}
