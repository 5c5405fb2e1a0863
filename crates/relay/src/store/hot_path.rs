//! Two economies on the call loop's hot path, both about state that is advisory rather than
//! part of at-most-once delivery:
//!
//! - [`SeenThrottle`]: `claimer_seen_at` (when the tab last polled) is written at most once per
//!   [`CLAIMER_SEEN_RESOLUTION_MS`] per session, not on every claim. Readers only compare it
//!   with twice the long-poll wait, so a second of resolution loses nothing.
//! - [`DeliveryMarks`]: the first read of an answered call marks it delivered without waiting
//!   for that write: the marks of concurrent reads are written together, and until they commit
//!   this process reports the call as delivered already. A crash before the commit leaves the
//!   call `answered`, which reads exactly like `delivered` (the reply stays readable either way).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use sealpost_protocol::ids::Id16;

use super::Ms;

/// Resolution of `claimer_seen_at`.
pub const CLAIMER_SEEN_RESOLUTION_MS: Ms = 1_000;
/// Sessions remembered before the throttle forgets them all (and writes each once more).
const MAX_TRACKED_SESSIONS: usize = 65_536;

/// Remembers, per process, when each session's `claimer_seen_at` was last written.
#[derive(Debug, Default)]
pub(crate) struct SeenThrottle(Mutex<HashMap<(Id16, Id16), Ms>>);

impl SeenThrottle {
    /// Whether a claim at `now` should write `claimer_seen_at`; if so, records that it did.
    pub(crate) fn due(&self, owner_id: Id16, session_id: Id16, now: Ms) -> bool {
        let mut seen = self.0.lock().expect("throttle lock");
        if seen.len() >= MAX_TRACKED_SESSIONS {
            seen.clear();
        }
        let key = (owner_id, session_id);
        match seen.get(&key) {
            Some(&last) if (last..last + CLAIMER_SEEN_RESOLUTION_MS).contains(&now) => false,
            _ => {
                seen.insert(key, now);
                true
            }
        }
    }
}

/// Delivery marks not yet committed.
#[derive(Debug, Default)]
pub(crate) struct DeliveryMarks(Mutex<Marks>);

#[derive(Debug, Default)]
struct Marks {
    /// Marked by a read, not yet handed to a write.
    queued: Vec<(Id16, Id16)>,
    /// Marked by a read and not yet committed (queued or being written).
    uncommitted: HashSet<(Id16, Id16)>,
}

/// What a read of an answered call should do about its mark.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MarkOutcome {
    /// An earlier read marked it: report `delivered`.
    AlreadyMarked,
    /// This read marked it; the caller must start a flush (no flush is queued yet).
    MarkedStartFlush,
    /// This read marked it; a flush already queued will write it.
    Marked,
}

impl DeliveryMarks {
    pub(crate) fn mark(&self, owner_id: Id16, call_id: Id16) -> MarkOutcome {
        let mut marks = self.0.lock().expect("marks lock");
        if !marks.uncommitted.insert((owner_id, call_id)) {
            return MarkOutcome::AlreadyMarked;
        }
        marks.queued.push((owner_id, call_id));
        if marks.queued.len() == 1 {
            MarkOutcome::MarkedStartFlush
        } else {
            MarkOutcome::Marked
        }
    }

    /// Takes every queued mark for one write; later marks start a new flush.
    pub(crate) fn take_queued(&self) -> Vec<(Id16, Id16)> {
        std::mem::take(&mut self.0.lock().expect("marks lock").queued)
    }

    /// A flush that will never run (its write was dropped before it ran): its marks go back to
    /// unmarked, so a later read marks them again and starts a new flush.
    pub(crate) fn abandon_queued(&self) {
        let mut marks = self.0.lock().expect("marks lock");
        let queued = std::mem::take(&mut marks.queued);
        for key in &queued {
            marks.uncommitted.remove(key);
        }
    }

    /// After the write's transaction ended (committed or not): the database now answers for
    /// these calls. A failed write leaves them `answered`, which a later read marks again.
    pub(crate) fn settled(&self, written: &[(Id16, Id16)]) {
        let mut marks = self.0.lock().expect("marks lock");
        for key in written {
            marks.uncommitted.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Id16 = Id16([1; 16]);
    const S: Id16 = Id16([2; 16]);

    #[test]
    fn the_throttle_writes_once_per_resolution_window() {
        let throttle = SeenThrottle::default();
        assert!(throttle.due(A, S, 10_000));
        assert!(!throttle.due(A, S, 10_500));
        assert!(throttle.due(A, S, 11_000));
        assert!(
            throttle.due(A, Id16([3; 16]), 11_000),
            "sessions are tracked apart"
        );
        assert!(
            throttle.due(A, S, 9_000),
            "a clock that steps back writes again"
        );
    }

    #[test]
    fn a_mark_reads_as_delivered_until_it_settles() {
        let marks = DeliveryMarks::default();
        let (c1, c2) = (Id16([4; 16]), Id16([5; 16]));
        assert_eq!(marks.mark(A, c1), MarkOutcome::MarkedStartFlush);
        assert_eq!(marks.mark(A, c2), MarkOutcome::Marked);
        assert_eq!(marks.mark(A, c1), MarkOutcome::AlreadyMarked);
        let taken = marks.take_queued();
        assert_eq!(taken, vec![(A, c1), (A, c2)]);
        assert_eq!(
            marks.mark(A, c1),
            MarkOutcome::AlreadyMarked,
            "being written"
        );
        marks.settled(&taken);
        assert_eq!(
            marks.mark(A, c1),
            MarkOutcome::MarkedStartFlush,
            "the database answers now"
        );
    }

    #[test]
    fn an_abandoned_flush_does_not_stall_later_marks() {
        let marks = DeliveryMarks::default();
        let c1 = Id16([4; 16]);
        assert_eq!(marks.mark(A, c1), MarkOutcome::MarkedStartFlush);
        marks.abandon_queued();
        assert_eq!(
            marks.mark(A, c1),
            MarkOutcome::MarkedStartFlush,
            "marked again, with a new flush"
        );
    }
}
