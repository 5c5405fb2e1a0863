//! A relay that refuses for a rate: a read refused again and again is sent again until the call
//! ends (its answer is never lost to a limit), and a call refused at the door is reported at
//! once in words about the rate. A post whose answer is lost on the wire (it may have been
//! stored) is sent once more, and its 409 followed by reads. A small server plays the relay: the real one admits a call's
//! delivery read even past the rate, so only a stand-in can keep refusing it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{get, post};
use sealpost_executor::Workspace;
use sealpost_protocol::api::{
    CallState, CallStatusResponse, LiveSessionResponse, PostCallResponse,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{Base64Bytes, CallId, SessionId};
use sealpost_seal::{PairingCode, PairingSecret, RelayOrigin};
use sealpost_testkit::id;
use sealpost_time::UnixMillis;
use serde_json::json;

use crate::{Mcp, config_dir, granted_executor, result_text, write_pairing};

const RATE_REFUSAL: &str =
    r#"{"error":{"code":"owner_rate_limited","message":"Too many requests for this account."}}"#;

fn refused_for_a_rate(retry_after_s: &'static str) -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, retry_after_s)],
        RATE_REFUSAL,
    )
        .into_response()
}

/// A relay with a genuine live session for a fresh pairing, whose posts and reads answer as
/// `post` and `read` say; returns the config folder's pairing and the counts of each.
struct Stand {
    config: tempfile::TempDir,
    posts: Arc<AtomicUsize>,
    reads: Arc<AtomicUsize>,
}

async fn stand(post_answer: fn(usize) -> Response, read_answer: fn(usize) -> Response) -> Stand {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let config = config_dir();
    let secret = PairingSecret::generate(&mut rand::rng());
    let code = PairingCode::new(
        RelayOrigin::parse(&origin).unwrap(),
        "h.p.s",
        PairingSecret::from_bytes(*secret.expose()),
    )
    .unwrap();
    write_pairing(config.path(), &code.encode());
    let now = sealpost_relay::clock::now_ms();
    let session_id = id::<SessionId>();
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    let hello = crate::ten_minute_hello(&granted_executor(workspace), &secret, session_id, now);
    let live = LiveSessionResponse {
        session_id,
        hello: Base64Bytes(hello),
        expires_at: now.saturating_add_ms(600_000),
        claimer_seen_at: Some(now),
        plugin_seen_at: None,
        catalog_update: None,
        now_ms: now,
    };
    let (posts, reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (posted, read) = (posts.clone(), reads.clone());
    let app = Router::new()
        .route(
            "/v1/pairings/{id}/session",
            get(move || {
                let mut live = live.clone();
                live.now_ms = sealpost_relay::clock::now_ms();
                live.claimer_seen_at = Some(live.now_ms);
                async move { axum::Json(live) }
            }),
        )
        .route(
            "/v1/sessions/{id}/calls",
            post(move || {
                let n = posted.fetch_add(1, Ordering::SeqCst);
                async move { post_answer(n) }
            }),
        )
        .route(
            "/v1/calls/{id}",
            get(move || {
                let n = read.fetch_add(1, Ordering::SeqCst);
                async move { read_answer(n) }
            }),
        )
        .route(
            "/v1/calls/{id}/cancel",
            post(|| async { StatusCode::NO_CONTENT }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Stand {
        config,
        posts,
        reads,
    }
}

fn posted(_: usize) -> Response {
    let now = sealpost_relay::clock::now_ms();
    (
        StatusCode::CREATED,
        axum::Json(PostCallResponse {
            call_id: CallId::from_bytes([0; 16]),
            expires_at: now.saturating_add_ms(60_000),
            now_ms: now,
            status: None,
        }),
    )
        .into_response()
}

/// Refuses the first six reads for a rate (more than the plugin's per-request retries), then
/// says the tab's session ended.
fn six_refusals_then_cancelled(n: usize) -> Response {
    if n < 6 {
        return refused_for_a_rate("1");
    }
    let now: UnixMillis = sealpost_relay::clock::now_ms();
    axum::Json(CallStatusResponse {
        state: CallState::Cancelled,
        reply: None,
        reason: Some(CancelReason::SessionEnded),
        expires_at: now.saturating_add_ms(60_000),
        now_ms: now,
    })
    .into_response()
}

#[tokio::test]
async fn a_read_refused_for_a_rate_is_sent_again_until_the_call_ends() {
    let stand = stand(posted, six_refusals_then_cancelled).await;
    let mut mcp = Mcp::spawn(stand.config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("list_sources", json!({})).await);
    assert!(is_error);
    assert!(
        text.contains("session ended before the call was answered"),
        "what became of the call, not the rate: {text}"
    );
    assert_eq!(stand.posts.load(Ordering::SeqCst), 1);
    assert_eq!(stand.reads.load(Ordering::SeqCst), 7, "read until it ended");
}

/// The first post's answer is cut off mid-body, as a connection lost during the post's wait
/// would be; the second is the same call, which the relay has.
fn lost_then_duplicate(n: usize) -> Response {
    if n == 0 {
        let lost = futures_util::stream::once(async {
            Err::<axum::body::Bytes, _>(std::io::Error::other("the connection was lost"))
        });
        return (StatusCode::CREATED, axum::body::Body::from_stream(lost)).into_response();
    }
    (
        StatusCode::CONFLICT,
        r#"{"error":{"code":"duplicate_call","message":"A call with this call_id exists."}}"#,
    )
        .into_response()
}

#[tokio::test]
async fn a_post_whose_answer_is_lost_is_sent_again_and_its_call_followed() {
    let stand = stand(lost_then_duplicate, six_refusals_then_cancelled).await;
    let mut mcp = Mcp::spawn(stand.config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("list_sources", json!({})).await);
    assert!(is_error);
    assert!(
        text.contains("session ended before the call was answered"),
        "what became of the call, not the lost answer: {text}"
    );
    assert_eq!(stand.posts.load(Ordering::SeqCst), 2, "sent once more");
    assert_eq!(stand.reads.load(Ordering::SeqCst), 7, "then read");
}

#[tokio::test]
async fn a_call_refused_for_the_accounts_rate_is_reported_at_once_with_when_to_try_again() {
    let stand = stand(|_| refused_for_a_rate("30"), six_refusals_then_cancelled).await;
    let mut mcp = Mcp::spawn(stand.config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("list_sources", json!({})).await);
    assert!(is_error);
    assert!(
        text.contains("making calls faster than the relay"),
        "{text}"
    );
    assert!(text.contains("Try again in 30 s"), "{text}");
    assert_eq!(
        stand.posts.load(Ordering::SeqCst),
        1,
        "a long wait is not waited out"
    );
    assert_eq!(
        stand.reads.load(Ordering::SeqCst),
        0,
        "nothing was posted to read"
    );
}
