//! The `sealpost` binary driven the way MCP clients drive it: raw JSON lines and rmcp's own
//! client over stdio, the commands as a person runs them, and the live loop through a real
//! relay to the native executor.

mod clients;
mod commands;
mod follow;
mod hostile;
mod live;
mod rates;
mod stdio;

use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader, Lines,
};
use tokio::process::{Child, Command};

/// The binary under test: this build's, or the released one `cargo xtask dist` made
/// (`SEALPOST_PLUGIN_UNDER_TEST`), which the release checks run the stdio and live suites on.
pub fn binary_under_test() -> std::path::PathBuf {
    std::env::var_os("SEALPOST_PLUGIN_UNDER_TEST")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_sealpost").into())
}

/// A hang guard, not a timing assertion: far longer than any answer takes.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A fresh config folder for one plugin, removed on drop.
pub fn config_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sealpost-plugin-")
        .tempdir()
        .expect("a temporary folder")
}

/// `sealpost ARGS` with its own config folder; nothing inherited that could pair it.
pub fn sealpost(config: &Path) -> Command {
    let mut command = Command::new(binary_under_test());
    command
        .env("SEALPOST_CONFIG_DIR", config)
        .env_remove("SEALPOST_PAIRING_CODE")
        .env_remove("SEALPOST_CALL_TIMEOUT_S")
        .env("SEALPOST_LOG", "warn")
        .kill_on_drop(true);
    command
}

/// `sealpost mcp` spoken to as raw JSON lines.
#[allow(missing_debug_implementations)]
pub struct Mcp {
    pub child: Child,
    stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    lines: Lines<BufReader<Pin<Box<dyn AsyncRead + Send>>>>,
    /// Notifications received while waiting for responses.
    pub notifications: Vec<Value>,
    early: Vec<Value>,
    next_id: u64,
}

impl Mcp {
    pub fn spawn(config: &Path) -> Self {
        Self::spawn_with(sealpost(config).arg("mcp"))
    }

    /// `sealpost mcp` with a pipe on stdin and on stdout, as Rust's `Command` gives.
    pub fn spawn_with(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn sealpost mcp");
        let stdin = Box::pin(child.stdin.take().unwrap());
        let stdout = Box::pin(child.stdout.take().unwrap());
        Self::over(child, stdin, stdout)
    }

    /// `sealpost mcp` with one end of a socket pair on stdin and on stdout, as Node's
    /// `child_process` gives (and so Claude Desktop, Cursor and VS Code).
    pub fn spawn_on_sockets(config: &Path) -> Self {
        let pair = || {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            ours.set_nonblocking(true).unwrap();
            let ours = tokio::net::UnixStream::from_std(ours).unwrap();
            (ours, std::os::fd::OwnedFd::from(theirs))
        };
        let ((stdin, their_stdin), (stdout, their_stdout)) = (pair(), pair());
        let child = sealpost(config)
            .arg("mcp")
            .stdin(Stdio::from(their_stdin))
            .stdout(Stdio::from(their_stdout))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn sealpost mcp");
        Self::over(child, Box::pin(stdin), Box::pin(stdout))
    }

    fn over(
        child: Child,
        stdin: Pin<Box<dyn AsyncWrite + Send>>,
        stdout: Pin<Box<dyn AsyncRead + Send>>,
    ) -> Self {
        Self {
            child,
            stdin: Some(stdin),
            lines: BufReader::new(stdout).lines(),
            notifications: Vec::new(),
            early: Vec::new(),
            next_id: 1,
        }
    }

    pub async fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.write(&line).await;
    }

    /// The next line on stdout, which must be one JSON-RPC message.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("an answer before the hang guard")
            .unwrap()
            .expect("stdout open");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("stdout carried a line that is not JSON: {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "not JSON-RPC: {line}");
        message
    }

    /// The response to request `id`, keeping what arrives first: notifications, and responses
    /// to other requests (concurrent requests may be answered in any order).
    pub async fn response(&mut self, id: &Value) -> Value {
        if let Some(at) = self.early.iter().position(|m| m.get("id") == Some(id)) {
            return self.early.remove(at);
        }
        loop {
            let message = self.recv().await;
            if message.get("method").is_some() {
                self.notifications.push(message);
            } else if message.get("id") == Some(id) {
                return message;
            } else {
                self.early.push(message);
            }
        }
    }

    pub fn fresh_id(&mut self) -> Value {
        self.next_id += 1;
        json!(self.next_id)
    }

    /// Sends a request and waits for its response.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.fresh_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.response(&id).await
    }

    /// The 2025 handshake: `initialize` with `version`, then `notifications/initialized`.
    pub async fn initialize(&mut self, version: &str) -> Value {
        let response = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test-client", "version": "1"}
                }),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        response
    }

    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// Closes stdin, as a client does when it quits.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to exit; its status.
    pub async fn exit(mut self) -> std::process::ExitStatus {
        self.close_stdin();
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("exits")
            .unwrap()
    }
}

/// The text of a `tools/call` result and whether it is an error.
pub fn result_text(response: &Value) -> (String, bool) {
    let result = &response["result"];
    let text = result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result, got {response}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (text, result["isError"] == json!(true))
}

/// A relay address where nothing answers: connections are accepted and never served.
pub async fn silent_relay() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    (listener, origin)
}

/// Writes a pairing file as `sealpost pair` would, without asking any relay.
pub fn write_pairing(config: &Path, code: &str) {
    let parsed = sealpost_seal::PairingCode::parse(code).unwrap();
    sealpost::config::ConfigDir::at(config)
        .save_pairing(&parsed)
        .unwrap();
}

/// A valid pairing code for a relay at `origin`, with a token that relay never issued.
pub fn unissued_code(origin: &str) -> String {
    let secret = sealpost_seal::PairingSecret::generate(&mut rand::rng());
    let origin = sealpost_seal::RelayOrigin::parse(origin).unwrap();
    sealpost_seal::PairingCode::new(origin, "header.payload.signature", secret)
        .unwrap()
        .encode()
        .to_string()
}

/// The hello of a ten-minute session `session_id` that `tab` starts at `from` for `secret`.
pub fn ten_minute_hello(
    tab: &sealpost_executor::Executor,
    secret: &sealpost_seal::PairingSecret,
    session_id: sealpost_protocol::ids::SessionId,
    from: sealpost_time::UnixMillis,
) -> Vec<u8> {
    let until = from.saturating_add_ms(600_000);
    tab.start_session(secret, session_id, from, until, &mut rand::rng())
        .unwrap()
}

/// An executor over `workspace` with AI access on, the `notes` source and every built-in tool
/// granted.
pub fn granted_executor(workspace: sealpost_executor::Workspace) -> sealpost_executor::Executor {
    use sealpost_executor::{Access, BuiltinTool, Grants, GrantsHandle, MemoryAuditLog};
    let grants = GrantsHandle::new(Grants {
        access: Access::On,
        sources: ["notes".to_owned()].into(),
        tools: BuiltinTool::ALL
            .iter()
            .map(|t| t.name().to_owned())
            .collect(),
        ..Grants::default()
    });
    sealpost_executor::Executor::new(workspace, grants, std::rc::Rc::new(MemoryAuditLog::new()))
}
