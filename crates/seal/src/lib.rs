//! Sealpost's cryptographic core. Pure: no I/O, no clock reads, no OS randomness. Time is a
//! parameter (a `sealpost_time::UnixMillis`) and randomness is a `&mut impl CryptoRng`, so the known-answer
//! vectors in `tests/vectors.json` can pin every nonce and ephemeral key.
//!
//! The pieces, in the order a session uses them:
//! - [`PairingSecret`] and [`PairingCode`]: the 32-byte secret `P` one plugin and one browser
//!   share, its routing handle [`PairingSecret::pair_id`] and its human [`PairingSecret::fingerprint`].
//! - [`BrowserSession::start`] makes the session hello the browser publishes;
//!   [`verify_hello`] checks it on the plugin side and [`PluginSession::start`] derives the
//!   plugin's keys from it.
//! - [`BrowserSession::seal_catalog_update`] seals the session's tool list again when it
//!   changes; [`open_catalog_update`] opens it on the plugin side.
//! - [`seal_call`], [`open_call`], [`seal_reply`], [`open_reply`]: envelopes, one key per
//!   direction. [`parse_header`] reads an envelope's clear header without decrypting.
//!
//! docs/PROTOCOL.md gives every byte layout and label.

#![warn(missing_docs)]

mod catalog;
mod code;
mod envelope;
mod error;
mod fields;
mod hello;
mod kdf;
mod keys;
mod origin;
mod secret;

pub use catalog::{
    CATALOG_UPDATE_HEADER_LEN, MAX_CATALOG_UPDATE_BYTES, VerifiedCatalogUpdate, open_catalog_update,
};
pub use code::{PAIRING_CODE_PREFIX, PairingCode};
pub use envelope::{
    ENVELOPE_OVERHEAD, HEADER_LEN, Header, Kind, MAX_CALL_ENVELOPE_BYTES, MAX_REPLY_ENVELOPE_BYTES,
    NONCE_LEN, TAG_LEN, open_call, open_reply, parse_header, seal_call, seal_reply,
};
pub use error::{PairingCodeError, RelayOriginError, SealError};
pub use hello::{HELLO_HEADER_LEN, MAX_HELLO_BYTES, VerifiedHello, verify_hello};
pub use keys::{BrowserSession, PluginSession, SessionKeys};
pub use origin::{RelayOrigin, validate_relay_origin};
pub use secret::PairingSecret;

/// Version byte of every binary record this crate writes.
pub const VERSION: u8 = 1;

/// Tolerance allowed when judging another party's timestamps, in milliseconds.
pub const CLOCK_SKEW_MS: u64 = 120_000;

/// Session ids are chosen by the browser, call ids by the plugin, pair ids derived from `P`;
/// each is its own type so one cannot be passed for another.
pub use sealpost_ids::{CallId, ID_LEN, PairId, SessionId};
/// An X25519 public key.
pub type PublicKeyBytes = [u8; 32];
