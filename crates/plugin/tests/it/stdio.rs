//! Raw JSON lines, as a client that does not use rmcp writes them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Mcp, config_dir, result_text, silent_relay, unissued_code, write_pairing};

/// Tells a hang from an answer: shorter than any network wait the plugin makes (its connect
/// timeout is 5 s, a call's 55 s), far longer than answering from disk takes.
const HANG: Duration = Duration::from_secs(4);

#[tokio::test]
async fn both_eras_of_initialize_are_answered_with_the_version_asked_for() {
    for version in ["2025-06-18", "2025-11-25"] {
        let config = config_dir();
        let mut mcp = Mcp::spawn(config.path());
        let response = mcp.initialize(version).await;
        assert_eq!(response["result"]["protocolVersion"], version);
        assert_eq!(response["result"]["serverInfo"]["name"], "sealpost");
        assert_eq!(
            response["result"]["capabilities"]["tools"]["listChanged"],
            true
        );
        let tools = mcp.request("tools/list", json!({})).await;
        assert_eq!(tools["result"]["tools"][0]["name"], "sealpost_status");
        assert!(mcp.exit().await.success());
    }
}

/// A 2026-07-28 request's `_meta` (no `initialize`).
pub(crate) fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test-client", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[tokio::test]
async fn server_discover_is_answered_and_requests_carry_their_own_version() {
    let config = config_dir();
    let mut mcp = Mcp::spawn(config.path());
    let discover = mcp
        .request("server/discover", json!({"_meta": modern_meta()}))
        .await;
    let result = &discover["result"];
    assert!(
        result["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "discover lists the modern version: {discover}"
    );
    let tools = mcp
        .request("tools/list", json!({"_meta": modern_meta()}))
        .await;
    assert_eq!(
        tools["result"]["tools"][0]["name"], "sealpost_status",
        "{tools}"
    );
    assert!(mcp.exit().await.success());
}

#[tokio::test]
async fn tools_list_answers_from_disk_while_the_relay_hangs() {
    let (_listener, origin) = silent_relay().await;
    let config = config_dir();
    write_pairing(config.path(), &unissued_code(&origin));
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    // The relay accepts connections and never answers, so any network wait would hang: the
    // guard only tells a hang from an answer, it does not time one.
    let tools = tokio::time::timeout(HANG, mcp.request("tools/list", json!({})))
        .await
        .expect("tools/list waited on the relay");
    assert_eq!(tools["result"]["tools"][0]["name"], "sealpost_status");
    assert!(tools["result"].get("nextCursor").is_none(), "one page");
}

#[tokio::test]
async fn sealpost_status_unpaired_says_how_to_pair() {
    let config = config_dir();
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-06-18").await;
    let (text, is_error) = result_text(&mcp.call("sealpost_status", json!({})).await);
    assert!(!is_error);
    assert!(text.contains("sealpost pair"), "{text}");
    assert!(text.contains("paired:          no"), "{text}");
}

#[tokio::test]
async fn a_call_while_unpaired_is_an_error_result_that_says_what_to_do() {
    let config = config_dir();
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-06-18").await;
    let response = mcp.call("search_workspace", json!({"query": "x"})).await;
    assert!(response.get("error").is_none(), "not a protocol error");
    let (text, is_error) = result_text(&response);
    assert!(is_error);
    assert!(text.contains("not paired"), "{text}");
    assert!(text.contains("sealpost pair"), "{text}");
}

/// Starts `sealpost mcp` with its config folder.
type Spawn = fn(&std::path::Path) -> Mcp;

/// The two kinds of stdin and stdout clients give: pipes (Rust's `Command`: Codex) and socket
/// pairs (Node's `child_process`: Claude Desktop, Cursor, VS Code). Both are read on the
/// runtime's poller; the tests that frame messages run over each.
const SPAWNS: [(&str, Spawn); 2] = [("pipes", Mcp::spawn), ("sockets", Mcp::spawn_on_sockets)];

#[tokio::test]
async fn a_message_split_across_many_writes_and_many_in_one_write_both_work() {
    for (_, spawn) in SPAWNS {
        split_and_batched_messages(spawn).await;
    }
}

async fn split_and_batched_messages(spawn: Spawn) {
    let config = config_dir();
    let mut mcp = spawn(config.path());
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let bytes = format!("{init}\n").into_bytes();
    for chunk in bytes.chunks(7) {
        mcp.write(chunk).await;
        tokio::task::yield_now().await;
    }
    assert_eq!(
        mcp.response(&json!(1)).await["result"]["protocolVersion"],
        "2025-11-25"
    );
    let mut batch =
        String::from("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    for id in 10..15 {
        batch.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n"
        ));
    }
    mcp.write(batch.as_bytes()).await;
    for id in 10..15 {
        assert!(mcp.response(&json!(id)).await["result"]["tools"].is_array());
    }
}

#[tokio::test]
async fn a_one_mib_message_is_served() {
    for (kind, spawn) in SPAWNS {
        let config = config_dir();
        let mut mcp = spawn(config.path());
        mcp.initialize("2025-11-25").await;
        let big = "x".repeat(1024 * 1024);
        let response = mcp.call("sealpost_status", json!({"padding": big})).await;
        let (text, _) = result_text(&response);
        assert!(text.contains("paired:"), "{kind}: {text}");
        assert!(mcp.exit().await.success(), "{kind}");
    }
}

/// stdin and stdout that are neither pipes nor sockets (here files; a terminal is the same
/// case) are read and written on blocking threads, and serve as well.
#[tokio::test]
async fn files_on_stdin_and_stdout_are_served() {
    let config = config_dir();
    let folder = config_dir();
    let (input, output) = (folder.path().join("in"), folder.path().join("out"));
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    std::fs::write(&input, format!("{init}\n")).unwrap();
    let status = crate::sealpost(config.path())
        .arg("mcp")
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::fs::File::create(&output).unwrap())
        .status();
    let status = tokio::time::timeout(HANG, status)
        .await
        .expect("exits")
        .unwrap();
    assert!(status.success());
    // The server answers `initialize` before it reads on, so the answer is written before the
    // end of the file ends the server.
    let written = std::fs::read_to_string(&output).unwrap();
    let answer: Value = serde_json::from_str(written.trim_end()).expect("one JSON line");
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{written}"
    );
}

#[tokio::test]
async fn an_over_cap_line_gets_an_error_and_the_server_keeps_serving() {
    let config = config_dir();
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{{\"name\":\"x\",\"arguments\":{{\"p\":\"{}\"}}}}}}\n",
        "y".repeat(sealpost::stdio::MAX_LINE_BYTES + 10)
    );
    mcp.write(huge.as_bytes()).await;
    let error = mcp.recv().await;
    assert_eq!(error["id"], Value::Null, "{error}");
    assert_eq!(error["error"]["code"], -32600);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{error}"
    );
    let tools = mcp.request("tools/list", json!({})).await;
    assert!(tools["result"]["tools"].is_array());
}

#[tokio::test]
async fn stdin_eof_ends_the_process_even_with_a_call_waiting_on_the_relay() {
    for (_, spawn) in SPAWNS {
        eof_with_a_call_waiting(spawn).await;
    }
}

async fn eof_with_a_call_waiting(spawn: Spawn) {
    let (mut requests, origin) = mute_relay().await;
    let config = config_dir();
    write_pairing(config.path(), &unissued_code(&origin));
    let mut mcp = spawn(config.path());
    mcp.initialize("2025-11-25").await;
    // A call now waits on a relay that reads requests and never answers: the relay has seen
    // the call's first request before stdin closes.
    mcp.send(&json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_workspace","arguments":{}}}))
        .await;
    let request = tokio::time::timeout(HANG, requests.recv())
        .await
        .expect("the call reached the relay")
        .expect("the relay is listening");
    assert!(
        request.starts_with("GET /v1/pairings/") && request.ends_with("/session HTTP/1.1"),
        "the call's first step is its session look-up: {request}"
    );
    mcp.close_stdin();
    // Waiting for the call would take its whole timeout (55 s); the guard tells that apart.
    let status = tokio::time::timeout(HANG, mcp.child.wait())
        .await
        .expect("exits after stdin closes, without waiting for the call")
        .unwrap();
    assert!(status.success());
}

/// A relay that reads each request's head and never answers, keeping the connection open:
/// the first line of each request, as it arrives.
async fn mute_relay() -> (tokio::sync::mpsc::UnboundedReceiver<String>, String) {
    use tokio::io::AsyncReadExt as _;
    let (listener, origin) = silent_relay().await;
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 4096];
                while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let _ = sender.send(line);
                // Held open, unanswered, until the plugin goes away.
                let _ = stream.read(&mut buffer).await;
            });
        }
    });
    (receiver, origin)
}

#[tokio::test]
async fn garbage_and_unknown_messages_get_errors_on_stdout_and_nothing_else() {
    let config = config_dir();
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    mcp.write(b"this is not json\n").await;
    let parse_error = mcp.recv().await;
    assert_eq!(parse_error["error"]["code"], -32700);
    assert_eq!(parse_error["id"], Value::Null);
    mcp.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}\n")
        .await;
    mcp.write(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"no/such/method\"}\n")
        .await;
    let unknown = mcp.response(&json!(5)).await;
    assert!(unknown.get("error").is_some(), "{unknown}");
    // Every line read so far parsed as JSON-RPC (recv asserts it); a last request proves
    // nothing stray came between.
    let tools = mcp.request("tools/list", json!({})).await;
    assert!(tools["result"]["tools"].is_array());
    assert!(mcp.notifications.is_empty(), "{:?}", mcp.notifications);
}
