//! The per-owner quota on bytes held in calls and replies.
//!
//! Summing an owner's rows on every post would cost a scan per call, so the count is kept in
//! memory: the sweeper sets it from the database (one grouped query per sweep) and every
//! accepted post and reply adds its bytes until the next sweep. Freed bytes (expired, cleared,
//! deleted) come off at the sweep, which is also when they leave the database. Per replica,
//! like the rate limits: with N replicas an owner may exceed the quota by what they post
//! through the other replicas within one sweep interval.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sealpost_protocol::ids::Id16;

/// Bytes held per owner, shared by the counter and its reservations.
type Counts = Arc<Mutex<HashMap<Id16, i64>>>;

/// Bytes each owner holds, as last counted plus what was accepted since.
#[derive(Debug)]
pub struct HeldBytes {
    /// 0: no quota.
    quota: i64,
    held: Counts,
}

impl HeldBytes {
    pub fn new(quota: u64) -> Self {
        Self {
            quota: i64::try_from(quota).unwrap_or(i64::MAX),
            held: Arc::default(),
        }
    }

    /// Reserves `bytes` for `owner`, or `None` when that would pass the quota. The reservation
    /// is given back when the guard drops, unless it is [`Reserved::keep`]-ed (the store
    /// accepted the bytes).
    pub fn reserve(&self, owner: Id16, bytes: usize) -> Option<Reserved> {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        if self.quota == 0 {
            return Some(Reserved(None));
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let now = held.entry(owner).or_insert(0);
        if now.saturating_add(bytes) > self.quota {
            return None;
        }
        *now += bytes;
        Some(Reserved(Some((self.held.clone(), owner, bytes))))
    }

    /// Replaces every count with what the database holds now.
    pub fn recount(&self, counted: Vec<(Id16, i64)>) {
        if self.quota == 0 {
            return;
        }
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = counted.into_iter().collect();
    }
}

/// Bytes reserved under an owner's quota; given back on drop unless kept.
#[derive(Debug)]
pub struct Reserved(Option<(Counts, Id16, i64)>);

impl Reserved {
    /// The store accepted the bytes: they stay counted until the next recount.
    pub fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if let Some((held, owner, bytes)) = self.0.take()
            && let Some(now) = held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&owner)
        {
            *now -= bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_count_until_given_back_or_recounted() {
        let held = HeldBytes::new(100);
        let (a, b) = (Id16([1; 16]), Id16([2; 16]));
        held.reserve(a, 60).unwrap().keep();
        assert!(held.reserve(a, 50).is_none(), "over the quota");
        let dropped = held.reserve(a, 40).unwrap();
        drop(dropped);
        assert!(
            held.reserve(a, 40).is_some(),
            "a dropped reservation is given back"
        );
        assert!(held.reserve(b, 100).is_some(), "quotas are per owner");
        held.recount(vec![]);
        assert!(
            held.reserve(a, 100).is_some(),
            "a recount sets what the database holds"
        );
        assert!(
            HeldBytes::new(0).reserve(a, usize::MAX).is_some(),
            "0 is off"
        );
    }
}
