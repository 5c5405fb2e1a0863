//! Isolation matrix: every endpoint, called with every kind of wrong token, is refused and
//! leaks nothing (no hello, no envelope, no reply, no token list).

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use sealpost_relay::http::auth::{Claims, ISSUER};
use serde_json::{Value, json};

use sealpost_testkit::id;
use sealpost_testkit::{Relay, TEST_KEY, b64, pairing};

fn forge(key: &[u8], alg: Algorithm, claims: &Claims) -> String {
    jsonwebtoken::encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(key).unwrap(),
    )
    .unwrap()
}

fn claims_for(owner: &str, sid: &str, aud: &str, exp: u64) -> Claims {
    Claims {
        iss: ISSUER.into(),
        aud: aud.into(),
        sub: owner.into(),
        sid: sid.into(),
        exp,
        iat: 0,
        pair_id: None,
    }
}

/// A JWT with `"alg":"none"` and no signature.
fn alg_none(claims: &Claims) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = engine.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let body = engine.encode(serde_json::to_vec(claims).unwrap());
    format!("{header}.{body}.")
}

#[tokio::test]
async fn every_endpoint_refuses_every_wrong_token_and_leaks_nothing() {
    let relay = Relay::sqlite().await;
    let a = pairing(&relay, "alice").await;
    let b = pairing(&relay, "bob").await;
    let call = relay
        .post_call(&a.mcp, a.session, b"ALICE-SECRET-ENVELOPE")
        .await;
    relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", a.session),
            Some(&a.owner),
            None,
        )
        .await;
    let answered = relay.post_call(&a.mcp, a.session, b"second").await;
    relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/claims", a.session),
            Some(&a.owner),
            None,
        )
        .await;
    relay
        .send(
            Method::PUT,
            format!("/v1/calls/{answered}/reply"),
            Some(&a.owner),
            Some(json!({"envelope": b64(b"ALICE-SECRET-REPLY")})),
        )
        .await;

    // Alice's MCP token for another pairing of hers.
    let (_, other_pair_mcp) = relay.mcp_token(&a.owner, id()).await;
    // A revoked MCP token and a signed-out owner token of Alice's.
    let (revoked_id, revoked_mcp) = relay.mcp_token(&a.owner, a.pair).await;
    relay
        .send(
            Method::DELETE,
            format!("/v1/mcp-tokens/{revoked_id}"),
            Some(&a.owner),
            None,
        )
        .await;
    let (_, signed_out) = relay.owner("alice-2").await;
    relay
        .send(Method::POST, "/v1/auth/signout", Some(&signed_out), None)
        .await;
    // Forged tokens naming Alice's real token row (sid) so only the defence under test refuses.
    let owner_claims: Claims = decode_unverified(&a.owner);
    let far = 4_102_444_800; // 2100-01-01
    let expired = forge(
        TEST_KEY,
        Algorithm::HS256,
        &Claims {
            exp: 1,
            ..owner_claims.clone()
        },
    );
    let wrong_key = forge(
        b"another-key-another-key-another-key!!",
        Algorithm::HS256,
        &Claims {
            exp: far,
            ..owner_claims.clone()
        },
    );
    let none = alg_none(&Claims {
        exp: far,
        ..owner_claims.clone()
    });
    let wrong_aud = forge(
        TEST_KEY,
        Algorithm::HS256,
        &claims_for(&owner_claims.sub, &owner_claims.sid, "someone-else", far),
    );
    let mcp_as_owner = forge(
        TEST_KEY,
        Algorithm::HS256,
        &Claims {
            aud: "sealpost-mcp".into(),
            pair_id: Some(a.pair.to_string()),
            ..owner_claims.clone()
        },
    );
    let hs512 = forge(TEST_KEY, Algorithm::HS512, &owner_claims);

    let s = a.session;
    let p = a.pair;
    let new_session = json!({"session_id": id(), "pair_id": id(), "hello": b64(b"x"), "ttl_s": 60});
    let new_call = json!({"call_id": id(), "envelope": b64(b"x"), "ttl_s": 60});
    let endpoints: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, "/v1/me".into(), None),
        (Method::POST, "/v1/auth/signin-links".into(), None),
        (Method::GET, "/v1/mcp-tokens".into(), None),
        (
            Method::POST,
            "/v1/mcp-tokens".into(),
            Some(json!({"label": "x", "pair_id": p})),
        ),
        (Method::DELETE, format!("/v1/mcp-tokens/{}", a.mcp_id), None),
        (Method::POST, "/v1/sessions".into(), Some(new_session)),
        (Method::GET, format!("/v1/pairings/{p}/session"), None),
        (
            Method::POST,
            format!("/v1/sessions/{s}/calls"),
            Some(new_call),
        ),
        (Method::POST, format!("/v1/sessions/{s}/claims"), None),
        (
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(json!({"envelope": b64(b"forged")})),
        ),
        (
            Method::POST,
            format!("/v1/calls/{call}/cancel"),
            Some(json!({"reason": "client_cancelled"})),
        ),
        (Method::GET, format!("/v1/calls/{answered}"), None),
        (Method::GET, format!("/v1/calls/{call}"), None),
        (Method::DELETE, format!("/v1/sessions/{s}"), None),
        (Method::POST, "/v1/auth/signout".into(), None),
    ];
    let bad_tokens: Vec<(&str, Option<&str>)> = vec![
        ("no token", None),
        ("revoked MCP token", Some(&revoked_mcp)),
        ("signed-out owner token", Some(&signed_out)),
        ("expired token", Some(&expired)),
        ("token signed with another key", Some(&wrong_key)),
        ("alg none", Some(&none)),
        ("HS512 token", Some(&hs512)),
        ("wrong audience", Some(&wrong_aud)),
        ("owner token dressed as an MCP token", Some(&mcp_as_owner)),
    ];
    for (method, path, body) in &endpoints {
        for (what, token) in &bad_tokens {
            let (status, answer) = relay.send(method.clone(), path, *token, body.clone()).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{what} on {method} {path}: {answer}"
            );
            assert_no_leak(&answer);
        }
        // Bob's tokens: Alice's resources do not exist for him (404, never 403), or the
        // endpoint is about Bob's own account and shows only Bob's data.
        for (what, token) in [
            ("another owner's token", &b.owner),
            ("another owner's MCP token", &b.mcp),
        ] {
            let (status, answer) = relay
                .send(method.clone(), path, Some(token), body.clone())
                .await;
            assert_no_leak(&answer);
            let names_alice = path.contains(&a.session.to_string())
                || path.contains(&a.pair.to_string())
                || path.contains(&call.to_string())
                || path.contains(&answered.to_string())
                || path.contains(&a.mcp_id.to_string());
            if names_alice {
                assert!(
                    matches!(status, StatusCode::NOT_FOUND | StatusCode::FORBIDDEN),
                    "{what} on {method} {path}: {status} {answer}"
                );
                if status == StatusCode::FORBIDDEN {
                    assert_eq!(
                        answer["error"]["code"], "wrong_token_kind",
                        "403 only for the token kind, never for ownership"
                    );
                }
            }
        }
    }
    // An MCP token of Alice's other pairing sees none of this pairing's session or calls.
    for (method, path) in [
        (Method::GET, format!("/v1/pairings/{p}/session")),
        (Method::GET, format!("/v1/calls/{call}")),
        (Method::GET, format!("/v1/calls/{answered}")),
    ] {
        let (status, answer) = relay
            .send(method.clone(), &path, Some(&other_pair_mcp), None)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}");
        assert_no_leak(&answer);
    }
    let (status, _) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{s}/calls"),
            Some(&other_pair_mcp),
            Some(json!({"call_id": id(), "envelope": "AA", "ttl_s": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = relay
        .send(
            Method::POST,
            format!("/v1/calls/{call}/cancel"),
            Some(&other_pair_mcp),
            Some(json!({"reason": "client_cancelled"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // An MCP token cannot claim, reply, create sessions or list tokens even for its own pairing.
    for (method, path) in [
        (Method::POST, format!("/v1/sessions/{s}/claims")),
        (Method::GET, "/v1/mcp-tokens".to_owned()),
        (Method::DELETE, format!("/v1/sessions/{s}")),
    ] {
        let (status, answer) = relay.send(method.clone(), &path, Some(&a.mcp), None).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (StatusCode::FORBIDDEN, Some("wrong_token_kind")),
            "{method} {path}"
        );
    }
    // And after all that, Alice's call is untouched.
    let (_, view) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&a.mcp), None)
        .await;
    assert_eq!(view["state"], "claimed");
}

fn assert_no_leak(answer: &Value) {
    let text = answer.to_string();
    for secret in [
        b64(b"ALICE-SECRET-ENVELOPE"),
        b64(b"ALICE-SECRET-REPLY"),
        b64(b"opaque hello bytes"),
    ] {
        assert!(!text.contains(&secret), "leaked: {text}");
    }
}

fn decode_unverified(token: &str) -> Claims {
    use base64::Engine as _;
    let body = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .unwrap(),
    )
    .unwrap()
}
