//! Arbitrary bytes as an envelope: the parser and both openers must refuse without panicking,
//! and nothing but a genuinely sealed envelope may open.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sealpost_seal::{BrowserSession, CallId, Header, SessionId, PairingSecret, PluginSession, SessionKeys, open_call, parse_header, verify_hello};
use sealpost_time::UnixMillis;

struct Fixture {
    browser_keys: SessionKeys,
    plugin: PluginSession,
    call: Header,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
        let secret = PairingSecret::from_bytes([1; 32]);
        let (browser, hello) = BrowserSession::start(&secret, SessionId::from_bytes([2; 16]), UnixMillis::from_ms(1_000), UnixMillis::from_ms(3_600_000), b"", &mut rng).unwrap();
        let plugin = PluginSession::start(&secret, &verify_hello(&secret, &hello, UnixMillis::from_ms(2_000)).unwrap(), &mut rng).unwrap();
        let browser_keys = browser.keys_for(plugin.plugin_public()).unwrap();
        let call = plugin.call_header(CallId::from_bytes([3; 16]), UnixMillis::from_ms(2_000), UnixMillis::from_ms(60_000));
        Fixture { browser_keys, plugin, call }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    if let Ok(header) = parse_header(data) {
        assert_eq!(&header.to_bytes()[..], &data[..sealpost_seal::HEADER_LEN]);
    }
    assert!(open_call(&f.browser_keys, data).is_err(), "forged a call");
    assert!(f.plugin.open_reply(&f.call, data).is_err(), "forged a reply");
});
