//! What every handler shares: the store, the wake-up hub, keys, limits, the shutdown signal.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::auth::Keys;
use crate::config::Config;
use crate::ratelimit::RateLimiter;
use crate::store::Store;
use crate::wake::Hub;

#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub keys: Keys,
    pub config: Arc<Config>,
    pub rate: Arc<RateLimiter>,
    /// Cancelled at shutdown: long-polls answer at once.
    pub shutdown: CancellationToken,
}
