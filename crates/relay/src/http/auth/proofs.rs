//! The proofs a handler names in its signature, one per kind of token it accepts, and how
//! each is made once its request is charged: the kind checked, and for a dead token nothing
//! told but 401.

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, PairId};

use super::{live_row, signed_bearer};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::scope::AppScope;
use crate::store::{Bearer, TokenRow};

// The proofs a handler names in its signature. Each is made only here (private fields, no
// public constructor), by its extractor: a handler that takes one cannot forget the token's
// kind, and one elsewhere cannot build one by hand.

/// An owner token whose row was read and is live: unrevoked, unexpired, its owner enabled,
/// agreeing with the claims. Extracting one refuses an MCP token (403 `wrong_token_kind`).
///
/// Only its extractor makes one; a literal does not compile outside this module:
///
/// ```compile_fail,E0451
/// fn forge(row: sealpost_relay::store::TokenRow) -> sealpost_relay::http::auth::OwnerAuth {
///     sealpost_relay::http::auth::OwnerAuth { row }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct OwnerAuth {
    row: TokenRow,
}

impl OwnerAuth {
    /// The owner the token belongs to.
    pub fn owner_id(&self) -> OwnerId {
        self.row.owner_id
    }

    /// The app the token belongs to, as its row records it: what it may start, see, end and
    /// revoke, and which sign-in links it may make (`scope`).
    pub fn app_scope(&self) -> &AppScope {
        &self.row.app
    }

    /// The token's row, as read for this request.
    pub fn row(&self) -> &TokenRow {
        &self.row
    }
}

/// A token of either kind whose row was read and is live, for the endpoints both kinds may
/// use; the handler scopes what it does by the token's kind and pairing.
///
/// Only its extractor makes one; a literal does not compile outside this module:
///
/// ```compile_fail,E0451
/// fn forge(row: sealpost_relay::store::TokenRow) -> sealpost_relay::http::auth::AnyAuth {
///     sealpost_relay::http::auth::AnyAuth { row }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct AnyAuth {
    row: TokenRow,
}

impl AnyAuth {
    /// The owner the token belongs to.
    pub fn owner_id(&self) -> OwnerId {
        self.row.owner_id
    }

    /// The app the token belongs to, as its row records it (see [`OwnerAuth::app_scope`]).
    pub fn app_scope(&self) -> &AppScope {
        &self.row.app
    }

    /// The token, as its claims name it, for a store operation that scopes by it.
    pub fn bearer(&self) -> Bearer {
        Bearer {
            token_id: self.row.id,
            owner_id: self.row.owner_id,
            kind: self.row.kind,
            pair_id: self.row.pair_id,
        }
    }

    /// The token's row, as read for this request.
    pub fn row(&self) -> &TokenRow {
        &self.row
    }
}

/// An owner token with its JWT verified (HS256 signature, issuer, audience, expiry) but its
/// row not read: the call loop's handlers hand its [`Bearer`] to the store, whose operation
/// checks the row in the same statement (so a revoked token changes nothing), and reads the
/// token's app from it there, so the session or call acted on must be that app's (its
/// `app_scope` is not known here, and no handler needs it). Extracting one refuses an MCP token (403 `wrong_token_kind`), but only once its row is found live: a dead
/// token learns nothing but 401.
///
/// Only its extractor (and the session channel's upgrade) makes one; a literal does not
/// compile outside this module:
///
/// ```compile_fail,E0451
/// fn forge(bearer: sealpost_relay::store::Bearer) -> sealpost_relay::http::auth::VerifiedOwner {
///     sealpost_relay::http::auth::VerifiedOwner { bearer }
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct VerifiedOwner {
    bearer: Bearer,
}

impl VerifiedOwner {
    /// The owner the token belongs to.
    pub fn owner_id(&self) -> OwnerId {
        self.bearer.owner_id
    }

    /// The token, for the store's operation to check.
    pub fn bearer(&self) -> Bearer {
        self.bearer
    }

    /// Reads the token's row: refuses a revoked, expired or signed-out token before the
    /// request's body is read, so such a token never costs the relay a body.
    pub(crate) async fn require_live(&self, state: &AppState) -> ApiResult<()> {
        live_row(state, &self.bearer).await.map(drop)
    }
}

/// An MCP token with its JWT verified but its row not read, as [`VerifiedOwner`] is for an
/// owner token; with its pairing. Extracting one refuses an owner token (403
/// `wrong_token_kind`) once its row is found live.
///
/// Only its extractor makes one; a literal does not compile outside this module:
///
/// ```compile_fail,E0451
/// use sealpost_relay::{http::auth::VerifiedMcp, store::Bearer};
/// fn forge(bearer: Bearer) -> VerifiedMcp {
///     VerifiedMcp { bearer, pair_id: bearer.pair_id.unwrap() }
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct VerifiedMcp {
    bearer: Bearer,
    pair_id: PairId,
}

impl VerifiedMcp {
    /// The owner the token belongs to.
    pub fn owner_id(&self) -> OwnerId {
        self.bearer.owner_id
    }

    /// The pairing the token acts for.
    pub fn pair_id(&self) -> PairId {
        self.pair_id
    }

    /// The token, for the store's operation to check.
    pub fn bearer(&self) -> Bearer {
        self.bearer
    }

    /// As [`VerifiedOwner::require_live`].
    pub(crate) async fn require_live(&self, state: &AppState) -> ApiResult<()> {
        live_row(state, &self.bearer).await.map(drop)
    }
}

/// A token of either kind with its JWT verified but its row not read, for the call loop's
/// endpoint both kinds may use (a call's read): the store scopes it by the token's kind,
/// pairing and app and checks its row.
///
/// Only its extractor makes one; a literal does not compile outside this module:
///
/// ```compile_fail,E0451
/// fn forge(bearer: sealpost_relay::store::Bearer) -> sealpost_relay::http::auth::VerifiedAny {
///     sealpost_relay::http::auth::VerifiedAny { bearer }
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct VerifiedAny {
    bearer: Bearer,
}

impl VerifiedAny {
    /// The owner the token belongs to.
    pub fn owner_id(&self) -> OwnerId {
        self.bearer.owner_id
    }

    /// The token, for the store's operation to check.
    pub fn bearer(&self) -> Bearer {
        self.bearer
    }
}

fn require_owner(kind: TokenKind) -> ApiResult<()> {
    match kind {
        TokenKind::Owner => Ok(()),
        TokenKind::Mcp => Err(ApiError::wrong_kind("a signed-in owner's token")),
    }
}

fn require_mcp(kind: TokenKind, pair_id: Option<PairId>) -> ApiResult<PairId> {
    match (kind, pair_id) {
        (TokenKind::Mcp, Some(pair_id)) => Ok(pair_id),
        _ => Err(ApiError::wrong_kind("an MCP token")),
    }
}

/// A token of the wrong kind is told so only if its row is live: a dead token learns nothing
/// but 401, as on every other endpoint. (A cold path: only a misconfigured client sends the
/// wrong kind.)
async fn unless_dead<T>(state: &AppState, bearer: &Bearer, kind_ok: ApiResult<T>) -> ApiResult<T> {
    if kind_ok.is_err() {
        live_row(state, bearer).await?;
    }
    kind_ok
}

pub(super) mod sealed {
    use super::{ApiResult, AppState, Bearer, TokenRow};

    /// How a proof is made, in two steps around the rate's decision: what is checked before
    /// the request is charged (the JWT, and the row for the proofs that read it first), and the
    /// kind, checked only once the rate let the request through (or the ledger exempted it),
    /// so a spent rate is answered 429 whatever the kind. A sealed trait: only this module's
    /// proofs implement it, and only this module can call it.
    pub trait Proof: Sized {
        /// Whether the row is read before the charge (and the handler), rather than inside the
        /// store's statement.
        const READS_ROW: bool;

        /// The proof, or the refusal of a token of the wrong kind; `row` is read and live
        /// when [`Proof::READS_ROW`].
        fn check_kind(
            state: &AppState,
            bearer: Bearer,
            row: Option<TokenRow>,
        ) -> impl Future<Output = ApiResult<Self>> + Send;
    }
}
pub(super) use sealed::Proof;

impl Proof for OwnerAuth {
    const READS_ROW: bool = true;

    async fn check_kind(_: &AppState, bearer: Bearer, row: Option<TokenRow>) -> ApiResult<Self> {
        require_owner(bearer.kind)?;
        Ok(Self {
            row: row.expect("read before the charge"),
        })
    }
}

impl Proof for AnyAuth {
    const READS_ROW: bool = true;

    async fn check_kind(_: &AppState, _: Bearer, row: Option<TokenRow>) -> ApiResult<Self> {
        Ok(Self {
            row: row.expect("read before the charge"),
        })
    }
}

impl Proof for VerifiedOwner {
    const READS_ROW: bool = false;

    async fn check_kind(state: &AppState, bearer: Bearer, _: Option<TokenRow>) -> ApiResult<Self> {
        unless_dead(state, &bearer, require_owner(bearer.kind)).await?;
        Ok(Self { bearer })
    }
}

impl Proof for VerifiedMcp {
    const READS_ROW: bool = false;

    async fn check_kind(state: &AppState, bearer: Bearer, _: Option<TokenRow>) -> ApiResult<Self> {
        let pair_id = unless_dead(state, &bearer, require_mcp(bearer.kind, bearer.pair_id)).await?;
        Ok(Self { bearer, pair_id })
    }
}

impl Proof for VerifiedAny {
    const READS_ROW: bool = false;

    async fn check_kind(_: &AppState, bearer: Bearer, _: Option<TokenRow>) -> ApiResult<Self> {
        Ok(Self { bearer })
    }
}

/// The owner token a session channel's upgrade request carries as the subprotocol
/// `sealpost.bearer.<token>` (a browser cannot set `Authorization` on a WebSocket): verified,
/// its row read and live, an owner's, and charged one request. The row is read before the
/// charge, so a dead token leaves no key in the rate table.
pub(crate) async fn channel_owner<'a>(
    state: &AppState,
    protocols: impl Iterator<Item = &'a axum::http::HeaderValue>,
) -> ApiResult<VerifiedOwner> {
    use sealpost_protocol::api::channel::CHANNEL_BEARER_PREFIX;
    let token = protocols
        .filter_map(|value| value.to_str().ok())
        .find_map(|protocol| protocol.trim().strip_prefix(CHANNEL_BEARER_PREFIX))
        .ok_or_else(ApiError::unauthorized)?;
    let bearer = signed_bearer(state, token)?;
    live_row(state, &bearer).await?;
    require_owner(bearer.kind)?;
    super::charge(state, &bearer)?;
    Ok(VerifiedOwner { bearer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_passes_only_its_own_requirement() {
        let pair = PairId::from_bytes([3; 16]);
        assert_eq!(require_mcp(TokenKind::Mcp, Some(pair)).ok(), Some(pair));
        assert!(require_mcp(TokenKind::Owner, None).is_err());
        assert!(require_mcp(TokenKind::Mcp, None).is_err());
        assert!(require_owner(TokenKind::Owner).is_ok());
        assert!(require_owner(TokenKind::Mcp).is_err());
    }
}
