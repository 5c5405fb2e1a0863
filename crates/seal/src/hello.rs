//! The session hello: what the browser publishes (through the relay) to start a session.
//!
//! ```text
//! offset size
//!  0      1   version = 1
//!  1     16   session_id
//! 17     16   pair_id
//! 33     32   browser ephemeral public key B
//! 65      8   created_at_ms (u64 BE)
//! 73      8   expires_at_ms (u64 BE)
//! 81      4   sealed_catalog_len n (u32 BE)
//! 85      n   sealed_catalog = nonce (24) ‖ XChaCha20-Poly1305(catalog) (≥ 16)
//! 85+n   32   tag = HMAC-SHA256(HKDF(P, "sealpost/v1 hello"), bytes 0 .. 85+n)
//! ```
//!
//! The catalog key is `HKDF(P, salt = session_id, "sealpost/v1 catalog")` and its AAD is bytes
//! 0..81. The catalog has no forward secrecy, so it must hold tool descriptions only.

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use rand_core::CryptoRng;
use sealpost_time::UnixMillis;

use crate::envelope::{NONCE_LEN, TAG_LEN};
use crate::fields::Fields;
use crate::kdf::{LABEL_CATALOG, LABEL_HELLO, hkdf32, hmac_sha256, hmac_sha256_verify};
use crate::secret::{PairId, PairingSecret};
use crate::{CLOCK_SKEW_MS, PublicKeyBytes, SealError, SessionId, VERSION};

/// Bytes before the sealed catalog.
pub const HELLO_HEADER_LEN: usize = 85;
/// The part of the header the catalog's AAD covers (everything but the catalog length).
const HELLO_AAD_LEN: usize = 81;
const HELLO_TAG_LEN: usize = 32;
/// Largest hello, in bytes.
pub const MAX_HELLO_BYTES: usize = 64 * 1024;
const MIN_HELLO_BYTES: usize = HELLO_HEADER_LEN + NONCE_LEN + TAG_LEN + HELLO_TAG_LEN;

/// A hello whose tag, pairing and times checked out, with its catalog opened.
///
/// Proof that [`verify_hello`] accepted it: the fields are private and nothing else builds
/// one, and [`PluginSession::start`](crate::PluginSession::start) demands one, so a plugin
/// cannot derive keys from a hello it has not checked.
///
/// ```
/// use rand_core::CryptoRng;
/// use sealpost_seal::{PairingSecret, PluginSession, SealError, verify_hello};
/// use sealpost_time::UnixMillis;
///
/// fn join(
///     secret: &PairingSecret,
///     hello: &[u8],
///     now_ms: UnixMillis,
///     rng: &mut impl CryptoRng,
/// ) -> Result<PluginSession, SealError> {
///     let verified = verify_hello(secret, hello, now_ms)?;
///     PluginSession::start(secret, &verified, rng)
/// }
/// ```
///
/// A struct literal does not compile, outside this crate:
///
/// ```compile_fail
/// use sealpost_seal::VerifiedHello;
/// use sealpost_time::UnixMillis;
///
/// let forged = VerifiedHello {
///     session_id: [0; 16],
///     pair_id: [0; 16],
///     browser_public: [9; 32],
///     created_at_ms: UnixMillis::EPOCH,
///     expires_at_ms: UnixMillis::MAX,
///     catalog: Vec::new(),
/// };
/// ```
///
/// Nor does starting a session from hello bytes that were never verified:
///
/// ```compile_fail
/// use rand_core::CryptoRng;
/// use sealpost_seal::{PairingSecret, PluginSession, SealError};
///
/// fn join(
///     secret: &PairingSecret,
///     hello: &[u8],
///     rng: &mut impl CryptoRng,
/// ) -> Result<PluginSession, SealError> {
///     PluginSession::start(secret, hello, rng)
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedHello {
    session_id: SessionId,
    pair_id: PairId,
    browser_public: PublicKeyBytes,
    created_at_ms: UnixMillis,
    expires_at_ms: UnixMillis,
    catalog: Vec<u8>,
}

impl VerifiedHello {
    /// The session the hello announces (chosen by the browser).
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The pairing the hello is for; always this pairing's own `pair_id`.
    pub fn pair_id(&self) -> &PairId {
        &self.pair_id
    }

    /// The browser's ephemeral X25519 public key `B`.
    pub fn browser_public(&self) -> &PublicKeyBytes {
        &self.browser_public
    }

    /// When the browser made the hello.
    pub fn created_at_ms(&self) -> UnixMillis {
        self.created_at_ms
    }

    /// When the session ends.
    pub fn expires_at_ms(&self) -> UnixMillis {
        self.expires_at_ms
    }

    /// The catalog's plaintext (JSON, defined by the protocol crate).
    pub fn catalog(&self) -> &[u8] {
        &self.catalog
    }
}

/// The fields a hello carries in the clear.
pub(crate) struct HelloFields {
    pub session_id: SessionId,
    pub pair_id: PairId,
    pub browser_public: PublicKeyBytes,
    pub created_at_ms: UnixMillis,
    pub expires_at_ms: UnixMillis,
}

pub(crate) fn build_hello(
    secret: &PairingSecret,
    fields: &HelloFields,
    catalog: &[u8],
    rng: &mut (impl CryptoRng + ?Sized),
) -> Result<Vec<u8>, SealError> {
    if fields.expires_at_ms <= fields.created_at_ms {
        return Err(SealError::BadTimes);
    }
    let sealed_len = NONCE_LEN + catalog.len() + TAG_LEN;
    let total = HELLO_HEADER_LEN + sealed_len + HELLO_TAG_LEN;
    if total > MAX_HELLO_BYTES {
        return Err(SealError::TooLong);
    }
    let mut out = Vec::with_capacity(total);
    out.push(VERSION);
    out.extend_from_slice(fields.session_id.as_bytes());
    out.extend_from_slice(fields.pair_id.as_bytes());
    out.extend_from_slice(&fields.browser_public);
    out.extend_from_slice(&fields.created_at_ms.to_be_bytes());
    out.extend_from_slice(&fields.expires_at_ms.to_be_bytes());
    out.extend_from_slice(
        &u32::try_from(sealed_len)
            .expect("bounded by MAX_HELLO_BYTES")
            .to_be_bytes(),
    );

    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    let cipher = catalog_cipher(secret, &fields.session_id);
    let aad = out[..HELLO_AAD_LEN].to_vec();
    let sealed = cipher
        .encrypt(
            &nonce.into(),
            Payload {
                msg: catalog,
                aad: &aad,
            },
        )
        .expect("XChaCha20-Poly1305 encrypts any length below its limit");
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);

    let tag = hmac_sha256(&hello_key(secret), &out);
    out.extend_from_slice(&tag);
    Ok(out)
}

/// Checks a hello on the plugin side: layout, tag (under this pairing's secret), pairing, times,
/// then opens the catalog. `now_ms` is the relay's clock when known, else the local one.
pub fn verify_hello(
    secret: &PairingSecret,
    hello: &[u8],
    now_ms: UnixMillis,
) -> Result<VerifiedHello, SealError> {
    if hello.len() < MIN_HELLO_BYTES {
        return Err(SealError::TooShort);
    }
    if hello.len() > MAX_HELLO_BYTES {
        return Err(SealError::TooLong);
    }
    if hello[0] != VERSION {
        return Err(SealError::UnknownVersion(hello[0]));
    }
    // Past the version byte; fields in the order of the layout above.
    let mut read = Fields::new(&hello[1..]);
    let mut header = || -> Option<(HelloFields, u32)> {
        let fields = HelloFields {
            session_id: read.id()?,
            pair_id: read.id()?,
            browser_public: read.array()?,
            created_at_ms: UnixMillis::from_be_bytes(read.array()?),
            expires_at_ms: UnixMillis::from_be_bytes(read.array()?),
        };
        Some((fields, u32::from_be_bytes(read.array()?)))
    };
    let (fields, sealed_len) = header().ok_or(SealError::TooShort)?;
    let sealed_len = sealed_len as usize;
    if HELLO_HEADER_LEN
        .checked_add(sealed_len)
        .and_then(|n| n.checked_add(HELLO_TAG_LEN))
        != Some(hello.len())
        || sealed_len < NONCE_LEN + TAG_LEN
    {
        return Err(SealError::BadLength);
    }
    let (signed, tag) = hello
        .split_last_chunk::<HELLO_TAG_LEN>()
        .ok_or(SealError::TooShort)?;
    if !hmac_sha256_verify(&hello_key(secret), signed, tag) {
        return Err(SealError::BadHelloTag);
    }

    if fields.pair_id != secret.pair_id() {
        return Err(SealError::WrongPairing);
    }
    if fields.expires_at_ms <= fields.created_at_ms
        || fields.created_at_ms > now_ms.saturating_add_ms(CLOCK_SKEW_MS)
    {
        return Err(SealError::BadTimes);
    }
    if now_ms > fields.expires_at_ms.saturating_add_ms(CLOCK_SKEW_MS) {
        return Err(SealError::Expired);
    }

    let mut sealed = Fields::new(&signed[HELLO_HEADER_LEN..]);
    let nonce: [u8; NONCE_LEN] = sealed.array().ok_or(SealError::TooShort)?;
    let body = sealed.rest();
    let catalog = catalog_cipher(secret, &fields.session_id)
        .decrypt(
            &nonce.into(),
            Payload {
                msg: body,
                aad: &hello[..HELLO_AAD_LEN],
            },
        )
        .map_err(|_| SealError::Undecryptable)?;

    Ok(VerifiedHello {
        session_id: fields.session_id,
        pair_id: fields.pair_id,
        browser_public: fields.browser_public,
        created_at_ms: fields.created_at_ms,
        expires_at_ms: fields.expires_at_ms,
        catalog,
    })
}

fn hello_key(secret: &PairingSecret) -> zeroize::Zeroizing<[u8; 32]> {
    hkdf32(secret.expose(), &[], &[LABEL_HELLO])
}

fn catalog_cipher(secret: &PairingSecret, session_id: &SessionId) -> XChaCha20Poly1305 {
    let key = hkdf32(secret.expose(), session_id.as_bytes(), &[LABEL_CATALOG]);
    XChaCha20Poly1305::new(&(*key).into())
}
