//! A catalog update: a live session's tool list, sealed again when it changes (a tool
//! registered or withdrawn, a grant given or taken), so the session goes on and calls in
//! flight are not cancelled.
//!
//! ```text
//! offset size
//!  0      1   version = 1
//!  1     16   session_id
//! 17     16   pair_id
//! 33      8   seq (u64 BE): 1, 2, …; the hello's own catalog counts as 0
//! 41      8   created_at_ms (u64 BE)
//! 49     24   nonce
//! 73      n   XChaCha20-Poly1305(catalog) (n ≥ 16)
//! ```
//!
//! The key is `HKDF(P, salt = session_id, "sealpost/v1 catalog update")` and the AAD is bytes
//! 0..49, so an update opens only for its own pairing and session, and its number cannot be
//! changed. The relay can withhold an update or serve an older one; the plugin keeps the
//! highest number it has opened for a session and refuses anything older, so the list cannot
//! be rolled back. Like the hello's catalog it has no forward secrecy: tool descriptions only.

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use rand_core::CryptoRng;
use sealpost_time::UnixMillis;

use crate::envelope::{NONCE_LEN, TAG_LEN};
use crate::fields::Fields;
use crate::hello::{MAX_HELLO_BYTES, VerifiedHello};
use crate::kdf::{LABEL_CATALOG_UPDATE, hkdf32};
use crate::secret::{PairId, PairingSecret};
use crate::{SealError, SessionId, VERSION};

/// Bytes before the sealed catalog: the AAD.
pub const CATALOG_UPDATE_HEADER_LEN: usize = 49;
/// Largest catalog update, in bytes (as large as a hello).
pub const MAX_CATALOG_UPDATE_BYTES: usize = MAX_HELLO_BYTES;
const MIN_CATALOG_UPDATE_BYTES: usize = CATALOG_UPDATE_HEADER_LEN + NONCE_LEN + TAG_LEN;

/// A catalog update that opened for this pairing and session.
///
/// Proof that [`open_catalog_update`] accepted it: the fields are private and nothing else
/// builds one.
///
/// ```compile_fail
/// use sealpost_seal::VerifiedCatalogUpdate;
/// use sealpost_time::UnixMillis;
///
/// let forged = VerifiedCatalogUpdate { seq: 9, created_at_ms: UnixMillis::EPOCH, catalog: vec![] };
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedCatalogUpdate {
    seq: u64,
    created_at_ms: UnixMillis,
    catalog: Vec<u8>,
}

impl VerifiedCatalogUpdate {
    /// The update's number in its session (1 or more; the hello's catalog is 0).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// When the browser sealed it.
    pub fn created_at_ms(&self) -> UnixMillis {
        self.created_at_ms
    }

    /// The catalog's plaintext (JSON, defined by the protocol crate).
    pub fn catalog(&self) -> &[u8] {
        &self.catalog
    }
}

fn update_cipher(secret: &PairingSecret, session_id: &SessionId) -> XChaCha20Poly1305 {
    let key = hkdf32(
        secret.expose(),
        session_id.as_bytes(),
        &[LABEL_CATALOG_UPDATE],
    );
    XChaCha20Poly1305::new(&(*key).into())
}

/// Seals update number `seq` (1 or more) of `session_id`'s catalog. Draws the 24-byte nonce.
pub(crate) fn seal_catalog_update(
    secret: &PairingSecret,
    session_id: &SessionId,
    pair_id: &PairId,
    seq: u64,
    created_at_ms: UnixMillis,
    catalog: &[u8],
    rng: &mut (impl CryptoRng + ?Sized),
) -> Result<Vec<u8>, SealError> {
    if seq == 0 {
        return Err(SealError::BadSequence);
    }
    let total = MIN_CATALOG_UPDATE_BYTES + catalog.len();
    if total > MAX_CATALOG_UPDATE_BYTES {
        return Err(SealError::TooLong);
    }
    let mut out = Vec::with_capacity(total);
    out.push(VERSION);
    out.extend_from_slice(session_id.as_bytes());
    out.extend_from_slice(pair_id.as_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&created_at_ms.to_be_bytes());
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    let sealed = update_cipher(secret, session_id)
        .encrypt(
            &nonce.into(),
            Payload {
                msg: catalog,
                aad: &out,
            },
        )
        .expect("XChaCha20-Poly1305 encrypts any length below its limit");
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// Opens a catalog update on the plugin side: layout, this pairing, the session of `hello`, a
/// number of 1 or more, then the catalog. Whether the number is newer than what the plugin
/// already has is the plugin's to judge.
pub fn open_catalog_update(
    secret: &PairingSecret,
    hello: &VerifiedHello,
    update: &[u8],
) -> Result<VerifiedCatalogUpdate, SealError> {
    if update.len() < MIN_CATALOG_UPDATE_BYTES {
        return Err(SealError::TooShort);
    }
    if update.len() > MAX_CATALOG_UPDATE_BYTES {
        return Err(SealError::TooLong);
    }
    if update[0] != VERSION {
        return Err(SealError::UnknownVersion(update[0]));
    }
    // Past the version byte; fields in the order of the layout above.
    let mut fields = Fields::new(&update[1..]);
    let session_id: SessionId = fields.id().ok_or(SealError::TooShort)?;
    let pair_id: PairId = fields.id().ok_or(SealError::TooShort)?;
    if pair_id != secret.pair_id() {
        return Err(SealError::WrongPairing);
    }
    if &session_id != hello.session_id() {
        return Err(SealError::WrongSession);
    }
    let seq = u64::from_be_bytes(fields.array().ok_or(SealError::TooShort)?);
    if seq == 0 {
        return Err(SealError::BadSequence);
    }
    let created_at_ms = UnixMillis::from_be_bytes(fields.array().ok_or(SealError::TooShort)?);
    let nonce: [u8; NONCE_LEN] = fields.array().ok_or(SealError::TooShort)?;
    let body = fields.rest();
    let aad = &update[..CATALOG_UPDATE_HEADER_LEN];
    let catalog = update_cipher(secret, &session_id)
        .decrypt(&nonce.into(), Payload { msg: body, aad })
        .map_err(|_| SealError::Undecryptable)?;
    Ok(VerifiedCatalogUpdate {
        seq,
        created_at_ms,
        catalog,
    })
}
