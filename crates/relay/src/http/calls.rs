//! Calls: post (plugin), claim (browser, long-poll), reply (browser), cancel (either), read
//! (plugin, long-poll).
//!
//! Long-polls subscribe to the hub *before* each store check and wait only after it, so a
//! wake-up between the check and the wait is not lost. No transaction spans a wait.
//!
//! Limits admit work at the door: a post or a claim may be refused by a rate, but the tab's
//! first reply or cancel of a call it claimed and the plugin's first read of its answer are
//! not (`admitted`). Claims and replies record what they hand out and store; each reply, cancel
//! and read that reaches the store ends what it completed.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sealpost_protocol::api::{
    CancelRequest, ClaimResponse, ClaimedCall, ErrorBody, ErrorCode, PostCallRequest,
    PostCallResponse, ReplyRequest,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{Base64Bytes, CallId, SessionId};
use tokio::time::Instant;

use super::auth::{AnyAuth, Charged, VerifiedMcp, VerifiedOwner};
use super::body::{admit, read_json};
use super::error::{ApiError, ApiResult};
use super::path_id;
use super::reads::{self, Wait};
use super::state::AppState;
use crate::admitted::Work;
use crate::caps::{LongPollPlace, LongPollsFull};
use crate::clock::now_ms;
use crate::metrics::{LongPoll, RefusedRequest};
use crate::store::{Bearer, ClaimFor, ClaimedRow, NewCall, StoreError, StoreResult};
use crate::wake::Topic;

/// Reads `name=value` (an unsigned number) from a query string.
pub(crate) fn query_number(query: &Option<String>, name: &str) -> ApiResult<Option<u64>> {
    query_value(query, name)
        .map(|value| {
            value.parse().map_err(|_| {
                ApiError::new(
                    ErrorCode::BadRequest,
                    format!("{name} must be a whole number."),
                )
            })
        })
        .transpose()
}

/// The first value of `name` in a query string, as sent (ids and numbers need no decoding).
pub(crate) fn query_value<'q>(query: &'q Option<String>, name: &str) -> Option<&'q str> {
    query.as_deref()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then_some(value)
    })
}

pub(crate) fn wait_ms(state: &AppState, query: &Option<String>) -> ApiResult<u64> {
    checked_wait(state, query_number(query, "wait_ms")?.unwrap_or(0))
}

fn checked_wait(state: &AppState, wait: u64) -> ApiResult<u64> {
    if wait > state.config.limits.max_wait_ms {
        return Err(ApiError::new(
            ErrorCode::WaitTooLong,
            format!("wait_ms is at most {}.", state.config.limits.max_wait_ms),
        ));
    }
    Ok(wait)
}

/// Reserves `bytes` under the owner's quota of bytes held (kept once the store accepts them).
fn held_quota(
    state: &AppState,
    owner: sealpost_protocol::ids::OwnerId,
    bytes: usize,
) -> ApiResult<crate::quota::Reserved> {
    state.held.reserve(owner, bytes).ok_or_else(|| {
        ApiError::quota(
            ErrorCode::BytesQuotaExceeded,
            format!(
                "Your calls and replies already hold {} bytes, the most allowed; they free up as \
                 calls are read and expire.",
                state.config.limits.max_bytes_held_per_owner
            ),
            state.config.limits.sweep_interval_ms.div_ceil(1000).max(1),
        )
    })
}

/// What a long-poll does when its token's or owner's share of waiting long-polls is full.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LongPollShare {
    /// Answer 429 `too_many_long_polls` (a claim, a read: nothing is lost, the client asks again).
    Refuse,
    /// Stop waiting and answer what there is (a post, whose call is already stored).
    Answer,
}

/// A place among the long-polls `bearer` and its owner may have waiting, taken by a claim or
/// read about to wait (once: `place` keeps it). When either share is full, `share` says what
/// happens: 429 `too_many_long_polls` at once, closing the connection, or `false` (no wait).
/// Each waiting long-poll holds a connection: without a share, one account's waiting requests
/// could hold every connection the relay allows. Taken only after the first look at the store,
/// so an answer ready at once never needs one.
pub(crate) fn hold_long_poll_place(
    state: &AppState,
    bearer: &Bearer,
    place: &mut Option<LongPollPlace>,
    share: LongPollShare,
) -> ApiResult<bool> {
    if place.is_some() {
        return Ok(true);
    }
    let limits = &state.config.limits;
    let refused = |why, whose: &str, most: u32| {
        state.metrics.request_refused(why);
        ApiError::quota(
            ErrorCode::TooManyLongPolls,
            format!(
                "{whose} already {most} claims and reads waiting, the most allowed at once; \
                 retry when one is answered."
            ),
            1,
        )
        .closing()
    };
    let full = match state.long_polls.admit(bearer.token_id, bearer.owner_id) {
        Ok(held) => {
            *place = Some(held);
            return Ok(true);
        }
        Err(full) => full,
    };
    if let LongPollShare::Answer = share {
        return Ok(false);
    }
    Err(match full {
        LongPollsFull::Token => refused(
            RefusedRequest::LongPollsPerToken,
            "This token has",
            limits.max_long_polls_per_token,
        ),
        LongPollsFull::Owner => refused(
            RefusedRequest::LongPollsPerOwner,
            "Your tokens together have",
            limits.max_long_polls_per_owner,
        ),
    })
}

fn timeout(state: &AppState) -> Duration {
    Duration::from_millis(state.config.limits.body_read_timeout_ms)
}

/// `POST /v1/sessions/{session_id}/calls` (MCP token)
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/calls",
    tag = "calls",
    security(("bearer" = [])),
    params(
        ("session_id" = String, Path, description = "The live session's id."),
        ("wait_ms" = Option<u64>, Query, description = "Once the call is stored, wait up to this long for it to leave pending and claimed, as a read would, and answer its status (default 0: answer at once, without it)."),
    ),
    request_body = PostCallRequest,
    responses(
        (status = 201, description = "The call is stored; with `wait_ms`, `status` is what a read at the end of the wait finds (absent if the wait could not be made: read the call instead).", body = PostCallResponse),
        (status = 400, description = "`bad_request`, `ttl_out_of_range`, `wait_too_long`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: not an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 409, description = "`duplicate_call`: read the call instead.", body = ErrorBody),
        (status = 410, description = "`session_ended`", body = ErrorBody),
        (status = 413, description = "`body_too_large`, `envelope_too_large`", body = ErrorBody),
        (status = 429, description = "`too_many_pending_calls`, `rate_limited`, `owner_rate_limited`, `bytes_quota_exceeded`, `too_many_large_bodies`", body = ErrorBody),
        (status = 503, description = "`unavailable`, `busy`", body = ErrorBody),
    )
)]
pub async fn post(
    State(state): State<AppState>,
    auth: VerifiedMcp,
    Path(session_id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let session_id = path_id(&session_id, "session")?;
    let wait = wait_ms(&state, &query)?;
    let limits = &state.config.limits;
    let cap = limits.body_cap_for(limits.max_call_envelope_bytes);
    let large = admit(&state, auth.owner_id(), &headers, cap)?;
    if large.is_some() {
        // The row before a large body: a dead token never costs one. A small body is read
        // first, and the store's statement checks the row, one round trip fewer per call.
        auth.require_live(&state).await?;
    }
    let request: PostCallRequest = read_json(&headers, body, cap, timeout(&state)).await?;
    if request.envelope.0.is_empty() {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "The call envelope is empty.",
        ));
    }
    if request.envelope.0.len() > limits.max_call_envelope_bytes {
        return Err(ApiError::new(
            ErrorCode::EnvelopeTooLarge,
            format!(
                "A call envelope is at most {} bytes.",
                limits.max_call_envelope_bytes
            ),
        ));
    }
    if request.ttl_s == 0 || request.ttl_s > limits.max_call_ttl_s {
        return Err(ApiError::new(
            ErrorCode::TtlOutOfRange,
            format!("ttl_s must be 1 to {}.", limits.max_call_ttl_s),
        ));
    }
    let now = now_ms();
    let call = NewCall {
        owner_id: auth.owner_id(),
        session_id,
        call_id: request.call_id,
        envelope: request.envelope.0,
        created_at: now,
        expires_at: now.saturating_add_ms(request.ttl_s.saturating_mul(1000)),
    };
    let reserved = held_quota(&state, call.owner_id, call.envelope.len())?;
    // Subscribed before the call exists, so no answer to it can come unheard.
    let subscription = (wait > 0).then(|| {
        let topic = Topic::Call(call.owner_id, call.call_id);
        (
            state.hub.subscribe(topic),
            Instant::now() + Duration::from_millis(wait),
        )
    });
    let max_pending = Some(limits.max_pending_calls_per_session);
    // A claim standing for this session here is claimed for in the post's own write.
    let posted = match state.standing_claims.take((call.owner_id, session_id)) {
        Some(claim) => {
            state.metrics.claim_handed();
            (state.store)
                .post_call_then_claim(auth.bearer(), &call, max_pending, claim)
                .await
        }
        None => {
            (state.store)
                .post_call(auth.bearer(), &call, max_pending)
                .await
        }
    };
    let expires_at = match posted {
        Err(StoreError::NotFound) => return Err(ApiError::not_found("session")),
        Err(StoreError::Duplicate) => {
            return Err(ApiError::new(
                ErrorCode::DuplicateCall,
                "A call with this call_id exists; read it instead of posting again.",
            ));
        }
        other => other?,
    };
    reserved.keep();
    state.hub.wake(Topic::Session(call.owner_id, session_id));
    state.metrics.call_posted();
    tracing::debug!(call = %call.call_id, session = %session_id, bytes = call.envelope.len(), "call posted");
    let mut answer = PostCallResponse {
        call_id: call.call_id,
        expires_at,
        now_ms: now,
        status: None,
    };
    let mut slot = None;
    if let Some((subscription, deadline)) = subscription {
        let bearer = auth.bearer();
        let waited = Wait {
            state: &state,
            bearer,
            call_id: call.call_id,
            deadline,
            subscription,
            // Just stored, so pending (or claimed for a standing claim): nothing to read yet.
            look_first: false,
            share: LongPollShare::Answer,
        }
        .until_final(|read| {
            if reads::handed_over(&bearer, read) {
                state.admitted.delivered(bearer.owner_id, call.call_id);
            }
        })
        .await;
        // The call is stored whatever the wait met: a wait that failed answers without a
        // status, and the plugin reads the call.
        if let Ok(Some((view, now))) = waited
            && let Ok((status, held)) = reads::status_of(&state, &bearer, view, now)
        {
            answer.status = Some(status);
            slot = held;
        }
    }
    let mut response = reads::json_with(&answer, slot);
    *response.status_mut() = StatusCode::CREATED;
    Ok(response)
}

/// `POST /v1/sessions/{session_id}/claims?wait_ms=&max=` (owner)
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/claims",
    tag = "calls",
    security(("bearer" = [])),
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("wait_ms" = Option<u64>, Query, description = "Long-poll up to this long for a call (default 0)."),
        ("max" = Option<u32>, Query, description = "Most calls to claim (default and ceiling 50)."),
    ),
    responses(
        (status = 200, description = "Claimed calls, possibly none, each with its lease.", body = ClaimResponse),
        (status = 400, description = "`bad_request`, `wait_too_long`, `claim_batch_out_of_range`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 410, description = "`session_ended`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`, `too_many_long_polls`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn claim(
    State(state): State<AppState>,
    auth: VerifiedOwner,
    Path(session_id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<ClaimResponse>> {
    let session_id = path_id(&session_id, "session")?;
    let wait = wait_ms(&state, &query)?;
    let max = query_number(&query, "max")?.unwrap_or(state.config.limits.max_claim_batch as u64);
    claim_calls(&state, auth.bearer(), session_id, wait, max)
        .await
        .map(Json)
}

/// A claim, as `POST …/claims` and the channel both make it: up to `max` calls, waiting up to
/// `wait` ms for the first.
pub(crate) async fn claim_calls(
    state: &AppState,
    bearer: Bearer,
    session_id: SessionId,
    wait: u64,
    max: u64,
) -> ApiResult<ClaimResponse> {
    let limits = &state.config.limits;
    let wait = checked_wait(state, wait)?;
    if max == 0 || max > limits.max_claim_batch as u64 {
        return Err(ApiError::new(
            ErrorCode::ClaimBatchOutOfRange,
            format!("max must be 1 to {}.", limits.max_claim_batch),
        ));
    }
    let mut place = None;
    let owner = bearer.owner_id;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(wait);
    let _open = (wait > 0).then(|| state.metrics.long_poll(LongPoll::Claim));
    let subscription = state.hub.subscribe(Topic::Session(owner, session_id));
    // What a post claimed for this claim while it stood (see `crate::handoff`).
    let mut handed: Option<StoreResult<Vec<ClaimedRow>>> = None;
    loop {
        let notified = subscription.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let now = now_ms();
        let claimed = match handed.take() {
            Some(handed) => handed,
            None => {
                (state.store)
                    .claim_calls(bearer, session_id, now, max as u32, limits.lease_ms)
                    .await
            }
        };
        let claimed = match claimed {
            Err(StoreError::NotFound) => return Err(ApiError::not_found("session")),
            other => other?,
        };
        if !claimed.is_empty() || Instant::now() >= deadline || state.shutdown.is_cancelled() {
            for call in &claimed {
                state
                    .metrics
                    .call_claimed(now.saturating_sub(call.created_at));
                state
                    .admitted
                    .claimed(owner, bearer.token_id, call.call_id, call.lease_expires_at);
            }
            let calls = claimed
                .into_iter()
                .map(|c| ClaimedCall {
                    call_id: c.call_id,
                    envelope: Base64Bytes(c.envelope),
                    lease_expires_at: c.lease_expires_at,
                })
                .collect();
            state.metrics.claim_answered(started.elapsed());
            return Ok(ClaimResponse { calls, now_ms: now });
        }
        hold_long_poll_place(state, &bearer, &mut place, LongPollShare::Refuse)?;
        let fallback = Instant::now() + Duration::from_millis(limits.fallback_poll_ms);
        let waiting = async {
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline.min(fallback)) => {}
                _ = state.shutdown.cancelled() => {}
            }
        };
        let claim = |answer| ClaimFor {
            bearer,
            max: max as u32,
            lease_ms: limits.lease_ms,
            answer,
        };
        handed = (state.standing_claims)
            .stand_while((owner, session_id), claim, waiting)
            .await;
        // Nothing handed is no answer: the claim's own statement looks again.
        if matches!(&handed, Some(Ok(rows)) if rows.is_empty()) {
            handed = None;
        }
    }
}

/// `PUT /v1/calls/{call_id}/reply` (owner)
#[utoipa::path(
    put,
    path = "/v1/calls/{call_id}/reply",
    tag = "calls",
    security(("bearer" = [])),
    params(("call_id" = String, Path, description = "The claimed call's id.")),
    request_body = ReplyRequest,
    responses(
        (status = 204, description = "The call is answered."),
        (status = 400, description = "`bad_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 409, description = "`wrong_call_state`", body = ErrorBody),
        (status = 410, description = "`lease_expired`, `session_ended`", body = ErrorBody),
        (status = 413, description = "`body_too_large`, `reply_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited` (not for the first reply to a call this token claimed on this replica, within its lease), `bytes_quota_exceeded`, `too_many_large_bodies`", body = ErrorBody),
        (status = 503, description = "`unavailable`, `busy`", body = ErrorBody),
    )
)]
pub async fn reply(
    State(state): State<AppState>,
    auth: Charged<VerifiedOwner>,
    Path(call_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    // The first reply to a call this token claimed is not refused by a rate (`admitted`).
    let (auth, _exempt) = auth
        .admit_work(&state, Work::Reply, call_id.parse().ok())
        .await?;
    let call_id = path_id(&call_id, "call")?;
    let limits = &state.config.limits;
    let cap = limits.body_cap_for(limits.max_reply_envelope_bytes);
    let large = admit(&state, auth.owner_id(), &headers, cap)?;
    if large.is_some() {
        // The row before a large body: a dead token never costs one. A small body is read
        // first, and the store's statement checks the row, one round trip fewer per call.
        auth.require_live(&state).await?;
    }
    let request: ReplyRequest = read_json(&headers, body, cap, timeout(&state)).await?;
    store_reply(&state, auth.bearer(), call_id, request.envelope.0).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A reply, as `PUT …/reply` and the channel both store it.
pub(crate) async fn store_reply(
    state: &AppState,
    bearer: Bearer,
    call_id: CallId,
    envelope: Vec<u8>,
) -> ApiResult<()> {
    let limits = &state.config.limits;
    if envelope.is_empty() {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "The reply envelope is empty.",
        ));
    }
    if envelope.len() > limits.max_reply_envelope_bytes {
        return Err(ApiError::new(
            ErrorCode::ReplyTooLarge,
            format!(
                "A reply envelope is at most {} bytes.",
                limits.max_reply_envelope_bytes
            ),
        ));
    }
    let bytes = envelope.len();
    let reserved = held_quota(state, bearer.owner_id, bytes)?;
    let now = now_ms();
    let owner = bearer.owner_id;
    let until = now.saturating_add_ms(limits.max_call_ttl_s.saturating_mul(1000));
    // A read standing for this call here is read for after the reply, in the reply's write.
    let stored = match state.standing_reads.take((owner, call_id)) {
        Some(read) => {
            state.metrics.read_handed();
            // Recorded before the store hands the reader the answer, whose delivery ends it.
            state.admitted.answered(owner, call_id, until);
            let stored = (state.store)
                .reply_call_then_read(bearer, call_id, envelope, now, read)
                .await;
            if stored.is_err() {
                state.admitted.delivered(owner, call_id);
            }
            stored
        }
        None => {
            let stored = state.store.reply_call(bearer, call_id, envelope, now).await;
            if stored.is_ok() {
                state.admitted.answered(owner, call_id, until);
            }
            stored
        }
    };
    // Whatever the store said, a later reply or cancel of the call is not the first.
    state.admitted.settled(owner, call_id);
    match stored {
        Err(StoreError::NotFound) => return Err(ApiError::not_found("call")),
        Err(StoreError::LeaseExpired) => {
            state.hub.wake(Topic::Call(bearer.owner_id, call_id));
            return Err(StoreError::LeaseExpired.into());
        }
        other => other?,
    }
    reserved.keep();
    state.hub.wake(Topic::Call(bearer.owner_id, call_id));
    state.metrics.reply_stored();
    tracing::debug!(call = %call_id, bytes, "reply stored");
    Ok(())
}

/// `POST /v1/calls/{call_id}/cancel` (the call's MCP token, or the owner)
#[utoipa::path(
    post,
    path = "/v1/calls/{call_id}/cancel",
    tag = "calls",
    security(("bearer" = [])),
    params(("call_id" = String, Path, description = "The call's id.")),
    request_body = CancelRequest,
    responses(
        (status = 204, description = "The call is cancelled."),
        (status = 400, description = "`bad_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 409, description = "`wrong_call_state`", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited` (not for the first cancel of a call this token claimed on this replica, within its lease)", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    auth: Charged<AnyAuth>,
    Path(call_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    // The first cancel of a call this token claimed is not refused by a rate (`admitted`).
    let (auth, _exempt) = auth
        .admit_work(&state, Work::Cancel, call_id.parse().ok())
        .await?;
    let call_id = path_id(&call_id, "call")?;
    let request: CancelRequest = read_json(
        &headers,
        body,
        state.config.limits.max_small_body_bytes,
        timeout(&state),
    )
    .await?;
    cancel_call(&state, auth.bearer(), call_id, request.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A cancel, as `POST …/cancel` and the channel both make it, by a token already checked.
pub(crate) async fn cancel_call(
    state: &AppState,
    bearer: Bearer,
    call_id: CallId,
    reason: CancelReason,
) -> ApiResult<()> {
    // A reason this build does not know parses (as `Unknown`) but is not stored.
    if !CancelReason::ALL.contains(&reason) {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "The cancel reason is not one this relay knows.",
        ));
    }
    let cancelled = state
        .store
        .cancel_call(bearer, call_id, reason, now_ms())
        .await;
    // Whatever the store said, a later reply or cancel of the call is not the first.
    state.admitted.settled(bearer.owner_id, call_id);
    match cancelled {
        Err(StoreError::NotFound) => return Err(ApiError::not_found("call")),
        other => other?,
    }
    state.hub.wake(Topic::Call(bearer.owner_id, call_id));
    tracing::debug!(call = %call_id, reason = reason.as_str(), "call cancelled");
    Ok(())
}
