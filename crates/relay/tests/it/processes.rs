//! The relay as real processes: two replicas on one PostgreSQL (wake-ups cross them), `kill -9`
//! under load and a restart, a canary that must never reach disk or logs in the clear, and flat
//! memory under an oversized chunked body.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::{Method, StatusCode};
use serde_json::json;

use sealpost_protocol::ids::{CallId, PairId};
use sealpost_testkit::{Relay, TEST_KEY, b64, pairing, unb64};
use sealpost_testkit::{TempDir, TestDb, id};

/// A relay child process; killed when dropped.
struct RelayProcess {
    child: Child,
    base: String,
    metrics_base: String,
    log: std::path::PathBuf,
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_relay(database_url: &str, dir: &TempDir, name: &str) -> RelayProcess {
    spawn_relay_with(database_url, dir, name, &[])
}

fn spawn_relay_with(
    database_url: &str,
    dir: &TempDir,
    name: &str,
    extra_args: &[&str],
) -> RelayProcess {
    let key_file = dir.0.join("signing.key");
    std::fs::write(&key_file, TEST_KEY).unwrap();
    let log = dir.0.join(format!("{name}.log"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"))
        // No fallback poll within a test's lifetime: only real wake-ups end a long-poll early.
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--rate-per-token-per-s",
            "0",
            "--rate-per-owner-per-s",
            "0",
            "--fallback-poll-ms",
            "600000",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .args(extra_args)
        .env("SEALPOST_DATABASE_URL", database_url)
        .env("SEALPOST_SIGNING_KEY_FILE", &key_file)
        .env("SEALPOST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn sealpost-relay");
    // The relay prints its address once it listens: wait for that line (a state, not a delay).
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut next_line = |prefix: &str| loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "relay exited early; see {}",
            log.display()
        );
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            break rest.to_owned();
        }
    };
    let base = next_line("sealpost-relay listening on ");
    let metrics_base = next_line("metrics on ")
        .trim_end_matches("/metrics")
        .to_owned();
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stdout.read_to_end(&mut sink);
    });
    RelayProcess {
        child,
        base,
        metrics_base,
        log,
    }
}

/// A client-side view of a relay process, with the kit's helpers; owners are made in the
/// database the processes share.
fn client_for(process: &RelayProcess, db: TestDb) -> Relay {
    Relay::connect(
        process.base.clone(),
        Some(process.metrics_base.clone()),
        Some(db),
    )
}

/// Two relay processes on one PostgreSQL database and a client for each. The processes (and
/// their folder) are returned to be held for the test's length: dropping them kills them.
fn two_replicas(db: TestDb) -> ((RelayProcess, RelayProcess, TempDir), Relay, Relay) {
    let dir = TempDir::new();
    let first = spawn_relay(&db.url, &dir, "first");
    let second = spawn_relay(&db.url, &dir, "second");
    let url = db.url.clone();
    let a = client_for(&first, db);
    let b = client_for(&second, TestDb::at(url));
    ((first, second, dir), a, b)
}

#[tokio::test]
async fn a_post_on_one_replica_wakes_a_claim_waiting_on_another() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (_replicas, a, b) = two_replicas(db);
    let p = pairing(&a, &format!("o-{}", id::<PairId>())).await;
    let claim = b.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
        Some(&p.owner),
        None,
    );
    let post = async {
        b.wait_for_waiters(1).await;
        a.post_call(&p.mcp, p.session, b"across replicas").await
    };
    // No fallback poll and a 30 s wait: only pg_notify explains an answer well before it.
    let woken = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        tokio::join!(claim, post)
    });
    let ((status, body), call) = woken.await.expect("woken by the notification");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["calls"][0]["call_id"], json!(call));
}

#[tokio::test]
async fn a_reply_on_one_replica_answers_a_post_waiting_on_another() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (_replicas, a, b) = two_replicas(db);
    let p = pairing(&a, &format!("o-{}", id::<PairId>())).await;
    let call: CallId = id();
    let post = b.send(
        Method::POST,
        format!("/v1/sessions/{}/calls?wait_ms=30000", p.session),
        Some(&p.mcp),
        Some(json!({"call_id": call, "envelope": b64(b"sealed call"), "ttl_s": 60})),
    );
    let answer = async {
        let claimed = a
            .client_as(&p.owner)
            .claim(p.session, 1, 30_000)
            .await
            .unwrap();
        assert_eq!(claimed.calls[0].call_id, call);
        let (status, body) = a
            .send(
                Method::PUT,
                format!("/v1/calls/{call}/reply"),
                Some(&p.owner),
                Some(json!({"envelope": b64(b"across replicas")})),
            )
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    };
    // No fallback poll and a 30 s wait: only pg_notify explains an answer well before it.
    let ((status, posted), ()) = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        tokio::join!(post, answer)
    })
    .await
    .expect("the post's wait was woken by the notification");
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    assert_eq!(posted["status"]["state"], "answered", "{posted}");
    assert_eq!(unb64(&posted["status"]["reply"]), b"across replicas");
}

#[tokio::test]
async fn a_session_replaced_on_one_replica_ends_a_claim_waiting_on_another() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (_replicas, a, b) = two_replicas(db);
    let p = pairing(&a, &format!("o-{}", id::<PairId>())).await;
    let claim = b.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
        Some(&p.owner),
        None,
    );
    let replace = async {
        b.wait_for_waiters(1).await;
        b.wait_for_claimer(&p.owner, p.pair).await;
        a.session(&p.owner, p.pair, b"the next tab").await
    };
    // No fallback poll and a 30 s wait: only pg_notify explains an answer within the guard.
    let ((status, body), _) = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        tokio::join!(claim, replace)
    })
    .await
    .expect("the claim on the other replica was answered when its session ended");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::GONE, Some("session_ended")),
        "{body}"
    );
}

/// Concurrent posters during the crash test.
const POSTERS: usize = 4;

async fn crash_and_restart(db: TestDb) {
    let dir = TempDir::new();
    let url = db.url.clone();
    let first = spawn_relay(&url, &dir, "before-crash");
    let relay = client_for(&first, db);
    let p = pairing(&relay, &format!("o-{}", id::<PairId>())).await;
    let stop = Arc::new(AtomicBool::new(false));
    // Load: posters record every call the relay acknowledged with 201; a claimer records
    // every call it was handed.
    let mut posters = Vec::new();
    for _ in 0..POSTERS {
        let (client, base, token, session, stop) = (
            relay.client.clone(),
            relay.base.clone(),
            p.mcp.clone(),
            p.session,
            stop.clone(),
        );
        posters.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let call = id::<CallId>();
                let sent = client
                    .post(format!("{base}/v1/sessions/{session}/calls"))
                    .bearer_auth(&token)
                    .json(&json!({"call_id": call, "envelope": b64(b"load"), "ttl_s": 600}))
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == StatusCode::CREATED => acknowledged.push(call),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            acknowledged
        }));
    }
    let claim_once = |base: String, client: reqwest::Client, token: String, session| async move {
        let r = client
            .post(format!("{base}/v1/sessions/{session}/claims?max=50"))
            .bearer_auth(&token)
            .send()
            .await
            .ok()?;
        let body: serde_json::Value = r.json().await.ok()?;
        Some(
            body["calls"]
                .as_array()?
                .iter()
                .map(|c| c["call_id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>(),
        )
    };
    let mut claimed = Vec::new();
    // Claim until a few hundred calls went through, then kill -9 mid-stream.
    while claimed.len() < 300 {
        if let Some(batch) = claim_once(
            relay.base.clone(),
            relay.client.clone(),
            p.owner.clone(),
            p.session,
        )
        .await
        {
            claimed.extend(batch);
        }
    }
    let mut first = first;
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    let mut acknowledged = Vec::new();
    for poster in posters {
        acknowledged.extend(poster.await.unwrap());
    }
    let second = spawn_relay(&url, &dir, "after-crash");
    let restarted = client_for(&second, TestDb::at(url.clone()));
    loop {
        let batch = claim_once(
            restarted.base.clone(),
            restarted.client.clone(),
            p.owner.clone(),
            p.session,
        )
        .await
        .unwrap();
        if batch.is_empty() {
            break;
        }
        claimed.extend(batch);
    }
    let unique: std::collections::HashSet<_> = claimed.iter().cloned().collect();
    assert_eq!(unique.len(), claimed.len(), "no call was claimed twice");
    for call in &acknowledged {
        let (status, body) = restarted
            .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
            .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "acknowledged call {call} survived the crash"
        );
        assert!(
            unique.contains(&call.to_string()) || body["state"] == "pending",
            "{call}: {body}"
        );
    }
    // Each poster may have one call committed whose 201 the kill cut off.
    assert!(
        acknowledged.len() + POSTERS >= 300,
        "the crash happened under load"
    );
}

#[tokio::test]
async fn kill_9_under_load_loses_no_acknowledged_call_on_sqlite() {
    crash_and_restart(TestDb::sqlite()).await;
}

#[tokio::test]
async fn kill_9_under_load_loses_no_acknowledged_call_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    crash_and_restart(db).await;
}

#[tokio::test]
async fn a_canary_in_calls_and_replies_never_reaches_disk_or_logs_in_the_clear() {
    // The plaintext a plugin would seal. The relay only ever receives its sealed form; here
    // the "sealing" is a byte-wise transform the relay cannot see through, and the test checks
    // that neither the plaintext nor its base64 form appears anywhere the relay writes.
    const CANARY: &[u8] = b"CANARY-7f3a9c-do-not-store";
    let seal = |plain: &[u8]| plain.iter().map(|b| b ^ 0x5a).collect::<Vec<u8>>();
    let db = TestDb::sqlite();
    let dir = TempDir::new();
    let url = db.url.clone();
    let db_dir = db.dir.as_ref().unwrap().0.clone();
    let process = spawn_relay(&url, &dir, "canary");
    let relay = client_for(&process, db);
    let p = pairing(&relay, &format!("o-{}", id::<PairId>())).await;
    for _ in 0..20 {
        let call = relay.post_call(&p.mcp, p.session, &seal(CANARY)).await;
        relay
            .send(
                Method::POST,
                format!("/v1/sessions/{}/claims", p.session),
                Some(&p.owner),
                None,
            )
            .await;
        relay
            .send(
                Method::PUT,
                format!("/v1/calls/{call}/reply"),
                Some(&p.owner),
                Some(json!({"envelope": b64(&seal(CANARY))})),
            )
            .await;
        relay
            .send(Method::GET, format!("/v1/calls/{call}"), Some(&p.mcp), None)
            .await;
    }
    let log = process.log.clone();
    drop(process);
    let mut files = vec![log];
    files.extend(
        std::fs::read_dir(&db_dir)
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        for needle in [
            CANARY.to_vec(),
            b64(CANARY).into_bytes(),
            b64(&seal(CANARY)).into_bytes(),
        ] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_slice()),
                "{} contains {:?}",
                file.display(),
                String::from_utf8_lossy(&needle)
            );
        }
        let log_text = String::from_utf8_lossy(&bytes);
        assert!(
            !log_text.contains(&p.mcp) && !log_text.contains(&p.owner),
            "{} contains a token",
            file.display()
        );
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn an_oversized_chunked_body_leaves_memory_flat() {
    let db = TestDb::sqlite();
    let dir = TempDir::new();
    let url = db.url.clone();
    let process = spawn_relay(&url, &dir, "memory");
    let relay = client_for(&process, db);
    let p = pairing(&relay, &format!("o-{}", id::<PairId>())).await;
    let before = rss_kib(process.child.id());
    for _ in 0..4 {
        let chunk = vec![b'A'; 256 * 1024];
        let chunks = futures_util::stream::iter(
            (0..256).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
        );
        let _ = relay
            .client
            .post(format!("{}/v1/sessions/{}/calls", relay.base, p.session))
            .bearer_auth(&p.mcp)
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await;
    }
    let after = rss_kib(process.child.id());
    // 4 × 64 MiB were offered; the peak resident size grew by far less than one of them.
    assert!(
        after < before + 16 * 1024,
        "peak RSS grew from {before} KiB to {after} KiB"
    );
}

#[tokio::test]
async fn sigterm_ends_a_waiting_long_poll_and_exits_cleanly() {
    let db = TestDb::sqlite();
    let dir = TempDir::new();
    let url = db.url.clone();
    let mut process = spawn_relay(&url, &dir, "sigterm");
    let relay = client_for(&process, db);
    let p = pairing(&relay, &format!("o-{}", id::<PairId>())).await;
    let claim = relay.send(
        Method::POST,
        format!("/v1/sessions/{}/claims?wait_ms=30000", p.session),
        Some(&p.owner),
        None,
    );
    let pid = process.child.id().to_string();
    let terminate = async {
        relay.wait_for_waiters(1).await;
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        assert!(sent.unwrap().success(), "kill -TERM");
    };
    // A hang guard, not a speed measurement: the long-poll would otherwise wait 30 s.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        tokio::join!(claim, terminate)
    });
    let ((status, body), ()) = ended.await.expect("SIGTERM ended the long-poll");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["calls"].as_array().unwrap().is_empty());
    let exit = process.child.wait().unwrap();
    assert!(exit.success(), "the relay exits cleanly on SIGTERM: {exit}");
}

#[tokio::test]
async fn sigterm_with_a_half_sent_request_exits_by_the_shutdown_deadline() {
    use tokio::io::AsyncWriteExt as _;
    let db = TestDb::sqlite();
    let dir = TempDir::new();
    let url = db.url.clone();
    // The header timeout is long, so only the shutdown deadline can end these connections.
    let mut process = spawn_relay_with(
        &url,
        &dir,
        "deadline",
        &[
            "--shutdown-deadline-ms",
            "500",
            "--header-read-timeout-ms",
            "600000",
        ],
    );
    let relay = client_for(&process, db);
    let addr = process.base.trim_start_matches("http://").to_owned();
    // One request whose body stops short, one whose headers never end.
    let mut half_body = tokio::net::TcpStream::connect(&addr).await.unwrap();
    half_body
        .write_all(b"POST /v1/auth/signin HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"co")
        .await
        .unwrap();
    let mut half_head = tokio::net::TcpStream::connect(&addr).await.unwrap();
    half_head
        .write_all(b"GET /healthz HTTP/1.1\r\nHo")
        .await
        .unwrap();
    relay
        .wait_for_metric("sealpost_connections_open", 2.0)
        .await;
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &process.child.id().to_string()])
        .status();
    assert!(sent.unwrap().success(), "kill -TERM");
    // A hang guard, not a speed measurement: without the deadline the process waits on its
    // clients for as long as they like.
    let exit = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if let Some(exit) = process.child.try_wait().unwrap() {
                return exit;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the relay stayed up past its shutdown deadline");
    assert!(
        exit.success(),
        "the relay exits 0 after the deadline: {exit}"
    );
    let log = std::fs::read_to_string(&process.log).unwrap();
    assert!(log.contains("shutdown deadline passed"), "{log}");
    drop((half_body, half_head));
}
