//! rmcp's own client, as Rust-based clients drive the plugin: the 2025 `initialize` era and the
//! 2026-07-28 `server/discover` era.

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
use rmcp::transport::TokioChildProcess;

use crate::{config_dir, sealpost};

async fn check_client(lifecycle: ClientLifecycleMode) {
    let config = config_dir();
    let mut command = sealpost(config.path());
    command.arg("mcp");
    let transport = TokioChildProcess::new(command).expect("spawn sealpost mcp");
    let client =
        ().serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("the handshake succeeds");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools[0].name, "sealpost_status");
    let result = client
        .call_tool(CallToolRequestParams::new("sealpost_status"))
        .await
        .expect("tools/call");
    let text = result.content[0].as_text().expect("text").text.clone();
    assert!(text.contains("sealpost pair"), "{text}");
    let failed = client
        .call_tool(CallToolRequestParams::new("search_workspace"))
        .await
        .expect("a tab tool's failure is a result, not a protocol error");
    assert_eq!(failed.is_error, Some(true));
    client.cancel().await.expect("closes");
}

#[tokio::test]
async fn rmcp_client_with_initialize() {
    check_client(ClientLifecycleMode::Initialize).await;
}

#[tokio::test]
async fn rmcp_client_with_server_discover() {
    check_client(ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    })
    .await;
}
