//! Caps on what is in flight at once: connections per address, large request bodies, large
//! replies per token. Each is a count that a guard gives back when it drops, so a request that
//! fails or is dropped half-way cannot leak its place.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// Request bodies above `threshold` bytes (declared, or of unknown length) read at once.
#[derive(Debug)]
pub struct LargeBodies {
    threshold: usize,
    slots: Arc<Semaphore>,
}

impl LargeBodies {
    pub fn new(threshold: usize, at_once: u32) -> Self {
        Self {
            threshold,
            slots: Arc::new(Semaphore::new(at_once as usize)),
        }
    }

    /// Admits a request whose body may be up to `cap` bytes: a small declared body needs no
    /// place; a large or chunked one takes one, or gets `None` when all are taken. The place is
    /// held by the returned guard (keep it until the request's bytes are dropped).
    pub fn admit(&self, headers: &HeaderMap, cap: usize) -> Option<Option<OwnedSemaphorePermit>> {
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        self.admit_len(declared.unwrap_or(cap).min(cap))
    }

    /// Admits a body of `len` bytes (a channel message, already read): as [`Self::admit`].
    pub fn admit_len(&self, len: usize) -> Option<Option<OwnedSemaphorePermit>> {
        if len <= self.threshold {
            return Some(None);
        }
        self.slots.clone().try_acquire_owned().ok().map(Some)
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
        let gate = LargeBodies::new(100, 1);
        let mut small = HeaderMap::new();
        small.insert(CONTENT_LENGTH, "50".parse().unwrap());
        let mut large = HeaderMap::new();
        large.insert(CONTENT_LENGTH, "5000".parse().unwrap());
        assert!(gate.admit(&small, 10_000).unwrap().is_none());
        // A small cap bounds an unknown length: no place needed.
        assert!(gate.admit(&HeaderMap::new(), 80).unwrap().is_none());
        let held = gate.admit(&large, 10_000).unwrap();
        assert!(held.is_some());
        assert!(gate.admit(&HeaderMap::new(), 10_000).is_none());
        drop(held);
        assert!(gate.admit(&large, 10_000).unwrap().is_some());
    }
}
