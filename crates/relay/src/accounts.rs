//! Account operations that more than one front end needs: the admin CLI, the first start and
//! the `/v1` API all hand out one-time sign-in links the same way.

use sealpost_protocol::ids::Id16;
use sealpost_time::UnixMillis;
use sha2::{Digest, Sha256};

use crate::clock::now_ms;
use crate::store::{Store, StoreResult};

/// SHA-256 of a sign-in code: only the hash is stored, so a database reader cannot sign in.
pub(crate) fn code_hash(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

/// Creates a one-time sign-in code for `owner_id`, valid `ttl_s` seconds, and returns the link
/// that carries it (under `public_url`) with its expiry.
pub async fn create_signin_link(
    store: &dyn Store,
    public_url: &str,
    owner_id: Id16,
    ttl_s: u64,
) -> StoreResult<(String, UnixMillis)> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    let code = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes);
    let expires_at = now_ms().saturating_add_ms(ttl_s.saturating_mul(1000));
    store
        .create_signin_code(code_hash(&code), owner_id, expires_at)
        .await?;
    Ok((
        format!("{}/#signin={code}", public_url.trim_end_matches('/')),
        expires_at,
    ))
}

/// How long a sign-in link stays valid, in the words its message prints ("15 minutes", "1 hour",
/// "90 seconds"): the largest unit that divides `ttl_s` exactly, so the text never rounds.
pub(crate) fn validity_in_words(ttl_s: u64) -> String {
    let (count, unit) = [(86_400, "day"), (3_600, "hour"), (60, "minute")]
        .into_iter()
        .find(|&(unit_s, _)| ttl_s != 0 && ttl_s.is_multiple_of(unit_s))
        .map_or((ttl_s, "second"), |(unit_s, unit)| (ttl_s / unit_s, unit));
    let plural = if count == 1 { "" } else { "s" };
    format!("{count} {unit}{plural}")
}

#[cfg(test)]
mod tests {
    use super::validity_in_words;

    #[test]
    fn a_link_validity_reads_in_the_largest_exact_unit() {
        for (ttl_s, words) in [
            (900, "15 minutes"),
            (60, "1 minute"),
            (90, "90 seconds"),
            (1, "1 second"),
            (0, "0 seconds"),
            (3_600, "1 hour"),
            (5_400, "90 minutes"),
            (7_200, "2 hours"),
            (86_400, "1 day"),
            (172_800, "2 days"),
        ] {
            assert_eq!(validity_in_words(ttl_s), words, "{ttl_s} s");
        }
    }
}
