//! A claim waiting on this replica is claimed for by the next post to its session, in the
//! post's own write (`sealpost_relay::handoff`). The tests run each property on SQLite and,
//! when a server is at hand, on PostgreSQL.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use sealpost_testkit::{Pairing, Relay, TestDb, b64, id, pairing};

const HANDED: &str = "sealpost_claims_handed_total";
const STANDING: &str = "sealpost_claims_standing";

/// A relay whose long-polls never re-check on their own before their deadline.
async fn relay_on(db: TestDb) -> Relay {
    Relay::start(db, |c| c.limits.fallback_poll_ms = 600_000).await
}

/// Runs `check` on SQLite, then on PostgreSQL if a server is configured.
async fn on_both<F, Fut>(check: F)
where
    F: Fn(Relay) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    check(relay_on(TestDb::sqlite()).await).await;
    if let Some(db) = TestDb::postgres().await {
        check(relay_on(db).await).await;
    }
}

/// A claim by `p`'s owner on its session, waiting up to `wait_ms`.
fn claiming<'a>(
    relay: &'a Relay,
    p: &'a Pairing,
    wait_ms: u64,
) -> impl std::future::Future<Output = (StatusCode, serde_json::Value)> + 'a {
    relay.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms={wait_ms}", p.session),
        Some(&p.owner),
        None,
    )
}

/// The ids of the calls a claim's answer carries.
fn claim_ids(answer: &serde_json::Value) -> Vec<String> {
    answer["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap().to_owned())
        .collect()
}

/// A liveness bound for a long-poll that should be answered by a post, not a measurement.
const ANSWERED_WELL_BEFORE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_post_claims_for_the_claim_standing_here_and_the_call_goes_round() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let claim = claiming(&relay, &p, 30_000);
        let post = async {
            relay.wait_for_metric(STANDING, 1.0).await;
            relay.post_call(&p.mcp, p.session, b"handed").await
        };
        let ((status, claimed), call) =
            tokio::time::timeout(ANSWERED_WELL_BEFORE, async { tokio::join!(claim, post) })
                .await
                .expect("the standing claim was answered by the post");
        assert_eq!(status, StatusCode::OK, "{claimed}");
        assert_eq!(claimed["calls"][0]["call_id"], json!(call));
        assert_eq!(relay.metric(HANDED).await, Some(1.0), "the post claimed");
        assert_eq!(relay.metric(STANDING).await, Some(0.0));

        let (_, view) = relay
            .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
            .await;
        assert_eq!(view["state"], "claimed");
        let (_, again) = relay
            .send(
                Method::POST,
                format!("/v1/sessions/{}/claims", p.session),
                Some(&p.owner),
                None,
            )
            .await;
        assert_eq!(again["calls"], json!([]), "claimed once");
        let (status, _) = relay
            .send(
                Method::PUT,
                format!("/v1/calls/{call}/reply"),
                Some(&p.owner),
                Some(json!({"envelope": b64(b"reply")})),
            )
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (_, read) = relay
            .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
            .await;
        assert_eq!(read["state"], "answered");
    })
    .await;
}

#[tokio::test]
async fn a_standing_claim_whose_token_was_revoked_gets_nothing_and_the_call_waits() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        // The tab claims with a sign-in other than the one that started the session (signing
        // that one out would end the session too), made from its link.
        let (_, made) = crate::apps::link(&relay, &p.owner, None).await;
        let tab = crate::apps::sign_in(&relay, made["link"].as_str().unwrap()).await["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let claim = relay.send(
            Method::POST,
            format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
            Some(&tab),
            None,
        );
        let revoke_then_post = async {
            relay.wait_for_metric(STANDING, 1.0).await;
            let (status, _) = relay
                .send(Method::POST, "/v1/auth/signout", Some(&tab), None)
                .await;
            assert_eq!(status, StatusCode::NO_CONTENT);
            relay.post_call(&p.mcp, p.session, b"for a live tab").await
        };
        let ((status, body), call) = tokio::time::timeout(ANSWERED_WELL_BEFORE, async {
            tokio::join!(claim, revoke_then_post)
        })
        .await
        .expect("the claim was answered");
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        let (_, view) = relay
            .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
            .await;
        assert_eq!(view["state"], "pending", "no revoked claimer holds it");
    })
    .await;
}

#[tokio::test]
async fn a_refused_post_leaves_the_claim_standing_for_the_next() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let first = relay.post_call(&p.mcp, p.session, b"first").await;
        let claim = claiming(&relay, &p, 30_000);
        let (_, claimed) = claim.await;
        assert_eq!(claimed["calls"][0]["call_id"], json!(first));

        let claim = claiming(&relay, &p, 30_000);
        let posts = async {
            relay.wait_for_metric(STANDING, 1.0).await;
            let (status, _) = relay
                .send(
                    Method::POST,
                    format!("/v1/sessions/{}/calls", p.session),
                    Some(&p.mcp),
                    Some(json!({"call_id": first, "envelope": b64(b"again"), "ttl_s": 60})),
                )
                .await;
            assert_eq!(status, StatusCode::CONFLICT);
            relay.wait_for_metric(STANDING, 1.0).await;
            relay.post_call(&p.mcp, p.session, b"second").await
        };
        let ((status, claimed), second) =
            tokio::time::timeout(ANSWERED_WELL_BEFORE, async { tokio::join!(claim, posts) })
                .await
                .expect("the claim was answered by the second post");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(claimed["calls"].as_array().map(Vec::len), Some(1));
        assert_eq!(claimed["calls"][0]["call_id"], json!(second));
    })
    .await;
}

/// Claims that end (their wait runs out) while posts arrive: every call is handed to exactly
/// one claim, none is left claimed with no one holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_ending_as_posts_take_them_lose_no_call() {
    on_both(|relay| async move {
        const ROUNDS: usize = 150;
        let p = pairing(&relay, "alice").await;
        let mut posted = Vec::new();
        let mut handed = Vec::new();
        for round in 0..ROUNDS {
            // Every tenth round the post waits until the claim stands, so some surely hand
            // over whatever the machine's load; the others race the claim's end.
            let sure = round % 10 == 0;
            if sure {
                // A call an earlier round left pending would answer the claim at once.
                handed.extend(claim_ids(&claiming(&relay, &p, 0).await.1));
            }
            let wait = if sure { 5_000 } else { 20 + round as u64 % 40 };
            let claim = claiming(&relay, &p, wait);
            let post = async {
                if sure {
                    relay.wait_for_metric(STANDING, 1.0).await;
                } else {
                    tokio::time::sleep(Duration::from_micros(7_000 * (round % 11) as u64)).await;
                }
                relay.post_call(&p.mcp, p.session, b"race").await
            };
            let ((status, claimed), call) = tokio::join!(claim, post);
            assert_eq!(status, StatusCode::OK, "{claimed}");
            posted.push(call);
            handed.extend(claim_ids(&claimed));
        }
        let (_, rest) = relay
            .send(
                Method::POST,
                format!("/v1/sessions/{}/claims?max=50", p.session),
                Some(&p.owner),
                None,
            )
            .await;
        handed.extend(claim_ids(&rest));
        let mut expected: Vec<String> = posted.iter().map(|c| c.to_string()).collect();
        expected.sort();
        handed.sort();
        assert_eq!(handed, expected, "every call claimed exactly once");
        assert!(
            relay.metric(HANDED).await.unwrap_or(0.0) >= (ROUNDS / 10) as f64,
            "the sure rounds handed over"
        );
    })
    .await;
}

#[tokio::test]
async fn another_owners_post_takes_no_offer() {
    on_both(|relay| async move {
        let alice = pairing(&relay, "alice").await;
        let bob = pairing(&relay, "bob").await;
        let claim = relay.send(
            Method::POST,
            format!("/v1/sessions/{}/claims?wait_ms=300", alice.session),
            Some(&alice.owner),
            None,
        );
        let post = async {
            relay.wait_for_metric(STANDING, 1.0).await;
            let (status, _) = relay
                .send(
                    Method::POST,
                    format!("/v1/sessions/{}/calls", alice.session),
                    Some(&bob.mcp),
                    Some(json!({"call_id": id::<sealpost_protocol::ids::CallId>(), "envelope": b64(b"x"), "ttl_s": 60})),
                )
                .await;
            status
        };
        let ((_, claimed), status) = tokio::join!(claim, post);
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(claimed["calls"], json!([]));
        assert_eq!(relay.metric(HANDED).await, Some(0.0));
    })
    .await;
}
