//! The per-owner quota on bytes held in calls and replies.
//!
//! Summing an owner's rows on every post would cost a scan per call, so the count is kept in
//! memory: each sweep recounts it from the database (one grouped query) and every accepted post
//! and reply adds its bytes. Freed bytes (expired, cleared, deleted) come off at the recount,
//! which is also when they leave the database.
//!
//! A recount must not forget bytes it could not see. Bytes are counted in three parts: what
//! the last recount read, what was stored (its request answered) since that recount began, and
//! what is reserved by requests still in flight. Bytes stored before a recount began are in what
//! its query reads; bytes stored after are added back; bytes in flight are always counted. A
//! request stored while the query ran may be counted twice until the next recount, which errs
//! on the safe side. Per replica, like the rate limits: with N replicas an owner may exceed the
//! quota by what they post through the others within one sweep interval.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sealpost_protocol::ids::OwnerId;

#[derive(Debug, Default)]
struct Counts {
    /// What the last recount read from the database.
    counted: HashMap<OwnerId, i64>,
    /// Bytes stored since the last recount began.
    stored_since: HashMap<OwnerId, i64>,
    /// While a recount runs: what was stored before it began. Still counted (the old `counted`
    /// does not have it) until the recount's result, which does, replaces `counted`.
    stored_before: HashMap<OwnerId, i64>,
    /// Bytes reserved by requests not yet stored or given back.
    in_flight: HashMap<OwnerId, i64>,
}

impl Counts {
    fn held(&self, owner: &OwnerId) -> i64 {
        [
            &self.counted,
            &self.stored_before,
            &self.stored_since,
            &self.in_flight,
        ]
        .iter()
        .map(|m| m.get(owner).copied().unwrap_or(0))
        .sum()
    }
}

fn add(map: &mut HashMap<OwnerId, i64>, owner: OwnerId, bytes: i64) {
    let entry = map.entry(owner).or_insert(0);
    *entry += bytes;
    if *entry == 0 {
        map.remove(&owner);
    }
}

/// Bytes each owner holds, as last counted plus what was stored or reserved since.
#[derive(Debug)]
pub struct HeldBytes {
    /// 0: no quota.
    quota: i64,
    counts: Arc<Mutex<Counts>>,
}

/// A recount in progress (begun before its query, finished with its result).
#[derive(Debug)]
pub struct Recount(());

impl HeldBytes {
    pub fn new(quota: u64) -> Self {
        Self {
            quota: i64::try_from(quota).unwrap_or(i64::MAX),
            counts: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        lock(&self.counts)
    }

    /// Reserves `bytes` for `owner`, or `None` when that would pass the quota. The reservation
    /// is given back when the guard drops, unless it is [`Reserved::keep`]-ed (the store
    /// accepted the bytes).
    pub fn reserve(&self, owner: OwnerId, bytes: usize) -> Option<Reserved> {
        if self.quota == 0 {
            return Some(Reserved(None));
        }
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let mut counts = self.lock();
        if counts.held(&owner).saturating_add(bytes) > self.quota {
            return None;
        }
        add(&mut counts.in_flight, owner, bytes);
        Some(Reserved(Some(Reservation {
            counts: self.counts.clone(),
            owner,
            bytes,
        })))
    }

    /// Begins a recount: call before querying the database. What is stored from now on is
    /// added to what the query returns.
    pub fn begin_recount(&self) -> Recount {
        let mut counts = self.lock();
        let since = std::mem::take(&mut counts.stored_since);
        for (owner, bytes) in since {
            add(&mut counts.stored_before, owner, bytes);
        }
        Recount(())
    }

    /// Ends a recount with what the database held.
    pub fn finish_recount(&self, _began: Recount, counted: Vec<(OwnerId, i64)>) {
        let mut counts = self.lock();
        counts.counted = counted.into_iter().collect();
        counts.stored_before.clear();
    }
}

fn lock(counts: &Mutex<Counts>) -> std::sync::MutexGuard<'_, Counts> {
    counts.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes reserved under an owner's quota; given back on drop unless kept.
#[derive(Debug)]
pub struct Reserved(Option<Reservation>);

#[derive(Debug)]
struct Reservation {
    counts: Arc<Mutex<Counts>>,
    owner: OwnerId,
    bytes: i64,
}

impl Reserved {
    /// The store accepted the bytes (call after it answered): they count as stored.
    pub fn keep(mut self) {
        if let Some(r) = self.0.take() {
            let mut counts = lock(&r.counts);
            add(&mut counts.in_flight, r.owner, -r.bytes);
            add(&mut counts.stored_since, r.owner, r.bytes);
        }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            add(&mut lock(&r.counts).in_flight, r.owner, -r.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: OwnerId = OwnerId::from_bytes([1; 16]);
    const B: OwnerId = OwnerId::from_bytes([2; 16]);

    #[test]
    fn reservations_count_until_given_back() {
        let held = HeldBytes::new(100);
        held.reserve(A, 60).unwrap().keep();
        assert!(held.reserve(A, 50).is_none(), "over the quota");
        drop(held.reserve(A, 40).unwrap());
        assert!(
            held.reserve(A, 40).is_some(),
            "a dropped reservation is given back"
        );
        assert!(held.reserve(B, 100).is_some(), "quotas are per owner");
        assert!(
            HeldBytes::new(0).reserve(A, usize::MAX).is_some(),
            "0 is off"
        );
    }

    #[test]
    fn a_recount_sets_what_the_database_holds() {
        let held = HeldBytes::new(100);
        held.reserve(A, 90).unwrap().keep();
        let recount = held.begin_recount();
        held.finish_recount(recount, vec![]);
        assert!(
            held.reserve(A, 100).is_some(),
            "freed in the database, freed here"
        );
    }

    #[test]
    fn a_recount_keeps_what_was_accepted_while_it_queried() {
        let held = HeldBytes::new(100);
        let recount = held.begin_recount();
        // Accepted while the query ran, and not in what it read.
        held.reserve(A, 60).unwrap().keep();
        held.finish_recount(recount, vec![]);
        assert!(
            held.reserve(A, 50).is_none(),
            "the 60 accepted meanwhile still count"
        );
        // The next recount finds it in the database.
        let recount = held.begin_recount();
        held.finish_recount(recount, vec![(A, 60)]);
        assert!(held.reserve(A, 50).is_none());
        assert!(held.reserve(A, 40).is_some());
    }

    #[test]
    fn a_reservation_given_back_across_a_recount_is_not_taken_off_twice() {
        let held = HeldBytes::new(100);
        let early = held.reserve(A, 30).unwrap();
        let recount = held.begin_recount();
        held.finish_recount(recount, vec![]);
        drop(early);
        held.reserve(A, 100).unwrap().keep();
        assert!(
            held.reserve(A, 1).is_none(),
            "the count did not go below zero"
        );
    }

    #[test]
    fn what_was_stored_still_counts_while_a_recount_queries() {
        let held = HeldBytes::new(100);
        held.reserve(A, 60).unwrap().keep();
        let recount = held.begin_recount();
        assert!(
            held.reserve(A, 50).is_none(),
            "the 60 count while the query runs"
        );
        held.finish_recount(recount, vec![(A, 60)]);
        assert!(held.reserve(A, 50).is_none());
        assert!(held.reserve(A, 40).is_some());
    }

    #[test]
    fn a_request_in_flight_across_a_recount_counts_until_it_ends() {
        let held = HeldBytes::new(100);
        let early = held.reserve(A, 30).unwrap();
        let recount = held.begin_recount();
        held.finish_recount(recount, vec![]);
        assert!(held.reserve(A, 80).is_none(), "the 30 in flight count");
        // Stored after the query read the table: still counted.
        early.keep();
        assert!(held.reserve(A, 80).is_none());
        let recount = held.begin_recount();
        held.finish_recount(recount, vec![(A, 30)]);
        assert!(held.reserve(A, 80).is_none());
        held.reserve(A, 70).unwrap().keep();
        assert!(held.reserve(A, 1).is_none());
    }
}
