//! Token kinds: every endpoint takes exactly the kinds of token it names, and refuses the other
//! kind 403 `wrong_token_kind` with a message naming the kind it needs.

use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::{CallId, SessionId, TokenId};
use serde_json::{Value, json};

use sealpost_testkit::id;
use sealpost_testkit::{Relay, b64, pairing};

const NEEDS_OWNER: &str = "This endpoint needs a signed-in owner's token.";
const NEEDS_MCP: &str = "This endpoint needs an MCP token.";

#[tokio::test]
async fn each_endpoint_refuses_the_other_kind_of_token_and_says_which_it_needs() {
    let relay = Relay::sqlite().await;
    let a = pairing(&relay, "alice").await;
    let call = relay.post_call(&a.mcp, a.session, b"envelope").await;
    let s = a.session;
    let p = a.pair;
    let catalog = json!({"update": b64(b"not read: the kind is refused first")});
    // (method, path, body, the token of the kind refused, what the answer says is needed)
    let refused: Vec<(Method, String, Option<Value>, &str, &str)> = vec![
        (Method::GET, "/v1/me".into(), None, &a.mcp, NEEDS_OWNER),
        (
            Method::POST,
            "/v1/auth/signin-links".into(),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::GET,
            "/v1/mcp-tokens".into(),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::POST,
            "/v1/mcp-tokens".into(),
            Some(json!({"label": "x", "pair_id": p})),
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::DELETE,
            format!("/v1/mcp-tokens/{}", a.mcp_id),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::GET,
            "/v1/owner-tokens".into(),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::DELETE,
            format!("/v1/owner-tokens/{}", id::<TokenId>()),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            Some(
                json!({"session_id": id::<SessionId>(), "pair_id": p, "hello": b64(b"x"), "ttl_s": 60}),
            ),
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::PUT,
            format!("/v1/sessions/{s}/catalog"),
            Some(catalog),
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::DELETE,
            format!("/v1/sessions/{s}"),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::POST,
            format!("/v1/sessions/{s}/claims"),
            None,
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(json!({"envelope": b64(b"forged")})),
            &a.mcp,
            NEEDS_OWNER,
        ),
        (
            Method::POST,
            format!("/v1/sessions/{s}/calls"),
            Some(json!({"call_id": id::<CallId>(), "envelope": b64(b"x"), "ttl_s": 60})),
            &a.owner,
            NEEDS_MCP,
        ),
    ];
    for (method, path, body, token, needs) in refused {
        let (status, answer) = relay.send(method.clone(), &path, Some(token), body).await;
        assert_eq!(
            (
                status,
                answer["error"]["code"].as_str(),
                answer["error"]["message"].as_str()
            ),
            (StatusCode::FORBIDDEN, Some("wrong_token_kind"), Some(needs)),
            "{method} {path}: {answer}"
        );
    }

    // Both kinds may look up the live session, read and cancel a call, and sign out.
    let both: Vec<(Method, String, Option<Value>, StatusCode)> = vec![
        (
            Method::GET,
            format!("/v1/pairings/{p}/session"),
            None,
            StatusCode::OK,
        ),
        (
            Method::GET,
            format!("/v1/calls/{call}"),
            None,
            StatusCode::OK,
        ),
        (
            Method::POST,
            format!("/v1/calls/{}/cancel", id::<CallId>()),
            Some(json!({"reason": "client_cancelled"})),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            "/v1/auth/signout".into(),
            None,
            StatusCode::NO_CONTENT,
        ),
    ];
    for (method, path, body, expected) in both {
        for (what, token) in [("owner token", &a.owner), ("MCP token", &a.mcp)] {
            let (status, answer) = relay
                .send(method.clone(), &path, Some(token), body.clone())
                .await;
            assert_eq!(status, expected, "{what} on {method} {path}: {answer}");
        }
    }
}
