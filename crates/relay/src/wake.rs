//! In-process wake-ups for long-polls: a map from (owner, session or call) to a `Notify`.
//!
//! No lost wake-up: a waiter obtains and enables its `Notified` future *before* it re-checks the
//! store, so a post that commits between the check and the wait still wakes it. Entries live
//! only while someone waits on them. On PostgreSQL a listener task feeds other replicas'
//! notifications into the same hub (see `store::postgres`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use sealpost_protocol::ids::{CallId, OwnerId, PairId, SessionId};
use tokio::sync::Notify;

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    /// Something claimable may have arrived in a session (or the session ended).
    Session(OwnerId, SessionId),
    /// A call's state changed (answered or cancelled).
    Call(OwnerId, CallId),
    /// A pairing may have a new live session (woken on this replica only: a plugin's watch
    /// re-checks the store every `fallback_poll_ms` for the others).
    Pairing(OwnerId, PairId),
}

impl Topic {
    /// Compact text form used as the PostgreSQL notification payload.
    pub fn encode(self) -> String {
        match self {
            Topic::Session(owner, id) => format!("s{owner}{id}"),
            Topic::Call(owner, id) => format!("c{owner}{id}"),
            Topic::Pairing(owner, id) => format!("p{owner}{id}"),
        }
    }

    /// Reads a payload [`Topic::encode`] wrote; `None` if `text` is not one.
    pub fn decode(text: &str) -> Option<Topic> {
        if text.len() != 45 || !text.is_ascii() {
            return None;
        }
        let (owner, id) = (text[1..23].parse().ok()?, &text[23..45]);
        match &text[..1] {
            "s" => Some(Topic::Session(owner, id.parse().ok()?)),
            "c" => Some(Topic::Call(owner, id.parse().ok()?)),
            "p" => Some(Topic::Pairing(owner, id.parse().ok()?)),
            _ => None,
        }
    }
}

/// The per-process wake-up hub.
#[derive(Debug, Default)]
pub struct Hub {
    topics: Mutex<HashMap<Topic, Arc<Notify>>>,
    waiters: AtomicI64,
}

/// A registered interest in a topic; dropping it unregisters.
#[derive(Debug)]
pub struct Subscription<'a> {
    hub: &'a Hub,
    topic: Topic,
    notify: Arc<Notify>,
}

impl Hub {
    /// An empty hub, shared by every long-poll and the store's wake-up listener.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Registers interest in `topic`. Create the `Notified` future from the subscription and
    /// enable it before re-checking the store.
    pub fn subscribe(&self, topic: Topic) -> Subscription<'_> {
        let notify = self
            .topics
            .lock()
            .expect("hub lock")
            .entry(topic)
            .or_default()
            .clone();
        self.waiters.fetch_add(1, Ordering::Relaxed);
        Subscription {
            hub: self,
            topic,
            notify,
        }
    }

    /// Wakes everyone waiting on `topic` in this process.
    pub fn wake(&self, topic: Topic) {
        let notify = self.topics.lock().expect("hub lock").get(&topic).cloned();
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter (after a lost connection to other replicas, or at shutdown).
    pub fn wake_all(&self) {
        let all: Vec<_> = self
            .topics
            .lock()
            .expect("hub lock")
            .values()
            .cloned()
            .collect();
        for notify in all {
            notify.notify_waiters();
        }
    }

    /// How many long-polls are waiting now (a metric).
    pub fn waiters(&self) -> i64 {
        self.waiters.load(Ordering::Relaxed)
    }
}

impl Subscription<'_> {
    /// The `Notify` the topic's wakers signal: wait on it between checks of the store.
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        self.hub.waiters.fetch_sub(1, Ordering::Relaxed);
        let mut topics = self.hub.topics.lock().expect("hub lock");
        // Two references left: the map's and ours, so nobody else waits on this topic.
        if Arc::strong_count(&self.notify) == 2 {
            topics.remove(&self.topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_round_trips_through_its_payload() {
        let topic = Topic::Call(OwnerId::from_bytes([1; 16]), CallId::from_bytes([2; 16]));
        assert_eq!(Topic::decode(&topic.encode()), Some(topic));
        let topic = Topic::Session(OwnerId::from_bytes([3; 16]), SessionId::from_bytes([4; 16]));
        assert_eq!(Topic::decode(&topic.encode()), Some(topic));
        let topic = Topic::Pairing(OwnerId::from_bytes([5; 16]), PairId::from_bytes([6; 16]));
        assert_eq!(Topic::decode(&topic.encode()), Some(topic));
        assert_eq!(Topic::decode("x"), None);
    }

    #[tokio::test]
    async fn a_wake_between_check_and_wait_is_not_lost() {
        let hub = Hub::new();
        let topic = Topic::Session(OwnerId::from_bytes([0; 16]), SessionId::from_bytes([1; 16]));
        {
            let sub = hub.subscribe(topic);
            let notified = sub.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // The "post" lands after registration but before the wait begins.
            hub.wake(topic);
            notified.await;
        }
        assert_eq!(hub.waiters(), 0);
        assert!(hub.topics.lock().unwrap().is_empty());
    }
}
