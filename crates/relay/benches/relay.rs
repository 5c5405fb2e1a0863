//! Relay load benchmark: `cargo xtask bench relay`.
//!
//! One call = post + claim + reply + read, the four round trips of the real loop. Each
//! simulated plugin/executor pair has its own session. Three same-run measurements per
//! backend, with the load generator on the same cores as the server:
//! - store ceiling: the same four store operations called directly, no HTTP;
//! - HTTP echo ceiling: a stateless axum server answering the same four requests with
//!   bodies of the same size;
//! - the relay itself, over HTTP on loopback.
//!
//! Envelopes are random bytes of the sealed size (1 KiB); the relay cannot tell them from
//! real ciphertext and never opens either.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{get, post, put};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sealpost_protocol::ids::Id16;
use sealpost_relay::app;
use sealpost_relay::config::Config;
use sealpost_relay::store::{self, NewCall, NewSession, Scope, Store};
use serde_json::{Value, json};

const ENVELOPE_BYTES: usize = 1024;
const CLIENTS: usize = 32;
const RUN: Duration = Duration::from_secs(5);

fn random_id() -> Id16 {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).unwrap();
    Id16(b)
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).unwrap();
    b
}

fn now() -> i64 {
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
    fn pct(&self, p: f64) -> f64 {
        let mut v = self.latencies_us.clone();
        v.sort_unstable();
        if v.is_empty() {
            return 0.0;
        }
        v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0
    }
}

/// Runs `clients` loops of `one_call` for `RUN` and merges their latencies.
async fn drive<F, Fut>(clients: usize, one_call: F) -> Outcome
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let one_call = Arc::new(one_call);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|n| {
            let one_call = one_call.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while start.elapsed() < RUN {
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
        let l = task.await.unwrap();
        outcome.calls += l.len();
        outcome.latencies_us.extend(l);
    }
    outcome.elapsed = start.elapsed();
    outcome
}

async fn store_ceiling(url: &str, clients: usize) -> Outcome {
    let store = store::open(url).await.unwrap();
    let owner = random_id();
    store
        .create_owner(owner, &format!("bench-{owner}"), now())
        .await
        .unwrap();
    let mut sessions = Vec::new();
    for _ in 0..clients {
        let (session, pair) = (random_id(), random_id());
        let s = NewSession {
            owner_id: owner,
            session_id: session,
            pair_id: pair,
            hello: vec![0; 200],
            created_at: now(),
            expires_at: now() + 3_600_000,
        };
        store.create_session(&s, 1000).await.unwrap();
        sessions.push((session, pair));
    }
    let (envelope, reply) = (random_bytes(ENVELOPE_BYTES), random_bytes(ENVELOPE_BYTES));
    let store: Arc<dyn Store> = store;
    drive(clients, move |n| {
        let (store, envelope, reply) = (store.clone(), envelope.clone(), reply.clone());
        let (session, pair) = sessions[n];
        async move {
            let call_id = random_id();
            let t = now();
            let call = NewCall {
                owner_id: owner,
                session_id: session,
                call_id,
                envelope,
                created_at: t,
                expires_at: t + 60_000,
            };
            store
                .post_call(&call, Some(pair), Some(1000))
                .await
                .unwrap();
            let claimed = store
                .claim_calls(owner, session, now(), 1, 30_000)
                .await
                .unwrap();
            assert_eq!(claimed.len(), 1);
            store
                .reply_call(owner, call_id, reply, now())
                .await
                .unwrap();
            let view = store
                .read_call(
                    Scope {
                        owner_id: owner,
                        pair_id: Some(pair),
                    },
                    call_id,
                    now(),
                )
                .await
                .unwrap();
            assert!(view.unwrap().reply.is_some());
        }
    })
    .await
}

struct Client {
    http: reqwest::Client,
    base: String,
    owner: String,
    pairs: Vec<(String, Id16)>, // (mcp token, session)
}

async fn relay_client(base: &str, relay_store: &dyn Store, clients: usize) -> Client {
    let http = reqwest::Client::new();
    let owner_id = random_id();
    relay_store
        .create_owner(owner_id, &format!("bench-{owner_id}"), now())
        .await
        .unwrap();
    let (link, _) =
        sealpost_relay::http::accounts::create_signin_link(relay_store, base, owner_id, 900)
            .await
            .unwrap();
    let code = link.split("#signin=").nth(1).unwrap();
    let signin: Value = http
        .post(format!("{base}/v1/auth/signin"))
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let owner = signin["token"].as_str().unwrap().to_owned();
    let mut pairs = Vec::new();
    for _ in 0..clients {
        let (pair, session) = (random_id(), random_id());
        let token: Value = http
            .post(format!("{base}/v1/mcp-tokens"))
            .bearer_auth(&owner)
            .json(&json!({"label": "bench", "pair_id": pair}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        http.post(format!("{base}/v1/sessions"))
            .bearer_auth(&owner)
            .json(&json!({"session_id": session, "pair_id": pair, "hello": URL_SAFE_NO_PAD.encode([0u8; 200]), "ttl_s": 3600}))
            .send()
            .await
            .unwrap();
        pairs.push((token["token"].as_str().unwrap().to_owned(), session));
    }
    Client {
        http,
        base: base.to_owned(),
        owner,
        pairs,
    }
}

/// The four round trips of one call over HTTP (against the relay or the echo server).
async fn http_call(c: &Client, n: usize, envelope: &str, reply: &str) {
    let (mcp, session) = &c.pairs[n];
    let call_id = random_id();
    let base = &c.base;
    let r = c
        .http
        .post(format!("{base}/v1/sessions/{session}/calls"))
        .bearer_auth(mcp)
        .json(&json!({"call_id": call_id, "envelope": envelope, "ttl_s": 60}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = c
        .http
        .post(format!(
            "{base}/v1/sessions/{session}/claims?wait_ms=0&max=1"
        ))
        .bearer_auth(&c.owner)
        .send()
        .await
        .unwrap();
    let claimed: Value = r.json().await.unwrap();
    assert_eq!(claimed["calls"].as_array().map(Vec::len), Some(1));
    let r = c
        .http
        .put(format!("{base}/v1/calls/{call_id}/reply"))
        .bearer_auth(&c.owner)
        .json(&json!({"envelope": reply}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = c
        .http
        .get(format!("{base}/v1/calls/{call_id}"))
        .bearer_auth(mcp)
        .send()
        .await
        .unwrap();
    let read: Value = r.json().await.unwrap();
    assert!(read["reply"].is_string());
}

async fn http_run(client: Arc<Client>, clients: usize) -> Outcome {
    let envelope = Arc::new(URL_SAFE_NO_PAD.encode(random_bytes(ENVELOPE_BYTES)));
    let reply = Arc::new(URL_SAFE_NO_PAD.encode(random_bytes(ENVELOPE_BYTES)));
    drive(clients, move |n| {
        let (client, envelope, reply) = (client.clone(), envelope.clone(), reply.clone());
        async move { http_call(&client, n, &envelope, &reply).await }
    })
    .await
}

/// A stateless server answering the same four requests with same-sized bodies.
async fn echo_server() -> String {
    let envelope = URL_SAFE_NO_PAD.encode(random_bytes(ENVELOPE_BYTES));
    let (e1, e2) = (envelope.clone(), envelope);
    let app = Router::new()
        .route("/v1/sessions/{s}/calls", post(|body: axum::body::Bytes| async move {
            let v: Value = serde_json::from_slice(&body).unwrap();
            (axum::http::StatusCode::CREATED, axum::Json(json!({"call_id": v["call_id"], "expires_at": 0, "now_ms": 0})))
        }))
        .route("/v1/sessions/{s}/claims", post(move || async move {
            axum::Json(json!({"calls": [{"call_id": random_id(), "envelope": e1, "lease_expires_at": 0}], "now_ms": 0}))
        }))
        .route("/v1/calls/{c}/reply", put(|_body: axum::body::Bytes| async { axum::http::StatusCode::NO_CONTENT }))
        .route("/v1/calls/{c}", get(move || async move { axum::Json(json!({"state": "answered", "reply": e2, "expires_at": 0, "now_ms": 0})) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Time from sending a post to a waiting claim's answer, one at a time.
async fn wake_latency(c: Arc<Client>, rounds: usize) -> Outcome {
    let envelope = URL_SAFE_NO_PAD.encode(random_bytes(ENVELOPE_BYTES));
    let mut outcome = Outcome::default();
    let start = Instant::now();
    let (mcp, session) = c.pairs[0].clone();
    for _ in 0..rounds {
        let (cc, s) = (c.clone(), session);
        let claim = tokio::spawn(async move {
            let r = cc
                .http
                .post(format!(
                    "{}/v1/sessions/{s}/claims?wait_ms=5000&max=1",
                    cc.base
                ))
                .bearer_auth(&cc.owner)
                .send()
                .await
                .unwrap();
            let _: Value = r.json().await.unwrap();
            Instant::now()
        });
        // Let the claim reach its wait (a benchmark may pace itself; tests never do this).
        tokio::time::sleep(Duration::from_millis(3)).await;
        let posted = Instant::now();
        c.http
            .post(format!("{}/v1/sessions/{session}/calls", c.base))
            .bearer_auth(&mcp)
            .json(&json!({"call_id": random_id(), "envelope": envelope, "ttl_s": 60}))
            .send()
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

async fn relay_runs(label: &str, url: &str, echo: &(Outcome, Outcome)) {
    let store_out = store_ceiling(url, CLIENTS).await;
    let mut config = Config::new(url);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.limits.rate_per_token_per_s = 0;
    config.limits.max_live_sessions_per_owner = 1000;
    let running = app::start(config).await.unwrap();
    let base = format!("http://{}", running.addr);
    let client = Arc::new(relay_client(&base, running.store.as_ref(), CLIENTS).await);
    let loaded = http_run(client.clone(), CLIENTS).await;
    let half = http_run(client.clone(), CLIENTS / 4).await;
    let single = http_run(client.clone(), 1).await;
    let wake = wake_latency(client, 200).await;
    running.stop().await.unwrap();
    let (echo_loaded, echo_single) = echo;
    println!("\n== {label} ==");
    println!(
        "store ceiling ({CLIENTS} clients): {:>8.0} calls/s  p50 {:.2} ms  p99 {:.2} ms",
        store_out.per_second(),
        store_out.pct(0.5),
        store_out.pct(0.99)
    );
    println!(
        "relay         ({CLIENTS} clients): {:>8.0} calls/s  p50 {:.2} ms  p99 {:.2} ms",
        loaded.per_second(),
        loaded.pct(0.5),
        loaded.pct(0.99)
    );
    println!(
        "relay         ({:>2} clients): {:>8.0} calls/s  p50 {:.2} ms  p99 {:.2} ms",
        CLIENTS / 4,
        half.per_second(),
        half.pct(0.5),
        half.pct(0.99)
    );
    println!(
        "relay         ( 1 client ): {:>8.0} calls/s  p50 {:.2} ms  p99 {:.2} ms",
        single.per_second(),
        single.pct(0.5),
        single.pct(0.99)
    );
    println!(
        "wake-up (post sent → waiting claim answered): p50 {:.2} ms  p99 {:.2} ms",
        wake.pct(0.5),
        wake.pct(0.99)
    );
    println!(
        "ratios: relay/store ceiling {:.0}%  relay/echo ceiling {:.0}%  single-call p50 {:.1}× echo p50  added latency (p50 − echo p50) {:.2} ms",
        100.0 * loaded.per_second() / store_out.per_second(),
        100.0 * loaded.per_second() / echo_loaded.per_second(),
        single.pct(0.5) / echo_single.pct(0.5),
        single.pct(0.5) - echo_single.pct(0.5),
    );
}

#[tokio::main]
async fn main() {
    // For profiling the store alone: `SEALPOST_BENCH_STORE_ONLY=sqlite:///tmp/p.db`.
    if let Ok(url) = std::env::var("SEALPOST_BENCH_STORE_ONLY") {
        let o = store_ceiling(&url, CLIENTS).await;
        println!(
            "store ceiling: {:.0} calls/s  p50 {:.2} ms",
            o.per_second(),
            o.pct(0.5)
        );
        return;
    }
    let echo_base = echo_server().await;
    let echo_client = Arc::new(Client {
        http: reqwest::Client::new(),
        base: echo_base,
        owner: "x".into(),
        pairs: (0..CLIENTS)
            .map(|_| ("x".to_owned(), random_id()))
            .collect(),
    });
    let echo_loaded = http_run(echo_client.clone(), CLIENTS).await;
    let echo_single = http_run(echo_client, 1).await;
    println!("== HTTP echo ceiling (same four round trips, no state) ==");
    println!(
        "echo ({CLIENTS} clients): {:>8.0} calls/s  p50 {:.2} ms  p99 {:.2} ms",
        echo_loaded.per_second(),
        echo_loaded.pct(0.5),
        echo_loaded.pct(0.99)
    );
    println!(
        "echo ( 1 client ): {:>8.0} calls/s  p50 {:.2} ms  p99 {:.2} ms",
        echo_single.per_second(),
        echo_single.pct(0.5),
        echo_single.pct(0.99)
    );
    let echo = (echo_loaded, echo_single);

    let dir = std::env::temp_dir().join(format!("sealpost-relay-bench-{}", random_id()));
    std::fs::create_dir_all(&dir).unwrap();
    relay_runs(
        "SQLite (WAL, synchronous=NORMAL, group commit)",
        &format!("sqlite://{}/bench.db", dir.display()),
        &echo,
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    match std::env::var("SEALPOST_BENCH_POSTGRES_URL") {
        Ok(url) => relay_runs("PostgreSQL", &url, &echo).await,
        Err(_) => println!(
            "\n(PostgreSQL skipped: SEALPOST_BENCH_POSTGRES_URL is not set; `cargo xtask bench relay` sets it)"
        ),
    }
}
