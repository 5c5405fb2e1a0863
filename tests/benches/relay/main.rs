//! Relay load benchmark: `cargo xtask bench relay`.
//!
//! One call = the plugin seals a 1 KiB call and posts it, the tab claims it, opens it, seals a
//! 1 KiB reply and posts it, the plugin reads and opens it: four round trips and real sealing
//! (`sealpost-seal`) at both ends. Each simulated plugin/tab pair has its own pairing and
//! session. Same-run measurements per backend, load generator on the same cores as the server:
//! - store ceiling: the same store operations called directly, no HTTP;
//! - HTTP echo ceiling: a stateless axum server answering the same four requests with bodies
//!   of the same size (the clients still seal and open as much);
//! - the relay over HTTP on loopback: at full load, paced at half the measured peak (for the
//!   added latency), and one call at a time;
//! - the ceiling and the relay at full load are measured in alternating rounds, and reported
//!   as medians, with the ratio taken within each round;
//! - wake-up: from sending a post to the answer of a claim already waiting for it;
//! - the loop row (`loop_row.rs`): 100 plugins and 100 native tabs running the real executor,
//!   beside the same relay alone with as many clients;
//! - idle channels (`idle.rs`): the relay binary holding 10,000 session channels, its memory
//!   per channel, and a call among them.
//!
//! For profiling, one measurement alone: `SEALPOST_BENCH_STORE_ONLY=sqlite:///tmp/p.db` (the
//! store ceiling), `SEALPOST_BENCH_RELAY_ONLY=sqlite:///tmp/p.db` (the relay at full load) or
//! `SEALPOST_BENCH_STEPS=sqlite:///tmp/p.db` (each store step of a lone call timed apart),
//! `SEALPOST_BENCH_LOOP_ONLY=DIR` (the loop row on SQLite in `DIR`) or
//! `SEALPOST_BENCH_IDLE_ONLY=DIR` (the idle channels, `idle.rs`).
//! `SEALPOST_BENCH_SHARES=DIR` compares the relay at full load on SQLite with its per-account
//! shares off (long-polls, large bodies: 0) and on (the defaults), in alternating rounds on
//! fresh databases in `DIR`, and prints the medians and their ratio.

// The relay binary's allocator, so the relay measured here is the one that ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod client;
mod echo;
mod idle;
mod loop_row;
mod pgbench;
mod steps;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::Conn;
use sealpost_e2e::{LiveRelay, Pairing};
use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{CallId, OwnerId, PairId, SessionId};
use sealpost_relay::scope::AppScope;
use sealpost_relay::store::{self, Bearer, NewCall, NewSession, Store, TokenRow};
use sealpost_seal::{
    BrowserSession, ENVELOPE_OVERHEAD, Header, PairingSecret, PluginSession, SessionKeys,
    open_call, seal_reply, verify_hello,
};
use sealpost_testkit::{SESSION_TTL_S, TestDb, id};
use sealpost_time::UnixMillis;
use tokio::sync::Mutex;

/// Sealed size of calls and replies.
const ENVELOPE_BYTES: usize = 1024;
const CLIENTS: usize = 32;
const PACED_CLIENTS: usize = 8;
const RUN: Duration = Duration::from_secs(5);
/// Rounds of (store ceiling, relay at full load), alternated; the figures are their medians.
const ROUNDS: usize = 3;

fn now() -> UnixMillis {
    sealpost_relay::clock::now_ms()
}

#[derive(Debug, Default)]
struct Outcome {
    calls: usize,
    latencies_us: Vec<u64>,
    elapsed: Duration,
}

impl Outcome {
    fn per_second(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    fn pct_ms(&self, p: f64) -> f64 {
        let mut v = self.latencies_us.clone();
        v.sort_unstable();
        v.get(((v.len().max(1) - 1) as f64 * p) as usize)
            .map_or(0.0, |us| *us as f64 / 1000.0)
    }

    fn line(&self, label: &str) -> String {
        format!(
            "{label:<34} {:>8.0} calls/s  p50 {:>6.2} ms  p99 {:>6.2} ms",
            self.per_second(),
            self.pct_ms(0.5),
            self.pct_ms(0.99)
        )
    }
}

/// Both ends of one session's cryptography, as the plugin and the tab hold them.
struct Ends {
    plugin: PluginSession,
    tab_keys: SessionKeys,
    plaintext: Vec<u8>,
}

impl Ends {
    /// A session for `secret`: the tab's hello, and the plugin joined to it.
    fn new(secret: &PairingSecret, session_id: SessionId) -> (Self, Vec<u8>) {
        let mut rng = rand::rng();
        let t = now();
        let end = t.saturating_add_ms(3_600_000);
        let (tab, hello) =
            BrowserSession::start(secret, session_id, t, end, b"{}", &mut rng).unwrap();
        let verified = verify_hello(secret, &hello, t).unwrap();
        let plugin = PluginSession::start(secret, &verified, &mut rng).unwrap();
        let tab_keys = tab.keys_for(plugin.plugin_public()).unwrap();
        let plaintext = vec![b'x'; ENVELOPE_BYTES - ENVELOPE_OVERHEAD];
        (
            Self {
                plugin,
                tab_keys,
                plaintext,
            },
            hello,
        )
    }

    /// The plugin seals a call.
    fn seal_call(&self, call_id: CallId) -> (Header, Vec<u8>) {
        let t = now();
        let header = self
            .plugin
            .call_header(call_id, t, t.saturating_add_ms(60_000));
        let envelope = self
            .plugin
            .seal_call(&header, &self.plaintext, &mut rand::rng())
            .unwrap();
        (header, envelope)
    }

    /// The tab opens a call and seals its reply.
    fn answer(&self, call: &[u8]) -> Vec<u8> {
        let (header, _) = open_call(&self.tab_keys, call).unwrap();
        seal_reply(
            &self.tab_keys,
            &header,
            &self.plaintext,
            now(),
            &mut rand::rng(),
        )
        .unwrap()
    }

    /// The plugin opens the reply.
    fn open(&self, header: &Header, reply: &[u8]) {
        assert_eq!(
            self.plugin.open_reply(header, reply).unwrap().len(),
            self.plaintext.len()
        );
    }
}

/// Runs `clients` loops of `one_call` for [`RUN`]. With `pace`, each client starts a call at
/// most once per `pace` (an open-loop rate), else as soon as the last one ended.
async fn drive<F, Fut>(clients: usize, pace: Option<Duration>, one_call: F) -> Outcome
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let one_call = Arc::new(one_call);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|n| {
            let one_call = one_call.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut next = Instant::now();
                while start.elapsed() < RUN {
                    if let Some(pace) = pace {
                        tokio::time::sleep_until(next.into()).await;
                        next += pace;
                    }
                    let t = Instant::now();
                    one_call(n).await;
                    latencies.push(t.elapsed().as_micros() as u64);
                }
                latencies
            })
        })
        .collect();
    let mut outcome = Outcome::default();
    for task in tasks {
        let latencies = task.await.unwrap();
        outcome.calls += latencies.len();
        outcome.latencies_us.extend(latencies);
    }
    outcome.elapsed = start.elapsed();
    outcome
}

/// A live token row for the ceiling's clients (the relay mints its own through the API).
async fn bearer(store: &dyn Store, owner: OwnerId, pair_id: Option<PairId>) -> Bearer {
    let kind = match pair_id {
        Some(_) => TokenKind::Mcp,
        None => TokenKind::Owner,
    };
    let row = TokenRow {
        id: id(),
        owner_id: owner,
        kind,
        pair_id,
        label: "bench".into(),
        created_at: now(),
        expires_at: now().saturating_add_ms(3_600_000),
        app: AppScope::RelayApp,
        lifetime_ends_at: None,
        parent_id: None,
    };
    store.create_token(&row).await.unwrap();
    Bearer {
        token_id: row.id,
        owner_id: owner,
        kind,
        pair_id,
    }
}

/// A new pairing of `owner` with a live session, straight in the store: its session id, its
/// MCP token and both ends' keys.
async fn store_client(store: &dyn Store, owner: OwnerId) -> (SessionId, Bearer, Ends) {
    let secret = PairingSecret::generate(&mut rand::rng());
    let (session_id, pair_id) = (id(), secret.pair_id());
    let (ends, hello) = Ends::new(&secret, session_id);
    let t = now();
    let session = NewSession {
        owner_id: owner,
        session_id,
        pair_id,
        hello,
        created_at: t,
        expires_at: t.saturating_add_ms(3_600_000),
        app: AppScope::RelayApp,
        started_by: None,
    };
    store.create_session(&session, 1_000).await.unwrap();
    let mcp = bearer(store, owner, Some(pair_id)).await;
    (session_id, mcp, ends)
}

/// The same store operations the relay performs for one call, called directly (each checks
/// its token row, as in the relay).
async fn store_ceiling(url: &str) -> Outcome {
    let store = store::open(url).await.unwrap();
    let owner = id();
    store
        .create_owner(owner, &format!("bench-{owner}"), now())
        .await
        .unwrap();
    let tab = bearer(&*store, owner, None).await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(store_client(&*store, owner).await);
    }
    let clients = Arc::new(clients);
    let store: Arc<dyn Store> = store;
    drive(CLIENTS, None, move |n| {
        let (store, clients) = (store.clone(), clients.clone());
        async move {
            let (session_id, mcp, ends) = &clients[n];
            let call_id = id();
            let (header, envelope) = ends.seal_call(call_id);
            let t = now();
            let call = NewCall {
                owner_id: owner,
                session_id: *session_id,
                call_id,
                envelope,
                created_at: t,
                expires_at: t.saturating_add_ms(60_000),
            };
            store.post_call(*mcp, &call, Some(1_000)).await.unwrap();
            let claimed = store
                .claim_calls(tab, *session_id, now(), 1, 30_000)
                .await
                .unwrap();
            let reply = ends.answer(&claimed[0].envelope);
            store.reply_call(tab, call_id, reply, now()).await.unwrap();
            let view = store
                .read_call(*mcp, call_id, now())
                .await
                .unwrap()
                .unwrap();
            ends.open(&header, view.reply.as_deref().unwrap());
        }
    })
    .await
}

/// One simulated plugin/tab pair speaking HTTP, each end on its own connection.
struct HttpClient {
    pairing: Pairing,
    session_id: SessionId,
    ends: Ends,
    plugin: Mutex<Conn>,
    tab: Mutex<Conn>,
}

/// The four round trips of one call over HTTP. `echo` says the server keeps nothing, so the
/// ends open the envelopes they sealed themselves (the same work).
async fn http_call(c: &HttpClient, echo: bool) {
    let (mut plugin, mut tab) = (c.plugin.lock().await, c.tab.lock().await);
    let call_id = id();
    let (header, envelope) = c.ends.seal_call(call_id);
    plugin
        .post_call(c.session_id, call_id, envelope.clone())
        .await;
    let claimed = tab.claim(c.session_id, 1).await;
    let call = if echo {
        &envelope
    } else {
        &claimed.calls[0].envelope.0
    };
    let reply = c.ends.answer(call);
    tab.reply(call_id, reply.clone()).await;
    let read = plugin.read_call(call_id).await;
    let sealed = if echo { reply } else { read.reply.unwrap().0 };
    c.ends.open(&header, &sealed);
}

async fn http_clients(
    relay: &LiveRelay,
    store: Option<&dyn Store>,
    count: usize,
) -> Vec<HttpClient> {
    let mut clients = Vec::new();
    for _ in 0..count {
        let pairing = match store {
            Some(_) => relay.pair().await.unwrap(),
            None => {
                let secret = PairingSecret::generate(&mut rand::rng());
                let pair_id = secret.pair_id();
                Pairing {
                    secret,
                    pair_id,
                    mcp_token: "echo".into(),
                    token_id: id(),
                }
            }
        };
        let session_id = id();
        let (ends, hello) = Ends::new(&pairing.secret, session_id);
        if store.is_some() {
            relay
                .owner
                .create_session(session_id, pairing.pair_id, hello, SESSION_TTL_S)
                .await
                .unwrap();
        }
        clients.push(HttpClient {
            plugin: Mutex::new(Conn::open(&relay.base, &pairing.mcp_token).await),
            tab: Mutex::new(Conn::open(&relay.base, &relay.owner.token).await),
            pairing,
            session_id,
            ends,
        });
    }
    clients
}

async fn http_run(
    clients: Arc<Vec<HttpClient>>,
    n: usize,
    pace: Option<Duration>,
    echo: bool,
) -> Outcome {
    drive(n, pace, move |i| {
        let clients = clients.clone();
        async move { http_call(&clients[i], echo).await }
    })
    .await
}

/// Time from sending a post to the answer of a claim already waiting, one at a time.
async fn wake_latency(relay: Arc<LiveRelay>, client: &HttpClient, rounds: usize) -> Outcome {
    let mut outcome = Outcome::default();
    let start = Instant::now();
    let plugin = relay.plugin(&client.pairing);
    for _ in 0..rounds {
        let (waiter, session_id) = (relay.clone(), client.session_id);
        let claim = tokio::spawn(async move {
            waiter.owner.claim(session_id, 1, 5_000).await.unwrap();
            Instant::now()
        });
        // Let the claim reach its wait (a benchmark may pace itself; tests never do this).
        tokio::time::sleep(Duration::from_millis(3)).await;
        let call_id = id();
        let (_, envelope) = client.ends.seal_call(call_id);
        let posted = Instant::now();
        plugin
            .post_call(client.session_id, call_id, envelope)
            .await
            .unwrap();
        let woke = claim.await.unwrap();
        outcome
            .latencies_us
            .push(woke.saturating_duration_since(posted).as_micros() as u64);
        outcome.calls += 1;
    }
    outcome.elapsed = start.elapsed();
    outcome
}

struct Echo {
    loaded: Outcome,
    single: Outcome,
}

async fn echo_runs() -> Echo {
    let base = echo::serve().await;
    let relay = Arc::new(LiveRelay::echo(base));
    let clients = Arc::new(http_clients(&relay, None, CLIENTS).await);
    let loaded = http_run(clients.clone(), CLIENTS, None, true).await;
    let single = http_run(clients, 1, None, true).await;
    println!("== HTTP echo ceiling (same four round trips and sealing, no state) ==");
    println!("{}", loaded.line(&format!("echo ({CLIENTS} clients)")));
    println!("{}", single.line("echo (1 client)"));
    Echo { loaded, single }
}

/// Median of `values` (rounds are few and the machine noisy: the middle one, not the mean).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Where each measurement gets an empty database of its own, so none runs on what an
/// earlier one left (a grown, and on PostgreSQL bloated, `calls` table).
enum Databases {
    /// New files in this folder.
    Sqlite(std::path::PathBuf),
    /// New databases on the server this URL names.
    Postgres(String),
}

impl Databases {
    async fn fresh(&self) -> String {
        match self {
            Databases::Sqlite(dir) => {
                format!("sqlite://{}/bench-{}.db", dir.display(), id::<CallId>())
            }
            Databases::Postgres(url) => TestDb::postgres_on(url, "sealpost_bench").await.url,
        }
    }
}

/// What [`relay_runs`] found, for the ratios to each backend's own bound.
struct Figures {
    /// Median calls/s of the store ceiling and of the relay at full load.
    ceiling: f64,
    peak: f64,
    /// The relay's p50 for one call at a time, ms.
    single_p50_ms: f64,
}

async fn relay_runs(label: &str, databases: &Databases, echo: &Echo) -> Figures {
    println!("\n== {label} ==");
    // The ceiling and the relay at full load, alternated, so both see the same machine.
    let mut rounds = Vec::new();
    let mut last = None;
    for round in 1..=ROUNDS {
        let ceiling = store_ceiling(&databases.fresh().await).await;
        if let Some((relay, _)) = last.take() {
            stop(relay).await;
        }
        let relay = LiveRelay::start(TestDb::at(databases.fresh().await)).await;
        let clients = Arc::new(http_clients(&relay, Some(relay.store()), CLIENTS).await);
        let loaded = http_run(clients.clone(), CLIENTS, None, false).await;
        last = Some((Arc::new(relay), clients));
        println!(
            "round {round}: store ceiling {:>6.0} calls/s, relay {:>6.0} calls/s ({CLIENTS} clients \
             each, p50 {:.2} / {:.2} ms): {:.0}%",
            ceiling.per_second(),
            loaded.per_second(),
            ceiling.pct_ms(0.5),
            loaded.pct_ms(0.5),
            100.0 * loaded.per_second() / ceiling.per_second()
        );
        rounds.push((ceiling, loaded));
    }
    let peak = median(rounds.iter().map(|(_, r)| r.per_second()).collect());
    let ceiling = median(rounds.iter().map(|(c, _)| c.per_second()).collect());
    let ratio = median(
        rounds
            .iter()
            .map(|(c, r)| r.per_second() / c.per_second())
            .collect(),
    );
    // The last round's relay goes on: half the peak (PACED_CLIENTS clients sharing half the
    // median calls/s), one call at a time, wake-ups.
    let (relay, clients) = last.expect("at least one round");
    let half_rate = peak / 2.0;
    let pace = Duration::from_secs_f64(PACED_CLIENTS as f64 / half_rate.max(1.0));
    let half = http_run(clients.clone(), PACED_CLIENTS, Some(pace), false).await;
    let single = http_run(clients.clone(), 1, None, false).await;
    let wake = wake_latency(relay.clone(), &clients[0], 200).await;
    let echo_p50 = echo.single.pct_ms(0.5);
    println!("store ceiling ({CLIENTS} clients), median   {ceiling:>8.0} calls/s");
    println!("relay ({CLIENTS} clients), median           {peak:>8.0} calls/s");
    println!(
        "{}",
        half.line(&format!("relay at half the peak ({half_rate:.0}/s)"))
    );
    println!("{}", single.line("relay (1 client)"));
    println!(
        "wake-up (post sent → waiting claim answered): p50 {:.2} ms  p99 {:.2} ms",
        wake.pct_ms(0.5),
        wake.pct_ms(0.99)
    );
    println!(
        "ratios: relay/store ceiling {:.0}% (median of rounds)  relay/echo ceiling {:.0}%  \
         single-call p50 {:.1}× echo p50  added latency at half the peak (p50 − echo p50) {:.2} ms",
        100.0 * ratio,
        100.0 * peak / echo.loaded.per_second(),
        single.pct_ms(0.5) / echo_p50,
        half.pct_ms(0.5) - echo_p50,
    );
    println!(
        "connections the relay closed and the bench reopened, so far: {}",
        client::reconnects()
    );
    stop(relay).await;
    Figures {
        ceiling,
        peak,
        single_p50_ms: single.pct_ms(0.5),
    }
}

/// SQLite's bound is HTTP and the store together: a call costs the echo's time plus the store
/// ceiling's, so the relay can do at most 1/(1/echo + 1/store) calls/s.
fn sqlite_ratios(figures: &Figures, echo: &Echo) {
    let bound = 1.0 / (1.0 / echo.loaded.per_second() + 1.0 / figures.ceiling);
    println!(
        "SQLite bound 1/(1/echo + 1/store) {bound:.0} calls/s; relay ÷ bound {:.2} (target ≥ 0.85)",
        figures.peak / bound
    );
}

/// PostgreSQL's bound is the database's own commit rate, measured by pgbench on the same
/// cluster before and after the relay's runs.
async fn postgres_runs(url: &str, echo: &Echo) {
    let databases = Databases::Postgres(url.to_owned());
    let pgbench = std::env::var_os("SEALPOST_BENCH_PGBENCH").map(std::path::PathBuf::from);
    let pgbench_db = match &pgbench {
        Some(tool) => {
            let db = databases.fresh().await;
            pgbench::initialise(tool, &db);
            Some((tool.clone(), db))
        }
        None => None,
    };
    let measure = || {
        pgbench_db
            .as_ref()
            .map(|(tool, db)| pgbench::measure(tool, db, RUN.as_secs()))
    };
    let before = measure();
    let figures = relay_runs("PostgreSQL", &databases, echo).await;
    let (Some(before), Some(after)) = (before, measure()) else {
        println!("(pgbench ratios skipped: SEALPOST_BENCH_PGBENCH does not name pgbench)");
        return;
    };
    let db = pgbench::Pgbench::mean(before, after);
    println!("{} (before the relay's runs)", before.line());
    println!("{} (after)", after.line());
    println!(
        "ratios to pgbench: relay calls/s ÷ (tps at 16 clients ÷ 3) {:.2} (target ≥ 0.8); \
         single-call p50 ÷ (3 × one-client latency) {:.2} (target ≤ 1.2)",
        figures.peak / db.calls_per_second(),
        figures.single_p50_ms / db.call_latency_ms()
    );
}

/// The idle-channels row, on the relay binary `SEALPOST_BENCH_RELAY_BIN` names
/// (`cargo xtask bench relay` builds it), so that the memory read is the relay's alone.
async fn idle_channels(dir: &std::path::Path) {
    match std::env::var_os("SEALPOST_BENCH_RELAY_BIN") {
        Some(bin) => idle::run(std::path::Path::new(&bin), dir).await,
        None => println!(
            "\n(idle channels skipped: SEALPOST_BENCH_RELAY_BIN does not name the relay binary; `cargo xtask bench relay` sets it)"
        ),
    }
}

async fn stop(relay: Arc<LiveRelay>) {
    let relay = Arc::into_inner(relay).expect("every run has ended");
    relay.stop().await;
}

#[tokio::main]
async fn main() {
    if let Ok(url) = std::env::var("SEALPOST_BENCH_RELAY_ONLY") {
        let relay = LiveRelay::start(TestDb::at(url)).await;
        let clients = Arc::new(http_clients(&relay, Some(relay.store()), CLIENTS).await);
        let loaded = http_run(clients, CLIENTS, None, false).await;
        println!("{}", loaded.line(&format!("relay ({CLIENTS} clients)")));
        return;
    }
    if let Ok(dir) = std::env::var("SEALPOST_BENCH_SHARES") {
        shares_off_and_on(std::path::Path::new(&dir)).await;
        return;
    }
    if let Ok(url) = std::env::var("SEALPOST_BENCH_STEPS") {
        steps::run(&url).await;
        return;
    }
    if let Ok(dir) = std::env::var("SEALPOST_BENCH_IDLE_ONLY") {
        std::fs::create_dir_all(&dir).unwrap();
        idle_channels(std::path::Path::new(&dir)).await;
        return;
    }
    if let Ok(dir) = std::env::var("SEALPOST_BENCH_LOOP_ONLY") {
        std::fs::create_dir_all(&dir).unwrap();
        loop_row::run(&Databases::Sqlite(dir.into())).await;
        return;
    }
    if let Ok(url) = std::env::var("SEALPOST_BENCH_STORE_ONLY") {
        println!("{}", store_ceiling(&url).await.line("store ceiling"));
        return;
    }
    let echo = echo_runs().await;
    let dir = std::env::temp_dir().join(format!("sealpost-relay-bench-{}", id::<CallId>()));
    std::fs::create_dir_all(&dir).unwrap();
    let sqlite = relay_runs(
        "SQLite (WAL, synchronous=NORMAL, grouped statements)",
        &Databases::Sqlite(dir.clone()),
        &echo,
    )
    .await;
    sqlite_ratios(&sqlite, &echo);
    loop_row::run(&Databases::Sqlite(dir.clone())).await;
    idle_channels(&dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    match std::env::var("SEALPOST_BENCH_POSTGRES_URL") {
        Ok(url) => postgres_runs(&url, &echo).await,
        Err(_) => println!(
            "\n(PostgreSQL skipped: SEALPOST_BENCH_POSTGRES_URL is not set; `cargo xtask bench relay` sets it)"
        ),
    }
}

/// The relay at full load with the per-account shares off, then on, `ROUNDS` times each,
/// alternated so that the machine's drift falls on both; medians and their ratio.
async fn shares_off_and_on(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut off = Vec::new();
    let mut on = Vec::new();
    for round in 0..ROUNDS {
        // Which goes first alternates too, so neither always runs on a warmer machine.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for shares in order {
            let url = format!(
                "sqlite://{}",
                dir.join(format!("shares-{round}-{shares}.db")).display()
            );
            let relay = LiveRelay::start_with(TestDb::at(url), |limits| {
                if !shares {
                    limits.max_long_polls_per_token = 0;
                    limits.max_long_polls_per_owner = 0;
                    limits.max_large_bodies_per_owner = 0;
                }
            })
            .await;
            let clients = Arc::new(http_clients(&relay, Some(relay.store()), CLIENTS).await);
            let loaded = http_run(clients, CLIENTS, None, false).await;
            let label = if shares { "shares on" } else { "shares off" };
            println!("round {round}: {}", loaded.line(label));
            if shares {
                on.push(loaded.per_second())
            } else {
                off.push(loaded.per_second())
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (off, on) = (median(&mut off), median(&mut on));
    println!(
        "median: shares off {off:.0} calls/s, on {on:.0} calls/s, on/off {:.3}",
        on / off
    );
}
