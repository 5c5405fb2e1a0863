//! The plugin's watch of its pairing: `GET /v1/pairings/{pair_id}/session` with `wait_ms`
//! answers once the live session is no longer the one the caller names (another session, none,
//! or a newer catalog update), or when the wait ends. It is how the plugin tells its MCP client
//! that the tools changed without being asked.
//!
//! Wake-ups: a session created on this replica wakes [`Topic::Pairing`]; a session ending wakes
//! [`Topic::Session`] on every replica; a catalog update wakes [`Topic::Session`] on this one.
//! Whatever another replica does without a wake-up here is seen at the next re-check, at most
//! `fallback_poll_ms` later.

use sealpost_protocol::ids::SessionId;
use tokio::time::{Duration, Instant};

use super::auth::AnyAuth;
use super::calls::{LongPollShare, hold_long_poll_place, query_number, query_value, wait_ms};
use super::error::{ApiError, ApiResult};
use super::sessions::catalog_update_header;
use super::state::AppState;
use crate::clock::now_ms;
use crate::metrics::LongPoll;
use crate::store::LiveSession;
use crate::wake::Topic;
use sealpost_protocol::api::ErrorCode;
use sealpost_protocol::ids::PairId;

/// What a look-up waits for: none (answer at once), or a change from what the caller knows.
pub(crate) struct Watch {
    wait: Duration,
    /// The live session the caller knows and its newest catalog update's number (0: none);
    /// `None`: it knows of no live session.
    known: Option<(SessionId, u64)>,
}

impl Watch {
    /// Reads `wait_ms`, `session_id` and `catalog_seq`.
    pub fn from_query(state: &AppState, query: &Option<String>) -> ApiResult<Self> {
        let wait = Duration::from_millis(wait_ms(state, query)?);
        let session = query_value(query, "session_id")
            .map(|text| {
                text.parse::<SessionId>().map_err(|_| {
                    ApiError::new(ErrorCode::BadRequest, "session_id is not a session id.")
                })
            })
            .transpose()?;
        let seq = query_number(query, "catalog_seq")?.unwrap_or(0);
        Ok(Self {
            wait,
            known: session.map(|session| (session, seq)),
        })
    }

    /// Whether `live` differs from what the caller knows.
    fn changed(&self, live: &Option<LiveSession>) -> bool {
        let seen = live.as_ref().map(|live| {
            let seq = live
                .catalog_update
                .as_deref()
                .and_then(catalog_update_header)
                .map_or(0, |(_, seq)| seq);
            (live.session_id, seq)
        });
        match (seen, self.known) {
            (Some((session, seq)), Some((known, known_seq))) => session != known || seq > known_seq,
            (seen, known) => seen.is_some() != known.is_some(),
        }
    }

    /// The pairing's live session once it differs from what the caller knows, or at the end of
    /// the wait, whichever comes first. A full share of long-polls answers at once.
    pub async fn until_changed(
        &self,
        state: &AppState,
        auth: &AnyAuth,
        pair_id: PairId,
    ) -> ApiResult<Option<LiveSession>> {
        let (owner, app) = (auth.owner_id(), auth.app_scope());
        let bearer = auth.bearer();
        let deadline = Instant::now() + self.wait;
        let pairing = state.hub.subscribe(Topic::Pairing(owner, pair_id));
        let session = self
            .known
            .map(|(session, _)| state.hub.subscribe(Topic::Session(owner, session)));
        let mut place = None;
        let mut open = None;
        loop {
            // Enabled before the look, so a change between the look and the wait still wakes.
            let created = pairing.notify().notified();
            tokio::pin!(created);
            created.as_mut().enable();
            let ended = session.as_ref().map(|s| s.notify().notified());
            let mut ended = std::pin::pin!(ended);
            if let Some(ended) = ended.as_mut().as_pin_mut() {
                ended.enable();
            }
            let live = state
                .store
                .live_session(owner, app, pair_id, now_ms())
                .await?;
            if self.changed(&live)
                || Instant::now() >= deadline
                || state.shutdown.is_cancelled()
                || !hold_long_poll_place(state, &bearer, &mut place, LongPollShare::Answer)?
            {
                return Ok(live);
            }
            open.get_or_insert_with(|| state.metrics.long_poll(LongPoll::Watch));
            let fallback =
                Instant::now() + Duration::from_millis(state.config.limits.fallback_poll_ms);
            let on_session = async {
                match ended.as_mut().as_pin_mut() {
                    Some(ended) => ended.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut created => {}
                () = on_session => {}
                () = tokio::time::sleep_until(deadline.min(fallback)) => {}
                () = state.shutdown.cancelled() => {}
            }
        }
    }
}
