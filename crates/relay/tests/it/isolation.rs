//! Isolation matrix: every endpoint, called with every kind of wrong token, is refused and
//! leaks nothing (no hello, no envelope, no reply, no token list).

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::{CallId, PairId, SessionId};
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

    let (_, mine) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&a.owner), None)
        .await;
    let alice_sign_in = mine["tokens"][0]["id"].as_str().unwrap().to_owned();
    // An unused sign-in link of Alice's, which the link routes name.
    let (status, _) = relay
        .send(Method::POST, "/v1/auth/signin-links", Some(&a.owner), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, links) = relay
        .send(Method::GET, "/v1/signin-links", Some(&a.owner), None)
        .await;
    let alice_link = links["links"][0]["id"].as_str().unwrap().to_owned();
    let s = a.session;
    let p = a.pair;
    let endpoints = endpoints(&Alice {
        session: s.to_string(),
        pair: p.to_string(),
        mcp_id: a.mcp_id.to_string(),
        sign_in: alice_sign_in.clone(),
        link: alice_link.clone(),
        calls: [call.to_string(), answered.to_string()],
    });
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
    for (method, path, body, only) in &endpoints {
        // Alice's own token of the other kind, where the operation takes one kind: refused for
        // its kind, and nothing else is said.
        let other_kind = match only {
            Only::Owner => Some(&a.mcp),
            Only::Mcp => Some(&a.owner),
            Only::Either => None,
        };
        if let Some(token) = other_kind {
            let (status, answer) = relay
                .send(method.clone(), path, Some(token), body.clone())
                .await;
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (StatusCode::FORBIDDEN, Some("wrong_token_kind")),
                "the other kind of token on {method} {path}: {answer}"
            );
        }
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
                || path.contains(&a.mcp_id.to_string())
                || path.contains(&alice_sign_in)
                || path.contains(&alice_link);
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
            Some(json!({"call_id": id::<CallId>(), "envelope": "AA", "ttl_s": 5})),
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
    // And after all that, Alice's call is untouched.
    let (_, view) = relay
        .send(Method::GET, format!("/v1/calls/{call}"), Some(&a.mcp), None)
        .await;
    assert_eq!(view["state"], "claimed");
}

/// The kind of token an operation takes, as its documented 403 says.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Only {
    Owner,
    Mcp,
    Either,
}

/// Alice's resources, by what a path names.
struct Alice {
    session: String,
    pair: String,
    mcp_id: String,
    sign_in: String,
    link: String,
    calls: [String; 2],
}

/// Every operation the router serves that takes a bearer token, read from its own OpenAPI
/// document (`http::document()` is made from the router), as requests on Alice's resources:
/// an endpoint added to the router is in the matrix without anyone listing it here, and one
/// whose path or body this function cannot fill fails the test, naming itself. Signing out
/// comes last (Bob's try signs Bob out).
fn endpoints(alice: &Alice) -> Vec<(Method, String, Option<Value>, Only)> {
    // Tried by its own tests: the channel takes its token as a WebSocket subprotocol
    // (channel.rs, `the_channel_opens_only_for_a_live_owner_token`).
    const ELSEWHERE: &[&str] = &["GET /v1/channel"];
    // The routes that take no token, or one of their own (metrics), named so that a route
    // whose `security` is left out of its annotation is not skipped unseen.
    const OPEN: &[&str] = &[
        "GET /healthz",
        "GET /readyz",
        "GET /metrics",
        "GET /v1/openapi.json",
        "POST /v1/auth/signin",
        "GET /v1/auth/providers",
    ];
    // The routes that take an owner's or an MCP token alike; every other one documents the
    // kind it takes, so a 403 reworded cannot drop the check of the other kind unseen.
    const EITHER: &[&str] = &[
        "POST /v1/auth/signout",
        "GET /v1/calls/{call_id}",
        "POST /v1/calls/{call_id}/cancel",
        "GET /v1/pairings/{pair_id}/session",
    ];
    let document: Value =
        serde_json::from_str(sealpost_relay::http::document_json()).expect("the document is JSON");
    let mut endpoints = Vec::new();
    let mut skipped = Vec::new();
    for (template, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("operations") {
            let name = format!("{} {template}", method.to_uppercase());
            // A bearer token is required when every security alternative names it (the
            // metrics endpoint's is optional: it has a token and an address of its own).
            let alternatives = operation["security"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let needs_token = !alternatives.is_empty()
                && alternatives
                    .iter()
                    .all(|alternative| alternative.get("bearer").is_some());
            if !needs_token {
                assert!(
                    OPEN.contains(&name.as_str()),
                    "{name} takes no token: list it in OPEN, or give its annotation `security`"
                );
                continue;
            }
            if ELSEWHERE.contains(&name.as_str()) {
                skipped.push(name);
                continue;
            }
            let method: Method = method.to_uppercase().parse().expect("an HTTP method");
            let body = body_of(&name, alice, operation["requestBody"]["required"] == true);
            let refusal = operation["responses"]["403"]["description"]
                .as_str()
                .unwrap_or("");
            let only = if refusal.contains("`wrong_token_kind`: an MCP token") {
                Only::Owner
            } else if refusal.contains("`wrong_token_kind`: not an MCP token") {
                Only::Mcp
            } else {
                assert!(!refusal.contains("wrong_token_kind"), "{name}: {refusal}");
                Only::Either
            };
            assert_eq!(
                only == Only::Either,
                EITHER.contains(&name.as_str()),
                "{name}: its documented 403 ({refusal:?}) and EITHER disagree on the kind of token it takes"
            );
            for path in paths_of(template, alice) {
                endpoints.push((method.clone(), path, body.clone(), only));
            }
        }
    }
    assert_eq!(
        skipped.len(),
        ELSEWHERE.len(),
        "ELSEWHERE names a route the router lacks"
    );
    endpoints.sort_by_key(|(_, path, _, _)| path == "/v1/auth/signout");
    endpoints
}

/// The template's path on Alice's resources (a call's, on her claimed call and her answered
/// one).
fn paths_of(template: &str, alice: &Alice) -> Vec<String> {
    let calls: Vec<String> = if template.contains("{call_id}") {
        alice
            .calls
            .iter()
            .map(|call| template.replace("{call_id}", call))
            .collect()
    } else {
        vec![template.to_owned()]
    };
    calls
        .into_iter()
        .map(|path| {
            let id = match template {
                "/v1/owner-tokens/{id}" => &alice.sign_in,
                "/v1/mcp-tokens/{id}" => &alice.mcp_id,
                "/v1/signin-links/{id}" => &alice.link,
                _ => "{id}",
            };
            let path = path
                .replace("{session_id}", &alice.session)
                .replace("{pair_id}", &alice.pair)
                .replace("{id}", id);
            assert!(
                !path.contains('{'),
                "the matrix cannot fill {template}: add its parameter to paths_of"
            );
            path
        })
        .collect()
}

/// A body the endpoint would accept from its owner, so that what refuses a wrong token is the
/// token check and not the body's.
fn body_of(name: &str, alice: &Alice, required: bool) -> Option<Value> {
    let pair = &alice.pair;
    let body = match name {
        "POST /v1/mcp-tokens" => json!({"label": "x", "pair_id": pair}),
        "POST /v1/sessions" => {
            json!({"session_id": id::<SessionId>(), "pair_id": id::<PairId>(), "hello": b64(b"x"), "ttl_s": 60})
        }
        "POST /v1/sessions/{session_id}/calls" => {
            json!({"call_id": id::<CallId>(), "envelope": b64(b"x"), "ttl_s": 60})
        }
        "PUT /v1/sessions/{session_id}/catalog" => {
            let session = alice.session.parse().expect("a session id");
            json!({"update": b64(&crate::catalog::update(session, 1, 0))})
        }
        "PUT /v1/calls/{call_id}/reply" => json!({"envelope": b64(b"forged")}),
        "POST /v1/calls/{call_id}/cancel" => json!({"reason": "client_cancelled"}),
        _ if required => panic!("{name} takes a body: give the matrix one in body_of"),
        _ => return None,
    };
    Some(body)
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
