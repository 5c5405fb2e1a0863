//! An economy on the call loop's hot path, about state that is advisory rather than part of
//! at-most-once delivery: `claimer_seen_at` (when the tab last polled) is written at most once
//! per [`CLAIMER_SEEN_RESOLUTION_MS`] per session, not on every claim. Readers only compare it
//! with twice the long-poll wait, so a second of resolution loses nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use sealpost_protocol::ids::{OwnerId, SessionId};
use sealpost_time::UnixMillis;

/// Resolution of `claimer_seen_at`.
pub const CLAIMER_SEEN_RESOLUTION_MS: u64 = 1_000;
/// Sessions remembered before the throttle forgets them all (and writes each once more).
const MAX_TRACKED_SESSIONS: usize = 65_536;

/// Remembers, per process, when each session's `claimer_seen_at` was last written.
#[derive(Debug, Default)]
pub(crate) struct SeenThrottle(Mutex<HashMap<(OwnerId, SessionId), UnixMillis>>);

impl SeenThrottle {
    /// Whether a claim at `now` should write `claimer_seen_at`; if so, records that it did.
    pub(crate) fn due(&self, owner_id: OwnerId, session_id: SessionId, now: UnixMillis) -> bool {
        let mut seen = self.0.lock().expect("throttle lock");
        if seen.len() >= MAX_TRACKED_SESSIONS {
            seen.clear();
        }
        let key = (owner_id, session_id);
        match seen.get(&key) {
            Some(&last)
                if (last..last.saturating_add_ms(CLAIMER_SEEN_RESOLUTION_MS)).contains(&now) =>
            {
                false
            }
            _ => {
                seen.insert(key, now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: OwnerId = OwnerId::from_bytes([1; 16]);
    const S: SessionId = SessionId::from_bytes([2; 16]);

    fn at(ms: u64) -> UnixMillis {
        UnixMillis::from_ms(ms)
    }

    #[test]
    fn the_throttle_writes_once_per_resolution_window() {
        let throttle = SeenThrottle::default();
        assert!(throttle.due(A, S, at(10_000)));
        assert!(!throttle.due(A, S, at(10_500)));
        assert!(throttle.due(A, S, at(11_000)));
        assert!(
            throttle.due(A, SessionId::from_bytes([3; 16]), at(11_000)),
            "sessions are tracked apart"
        );
        assert!(
            throttle.due(A, S, at(9_000)),
            "a clock that steps back writes again"
        );
    }
}
