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

use axum::extract::{FromRequestParts, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use sealpost_protocol::api::{ErrorCode, TokenKind};
use sealpost_protocol::ids::Id16;
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ApiResult};
use super::state::AppState;
use crate::admitted::Work;
use crate::clock::now_ms;
use crate::store::{Bearer, TokenRow};

/// Issuer of every token.
pub const ISSUER: &str = "sealpost-relay";
const OWNER_AUDIENCE: &str = "sealpost-owner";
const MCP_AUDIENCE: &str = "sealpost-mcp";

/// The claims the relay signs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer: always [`ISSUER`].
    pub iss: String,
    /// Audience: the token's kind (`sealpost-owner` or `sealpost-mcp`).
    pub aud: String,
    /// Owner id.
    pub sub: String,
    /// Token row id.
    pub sid: String,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// Issue time, Unix seconds.
    pub iat: u64,
    /// The pairing an MCP token acts for; absent from owner tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_id: Option<String>,
}

/// Signing and verification keys (HS256 only).
#[derive(Clone)]
pub struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Keys {
    // Never print key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(..)")
    }
}

fn audience(kind: TokenKind) -> &'static str {
    match kind {
        TokenKind::Owner => OWNER_AUDIENCE,
        TokenKind::Mcp => MCP_AUDIENCE,
    }
}

impl Keys {
    /// `secret` must not be empty (the relay uses 32 random bytes or a configured key).
    pub fn new(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[OWNER_AUDIENCE, MCP_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Expiry is exact: the token row carries the same expiry and is checked too.
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret).expect("a non-empty secret"),
            decoding: DecodingKey::from_secret(secret).expect("a non-empty secret"),
            validation,
        }
    }

    /// Signs a token for `row`.
    pub fn sign(&self, row: &TokenRow) -> String {
        let claims = Claims {
            iss: ISSUER.into(),
            aud: audience(row.kind).into(),
            sub: row.owner_id.to_string(),
            sid: row.id.to_string(),
            exp: row.expires_at.as_ms() / 1000,
            iat: row.created_at.as_ms() / 1000,
            pair_id: row.pair_id.map(|p| p.to_string()),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing cannot fail")
    }

    fn verify(&self, token: &str) -> Option<Claims> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .ok()
            .map(|data| data.claims)
    }
}

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
    pub fn owner_id(&self) -> Id16 {
        self.row.owner_id
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
    pub fn owner_id(&self) -> Id16 {
        self.row.owner_id
    }

    /// The token's row, as read for this request.
    pub fn row(&self) -> &TokenRow {
        &self.row
    }
}

/// An owner token with its JWT verified (HS256 signature, issuer, audience, expiry) but its
/// row not read: the call loop's handlers hand its [`Bearer`] to the store, whose operation
/// checks the row in the same statement (so a revoked token changes nothing). Extracting one
/// refuses an MCP token (403 `wrong_token_kind`), but only once its row is found live: a dead
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
    pub fn owner_id(&self) -> Id16 {
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
    pair_id: Id16,
}

impl VerifiedMcp {
    /// The owner the token belongs to.
    pub fn owner_id(&self) -> Id16 {
        self.bearer.owner_id
    }

    /// The pairing the token acts for.
    pub fn pair_id(&self) -> Id16 {
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
/// endpoint both kinds may use (a call's read): the store scopes it by the token's kind and
/// pairing and checks its row.
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
    pub fn owner_id(&self) -> Id16 {
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

fn require_mcp(kind: TokenKind, pair_id: Option<Id16>) -> ApiResult<Id16> {
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

mod sealed {
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
use sealed::Proof;

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
        call: Option<Id16>,
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
pub(crate) fn exempt(state: &AppState, bearer: &Bearer, work: Work, call: Id16) -> bool {
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
    bearer_of(&claims).ok_or_else(ApiError::unauthorized)
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

/// The token the claims describe; `None` if they are malformed or mix the two kinds.
fn bearer_of(claims: &Claims) -> Option<Bearer> {
    let kind = match claims.aud.as_str() {
        OWNER_AUDIENCE => TokenKind::Owner,
        MCP_AUDIENCE => TokenKind::Mcp,
        _ => return None,
    };
    let pair_id = match (kind, claims.pair_id.as_deref()) {
        (TokenKind::Owner, None) => None,
        (TokenKind::Mcp, Some(pair_id)) => Some(pair_id.parse().ok()?),
        _ => return None,
    };
    Some(Bearer {
        token_id: claims.sid.parse().ok()?,
        owner_id: claims.sub.parse().ok()?,
        kind,
        pair_id,
    })
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
        }
    }
    response
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
    charge(state, &bearer)?;
    Ok(VerifiedOwner { bearer })
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
    use sealpost_time::UnixMillis;

    fn row(kind: TokenKind, pair_id: Option<Id16>) -> TokenRow {
        TokenRow {
            id: Id16([1; 16]),
            owner_id: Id16([2; 16]),
            kind,
            pair_id,
            label: "laptop".into(),
            created_at: UnixMillis::from_ms(1_700_000_000_123),
            expires_at: UnixMillis::from_ms(4_000_000_000_456),
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
    fn a_signed_token_carries_its_rows_times_in_seconds_and_verifies_to_its_bearer() {
        let keys = Keys::new(b"a test secret of some length");
        let mcp = row(TokenKind::Mcp, Some(Id16([3; 16])));
        let claims = keys.verify(&keys.sign(&mcp)).expect("verifies");
        assert_eq!((claims.exp, claims.iat), (4_000_000_000, 1_700_000_000));
        let bearer = bearer_of(&claims).expect("well formed");
        assert_eq!(
            (
                bearer.token_id,
                bearer.owner_id,
                bearer.kind,
                bearer.pair_id
            ),
            (mcp.id, mcp.owner_id, TokenKind::Mcp, mcp.pair_id)
        );
    }

    #[test]
    fn a_token_past_its_expiry_fails_on_its_own_whatever_its_row_says() {
        let keys = Keys::new(b"a test secret of some length");
        let mut past = row(TokenKind::Owner, None);
        past.expires_at = UnixMillis::from_ms(1_000_000_000_000);
        assert!(keys.verify(&keys.sign(&past)).is_none());
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
        let mcp = row(TokenKind::Mcp, Some(Id16([3; 16])));
        let claims = bearer_for(&mcp);
        assert!(agrees(&mcp, &claims));
        let other_owner = Bearer {
            owner_id: Id16([9; 16]),
            ..claims
        };
        let other_kind = Bearer {
            kind: TokenKind::Owner,
            ..claims
        };
        let other_pairing = Bearer {
            pair_id: Some(Id16([9; 16])),
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

    #[test]
    fn each_kind_passes_only_its_own_requirement() {
        let pair = Id16([3; 16]);
        assert_eq!(require_mcp(TokenKind::Mcp, Some(pair)).ok(), Some(pair));
        assert!(require_mcp(TokenKind::Owner, None).is_err());
        assert!(require_mcp(TokenKind::Mcp, None).is_err());
        assert!(require_owner(TokenKind::Owner).is_ok());
        assert!(require_owner(TokenKind::Mcp).is_err());
    }

    #[test]
    fn claims_that_mix_the_two_kinds_name_no_bearer() {
        let keys = Keys::new(b"a test secret of some length");
        let owner = keys
            .verify(&keys.sign(&row(TokenKind::Owner, None)))
            .unwrap();
        assert!(bearer_of(&owner).is_some());
        let with_pairing = Claims {
            pair_id: Some(Id16([3; 16]).to_string()),
            ..owner.clone()
        };
        assert!(
            bearer_of(&with_pairing).is_none(),
            "an owner token names no pairing"
        );
        let mcp_without_pairing = Claims {
            aud: MCP_AUDIENCE.into(),
            ..owner.clone()
        };
        assert!(bearer_of(&mcp_without_pairing).is_none());
        let unknown = Claims {
            aud: "someone-else".into(),
            ..owner
        };
        assert!(bearer_of(&unknown).is_none());
    }
}
