//! Session keys: each end's ephemeral X25519 key, the transcript, and one key per direction.
//!
//! ```text
//! transcript = SHA-256(version ‖ pair_id ‖ session_id ‖ B ‖ A ‖ expires_at_ms (u64 BE))
//! k_call     = HKDF(ikm = DH(a, B) ‖ P, salt = transcript, "sealpost/v1 plugin->browser")
//! k_reply    = HKDF(ikm = DH(a, B) ‖ P, salt = transcript, "sealpost/v1 browser->plugin")
//! ```
//!
//! `P` in the ikm means a relay that swaps in its own `B` or `A` still cannot derive the keys;
//! the ephemeral DH gives each session forward secrecy against a later leak of `P`.

use std::fmt;

use rand_core::CryptoRng;
use sealpost_time::UnixMillis;
use sha2::{Digest, Sha256};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::envelope::{self, Header};
use crate::hello::{HelloFields, VerifiedHello, build_hello};
use crate::kdf::{LABEL_CALL, LABEL_REPLY, hkdf32};
use crate::secret::{PairId, PairingSecret};
use crate::{CallId, PublicKeyBytes, SealError, SessionId, VERSION};

/// The two keys of one (session, plugin key) pair. `call` seals plugin → browser, `reply` seals
/// browser → plugin; a relay cannot reflect one direction into the other.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct SessionKeys {
    pub(crate) call: [u8; 32],
    pub(crate) reply: [u8; 32],
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKeys(<redacted>)")
    }
}

impl SessionKeys {
    /// The raw keys, for known-answer tests and second implementations. Keep them secret.
    pub fn expose(&self) -> (&[u8; 32], &[u8; 32]) {
        (&self.call, &self.reply)
    }
}

struct Transcript<'a> {
    pair_id: &'a PairId,
    session_id: &'a SessionId,
    browser_public: &'a PublicKeyBytes,
    plugin_public: &'a PublicKeyBytes,
    expires_at_ms: UnixMillis,
}

fn derive_keys(
    own_secret: &StaticSecret,
    peer_public: &PublicKeyBytes,
    pairing: &PairingSecret,
    t: &Transcript<'_>,
) -> Result<SessionKeys, SealError> {
    let shared = own_secret.diffie_hellman(&PublicKey::from(*peer_public));
    if !shared.was_contributory() {
        return Err(SealError::NonContributory);
    }
    let transcript: [u8; 32] = Sha256::new()
        .chain_update([VERSION])
        .chain_update(t.pair_id)
        .chain_update(t.session_id)
        .chain_update(t.browser_public)
        .chain_update(t.plugin_public)
        .chain_update(t.expires_at_ms.to_be_bytes())
        .finalize()
        .into();
    let mut ikm = Zeroizing::new([0u8; 64]);
    ikm[..32].copy_from_slice(shared.as_bytes());
    ikm[32..].copy_from_slice(pairing.expose());
    Ok(SessionKeys {
        call: *hkdf32(ikm.as_ref(), &transcript, &[LABEL_CALL]),
        reply: *hkdf32(ikm.as_ref(), &transcript, &[LABEL_REPLY]),
    })
}

fn random_secret(rng: &mut (impl CryptoRng + ?Sized)) -> StaticSecret {
    let mut bytes = Zeroizing::new([0u8; 32]);
    rng.fill_bytes(bytes.as_mut());
    StaticSecret::from(*bytes)
}

/// The browser's side of one session: its ephemeral key and the hello it published.
pub struct BrowserSession {
    pairing: PairingSecret,
    secret: StaticSecret,
    public: PublicKeyBytes,
    session_id: SessionId,
    pair_id: PairId,
    expires_at_ms: UnixMillis,
}

impl fmt::Debug for BrowserSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrowserSession")
            .field("session_id", &self.session_id)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

impl BrowserSession {
    /// Starts a session: a fresh ephemeral key and the hello to publish (with the catalog
    /// plaintext sealed into it). Randomness is drawn as: ephemeral secret (32), catalog nonce (24).
    pub fn start(
        pairing: &PairingSecret,
        session_id: SessionId,
        created_at_ms: UnixMillis,
        expires_at_ms: UnixMillis,
        catalog: &[u8],
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<(Self, Vec<u8>), SealError> {
        let secret = random_secret(rng);
        let public = PublicKey::from(&secret).to_bytes();
        let pair_id = pairing.pair_id();
        let fields = HelloFields {
            session_id,
            pair_id,
            browser_public: public,
            created_at_ms,
            expires_at_ms,
        };
        let hello = build_hello(pairing, &fields, catalog, rng)?;
        let session = Self {
            pairing: pairing.clone(),
            secret,
            public,
            session_id,
            pair_id,
            expires_at_ms,
        };
        Ok((session, hello))
    }

    /// Seals update number `seq` (1, 2, …, one more for each change) of this session's tool
    /// list, for the relay to hand the plugin instead of the hello's catalog. Draws the
    /// 24-byte nonce.
    pub fn seal_catalog_update(
        &self,
        seq: u64,
        created_at_ms: UnixMillis,
        catalog: &[u8],
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Vec<u8>, SealError> {
        crate::catalog::seal_catalog_update(
            &self.pairing,
            &self.session_id,
            &self.pair_id,
            seq,
            created_at_ms,
            catalog,
            rng,
        )
    }

    /// The session's id.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// When the session ends.
    pub fn expires_at_ms(&self) -> UnixMillis {
        self.expires_at_ms
    }

    /// The keys for calls sealed by the plugin key `plugin_public` (found in each call's header).
    /// Callers cache these; deriving them costs one X25519 operation.
    pub fn keys_for(&self, plugin_public: &PublicKeyBytes) -> Result<SessionKeys, SealError> {
        let transcript = Transcript {
            pair_id: &self.pair_id,
            session_id: &self.session_id,
            browser_public: &self.public,
            plugin_public,
            expires_at_ms: self.expires_at_ms,
        };
        derive_keys(&self.secret, plugin_public, &self.pairing, &transcript)
    }
}

/// The plugin's side of one session: its ephemeral public key and the derived keys.
pub struct PluginSession {
    keys: SessionKeys,
    plugin_public: PublicKeyBytes,
    session_id: SessionId,
    expires_at_ms: UnixMillis,
}

impl fmt::Debug for PluginSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginSession")
            .field("session_id", &self.session_id)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

impl PluginSession {
    /// Joins the session a verified hello announces with a fresh ephemeral key (32 bytes drawn).
    /// The ephemeral secret is dropped (and zeroized) once the keys are derived.
    pub fn start(
        pairing: &PairingSecret,
        hello: &VerifiedHello,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Self, SealError> {
        let secret = random_secret(rng);
        let plugin_public = PublicKey::from(&secret).to_bytes();
        let transcript = Transcript {
            pair_id: hello.pair_id(),
            session_id: hello.session_id(),
            browser_public: hello.browser_public(),
            plugin_public: &plugin_public,
            expires_at_ms: hello.expires_at_ms(),
        };
        let keys = derive_keys(&secret, hello.browser_public(), pairing, &transcript)?;
        Ok(Self {
            keys,
            plugin_public,
            session_id: *hello.session_id(),
            expires_at_ms: hello.expires_at_ms(),
        })
    }

    /// The derived keys, for the free functions such as [`crate::seal_call`].
    pub fn keys(&self) -> &SessionKeys {
        &self.keys
    }

    /// This plugin's ephemeral public key `A`, sent in every call header.
    pub fn plugin_public(&self) -> &PublicKeyBytes {
        &self.plugin_public
    }

    /// The session's id.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// When the session ends.
    pub fn expires_at_ms(&self) -> UnixMillis {
        self.expires_at_ms
    }

    /// The header of a new call in this session.
    pub fn call_header(
        &self,
        call_id: CallId,
        created_at_ms: UnixMillis,
        expires_at_ms: UnixMillis,
    ) -> Header {
        Header::call(
            self.session_id,
            call_id,
            self.plugin_public,
            created_at_ms,
            expires_at_ms,
        )
    }

    /// Seals a call (24 nonce bytes drawn).
    pub fn seal_call(
        &self,
        header: &Header,
        plaintext: &[u8],
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Vec<u8>, SealError> {
        envelope::seal_call(&self.keys, header, plaintext, rng)
    }

    /// Opens the one reply to `call`.
    pub fn open_reply(&self, call: &Header, envelope: &[u8]) -> Result<Vec<u8>, SealError> {
        envelope::open_reply(&self.keys, call, envelope)
    }
}
