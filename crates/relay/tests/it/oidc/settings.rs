//! Team sign-in set up through the environment of the real binary, as an operator's container
//! is: what the variables mean and what the first start prints.

use sealpost_testkit::TestDb;
use serde_json::json;

use super::process::{provider_for_process, spawn_relay};
use super::{Browser, direct, pkce, sign_in_as, start_url};

#[tokio::test]
async fn the_required_claim_variable_carries_several_claims_all_of_which_must_hold() {
    let (provider, addr) = provider_for_process();
    let process = spawn_relay(
        &provider,
        addr,
        TestDb::sqlite(),
        &[("SEALPOST_OIDC_REQUIRED_CLAIM", "groups=sealpost,name=Alice")],
    );
    // Alice carries both.
    let alice = sign_in_as(&process.relay, "alice").await;
    assert!(!alice.token.is_empty());
    // Bob carries the group but not the name: one claim holding is not enough.
    provider
        .set_claims("bob", json!({"groups": ["sealpost"]}))
        .await;
    let (_, challenge) = pkce();
    let bob = Browser::new()
        .sign_in(&start_url(&process.relay, &challenge), "bob", direct)
        .await;
    assert_eq!(bob.error_code(), "claim_required");
}

#[tokio::test]
async fn with_team_sign_in_the_first_start_prints_no_link_that_bypasses_the_provider() {
    let (provider, addr) = provider_for_process();
    let db = TestDb::sqlite();
    let url = db.url.clone();
    let process = spawn_relay(&provider, addr, db, &[]);
    let printed = process.printed.join("\n");
    assert!(!printed.contains("#signin="), "{printed}");
    assert!(
        printed.contains("team"),
        "says how people sign in: {printed}"
    );
    // No owner exists until someone signs in through the provider.
    let store = TestDb::at(url.clone()).open().await;
    assert!(store.list_owners().await.unwrap().is_empty());
    sign_in_as(&process.relay, "alice").await;
    let owners = store.list_owners().await.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].name, "alice@team.example");
}

#[tokio::test]
async fn prompt_consent_is_sent_with_offline_access_when_set() {
    for (consent, expected) in [(false, false), (true, true)] {
        let (_provider, relay) = super::provider_and_relay(|config| {
            let oidc = config.oidc.as_mut().unwrap();
            oidc.recheck = Some(std::time::Duration::from_secs(3600));
            oidc.prompt_consent = consent;
        })
        .await;
        let (_, challenge) = pkce();
        let response = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(start_url(&relay, &challenge))
            .send()
            .await
            .unwrap();
        let to_provider = reqwest::Url::parse(
            response.headers()[reqwest::header::LOCATION]
                .to_str()
                .unwrap(),
        )
        .unwrap();
        let query: Vec<(String, String)> = to_provider.query_pairs().into_owned().collect();
        let has =
            |name: &str, value: &str| query.iter().any(|(n, v)| n == name && v.contains(value));
        assert!(has("scope", "offline_access"), "{to_provider}");
        assert_eq!(has("prompt", "consent"), expected, "{to_provider}");
    }
}
