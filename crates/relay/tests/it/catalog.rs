//! A live session's catalog update over HTTP: the tab puts it, the plugin's lookup carries it,
//! an older one is refused, and bytes that are not one of this session's are refused.

use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::SessionId;
use serde_json::json;

use sealpost_testkit::{Relay, b64, id, pairing, unb64};

/// Bytes laid out as a catalog update of `session` numbered `seq` (docs/PROTOCOL.md); the
/// sealed part is filler, which the relay never reads.
pub(crate) fn update(session: SessionId, seq: u64, filler: u8) -> Vec<u8> {
    let mut bytes = vec![1];
    bytes.extend_from_slice(session.as_bytes());
    bytes.extend_from_slice(&[7; 16]);
    bytes.extend_from_slice(&seq.to_be_bytes());
    bytes.extend_from_slice(&1_000u64.to_be_bytes());
    bytes.extend_from_slice(&[filler; 24 + 40]);
    bytes
}

#[tokio::test]
async fn the_tab_updates_a_live_sessions_catalog_and_the_plugin_gets_the_newest() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    let put = |token: &str, session: SessionId, bytes: Vec<u8>| {
        let token = token.to_owned();
        let relay = &relay;
        async move {
            relay
                .send(
                    Method::PUT,
                    format!("/v1/sessions/{session}/catalog"),
                    Some(&token),
                    Some(json!({"update": b64(&bytes)})),
                )
                .await
        }
    };
    let live = || async {
        let (status, live) = relay
            .send(
                Method::GET,
                format!("/v1/pairings/{}/session", p.pair),
                Some(&p.mcp),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        live
    };
    assert!(
        live().await.get("catalog_update").is_none(),
        "no update until the tab puts one"
    );

    let first = update(p.session, 1, 0xa1);
    assert_eq!(
        put(&p.owner, p.session, first.clone()).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(unb64(&live().await["catalog_update"]), first);
    let second = update(p.session, 2, 0xa2);
    assert_eq!(
        put(&p.owner, p.session, second.clone()).await.0,
        StatusCode::NO_CONTENT
    );

    let (status, body) = put(&p.owner, p.session, update(p.session, 1, 0xb1)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("stale_catalog_update")),
        "an older number is refused: {body}"
    );
    assert_eq!(unb64(&live().await["catalog_update"]), second);

    // Only the owner's token, only this session's bytes, only a live session.
    let (status, body) = put(&p.mcp, p.session, update(p.session, 3, 0)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = put(&p.owner, p.session, update(id(), 3, 0)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "bytes naming another session: {body}"
    );
    let (status, _) = put(&p.owner, p.session, b"not an update".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut numbered_zero = update(p.session, 0, 0);
    numbered_zero[0] = 1;
    let (status, _) = put(&p.owner, p.session, numbered_zero).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "number 0 is the hello's");
    let unknown = id();
    let (status, _) = put(&p.owner, unknown, update(unknown, 3, 0)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, bob) = relay.owner("bob").await;
    let (status, _) = put(&bob, p.session, update(p.session, 3, 0)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another owner's session is not found"
    );
    let (status, _) = put(
        &p.owner,
        p.session,
        update(p.session, 3, 0)
            .into_iter()
            .chain([0; 70_000])
            .collect(),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}
