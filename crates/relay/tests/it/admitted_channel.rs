//! Limits admit work at the door, on the session channel: with the owner's rate spent, the
//! tab's first reply and cancel of calls it claimed go through, and the ledger is the one HTTP
//! uses (a call claimed on the channel is answered over HTTP); a second reply or cancel, a
//! reply to a call never claimed, a claim and a malformed message get the rate's refusal as
//! before. Every refusal the channel sends is timed in the request metrics under its
//! operation's route (`/v1/channel` when the message names none).

use serde_json::{Value, json};

use crate::admitted::{Answer, exempt, one_request_a_second, read, reply, spend};
use crate::api::series;
use crate::channel::{Socket, next, open, send, socket_text};
use sealpost_testkit::{Relay, TestDb, b64, pairing};

/// Sends `request` and waits for its answer (one at a time, so answers come in order).
async fn ask(channel: &mut Socket, request: Value) -> Answer {
    send(channel, request).await;
    Answer::of_channel(&next(channel).await.expect("an answer"))
}

/// Requests the channel answered with `status` under `route`.
async fn timed(relay: &Relay, route: &str, status: u16) -> f64 {
    let text = relay.metrics().await;
    let labels = [
        "method=\"WS\"",
        &format!("route=\"{route}\""),
        &format!("status=\"{status}\""),
    ];
    series(
        &text,
        "sealpost_http_request_duration_seconds_count",
        &labels,
    )
    .unwrap_or(0.0)
}

async fn admitted_work_passes_a_spent_rate_on_the_channel(db: TestDb) {
    let relay = Relay::start(db, one_request_a_second).await;
    let p = pairing(&relay, "alice").await;
    for _ in 0..3 {
        relay.post_call(&p.mcp, p.session, b"call").await;
    }
    let mut channel = open(&relay, &p.owner).await;
    let claimed = ask(
        &mut channel,
        json!({"id": 1, "op": "claim", "session_id": p.session, "max": 3}),
    )
    .await;
    assert_eq!(claimed.status, 200, "{claimed:?}");
    let calls: Vec<Value> = claimed.body["calls"].as_array().unwrap().clone();
    let call = |i: usize| calls[i]["call_id"].clone();
    let unclaimed = relay.post_call(&p.mcp, p.session, b"pending").await;

    let spent = spend(&relay, &p.mcp).await;
    let envelope = b64(b"the answer");
    let first = ask(
        &mut channel,
        json!({"id": 2, "op": "reply", "call_id": call(0), "envelope": envelope}),
    )
    .await;
    assert_eq!(first.status, 204, "the first reply passes: {first:?}");
    let first = ask(
        &mut channel,
        json!({"id": 3, "op": "cancel", "call_id": call(1), "reason": "undecryptable"}),
    )
    .await;
    assert_eq!(first.status, 204, "the first cancel passes: {first:?}");
    for (what, request) in [
        (
            "a second reply",
            json!({"id": 4, "op": "reply", "call_id": call(0), "envelope": envelope}),
        ),
        (
            "a second cancel",
            json!({"id": 5, "op": "cancel", "call_id": call(1), "reason": "undecryptable"}),
        ),
        (
            "never claimed",
            json!({"id": 6, "op": "reply", "call_id": unclaimed, "envelope": envelope}),
        ),
        (
            "a claim",
            json!({"id": 7, "op": "claim", "session_id": p.session, "max": 1}),
        ),
    ] {
        spent.refused(ask(&mut channel, request).await, what);
    }
    socket_text(&mut channel, r#"{"id": 8, "op": "nonsense"}"#).await;
    let malformed = Answer::of_channel(&next(&mut channel).await.unwrap());
    spent.refused(malformed, "a malformed message");
    // Claimed on the channel, answered over HTTP: one ledger.
    let answer = reply(
        &relay,
        &p.owner,
        serde_json::from_value(call(2)).unwrap(),
        b"x",
    )
    .await;
    assert_eq!(answer.status, 204, "{answer:?}");
    let delivered = read(&relay, &p.mcp, serde_json::from_value(call(0)).unwrap()).await;
    assert_eq!(delivered.body["reply"], envelope, "{delivered:?}");
    spent.still(&relay, &p.mcp).await;

    assert_eq!(exempt(&relay, "reply").await, 2.0);
    assert_eq!(exempt(&relay, "cancel").await, 1.0);
    assert_eq!(exempt(&relay, "read").await, 1.0);
    assert_eq!(timed(&relay, "/v1/channel reply", 429).await, 2.0);
    assert_eq!(timed(&relay, "/v1/channel cancel", 429).await, 1.0);
    assert_eq!(timed(&relay, "/v1/channel claim", 429).await, 1.0);
    assert_eq!(timed(&relay, "/v1/channel", 429).await, 1.0);
    assert_eq!(timed(&relay, "/v1/channel reply", 204).await, 1.0);
}

#[tokio::test]
async fn admitted_work_passes_a_spent_rate_on_the_channel_on_sqlite() {
    admitted_work_passes_a_spent_rate_on_the_channel(TestDb::sqlite()).await;
}

#[tokio::test]
async fn admitted_work_passes_a_spent_rate_on_the_channel_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    admitted_work_passes_a_spent_rate_on_the_channel(db).await;
}
