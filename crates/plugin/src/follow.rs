//! Following the tab while a client is connected: a long-poll on the pairing's session
//! (`GET /v1/pairings/{pair_id}/session?wait_ms=`) that the relay answers once the session or
//! its catalog changes. Each answer is checked like any look-up (`Plugin::trust_live`), which
//! refreshes the cached catalog and so sends `list_changed` when the tools changed: a client
//! hears of a tool granted or withdrawn in the tab without asking for the list again.
//!
//! It starts once this process has trusted a session (a `tools/list` or a call looked it up),
//! names that session and its catalog number as known, and waits again after every answer.
//! A relay that answers at once without waiting (one that predates the watch) is asked again
//! only every [`SLOW_POLL`]; errors back off up to [`MAX_BACKOFF`].

use std::sync::Arc;
use std::time::Duration;

use sealpost_protocol::ids::{PairId, SessionId};
use tokio::time::Instant;

use crate::Plugin;
use crate::relay::RelayClient;

/// How long one watch waits at the relay (below every relay's `--max-wait-ms`, at least 30 s).
const WATCH_WAIT: Duration = Duration::from_secs(25);
/// An unchanged answer sooner than this was not a wait: the relay does not watch.
const ANSWERED_AT_ONCE: Duration = Duration::from_secs(1);
/// How often a relay that does not watch is asked.
const SLOW_POLL: Duration = Duration::from_secs(30);
/// The first pause after a failure, doubled up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The session a process last trusted for a pairing, and its catalog number; `session: None`
/// when the relay said none is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Followed {
    pub pair_id: PairId,
    pub session: Option<(SessionId, u64)>,
}

/// Follows the pairing's session until the task is dropped.
pub(crate) async fn follow_the_tab(plugin: Arc<Plugin>) {
    let mut followed = plugin.followed.subscribe();
    if followed.wait_for(Option::is_some).await.is_err() {
        return;
    }
    let mut backoff = MIN_BACKOFF;
    loop {
        let Ok(code) = plugin.pairing() else {
            // Unpaired meanwhile: wait for a pairing to be trusted again.
            if followed.changed().await.is_err() {
                return;
            }
            continue;
        };
        let pair_id = code.secret().pair_id();
        let known = match *followed.borrow_and_update() {
            Some(f) if f.pair_id == pair_id => f.session,
            _ => None,
        };
        let relay = RelayClient::new(plugin.http.clone(), code.relay_origin(), code.mcp_token());
        let asked = Instant::now();
        let pause = match relay.watch_session(pair_id, known, WATCH_WAIT).await {
            Ok(Some(live)) => {
                backoff = MIN_BACKOFF;
                match plugin.trust_live(&code, &relay, &live) {
                    Ok(session) => {
                        let now = Some((session.session_id, session.catalog_seq));
                        (now == known && asked.elapsed() < ANSWERED_AT_ONCE).then_some(SLOW_POLL)
                    }
                    Err(failure) => {
                        tracing::debug!(?failure, "the watched session is not trusted");
                        plugin.followed.send_replace(Some(Followed {
                            pair_id,
                            session: Some((live.session_id, u64::MAX)),
                        }));
                        Some(SLOW_POLL)
                    }
                }
            }
            Ok(None) => {
                backoff = MIN_BACKOFF;
                let gone = Followed {
                    pair_id,
                    session: None,
                };
                plugin.followed.send_replace(Some(gone));
                (known.is_none() && asked.elapsed() < ANSWERED_AT_ONCE).then_some(SLOW_POLL)
            }
            Err(error) => {
                tracing::debug!(%error, "watching the session failed");
                let pause = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                Some(pause)
            }
        };
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
    }
}
