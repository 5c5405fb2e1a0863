//! Charging a request to its token's and owner's rates before its proof is made, and the
//! exemption the ledger of admitted work may grant a refused request (`admitted`).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sealpost_protocol::api::ErrorCode;
use sealpost_protocol::ids::CallId;

use super::proofs::{AnyAuth, OwnerAuth, Proof, VerifiedAny, VerifiedMcp, VerifiedOwner};
use super::{live_row, verify};
use crate::admitted::Work;
use crate::clock::now_ms;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::store::{Bearer, TokenRow};

/// A request's token, authenticated up to its kind and charged to its rates, with the
/// charge's refusal kept instead of answered. The handler answers it ([`Charged::admit`], as
/// the proofs' own extractors do) unless the request completes work the relay already
/// admitted ([`Charged::admit_work`], see `admitted`), and decides so before it reads any
/// body; then the token's kind is checked, as the proof's own extractor checks it. The fields
/// are private: only the extractor makes one, and only the ledger of admitted work turns its
/// refusal into an exemption.
#[derive(Debug)]
pub(crate) struct Charged<T> {
    bearer: Bearer,
    row: Option<TokenRow>,
    refused: Option<ApiError>,
    proof: std::marker::PhantomData<fn() -> T>,
}

/// A request a rate refused, let through because it completes admitted work. It keeps the
/// refusal: a read that then finds nothing answers it, not 404 (the call was not this token's
/// to read, and its rate is spent).
#[derive(Debug)]
pub(crate) struct Exempt {
    refused: ApiError,
}

impl Exempt {
    /// The rate's refusal, as the request would have had it without the exemption.
    pub fn refusal(self) -> ApiError {
        self.refused
    }
}

impl<T: Proof> Charged<T> {
    /// The token, or the rate's refusal, or the refusal of a token of the wrong kind.
    pub async fn admit(self, state: &AppState) -> ApiResult<T> {
        if let Some(refused) = self.refused {
            return Err(refused);
        }
        T::check_kind(state, self.bearer, self.row).await
    }

    /// The token, or the rate's refusal unless the request does `work` on `call` (a path id
    /// that did not parse is `None`) that the ledger exempts: then the token with its
    /// [`Exempt`]. Requests the rates let through carry none. A token of the wrong kind is
    /// refused once the rate's refusal is settled.
    pub async fn admit_work(
        self,
        state: &AppState,
        work: Work,
        call: Option<CallId>,
    ) -> ApiResult<(T, Option<Exempt>)> {
        let exempt = match self.refused {
            None => None,
            Some(refused) => match call {
                Some(call) if exempt(state, &self.bearer, work, call) => Some(Exempt { refused }),
                _ => return Err(refused),
            },
        };
        let proof = T::check_kind(state, self.bearer, self.row).await?;
        Ok((proof, exempt))
    }
}

/// Whether `bearer`'s `work` on `call`, refused by a rate, completes work the relay admitted;
/// if so it takes one of its exemption's tries and is counted
/// (`sealpost_requests_exempt_total`).
pub(crate) fn exempt(state: &AppState, bearer: &Bearer, work: Work, call: CallId) -> bool {
    let exempt = state.admitted.take(bearer, work, call, now_ms());
    if exempt {
        state.metrics.request_exempt(work);
    }
    exempt
}

impl<T: Proof> FromRequestParts<AppState> for Charged<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let bearer = verify(parts, state)?;
        // A proof that reads the row reads it before the charge, so a revoked or unknown token
        // never enters the rate table. The call loop's store operation checks the row itself,
        // so there the charge comes first: only a token the relay signed gets here, and the
        // sweeper drops keys that have refilled.
        let row = if T::READS_ROW {
            Some(live_row(state, &bearer).await?)
        } else {
            None
        };
        let refused = charge(state, &bearer).err();
        Ok(Charged {
            bearer,
            row,
            refused,
            proof: std::marker::PhantomData,
        })
    }
}

/// Each proof's own extractor: charged, with the rate's refusal answered, then its kind checked.
macro_rules! extractor {
    ($($proof:ty),+) => {$(
        impl FromRequestParts<AppState> for $proof {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
                Charged::<$proof>::from_request_parts(parts, state)
                    .await?
                    .admit(state)
                    .await
            }
        }
    )+};
}
extractor!(OwnerAuth, AnyAuth, VerifiedOwner, VerifiedMcp, VerifiedAny);

/// Counts one request against the token's and its owner's rates.
pub(crate) fn charge(state: &AppState, bearer: &Bearer) -> ApiResult<()> {
    state.rate.check_token(bearer.token_id).map_err(|limited| {
        ApiError::rate_limited(limited, "Too many requests with this token; slow down.")
    })?;
    state.rate.check_owner(bearer.owner_id).map_err(|limited| {
        ApiError::limited(
            ErrorCode::OwnerRateLimited,
            limited,
            "Too many requests from this account's tokens together; slow down.",
        )
    })
}
