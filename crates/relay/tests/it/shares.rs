//! No one account takes the whole relay: waiting long-polls are capped per token and per owner,
//! large bodies per owner, and connections that send nothing make room at the connection cap.
//! Each test puts one owner (or silent clients) past a scaled-down cap and shows another
//! owner's requests are still served; without the share, every one of them is refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use sealpost_protocol::ids::CallId;
use sealpost_testkit::{Pairing, Relay, TestDb, b64, id, pairing};

/// Far longer than any answer here takes: reaching it means the relay kept a client waiting.
const GIVE_UP: Duration = Duration::from_secs(10);

fn addr(relay: &Relay) -> SocketAddr {
    relay.running.as_ref().unwrap().addr
}

/// Reads until the server closes the connection (EOF or reset); returns what arrived.
async fn read_until_closed(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

async fn connect_from(source: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(to).await.unwrap()
}

/// Sends `head` on a connection of its own and counts, in `answered`, the moment the relay
/// answers it or closes the connection (a request still waiting is not counted).
async fn send_and_count(relay: &Relay, head: String, answered: Arc<AtomicUsize>) {
    let mut tcp = TcpStream::connect(addr(relay)).await.unwrap();
    tokio::spawn(async move {
        let _ = tcp.write_all(head.as_bytes()).await;
        let mut first = [0u8; 1];
        let _ = tcp.read(&mut first).await;
        answered.fetch_add(1, Ordering::SeqCst);
        // Held open (unless the relay closes it) until the test ends.
        let _ = read_until_closed(&mut tcp).await;
    });
}

/// Waits until each of `sent` requests is either answered or counted in `series` (a gauge of
/// what the relay holds). This waits for a state, it does not guess a duration.
async fn wait_until_settled(relay: &Relay, series: &str, answered: &AtomicUsize, sent: usize) {
    tokio::time::timeout(GIVE_UP, async {
        loop {
            let held = relay.metric(series).await.unwrap_or(0.0) as usize;
            // Exactly: a request refused at the cap may still show in the gauge an instant
            // after its answer is counted, and is counted twice until it goes.
            if held + answered.load(Ordering::SeqCst) == sent {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every request was answered or held");
}

/// Another owner's full call loop, `rounds` times, each request counted: post, claim, reply,
/// read. Returns how many of the `4 * rounds` requests succeeded.
async fn served_requests(relay: &Relay, p: &Pairing, rounds: usize) -> usize {
    // A client of its own: none of the attacker's connections is reused.
    let http = reqwest::Client::new();
    let send =
        |method: reqwest::Method, path: String, token: &str, body: Option<serde_json::Value>| {
            let mut request = http
                .request(method, format!("{}{path}", relay.base))
                .bearer_auth(token);
            if let Some(body) = body {
                request = request.json(&body);
            }
            async move {
                match request.send().await {
                    Ok(response) => response.status().is_success(),
                    Err(_) => false,
                }
            }
        };
    let mut ok = 0;
    for _ in 0..rounds {
        let call = id::<CallId>();
        ok += usize::from(
            send(
                reqwest::Method::POST,
                format!("/v1/sessions/{}/calls", p.session),
                &p.mcp,
                Some(json!({"call_id": call, "envelope": b64(b"call"), "ttl_s": 60})),
            )
            .await,
        );
        ok += usize::from(
            send(
                reqwest::Method::POST,
                format!("/v1/sessions/{}/claims?wait_ms=1000&max=1", p.session),
                &p.owner,
                None,
            )
            .await,
        );
        ok += usize::from(
            send(
                reqwest::Method::PUT,
                format!("/v1/calls/{call}/reply"),
                &p.owner,
                Some(json!({"envelope": b64(b"reply")})),
            )
            .await,
        );
        ok += usize::from(
            send(
                reqwest::Method::GET,
                format!("/v1/calls/{call}?wait_ms=1000"),
                &p.mcp,
                None,
            )
            .await,
        );
    }
    ok
}

/// A waiting read of `call` with `token`, as raw HTTP/1.1.
fn waiting_read(call: CallId, token: &str) -> String {
    format!(
        "GET /v1/calls/{call}?wait_ms=30000 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
}

#[tokio::test]
async fn one_owners_long_polls_leave_room_for_another_owner() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_connections = 16;
        c.limits.max_long_polls_per_token = 4;
        c.limits.max_long_polls_per_owner = 6;
    })
    .await;
    let alice = pairing(&relay, "alice").await;
    // One owner, three pairings, each MCP token waiting on its pending call eight times over:
    // 24 waiting reads, more than the relay's 16 connections.
    let (_, mallory) = relay.owner("mallory").await;
    let mut waits = Vec::new();
    for _ in 0..3 {
        let pair = id();
        let (_, mcp) = relay.mcp_token(&mallory, pair).await;
        let session = relay.session(&mallory, pair, b"hello").await;
        let call = relay.post_call(&mcp, session, b"call").await;
        waits.push((call, mcp));
    }
    let answered = Arc::new(AtomicUsize::new(0));
    let mut sent = 0;
    for (call, mcp) in &waits {
        for _ in 0..8 {
            send_and_count(&relay, waiting_read(*call, mcp), answered.clone()).await;
            sent += 1;
        }
    }
    wait_until_settled(
        &relay,
        "sealpost_longpolls_open{kind=\"read\"}",
        &answered,
        sent,
    )
    .await;
    let waiting = relay
        .metric("sealpost_longpolls_open{kind=\"read\"}")
        .await
        .unwrap_or(0.0);

    let ok = served_requests(&relay, &alice, 5).await;
    assert_eq!(ok, 20, "another owner's requests served: {ok} of 20");
    assert_eq!(waiting, 6.0, "the owner's share of waiting long-polls");
    assert!(
        relay
            .metric("sealpost_requests_refused_total{cap=\"long_polls_per_owner\"}")
            .await
            .unwrap_or(0.0)
            > 0.0
    );
}

#[tokio::test]
async fn a_token_past_its_share_of_long_polls_is_answered_429_at_once_and_its_connection_closed() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_long_polls_per_token = 2;
    })
    .await;
    let p = pairing(&relay, "mallory").await;
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    let answered = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        send_and_count(&relay, waiting_read(call, &p.mcp), answered.clone()).await;
    }
    relay
        .wait_for_metric("sealpost_longpolls_open{kind=\"read\"}", 2.0)
        .await;
    let mut third = TcpStream::connect(addr(&relay)).await.unwrap();
    third
        .write_all(waiting_read(call, &p.mcp).as_bytes())
        .await
        .unwrap();
    let text = tokio::time::timeout(GIVE_UP, read_until_closed(&mut third))
        .await
        .expect("a long-poll past the token's share was left waiting, its connection open");
    let lower = text.to_ascii_lowercase();
    assert!(text.starts_with("HTTP/1.1 429"), "{text}");
    assert!(text.contains("\"too_many_long_polls\""), "{text}");
    assert!(lower.contains("retry-after: 1"), "{text}");
    assert!(lower.contains("connection: close"), "{text}");
    // A read that need not wait, and a claim that finds a call, take no share: still answered.
    let (status, _) = relay
        .send(
            reqwest::Method::GET,
            format!("/v1/calls/{call}"),
            Some(&p.mcp),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let claimed = relay
        .client_as(&p.owner)
        .claim(p.session, 1, 1_000)
        .await
        .unwrap();
    assert_eq!(claimed.calls.len(), 1);
}

#[tokio::test]
async fn one_owners_large_bodies_leave_room_for_another_owners_large_replies() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_large_bodies_in_flight = 4;
        c.limits.max_large_bodies_per_owner = 2;
    })
    .await;
    let a = pairing(&relay, "alice").await;
    // One owner declares six large bodies and sends none of them.
    let m = pairing(&relay, "mallory").await;
    let answered = Arc::new(AtomicUsize::new(0));
    let sent = 6;
    for _ in 0..sent {
        let head = format!(
            "POST /v1/sessions/{}/calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 300000\r\n\r\n",
            m.session, m.mcp
        );
        send_and_count(&relay, head, answered.clone()).await;
    }
    wait_until_settled(&relay, "sealpost_large_bodies_in_flight", &answered, sent).await;

    // Another owner's 100 KiB replies.
    let mut calls = Vec::new();
    for _ in 0..8 {
        calls.push(relay.post_call(&a.mcp, a.session, b"call").await);
    }
    let claimed = relay
        .client_as(&a.owner)
        .claim(a.session, 8, 0)
        .await
        .unwrap();
    assert_eq!(claimed.calls.len(), 8);
    let envelope = b64(&vec![7u8; 100 * 1024]);
    let mut ok = 0;
    for call in calls {
        let (status, _) = relay
            .send(
                reqwest::Method::PUT,
                format!("/v1/calls/{call}/reply"),
                Some(&a.owner),
                Some(json!({"envelope": envelope})),
            )
            .await;
        ok += usize::from(status == StatusCode::NO_CONTENT);
    }
    assert_eq!(ok, 8, "another owner's large replies stored: {ok} of 8");
    assert_eq!(
        relay
            .metric("sealpost_requests_refused_total{cap=\"large_bodies_per_owner\"}")
            .await,
        Some(4.0)
    );
}

#[tokio::test]
async fn silent_connections_make_room_for_another_owners_requests() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_connections = 8;
        c.limits.header_read_timeout_ms = 60_000;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let sources = [
        [127, 0, 0, 2],
        [127, 0, 0, 3],
        [127, 0, 0, 4],
        [127, 0, 0, 5],
    ];
    let mut silent = Vec::new();
    for n in 0..8 {
        silent.push(connect_from(sources[n % 4], addr(&relay)).await);
    }
    // A client that opens a fresh connection for every request, between more silent ones.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut ok = 0;
    for round in 0..10 {
        for n in 0..2 {
            silent.push(connect_from(sources[(round + n) % 4], addr(&relay)).await);
        }
        let served = fresh
            .get(format!("{}/v1/pairings/{}/session", relay.base, p.pair))
            .bearer_auth(&p.mcp)
            .send()
            .await
            .is_ok_and(|response| response.status() == StatusCode::OK);
        ok += usize::from(served);
    }
    assert_eq!(ok, 10, "another owner's requests served: {ok} of 10");
    assert!(
        relay
            .metric("sealpost_connections_closed_idle_total")
            .await
            .unwrap_or(0.0)
            > 0.0
    );
}
