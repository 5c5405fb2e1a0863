//! Request rate limits, in memory and per replica, through `governor`'s keyed GCRA limiters:
//! per token (every request that carries one), per owner (all of an owner's tokens together,
//! so minting tokens buys no rate) and per client address (sign-in, the one
//! endpoint without a token; the address honours `--trust-proxy`, see `http::client`).
//!
//! A token is charged only once it has authenticated: its JWT verified under the relay's key,
//! and, for every endpoint but the call loop's four, its row read and found live. So a forged,
//! malformed or unknown token never reaches the table, and neither does a revoked one outside
//! the call loop. The call loop's operations check the row in the statement that does the work
//! (one round trip fewer per call), so there a revoked but correctly signed token is charged
//! before the store refuses it: such keys can only be tokens the relay itself issued, and the
//! sweeper drops every key whose bucket has refilled.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use sealpost_protocol::ids::Id16;

use crate::config::Limits;

/// A refused request, with how long until the next one would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: Duration,
}

/// The relay's rate limiters; a limit configured as 0 is off.
#[derive(Debug)]
pub struct RateLimits {
    per_token: Option<DefaultKeyedRateLimiter<Id16>>,
    per_owner: Option<DefaultKeyedRateLimiter<Id16>>,
    signin_per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
    clock: DefaultClock,
}

fn limiter<K: std::hash::Hash + Eq + Clone>(
    quota: Option<Quota>,
) -> Option<DefaultKeyedRateLimiter<K>> {
    quota.map(RateLimiter::keyed)
}

fn quota(per: Duration, count: u32, burst: u32) -> Option<Quota> {
    let count = NonZeroU32::new(count)?;
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    // `count` requests per `per`, so one request's worth refills every `per / count`.
    Quota::with_period(per / count.get()).map(|q| q.allow_burst(burst))
}

impl RateLimits {
    pub fn new(limits: &Limits) -> Self {
        Self {
            per_token: limiter(quota(
                Duration::from_secs(1),
                limits.rate_per_token_per_s,
                limits.rate_burst_per_token,
            )),
            per_owner: limiter(quota(
                Duration::from_secs(1),
                limits.rate_per_owner_per_s,
                limits.rate_burst_per_owner,
            )),
            signin_per_address: limiter(quota(
                Duration::from_secs(60),
                limits.signin_rate_per_address_per_min,
                limits.signin_burst_per_address,
            )),
            clock: DefaultClock::default(),
        }
    }

    /// Charges one request to an authenticated token.
    pub fn check_token(&self, token: Id16) -> Result<(), Limited> {
        self.check(self.per_token.as_ref(), &token)
    }

    /// Charges one request to the owner of an authenticated token (all their tokens share it).
    pub fn check_owner(&self, owner: Id16) -> Result<(), Limited> {
        self.check(self.per_owner.as_ref(), &owner)
    }

    /// Charges one sign-in attempt to a client address.
    pub fn check_signin(&self, address: IpAddr) -> Result<(), Limited> {
        self.check(self.signin_per_address.as_ref(), &address)
    }

    fn check<K: std::hash::Hash + Eq + Clone>(
        &self,
        limiter: Option<&DefaultKeyedRateLimiter<K>>,
        key: &K,
    ) -> Result<(), Limited> {
        let Some(limiter) = limiter else {
            return Ok(());
        };
        limiter.check_key(key).map_err(|not_until| Limited {
            retry_after: not_until.wait_time_from(self.clock.now()),
        })
    }

    /// Forgets keys whose buckets have refilled completely (the sweeper calls this).
    pub fn forget_idle(&self) {
        if let Some(limiter) = &self.per_token {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.per_owner {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.signin_per_address {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// How many tokens the table holds now (a metric).
    pub fn token_keys(&self) -> usize {
        self.per_token.as_ref().map_or(0, |l| l.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_s: u32, burst: u32) -> Limits {
        Limits {
            rate_per_token_per_s: per_s,
            rate_burst_per_token: burst,
            ..Limits::default()
        }
    }

    #[test]
    fn a_burst_is_allowed_then_refused_per_token() {
        let limiter = RateLimits::new(&limits(1, 3));
        let token = Id16([9; 16]);
        assert!((0..3).all(|_| limiter.check_token(token).is_ok()));
        let refused = limiter.check_token(token).unwrap_err();
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(1)
        );
        assert!(
            limiter.check_token(Id16([8; 16])).is_ok(),
            "buckets are per token"
        );
    }

    #[test]
    fn an_owner_s_tokens_share_the_owner_s_rate() {
        let limiter = RateLimits::new(&Limits {
            rate_per_owner_per_s: 1,
            rate_burst_per_owner: 3,
            ..Limits::default()
        });
        let owner = Id16([1; 16]);
        assert!((0..3).all(|_| limiter.check_owner(owner).is_ok()));
        assert!(limiter.check_owner(owner).is_err());
        assert!(
            limiter.check_owner(Id16([2; 16])).is_ok(),
            "buckets are per owner"
        );
    }

    #[test]
    fn a_zero_rate_is_off() {
        let limiter = RateLimits::new(&limits(0, 3));
        assert!((0..1000).all(|_| limiter.check_token(Id16([9; 16])).is_ok()));
        assert_eq!(limiter.token_keys(), 0);
    }
}
