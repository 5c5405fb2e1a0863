//! `GET /v1/channel`: the session channel, a WebSocket on which a tab claims, answers and
//! cancels calls (`sealpost_protocol::api::channel`). Each operation runs exactly as its HTTP
//! endpoint does (`calls::claim_calls`, `store_reply`, `cancel_call`), token checks and rates
//! included, and is answered with the status and body HTTP would give. The channel only saves
//! the browser a `fetch` per step; nothing can be done on it that HTTP does not allow.
//!
//! - The upgrade request carries the owner token as a subprotocol; its row is read before the
//!   upgrade, so a dead or foreign token never gets a socket. Every operation checks the row
//!   again (inside the store's statement, as over HTTP), and the first 401 closes the channel.
//! - On a relay that lists app origins (`--app-origin`), an upgrade from a page of another
//!   origin than those and the relay's own is refused 403 `origin_not_allowed` by the Origin
//!   gate (`cors.rs`) before this handler runs: browsers apply no CORS to a WebSocket, so the
//!   gate is what holds such pages to the list here.
//! - An owner holds at most `max_channels_per_owner` channels (0: none are offered), and a
//!   channel keeps its connection's place under the connection caps while it is open.
//! - Every message is charged to the rates first, malformed or not; a refused one is answered
//!   with the rate's refusal unless it is a reply or cancel of a call this token claimed
//!   (`admitted`: limits admit work at the door), which a look at its op and call id tells
//!   without allocating its envelope. Every refusal is timed in the request metrics, as over
//!   HTTP. A message is at most the largest reply body; a large one takes a place under
//!   `max_large_bodies_in_flight` (and its owner's share of them) while it is parsed, and a
//!   reply keeps it for as long as its operation runs; a channel runs at most
//!   [`MAX_IN_FLIGHT`] operations at once (past either, 503 `busy`); it is always read, so a
//!   close is seen at once and what still runs is dropped with it. A channel with nothing
//!   running and nothing asked since its last answer for twice the longest long-poll is
//!   closed; writes that make no progress drop it (the connection's write timeout); at
//!   shutdown what runs finishes and is answered, then the channel closes.

use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::response::{IntoResponse as _, Response};
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt as _, StreamExt as _};
use sealpost_protocol::api::channel::{CHANNEL_PROTOCOL, ChannelAnswer, ChannelOp, ChannelRequest};
use sealpost_protocol::api::{ErrorBody, ErrorCode};
use sealpost_protocol::ids::CallId;
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::auth::{VerifiedOwner, channel_owner, charge, exempt};
use super::calls::{cancel_call, claim_calls, store_reply};
use super::error::{ApiError, ApiResult};
use super::state::AppState;
use crate::admitted::Work;
use crate::caps::LargePlace;
use crate::serve::ConnectionHold;
use crate::store::Bearer;

/// Operations one channel runs at once.
pub(crate) const MAX_IN_FLIGHT: usize = 8;

/// `GET /v1/channel` (owner, as the subprotocol `sealpost.bearer.<token>`)
#[utoipa::path(
    get,
    path = "/v1/channel",
    tag = "calls",
    security(("bearer" = [])),
    responses(
        (status = 101, description = "The session channel is open: a WebSocket speaking `sealpost.v1` (docs/RELAY.md, \"The session channel\")."),
        (status = 400, description = "`bad_request`: not a WebSocket upgrade, or `sealpost.v1` not offered.", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`: this relay offers no channel (`--max-channels-per-owner 0`); use HTTP.", body = ErrorBody),
        (status = 429, description = "`too_many_channels`, `rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub(crate) async fn open(
    State(state): State<AppState>,
    hold: Option<Extension<ConnectionHold>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    if state.config.limits.max_channels_per_owner == 0 {
        return ApiError::new(
            ErrorCode::NotFound,
            "This relay offers no session channel; use the HTTP endpoints.",
        )
        .into_response();
    }
    let offered = upgrade
        .requested_protocols()
        .any(|protocol| protocol.as_bytes() == CHANNEL_PROTOCOL.as_bytes());
    let owner = match channel_owner(&state, upgrade.requested_protocols()).await {
        Ok(owner) => owner,
        Err(error) => return error.into_response(),
    };
    if !offered {
        return ApiError::new(
            ErrorCode::BadRequest,
            format!("Offer the WebSocket subprotocol {CHANNEL_PROTOCOL}."),
        )
        .into_response();
    }
    let Some(place) = state.channels.try_acquire(owner.owner_id()) else {
        return ApiError::quota(
            ErrorCode::TooManyChannels,
            format!(
                "You already have {} channels open, the most allowed; this tab can use HTTP.",
                state.config.limits.max_channels_per_owner
            ),
            60,
        )
        .into_response();
    };
    let limits = &state.config.limits;
    let largest = limits.body_cap_for(limits.max_reply_envelope_bytes);
    upgrade
        .protocols([CHANNEL_PROTOCOL])
        .max_message_size(largest)
        .max_frame_size(largest)
        // A channel waits far more than it talks: a small read buffer (it grows for a large
        // message) and no write buffer (each answer is written and flushed at once) keep an
        // idle channel at about 11 KiB instead of 135 KiB with the defaults (docs/RELAY.md,
        // "The whole loop, and idle channels").
        .read_buffer_size(CHANNEL_READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .on_upgrade(move |socket| async move {
            let _held = (hold, place, state.metrics.channel_opened());
            serve(socket, state, owner).await;
        })
}

/// Why a channel closed, as its close frame says.
enum Closed {
    /// The client closed it, or the socket failed: nothing to say.
    Gone,
    Shutdown,
    Idle,
    Unauthorized,
    Binary,
    Unreadable,
}

async fn serve(socket: WebSocket, state: AppState, owner: VerifiedOwner) {
    let bearer = owner.bearer();
    let (mut sink, mut stream) = socket.split();
    let mut running = FuturesUnordered::new();
    let idle = Duration::from_millis(state.config.limits.max_wait_ms.saturating_mul(2));
    let mut quiet_until = Instant::now() + idle;
    let closed = loop {
        tokio::select! {
            biased;
            () = state.shutdown.cancelled() => break Closed::Shutdown,
            Some(answer) = running.next(), if !running.is_empty() => {
                let answer: ChannelAnswer = answer;
                quiet_until = Instant::now() + idle;
                if send(&mut sink, &answer).await.is_err() {
                    break Closed::Gone;
                }
                if answer.status == 401 {
                    state.rate.forget_token(bearer.token_id);
                    break Closed::Unauthorized;
                }
            }
            // Always read, so a close is seen at once (and what runs is dropped with it).
            received = stream.next() => match received {
                Some(Ok(Message::Text(text))) => {
                    let received = std::time::Instant::now();
                    quiet_until = Instant::now() + idle;
                    match admit(&state, &bearer, &text, running.len()) {
                        Ok((request, place)) => {
                            running.push(run(state.clone(), owner, request, place));
                        }
                        Err((refused, route)) => {
                            state
                                .metrics
                                .request("WS", route, refused.status, received.elapsed());
                            if send(&mut sink, &refused).await.is_err() {
                                break Closed::Gone;
                            }
                        }
                    }
                }
                Some(Ok(Message::Binary(_))) => break Closed::Binary,
                // Browsers send no pings; a ping does not keep an idle channel open.
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | None => break Closed::Gone,
                Some(Err(error)) => {
                    tracing::debug!(%error, "channel read failed");
                    break Closed::Unreadable;
                }
            },
            () = tokio::time::sleep_until(quiet_until), if running.is_empty() => break Closed::Idle,
        }
    };
    if let Closed::Shutdown = closed {
        // As a connection's request in flight: what runs finishes (a waiting claim answers at
        // once at shutdown) and is answered, within the relay's shutdown deadline.
        while let Some(answer) = running.next().await {
            if send(&mut sink, &answer).await.is_err() {
                return;
            }
        }
    }
    // Otherwise what still runs is dropped with the channel, as a closed connection drops its
    // request: a claim waiting for a call claims nothing.
    drop(running);
    let (code, reason) = match closed {
        Closed::Gone => return,
        Closed::Shutdown => (close_code::AWAY, "The relay is shutting down."),
        Closed::Idle => (close_code::NORMAL, "Nothing was asked for too long."),
        Closed::Unauthorized => (close_code::POLICY, "The token is no longer valid."),
        Closed::Binary => (close_code::UNSUPPORTED, "The channel takes text messages."),
        Closed::Unreadable => (
            close_code::SIZE,
            "A message could not be read (too large or malformed).",
        ),
    };
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = sink.send(Message::Close(Some(frame))).await;
}

async fn send(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    answer: &ChannelAnswer,
) -> Result<(), axum::Error> {
    let text = serde_json::to_string(answer).expect("answers serialise");
    sink.send(Message::Text(text.into())).await
}

/// Lets a message in, as a request is let in over HTTP: charged to the token's and owner's
/// rates before anything else (a malformed message too), and refused by them unless it is a
/// reply or cancel the ledger of admitted work exempts; refused with 503 `busy` past
/// [`MAX_IN_FLIGHT`], and when a large message finds no place under
/// `max_large_bodies_in_flight` (429 `too_many_large_bodies` when its owner's share
/// `max_large_bodies_per_owner` is full), then parsed. A reply keeps its place until its
/// operation ends; other operations give it back once parsed. A refusal comes with the route
/// it is timed under.
fn admit(
    state: &AppState,
    bearer: &Bearer,
    text: &str,
    in_flight: usize,
) -> Result<(ChannelRequest, Option<LargePlace>), (ChannelAnswer, &'static str)> {
    let id = leading_id(text);
    let refused = |error| (refusal(id, error), Peek::of(text).route());
    // With the rate refused, only a reply or cancel that completes admitted work goes on, and
    // only as the message it was judged by.
    let mut exempted = None;
    if let Err(limited) = charge(state, bearer) {
        let peek = Peek::of(text);
        match peek.work() {
            Some((work, call)) if exempt(state, bearer, work, call) => {
                exempted = Some((work, call, limited));
            }
            _ => return Err((refusal(id, limited), peek.route())),
        }
    }
    if in_flight >= MAX_IN_FLIGHT {
        return Err(refused(ApiError::busy(
            "This channel runs as many operations as it may at once; retry.",
        )));
    }
    let place = state
        .large_bodies
        .admit_len(bearer.owner_id, text.len())
        .map_err(|no_place| refused(super::body::no_place(state, no_place)))?;
    let request: ChannelRequest = serde_json::from_str(text).map_err(|error| {
        refused(ApiError::new(
            ErrorCode::BadRequest,
            format!(
                "The message is not a channel request: {}",
                super::error::bounded(&error.to_string())
            ),
        ))
    })?;
    if let Some((work, call, limited)) = exempted
        && work_of(&request.op) != Some((work, call))
    {
        return Err(refused(limited));
    }
    // Only a reply's envelope outlives the parse; a claim or cancel is a few bytes once parsed,
    // so it gives its place back now rather than hold it while it waits.
    let place = match request.op {
        ChannelOp::Reply { .. } => place,
        ChannelOp::Claim { .. } | ChannelOp::Cancel { .. } => None,
    };
    Ok((request, place))
}

/// The id a message starts with (`{"id": 7, …`, as every request is written), without parsing
/// the rest; 0 when it does not start so.
fn leading_id(text: &str) -> u32 {
    let digits = text
        .trim_start()
        .strip_prefix('{')
        .map(str::trim_start)
        .and_then(|rest| rest.strip_prefix("\"id\""))
        .map(str::trim_start)
        .and_then(|rest| rest.strip_prefix(':'))
        .map(str::trim_start)
        .unwrap_or_default();
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().unwrap_or(0)
}

/// The read buffer of a channel's socket.
const CHANNEL_READ_BUFFER_BYTES: usize = 4 * 1024;
/// The route a channel message is timed under: its operation's, or the channel's when it is
/// not known.
const CHANNEL_ROUTE: &str = "/v1/channel";
const CLAIM_ROUTE: &str = "/v1/channel claim";
const REPLY_ROUTE: &str = "/v1/channel reply";
const CANCEL_ROUTE: &str = "/v1/channel cancel";

/// The admitted work an operation would complete, with its call.
fn work_of(op: &ChannelOp) -> Option<(Work, CallId)> {
    match op {
        ChannelOp::Claim { .. } => None,
        ChannelOp::Reply { call_id, .. } => Some((Work::Reply, *call_id)),
        ChannelOp::Cancel { call_id, .. } => Some((Work::Cancel, *call_id)),
    }
}

/// A look at a message's operation and call id, without parsing the rest into memory (an
/// envelope is skipped, not decoded), so a message its rate refused costs no allocation to
/// judge. `None` when the message does not say them plainly.
#[derive(Debug, Default, Deserialize)]
struct Peek {
    #[serde(default)]
    op: Option<PeekOp>,
    #[serde(default)]
    call_id: Option<CallId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PeekOp {
    Claim,
    Reply,
    Cancel,
    #[serde(other)]
    Other,
}

impl Peek {
    fn of(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    fn route(&self) -> &'static str {
        match self.op {
            Some(PeekOp::Claim) => CLAIM_ROUTE,
            Some(PeekOp::Reply) => REPLY_ROUTE,
            Some(PeekOp::Cancel) => CANCEL_ROUTE,
            Some(PeekOp::Other) | None => CHANNEL_ROUTE,
        }
    }

    fn work(&self) -> Option<(Work, CallId)> {
        match (self.op?, self.call_id?) {
            (PeekOp::Reply, call) => Some((Work::Reply, call)),
            (PeekOp::Cancel, call) => Some((Work::Cancel, call)),
            (PeekOp::Claim | PeekOp::Other, _) => None,
        }
    }
}

/// Runs one operation and answers it as HTTP would.
async fn run(
    state: AppState,
    owner: VerifiedOwner,
    request: ChannelRequest,
    _place: Option<LargePlace>,
) -> ChannelAnswer {
    let started = std::time::Instant::now();
    let route = match request.op {
        ChannelOp::Claim { .. } => CLAIM_ROUTE,
        ChannelOp::Reply { .. } => REPLY_ROUTE,
        ChannelOp::Cancel { .. } => CANCEL_ROUTE,
    };
    let answer = match perform(&state, owner, request.op).await {
        Ok((status, body)) => ChannelAnswer {
            id: request.id,
            status,
            body,
            retry_after_s: None,
        },
        Err(error) => refusal(request.id, error),
    };
    state
        .metrics
        .request("WS", route, answer.status, started.elapsed());
    tracing::debug!(
        route,
        status = answer.status,
        ms = started.elapsed().as_secs_f64() * 1000.0,
        "channel request"
    );
    answer
}

async fn perform(state: &AppState, owner: VerifiedOwner, op: ChannelOp) -> ApiResult<(u16, Value)> {
    let bearer = owner.bearer();
    match op {
        ChannelOp::Claim {
            session_id,
            wait_ms,
            max,
        } => {
            let claimed = claim_calls(state, bearer, session_id, wait_ms, u64::from(max)).await?;
            Ok((
                200,
                serde_json::to_value(claimed).expect("answers serialise"),
            ))
        }
        ChannelOp::Reply { call_id, envelope } => {
            store_reply(state, bearer, call_id, envelope.0).await?;
            Ok((204, Value::Null))
        }
        ChannelOp::Cancel { call_id, reason } => {
            // The store's cancel does not check the token: read its row first, as HTTP does.
            owner.require_live(state).await?;
            cancel_call(state, bearer, call_id, reason).await?;
            Ok((204, Value::Null))
        }
    }
}

fn refusal(id: u32, error: ApiError) -> ChannelAnswer {
    ChannelAnswer {
        id,
        status: error.code.http_status(),
        retry_after_s: error.retry_after_s(),
        body: serde_json::to_value(error.into_body()).expect("answers serialise"),
    }
}
