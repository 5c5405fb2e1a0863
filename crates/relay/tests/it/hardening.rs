//! What an attacker tried against the relay's HTTP surface, each answered as documented: a dead
//! token never costs a body read, large transfers in flight are capped, every `/v1` error has
//! the JSON shape and no `/v1` answer is cached, empty envelopes are malformed, the web folder
//! keeps its dotfiles, and every 429 says when to retry.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use sealpost_protocol::ids::{CallId, PairId, SessionId};
use sealpost_testkit::{Relay, b64, pairing};
use sealpost_testkit::{TempDir, TestDb, id};

/// Far longer than any answer here takes: reaching it means the relay waited on the client.
const GIVE_UP: Duration = Duration::from_secs(10);

fn addr(relay: &Relay) -> SocketAddr {
    relay.running.as_ref().unwrap().addr
}

/// Sends `head` (a request's headers, with a large `Content-Length`) and no body; returns the
/// response's first bytes.
async fn headers_only(relay: &Relay, head: String) -> String {
    let mut tcp = TcpStream::connect(addr(relay)).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(GIVE_UP, tcp.read(&mut buf))
        .await
        .expect("the relay waited for the body")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn a_signed_out_token_is_refused_before_its_body_is_read() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&p.mcp), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let post = format!(
        "POST /v1/sessions/{}/calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 300000\r\n\r\n",
        p.session, p.mcp
    );
    let answer = headers_only(&relay, post).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let reply = format!(
        "PUT /v1/calls/{}/reply HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 2000000\r\n\r\n",
        id::<CallId>(),
        p.owner
    );
    let answer = headers_only(&relay, reply).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

#[tokio::test]
async fn large_bodies_in_flight_are_capped_and_small_ones_still_pass() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_large_bodies_in_flight = 1
    })
    .await;
    let p = pairing(&relay, "alice").await;
    // One large body that stalls half-way holds the only place.
    let mut stalled = TcpStream::connect(addr(&relay)).await.unwrap();
    let head = format!(
        "POST /v1/sessions/{}/calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 200000\r\n\r\n{{\"call_id\":",
        p.session, p.mcp
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let envelope = b64(&vec![1u8; 100_000]);
    let deadline = tokio::time::Instant::now() + GIVE_UP;
    let refused = loop {
        let (status, body) = relay
            .send(
                Method::POST,
                format!("/v1/sessions/{}/calls", p.session),
                Some(&p.mcp),
                // A fresh call_id each time: a large post may pass before the stalled one holds
                // the place.
                Some(json!({"call_id": id::<CallId>(), "envelope": envelope, "ttl_s": 60})),
            )
            .await;
        // Until the stalled request has taken its place, the large one may pass.
        if status != StatusCode::CREATED || tokio::time::Instant::now() > deadline {
            break (status, body);
        }
    };
    assert_eq!(refused.0, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.1);
    assert_eq!(refused.1["error"]["code"], "busy");
    relay.post_call(&p.mcp, p.session, b"small call").await;
    drop(stalled);
}

/// A client that asks for a reply and never reads it, on a small receive buffer.
async fn unread_read(
    relay: &Relay,
    call: sealpost_protocol::ids::CallId,
    token: &str,
) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(addr(relay)).await.unwrap();
    let request = format!(
        "GET /v1/calls/{call} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp
}

#[tokio::test]
async fn large_replies_being_sent_to_one_token_are_capped() {
    // A reply larger than the kernel's socket buffers can absorb, so the unread one stays
    // in the sending.
    let reply_bytes = 24 * 1024 * 1024;
    let relay = Relay::start(TestDb::sqlite(), move |c| {
        c.limits.max_large_replies_per_token = 1;
        c.limits.max_reply_envelope_bytes = reply_bytes;
        c.limits.write_timeout_ms = 60_000;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    let (status, _) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let reply = vec![9u8; reply_bytes];
    let (status, body) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&p.owner),
            Some(json!({"envelope": b64(&reply)})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let _stuck = unread_read(&relay, call, &p.mcp).await;
    // Until the unread one has taken its place, a read may pass.
    let deadline = tokio::time::Instant::now() + GIVE_UP;
    let refused = loop {
        let (status, body) = relay
            .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
            .await;
        if status != StatusCode::OK || tokio::time::Instant::now() > deadline {
            break (status, body);
        }
    };
    assert_eq!(refused.0, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.1);
    assert_eq!(refused.1["error"]["code"], "busy");
}

#[tokio::test]
async fn every_v1_error_is_json_and_no_v1_answer_is_cached() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let raw = |method: Method, path: &str| {
        relay
            .client
            .request(method, format!("{}{}", relay.base, path))
            .send()
    };
    let unknown = raw(Method::GET, "/v1/nothing-here").await.unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(unknown.headers()["cache-control"], "no-store");
    let body: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");

    let wrong_method = raw(Method::DELETE, "/v1/auth/signin").await.unwrap();
    assert_eq!(wrong_method.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(wrong_method.headers().contains_key("allow"));
    let body: serde_json::Value = wrong_method.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");

    let me = relay
        .client
        .get(format!("{}/v1/me", relay.base))
        .bearer_auth(&p.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(me.headers()["cache-control"], "no-store");

    // A parser's message is repeated only up to a bound, whatever the client sent.
    let long_field = "x".repeat(8_000);
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({ long_field: 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"].as_str().unwrap().len() < 600,
        "{body}"
    );
}

#[tokio::test]
async fn empty_envelopes_and_hellos_are_malformed() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let (status, body) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/calls", p.session),
            Some(&p.mcp),
            Some(json!({"call_id": id::<CallId>(), "envelope": "", "ttl_s": 60})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "{body}"
    );
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/sessions",
            Some(&p.owner),
            Some(json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": "", "ttl_s": 60})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "{body}"
    );
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    let (status, body) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&p.owner),
            Some(json!({"envelope": ""})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn the_web_folder_never_serves_dotfiles() {
    let web = TempDir::new();
    std::fs::write(
        web.0.join("index.html"),
        "<!doctype html><title>app</title>",
    )
    .unwrap();
    std::fs::write(web.0.join(".env"), "SECRET=1").unwrap();
    std::fs::create_dir(web.0.join(".git")).unwrap();
    std::fs::write(web.0.join(".git/config"), "[core]").unwrap();
    let dir = web.0.clone();
    let relay = Relay::start(TestDb::sqlite(), move |c| c.web_dir = Some(dir)).await;
    for path in ["/.env", "/.git/config", "/%2eenv", "/sub/../.env"] {
        let response = relay
            .client
            .get(format!("{}{path}", relay.base))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert!(
            !text.contains("SECRET") && !text.contains("[core]"),
            "{path}"
        );
    }
    let (status, _) = relay.send(Method::GET, "/", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn every_429_says_when_to_retry() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_pending_calls_per_session = 1;
        c.limits.max_live_sessions_per_owner = 1;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    relay.post_call(&p.mcp, p.session, b"first").await;
    let full = relay
        .client
        .post(format!("{}/v1/sessions/{}/calls", relay.base, p.session))
        .bearer_auth(&p.mcp)
        .json(&json!({"call_id": id::<CallId>(), "envelope": b64(b"second"), "ttl_s": 60}))
        .send()
        .await
        .unwrap();
    assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(full.headers().contains_key("retry-after"));
    let sessions = relay
        .client
        .post(format!("{}/v1/sessions", relay.base))
        .bearer_auth(&p.owner)
        .json(&json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": b64(b"hello"), "ttl_s": 60}))
        .send()
        .await
        .unwrap();
    assert_eq!(sessions.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(sessions.headers().contains_key("retry-after"));
}
