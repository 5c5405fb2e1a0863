//! A post with `wait_ms` stores its call, then waits for the answer as a read would and sends it
//! with the acknowledgement (`status`): the plugin's call needs no read. Each property runs on
//! SQLite and, when a server is at hand, on PostgreSQL.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use sealpost_protocol::ids::CallId;
use sealpost_testkit::{Pairing, Relay, TestDb, b64, id, pairing, unb64};

/// A relay whose long-polls never re-check on their own before their deadline, so only a
/// wake-up explains an answer well before it.
async fn relay_on(db: TestDb, tweak: impl FnOnce(&mut sealpost_relay::config::Config)) -> Relay {
    Relay::start(db, |c| {
        c.limits.fallback_poll_ms = 600_000;
        tweak(c);
    })
    .await
}

/// Runs `check` on SQLite, then on PostgreSQL if a server is configured.
async fn on_both<F, Fut>(check: F)
where
    F: Fn(Relay) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    check(relay_on(TestDb::sqlite(), |_| {}).await).await;
    if let Some(db) = TestDb::postgres().await {
        check(relay_on(db, |_| {}).await).await;
    }
}

/// `p`'s plugin posts `call` with `wait_ms`.
async fn post_waiting(
    relay: &Relay,
    p: &Pairing,
    call: CallId,
    wait_ms: u64,
) -> (StatusCode, Value) {
    relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/calls?wait_ms={wait_ms}", p.session),
            Some(&p.mcp),
            Some(json!({"call_id": call, "envelope": b64(b"sealed call"), "ttl_s": 60})),
        )
        .await
}

/// The tab claims `call` (waiting for it to be posted) and replies `reply`.
async fn tab_answers(relay: &Relay, p: &Pairing, call: CallId, reply: &[u8]) {
    let claimed = relay
        .client_as(&p.owner)
        .claim(p.session, 1, 30_000)
        .await
        .unwrap();
    assert_eq!(claimed.calls[0].call_id, call);
    let (status, body) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&p.owner),
            Some(json!({"envelope": b64(reply)})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

/// A liveness bound for a wait that a reply should end, not a measurement.
const ANSWERED_WELL_BEFORE: Duration = Duration::from_secs(20);

async fn state_of(relay: &Relay, p: &Pairing, call: CallId) -> Value {
    let (status, view) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    view
}

#[tokio::test]
async fn a_waiting_post_is_answered_with_the_reply_which_is_then_delivered() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let ((status, posted), ()) = tokio::time::timeout(ANSWERED_WELL_BEFORE, async {
            tokio::join!(
                post_waiting(&relay, &p, call, 30_000),
                tab_answers(&relay, &p, call, b"sealed reply")
            )
        })
        .await
        .expect("the reply ended the post's wait");
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        assert_eq!(posted["call_id"], json!(call));
        assert_eq!(posted["status"]["state"], "answered", "{posted}");
        assert_eq!(unb64(&posted["status"]["reply"]), b"sealed reply");
        let again = state_of(&relay, &p, call).await;
        assert_eq!(
            again["state"], "delivered",
            "the post's answer was the first read"
        );
        assert_eq!(again["reply"], posted["status"]["reply"], "and reads again");
    })
    .await;
}

#[tokio::test]
async fn a_post_without_wait_answers_at_once_without_a_status() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let (status, posted) = relay
            .send(
                Method::POST,
                format!("/v1/sessions/{}/calls", p.session),
                Some(&p.mcp),
                Some(json!({"call_id": call, "envelope": b64(b"sealed call"), "ttl_s": 60})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        assert!(posted.get("status").is_none(), "{posted}");
        assert_eq!(state_of(&relay, &p, call).await["state"], "pending");
    })
    .await;
}

#[tokio::test]
async fn a_post_whose_wait_ends_unanswered_says_where_the_call_is() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let (status, posted) = post_waiting(&relay, &p, call, 150).await;
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        assert_eq!(posted["status"]["state"], "pending", "{posted}");
        assert!(posted["status"].get("reply").is_none());
        // The call is stored and goes round as any other.
        tab_answers(&relay, &p, call, b"later").await;
        assert_eq!(unb64(&state_of(&relay, &p, call).await["reply"]), b"later");
    })
    .await;
}

#[tokio::test]
async fn a_call_cancelled_during_the_wait_answers_the_post_with_the_reason() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let cancel = async {
            relay
                .wait_for_metric("sealpost_longpolls_open{kind=\"read\"}", 1.0)
                .await;
            let (status, body) = relay
                .send(
                    Method::POST,
                    format!("/v1/calls/{call}/cancel"),
                    Some(&p.owner),
                    Some(json!({"reason": "undecryptable"})),
                )
                .await;
            assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        };
        let ((status, posted), ()) = tokio::time::timeout(ANSWERED_WELL_BEFORE, async {
            tokio::join!(post_waiting(&relay, &p, call, 30_000), cancel)
        })
        .await
        .expect("the cancel ended the post's wait");
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        assert_eq!(posted["status"]["state"], "cancelled", "{posted}");
        assert_eq!(posted["status"]["reason"], "undecryptable");
    })
    .await;
}

#[tokio::test]
async fn a_token_revoked_during_the_wait_is_not_sent_the_reply() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let revoke_then_answer = async {
            relay
                .wait_for_metric("sealpost_longpolls_open{kind=\"read\"}", 1.0)
                .await;
            let (status, body) = relay
                .send(
                    Method::DELETE,
                    format!("/v1/mcp-tokens/{}", p.mcp_id),
                    Some(&p.owner),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
            tab_answers(&relay, &p, call, b"for a live token only").await;
        };
        let ((status, posted), ()) = tokio::time::timeout(ANSWERED_WELL_BEFORE, async {
            tokio::join!(post_waiting(&relay, &p, call, 30_000), revoke_then_answer)
        })
        .await
        .expect("the reply ended the post's wait");
        assert_eq!(status, StatusCode::CREATED, "the call was stored: {posted}");
        assert!(
            posted.get("status").is_none(),
            "a revoked token read: {posted}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_post_past_its_tokens_share_of_long_polls_is_stored_and_answered_at_once() {
    let relay = relay_on(TestDb::sqlite(), |c| c.limits.max_long_polls_per_token = 1).await;
    let p = pairing(&relay, "alice").await;
    let first = id();
    let held = post_waiting(&relay, &p, first, 30_000);
    let second = async {
        relay
            .wait_for_metric("sealpost_longpolls_open{kind=\"read\"}", 1.0)
            .await;
        let call = id();
        let answered = post_waiting(&relay, &p, call, 30_000).await;
        // The first post's wait ends when its call is cancelled.
        relay
            .send(
                Method::POST,
                format!("/v1/calls/{first}/cancel"),
                Some(&p.mcp),
                Some(json!({"reason": "client_cancelled"})),
            )
            .await;
        (call, answered)
    };
    let (_, (call, (status, posted))) =
        tokio::time::timeout(ANSWERED_WELL_BEFORE, async { tokio::join!(held, second) })
            .await
            .expect("the second post was answered at once");
    assert_eq!(status, StatusCode::CREATED, "stored, not refused: {posted}");
    assert!(posted.get("status").is_none(), "no wait was made: {posted}");
    assert_eq!(state_of(&relay, &p, call).await["state"], "pending");
    let refused = "sealpost_requests_refused_total{cap=\"long_polls_per_token\"}";
    assert_eq!(
        relay.metric(refused).await.unwrap_or(0.0),
        0.0,
        "nothing was refused"
    );
}

#[tokio::test]
async fn a_wait_too_long_is_refused_before_anything_is_stored() {
    let relay = relay_on(TestDb::sqlite(), |_| {}).await;
    let p = pairing(&relay, "alice").await;
    let call = id();
    let (status, body) = post_waiting(&relay, &p, call, 30_001).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("wait_too_long")),
        "{body}"
    );
    let (status, _) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was stored");
}

#[tokio::test]
async fn a_duplicate_post_is_refused_at_once_even_when_it_would_wait() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let (status, _) = post_waiting(&relay, &p, call, 100).await;
        assert_eq!(status, StatusCode::CREATED);
        let (status, body) =
            tokio::time::timeout(ANSWERED_WELL_BEFORE, post_waiting(&relay, &p, call, 30_000))
                .await
                .expect("refused without a wait");
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::CONFLICT, Some("duplicate_call")),
            "{body}"
        );
    })
    .await;
}
