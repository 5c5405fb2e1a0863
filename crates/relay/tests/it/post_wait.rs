//! A post with `wait_ms` stores its call, then waits for the answer as a read would and sends it
//! with the acknowledgement (`status`): the plugin's call needs no read. A reply to a call whose
//! post (or read) waits on the same replica reads for it in the reply's own write
//! (`sealpost_relay::handoff`). Each property runs on SQLite and, when a server is at hand, on
//! PostgreSQL.

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

const READS_HANDED: &str = "sealpost_reads_handed_total";
const READS_STANDING: &str = "sealpost_reads_standing";

#[tokio::test]
async fn a_reply_reads_for_the_post_waiting_here_in_its_own_write() {
    on_both(|relay| async move {
        let p = pairing(&relay, "alice").await;
        let call = id();
        let answer = async {
            relay.wait_for_metric(READS_STANDING, 1.0).await;
            tab_answers(&relay, &p, call, b"handed").await;
        };
        let ((status, posted), ()) = tokio::time::timeout(ANSWERED_WELL_BEFORE, async {
            tokio::join!(post_waiting(&relay, &p, call, 30_000), answer)
        })
        .await
        .expect("the reply answered the post's wait");
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        assert_eq!(posted["status"]["state"], "answered", "{posted}");
        assert_eq!(unb64(&posted["status"]["reply"]), b"handed");
        assert_eq!(
            relay.metric(READS_HANDED).await,
            Some(1.0),
            "the reply read"
        );
        assert_eq!(relay.metric(READS_STANDING).await, Some(0.0));
        assert_eq!(
            relay.metric("sealpost_admitted_calls").await,
            Some(0.0),
            "the delivered answer is not remembered as one still to read"
        );
    })
    .await;
}

/// Posts whose waits end (they run out) while the replies to their calls arrive: every answer
/// reaches the plugin, by the post or by the read after it, and the first to carry it says
/// `answered` (a read a reply made for a wait that had gone would have marked it delivered).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waits_ending_as_replies_arrive_lose_no_answer() {
    on_both(|relay| async move {
        const ROUNDS: usize = 150;
        let p = pairing(&relay, "alice").await;
        for round in 0..ROUNDS {
            // Every tenth round the reply waits until the post's wait stands, so some surely
            // hand over whatever the machine's load; the others race the wait's end.
            let sure = round % 10 == 0;
            let wait = if sure { 5_000 } else { 20 + round as u64 % 40 };
            let call = id();
            let reply = format!("reply {round}");
            let answer = async {
                if sure {
                    relay.wait_for_metric(READS_STANDING, 1.0).await;
                } else {
                    tokio::time::sleep(Duration::from_micros(7_000 * (round % 11) as u64)).await;
                }
                tab_answers(&relay, &p, call, reply.as_bytes()).await;
            };
            let ((status, posted), ()) = tokio::join!(post_waiting(&relay, &p, call, wait), answer);
            assert_eq!(status, StatusCode::CREATED, "{posted}");
            let first = match posted.get("status") {
                Some(status) if status["state"] != "pending" && status["state"] != "claimed" => {
                    status.clone()
                }
                _ => {
                    let (status, read) = relay
                        .send(
                            Method::GET,
                            format!("/v1/calls/{call}?wait_ms=5000"),
                            Some(&p.mcp),
                            None,
                        )
                        .await;
                    assert_eq!(status, StatusCode::OK, "{read}");
                    read
                }
            };
            assert_eq!(first["state"], "answered", "round {round}: {first}");
            assert_eq!(unb64(&first["reply"]), reply.as_bytes());
        }
        assert!(
            relay.metric(READS_HANDED).await.unwrap_or(0.0) >= (ROUNDS / 10) as f64,
            "the sure rounds handed over"
        );
        assert_eq!(relay.metric(READS_STANDING).await, Some(0.0));
    })
    .await;
}
