//! The plugin's watch of its pairing (`GET /v1/pairings/{pair_id}/session?wait_ms=`): it answers
//! at once when the caller is behind, and is woken by what changes the tools the plugin lists:
//! a catalog update, the session ending, a new session.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::SessionId;
use serde_json::{Value, json};

use sealpost_testkit::{Pairing, Relay, TestDb, b64, pairing};

use crate::catalog::update;

/// Long enough that an answer before it was a wake-up, not the wait running out.
const WOKEN_WELL_BEFORE: Duration = Duration::from_secs(20);

async fn watch(relay: &Relay, p: &Pairing, known: Option<(SessionId, u64)>) -> (StatusCode, Value) {
    let knows = known.map_or(String::new(), |(session, seq)| {
        format!("&session_id={session}&catalog_seq={seq}")
    });
    let path = format!("/v1/pairings/{}/session?wait_ms=30000{knows}", p.pair);
    relay.send(Method::GET, path, Some(&p.mcp), None).await
}

const WATCHING: &str = "sealpost_longpolls_open{kind=\"watch\"}";

/// `watch` raced against `change`, which runs once the watch has looked and waits.
async fn woken_by<F: std::future::Future>(
    relay: &Relay,
    watching: impl std::future::Future<Output = (StatusCode, Value)>,
    change: F,
) -> (StatusCode, Value) {
    let change = async {
        relay.wait_for_metric(WATCHING, 1.0).await;
        change.await
    };
    let (answer, _) =
        tokio::time::timeout(WOKEN_WELL_BEFORE, async { tokio::join!(watching, change) })
            .await
            .expect("the watch was woken, not left to its deadline");
    answer
}

#[tokio::test]
async fn a_watch_answers_at_once_when_behind_and_is_woken_by_each_change_of_the_pairings_session() {
    // No re-checks of its own: only a wake-up ends a wait early.
    let relay = Relay::start(TestDb::sqlite(), |c| c.limits.fallback_poll_ms = 600_000).await;
    let p = pairing(&relay, "alice").await;

    // Knowing of no session, it hears of the live one at once.
    let (status, body) = tokio::time::timeout(WOKEN_WELL_BEFORE, watch(&relay, &p, None))
        .await
        .expect("answered at once");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["session_id"], json!(p.session));

    // The tab's catalog update.
    let put = relay.send(
        Method::PUT,
        format!("/v1/sessions/{}/catalog", p.session),
        Some(&p.owner),
        Some(json!({"update": b64(&update(p.session, 1, 0xa1))})),
    );
    let (status, body) = woken_by(&relay, watch(&relay, &p, Some((p.session, 0))), put).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.get("catalog_update").is_some(), "{body}");

    // A new session of the pairing, which ends the old one.
    let (answer, newer) = {
        let watching = watch(&relay, &p, Some((p.session, 1)));
        let change = async {
            relay.wait_for_metric(WATCHING, 1.0).await;
            relay.session(&p.owner, p.pair, b"hello again").await
        };
        tokio::time::timeout(WOKEN_WELL_BEFORE, async { tokio::join!(watching, change) })
            .await
            .expect("the watch was woken")
    };
    assert_eq!(answer.0, StatusCode::OK);
    assert_eq!(answer.1["session_id"], json!(newer));

    // The session ending: no live session.
    let end = relay.send(
        Method::DELETE,
        format!("/v1/sessions/{newer}"),
        Some(&p.owner),
        None,
    );
    let (status, body) = woken_by(&relay, watch(&relay, &p, Some((newer, 0))), end).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "no_live_session");

    // Knowing of none, a new session wakes it.
    let start = relay.session(&p.owner, p.pair, b"third");
    let (status, body) = woken_by(&relay, watch(&relay, &p, None), start).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // What it knows is checked as any input is.
    let (status, body) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session?wait_ms=10&session_id=nope", p.pair),
            Some(&p.mcp),
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
}
