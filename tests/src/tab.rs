//! A native stand-in for the browser tab: the real executor (native build) serving one session
//! over the relay's real HTTP API or its session channel (as the browser's Worker does), on a
//! thread of its own (the executor is not `Send`, as in a browser). It starts a session with a
//! hello, claims calls by long-poll, runs them, and posts sealed replies or cancels, until
//! stopped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context as _, Result};
use sealpost_executor::{Delivery, Executor, Outcome};
use sealpost_protocol::api::ClaimResponse;
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_seal::PairingSecret;
use sealpost_time::UnixMillis;
use tokio::sync::watch;

use sealpost_testkit::{Client, id};

use crate::LiveRelay;
use crate::channel::Channel;

/// What the tab did, readable from the test while it runs.
#[derive(Debug, Default)]
pub struct TabLog {
    /// Calls answered with a sealed reply.
    pub replied: AtomicUsize,
    /// Calls cancelled (undecryptable, replayed, expired, past the session).
    pub cancelled: AtomicUsize,
    /// Summaries of the proposals waiting for review, after the last call.
    pub pending_proposals: Mutex<Vec<String>>,
    /// Calls claimed and deliberately left unanswered (a tab that holds its calls).
    pub held: Mutex<Vec<CallId>>,
}

/// What the tab does with the calls it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TabMode {
    /// Runs each call and answers it.
    Serve,
    /// Claims each call and never answers (a tab stuck in a long tool).
    Hold,
}

/// How the tab speaks to the relay once its session is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TabTransport {
    /// `POST …/claims`, `PUT …/reply`, `POST …/cancel`, each a request.
    Http,
    /// The session channel, one request at a time, as the browser's Worker uses it.
    Channel,
}

/// The tab's end of the relay, by either transport.
enum Link {
    Http(Client),
    Channel(Box<Channel>),
}

impl Link {
    async fn claim(
        &mut self,
        session_id: SessionId,
        max: u32,
        wait_ms: u64,
    ) -> Result<ClaimResponse> {
        match self {
            Self::Http(client) => client.claim(session_id, max, wait_ms).await,
            Self::Channel(channel) => channel.claim(session_id, max, wait_ms).await,
        }
    }

    async fn reply(&mut self, call_id: CallId, envelope: Vec<u8>) -> Result<()> {
        match self {
            Self::Http(client) => client.reply(call_id, envelope).await,
            Self::Channel(channel) => channel.reply(call_id, envelope).await,
        }
    }

    async fn cancel(&mut self, call_id: CallId, reason: CancelReason) -> Result<()> {
        match self {
            Self::Http(client) => client.cancel(call_id, reason).await,
            Self::Channel(channel) => channel.cancel(call_id, reason).await,
        }
    }
}

/// A running tab. Dropping it stops the claim loop (the session stays on the relay, as when a
/// tab is closed without saying goodbye).
#[derive(Debug)]
pub struct Tab {
    /// The session it serves.
    pub session_id: SessionId,
    /// What it did.
    pub log: Arc<TabLog>,
    stop: watch::Sender<bool>,
    /// Disconnected once the tab's loop has ended.
    ended: std::sync::mpsc::Receiver<()>,
    /// The tab's own thread, when it has one.
    own: Option<TabThreads>,
}

fn now_ms() -> UnixMillis {
    sealpost_relay::clock::now_ms()
}

/// Everything a tab's thread needs to start it.
struct Launch {
    base: String,
    token: String,
    secret: PairingSecret,
    ttl_s: u64,
    mode: TabMode,
    transport: TabTransport,
    build: Box<dyn FnOnce() -> Executor + Send>,
    ready: tokio::sync::oneshot::Sender<Result<SessionId>>,
    stopped: watch::Receiver<bool>,
    log: Arc<TabLog>,
    /// Dropped when the tab's loop ends.
    running: std::sync::mpsc::Sender<()>,
}

impl Launch {
    async fn run(self) {
        let Self {
            base,
            token,
            secret,
            ttl_s,
            mode,
            transport,
            build,
            ready,
            stopped,
            log,
            running,
        } = self;
        // A client of its own: a shared one would keep some of its connections on another
        // thread's runtime, and every request on them would cross threads.
        let client = Client::new(base, reqwest::Client::new(), token);
        let executor = build();
        let session_id = id::<SessionId>();
        let now = now_ms();
        let started = async {
            let hello = executor
                .start_session(
                    &secret,
                    session_id,
                    now,
                    now.saturating_add_ms(ttl_s * 1000),
                    &mut rand::rng(),
                )
                .context("start the session")?;
            client
                .create_session(session_id, secret.pair_id(), hello, ttl_s)
                .await?;
            Ok(match transport {
                TabTransport::Http => Link::Http(client),
                TabTransport::Channel => {
                    Link::Channel(Box::new(Channel::open(&client.base, &client.token).await?))
                }
            })
        };
        let mut link = match started.await {
            Ok(link) => link,
            Err(error) => {
                let _ = ready.send(Err(error));
                return;
            }
        };
        let _ = ready.send(Ok(session_id));
        serve(&mut link, &executor, session_id, mode, stopped, &log).await;
        drop(running);
    }
}

/// Threads that run tabs, each tab's executor on one of them (it is not `Send`, as a browser
/// tab's lives on its own event loop). A tab started alone has a thread of its own; a load
/// test's hundred share a few, so that a hundred threads' wake-ups do not take the cores the
/// relay is measured on.
#[derive(Debug)]
pub struct TabThreads {
    queues: Vec<tokio::sync::mpsc::UnboundedSender<Launch>>,
    threads: Vec<JoinHandle<()>>,
    next: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch").finish_non_exhaustive()
    }
}

impl TabThreads {
    /// `n` threads, each with a runtime of its own.
    pub fn new(n: usize) -> Self {
        let (mut queues, mut threads) = (Vec::new(), Vec::new());
        for _ in 0..n.max(1) {
            let (queue, mut launches) = tokio::sync::mpsc::unbounded_channel::<Launch>();
            queues.push(queue);
            threads.push(std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    while let Some(launch) = launches.recv().await {
                        tokio::task::spawn_local(launch.run());
                    }
                });
            }));
        }
        Self {
            queues,
            threads,
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Starts a tab on the next thread, as [`Tab::start_with`] does on a thread of its own.
    pub async fn start(
        &self,
        relay: &LiveRelay,
        secret: &PairingSecret,
        ttl_s: u64,
        mode: TabMode,
        transport: TabTransport,
        build: impl FnOnce() -> Executor + Send + 'static,
    ) -> Result<Tab> {
        let (stop, stopped) = watch::channel(false);
        let (ready, readied) = tokio::sync::oneshot::channel();
        let (running, ended) = std::sync::mpsc::channel();
        let log = Arc::new(TabLog::default());
        let launch = Launch {
            base: relay.owner.base.clone(),
            token: relay.owner.token.clone(),
            secret: PairingSecret::from_bytes(*secret.expose()),
            ttl_s,
            mode,
            transport,
            build: Box::new(build),
            ready,
            stopped,
            log: log.clone(),
            running,
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.queues.len();
        self.queues[n]
            .send(launch)
            .map_err(|_| anyhow::anyhow!("the tab thread stopped"))?;
        let session_id = readied.await.context("the tab thread stopped")??;
        Ok(Tab {
            session_id,
            log,
            stop,
            ended,
            own: None,
        })
    }
}

impl Drop for TabThreads {
    fn drop(&mut self) {
        // Closing the queues ends each thread's loop; tabs still running on it end with it.
        self.queues.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Tab {
    /// Starts a session of `ttl_s` seconds for `secret` on `relay` and serves it with the
    /// executor `build` makes (on the tab's own thread).
    pub async fn start(
        relay: &LiveRelay,
        secret: &PairingSecret,
        ttl_s: u64,
        build: impl FnOnce() -> Executor + Send + 'static,
    ) -> Result<Self> {
        Self::start_in(relay, secret, ttl_s, TabMode::Serve, build).await
    }

    /// As [`Tab::start`], doing `mode` with each claimed call.
    pub async fn start_in(
        relay: &LiveRelay,
        secret: &PairingSecret,
        ttl_s: u64,
        mode: TabMode,
        build: impl FnOnce() -> Executor + Send + 'static,
    ) -> Result<Self> {
        Self::start_with(relay, secret, ttl_s, mode, TabTransport::Http, build).await
    }

    /// As [`Tab::start_in`], speaking `transport`.
    pub async fn start_with(
        relay: &LiveRelay,
        secret: &PairingSecret,
        ttl_s: u64,
        mode: TabMode,
        transport: TabTransport,
        build: impl FnOnce() -> Executor + Send + 'static,
    ) -> Result<Self> {
        let own = TabThreads::new(1);
        let mut tab = own
            .start(relay, secret, ttl_s, mode, transport, build)
            .await?;
        tab.own = Some(own);
        Ok(tab)
    }

    /// Stops claiming; the session stays on the relay.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        let _ = self.stop.send(true);
        // Disconnected once the loop has ended (or its thread has gone).
        let _ = self.ended.recv();
        drop(self.own.take());
    }
}

impl Drop for Tab {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Serves `session_id` until stopped. The stop wins over every await in the loop, not only the
/// claim: a test that drops the tab blocks its own thread in `join`, and when the relay runs
/// in-process on that thread a reply still waiting for the relay's answer would never get it.
async fn serve(
    link: &mut Link,
    executor: &Executor,
    session_id: SessionId,
    mode: TabMode,
    mut stopped: watch::Receiver<bool>,
    log: &TabLog,
) {
    tokio::select! {
        () = claim_and_answer(link, executor, session_id, mode, log) => {}
        _ = stopped.wait_for(|stop| *stop) => {}
    }
}

async fn claim_and_answer(
    link: &mut Link,
    executor: &Executor,
    session_id: SessionId,
    mode: TabMode,
    log: &TabLog,
) {
    let clock = now_ms;
    loop {
        let Ok(claimed) = link.claim(session_id, 50, 5_000).await else {
            // The session ended or the relay went away: a real tab backs off; this one waits a
            // moment and tries again until it is stopped.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        for call in claimed.calls {
            if mode == TabMode::Hold {
                log.held.lock().expect("not poisoned").push(call.call_id);
                continue;
            }
            let outcome = executor
                .handle(&call.envelope.0, &clock, &mut rand::rng())
                .await;
            // Recorded before answering, so whoever reads the answer sees the proposals too.
            let pending = executor
                .pending_proposals()
                .iter()
                .map(|p| format!("{p:?}"))
                .collect();
            *log.pending_proposals
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = pending;
            let sent = match &outcome {
                Outcome::Reply { envelope, .. } => {
                    let sent = link.reply(call.call_id, envelope.clone()).await;
                    if sent.is_ok() {
                        log.replied.fetch_add(1, Ordering::SeqCst);
                    }
                    sent
                }
                Outcome::Cancel { reason, .. } => {
                    let sent = link.cancel(call.call_id, *reason).await;
                    if sent.is_ok() {
                        log.cancelled.fetch_add(1, Ordering::SeqCst);
                    }
                    sent
                }
            };
            let delivery = match sent {
                Ok(()) => Delivery::Accepted,
                Err(error) => Delivery::NotDelivered {
                    why: error.to_string(),
                },
            };
            executor.settle(&outcome, delivery);
        }
    }
}
