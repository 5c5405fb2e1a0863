//! API errors: a stable code, a message a person can act on, and the HTTP status the code
//! implies. Store errors map here in one place.

use axum::Json;
use std::time::Duration;

use axum::http::header::{CONNECTION, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sealpost_protocol::api::{ErrorBody, ErrorCode, ErrorDetail};

use crate::ratelimit::Limited;
use crate::store::StoreError;

/// `Retry-After` of `too_many_sessions`: a slot frees only when a session ends.
pub(super) const TOO_MANY_SESSIONS_RETRY_S: u64 = 60;

/// Longest text from elsewhere (a parser's message) that an error message repeats: a parser
/// may quote what it was sent (an unknown field's name), and that can be of any length.
pub(crate) const MAX_ECHO_CHARS: usize = 200;

/// `text` cut to [`MAX_ECHO_CHARS`] characters, marked when cut.
pub(crate) fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_ECHO_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Marks a response that answers a database failure, so the request middleware counts it
/// (`sealpost_store_errors_total`) where the relay's metrics are at hand.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoreFailure;

/// An error answered as `{"error":{"code","message"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    /// Sent as `Retry-After` (whole seconds, at least 1).
    pub(crate) retry_after: Option<Duration>,
    /// Sent with `Connection: close`: the refused client's connection is not left open for
    /// its next request (see [`ApiError::closing`]; a channel's answer closes nothing).
    pub(crate) close: bool,
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after: None,
            close: false,
        }
    }

    /// The same error, closing its connection after it is sent: a request refused because its
    /// account holds its share of the relay frees its connection too, so a refused client
    /// cannot keep the place for its next try (or for nothing).
    pub(crate) fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// 429 `rate_limited`, with when to try again.
    pub(crate) fn rate_limited(limited: Limited, message: &str) -> Self {
        Self::limited(ErrorCode::RateLimited, limited, message)
    }

    /// A 429 of `code`, with when to try again.
    pub(crate) fn limited(code: ErrorCode, limited: Limited, message: &str) -> Self {
        Self {
            retry_after: Some(limited.retry_after),
            ..Self::new(code, message)
        }
    }

    /// A quota (a count of live things) is full: 429 of `code`, retry in `seconds`.
    pub(crate) fn quota(code: ErrorCode, message: String, seconds: u64) -> Self {
        Self::new(code, message).retry_in(seconds)
    }

    /// 503 `busy`: a cap on large transfers in flight; retry in a second.
    pub(crate) fn busy(message: &str) -> Self {
        Self {
            retry_after: Some(Duration::from_secs(1)),
            ..Self::new(ErrorCode::Busy, message)
        }
    }

    fn retry_in(mut self, seconds: u64) -> Self {
        self.retry_after = Some(Duration::from_secs(seconds));
        self
    }

    pub(crate) fn not_found(what: &str) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("No such {what} for this token."),
        )
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "The token is missing, expired or revoked. Sign in again (or pair the plugin again).",
        )
    }

    /// 403 `origin_not_allowed`: a page of `origin` (an `Origin` header, repeated bounded) is
    /// neither the relay's own app nor of an origin its operator lists.
    pub(crate) fn origin_not_allowed(origin: &str) -> Self {
        Self::new(
            ErrorCode::OriginNotAllowed,
            format!(
                "Pages of the origin {} may not use this relay: it serves its own web app and \
                 the origins its operator lists with --app-origin (SEALPOST_APP_ORIGINS). Ask \
                 the operator to list this origin, or use the relay's own app.",
                bounded(origin)
            ),
        )
    }

    pub(crate) fn wrong_kind(needed: &str) -> Self {
        Self::new(
            ErrorCode::WrongTokenKind,
            format!("This endpoint needs {needed}."),
        )
    }
}

impl ApiError {
    /// `Retry-After` in whole seconds (rounded up, at least 1), if the error carries one.
    pub(crate) fn retry_after_s(&self) -> Option<u64> {
        self.retry_after
            .map(|wait| (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1))
    }

    /// The error's body, as every `/v1` error has it.
    pub(crate) fn into_body(self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.retry_after_s();
        let unavailable = self.code == ErrorCode::Unavailable;
        let close = self.close;
        let code = self.code;
        let mut response = (status, Json(self.into_body())).into_response();
        // For what runs after: the request log, and the check of documented errors in tests.
        response.extensions_mut().insert(code);
        if close {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if unavailable {
            response.extensions_mut().insert(StoreFailure);
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => ApiError::not_found("resource"),
            StoreError::Duplicate => {
                ApiError::new(ErrorCode::DuplicateCall, "That id is already in use.")
            }
            StoreError::SessionEnded => ApiError::new(
                ErrorCode::SessionEnded,
                "The browser session has ended. Start a new session in the web app.",
            ),
            StoreError::LeaseExpired => ApiError::new(
                ErrorCode::LeaseExpired,
                "The claim's lease ran out, so the call has expired and cannot be answered.",
            ),
            StoreError::WrongState(state) => ApiError::new(
                ErrorCode::WrongCallState,
                format!("The call is {} and cannot change that way.", state.as_str()),
            ),
            // Pending calls drain as the tab claims them: soon.
            StoreError::TooManyPending => ApiError::new(
                ErrorCode::TooManyPendingCalls,
                "The session already holds the most pending calls allowed. Wait for some to finish.",
            )
            .retry_in(1),
            // A session slot frees only when a person ends one or it expires.
            StoreError::TooManySessions => ApiError::new(
                ErrorCode::TooManySessions,
                "You already have the most live sessions allowed. End one in the web app.",
            )
            .retry_in(TOO_MANY_SESSIONS_RETRY_S),
            StoreError::TokenNotLive => ApiError::unauthorized(),
            _ => {
                // The whole cause chain: "database error" alone tells an operator nothing.
                tracing::error!(error = %crate::store::ErrorChain(&error), "store error");
                ApiError::new(
                    ErrorCode::Unavailable,
                    "The relay's database is unavailable. Try again shortly.",
                )
            }
        }
    }
}
