//! The HTTP echo ceiling's server: stateless, answering the relay's four call-loop requests
//! with bodies of the same size, so the clients do all the work they do against the relay.

use axum::Router;
use axum::routing::{get, post, put};
use sealpost_protocol::api::{
    CallState, CallStatusResponse, ClaimResponse, ClaimedCall, PostCallResponse,
};
use sealpost_protocol::ids::Base64Bytes;
use sealpost_testkit::id;
use sealpost_time::UnixMillis;

use crate::{ENVELOPE_BYTES, now};

/// A stateless server answering the same four requests with same-sized bodies.
pub async fn serve() -> String {
    let sealed = Base64Bytes(vec![0u8; ENVELOPE_BYTES]);
    let (claimed, read) = (sealed.clone(), sealed);
    let app = Router::new()
        .route(
            "/v1/sessions/{s}/calls",
            post(|body: axum::body::Bytes| async move {
                let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let call_id = serde_json::from_value(request["call_id"].clone()).unwrap();
                let answer = PostCallResponse {
                    call_id,
                    expires_at: UnixMillis::EPOCH,
                    now_ms: now(),
                    status: None,
                };
                (axum::http::StatusCode::CREATED, axum::Json(answer))
            }),
        )
        .route(
            "/v1/sessions/{s}/claims",
            post(move || async move {
                let call = ClaimedCall {
                    call_id: id(),
                    envelope: claimed,
                    lease_expires_at: UnixMillis::EPOCH,
                };
                axum::Json(ClaimResponse {
                    calls: vec![call],
                    now_ms: now(),
                })
            }),
        )
        .route(
            "/v1/calls/{c}/reply",
            put(|_body: axum::body::Bytes| async { axum::http::StatusCode::NO_CONTENT }),
        )
        .route(
            "/v1/calls/{c}",
            get(move || async move {
                axum::Json(CallStatusResponse {
                    state: CallState::Answered,
                    reply: Some(read),
                    reason: None,
                    expires_at: UnixMillis::EPOCH,
                    now_ms: now(),
                })
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}
