//! ID tokens the relay must refuse, each arriving through the real code exchange: the provider
//! (provider.mjs) replaces the token its token endpoint issues with one signed by its own key
//! but with a claim changed, or forged (another key, `alg: none`), or another sign-in's token.

use serde_json::json;

use super::{Browser, TestProvider, direct, pkce, provider_and_relay, sign_in_as, start_url};
use sealpost_testkit::Relay;

/// Signs `user` in with the next ID token replaced as `plan` says; the relay's error code.
async fn refused_with(provider: &TestProvider, relay: &Relay, plan: serde_json::Value) -> String {
    provider.tamper(plan).await;
    let (_, challenge) = pkce();
    Browser::new()
        .sign_in(&start_url(relay, &challenge), "alice", direct)
        .await
        .error_code()
}

/// Each plan refused with its code.
async fn assert_refused<const N: usize>(
    provider: &TestProvider,
    relay: &Relay,
    cases: [(serde_json::Value, &str); N],
) {
    for (plan, code) in cases {
        assert_eq!(
            refused_with(provider, relay, plan.clone()).await,
            code,
            "{plan}"
        );
    }
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn an_id_token_for_another_client_or_issuer_is_refused() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    let cases = [
        (
            json!({"claims": {"aud": "another-app"}}),
            "id_token_wrong_audience",
        ),
        (
            json!({"claims": {"aud": ["another-app", "third"]}}),
            "id_token_wrong_audience",
        ),
        (
            json!({"claims": {"iss": "https://another-issuer.example"}}),
            "id_token_wrong_issuer",
        ),
    ];
    assert_refused(&provider, &relay, cases).await;
}

#[tokio::test]
async fn an_expired_or_implausibly_dated_id_token_is_refused_within_the_skew() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    let now = now_s();
    let cases = [
        json!({"claims": {"exp": now - 120}}),
        json!({"claims": {"iat": now + 600, "exp": now + 1200}}),
        json!({"claims": {"iat": now - 3600, "exp": now + 600}}),
    ];
    assert_refused(
        &provider,
        &relay,
        cases.map(|plan| (plan, "id_token_expired")),
    )
    .await;
    // Within the documented skew (60 s): a token that expired 30 s ago still counts.
    provider.tamper(json!({"claims": {"exp": now - 30}})).await;
    sign_in_as(&relay, "alice").await;
}

#[tokio::test]
async fn a_forged_or_unsigned_id_token_is_refused() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    let cases = [
        // Signed by a key the provider does not publish, under its own kid.
        (json!({"key": "rogue"}), "id_token_unknown_key"),
        // Signed by another key under the provider's kid: the signature does not verify.
        (json!({"key": "rogue-same-kid"}), "id_token_bad_signature"),
        (json!({"alg": "none"}), "id_token_unsigned"),
    ];
    assert_refused(&provider, &relay, cases).await;
}

#[tokio::test]
async fn another_sign_ins_id_token_is_refused_as_replayed() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    // One honest sign-in, whose ID token the provider keeps as "the last one".
    sign_in_as(&relay, "alice").await;
    // The next sign-in receives that same token: signed, for this client, unexpired, but
    // carrying the first flow's nonce.
    assert_eq!(
        refused_with(&provider, &relay, json!({"replay": true})).await,
        "id_token_replayed"
    );
}

#[tokio::test]
async fn a_rotated_signing_key_is_fetched_once_a_token_names_it() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    sign_in_as(&relay, "alice").await;
    // The relay holds the old key set (for an hour by its headers); the provider now signs
    // with a new key.
    provider.rotate_key().await;
    // The JWKS refetch is spaced out; wait past the gap.
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    sign_in_as(&relay, "alice").await;
}

#[tokio::test]
async fn hd_counts_only_from_googles_issuer() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    // An unverified personal address whose token says it is hosted in the allowed domain: only
    // Google's issuer vouches for a domain through `hd`.
    let plan = json!({"claims": {
        "email": "erin@personal.example",
        "email_verified": false,
        "hd": "team.example",
    }});
    assert_eq!(
        refused_with(&provider, &relay, plan).await,
        "domain_not_allowed"
    );
}

#[tokio::test]
async fn a_malformed_id_token_is_refused_as_invalid_not_as_the_provider_being_down() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    let cases = [
        (json!({"raw": "not-a-jwt"}), "id_token_invalid"),
        (json!({"raw": 42}), "id_token_invalid"),
        // `sub` is who the person is: it must be a string.
        (json!({"claims": {"sub": 42}}), "id_token_invalid"),
    ];
    assert_refused(&provider, &relay, cases).await;
}

#[tokio::test]
async fn claims_of_an_unexpected_type_that_admission_does_not_use_do_not_fail_a_sign_in() {
    let (provider, relay) = provider_and_relay(|config| {
        let oidc = config.oidc.as_mut().unwrap();
        oidc.allowed_domains.clear();
        oidc.required_claims = vec![sealpost_relay::oidc::RequiredClaim {
            name: "groups".into(),
            value: "sealpost".into(),
        }];
    })
    .await;
    // As some providers send them: a boolean as text, a time as an ISO 8601 string.
    let odd = json!({"claims": {
        "email_verified": "true",
        "phone_number_verified": "false",
        "updated_at": "2026-01-02T03:04:05Z",
    }});
    provider.tamper(odd.clone()).await;
    sign_in_as(&relay, "alice").await;
    // Where a claim decides admission, only the JSON boolean counts: a refusal with its own
    // code, never the provider's.
    let (provider, relay) = provider_and_relay(|_| {}).await;
    assert_eq!(
        refused_with(&provider, &relay, odd).await,
        "domain_not_allowed"
    );
}
