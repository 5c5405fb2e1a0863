//! Admitted work: limits admit work at the door. A new call (a post) or a claim may be refused
//! by the per-token and per-owner rates, but completing what the relay already handed out is
//! not: the tab's first reply or cancel of a call it claimed, while its lease lasts, and the
//! plugin's first read of a call answered here. Otherwise a tab past its owner's rate would
//! have its answer refused, and the agent would see a timeout for work that was done.
//!
//! This ledger is what the relay remembers to tell those requests apart, per replica and in
//! memory: for each call a claim handed out, the token that claimed it and its lease's end; for
//! each call answered here, until when its answer may be read. An exempt request is still
//! charged (the rate check runs and consumes when there is room); only its refusal is
//! overridden, and only by the handler, before any body is read.
//!
//! An exemption ends once its operation reached the store (whatever the store answered), after
//! [`TRIES`] requests that did not reach it (a body lost on the way may be sent again, but not
//! for ever), or when its lease or the call's longest life ends. Any reply or cancel of the call
//! that reaches the store ends its claim's entry, and any read that hands the pairing's token
//! the call in a final state ends its answer's: what follows is not a first. The ledger holds
//! at most `max_admitted_calls` entries; past it nothing new is recorded, so those calls get no
//! exemption and their clients retry refusals as before. With several replicas, a request that
//! reaches another replica than the claim or the reply did is simply not exempt.

use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{CallId, OwnerId, TokenId};
use sealpost_time::UnixMillis;

use crate::store::Bearer;

/// Requests one exemption lets through a refused rate before one of them reaches the store.
pub(crate) const TRIES: u8 = 3;

/// What a request completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// The first reply to a claimed call, by the token that claimed it.
    Reply,
    /// The first cancel of a claimed call, by the token that claimed it.
    Cancel,
    /// The first read of an answered call, by an MCP token (the store checks its pairing).
    Read,
}

impl Work {
    pub(crate) const ALL: [Self; 3] = [Self::Reply, Self::Cancel, Self::Read];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Reply => "reply",
            Self::Cancel => "cancel",
            Self::Read => "read",
        }
    }
}

/// `(owner, call)`: call ids are unique per owner.
type Key = (OwnerId, CallId);

#[derive(Debug)]
struct Claim {
    token: TokenId,
    lease_ends: UnixMillis,
    tries: u8,
}

#[derive(Debug)]
struct Answer {
    until: UnixMillis,
    tries: u8,
}

/// The calls this replica handed out or answered whose completion a rate does not refuse.
#[derive(Debug)]
pub struct Admitted {
    claims: DashMap<Key, Claim>,
    answers: DashMap<Key, Answer>,
    /// Entries in both maps together.
    held: AtomicUsize,
    cap: usize,
}

impl Admitted {
    /// A ledger of at most `cap` entries (0: none, so nothing is exempt).
    pub fn new(cap: usize) -> Self {
        Self {
            claims: DashMap::new(),
            answers: DashMap::new(),
            held: AtomicUsize::new(0),
            cap,
        }
    }

    /// A claim by `token` handed out `call`, leased until `lease_ends`.
    pub fn claimed(&self, owner: OwnerId, token: TokenId, call: CallId, lease_ends: UnixMillis) {
        let claim = Claim {
            token,
            lease_ends,
            tries: TRIES,
        };
        self.record(&self.claims, (owner, call), claim);
    }

    /// `call`'s reply was stored; its answer may be read until `until`.
    pub fn answered(&self, owner: OwnerId, call: CallId, until: UnixMillis) {
        let answer = Answer {
            until,
            tries: TRIES,
        };
        self.record(&self.answers, (owner, call), answer);
    }

    /// Whether `bearer` may do `work` on `call` although its rate refused it, taking one of
    /// the exemption's tries if so.
    pub(crate) fn take(&self, bearer: &Bearer, work: Work, call: CallId, now: UnixMillis) -> bool {
        let key = (bearer.owner_id, call);
        match work {
            Work::Reply | Work::Cancel => self.take_from(&self.claims, key, |claim| {
                if now >= claim.lease_ends {
                    return Taken::Ended;
                }
                if claim.token != bearer.token_id {
                    return Taken::No;
                }
                Taken::from_tries(&mut claim.tries)
            }),
            Work::Read if bearer.kind == TokenKind::Mcp => {
                self.take_from(&self.answers, key, |answer| {
                    if now >= answer.until {
                        return Taken::Ended;
                    }
                    Taken::from_tries(&mut answer.tries)
                })
            }
            Work::Read => false,
        }
    }

    /// A reply or cancel of `call` reached the store: a later one is not the first.
    pub fn settled(&self, owner: OwnerId, call: CallId) {
        self.forget(&self.claims, (owner, call));
    }

    /// `call`'s answer was read (or an exempt read reached the store): a later read is not the
    /// first.
    pub fn delivered(&self, owner: OwnerId, call: CallId) {
        self.forget(&self.answers, (owner, call));
    }

    /// Drops the entries whose lease or answer ended by `now` (the sweeper calls this).
    pub fn sweep(&self, now: UnixMillis) {
        let dropped = AtomicUsize::new(0);
        let kept = |alive: bool| {
            if !alive {
                dropped.fetch_add(1, Ordering::Relaxed);
            }
            alive
        };
        self.claims.retain(|_, claim| kept(now < claim.lease_ends));
        self.answers.retain(|_, answer| kept(now < answer.until));
        self.held.fetch_sub(dropped.into_inner(), Ordering::Relaxed);
        self.claims.shrink_to_fit();
        self.answers.shrink_to_fit();
    }

    /// Entries held now (a metric).
    pub fn len(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn record<V>(&self, map: &DashMap<Key, V>, key: Key, value: V) {
        match map.entry(key) {
            Entry::Occupied(mut entry) => {
                entry.insert(value);
            }
            Entry::Vacant(entry) => {
                // Counted before it is inserted, so concurrent records never pass the cap.
                if self.held.fetch_add(1, Ordering::Relaxed) >= self.cap {
                    self.held.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
                entry.insert(value);
            }
        }
    }

    fn take_from<V>(
        &self,
        map: &DashMap<Key, V>,
        key: Key,
        judge: impl FnOnce(&mut V) -> Taken,
    ) -> bool {
        let Entry::Occupied(mut entry) = map.entry(key) else {
            return false;
        };
        let taken = judge(entry.get_mut());
        if matches!(taken, Taken::Last | Taken::Ended) {
            entry.remove();
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
        matches!(taken, Taken::Yes | Taken::Last)
    }

    fn forget<V>(&self, map: &DashMap<Key, V>, key: Key) {
        if map.remove(&key).is_some() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What a look at an entry found.
enum Taken {
    /// Exempt; tries remain.
    Yes,
    /// Exempt, and that was the last try: the entry goes.
    Last,
    /// Not for this request (another token's claim); the entry stays.
    No,
    /// The lease or answer ended: the entry goes.
    Ended,
}

impl Taken {
    fn from_tries(tries: &mut u8) -> Self {
        *tries = tries.saturating_sub(1);
        if *tries == 0 { Self::Last } else { Self::Yes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealpost_protocol::ids::PairId;

    const NOW: UnixMillis = UnixMillis::from_ms(1_000_000);

    fn bearer(kind: TokenKind, token: u8) -> Bearer {
        Bearer {
            token_id: TokenId::from_bytes([token; 16]),
            owner_id: OwnerId::from_bytes([1; 16]),
            kind,
            pair_id: (kind == TokenKind::Mcp).then_some(PairId::from_bytes([2; 16])),
        }
    }

    const CALL: CallId = CallId::from_bytes([9; 16]);

    #[test]
    fn only_the_claiming_token_replies_or_cancels_exempt_within_its_lease() {
        let ledger = Admitted::new(10);
        let tab = bearer(TokenKind::Owner, 3);
        let lease_ends = NOW.saturating_add_ms(1_000);
        ledger.claimed(tab.owner_id, tab.token_id, CALL, lease_ends);
        assert!(!ledger.take(&bearer(TokenKind::Owner, 4), Work::Reply, CALL, NOW));
        assert!(!ledger.take(&bearer(TokenKind::Mcp, 5), Work::Cancel, CALL, NOW));
        assert!(!ledger.take(&tab, Work::Reply, CallId::from_bytes([8; 16]), NOW));
        assert!(
            !ledger.take(&tab, Work::Read, CALL, NOW),
            "a claim is no answer"
        );
        assert!(ledger.take(&tab, Work::Reply, CALL, NOW));
        assert_eq!(ledger.len(), 1, "another token's try left the entry");
        assert!(
            !ledger.take(&tab, Work::Cancel, CALL, lease_ends),
            "the lease ended"
        );
        assert_eq!(ledger.len(), 0, "an ended lease goes at once");
    }

    #[test]
    fn an_exemption_ends_when_its_operation_reaches_the_store_or_its_tries_run_out() {
        let ledger = Admitted::new(10);
        let tab = bearer(TokenKind::Owner, 3);
        let later = NOW.saturating_add_ms(1_000);
        ledger.claimed(tab.owner_id, tab.token_id, CALL, later);
        assert!(ledger.take(&tab, Work::Reply, CALL, NOW));
        ledger.settled(tab.owner_id, CALL);
        assert!(!ledger.take(&tab, Work::Reply, CALL, NOW));

        ledger.claimed(tab.owner_id, tab.token_id, CALL, later);
        assert!((0..TRIES).all(|_| ledger.take(&tab, Work::Cancel, CALL, NOW)));
        assert!(!ledger.take(&tab, Work::Cancel, CALL, NOW));
        assert_eq!(ledger.len(), 0);
    }

    #[test]
    fn an_answer_is_read_exempt_once_by_an_mcp_token_only() {
        let ledger = Admitted::new(10);
        let (tab, plugin) = (bearer(TokenKind::Owner, 3), bearer(TokenKind::Mcp, 5));
        ledger.answered(plugin.owner_id, CALL, NOW.saturating_add_ms(1_000));
        assert!(!ledger.take(&tab, Work::Read, CALL, NOW));
        assert!(!ledger.take(&plugin, Work::Reply, CALL, NOW));
        assert!(ledger.take(&plugin, Work::Read, CALL, NOW));
        ledger.delivered(plugin.owner_id, CALL);
        assert!(!ledger.take(&plugin, Work::Read, CALL, NOW));
        assert_eq!(ledger.len(), 0);
    }

    #[test]
    fn the_ledger_keeps_at_most_its_cap_and_the_sweep_drops_what_ended() {
        let ledger = Admitted::new(3);
        let tab = bearer(TokenKind::Owner, 3);
        let soon = NOW.saturating_add_ms(10);
        let later = NOW.saturating_add_ms(1_000);
        ledger.claimed(
            tab.owner_id,
            tab.token_id,
            CallId::from_bytes([1; 16]),
            soon,
        );
        ledger.claimed(
            tab.owner_id,
            tab.token_id,
            CallId::from_bytes([2; 16]),
            later,
        );
        ledger.answered(tab.owner_id, CallId::from_bytes([3; 16]), soon);
        ledger.answered(tab.owner_id, CallId::from_bytes([4; 16]), later);
        assert_eq!(ledger.len(), 3, "the fourth was not recorded");
        let plugin = bearer(TokenKind::Mcp, 5);
        assert!(!ledger.take(&plugin, Work::Read, CallId::from_bytes([4; 16]), NOW));
        // Recording a call again replaces its entry and counts it once.
        ledger.claimed(
            tab.owner_id,
            tab.token_id,
            CallId::from_bytes([2; 16]),
            later,
        );
        assert_eq!(ledger.len(), 3);
        ledger.sweep(soon);
        assert_eq!(ledger.len(), 1);
        assert!(ledger.take(&tab, Work::Reply, CallId::from_bytes([2; 16]), soon));
        ledger.answered(tab.owner_id, CallId::from_bytes([4; 16]), later);
        assert_eq!(ledger.len(), 2, "room again after the sweep");
        assert!(Admitted::new(0).len() == 0);
        let none = Admitted::new(0);
        none.claimed(tab.owner_id, tab.token_id, CALL, later);
        assert!(!none.take(&tab, Work::Reply, CALL, NOW));
    }
}
