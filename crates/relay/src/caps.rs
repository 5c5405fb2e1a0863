//! Caps on what is in flight at once: connections per address, large request bodies (in all
//! and per owner), large replies per token, waiting long-polls per token and per owner; and
//! the connections idle now, oldest first, which make room at the connection cap. Each is a
//! count that a guard gives back when it drops, so a request that fails or is dropped
//! half-way cannot leak its place.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use sealpost_protocol::ids::{OwnerId, TokenId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// At most `cap` at once per key (0: no cap).
#[derive(Debug)]
pub struct KeyedCap<K> {
    cap: u32,
    open: Arc<Mutex<HashMap<K, u32>>>,
}

impl<K> Clone for KeyedCap<K> {
    fn clone(&self) -> Self {
        Self {
            cap: self.cap,
            open: self.open.clone(),
        }
    }
}

impl<K: Hash + Eq + Copy> KeyedCap<K> {
    pub fn new(cap: u32) -> Self {
        Self {
            cap,
            open: Arc::default(),
        }
    }

    /// A place for `key`, or `None` when it already holds `cap`.
    pub fn try_acquire(&self, key: K) -> Option<KeyedSlot<K>> {
        if self.cap == 0 {
            return Some(KeyedSlot(None));
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(key).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(KeyedSlot(Some((self.clone(), key))))
    }

    /// Keys holding at least one place now.
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One place in a [`KeyedCap`]; dropping it gives the place back.
#[derive(Debug)]
pub struct KeyedSlot<K: Hash + Eq + Copy>(Option<(KeyedCap<K>, K)>);

impl<K: Hash + Eq + Copy> Drop for KeyedSlot<K> {
    fn drop(&mut self) {
        if let Some((cap, key)) = self.0.take() {
            let mut open = cap.open.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(count) = open.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    open.remove(&key);
                }
            }
        }
    }
}

/// Request bodies above `threshold` bytes (declared, or of unknown length) read at once: a few
/// places in all, and of those at most `per_owner` for one owner, so one account cannot take
/// them all and leave others' large replies refused.
#[derive(Debug)]
pub struct LargeBodies {
    threshold: usize,
    at_once: u32,
    slots: Arc<Semaphore>,
    per_owner: KeyedCap<OwnerId>,
}

/// Why a large body found no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPlace {
    /// Its owner already holds `per_owner` places.
    Owner,
    /// Every place is taken.
    All,
}

/// A large body's place, in all and among its owner's; dropping it gives both back.
#[derive(Debug)]
pub struct LargePlace {
    _all: OwnedSemaphorePermit,
    _owner: KeyedSlot<OwnerId>,
}

impl LargeBodies {
    pub fn new(threshold: usize, at_once: u32, per_owner: u32) -> Self {
        Self {
            threshold,
            at_once,
            slots: Arc::new(Semaphore::new(at_once as usize)),
            per_owner: KeyedCap::new(per_owner),
        }
    }

    /// Admits `owner`'s request whose body may be up to `cap` bytes: a small declared body
    /// needs no place; a large or chunked one takes one, or is refused when its owner holds
    /// their share or all are taken. The place is held by the returned guard (keep it until
    /// the request's bytes are dropped).
    pub fn admit(
        &self,
        owner: OwnerId,
        headers: &HeaderMap,
        cap: usize,
    ) -> Result<Option<LargePlace>, NoPlace> {
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        self.admit_len(owner, declared.unwrap_or(cap).min(cap))
    }

    /// Admits a body of `len` bytes (a channel message, already read): as [`Self::admit`].
    pub fn admit_len(&self, owner: OwnerId, len: usize) -> Result<Option<LargePlace>, NoPlace> {
        if len <= self.threshold {
            return Ok(None);
        }
        // The owner's share first: an owner at their share takes nothing from the others.
        let owner_slot = self.per_owner.try_acquire(owner).ok_or(NoPlace::Owner)?;
        let all = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| NoPlace::All)?;
        Ok(Some(LargePlace {
            _all: all,
            _owner: owner_slot,
        }))
    }

    /// Large bodies being read now (a metric).
    pub fn in_flight(&self) -> usize {
        (self.at_once as usize).saturating_sub(self.slots.available_permits())
    }
}

/// Claims and reads waiting at once (long-polls), per token and per owner: each holds a
/// connection (or a channel's operation) for up to the longest wait, so a bounded share per
/// account keeps one account from holding every connection the relay allows.
#[derive(Debug)]
pub struct LongPolls {
    per_token: KeyedCap<TokenId>,
    per_owner: KeyedCap<OwnerId>,
}

/// Which share a long-poll found full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongPollsFull {
    Token,
    Owner,
}

/// A waiting long-poll's places; dropping it gives them back.
#[derive(Debug)]
pub struct LongPollPlace {
    _token: KeyedSlot<TokenId>,
    _owner: KeyedSlot<OwnerId>,
}

impl LongPolls {
    pub fn new(per_token: u32, per_owner: u32) -> Self {
        Self {
            per_token: KeyedCap::new(per_token),
            per_owner: KeyedCap::new(per_owner),
        }
    }

    /// A place for one more long-poll of `token`, a token of `owner`.
    pub fn admit(&self, token: TokenId, owner: OwnerId) -> Result<LongPollPlace, LongPollsFull> {
        let token = self
            .per_token
            .try_acquire(token)
            .ok_or(LongPollsFull::Token)?;
        let owner = self
            .per_owner
            .try_acquire(owner)
            .ok_or(LongPollsFull::Owner)?;
        Ok(LongPollPlace {
            _token: token,
            _owner: owner,
        })
    }
}

/// Open connections with nothing in flight, the one idle longest first, so that at the
/// connection cap that one can be closed to make room for a new connection. Connections that
/// never send a request, or hold a keep-alive connection open between requests, then cannot
/// keep out clients that have something to ask; a connection answering a request is never
/// closed for another.
#[derive(Debug, Default)]
pub struct IdleConnections {
    table: Mutex<IdleTable>,
}

#[derive(Debug, Default)]
struct IdleTable {
    /// Bumped at each idle spell, so keys are in the order the spells began.
    next: u64,
    oldest_first: BTreeMap<u64, CancellationToken>,
}

impl IdleConnections {
    /// Tracks a new connection, idle from now; `close` is cancelled to close it.
    pub fn track(self: &Arc<Self>, close: CancellationToken) -> TrackedConnection {
        let tracked = TrackedConnection(Arc::new(Tracked {
            table: self.clone(),
            close,
            state: Mutex::new(TrackedState::default()),
        }));
        tracked.0.went_idle(&mut tracked.0.state());
        tracked
    }

    /// Closes the connection idle longest, if any; whether one was.
    pub fn close_oldest(&self) -> bool {
        let mut table = self.table();
        while let Some((_, close)) = table.oldest_first.pop_first() {
            // A connection already closing gives back its place anyway: look for a live one.
            if !close.is_cancelled() {
                close.cancel();
                return true;
            }
        }
        false
    }

    fn table(&self) -> std::sync::MutexGuard<'_, IdleTable> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One connection in [`IdleConnections`]; it leaves the table when the last clone drops.
#[derive(Debug, Clone)]
pub struct TrackedConnection(Arc<Tracked>);

#[derive(Debug)]
struct Tracked {
    table: Arc<IdleConnections>,
    close: CancellationToken,
    state: Mutex<TrackedState>,
}

#[derive(Debug, Default)]
struct TrackedState {
    /// Requests being answered (their response bodies included).
    in_flight: u32,
    /// Its key in the table while idle.
    idle_key: Option<u64>,
}

impl TrackedConnection {
    /// Marks a request in flight until the returned guard drops.
    pub fn busy(&self) -> Busy {
        let mut state = self.0.state();
        state.in_flight += 1;
        if let Some(key) = state.idle_key.take() {
            self.0.table.table().oldest_first.remove(&key);
        }
        Busy(Some(self.0.clone()))
    }
}

impl Tracked {
    fn state(&self) -> std::sync::MutexGuard<'_, TrackedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn went_idle(&self, state: &mut TrackedState) {
        if self.close.is_cancelled() {
            return;
        }
        let mut table = self.table.table();
        let key = table.next;
        table.next += 1;
        table.oldest_first.insert(key, self.close.clone());
        state.idle_key = Some(key);
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(key) = self.state().idle_key.take() {
            self.table.table().oldest_first.remove(&key);
        }
    }
}

/// A request in flight on a tracked connection.
#[derive(Debug)]
pub struct Busy(Option<Arc<Tracked>>);

impl Busy {
    /// Keeps the connection busy for as long as it lives (it was upgraded to a channel).
    pub fn for_good(mut self) {
        self.0 = None;
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(tracked) = self.0.take() {
            let mut state = tracked.state();
            state.in_flight -= 1;
            if state.in_flight == 0 {
                tracked.went_idle(&mut state);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_places_are_given_back() {
        let caps = KeyedCap::new(2);
        let a = caps.try_acquire(1).unwrap();
        let _b = caps.try_acquire(1).unwrap();
        assert!(caps.try_acquire(1).is_none());
        assert!(caps.try_acquire(2).is_some());
        drop(a);
        assert!(caps.try_acquire(1).is_some());
        assert_eq!(caps.keys(), 1);
    }

    #[test]
    fn only_large_or_unknown_bodies_take_a_place() {
        let owner = OwnerId::from_bytes([1; 16]);
        let gate = LargeBodies::new(100, 1, 0);
        let mut small = HeaderMap::new();
        small.insert(CONTENT_LENGTH, "50".parse().unwrap());
        let mut large = HeaderMap::new();
        large.insert(CONTENT_LENGTH, "5000".parse().unwrap());
        assert!(gate.admit(owner, &small, 10_000).unwrap().is_none());
        // A small cap bounds an unknown length: no place needed.
        assert!(gate.admit(owner, &HeaderMap::new(), 80).unwrap().is_none());
        let held = gate.admit(owner, &large, 10_000).unwrap();
        assert!(held.is_some());
        assert_eq!(gate.in_flight(), 1);
        assert_eq!(
            gate.admit(owner, &HeaderMap::new(), 10_000).unwrap_err(),
            NoPlace::All
        );
        drop(held);
        assert!(gate.admit(owner, &large, 10_000).unwrap().is_some());
    }

    #[test]
    fn an_owner_at_their_share_of_large_bodies_takes_nothing_from_the_others() {
        let (alice, bob) = (OwnerId::from_bytes([1; 16]), OwnerId::from_bytes([2; 16]));
        let gate = LargeBodies::new(100, 3, 2);
        let _a = gate.admit_len(alice, 500).unwrap();
        let _b = gate.admit_len(alice, 500).unwrap();
        assert_eq!(gate.admit_len(alice, 500).unwrap_err(), NoPlace::Owner);
        assert_eq!(gate.in_flight(), 2, "the refused one took no place");
        let bobs = gate.admit_len(bob, 500).unwrap();
        assert!(bobs.is_some());
        assert_eq!(gate.admit_len(bob, 500).unwrap_err(), NoPlace::All);
    }

    #[test]
    fn long_polls_are_capped_per_token_and_per_owner() {
        let (owner, other) = (OwnerId::from_bytes([1; 16]), OwnerId::from_bytes([2; 16]));
        let polls = LongPolls::new(2, 3);
        let a = polls.admit(TokenId::from_bytes([10; 16]), owner).unwrap();
        let _b = polls.admit(TokenId::from_bytes([10; 16]), owner).unwrap();
        assert_eq!(
            polls
                .admit(TokenId::from_bytes([10; 16]), owner)
                .unwrap_err(),
            LongPollsFull::Token
        );
        let _c = polls.admit(TokenId::from_bytes([11; 16]), owner).unwrap();
        assert_eq!(
            polls
                .admit(TokenId::from_bytes([12; 16]), owner)
                .unwrap_err(),
            LongPollsFull::Owner
        );
        assert!(polls.admit(TokenId::from_bytes([20; 16]), other).is_ok());
        drop(a);
        assert!(polls.admit(TokenId::from_bytes([12; 16]), owner).is_ok());
    }

    #[test]
    fn the_connection_idle_longest_is_closed_first_and_a_busy_one_never() {
        let idle = Arc::new(IdleConnections::default());
        let (first, second, third) = (
            CancellationToken::new(),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let a = idle.track(first.clone());
        let b = idle.track(second.clone());
        let c = idle.track(third.clone());
        let busy_a = a.busy();
        assert!(idle.close_oldest());
        assert!(second.is_cancelled() && !first.is_cancelled());
        // `a` is idle again, now after `c`.
        drop(busy_a);
        assert!(idle.close_oldest());
        assert!(third.is_cancelled() && !first.is_cancelled());
        let upgraded = a.busy();
        upgraded.for_good();
        assert!(!idle.close_oldest(), "an upgraded connection is never idle");
        drop((a, b, c));
        assert!(idle.table().oldest_first.is_empty());
    }
}
