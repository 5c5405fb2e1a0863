//! The flow as people use it: sign in, be found again by who you are at the provider, and the
//! ways a flow is bound (single-use state, the browser, the app's verifier, allowed domains).

use reqwest::StatusCode;

use super::{
    Browser, Landed, direct, exchange, me, pkce, provider_and_relay, sign_in_as, start_url,
};
use sealpost_relay::origins::AppOrigin;
use sealpost_testkit::TestDb;

#[tokio::test]
async fn a_person_signs_in_through_the_providers_login_page_and_is_the_same_owner_next_time() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let first = sign_in_as(&relay, "alice").await;
    assert_eq!(first.owner.name, "alice@team.example");
    // The token works.
    assert_eq!(me(&relay, &first.token).await.0, StatusCode::OK);

    // Again, from another browser: the same owner, found by (issuer, subject).
    let second = sign_in_as(&relay, "alice").await;
    assert_eq!(second.owner.id, first.owner.id);
}

#[tokio::test]
async fn the_handed_back_code_works_once_and_only_with_the_apps_verifier() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let (verifier, challenge) = pkce();
    let landed = Browser::new()
        .sign_in(&start_url(&relay, &challenge), "alice", direct)
        .await;
    let (other_verifier, _) = pkce();
    for wrong in [None, Some(other_verifier.as_str())] {
        // Each try uses the code up, so a fresh sign-in per wrong verifier.
        let (verifier, challenge) = pkce();
        let landed = Browser::new()
            .sign_in(&start_url(&relay, &challenge), "alice", direct)
            .await;
        let (status, body) = exchange(&relay, landed.code(), wrong).await.unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "invalid_signin_code");
        // Refused, and used up: the right verifier comes too late.
        assert!(
            exchange(&relay, landed.code(), Some(&verifier))
                .await
                .is_err()
        );
    }
    exchange(&relay, landed.code(), Some(&verifier))
        .await
        .unwrap();
    let (status, _) = exchange(&relay, landed.code(), Some(&verifier))
        .await
        .unwrap_err();
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a code works once");
}

#[tokio::test]
async fn an_unverified_email_in_an_allowed_domain_is_refused_and_so_is_another_domain() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    for (user, code) in [
        ("mallory", "domain_not_allowed"),
        ("bob", "domain_not_allowed"),
    ] {
        let (_, challenge) = pkce();
        let landed = Browser::new()
            .sign_in(&start_url(&relay, &challenge), user, direct)
            .await;
        assert_eq!(landed.error_code(), code, "{user}");
    }
}

#[tokio::test]
async fn a_state_works_once_and_only_in_the_browser_that_started_it() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let (_, challenge) = pkce();
    // Sign in up to the provider's redirect back, then replay that callback.
    let browser = Browser::new();
    let callback = browser
        .callback_url(&start_url(&relay, &challenge), "alice")
        .await;
    // Another browser cannot finish it: not one without the cookie, nor one holding the cookie
    // of a sign-in of its own (login CSRF: a callback made for one browser, opened in another).
    let (_, its_own) = pkce();
    let stranger = Browser::new();
    stranger
        .callback_url(&start_url(&relay, &its_own), "bob")
        .await;
    let refused = stranger.follow(&callback, direct).await;
    assert_eq!(refused.error_code(), "browser_mismatch");
    // The flow was used up by that attempt: even the right browser cannot now, and a browser
    // without any cookie gets no further than the used-up state.
    let replay = browser.follow(&callback, direct).await;
    assert_eq!(replay.error_code(), "state_unknown");
    let callback = browser
        .callback_url(&start_url(&relay, &challenge), "alice")
        .await;
    let cookieless = Browser::new().follow(&callback, direct).await;
    assert_eq!(cookieless.error_code(), "browser_mismatch");

    // A fresh flow finishes in its own browser once, and a replay of its callback is refused.
    let browser = Browser::new();
    let callback = browser
        .callback_url(&start_url(&relay, &challenge), "alice")
        .await;
    browser.follow(&callback, direct).await.code();
    let replay = browser.follow(&callback, direct).await;
    assert_eq!(replay.error_code(), "state_unknown");
    // A made-up state.
    let made_up = browser
        .follow(
            &format!("{}/auth/oidc/callback?state=made-up&code=x", relay.base),
            direct,
        )
        .await;
    assert_eq!(made_up.error_code(), "state_unknown");
}

#[tokio::test]
async fn a_start_names_only_listed_apps_and_needs_an_s256_challenge() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let (_, challenge) = pkce();
    let browser = Browser::new();
    let unlisted = browser
        .follow(
            &format!(
                "{}&app_origin=https%3A%2F%2Fevil.example",
                start_url(&relay, &challenge)
            ),
            direct,
        )
        .await;
    assert_eq!(unlisted.error_code(), "app_origin_not_listed");
    for query in [
        "code_challenge=abc&code_challenge_method=S256".to_owned(),
        format!("code_challenge={challenge}&code_challenge_method=plain"),
        format!("code_challenge={challenge}"),
    ] {
        let landed = browser
            .follow(&format!("{}/auth/oidc/start?{query}", relay.base), direct)
            .await;
        assert_eq!(landed.error_code(), "bad_request", "{query}");
    }
}

#[tokio::test]
async fn a_relay_without_a_provider_says_so() {
    let relay = sealpost_testkit::Relay::sqlite().await;
    let providers: serde_json::Value = relay
        .client
        .get(format!("{}/v1/auth/providers", relay.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(providers, serde_json::json!({}));
    let (_, challenge) = pkce();
    let landed = Browser::new()
        .follow(&start_url(&relay, &challenge), direct)
        .await;
    assert_eq!(landed.error_code(), "oidc_not_configured");
}

#[tokio::test]
async fn a_host_app_gets_its_code_on_its_own_origin_and_a_token_scoped_to_it() {
    let app = "https://app.example:8443";
    let (_provider, relay) = provider_and_relay(|config| {
        config.app_origins = vec![AppOrigin::parse(app).unwrap()];
    })
    .await;
    let (verifier, challenge) = pkce();
    let start = format!(
        "{}&app_origin=https%3A%2F%2Fapp.example%3A8443",
        start_url(&relay, &challenge)
    );
    let landed = Browser::new().sign_in(&start, "alice", direct).await;
    let Landed::App { url, code } = &landed else {
        panic!("{landed:?}");
    };
    let relay_param: String = url::form_urlencoded::byte_serialize(relay.base.as_bytes()).collect();
    assert_eq!(*url, format!("{app}/#signin={code}&relay={relay_param}"));
    let signed = exchange(&relay, code, Some(&verifier)).await.unwrap();
    assert_eq!(signed.app_origin.as_deref(), Some(app));

    // Only a listed origin, compared exactly, is ever sent a code: no open redirect.
    for other in [
        "https%3A%2F%2Fapp.example%3A8443.evil.example",
        "https%3A%2F%2Fapp.example",
        "http%3A%2F%2Fapp.example%3A8443",
        "https%3A%2F%2Fapp.example%3A8443%2Fpath",
        "https%3A%2F%2Fevil.example%2F%40app.example%3A8443",
    ] {
        let landed = Browser::new()
            .follow(
                &format!("{}&app_origin={other}", start_url(&relay, &challenge)),
                direct,
            )
            .await;
        assert_eq!(landed.error_code(), "app_origin_not_listed", "{other}");
    }
}

#[tokio::test]
async fn a_person_who_cancels_at_the_provider_lands_on_a_page_that_says_so() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let (_, challenge) = pkce();
    let landed = Browser::new()
        .cancel_at_provider(&start_url(&relay, &challenge))
        .await;
    assert_eq!(landed.error_code(), "provider_refused");
    let Landed::Page { status, body } = landed else {
        unreachable!()
    };
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("access_denied"), "{body}");
}

#[tokio::test]
async fn a_disabled_owner_cannot_sign_in_through_the_provider() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let signed = sign_in_as(&relay, "alice").await;
    assert!(
        relay
            .store()
            .disable_owner(&signed.owner.name, sealpost_relay::clock::now_ms())
            .await
            .unwrap()
    );
    let (_, challenge) = pkce();
    let landed = Browser::new()
        .sign_in(&start_url(&relay, &challenge), "alice", direct)
        .await;
    assert_eq!(landed.error_code(), "owner_disabled");
}

#[tokio::test]
async fn a_provider_that_stops_answering_leaves_sign_ins_working_and_says_so_to_new_ones() {
    let (provider, relay) = provider_and_relay(|_| {}).await;
    let oidc = provider.config();
    let signed = sign_in_as(&relay, "alice").await;
    drop(provider);
    assert_eq!(me(&relay, &signed.token).await.0, StatusCode::OK);
    // A relay that has not yet read the provider's documents cannot start a sign-in, and says
    // why on its page.
    let cold = super::relay_for_config(oidc, TestDb::sqlite()).await;
    let (_, challenge) = pkce();
    let landed = Browser::new()
        .follow(&start_url(&cold, &challenge), direct)
        .await;
    assert_eq!(landed.error_code(), "provider_unavailable");
}

#[tokio::test]
async fn two_sign_ins_started_in_one_browser_each_finish() {
    let (_provider, relay) = provider_and_relay(|_| {}).await;
    let browser = Browser::new();
    let (first_verifier, first_challenge) = pkce();
    let first = browser
        .callback_url(&start_url(&relay, &first_challenge), "alice")
        .await;
    let (second_verifier, second_challenge) = pkce();
    let second = browser
        .callback_url(&start_url(&relay, &second_challenge), "alice")
        .await;
    // Finished in the other order: each flow's cookie is its own.
    let landed = browser.follow(&second, direct).await;
    exchange(&relay, landed.code(), Some(&second_verifier))
        .await
        .unwrap();
    let landed = browser.follow(&first, direct).await;
    exchange(&relay, landed.code(), Some(&first_verifier))
        .await
        .unwrap();
}

#[tokio::test]
async fn starts_callbacks_and_link_sign_ins_each_have_their_own_bounded_rate() {
    let (_provider, relay) = provider_and_relay(|config| {
        config.limits.signin_rate_per_address_per_min = 1;
        config.limits.signin_burst_per_address = 2;
    })
    .await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let status = |url: String| {
        let http = http.clone();
        async move { http.get(url).send().await.unwrap().status() }
    };
    // A flood of starts from one address spends the starts' bucket …
    let (_, challenge) = pkce();
    for _ in 0..2 {
        assert_eq!(
            status(start_url(&relay, &challenge)).await,
            StatusCode::SEE_OTHER
        );
    }
    assert_eq!(
        status(start_url(&relay, &challenge)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // … and not the link sign-in's: a wrong code is refused as such, not rate limited.
    let (refused, _) = exchange(&relay, "not-a-code", None).await.unwrap_err();
    assert_ne!(refused, StatusCode::TOO_MANY_REQUESTS);
    // Callbacks have a bucket of their own, bounded too: each is a write to the database.
    let callback = |n: usize| format!("{}/auth/oidc/callback?code=x&state=made-up-{n}", relay.base);
    for n in 0..2 {
        assert_eq!(status(callback(n)).await, StatusCode::BAD_REQUEST);
    }
    assert_eq!(status(callback(2)).await, StatusCode::TOO_MANY_REQUESTS);
}
