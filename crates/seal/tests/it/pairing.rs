//! Pairing codes and secrets: round trips, refusals, and secrets that never print.

use sealpost_seal::{
    PairingCode, PairingCodeError, PairingSecret, RelayOrigin, RelayOriginError,
    validate_relay_origin,
};

fn origin(text: &str) -> RelayOrigin {
    RelayOrigin::parse(text).unwrap()
}

fn code() -> PairingCode {
    PairingCode::new(
        origin("https://relay.example.com"),
        "header.payload.sig",
        PairingSecret::from_bytes([7; 32]),
    )
    .unwrap()
}

#[test]
fn a_code_round_trips_and_tolerates_surrounding_whitespace() {
    let text = code().encode();
    assert!(text.starts_with("sppair1_"));
    let parsed = PairingCode::parse(&format!("  {}\n", text.as_str())).unwrap();
    assert_eq!(parsed.relay_origin().as_str(), "https://relay.example.com");
    assert_eq!(parsed.mcp_token(), "header.payload.sig");
    assert_eq!(parsed.secret(), &PairingSecret::from_bytes([7; 32]));
}

#[test]
fn each_refusal_has_its_own_error() {
    let text = code().encode().to_string();
    assert_eq!(
        PairingCode::parse("nope").unwrap_err(),
        PairingCodeError::WrongPrefix
    );
    assert_eq!(
        PairingCode::parse("sppair1_!!").unwrap_err(),
        PairingCodeError::BadEncoding
    );
    assert_eq!(
        PairingCode::parse(&text[..40]).unwrap_err(),
        PairingCodeError::WrongLength
    );
    assert_eq!(
        validate_relay_origin("http://relay.example.com").unwrap_err(),
        RelayOriginError::Insecure
    );
    assert_eq!(
        PairingCode::new(
            origin("https://relay.example.com"),
            "",
            PairingSecret::from_bytes([0; 32])
        )
        .unwrap_err(),
        PairingCodeError::BadToken
    );
}

#[test]
fn debug_output_never_shows_a_secret_or_token() {
    let code = code();
    let printed = format!("{code:?} {:?}", code.secret());
    assert!(!printed.contains("header.payload.sig"), "{printed}");
    assert!(!printed.contains("7, 7"), "{printed}");
    assert!(printed.contains("redacted"));
    // Redacted, not silent: the code's own output names what it is for.
    let alone = format!("{code:?}");
    assert!(alone.contains("PairingCode"), "{alone}");
    assert!(alone.contains("relay.example.com"), "{alone}");
    assert!(alone.contains("<redacted>"), "{alone}");
}

#[test]
fn a_token_is_accepted_up_to_its_cap_and_refused_past_it_or_when_not_printable() {
    let make = |token: &str| {
        PairingCode::new(
            origin("https://relay.example.com"),
            token,
            PairingSecret::from_bytes([1; 32]),
        )
    };
    let at_cap = "t".repeat(4096);
    let parsed = PairingCode::parse(make(&at_cap).unwrap().encode().as_str()).unwrap();
    assert_eq!(parsed.mcp_token(), at_cap);
    assert_eq!(
        make(&"t".repeat(4097)).unwrap_err(),
        PairingCodeError::BadToken
    );
    for unprintable in ["a b", "a\nb", "tok\u{e9}n", "\u{7f}"] {
        assert_eq!(
            make(unprintable).unwrap_err(),
            PairingCodeError::BadToken,
            "{unprintable:?}"
        );
    }
}

#[test]
fn error_messages_never_echo_the_code() {
    let text = code().encode().to_string();
    let damaged = format!("{}x", &text[..text.len() - 1]);
    let message = PairingCode::parse(&damaged)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(!message.contains(&text[10..20]), "{message}");
}

#[test]
fn fingerprints_are_six_digits_and_depend_on_the_origin() {
    let secret = PairingSecret::from_bytes([1; 32]);
    let a = secret.fingerprint(&origin("https://a.example"));
    let b = secret.fingerprint(&origin("https://b.example"));
    assert_eq!(a.len(), 6);
    assert!(a.bytes().all(|c| c.is_ascii_digit()));
    assert_ne!(a, b);
}

#[test]
fn a_relay_origin_too_long_for_the_code_is_refused_not_encoded() {
    // A valid origin of 300 bytes (an IPv6 literal has no length cap of its own) does not fit
    // the code's one-byte length field: building the code refuses it, so `encode` never meets it.
    let long = format!("https://[{}]", "0:".repeat(145));
    assert_eq!(long.len(), 300);
    let long = origin(&long);
    let refused = PairingCode::new(long, "t", PairingSecret::from_bytes([0; 32]));
    assert_eq!(refused.unwrap_err(), PairingCodeError::WrongLength);

    // The longest origin that fits encodes and parses back.
    let longest = origin(&format!("https://[{}]", "0".repeat(255 - 10)));
    assert_eq!(longest.as_str().len(), 255);
    let code = PairingCode::new(longest.clone(), "t", PairingSecret::from_bytes([0; 32])).unwrap();
    let parsed = PairingCode::parse(&code.encode()).unwrap();
    assert_eq!(parsed.relay_origin(), &longest);
}
