//! Envelopes: what the relay stores. A clear header, a random nonce, and an XChaCha20-Poly1305
//! body whose AAD is the header's bytes.
//!
//! ```text
//! offset size
//!  0      1   version = 1
//!  1      1   kind: 1 = call (sealed with k_call), 2 = reply (sealed with k_reply)
//!  2     16   session_id
//! 18     16   call_id
//! 34     32   plugin ephemeral public key A
//! 66      8   created_at_ms (u64 BE)
//! 74      8   expires_at_ms (u64 BE)
//! 82     24   nonce
//! 106   ≥16   ciphertext ‖ Poly1305 tag
//! ```
//!
//! Lengths are checked before any decryption. A reply repeats its call's session_id, call_id, A
//! and expires_at, so it cannot be moved to another call, session or direction.

use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use rand_core::CryptoRng;
use sealpost_time::UnixMillis;

use crate::fields::Fields;
use crate::keys::SessionKeys;
use crate::{CallId, PublicKeyBytes, SealError, SessionId, VERSION};

/// Bytes of the clear header (the AAD).
pub const HEADER_LEN: usize = 82;
/// XChaCha20 nonce length.
pub const NONCE_LEN: usize = 24;
/// Poly1305 tag length.
pub const TAG_LEN: usize = 16;
/// Bytes an envelope adds to its plaintext.
pub const ENVELOPE_OVERHEAD: usize = HEADER_LEN + NONCE_LEN + TAG_LEN;
/// Largest call envelope (tool name and arguments).
pub const MAX_CALL_ENVELOPE_BYTES: usize = 256 * 1024;
/// Largest reply envelope (results may carry document text).
pub const MAX_REPLY_ENVELOPE_BYTES: usize = 2 * 1024 * 1024;

/// Which way an envelope travels; the discriminant is the header's kind byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Plugin → browser, sealed with `k_call`.
    Call = 1,
    /// Browser → plugin, sealed with `k_reply`.
    Reply = 2,
}

impl Kind {
    fn max_envelope_bytes(self) -> usize {
        match self {
            Kind::Call => MAX_CALL_ENVELOPE_BYTES,
            Kind::Reply => MAX_REPLY_ENVELOPE_BYTES,
        }
    }
}

/// An envelope's clear header.
///
/// The fields are read through methods and never set: a call header comes from
/// [`Header::call`] (or [`PluginSession::call_header`](crate::PluginSession::call_header)), a
/// reply header only from [`seal_reply`], and any header from [`parse_header`], so its kind
/// always agrees with the bytes it was made for.
///
/// ```compile_fail
/// use sealpost_seal::{Header, Kind};
/// use sealpost_time::UnixMillis;
///
/// let (created, expires) = (UnixMillis::from_ms(0), UnixMillis::from_ms(1));
/// let mut header = Header::call([1; 16], [2; 16], [3; 32], created, expires);
/// header.kind = Kind::Reply;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    kind: Kind,
    session_id: SessionId,
    call_id: CallId,
    plugin_public: PublicKeyBytes,
    created_at_ms: UnixMillis,
    expires_at_ms: UnixMillis,
}

impl Header {
    /// The header of a call (kind 1) in `session_id`, sealed by the plugin key `plugin_public`.
    pub fn call(
        session_id: SessionId,
        call_id: CallId,
        plugin_public: PublicKeyBytes,
        created_at_ms: UnixMillis,
        expires_at_ms: UnixMillis,
    ) -> Self {
        Self {
            kind: Kind::Call,
            session_id,
            call_id,
            plugin_public,
            created_at_ms,
            expires_at_ms,
        }
    }

    /// Which way the envelope travels.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The session the envelope belongs to.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The call the envelope is, or answers.
    pub fn call_id(&self) -> &CallId {
        &self.call_id
    }

    /// The plugin's ephemeral public key `A` that the call's keys were derived with.
    pub fn plugin_public(&self) -> &PublicKeyBytes {
        &self.plugin_public
    }

    /// When the envelope was sealed.
    pub fn created_at_ms(&self) -> UnixMillis {
        self.created_at_ms
    }

    /// When the call expires (a reply repeats its call's).
    pub fn expires_at_ms(&self) -> UnixMillis {
        self.expires_at_ms
    }

    /// The canonical bytes, which are also the AEAD's associated data.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0] = VERSION;
        out[1] = self.kind as u8;
        out[2..18].copy_from_slice(self.session_id.as_bytes());
        out[18..34].copy_from_slice(self.call_id.as_bytes());
        out[34..66].copy_from_slice(&self.plugin_public);
        out[66..74].copy_from_slice(&self.created_at_ms.to_be_bytes());
        out[74..82].copy_from_slice(&self.expires_at_ms.to_be_bytes());
        out
    }
}

/// Reads and checks an envelope's header and lengths without decrypting: version, kind, the
/// kind's size limit, and room for a nonce and a tag.
pub fn parse_header(envelope: &[u8]) -> Result<Header, SealError> {
    if envelope.len() < ENVELOPE_OVERHEAD {
        return Err(SealError::TooShort);
    }
    if envelope[0] != VERSION {
        return Err(SealError::UnknownVersion(envelope[0]));
    }
    let kind = match envelope[1] {
        1 => Kind::Call,
        2 => Kind::Reply,
        _ => return Err(SealError::BadKind),
    };
    if envelope.len() > kind.max_envelope_bytes() {
        return Err(SealError::TooLong);
    }
    // Past the version and kind bytes; fields in the order of the layout above.
    let mut fields = Fields::new(&envelope[2..]);
    let mut read = || -> Option<Header> {
        Some(Header {
            kind,
            session_id: fields.id()?,
            call_id: fields.id()?,
            plugin_public: fields.array()?,
            created_at_ms: UnixMillis::from_be_bytes(fields.array()?),
            expires_at_ms: UnixMillis::from_be_bytes(fields.array()?),
        })
    };
    let header = read().ok_or(SealError::TooShort)?;
    if header.expires_at_ms < header.created_at_ms {
        return Err(SealError::BadTimes);
    }
    Ok(header)
}

fn seal(
    key: &[u8; 32],
    header: &Header,
    plaintext: &[u8],
    rng: &mut (impl CryptoRng + ?Sized),
) -> Result<Vec<u8>, SealError> {
    let total = ENVELOPE_OVERHEAD + plaintext.len();
    if total > header.kind.max_envelope_bytes() {
        return Err(SealError::TooLong);
    }
    if header.expires_at_ms < header.created_at_ms {
        return Err(SealError::BadTimes);
    }
    let aad = header.to_bytes();
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    // Encrypt in place inside the output buffer: one allocation, no copy of the ciphertext.
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&aad);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(plaintext);
    let tag = XChaCha20Poly1305::new(key.into())
        .encrypt_inout_detached(
            &nonce.into(),
            &aad,
            (&mut out[HEADER_LEN + NONCE_LEN..]).into(),
        )
        .expect("XChaCha20-Poly1305 encrypts any length below its limit");
    out.extend_from_slice(&tag);
    Ok(out)
}

/// Decrypts an envelope whose header the caller has already parsed (so its lengths are checked).
fn open(key: &[u8; 32], envelope: &[u8]) -> Result<Vec<u8>, SealError> {
    let (aad, rest) = envelope
        .split_first_chunk::<HEADER_LEN>()
        .ok_or(SealError::TooShort)?;
    let (nonce, sealed) = rest
        .split_first_chunk::<NONCE_LEN>()
        .ok_or(SealError::TooShort)?;
    let (ciphertext, tag) = sealed
        .split_last_chunk::<TAG_LEN>()
        .ok_or(SealError::TooShort)?;
    let mut plaintext = ciphertext.to_vec();
    XChaCha20Poly1305::new(key.into())
        .decrypt_inout_detached(
            &(*nonce).into(),
            aad,
            plaintext.as_mut_slice().into(),
            &(*tag).into(),
        )
        .map_err(|_| SealError::Undecryptable)?;
    Ok(plaintext)
}

/// Seals a call under `k_call` (24 nonce bytes drawn). `header.kind` must be [`Kind::Call`].
pub fn seal_call(
    keys: &SessionKeys,
    header: &Header,
    plaintext: &[u8],
    rng: &mut (impl CryptoRng + ?Sized),
) -> Result<Vec<u8>, SealError> {
    if header.kind != Kind::Call {
        return Err(SealError::WrongKind);
    }
    seal(&keys.call, header, plaintext, rng)
}

/// Opens a call under `k_call`. The caller has chosen `keys` by the header's session and plugin
/// key (see [`parse_header`]) and judges replay and expiry itself.
pub fn open_call(keys: &SessionKeys, envelope: &[u8]) -> Result<(Header, Vec<u8>), SealError> {
    let header = parse_header(envelope)?;
    if header.kind != Kind::Call {
        return Err(SealError::WrongKind);
    }
    open(&keys.call, envelope).map(|plaintext| (header, plaintext))
}

/// Seals the reply to `call` under `k_reply`: the reply's header repeats the call's session,
/// call id, plugin key and expiry, with `created_at_ms` set to now (24 nonce bytes drawn).
pub fn seal_reply(
    keys: &SessionKeys,
    call: &Header,
    plaintext: &[u8],
    created_at_ms: UnixMillis,
    rng: &mut (impl CryptoRng + ?Sized),
) -> Result<Vec<u8>, SealError> {
    let header = Header {
        kind: Kind::Reply,
        created_at_ms: created_at_ms.min(call.expires_at_ms),
        ..call.clone()
    };
    seal(&keys.reply, &header, plaintext, rng)
}

/// Opens the reply to `call` under `k_reply`, refusing one that names another session or call.
pub fn open_reply(
    keys: &SessionKeys,
    call: &Header,
    envelope: &[u8],
) -> Result<Vec<u8>, SealError> {
    let header = parse_header(envelope)?;
    if header.kind != Kind::Reply {
        return Err(SealError::WrongKind);
    }
    if header.session_id != call.session_id {
        return Err(SealError::WrongSession);
    }
    if header.call_id != call.call_id
        || header.plugin_public != call.plugin_public
        || header.expires_at_ms != call.expires_at_ms
    {
        return Err(SealError::WrongCall);
    }
    open(&keys.reply, envelope)
}
