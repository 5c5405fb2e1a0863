//! The loop row: [`PAIRS`] plugins and as many native tabs (`sealpost_e2e::Tab`: the real
//! executor, each on a thread of its own, claiming by long-poll) on one relay, beside the
//! relay-only figure of the same relay with as many clients.
//!
//! A plugin here is what `sealpost` does for a call, in-process: seal a `ToolCall` to the
//! session it verified, post it, long-poll its answer, open the reply. Spawning a hundred
//! `sealpost mcp` processes would measure process switching on two cores, not the loop.

use std::rc::Rc;
use std::sync::Arc;

use sealpost_e2e::LiveRelay;
use sealpost_e2e::tab::Tab;
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

use crate::{Databases, drive, http_clients, http_run, now, stop};

/// Plugins, and tabs, on the relay.
pub const PAIRS: usize = 100;

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
        self.client
            .post_call(self.session_id, call_id, envelope)
            .await
            .unwrap();
        let sealed = loop {
            let status = self.client.read_call(call_id, 10_000).await.unwrap();
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

/// The relay alone with [`PAIRS`] clients, then the loop with [`PAIRS`] plugins and tabs, on one
/// relay on a fresh database; prints both and their ratio.
pub async fn run(databases: &Databases) {
    println!("\n== the whole loop: {PAIRS} plugins and {PAIRS} native tabs on one relay ==");
    // Two hundred pairings of one owner, a hundred of whose tabs wait on a claim: past an
    // account's shares of tokens, sessions and long-polls, which are there for people, not for
    // a benchmark's one owner.
    let relay = LiveRelay::start_with(TestDb::at(databases.fresh().await), |limits| {
        limits.max_long_polls_per_token = 0;
        limits.max_long_polls_per_owner = 0;
        limits.max_live_mcp_tokens_per_owner = 4 * PAIRS as u32;
        limits.max_live_sessions_per_owner = 4 * PAIRS as u32;
    })
    .await;
    let clients = Arc::new(http_clients(&relay, Some(relay.store()), PAIRS).await);
    let alone = http_run(clients, PAIRS, None, false).await;
    println!("{}", alone.line(&format!("relay alone ({PAIRS} clients)")));

    let text = "x".repeat(900);
    let plaintext = serde_json::to_vec(&ToolCall {
        name: "echo".into(),
        arguments: json!({ "text": text }),
    })
    .unwrap();
    let mut tabs = Vec::with_capacity(PAIRS);
    let mut plugins = Vec::with_capacity(PAIRS);
    for _ in 0..PAIRS {
        let pairing = relay.pair().await.unwrap();
        let tab = Tab::start(&relay, &pairing.secret, SESSION_TTL_S, executor)
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
    let looped = drive(PAIRS, None, move |i| {
        let plugins = plugins.clone();
        async move { plugins[i].call().await }
    })
    .await;
    println!(
        "{}",
        looped.line(&format!("loop ({PAIRS} plugins, {PAIRS} tabs)"))
    );
    let replied: usize = tabs
        .iter()
        .map(|t| t.log.replied.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    println!(
        "loop ÷ relay alone: calls/s {:.2} (target ≥ 0.8), p99 {:.2}×; the tabs replied {replied} times",
        looped.per_second() / alone.per_second(),
        looped.pct_ms(0.99) / alone.pct_ms(0.99),
    );
    drop(tabs);
    stop(Arc::new(relay)).await;
}
