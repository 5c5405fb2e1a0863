//! Arbitrary text as a pairing code: refuse without panicking; whatever parses re-encodes to a
//! code that parses to the same contents.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sealpost_seal::PairingCode;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for candidate in [text.to_string(), format!("sppair1_{text}")] {
        if let Ok(code) = PairingCode::parse(&candidate) {
            let again = PairingCode::parse(&code.encode()).expect("a parsed code re-encodes");
            assert_eq!(again.relay_origin(), code.relay_origin());
            assert_eq!(again.mcp_token(), code.mcp_token());
            assert_eq!(again.secret(), code.secret());
        }
    }
});
