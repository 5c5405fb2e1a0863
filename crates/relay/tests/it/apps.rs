//! Host apps on their own origins: a sign-in link made for a listed origin opens that app and
//! its sign-in is scoped to it; such a token makes links for its own app only, sees and
//! revokes its own app's tokens only, and cannot see, end or serve the relay's own app's
//! sessions, pairings and calls; a sign-in made from a link another sign-in minted ends when
//! that one does; the CLI's `owner add|link --app` prints the app's link and refuses an
//! origin the relay does not list.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_relay::origins::AppOrigin;
use sealpost_testkit::{Pairing, Relay, TestDb, b64, id, pairing};

use crate::catalog::update;

/// The listed app origins.
pub(crate) const A: &str = "https://a.example";
pub(crate) const B: &str = "http://localhost:5173";
/// An origin no relay here lists.
const ELSEWHERE: &str = "https://elsewhere.example";

pub(crate) fn listed(origins: &[&str]) -> Vec<AppOrigin> {
    origins
        .iter()
        .map(|origin| AppOrigin::parse(origin).unwrap())
        .collect()
}

/// The address people open the relay at (`--public-url`), which its links name.
const PUBLIC_URL: &str = "https://relay.example/";

async fn relay_listing_a_and_b() -> Relay {
    Relay::start(TestDb::sqlite(), |c| {
        c.app_origins = listed(&[A, B]);
        c.public_url = PUBLIC_URL.into();
    })
    .await
}

/// `POST /v1/auth/signin-links` with `token`, for `app` (none: no body, the relay's own app).
pub(crate) async fn link(relay: &Relay, token: &str, app: Option<&str>) -> (StatusCode, Value) {
    let body = app.map(|app| json!({ "app_origin": app }));
    relay
        .send(Method::POST, "/v1/auth/signin-links", Some(token), body)
        .await
}

/// The one-time code a sign-in link carries in its fragment.
pub(crate) fn code_of(link: &str) -> &str {
    let fragment = link.split_once('#').expect("a fragment").1;
    fragment
        .split('&')
        .find_map(|pair| pair.strip_prefix("signin="))
        .expect("a signin= in the fragment")
}

/// Signs in with the code of `link`; the sign-in's answer.
pub(crate) async fn sign_in(relay: &Relay, link: &str) -> Value {
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({ "code": code_of(link) })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// A sign-in of `p`'s owner to the host app `app`, through a link the relay's own app made.
pub(crate) async fn app_sign_in(relay: &Relay, p: &Pairing, app: &str) -> String {
    let (status, made) = link(relay, &p.owner, Some(app)).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let signed_in = sign_in(relay, made["link"].as_str().unwrap()).await;
    assert_eq!(signed_in["app_origin"], app);
    signed_in["token"].as_str().unwrap().to_owned()
}

/// Signs in with `code` from a page of `origin` (its `Origin` header); the answer.
async fn signin_from(relay: &Relay, origin: &str, code: &str) -> Value {
    let response = relay
        .client
        .post(format!("{}/v1/auth/signin", relay.base))
        .header("origin", origin)
        .json(&json!({ "code": code }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

fn assert_code(status: StatusCode, body: &Value, expected: StatusCode, code: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
}

#[tokio::test]
async fn a_link_the_relays_own_app_makes_for_a_listed_app_opens_it_and_scopes_the_sign_in() {
    let relay = relay_listing_a_and_b().await;
    let (_, owner) = relay.owner("alice").await;
    let (status, made) = link(&relay, &owner, Some("HTTPS://A.EXAMPLE:443/")).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let made = made["link"].as_str().unwrap();
    let code = code_of(made);
    assert_eq!(
        made,
        format!("{A}/#signin={code}&relay=https%3A%2F%2Frelay.example"),
        "the app's page, the code, and the relay to exchange it with"
    );
    // Sent from another listed app's page: the scope is the link's, never the request's Origin.
    let signed_in = signin_from(&relay, B, code).await;
    assert_eq!(signed_in["app_origin"], A, "{signed_in}");

    // A relay's-own-app link, signed in from a listed app's page, stays the relay's own.
    let (_, own) = link(&relay, &owner, None).await;
    let own = own["link"].as_str().unwrap();
    assert!(own.starts_with("https://relay.example/#signin="), "{own}");
    assert!(!own.contains("relay="), "{own}");
    let signed_in = signin_from(&relay, A, code_of(own)).await;
    assert!(signed_in.get("app_origin").is_none(), "{signed_in}");

    // The app's sign-in says its app, and renewing keeps it.
    let (_, made) = link(&relay, &owner, Some(A)).await;
    let signed_in = sign_in(&relay, made["link"].as_str().unwrap()).await;
    assert_eq!(signed_in["app_origin"], A);
    let token = signed_in["token"].as_str().unwrap();
    let (status, me) = relay.send(Method::GET, "/v1/me", Some(token), None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["app_origin"], A);
    let renewed = me["token"].as_str().unwrap();
    let (status, me) = relay.send(Method::GET, "/v1/me", Some(renewed), None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["app_origin"], A);
}

#[tokio::test]
async fn a_link_for_an_origin_the_relay_does_not_list_is_refused_and_says_which_it_lists() {
    let relay = relay_listing_a_and_b().await;
    let (_, owner) = relay.owner("alice").await;
    for asked in [ELSEWHERE, "https://a.example/path", "*", "a.example"] {
        let (status, body) = link(&relay, &owner, Some(asked)).await;
        assert_code(
            status,
            &body,
            StatusCode::BAD_REQUEST,
            "app_origin_not_listed",
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(A) && message.contains(B), "{message}");
    }
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin-links",
            Some(&owner),
            Some(json!({ "app": A })),
        )
        .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "bad_request");
    // A relay that lists none makes links for its own app alone.
    let bare = Relay::sqlite().await;
    let (_, owner) = bare.owner("bob").await;
    let (status, body) = link(&bare, &owner, Some(A)).await;
    assert_code(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        "app_origin_not_listed",
    );
}

#[tokio::test]
async fn an_app_token_makes_sign_in_links_for_its_own_app_only() {
    let relay = relay_listing_a_and_b().await;
    let p = pairing(&relay, "alice").await;
    let app = app_sign_in(&relay, &p, A).await;
    for other in [None, Some(B)] {
        let (status, body) = link(&relay, &app, other).await;
        assert_code(status, &body, StatusCode::FORBIDDEN, "outside_app_scope");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(A), "it names its own app: {message}");
    }
    let (status, made) = link(&relay, &app, Some(A)).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let chained = sign_in(&relay, made["link"].as_str().unwrap()).await;
    assert_eq!(chained["app_origin"], A, "a chained sign-in keeps the app");
    let (status, body) = link(&relay, &p.mcp, Some(A)).await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "wrong_token_kind");
}

/// The id of the sign-in `token` is (as its own listing marks it).
pub(crate) async fn own_sign_in_id(relay: &Relay, token: &str) -> String {
    let (status, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["current"] == true)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_app_token_sees_and_revokes_its_own_apps_tokens_and_the_relays_own_app_every_apps() {
    let relay = relay_listing_a_and_b().await;
    let p = pairing(&relay, "alice").await;
    let relay_sign_in = own_sign_in_id(&relay, &p.owner).await;
    let app = app_sign_in(&relay, &p, A).await;
    let app_sign_in_id = own_sign_in_id(&relay, &app).await;
    let other_app = app_sign_in(&relay, &p, B).await;
    let (app_mcp_id, app_mcp) = relay.mcp_token(&app, id()).await;

    let (_, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&app), None)
        .await;
    let tokens = list["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 1, "its own sign-in only: {list}");
    assert_eq!(tokens[0]["app_origin"], A);
    let (_, list) = relay
        .send(Method::GET, "/v1/mcp-tokens", Some(&app), None)
        .await;
    let tokens = list["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 1, "its own pairing's token only: {list}");
    assert_eq!(tokens[0]["id"], app_mcp_id.to_string());
    assert_eq!(tokens[0]["app_origin"], A);

    // Another app's and the relay's own app's tokens are not found, and keep working.
    let other_sign_in = own_sign_in_id(&relay, &other_app).await;
    for path in [
        format!("/v1/owner-tokens/{relay_sign_in}"),
        format!("/v1/owner-tokens/{other_sign_in}"),
        format!("/v1/mcp-tokens/{}", p.mcp_id),
    ] {
        let (status, body) = relay.send(Method::DELETE, &path, Some(&app), None).await;
        assert_code(status, &body, StatusCode::NOT_FOUND, "not_found");
    }
    for token in [&p.owner, &other_app] {
        let (status, _) = relay.send(Method::GET, "/v1/me", Some(token), None).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", p.pair),
            Some(&p.mcp),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "the relay's own plugin still works");

    // The relay's own app lists every app's, says which, and signs one out.
    let (_, list) = relay
        .send(Method::GET, "/v1/owner-tokens", Some(&p.owner), None)
        .await;
    let apps: Vec<&Value> = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["app_origin"])
        .collect();
    assert_eq!(apps.len(), 3, "{list}");
    assert!(
        apps.contains(&&json!(A)) && apps.contains(&&json!(B)),
        "{list}"
    );
    let (_, list) = relay
        .send(Method::GET, "/v1/mcp-tokens", Some(&p.owner), None)
        .await;
    assert_eq!(list["tokens"].as_array().unwrap().len(), 2, "{list}");
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/owner-tokens/{app_sign_in_id}"),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay.send(Method::GET, "/v1/me", Some(&app), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = relay
        .send(
            Method::DELETE,
            format!("/v1/mcp-tokens/{app_mcp_id}"),
            Some(&p.owner),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", id::<SessionId>()),
            Some(&app_mcp),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_app_token_cannot_see_end_or_serve_the_relays_own_apps_sessions_and_pairings() {
    let relay = relay_listing_a_and_b().await;
    let p = pairing(&relay, "alice").await;
    let app = app_sign_in(&relay, &p, A).await;
    let call = relay.post_call(&p.mcp, p.session, b"sealed call").await;

    let (status, body) = relay
        .send(
            Method::GET,
            format!("/v1/pairings/{}/session", p.pair),
            Some(&app),
            None,
        )
        .await;
    assert_code(status, &body, StatusCode::NOT_FOUND, "no_live_session");
    let refused = [
        (Method::DELETE, format!("/v1/sessions/{}", p.session), None),
        (
            Method::POST,
            format!("/v1/sessions/{}/claims?max=10", p.session),
            None,
        ),
        (
            Method::PUT,
            format!("/v1/sessions/{}/catalog", p.session),
            Some(json!({ "update": b64(&update(p.session, 1, 0)) })),
        ),
        (Method::GET, format!("/v1/calls/{call}"), None),
        (
            Method::POST,
            format!("/v1/calls/{call}/cancel"),
            Some(json!({ "reason": "client_cancelled" })),
        ),
    ];
    for (method, path, body) in refused.clone() {
        let (status, answer) = relay.send(method.clone(), &path, Some(&app), body).await;
        assert_code(status, &answer, StatusCode::NOT_FOUND, "not_found");
    }
    // The tab claims it; the app cannot answer it in its place.
    let claimed = relay
        .client_as(&p.owner)
        .claim(p.session, 10, 0)
        .await
        .unwrap();
    assert_eq!(claimed.calls.len(), 1);
    let (status, body) = relay
        .send(
            Method::PUT,
            format!("/v1/calls/{call}/reply"),
            Some(&app),
            Some(json!({ "envelope": b64(b"forged") })),
        )
        .await;
    assert_code(status, &body, StatusCode::NOT_FOUND, "not_found");

    // The app starts its own session of the same pairing id: the relay's own goes on, and
    // each side's plugin finds its own app's.
    let own = relay.session(&app, p.pair, b"the app's hello").await;
    let (_, app_mcp) = relay.mcp_token(&app, p.pair).await;
    let live = |token: &str| {
        let (relay, token) = (&relay, token.to_owned());
        async move {
            let (status, live) = relay
                .send(
                    Method::GET,
                    format!("/v1/pairings/{}/session", p.pair),
                    Some(&token),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{live}");
            live["session_id"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(live(&p.mcp).await, p.session.to_string());
    assert_eq!(live(&p.owner).await, p.session.to_string());
    assert_eq!(live(&app_mcp).await, own.to_string());
    assert_eq!(live(&app).await, own.to_string());
    let (status, body) = relay
        .send(
            Method::POST,
            format!("/v1/sessions/{}/calls", p.session),
            Some(&app_mcp),
            Some(json!({ "call_id": id::<CallId>(), "envelope": b64(b"x"), "ttl_s": 60 })),
        )
        .await;
    assert_code(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = relay
        .send(
            Method::DELETE,
            format!("/v1/sessions/{own}"),
            Some(&p.owner),
            None,
        )
        .await;
    assert_code(status, &body, StatusCode::NOT_FOUND, "not_found");
    // The relay's own tab answers, and its plugin reads the answer.
    relay
        .client_as(&p.owner)
        .reply(call, b"answer".to_vec())
        .await
        .unwrap();
    let read = relay.client_as(&p.mcp).read_call(call, 0).await.unwrap();
    assert_eq!(read.reply.map(|r| r.0), Some(b"answer".to_vec()));
}

#[tokio::test]
async fn a_sign_in_from_a_link_another_sign_in_made_ends_when_that_one_does() {
    // Two replicas on one database: one gives sign-ins a minute, the other thirty days. A
    // sign-in made on the first, minting links on the second, passes on its minute.
    let short = Relay::start(TestDb::sqlite(), |c| {
        c.app_origins = listed(&[A]);
        c.limits.owner_token_ttl_s = 3_600;
        c.limits.owner_token_lifetime_s = 60;
    })
    .await;
    let db = TestDb {
        url: short.db.as_ref().unwrap().url.clone(),
        dir: None,
    };
    let long = Relay::start(db, |c| c.app_origins = listed(&[A])).await;
    let (_, parent) = short.owner("alice").await;
    let (_, me) = short.send(Method::GET, "/v1/me", Some(&parent), None).await;
    let end = me["expires_at"].as_u64().unwrap();

    let (status, me) = long.send(Method::GET, "/v1/me", Some(&parent), None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(
        me["expires_at"].as_u64(),
        Some(end),
        "its own renewal keeps its end"
    );
    let mut token = parent;
    // The relay's own app's sign-in links its own app, whose sign-in links a host app, whose
    // sign-in links it again.
    for app in [None, Some(A), Some(A)] {
        let (status, made) = link(&long, &token, app).await;
        assert_eq!(status, StatusCode::OK, "{made}");
        assert!(
            made["expires_at"].as_u64().unwrap() <= end,
            "the link lapses with the sign-in that made it: {made}"
        );
        let chained = sign_in(&long, made["link"].as_str().unwrap()).await;
        assert_eq!(
            chained["expires_at"].as_u64(),
            Some(end),
            "a chained sign-in ends with the first: {chained}"
        );
        let chained = chained["token"].as_str().unwrap().to_owned();
        let (status, me) = long.send(Method::GET, "/v1/me", Some(&chained), None).await;
        assert_eq!(status, StatusCode::OK, "{me}");
        assert_eq!(
            me["expires_at"].as_u64(),
            Some(end),
            "renewal never passes it"
        );
        let renewed = me["token"].as_str().unwrap().to_owned();
        let (status, list) = long
            .send(Method::GET, "/v1/owner-tokens", Some(&renewed), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert!(
            list["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["expires_at"].as_u64().unwrap() <= end),
            "{list}"
        );
        // The next link is minted by the chained sign-in.
        token = renewed;
    }
    // A sign-in the second replica makes from the CLI's kind of link gets its own lifetime.
    let (_, fresh) = long.owner("bob").await;
    let (_, me) = long.send(Method::GET, "/v1/me", Some(&fresh), None).await;
    assert!(me["expires_at"].as_u64().unwrap() > end + 60_000, "{me}");
}

/// Runs the relay's CLI on `url` with the given app origins listed (none: the variable unset).
fn cli(url: &str, origins: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"));
    command
        .args(args)
        .env("SEALPOST_DATABASE_URL", url)
        .env("SEALPOST_PUBLIC_URL", "https://relay.example/")
        .env_remove("SEALPOST_APP_ORIGINS");
    if let Some(origins) = origins {
        command.env("SEALPOST_APP_ORIGINS", origins);
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The one link a CLI's output prints (on its own line).
fn printed_link(out: &str) -> &str {
    out.lines()
        .map(str::trim)
        .find(|line| line.contains("#signin="))
        .expect("a link")
}

#[tokio::test]
async fn the_cli_prints_a_link_to_a_listed_app_and_refuses_one_the_relay_does_not_list() {
    let db = TestDb::sqlite();
    let url = db.url.clone();
    let listing = Some("https://a.example, http://localhost:5173");
    let (ok, out, err) = cli(&url, listing, &["owner", "add", "carol", "--app", A]);
    assert!(ok, "{out}{err}");
    let added = printed_link(&out).to_owned();
    assert!(
        added.starts_with(&format!("{A}/#signin="))
            && added.ends_with("&relay=https%3A%2F%2Frelay.example"),
        "{out}"
    );
    assert!(out.contains(A), "{out}");
    let (ok, out, err) = cli(&url, listing, &["owner", "link", "carol", "--app", B]);
    assert!(ok, "{out}{err}");
    let linked = printed_link(&out).to_owned();
    assert!(linked.starts_with(&format!("{B}/#signin=")), "{out}");
    let (ok, out, err) = cli(&url, listing, &["owner", "link", "carol"]);
    assert!(ok, "{out}{err}");
    assert!(
        printed_link(&out).starts_with("https://relay.example/#signin="),
        "{out}"
    );

    for (origins, app) in [(listing, ELSEWHERE), (None, A), (listing, "not an origin")] {
        let (ok, out, err) = cli(&url, origins, &["owner", "link", "carol", "--app", app]);
        assert!(!ok, "{out}");
        assert!(
            err.contains("is not one of this relay's app origins")
                && err.contains("SEALPOST_APP_ORIGINS"),
            "{err}"
        );
        assert!(!out.contains("#signin="), "{out}");
    }
    let (ok, _, err) = cli(&url, listing, &["owner", "add", "dave", "--app", ELSEWHERE]);
    assert!(!ok && err.contains(ELSEWHERE), "{err}");
    let (_, owners, _) = cli(&url, None, &["owner", "list"]);
    assert!(
        !owners.contains("dave"),
        "a refused --app adds no owner: {owners}"
    );

    // The relay that serves lists A only: the sign-ins are scoped, and B's link no longer works.
    let relay = Relay::start(db, |c| c.app_origins = listed(&[A])).await;
    let signed_in = sign_in(&relay, &added).await;
    assert_eq!(signed_in["app_origin"], A);
    let (status, body) = relay
        .send(
            Method::POST,
            "/v1/auth/signin",
            None,
            Some(json!({ "code": code_of(&linked) })),
        )
        .await;
    assert_code(
        status,
        &body,
        StatusCode::UNAUTHORIZED,
        "invalid_signin_code",
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains(B),
        "{body}"
    );
}

#[test]
fn the_cli_refuses_a_database_that_is_not_there_rather_than_make_an_empty_one() {
    let path = std::env::temp_dir().join(format!("sealpost-missing-{}.db", std::process::id()));
    let (ok, _, err) = cli(
        &format!("sqlite://{}", path.display()),
        None,
        &["owner", "link", "owner"],
    );
    assert!(!ok);
    assert!(err.contains("no relay database at"), "{err}");
    assert!(err.contains("the same --database-url"), "{err}");
    assert!(!path.exists(), "no empty database was made");
}
