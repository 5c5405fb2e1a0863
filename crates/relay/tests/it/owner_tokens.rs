//! Owner sign-ins can be found and revoked from another device, cannot keep themselves alive
//! past their absolute lifetime, and a disabled owner can be enabled again (by the CLI).

use std::process::Command;

use reqwest::{Method, StatusCode};

use sealpost_testkit::TestDb;
use sealpost_testkit::{Relay, pairing};

#[tokio::test]
async fn an_owner_lists_their_sign_ins_and_signs_out_another_device() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;
    // A second device of the same owner, signed in through a link the first one made.
    let (status, link) = relay
        .send(Method::POST, "/v1/auth/signin-links", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{link}");
    let code = link["link"]
        .as_str()
        .unwrap()
        .split("#signin=")
        .nth(1)
        .unwrap();
    let (status, phone) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(serde_json::json!({ "code": code })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{phone}");
    let phone = phone["token"].as_str().unwrap().to_owned();

    let (status, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let tokens = list["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 2, "{list}");
    assert_eq!(tokens.iter().filter(|t| t["current"] == true).count(), 1);
    let other = tokens.iter().find(|t| t["current"] == false).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // An MCP token sees nothing here; the MCP token's id is not an owner token.
    let (status, _) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&p.mcp), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/owner-tokens/{}", p.mcp_id),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Another owner cannot revoke it (404, as if it did not exist).
    let bob = pairing(&relay, "bob").await;
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/owner-tokens/{other}"),
            Some(&bob.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/owner-tokens/{other}"),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay.send(Method::GET, "/v1/me", Some(&phone), None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the other device is signed out at once"
    );
    let (status, _) = relay
        .send(Method::GET, "/v1/me", Some(&p.owner), None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn use_renews_a_sign_in_only_up_to_its_absolute_lifetime() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.owner_token_ttl_s = 3_600;
        c.limits.owner_token_lifetime_s = 60;
    })
    .await;
    let (_, owner) = relay.owner("alice").await;
    let (_, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&owner), None)
        .await;
    let signed_in_at = list["tokens"][0]["created_at"].as_i64().unwrap();
    let (status, me) = relay.send(Method::GET, "/v1/me", Some(&owner), None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    let renewed = me["expires_at"].as_i64().unwrap();
    assert!(
        renewed <= signed_in_at + 60_000,
        "renewed to {renewed}, past the lifetime from {signed_in_at}"
    );
    let (_, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&owner), None)
        .await;
    assert!(list["tokens"][0]["expires_at"].as_i64().unwrap() <= signed_in_at + 60_000);
}

#[tokio::test]
async fn a_disabled_owner_is_enabled_again_by_the_cli_and_signs_in_afresh() {
    let db = TestDb::sqlite();
    let url = db.url.clone();
    let cli = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"))
            .args(args)
            .env("SEALPOST_DATABASE_URL", &url)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr),
        )
    };
    let (ok, out) = cli(&["owner", "add", "carol"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&["owner", "disable", "carol"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&["owner", "link", "carol"]);
    assert!(!ok, "a disabled owner gets no link: {out}");
    let (ok, out) = cli(&["owner", "enable", "carol"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&["owner", "enable", "nobody"]);
    assert!(!ok && out.contains("no owner named"), "{out}");
    let (ok, out) = cli(&["owner", "link", "carol"]);
    assert!(ok, "{out}");
    let code = out.split("#signin=").nth(1).unwrap().trim().to_owned();
    let relay = Relay::start(db, |_| {}).await;
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(serde_json::json!({ "code": code })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
