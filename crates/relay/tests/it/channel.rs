//! The session channel (`GET /v1/channel`, a WebSocket): a call claimed, answered and
//! cancelled over it and read over HTTP, on both backends; and each refusal HTTP would give,
//! given on the channel too: no token, a forged, an MCP or a signed-out token, another owner's
//! session or call, a token signed out while the channel is open, an oversized message, one
//! channel too many, and a claim dropped with its channel claiming nothing.

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use sealpost_protocol::ids::CallId;
use sealpost_testkit::{Pairing, Relay, TestDb, b64, id, pairing, unb64};

/// Answers come in milliseconds; waiting this long means one never came (a hang guard).
const HANG_GUARD: Duration = Duration::from_secs(10);

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the channel offering `protocols` (`Err`: the relay refused the upgrade, with its
/// status and JSON body).
async fn open_with(relay: &Relay, protocols: &str) -> Result<Socket, (u16, Value)> {
    let url = format!("{}/v1/channel", relay.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    if !protocols.is_empty() {
        request.headers_mut().insert(
            "sec-websocket-protocol",
            HeaderValue::from_str(protocols).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, response)) => {
            assert_eq!(
                response.headers().get("sec-websocket-protocol").unwrap(),
                "sealpost.v1"
            );
            Ok(socket)
        }
        Err(tungstenite::Error::Http(response)) => {
            let body = response.body().clone().unwrap_or_default();
            Err((
                response.status().as_u16(),
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            ))
        }
        Err(other) => panic!("the channel did not open: {other}"),
    }
}

pub(crate) async fn open(relay: &Relay, token: &str) -> Socket {
    open_with(relay, &format!("sealpost.v1, sealpost.bearer.{token}"))
        .await
        .expect("the channel opens")
}

pub(crate) async fn send(socket: &mut Socket, request: Value) {
    socket
        .send(Message::Text(request.to_string().into()))
        .await
        .unwrap();
}

/// The next answer on the channel (`None`: it closed, with its close frame's code).
pub(crate) async fn next(socket: &mut Socket) -> Result<Value, Option<CloseCode>> {
    loop {
        let message = tokio::time::timeout(HANG_GUARD, socket.next())
            .await
            .expect("the channel answered");
        match message {
            Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(&text).unwrap()),
            Some(Ok(Message::Close(frame))) => return Err(frame.map(|f| f.code)),
            Some(Ok(_)) => continue,
            None | Some(Err(_)) => return Err(None),
        }
    }
}

async fn a_call_goes_through_the_channel(db: TestDb) {
    let relay = Relay::start(db, |_| {}).await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    assert_eq!(relay.metric("sealpost_channels_open").await, Some(1.0));

    // The claim waits on the channel for a call posted over HTTP.
    send(
        &mut channel,
        json!({"id": 1, "op": "claim", "session_id": p.session, "wait_ms": 20_000, "max": 10}),
    )
    .await;
    relay.wait_for_waiters(1).await;
    let call = relay.post_call(&p.mcp, p.session, b"sealed call").await;
    let claimed = next(&mut channel).await.unwrap();
    assert_eq!(
        (claimed["id"].as_u64(), claimed["status"].as_u64()),
        (Some(1), Some(200)),
        "{claimed}"
    );
    let calls = claimed["body"]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["call_id"], json!(call));
    assert_eq!(unb64(&calls[0]["envelope"]), b"sealed call");

    send(
        &mut channel,
        json!({"id": 2, "op": "reply", "call_id": call, "envelope": b64(b"sealed reply")}),
    )
    .await;
    assert_eq!(
        next(&mut channel).await.unwrap(),
        json!({"id": 2, "status": 204, "body": null})
    );
    let read = relay.client_as(&p.mcp).read_call(call, 0).await.unwrap();
    assert_eq!(read.reply.unwrap().0, b"sealed reply");

    // A second call, claimed at once and cancelled on the channel.
    let second = relay.post_call(&p.mcp, p.session, b"another").await;
    send(
        &mut channel,
        json!({"id": 3, "op": "claim", "session_id": p.session, "max": 1}),
    )
    .await;
    assert_eq!(
        next(&mut channel).await.unwrap()["body"]["calls"][0]["call_id"],
        json!(second)
    );
    send(
        &mut channel,
        json!({"id": 4, "op": "cancel", "call_id": second, "reason": "undecryptable"}),
    )
    .await;
    assert_eq!(next(&mut channel).await.unwrap()["status"], 204);
    let read = relay.client_as(&p.mcp).read_call(second, 0).await.unwrap();
    assert_eq!(
        serde_json::to_value(read.state).unwrap(),
        json!("cancelled")
    );

    // A reply to a call already answered is refused as over HTTP.
    send(
        &mut channel,
        json!({"id": 5, "op": "reply", "call_id": call, "envelope": b64(b"again")}),
    )
    .await;
    let refused = next(&mut channel).await.unwrap();
    assert_eq!(
        (
            refused["status"].as_u64(),
            refused["body"]["error"]["code"].as_str()
        ),
        (Some(409), Some("wrong_call_state"))
    );

    channel.close(None).await.unwrap();
    relay.wait_for_metric("sealpost_channels_open", 0.0).await;
}

#[tokio::test]
async fn a_call_goes_through_the_channel_on_sqlite() {
    a_call_goes_through_the_channel(TestDb::sqlite()).await;
}

#[tokio::test]
async fn a_call_goes_through_the_channel_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_call_goes_through_the_channel(db).await;
}

#[tokio::test]
async fn the_channel_opens_only_for_a_live_owner_token() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;

    let refused = |expected: u16, code: &'static str| {
        move |result: Result<Socket, (u16, Value)>| {
            let (status, body) = result.expect_err("the upgrade is refused");
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (expected, Some(code)),
                "{body}"
            );
        }
    };
    refused(401, "unauthorized")(open_with(&relay, "sealpost.v1").await);
    refused(401, "unauthorized")(
        open_with(&relay, "sealpost.v1, sealpost.bearer.not-a-token").await,
    );
    // Signed by another key: the same claims, forged.
    let forged = format!("{}x", &p.owner[..p.owner.len() - 1]);
    refused(401, "unauthorized")(
        open_with(&relay, &format!("sealpost.v1, sealpost.bearer.{forged}")).await,
    );
    refused(403, "wrong_token_kind")(
        open_with(&relay, &format!("sealpost.v1, sealpost.bearer.{}", p.mcp)).await,
    );
    refused(400, "bad_request")(open_with(&relay, &format!("sealpost.bearer.{}", p.owner)).await);
    // A plain GET, not an upgrade, gets the API's error shape.
    let (status, body) = relay
        .send(Method::GET, "/v1/channel", Some(&p.owner), None)
        .await;
    assert!(status.is_client_error(), "{status}");
    assert!(body["error"]["code"].is_string(), "{body}");

    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    refused(401, "unauthorized")(
        open_with(&relay, &format!("sealpost.v1, sealpost.bearer.{}", p.owner)).await,
    );
    assert_eq!(relay.metric("sealpost_channels_open").await, Some(0.0));
}

#[tokio::test]
async fn another_owners_session_and_calls_are_not_found_on_the_channel() {
    let relay = Relay::sqlite().await;
    let alice = pairing(&relay, "alice").await;
    let mallory = pairing(&relay, "mallory").await;
    let call = relay.post_call(&alice.mcp, alice.session, b"alice's").await;
    let mut channel = open(&relay, &mallory.owner).await;
    send(
        &mut channel,
        json!({"id": 1, "op": "claim", "session_id": alice.session, "max": 1}),
    )
    .await;
    send(
        &mut channel,
        json!({"id": 2, "op": "reply", "call_id": call, "envelope": b64(b"forged")}),
    )
    .await;
    send(
        &mut channel,
        json!({"id": 3, "op": "cancel", "call_id": call, "reason": "undecryptable"}),
    )
    .await;
    let mut answers = Vec::new();
    for _ in 0..3 {
        let answer = next(&mut channel).await.unwrap();
        answers.push((
            answer["id"].as_u64().unwrap(),
            answer["status"].as_u64().unwrap(),
            answer["body"]["error"]["code"].as_str().unwrap().to_owned(),
        ));
    }
    answers.sort();
    assert_eq!(
        answers,
        [
            (1, 404, "not_found".into()),
            (2, 404, "not_found".into()),
            (3, 404, "not_found".into())
        ]
    );
    // Alice's call is still hers to claim.
    let claimed = relay
        .client_as(&alice.owner)
        .claim(alice.session, 1, 0)
        .await
        .unwrap();
    assert_eq!(claimed.calls[0].call_id, call);

    // A message that is not a request is answered 400, and the channel goes on.
    socket_text(&mut channel, r#"{"id": 9, "op": "post"}"#).await;
    let answer = next(&mut channel).await.unwrap();
    assert_eq!(
        (answer["id"].as_u64(), answer["status"].as_u64()),
        (Some(9), Some(400)),
        "{answer}"
    );
    send(
        &mut channel,
        json!({"id": 10, "op": "claim", "session_id": mallory.session, "max": 1}),
    )
    .await;
    assert_eq!(next(&mut channel).await.unwrap()["status"], 200);
}

pub(crate) async fn socket_text(socket: &mut Socket, text: &str) {
    socket.send(Message::Text(text.into())).await.unwrap();
}

#[tokio::test]
async fn a_token_signed_out_while_its_channel_is_open_is_refused_and_the_channel_closes() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    send(
        &mut channel,
        json!({"id": 1, "op": "claim", "session_id": p.session, "max": 1}),
    )
    .await;
    assert_eq!(next(&mut channel).await.unwrap()["status"], 200);

    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    send(
        &mut channel,
        json!({"id": 2, "op": "claim", "session_id": p.session, "max": 1}),
    )
    .await;
    let answer = next(&mut channel).await.unwrap();
    assert_eq!(
        (
            answer["status"].as_u64(),
            answer["body"]["error"]["code"].as_str()
        ),
        (Some(401), Some("unauthorized"))
    );
    assert_eq!(next(&mut channel).await, Err(Some(CloseCode::Policy)));
    relay.wait_for_metric("sealpost_channels_open", 0.0).await;
}

#[tokio::test]
async fn an_oversized_message_closes_its_channel_and_nothing_else() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.max_reply_envelope_bytes = 4 * 1024;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    let call = id::<CallId>();
    let huge =
        json!({"id": 1, "op": "reply", "call_id": call, "envelope": b64(&vec![7u8; 64 * 1024])});
    // The relay may close before the whole message is written.
    let _ = channel.send(Message::Text(huge.to_string().into())).await;
    assert!(next(&mut channel).await.is_err(), "the channel closed");
    relay.wait_for_metric("sealpost_channels_open", 0.0).await;

    let mut again = open(&relay, &p.owner).await;
    send(
        &mut again,
        json!({"id": 1, "op": "claim", "session_id": p.session, "max": 1}),
    )
    .await;
    assert_eq!(next(&mut again).await.unwrap()["status"], 200);
}

#[tokio::test]
async fn an_owner_holds_at_most_the_allowed_channels() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.max_channels_per_owner = 2;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let (_, bob) = relay.owner("bob").await;
    let first = open(&relay, &p.owner).await;
    let _second = open(&relay, &p.owner).await;
    let (status, body) = open_with(&relay, &format!("sealpost.v1, sealpost.bearer.{}", p.owner))
        .await
        .expect_err("a third is refused");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("too_many_channels"))
    );
    // Another owner is not held back by alice's.
    let _bobs = open(&relay, &bob).await;
    // A place frees when a channel closes.
    drop(first);
    relay.wait_for_metric("sealpost_channels_open", 2.0).await;
    let _third = open(&relay, &p.owner).await;
}

#[tokio::test]
async fn a_relay_can_offer_no_channel() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.max_channels_per_owner = 0;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let (status, body) = open_with(&relay, &format!("sealpost.v1, sealpost.bearer.{}", p.owner))
        .await
        .expect_err("refused");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
}

/// Closes `channel` with claims waiting on it and checks they were all dropped unclaimed: a
/// call posted after is still pending, for the next claim to take.
async fn close_and_check_nothing_was_claimed(relay: &Relay, p: &Pairing, mut channel: Socket) {
    channel.close(None).await.unwrap();
    tokio::time::timeout(HANG_GUARD, async {
        relay.wait_for_metric("sealpost_channels_open", 0.0).await;
        relay
            .wait_for_metric("sealpost_longpoll_waiters", 0.0)
            .await;
    })
    .await
    .expect("the channel and its claims were dropped");
    let call = relay
        .post_call(&p.mcp, p.session, b"after the tab left")
        .await;
    let claimed = relay
        .client_as(&p.owner)
        .claim(p.session, 1, 0)
        .await
        .unwrap();
    assert_eq!(claimed.calls.len(), 1, "the call was still pending");
    assert_eq!(claimed.calls[0].call_id, call);
}

#[tokio::test]
async fn a_claim_dropped_with_its_channel_claims_nothing() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.fallback_poll_ms = 600_000;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    send(
        &mut channel,
        json!({"id": 1, "op": "claim", "session_id": p.session, "wait_ms": 20_000, "max": 1}),
    )
    .await;
    relay.wait_for_waiters(1).await;
    close_and_check_nothing_was_claimed(&relay, &p, channel).await;
}

#[tokio::test]
async fn shutdown_answers_what_runs_then_closes_the_channel() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    send(
        &mut channel,
        json!({"id": 1, "op": "claim", "session_id": p.session, "wait_ms": 30_000, "max": 1}),
    )
    .await;
    relay.wait_for_waiters(1).await;
    let stopping = tokio::spawn(relay.stop());
    // As a request in flight: the waiting claim answers at once, then the channel says why it
    // closes.
    let answer = next(&mut channel).await.unwrap();
    assert_eq!(
        (answer["id"].as_u64(), answer["status"].as_u64()),
        (Some(1), Some(200))
    );
    assert_eq!(answer["body"]["calls"], json!([]));
    assert_eq!(next(&mut channel).await, Err(Some(CloseCode::Away)));
    tokio::time::timeout(HANG_GUARD, stopping)
        .await
        .expect("the relay stopped")
        .unwrap();
}

#[tokio::test]
async fn a_busy_channel_refuses_more_and_a_close_drops_all_it_runs() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.fallback_poll_ms = 600_000;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    for id in 1..=8 {
        send(
            &mut channel,
            json!({"id": id, "op": "claim", "session_id": p.session, "wait_ms": 20_000, "max": 1}),
        )
        .await;
    }
    relay.wait_for_waiters(8).await;
    send(
        &mut channel,
        json!({"id": 9, "op": "claim", "session_id": p.session, "max": 1}),
    )
    .await;
    let refused = next(&mut channel).await.unwrap();
    assert_eq!(
        (
            refused["id"].as_u64(),
            refused["status"].as_u64(),
            refused["body"]["error"]["code"].as_str()
        ),
        (Some(9), Some(503), Some("busy")),
        "{refused}"
    );
    // The refusal is timed under its operation's route.
    let labels = [
        "method=\"WS\"",
        "route=\"/v1/channel claim\"",
        "status=\"503\"",
    ];
    let busy = crate::api::series(
        &relay.metrics().await,
        "sealpost_http_request_duration_seconds_count",
        &labels,
    );
    assert_eq!(busy, Some(1.0));
    // Closed with eight claims waiting: every one is dropped, and claims nothing.
    close_and_check_nothing_was_claimed(&relay, &p, channel).await;
}

#[tokio::test]
async fn every_message_is_charged_to_the_rates_malformed_or_not() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.rate_per_token_per_s = 1;
        config.limits.rate_burst_per_token = 5;
    })
    .await;
    // A fresh sign-in: its only charge so far is the channel's opening.
    let (_, owner) = relay.owner("alice").await;
    let mut channel = open(&relay, &owner).await;
    let mut statuses = Vec::new();
    for id in 1..=8 {
        socket_text(
            &mut channel,
            &format!(r#"{{"id": {id}, "op": "nonsense"}}"#),
        )
        .await;
        let answer = next(&mut channel).await.unwrap();
        assert_eq!(answer["id"].as_u64(), Some(id));
        statuses.push(answer["status"].as_u64().unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 400).count(),
        4,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        4,
        "{statuses:?}"
    );
    // Refused before any operation ran, each is timed as HTTP's refusals are, under the
    // channel's route (the messages name no operation it knows).
    let text = relay.metrics().await;
    for status in ["400", "429"] {
        let labels = [
            "method=\"WS\"",
            "route=\"/v1/channel\"",
            &format!("status=\"{status}\""),
        ];
        let count = crate::api::series(
            &text,
            "sealpost_http_request_duration_seconds_count",
            &labels,
        );
        assert_eq!(count, Some(4.0), "{status} in\n{text}");
    }
}

#[tokio::test]
async fn a_large_reply_on_the_channel_takes_a_place_among_large_bodies() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.large_body_bytes = 1024;
        config.limits.max_large_bodies_in_flight = 0;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    relay
        .client_as(&p.owner)
        .claim(p.session, 1, 0)
        .await
        .unwrap();
    let mut channel = open(&relay, &p.owner).await;
    send(
        &mut channel,
        json!({"id": 1, "op": "reply", "call_id": call, "envelope": b64(&[1u8; 4096])}),
    )
    .await;
    let refused = next(&mut channel).await.unwrap();
    assert_eq!(
        (
            refused["status"].as_u64(),
            refused["body"]["error"]["code"].as_str()
        ),
        (Some(503), Some("busy")),
        "{refused}"
    );
    send(
        &mut channel,
        json!({"id": 2, "op": "reply", "call_id": call, "envelope": b64(b"small")}),
    )
    .await;
    assert_eq!(next(&mut channel).await.unwrap()["status"], 204);
}

#[tokio::test]
async fn a_claim_waiting_on_the_channel_keeps_no_place_among_large_bodies() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.large_body_bytes = 1024;
        config.limits.max_large_bodies_in_flight = 1;
    })
    .await;
    let alice = pairing(&relay, "alice").await;
    let bob = pairing(&relay, "bob").await;
    // A claim padded with whitespace past the large-body threshold, left waiting.
    let mut channel = open(&relay, &alice.owner).await;
    let claim =
        json!({"id": 1, "op": "claim", "session_id": alice.session, "wait_ms": 30_000, "max": 1});
    let padded = format!("{}{}", claim, " ".repeat(4096));
    socket_text(&mut channel, &padded).await;
    relay
        .wait_for_metric("sealpost_longpolls_open{kind=\"claim\"}", 1.0)
        .await;
    // Another owner's large reply still finds the one place.
    let call = relay.post_call(&bob.mcp, bob.session, b"call").await;
    relay
        .client_as(&bob.owner)
        .claim(bob.session, 1, 0)
        .await
        .unwrap();
    let (status, body) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&bob.owner),
            Some(json!({"envelope": b64(&[1u8; 4096])})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

#[tokio::test]
async fn binary_messages_and_idleness_close_the_channel() {
    let relay = Relay::start(TestDb::sqlite(), |config| {
        config.limits.max_wait_ms = 300;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let mut channel = open(&relay, &p.owner).await;
    channel
        .send(Message::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    assert_eq!(next(&mut channel).await, Err(Some(CloseCode::Unsupported)));

    // Idle for twice the longest wait (600 ms here): pings do not keep it open.
    let mut channel = open(&relay, &p.owner).await;
    let pinging = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if channel
                .send(Message::Ping(Vec::new().into()))
                .await
                .is_err()
            {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(1_500), pinging).await;
    assert_eq!(next(&mut channel).await, Err(Some(CloseCode::Normal)));
}
