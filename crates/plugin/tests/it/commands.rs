//! `sealpost pair`, `unpair` and `status` as a person runs them: each unusable state its own
//! sentence and exit code, the code and token never printed, the pairing file 0600.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;

use sealpost_e2e::LiveRelay;
use sealpost_testkit::TestDb;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

use crate::{config_dir, sealpost, unissued_code, write_pairing};

async fn run(config: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = sealpost(config);
    command
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    child.wait_with_output().await.unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn exit_code(output: &Output) -> i32 {
    output.status.code().expect("exited")
}

async fn status_json(config: &std::path::Path) -> (Value, i32) {
    let output = run(config, &["status", "--json"], None).await;
    let report = serde_json::from_slice(&output.stdout).expect("status --json prints JSON");
    (report, exit_code(&output))
}

/// A closed port on loopback: connections are refused at once.
fn closed_origin() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn a_malformed_code_is_refused_in_one_sentence_with_its_own_exit_code() {
    let config = config_dir();
    let output = run(config.path(), &["pair"], Some("sppair1_not-a-code\n")).await;
    assert_eq!(exit_code(&output), 3, "{}", said(&output));
    assert!(said(&output).contains("not a valid Sealpost pairing code"));
    assert!(!config.path().join("pairing.json").exists());
}

#[tokio::test]
async fn a_relay_that_does_not_answer_is_named_by_host_and_nothing_is_saved() {
    let config = config_dir();
    let origin = closed_origin();
    let code = unissued_code(&origin);
    let output = run(config.path(), &["pair"], Some(&code)).await;
    assert_eq!(exit_code(&output), 4, "{}", said(&output));
    let text = said(&output);
    assert!(text.contains(&origin["http://".len()..]), "{text}");
    assert!(!text.contains(&code), "the code is never printed");
    assert!(!config.path().join("pairing.json").exists());
}

#[tokio::test]
async fn pairing_checks_the_token_stores_0600_and_prints_host_and_fingerprint_only() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let config = config_dir();

    // A token this relay never issued is refused.
    let refused = run(config.path(), &["pair"], Some(&unissued_code(&relay.base))).await;
    assert_eq!(exit_code(&refused), 5, "{}", said(&refused));
    assert!(said(&refused).contains("revoked or has expired"));

    let pairing = relay.pair().await.unwrap();
    let code = pairing.code(&relay.base);
    let output = run(config.path(), &["pair"], Some(&format!("  {code}\n"))).await;
    assert_eq!(exit_code(&output), 0, "{}", said(&output));
    let text = said(&output);
    let fingerprint = pairing
        .secret
        .fingerprint(&sealpost_seal::RelayOrigin::parse(&relay.base).unwrap());
    assert!(
        text.contains(&format!("{} {}", &fingerprint[..3], &fingerprint[3..])),
        "{text}"
    );
    assert!(text.contains(&relay.base["http://".len()..]), "{text}");
    assert!(!text.contains(&code) && !text.contains(&pairing.mcp_token));
    let file = config.path().join("pairing.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // The same code again is fine; a different one needs --replace.
    let again = run(config.path(), &["pair"], Some(&code)).await;
    assert_eq!(exit_code(&again), 0, "{}", said(&again));
    let other = relay.pair().await.unwrap().code(&relay.base);
    let refused = run(config.path(), &["pair"], Some(&other)).await;
    assert_eq!(exit_code(&refused), 6, "{}", said(&refused));
    assert!(said(&refused).contains("sealpost pair --replace"));
    let replaced = run(config.path(), &["pair", "--replace"], Some(&other)).await;
    assert_eq!(exit_code(&replaced), 0, "{}", said(&replaced));

    // status: paired, reachable, token live, no session yet.
    let (report, code) = status_json(config.path()).await;
    assert_eq!(code, 9, "{report}");
    assert_eq!(report["paired"], true);
    assert_eq!(report["token_live"], true);
    assert_eq!(report["session_live"], false);
    assert!(report["token_expires_at"].as_u64().is_some());
    relay.stop().await;
}

#[tokio::test]
async fn the_code_is_also_read_from_the_environment_and_an_argument() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let config = config_dir();
    let code = relay.pair().await.unwrap().code(&relay.base);
    let mut command = sealpost(config.path());
    let output = command
        .arg("pair")
        .env("SEALPOST_PAIRING_CODE", &code)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(exit_code(&output), 0, "{}", said(&output));

    let config = config_dir();
    let code = relay.pair().await.unwrap().code(&relay.base);
    let output = run(config.path(), &["pair", &code], None).await;
    assert_eq!(exit_code(&output), 0, "{}", said(&output));
    assert!(
        said(&output).contains("shell history"),
        "the argument is warned about"
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_damaged_or_foreign_pairing_file_is_named_with_the_fix() {
    for content in [
        "{not json",
        r#"{"format":"other","version":1,"code":"x"}"#,
        "[]",
    ] {
        let config = config_dir();
        std::fs::write(config.path().join("pairing.json"), content).unwrap();
        let (report, code) = status_json(config.path()).await;
        assert_eq!(code, 7, "{report}");
        let problem = report["problem"].as_str().unwrap();
        assert!(problem.contains("pairing.json"), "{problem}");
        assert!(problem.contains("sealpost pair --replace"), "{problem}");
        // pair refuses to overwrite it silently, and --replace does.
        let output = run(
            config.path(),
            &["pair"],
            Some(&unissued_code("https://relay.example")),
        )
        .await;
        assert_eq!(exit_code(&output), 7, "{}", said(&output));
    }
}

#[tokio::test]
async fn unpair_revokes_the_token_and_deletes_the_file() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let config = config_dir();
    let pairing = relay.pair().await.unwrap();
    write_pairing(config.path(), &pairing.code(&relay.base));
    let output = run(config.path(), &["unpair"], None).await;
    assert_eq!(exit_code(&output), 0, "{}", said(&output));
    assert!(said(&output).contains("Revoked"), "{}", said(&output));
    assert!(!config.path().join("pairing.json").exists());
    // The token is dead at the relay.
    assert!(
        relay
            .plugin(&pairing)
            .live_session(pairing.pair_id)
            .await
            .is_err()
    );
    let (_, code) = status_json(config.path()).await;
    assert_eq!(code, 8);
    relay.stop().await;
}

#[tokio::test]
async fn unpair_offline_deletes_and_says_the_token_was_not_revoked() {
    let config = config_dir();
    write_pairing(config.path(), &unissued_code(&closed_origin()));
    let output = run(config.path(), &["unpair"], None).await;
    assert_eq!(exit_code(&output), 0, "{}", said(&output));
    assert!(
        said(&output).contains("Could not revoke"),
        "{}",
        said(&output)
    );
    assert!(!config.path().join("pairing.json").exists());
}

#[tokio::test]
async fn status_names_each_unusable_state() {
    let config = config_dir();
    let (report, code) = status_json(config.path()).await;
    assert_eq!((code, report["paired"].clone()), (8, Value::Bool(false)));

    write_pairing(config.path(), &unissued_code(&closed_origin()));
    let (report, code) = status_json(config.path()).await;
    assert_eq!(code, 4, "{report}");
    assert_eq!(report["relay_reachable"], false);

    let help = run(config.path(), &["status", "--help"], None).await;
    let help = said(&help);
    for line in ["3  the pairing code is malformed", "10 the tab is not open"] {
        assert!(help.contains(line), "--help lists exit codes: {help}");
    }
}

#[tokio::test]
async fn a_pairing_file_that_is_a_fifo_is_damaged_at_once_and_tools_still_list() {
    let config = config_dir();
    let fifo = config.path().join("pairing.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (report, code) = tokio::time::timeout(crate::PATIENCE, status_json(config.path()))
        .await
        .expect("status answers instead of waiting on the FIFO");
    assert_eq!(code, 7, "{report}");
    assert!(
        report["problem"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{report}"
    );
    let mut mcp = crate::Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let listed = mcp.request("tools/list", serde_json::json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "sealpost_status");
}

#[tokio::test]
async fn a_pairing_code_in_one_clients_environment_never_replaces_the_stored_one() {
    // Stored: the pairing every client uses. One client's server entry carries another.
    let config = config_dir();
    let stored = unissued_code("https://relay.example");
    write_pairing(config.path(), &stored);
    let pairing_file = config.path().join("pairing.json");
    let before = std::fs::read(&pairing_file).unwrap();
    let other = unissued_code(&closed_origin());

    let output = sealpost(config.path())
        .arg("mcp")
        .env("SEALPOST_PAIRING_CODE", &other)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("uses the pairing code in SEALPOST_PAIRING_CODE")
            && stderr.contains("relay.example")
            && stderr.contains("sealpost pair --replace"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&pairing_file).unwrap(),
        before,
        "stored pairing unchanged"
    );

    // The process with the code says so in `sealpost_status`; a plain one uses the stored one.
    let mut mcp = crate::Mcp::spawn_with(
        sealpost(config.path())
            .arg("mcp")
            .env("SEALPOST_PAIRING_CODE", &other),
    );
    mcp.initialize("2025-11-25").await;
    let (text, _) = crate::result_text(&mcp.call("sealpost_status", serde_json::json!({})).await);
    assert!(
        text.contains("uses the pairing code in SEALPOST_PAIRING_CODE"),
        "{text}"
    );
    assert!(text.contains("127.0.0.1"), "this process's relay: {text}");
    let (report, _) = status_json(config.path()).await;
    assert_eq!(report["relay_host"], "relay.example", "{report}");
    assert!(report.get("notice").is_none(), "{report}");
    assert_eq!(std::fs::read(&pairing_file).unwrap(), before);

    // With nothing stored yet, the code from the environment is stored (a bundle's setting).
    let fresh = config_dir();
    let output = sealpost(fresh.path())
        .arg("mcp")
        .env("SEALPOST_PAIRING_CODE", &stored)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("SEALPOST_PAIRING_CODE"),
        "{}",
        said(&output)
    );
    let (report, _) = status_json(fresh.path()).await;
    assert_eq!(report["relay_host"], "relay.example", "{report}");
}
