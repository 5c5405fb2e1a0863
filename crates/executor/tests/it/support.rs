//! A live session between an executor and a simulated plugin, over a small workspace.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use rand::SeedableRng;
use rand::rngs::StdRng;
use sealpost_executor::{
    Access, Delivery, DocId, Document, Executor, Grants, GrantsHandle, MemoryAuditLog, Outcome,
    Workspace,
};
use sealpost_protocol::content::{Refusal, RefusalCode, Reply, ToolCall, ToolResult};
use sealpost_seal::{CallId, Header, PairingSecret, PluginSession, SessionId, verify_hello};
use sealpost_time::UnixMillis;
use serde_json::{Value, json};

pub const START_MS: UnixMillis = UnixMillis::from_ms(1_800_000_000_000);
pub const SESSION_MS: u64 = 3_600_000;
pub const CALL_TTL_MS: u64 = 60_000;

/// Polls a future to completion on this thread. Built-in tools never wait, and tests that
/// need a pending host tool drive the future by hand instead.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

pub fn doc(id: &str, source: &str, title: &str, body: &str) -> Document {
    Document {
        id: DocId::new(id).unwrap(),
        source: source.to_owned(),
        title: title.to_owned(),
        body: body.to_owned(),
        updated_at_ms: START_MS.saturating_sub_ms(1000),
    }
}

/// Sources `notes` and `journal` are granted; `private` is not.
pub fn small_workspace() -> Workspace {
    let mut workspace = Workspace::default();
    for source in ["notes", "journal", "private"] {
        workspace.add_source(source).unwrap();
    }
    for document in [
        doc(
            "n1",
            "notes",
            "Key rotation",
            "Rotate the signing keys every ninety days.",
        ),
        doc("n2", "notes", "Groceries", "Milk, eggs, bread.\nApples."),
        doc(
            "j1",
            "journal",
            "Monday",
            "Walked by the river and thought about keys.",
        ),
        doc(
            "p1",
            "private",
            "Diary",
            "The secret keys are under the mat.",
        ),
    ] {
        workspace.put(document).unwrap();
    }
    workspace
}

pub fn all_builtin_tools() -> Vec<String> {
    sealpost_executor::BuiltinTool::ALL
        .iter()
        .map(|tool| tool.name().to_owned())
        .collect()
}

pub fn open_grants() -> Grants {
    Grants {
        access: Access::On,
        sources: ["notes", "journal"].map(str::to_owned).into(),
        tools: all_builtin_tools().into_iter().collect(),
        ..Grants::default()
    }
}

/// An executor with a live session, and the plugin's side of that session.
pub struct Harness {
    pub executor: Executor,
    pub grants: GrantsHandle,
    pub audit: MemoryAuditLog,
    pub plugin: PluginSession,
    pairing: PairingSecret,
    pub rng: RefCell<StdRng>,
    pub now: Cell<UnixMillis>,
    next_call: Cell<u8>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_workspace(small_workspace(), open_grants())
    }

    /// The names the catalog offers, in its order.
    pub fn catalog_names(&self) -> Vec<String> {
        let tools = self.executor.catalog().tools;
        tools.into_iter().map(|t| t.name).collect()
    }

    /// Grants `tool` as the person's picker does: a host tool binds to its registration now.
    pub fn grant_tool(&self, tool: &str) {
        let mut grants = self.grants.snapshot();
        grants.tools.insert(tool.to_owned());
        self.executor.set_grants(grants);
    }

    /// A harness whose executor and plugin share another pairing secret.
    pub fn new_with_pairing(secret: [u8; 32]) -> Self {
        Self::build(
            small_workspace(),
            open_grants(),
            PairingSecret::from_bytes(secret),
        )
    }

    pub fn with_workspace(workspace: Workspace, grants: Grants) -> Self {
        Self::build(workspace, grants, PairingSecret::from_bytes([9; 32]))
    }

    fn build(workspace: Workspace, grants: Grants, pairing: PairingSecret) -> Self {
        let grants = GrantsHandle::new(grants);
        let audit = MemoryAuditLog::new();
        let executor = Executor::new(workspace, grants.clone(), Rc::new(audit.clone()));
        let mut rng = StdRng::seed_from_u64(7);
        let hello = executor
            .start_session(
                &pairing,
                SessionId::from_bytes([1; 16]),
                START_MS,
                START_MS.saturating_add_ms(SESSION_MS),
                &mut rng,
            )
            .unwrap();
        let verified = verify_hello(&pairing, &hello, START_MS).unwrap();
        let plugin = PluginSession::start(&pairing, &verified, &mut rng).unwrap();
        Self {
            executor,
            grants,
            audit,
            plugin,
            pairing,
            rng: RefCell::new(rng),
            now: Cell::new(START_MS),
            next_call: Cell::new(1),
        }
    }

    /// Opens a catalog update as the plugin does: its number and tool names.
    pub fn open_update(&self, update: &[u8]) -> (u64, Vec<String>) {
        let hello = self.executor.hello().unwrap();
        let verified = verify_hello(&self.pairing, &hello, self.now.get()).unwrap();
        let opened = sealpost_seal::open_catalog_update(&self.pairing, &verified, update).unwrap();
        let catalog: sealpost_protocol::content::Catalog =
            serde_json::from_slice(opened.catalog()).unwrap();
        (
            opened.seq(),
            catalog.tools.into_iter().map(|t| t.name).collect(),
        )
    }

    /// The plugin restarts: it fetches the same hello and joins with a new ephemeral key.
    pub fn rejoin(&mut self) {
        let hello = self.executor.hello().unwrap();
        let verified = verify_hello(&self.pairing, &hello, self.now.get()).unwrap();
        self.plugin =
            PluginSession::start(&self.pairing, &verified, &mut *self.rng.borrow_mut()).unwrap();
    }

    /// A fresh call header, created now and expiring after [`CALL_TTL_MS`].
    pub fn header(&self) -> Header {
        let id = self.next_call.get();
        self.next_call.set(id + 1);
        let now = self.now.get();
        self.plugin.call_header(
            CallId::from_bytes([id; 16]),
            now,
            now.saturating_add_ms(CALL_TTL_MS),
        )
    }

    pub fn seal(&self, header: &Header, plaintext: &[u8]) -> Vec<u8> {
        self.plugin
            .seal_call(header, plaintext, &mut *self.rng.borrow_mut())
            .unwrap()
    }

    pub fn envelope(&self, name: &str, arguments: Value) -> (Header, Vec<u8>) {
        let header = self.header();
        let call = ToolCall {
            name: name.to_owned(),
            arguments,
        };
        let envelope = self.seal(&header, &serde_json::to_vec(&call).unwrap());
        (header, envelope)
    }

    /// Handles a call and settles it as the relay accepting its answer.
    pub fn handle(&self, envelope: &[u8]) -> Outcome {
        let outcome = self.handle_unsettled(envelope);
        self.executor.settle(&outcome, Delivery::Accepted);
        outcome
    }

    /// Handles a call and leaves it to the test to settle.
    pub fn handle_unsettled(&self, envelope: &[u8]) -> Outcome {
        let mut rng = StdRng::seed_from_u64(u64::from(self.next_call.get()));
        block_on(self.executor.handle(envelope, &self.now, &mut rng))
    }

    /// The reply plaintext exactly as the plugin opens it.
    pub fn reply_bytes(&self, header: &Header, outcome: &Outcome) -> Vec<u8> {
        match outcome {
            Outcome::Reply { envelope, .. } => self.plugin.open_reply(header, envelope).unwrap(),
            Outcome::Cancel { reason, .. } => panic!("expected a reply, got cancel {reason:?}"),
        }
    }

    pub fn call_bytes(&self, name: &str, arguments: Value) -> Vec<u8> {
        let (header, envelope) = self.envelope(name, arguments);
        let outcome = self.handle(&envelope);
        self.reply_bytes(&header, &outcome)
    }

    pub fn call(&self, name: &str, arguments: Value) -> Reply {
        serde_json::from_slice(&self.call_bytes(name, arguments)).unwrap()
    }

    /// The structured result of a call that must succeed.
    pub fn ok(&self, name: &str, arguments: Value) -> Value {
        match self.call(name, arguments) {
            Reply::Result(ToolResult {
                structured: Some(value),
                is_error: false,
                ..
            }) => value,
            other => panic!("expected a structured result, got {other:?}"),
        }
    }

    /// The text of a call that must answer with a tool error.
    pub fn tool_error(&self, name: &str, arguments: Value) -> String {
        match self.call(name, arguments) {
            Reply::Result(ToolResult {
                content,
                is_error: true,
                ..
            }) => match &content[0] {
                sealpost_protocol::content::ContentBlock::Text { text } => text.clone(),
            },
            other => panic!("expected a tool error, got {other:?}"),
        }
    }

    pub fn refusal(&self, name: &str, arguments: Value) -> Refusal {
        match self.call(name, arguments) {
            Reply::Refusal(refusal) => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    pub fn refusal_code(&self, name: &str, arguments: Value) -> RefusalCode {
        self.refusal(name, arguments).code
    }
}

pub fn empty() -> Value {
    json!({})
}
