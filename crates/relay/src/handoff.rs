//! Waiters on this replica, each offered to the next write that would wake it, which does the
//! waiter's own store operation in the same write and answers it directly.
//!
//! A long-poll waits for a write: a tab's claim for the next post to its session, the plugin's
//! post (or read) for the reply to its call. Without a hand-off the write commits, wakes the
//! waiter through the hub, and the waiter runs its own statement: two trips to the store and a
//! wake-up between them on every call. With it, a waiter that found nothing *stands*, and the
//! write that would wake it, on this replica, takes the offer and has the store run the waiter's
//! operation right after its own:
//! - a claim standing for its session ([`Claims`]) is claimed for by the next post to it, in the
//!   post's own write ([`crate::store::Store::post_call_then_claim`]);
//! - a read standing for its call ([`Reads`]) is read for by the reply to it, after the reply
//!   ([`crate::store::Store::reply_call_then_read`]).
//!
//! The operation is the same statement the waiter runs, with the waiter's token, so it is
//! checked, atomic and (for a claim) at most once exactly as before. Nothing is lost between
//! the two:
//! - the store answers the waiter itself (the offer's `answer`), so a write whose request goes
//!   away after handing its work to the store still delivers to the waiter; a write that drops
//!   the offer without doing it leaves the waiter to look at the store on its own;
//! - a waiter that stops waiting (its deadline, a wake-up, shutdown) withdraws its offer, and
//!   if a write took it meanwhile, waits for that write's answer instead of leaving without it;
//! - a waiter that goes away (its request or channel closed) withdraws on drop, so a write can
//!   take only an offer whose waiter was there when it took it. A claim answered to a waiter
//!   that vanished in that instant is lost as any claim's answer lost on the wire is: its
//!   lease runs out and the call expires, never handed twice.
//!
//! One offer stands per key at a time; other waiters on it wait on the hub as before. Offers
//! are per replica: a write on another replica wakes the waiter through the hub as before.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sealpost_protocol::ids::{CallId, OwnerId, SessionId};
use tokio::sync::oneshot;

use crate::store::{CallView, ClaimFor, ClaimedRow, ReadFor, StoreResult};

/// What a waiter offers: the store operation a write runs for it, which carries the channel
/// its answer goes back on.
pub trait Offer {
    /// What the operation answers.
    type Answer;
}

impl Offer for ClaimFor {
    type Answer = StoreResult<Vec<ClaimedRow>>;
}

impl Offer for ReadFor {
    type Answer = StoreResult<Option<CallView>>;
}

/// Claims standing for their session.
pub type Claims = Offers<(OwnerId, SessionId), ClaimFor>;
/// Reads standing for their call.
pub type Reads = Offers<(OwnerId, CallId), ReadFor>;

/// The offers of one kind standing on this replica.
#[derive(Debug)]
pub struct Offers<K, O> {
    offers: Mutex<HashMap<K, (u64, O)>>,
    next_id: AtomicU64,
}

impl<K, O> Default for Offers<K, O> {
    fn default() -> Self {
        Self {
            offers: Mutex::default(),
            next_id: AtomicU64::new(0),
        }
    }
}

/// A standing offer; dropping it withdraws the offer.
#[derive(Debug)]
struct Standing<'a, K: Hash + Eq + Copy, O: Offer> {
    offers: &'a Offers<K, O>,
    key: K,
    id: u64,
    /// Until it has completed.
    answered: Option<oneshot::Receiver<O::Answer>>,
}

impl<K: Hash + Eq + Copy, O: Offer> Offers<K, O> {
    /// Stands a waiter for `key` with the offer `offer` makes of the channel its answer comes
    /// back on. `None` if another waiter already stands for it.
    fn stand(
        &self,
        key: K,
        offer: impl FnOnce(oneshot::Sender<O::Answer>) -> O,
    ) -> Option<Standing<'_, K, O>> {
        let mut offers = self.offers.lock().expect("handoff lock");
        let Entry::Vacant(slot) = offers.entry(key) else {
            return None;
        };
        let (answer, answered) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        slot.insert((id, offer(answer)));
        Some(Standing {
            offers: self,
            key,
            id,
            answered: Some(answered),
        })
    }

    /// Stands an offer for `key` (as [`Offers::stand`]) while `waiting` runs, the waiter's
    /// other reasons to stop (a wake-up, its deadline, shutdown), and answers what a write did
    /// for it: `None` when no write did, or another waiter already stands for `key`. A write
    /// that took the offer just as `waiting` ended is waited for, never left behind.
    pub async fn stand_while(
        &self,
        key: K,
        offer: impl FnOnce(oneshot::Sender<O::Answer>) -> O,
        waiting: impl Future<Output = ()>,
    ) -> Option<O::Answer> {
        let Some(mut standing) = self.stand(key, offer) else {
            waiting.await;
            return None;
        };
        let handed = tokio::select! {
            handed = standing.handed() => Some(handed),
            () = waiting => None,
        };
        match handed {
            Some(handed) => handed,
            None => standing.withdraw().await,
        }
    }

    /// Takes the offer standing for `key`, if any, for a write about to do its operation.
    pub fn take(&self, key: K) -> Option<O> {
        let (_, offer) = self.offers.lock().expect("handoff lock").remove(&key)?;
        Some(offer)
    }

    /// Offers standing now.
    pub fn standing(&self) -> usize {
        self.offers.lock().expect("handoff lock").len()
    }

    /// Removes the offer `id` if it still stands; whether it did.
    fn withdraw(&self, key: K, id: u64) -> bool {
        let mut offers = self.offers.lock().expect("handoff lock");
        match offers.get(&key) {
            Some((standing, _)) if *standing == id => {
                offers.remove(&key);
                true
            }
            _ => false,
        }
    }
}

impl<K: Hash + Eq + Copy, O: Offer> Standing<'_, K, O> {
    /// Completes once a write has done this offer's operation: its answer. `None` when a write
    /// took the offer but dropped it undone (its request went away first), or when it has
    /// completed before.
    async fn handed(&mut self) -> Option<O::Answer> {
        let answer = self.answered.as_mut()?.await.ok();
        // Completed: a later call (a withdraw after this) answers `None` at once.
        self.answered = None;
        answer
    }

    /// Stops standing. `None` if no write took the offer (or one dropped it undone); otherwise
    /// the operation's answer, waited for (the write has it in hand, so this is short).
    async fn withdraw(mut self) -> Option<O::Answer> {
        if self.offers.withdraw(self.key, self.id) {
            return None;
        }
        self.handed().await
    }
}

impl<K: Hash + Eq + Copy, O: Offer> Drop for Standing<'_, K, O> {
    fn drop(&mut self) {
        self.offers.withdraw(self.key, self.id);
    }
}

#[cfg(test)]
mod tests {
    use sealpost_protocol::api::TokenKind;

    use super::*;
    use crate::store::Bearer;

    fn bearer(owner: OwnerId) -> Bearer {
        Bearer {
            token_id: sealpost_protocol::ids::TokenId::from_bytes([1; 16]),
            owner_id: owner,
            kind: TokenKind::Owner,
            pair_id: None,
        }
    }

    fn key() -> (OwnerId, SessionId) {
        (OwnerId::from_bytes([2; 16]), SessionId::from_bytes([3; 16]))
    }

    /// A claim of up to `max` calls with a lease of 1 s, answered on `answer`.
    fn claim(max: u32) -> impl FnOnce(oneshot::Sender<StoreResult<Vec<ClaimedRow>>>) -> ClaimFor {
        move |answer| ClaimFor {
            bearer: bearer(key().0),
            max,
            lease_ms: 1_000,
            answer,
        }
    }

    #[test]
    fn one_offer_stands_per_key_and_a_write_takes_it_once() {
        let claims = Claims::default();
        let standing = claims.stand(key(), claim(5));
        assert!(standing.is_some());
        assert!(claims.stand(key(), claim(5)).is_none());
        let taken = claims.take(key()).expect("the standing offer");
        assert_eq!((taken.max, taken.lease_ms), (5, 1_000));
        assert!(claims.take(key()).is_none());
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_to_take() {
        let claims = Claims::default();
        drop(claims.stand(key(), claim(1)));
        assert!(claims.take(key()).is_none());
        // And the key can stand again.
        assert!(claims.stand(key(), claim(1)).is_some());
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_after_a_write_took_its_offer_gets_the_writes_answer() {
        let claims = Claims::default();
        let standing = claims.stand(key(), claim(1)).unwrap();
        let taken = claims.take(key()).unwrap();
        taken.answer.send(Ok(Vec::new())).unwrap();
        assert!(matches!(standing.withdraw().await, Some(Ok(rows)) if rows.is_empty()));
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_before_any_write_withdraws() {
        let claims = Claims::default();
        let standing = claims.stand(key(), claim(1)).unwrap();
        assert!(standing.withdraw().await.is_none());
        assert!(claims.take(key()).is_none());
    }

    #[tokio::test]
    async fn an_offer_a_write_dropped_undone_leaves_the_waiter_to_look_itself() {
        let claims = Claims::default();
        let mut standing = claims.stand(key(), claim(1)).unwrap();
        drop(claims.take(key()));
        assert!(standing.handed().await.is_none());
        // Withdrawn after that, it answers at once: there is nothing more to wait for.
        assert!(standing.withdraw().await.is_none());
    }
}
