//! Why a team sign-in did not happen: one stable code per reason, shown on the page the person
//! lands on and logged (never with a token, a code or a state).

use axum::http::StatusCode;

/// Why a team sign-in was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `--oidc-issuer`.
    #[error("this relay is not set up for team sign-in")]
    NotConfigured,
    /// The start or callback request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The start named an app origin the relay does not list.
    #[error("the app at {0} is not one this relay lists")]
    AppOriginNotListed(String),
    /// The per-address sign-in rate is spent.
    #[error("too many sign-in attempts from this address")]
    RateLimited,
    /// The provider did not answer, or answered nonsense.
    #[error("the identity provider did not answer: {0}")]
    ProviderUnavailable(String),
    /// The provider answered the flow with an error (the person cancelled, was refused).
    #[error("the identity provider refused: {0}")]
    ProviderRefused(String),
    /// The callback's `state` names no live flow: used, expired or made up.
    #[error("this sign-in is unknown, already used or expired")]
    StateUnknown,
    /// The callback came to another browser than the one that started the flow.
    #[error("this sign-in was started in another browser")]
    BrowserMismatch,
    /// The ID token's `aud` lacks this client.
    #[error("the ID token is for another client: {0}")]
    IdTokenWrongAudience(String),
    /// The ID token's `iss` is not the configured issuer.
    #[error("the ID token is from another issuer: {0}")]
    IdTokenWrongIssuer(String),
    /// The ID token is past `exp`, or its `iat` is implausible.
    #[error("the ID token has expired or was issued at an implausible time: {0}")]
    IdTokenExpired(String),
    /// The ID token says `alg: none`.
    #[error("the ID token is not signed")]
    IdTokenUnsigned,
    /// The ID token's signature does not verify, or its algorithm is not accepted.
    #[error("the ID token's signature does not verify: {0}")]
    IdTokenBadSignature(String),
    /// No published key matches the ID token's `kid`, even after refetching the set.
    #[error("the ID token is signed by a key the provider does not publish: {0}")]
    IdTokenUnknownKey(String),
    /// The ID token's nonce is another flow's.
    #[error("the ID token belongs to another sign-in (its nonce differs)")]
    IdTokenReplayed,
    /// The ID token is otherwise unacceptable (missing, malformed).
    #[error("the ID token is not acceptable: {0}")]
    IdTokenInvalid(String),
    /// The person is not in an allowed domain, as the provider vouches.
    #[error("{0}")]
    DomainNotAllowed(String),
    /// The ID token lacks a required claim.
    #[error("{0}")]
    ClaimRequired(String),
    /// The person's owner is disabled on this relay.
    #[error("this account is disabled on this relay")]
    OwnerDisabled,
    /// The relay itself failed (its database).
    #[error("{0}")]
    Internal(String),
}

impl Refusal {
    /// The stable code: on the page, in the log, and what tests assert.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotConfigured => "oidc_not_configured",
            Self::BadRequest(_) => "bad_request",
            Self::AppOriginNotListed(_) => "app_origin_not_listed",
            Self::RateLimited => "rate_limited",
            Self::ProviderUnavailable(_) => "provider_unavailable",
            Self::ProviderRefused(_) => "provider_refused",
            Self::StateUnknown => "state_unknown",
            Self::BrowserMismatch => "browser_mismatch",
            Self::IdTokenWrongAudience(_) => "id_token_wrong_audience",
            Self::IdTokenWrongIssuer(_) => "id_token_wrong_issuer",
            Self::IdTokenExpired(_) => "id_token_expired",
            Self::IdTokenUnsigned => "id_token_unsigned",
            Self::IdTokenBadSignature(_) => "id_token_bad_signature",
            Self::IdTokenUnknownKey(_) => "id_token_unknown_key",
            Self::IdTokenReplayed => "id_token_replayed",
            Self::IdTokenInvalid(_) => "id_token_invalid",
            Self::DomainNotAllowed(_) => "domain_not_allowed",
            Self::ClaimRequired(_) => "claim_required",
            Self::OwnerDisabled => "owner_disabled",
            Self::Internal(_) => "internal",
        }
    }

    /// The page's HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotConfigured => StatusCode::NOT_FOUND,
            Self::BadRequest(_) | Self::AppOriginNotListed(_) | Self::StateUnknown => {
                StatusCode::BAD_REQUEST
            }
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::ProviderUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::IdTokenWrongAudience(_)
            | Self::IdTokenWrongIssuer(_)
            | Self::IdTokenExpired(_)
            | Self::IdTokenUnsigned
            | Self::IdTokenBadSignature(_)
            | Self::IdTokenUnknownKey(_)
            | Self::IdTokenReplayed
            | Self::IdTokenInvalid(_) => StatusCode::BAD_GATEWAY,
            Self::ProviderRefused(_)
            | Self::BrowserMismatch
            | Self::DomainNotAllowed(_)
            | Self::ClaimRequired(_)
            | Self::OwnerDisabled => StatusCode::FORBIDDEN,
        }
    }

    /// The page's heading: what happened, in the person's terms.
    pub fn title(&self) -> &'static str {
        match self {
            Self::NotConfigured => "Team sign-in is not set up",
            Self::BadRequest(_) | Self::AppOriginNotListed(_) => "This sign-in link is not valid",
            Self::RateLimited => "Too many sign-in attempts",
            Self::ProviderUnavailable(_) => "Your identity provider is not answering",
            Self::ProviderRefused(_) => "Your identity provider refused the sign-in",
            Self::StateUnknown | Self::BrowserMismatch => "This sign-in cannot be finished here",
            Self::DomainNotAllowed(_) | Self::ClaimRequired(_) => {
                "This account may not use this relay"
            }
            Self::OwnerDisabled => "This account is disabled",
            Self::Internal(_) => "Something went wrong on the relay",
            _ => "The identity provider's answer was not acceptable",
        }
    }

    /// What the person can do next.
    pub fn advice(&self) -> &'static str {
        match self {
            Self::ProviderUnavailable(_) => "Try again in a few minutes.",
            Self::StateUnknown | Self::BrowserMismatch => {
                "Start the sign-in again from the app, in this browser."
            }
            Self::DomainNotAllowed(_) | Self::ClaimRequired(_) | Self::OwnerDisabled => {
                "Ask whoever runs this relay for access, or sign in with another account."
            }
            Self::RateLimited => "Wait a minute, then start again.",
            _ => "Start the sign-in again; if it keeps failing, tell whoever runs this relay.",
        }
    }
}
