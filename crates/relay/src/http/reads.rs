//! Reading a call: `GET /v1/calls/{call_id}` (the plugin's long-poll for its answer), and the
//! wait a post with `wait_ms` makes after storing its call (`calls::post`), which is the same
//! read without a second request.
//!
//! A wait subscribes to the call's topic *before* each look at the store, so a wake-up between
//! the look and the wait is not lost, and stands for the call while it waits: a reply to the
//! call on this replica reads for it after storing the answer (`crate::handoff`), so the wait
//! is answered without a wake-up and a statement of its own. The first read of an answered
//! call marks it delivered.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse as _, Response};
use sealpost_protocol::api::{CallStatusResponse, ErrorBody, TokenKind};
use sealpost_protocol::ids::{Base64Bytes, CallId, TokenId};
use sealpost_time::UnixMillis;
use tokio::time::{Duration, Instant};

use super::auth::{Charged, VerifiedAny};
use super::calls::{LongPollShare, hold_long_poll_place, wait_ms};
use super::error::{ApiError, ApiResult};
use super::path_id;
use super::state::AppState;
use crate::admitted::Work;
use crate::caps::KeyedSlot;
use crate::clock::now_ms;
use crate::metrics::LongPoll;
use crate::store::{Bearer, CallView, ReadFor, StoreResult};
use crate::wake::{Subscription, Topic};

/// `GET /v1/calls/{call_id}?wait_ms=` (the call's MCP token, or the owner). Waits while the
/// call is pending or claimed; the first read of an answer marks the call delivered.
#[utoipa::path(
    get,
    path = "/v1/calls/{call_id}",
    tag = "calls",
    security(("bearer" = [])),
    params(
        ("call_id" = String, Path, description = "The call's id."),
        ("wait_ms" = Option<u64>, Query, description = "Long-poll up to this long while the call is pending or claimed (default 0)."),
    ),
    responses(
        (status = 200, description = "The call's state, with the reply once answered.", body = CallStatusResponse),
        (status = 400, description = "`bad_request`, `wait_too_long`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited` (not for an MCP token's first read of a call answered on this replica), `too_many_long_polls`", body = ErrorBody),
        (status = 503, description = "`unavailable`, `busy`", body = ErrorBody),
    )
)]
pub async fn read(
    State(state): State<AppState>,
    auth: Charged<VerifiedAny>,
    Path(call_id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    // The plugin's first read of a call answered here is not refused by a rate (`admitted`).
    let (auth, mut exempt) = auth
        .admit_work(&state, Work::Read, call_id.parse().ok())
        .await?;
    let bearer = auth.bearer();
    let call_id = path_id(&call_id, "call")?;
    let deadline = Instant::now() + Duration::from_millis(wait_ms(&state, &query)?);
    let subscription = state.hub.subscribe(Topic::Call(bearer.owner_id, call_id));
    let waited = Wait {
        state: &state,
        bearer,
        call_id,
        deadline,
        subscription,
        look_first: true,
        share: LongPollShare::Refuse,
    }
    .until_final(|read| {
        if exempt.is_some() || handed_over(&bearer, read) {
            // The answer reached its pairing's token, or the exempt read reached the store: a
            // later read is not the first.
            state.admitted.delivered(bearer.owner_id, call_id);
        }
    })
    .await?;
    let Some((view, now)) = waited else {
        // Not this token's call to read: with its rate spent, it hears only that.
        return Err(exempt
            .take()
            .map_or_else(|| ApiError::not_found("call"), |exempt| exempt.refusal()));
    };
    let (answer, slot) = status_of(&state, &bearer, view, now)?;
    Ok(json_with(&answer, slot))
}

/// `answer` as JSON, holding a large reply's `slot` until it is sent.
pub(crate) fn json_with<T: serde::Serialize>(
    answer: &T,
    slot: Option<KeyedSlot<TokenId>>,
) -> Response {
    match slot {
        Some(slot) => super::body::json_holding(answer, slot),
        None => Json(answer).into_response(),
    }
}

/// Whether `read` handed a final state to the pairing's own token (which marks it delivered).
pub(crate) fn handed_over(bearer: &Bearer, read: &StoreResult<Option<CallView>>) -> bool {
    bearer.kind == TokenKind::Mcp && matches!(read, Ok(Some(view)) if view.state.is_final())
}

/// A wait for a call to leave pending and claimed.
pub(crate) struct Wait<'a> {
    pub state: &'a AppState,
    pub bearer: Bearer,
    pub call_id: CallId,
    pub deadline: Instant,
    /// Taken before the caller's last look at the call (or before it stored it).
    pub subscription: Subscription<'a>,
    /// False when the caller knows the call is not final and subscribed before it could change
    /// (a post that just stored it): the first look at the store is skipped.
    pub look_first: bool,
    /// What to do when the token's or owner's share of long-polls is full.
    pub share: LongPollShare,
}

impl Wait<'_> {
    /// Reads the call at each wake-up until it is final or the deadline passes, then answers
    /// what the last read found (`None`: not this token's call). `after_read` sees every read.
    /// With [`LongPollShare::Answer`] a full share ends the wait with `None`.
    pub async fn until_final(
        self,
        mut after_read: impl FnMut(&StoreResult<Option<CallView>>),
    ) -> ApiResult<Option<(CallView, UnixMillis)>> {
        let Self {
            state,
            bearer,
            call_id,
            deadline,
            subscription,
            mut look_first,
            share,
        } = self;
        let mut place = None;
        let _open = (deadline > Instant::now()).then(|| state.metrics.long_poll(LongPoll::Read));
        // What a reply read for this wait while it stood (see `crate::handoff`).
        let mut handed = None;
        loop {
            let notified = subscription.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = now_ms();
            let mut next_change_at = None;
            let read = match handed.take() {
                Some(read) => Some(read),
                None if std::mem::replace(&mut look_first, true) => {
                    Some(state.store.read_call(bearer, call_id, now).await)
                }
                None => None,
            };
            if let Some(read) = read {
                after_read(&read);
                let Some(view) = read? else { return Ok(None) };
                if view.state.is_final()
                    || Instant::now() >= deadline
                    || state.shutdown.is_cancelled()
                {
                    return Ok(Some((view, now)));
                }
                next_change_at = view.next_change_at;
            }
            if !hold_long_poll_place(state, &bearer, &mut place, share)? {
                return Ok(None);
            }
            // Wake at the call's own next change (expiry or lease end) too.
            let mut until = deadline
                .min(Instant::now() + Duration::from_millis(state.config.limits.fallback_poll_ms));
            if let Some(change_at) = next_change_at {
                until = until
                    .min(Instant::now() + Duration::from_millis(change_at.saturating_sub(now)));
            }
            let waiting = async {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(until) => {}
                    _ = state.shutdown.cancelled() => {}
                }
            };
            let read = |answer| ReadFor { bearer, answer };
            handed = (state.standing_reads)
                .stand_while((bearer.owner_id, call_id), read, waiting)
                .await;
        }
    }
}

/// The answer to a read that found `view`, and the place a large reply holds among its token's
/// few until it is sent (503 `busy` when they are all taken).
pub(crate) fn status_of(
    state: &AppState,
    bearer: &Bearer,
    view: CallView,
    now: UnixMillis,
) -> ApiResult<(CallStatusResponse, Option<KeyedSlot<TokenId>>)> {
    let large = view
        .reply
        .as_ref()
        .is_some_and(|r| r.len() > state.config.limits.large_body_bytes);
    let slot = if large {
        Some(
            state
                .large_replies
                .try_acquire(bearer.token_id)
                .ok_or_else(|| {
                    ApiError::busy(
                        "This token is being sent as many large replies as allowed at once; retry.",
                    )
                })?,
        )
    } else {
        None
    };
    let answer = CallStatusResponse {
        state: view.state,
        reply: view.reply.map(Base64Bytes),
        reason: view.reason,
        expires_at: view.expires_at,
        now_ms: now,
    };
    Ok((answer, slot))
}
