//! Account operations that more than one front end needs: the admin CLI, the first start and
//! the `/v1` API all hand out one-time sign-in links the same way.

use sealpost_protocol::ids::Id16;
use sha2::{Digest, Sha256};

use crate::clock::now_ms;
use crate::store::{Store, StoreResult};

/// SHA-256 of a sign-in code: only the hash is stored, so a database reader cannot sign in.
pub fn code_hash(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

/// Creates a one-time sign-in code for `owner_id`, valid `ttl_s` seconds, and returns the link
/// that carries it (under `public_url`) with its expiry.
pub async fn create_signin_link(
    store: &dyn Store,
    public_url: &str,
    owner_id: Id16,
    ttl_s: u64,
) -> StoreResult<(String, i64)> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    let code = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes);
    let expires_at = now_ms() + ttl_s as i64 * 1000;
    store
        .create_signin_code(code_hash(&code), owner_id, expires_at)
        .await?;
    Ok((
        format!("{}/#signin={code}", public_url.trim_end_matches('/')),
        expires_at,
    ))
}
