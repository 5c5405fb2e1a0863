//! probe
pub fn probe() {
    use chacha20poly1305::{
        KeyInit, XChaCha20Poly1305,
        aead::{Aead, Payload},
    };
    let key = [0u8; 32];
    let cipher = XChaCha20Poly1305::new(&key.into());
    let nonce = [0u8; 24];
    let ct = cipher
        .encrypt(
            &nonce.into(),
            Payload {
                msg: b"hi",
                aad: b"x",
            },
        )
        .unwrap();
    let _ = ct;
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(None, &key);
    let mut okm = [0u8; 32];
    hk.expand(b"info", &mut okm).unwrap();
    use hmac::{KeyInit as _, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(b"x");
    let _ = mac.verify_slice(&[0u8; 32]);
    let s = x25519_dalek::StaticSecret::from([1u8; 32]);
    let p = x25519_dalek::PublicKey::from(&s);
    let sh = s.diffie_hellman(&p);
    let _ = sh.was_contributory();
}
pub fn rng<R: rand_core::CryptoRng + ?Sized>(r: &mut R) {
    let mut b = [0u8; 4];
    r.fill_bytes(&mut b);
}
