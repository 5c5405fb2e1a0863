//! Relay HTTP API: request and response bodies and stable error codes.
//!
//! The relay, the plugin and the browser all (de)serialise these types, so a field renamed here
//! is renamed everywhere at once. Envelopes and hellos are opaque [`Base64Bytes`]; ids are
//! [`Id16`]; times are Unix milliseconds. Error codes are listed once, in [`ErrorCode`].

use serde::{Deserialize, Serialize};

use crate::content::CancelReason;
use crate::ids::{Base64Bytes, Id16};

/// `POST /v1/auth/signin`: exchange a one-time sign-in code for an owner token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SigninRequest {
    /// The one-time code from the sign-in link.
    pub code: String,
}

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnerInfo {
    /// The owner's id.
    pub id: Id16,
    /// The owner's name, as `sealpost-relay owner add` gave it.
    pub name: String,
}

/// Answer to a sign-in, and to `GET /v1/me` (which hands out a refreshed token, so a sign-in
/// that keeps being used slides forward).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigninResponse {
    /// The owner token, sent as `Authorization: Bearer`. A secret: never log it.
    pub token: String,
    /// Who signed in.
    pub owner: OwnerInfo,
    /// When the token expires, Unix ms.
    pub expires_at: i64,
}

/// `GET /v1/me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MeResponse {
    /// Who the token belongs to.
    pub owner: OwnerInfo,
    /// "owner" or "mcp".
    pub token_kind: TokenKind,
    /// For an MCP token: the pairing it acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_id: Option<Id16>,
    /// A fresh owner token with a renewed expiry (absent for MCP tokens, which do not slide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// When the token expires, Unix ms.
    pub expires_at: i64,
    /// The relay's clock when it answered, Unix ms.
    pub now_ms: i64,
}

/// The two kinds of bearer token the relay issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// A person signed in to the web app.
    Owner,
    /// A plugin acting for one pairing.
    Mcp,
}

impl TokenKind {
    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Mcp => "mcp",
        }
    }
}

/// `POST /v1/auth/signin-links`: a signed-in owner mints a sign-in link for another device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigninLinkResponse {
    /// The link to open on the other device. It carries a one-time code: never log it.
    pub link: String,
    /// When the link's code expires, Unix ms.
    pub expires_at: i64,
}

/// `POST /v1/mcp-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateMcpTokenRequest {
    /// A name for the token, shown when tokens are listed.
    pub label: String,
    /// The pairing the token will act for.
    pub pair_id: Id16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The token's lifetime in seconds; the relay's default when absent.
    pub ttl_s: Option<u64>,
}

/// Answer to `POST /v1/mcp-tokens`. The token is shown once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateMcpTokenResponse {
    /// The token's id, for listing and revoking it.
    pub id: Id16,
    /// The MCP token itself, shown this once. A secret: never log it.
    pub token: String,
    /// When the token expires, Unix ms.
    pub expires_at: i64,
}

/// One MCP token as listed (never the token itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpTokenInfo {
    /// The token's id.
    pub id: Id16,
    /// The name given when the token was made.
    pub label: String,
    /// The pairing the token acts for.
    pub pair_id: Id16,
    /// When the token was made, Unix ms.
    pub created_at: i64,
    /// When the token expires, Unix ms.
    pub expires_at: i64,
}

/// `GET /v1/mcp-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpTokenList {
    /// The owner's MCP tokens.
    pub tokens: Vec<McpTokenInfo>,
}

/// One owner sign-in as listed: one per signed-in device (never the token itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnerTokenInfo {
    /// The sign-in's id, for revoking it.
    pub id: Id16,
    /// When the person signed in, Unix ms.
    pub created_at: i64,
    /// When the sign-in lapses unless used, Unix ms (never past its absolute lifetime).
    pub expires_at: i64,
    /// Whether this is the token the request was made with.
    pub current: bool,
}

/// `GET /v1/owner-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnerTokenList {
    /// The owner's live sign-ins, oldest first.
    pub tokens: Vec<OwnerTokenInfo>,
}

/// `POST /v1/sessions`. The hello is stored and returned byte for byte, never parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// The id the browser chose (the hello carries it too).
    pub session_id: Id16,
    /// The pairing the session serves.
    pub pair_id: Id16,
    /// The session hello (binary; layout in docs/PROTOCOL.md).
    pub hello: Base64Bytes,
    /// How long the session lives, in seconds.
    pub ttl_s: u64,
}

/// Answer to `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateSessionResponse {
    /// The new session's id.
    pub session_id: Id16,
    /// When the session ends, Unix ms.
    pub expires_at: i64,
}

/// `GET /v1/pairings/{pair_id}/session`: the live session of a pairing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LiveSessionResponse {
    /// The live session's id; the plugin checks it is the hello's.
    pub session_id: Id16,
    /// The hello byte for byte as the browser posted it.
    pub hello: Base64Bytes,
    /// When the session ends, Unix ms.
    pub expires_at: i64,
    /// When the tab last asked for calls; `None` if it never has.
    #[serde(default)]
    pub claimer_seen_at: Option<i64>,
    /// The relay's clock when it answered, Unix ms.
    pub now_ms: i64,
}

/// `POST /v1/sessions/{session_id}/calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PostCallRequest {
    /// The id the plugin chose (the envelope's header carries it too).
    pub call_id: Id16,
    /// The sealed call.
    pub envelope: Base64Bytes,
    /// How long the call may wait for an answer, in seconds.
    pub ttl_s: u64,
}

/// Answer (201) to `POST /v1/sessions/{session_id}/calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PostCallResponse {
    /// The call's id.
    pub call_id: Id16,
    /// When the call expires, Unix ms.
    pub expires_at: i64,
    /// The relay's clock when it answered, Unix ms.
    pub now_ms: i64,
}

/// One call handed to an executor by a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimedCall {
    /// The call's id.
    pub call_id: Id16,
    /// The sealed call.
    pub envelope: Base64Bytes,
    /// When the claim's lease ends, Unix ms: a reply after it is refused.
    pub lease_expires_at: i64,
}

/// Answer to `POST /v1/sessions/{session_id}/claims?wait_ms=&max=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimResponse {
    /// The calls this claim took (empty when the wait ran out).
    pub calls: Vec<ClaimedCall>,
    /// The relay's clock when it answered, Unix ms.
    pub now_ms: i64,
}

/// `PUT /v1/calls/{call_id}/reply`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReplyRequest {
    /// The sealed reply.
    pub envelope: Base64Bytes,
}

/// `POST /v1/calls/{call_id}/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Why; the relay accepts only [`CancelReason::ALL`].
    pub reason: CancelReason,
}

/// Where a call is in its life. `pending → claimed → answered → delivered`;
/// `pending|claimed → expired | cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Posted; waiting for the browser to claim it.
    Pending,
    /// Claimed by the browser, under a lease.
    Claimed,
    /// The reply is stored and not yet read.
    Answered,
    /// The reply has been read (and reads the same until the call expires).
    Delivered,
    /// The call's TTL or its claim's lease ran out.
    Expired,
    /// Cancelled, with a [`CancelReason`].
    Cancelled,
}

impl CallState {
    /// Every state.
    pub const ALL: [CallState; 6] = [
        Self::Pending,
        Self::Claimed,
        Self::Answered,
        Self::Delivered,
        Self::Expired,
        Self::Cancelled,
    ];

    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Claimed => "claimed",
            Self::Answered => "answered",
            Self::Delivered => "delivered",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    /// The value `as_str` names, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// A final state: nothing more will happen to the call.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Claimed)
    }
}

/// Answer to `GET /v1/calls/{call_id}?wait_ms=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallStatusResponse {
    /// Where the call is.
    pub state: CallState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The sealed reply, once the call is answered.
    pub reply: Option<Base64Bytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Why the call was cancelled, when it was.
    pub reason: Option<CancelReason>,
    /// When the call expires, Unix ms.
    pub expires_at: i64,
    /// The relay's clock when it answered, Unix ms.
    pub now_ms: i64,
}

/// Every error body: `{"error":{"code","message"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The stable code (for programs) and a message (for people) of an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// The stable code, for programs.
    pub code: ErrorCode,
    /// A sentence for people: what happened and what to do next.
    pub message: String,
}

/// Every error code the relay answers with, in one place. Codes never change meaning; new ones
/// may be added, so a reader parses a code it does not know as [`ErrorCode::Unknown`] and acts
/// on the response's HTTP status.
///
/// A failure inside the relay that is not one of these (its database unreachable, a statement
/// failing) answers `unavailable` (503): the client may retry. There is no catch-all 500 code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400: the body or a query parameter is malformed.
    BadRequest,
    /// 400: a TTL above the configured ceiling (or zero).
    TtlOutOfRange,
    /// 400: `wait_ms` above [`crate::limits::MAX_WAIT_MS`].
    WaitTooLong,
    /// 400: `max` is zero or above [`crate::limits::MAX_CLAIM_BATCH`].
    ClaimBatchOutOfRange,
    /// 401: missing, malformed, expired, revoked or foreign token.
    Unauthorized,
    /// 401: the sign-in code is unknown, used or expired.
    InvalidSigninCode,
    /// 403: the token is valid but of a kind this endpoint does not accept.
    WrongTokenKind,
    /// 404: no such resource for this token (also: it belongs to someone else).
    NotFound,
    /// 404: the pairing has no live session.
    NoLiveSession,
    /// 405: the path exists but not with this method.
    MethodNotAllowed,
    /// 408: the request body arrived too slowly.
    BodyTimeout,
    /// 409: a call with this call_id already exists.
    DuplicateCall,
    /// 409: a session with this session_id already exists.
    DuplicateSession,
    /// 409: the call is not in a state that allows this (e.g. replying to a pending call).
    WrongCallState,
    /// 410: the session has ended or expired.
    SessionEnded,
    /// 410: the claim's lease ran out; the call has expired.
    LeaseExpired,
    /// 413: a request body above the endpoint's ceiling.
    BodyTooLarge,
    /// 413: a decoded call envelope above [`crate::limits::MAX_CALL_ENVELOPE_BYTES`].
    EnvelopeTooLarge,
    /// 413: a decoded reply envelope above [`crate::limits::MAX_REPLY_ENVELOPE_BYTES`].
    ReplyTooLarge,
    /// 413: a decoded hello above [`crate::limits::MAX_HELLO_BYTES`].
    HelloTooLarge,
    /// 429: the session already holds the most pending calls allowed.
    TooManyPendingCalls,
    /// 429: the owner already has the most live sessions allowed.
    TooManySessions,
    /// 429: this token sent requests faster than allowed.
    RateLimited,
    /// 429: this owner's tokens together sent requests faster than the owner may.
    OwnerRateLimited,
    /// 429: the owner already holds the most live MCP tokens allowed.
    TooManyTokens,
    /// 429: the owner already holds the most unused sign-in links allowed.
    TooManySigninLinks,
    /// 429: the owner's calls and replies already hold the most bytes allowed.
    BytesQuotaExceeded,
    /// 503: the relay is shutting down or its database is unreachable.
    Unavailable,
    /// 503: the relay holds as many connections as it allows (in all, or from this address).
    TooManyConnections,
    /// 503: the relay is reading as many large bodies, or sending as many large replies, as it
    /// allows at once; retry after `Retry-After`.
    Busy,
    /// A code this build does not know (a newer relay sent it). Only ever read, never sent;
    /// judge the response by its HTTP status.
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// Every code the relay sends ([`ErrorCode::Unknown`] is not one).
    pub const ALL: [ErrorCode; 30] = [
        Self::BadRequest,
        Self::TtlOutOfRange,
        Self::WaitTooLong,
        Self::ClaimBatchOutOfRange,
        Self::Unauthorized,
        Self::InvalidSigninCode,
        Self::WrongTokenKind,
        Self::NotFound,
        Self::NoLiveSession,
        Self::MethodNotAllowed,
        Self::BodyTimeout,
        Self::DuplicateCall,
        Self::DuplicateSession,
        Self::WrongCallState,
        Self::SessionEnded,
        Self::LeaseExpired,
        Self::BodyTooLarge,
        Self::EnvelopeTooLarge,
        Self::ReplyTooLarge,
        Self::HelloTooLarge,
        Self::TooManyPendingCalls,
        Self::TooManySessions,
        Self::RateLimited,
        Self::OwnerRateLimited,
        Self::TooManyTokens,
        Self::TooManySigninLinks,
        Self::BytesQuotaExceeded,
        Self::Unavailable,
        Self::TooManyConnections,
        Self::Busy,
    ];

    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::TtlOutOfRange => "ttl_out_of_range",
            Self::WaitTooLong => "wait_too_long",
            Self::ClaimBatchOutOfRange => "claim_batch_out_of_range",
            Self::Unauthorized => "unauthorized",
            Self::InvalidSigninCode => "invalid_signin_code",
            Self::WrongTokenKind => "wrong_token_kind",
            Self::NotFound => "not_found",
            Self::NoLiveSession => "no_live_session",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::BodyTimeout => "body_timeout",
            Self::DuplicateCall => "duplicate_call",
            Self::DuplicateSession => "duplicate_session",
            Self::WrongCallState => "wrong_call_state",
            Self::SessionEnded => "session_ended",
            Self::LeaseExpired => "lease_expired",
            Self::BodyTooLarge => "body_too_large",
            Self::EnvelopeTooLarge => "envelope_too_large",
            Self::ReplyTooLarge => "reply_too_large",
            Self::HelloTooLarge => "hello_too_large",
            Self::TooManyPendingCalls => "too_many_pending_calls",
            Self::TooManySessions => "too_many_sessions",
            Self::RateLimited => "rate_limited",
            Self::OwnerRateLimited => "owner_rate_limited",
            Self::TooManyTokens => "too_many_tokens",
            Self::TooManySigninLinks => "too_many_signin_links",
            Self::BytesQuotaExceeded => "bytes_quota_exceeded",
            Self::Unavailable => "unavailable",
            Self::TooManyConnections => "too_many_connections",
            Self::Busy => "busy",
            Self::Unknown => "unknown",
        }
    }

    /// The HTTP status this code is always sent with (500 for [`ErrorCode::Unknown`], which is
    /// never sent: a reader uses the status it received instead).
    pub fn http_status(self) -> u16 {
        match self {
            Self::BadRequest
            | Self::TtlOutOfRange
            | Self::WaitTooLong
            | Self::ClaimBatchOutOfRange => 400,
            Self::Unauthorized | Self::InvalidSigninCode => 401,
            Self::WrongTokenKind => 403,
            Self::NotFound | Self::NoLiveSession => 404,
            Self::MethodNotAllowed => 405,
            Self::BodyTimeout => 408,
            Self::DuplicateCall | Self::DuplicateSession | Self::WrongCallState => 409,
            Self::SessionEnded | Self::LeaseExpired => 410,
            Self::BodyTooLarge
            | Self::EnvelopeTooLarge
            | Self::ReplyTooLarge
            | Self::HelloTooLarge => 413,
            Self::TooManyPendingCalls
            | Self::TooManySessions
            | Self::RateLimited
            | Self::OwnerRateLimited
            | Self::TooManyTokens
            | Self::TooManySigninLinks
            | Self::BytesQuotaExceeded => 429,
            Self::Unavailable | Self::TooManyConnections | Self::Busy => 503,
            Self::Unknown => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_spell_as_their_serde_names_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().into())
            );
            assert!(seen.insert(code.as_str()));
            assert!((400..600).contains(&code.http_status()));
        }
    }

    #[test]
    fn an_old_reader_parses_an_error_code_added_later() {
        let body: ErrorBody = serde_json::from_str(
            r#"{"error":{"code":"quota_exceeded","message":"The owner is over quota."}}"#,
        )
        .unwrap();
        assert_eq!(body.error.code, ErrorCode::Unknown);
        assert_eq!(body.error.message, "The owner is over quota.");
        assert!(!ErrorCode::ALL.contains(&ErrorCode::Unknown));
    }

    #[test]
    fn an_old_reader_parses_a_cancel_reason_added_later() {
        let status: CallStatusResponse = serde_json::from_str(
            r#"{"state":"cancelled","reason":"owner_revoked","expires_at":5,"now_ms":1}"#,
        )
        .unwrap();
        assert_eq!(status.reason, Some(CancelReason::Unknown));
        assert!(!CancelReason::ALL.contains(&CancelReason::Unknown));
    }

    #[test]
    fn call_states_round_trip() {
        for state in CallState::ALL {
            assert_eq!(CallState::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::Value::String(state.as_str().into())
            );
        }
    }
}
