//! One live session: the browser's ephemeral key, the hello it published, the keys derived for
//! each plugin key seen, and the call ids already answered.
//!
//! Nothing here changes before an envelope authenticates: keys are cached and a call id is
//! recorded only after a successful open, so a relay can neither fill memory with bogus plugin
//! keys nor burn a real call id with a corrupted copy.

use std::collections::HashMap;

use rand_core::CryptoRng;
use sealpost_protocol::content::CancelReason;
use sealpost_seal::{
    BrowserSession, CLOCK_SKEW_MS, CallId, Header, Kind, PairingSecret, PublicKeyBytes, SealError,
    SessionId, SessionKeys, open_call, parse_header,
};
use sealpost_time::UnixMillis;

use crate::limits::{MAX_CACHED_PLUGIN_KEYS, SEEN_CALLS_PRUNE_THRESHOLD};

/// A call that opened: its header, plaintext, and the keys to seal its reply with.
pub(crate) struct OpenedCall {
    pub header: Header,
    pub plaintext: Vec<u8>,
    pub keys: SessionKeys,
}

/// A call that could not be accepted, with the header's call id when it could be read.
pub(crate) struct Rejected {
    pub call_id: Option<CallId>,
    pub reason: CancelReason,
}

pub(crate) struct Session {
    browser: BrowserSession,
    hello: Vec<u8>,
    /// The catalog last sealed (in the hello, or in update number `catalog_seq`).
    sealed_catalog: Vec<u8>,
    catalog_seq: u64,
    /// Derived keys by plugin key, least recently used first.
    keys: Vec<(PublicKeyBytes, SessionKeys)>,
    /// Call ids opened in this session, with each call's expiry.
    seen: HashMap<CallId, UnixMillis>,
    /// The latest time the host reported. Expiry is judged against it so a clock that steps
    /// back cannot revive an expired (and possibly pruned) call id.
    latest_now_ms: UnixMillis,
    /// Size of `seen` above which expired ids are dropped.
    prune_seen_above: usize,
}

impl Session {
    pub fn start(
        pairing: &PairingSecret,
        session_id: SessionId,
        created_at_ms: UnixMillis,
        expires_at_ms: UnixMillis,
        catalog: &[u8],
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Self, SealError> {
        let (browser, hello) = BrowserSession::start(
            pairing,
            session_id,
            created_at_ms,
            expires_at_ms,
            catalog,
            rng,
        )?;
        Ok(Self {
            browser,
            hello,
            sealed_catalog: catalog.to_vec(),
            catalog_seq: 0,
            keys: Vec::new(),
            seen: HashMap::new(),
            latest_now_ms: created_at_ms,
            prune_seen_above: SEEN_CALLS_PRUNE_THRESHOLD,
        })
    }

    pub fn hello(&self) -> &[u8] {
        &self.hello
    }

    /// The next catalog update when `catalog` differs from the one last sealed: numbered one
    /// past the last, and remembered as sealed.
    pub fn catalog_update(
        &mut self,
        catalog: &[u8],
        now_ms: UnixMillis,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Option<Vec<u8>>, SealError> {
        if catalog == self.sealed_catalog {
            return Ok(None);
        }
        let seq = self.catalog_seq + 1;
        let update = self
            .browser
            .seal_catalog_update(seq, now_ms, catalog, rng)?;
        self.catalog_seq = seq;
        self.sealed_catalog = catalog.to_vec();
        Ok(Some(update))
    }

    pub fn session_id(&self) -> &SessionId {
        self.browser.session_id()
    }

    pub fn expires_at_ms(&self) -> UnixMillis {
        self.browser.expires_at_ms()
    }

    /// Whether the session is over at `now_ms` (with the clock tolerance).
    pub fn is_over(&mut self, now_ms: UnixMillis) -> bool {
        self.latest_now_ms = self.latest_now_ms.max(now_ms);
        self.latest_now_ms > self.expires_at_ms().saturating_add_ms(CLOCK_SKEW_MS)
    }

    /// Whether a call expiring at `expires_at_ms` is past its time at `now_ms`.
    pub fn call_expired(&mut self, expires_at_ms: UnixMillis, now_ms: UnixMillis) -> bool {
        self.latest_now_ms = self.latest_now_ms.max(now_ms);
        self.latest_now_ms > expires_at_ms.saturating_add_ms(CLOCK_SKEW_MS)
    }

    /// Opens a call envelope, or says why it is not answered.
    pub fn open(&mut self, envelope: &[u8], now_ms: UnixMillis) -> Result<OpenedCall, Rejected> {
        let reject = |call_id, reason| Rejected { call_id, reason };
        let Ok(header) = parse_header(envelope) else {
            return Err(reject(None, CancelReason::Undecryptable));
        };
        let call_id = Some(*header.call_id());
        if header.kind() != Kind::Call || header.session_id() != self.session_id() {
            return Err(reject(call_id, CancelReason::Undecryptable));
        }
        if self.is_over(now_ms) {
            return Err(reject(call_id, CancelReason::SessionEnded));
        }
        if self.seen.contains_key(header.call_id()) {
            return Err(reject(call_id, CancelReason::Replayed));
        }
        // A call may not outlive its session, and one stamped in the future is not believed.
        if header.expires_at_ms() > self.expires_at_ms()
            || self.call_expired(header.expires_at_ms(), now_ms)
            || header.created_at_ms() > self.latest_now_ms.saturating_add_ms(CLOCK_SKEW_MS)
        {
            return Err(reject(call_id, CancelReason::Expired));
        }

        let cached = self
            .keys
            .iter()
            .position(|(public, _)| public == header.plugin_public());
        let keys = match cached {
            Some(at) => self.keys[at].1.clone(),
            None => self
                .browser
                .keys_for(header.plugin_public())
                .map_err(|_| reject(call_id, CancelReason::Undecryptable))?,
        };
        let Ok((header, plaintext)) = open_call(&keys, envelope) else {
            return Err(reject(call_id, CancelReason::Undecryptable));
        };

        // Authenticated: only now may the envelope change state.
        match cached {
            Some(at) => {
                let entry = self.keys.remove(at);
                self.keys.push(entry);
            }
            None => {
                if self.keys.len() == MAX_CACHED_PLUGIN_KEYS {
                    self.keys.remove(0);
                }
                self.keys.push((*header.plugin_public(), keys.clone()));
            }
        }
        self.seen.insert(*header.call_id(), header.expires_at_ms());
        if self.seen.len() > self.prune_seen_above {
            // A call past its expiry is refused as expired whether or not its id is remembered
            // (and judged time never steps back), so expired ids can be forgotten.
            let latest = self.latest_now_ms;
            self.seen
                .retain(|_, expires| latest <= expires.saturating_add_ms(CLOCK_SKEW_MS));
            // Prune again only once the set has doubled, so a session full of live calls costs
            // amortised constant time per call rather than a scan per call.
            self.prune_seen_above = SEEN_CALLS_PRUNE_THRESHOLD.max(2 * self.seen.len());
        }
        Ok(OpenedCall {
            header,
            plaintext,
            keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use sealpost_seal::{PluginSession, verify_hello};

    use super::*;

    const NOW: UnixMillis = UnixMillis::from_ms(1_800_000_000_000);

    fn session(rng: &mut StdRng) -> (Session, PairingSecret) {
        let pairing = PairingSecret::from_bytes([5; 32]);
        let session = Session::start(
            &pairing,
            SessionId::from_bytes([1; 16]),
            NOW,
            NOW.saturating_add_ms(600_000),
            b"{}",
            rng,
        )
        .unwrap();
        (session, pairing)
    }

    fn plugin_envelope(
        session: &Session,
        pairing: &PairingSecret,
        call_id: u8,
        rng: &mut StdRng,
    ) -> Vec<u8> {
        let hello = verify_hello(pairing, session.hello(), NOW).unwrap();
        let plugin = PluginSession::start(pairing, &hello, rng).unwrap();
        let header = plugin.call_header(
            CallId::from_bytes([call_id; 16]),
            NOW,
            NOW.saturating_add_ms(1000),
        );
        plugin.seal_call(&header, b"{}", rng).unwrap()
    }

    #[test]
    fn forged_envelopes_under_fresh_plugin_keys_leave_no_state() {
        let mut rng = StdRng::seed_from_u64(1);
        let (mut session, _) = session(&mut rng);
        // An impostor runs its own session under the same id with another pairing secret.
        let (impostor_session, _) = {
            let impostor = PairingSecret::from_bytes([6; 32]);
            let s = Session::start(
                &impostor,
                SessionId::from_bytes([1; 16]),
                NOW,
                NOW.saturating_add_ms(600_000),
                b"{}",
                &mut rng,
            );
            (s.unwrap(), impostor)
        };
        let impostor = PairingSecret::from_bytes([6; 32]);
        for call_id in 0..40 {
            let envelope = plugin_envelope(&impostor_session, &impostor, call_id, &mut rng);
            assert!(session.open(&envelope, NOW).is_err());
        }
        assert!(session.keys.is_empty());
        assert!(session.seen.is_empty());
    }

    #[test]
    fn the_key_cache_keeps_the_most_recent_plugin_keys() {
        let mut rng = StdRng::seed_from_u64(2);
        let (mut session, pairing) = session(&mut rng);
        for call_id in 0..=MAX_CACHED_PLUGIN_KEYS as u8 {
            let envelope = plugin_envelope(&session, &pairing, call_id, &mut rng);
            assert!(session.open(&envelope, NOW).is_ok());
        }
        assert_eq!(session.keys.len(), MAX_CACHED_PLUGIN_KEYS);
        assert_eq!(session.seen.len(), MAX_CACHED_PLUGIN_KEYS + 1);
    }

    #[test]
    fn expired_call_ids_are_forgotten_once_the_set_is_large() {
        let mut rng = StdRng::seed_from_u64(3);
        let (mut session, _) = session(&mut rng);
        for n in 0..=SEEN_CALLS_PRUNE_THRESHOLD as u32 {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&n.to_be_bytes());
            session.seen.insert(CallId::from_bytes(id), NOW);
        }
        session.latest_now_ms = NOW.saturating_add_ms(CLOCK_SKEW_MS + 1);
        let pairing = PairingSecret::from_bytes([5; 32]);
        let hello = verify_hello(&pairing, session.hello(), NOW).unwrap();
        let plugin = PluginSession::start(&pairing, &hello, &mut rng).unwrap();
        let later = NOW.saturating_add_ms(CLOCK_SKEW_MS + 1);
        let header = plugin.call_header(
            CallId::from_bytes([0xff; 16]),
            later,
            later.saturating_add_ms(1000),
        );
        let envelope = plugin.seal_call(&header, b"{}", &mut rng).unwrap();
        assert!(session.open(&envelope, later).is_ok());
        assert_eq!(session.seen.len(), 1);
    }
}
