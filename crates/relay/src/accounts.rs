//! Account operations that more than one front end needs: the admin CLI, the first start and
//! the `/v1` API all hand out one-time sign-in links the same way.

use sealpost_protocol::ids::{LinkId, OwnerId, TokenId};
use sealpost_time::UnixMillis;
use sha2::{Digest, Sha256};

use crate::clock::now_ms;
use crate::ids::random_id;
use crate::scope::AppScope;
use crate::store::{NewSigninCode, Store, StoreResult};

/// SHA-256 of a one-time secret (a sign-in code, a team sign-in's state or cookie, a PKCE
/// verifier): only the hash is stored, so a database reader cannot use the secret.
pub(crate) fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Creates a one-time sign-in code for `owner_id` to the relay's own app, valid `ttl_s`
/// seconds, and returns the link that carries it (under `public_url`) with its expiry.
pub async fn create_signin_link(
    store: &dyn Store,
    public_url: &str,
    owner_id: OwnerId,
    ttl_s: u64,
) -> StoreResult<(String, UnixMillis)> {
    create_app_signin_link(
        store,
        public_url,
        owner_id,
        &AppScope::RelayApp,
        ttl_s,
        None,
    )
    .await
}

/// Creates a one-time code that only the holder of `pkce_challenge`'s verifier can use (a team
/// sign-in hands it to the app that started the flow), valid `ttl_s` seconds, and returns the
/// link to `app` that carries it.
pub async fn create_bound_signin_link(
    store: &dyn Store,
    public_url: &str,
    owner_id: OwnerId,
    app: &AppScope,
    ttl_s: u64,
    pkce_challenge: [u8; 32],
) -> StoreResult<String> {
    let code = new_code();
    let now = now_ms();
    store
        .create_signin_code(&NewSigninCode {
            id: random_id(),
            code_hash: secret_hash(&code),
            owner_id,
            app: app.clone(),
            expires_at: now.saturating_add_ms(ttl_s.saturating_mul(1000)),
            lifetime_ends_at: None,
            pkce_challenge: Some(pkce_challenge),
            minted_by: None,
            created_at: now,
        })
        .await?;
    Ok(signin_link(public_url, app, &code))
}

/// 32 random bytes, base64url: a sign-in code, or a team sign-in's browser cookie.
pub(crate) fn new_code() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes)
}

/// The signed-in token that asks for a sign-in link, and that sign-in's absolute end.
#[derive(Debug, Clone, Copy)]
pub struct Minter {
    /// The token: the sign-in made from the link is its child, and signing it out voids the
    /// link and ends that sign-in.
    pub token: TokenId,
    /// Its absolute end, which the sign-in made from the link keeps (and the code expires by
    /// it too).
    pub lifetime_ends_at: UnixMillis,
}

/// Creates a one-time sign-in code for `owner_id` to `app`, valid `ttl_s` seconds, and returns
/// the link that carries it ([`signin_link`]) with its expiry and id. `minter`: the sign-in
/// that asks for the link; `None` for the CLI and the first start. Whether `app` may be asked
/// for is the caller's to decide (the list, and [`AppScope::may_link_to`]).
pub async fn create_app_signin_link(
    store: &dyn Store,
    public_url: &str,
    owner_id: OwnerId,
    app: &AppScope,
    ttl_s: u64,
    minter: Option<Minter>,
) -> StoreResult<(String, UnixMillis)> {
    let code = new_code();
    let now = now_ms();
    let mut expires_at = now.saturating_add_ms(ttl_s.saturating_mul(1000));
    if let Some(minter) = minter {
        expires_at = expires_at.min(minter.lifetime_ends_at);
    }
    let id: LinkId = random_id();
    store
        .create_signin_code(&NewSigninCode {
            id,
            code_hash: secret_hash(&code),
            owner_id,
            app: app.clone(),
            expires_at,
            lifetime_ends_at: minter.map(|m| m.lifetime_ends_at),
            pkce_challenge: None,
            minted_by: minter.map(|m| m.token),
            created_at: now,
        })
        .await?;
    Ok((signin_link(public_url, app, &code), expires_at))
}

/// The link that carries a sign-in `code` to the page of `app`: for the relay's own app
/// `PUBLIC_URL/#signin=CODE`; for a host app `ORIGIN/#signin=CODE&relay=PUBLIC_URL`, the
/// relay's public URL form-encoded, so the app knows which relay to exchange the code with.
/// The code is in the fragment, which a browser never sends to a server.
pub fn signin_link(public_url: &str, app: &AppScope, code: &str) -> String {
    let relay = public_url.trim_end_matches('/');
    match app.origin() {
        None => format!("{relay}/#signin={code}"),
        Some(origin) => {
            let relay: String = url::form_urlencoded::byte_serialize(relay.as_bytes()).collect();
            format!("{origin}/#signin={code}&relay={relay}")
        }
    }
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
    use super::{signin_link, validity_in_words};
    use crate::origins::AppOrigin;
    use crate::scope::AppScope;

    #[test]
    fn a_link_opens_the_relays_app_or_the_host_app_naming_the_relay() {
        assert_eq!(
            signin_link("https://relay.example/", &AppScope::RelayApp, "C0de_-x"),
            "https://relay.example/#signin=C0de_-x"
        );
        let app = AppScope::HostApp(AppOrigin::parse("https://app.example:8443").unwrap());
        assert_eq!(
            signin_link("https://relay.example/sub/", &app, "C0de_-x"),
            "https://app.example:8443/#signin=C0de_-x&relay=https%3A%2F%2Frelay.example%2Fsub"
        );
    }

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
