//! Starting and stopping the relay: open the store, load the signing key, bind, serve, sweep,
//! and shut down gracefully (long-polls answer at once, in-flight requests finish).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::config::Config;
use crate::http::auth::Keys;
use crate::http::state::{AppState, Shared};
use crate::ids::random_id;
use crate::ratelimit::RateLimits;
use crate::store::{self, Store, StoreError};
use crate::wake::Hub;

/// How often recorded histogram samples are folded into their buckets.
const METRICS_UPKEEP_INTERVAL: Duration = Duration::from_secs(5);
/// Name of the stored signing key in `relay_secrets`.
const SIGNING_KEY_NAME: &str = "jwt_signing_key";
/// Name of the owner created on a first start with no owners.
pub(crate) const FIRST_OWNER_NAME: &str = "owner";

/// A running relay.
#[derive(Debug)]
pub struct Running {
    /// The address the API listens on (with the port chosen when `listen` named port 0).
    pub addr: SocketAddr,
    /// Where `/metrics` is served on its own, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// The address links and redirects name (`public_url`, with the chosen port when it was
    /// derived from a `listen` of port 0).
    pub public_url: String,
    /// The store the relay serves from.
    pub store: Arc<dyn Store>,
    /// Cancel it to shut down gracefully: the listener closes, long-polls answer at once and
    /// in-flight requests get `shutdown_deadline_ms` to finish.
    pub shutdown: CancellationToken,
    server: JoinHandle<()>,
}

impl Running {
    /// Stops accepting, ends long-polls, and waits for in-flight requests.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.server.await?;
        Ok(())
    }

    /// Waits until the server ends (after `shutdown` is cancelled).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.server.await?;
        Ok(())
    }
}

/// Loads the configured signing key, or the one stored with the database (made on first use).
async fn signing_key(store: &dyn Store, config: &Config) -> anyhow::Result<Vec<u8>> {
    if let Some(key) = &config.signing_key {
        anyhow::ensure!(key.len() >= 32, "the signing key must be at least 32 bytes");
        return Ok(key.clone());
    }
    let mut fresh = vec![0u8; 32];
    getrandom::fill(&mut fresh).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
    Ok(store.secret(SIGNING_KEY_NAME, fresh).await?)
}

/// Creates the first owner when there is none and returns a sign-in link for them (without
/// team sign-in: with it, people become owners by signing in through the provider).
pub(crate) async fn bootstrap_owner(
    store: &dyn Store,
    config: &Config,
) -> anyhow::Result<Option<String>> {
    if !store.list_owners().await?.is_empty() {
        return Ok(None);
    }
    let id = random_id();
    match store.create_owner(id, FIRST_OWNER_NAME, now_ms()).await {
        Ok(()) => {}
        // Another replica won the race; it prints the link.
        Err(StoreError::Duplicate) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let (link, _) = crate::accounts::create_signin_link(
        store,
        &config.public_url,
        id,
        config.limits.signin_code_ttl_s,
    )
    .await?;
    Ok(Some(link))
}

/// Opens the store and starts serving on `config.listen` (port 0 picks a free port).
pub async fn start(config: Config) -> anyhow::Result<Running> {
    // Zero places would refuse every connection; unlike the per-address cap it has no "off".
    anyhow::ensure!(
        config.limits.max_connections > 0,
        "max_connections must be at least 1"
    );
    let store = store::open(&config.database_url)
        .await
        .context("open the database")?;
    start_with_store(config, store).await
}

/// Starts serving with an already opened store.
pub(crate) async fn start_with_store(
    config: Config,
    store: Arc<dyn Store>,
) -> anyhow::Result<Running> {
    let keys = Keys::new(&signing_key(store.as_ref(), &config).await?);
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let mut config = config;
    // A public address derived from `--listen HOST:0` names the port the system chose, so the
    // links the relay prints and the redirects it makes lead somewhere.
    if config.listen.port() == 0 && config.public_url == format!("http://{}", config.listen) {
        config.public_url = format!("http://{addr}");
    }
    let metrics_listener = bind_metrics(&config).await?;
    let metrics_addr = match &metrics_listener {
        Some(listener) => Some(listener.local_addr()?),
        None => None,
    };
    let shutdown = CancellationToken::new();
    let hub = Hub::new();
    store.start_wakeup_listener(hub.clone(), shutdown.clone());
    let limits = config.limits.clone();
    let oidc = match &config.oidc {
        Some(oidc) => Some(Arc::new(crate::oidc::Provider::new(
            oidc.clone(),
            &config.public_url,
        )?)),
        None => None,
    };
    let state = AppState::new(Shared {
        oidc,
        store: store.clone(),
        hub: hub.clone(),
        standing_claims: Default::default(),
        standing_reads: Default::default(),
        keys,
        rate: RateLimits::new(&limits),
        config: Arc::new(config),
        metrics: Arc::new(crate::metrics::Metrics::new()),
        shutdown: shutdown.clone(),
        large_bodies: crate::caps::LargeBodies::new(
            limits.large_body_bytes,
            limits.max_large_bodies_in_flight,
            limits.max_large_bodies_per_owner,
        ),
        long_polls: crate::caps::LongPolls::new(
            limits.max_long_polls_per_token,
            limits.max_long_polls_per_owner,
        ),
        large_replies: crate::caps::KeyedCap::new(limits.max_large_replies_per_token),
        channels: crate::caps::KeyedCap::new(limits.max_channels_per_owner),
        held: crate::quota::HeldBytes::new(limits.max_bytes_held_per_owner),
        admitted: crate::admitted::Admitted::new(limits.max_admitted_calls),
    });
    recount_held_bytes(&state).await;
    tokio::spawn(sweeper(state.clone()));
    if let Some(provider) = state.oidc.clone() {
        tokio::spawn(async move {
            let issuer = provider.config().issuer.clone();
            match provider.check().await {
                Ok(()) => tracing::info!(%issuer, "team sign-in: the identity provider answers"),
                Err(refusal) => {
                    tracing::warn!(%issuer, reason = %refusal, "team sign-in: the identity provider does not answer yet; sign-ins will say so until it does")
                }
            }
        });
    }
    let recheck = state
        .oidc
        .as_ref()
        .and_then(|provider| provider.config().recheck);
    // Team sign-in's confirmations follow the period configured now (`oidc::recheck`).
    store
        .apply_recheck(recheck.map(|every| every.as_millis() as i64))
        .await
        .context("apply the team sign-in re-check period")?;
    if let (Some(provider), Some(every)) = (&state.oidc, recheck) {
        tokio::spawn(crate::oidc::recheck_loop(
            store.clone(),
            provider.clone(),
            every,
            shutdown.clone(),
        ));
    }
    tokio::spawn(metrics_upkeep(state.clone()));
    let connections = crate::serve::ConnectionLimits::new(&limits, state.config.trust_proxy);
    let metrics = state.metrics.clone();
    if let Some(metrics_listener) = metrics_listener {
        tokio::spawn(crate::serve::serve(
            metrics_listener,
            crate::http::metrics_router(state.clone()),
            connections.clone(),
            None,
            shutdown.clone(),
            || {},
        ));
    }
    let public_url = state.config.public_url.clone();
    let router = crate::http::router(state);
    let server = tokio::spawn(crate::serve::serve(
        listener,
        router,
        connections,
        Some(metrics),
        shutdown.clone(),
        move || hub.wake_all(),
    ));
    tracing::info!(%addr, backend = store.backend(), "relay listening");
    Ok(Running {
        addr,
        metrics_addr,
        public_url,
        store,
        shutdown,
        server,
    })
}

/// Binds the metrics address, if one is configured. A default address that is taken (another
/// relay on this host) is skipped with a warning; an address asked for must bind.
async fn bind_metrics(config: &Config) -> anyhow::Result<Option<TcpListener>> {
    let Some(addr) = config.metrics_listen else {
        return Ok(None);
    };
    match TcpListener::bind(addr).await {
        Ok(listener) => Ok(Some(listener)),
        Err(error) if config.metrics_listen_optional => {
            tracing::warn!(
                %addr, %error,
                "metrics are not served: their default address is taken (set --metrics-listen ADDR or off)"
            );
            Ok(None)
        }
        Err(error) => {
            Err(error).with_context(|| format!("listen for metrics on {addr} (--metrics-listen)"))
        }
    }
}

/// Expires and deletes on a fixed interval until shutdown.
async fn sweeper(state: AppState) {
    let interval = Duration::from_millis(state.config.limits.sweep_interval_ms);
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match state
            .store
            .sweep(now_ms(), state.config.limits.sweep_grace_ms)
            .await
        {
            Ok(stats) => {
                // Claimers of an expired session answer `session_ended` now.
                stats.ended.wake(&state.hub);
                tracing::debug!(
                    expired_calls = stats.expired_calls,
                    cleared_calls = stats.cleared_calls,
                    deleted_calls = stats.deleted_calls,
                    ended_sessions = stats.ended_sessions,
                    deleted_sessions = stats.deleted_sessions,
                    "sweep"
                );
            }
            Err(error) => tracing::warn!(error = %store::ErrorChain(&error), "sweep failed"),
        }
        state.rate.forget_idle();
        state.admitted.sweep(now_ms());
        recount_held_bytes(&state).await;
    }
}

/// Sets the per-owner byte counts from the database (see `quota`).
async fn recount_held_bytes(state: &AppState) {
    if state.config.limits.max_bytes_held_per_owner == 0 {
        return;
    }
    let recount = state.held.begin_recount();
    match state.store.bytes_held_by_owner().await {
        Ok(counted) => state.held.finish_recount(recount, counted),
        Err(error) => {
            tracing::warn!(error = %store::ErrorChain(&error), "counting held bytes failed")
        }
    }
}

/// Folds histogram samples into buckets every few seconds, so they cost fixed memory however
/// rarely `/metrics` is scraped.
async fn metrics_upkeep(state: AppState) {
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tokio::time::sleep(METRICS_UPKEEP_INTERVAL) => {}
        }
        state.metrics.upkeep();
    }
}

/// Prints a line for the operator on stdout. A supervisor that keeps only stderr, or a reader
/// that went away, must not stop a relay that is already serving: a failed write is logged
/// (without the text, which may carry a sign-in code).
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    if let Err(error) = writeln!(std::io::stdout().lock(), "{line}") {
        tracing::warn!(
            %error,
            "could not print to stdout; for a sign-in link run `sealpost-relay owner add NAME`"
        );
    }
}

/// Runs until SIGINT or SIGTERM, then shuts down gracefully.
pub(crate) async fn serve(config: Config) -> anyhow::Result<()> {
    let signal = shutdown_signal()?;
    let mut config = config;
    let running = start(config.clone()).await?;
    config.public_url.clone_from(&running.public_url);
    if let Some(oidc) = &config.oidc {
        // People sign in through the provider, held to its domain and claim rules; a link for
        // an owner of the relay's own making would bypass both, so none is made unasked.
        if running.store.list_owners().await?.is_empty() {
            announce(format_args!(
                "No owner yet. Team sign-in is on: people sign in with their team's account ({}) \
                 at {}, and each becomes an owner at their first sign-in. `sealpost-relay owner \
                 add NAME` prints a sign-in link for someone outside the provider.",
                oidc.issuer, config.public_url
            ));
        }
    } else if let Some(link) = bootstrap_owner(running.store.as_ref(), &config).await? {
        // Printed, not logged: the link carries a one-time code and logs keep no codes.
        let validity = crate::accounts::validity_in_words(config.limits.signin_code_ttl_s);
        announce(format_args!(
            "No owner existed, so owner '{FIRST_OWNER_NAME}' was created. Sign in (once, within {validity}):\n  {link}"
        ));
    }
    announce(format_args!(
        "sealpost-relay listening on http://{}",
        running.addr
    ));
    if let Some(addr) = running.metrics_addr {
        announce(format_args!("metrics on http://{addr}/metrics"));
    }
    let shutdown = running.shutdown.clone();
    tokio::spawn(async move {
        signal.await;
        // Before the log line: shutdown never waits on the log.
        shutdown.cancel();
        tracing::info!("shutting down");
    });
    running.wait().await
}

/// Installs the SIGINT and SIGTERM handlers now, so a signal sent as soon as the relay says it
/// listens shuts it down gracefully rather than killing it; the future ends at the first one.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("install the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("install the SIGINT handler")?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_cap_of_zero_is_refused_before_anything_starts() {
        let mut config = Config::new("sqlite://does-not-matter.db");
        config.limits.max_connections = 0;
        let Err(error) = start(config).await else {
            panic!("a relay with no connection places started");
        };
        assert!(error.to_string().contains("max_connections"), "{error}");
    }
}
