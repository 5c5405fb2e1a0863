//! The operator points the relay at another issuer (same client secret): the people of the old
//! issuer keep their owners and tokens until those lapse, and their refresh tokens are never
//! sent to the new issuer, which would refuse them and so revoke those people.

use std::time::Duration;

use reqwest::StatusCode;
use sealpost_relay::clock::now_ms;
use sealpost_relay::oidc::{OidcConfig, Provider, renew_due};
use sealpost_testkit::TestDb;

use super::{TestProvider, free_addr, me, relay_for, sign_in_as};

/// Re-checks every hour: the relay's own round renews nobody within a test, so each renewal
/// below is one the test asks for.
fn rechecking(provider: &TestProvider) -> OidcConfig {
    let mut args = provider.args();
    args.oidc_recheck_hours = Some(1.0);
    args.into_config().unwrap().unwrap()
}

/// The period the test's renewals use: a person is due once confirmed over half of it ago.
const EVERY: Duration = Duration::from_secs(2);

async fn an_issuer_change_sends_no_refresh_token_to_the_new_issuer(db: TestDb) {
    let addr = free_addr();
    let public_url = format!("http://{addr}");
    let callback = [format!("{public_url}/auth/oidc/callback")];
    let (old, new) = (
        TestProvider::start(&callback),
        TestProvider::start(&callback),
    );
    let (old_config, new_config) = (rechecking(&old), rechecking(&new));

    let config = old_config.clone();
    let relay = relay_for(&old, db, addr, &public_url, |c| c.oidc = Some(config)).await;
    let alice = sign_in_as(&relay, "alice").await.token;
    let signed_in_at = now_ms();
    let db = relay.stop().await.unwrap();
    // Her confirmation comes due (a precondition in wall-clock time, which renewals read).
    let due_at = signed_in_at.saturating_add_ms(EVERY.as_millis() as u64 / 2 + 100);
    tokio::time::sleep(Duration::from_millis(due_at.saturating_sub(now_ms()))).await;

    // The same relay, now pointed at the new issuer.
    let config = new_config.clone();
    let relay = relay_for(&new, db, addr, &public_url, |c| c.oidc = Some(config)).await;
    let at_new = Provider::new(new_config, &public_url).unwrap();
    let renewed = renew_due(relay.store(), &at_new, EVERY).await.unwrap();
    assert_eq!(
        renewed, 0,
        "the old issuer's person was renewed at the new one"
    );
    // Nothing was refused, so nothing was revoked: her sign-in lasts until it lapses.
    assert_eq!(me(&relay, &alice).await.0, StatusCode::OK);

    // Her refresh token still works where it came from: confirmed for another period (a
    // refusal would end her confirmation now instead).
    let at_old = Provider::new(old_config, &public_url).unwrap();
    let asked_from = now_ms();
    assert_eq!(renew_due(relay.store(), &at_old, EVERY).await.unwrap(), 1);
    let owner = relay
        .store()
        .owner_by_name("alice@team.example")
        .await
        .unwrap()
        .unwrap();
    assert!(owner.confirmed_until.unwrap() >= asked_from.saturating_add_ms(2_000));
}

#[tokio::test]
async fn after_an_issuer_change_the_old_issuers_refresh_tokens_stay_home_on_sqlite() {
    an_issuer_change_sends_no_refresh_token_to_the_new_issuer(TestDb::sqlite()).await;
}

#[tokio::test]
async fn after_an_issuer_change_the_old_issuers_refresh_tokens_stay_home_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    an_issuer_change_sends_no_refresh_token_to_the_new_issuer(db).await;
}
