//! `cargo xtask bench plugin`: a no-op tool call through the real `sealpost` binary over stdio
//! → relay on SQLite → native executor → back, beside the same run's baseline of four bare
//! HTTP round trips to an echo server (a call costs four: post, claim, reply, read).
//!
//! Prints p50/p99 over sequential calls, the time from spawn to the first `tools/list`
//! answer, and the plugin's resident size when idle. Targets (docs/PLUGIN.md): p50 ≤ 5 ms and
//! ≤ 6× the echo; first `tools/list` ≤ 50 ms; idle RSS ≤ 20 MiB.

use std::process::Stdio;
use std::rc::Rc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::any;
use sealpost_e2e::LiveRelay;
use sealpost_e2e::tab::Tab;
use sealpost_executor::{
    Access, Executor, Grants, GrantsHandle, HostTool, MemoryAuditLog, ToolFuture, ToolSpec,
    Workspace,
};
use sealpost_protocol::content::{ToolKind, ToolResult};
use sealpost_testkit::{SESSION_TTL_S, TestDb};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

const CALLS: usize = 1_000;
const ECHO_ROUNDS: usize = 1_000;

struct Noop;

impl HostTool for Noop {
    fn call(&self, _arguments: Value) -> ToolFuture {
        Box::pin(async { Ok(ToolResult::text("ok")) })
    }
}

fn noop_tab() -> Executor {
    let grants = GrantsHandle::new(Grants {
        access: Access::On,
        sources: Default::default(),
        tools: ["noop".to_owned()].into(),
        ..Grants::default()
    });
    let executor = Executor::new(Workspace::default(), grants, Rc::new(MemoryAuditLog::new()));
    executor
        .register_tool(
            ToolSpec::new(
                "noop",
                "Answers ok.",
                json!({"type": "object"}),
                ToolKind::Read,
            ),
            Rc::new(Noop),
        )
        .unwrap();
    // A host tool's grant binds to the tool as registered: grant it again once it is.
    executor.set_grants(executor.grants().snapshot());
    executor
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// p50 of four sequential round trips to a server that answers every request at once.
async fn echo_p50() -> Duration {
    let app = Router::new().fallback(any(|| async { axum::Json(json!({"ok": true})) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let mut rounds = Vec::with_capacity(ECHO_ROUNDS);
    for _ in 0..ECHO_ROUNDS {
        let started = Instant::now();
        for path in ["/post", "/claim", "/reply", "/read"] {
            let response = http
                .post(format!("{base}{path}"))
                .body("{}")
                .send()
                .await
                .unwrap();
            response.bytes().await.unwrap();
        }
        rounds.push(started.elapsed());
    }
    rounds.sort();
    percentile(&rounds, 0.5)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::main]
async fn main() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let pairing = relay.pair().await.unwrap();
    let config = tempfile::tempdir().unwrap();
    let code = sealpost_seal::PairingCode::parse(&pairing.code(&relay.base)).unwrap();
    sealpost::config::ConfigDir::at(config.path())
        .save_pairing(&code)
        .unwrap();
    let tab = Tab::start(&relay, &pairing.secret, SESSION_TTL_S, noop_tab)
        .await
        .unwrap();

    let spawned = Instant::now();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sealpost"))
        .arg("mcp")
        .env("SEALPOST_CONFIG_DIR", config.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_id = 0u64;
    let mut request = async |method: &str, params: Value| -> Value {
        next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params});
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).await.unwrap();
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the plugin answers");
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == json!(next_id) {
                return answer;
            }
        }
    };
    request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "1"}}),
    )
    .await;
    request("tools/list", json!({})).await;
    let first_list = spawned.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss = rss_kib(pid);

    let echo = echo_p50().await;
    let mut calls = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let answer = request("tools/call", json!({"name": "noop", "arguments": {}})).await;
        calls.push(started.elapsed());
        assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    }
    calls.sort();
    let (p50, p99) = (percentile(&calls, 0.5), percentile(&calls, 0.99));
    let busy_rss = rss_kib(pid);

    println!("== plugin: MCP stdio → sealpost → relay (SQLite) → native executor → back ==");
    println!(
        "no-op call ({CALLS} sequential): p50 {:.2} ms  p99 {:.2} ms",
        ms(p50),
        ms(p99)
    );
    println!(
        "echo baseline (four bare HTTP round trips, {ECHO_ROUNDS} rounds): p50 {:.2} ms",
        ms(echo)
    );
    println!(
        "ratio: call p50 / echo p50 = {:.1}×  (target ≤ 6×; p50 target ≤ 5 ms)",
        p50.as_secs_f64() / echo.as_secs_f64()
    );
    println!(
        "first tools/list answered {:.1} ms after spawn (target ≤ 50 ms)",
        ms(first_list)
    );
    if let (Some(idle), Some(busy)) = (idle_rss, busy_rss) {
        println!(
            "plugin RSS: idle {:.1} MiB (target ≤ 20 MiB), after the calls {:.1} MiB",
            idle as f64 / 1024.0,
            busy as f64 / 1024.0
        );
    }
    drop(tab);
    relay.stop().await;
}
