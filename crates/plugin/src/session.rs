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
//!
//! The highest number is also kept with the pairing (`catalog.json`, see [`settle`]), so a
//! process started later, or another one sharing the pairing, refuses what any of them has
//! seen superseded, and the cached list never goes back to an older one.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealpost_protocol::api::LiveSessionResponse;
use sealpost_protocol::content::{Catalog, CatalogEntry};
use sealpost_protocol::ids::{PairId, SessionId};
use sealpost_protocol::limits::CLOCK_SKEW_MS;
use sealpost_seal::{PairingSecret, PluginSession, SealError, open_catalog_update, verify_hello};
use sealpost_time::UnixMillis;

use crate::config::{CachedCatalog, MAX_SESSIONS_KEPT, OpenedUpdate};

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
    /// The number of the catalog update `tools` came from (0: the hello's).
    pub catalog_seq: u64,
    /// Keys for this session.
    pub keys: Arc<PluginSession>,
}

impl TrustedSession {
    /// How long the tab had gone without polling, by the relay's clock; `None`: never.
    pub fn tab_unseen_ms(&self) -> Option<u64> {
        self.claimer_seen_at_ms
            .map(|seen| self.relay_now_ms.saturating_sub(seen))
    }
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
    /// The relay handed back an older tool list than one this pairing has already opened for
    /// the session (or none after one), and the newer list is not at hand to use instead.
    #[error("the relay handed back an older tool list than one already seen")]
    RolledBack,
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
    expires_at_ms: UnixMillis,
    /// The look-up that last trusted it, while a call may seal to it without another.
    looked_up: Option<LookedUp>,
}

/// What a look-up said beyond the hello, and when (by both of this computer's clocks).
#[derive(Debug, Clone, Copy)]
struct LookedUp {
    pair_id: PairId,
    relay_now_ms: UnixMillis,
    claimer_seen_at_ms: Option<UnixMillis>,
    at: Instant,
    local_at: UnixMillis,
}

/// How far this computer's wall clock and monotonic clock may drift apart between a look-up
/// and its reuse; more means a sleep (the monotonic clock stops) or a clock set: look up.
const CLOCKS_AGREE_WITHIN_MS: u64 = 1_000;

impl Current {
    /// The session as `looked` saw it, the relay's clock then reading `relay_now_ms`.
    fn trusted(&self, looked: &LookedUp, relay_now_ms: UnixMillis) -> TrustedSession {
        TrustedSession {
            session_id: self.session_id,
            expires_at_ms: self.expires_at_ms,
            relay_now_ms,
            claimer_seen_at_ms: looked.claimer_seen_at_ms,
            tools: self.tools.clone(),
            catalog_seq: self.seq,
            keys: self.keys.clone(),
        }
    }
}

/// What [`settle`] decided: the catalog to cache (when it changed) and the session's list.
#[derive(Debug)]
pub struct Settled {
    /// The cached catalog to write; `None`: leave the file as it is.
    pub write: Option<CachedCatalog>,
    /// The session's newest list and its number, or why there is none to trust.
    pub tools: Result<(u64, Vec<CatalogEntry>), SessionError>,
}

/// Judges `session` (as this process opened it) against the catalog the pairing has cached,
/// which records the highest update any of its processes opened per live session: a higher or
/// equal number is recorded and cached; a lower one (an absent update is number 0) is a relay
/// rolling the list back, answered with the cached list when it is that session's newest and
/// refused otherwise. Sessions past their end (by `local_now`, with the clock skew) are
/// forgotten, at most [`MAX_SESSIONS_KEPT`] are kept (those ending last).
pub fn settle(
    cached: Option<&CachedCatalog>,
    pair_id: PairId,
    session: &TrustedSession,
    local_now: UnixMillis,
) -> Settled {
    let id = session.session_id;
    let floor = cached.map_or(0, |c| c.highest_opened(id));
    if session.catalog_seq < floor {
        let tools = match cached {
            Some(c) if c.session_id == Some(id) && c.seq == floor => Ok((floor, c.tools.clone())),
            _ => Err(SessionError::RolledBack),
        };
        return Settled { write: None, tools };
    }
    let mut opened: Vec<OpenedUpdate> = cached
        .map(|c| c.opened.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|o| {
            o.session_id != id && o.expires_at.saturating_add_ms(CLOCK_SKEW_MS) >= local_now
        })
        .collect();
    opened.push(OpenedUpdate {
        session_id: id,
        seq: session.catalog_seq,
        expires_at: session.expires_at_ms,
    });
    opened.sort_by_key(|o| std::cmp::Reverse(o.expires_at));
    opened.truncate(MAX_SESSIONS_KEPT);
    let mut write = CachedCatalog::new(pair_id, session.tools.clone());
    write.session_id = Some(id);
    write.seq = session.catalog_seq;
    write.opened = opened;
    Settled {
        write: Some(write),
        tools: Ok((session.catalog_seq, session.tools.clone())),
    }
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
                    expires_at_ms: hello.expires_at_ms(),
                    looked_up: None,
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
        let looked = LookedUp {
            pair_id: secret.pair_id(),
            relay_now_ms,
            claimer_seen_at_ms: live.claimer_seen_at,
            at: Instant::now(),
            local_at: local_now,
        };
        current.expires_at_ms = hello.expires_at_ms();
        current.looked_up = Some(looked);
        Ok(current.trusted(&looked, relay_now_ms))
    }

    /// Raises the session's catalog to `seq` and `tools`, when it is still the session last
    /// trusted and `seq` is higher than this process opened (another process opened it).
    pub fn raise(&self, session_id: SessionId, seq: u64, tools: &[CatalogEntry]) {
        if let Some(current) = self.0.lock().expect("not poisoned").as_mut()
            && current.session_id == session_id
            && seq > current.seq
        {
            current.seq = seq;
            current.tools = tools.to_vec();
        }
    }

    /// Forgets the last look-up: the next call looks up (after a look-up failed, or a post
    /// found the session gone).
    pub fn forget_look_up(&self) {
        if let Some(current) = self.0.lock().expect("not poisoned").as_mut() {
            current.looked_up = None;
        }
    }

    /// The session last trusted, when a call of `tool` may seal to it without looking it up
    /// again (docs/PLUGIN.md, "A call"): the same pairing; this computer's two clocks agree on
    /// the time since (no sleep, no clock set), which is within `tab_absent_after`; by the
    /// relay's clock from the look-up carried forward, the tab was seen within
    /// `tab_absent_after` (judged as a look-up judges it) and the session lasts `needed_ms`
    /// more; by this computer's clock the hello has not ended (as for a look-up); and the
    /// newest catalog opened lists the tool.
    pub fn reusable(
        &self,
        pair_id: PairId,
        tool: &str,
        tab_absent_after: Duration,
        needed_ms: u64,
        local_now: UnixMillis,
    ) -> Option<TrustedSession> {
        let cached = self.0.lock().expect("not poisoned");
        let current = cached.as_ref()?;
        let looked = current.looked_up.filter(|l| l.pair_id == pair_id)?;
        let window = tab_absent_after.as_millis() as u64;
        let elapsed = looked.at.elapsed().as_millis() as u64;
        let wall = local_now.saturating_sub(looked.local_at);
        let clocks_agree =
            local_now >= looked.local_at && elapsed.abs_diff(wall) <= CLOCKS_AGREE_WITHIN_MS;
        if !clocks_agree || elapsed > window {
            return None;
        }
        let session = current.trusted(&looked, looked.relay_now_ms.saturating_add_ms(elapsed));
        let now = session.relay_now_ms;
        let usable = session
            .tab_unseen_ms()
            .is_some_and(|unseen| unseen <= window)
            && session.expires_at_ms > now.saturating_add_ms(needed_ms)
            && session.expires_at_ms.saturating_add_ms(CLOCK_SKEW_MS) >= local_now
            && session.tools.iter().any(|entry| entry.name == tool);
        usable.then_some(session)
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
                title: None,
                destructive: false,
                output_schema: None,
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
    fn the_pairing_keeps_each_sessions_highest_update_for_every_process() {
        let secret = PairingSecret::generate(&mut rand::rng());
        let pair = secret.pair_id();
        let tab = tab(&secret, &["a"]);
        let trust = |live: &LiveSessionResponse| {
            SessionKeysCache::default()
                .trust(&tab.secret, live, NOW)
                .unwrap()
        };
        let newest = trust(&tab.with_update(2, &["b"]));
        let cached = settle(None, pair, &newest, NOW).write.unwrap();
        assert_eq!(cached.highest_opened(newest.session_id), 2);
        // A fresh process is handed update 1, or none: it lists the newest, and the cache stays.
        for older in [trust(&tab.with_update(1, &["a", "old"])), trust(&tab.live)] {
            let settled = settle(Some(&cached), pair, &older, NOW);
            assert!(settled.write.is_none(), "the cache never goes back");
            let (seq, tools) = settled.tools.unwrap();
            assert_eq!((seq, tools), (2, newest.tools.clone()));
        }
        // The newest list is not at hand (another session was cached since): refused.
        let other = self::tab(&secret, &["z"]);
        let other = SessionKeysCache::default()
            .trust(&secret, &other.live, NOW)
            .unwrap();
        let moved = settle(Some(&cached), pair, &other, NOW).write.unwrap();
        assert_eq!(moved.tools, other.tools);
        assert!(matches!(
            settle(Some(&moved), pair, &trust(&tab.live), NOW).tools,
            Err(SessionError::RolledBack)
        ));
        // A session past its end is forgotten.
        let later = newest.expires_at_ms.saturating_add_ms(CLOCK_SKEW_MS + 1);
        let after = settle(Some(&moved), pair, &other, later).write.unwrap();
        assert_eq!(after.highest_opened(newest.session_id), 0);
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
        let cache = SessionKeysCache::default();
        let reused = |pair, tool, needed_ms, local_now| {
            cache.reusable(pair, tool, window, needed_ms, local_now)
        };
        assert!(reused(pair, "search", 60_000, NOW).is_none(), "none yet");

        let trusted = cache.trust(&secret, &tab.live, NOW).unwrap();
        let again = reused(pair, "search", 60_000, NOW).unwrap();
        assert_eq!(again.session_id, trusted.session_id);
        assert!(again.relay_now_ms >= NOW, "the relay's clock moves on");
        assert!(
            reused(other, "search", 60_000, NOW).is_none(),
            "another pairing"
        );
        assert!(
            reused(pair, "write", 60_000, NOW).is_none(),
            "a tool not listed"
        );
        assert!(
            reused(pair, "search", 3_600_000, NOW).is_none(),
            "ends before the call"
        );
        let asleep = NOW.saturating_add_ms(5_000);
        assert!(
            reused(pair, "search", 60_000, asleep).is_none(),
            "a sleep or a clock set"
        );
        let behind = NOW.saturating_sub_ms(1);
        assert!(
            reused(pair, "search", 60_000, behind).is_none(),
            "the clock went back"
        );
        cache.forget_look_up();
        assert!(reused(pair, "search", 60_000, NOW).is_none(), "forgotten");

        // The tab was last seen longer ago than the window, or never: only a look-up can say
        // whether it polled since. A time after the relay's own reads as a look-up reads it.
        let at = |seen: Option<UnixMillis>| LiveSessionResponse {
            claimer_seen_at: seen,
            ..tab.live.clone()
        };
        let unseen = NOW.saturating_sub_ms(window.as_millis() as u64 + 1);
        for (seen, reusable) in [
            (Some(unseen), false),
            (None, false),
            (Some(NOW.saturating_add_ms(3_600_000)), true),
        ] {
            cache.trust(&secret, &at(seen), NOW).unwrap();
            assert_eq!(
                reused(pair, "search", 60_000, NOW).is_some(),
                reusable,
                "{seen:?}"
            );
        }
    }
}
