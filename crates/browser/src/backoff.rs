//! Exponential backoff with full jitter (AWS's "full jitter": a uniform draw below the capped
//! exponential), so many tabs that lost the relay together do not come back together.

/// First delay's ceiling.
pub const BASE_MS: u64 = 250;
/// No delay is longer than this: a relay that comes back is found within it.
pub const CAP_MS: u64 = 10_000;

/// The state of one run of failures.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// After a success: the next failure starts from [`BASE_MS`] again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// The ceiling of the next delay, without jitter.
    pub fn ceiling_ms(&self) -> u64 {
        BASE_MS
            .saturating_mul(1u64 << self.failures.min(16))
            .min(CAP_MS)
    }

    /// The delay after one more failure; `unit` is a uniform draw in `[0, 1)`.
    pub fn next_delay_ms(&mut self, unit: f64) -> u64 {
        let ceiling = self.ceiling_ms();
        self.failures = self.failures.saturating_add(1);
        // At least a tenth of the ceiling, so a burst of failures cannot spin.
        let low = ceiling / 10;
        low + ((ceiling - low) as f64 * unit.clamp(0.0, 1.0)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_stay_there() {
        let mut backoff = Backoff::default();
        let ceilings: Vec<u64> = (0..8)
            .map(|_| {
                let c = backoff.ceiling_ms();
                backoff.next_delay_ms(0.5);
                c
            })
            .collect();
        assert_eq!(ceilings, [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
    }

    #[test]
    fn jitter_spreads_within_the_ceiling_and_reset_starts_over() {
        let mut a = Backoff::default();
        let mut b = Backoff::default();
        for _ in 0..5 {
            a.next_delay_ms(0.0);
            b.next_delay_ms(0.0);
        }
        assert_eq!(a.next_delay_ms(0.0), 800);
        assert_eq!(b.next_delay_ms(0.999_999), 7999);
        a.reset();
        assert!(a.next_delay_ms(1.0) <= BASE_MS);
    }
}
