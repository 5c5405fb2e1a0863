//! Limits admit work at the door: with its owner's rate spent, the tab's first reply or cancel
//! of a call it claimed, and the plugin's first read of its answer, still go through, each
//! counted in `sealpost_requests_exempt_total`. Everything else is refused exactly as before
//! (same status, code, message and `Retry-After`): a second reply, cancel or read, a reply to
//! a call never claimed, a reply by another token of the same owner, a reply after the lease,
//! a read by another pairing's token (429, not 404). The byte quota still refuses an exempt
//! reply, which then stays exempt. Over the session channel: `admitted_channel`.
//!
//! The owner's rate is one request a second. Each group of checks starts right after the rate
//! refilled once and that one request was spent ([`spend`]), so nothing refills for a second,
//! and ends by checking the rate is still spent, so no check could have passed by a refill.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::CallId;
use sealpost_relay::config::Config;
use serde_json::{Value, json};

use crate::api::series;
use sealpost_testkit::{Relay, TestDb, b64, id, pairing};

/// Far longer than the rate takes to refill: reaching it means it never did.
const GIVE_UP: Duration = Duration::from_secs(10);

/// One request a second for all of an owner's tokens together, with room for the set-up.
pub(crate) fn one_request_a_second(config: &mut Config) {
    config.limits.rate_per_token_per_s = 0;
    config.limits.rate_per_owner_per_s = 1;
    config.limits.rate_burst_per_owner = 60;
}

/// An answer over HTTP or on the channel: status, `Retry-After` in seconds, body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub body: Value,
}

impl Answer {
    /// A channel answer in the same shape.
    pub(crate) fn of_channel(answer: &Value) -> Self {
        Answer {
            status: answer["status"].as_u64().unwrap() as u16,
            retry_after: answer["retry_after_s"].as_u64(),
            body: answer["body"].clone(),
        }
    }
}

pub(crate) async fn request(
    relay: &Relay,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = relay
        .client
        .request(method, format!("{}{path}", relay.base))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let text = response.text().await.unwrap();
    Answer {
        status,
        retry_after,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
    }
}

pub(crate) async fn reply(relay: &Relay, token: &str, call: CallId, envelope: &[u8]) -> Answer {
    let body = json!({"envelope": b64(envelope)});
    let path = format!("/v1/calls/{call}/reply");
    request(relay, Method::PUT, &path, token, Some(body)).await
}

async fn cancel(relay: &Relay, token: &str, call: CallId) -> Answer {
    let body = json!({"reason": "undecryptable"});
    let path = format!("/v1/calls/{call}/cancel");
    request(relay, Method::POST, &path, token, Some(body)).await
}

pub(crate) async fn read(relay: &Relay, token: &str, call: CallId) -> Answer {
    request(
        relay,
        Method::GET,
        &format!("/v1/calls/{call}"),
        token,
        None,
    )
    .await
}

/// The owner's rate, spent right after a refill: the refusal every check that is not exempt
/// must get, until a second has passed.
#[derive(Debug)]
pub(crate) struct Spent {
    pub refusal: Answer,
}

/// Spends the owner's rate through `token`: drains its burst, waits for the next refill and
/// takes it (a read of no call, 404), so the next refill is a second away. This waits for a
/// state, it does not guess a duration.
pub(crate) async fn spend(relay: &Relay, token: &str) -> Spent {
    let probe = || read(relay, token, id());
    tokio::time::timeout(GIVE_UP, async {
        while probe().await.status != 429 {}
        loop {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if probe().await.status == 404 {
                break;
            }
        }
    })
    .await
    .expect("the owner's rate refilled");
    let refusal = probe().await;
    assert_eq!(
        (refusal.status, refusal.body["error"]["code"].as_str()),
        (429, Some("owner_rate_limited")),
        "{refusal:?}"
    );
    assert!(refusal.retry_after.is_some());
    Spent { refusal }
}

impl Spent {
    /// `got` is the rate's refusal, exactly as any other request gets it.
    pub(crate) fn refused(&self, got: Answer, what: &str) {
        assert_eq!(got, self.refusal, "{what}: refused by the rate as before");
    }

    /// The rate is still spent after the checks: none of them passed by a refill.
    pub(crate) async fn still(&self, relay: &Relay, token: &str) {
        assert_eq!(
            read(relay, token, id()).await,
            self.refusal,
            "the rate refilled while the checks ran (they took over a second)"
        );
    }
}

/// The owner's count of requests let through a spent rate, by kind.
pub(crate) async fn exempt(relay: &Relay, kind: &str) -> f64 {
    let text = relay.metrics().await;
    series(
        &text,
        "sealpost_requests_exempt_total",
        &[&format!("kind=\"{kind}\"")],
    )
    .unwrap_or_else(|| panic!("sealpost_requests_exempt_total{{kind={kind}}} in\n{text}"))
}

/// Another sign-in of the same owner: another owner token.
async fn second_sign_in(relay: &Relay, owner: &str) -> String {
    let (status, body) = relay
        .send(Method::POST, "/v1/auth/signin-links", Some(owner), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let code = body["link"].as_str().unwrap().split("#signin=").nth(1);
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({ "code": code.unwrap() })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["token"].as_str().unwrap().to_owned()
}

async fn admitted_work_passes_a_spent_rate_over_http(db: TestDb) {
    let relay = Relay::start(db, one_request_a_second).await;
    let p = pairing(&relay, "alice").await;
    let other_tab = second_sign_in(&relay, &p.owner).await;
    let (_, other_pairing) = relay.mcp_token(&p.owner, id()).await;
    let mut posted = Vec::new();
    for _ in 0..3 {
        posted.push(relay.post_call(&p.mcp, p.session, b"call").await);
    }
    let claimed = relay
        .client_as(&p.owner)
        .claim(p.session, 3, 0)
        .await
        .unwrap();
    assert_eq!(claimed.calls.len(), 3);
    let [answered, cancelled, contested] = posted[..] else {
        unreachable!()
    };
    let unclaimed = relay.post_call(&p.mcp, p.session, b"pending").await;

    let spent = spend(&relay, &p.mcp).await;
    let answer = reply(&relay, &p.owner, answered, b"the answer").await;
    assert_eq!(answer.status, 204, "the first reply passes: {answer:?}");
    let answer = cancel(&relay, &p.owner, cancelled).await;
    assert_eq!(answer.status, 204, "the first cancel passes: {answer:?}");
    let again = b"again";
    spent.refused(
        reply(&relay, &p.owner, answered, again).await,
        "a second reply",
    );
    spent.refused(cancel(&relay, &p.owner, cancelled).await, "a second cancel");
    spent.refused(
        cancel(&relay, &p.owner, answered).await,
        "a cancel after the reply",
    );
    spent.refused(
        reply(&relay, &p.owner, unclaimed, again).await,
        "never claimed",
    );
    spent.refused(
        reply(&relay, &other_tab, contested, again).await,
        "another token",
    );
    spent.refused(
        cancel(&relay, &p.mcp, contested).await,
        "the plugin's cancel",
    );
    // Those refusals took nothing from the token that claimed the call.
    let answer = reply(&relay, &p.owner, contested, b"the answer").await;
    assert_eq!(answer.status, 204, "{answer:?}");
    spent.still(&relay, &p.mcp).await;

    let spent = spend(&relay, &p.mcp).await;
    let delivered = read(&relay, &p.mcp, answered).await;
    assert_eq!(
        delivered.status, 200,
        "the first read passes: {delivered:?}"
    );
    assert_eq!(delivered.body["state"], "answered");
    assert_eq!(delivered.body["reply"], b64(b"the answer"));
    spent.refused(read(&relay, &p.mcp, answered).await, "a second read");
    spent.refused(read(&relay, &p.owner, contested).await, "the tab's read");
    spent.refused(
        read(&relay, &other_pairing, contested).await,
        "another pairing's read (429, not 404)",
    );
    spent.still(&relay, &p.mcp).await;

    assert_eq!(exempt(&relay, "reply").await, 2.0);
    assert_eq!(exempt(&relay, "cancel").await, 1.0);
    // The other pairing's read was let through to the store too, which found nothing.
    assert_eq!(exempt(&relay, "read").await, 2.0);
}

#[tokio::test]
async fn admitted_work_passes_a_spent_rate_over_http_on_sqlite() {
    admitted_work_passes_a_spent_rate_over_http(TestDb::sqlite()).await;
}

#[tokio::test]
async fn admitted_work_passes_a_spent_rate_over_http_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    admitted_work_passes_a_spent_rate_over_http(db).await;
}

async fn a_reply_after_its_lease_is_refused_by_the_rate(db: TestDb) {
    let lease = Duration::from_millis(100);
    let relay = Relay::start(db, |config| {
        one_request_a_second(config);
        config.limits.lease_ms = lease.as_millis() as u64;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    let claimed = relay.client_as(&p.owner).claim(p.session, 1, 0).await;
    assert_eq!(claimed.unwrap().calls[0].call_id, call);
    // The lease ends by the clock; no state to wait for.
    tokio::time::sleep(lease * 2).await;
    let spent = spend(&relay, &p.mcp).await;
    spent.refused(
        reply(&relay, &p.owner, call, b"late").await,
        "after the lease",
    );
    spent.still(&relay, &p.mcp).await;
    assert_eq!(exempt(&relay, "reply").await, 0.0);
}

#[tokio::test]
async fn a_reply_after_its_lease_is_refused_by_the_rate_on_sqlite() {
    a_reply_after_its_lease_is_refused_by_the_rate(TestDb::sqlite()).await;
}

#[tokio::test]
async fn a_reply_after_its_lease_is_refused_by_the_rate_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_reply_after_its_lease_is_refused_by_the_rate(db).await;
}

async fn the_byte_quota_still_refuses_an_exempt_reply_which_stays_exempt(db: TestDb) {
    let relay = Relay::start(db, |config| {
        one_request_a_second(config);
        config.limits.max_bytes_held_per_owner = 4096;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    let claimed = relay.client_as(&p.owner).claim(p.session, 1, 0).await;
    assert_eq!(claimed.unwrap().calls[0].call_id, call);
    let spent = spend(&relay, &p.mcp).await;
    let too_big = reply(&relay, &p.owner, call, &[7u8; 8192]).await;
    assert_eq!(
        (too_big.status, too_big.body["error"]["code"].as_str()),
        (429, Some("bytes_quota_exceeded")),
        "{too_big:?}"
    );
    // Refused before the store: the exemption is not used up.
    let answer = reply(&relay, &p.owner, call, b"small").await;
    assert_eq!(answer.status, 204, "{answer:?}");
    spent.still(&relay, &p.mcp).await;
    assert_eq!(exempt(&relay, "reply").await, 2.0);
}

#[tokio::test]
async fn the_byte_quota_still_refuses_an_exempt_reply_which_stays_exempt_on_sqlite() {
    the_byte_quota_still_refuses_an_exempt_reply_which_stays_exempt(TestDb::sqlite()).await;
}

#[tokio::test]
async fn the_byte_quota_still_refuses_an_exempt_reply_which_stays_exempt_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    the_byte_quota_still_refuses_an_exempt_reply_which_stays_exempt(db).await;
}
