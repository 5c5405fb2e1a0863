//! A connected client hears of the tab's tool changes without asking: the plugin watches its
//! pairing's session at the relay and sends `list_changed` when the tab grants a tool.

use reqwest::Method;
use sealpost_e2e::LiveRelay;
use sealpost_executor::{Executor, Workspace};
use sealpost_protocol::ids::{Base64Bytes, SessionId};
use sealpost_testkit::{TestDb, id};
use serde_json::{Value, json};

use crate::{Mcp, config_dir, granted_executor, ten_minute_hello, write_pairing};

fn now_ms() -> sealpost_time::UnixMillis {
    sealpost_relay::clock::now_ms()
}

async fn listed(mcp: &mut Mcp) -> Vec<String> {
    let tools = mcp.request("tools/list", json!({})).await;
    tools["result"]["tools"]
        .as_array()
        .unwrap()
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
async fn a_tool_granted_mid_session_reaches_a_listening_client_without_it_asking() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let pairing = relay.pair().await.unwrap();
    let config = config_dir();
    write_pairing(config.path(), &pairing.code(&relay.base));

    // A tab that has not granted `search_workspace` yet.
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    let tab: Executor = granted_executor(workspace);
    tab.grants().update(|g| {
        g.tools.remove("search_workspace");
    });
    let session_id = id::<SessionId>();
    let hello = ten_minute_hello(&tab, &pairing.secret, session_id, now_ms());
    relay
        .owner
        .create_session(session_id, pairing.pair_id, hello, 600)
        .await
        .unwrap();

    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    // The first list comes from the cache (empty) and looks the session up in the background.
    while !listed(&mut mcp).await.contains(&"list_sources".to_owned()) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        !listed(&mut mcp)
            .await
            .contains(&"search_workspace".to_owned())
    );
    // The announcement of that first list, read now so that the next one is the grant's.
    if !mcp
        .notifications
        .iter()
        .any(|n| n["method"] == "notifications/tools/list_changed")
    {
        unasked(&mut mcp, "notifications/tools/list_changed").await;
    }

    // The person grants it; the tab publishes the change. The client sends nothing.
    tab.grants().update(|g| {
        g.tools.insert("search_workspace".into());
    });
    let update = tab
        .catalog_update(now_ms(), &mut rand::rng())
        .unwrap()
        .unwrap();
    let (status, body) = relay
        .send(
            Method::PUT,
            format!("/v1/sessions/{session_id}/catalog"),
            Some(&relay.owner.token),
            Some(json!({ "update": Base64Bytes(update) })),
        )
        .await;
    assert!(status.is_success(), "{body}");
    unasked(&mut mcp, "notifications/tools/list_changed").await;
    assert!(
        listed(&mut mcp)
            .await
            .contains(&"search_workspace".to_owned())
    );
}
