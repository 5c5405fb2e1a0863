//! Limits: each is refused with its stable code, oversized bodies are refused before they are
//! read into memory (with a declared length, and chunked without one), and a body that stalls
//! is cut off at its deadline.

use std::time::Duration;

use futures_util::stream;
use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::{CallId, PairId, SessionId};
use sealpost_protocol::limits::{
    MAX_CALL_ENVELOPE_BYTES, MAX_HELLO_BYTES, MAX_REPLY_ENVELOPE_BYTES,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use sealpost_testkit::{Relay, b64, pairing};
use sealpost_testkit::{TestDb, id};

async fn code(
    relay: &Relay,
    method: Method,
    path: String,
    token: &str,
    body: Option<serde_json::Value>,
) -> (StatusCode, String) {
    let (status, answer) = relay.send(method, path, Some(token), body).await;
    (
        status,
        answer["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn envelope_reply_and_hello_sizes_are_refused_with_their_codes() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let calls = format!("/v1/sessions/{}/calls", p.session);
    let just_over = vec![7u8; MAX_CALL_ENVELOPE_BYTES + 1];
    let body = json!({"call_id": id::<CallId>(), "envelope": b64(&just_over), "ttl_s": 60});
    assert_eq!(
        code(&relay, Method::POST, calls.clone(), &p.mcp, Some(body)).await,
        (StatusCode::PAYLOAD_TOO_LARGE, "envelope_too_large".into())
    );
    let way_over = vec![7u8; 4 * MAX_CALL_ENVELOPE_BYTES];
    let body = json!({"call_id": id::<CallId>(), "envelope": b64(&way_over), "ttl_s": 60});
    assert_eq!(
        code(&relay, Method::POST, calls.clone(), &p.mcp, Some(body)).await,
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large".into())
    );
    let at_limit = vec![7u8; MAX_CALL_ENVELOPE_BYTES];
    let call = id::<CallId>();
    let body = json!({"call_id": call, "envelope": b64(&at_limit), "ttl_s": 60});
    assert_eq!(
        code(&relay, Method::POST, calls, &p.mcp, Some(body))
            .await
            .0,
        StatusCode::CREATED
    );

    relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    let reply = json!({"envelope": b64(&vec![1u8; MAX_REPLY_ENVELOPE_BYTES + 1])});
    assert_eq!(
        code(
            &relay,
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            &p.owner,
            Some(reply)
        )
        .await,
        (StatusCode::PAYLOAD_TOO_LARGE, "reply_too_large".into())
    );
    let reply = json!({"envelope": b64(&vec![1u8; MAX_REPLY_ENVELOPE_BYTES])});
    assert_eq!(
        code(
            &relay,
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            &p.owner,
            Some(reply)
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );

    let session = json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": b64(&vec![0u8; MAX_HELLO_BYTES + 1]), "ttl_s": 60});
    assert_eq!(
        code(
            &relay,
            Method::POST,
            "/v1/sessions".into(),
            &p.owner,
            Some(session)
        )
        .await,
        (StatusCode::PAYLOAD_TOO_LARGE, "hello_too_large".into())
    );
}

#[tokio::test]
async fn a_chunked_body_without_length_is_cut_off_at_the_cap() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    // 64 MiB offered in 64 KiB chunks with no Content-Length; the relay stops at its cap.
    let chunk = vec![b'A'; 64 * 1024];
    let chunks = stream::iter((0..1024).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    let response = relay
        .client
        .post(format!("{}/v1/sessions/{}/calls", relay.base, p.session))
        .bearer_auth(&p.mcp)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await;
    match response {
        Ok(response) => {
            assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "body_too_large");
        }
        // The relay may close the connection while the client is still sending; that too is
        // a refusal, and the relay kept serving (checked below).
        Err(error) => assert!(error.is_request() || error.is_body(), "{error}"),
    }
    assert_eq!(
        relay.send(Method::GET, "/healthz", None, None).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn ttl_wait_and_batch_ceilings_are_refused_with_their_codes() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let claims = |q: &str| format!("/v1/sessions/{}/claims?{q}", p.session);
    assert_eq!(
        code(
            &relay,
            Method::POST,
            claims("wait_ms=30001"),
            &p.owner,
            None
        )
        .await,
        (StatusCode::BAD_REQUEST, "wait_too_long".into())
    );
    assert_eq!(
        code(&relay, Method::POST, claims("max=51"), &p.owner, None).await,
        (StatusCode::BAD_REQUEST, "claim_batch_out_of_range".into())
    );
    assert_eq!(
        code(&relay, Method::POST, claims("max=0"), &p.owner, None).await,
        (StatusCode::BAD_REQUEST, "claim_batch_out_of_range".into())
    );
    let call = relay.post_call(&p.mcp, p.session, b"x").await;
    assert_eq!(
        code(
            &relay,
            Method::GET,
            format!("/v1/calls/{call}?wait_ms=99999"),
            &p.mcp,
            None
        )
        .await,
        (StatusCode::BAD_REQUEST, "wait_too_long".into())
    );
    for ttl in [0, 601] {
        let body = json!({"call_id": id::<CallId>(), "envelope": "AA", "ttl_s": ttl});
        assert_eq!(
            code(
                &relay,
                Method::POST,
                format!("/v1/sessions/{}/calls", p.session),
                &p.mcp,
                Some(body)
            )
            .await,
            (StatusCode::BAD_REQUEST, "ttl_out_of_range".into())
        );
    }
    let session = json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": "AA", "ttl_s": 86_401});
    assert_eq!(
        code(
            &relay,
            Method::POST,
            "/v1/sessions".into(),
            &p.owner,
            Some(session)
        )
        .await,
        (StatusCode::BAD_REQUEST, "ttl_out_of_range".into())
    );
    let bad = json!({"reason": "because"});
    assert_eq!(
        code(
            &relay,
            Method::POST,
            format!("/v1/calls/{call}/cancel"),
            &p.mcp,
            Some(bad)
        )
        .await,
        (StatusCode::BAD_REQUEST, "bad_request".into())
    );
}

#[tokio::test]
async fn pending_calls_sessions_and_request_rate_are_limited() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_pending_calls_per_session = 2;
        c.limits.max_live_sessions_per_owner = 1;
        c.limits.rate_per_token_per_s = 1;
        c.limits.rate_burst_per_token = 6;
    })
    .await;
    // pairing(): 3 requests on the owner token (mcp token, session) — within the burst.
    let p = pairing(&relay, "alice").await;
    relay.post_call(&p.mcp, p.session, b"1").await;
    relay.post_call(&p.mcp, p.session, b"2").await;
    let body = json!({"call_id": id::<CallId>(), "envelope": "AA", "ttl_s": 60});
    assert_eq!(
        code(
            &relay,
            Method::POST,
            format!("/v1/sessions/{}/calls", p.session),
            &p.mcp,
            Some(body)
        )
        .await,
        (
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_pending_calls".into()
        )
    );
    let session = json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": "AA", "ttl_s": 60});
    assert_eq!(
        code(
            &relay,
            Method::POST,
            "/v1/sessions".into(),
            &p.owner,
            Some(session)
        )
        .await,
        (StatusCode::TOO_MANY_REQUESTS, "too_many_sessions".into())
    );
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(code(&relay, Method::GET, "/v1/me".into(), &p.mcp, None).await);
    }
    assert!(
        statuses.contains(&(StatusCode::TOO_MANY_REQUESTS, "rate_limited".into())),
        "{statuses:?}"
    );
}

/// Reads one HTTP/1.1 response with a `Content-Length`: its status code and its body.
async fn read_response(stream: &mut TcpStream) -> (u16, serde_json::Value) {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_len, body_len, status) = loop {
        let n = stream.read(&mut chunk).await.expect("read the response");
        assert!(n > 0, "the connection closed before a response");
        received.extend_from_slice(&chunk[..n]);
        let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        break (
            end + 4,
            length.expect("a Content-Length"),
            status.expect("a status"),
        );
    };
    while received.len() < head_len + body_len {
        let n = stream.read(&mut chunk).await.expect("read the body");
        assert!(n > 0, "the connection closed inside the body");
        received.extend_from_slice(&chunk[..n]);
    }
    let body = &received[head_len..head_len + body_len];
    (status, serde_json::from_slice(body).expect("a JSON body"))
}

#[tokio::test]
async fn a_body_that_stalls_is_answered_408_body_timeout() {
    let relay = Relay::start(TestDb::sqlite(), |c| c.limits.body_read_timeout_ms = 200).await;
    let p = pairing(&relay, "alice").await;
    let address = relay.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).await.unwrap();
    // The headers promise 100 bytes; only the first few arrive, then the client goes quiet.
    let head = format!(
        "POST /v1/sessions/{}/calls HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"call_id\": ",
        p.session, p.mcp
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream))
        .await
        .expect("the relay answered a stalled body at its deadline");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (408, Some("body_timeout")),
        "{body}"
    );
}

/// The number of tokens the relay's rate table holds, read from `/metrics`.
async fn rate_table_tokens(relay: &Relay) -> f64 {
    relay
        .metrics()
        .await
        .lines()
        .find_map(|l| l.strip_prefix("sealpost_rate_limit_keys{kind=\"token\"} "))
        .and_then(|v| v.trim().parse().ok())
        .expect("sealpost_rate_limit_keys in the metrics")
}

#[tokio::test]
async fn bad_tokens_never_enter_the_rate_table_and_a_good_token_is_still_limited() {
    use sealpost_protocol::api::TokenKind;
    use sealpost_relay::http::auth::Keys;
    use sealpost_relay::scope::AppScope;
    use sealpost_relay::store::TokenRow;

    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.rate_per_token_per_s = 1;
        c.limits.rate_burst_per_token = 8;
    })
    .await;
    // pairing() and the revoked token below: 4 requests on the owner token, nothing on others.
    let p = pairing(&relay, "alice").await;
    let (revoked_id, revoked) = relay.mcp_token(&p.owner, p.pair).await;
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/mcp-tokens/{revoked_id}"),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        rate_table_tokens(&relay).await,
        1.0,
        "the owner token alone"
    );

    let now = sealpost_relay::clock::now_ms();
    let row = |kind| TokenRow {
        id: id(),
        owner_id: id(),
        kind,
        pair_id: (kind == TokenKind::Mcp).then_some(p.pair),
        label: "forged".into(),
        created_at: now,
        expires_at: now.saturating_add_ms(3_600_000),
        app: AppScope::RelayApp,
        lifetime_ends_at: None,
        parent_id: None,
    };
    // Signed with the relay's key but naming no row, signed with another key, and not a JWT.
    let unknown = Keys::new(sealpost_testkit::TEST_KEY).sign(&row(TokenKind::Owner));
    let foreign = Keys::new(&[7u8; 32]).sign(&row(TokenKind::Owner));
    let garbage = "not.a.jwt".to_owned();
    let call = id::<CallId>();
    let authed_paths = [
        (Method::GET, "/v1/me".to_owned()),
        (Method::GET, "/v1/mcp-tokens".to_owned()),
        (Method::GET, format!("/v1/pairings/{}/session", p.pair)),
    ];
    for _ in 0..20 {
        for token in [&unknown, &foreign, &garbage, &revoked] {
            for (method, path) in &authed_paths {
                let (status, _) = relay.send(method.clone(), path, Some(token), None).await;
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
            }
        }
        // The call loop checks the row in its own statement, after the charge: tokens the
        // relay did not sign never get that far, and a signed one it finds dead is forgotten.
        for token in [&unknown, &foreign, &garbage, &revoked] {
            let (status, _) = relay
                .send(Method::GET, format!("/v1/calls/{call}"), Some(token), None)
                .await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            let (status, _) = relay
                .send(
                    Method::POST,
                    format!("/v1/sessions/{}/calls", p.session),
                    Some(token),
                    Some(serde_json::json!({"call_id": id::<CallId>(), "envelope": "AAAA", "ttl_s": 30})),
                )
                .await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
        }
    }
    assert_eq!(
        rate_table_tokens(&relay).await,
        1.0,
        "no bad token was charged"
    );

    // The good MCP token: its burst passes, the next request is refused with when to retry.
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let response = relay
            .client
            .get(format!("{}/v1/pairings/{}/session", relay.base, p.pair))
            .bearer_auth(&p.mcp)
            .send()
            .await
            .unwrap();
        let retry_after = response.headers().get("retry-after").cloned();
        statuses.push((response.status(), retry_after));
    }
    let passed = statuses
        .iter()
        .take_while(|(s, _)| *s == StatusCode::OK)
        .count();
    assert!((8..12).contains(&passed), "{statuses:?}");
    let (status, retry_after) = &statuses[passed];
    assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(retry_after.as_ref().unwrap(), "1");
    assert_eq!(rate_table_tokens(&relay).await, 2.0);
}

/// Statuses of sign-in attempts with a wrong code, each sent with the given header.
async fn signin_attempts(relay: &Relay, headers: &[(&str, String)]) -> Vec<u16> {
    let mut statuses = Vec::new();
    for (name, value) in headers {
        let response = relay
            .client
            .post(format!("{}/v1/auth/signin", relay.base))
            .header(*name, value)
            .json(&json!({"code": "wrong"}))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(response.headers().contains_key("retry-after"));
        }
        statuses.push(response.status().as_u16());
    }
    statuses
}

#[tokio::test]
async fn a_forwarded_client_address_is_honoured_only_with_trust_proxy() {
    let spoofed: Vec<_> = (1..=3)
        .map(|i| ("x-forwarded-for", format!("198.51.100.{i}")))
        .collect();
    for trust_proxy in [false, true] {
        let relay = Relay::start(TestDb::sqlite(), |c| {
            c.trust_proxy = trust_proxy;
            c.limits.signin_rate_per_address_per_min = 1;
            c.limits.signin_burst_per_address = 2;
        })
        .await;
        let statuses = signin_attempts(&relay, &spoofed).await;
        if trust_proxy {
            // Three addresses, three buckets: each attempt is judged (and refused) on its code.
            assert_eq!(statuses, [401, 401, 401]);
            // One address, whichever header the proxy uses, is limited after its burst.
            let same = [
                ("forwarded", "for=203.0.113.5;proto=https".to_owned()),
                ("x-forwarded-for", "198.51.100.9, 203.0.113.5".to_owned()),
                ("forwarded", "for=\"203.0.113.5:4711\"".to_owned()),
            ];
            assert_eq!(signin_attempts(&relay, &same).await, [401, 401, 429]);
        } else {
            // The header is ignored: every attempt counts against the loopback peer.
            assert_eq!(statuses, [401, 401, 429]);
        }
    }
}
