//! Signing a sign-in out ends what it made, in the store (so on every replica): the sign-ins
//! made from its links and from theirs, its and their unused links, and the sessions any of
//! them started; the person lists every unused link and revokes any, as they do sign-ins.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use sealpost_protocol::ids::{PairId, SessionId};
use sealpost_testkit::{Relay, TestDb, id};

use crate::apps::{A, B, code_of, link, listed, own_sign_in_id, sign_in};

/// A relay listing the host apps A and B, on `db`.
async fn relay_on(db: TestDb) -> Relay {
    Relay::start(db, |c| c.app_origins = listed(&[A, B])).await
}

/// A new link `token` makes for `app`; the link.
async fn new_link(relay: &Relay, token: &str, app: Option<&str>) -> String {
    let (status, made) = link(relay, token, app).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    made["link"].as_str().unwrap().to_owned()
}

/// A sign-in made from a new link `token` makes for `app`: its token.
async fn child(relay: &Relay, token: &str, app: Option<&str>) -> String {
    let link = new_link(relay, token, app).await;
    sign_in(relay, &link).await["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The status `GET /v1/me` answers `token`.
async fn me(relay: &Relay, token: &str) -> StatusCode {
    relay.send(Method::GET, "/v1/me", Some(token), None).await.0
}

/// Signing in with `link`'s code: the status and body.
async fn try_sign_in(relay: &Relay, link: &str) -> (StatusCode, Value) {
    relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({ "code": code_of(link) })),
        )
        .await
}

fn assert_refused(answer: (StatusCode, Value), what: &str) {
    let (status, body) = answer;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_signin_code")),
        "{what}: {body}"
    );
}

async fn signing_out_a_sign_in_ends_every_sign_in_from_its_links_and_voids_its_unused_ones(
    db: TestDb,
) {
    let relay = relay_on(db).await;
    let (_, own) = relay.owner("alice").await;
    // A host app's sign-in T (made from a link the relay's own app made), and what it makes:
    // two sign-ins from its links, one of which makes a sign-in of its own, and links it and
    // its children keep in reserve.
    let t = child(&relay, &own, Some(A)).await;
    let c1 = child(&relay, &t, Some(A)).await;
    let g1 = child(&relay, &c1, Some(A)).await;
    let c2 = child(&relay, &t, Some(A)).await;
    let g2 = child(&relay, &c2, Some(A)).await;
    let reserve = new_link(&relay, &t, Some(A)).await;
    let c1_reserve = new_link(&relay, &c1, Some(A)).await;
    let c2_reserve = new_link(&relay, &c2, Some(A)).await;
    // The relay's own app's other sign-in, and another app's, made alongside.
    let own_other = child(&relay, &own, None).await;
    let b = child(&relay, &own, Some(B)).await;

    // C1 signs itself out: its descendants and its link end with it, nothing else.
    let (status, body) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&c1), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(me(&relay, &c1).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        me(&relay, &g1).await,
        StatusCode::UNAUTHORIZED,
        "C1's child"
    );
    assert_refused(try_sign_in(&relay, &c1_reserve).await, "C1's unused link");
    for (token, who) in [(&t, "T"), (&c2, "C2"), (&g2, "C2's child")] {
        assert_eq!(me(&relay, token).await, StatusCode::OK, "{who} goes on");
    }

    // The person signs T out from the relay's own app.
    let t_id = own_sign_in_id(&relay, &t).await;
    let (status, body) = relay
        .send(
            Method::DELETE,
            &format!("/v1/owner-tokens/{t_id}"),
            Some(&own),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // Its links and its children's are void: listed no more (before anyone tries them).
    let (_, links) = relay
        .send(Method::GET, "/v1/signin-links", Some(&own), None)
        .await;
    assert_eq!(links["links"], json!([]), "{links}");
    for (token, who) in [(&t, "T"), (&c2, "C2"), (&g2, "C2's child")] {
        assert_eq!(me(&relay, token).await, StatusCode::UNAUTHORIZED, "{who}");
    }
    assert_refused(try_sign_in(&relay, &reserve).await, "T's link in reserve");
    assert_refused(
        try_sign_in(&relay, &c2_reserve).await,
        "C2's link in reserve",
    );
    for (token, who) in [(&own, "the own app"), (&own_other, "its other"), (&b, "B")] {
        assert_eq!(me(&relay, token).await, StatusCode::OK, "{who} goes on");
    }
    // None of them is listed any more.
    let (_, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&own), None)
        .await;
    assert_eq!(list["tokens"].as_array().unwrap().len(), 3, "{list}");
}

#[tokio::test]
async fn signing_out_a_sign_in_ends_every_sign_in_from_its_links_and_voids_its_unused_ones_on_sqlite()
 {
    signing_out_a_sign_in_ends_every_sign_in_from_its_links_and_voids_its_unused_ones(
        TestDb::sqlite(),
    )
    .await;
}

#[tokio::test]
async fn signing_out_a_sign_in_ends_every_sign_in_from_its_links_and_voids_its_unused_ones_on_postgres()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    signing_out_a_sign_in_ends_every_sign_in_from_its_links_and_voids_its_unused_ones(db).await;
}

#[tokio::test]
async fn a_sign_out_on_one_replica_ends_on_the_other_what_the_sign_in_made() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let url = db.url.clone();
    let one = relay_on(db).await;
    let other = relay_on(TestDb::at(url)).await;
    let (_, own) = one.owner("alice").await;
    let t = child(&one, &own, Some(A)).await;
    let c = child(&other, &t, Some(A)).await;
    let reserve = new_link(&other, &t, Some(A)).await;
    let (status, _) = one
        .send(Method::POST, "/v1/auth/signout", Some(&t), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(me(&other, &c).await, StatusCode::UNAUTHORIZED);
    assert_refused(try_sign_in(&other, &reserve).await, "the link in reserve");
}

async fn unused_sign_in_links_are_listed_with_their_app_and_maker_and_can_be_revoked(db: TestDb) {
    let relay = relay_on(db).await;
    let (_, own) = relay.owner("alice").await;
    let own_id = own_sign_in_id(&relay, &own).await;
    let t = child(&relay, &own, Some(A)).await;
    let t_id = own_sign_in_id(&relay, &t).await;
    let by_t = new_link(&relay, &t, Some(A)).await;
    let for_a = new_link(&relay, &own, Some(A)).await;
    let for_own = new_link(&relay, &own, None).await;

    let list = |token: String| {
        let relay = &relay;
        async move {
            let (status, body) = relay
                .send(Method::GET, "/v1/signin-links", Some(&token), None)
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body["links"].as_array().unwrap().clone()
        }
    };
    // The relay's own app sees all three, with who made each and for which app.
    let all = list(own.clone()).await;
    assert_eq!(all.len(), 3, "{all:?}");
    let made_by = |links: &[Value], maker: &str, app: Option<&str>| -> Vec<String> {
        links
            .iter()
            .filter(|l| l["minted_by"] == maker && l["app_origin"].as_str() == app)
            .map(|l| {
                assert!(l["expires_at"].as_u64().is_some(), "{l}");
                assert!(l.get("code").is_none() && l.get("link").is_none(), "{l}");
                l["id"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let t_link = made_by(&all, &t_id, Some(A));
    assert_eq!(t_link.len(), 1, "{all:?}");
    assert_eq!(made_by(&all, &own_id, Some(A)).len(), 1, "{all:?}");
    let own_link = made_by(&all, &own_id, None);
    assert_eq!(own_link.len(), 1, "{all:?}");
    // A's sign-in sees A's two, not the relay's own app's.
    let seen_by_a = list(t.clone()).await;
    assert_eq!(seen_by_a.len(), 2, "{seen_by_a:?}");
    assert!(
        seen_by_a.iter().all(|l| l["app_origin"] == A),
        "{seen_by_a:?}"
    );
    let (status, _) = relay
        .send(
            Method::DELETE,
            &format!("/v1/signin-links/{}", own_link[0]),
            Some(&t),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another app's link is not found"
    );

    // The relay's own app revokes the link T made: it signs no one in.
    let (status, body) = relay
        .send(
            Method::DELETE,
            &format!("/v1/signin-links/{}", t_link[0]),
            Some(&own),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_refused(try_sign_in(&relay, &by_t).await, "a revoked link");
    assert_eq!(list(own.clone()).await.len(), 2);
    // A used link is listed no more.
    sign_in(&relay, &for_a).await;
    sign_in(&relay, &for_own).await;
    assert_eq!(list(own).await.len(), 0);
}

#[tokio::test]
async fn unused_sign_in_links_are_listed_with_their_app_and_maker_and_can_be_revoked_on_sqlite() {
    unused_sign_in_links_are_listed_with_their_app_and_maker_and_can_be_revoked(TestDb::sqlite())
        .await;
}

#[tokio::test]
async fn unused_sign_in_links_are_listed_with_their_app_and_maker_and_can_be_revoked_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    unused_sign_in_links_are_listed_with_their_app_and_maker_and_can_be_revoked(db).await;
}

/// Starts a session of `token`'s app for a new pairing: the status and body.
async fn start_session(relay: &Relay, token: &str) -> (StatusCode, Value, PairId) {
    let pair: PairId = id();
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/sessions",
            Some(token),
            Some(json!({"session_id": id::<SessionId>(), "pair_id": pair, "hello": "AA", "ttl_s": 86_400})),
        )
        .await;
    (status, body, pair)
}

async fn sessions_a_sign_in_started_end_when_it_is_signed_out(db: TestDb) {
    let relay = Relay::start(db, |c| {
        c.app_origins = listed(&[A, B]);
        c.limits.max_live_sessions_per_owner = 4;
    })
    .await;
    let (_, own) = relay.owner("alice").await;
    let t = child(&relay, &own, Some(A)).await;
    let c = child(&relay, &t, Some(A)).await;
    // T and the sign-in made from its link start sessions, each with its plugin's token.
    let mut plugins = Vec::new();
    for token in [&t, &c] {
        let (status, body, pair) = start_session(&relay, token).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        plugins.push((relay.mcp_token(token, pair).await.1, pair));
    }
    let (status, body, _) = start_session(&relay, &own).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&t), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Their plugins find no session, and the owner's places are free again.
    for (mcp, pair) in &plugins {
        let (status, body) = relay
            .send(
                Method::GET,
                &format!("/v1/pairings/{pair}/session"),
                Some(mcp),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
    for _ in 0..3 {
        let (status, body, _) = start_session(&relay, &own).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
}

#[tokio::test]
async fn sessions_a_sign_in_started_end_when_it_is_signed_out_on_sqlite() {
    sessions_a_sign_in_started_end_when_it_is_signed_out(TestDb::sqlite()).await;
}

#[tokio::test]
async fn sessions_a_sign_in_started_end_when_it_is_signed_out_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    sessions_a_sign_in_started_end_when_it_is_signed_out(db).await;
}
