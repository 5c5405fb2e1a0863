//! The two primitives the key schedule is built from: HKDF-SHA256 with 32 bytes out, and
//! HMAC-SHA256.

use hkdf::Hkdf;
use hmac::{KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

/// Every label is `"sealpost/v1 " ‖ name`.
pub(crate) const LABEL_PAIR_ID: &[u8] = b"sealpost/v1 pair-id";
pub(crate) const LABEL_FINGERPRINT: &[u8] = b"sealpost/v1 fingerprint";
pub(crate) const LABEL_HELLO: &[u8] = b"sealpost/v1 hello";
pub(crate) const LABEL_CATALOG: &[u8] = b"sealpost/v1 catalog";
pub(crate) const LABEL_CATALOG_UPDATE: &[u8] = b"sealpost/v1 catalog update";
pub(crate) const LABEL_CALL: &[u8] = b"sealpost/v1 plugin->browser";
pub(crate) const LABEL_REPLY: &[u8] = b"sealpost/v1 browser->plugin";

/// `HKDF(ikm, salt, info)` with 32 bytes out. An empty salt is HKDF's default (zeros).
pub(crate) fn hkdf32(ikm: &[u8], salt: &[u8], info: &[&[u8]]) -> Zeroizing<[u8; 32]> {
    let hk = Hkdf::<Sha256>::new(Some(salt), ikm);
    let mut out = Zeroizing::new([0u8; 32]);
    hk.expand_multi_info(info, out.as_mut())
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    out
}

pub(crate) fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Constant-time HMAC check.
pub(crate) fn hmac_sha256_verify(key: &[u8; 32], message: &[u8], tag: &[u8]) -> bool {
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    mac.update(message);
    mac.verify_slice(tag).is_ok()
}
