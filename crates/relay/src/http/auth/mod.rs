//! Bearer tokens: HS256 JWTs whose `sid` names a token row that is checked on every request,
//! so sign-out, revocation and disabling an owner take effect on the next request.
//!
//! A handler names the kind of token it accepts in its signature, as the proof it takes: the
//! call loop's handlers take [`VerifiedOwner`], [`VerifiedMcp`] or [`VerifiedAny`], whose rows
//! the store checks inside the operation itself (one database round trip fewer per request);
//! every other handler takes [`OwnerAuth`] or [`AnyAuth`], which read the row first. Each
//! extractor charges the request to the token's and owner's rates and answers a refusal
//! itself, then refuses a token of the wrong kind (403 `wrong_token_kind`); the handlers that
//! may complete admitted work (reply, cancel, read) take `Charged<…>` of their proof instead,
//! which keeps the refusal for the handler to answer unless the ledger of admitted work exempts
//! the request (`admitted`). The proofs have private fields and are made only here, so a
//! handler cannot forget the kind nor build one by hand (the `compile_fail` examples on each).
//!
//! Owner tokens and MCP tokens differ in audience, and the row's kind and pairing must agree
//! with the claims: a token cannot be turned into the other kind by editing its claims.
//!
//! `keys` signs and verifies the JWTs, `proofs` holds the five proofs and how each is made,
//! `charged` the charge to the rates and the exemption of admitted work; this file reads the
//! header and the row.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use super::error::{ApiError, ApiResult};
use super::state::AppState;
use crate::clock::now_ms;
use crate::store::{Bearer, TokenRow};

mod charged;
mod keys;
mod proofs;

pub(crate) use charged::{Charged, charge, exempt};
pub use keys::{Claims, ISSUER, Keys};
pub(crate) use proofs::channel_owner;
pub use proofs::{AnyAuth, OwnerAuth, VerifiedAny, VerifiedMcp, VerifiedOwner};

/// The bearer token's JWT, verified: HS256 signature, issuer, audience, expiry.
fn verify(parts: &Parts, state: &AppState) -> ApiResult<Bearer> {
    let token = bearer(&parts.headers).ok_or_else(ApiError::unauthorized)?;
    signed_bearer(state, token)
}

/// The token a JWT the relay signed describes (signature, issuer, audience, expiry checked);
/// 401 otherwise. Its row is not read.
fn signed_bearer(state: &AppState, token: &str) -> ApiResult<Bearer> {
    let claims = state
        .keys
        .verify(token)
        .ok_or_else(ApiError::unauthorized)?;
    keys::bearer_of(&claims).ok_or_else(ApiError::unauthorized)
}

/// The token of an `Authorization: Bearer …` header. The scheme is matched without regard to
/// case (RFC 9110 §11.1); surrounding spaces are dropped.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    bearer_in(headers.get(axum::http::header::AUTHORIZATION)?)
}

/// The token of one `Authorization` value (see [`bearer`]).
fn bearer_in(value: &axum::http::HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether two secrets are equal, in time that does not depend on where they differ (their
/// digests are compared, so only equality of digests could leak, which tells nothing).
pub(crate) fn same_secret(given: &str, expected: &str) -> bool {
    use sha2::{Digest as _, Sha256};
    Sha256::digest(given.as_bytes()) == Sha256::digest(expected.as_bytes())
}

/// After a 401, forgets the rate key of the token that got it, if the relay signed it: the call
/// loop charges a signed token before its statement finds the row dead (see `ratelimit`), and
/// a dead token must leave nothing in the table. Only a 401 pays for the second verification.
pub(crate) async fn forget_dead_tokens(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .cloned();
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED
        && let Some(presented) = presented
    {
        let signed = bearer_in(&presented).and_then(|token| signed_bearer(&state, token).ok());
        if let Some(bearer) = signed {
            state.rate.forget_token(bearer.token_id);
            if let Some(lapsed) = lapsed_confirmation(&state, &bearer).await {
                let mut lapsed = lapsed.into_response();
                lapsed.headers_mut().insert(
                    axum::http::header::CACHE_CONTROL,
                    axum::http::HeaderValue::from_static("no-store"),
                );
                return lapsed;
            }
        }
    }
    response
}

/// With team sign-in re-checks, the 401 of an owner whose confirmation at the provider ran out
/// says so (the code stays `unauthorized`): the person signs in again through the provider.
async fn lapsed_confirmation(state: &AppState, bearer: &Bearer) -> Option<ApiError> {
    state.oidc.as_ref()?.config().recheck?;
    let owner = state.store.owner_by_id(bearer.owner_id).await.ok()??;
    let until = owner.confirmed_until?;
    (until <= now_ms()).then(|| {
        ApiError::new(
            sealpost_protocol::api::ErrorCode::Unauthorized,
            "Your team's identity provider has not confirmed this account recently enough, or \
             no longer does. Sign in again with your team's account.",
        )
    })
}

/// The bearer's row, if it is live and agrees with the claims; else 401.
async fn live_row(state: &AppState, bearer: &Bearer) -> ApiResult<TokenRow> {
    let row = state
        .store
        .active_token(bearer.token_id, now_ms())
        .await?
        .ok_or_else(ApiError::unauthorized)?;
    if !agrees(&row, bearer) {
        return Err(ApiError::unauthorized());
    }
    Ok(row)
}

/// Whether a token row says what the token's claims say: its owner, its kind and its pairing.
fn agrees(row: &TokenRow, bearer: &Bearer) -> bool {
    row.owner_id == bearer.owner_id && row.kind == bearer.kind && row.pair_id == bearer.pair_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealpost_protocol::api::TokenKind;
    use sealpost_protocol::ids::{OwnerId, PairId, TokenId};
    use sealpost_time::UnixMillis;

    pub(super) fn row(kind: TokenKind, pair_id: Option<PairId>) -> TokenRow {
        TokenRow {
            id: TokenId::from_bytes([1; 16]),
            owner_id: OwnerId::from_bytes([2; 16]),
            kind,
            pair_id,
            label: "laptop".into(),
            created_at: UnixMillis::from_ms(1_700_000_000_123),
            expires_at: UnixMillis::from_ms(4_000_000_000_456),
            app: crate::scope::AppScope::RelayApp,
            lifetime_ends_at: None,
            parent_id: None,
        }
    }

    fn bearer_for(row: &TokenRow) -> Bearer {
        Bearer {
            token_id: row.id,
            owner_id: row.owner_id,
            kind: row.kind,
            pair_id: row.pair_id,
        }
    }

    #[test]
    fn only_the_bearer_scheme_with_a_token_is_taken() {
        let header = |value: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(axum::http::header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert_eq!(bearer(&header("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&header("bEaReR  abc ")), Some("abc"));
        assert_eq!(bearer(&header("Basic abc")), None);
        assert_eq!(bearer(&header("Bearer ")), None);
        assert_eq!(bearer(&header("Bearer")), None);
    }

    #[test]
    fn a_row_agrees_only_when_owner_kind_and_pairing_all_match() {
        let mcp = row(TokenKind::Mcp, Some(PairId::from_bytes([3; 16])));
        let claims = bearer_for(&mcp);
        assert!(agrees(&mcp, &claims));
        let other_owner = Bearer {
            owner_id: OwnerId::from_bytes([9; 16]),
            ..claims
        };
        let other_kind = Bearer {
            kind: TokenKind::Owner,
            ..claims
        };
        let other_pairing = Bearer {
            pair_id: Some(PairId::from_bytes([9; 16])),
            ..claims
        };
        for (what, bearer) in [
            ("owner", other_owner),
            ("kind", other_kind),
            ("pairing", other_pairing),
        ] {
            assert!(
                !agrees(&mcp, &bearer),
                "a different {what} alone is refused"
            );
        }
    }
}
