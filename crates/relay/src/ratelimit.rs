//! Request rate limits, in memory and per replica, through `governor`'s keyed GCRA limiters:
//! per token (every request that carries one), per owner (all of an owner's tokens together,
//! so minting tokens buys no rate) and per client address (sign-in, the one
//! endpoint without a token, and team sign-in's start and callback pages, each its own bucket;
//! the address honours `--trust-proxy`, see `http::client`).
//!
//! A token is charged only once it has authenticated: its JWT verified under the relay's key,
//! and, for every endpoint but the call loop's, its row read and found live. So a forged,
//! malformed or unknown token never reaches the table, and neither does a revoked one. The call
//! loop's operations check the row in the statement that does the work (one round trip fewer
//! per call), so there a signed token is charged first; when the store then finds it dead, its
//! key is forgotten ([`RateLimits::forget_token`]), which governor's own stores cannot do, hence
//! [`Forgettable`]. The sweeper drops every key whose bucket has refilled.
//!
//! A rate admits work, it does not drop work already admitted: the first reply or cancel of a
//! call its token claimed, and the first read of its answer, are charged like any request, but
//! their handler overrides a refusal (`admitted`).

use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::nanos::Nanos;
use governor::state::keyed::ShrinkableKeyedStateStore;
use governor::state::{InMemoryState, NotKeyed, StateStore};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use sealpost_protocol::ids::{OwnerId, TokenId};

use crate::config::Limits;

/// A refused request, with how long until the next one would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: Duration,
}

/// A keyed state store like governor's DashMap store, shared with [`RateLimits`] so that one
/// key can be forgotten.
#[derive(Debug)]
pub(crate) struct Forgettable<K: Hash + Eq>(Arc<DashMap<K, InMemoryState>>);

impl<K: Hash + Eq> Clone for Forgettable<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K: Hash + Eq + Clone> StateStore for Forgettable<K> {
    type Key = K;

    fn measure_and_replace<T, F, E>(&self, key: &K, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        if let Some(state) = self.0.get(key) {
            return state.measure_and_replace(&NotKeyed::NonKey, f);
        }
        let state = self.0.entry(key.clone()).or_default();
        state.measure_and_replace(&NotKeyed::NonKey, f)
    }
}

impl<K: Hash + Eq + Clone> ShrinkableKeyedStateStore<K> for Forgettable<K> {
    fn retain_recent(&self, drop_below: Nanos) {
        self.0.retain(|_, state| {
            // Read without changing: a closure that refuses hands back what it was shown.
            let at = state
                .measure_and_replace(&NotKeyed::NonKey, Err::<((), Nanos), _>)
                .err()
                .flatten();
            at.is_some_and(|at| at > drop_below)
        });
    }

    fn shrink_to_fit(&self) {
        self.0.shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

type TokenLimiter = RateLimiter<TokenId, Forgettable<TokenId>, DefaultClock>;

/// The relay's rate limiters; a limit configured as 0 is off.
#[derive(Debug)]
pub struct RateLimits {
    per_token: Option<(TokenLimiter, Forgettable<TokenId>)>,
    per_owner: Option<DefaultKeyedRateLimiter<OwnerId>>,
    signin_per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
    /// Team sign-in's starts and callbacks: apart from `POST /v1/auth/signin` and from each
    /// other, so a flood of one (each start or callback writes to the database) locks no one
    /// out of the others.
    oidc_start_per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
    oidc_callback_per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
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
        let signin = || {
            quota(
                Duration::from_secs(60),
                limits.signin_rate_per_address_per_min,
                limits.signin_burst_per_address,
            )
        };
        Self {
            per_token: quota(
                Duration::from_secs(1),
                limits.rate_per_token_per_s,
                limits.rate_burst_per_token,
            )
            .map(|quota| {
                let keys = Forgettable(Arc::default());
                let limiter = RateLimiter::new(quota, keys.clone(), DefaultClock::default());
                (limiter, keys)
            }),
            per_owner: limiter(quota(
                Duration::from_secs(1),
                limits.rate_per_owner_per_s,
                limits.rate_burst_per_owner,
            )),
            signin_per_address: limiter(signin()),
            oidc_start_per_address: limiter(signin()),
            oidc_callback_per_address: limiter(signin()),
            clock: DefaultClock::default(),
        }
    }

    /// Charges one request to an authenticated token.
    pub fn check_token(&self, token: TokenId) -> Result<(), Limited> {
        let Some((limiter, _)) = &self.per_token else {
            return Ok(());
        };
        limiter.check_key(&token).map_err(|not_until| Limited {
            retry_after: not_until.wait_time_from(self.clock.now()),
        })
    }

    /// Forgets a token's key: the store found the token dead after it was charged, so the
    /// table keeps no trace of it.
    pub fn forget_token(&self, token: TokenId) {
        if let Some((_, keys)) = &self.per_token {
            keys.0.remove(&token);
        }
    }

    /// Charges one request to the owner of an authenticated token (all their tokens share it).
    pub fn check_owner(&self, owner: OwnerId) -> Result<(), Limited> {
        self.check(self.per_owner.as_ref(), &owner)
    }

    /// Charges one sign-in attempt to a client address.
    pub fn check_signin(&self, address: IpAddr) -> Result<(), Limited> {
        self.check(self.signin_per_address.as_ref(), &address)
    }

    /// Charges one team sign-in start to a client address.
    pub fn check_oidc_start(&self, address: IpAddr) -> Result<(), Limited> {
        self.check(self.oidc_start_per_address.as_ref(), &address)
    }

    /// Charges one team sign-in callback to a client address.
    pub fn check_oidc_callback(&self, address: IpAddr) -> Result<(), Limited> {
        self.check(self.oidc_callback_per_address.as_ref(), &address)
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
        if let Some((limiter, _)) = &self.per_token {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.per_owner {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        for limiter in [
            &self.signin_per_address,
            &self.oidc_start_per_address,
            &self.oidc_callback_per_address,
        ]
        .into_iter()
        .flatten()
        {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// How many tokens the table holds now (a metric).
    pub fn token_keys(&self) -> usize {
        self.per_token.as_ref().map_or(0, |(l, _)| l.len())
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
        let token = TokenId::from_bytes([9; 16]);
        assert!((0..3).all(|_| limiter.check_token(token).is_ok()));
        let refused = limiter.check_token(token).unwrap_err();
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(1)
        );
        assert!(
            limiter.check_token(TokenId::from_bytes([8; 16])).is_ok(),
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
        let owner = OwnerId::from_bytes([1; 16]);
        assert!((0..3).all(|_| limiter.check_owner(owner).is_ok()));
        assert!(limiter.check_owner(owner).is_err());
        assert!(
            limiter.check_owner(OwnerId::from_bytes([2; 16])).is_ok(),
            "buckets are per owner"
        );
    }

    #[test]
    fn a_forgotten_token_leaves_no_key_and_the_sweep_keeps_busy_ones() {
        let limiter = RateLimits::new(&limits(1, 3));
        let (dead, busy) = (TokenId::from_bytes([7; 16]), TokenId::from_bytes([8; 16]));
        limiter.check_token(dead).unwrap();
        limiter.check_token(busy).unwrap();
        limiter.check_token(busy).unwrap();
        assert_eq!(limiter.token_keys(), 2);
        limiter.forget_token(dead);
        assert_eq!(limiter.token_keys(), 1);
        limiter.forget_idle();
        assert_eq!(limiter.token_keys(), 1, "a bucket still refilling is kept");
        assert!(limiter.check_token(busy).is_ok());
        assert!(
            limiter.check_token(busy).is_err(),
            "its charges were kept too"
        );
    }

    #[test]
    fn a_zero_rate_is_off() {
        let limiter = RateLimits::new(&limits(0, 3));
        assert!((0..1000).all(|_| limiter.check_token(TokenId::from_bytes([9; 16])).is_ok()));
        assert_eq!(limiter.token_keys(), 0);
    }
}
