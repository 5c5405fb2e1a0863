//! Per-owner quotas and the per-owner rate: one owner cannot fill the relay by minting tokens
//! or sign-in links, nor buy more request rate by minting tokens. Each refusal has its code
//! and a `Retry-After`.

use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::{CallId, PairId};
use serde_json::json;

use sealpost_testkit::{Relay, pairing};
use sealpost_testkit::{TestDb, id};

async fn raw(
    relay: &Relay,
    method: Method,
    path: &str,
    token: &str,
) -> (StatusCode, Option<String>, serde_json::Value) {
    let mut request = relay
        .client
        .request(method, format!("{}{path}", relay.base))
        .bearer_auth(token);
    if path == "/v1/mcp-tokens" {
        request = request.json(&json!({"label": "t", "pair_id": id::<PairId>()}));
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, response.json().await.unwrap_or_default())
}

#[tokio::test]
async fn live_mcp_tokens_per_owner_are_capped_and_a_revoked_one_frees_a_place() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_live_mcp_tokens_per_owner = 3
    })
    .await;
    let (_, owner) = relay.owner("alice").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, _, body) = raw(&relay, Method::POST, "/v1/mcp-tokens", &owner).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    let (status, retry, body) = raw(&relay, Method::POST, "/v1/mcp-tokens", &owner).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "too_many_tokens");
    assert!(retry.is_some());
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/mcp-tokens/{}", ids[0]),
            Some(&owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, body) = raw(&relay, Method::POST, "/v1/mcp-tokens", &owner).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Another owner has their own quota.
    let (_, bob) = relay.owner("bob").await;
    let (status, _, _) = raw(&relay, Method::POST, "/v1/mcp-tokens", &bob).await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn unused_sign_in_links_per_owner_are_capped_and_a_used_one_frees_a_place() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_live_signin_codes_per_owner = 2
    })
    .await;
    let (_, owner) = relay.owner("alice").await;
    let mut links = Vec::new();
    for _ in 0..2 {
        let (status, _, body) = raw(&relay, Method::POST, "/v1/auth/signin-links", &owner).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        links.push(body["link"].as_str().unwrap().to_owned());
    }
    let (status, retry, body) = raw(&relay, Method::POST, "/v1/auth/signin-links", &owner).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "too_many_signin_links");
    assert!(retry.is_some());
    let code = links[0].split("#signin=").nth(1).unwrap();
    let (status, _) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({ "code": code })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = raw(&relay, Method::POST, "/v1/auth/signin-links", &owner).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn an_owner_s_tokens_share_one_request_rate() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.rate_per_token_per_s = 0;
        c.limits.rate_per_owner_per_s = 1;
        c.limits.rate_burst_per_owner = 40;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let mut tokens = vec![p.mcp.clone()];
    for _ in 0..3 {
        tokens.push(relay.mcp_token(&p.owner, p.pair).await.1);
    }
    // Spread over four tokens, the owner's burst still runs out.
    let path = format!("/v1/pairings/{}/session", p.pair);
    let mut refused = None;
    for i in 0..200 {
        let (status, retry, body) = raw(&relay, Method::GET, &path, &tokens[i % 4]).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some((retry, body));
            break;
        }
    }
    let (retry, body) = refused.expect("four tokens of one owner outran the owner's rate");
    assert_eq!(body["error"]["code"], "owner_rate_limited", "{body}");
    assert!(retry.is_some());
    // Another owner is not slowed by it.
    let bob = pairing(&relay, "bob").await;
    let (status, _) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", bob.pair),
            Some(&bob.mcp),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// Posts a call with `ttl_s`, claims it and answers it with `reply_bytes`; returns the status
/// and body of the post if it was refused, else of the reply.
async fn answer(
    relay: &Relay,
    p: &sealpost_testkit::Pairing,
    ttl_s: u64,
    reply_bytes: usize,
) -> (StatusCode, serde_json::Value) {
    let call = id::<CallId>();
    let (status, body) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/calls", p.session),
            Some(&p.mcp),
            Some(
                json!({"call_id": call, "envelope": sealpost_testkit::b64(b"call"), "ttl_s": ttl_s}),
            ),
        )
        .await;
    if status != StatusCode::CREATED {
        return (status, body);
    }
    let (status, _) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&p.owner),
            Some(json!({"envelope": sealpost_testkit::b64(&vec![5u8; reply_bytes])})),
        )
        .await
}

#[tokio::test]
async fn bytes_held_per_owner_are_capped_and_free_up_when_calls_expire_on_sqlite() {
    bytes_held_per_owner_are_capped_and_free_up_when_calls_expire(TestDb::sqlite()).await;
}

#[tokio::test]
async fn bytes_held_per_owner_are_capped_and_free_up_when_calls_expire_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    bytes_held_per_owner_are_capped_and_free_up_when_calls_expire(db).await;
}

async fn bytes_held_per_owner_are_capped_and_free_up_when_calls_expire(db: TestDb) {
    let relay = Relay::start(db, |c| {
        c.limits.max_bytes_held_per_owner = 1024 * 1024;
        c.limits.sweep_interval_ms = 100;
        c.limits.sweep_grace_ms = 0;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    // The cap: two 600 kB replies do not fit in 1 MiB.
    let (status, body) = answer(&relay, &p, 60, 600_000).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = answer(&relay, &p, 60, 600_000).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], "bytes_quota_exceeded");
    // Another owner has their own quota.
    let bob = pairing(&relay, "bob").await;
    let (status, body) = answer(&relay, &bob, 1, 600_000).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // Bob's call expires within a second; the sweeper clears it and recounts, and a second
    // reply of the same size fits again.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, body) = answer(&relay, &bob, 60, 600_000).await;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        assert_eq!(body["error"]["code"], "bytes_quota_exceeded", "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the quota never freed up after the call expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
