//! What `cargo xtask bench browser` measures in the page (`web/bench/`): the module's search
//! index and the executor's handling of one sealed call, with no relay and no Worker around
//! them, so the page times the module alone. The page takes its clock readings; nothing here
//! reads a clock except to stamp calls, as the tab does.

use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use sealpost_executor::{
    Access, Delivery, Document, Executor, Grants, GrantsHandle, HostTool, MemoryAuditLog, Outcome,
    ToolFuture, ToolSpec, Workspace,
};
use sealpost_protocol::content::{ToolCall, ToolKind, ToolResult};
use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_seal::{PairingSecret, PluginSession, verify_hello};
use sealpost_time::UnixMillis;
use serde::Deserialize;
use serde_json::{Value, json};
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;

fn now_ms() -> UnixMillis {
    UnixMillis::from_ms(js_sys::Date::now() as u64)
}

/// Polls a future that never waits: every tool here answers at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a benchmark tool waited"),
    }
}

fn grants(sources: Vec<String>, tools: &[&str]) -> GrantsHandle {
    GrantsHandle::new(Grants {
        access: Access::On,
        sources: sources.into_iter().collect(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        ..Grants::default()
    })
}

/// The corpus file the benchmark generates (`SEALPOST_BENCH_CORPUS`, see the executor's bench).
#[derive(Deserialize)]
struct Corpus {
    sources: Vec<String>,
    documents: Vec<Document>,
}

/// A workspace indexed from the corpus, behind an executor granted every source.
#[wasm_bindgen]
pub struct BenchWorkspace {
    executor: Executor,
}

impl std::fmt::Debug for BenchWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchWorkspace").finish_non_exhaustive()
    }
}

#[wasm_bindgen]
impl BenchWorkspace {
    /// Parses the corpus JSON text and indexes every document: the build the page times.
    ///
    /// The text is dropped once parsed, before indexing, so the index is built in the memory
    /// it held: wasm memory never shrinks, and a text held through the build would leave its
    /// size in the module for good. (The tab never holds such a text: it gets documents as
    /// objects, a hundred at a time.)
    #[wasm_bindgen(constructor)]
    pub fn new(corpus_json: String) -> Result<BenchWorkspace, JsError> {
        let corpus: Corpus = serde_json::from_str(&corpus_json)?;
        drop(corpus_json);
        let mut workspace = Workspace::default();
        for source in &corpus.sources {
            workspace.add_source(source)?;
        }
        for document in corpus.documents {
            workspace.put(document)?;
        }
        let grants = grants(corpus.sources, &["search_workspace"]);
        let executor = Executor::new(workspace, grants, Rc::new(MemoryAuditLog::new()));
        Ok(BenchWorkspace { executor })
    }

    /// How many documents are indexed.
    pub fn documents(&self) -> usize {
        self.executor.workspace().len()
    }

    /// The index alone: parses and ranks `query`, answers how many of the best `limit` matched.
    pub fn search(&self, query: &str, limit: usize) -> usize {
        self.executor
            .workspace()
            .search(query, |_| true, limit)
            .1
            .len()
    }

    /// The `search_workspace` tool as a call runs it (schema, grants, search, snippets, the
    /// JSON answer): answers the answer's length in bytes.
    #[wasm_bindgen(js_name = searchTool)]
    pub fn search_tool(&self, query: &str) -> Result<usize, JsError> {
        let call = ToolCall {
            name: "search_workspace".into(),
            arguments: json!({ "query": query }),
        };
        let decision = ready(self.executor.execute(&call, &now_ms, &mut rand::rng()));
        let answer = serde_json::to_vec(&decision.reply)?;
        Ok(answer.len())
    }
}

struct Noop;

impl HostTool for Noop {
    fn call(&self, _: Value) -> ToolFuture {
        Box::pin(std::future::ready(Ok(ToolResult::default())))
    }
}

/// Calls to a no-op read tool sealed by a plugin session, and the executor that answers them:
/// from a claimed envelope to the reply envelope the tab puts back (open, replay and expiry
/// checks, grants, schema, the tool, sealing, the audit record).
#[wasm_bindgen]
pub struct BenchCalls {
    executor: Executor,
    envelopes: Vec<Vec<u8>>,
}

impl std::fmt::Debug for BenchCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCalls")
            .field("calls", &self.envelopes.len())
            .finish_non_exhaustive()
    }
}

#[wasm_bindgen]
impl BenchCalls {
    /// Seals `count` distinct calls for a fresh session lasting an hour.
    #[wasm_bindgen(constructor)]
    pub fn new(count: usize) -> Result<BenchCalls, JsError> {
        let grants = grants(Vec::new(), &["noop"]);
        let executor = Executor::new(Workspace::default(), grants, Rc::new(MemoryAuditLog::new()));
        executor.register_tool(
            ToolSpec::new(
                "noop",
                "Does nothing.",
                json!({"type": "object", "additionalProperties": false}),
                ToolKind::Read,
            ),
            Rc::new(Noop),
        )?;
        // A host tool's grant binds to the tool as registered: grant it again once it is.
        executor.set_grants(executor.grants().snapshot());
        let rng = &mut rand::rng();
        let pairing = PairingSecret::from_bytes(rand::random());
        let (start, end) = (now_ms(), now_ms().saturating_add_ms(3_600_000));
        let hello = executor.start_session(
            &pairing,
            SessionId::from_bytes(rand::random()),
            start,
            end,
            rng,
        )?;
        let plugin = PluginSession::start(&pairing, &verify_hello(&pairing, &hello, start)?, rng)?;
        let plaintext = serde_json::to_vec(&ToolCall {
            name: "noop".into(),
            arguments: json!({}),
        })?;
        let envelopes = (0..count)
            .map(|_| {
                let header = plugin.call_header(CallId::from_bytes(rand::random()), start, end);
                plugin.seal_call(&header, &plaintext, rng)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BenchCalls {
            executor,
            envelopes,
        })
    }

    /// Answers call `n`: the reply envelope's length. A call refused or cancelled throws.
    pub fn handle(&self, n: usize) -> Result<usize, JsError> {
        let envelope = self
            .envelopes
            .get(n)
            .ok_or_else(|| JsError::new("no such call"))?;
        let outcome = ready(self.executor.handle(envelope, &now_ms, &mut rand::rng()));
        self.executor.settle(&outcome, Delivery::Accepted);
        match outcome {
            Outcome::Reply { envelope, .. } => Ok(envelope.len()),
            Outcome::Cancel { reason, .. } => {
                Err(JsError::new(&format!("call cancelled: {reason:?}")))
            }
        }
    }
}

/// Bytes of the module's linear memory (it grows and never shrinks).
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .unchecked_into::<js_sys::WebAssembly::Memory>()
        .buffer()
        .unchecked_into::<js_sys::ArrayBuffer>()
        .byte_length() as f64
}
