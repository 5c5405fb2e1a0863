//! Error bodies and the stable error codes of the relay's API: every `/v1` error answers
//! `{"error":{"code","message"}}`.

use serde::{Deserialize, Serialize};
use strum::{IntoStaticStr, VariantArray};

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
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, IntoStaticStr, VariantArray,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the body or a query parameter is malformed.
    BadRequest,
    /// 400: a TTL above the configured ceiling (or zero).
    TtlOutOfRange,
    /// 400: `wait_ms` above [`crate::limits::MAX_WAIT_MS`].
    WaitTooLong,
    /// 400: `max` is zero or above [`crate::limits::MAX_CLAIM_BATCH`].
    ClaimBatchOutOfRange,
    /// 400: a sign-in link asked for an app origin the relay does not list (`--app-origin`).
    AppOriginNotListed,
    /// 401: missing, malformed, expired, revoked or foreign token.
    Unauthorized,
    /// 401: the sign-in code is unknown, used or expired.
    InvalidSigninCode,
    /// 403: the token is valid but of a kind this endpoint does not accept.
    WrongTokenKind,
    /// 403: the request comes from a page of an origin the relay's operator has not listed
    /// (only sent by a relay that lists app origins).
    OriginNotAllowed,
    /// 403: a host app's token asked for what only the relay's own app may do: a sign-in link
    /// for the relay's own app or another origin.
    OutsideAppScope,
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
    /// 413: a decoded catalog update above [`crate::limits::MAX_HELLO_BYTES`] (the same bound).
    CatalogUpdateTooLarge,
    /// 409: the session already holds a catalog update with this number or a higher one.
    StaleCatalogUpdate,
    /// 429: the session already holds the most pending calls allowed.
    TooManyPendingCalls,
    /// 429: the owner already has the most live sessions allowed, or the host app asking
    /// already holds its share of them (half; host apps together three quarters); the
    /// message names the apps holding them.
    TooManySessions,
    /// 429: this token sent requests faster than allowed.
    RateLimited,
    /// 429: this owner's tokens together sent requests faster than the owner may.
    OwnerRateLimited,
    /// 429: the owner already holds the most live MCP tokens allowed, or the host app asking
    /// already holds its share of them (half; host apps together three quarters); the
    /// message names the apps holding them.
    TooManyTokens,
    /// 429: the owner already holds the most unused sign-in links allowed, or the host app
    /// they are for already holds its share of them (half; host apps together three
    /// quarters); the message names the apps.
    TooManySigninLinks,
    /// 429: the owner's calls and replies already hold the most bytes allowed.
    BytesQuotaExceeded,
    /// 429: the owner already has the most session channels open allowed; use HTTP meanwhile.
    TooManyChannels,
    /// 429: this token, or all of this owner's tokens together, already have the most claims and
    /// reads waiting (long-polls) allowed; retry when one is answered.
    TooManyLongPolls,
    /// 429: this owner already has the most large request bodies being read allowed.
    TooManyLargeBodies,
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
    pub const ALL: &'static [Self] = crate::wire::known(<Self as strum::VariantArray>::VARIANTS);

    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The HTTP status this code is always sent with (500 for [`ErrorCode::Unknown`], which is
    /// never sent: a reader uses the status it received instead).
    pub fn http_status(self) -> u16 {
        match self {
            Self::BadRequest
            | Self::TtlOutOfRange
            | Self::WaitTooLong
            | Self::ClaimBatchOutOfRange
            | Self::AppOriginNotListed => 400,
            Self::Unauthorized | Self::InvalidSigninCode => 401,
            Self::WrongTokenKind | Self::OriginNotAllowed | Self::OutsideAppScope => 403,
            Self::NotFound | Self::NoLiveSession => 404,
            Self::MethodNotAllowed => 405,
            Self::BodyTimeout => 408,
            Self::DuplicateCall
            | Self::DuplicateSession
            | Self::WrongCallState
            | Self::StaleCatalogUpdate => 409,
            Self::SessionEnded | Self::LeaseExpired => 410,
            Self::BodyTooLarge
            | Self::EnvelopeTooLarge
            | Self::ReplyTooLarge
            | Self::HelloTooLarge
            | Self::CatalogUpdateTooLarge => 413,
            Self::TooManyPendingCalls
            | Self::TooManySessions
            | Self::RateLimited
            | Self::OwnerRateLimited
            | Self::TooManyTokens
            | Self::TooManySigninLinks
            | Self::BytesQuotaExceeded
            | Self::TooManyChannels
            | Self::TooManyLongPolls
            | Self::TooManyLargeBodies => 429,
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
        for &code in ErrorCode::ALL {
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
}
