//! Per-token request rate limit: a token bucket per token id, in memory, per replica.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use sealpost_protocol::ids::Id16;

/// Token buckets keyed by token id.
#[derive(Debug)]
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<Id16, (f64, Instant)>>,
}

impl RateLimiter {
    /// `per_second == 0` disables the limit.
    pub fn new(per_second: u32, burst: u32) -> Self {
        Self {
            per_second: f64::from(per_second),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `token`'s bucket; false when it is empty.
    pub fn allow(&self, token: Id16) -> bool {
        if self.per_second == 0.0 {
            return true;
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("rate lock");
        let (level, last) = buckets.entry(token).or_insert((self.burst, now));
        *level =
            (*level + now.duration_since(*last).as_secs_f64() * self.per_second).min(self.burst);
        *last = now;
        if *level >= 1.0 {
            *level -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forgets buckets that have refilled completely (called by the sweeper).
    pub fn forget_idle(&self) {
        if self.per_second == 0.0 {
            return;
        }
        let now = Instant::now();
        let full_after = self.burst / self.per_second;
        self.buckets
            .lock()
            .expect("rate lock")
            .retain(|_, (_, last)| now.duration_since(*last).as_secs_f64() < full_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_allowed_then_refused() {
        let limiter = RateLimiter::new(1, 3);
        let token = Id16([9; 16]);
        assert!((0..3).all(|_| limiter.allow(token)));
        assert!(!limiter.allow(token));
        assert!(limiter.allow(Id16([8; 16])), "buckets are per token");
    }
}
