//! The live session as the plugin trusts it: the relay's answer checked against the pairing.
//!
//! The relay returns the hello byte for byte; the plugin checks its tag, pairing and expiry
//! (seal's `verify_hello`, by the relay's clock), that it has not expired by the plugin's own
//! clock either (a relay's `now_ms` is not trusted to make an old hello live again), that the
//! `session_id` the relay names in JSON is the one inside the hello, and only then derives keys. Keys are kept per session id, so calls in one
//! session share one ephemeral key and the executor's key cache stays small.
//!
//! A live session's tool list can change without a new session: the relay then hands back the
//! tab's newest catalog update beside the hello. The plugin keeps, per session, the highest
//! numbered catalog it has opened and never goes back: an older update, or none at all after a
//! newer one, leaves the list as it is (the relay cannot roll it back); an update that does not
//! open is ignored. Either way the tab still checks every call against the person's grants.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealpost_protocol::api::LiveSessionResponse;
use sealpost_protocol::content::{Catalog, CatalogEntry};
use sealpost_protocol::ids::{PairId, SessionId};
use sealpost_protocol::limits::CLOCK_SKEW_MS;
use sealpost_seal::{PairingSecret, PluginSession, SealError, open_catalog_update, verify_hello};
use sealpost_time::UnixMillis;

/// A session the plugin may seal calls to.
#[derive(Debug, Clone)]
pub struct TrustedSession {
    /// The session's id (from the verified hello).
    pub session_id: SessionId,
    /// When the session ends (from the verified hello).
    pub expires_at_ms: UnixMillis,
    /// The relay's clock when it answered.
    pub relay_now_ms: UnixMillis,
    /// When the tab last polled, per the relay (advisory).
    pub claimer_seen_at_ms: Option<UnixMillis>,
    /// The tools the session offers: its newest catalog (the hello's, or a later update's).
    pub tools: Vec<CatalogEntry>,
    /// Keys for this session.
    pub keys: Arc<PluginSession>,
}

/// Why a session the relay returned cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The hello did not verify under this pairing (wrong tag, pairing, layout or expired).
    #[error("the session's hello does not verify ({0})")]
    Hello(&'static str),
    /// The hello ended more than the clock skew ago by this computer's clock, whatever time
    /// the relay says it is.
    #[error("the session's hello expired by this computer's clock")]
    ExpiredLocally,
    /// The relay named one session in JSON and returned another's hello.
    #[error("the relay named a session that its hello does not carry")]
    SessionMismatch,
    /// The hello's catalog is not a catalog.
    #[error("the session's catalog is malformed")]
    Catalog,
}

/// The session this process last trusted, so the next call can seal to it without a look-up
/// while the look-up could not tell it anything new: the same pairing, the tool listed, the
/// tab seen within the absence window by the relay's clock carried forward, and the session
/// lasting past the call. Whatever changed since, the relay says at the post (a session that
/// ended answers 404 or 410, and the call looks up again), and a call still pending after a
/// progress step looks up again too (docs/PLUGIN.md, "A call").
#[derive(Debug, Default)]
pub struct LastSession(Mutex<Option<LookedUp>>);

#[derive(Debug)]
struct LookedUp {
    pair_id: PairId,
    session: TrustedSession,
    at: Instant,
}

impl LastSession {
    /// Keeps `session`, just trusted for `pair_id`.
    pub fn remember(&self, pair_id: PairId, session: &TrustedSession) {
        *self.0.lock().expect("not poisoned") = Some(LookedUp {
            pair_id,
            session: session.clone(),
            at: Instant::now(),
        });
    }

    /// The last session, its relay clock moved on by the time since, when a call of `tool`
    /// may seal to it without a look-up: the tab seen within `tab_absent_after` and the
    /// session lasting `needed_ms` more, both by that clock.
    pub fn reusable(
        &self,
        pair_id: PairId,
        tool: &str,
        tab_absent_after: Duration,
        needed_ms: u64,
    ) -> Option<TrustedSession> {
        let last = self.0.lock().expect("not poisoned");
        let last = last.as_ref().filter(|last| last.pair_id == pair_id)?;
        let mut session = last.session.clone();
        session.relay_now_ms = session
            .relay_now_ms
            .saturating_add_ms(last.at.elapsed().as_millis() as u64);
        let now = session.relay_now_ms;
        let tab_seen = session
            .claimer_seen_at_ms
            .is_some_and(|seen| now.saturating_sub(seen) <= tab_absent_after.as_millis() as u64);
        let lasts = session.expires_at_ms > now.saturating_add_ms(needed_ms);
        let listed = session.tools.iter().any(|entry| entry.name == tool);
        (tab_seen && lasts && listed).then_some(session)
    }
}

/// Keys per session id, so each session draws one ephemeral key per process, and the newest
/// catalog the session has shown.
#[derive(Debug, Default)]
pub struct SessionKeysCache(Mutex<Option<Current>>);

/// The session the plugin last trusted.
#[derive(Debug)]
struct Current {
    session_id: SessionId,
    keys: Arc<PluginSession>,
    /// The highest catalog number opened (0: the hello's) and its tools.
    seq: u64,
    tools: Vec<CatalogEntry>,
}

impl SessionKeysCache {
    /// Checks `live` against the pairing and returns the session to seal to. `local_now` is
    /// this computer's clock.
    pub fn trust(
        &self,
        secret: &PairingSecret,
        live: &LiveSessionResponse,
        local_now: UnixMillis,
    ) -> Result<TrustedSession, SessionError> {
        let relay_now_ms = live.now_ms;
        let hello = verify_hello(secret, &live.hello.0, relay_now_ms)
            .map_err(|e: SealError| SessionError::Hello(e.code()))?;
        if hello.expires_at_ms().saturating_add_ms(CLOCK_SKEW_MS) < local_now {
            return Err(SessionError::ExpiredLocally);
        }
        let session_id = *hello.session_id();
        if session_id != live.session_id {
            return Err(SessionError::SessionMismatch);
        }
        let mut cached = self.0.lock().expect("not poisoned");
        let current = match cached.take() {
            // The same session: its hello, keys and newest catalog are already known.
            Some(current) if current.session_id == session_id => current,
            _ => {
                let catalog: Catalog =
                    serde_json::from_slice(hello.catalog()).map_err(|_| SessionError::Catalog)?;
                Current {
                    session_id,
                    keys: Arc::new(
                        PluginSession::start(secret, &hello, &mut rand::rng())
                            .map_err(|e| SessionError::Hello(e.code()))?,
                    ),
                    seq: 0,
                    tools: catalog.tools,
                }
            }
        };
        let current = cached.insert(current);
        match &live.catalog_update {
            Some(update) => match open_catalog_update(secret, &hello, &update.0) {
                Ok(update) if update.seq() > current.seq => {
                    match serde_json::from_slice::<Catalog>(update.catalog()) {
                        Ok(newer) => {
                            current.seq = update.seq();
                            current.tools = newer.tools;
                        }
                        Err(_) => tracing::warn!(
                            seq = update.seq(),
                            "a catalog update that is not a catalog: ignored"
                        ),
                    }
                }
                Ok(update) if update.seq() < current.seq => tracing::warn!(
                    seq = update.seq(),
                    kept = current.seq,
                    "the relay handed back an older catalog update: ignored"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    code = error.code(),
                    "a catalog update that does not open: ignored"
                ),
            },
            None if current.seq > 0 => tracing::warn!(
                kept = current.seq,
                "the relay left out the session's catalog update: the newer list is kept"
            ),
            None => {}
        }
        Ok(TrustedSession {
            session_id,
            expires_at_ms: hello.expires_at_ms(),
            relay_now_ms,
            claimer_seen_at_ms: live.claimer_seen_at,
            tools: current.tools.clone(),
            keys: current.keys.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use sealpost_protocol::content::ToolKind;
    use sealpost_protocol::ids::Base64Bytes;
    use sealpost_seal::BrowserSession;

    use super::*;

    const NOW: UnixMillis = UnixMillis::from_ms(1_800_000_000_000);

    fn catalog(names: &[&str]) -> Vec<u8> {
        let tools = names
            .iter()
            .map(|name| CatalogEntry {
                name: (*name).into(),
                description: "d".into(),
                input_schema: serde_json::json!({"type": "object"}),
                kind: ToolKind::Read,
                builtin: false,
            })
            .collect();
        serde_json::to_vec(&Catalog { tools }).unwrap()
    }

    struct Tab {
        secret: PairingSecret,
        session: BrowserSession,
        live: LiveSessionResponse,
    }

    fn tab(secret: &PairingSecret, names: &[&str]) -> Tab {
        let session_id = SessionId::from_bytes(rand::random());
        let (session, hello) = BrowserSession::start(
            secret,
            session_id,
            NOW,
            NOW.saturating_add_ms(3_600_000),
            &catalog(names),
            &mut rand::rng(),
        )
        .unwrap();
        let live = LiveSessionResponse {
            session_id,
            hello: Base64Bytes(hello),
            expires_at: NOW.saturating_add_ms(3_600_000),
            claimer_seen_at: Some(NOW),
            plugin_seen_at: None,
            catalog_update: None,
            now_ms: NOW,
        };
        Tab {
            secret: PairingSecret::from_bytes(*secret.expose()),
            session,
            live,
        }
    }

    impl Tab {
        fn with_update(&self, seq: u64, names: &[&str]) -> LiveSessionResponse {
            let update = self
                .session
                .seal_catalog_update(seq, NOW, &catalog(names), &mut rand::rng())
                .unwrap();
            LiveSessionResponse {
                catalog_update: Some(Base64Bytes(update)),
                ..self.live.clone()
            }
        }
    }

    fn names(session: &TrustedSession) -> Vec<String> {
        session.tools.iter().map(|t| t.name.clone()).collect()
    }

    #[test]
    fn the_newest_catalog_wins_and_the_relay_cannot_roll_it_back() {
        let secret = PairingSecret::generate(&mut rand::rng());
        let tab = tab(&secret, &["a"]);
        let cache = SessionKeysCache::default();
        let trust = |live: &LiveSessionResponse| cache.trust(&tab.secret, live, NOW).unwrap();
        assert_eq!(names(&trust(&tab.live)), ["a"]);
        let second = tab.with_update(2, &["a", "b"]);
        assert_eq!(names(&trust(&second)), ["a", "b"]);
        assert_eq!(
            names(&trust(&tab.with_update(1, &["a"]))),
            ["a", "b"],
            "an older update is refused"
        );
        assert_eq!(
            names(&trust(&tab.live)),
            ["a", "b"],
            "an update left out is not a way back to the hello's list"
        );
        let keys = trust(&second).keys;
        assert!(
            Arc::ptr_eq(&keys, &trust(&tab.with_update(3, &["c"])).keys),
            "an update keeps the session's keys"
        );
        assert_eq!(names(&trust(&tab.live)), ["c"]);

        // A new session starts from its own hello.
        let next = self::tab(&secret, &["z"]);
        assert_eq!(
            names(&cache.trust(&next.secret, &next.live, NOW).unwrap()),
            ["z"]
        );
    }

    #[test]
    fn an_update_that_does_not_open_for_this_session_is_ignored() {
        let secret = PairingSecret::generate(&mut rand::rng());
        let tab = tab(&secret, &["a"]);
        let cache = SessionKeysCache::default();
        let mut tampered = tab.with_update(1, &["evil"]);
        if let Some(update) = tampered.catalog_update.as_mut() {
            let last = update.0.len() - 1;
            update.0[last] ^= 1;
        }
        assert_eq!(names(&cache.trust(&secret, &tampered, NOW).unwrap()), ["a"]);
        // Another session's update (same pairing), handed back with this session's hello.
        let other = self::tab(&secret, &["b"]);
        let moved = LiveSessionResponse {
            catalog_update: other.with_update(5, &["moved"]).catalog_update,
            ..tab.live.clone()
        };
        assert_eq!(names(&cache.trust(&secret, &moved, NOW).unwrap()), ["a"]);
    }

    #[test]
    fn the_last_session_is_reused_only_while_a_look_up_could_tell_nothing_new() {
        let secret = PairingSecret::from_bytes([7; 32]);
        let (pair, other) = (
            secret.pair_id(),
            PairingSecret::from_bytes([8; 32]).pair_id(),
        );
        let tab = tab(&secret, &["search"]);
        let window = Duration::from_secs(15);
        let last = LastSession::default();
        let reused = |pair, tool, needed_ms| last.reusable(pair, tool, window, needed_ms);
        assert!(reused(pair, "search", 60_000).is_none(), "none yet");

        let trusted = SessionKeysCache::default()
            .trust(&secret, &tab.live, NOW)
            .unwrap();
        last.remember(pair, &trusted);
        let again = reused(pair, "search", 60_000).unwrap();
        assert_eq!(again.session_id, trusted.session_id);
        assert!(again.relay_now_ms >= NOW, "the relay's clock moves on");
        assert!(reused(other, "search", 60_000).is_none(), "another pairing");
        assert!(reused(pair, "write", 60_000).is_none(), "a tool not listed");
        assert!(
            reused(pair, "search", 3_600_000).is_none(),
            "ends before the call"
        );

        // The tab was last seen longer ago than the window: only a look-up can say whether
        // it polled since.
        let mut stale = trusted.clone();
        stale.claimer_seen_at_ms = Some(NOW.saturating_sub_ms(window.as_millis() as u64 + 1));
        last.remember(pair, &stale);
        assert!(reused(pair, "search", 60_000).is_none(), "tab unseen");
        stale.claimer_seen_at_ms = None;
        last.remember(pair, &stale);
        assert!(reused(pair, "search", 60_000).is_none(), "tab never seen");
    }
}
