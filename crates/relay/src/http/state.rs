//! What every handler shares: the store, the wake-up hub and standing claims, keys, limits, the
//! shutdown signal.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::auth::Keys;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::ratelimit::RateLimits;
use crate::store::Store;
use crate::wake::Hub;

/// Cloned for every request (axum's `State`), so it is one `Arc`: one reference count to
/// bump, not one per field.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(Debug)]
pub struct Shared {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    /// Claims standing for the next post to their session on this replica.
    pub standing_claims: crate::handoff::Claims,
    /// Reads (and posts' waits) standing for the reply to their call on this replica.
    pub standing_reads: crate::handoff::Reads,
    pub keys: Keys,
    pub config: Arc<Config>,
    /// The team's identity provider, when team sign-in is set up.
    pub oidc: Option<Arc<crate::oidc::Provider>>,
    pub rate: RateLimits,
    pub metrics: std::sync::Arc<Metrics>,
    /// Cancelled at shutdown: long-polls answer at once.
    pub shutdown: CancellationToken,
    /// Large request bodies being read now (`max_large_bodies_in_flight`, and
    /// `max_large_bodies_per_owner` of them per owner).
    pub large_bodies: crate::caps::LargeBodies,
    /// Bytes each owner holds in calls and replies (`max_bytes_held_per_owner`).
    pub held: crate::quota::HeldBytes,
    /// Large replies being sent now, per token (`max_large_replies_per_token`).
    pub large_replies: crate::caps::KeyedCap<sealpost_protocol::ids::TokenId>,
    /// Claims and reads waiting now, per token and per owner (`max_long_polls_per_token`,
    /// `max_long_polls_per_owner`).
    pub long_polls: crate::caps::LongPolls,
    /// Session channels open now, per owner (`max_channels_per_owner`).
    pub channels: crate::caps::KeyedCap<sealpost_protocol::ids::OwnerId>,
    /// Calls claimed or answered here, whose completion a rate does not refuse
    /// (`max_admitted_calls`).
    pub admitted: crate::admitted::Admitted,
}
