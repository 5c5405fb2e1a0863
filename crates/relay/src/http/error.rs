//! API errors: a stable code, a message a person can act on, and the HTTP status the code
//! implies. Store errors map here in one place.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sealpost_protocol::api::{ErrorBody, ErrorCode, ErrorDetail};

use crate::store::StoreError;

/// An error answered as `{"error":{"code","message"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("No such {what} for this token."),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "The token is missing, expired or revoked. Sign in again (or pair the plugin again).",
        )
    }

    pub fn wrong_kind(needed: &str) -> Self {
        Self::new(
            ErrorCode::WrongTokenKind,
            format!("This endpoint needs {needed}."),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        (status, Json(body)).into_response()
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
            StoreError::TooManyPending => ApiError::new(
                ErrorCode::TooManyPendingCalls,
                "The session already holds the most pending calls allowed. Wait for some to finish.",
            ),
            StoreError::TooManySessions => ApiError::new(
                ErrorCode::TooManySessions,
                "You already have the most live sessions allowed. End one in the web app.",
            ),
            StoreError::TokenNotLive => ApiError::unauthorized(),
            _ => {
                // The whole cause chain: "database error" alone tells an operator nothing.
                tracing::error!(error = %crate::store::ErrorChain(&error), "store error");
                crate::metrics::store_error();
                ApiError::new(
                    ErrorCode::Unavailable,
                    "The relay's database is unavailable. Try again shortly.",
                )
            }
        }
    }
}
