//! Typed requests for the two ends of a session, each acting with one token: the plugin with
//! its MCP token, the tab with the owner's. A request that does not succeed is an error
//! carrying the status and body, so a test can expect a refusal.

use anyhow::{Context as _, Result, ensure};
use reqwest::StatusCode;
use sealpost_protocol::api::{
    CallStatusResponse, CancelRequest, ClaimResponse, CreateSessionRequest, LiveSessionResponse,
    PostCallRequest, PostCallResponse, ReplyRequest,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{Base64Bytes, CallId, PairId, SessionId, TokenId};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long a call posted through [`Client::post_call`] may wait for its answer, in seconds.
pub const CALL_TTL_S: u64 = 60;

/// A client for the relay at `base` acting with one bearer token.
#[derive(Debug, Clone)]
pub struct Client {
    pub base: String,
    pub token: String,
    http: reqwest::Client,
}

impl Client {
    pub fn new(base: String, http: reqwest::Client, token: String) -> Self {
        Self { base, token, http }
    }

    /// The tab publishes a session hello.
    pub async fn create_session(
        &self,
        session_id: SessionId,
        pair_id: PairId,
        hello: Vec<u8>,
        ttl_s: u64,
    ) -> Result<()> {
        let request = CreateSessionRequest {
            session_id,
            pair_id,
            hello: Base64Bytes(hello),
            ttl_s,
        };
        let _: serde_json::Value = self.post("/v1/sessions", &request).await?;
        Ok(())
    }

    /// The plugin looks up its pairing's live session.
    pub async fn live_session(&self, pair_id: PairId) -> Result<LiveSessionResponse> {
        self.get(&format!("/v1/pairings/{pair_id}/session")).await
    }

    /// The plugin posts a sealed call.
    pub async fn post_call(
        &self,
        session_id: SessionId,
        call_id: CallId,
        envelope: Vec<u8>,
    ) -> Result<()> {
        let request = PostCallRequest {
            call_id,
            envelope: Base64Bytes(envelope),
            ttl_s: CALL_TTL_S,
        };
        let path = format!("/v1/sessions/{session_id}/calls");
        let _: serde_json::Value = self.post(&path, &request).await?;
        Ok(())
    }

    /// The plugin posts a call and waits up to `wait_ms` for its answer, as `sealpost` does:
    /// the relay's acknowledgement carries the call's status at the end of the wait.
    pub async fn post_call_waiting(
        &self,
        session_id: SessionId,
        call_id: CallId,
        envelope: Vec<u8>,
        wait_ms: u64,
    ) -> Result<PostCallResponse> {
        let request = PostCallRequest {
            call_id,
            envelope: Base64Bytes(envelope),
            ttl_s: CALL_TTL_S,
        };
        let path = format!("/v1/sessions/{session_id}/calls?wait_ms={wait_ms}");
        self.post(&path, &request).await
    }

    /// The tab claims up to `max` calls, waiting up to `wait_ms` for one.
    pub async fn claim(
        &self,
        session_id: SessionId,
        max: u32,
        wait_ms: u64,
    ) -> Result<ClaimResponse> {
        let path = format!("/v1/sessions/{session_id}/claims?wait_ms={wait_ms}&max={max}");
        self.post(&path, &serde_json::json!({})).await
    }

    /// The tab posts a sealed reply.
    pub async fn reply(&self, call_id: CallId, envelope: Vec<u8>) -> Result<()> {
        let request = self
            .http
            .put(format!("{}/v1/calls/{call_id}/reply", self.base))
            .json(&ReplyRequest {
                envelope: Base64Bytes(envelope),
            });
        self.no_content(request, "reply").await
    }

    /// The tab cancels a call it cannot answer.
    pub async fn cancel(&self, call_id: CallId, reason: CancelReason) -> Result<()> {
        let request = self
            .http
            .post(format!("{}/v1/calls/{call_id}/cancel", self.base))
            .json(&CancelRequest { reason });
        self.no_content(request, "cancel").await
    }

    /// The tab ends its session (as on `pagehide`): its open calls are cancelled.
    pub async fn end_session(&self, session_id: SessionId) -> Result<()> {
        let request = self
            .http
            .delete(format!("{}/v1/sessions/{session_id}", self.base));
        self.no_content(request, "ending the session").await
    }

    /// The owner revokes an MCP token by its id.
    pub async fn revoke_mcp_token(&self, token_id: TokenId) -> Result<()> {
        let request = self
            .http
            .delete(format!("{}/v1/mcp-tokens/{token_id}", self.base));
        self.no_content(request, "revoking the token").await
    }

    /// Reads a call, waiting up to `wait_ms` for an answer.
    pub async fn read_call(&self, call_id: CallId, wait_ms: u64) -> Result<CallStatusResponse> {
        self.get(&format!("/v1/calls/{call_id}?wait_ms={wait_ms}"))
            .await
    }

    /// POSTs `body` as JSON; the answer must be a success, decoded as `T`.
    pub async fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body);
        decode(request.send().await?, path).await
    }

    /// GETs `path`; the answer must be a success, decoded as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let request = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        decode(request.send().await?, path).await
    }

    /// Sends `request` with the token; it must answer 204.
    async fn no_content(&self, request: reqwest::RequestBuilder, what: &str) -> Result<()> {
        let response = request.bearer_auth(&self.token).send().await?;
        ensure!(
            response.status() == StatusCode::NO_CONTENT,
            "{what} answered {}",
            response.status()
        );
        Ok(())
    }
}

async fn decode<T: DeserializeOwned>(response: reqwest::Response, path: &str) -> Result<T> {
    let status = response.status();
    let text = response.text().await?;
    ensure!(status.is_success(), "{path} answered {status}: {text}");
    serde_json::from_str(&text).with_context(|| format!("{path} answered {text}"))
}
