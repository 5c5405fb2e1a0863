//! An owner's quotas are shared by their apps, and no host app takes them all: one may hold at
//! most half of the owner's live sessions, plugin tokens and unused sign-in links, and the host
//! apps together all but the quarter the relay's own app keeps; the relay's own app is bound by
//! the whole quota alone; a refusal names what each app holds.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use sealpost_protocol::ids::{PairId, SessionId};
use sealpost_testkit::{Relay, TestDb, id};

use crate::apps::{A, B, link, listed, sign_in};

/// A sign-in to `app` made from a link the relay's own app's `own` made.
async fn signed_in(relay: &Relay, own: &str, app: &str) -> String {
    let (status, made) = link(relay, own, Some(app)).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    sign_in(relay, made["link"].as_str().unwrap()).await["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn new_session(relay: &Relay, token: &str) -> (StatusCode, Value) {
    relay
        .send(
            Method::POST,
            "/v1/sessions",
            Some(token),
            Some(json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": "AA", "ttl_s": 86_400})),
        )
        .await
}

async fn new_mcp_token(relay: &Relay, token: &str) -> (StatusCode, Value) {
    relay
        .send(
            Method::POST,
            "/v1/mcp-tokens",
            Some(token),
            Some(json!({"label": "plugin", "pair_id": id::<PairId>()})),
        )
        .await
}

/// Asserts a 429 with `code` whose message names what each app in `names` holds.
fn assert_refused_naming(answer: (StatusCode, Value), code: &str, names: &[&str]) {
    let (status, body) = answer;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some(code)),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    for name in names {
        assert!(message.contains(name), "{name:?} in {message:?}");
    }
}

async fn a_host_app_holds_half_of_the_owners_live_sessions_and_the_relays_own_app_keeps_a_quarter(
    db: TestDb,
) {
    let relay = Relay::start(db, |c| {
        c.app_origins = listed(&[A, B]);
        c.limits.max_live_sessions_per_owner = 6;
    })
    .await;
    let (_, own) = relay.owner("alice").await;
    let a = signed_in(&relay, &own, A).await;
    let b = signed_in(&relay, &own, B).await;
    for _ in 0..3 {
        let (status, body) = new_session(&relay, &a).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert_refused_naming(
        new_session(&relay, &a).await,
        "too_many_sessions",
        &["3 for https://a.example"],
    );
    // Another app starts its own, until the host apps together hold all but the quarter the
    // relay's own app keeps (1 of 6); the relay's own app starts its own up to the quota.
    for _ in 0..2 {
        let (status, body) = new_session(&relay, &b).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert_refused_naming(
        new_session(&relay, &b).await,
        "too_many_sessions",
        &["the relay's own app keeps 1", "2 for http://localhost:5173"],
    );
    let (status, body) = new_session(&relay, &own).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_refused_naming(
        new_session(&relay, &own).await,
        "too_many_sessions",
        &[
            "3 for https://a.example",
            "2 for http://localhost:5173",
            "1 for the relay's own app",
        ],
    );
}

#[tokio::test]
async fn a_host_app_holds_half_of_the_owners_live_sessions_and_the_relays_own_app_keeps_a_quarter_on_sqlite()
 {
    a_host_app_holds_half_of_the_owners_live_sessions_and_the_relays_own_app_keeps_a_quarter(
        TestDb::sqlite(),
    )
    .await;
}

#[tokio::test]
async fn a_host_app_holds_half_of_the_owners_live_sessions_and_the_relays_own_app_keeps_a_quarter_on_postgres()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_host_app_holds_half_of_the_owners_live_sessions_and_the_relays_own_app_keeps_a_quarter(db)
        .await;
}

async fn a_host_app_holds_half_of_the_owners_plugin_tokens_and_links_and_the_relays_own_app_keeps_a_quarter(
    db: TestDb,
) {
    let relay = Relay::start(db, |c| {
        c.app_origins = listed(&[A, B]);
        c.limits.max_live_mcp_tokens_per_owner = 4;
        c.limits.max_live_signin_codes_per_owner = 6;
    })
    .await;
    let (_, own) = relay.owner("alice").await;
    let a = signed_in(&relay, &own, A).await;
    let b = signed_in(&relay, &own, B).await;

    // Plugin tokens: A takes its half; B still pairs, until the host apps hold all but the
    // relay's own app's quarter (1 of 4); then the owner's whole quota is held.
    let mut a_tokens = Vec::new();
    for _ in 0..2 {
        let (status, body) = new_mcp_token(&relay, &a).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        a_tokens.push(body["id"].as_str().unwrap().to_owned());
    }
    assert_refused_naming(
        new_mcp_token(&relay, &a).await,
        "too_many_tokens",
        &["2 for https://a.example"],
    );
    let (status, body) = new_mcp_token(&relay, &b).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_refused_naming(
        new_mcp_token(&relay, &b).await,
        "too_many_tokens",
        &["the relay's own app keeps 1", "1 for http://localhost:5173"],
    );
    let (status, body) = new_mcp_token(&relay, &own).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_refused_naming(
        new_mcp_token(&relay, &own).await,
        "too_many_tokens",
        &[
            "2 for https://a.example",
            "1 for http://localhost:5173",
            "1 for the relay's own app",
        ],
    );
    // The relay's own app sees A's and revokes one; a place is free.
    let (_, listed) = relay
        .send(Method::GET, "/v1/mcp-tokens", Some(&own), None)
        .await;
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 4, "{listed}");
    let (status, _) = relay
        .send(
            Method::DELETE,
            &format!("/v1/mcp-tokens/{}", a_tokens[0]),
            Some(&own),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = new_mcp_token(&relay, &own).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Sign-in links count against the app they are for: A's sign-in makes its half.
    for _ in 0..3 {
        let (status, body) = link(&relay, &a, Some(A)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body) = link(&relay, &a, Some(A)).await;
    assert_refused_naming(
        (status, body),
        "too_many_signin_links",
        &["3 for https://a.example"],
    );
    // B and the relay's own app still make theirs.
    let (status, body) = link(&relay, &b, Some(B)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = link(&relay, &own, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_host_app_holds_half_of_the_owners_plugin_tokens_and_links_and_the_relays_own_app_keeps_a_quarter_on_sqlite()
 {
    a_host_app_holds_half_of_the_owners_plugin_tokens_and_links_and_the_relays_own_app_keeps_a_quarter(TestDb::sqlite())
        .await;
}

#[tokio::test]
async fn a_host_app_holds_half_of_the_owners_plugin_tokens_and_links_and_the_relays_own_app_keeps_a_quarter_on_postgres()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_host_app_holds_half_of_the_owners_plugin_tokens_and_links_and_the_relays_own_app_keeps_a_quarter(db).await;
}
