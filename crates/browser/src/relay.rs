//! The relay's API as the tab uses it, over the global `fetch` (a Worker's or a window's), with
//! the owner token. Requests can be aborted, so a stop ends a waiting long-poll at once.

use sealpost_protocol::api::{
    CancelRequest, CatalogUpdateRequest, ClaimResponse, CreateMcpTokenRequest,
    CreateMcpTokenResponse, CreateSessionRequest, CreateSessionResponse, ErrorBody,
    LiveSessionResponse, ReplyRequest,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, PairId, SessionId, TokenId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortSignal, Request, RequestInit, Response};

#[wasm_bindgen]
extern "C" {
    /// `globalThis.fetch`: present in windows and in workers alike.
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(request: &Request) -> js_sys::Promise;
}

pub use crate::delivery::RelayError;

/// The relay at `origin` (`""` for the page's own origin) with an owner token.
#[derive(Debug, Clone)]
pub struct Relay {
    origin: String,
    token: String,
}

fn js_error(value: JsValue) -> RelayError {
    if let Some(error) = value.dyn_ref::<js_sys::Error>()
        && error.name() == "AbortError"
    {
        return RelayError::Aborted;
    }
    RelayError::Unreachable(
        value
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .unwrap_or_else(|| "network error".into()),
    )
}

impl Relay {
    /// A client for `origin` using `token`.
    pub fn new(origin: &str, token: &str) -> Self {
        Self {
            origin: origin.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        }
    }

    /// The relay's origin (`""`: the page's own).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The owner token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A request to a relay on another origin that got no answer may have been refused by the
    /// relay's CORS gate, which a browser reports exactly like a relay that is down: say both.
    fn unanswered(&self, error: RelayError) -> RelayError {
        let page = js_sys::Reflect::get(&js_sys::global(), &"location".into())
            .and_then(|location| js_sys::Reflect::get(&location, &"origin".into()))
            .ok()
            .and_then(|origin| origin.as_string())
            .unwrap_or_default();
        match error {
            RelayError::Unreachable(why) if !self.origin.is_empty() && self.origin != page => {
                RelayError::Unreachable(format!(
                    "{why}; if the relay at {} is up, it does not list this page's origin \
                     {page}: its operator adds it with --app-origin",
                    self.origin
                ))
            }
            other => other,
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        signal: Option<&AbortSignal>,
        keepalive: bool,
    ) -> Result<Answer, RelayError> {
        let init = RequestInit::new();
        init.set_method(method);
        if let Some(body) = &body {
            init.set_body(&JsValue::from_str(body));
        }
        if let Some(signal) = signal {
            init.set_signal(Some(signal));
        }
        if keepalive {
            // `keepalive` lets a request outlive the page; web-sys has no stable setter yet.
            js_sys::Reflect::set(&init, &"keepalive".into(), &JsValue::TRUE).map_err(js_error)?;
        }
        let request = Request::new_with_str_and_init(&format!("{}{path}", self.origin), &init)
            .map_err(js_error)?;
        let headers = request.headers();
        headers
            .set("authorization", &format!("Bearer {}", self.token))
            .map_err(js_error)?;
        if body.is_some() {
            headers
                .set("content-type", "application/json")
                .map_err(js_error)?;
        }
        let response: Response = JsFuture::from(global_fetch(&request))
            .await
            .map_err(|error| self.unanswered(js_error(error)))?
            .dyn_into()
            .map_err(js_error)?;
        let status = response.status();
        let retry_after_s = response
            .headers()
            .get("retry-after")
            .ok()
            .flatten()
            .and_then(|value| value.trim().parse().ok());
        let text = JsFuture::from(response.text().map_err(js_error)?)
            .await
            .map_err(js_error)?
            .as_string()
            .unwrap_or_default();
        Ok(Answer {
            status,
            text,
            retry_after_s,
        })
    }

    async fn json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: &B,
        signal: Option<&AbortSignal>,
    ) -> Result<T, RelayError> {
        let body = serde_json::to_string(body).expect("request types serialise");
        let answer = self.send(method, path, Some(body), signal, false).await?;
        if !answer.ok() {
            return Err(answer.refusal());
        }
        serde_json::from_str(&answer.text)
            .map_err(|_| RelayError::Unreachable("an answer that is not the relay's".into()))
    }

    async fn empty<B: Serialize>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
        keepalive: bool,
    ) -> Result<(), RelayError> {
        let body = body.map(|b| serde_json::to_string(b).expect("request types serialise"));
        let answer = self.send(method, path, body, None, keepalive).await?;
        if answer.ok() {
            Ok(())
        } else {
            Err(answer.refusal())
        }
    }

    /// Mints the MCP token of a new pairing.
    pub async fn create_mcp_token(
        &self,
        request: &CreateMcpTokenRequest,
    ) -> Result<CreateMcpTokenResponse, RelayError> {
        self.json("POST", "/v1/mcp-tokens", request, None).await
    }

    /// Revokes an MCP token (unpair).
    pub async fn revoke_mcp_token(&self, id: TokenId) -> Result<(), RelayError> {
        self.empty::<()>("DELETE", &format!("/v1/mcp-tokens/{id}"), None, false)
            .await
    }

    /// Publishes a session's hello.
    pub async fn create_session(
        &self,
        request: &CreateSessionRequest,
    ) -> Result<CreateSessionResponse, RelayError> {
        self.json("POST", "/v1/sessions", request, None).await
    }

    /// Ends a session. `keepalive` lets it outlive the page (`pagehide`).
    pub async fn end_session(
        &self,
        session_id: SessionId,
        keepalive: bool,
    ) -> Result<(), RelayError> {
        self.empty::<()>(
            "DELETE",
            &format!("/v1/sessions/{session_id}"),
            None,
            keepalive,
        )
        .await
    }

    /// Publishes a live session's catalog update.
    pub async fn put_catalog(
        &self,
        session_id: SessionId,
        update: Vec<u8>,
    ) -> Result<(), RelayError> {
        let body = CatalogUpdateRequest {
            update: sealpost_protocol::ids::Base64Bytes(update),
        };
        self.empty(
            "PUT",
            &format!("/v1/sessions/{session_id}/catalog"),
            Some(&body),
            false,
        )
        .await
    }

    /// The pairing's live session as the relay sees it (when the tab and the plugin were last
    /// seen); `None` when no session is live.
    pub async fn live_session(
        &self,
        pair_id: PairId,
    ) -> Result<Option<LiveSessionResponse>, RelayError> {
        let path = format!("/v1/pairings/{pair_id}/session");
        let answer = self.send("GET", &path, None, None, false).await?;
        if answer.status == 404 {
            return Ok(None);
        }
        if !answer.ok() {
            return Err(answer.refusal());
        }
        serde_json::from_str(&answer.text)
            .map(Some)
            .map_err(|_| RelayError::Unreachable("an answer that is not the relay's".into()))
    }

    /// Claims up to `max` calls, waiting up to `wait_ms` for the first.
    pub async fn claim(
        &self,
        session_id: SessionId,
        wait_ms: u64,
        max: u32,
        signal: &AbortSignal,
    ) -> Result<ClaimResponse, RelayError> {
        let path = format!("/v1/sessions/{session_id}/claims?wait_ms={wait_ms}&max={max}");
        self.json("POST", &path, &serde_json::json!({}), Some(signal))
            .await
    }

    /// Posts a sealed reply.
    pub async fn reply(&self, call_id: CallId, envelope: Vec<u8>) -> Result<(), RelayError> {
        let body = ReplyRequest {
            envelope: sealpost_protocol::ids::Base64Bytes(envelope),
        };
        self.empty(
            "PUT",
            &format!("/v1/calls/{call_id}/reply"),
            Some(&body),
            false,
        )
        .await
    }

    /// Cancels a call the tab cannot answer.
    pub async fn cancel(&self, call_id: CallId, reason: CancelReason) -> Result<(), RelayError> {
        let body = CancelRequest { reason };
        self.empty(
            "POST",
            &format!("/v1/calls/{call_id}/cancel"),
            Some(&body),
            false,
        )
        .await
    }
}

/// An HTTP answer: its status, body and `Retry-After`.
struct Answer {
    status: u16,
    text: String,
    retry_after_s: Option<u64>,
}

impl Answer {
    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    fn refusal(&self) -> RelayError {
        refused(
            self.status,
            serde_json::from_str(&self.text).ok(),
            self.retry_after_s,
        )
    }
}

/// The relay's refusal with `status`, its error body if it sent one that reads, and its
/// `Retry-After`.
pub(crate) fn refused(
    status: u16,
    body: Option<ErrorBody>,
    retry_after_s: Option<u64>,
) -> RelayError {
    let code = body.map_or_else(
        || "unknown".into(),
        |body| body.error.code.as_str().to_owned(),
    );
    RelayError::Status {
        status,
        code,
        retry_after_s,
    }
}
