//! Browser sessions: create (with the opaque hello), end, and the plugin's live-session lookup.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use sealpost_protocol::api::{
    CatalogUpdateRequest, CreateSessionRequest, CreateSessionResponse, ErrorBody, ErrorCode,
    LiveSessionResponse, TokenKind,
};
use sealpost_protocol::ids::{Base64Bytes, SessionId};

use super::auth::{AnyAuth, OwnerAuth};
use super::body::read_json;
use super::error::{ApiError, ApiResult, TOO_MANY_SESSIONS_RETRY_S};
use super::path_id;
use super::session_watch::Watch;
use super::state::AppState;
use crate::clock::now_ms;
use crate::shares::refusal;
use crate::store::{CatalogUpdate, NewSession, StoreError};
use crate::wake::Topic;

/// `POST /v1/sessions` (owner)
#[utoipa::path(
    post,
    path = "/v1/sessions",
    tag = "sessions",
    security(("bearer" = [])),
    request_body = CreateSessionRequest,
    responses(
        (status = 201, description = "The session is live; the pairing's previous one has ended.", body = CreateSessionResponse),
        (status = 400, description = "`bad_request`, `ttl_out_of_range`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 409, description = "`duplicate_session`", body = ErrorBody),
        (status = 413, description = "`body_too_large`, `hello_too_large`", body = ErrorBody),
        (status = 429, description = "`too_many_sessions`, `rate_limited`, `too_many_large_bodies`", body = ErrorBody),
        (status = 503, description = "`unavailable`, `busy`", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    auth: OwnerAuth,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<CreateSessionResponse>)> {
    let limits = &state.config.limits;
    let cap = limits.body_cap_for(limits.max_hello_bytes);
    let _large = super::body::admit(&state, auth.owner_id(), &headers, cap)?;
    let request: CreateSessionRequest = read_json(
        &headers,
        body,
        cap,
        Duration::from_millis(limits.body_read_timeout_ms),
    )
    .await?;
    if request.hello.0.is_empty() {
        return Err(ApiError::new(ErrorCode::BadRequest, "The hello is empty."));
    }
    if request.hello.0.len() > limits.max_hello_bytes {
        return Err(ApiError::new(
            ErrorCode::HelloTooLarge,
            format!("A hello is at most {} bytes.", limits.max_hello_bytes),
        ));
    }
    if request.ttl_s == 0 || request.ttl_s > limits.max_session_ttl_s {
        return Err(ApiError::new(
            ErrorCode::TtlOutOfRange,
            format!("ttl_s must be 1 to {}.", limits.max_session_ttl_s),
        ));
    }
    let now = now_ms();
    let session = NewSession {
        owner_id: auth.owner_id(),
        // The session is the app's whose token starts it: it replaces that app's session of
        // the pairing only, and only that app's tokens reach it and its calls.
        app: auth.app_scope().clone(),
        session_id: request.session_id,
        pair_id: request.pair_id,
        hello: request.hello.0,
        created_at: now,
        expires_at: now.saturating_add_ms(request.ttl_s.saturating_mul(1000)),
        // Signing this sign-in out ends the session.
        started_by: Some(auth.row().id),
    };
    let ended = match state
        .store
        .create_session(&session, limits.max_live_sessions_per_owner)
        .await
    {
        Err(StoreError::Duplicate) => {
            return Err(ApiError::new(
                ErrorCode::DuplicateSession,
                "A session with this session_id already exists.",
            ));
        }
        Err(StoreError::TooManySessions) => {
            let quota = limits.max_live_sessions_per_owner;
            let held = state
                .store
                .live_sessions_by_app(auth.owner_id(), now)
                .await?;
            return Err(ApiError::quota(
                ErrorCode::TooManySessions,
                format!(
                    "{} End one in the web app; signing out a sign-in on the Tokens page of the \
                     relay's own app ends the sessions it started.",
                    refusal("live sessions", quota, &held, auth.app_scope())
                ),
                TOO_MANY_SESSIONS_RETRY_S,
            ));
        }
        other => other?,
    };
    // The replaced session's claimers answer `session_ended` now, not at their next re-check.
    ended.wake(&state.hub);
    state
        .hub
        .wake(Topic::Pairing(session.owner_id, session.pair_id));
    tracing::info!(session = %session.session_id, pair = %session.pair_id, hello_bytes = session.hello.len(), ttl_s = request.ttl_s, replaced_calls = ended.cancelled_calls.len(), "session created");
    Ok((
        StatusCode::CREATED,
        Json(CreateSessionResponse {
            session_id: session.session_id,
            expires_at: session.expires_at,
        }),
    ))
}

/// `DELETE /v1/sessions/{session_id}` (owner): pending and claimed calls become cancelled.
#[utoipa::path(
    delete,
    path = "/v1/sessions/{session_id}",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "The session's id.")),
    responses(
        (status = 204, description = "Ended: its pending and claimed calls are cancelled."),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn end(
    State(state): State<AppState>,
    auth: OwnerAuth,
    Path(session_id): Path<String>,
) -> ApiResult<StatusCode> {
    let session_id = path_id(&session_id, "session")?;
    let owner = auth.owner_id();
    let ended = match state
        .store
        .end_session(owner, auth.app_scope(), session_id, now_ms())
        .await
    {
        Err(StoreError::NotFound) => return Err(ApiError::not_found("session")),
        other => other?,
    };
    ended.wake(&state.hub);
    tracing::info!(session = %session_id, cancelled = ended.cancelled_calls.len(), "session ended");
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/pairings/{pair_id}/session` (the pairing's MCP token, or the owner)
#[utoipa::path(
    get,
    path = "/v1/pairings/{pair_id}/session",
    tag = "sessions",
    security(("bearer" = [])),
    params(
        ("pair_id" = String, Path, description = "The pairing's id."),
        ("wait_ms" = Option<u64>, Query, description = "Watch: long-poll up to this long while the live session is still the one named by `session_id` and `catalog_seq` (default 0: answer at once)."),
        ("session_id" = Option<String>, Query, description = "Watch: the live session the caller knows; absent, it knows of none."),
        ("catalog_seq" = Option<u64>, Query, description = "Watch: the number of that session's newest catalog update the caller knows (0 or absent: none)."),
    ),
    responses(
        (status = 200, description = "The pairing's live session and its hello, byte for byte.", body = LiveSessionResponse),
        (status = 400, description = "`bad_request`, `wait_too_long`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`not_found`, `no_live_session`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`, `too_many_long_polls`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn live(
    State(state): State<AppState>,
    auth: AnyAuth,
    Path(pair_id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<LiveSessionResponse>> {
    let pair_id = path_id(&pair_id, "pairing")?;
    let token = auth.row();
    if token.kind == TokenKind::Mcp && token.pair_id != Some(pair_id) {
        return Err(ApiError::not_found("pairing"));
    }
    let watch = Watch::from_query(&state, &query)?;
    let session = watch.until_changed(&state, &auth, pair_id).await?;
    let now = now_ms();
    let session = session.ok_or_else(|| {
        ApiError::new(
            ErrorCode::NoLiveSession,
            "No browser session is live for this pairing. Open the web app and start a session.",
        )
    })?;
    let mut plugin_seen_at = session.plugin_seen_at;
    if token.kind == TokenKind::Mcp {
        // Advisory: a failed write must not fail the plugin's call.
        match state
            .store
            .mark_plugin_seen(auth.owner_id(), session.session_id, now)
            .await
        {
            Ok(()) => plugin_seen_at = Some(now),
            Err(error) => {
                tracing::warn!(error = %error, "recording that the plugin looked up its session")
            }
        }
    }
    Ok(Json(LiveSessionResponse {
        session_id: session.session_id,
        hello: Base64Bytes(session.hello),
        expires_at: session.expires_at,
        claimer_seen_at: session.claimer_seen_at,
        plugin_seen_at,
        catalog_update: session.catalog_update.map(Base64Bytes),
        now_ms: now,
    }))
}

/// The session and number a catalog update's clear header names (docs/PROTOCOL.md, "Catalog
/// update": version 1, then `session_id` at 1..17 and `seq` at 33..41); `None` when the bytes
/// are not laid out as one. The rest is sealed and never read here.
pub(super) fn catalog_update_header(update: &[u8]) -> Option<(SessionId, u64)> {
    const MIN_LEN: usize = 49 + 24 + 16;
    if update.len() < MIN_LEN || update[0] != 1 {
        return None;
    }
    let session_id = SessionId::from_bytes(update[1..17].try_into().ok()?);
    let seq = u64::from_be_bytes(update[33..41].try_into().ok()?);
    (seq >= 1 && i64::try_from(seq).is_ok()).then_some((session_id, seq))
}

/// `PUT /v1/sessions/{session_id}/catalog` (owner): the session's tool list changed.
#[utoipa::path(
    put,
    path = "/v1/sessions/{session_id}/catalog",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "The live session's id.")),
    request_body = CatalogUpdateRequest,
    responses(
        (status = 204, description = "Kept: the pairing's plugin gets it with the session from now on."),
        (status = 400, description = "`bad_request`: not a catalog update of this session.", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such live session.", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 409, description = "`stale_catalog_update`: the session holds one as new or newer.", body = ErrorBody),
        (status = 413, description = "`body_too_large`, `catalog_update_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`, `too_many_large_bodies`", body = ErrorBody),
        (status = 503, description = "`unavailable`, `busy`", body = ErrorBody),
    )
)]
pub async fn update_catalog(
    State(state): State<AppState>,
    auth: OwnerAuth,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    let session_id = path_id(&session_id, "session")?;
    let limits = &state.config.limits;
    let cap = limits.body_cap_for(limits.max_hello_bytes);
    let _large = super::body::admit(&state, auth.owner_id(), &headers, cap)?;
    let request: CatalogUpdateRequest = read_json(
        &headers,
        body,
        cap,
        Duration::from_millis(limits.body_read_timeout_ms),
    )
    .await?;
    let update = request.update.0;
    if update.len() > limits.max_hello_bytes {
        return Err(ApiError::new(
            ErrorCode::CatalogUpdateTooLarge,
            format!(
                "A catalog update is at most {} bytes.",
                limits.max_hello_bytes
            ),
        ));
    }
    let Some((named, seq)) = catalog_update_header(&update) else {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "The body is not a catalog update (docs/PROTOCOL.md, \"Catalog update\").",
        ));
    };
    if named != session_id {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "The catalog update names another session than the path.",
        ));
    }
    let bytes = update.len();
    let kept = CatalogUpdate {
        owner_id: auth.owner_id(),
        app: auth.app_scope().clone(),
        session_id,
        seq,
        update,
        now: now_ms(),
    };
    match state.store.set_catalog_update(&kept).await {
        Err(StoreError::NotFound) => return Err(ApiError::not_found("session")),
        Err(StoreError::StaleCatalogUpdate) => {
            return Err(ApiError::new(
                ErrorCode::StaleCatalogUpdate,
                "The session already holds a catalog update with this number or a higher one.",
            ));
        }
        other => other?,
    }
    // A plugin watching the pairing hears of it (claims waiting on the session re-check and
    // wait on: catalog updates are rare).
    state.hub.wake(Topic::Session(auth.owner_id(), session_id));
    tracing::info!(session = %session_id, seq, bytes, "catalog updated");
    Ok(StatusCode::NO_CONTENT)
}
