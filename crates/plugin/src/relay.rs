//! The plugin's side of the relay's HTTP API, with its MCP token.
//!
//! Response bodies are read with a running cap before anything parses them, so a relay that
//! lies about or omits `Content-Length` cannot make the plugin allocate past the cap. Errors
//! name the relay's host, never a URL, a token or a code.
//!
//! HTTP is hyper's pooled client with rustls (the `ring` provider, no C to cross-compile):
//! [`tls`] says which certificates are trusted on each platform.
//!
//! A process has at most [`MAX_REQUESTS_IN_FLIGHT`] requests open to the relay; the rest wait
//! their turn, so hundreds of concurrent tool calls do not open hundreds of connections (which
//! the relay's per-address cap would refuse, the tab's own connections with them).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use sealpost_protocol::api::{
    CallStatusResponse, CancelRequest, ErrorBody, LiveSessionResponse, PostCallRequest,
    PostCallResponse,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, PairId, SessionId};
use sealpost_protocol::limits::MAX_REPLY_ENVELOPE_BYTES;
use sealpost_seal::RelayOrigin;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;
use zeroize::Zeroizing;

/// Largest response body read: a maximal reply envelope as base64 in JSON, with room for the
/// other fields.
pub const MAX_RESPONSE_BYTES: usize = MAX_REPLY_ENVELOPE_BYTES.div_ceil(3) * 4 + 16 * 1024;
/// How long connecting to the relay may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Added to a long-poll's wait for the whole request's deadline.
const REQUEST_SLACK: Duration = Duration::from_secs(10);
/// Idle connections are dropped after this, so a laptop that slept starts on fresh ones.
const POOL_IDLE: Duration = Duration::from_secs(20);
/// A 429 or 503 whose `Retry-After` is at most this is waited out and the request sent again,
/// up to [`RATE_RETRIES`] times: a burst, or a relay at its connection cap, costs the agent a
/// short delay, not a failed tool call. Every request the plugin makes may be repeated (a post
/// is keyed by its call id; reads, look-ups and cancels change nothing twice). A longer wait
/// (a quota that frees only at the next sweep) is reported at once.
const RATE_WAIT_MAX: Duration = Duration::from_secs(5);
/// How many times one request waits out a 429 or 503.
const RATE_RETRIES: u32 = 3;
/// Most requests one process has open to the relay at once (long-polls included): the
/// relay's own share per token is of the same size.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 32;

/// What went wrong talking to the relay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    /// No answer: the relay is down, unreachable, or too slow.
    #[error("The relay at {host} did not answer.")]
    Unreachable {
        /// The relay's host.
        host: String,
    },
    /// 401: the MCP token is revoked, expired or not known.
    #[error("The relay at {host} refused this plugin's token: it was revoked or has expired.")]
    TokenRefused {
        /// The relay's host.
        host: String,
    },
    /// 404: no such session or call (for this token).
    #[error("not found")]
    NotFound,
    /// 409 on a post: the call exists already.
    #[error("duplicate")]
    Duplicate,
    /// Any other refusal, with the relay's stable code.
    #[error("The relay at {host} answered {status} ({code}).")]
    Refused {
        /// The relay's host.
        host: String,
        /// HTTP status.
        status: u16,
        /// The stable error code (relay-supplied text).
        code: String,
        /// The message (relay-supplied text).
        message: String,
        /// The `Retry-After` the relay sent with it.
        retry_after: Option<Duration>,
    },
    /// The response was over [`MAX_RESPONSE_BYTES`] or not the JSON expected.
    #[error("The relay at {host} sent a response that is too large or malformed.")]
    BadResponse {
        /// The relay's host.
        host: String,
    },
}

/// A client for one relay with one MCP token.
#[derive(Clone)]
pub struct RelayClient {
    origin: String,
    host: String,
    token: Zeroizing<String>,
    http: Connections,
}

impl std::fmt::Debug for RelayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayClient")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// The process's way to the relay: one HTTP client (connection reuse matters more than
/// anything else here) and the places for requests in flight.
/// Redirects are not followed (hyper's client never does): a relay answers where it is asked.
#[derive(Debug, Clone)]
pub struct Connections {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    in_flight: Arc<Semaphore>,
}

const USER_AGENT: &str = concat!("sealpost/", env!("CARGO_PKG_VERSION"));

/// The process's connections to the relay.
pub fn http_client() -> Connections {
    let mut tcp = HttpConnector::new();
    tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
    tcp.set_nodelay(true);
    tcp.enforce_http(false);
    let connector = tls::connector_builder()
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    let client = Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(MAX_REQUESTS_IN_FLIGHT)
        .build(connector);
    Connections {
        client,
        in_flight: Arc::new(Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
    }
}

/// Which certificates the plugin trusts for an `https://` relay.
mod tls {
    /// The operating system's own trust (rustls-platform-verifier: the Windows certificate
    /// store; on Linux the system's CA files, `SSL_CERT_FILE` included), so a relay behind a
    /// company's own CA works where the system trusts that CA.
    #[cfg(not(target_vendor = "apple"))]
    pub fn connector_builder()
    -> hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsSchemes> {
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_platform_verifier(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .expect("ring offers TLS 1.2 and 1.3")
    }

    /// Mozilla's root certificates (webpki-roots), built in. macOS's own trust lives in the
    /// Security framework, which a binary cross-built from Linux cannot link against (no SDK
    /// may be shipped there); so macOS trusts the public web PKI, and a relay behind a private
    /// CA is reached through `SSL_CERT_FILE`, whose certificates are added to these.
    #[cfg(target_vendor = "apple")]
    pub fn connector_builder()
    -> hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsSchemes> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
            add_pem_file(&mut roots, std::path::Path::new(&path));
        }
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring offers TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
        hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
    }

    /// Adds the certificates of a PEM file; a file that cannot be read is said, not fatal.
    #[cfg(target_vendor = "apple")]
    fn add_pem_file(roots: &mut rustls::RootCertStore, path: &std::path::Path) {
        use rustls::pki_types::{CertificateDer, pem::PemObject as _};
        match CertificateDer::pem_file_iter(path) {
            Ok(certificates) => {
                for certificate in certificates.flatten() {
                    let _ = roots.add(certificate);
                }
            }
            Err(error) => tracing::warn!(%error, "SSL_CERT_FILE cannot be read: not added"),
        }
    }
}

impl RelayClient {
    /// A client for the relay at `origin` using `token`.
    pub fn new(http: Connections, origin: &RelayOrigin, token: &str) -> Self {
        Self {
            origin: origin.as_str().to_owned(),
            host: origin.host().to_owned(),
            token: Zeroizing::new(token.to_owned()),
            http,
        }
    }

    /// The relay's host, for messages.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The live session of `pair_id`, or `None` when none is live.
    pub async fn live_session(
        &self,
        pair_id: PairId,
    ) -> Result<Option<LiveSessionResponse>, RelayError> {
        let path = format!("/v1/pairings/{pair_id}/session");
        // Idempotent, and the first request after a sleep may meet a dead pooled connection:
        // one retry on a transport failure.
        let mut result = self.send(self.request(Method::GET, &path), None).await;
        if matches!(result, Err(RelayError::Unreachable { .. })) {
            result = self.send(self.request(Method::GET, &path), None).await;
        }
        match result {
            Ok(session) => Ok(Some(session)),
            Err(RelayError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Watches the live session of `pair_id`: the relay answers once it is no longer `known`
    /// (another session, none, or a newer catalog update), or after `wait` with what it is.
    pub async fn watch_session(
        &self,
        pair_id: PairId,
        known: Option<(SessionId, u64)>,
        wait: Duration,
    ) -> Result<Option<LiveSessionResponse>, RelayError> {
        let wait_ms = wait.as_millis();
        let knows = known.map_or_else(String::new, |(session, seq)| {
            format!("&session_id={session}&catalog_seq={seq}")
        });
        let path = format!("/v1/pairings/{pair_id}/session?wait_ms={wait_ms}{knows}");
        match self
            .send(self.request(Method::GET, &path), Some(wait))
            .await
        {
            Ok(session) => Ok(Some(session)),
            Err(RelayError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Posts a sealed call; once it is stored, the relay waits up to `wait` for its answer and
    /// sends it back with the acknowledgement (`status`, absent from a relay that does not).
    pub async fn post_call(
        &self,
        session_id: SessionId,
        request: &PostCallRequest,
        wait: Duration,
    ) -> Result<PostCallResponse, RelayError> {
        let wait_ms = wait.as_millis();
        let path = format!("/v1/sessions/{session_id}/calls?wait_ms={wait_ms}");
        self.send_json(Method::POST, &path, request, Some(wait))
            .await
    }

    /// Reads a call, waiting up to `wait` for it to leave pending and claimed.
    pub async fn read_call(
        &self,
        call_id: CallId,
        wait: Duration,
    ) -> Result<CallStatusResponse, RelayError> {
        let wait_ms = wait.as_millis();
        let path = format!("/v1/calls/{call_id}?wait_ms={wait_ms}");
        self.send(self.request(Method::GET, &path), Some(wait))
            .await
    }

    /// Cancels a call with `reason`.
    pub async fn cancel_call(
        &self,
        call_id: CallId,
        reason: CancelReason,
    ) -> Result<(), RelayError> {
        let path = format!("/v1/calls/{call_id}/cancel");
        self.send_empty(Method::POST, &path, &CancelRequest { reason })
            .await
    }

    /// Revokes this plugin's own MCP token.
    pub async fn sign_out(&self) -> Result<(), RelayError> {
        self.send_empty(Method::POST, "/v1/auth/signout", &serde_json::json!({}))
            .await
    }

    fn request(&self, method: Method, path: &str) -> Prepared {
        Prepared {
            method,
            url: format!("{}{path}", self.origin),
            json: None,
        }
    }

    async fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
        wait: Option<Duration>,
    ) -> Result<T, RelayError> {
        self.send(self.request(method, path).json(body), wait).await
    }

    async fn send_empty<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<(), RelayError> {
        let (status, bytes, retry_after) = self
            .exchange(self.request(method, path).json(body), None)
            .await?;
        if status.is_success() {
            return Ok(());
        }
        Err(self.refusal(status, &bytes, retry_after))
    }

    async fn send<T: DeserializeOwned>(
        &self,
        request: Prepared,
        wait: Option<Duration>,
    ) -> Result<T, RelayError> {
        let (status, bytes, retry_after) = self.exchange(request, wait).await?;
        if !status.is_success() {
            return Err(self.refusal(status, &bytes, retry_after));
        }
        serde_json::from_slice(&bytes).map_err(|_| RelayError::BadResponse {
            host: self.host.clone(),
        })
    }

    /// Sends and reads the body up to [`MAX_RESPONSE_BYTES`], counting as it goes; the whole
    /// exchange, body included, within the wait plus [`REQUEST_SLACK`].
    async fn exchange(
        &self,
        request: Prepared,
        wait: Option<Duration>,
    ) -> Result<(StatusCode, Vec<u8>, Option<u64>), RelayError> {
        let deadline = wait.unwrap_or_default() + REQUEST_SLACK;
        let mut retries = 0;
        loop {
            // A place is held from sending until the body is read, and not while waiting.
            let place = self
                .http
                .in_flight
                .acquire()
                .await
                .expect("the semaphore is never closed");
            let answer = tokio::time::timeout(deadline, self.attempt(&request))
                .await
                .unwrap_or_else(|_| Err(self.unreachable()))?;
            drop(place);
            let (status, _, asked) = &answer;
            match retry_wait(*status, *asked) {
                Some(pause) if retries < RATE_RETRIES => {
                    retries += 1;
                    tracing::debug!(
                        host = %self.host,
                        status = status.as_u16(),
                        ?pause,
                        "refused for now: waiting, then again"
                    );
                    tokio::time::sleep(pause).await;
                }
                _ => return Ok(answer),
            }
        }
    }

    /// One request and its body, read with a running cap.
    async fn attempt(
        &self,
        request: &Prepared,
    ) -> Result<(StatusCode, Vec<u8>, Option<u64>), RelayError> {
        let response = self
            .http
            .client
            .request(request.build(&self.token).map_err(|_| self.unreachable())?)
            .await
            .map_err(|_| self.unreachable())?;
        let status = response.status();
        let asked = retry_after(response.headers());
        let too_large = || RelayError::BadResponse {
            host: self.host.clone(),
        };
        let declared = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES as u64) {
            return Err(too_large());
        }
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| self.unreachable())?;
            if let Ok(chunk) = frame.into_data() {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(too_large());
                }
                bytes.extend_from_slice(&chunk);
            }
        }
        Ok((status, bytes, asked))
    }

    fn unreachable(&self) -> RelayError {
        RelayError::Unreachable {
            host: self.host.clone(),
        }
    }

    fn refusal(&self, status: StatusCode, body: &[u8], retry_after: Option<u64>) -> RelayError {
        match status {
            StatusCode::UNAUTHORIZED => RelayError::TokenRefused {
                host: self.host.clone(),
            },
            StatusCode::NOT_FOUND => RelayError::NotFound,
            StatusCode::CONFLICT => RelayError::Duplicate,
            _ => {
                let retry_after = retry_after.map(Duration::from_secs);
                let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
                    Ok(body) => (body.error.code.as_str().to_owned(), body.error.message),
                    Err(_) => ("unknown".to_owned(), String::new()),
                };
                RelayError::Refused {
                    host: self.host.clone(),
                    status: status.as_u16(),
                    code,
                    message,
                    retry_after,
                }
            }
        }
    }
}

impl RelayError {
    /// Whether the same request may succeed later: no answer, a timeout, a rate or share
    /// refusal, or a relay too busy. A read refused so is sent again until the call's deadline.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Refused { status, .. } => matches!(status, 408 | 429 | 503),
            _ => false,
        }
    }

    /// How long the relay asked to wait before the next request, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Refused { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// A request ready to send, as often as a retry needs: the plugin's bodies are JSON bytes.
#[derive(Debug)]
struct Prepared {
    method: Method,
    url: String,
    json: Option<Bytes>,
}

impl Prepared {
    fn json<B: Serialize>(mut self, body: &B) -> Self {
        let bytes = serde_json::to_vec(body).expect("request bodies serialise");
        self.json = Some(bytes.into());
        self
    }

    fn build(&self, token: &str) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let mut request = http::Request::builder()
            .method(self.method.clone())
            .uri(self.url.as_str())
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::USER_AGENT, USER_AGENT);
        if self.json.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        request.body(Full::new(self.json.clone().unwrap_or_default()))
    }
}

/// How long to wait before sending again: a 429's or 503's `Retry-After` (whole seconds, as
/// the relay sends it), when it is no longer than [`RATE_WAIT_MAX`].
fn retry_wait(status: StatusCode, retry_after: Option<u64>) -> Option<Duration> {
    if !matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        return None;
    }
    let pause = Duration::from_secs(retry_after?);
    (pause <= RATE_WAIT_MAX).then_some(pause)
}

/// A response's `Retry-After`, in whole seconds as the relay sends it.
fn retry_after(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
