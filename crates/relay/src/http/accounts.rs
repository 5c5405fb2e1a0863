//! Sign-in, sign-out, `me`, owner tokens and MCP tokens (sign-in links: `links`).

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use sealpost_protocol::api::{
    CreateMcpTokenRequest, CreateMcpTokenResponse, ErrorBody, ErrorCode, McpTokenInfo,
    McpTokenList, MeResponse, OwnerInfo, OwnerTokenInfo, OwnerTokenList, SigninRequest,
    SigninResponse, TokenKind,
};
use sealpost_time::UnixMillis;

use super::auth::{AnyAuth, OwnerAuth};
use super::body::read_json;
use super::client::ClientAddr;
use super::error::{ApiError, ApiResult};
use super::path_id;
use super::state::AppState;
use crate::accounts::secret_hash;
use crate::clock::now_ms;
use crate::ids::random_id;
use crate::scope::AppScope;
use crate::shares::{has_room, refusal};
use crate::store::{Page, StoreError, TokenRow};

pub(super) fn small_body_timeout(state: &AppState) -> (usize, Duration) {
    (
        state.config.limits.max_small_body_bytes,
        Duration::from_millis(state.config.limits.body_read_timeout_ms),
    )
}

pub(super) async fn owner_info(
    state: &AppState,
    owner_id: sealpost_protocol::ids::OwnerId,
) -> ApiResult<OwnerInfo> {
    let owner = state
        .store
        .owner_by_id(owner_id)
        .await?
        .ok_or_else(ApiError::unauthorized)?;
    Ok(OwnerInfo {
        id: owner.id,
        name: owner.name,
    })
}

/// The origin a scope names on the wire (`app_origin`): absent for the relay's own app.
pub(super) fn app_origin(app: &AppScope) -> Option<String> {
    app.origin().map(ToString::to_string)
}

/// The latest an owner token's row lets it be renewed to (see `Limits::owner_token_deadline`).
pub(super) fn deadline(state: &AppState, token: &TokenRow) -> UnixMillis {
    state
        .config
        .limits
        .owner_token_deadline(token.created_at, token.lifetime_ends_at)
}

/// `Retry-After` of `too_many_tokens`: a place frees only when the person revokes a token.
const TOKENS_RETRY_S: u64 = 60;

/// `POST /v1/auth/signin`
#[utoipa::path(
    post,
    path = "/v1/auth/signin",
    tag = "accounts",
    request_body = SigninRequest,
    responses(
        (status = 200, description = "An owner token for the code's owner.", body = SigninResponse),
        (status = 400, description = "`bad_request`: the body is malformed.", body = ErrorBody),
        (status = 401, description = "`invalid_signin_code`: the code is unknown, used or expired.", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many sign-in attempts from this address.", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn signin(
    State(state): State<AppState>,
    Extension(ClientAddr(client)): Extension<ClientAddr>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<SigninResponse>> {
    // The one endpoint without a token is limited by address, before its body is read.
    state.rate.check_signin(client).map_err(|limited| {
        ApiError::rate_limited(
            limited,
            "Too many sign-in attempts from this address; wait a minute.",
        )
    })?;
    let (cap, timeout) = small_body_timeout(&state);
    let request: SigninRequest = read_json(&headers, body, cap, timeout).await?;
    let now = now_ms();
    let refused = |why: &str| ApiError::new(ErrorCode::InvalidSigninCode, why.to_owned());
    let grant = state
        .store
        .consume_signin_code(secret_hash(&request.code), now)
        .await?
        .ok_or_else(|| {
            refused("This sign-in link is unknown, used or expired. Ask for a new one.")
        })?;
    // A code a team sign-in handed back works only for the app that started that sign-in.
    if let Some(challenge) = grant.pkce_challenge
        && !request
            .code_verifier
            .as_deref()
            .is_some_and(|verifier| answers_challenge(verifier, &challenge))
    {
        return Err(refused(
            "This sign-in belongs to the app page that started it. Start the sign-in again there.",
        ));
    }
    // The app is the code's, recorded when the link was made; the request's Origin says nothing.
    if let Some(origin) = grant.app.origin()
        && !state.config.app_origins.contains(origin)
    {
        return Err(refused(&format!(
            "This sign-in link is for {origin}, which this relay no longer lists. Ask for a new one."
        )));
    }
    let limits = &state.config.limits;
    let deadline = limits.owner_token_deadline(now, grant.lifetime_ends_at);
    if deadline <= now {
        return Err(refused(
            "The sign-in that made this link has lapsed, and so has the link. Ask for a new one.",
        ));
    }
    let row = TokenRow {
        id: random_id(),
        owner_id: grant.owner_id,
        kind: TokenKind::Owner,
        pair_id: None,
        label: "sign-in".into(),
        created_at: now,
        expires_at: limits.owner_token_expiry(deadline, now),
        app: grant.app,
        lifetime_ends_at: Some(deadline),
        // The sign-in that made the link: signing it out ends this one too.
        parent_id: grant.minted_by,
    };
    match state.store.create_token(&row).await {
        Err(StoreError::TokenNotLive) => {
            return Err(refused(
                "The sign-in that made this link has been signed out, and the link with it. \
                 Ask for a new one.",
            ));
        }
        other => other?,
    }
    tracing::info!(owner = %row.owner_id, sid = %row.id, app = %row.app, "owner signed in");
    Ok(Json(SigninResponse {
        token: state.keys.sign(&row),
        owner: owner_info(&state, row.owner_id).await?,
        expires_at: row.expires_at,
        app_origin: app_origin(&row.app),
    }))
}

/// Whether `verifier` is a PKCE verifier (RFC 7636, 4.1: 43 to 128 unreserved characters)
/// whose S256 challenge is `challenge`.
fn answers_challenge(verifier: &str, challenge: &[u8; 32]) -> bool {
    use subtle::ConstantTimeEq as _;
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    well_formed && bool::from(secret_hash(verifier).ct_eq(challenge))
}

/// `POST /v1/auth/signout`: revokes the token used (an MCP token may revoke itself this way).
#[utoipa::path(
    post,
    path = "/v1/auth/signout",
    tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "The token used is revoked, and with an owner token everything it made: the sign-ins made from its links (and from theirs), their unused links, and the sessions any of them started."),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn signout(State(state): State<AppState>, auth: AnyAuth) -> ApiResult<StatusCode> {
    let token = auth.row();
    let ended = state
        .store
        .sign_out(auth.owner_id(), &token.app, token.id, None, now_ms())
        .await?
        .unwrap_or_default();
    // The sessions it started answer `session_ended` to their waiters now.
    ended.wake(&state.hub);
    tracing::info!(sid = %token.id, kind = token.kind.as_str(), ended_sessions = ended.sessions.len(), "token revoked by its holder");
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/me`: who the token belongs to; an owner token comes back renewed (sliding expiry).
#[utoipa::path(
    get,
    path = "/v1/me",
    tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The owner, with a renewed owner token.", body = MeResponse),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn me(State(state): State<AppState>, auth: OwnerAuth) -> ApiResult<Json<MeResponse>> {
    // An MCP token grants its pairing's calls and nothing about the account behind it: the
    // extractor refuses one.
    let token = auth.row();
    let now = now_ms();
    let mut renewed_token = None;
    let mut expires_at = token.expires_at;
    // Sliding, but never past the absolute lifetime from the sign-in (or from the sign-in
    // whose link made this one): a stolen owner token cannot keep itself alive by use.
    let renewed = state
        .config
        .limits
        .owner_token_expiry(deadline(&state, token), now);
    if state.store.extend_token(token.id, renewed, now).await? {
        expires_at = renewed.max(expires_at);
        renewed_token = Some(state.keys.sign(&TokenRow {
            expires_at,
            ..token.clone()
        }));
    }
    Ok(Json(MeResponse {
        owner: owner_info(&state, auth.owner_id()).await?,
        token_kind: token.kind,
        pair_id: token.pair_id,
        token: renewed_token,
        app_origin: app_origin(&token.app),
        expires_at,
        now_ms: now,
    }))
}

/// `POST /v1/mcp-tokens`
#[utoipa::path(
    post,
    path = "/v1/mcp-tokens",
    tag = "accounts",
    security(("bearer" = [])),
    request_body = CreateMcpTokenRequest,
    responses(
        (status = 201, description = "The token, shown once.", body = CreateMcpTokenResponse),
        (status = 400, description = "`bad_request`, `ttl_out_of_range`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`, `too_many_tokens`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn create_mcp_token(
    State(state): State<AppState>,
    auth: OwnerAuth,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<CreateMcpTokenResponse>)> {
    let (cap, timeout) = small_body_timeout(&state);
    let request: CreateMcpTokenRequest = read_json(&headers, body, cap, timeout).await?;
    let limits = &state.config.limits;
    if request.label.len() > limits.max_label_bytes {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("A label is at most {} bytes.", limits.max_label_bytes),
        ));
    }
    let ttl_s = request.ttl_s.unwrap_or(limits.default_mcp_token_ttl_s);
    if ttl_s == 0 || ttl_s > limits.max_mcp_token_ttl_s {
        return Err(ApiError::new(
            ErrorCode::TtlOutOfRange,
            format!("ttl_s must be 1 to {}.", limits.max_mcp_token_ttl_s),
        ));
    }
    let now = now_ms();
    let quota = limits.max_live_mcp_tokens_per_owner;
    let held = state
        .store
        .live_grants(auth.owner_id(), now)
        .await?
        .mcp_tokens_by_app();
    if !has_room(quota, &held, auth.app_scope()) {
        return Err(ApiError::quota(
            ErrorCode::TooManyTokens,
            format!(
                "{} Revoke one on the Tokens page (the relay's own app lists every app's).",
                refusal("plugin tokens", quota, &held, auth.app_scope())
            ),
            TOKENS_RETRY_S,
        ));
    }
    let row = TokenRow {
        id: random_id(),
        owner_id: auth.owner_id(),
        kind: TokenKind::Mcp,
        pair_id: Some(request.pair_id),
        label: request.label,
        created_at: now,
        expires_at: now.saturating_add_ms(ttl_s.saturating_mul(1000)),
        // The pairing is the app's that made it: its plugin reaches that app's sessions alone.
        app: auth.app_scope().clone(),
        lifetime_ends_at: None,
        parent_id: None,
    };
    state.store.create_token(&row).await?;
    tracing::info!(sid = %row.id, pair = %request.pair_id, app = %row.app, "MCP token created");
    Ok((
        StatusCode::CREATED,
        Json(CreateMcpTokenResponse {
            id: row.id,
            token: state.keys.sign(&row),
            expires_at: row.expires_at,
        }),
    ))
}

/// The most MCP tokens in one page of `GET /v1/mcp-tokens`, and the default.
const TOKEN_PAGE: u32 = 100;

/// `GET /v1/mcp-tokens?after=&limit=`.
#[derive(Debug, serde::Deserialize)]
pub struct TokenPageQuery {
    after: Option<String>,
    limit: Option<u32>,
}

/// `GET /v1/mcp-tokens`
#[utoipa::path(
    get,
    path = "/v1/mcp-tokens",
    tag = "accounts",
    security(("bearer" = [])),
    params(
        ("after" = Option<String>, Query, description = "List the tokens after this id (the `next` of the previous page)."),
        ("limit" = Option<u32>, Query, description = "Most tokens in the page (default and ceiling 100)."),
    ),
    responses(
        (status = 200, description = "A page of the owner's live MCP tokens in id order (never the tokens themselves): every app's for a token of the relay's own app, its own app's for a host app's token; `next` when more remain.", body = McpTokenList),
        (status = 400, description = "`bad_request`: a malformed `after` or `limit`.", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn list_mcp_tokens(
    State(state): State<AppState>,
    auth: OwnerAuth,
    Query(query): Query<TokenPageQuery>,
) -> ApiResult<Json<McpTokenList>> {
    let after = match query.after.as_deref() {
        Some(after) => Some(after.parse().map_err(|_| {
            ApiError::new(
                ErrorCode::BadRequest,
                "after must be a token id (a page's next).",
            )
        })?),
        None => None,
    };
    let limit = query.limit.unwrap_or(TOKEN_PAGE).clamp(1, TOKEN_PAGE);
    // One row past the page says whether another page follows.
    let page = Page {
        after,
        limit: limit + 1,
    };
    let mut rows = state
        .store
        .list_mcp_tokens(auth.owner_id(), auth.app_scope(), now_ms(), page)
        .await?;
    let next = (rows.len() > limit as usize).then(|| {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.id)
    });
    let tokens = rows
        .into_iter()
        .filter_map(|row| {
            Some(McpTokenInfo {
                id: row.id,
                label: row.label,
                pair_id: row.pair_id?,
                created_at: row.created_at,
                expires_at: row.expires_at,
                app_origin: app_origin(&row.app),
            })
        })
        .collect();
    Ok(Json(McpTokenList {
        tokens,
        next: next.flatten(),
    }))
}

/// `DELETE /v1/mcp-tokens/{id}`
#[utoipa::path(
    delete,
    path = "/v1/mcp-tokens/{id}",
    tag = "accounts",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The MCP token's id.")),
    responses(
        (status = 204, description = "Revoked."),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn revoke_mcp_token(
    State(state): State<AppState>,
    auth: OwnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    revoke_own(&state, &auth, &id, TokenKind::Mcp).await
}

/// `GET /v1/owner-tokens`: the owner's sign-ins, one per device, so a lost or stolen one can
/// be found and revoked from another.
#[utoipa::path(
    get,
    path = "/v1/owner-tokens",
    tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The owner's live sign-ins (never the tokens themselves): every app's for a token of the relay's own app, its own app's for a host app's token.", body = OwnerTokenList),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn list_owner_tokens(
    State(state): State<AppState>,
    auth: OwnerAuth,
) -> ApiResult<Json<OwnerTokenList>> {
    let rows = state
        .store
        .list_owner_tokens(auth.owner_id(), auth.app_scope(), now_ms())
        .await?;
    let tokens = rows
        .into_iter()
        .map(|row| OwnerTokenInfo {
            id: row.id,
            created_at: row.created_at,
            expires_at: row.expires_at,
            current: row.id == auth.row().id,
            app_origin: app_origin(&row.app),
            parent_id: row.parent_id,
        })
        .collect();
    Ok(Json(OwnerTokenList { tokens }))
}

/// `DELETE /v1/owner-tokens/{id}`: signs out one of the owner's devices.
#[utoipa::path(
    delete,
    path = "/v1/owner-tokens/{id}",
    tag = "accounts",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The sign-in's id.")),
    responses(
        (status = 204, description = "Revoked: that device is signed out at once."),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn revoke_owner_token(
    State(state): State<AppState>,
    auth: OwnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    revoke_own(&state, &auth, &id, TokenKind::Owner).await
}

/// An owner revokes one of their own tokens of `kind` that its app reaches, and what it made
/// (see [`signout`]); any other id answers 404.
async fn revoke_own(
    state: &AppState,
    auth: &OwnerAuth,
    id: &str,
    kind: TokenKind,
) -> ApiResult<StatusCode> {
    let id = path_id(id, "token")?;
    let Some(ended) = state
        .store
        .sign_out(auth.owner_id(), auth.app_scope(), id, Some(kind), now_ms())
        .await?
    else {
        return Err(ApiError::not_found("token"));
    };
    ended.wake(&state.hub);
    tracing::info!(sid = %id, kind = kind.as_str(), ended_sessions = ended.sessions.len(), "token revoked by its owner");
    Ok(StatusCode::NO_CONTENT)
}
