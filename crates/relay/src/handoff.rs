//! Claims waiting on this replica, offered to the next post to their session.
//!
//! A tab's claim waits by long-poll. Without a hand-off a post commits, wakes the claim, and
//! the claim runs its own statement: two writes (two commits on PostgreSQL, each waiting for
//! the disk) and a wake-up between them on every call. With it, a claim that found nothing
//! *stands* for its session, and a post to that session on this replica takes the offer and
//! has the store claim for the waiter in the post's own write, right after the call is stored
//! ([`crate::store::Store::post_call_then_claim`]). The claim is the same statement a claim
//! runs, with the waiter's token, so it is checked, atomic and at most once exactly as before.
//!
//! Nothing is lost between the two:
//! - the store answers the waiter itself ([`ClaimFor::answer`]), so a post whose request goes
//!   away after handing its write to the store still delivers the claim to the waiter;
//! - a waiter that stops waiting (its deadline, a wake-up, shutdown) withdraws its offer, and
//!   if a post took it meanwhile, waits for that post's claim instead of leaving without it;
//! - a waiter that goes away (its request or channel closed) withdraws on drop, so a post can
//!   take only an offer whose waiter was there when it took it. A claim answered to a waiter
//!   that vanished in that instant is lost as any claim's answer lost on the wire is: its
//!   lease runs out and the call expires, never handed twice.
//!
//! One offer stands per session at a time; other claimers of the session wait on the hub as
//! before. Offers are per replica: a post on another replica wakes the waiter as before.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sealpost_protocol::ids::{OwnerId, SessionId};
use tokio::sync::oneshot;

use crate::store::{Bearer, ClaimFor, ClaimedRow, StoreResult};

type Key = (OwnerId, SessionId);

/// What a post's claim for a standing waiter came to.
pub type Handed = StoreResult<Vec<ClaimedRow>>;

/// The offers standing on this replica.
#[derive(Debug, Default)]
pub struct Handoffs {
    offers: Mutex<HashMap<Key, Offer>>,
    next_id: AtomicU64,
}

#[derive(Debug)]
struct Offer {
    id: u64,
    claim: ClaimFor,
}

/// A standing offer; dropping it withdraws the offer.
#[derive(Debug)]
pub struct Standing<'a> {
    handoffs: &'a Handoffs,
    key: Key,
    id: u64,
    answered: oneshot::Receiver<Handed>,
}

impl Handoffs {
    /// Stands a claim for `session`: the next post to it here claims up to `max` calls with
    /// `bearer` and a lease of `lease_ms`. `None` if another claim already stands for it.
    pub fn stand(
        &self,
        owner: OwnerId,
        session: SessionId,
        bearer: Bearer,
        max: u32,
        lease_ms: u64,
    ) -> Option<Standing<'_>> {
        let key = (owner, session);
        let mut offers = self.offers.lock().expect("handoff lock");
        let Entry::Vacant(slot) = offers.entry(key) else {
            return None;
        };
        let (answer, answered) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        slot.insert(Offer {
            id,
            claim: ClaimFor {
                bearer,
                max,
                lease_ms,
                answer,
            },
        });
        Some(Standing {
            handoffs: self,
            key,
            id,
            answered,
        })
    }

    /// Takes the offer standing for `session`, if any, for a post about to store a call there.
    pub fn take(&self, owner: OwnerId, session: SessionId) -> Option<ClaimFor> {
        let offer = self
            .offers
            .lock()
            .expect("handoff lock")
            .remove(&(owner, session))?;
        Some(offer.claim)
    }

    /// Offers standing now.
    pub fn standing(&self) -> usize {
        self.offers.lock().expect("handoff lock").len()
    }

    /// Removes the offer `id` if it still stands; whether it did.
    fn withdraw(&self, key: Key, id: u64) -> bool {
        let mut offers = self.offers.lock().expect("handoff lock");
        match offers.get(&key) {
            Some(offer) if offer.id == id => {
                offers.remove(&key);
                true
            }
            _ => false,
        }
    }
}

impl Standing<'_> {
    /// Completes once a post has claimed for this offer. A post that took the offer but never
    /// handed it to the store (its request went away first) completes it with no calls.
    pub async fn handed(&mut self) -> Handed {
        (&mut self.answered)
            .await
            .unwrap_or_else(|_| Ok(Vec::new()))
    }

    /// Stops standing. `None` if no post took the offer; otherwise what the post's claim came
    /// to, waited for (the post has the call's write in hand, so this is short).
    pub async fn withdraw(mut self) -> Option<Handed> {
        if self.handoffs.withdraw(self.key, self.id) {
            return None;
        }
        Some(self.handed().await)
    }
}

impl Drop for Standing<'_> {
    fn drop(&mut self) {
        self.handoffs.withdraw(self.key, self.id);
    }
}

#[cfg(test)]
mod tests {
    use sealpost_protocol::api::TokenKind;

    use super::*;

    fn bearer(owner: OwnerId) -> Bearer {
        Bearer {
            token_id: sealpost_protocol::ids::TokenId::from_bytes([1; 16]),
            owner_id: owner,
            kind: TokenKind::Owner,
            pair_id: None,
        }
    }

    fn ids() -> (OwnerId, SessionId) {
        (OwnerId::from_bytes([2; 16]), SessionId::from_bytes([3; 16]))
    }

    #[test]
    fn one_offer_stands_per_session_and_a_post_takes_it_once() {
        let handoffs = Handoffs::default();
        let (owner, session) = ids();
        let standing = handoffs.stand(owner, session, bearer(owner), 5, 1_000);
        assert!(standing.is_some());
        assert!(
            handoffs
                .stand(owner, session, bearer(owner), 5, 1_000)
                .is_none()
        );
        let taken = handoffs.take(owner, session).expect("the standing offer");
        assert_eq!((taken.max, taken.lease_ms), (5, 1_000));
        assert!(handoffs.take(owner, session).is_none());
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_to_take() {
        let handoffs = Handoffs::default();
        let (owner, session) = ids();
        drop(handoffs.stand(owner, session, bearer(owner), 1, 1_000));
        assert!(handoffs.take(owner, session).is_none());
        // And the session can stand again.
        assert!(
            handoffs
                .stand(owner, session, bearer(owner), 1, 1_000)
                .is_some()
        );
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_after_a_post_took_its_offer_gets_the_posts_claim() {
        let handoffs = Handoffs::default();
        let (owner, session) = ids();
        let standing = handoffs
            .stand(owner, session, bearer(owner), 1, 1_000)
            .unwrap();
        let taken = handoffs.take(owner, session).unwrap();
        taken.answer.send(Ok(Vec::new())).unwrap();
        assert!(matches!(standing.withdraw().await, Some(Ok(rows)) if rows.is_empty()));
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_before_any_post_withdraws() {
        let handoffs = Handoffs::default();
        let (owner, session) = ids();
        let standing = handoffs
            .stand(owner, session, bearer(owner), 1, 1_000)
            .unwrap();
        assert!(standing.withdraw().await.is_none());
        assert!(handoffs.take(owner, session).is_none());
    }

    #[tokio::test]
    async fn an_offer_a_post_dropped_completes_with_no_calls() {
        let handoffs = Handoffs::default();
        let (owner, session) = ids();
        let mut standing = handoffs
            .stand(owner, session, bearer(owner), 1, 1_000)
            .unwrap();
        drop(handoffs.take(owner, session));
        assert!(matches!(standing.handed().await, Ok(rows) if rows.is_empty()));
    }
}
