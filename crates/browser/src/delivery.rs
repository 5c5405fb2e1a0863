//! What the tab does when sending a call's answer (a reply or a cancel) fails: send it again
//! while the call's lease lasts, put a short refusal in the place of a reply the relay will not
//! hold, or give up and say why. The relay admits work at the door and does not refuse, by a
//! rate, the first answer of a call the tab holds the lease of (docs/RELAY.md, "Limits and
//! admitted work"); this loop covers what is left: a reply that reached another replica, a
//! relay restarting, a channel that closed, a network that dropped.

use crate::backoff::Backoff;

/// What a request to the relay came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayError {
    /// No answer (network down, relay away, channel closed) or an answer that is not the API's.
    Unreachable(String),
    /// The request was aborted by a stop.
    Aborted,
    /// The relay answered with an error status and code, and when to try again if it said.
    Status {
        /// The HTTP status (the channel answers with the same ones).
        status: u16,
        /// The relay's stable error code.
        code: String,
        /// The `Retry-After` the relay sent, in seconds.
        retry_after_s: Option<u64>,
    },
}

impl RelayError {
    /// The relay's stable error code, or a description.
    pub fn describe(&self) -> String {
        match self {
            Self::Unreachable(why) => format!("the relay did not answer ({why})"),
            Self::Aborted => "stopped".into(),
            Self::Status { status, code, .. } => format!("the relay answered {status} ({code})"),
        }
    }

    /// Whether sending the same request again later may succeed: no answer, a timeout, a rate
    /// or share refusal, or a relay too busy; never a refusal about the call itself.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable(_) => true,
            Self::Aborted => false,
            Self::Status { status, .. } => matches!(status, 408 | 429 | 503),
        }
    }
}

/// The next step after a failed send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Send the same answer again after this many milliseconds.
    Retry {
        /// How long to wait first.
        after_ms: u64,
    },
    /// Seal a short `too_large` refusal in the reply's place and send that at once: the
    /// account's bytes quota is full, and the agent must be told rather than left waiting.
    Shrink,
    /// Stop: the answer was not delivered, for this reason (shown in Activity).
    GiveUp(String),
}

/// The sends of one answer, until its lease ends.
#[derive(Debug, Clone)]
pub struct Attempts {
    lease_ends_at_ms: f64,
    backoff: Backoff,
}

impl Attempts {
    /// The attempts at an answer whose call's lease ends at `lease_ends_at_ms` (this tab's
    /// clock, Unix ms).
    pub fn new(lease_ends_at_ms: f64) -> Self {
        Self {
            lease_ends_at_ms,
            backoff: Backoff::default(),
        }
    }

    /// What to do after `error` at `now_ms`; `shrunk` when the answer is already a short
    /// refusal or a cancel (nothing to shrink); `unit` is a uniform draw in `[0, 1)` for jitter.
    pub fn after(&mut self, error: &RelayError, now_ms: f64, shrunk: bool, unit: f64) -> Next {
        if let RelayError::Status {
            status: 429, code, ..
        } = error
            && code == "bytes_quota_exceeded"
            && !shrunk
        {
            return Next::Shrink;
        }
        if !error.is_transient() {
            return Next::GiveUp(match error {
                RelayError::Aborted => "the tab stopped before the relay took it".into(),
                RelayError::Status { status: 401, .. } => {
                    "the tab's sign-in ended before the relay took it".into()
                }
                other => other.describe(),
            });
        }
        let asked = match error {
            RelayError::Status {
                retry_after_s: Some(seconds),
                ..
            } => seconds.saturating_mul(1000),
            _ => 0,
        };
        let after_ms = asked.max(self.backoff.next_delay_ms(unit));
        if now_ms + after_ms as f64 >= self.lease_ends_at_ms {
            return Next::GiveUp(format!("{} until the call's lease ended", error.describe()));
        }
        Next::Retry { after_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, code: &str, retry_after_s: Option<u64>) -> RelayError {
        RelayError::Status {
            status,
            code: code.into(),
            retry_after_s,
        }
    }

    #[test]
    fn a_rate_refusal_is_sent_again_after_its_retry_after_within_the_lease() {
        let mut attempts = Attempts::new(30_000.0);
        let refused = status(429, "owner_rate_limited", Some(1));
        assert_eq!(
            attempts.after(&refused, 0.0, false, 0.5),
            Next::Retry { after_ms: 1_000 }
        );
        assert!(matches!(
            attempts.after(&status(503, "busy", None), 1_000.0, false, 0.0),
            Next::Retry { after_ms } if after_ms > 0
        ));
        assert!(matches!(
            attempts.after(
                &RelayError::Unreachable("the channel closed".into()),
                2_000.0,
                false,
                0.0
            ),
            Next::Retry { .. }
        ));
    }

    #[test]
    fn retries_stop_where_the_lease_ends_and_say_what_the_relay_answered() {
        let mut attempts = Attempts::new(30_000.0);
        let refused = status(429, "owner_rate_limited", Some(1));
        let Next::GiveUp(why) = attempts.after(&refused, 29_500.0, false, 0.5) else {
            panic!("a retry after the lease is useless")
        };
        assert!(why.contains("429 (owner_rate_limited)"), "{why}");
        assert!(why.contains("lease ended"), "{why}");
    }

    #[test]
    fn a_refusal_about_the_call_itself_is_final() {
        for (code, error) in [
            (404, "not_found"),
            (409, "wrong_call_state"),
            (410, "lease_expired"),
            (413, "reply_too_large"),
            (400, "bad_request"),
        ] {
            let mut attempts = Attempts::new(30_000.0);
            assert_eq!(
                attempts.after(&status(code, error, Some(1)), 0.0, false, 0.5),
                Next::GiveUp(format!("the relay answered {code} ({error})"))
            );
        }
        let mut attempts = Attempts::new(30_000.0);
        assert!(matches!(
            attempts.after(&status(401, "unauthorized", None), 0.0, false, 0.5),
            Next::GiveUp(why) if why.contains("sign-in")
        ));
        assert!(matches!(
            attempts.after(&RelayError::Aborted, 0.0, false, 0.5),
            Next::GiveUp(why) if why.contains("stopped")
        ));
    }

    #[test]
    fn a_full_bytes_quota_shrinks_the_reply_once_then_waits_for_room() {
        let mut attempts = Attempts::new(30_000.0);
        let full = status(429, "bytes_quota_exceeded", Some(5));
        assert_eq!(attempts.after(&full, 0.0, false, 0.5), Next::Shrink);
        assert_eq!(
            attempts.after(&full, 0.0, true, 0.5),
            Next::Retry { after_ms: 5_000 }
        );
    }
}
