//! The load generator's HTTP client: one keep-alive HTTP/1.1 connection per simulated plugin
//! and per simulated tab, straight on hyper. The generator shares the machine's two cores with
//! the relay, so it is kept lean: no connection pool, no URL parsing, no redirects; what is
//! measured is then mostly the relay. The requests are the API's own, byte for byte as a
//! plugin or a tab would send them.
//!
//! The relay may close a keep-alive connection (its per-connection request cap, an idle
//! timeout): a request finds its connection closed before it is sent, opens a fresh one and
//! counts it ([`reconnects`]), as a real client's pool would.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::HeaderValue;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use sealpost_protocol::api::{
    CallStatusResponse, ClaimResponse, PostCallRequest, PostCallResponse, ReplyRequest,
};
use sealpost_protocol::ids::{Base64Bytes, CallId, SessionId};
use serde::de::DeserializeOwned;
use tokio::net::TcpStream;

static RECONNECTS: AtomicU64 = AtomicU64::new(0);

/// How many times a request found its connection closed by the relay and opened another.
pub fn reconnects() -> u64 {
    RECONNECTS.load(Ordering::Relaxed)
}

/// One connection to the server at `base` (`http://host:port`), used one request at a time.
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    address: String,
    host: HeaderValue,
    bearer: HeaderValue,
}

/// A fresh HTTP/1.1 connection to `address` (`host:port`).
async fn connect(address: &str) -> SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(address).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (send, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    send
}

impl Conn {
    /// Connects to `base`; every request carries `token` as its bearer.
    pub async fn open(base: &str, token: &str) -> Self {
        let address = base.trim_start_matches("http://").to_owned();
        Self {
            send: connect(&address).await,
            host: HeaderValue::from_str(&address).expect("a host"),
            bearer: HeaderValue::from_str(&format!("Bearer {token}")).expect("a token"),
            address,
        }
    }

    /// The connection, ready for a request: a fresh one if the relay closed the last.
    async fn ready(&mut self) -> &mut SendRequest<Full<Bytes>> {
        if self.send.ready().await.is_err() {
            self.reopen().await;
        }
        &mut self.send
    }

    /// Replaces a connection the relay closed, and counts it.
    async fn reopen(&mut self) {
        RECONNECTS.fetch_add(1, Ordering::Relaxed);
        self.send = connect(&self.address).await;
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> (StatusCode, Bytes) {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, self.host.clone())
            .header(hyper::header::AUTHORIZATION, self.bearer.clone());
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let body = Full::new(body.map(Bytes::from).unwrap_or_default());
        let request = request.body(body).expect("a valid request");
        let response = match self.ready().await.try_send_request(request).await {
            Ok(response) => response,
            // Closed between the check and the send: the request never left, so it goes again
            // on a fresh connection.
            Err(mut refused) => match refused.take_message() {
                Some(request) if refused.error().is_canceled() => {
                    self.reopen().await;
                    self.send.send_request(request).await.expect("a response")
                }
                _ => panic!("a response: {}", refused.into_error()),
            },
        };
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        (status, bytes)
    }

    async fn json<T: DeserializeOwned>(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        expect: StatusCode,
    ) -> T {
        let (status, bytes) = self.send(method, path, body).await;
        assert_eq!(
            status,
            expect,
            "{path}: {}",
            String::from_utf8_lossy(&bytes)
        );
        serde_json::from_slice(&bytes).expect("the API's JSON")
    }

    /// The plugin posts a sealed call.
    pub async fn post_call(&mut self, session_id: SessionId, call_id: CallId, envelope: Vec<u8>) {
        let request = PostCallRequest {
            call_id,
            envelope: Base64Bytes(envelope),
            ttl_s: 60,
        };
        let body = serde_json::to_vec(&request).expect("json");
        let path = format!("/v1/sessions/{session_id}/calls");
        let _: PostCallResponse = self
            .json(Method::POST, &path, Some(body), StatusCode::CREATED)
            .await;
    }

    /// The tab claims up to `max` calls without waiting.
    pub async fn claim(&mut self, session_id: SessionId, max: u32) -> ClaimResponse {
        let path = format!("/v1/sessions/{session_id}/claims?wait_ms=0&max={max}");
        self.json(Method::POST, &path, Some(b"{}".to_vec()), StatusCode::OK)
            .await
    }

    /// The tab posts a sealed reply.
    pub async fn reply(&mut self, call_id: CallId, envelope: Vec<u8>) {
        let request = ReplyRequest {
            envelope: Base64Bytes(envelope),
        };
        let body = serde_json::to_vec(&request).expect("json");
        let path = format!("/v1/calls/{call_id}/reply");
        let (status, bytes) = self.send(Method::PUT, &path, Some(body)).await;
        assert_eq!(
            status,
            StatusCode::NO_CONTENT,
            "{path}: {}",
            String::from_utf8_lossy(&bytes)
        );
    }

    /// The plugin reads its call without waiting.
    pub async fn read_call(&mut self, call_id: CallId) -> CallStatusResponse {
        let path = format!("/v1/calls/{call_id}?wait_ms=0");
        self.json(Method::GET, &path, None, StatusCode::OK).await
    }
}
