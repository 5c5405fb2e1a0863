//! The live loop: a tab (the executor, native build) publishes a session; the plugin seals a
//! tool call; the relay carries it over HTTP; the tab claims, opens, runs and seals the answer;
//! the plugin opens it. A canary string travels in both plaintexts and must never reach the
//! relay's database or logs.

use std::rc::Rc;

use sealpost_e2e::LiveRelay;
use sealpost_executor::{
    Access, Clock, DocId, Document, Executor, Grants, GrantsHandle, MemoryAuditLog, Outcome,
    Workspace,
};
use sealpost_protocol::api::CallState;
use sealpost_protocol::content::{ContentBlock, Reply, ToolCall};
use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_seal::{PluginSession, verify_hello};
use sealpost_testkit::{TestDb, id};
use sealpost_time::UnixMillis;
use serde_json::json;

use crate::logs;

/// A string that must only ever exist inside sealed plaintexts.
const CANARY: &str = "CANARY-7f3e9b1c-sealpost-plaintext";

struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> UnixMillis {
        sealpost_relay::clock::now_ms()
    }
}

fn tab() -> Executor {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    let body = format!("The rotation schedule is kept here. {CANARY} Rotate every ninety days.");
    workspace
        .put(Document {
            id: DocId::new("n1").unwrap(),
            source: "notes".into(),
            title: "Key rotation".into(),
            body,
            updated_at_ms: UnixMillis::EPOCH,
        })
        .unwrap();
    let grants = GrantsHandle::new(Grants {
        access: Access::On,
        sources: ["notes".to_owned()].into(),
        tools: ["search_workspace".to_owned()].into(),
        ..Grants::default()
    });
    Executor::new(workspace, grants, Rc::new(MemoryAuditLog::new()))
}

/// Runs one call through the whole loop; returns the reply the plugin opened and the call's id.
async fn one_call(relay: &LiveRelay) -> (Reply, CallId) {
    let mut rng = rand::rng();
    let pairing = relay.pair().await.unwrap();
    let executor = tab();

    // The tab starts a session and publishes its hello.
    let session_id = id::<SessionId>();
    let now = SystemClock.now_ms();
    let hello = executor
        .start_session(
            &pairing.secret,
            session_id,
            now,
            now.saturating_add_ms(600_000),
            &mut rng,
        )
        .unwrap();
    relay
        .owner
        .create_session(session_id, pairing.pair_id, hello, 600)
        .await
        .unwrap();

    // The plugin finds the session, checks the hello and seals a call.
    let plugin_client = relay.plugin(&pairing);
    let live = plugin_client.live_session(pairing.pair_id).await.unwrap();
    let verified = verify_hello(&pairing.secret, &live.hello.0, live.now_ms).unwrap();
    let plugin = PluginSession::start(&pairing.secret, &verified, &mut rng).unwrap();
    let call_id = id();
    let now = SystemClock.now_ms();
    let header = plugin.call_header(call_id, now, now.saturating_add_ms(60_000));
    let call = ToolCall {
        name: "search_workspace".into(),
        arguments: json!({"query": format!("rotation {CANARY}")}),
    };
    let envelope = plugin
        .seal_call(&header, &serde_json::to_vec(&call).unwrap(), &mut rng)
        .unwrap();
    plugin_client
        .post_call(live.session_id, call_id, envelope)
        .await
        .unwrap();

    // The tab claims, runs and answers.
    let claimed = relay.owner.claim(session_id, 10, 5_000).await.unwrap();
    assert_eq!(claimed.calls.len(), 1);
    let outcome = executor
        .handle(&claimed.calls[0].envelope.0, &SystemClock, &mut rng)
        .await;
    let Outcome::Reply {
        envelope,
        call_id: answered,
        ..
    } = outcome
    else {
        panic!("the tab should answer, got {outcome:?}");
    };
    assert_eq!(answered, call_id);
    relay.owner.reply(call_id, envelope).await.unwrap();

    // The plugin reads and opens the answer.
    let status = plugin_client.read_call(call_id, 5_000).await.unwrap();
    assert_eq!(status.state, CallState::Answered);
    let sealed = status.reply.expect("an answered call carries its reply");
    let opened = plugin.open_reply(&header, &sealed.0).unwrap();
    (serde_json::from_slice(&opened).unwrap(), call_id)
}

/// What the reply says: its text, and its structured answer (a built-in read's whole answer).
fn reply_text(reply: &Reply) -> String {
    match reply {
        Reply::Result(result) => {
            let mut text: String = result
                .content
                .iter()
                .map(|ContentBlock::Text { text }| text.as_str())
                .collect();
            if let Some(structured) = &result.structured {
                text.push_str(&structured.to_string());
            }
            text
        }
        Reply::Refusal(refusal) => panic!("refused: {refusal:?}"),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[tokio::test]
async fn a_call_sealed_by_the_plugin_is_answered_by_the_tab_through_the_relay_on_sqlite() {
    logs::start();
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let (reply, call_id) = one_call(&relay).await;
    assert!(
        reply_text(&reply).contains(CANARY),
        "the tab found the document"
    );
    let db = relay.stop().await.expect("the relay's database");

    let stored: Vec<u8> = db
        .files()
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect();
    // Positive control: the scan sees what the relay does store (the call's id).
    assert!(
        contains(&stored, call_id.as_bytes()),
        "the scan reads the database's bytes"
    );
    assert!(
        !contains(&stored, CANARY.as_bytes()),
        "the database holds plaintext"
    );
    let logged = logs::text();
    assert!(!logged.is_empty(), "the relay's logs were captured");
    assert!(
        !contains(&logged, CANARY.as_bytes()),
        "the relay logged plaintext"
    );
}

#[tokio::test]
async fn a_call_sealed_by_the_plugin_is_answered_by_the_tab_through_the_relay_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    logs::start();
    let relay = LiveRelay::start(db).await;
    let (reply, call_id) = one_call(&relay).await;
    assert!(reply_text(&reply).contains(CANARY));
    let url = relay.stop().await.expect("the relay's database").url;

    // Every byte the relay stored, read back as text.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let dump: String = sqlx::query_scalar(
        "SELECT coalesce(string_agg(row_to_json(t)::text, ''), '') FROM calls t",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let sessions: String = sqlx::query_scalar(
        "SELECT coalesce(string_agg(row_to_json(s)::text, ''), '') FROM sessions s",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Positive control: the dump shows what the relay does store (the call's id, as bytea hex).
    assert!(
        dump.contains(&hex(call_id.as_bytes())),
        "the dump reads the stored bytes"
    );
    for text in [dump, sessions] {
        assert!(!text.contains(CANARY), "PostgreSQL holds plaintext");
        assert!(
            !text.contains(&hex(CANARY.as_bytes())),
            "PostgreSQL holds plaintext (bytea)"
        );
    }
    assert!(
        !contains(&logs::text(), CANARY.as_bytes()),
        "the relay logged plaintext"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
