//! Idle session channels: one relay process (the release binary, so its memory is its own)
//! holds [`IDLE`] channels, each with a claim waiting for its own session, as a served tab's
//! channel waits between calls. Prints the relay's resident memory per channel, and one call
//! through another channel, timed before the idle ones open and again while they are open.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use sealpost_protocol::api::{CallState, CreateMcpTokenRequest, CreateMcpTokenResponse};
use sealpost_protocol::ids::{CallId, PairId, SessionId};
use sealpost_seal::{BrowserSession, PairingSecret};
use sealpost_testkit::{Client, id};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio_tungstenite::tungstenite::Message;

use sealpost_e2e::channel::Socket;

use crate::{Ends, Outcome, now};

/// Channels held open at once.
pub const IDLE: usize = 10_000;
/// Calls timed through the measured channel, before and while the idle ones are open.
const CALLS: usize = 200;
/// Sessions created, and channels opened, at once.
const AT_ONCE: usize = 64;

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

async fn open_channel(base: &str, token: &str) -> Socket {
    sealpost_e2e::channel::open(base, token).await.unwrap()
}

async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
}

async fn answer(socket: &mut Socket) -> Value {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("the channel closed: {other:?}"),
        }
    }
}

/// A session of the owner's, with a hello of its own, for a pairing no plugin holds.
async fn idle_session(owner: &Client) -> SessionId {
    let secret = PairingSecret::generate(&mut rand::rng());
    let session_id = id();
    let t = now();
    let end = t.saturating_add_ms(3_600_000);
    let (_, hello) =
        BrowserSession::start(&secret, session_id, t, end, b"{}", &mut rand::rng()).unwrap();
    owner
        .create_session(session_id, secret.pair_id(), hello, 3_600)
        .await
        .unwrap();
    session_id
}

/// Holds a channel with a claim waiting, claiming again when one ends, until dropped.
async fn hold(
    base: String,
    token: String,
    session_id: SessionId,
    opened: tokio::sync::mpsc::Sender<()>,
) {
    let mut socket = open_channel(&base, &token).await;
    let claim =
        json!({"id": 1, "op": "claim", "session_id": session_id, "wait_ms": 25_000, "max": 1});
    send(&mut socket, claim.clone()).await;
    let _ = opened.send(()).await;
    loop {
        let answered = answer(&mut socket).await;
        assert_eq!(answered["status"], 200, "{answered}");
        send(&mut socket, claim.clone()).await;
    }
}

/// `CALLS` calls through `socket`'s session: post over HTTP, claimed and answered on the
/// channel, read over HTTP, sealed and opened at both ends.
async fn calls(
    plugin: &Client,
    socket: &mut Socket,
    session_id: SessionId,
    ends: &Ends,
) -> Outcome {
    let mut outcome = Outcome::default();
    let start = Instant::now();
    for n in 0..CALLS {
        let claim = json!({"id": 2 * n, "op": "claim", "session_id": session_id, "wait_ms": 10_000, "max": 1});
        send(socket, claim).await;
        let call_id: CallId = id();
        let (header, envelope) = ends.seal_call(call_id);
        let started = Instant::now();
        plugin
            .post_call(session_id, call_id, envelope)
            .await
            .unwrap();
        let claimed = answer(socket).await;
        let sealed = sealpost_testkit::unb64(&claimed["body"]["calls"][0]["envelope"]);
        let reply = ends.answer(&sealed);
        let reply = json!({"id": 2 * n + 1, "op": "reply", "call_id": call_id, "envelope": sealpost_testkit::b64(&reply)});
        send(socket, reply).await;
        let read = plugin.read_call(call_id, 10_000).await.unwrap();
        assert!(matches!(
            read.state,
            CallState::Answered | CallState::Delivered
        ));
        ends.open(&header, &read.reply.unwrap().0);
        outcome
            .latencies_us
            .push(started.elapsed().as_micros() as u64);
        outcome.calls += 1;
        let acknowledged = answer(socket).await;
        assert_eq!(acknowledged["status"], 204, "{acknowledged}");
    }
    outcome.elapsed = start.elapsed();
    outcome
}

pub async fn run(relay_bin: &Path, dir: &Path) {
    println!("\n== {IDLE} idle session channels on one relay process ==");
    let database = format!("sqlite://{}/idle-{}.db", dir.display(), id::<CallId>());
    let cap = (2 * IDLE).to_string();
    let mut relay = tokio::process::Command::new(relay_bin)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &database,
        ])
        .args(["--metrics-listen", "off", "--max-connections", &cap])
        .args([
            "--max-connections-per-address",
            "0",
            "--max-channels-per-owner",
            &cap,
        ])
        .args([
            "--max-long-polls-per-token",
            "0",
            "--max-long-polls-per-owner",
            "0",
        ])
        .args(["--max-live-sessions-per-owner", &cap])
        .args(["--rate-per-token-per-s", "0", "--rate-per-owner-per-s", "0"])
        .env("SEALPOST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = relay.id().unwrap();
    let mut lines = BufReader::new(relay.stdout.take().unwrap()).lines();
    let (mut base, mut code) = (None, None);
    while base.is_none() {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the relay says where it listens");
        if let Some((_, c)) = line.split_once("#signin=") {
            code = Some(c.trim().to_owned());
        }
        if let Some((_, b)) = line.split_once("listening on ") {
            base = Some(b.trim().to_owned());
        }
    }
    let base = base.unwrap();
    let http = reqwest::Client::new();
    let signed: Value = http
        .post(format!("{base}/v1/auth/signin"))
        .json(&json!({"code": code.expect("a first start prints a sign-in link")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = signed["token"].as_str().unwrap().to_owned();
    let owner = Client::new(base.clone(), http.clone(), token.clone());

    // The measured pairing: a plugin's token, and a session the bench serves on a channel.
    let secret = PairingSecret::generate(&mut rand::rng());
    let pair_id: PairId = secret.pair_id();
    let minted: CreateMcpTokenResponse = owner
        .post(
            "/v1/mcp-tokens",
            &CreateMcpTokenRequest {
                label: "bench".into(),
                pair_id,
                ttl_s: None,
            },
        )
        .await
        .unwrap();
    let plugin = Client::new(base.clone(), http.clone(), minted.token);
    let session_id: SessionId = id();
    let (ends, hello) = Ends::new(&secret, session_id);
    owner
        .create_session(session_id, pair_id, hello, 3_600)
        .await
        .unwrap();
    let mut measured = open_channel(&base, &token).await;
    let alone = calls(&plugin, &mut measured, session_id, &ends).await;

    let started = Instant::now();
    let mut sessions = Vec::with_capacity(IDLE);
    for _ in 0..IDLE / AT_ONCE + 1 {
        let batch = (0..AT_ONCE.min(IDLE - sessions.len())).map(|_| idle_session(&owner));
        sessions.extend(futures_util::future::join_all(batch).await);
    }
    let before = resident_kib(pid);
    println!(
        "{IDLE} sessions created in {:.1} s; the relay's resident memory {:.1} MiB",
        started.elapsed().as_secs_f64(),
        before as f64 / 1024.0
    );

    let started = Instant::now();
    let (opened, mut opening) = tokio::sync::mpsc::channel(IDLE);
    let mut holders = tokio::task::JoinSet::new();
    // At most AT_ONCE channels opening at a time.
    let mut open = 0;
    for session in sessions {
        holders.spawn(hold(base.clone(), token.clone(), session, opened.clone()));
        if holders.len() - open >= AT_ONCE {
            opening.recv().await.unwrap();
            open += 1;
        }
    }
    while open < IDLE {
        opening.recv().await.unwrap();
        open += 1;
    }
    // Let the last claims reach their waits before the memory is read.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = resident_kib(pid);
    println!(
        "{IDLE} channels opened, each with a claim waiting, in {:.1} s; resident memory {:.1} MiB: {:.1} KiB per channel (target ≤ 16 KiB)",
        started.elapsed().as_secs_f64(),
        after as f64 / 1024.0,
        (after.saturating_sub(before)) as f64 / IDLE as f64
    );
    let among = calls(&plugin, &mut measured, session_id, &ends).await;
    println!("{}", alone.line("one call, no other channel"));
    println!("{}", among.line(&format!("one call among {IDLE} idle")));
    println!(
        "among idle ÷ alone: p50 {:.2}×, p99 {:.2}×",
        among.pct_ms(0.5) / alone.pct_ms(0.5),
        among.pct_ms(0.99) / alone.pct_ms(0.99)
    );
    holders.abort_all();
    let _ = relay.kill().await;
}
