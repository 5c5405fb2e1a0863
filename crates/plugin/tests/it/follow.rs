//! A connected client hears of the tab's tool changes without asking: the plugin watches its
//! pairing's session at the relay and tells an `initialize`-era client with `list_changed`, and
//! a 2026-07-28 client on its `subscriptions/listen` stream (and only there).

use reqwest::Method;
use sealpost_e2e::{LiveRelay, Pairing};
use sealpost_executor::{Executor, Workspace};
use sealpost_protocol::ids::{Base64Bytes, SessionId};
use sealpost_testkit::{TestDb, id};
use serde_json::{Value, json};

use crate::stdio::modern_meta;
use crate::{Mcp, config_dir, granted_executor, result_text, ten_minute_hello, write_pairing};

const LIST_CHANGED: &str = "notifications/tools/list_changed";

fn now_ms() -> sealpost_time::UnixMillis {
    sealpost_relay::clock::now_ms()
}

/// A live session of a tab (the native executor) that has not granted `search_workspace`,
/// and a plugin configuration paired with it.
struct Tab {
    relay: LiveRelay,
    config: tempfile::TempDir,
    executor: Executor,
    session_id: SessionId,
}

impl Tab {
    async fn start() -> Self {
        let relay = LiveRelay::start(TestDb::sqlite()).await;
        let pairing: Pairing = relay.pair().await.unwrap();
        let config = config_dir();
        write_pairing(config.path(), &pairing.code(&relay.base));
        let mut workspace = Workspace::default();
        workspace.add_source("notes").unwrap();
        let executor = granted_executor(workspace);
        executor.grants().update(|g| {
            g.tools.remove("search_workspace");
        });
        let session_id = id::<SessionId>();
        let hello = ten_minute_hello(&executor, &pairing.secret, session_id, now_ms());
        relay
            .owner
            .create_session(session_id, pairing.pair_id, hello, 600)
            .await
            .unwrap();
        Self {
            relay,
            config,
            executor,
            session_id,
        }
    }

    /// The person grants (`true`) or withdraws `tool`, and the tab publishes the change.
    async fn grant(&self, tool: &str, granted: bool) {
        self.executor.grants().update(|g| {
            if granted {
                g.tools.insert(tool.into());
            } else {
                g.tools.remove(tool);
            }
        });
        let update = self.executor.catalog_update(now_ms(), &mut rand::rng());
        let (status, body) = self
            .relay
            .send(
                Method::PUT,
                format!("/v1/sessions/{}/catalog", self.session_id),
                Some(&self.relay.owner.token),
                Some(json!({ "update": Base64Bytes(update.unwrap().unwrap()) })),
            )
            .await;
        assert!(status.is_success(), "{body}");
    }
}

async fn listed(mcp: &mut Mcp, meta: &Value) -> Vec<String> {
    let tools = mcp.request("tools/list", json!({ "_meta": meta })).await;
    tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {tools}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Reads what the plugin sends, unasked, until `method` arrives.
async fn unasked(mcp: &mut Mcp, method: &str) -> Value {
    loop {
        let message = mcp.recv().await;
        if message["method"] == method {
            return message;
        }
    }
}

#[tokio::test]
async fn a_tool_granted_mid_session_reaches_an_initialized_client_without_it_asking() {
    let tab = Tab::start().await;
    let mut mcp = Mcp::spawn(tab.config.path());
    mcp.initialize("2025-11-25").await;
    let meta = json!({});
    // The first list comes from the cache (empty) and looks the session up in the background.
    while !listed(&mut mcp, &meta)
        .await
        .contains(&"list_sources".into())
    {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        !listed(&mut mcp, &meta)
            .await
            .contains(&"search_workspace".into())
    );
    // The announcement of that first list, read now so that the next one is the grant's.
    if !mcp
        .notifications
        .iter()
        .any(|n| n["method"] == LIST_CHANGED)
    {
        unasked(&mut mcp, LIST_CHANGED).await;
    }

    // The person grants it; the tab publishes the change. The client sends nothing.
    tab.grant("search_workspace", true).await;
    unasked(&mut mcp, LIST_CHANGED).await;
    assert!(
        listed(&mut mcp, &meta)
            .await
            .contains(&"search_workspace".into())
    );
}

#[tokio::test]
async fn a_subscribed_modern_client_hears_of_a_grant_and_a_withdrawal_on_its_subscription_only() {
    let tab = Tab::start().await;
    let mut mcp = Mcp::spawn(tab.config.path());
    let meta = modern_meta();
    let listen = json!(7000);
    mcp.send(&json!({
        "jsonrpc": "2.0", "id": listen, "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true, "promptsListChanged": true}, "_meta": meta},
    }))
    .await;
    let subscription = |message: &Value| {
        message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone()
    };
    let acknowledged = unasked(&mut mcp, "notifications/subscriptions/acknowledged").await;
    assert_eq!(subscription(&acknowledged), listen);
    assert_eq!(
        acknowledged["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "only the tool list is followed"
    );

    // Subscribing took `sealpost_call` off the list (a client that follows changes has no use
    // for it) and looked the session up: each change arrives on the subscription.
    loop {
        let changed = unasked(&mut mcp, LIST_CHANGED).await;
        assert_eq!(subscription(&changed), listen, "{changed}");
        let names = listed(&mut mcp, &meta).await;
        assert!(!names.contains(&"sealpost_call".into()), "{names:?}");
        if names.contains(&"list_sources".into()) {
            break;
        }
    }

    tab.grant("search_workspace", true).await;
    let granted = unasked(&mut mcp, LIST_CHANGED).await;
    assert_eq!(subscription(&granted), listen, "{granted}");
    assert!(
        listed(&mut mcp, &meta)
            .await
            .contains(&"search_workspace".into())
    );

    tab.grant("list_sources", false).await;
    let withdrawn = unasked(&mut mcp, LIST_CHANGED).await;
    assert_eq!(subscription(&withdrawn), listen, "{withdrawn}");
    assert!(
        !listed(&mut mcp, &meta)
            .await
            .contains(&"list_sources".into())
    );

    // Nothing reached this client outside its subscription.
    assert!(
        mcp.notifications
            .iter()
            .all(|n| n["method"] != LIST_CHANGED || subscription(n) == listen),
        "{:?}",
        mcp.notifications
    );
}

#[tokio::test]
async fn a_client_that_never_relists_reaches_tools_that_came_later_through_sealpost_call() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let pairing = relay.pair().await.unwrap();
    let config = config_dir();
    write_pairing(config.path(), &pairing.code(&relay.base));
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    // Its one list, read before the tab had a session: the plugin's own tools alone.
    assert_eq!(
        listed(&mut mcp, &json!({})).await,
        ["sealpost_status", "sealpost_call"]
    );

    let tab =
        sealpost_e2e::tab::Tab::start(&relay, &pairing.secret, 600, crate::live::tab_executor)
            .await
            .unwrap();
    // What the tab offers now, cleaned, attributed and fenced as anything from the tab.
    let (text, is_error) = result_text(&mcp.call("sealpost_call", json!({})).await);
    assert!(!is_error, "{text}");
    assert!(text.contains("\"name\": \"search_workspace\""), "{text}");
    assert!(
        text.contains("[From the Sealpost browser tab served by"),
        "{text}"
    );
    assert!(text.contains("⟦BEGIN ") && text.contains("⟦END "), "{text}");

    // A call through it is the tool's own call: the same grants, the same fence.
    let search = json!({"tool": "search_workspace", "arguments": {"query": "rotation"}});
    let (text, is_error) = result_text(&mcp.call("sealpost_call", search).await);
    assert!(!is_error, "{text}");
    assert!(text.contains("Key rotation"), "{text}");
    assert!(
        !text.contains("Salary"),
        "an ungranted source stays out: {text}"
    );
    assert!(text.contains("⟦BEGIN "), "{text}");

    // Only the tab's tools: not the plugin's own, not one the tab does not offer.
    for name in ["sealpost_status", "sealpost_call", "no_such_tool"] {
        let (text, is_error) = result_text(&mcp.call("sealpost_call", json!({"tool": name})).await);
        assert!(is_error, "{name}: {text}");
        assert!(text.contains("does not offer"), "{name}: {text}");
    }
    drop(tab);
}
