//! Pairing codes and secrets: round trips, refusals, and secrets that never print.

use sealpost_seal::{PairingCode, PairingCodeError, PairingSecret, RelayOriginError};

fn code() -> PairingCode {
    PairingCode::new(
        "https://relay.example.com",
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
    assert_eq!(parsed.relay_origin, "https://relay.example.com");
    assert_eq!(parsed.mcp_token.as_str(), "header.payload.sig");
    assert_eq!(parsed.secret, PairingSecret::from_bytes([7; 32]));
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
        PairingCode::new(
            "http://relay.example.com",
            "t",
            PairingSecret::from_bytes([0; 32])
        )
        .unwrap_err(),
        PairingCodeError::RelayOrigin(RelayOriginError::Insecure)
    );
    assert_eq!(
        PairingCode::new(
            "https://relay.example.com",
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
    let printed = format!("{code:?} {:?}", code.secret);
    assert!(!printed.contains("header.payload.sig"), "{printed}");
    assert!(!printed.contains("7, 7"), "{printed}");
    assert!(printed.contains("redacted"));
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
    let a = secret.fingerprint("https://a.example");
    let b = secret.fingerprint("https://b.example");
    assert_eq!(a.len(), 6);
    assert!(a.bytes().all(|c| c.is_ascii_digit()));
    assert_ne!(a, b);
}
