//! Ending a session answers the claims waiting on it at once with 410 `session_ended`: when a
//! new session for the same pairing replaces it, when the tab ends it, when it expires, and
//! when the sign-in that started it is signed out. On
//! both backends, with no fallback re-check, so only a wake-up can answer the claim early.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use sealpost_protocol::ids::SessionId;
use sealpost_testkit::{Relay, b64};
use sealpost_testkit::{TestDb, id};

/// A claim waits up to 30 s; answering within this shows it was woken (a hang guard, not a
/// speed measurement).
const HANG_GUARD: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// `POST /v1/sessions` for the same pair_id.
    Replaced,
    /// `DELETE /v1/sessions/{id}`.
    Deleted,
    /// The session's TTL runs out and the sweeper ends it.
    Expired,
    /// The sign-in that started it is signed out from another (`DELETE /v1/owner-tokens/{id}`).
    SignedOut,
}

async fn a_waiting_claim_answers_session_ended_when(db: TestDb, ending: Ending) {
    let relay = Relay::start(db, |config| {
        config.limits.fallback_poll_ms = 600_000;
        if ending == Ending::Expired {
            config.limits.sweep_interval_ms = 20;
        }
    })
    .await;
    let (_, owner) = relay.owner("alice").await;
    // The session is started by a sign-in of its own where it is to be signed out; the claim
    // is the owner's first sign-in's, which goes on.
    let starter = if ending == Ending::SignedOut {
        let (_, made) = crate::apps::link(&relay, &owner, None).await;
        crate::apps::sign_in(&relay, made["link"].as_str().unwrap()).await["token"]
            .as_str()
            .unwrap()
            .to_owned()
    } else {
        owner.clone()
    };
    let pair = id();
    let session = id::<SessionId>();
    let ttl_s = if ending == Ending::Expired { 1 } else { 3_600 };
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/sessions",
            Some(&starter),
            Some(json!({"session_id": session, "pair_id": pair, "hello": b64(b"hello"), "ttl_s": ttl_s})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let claim = relay.send(
        Method::POST,
        format!("/v1/sessions/{session}/claims?wait_ms=30000"),
        Some(&owner),
        None,
    );
    let end = async {
        // The claim is registered and has checked the store once: from here on only a wake-up
        // makes it check again.
        relay.wait_for_waiters(1).await;
        relay.wait_for_claimer(&owner, pair).await;
        match ending {
            Ending::Replaced => {
                relay.session(&owner, pair, b"the next tab").await;
            }
            Ending::Deleted => {
                let (status, _) = relay
                    .send(
                        Method::DELETE,
                        format!("/v1/sessions/{session}"),
                        Some(&owner),
                        None,
                    )
                    .await;
                assert_eq!(status, StatusCode::NO_CONTENT);
            }
            // The sweeper ends it once its TTL has run out.
            Ending::Expired => {}
            Ending::SignedOut => {
                let id = crate::apps::own_sign_in_id(&relay, &starter).await;
                let (status, _) = relay
                    .send(
                        Method::DELETE,
                        format!("/v1/owner-tokens/{id}"),
                        Some(&owner),
                        None,
                    )
                    .await;
                assert_eq!(status, StatusCode::NO_CONTENT);
            }
        }
    };
    let ((status, body), ()) = tokio::time::timeout(HANG_GUARD, async { tokio::join!(claim, end) })
        .await
        .expect("the waiting claim was answered when its session ended");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::GONE, Some("session_ended")),
        "{body}"
    );
}

#[tokio::test]
async fn a_claim_waiting_on_a_replaced_session_answers_session_ended_on_sqlite() {
    a_waiting_claim_answers_session_ended_when(TestDb::sqlite(), Ending::Replaced).await;
}

#[tokio::test]
async fn a_claim_waiting_on_a_replaced_session_answers_session_ended_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_waiting_claim_answers_session_ended_when(db, Ending::Replaced).await;
}

#[tokio::test]
async fn a_claim_waiting_on_a_deleted_session_answers_session_ended_on_sqlite() {
    a_waiting_claim_answers_session_ended_when(TestDb::sqlite(), Ending::Deleted).await;
}

#[tokio::test]
async fn a_claim_waiting_on_a_deleted_session_answers_session_ended_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_waiting_claim_answers_session_ended_when(db, Ending::Deleted).await;
}

#[tokio::test]
async fn a_claim_waiting_on_an_expired_session_answers_session_ended_on_sqlite() {
    a_waiting_claim_answers_session_ended_when(TestDb::sqlite(), Ending::Expired).await;
}

#[tokio::test]
async fn a_claim_waiting_on_an_expired_session_answers_session_ended_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_waiting_claim_answers_session_ended_when(db, Ending::Expired).await;
}

#[tokio::test]
async fn a_claim_waiting_on_a_session_whose_sign_in_was_signed_out_answers_session_ended_on_sqlite()
{
    a_waiting_claim_answers_session_ended_when(TestDb::sqlite(), Ending::SignedOut).await;
}

#[tokio::test]
async fn a_claim_waiting_on_a_session_whose_sign_in_was_signed_out_answers_session_ended_on_postgres()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_waiting_claim_answers_session_ended_when(db, Ending::SignedOut).await;
}
