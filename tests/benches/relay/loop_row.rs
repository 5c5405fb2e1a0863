//! The loop row: [`PAIRS`] plugins and as many native tabs (`sealpost_e2e::Tab`: the real
//! executor, claiming by long-poll on the session channel as the browser's tab does, the
//! hundred sharing [`TAB_THREADS`] threads) on one relay, beside the relay-only figure of the
//! same relay with as many clients.
//!
//! The relay runs on a runtime of its own (threads named [`RELAY_THREADS`]), so the CPU its
//! threads and SQLite's use in each half can be read apart from what the clients use: on two
//! shared cores, the loop's heavier clients (the executor, `reqwest`) take cores the relay-alone
//! clients leave to the relay, and the row prints how much.
//!
//! A plugin here is what `sealpost` does for a call, in-process: seal a `ToolCall` to the
//! session it verified, post it with a wait (the relay answers with the reply), open the
//! reply. Spawning a hundred `sealpost mcp` processes would measure process switching on two
//! cores, not the loop.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use sealpost_e2e::LiveRelay;
use sealpost_e2e::tab::{TabMode, TabThreads, TabTransport};
use sealpost_executor::{
    Access, Executor, Grants, GrantsHandle, HostTool, MemoryAuditLog, ToolFuture, ToolSpec,
    Workspace,
};
use sealpost_protocol::api::CallState;
use sealpost_protocol::content::{ContentBlock, Reply, ToolCall, ToolKind, ToolResult};
use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_seal::{PluginSession, verify_hello};
use sealpost_testkit::{Client, SESSION_TTL_S, TestDb, id};
use serde_json::{Value, json};

use crate::{Databases, ROUNDS, drive, http_clients, http_run, median, now, stop};

/// Plugins, and tabs, on the relay.
pub const PAIRS: usize = 100;
/// Threads the tabs share: a thread each would spend the cores on a hundred threads' wake-ups.
const TAB_THREADS: usize = 2;
/// The name of the relay runtime's threads.
const RELAY_THREADS: &str = "relay-worker";
/// The prefix of sqlx's SQLite connection threads (`sqlx-sqlite-worker-N`, cut to 15 bytes).
const SQLITE_THREADS: &str = "sqlx-sqlite";

/// CPU time used so far by this process's threads whose name starts with one of `prefixes`
/// (`/proc/self/task/*/schedstat`, in nanoseconds); `None` where there is no such file.
fn cpu_of_threads(prefixes: &[&str]) -> Option<Duration> {
    let mut nanos = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        // A thread may end between the listing and the read: it is skipped.
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !prefixes.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("schedstat")) else {
            continue;
        };
        nanos += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(nanos))
}

fn relay_cpu() -> Option<Duration> {
    cpu_of_threads(&[RELAY_THREADS, SQLITE_THREADS])
}

/// What the relay's threads used over `outcome`, from `before`: cores, and CPU per call.
fn relay_share(before: Option<Duration>, outcome: &crate::Outcome) -> Option<(f64, f64)> {
    let used = relay_cpu()?.checked_sub(before?)?;
    Some((
        used.as_secs_f64() / outcome.elapsed.as_secs_f64(),
        used.as_secs_f64() * 1e6 / outcome.calls.max(1) as f64,
    ))
}

fn share_line(share: Option<(f64, f64)>) -> String {
    share.map_or_else(
        || "  the relay's threads: not measured (no /proc/self/task/*/schedstat)".to_owned(),
        |(cores, per_call)| {
            format!("  the relay's threads: {cores:.2} cores, {per_call:.0} µs of CPU per call")
        },
    )
}

/// Answers its `text` (the tab's tool in the loop row: a reply as big as the call).
struct Echo;

impl HostTool for Echo {
    fn call(&self, arguments: Value) -> ToolFuture {
        let text = arguments["text"].as_str().unwrap_or_default().to_owned();
        Box::pin(std::future::ready(Ok(ToolResult {
            content: vec![ContentBlock::Text { text }],
            ..ToolResult::default()
        })))
    }
}

fn executor() -> Executor {
    let grants = GrantsHandle::new(Grants {
        access: Access::On,
        tools: ["echo".to_owned()].into(),
        ..Grants::default()
    });
    let executor = Executor::new(Workspace::default(), grants, Rc::new(MemoryAuditLog::new()));
    let spec = ToolSpec::new(
        "echo",
        "Answers its text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ToolKind::Read,
    );
    executor.register_tool(spec, Rc::new(Echo)).unwrap();
    // A host tool's grant binds to the tool as registered: grant it again once it is.
    executor.set_grants(executor.grants().snapshot());
    executor
}

/// One plugin: its client, and the session it verified.
struct Plugin {
    client: Client,
    session_id: SessionId,
    keys: PluginSession,
    plaintext: Vec<u8>,
}

impl Plugin {
    async fn call(&self) {
        let call_id: CallId = id();
        let t = now();
        let header = self
            .keys
            .call_header(call_id, t, t.saturating_add_ms(60_000));
        let envelope = self
            .keys
            .seal_call(&header, &self.plaintext, &mut rand::rng())
            .unwrap();
        let posted = self
            .client
            .post_call_waiting(self.session_id, call_id, envelope, 10_000)
            .await
            .unwrap();
        let mut status = posted.status;
        let sealed = loop {
            let status = match status.take() {
                Some(status) => status,
                None => self.client.read_call(call_id, 10_000).await.unwrap(),
            };
            match status.state {
                CallState::Answered | CallState::Delivered => break status.reply.unwrap().0,
                CallState::Pending | CallState::Claimed => continue,
                other => panic!("the call ended {other:?}"),
            }
        };
        let opened = self.keys.open_reply(&header, &sealed).unwrap();
        let reply: Reply = serde_json::from_slice(&opened).unwrap();
        assert!(matches!(reply, Reply::Result(r) if !r.is_error), "answered");
    }
}

/// One half's outcome, and the relay's share of it (cores, µs of CPU per call).
type Half = (crate::Outcome, Option<(f64, f64)>);

/// The relay alone with [`PAIRS`] clients and the loop with [`PAIRS`] plugins and tabs, on one
/// relay on a fresh database, in [`ROUNDS`] alternated rounds; prints each and the ratio of
/// their medians.
pub async fn run(databases: &Databases) {
    println!("\n== the whole loop: {PAIRS} plugins and {PAIRS} native tabs on one relay ==");
    // Two hundred pairings of one owner, a hundred of whose tabs wait on a claim, each on a
    // channel of its own: past an account's shares of tokens, sessions, long-polls and
    // channels, which are there for people, not for a benchmark's one owner.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(RELAY_THREADS)
        // Blocking threads keep their CPU time in the sums only while they live.
        .thread_keep_alive(Duration::from_secs(3_600))
        .enable_all()
        .build()
        .expect("the relay's runtime");
    let db = TestDb::at(databases.fresh().await);
    // Started from within its runtime, so every task it spawns runs there.
    let handle = runtime.handle().clone();
    let relay = tokio::task::spawn_blocking(move || {
        handle.block_on(LiveRelay::start_with(db, |limits| {
            limits.max_long_polls_per_token = 0;
            limits.max_long_polls_per_owner = 0;
            limits.max_live_mcp_tokens_per_owner = 4 * PAIRS as u32;
            limits.max_live_sessions_per_owner = 4 * PAIRS as u32;
            limits.max_channels_per_owner = PAIRS as u32;
            // Both halves' clients stay connected, all from loopback: past one address's share.
            limits.max_connections_per_address = 0;
        }))
    })
    .await
    .expect("the relay started");
    let clients = Arc::new(http_clients(&relay, Some(relay.store()), PAIRS).await);

    let text = "x".repeat(900);
    let plaintext = serde_json::to_vec(&ToolCall {
        name: "echo".into(),
        arguments: json!({ "text": text }),
    })
    .unwrap();
    let tab_threads = TabThreads::new(TAB_THREADS);
    let mut tabs = Vec::with_capacity(PAIRS);
    let mut plugins = Vec::with_capacity(PAIRS);
    for _ in 0..PAIRS {
        let pairing = relay.pair().await.unwrap();
        let tab = tab_threads
            .start(
                &relay,
                &pairing.secret,
                SESSION_TTL_S,
                TabMode::Serve,
                TabTransport::Channel,
                executor,
            )
            .await
            .unwrap();
        let client = relay.plugin(&pairing);
        let live = client.live_session(pairing.pair_id).await.unwrap();
        let verified = verify_hello(&pairing.secret, &live.hello.0, now()).unwrap();
        let keys = PluginSession::start(&pairing.secret, &verified, &mut rand::rng()).unwrap();
        plugins.push(Plugin {
            client,
            session_id: tab.session_id,
            keys,
            plaintext: plaintext.clone(),
        });
        tabs.push(tab);
    }
    let plugins = Arc::new(plugins);
    // Alternated, each going first in turn, so the machine's drift falls on both halves.
    let (mut alone, mut looped) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for loop_half in [round % 2 == 1, round % 2 == 0] {
            let before = relay_cpu();
            let outcome = if loop_half {
                let plugins = plugins.clone();
                drive(PAIRS, None, move |i| {
                    let plugins = plugins.clone();
                    async move { plugins[i].call().await }
                })
                .await
            } else {
                http_run(clients.clone(), PAIRS, None, false).await
            };
            let share = relay_share(before, &outcome);
            let label = if loop_half {
                format!("loop ({PAIRS} plugins, {PAIRS} tabs)")
            } else {
                format!("relay alone ({PAIRS} clients)")
            };
            println!("round {round}: {}", outcome.line(&label));
            println!("{}", share_line(share));
            let half = if loop_half { &mut looped } else { &mut alone };
            half.push((outcome, share));
        }
    }
    let replied: usize = tabs
        .iter()
        .map(|t| t.log.replied.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let rates = |half: &[Half]| median(half.iter().map(|(o, _)| o.per_second()).collect());
    let p99s = |half: &[Half]| median(half.iter().map(|(o, _)| o.pct_ms(0.99)).collect());
    let per_call = |half: &[Half]| {
        let used: Option<Vec<f64>> = half.iter().map(|(_, s)| s.map(|(_, us)| us)).collect();
        used.map(median)
    };
    let ratios: Vec<String> = alone
        .iter()
        .zip(&looped)
        .map(|((a, _), (l, _))| format!("{:.2}", l.per_second() / a.per_second()))
        .collect();
    println!(
        "loop ÷ relay alone, medians of {ROUNDS} rounds: calls/s {:.2} (target ≥ 0.8; by round {}), p99 {:.2}×; the tabs replied {replied} times",
        rates(&looped) / rates(&alone),
        ratios.join(", "),
        p99s(&looped) / p99s(&alone),
    );
    if let (Some(alone_us), Some(looped_us)) = (per_call(&alone), per_call(&looped)) {
        println!(
            "  the relay's CPU per call, alone / loop: {alone_us:.0} / {looped_us:.0} µs: calls per CPU-second of the relay, loop ÷ alone, {:.2} (the rest of the cores went to the clients)",
            alone_us / looped_us
        );
    }
    drop(tabs);
    drop(tab_threads);
    stop(Arc::new(relay)).await;
    runtime.shutdown_background();
}
