//! The provider's refresh tokens, sealed at rest: AES-256-GCM-SIV (RFC 8452: a random nonce
//! that repeats costs nothing but revealing that two plaintexts were equal) under a key derived
//! (HKDF-SHA256) from the client secret, which lives in a file the operator gives and never in
//! the database. A database reader holds neither the key nor the secret a refresh needs; the
//! person's (issuer, subject) is the associated data, so a sealed token moved to another
//! person's row does not open.
//!
//! Not the envelopes' cipher: the relay links neither XChaCha20-Poly1305 nor X25519, so it
//! cannot open a call or a reply even by accident (`boundaries.rs`).

use aes_gcm_siv::aead::AeadInOut;
use aes_gcm_siv::{Aes256GcmSiv, KeyInit};
use hkdf::Hkdf;
use sha2::Sha256;

use super::args::ClientSecret;

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const SALT: &[u8] = b"sealpost-relay/v1";
const INFO: &[u8] = b"sealpost-relay/v1 oidc refresh token at rest";

/// The key refresh tokens are sealed under.
pub struct AtRest {
    key: [u8; 32],
}

impl std::fmt::Debug for AtRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtRest(..)")
    }
}

impl AtRest {
    /// The key for the relay's client secret.
    pub fn new(secret: &ClientSecret) -> Self {
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(Some(SALT), secret.expose().as_bytes())
            .expand(INFO, &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self { key }
    }

    /// `nonce ‖ ciphertext ‖ tag` of `token`, bound to the person.
    pub fn seal(&self, issuer: &str, subject: &str, token: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the OS random source works");
        let mut out = Vec::with_capacity(NONCE_LEN + token.len() + TAG_LEN);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(token.as_bytes());
        let tag = Aes256GcmSiv::new((&self.key).into())
            .encrypt_inout_detached(
                &nonce.into(),
                &associated(issuer, subject),
                (&mut out[NONCE_LEN..]).into(),
            )
            .expect("AES-GCM-SIV seals any token length");
        out.extend_from_slice(&tag);
        out
    }

    /// The token sealed in `sealed` for this person; `None` if it does not open (another
    /// person's, another secret's, or altered).
    pub fn open(&self, issuer: &str, subject: &str, sealed: &[u8]) -> Option<String> {
        let (nonce, rest) = sealed.split_first_chunk::<NONCE_LEN>()?;
        let (ciphertext, tag) = rest.split_last_chunk::<TAG_LEN>()?;
        let mut plaintext = ciphertext.to_vec();
        Aes256GcmSiv::new((&self.key).into())
            .decrypt_inout_detached(
                &(*nonce).into(),
                &associated(issuer, subject),
                plaintext.as_mut_slice().into(),
                &(*tag).into(),
            )
            .ok()?;
        String::from_utf8(plaintext).ok()
    }
}

/// `len(issuer) ‖ issuer ‖ subject`: unambiguous, whatever the two hold.
fn associated(issuer: &str, subject: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(8 + issuer.len() + subject.len());
    data.extend_from_slice(&(issuer.len() as u64).to_be_bytes());
    data.extend_from_slice(issuer.as_bytes());
    data.extend_from_slice(subject.as_bytes());
    data
}

#[cfg(test)]
mod tests {
    use super::AtRest;
    use crate::oidc::args::ClientSecret;

    #[test]
    fn a_sealed_token_opens_only_for_its_person_under_its_secret() {
        let at_rest = AtRest::new(&ClientSecret::new("secret-a"));
        let sealed = at_rest.seal("https://idp", "alice", "refresh-1");
        assert_eq!(
            at_rest.open("https://idp", "alice", &sealed).as_deref(),
            Some("refresh-1")
        );
        assert!(
            !sealed.windows(9).any(|w| w == b"refresh-1"),
            "not in the clear"
        );
        assert_eq!(at_rest.open("https://idp", "bob", &sealed), None);
        assert_eq!(at_rest.open("https://idpa", "lice", &sealed), None);
        let other = AtRest::new(&ClientSecret::new("secret-b"));
        assert_eq!(other.open("https://idp", "alice", &sealed), None);
        let mut altered = sealed.clone();
        altered[30] ^= 1;
        assert_eq!(at_rest.open("https://idp", "alice", &altered), None);
        assert_eq!(at_rest.open("https://idp", "alice", &sealed[..20]), None);
    }
}
