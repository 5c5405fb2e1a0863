//! The pairing secret `P` and what is derived from it alone: the relay's routing handle
//! (`pair_id`) and the 6-digit fingerprint people compare between the two ends.

use std::fmt;

use rand_core::CryptoRng;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::kdf::{LABEL_FINGERPRINT, LABEL_PAIR_ID, hkdf32};
use crate::origin::RelayOrigin;

/// The 32-byte secret one plugin install and one browser profile share.
#[derive(Clone, Zeroize, ZeroizeOnDrop, PartialEq, Eq)]
pub struct PairingSecret([u8; 32]);

pub use sealpost_ids::PairId;

impl PairingSecret {
    /// A fresh secret from `rng` (32 bytes drawn).
    pub fn generate(rng: &mut (impl CryptoRng + ?Sized)) -> Self {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// A secret from its bytes (a stored or pasted pairing).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The secret itself, for storing it (the caller keeps it private).
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }

    /// `HKDF(P, "sealpost/v1 pair-id")[..16]`: the pairing's routing handle at the relay.
    pub fn pair_id(&self) -> PairId {
        let okm = hkdf32(&self.0, &[], &[LABEL_PAIR_ID]);
        let mut id = [0u8; 16];
        id.copy_from_slice(&okm[..16]);
        PairId::from_bytes(id)
    }

    /// Six decimal digits from `HKDF(P, "sealpost/v1 fingerprint" ‖ relay_origin)`: the first
    /// four bytes as a big-endian integer, modulo 10^6. It identifies a pairing at a glance; at
    /// about 20 bits it is not a defence against a swapped code.
    pub fn fingerprint(&self, relay_origin: &RelayOrigin) -> String {
        let okm = hkdf32(
            &self.0,
            &[],
            &[LABEL_FINGERPRINT, relay_origin.as_str().as_bytes()],
        );
        let n = u32::from_be_bytes([okm[0], okm[1], okm[2], okm[3]]) % 1_000_000;
        format!("{n:06}")
    }
}

impl fmt::Debug for PairingSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PairingSecret(<redacted>)")
    }
}
