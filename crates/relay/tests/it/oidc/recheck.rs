//! Offboarding: with `--oidc-recheck-hours`, the relay renews each person's confirmation at the
//! provider in the background; a person removed there loses every token within the period, and
//! a provider that stops answering lets access lapse at the period's end, never later.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sealpost_protocol::api::{CreateMcpTokenRequest, CreateMcpTokenResponse};
use sealpost_relay::clock::now_ms;
use sealpost_testkit::{Relay, TestDb, id};
use sealpost_time::UnixMillis;

use super::{Browser, TestProvider, direct, free_addr, me, pkce, relay_for, sign_in_as, start_url};

/// 0.001 hours: 3.6 seconds, so a test sees several renewals.
const RECHECK_HOURS: f64 = 0.001;
const PERIOD: Duration = Duration::from_millis(3_600);

/// A provider and a relay on SQLite re-checking every [`PERIOD`], requiring `claim` if given.
async fn rechecking(claim: Option<&str>) -> (TestProvider, Relay) {
    rechecking_on(TestDb::sqlite(), claim).await
}

/// A provider and a relay on `db` re-checking every [`PERIOD`], requiring `claim` if given.
/// The provider rotates refresh tokens and takes a spent one presented again for theft: it
/// revokes the grant (`oidc-provider`'s `rotateRefreshToken`).
async fn rechecking_on(db: TestDb, claim: Option<&str>) -> (TestProvider, Relay) {
    let addr = free_addr();
    let public_url = format!("http://{addr}");
    let provider = TestProvider::start(&[format!("{public_url}/auth/oidc/callback")]);
    let mut args = provider.args();
    args.oidc_recheck_hours = Some(RECHECK_HOURS);
    if let Some(claim) = claim {
        let (name, value) = claim.split_once('=').unwrap();
        args.oidc_required_claim = vec![sealpost_relay::oidc::RequiredClaim {
            name: name.into(),
            value: value.into(),
        }];
    }
    let oidc = args.into_config().unwrap().unwrap();
    let relay = relay_for(&provider, db, addr, &public_url, |config| {
        config.oidc = Some(oidc);
    })
    .await;
    (provider, relay)
}

/// Alice signs in; her owner token and an MCP token made with it.
async fn alice(relay: &Relay) -> (String, String) {
    let owner = sign_in_as(relay, "alice").await.token;
    let mcp: CreateMcpTokenResponse = relay
        .client
        .post(format!("{}/v1/mcp-tokens", relay.base))
        .bearer_auth(&owner)
        .json(&CreateMcpTokenRequest {
            label: "laptop".into(),
            pair_id: id(),
            ttl_s: None,
        })
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (owner, mcp.token)
}

/// Polls until `token` is refused (the refusal's body), failing after a generous bound.
async fn until_refused(relay: &Relay, token: &str) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let (status, body) = me(relay, token).await;
        if status == StatusCode::UNAUTHORIZED {
            return body;
        }
        assert!(
            start.elapsed() < PERIOD * 5,
            "still {status} after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The end of Alice's last confirmation, as the relay keeps it.
async fn confirmed_until(relay: &Relay) -> UnixMillis {
    let alice = relay
        .store()
        .owner_by_name("alice@team.example")
        .await
        .unwrap()
        .unwrap();
    alice.confirmed_until.expect("re-checks on")
}

#[tokio::test]
async fn a_person_removed_at_the_provider_loses_every_token_within_the_period() {
    let (provider, relay) = rechecking(None).await;
    let (owner, mcp) = alice(&relay).await;
    // Two periods on, the background renewals have kept her in.
    tokio::time::sleep(PERIOD * 2).await;
    assert_eq!(me(&relay, &owner).await.0, StatusCode::OK);

    let removed_at = now_ms();
    provider.remove("alice").await;
    let body = until_refused(&relay, &owner).await;
    // Whenever the refusal was seen, her access ended within the period of the removal.
    assert!(confirmed_until(&relay).await <= removed_at.saturating_add_ms(3_600));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("identity provider"),
        "{body}"
    );
    // The MCP token she made is dead too, and she cannot sign in again.
    let (status, _) = me(&relay, &mcp).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, challenge) = pkce();
    let again = Browser::new()
        .sign_in(&start_url(&relay, &challenge), "alice", direct)
        .await;
    assert!(matches!(again, super::Landed::Page { .. }), "{again:?}");
}

#[tokio::test]
async fn a_provider_that_stops_answering_lets_access_lapse_at_the_periods_end() {
    let (provider, relay) = rechecking(None).await;
    let (owner, _) = alice(&relay).await;
    let down_at = now_ms();
    drop(provider);
    let body = until_refused(&relay, &owner).await;
    // No renewal after the provider went down: the last confirmation came before it.
    assert!(confirmed_until(&relay).await <= down_at.saturating_add_ms(3_600));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("identity provider")
    );
}

#[tokio::test]
async fn without_rechecks_a_sign_in_has_no_confirmation_limit() {
    let (_provider, relay) = super::provider_and_relay(|_| {}).await;
    let (owner, _) = alice(&relay).await;
    let me = relay
        .store()
        .owner_by_name("alice@team.example")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(me.confirmed_until, None);
    assert_eq!(self::me(&relay, &owner).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_provider_error_that_says_nothing_of_the_person_revokes_nothing() {
    let (provider, relay) = rechecking(None).await;
    let (owner, _) = alice(&relay).await;
    // The provider's token endpoint fails, as during an outage or a broken client secret: no
    // renewal happens, and access lapses at the period's end, but nothing is revoked.
    provider
        .fail_tokens(Some((503, "temporarily_unavailable")))
        .await;
    until_refused(&relay, &owner).await;
    provider.fail_tokens(Some((401, "invalid_client"))).await;
    tokio::time::sleep(PERIOD).await;
    // Once it answers again, the next renewal brings her back with the token she had.
    provider.fail_tokens(None).await;
    let start = Instant::now();
    while me(&relay, &owner).await.0 != StatusCode::OK {
        assert!(
            start.elapsed() < PERIOD * 3,
            "not back after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_person_taken_out_of_a_required_group_is_refused_at_the_next_renewal() {
    let (provider, relay) = rechecking(Some("groups=sealpost")).await;
    let (owner, _) = alice(&relay).await;
    tokio::time::sleep(PERIOD).await;
    assert_eq!(me(&relay, &owner).await.0, StatusCode::OK);
    let removed_at = now_ms();
    provider
        .set_claims("alice", serde_json::json!({"groups": ["other"]}))
        .await;
    until_refused(&relay, &owner).await;
    assert!(confirmed_until(&relay).await <= removed_at.saturating_add_ms(3_600));
    // Refused, not lapsed: her tokens are revoked, so a later renewal cannot bring them back.
    provider
        .set_claims("alice", serde_json::json!({"groups": ["sealpost"]}))
        .await;
    tokio::time::sleep(PERIOD).await;
    assert_eq!(me(&relay, &owner).await.0, StatusCode::UNAUTHORIZED);
}

/// Polls until the provider has confirmed Alice twice since `since` (each renewal's answer
/// verified and its refresh token the one in use), failing after a generous bound.
async fn until_confirmed_twice_since(relay: &Relay, since: UnixMillis) {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        // A confirmation at `at` lasts until `at + PERIOD`.
        let until = confirmed_until(relay).await;
        if until > since.saturating_add_ms(3_600) && !seen.contains(&until) {
            seen.push(until);
            if seen.len() == 2 {
                return;
            }
        }
        assert!(
            start.elapsed() < PERIOD * 6,
            "confirmed {} time(s) since, after {:?}",
            seen.len(),
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The provider rotates its signing key and drops the old one while Alice is signed in: her
/// renewals go on (the relay fetches the new key for the refreshed ID token), and no spent
/// refresh token is ever presented (the provider would revoke her grant).
async fn a_key_rotation_keeps_people_signed_in(db: TestDb) {
    let (provider, relay) = rechecking_on(db, None).await;
    let (owner, _) = alice(&relay).await;
    let rotated_at = now_ms();
    provider.rotate_key().await;
    until_confirmed_twice_since(&relay, rotated_at).await;
    assert_eq!(me(&relay, &owner).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_key_rotation_at_the_provider_keeps_people_signed_in_on_sqlite() {
    a_key_rotation_keeps_people_signed_in(TestDb::sqlite()).await;
}

#[tokio::test]
async fn a_key_rotation_at_the_provider_keeps_people_signed_in_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_key_rotation_keeps_people_signed_in(db).await;
}

/// A refresh succeeds but the ID token it brings fails its check (signed by a key the provider
/// does not publish): the renewal is tried again with the refresh token that refresh handed
/// back, never the spent one, and Alice stays signed in.
async fn a_failed_check_after_a_refresh_keeps_the_rotated_token(db: TestDb) {
    let (provider, relay) = rechecking_on(db, None).await;
    let (owner, _) = alice(&relay).await;
    let tampered_at = now_ms();
    provider.tamper(serde_json::json!({"key": "rogue"})).await;
    until_confirmed_twice_since(&relay, tampered_at).await;
    assert_eq!(me(&relay, &owner).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_failed_check_after_a_refresh_never_presents_the_spent_refresh_token_on_sqlite() {
    a_failed_check_after_a_refresh_keeps_the_rotated_token(TestDb::sqlite()).await;
}

#[tokio::test]
async fn a_failed_check_after_a_refresh_never_presents_the_spent_refresh_token_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_failed_check_after_a_refresh_keeps_the_rotated_token(db).await;
}
