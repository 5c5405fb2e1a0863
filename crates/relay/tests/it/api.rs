//! The HTTP API end to end on loopback: the call loop, long-polls, sessions and tokens.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use sealpost_protocol::ids::CallId;
use sealpost_testkit::{Relay, b64, pairing, unb64};
use sealpost_testkit::{TestDb, id};

#[tokio::test]
async fn a_call_goes_pending_claimed_answered_delivered_and_reads_repeat() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let (status, live) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", p.pair),
            Some(&p.mcp),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        unb64(&live["hello"]),
        b"opaque hello bytes",
        "the hello comes back byte for byte"
    );
    assert_eq!(live["session_id"], json!(p.session));

    let call = relay.post_call(&p.mcp, p.session, b"sealed call").await;
    let (status, body) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(
        (status, body["state"].as_str()),
        (StatusCode::OK, Some("pending"))
    );

    let (status, claim) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims?wait_ms=0&max=10", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{claim}");
    assert_eq!(claim["calls"][0]["call_id"], json!(call));
    assert_eq!(unb64(&claim["calls"][0]["envelope"]), b"sealed call");

    let (status, _) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&p.owner),
            Some(json!({"envelope": b64(b"sealed reply")})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, first) = relay
        .send(
            Method::GET,
            format!("/v1/calls/{call}?wait_ms=1000"),
            Some(&p.mcp),
            None,
        )
        .await;
    assert_eq!(
        (status, first["state"].as_str()),
        (StatusCode::OK, Some("answered"))
    );
    assert_eq!(unb64(&first["reply"]), b"sealed reply");
    let (_, again) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(again["state"], "delivered");
    assert_eq!(
        again["reply"], first["reply"],
        "a lost response loses nothing: the reply reads again"
    );

    let (_, live) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", p.pair),
            Some(&p.mcp),
            None,
        )
        .await;
    assert!(
        live["claimer_seen_at"].as_i64().is_some(),
        "the lookup says when the tab last polled"
    );
}

#[tokio::test]
async fn the_owner_sees_when_the_plugin_last_looked_up_the_session() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let path = format!("/v1/pairings/{}/session", p.pair);
    let (status, by_owner) = relay.send(Method::GET, &path, Some(&p.owner), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        by_owner["plugin_seen_at"].is_null(),
        "the owner's own lookup is not the plugin's: {by_owner}"
    );
    let (_, by_plugin) = relay.send(Method::GET, &path, Some(&p.mcp), None).await;
    assert_eq!(by_plugin["plugin_seen_at"], by_plugin["now_ms"]);
    let (_, by_owner) = relay.send(Method::GET, &path, Some(&p.owner), None).await;
    assert_eq!(
        by_owner["plugin_seen_at"], by_plugin["now_ms"],
        "the owner reads when the plugin looked"
    );
}

/// A relay whose long-polls never re-check on their own before the deadline, so only a
/// wake-up can end them early.
async fn relay_without_fallback_poll() -> Relay {
    Relay::start(sealpost_testkit::TestDb::sqlite(), |c| {
        c.limits.fallback_poll_ms = 600_000
    })
    .await
}

/// A long-poll that was woken returns long before its 30 s deadline (a liveness bound, not a
/// speed measurement).
const WOKEN_WELL_BEFORE: Duration = Duration::from_secs(20);

/// Awaits a long-poll and what should end it; a hang past [`WOKEN_WELL_BEFORE`] means the
/// long-poll was not woken but ran out its own wait.
async fn woken<T>(both: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WOKEN_WELL_BEFORE, both)
        .await
        .expect("the long-poll was woken, not left to its deadline")
}

#[tokio::test]
async fn a_waiting_claim_is_woken_by_a_post() {
    let relay = relay_without_fallback_poll().await;
    let p = pairing(&relay, "alice").await;
    let claim = relay.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
        Some(&p.owner),
        None,
    );
    let post = async {
        relay.wait_for_waiters(1).await;
        relay.post_call(&p.mcp, p.session, b"wake up").await
    };
    let ((status, body), call) = woken(async { tokio::join!(claim, post) }).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["calls"][0]["call_id"], json!(call));
}

#[tokio::test]
async fn a_waiting_read_is_woken_by_the_reply_and_by_a_cancel() {
    let relay = relay_without_fallback_poll().await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"c").await;
    relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    let read = relay.send(
        Method::GET,
        format!("/v1/calls/{call}?wait_ms=30000"),
        Some(&p.mcp),
        None,
    );
    let reply = async {
        relay.wait_for_waiters(1).await;
        relay
            .send(
                Method::PUT,
                format!("/v1/calls/{call}/reply"),
                Some(&p.owner),
                Some(json!({"envelope": b64(b"r")})),
            )
            .await
    };
    let ((_, body), (status, _)) = woken(async { tokio::join!(read, reply) }).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(body["state"], "answered");

    let call = relay.post_call(&p.mcp, p.session, b"c2").await;
    let read = relay.send(
        Method::GET,
        format!("/v1/calls/{call}?wait_ms=30000"),
        Some(&p.mcp),
        None,
    );
    let cancel = async {
        relay.wait_for_waiters(1).await;
        relay
            .send(
                Method::POST,
                format!("/v1/calls/{call}/cancel"),
                Some(&p.mcp),
                Some(json!({"reason": "client_cancelled"})),
            )
            .await
    };
    let ((_, body), (status, _)) = woken(async { tokio::join!(read, cancel) }).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        (body["state"].as_str(), body["reason"].as_str()),
        (Some("cancelled"), Some("client_cancelled"))
    );
}

#[tokio::test]
async fn a_duplicate_call_id_answers_409_and_the_call_can_be_read() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"once").await;
    let body = json!({"call_id": call, "envelope": b64(b"twice"), "ttl_s": 60});
    let (status, error) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/calls", p.session),
            Some(&p.mcp),
            Some(body),
        )
        .await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("duplicate_call"))
    );
    let (status, _) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn ending_a_session_cancels_its_calls_and_the_lookup_says_no_live_session() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"c").await;
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/sessions/{}", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, body) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(
        (body["state"].as_str(), body["reason"].as_str()),
        (Some("cancelled"), Some("session_ended"))
    );
    let (status, body) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", p.pair),
            Some(&p.mcp),
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_live_session"))
    );
    let (status, body) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/calls", p.session),
            Some(&p.mcp),
            Some(json!({"call_id": id::<CallId>(), "envelope": "AA", "ttl_s": 5})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::GONE, Some("session_ended"))
    );
}

#[tokio::test]
async fn mcp_tokens_list_in_pages_that_say_what_follows() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let mut minted = vec![p.mcp_id];
    for _ in 0..2 {
        minted.push(relay.mcp_token(&p.owner, id()).await.0);
    }
    // Id order is byte order, not the order of the ids' text.
    minted.sort();
    let minted: Vec<String> = minted.iter().map(ToString::to_string).collect();
    let list = |query: String| {
        let relay = &relay;
        let owner = p.owner.clone();
        async move {
            relay
                .send(
                    Method::GET,
                    format!("/v1/mcp-tokens{query}"),
                    Some(&owner),
                    None,
                )
                .await
        }
    };
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, first) = list("?limit=2".into()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(ids(&first), minted[..2]);
    assert_eq!(first["next"], json!(minted[1]));
    let (_, second) = list(format!("?limit=2&after={}", minted[1])).await;
    assert_eq!(ids(&second), minted[2..]);
    assert!(
        second.get("next").is_none(),
        "the last page says so: {second}"
    );
    let (_, whole) = list(String::new()).await;
    assert_eq!(ids(&whole), minted, "the default page holds them all");
    let (status, body) = list("?after=not-an-id".into()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    let (status, body) = list("?limit=-1".into()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
}

#[tokio::test]
async fn signing_out_and_revoking_take_effect_on_the_next_request() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let (status, list) = relay
        .send(Method::GET, "/v1/mcp-tokens", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["tokens"][0]["id"], json!(p.mcp_id));
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/mcp-tokens/{}", p.mcp_id),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay.send(Method::GET, "/v1/me", Some(&p.mcp), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signout", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay
        .send(Method::GET, "/v1/me", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn me_renews_an_owner_token_and_a_signin_link_works_once() {
    let relay = Relay::sqlite().await;
    let (_, owner) = relay.owner("alice").await;
    let (status, me) = relay.send(Method::GET, "/v1/me", Some(&owner), None).await;
    assert_eq!(
        (
            status,
            me["owner"]["name"].as_str(),
            me["token_kind"].as_str()
        ),
        (StatusCode::OK, Some("alice"), Some("owner"))
    );
    let renewed = me["token"].as_str().unwrap();
    assert_eq!(
        relay
            .send(Method::GET, "/v1/me", Some(renewed), None)
            .await
            .0,
        StatusCode::OK
    );
    let (_, link) = relay
        .send(Method::POST, "/v1/auth/signin-links", Some(&owner), None)
        .await;
    let code = link["link"]
        .as_str()
        .unwrap()
        .split("#signin=")
        .nth(1)
        .unwrap()
        .to_owned();
    let (status, _) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({"code": code})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({"code": code})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_signin_code"))
    );
}

#[tokio::test]
async fn health_readiness_openapi_and_metrics_answer() {
    let relay = Relay::sqlite().await;
    assert_eq!(
        relay.send(Method::GET, "/healthz", None, None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        relay.send(Method::GET, "/readyz", None, None).await.0,
        StatusCode::OK
    );
    let (status, spec) = relay
        .send(Method::GET, "/v1/openapi.json", None, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    for path in [
        "/v1/auth/signin",
        "/v1/sessions/{session_id}/claims",
        "/v1/calls/{call_id}/reply",
        "/v1/pairings/{pair_id}/session",
    ] {
        assert!(spec["paths"].get(path).is_some(), "{path} is documented");
    }
    let text = relay.metrics().await;
    for name in [
        "sealpost_calls{state=\"pending\"}",
        "sealpost_claim_latency_seconds_bucket",
        "sealpost_longpoll_waiters",
        "sealpost_store_errors_total",
    ] {
        assert!(text.contains(name), "{name} in metrics");
    }
}

#[tokio::test]
async fn shutdown_ends_a_waiting_long_poll_at_once() {
    let mut relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let running = relay.running.take().unwrap();
    let claim = relay.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
        Some(&p.owner),
        None,
    );
    let stop = async {
        relay.wait_for_waiters(1).await;
        running.stop().await.unwrap();
    };
    let ((status, body), ()) = woken(async { tokio::join!(claim, stop) }).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["calls"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn an_mcp_token_learns_nothing_about_the_account_behind_it() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let (status, body) = relay.send(Method::GET, "/v1/me", Some(&p.mcp), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("wrong_token_kind"))
    );
    assert!(!body.to_string().contains("alice"), "{body}");
}

#[tokio::test]
async fn metrics_on_the_main_address_need_the_metrics_token_wherever_the_request_comes_from() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.metrics_token = Some("metrics-token-0123456789".into());
    })
    .await;
    let get = |auth: Option<&'static str>| {
        let mut request = relay.client.get(format!("{}/metrics", relay.base));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        async move { request.send().await.unwrap().status() }
    };
    // Loopback without a token is not enough (a proxy on this host makes every request local).
    assert_eq!(get(None).await, StatusCode::NOT_FOUND);
    assert_eq!(
        get(Some("Bearer wrong-token-0123456789")).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(Some("Bearer metrics-token-0123456789")).await,
        StatusCode::OK
    );
    // The scheme is case-insensitive (RFC 9110).
    assert_eq!(
        get(Some("bearer metrics-token-0123456789")).await,
        StatusCode::OK
    );
    // Without a token configured, the main address never serves them; their own address does.
    let plain = Relay::sqlite().await;
    let (status, body) = plain.send(Method::GET, "/metrics", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(plain.metrics().await.contains("sealpost_connections_open"));
}

/// The value of the series `name{labels}` whose labels include every one of `labels`.
pub(crate) fn series(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (key, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = key.split_once('{').unwrap_or((key, ""));
        (series_name == name && labels.iter().all(|l| rest.contains(l)))
            .then(|| value.parse().ok())
            .flatten()
    })
}

#[tokio::test]
async fn metrics_count_calls_time_routes_by_template_and_show_open_long_polls() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"sealed call").await;
    let (status, claimed) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims?wait_ms=1000", p.session),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{claimed}");
    let (status, _) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&p.owner),
            Some(json!({"envelope": b64(b"sealed reply")})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
        .await;
    assert_eq!(status, StatusCode::OK);

    // A claim left waiting on the now empty session is an open long-poll.
    let waiting = relay.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
        Some(&p.owner),
        None,
    );
    let scrape = async {
        relay.wait_for_waiters(1).await;
        let text = relay.metrics().await;
        // Wake the waiting claim: ending the session answers it at once.
        relay
            .send(
                Method::DELETE,
                format!("/v1/sessions/{}", p.session),
                Some(&p.owner),
                None,
            )
            .await;
        text
    };
    let (_, text) = woken(async { tokio::join!(waiting, scrape) }).await;

    let at = |name: &str, labels: &[&str]| {
        series(&text, name, labels).unwrap_or_else(|| panic!("{name}{labels:?} in\n{text}"))
    };
    assert_eq!(at("sealpost_calls_posted_total", &[]), 1.0);
    assert_eq!(at("sealpost_calls_claimed_total", &[]), 1.0);
    assert_eq!(at("sealpost_replies_total", &[]), 1.0);
    // Delivery marks are written lazily, so the answered call counts as one or the other.
    let answered = at("sealpost_calls", &["state=\"answered\""]);
    assert_eq!(
        answered + at("sealpost_calls", &["state=\"delivered\""]),
        1.0
    );
    assert_eq!(at("sealpost_calls", &["state=\"pending\""]), 0.0);
    assert_eq!(at("sealpost_longpolls_open", &["kind=\"claim\""]), 1.0);
    assert_eq!(at("sealpost_longpolls_open", &["kind=\"read\""]), 0.0);
    assert!(at("sealpost_longpoll_waiters", &[]) >= 1.0);
    assert_eq!(at("sealpost_claim_latency_seconds_count", &[]), 1.0);
    // The first claim found its call at once: it answered within its 1 s wait, in a bucket.
    assert_eq!(at("sealpost_claim_wait_seconds_count", &[]), 1.0);
    assert_eq!(
        at("sealpost_claim_wait_seconds_bucket", &["le=\"+Inf\""]),
        1.0
    );
    let route = "route=\"/v1/sessions/{session_id}/calls\"";
    let posted = ["method=\"POST\"", route, "status=\"201\""];
    assert_eq!(
        at("sealpost_http_request_duration_seconds_count", &posted),
        1.0
    );
    let took = at("sealpost_http_request_duration_seconds_sum", &posted);
    assert!(took > 0.0 && took < 30.0, "{took}");
    assert_eq!(
        at(
            "sealpost_http_request_duration_seconds_count",
            &["route=\"/v1/calls/{call_id}/reply\"", "status=\"204\""]
        ),
        1.0
    );
    // Routes are templates: no id reaches a label.
    for id in [p.session.to_string(), call.to_string()] {
        assert!(!text.contains(&id), "{id} appears in the metrics");
    }
}
