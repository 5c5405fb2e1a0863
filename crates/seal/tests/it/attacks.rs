//! Attacks on sealed bytes: whatever a relay or a wire does to an envelope or a hello, it either
//! opens to exactly what was sealed or does not open at all.

use proptest::prelude::*;
use sealpost_seal::{
    BrowserSession, CallId, ENVELOPE_OVERHEAD, Header, Kind, PairingCode, PairingSecret,
    PluginSession, SealError, SessionId, SessionKeys, open_call, open_reply, parse_header,
    seal_reply, verify_hello,
};
use sealpost_time::UnixMillis;

/// A time this many milliseconds after the epoch: these fixtures need only order, not dates.
const fn at(ms: u64) -> UnixMillis {
    UnixMillis::from_ms(ms)
}

struct Fixture {
    secret: PairingSecret,
    hello: Vec<u8>,
    browser_keys: SessionKeys,
    plugin: PluginSession,
}

fn fixture(seed: u8) -> Fixture {
    let mut rng = rand::rng();
    let secret = PairingSecret::from_bytes([seed; 32]);
    let (browser, hello) = BrowserSession::start(
        &secret,
        SessionId::from_bytes([seed; 16]),
        at(1_000),
        at(3_600_000),
        b"{\"tools\":[]}",
        &mut rng,
    )
    .unwrap();
    let verified = verify_hello(&secret, &hello, at(2_000)).unwrap();
    let plugin = PluginSession::start(&secret, &verified, &mut rng).unwrap();
    let browser_keys = browser.keys_for(plugin.plugin_public()).unwrap();
    Fixture {
        secret,
        hello,
        browser_keys,
        plugin,
    }
}

fn call(f: &Fixture, call_id: [u8; 16], plaintext: &[u8]) -> (Header, Vec<u8>) {
    let header = f
        .plugin
        .call_header(CallId::from_bytes(call_id), at(2_000), at(60_000));
    let envelope = f
        .plugin
        .seal_call(&header, plaintext, &mut rand::rng())
        .unwrap();
    (header, envelope)
}

fn reply(f: &Fixture, call: &Header, plaintext: &[u8]) -> Vec<u8> {
    seal_reply(
        &f.browser_keys,
        call,
        plaintext,
        at(3_000),
        &mut rand::rng(),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_call_opens_to_exactly_what_was_sealed(plaintext in prop::collection::vec(any::<u8>(), 0..4096)) {
        let f = fixture(1);
        let (header, envelope) = call(&f, [9; 16], &plaintext);
        prop_assert_eq!(envelope.len(), plaintext.len() + ENVELOPE_OVERHEAD);
        let (opened_header, opened) = open_call(&f.browser_keys, &envelope).unwrap();
        prop_assert_eq!(opened_header, header.clone());
        prop_assert_eq!(&opened, &plaintext);
        let answer = reply(&f, &header, &plaintext);
        prop_assert_eq!(f.plugin.open_reply(&header, &answer).unwrap(), plaintext);
    }

    #[test]
    fn any_flipped_bit_in_a_call_stops_it_opening(plaintext in prop::collection::vec(any::<u8>(), 0..512), bit in any::<prop::sample::Index>()) {
        let f = fixture(2);
        let (_, mut envelope) = call(&f, [9; 16], &plaintext);
        let bit = bit.index(envelope.len() * 8);
        envelope[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(open_call(&f.browser_keys, &envelope).is_err());
    }

    #[test]
    fn any_flipped_bit_in_a_reply_stops_it_opening(plaintext in prop::collection::vec(any::<u8>(), 0..512), bit in any::<prop::sample::Index>()) {
        let f = fixture(3);
        let (header, _) = call(&f, [9; 16], b"{}");
        let mut answer = reply(&f, &header, &plaintext);
        let bit = bit.index(answer.len() * 8);
        answer[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(f.plugin.open_reply(&header, &answer).is_err());
    }

    #[test]
    fn a_truncated_or_extended_envelope_does_not_open(plaintext in prop::collection::vec(any::<u8>(), 0..512), cut in any::<prop::sample::Index>(), extra in 1usize..64) {
        let f = fixture(4);
        let (_, envelope) = call(&f, [9; 16], &plaintext);
        let cut = cut.index(envelope.len());
        prop_assert!(open_call(&f.browser_keys, &envelope[..cut]).is_err());
        let mut longer = envelope.clone();
        longer.extend(std::iter::repeat_n(0u8, extra));
        prop_assert!(open_call(&f.browser_keys, &longer).is_err());
    }

    #[test]
    fn any_swapped_header_field_stops_a_call_opening(field in 0usize..5, value in any::<[u8; 32]>()) {
        let f = fixture(5);
        let (header, mut envelope) = call(&f, [9; 16], b"{\"name\":\"x\"}");
        let (start, len) = [(2, 16), (18, 16), (34, 32), (66, 8), (74, 8)][field];
        prop_assume!(envelope[start..start + len] != value[..len]);
        envelope[start..start + len].copy_from_slice(&value[..len]);
        // The expiry must stay after creation, or the parser refuses for that reason instead.
        prop_assume!(parse_header(&envelope).is_ok());
        prop_assert!(open_call(&f.browser_keys, &envelope).is_err());
        prop_assert_ne!(parse_header(&envelope).unwrap(), header);
    }

    #[test]
    fn a_reply_moved_to_another_call_does_not_open(other in any::<[u8; 16]>()) {
        prop_assume!(other != [9; 16]);
        let f = fixture(6);
        let (header, _) = call(&f, [9; 16], b"{}");
        let (other_header, _) = call(&f, other, b"{}");
        let answer = reply(&f, &header, b"result for call 9");
        prop_assert!(f.plugin.open_reply(&other_header, &answer).is_err());
        // Rewriting the moved reply's call_id to match does not help either: the AAD changes.
        let mut rewritten = answer.clone();
        rewritten[18..34].copy_from_slice(&other);
        prop_assert!(f.plugin.open_reply(&other_header, &rewritten).is_err());
    }

    #[test]
    fn any_flipped_bit_in_a_hello_stops_it_verifying(bit in any::<prop::sample::Index>()) {
        let f = fixture(7);
        let mut hello = f.hello.clone();
        let bit = bit.index(hello.len() * 8);
        hello[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(verify_hello(&f.secret, &hello, at(2_000)).is_err());
    }

    #[test]
    fn pairing_code_parsing_never_panics(text in "\\PC{0,200}", bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = PairingCode::parse(&text);
        let encoded = format!("sppair1_{}", base64_url(&bytes));
        let _ = PairingCode::parse(&encoded);
    }
}

#[test]
fn a_parsed_header_reads_back_every_field_it_was_sealed_with() {
    let f = fixture(4);
    let (header, envelope) = call(&f, [5; 16], b"{}");
    let parsed = parse_header(&envelope).unwrap();
    assert_eq!(parsed.kind(), Kind::Call);
    assert_eq!(parsed.session_id(), &SessionId::from_bytes([4; 16]));
    assert_eq!(parsed.call_id(), &CallId::from_bytes([5; 16]));
    assert_eq!(parsed.plugin_public(), f.plugin.plugin_public());
    assert_eq!(parsed.created_at_ms(), at(2_000));
    assert_eq!(parsed.expires_at_ms(), at(60_000));
    assert_eq!(parsed, header);
    let answer = parse_header(&reply(&f, &header, b"{}")).unwrap();
    assert_eq!(answer.kind(), Kind::Reply);
    assert_eq!(
        (answer.call_id(), answer.expires_at_ms()),
        (&CallId::from_bytes([5; 16]), at(60_000))
    );
}

#[test]
fn a_header_that_expires_before_it_was_made_is_refused_both_sealing_and_parsing() {
    let f = fixture(6);
    let seal = |created: u64, expires: u64| {
        let header = f
            .plugin
            .call_header(CallId::from_bytes([6; 16]), at(created), at(expires));
        f.plugin.seal_call(&header, b"{}", &mut rand::rng())
    };
    assert_eq!(seal(2_000, 1_999).unwrap_err(), SealError::BadTimes);
    // An envelope valid for no time at all is odd but not contradictory.
    let instant = seal(2_000, 2_000).unwrap();
    assert_eq!(parse_header(&instant).unwrap().expires_at_ms(), at(2_000));
    // The same contradiction written into a sealed envelope's header by someone on the way:
    // refused before any key is used.
    let mut envelope = seal(2_000, 60_000).unwrap();
    envelope[74..82].copy_from_slice(&1_999u64.to_be_bytes());
    assert_eq!(parse_header(&envelope).unwrap_err(), SealError::BadTimes);
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[test]
fn a_reply_from_another_session_does_not_open() {
    let a = fixture(10);
    let b = fixture(11);
    let (header_a, _) = call(&a, [9; 16], b"{}");
    let (header_b, _) = call(&b, [9; 16], b"{}");
    let answer_b = reply(&b, &header_b, b"b's result");
    assert!(a.plugin.open_reply(&header_a, &answer_b).is_err());
}

#[test]
fn a_call_reflected_as_a_reply_does_not_open() {
    let f = fixture(12);
    let (header, mut envelope) = call(&f, [9; 16], b"{\"name\":\"x\"}");
    envelope[1] = Kind::Reply as u8;
    assert!(open_reply(f.plugin.keys(), &header, &envelope).is_err());
    let answer = reply(&f, &header, b"r");
    let mut reflected = answer.clone();
    reflected[1] = Kind::Call as u8;
    assert!(open_call(&f.browser_keys, &reflected).is_err());
}

#[test]
fn the_same_plugin_key_in_another_session_derives_other_keys() {
    // A plugin that restarts brings a new key; a relay that replays a call into another session
    // of the same pairing finds keys that do not open it.
    let secret = PairingSecret::from_bytes([13; 32]);
    let mut rng = rand::rng();
    let (first, hello) = BrowserSession::start(
        &secret,
        SessionId::from_bytes([1; 16]),
        at(1_000),
        at(3_600_000),
        b"",
        &mut rng,
    )
    .unwrap();
    let (second, _) = BrowserSession::start(
        &secret,
        SessionId::from_bytes([2; 16]),
        at(1_000),
        at(3_600_000),
        b"",
        &mut rng,
    )
    .unwrap();
    let plugin = PluginSession::start(
        &secret,
        &verify_hello(&secret, &hello, at(2_000)).unwrap(),
        &mut rng,
    )
    .unwrap();
    let header = plugin.call_header(CallId::from_bytes([9; 16]), at(2_000), at(60_000));
    let envelope = plugin.seal_call(&header, b"{}", &mut rng).unwrap();
    assert!(open_call(&first.keys_for(plugin.plugin_public()).unwrap(), &envelope).is_ok());
    assert!(open_call(&second.keys_for(plugin.plugin_public()).unwrap(), &envelope).is_err());
}

#[test]
fn an_oversized_envelope_is_refused_before_decryption() {
    use sealpost_seal::{MAX_CALL_ENVELOPE_BYTES, MAX_REPLY_ENVELOPE_BYTES, SealError};
    let f = fixture(14);
    let header = f
        .plugin
        .call_header(CallId::from_bytes([9; 16]), at(2_000), at(60_000));
    let too_big = vec![0u8; MAX_CALL_ENVELOPE_BYTES - ENVELOPE_OVERHEAD + 1];
    assert_eq!(
        f.plugin
            .seal_call(&header, &too_big, &mut rand::rng())
            .unwrap_err(),
        SealError::TooLong
    );
    let just_fits = &too_big[1..];
    let mut envelope = f
        .plugin
        .seal_call(&header, just_fits, &mut rand::rng())
        .unwrap();
    assert!(open_call(&f.browser_keys, &envelope).is_ok());
    envelope.push(0);
    assert_eq!(parse_header(&envelope).unwrap_err(), SealError::TooLong);
    assert_eq!(
        open_call(&f.browser_keys, &envelope).unwrap_err(),
        SealError::TooLong
    );
    // Replies have their own, larger limit.
    let big_result = vec![0u8; MAX_REPLY_ENVELOPE_BYTES - ENVELOPE_OVERHEAD];
    let answer = reply(&f, &header, &big_result);
    assert_eq!(
        f.plugin.open_reply(&header, &answer).unwrap().len(),
        big_result.len()
    );
}
