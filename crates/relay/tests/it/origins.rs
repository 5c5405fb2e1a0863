//! Apps on other origins (`--app-origin`): a listed origin's page gets CORS answers (no
//! credentials, `Retry-After` readable), any other origin's page is refused 403
//! `origin_not_allowed` at its preflight, on its requests and at the session channel's
//! upgrade, while the relay's own app and requests without an Origin are served as before; and
//! a relay that lists none sends no CORS header and checks no Origin.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self};

use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_relay::origins::AppOrigin;
use sealpost_testkit::{Relay, TempDir, TestDb, id, pairing};

use crate::api::series;
use crate::channel::{Socket, next, send};

/// The app origin the tests list.
const APP: &str = "https://app.example.com";
/// An origin no test lists.
const ELSEWHERE: &str = "https://elsewhere.example";

async fn relay_listing(origins: &[&str], public_url: Option<&str>) -> Relay {
    let origins: Vec<_> = origins
        .iter()
        .map(|origin| AppOrigin::parse(origin).unwrap())
        .collect();
    let public_url = public_url.map(str::to_owned);
    Relay::start(TestDb::sqlite(), move |config| {
        config.app_origins = origins;
        if let Some(url) = public_url {
            config.public_url = url;
        }
    })
    .await
}

/// Sends a request with `origin` (none: no Origin header), `token` and extra headers.
async fn request(
    relay: &Relay,
    method: Method,
    path: &str,
    origin: Option<&str>,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = relay
        .client
        .request(method, format!("{}{path}", relay.base));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A preflight for a reply, as a browser sends it before `PUT /v1/calls/{id}/reply`.
async fn preflight(relay: &Relay, origin: Option<&str>) -> reqwest::Response {
    let path = format!("/v1/calls/{}/reply", id::<CallId>());
    let asked = [
        ("access-control-request-method", "PUT"),
        (
            "access-control-request-headers",
            "authorization,content-type",
        ),
    ];
    request(relay, Method::OPTIONS, &path, origin, None, &asked).await
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
}

/// The lower-cased items of a comma-separated header.
fn items(response: &reqwest::Response, name: &str) -> Vec<String> {
    header(response, name)
        .unwrap_or_default()
        .split(',')
        .map(|item| item.trim().to_ascii_lowercase())
        .filter(|item| !item.is_empty())
        .collect()
}

/// Every `access-control-*` header of a response.
fn cors_headers(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .keys()
        .map(|name| name.as_str().to_owned())
        .filter(|name| name.starts_with("access-control-"))
        .collect()
}

async fn json(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

/// Asserts a refusal of `origin`: 403 `origin_not_allowed` naming it and the flag, unreadable
/// by its page (no CORS header), not to be kept.
async fn assert_refused(response: reqwest::Response, origin: &str) {
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(cors_headers(&response), Vec::<String>::new());
    assert_eq!(
        header(&response, "cache-control").as_deref(),
        Some("no-store")
    );
    let body = json(response).await;
    assert_eq!(body["error"]["code"], "origin_not_allowed", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(origin) && message.contains("--app-origin"),
        "{message}"
    );
}

#[tokio::test]
async fn a_listed_origin_gets_its_preflight_answered_and_can_read_answers_without_credentials() {
    let relay = relay_listing(&[APP, "http://localhost:5173"], None).await;
    let p = pairing(&relay, "alice").await;

    let answer = preflight(&relay, Some(APP)).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(
        header(&answer, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    let mut methods = items(&answer, "access-control-allow-methods");
    methods.sort();
    assert_eq!(methods, ["delete", "get", "post", "put"]);
    let mut allowed = items(&answer, "access-control-allow-headers");
    allowed.sort();
    assert_eq!(allowed, ["authorization", "content-type"]);
    assert_eq!(
        header(&answer, "access-control-max-age").as_deref(),
        Some("7200")
    );
    assert!(items(&answer, "vary").contains(&"origin".to_owned()));
    assert_eq!(header(&answer, "access-control-allow-credentials"), None);

    // The request itself: the origin echoed, `Retry-After` readable, no credentials.
    let me = request(
        &relay,
        Method::GET,
        "/v1/me",
        Some(APP),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(
        header(&me, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    assert!(items(&me, "access-control-expose-headers").contains(&"retry-after".to_owned()));
    assert_eq!(header(&me, "access-control-allow-credentials"), None);

    // An error is readable too, whoever answered it: the handler, or the router (405).
    let path = format!("/v1/sessions/{}/claims", id::<SessionId>());
    let missing = request(&relay, Method::POST, &path, Some(APP), Some(&p.owner), &[]).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header(&missing, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    let wrong = request(
        &relay,
        Method::PATCH,
        "/v1/me",
        Some(APP),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        header(&wrong, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    assert_eq!(json(wrong).await["error"]["code"], "method_not_allowed");

    // Each listed origin is answered as itself, never another's.
    let local = "http://localhost:5173";
    let me = request(
        &relay,
        Method::GET,
        "/v1/me",
        Some(local),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(
        header(&me, "access-control-allow-origin").as_deref(),
        Some(local)
    );
}

#[tokio::test]
async fn another_origin_is_refused_403_at_its_preflight_and_on_its_requests() {
    let relay = relay_listing(&[APP], None).await;
    let p = pairing(&relay, "alice").await;

    assert_refused(preflight(&relay, Some(ELSEWHERE)).await, ELSEWHERE).await;
    let me = request(
        &relay,
        Method::GET,
        "/v1/me",
        Some(ELSEWHERE),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_refused(me, ELSEWHERE).await;

    // Refused before anything runs: a call posted from there is not stored.
    let call = id::<CallId>();
    let post = relay
        .client
        .post(format!("{}/v1/sessions/{}/calls", relay.base, p.session))
        .header("origin", ELSEWHERE)
        .bearer_auth(&p.mcp)
        .json(&json!({"call_id": call, "envelope": "c2VhbGVk", "ttl_s": 60}))
        .send()
        .await
        .unwrap();
    assert_refused(post, ELSEWHERE).await;
    let read = request(
        &relay,
        Method::GET,
        &format!("/v1/calls/{call}"),
        None,
        Some(&p.mcp),
        &[],
    )
    .await;
    assert_eq!(read.status(), StatusCode::NOT_FOUND);

    // Exactly the listed origin: not another port or scheme of it, not `null`.
    for origin in [
        "https://app.example.com:8443",
        "http://app.example.com",
        "null",
    ] {
        let me = request(
            &relay,
            Method::GET,
            "/v1/me",
            Some(origin),
            Some(&p.owner),
            &[],
        )
        .await;
        assert_refused(me, origin).await;
    }
    // Timed and counted like any answer.
    let refused = ["method=\"GET\"", "route=\"/v1/me\"", "status=\"403\""];
    let text = relay.metrics().await;
    assert_eq!(
        series(
            &text,
            "sealpost_http_request_duration_seconds_count",
            &refused
        ),
        Some(4.0)
    );
}

#[tokio::test]
async fn the_relays_own_app_and_requests_without_an_origin_are_served_as_before() {
    let relay = relay_listing(&[APP], Some("https://relay.example.com")).await;
    let p = pairing(&relay, "alice").await;

    // The relay's own origin, as the page it serves writes it: its Host, and its public URL
    // (behind a proxy that passes on another Host).
    let own = relay.base.clone();
    for origin in [own.as_str(), "https://relay.example.com"] {
        let me = request(
            &relay,
            Method::GET,
            "/v1/me",
            Some(origin),
            Some(&p.owner),
            &[],
        )
        .await;
        assert_eq!(me.status(), StatusCode::OK, "{origin}");
        assert_eq!(cors_headers(&me), Vec::<String>::new(), "{origin}");
    }
    // Only as a browser writes an origin: this is none.
    let unwritten = "https://RELAY.example.com:443";
    let me = request(
        &relay,
        Method::GET,
        "/v1/me",
        Some(unwritten),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_refused(me, unwritten).await;
    // The same host on another port is another origin.
    let port: u16 = own.rsplit(':').next().unwrap().parse().unwrap();
    let next_port = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    let me = request(
        &relay,
        Method::GET,
        "/v1/me",
        Some(&next_port),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_refused(me, &next_port).await;

    // No Origin (the plugin, curl): as before, an OPTIONS included.
    let me = request(&relay, Method::GET, "/v1/me", None, Some(&p.owner), &[]).await;
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(cors_headers(&me), Vec::<String>::new());
    assert!(!items(&me, "vary").contains(&"origin".to_owned()));
    let options = preflight(&relay, None).await;
    assert_eq!(options.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(json(options).await["error"]["code"], "method_not_allowed");
}

/// Opens the session channel with `origin` (none: no Origin header); `Err`: the relay refused
/// the upgrade, with its status and JSON body.
async fn open_from(
    relay: &Relay,
    token: &str,
    origin: Option<&str>,
) -> Result<Socket, (u16, Value)> {
    let url = format!("{}/v1/channel", relay.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    let protocols = format!("sealpost.v1, sealpost.bearer.{token}");
    let headers = request.headers_mut();
    headers.insert(
        "sec-websocket-protocol",
        HeaderValue::from_str(&protocols).unwrap(),
    );
    if let Some(origin) = origin {
        headers.insert("origin", HeaderValue::from_str(origin).unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) => Err((
            response.status().as_u16(),
            serde_json::from_slice(&response.body().clone().unwrap_or_default()).unwrap(),
        )),
        Err(other) => panic!("the channel neither opened nor was refused: {other}"),
    }
}

#[tokio::test]
async fn the_channel_opens_for_a_listed_origin_and_the_relays_own_and_is_refused_for_another() {
    let relay = relay_listing(&[APP], None).await;
    let p = pairing(&relay, "alice").await;

    let (status, body) = open_from(&relay, &p.owner, Some(ELSEWHERE))
        .await
        .expect_err("the upgrade is refused");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("origin_not_allowed"))
    );
    assert_eq!(
        relay.metric("sealpost_channels_open").await.unwrap_or(0.0),
        0.0
    );

    for origin in [Some(APP), Some(relay.base.as_str()), None] {
        let mut channel = open_from(&relay, &p.owner, origin)
            .await
            .unwrap_or_else(|refused| panic!("{origin:?}: {refused:?}"));
        send(
            &mut channel,
            json!({"id": 1, "op": "claim", "session_id": p.session, "wait_ms": 0, "max": 1}),
        )
        .await;
        let claimed = next(&mut channel).await.unwrap();
        assert_eq!(claimed["status"], 200, "{origin:?}: {claimed}");
    }
}

#[tokio::test]
async fn without_a_list_no_origin_is_checked_and_no_cors_header_is_sent() {
    let relay = Relay::sqlite().await;
    let p = pairing(&relay, "alice").await;

    let me = request(
        &relay,
        Method::GET,
        "/v1/me",
        Some(ELSEWHERE),
        Some(&p.owner),
        &[],
    )
    .await;
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(cors_headers(&me), Vec::<String>::new());
    assert!(!items(&me, "vary").contains(&"origin".to_owned()));
    let answer = preflight(&relay, Some(ELSEWHERE)).await;
    assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(cors_headers(&answer), Vec::<String>::new());
    assert!(open_from(&relay, &p.owner, Some(ELSEWHERE)).await.is_ok());
}

/// A relay process, killed when dropped.
#[derive(Debug)]
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `sealpost-relay serve` on a fresh database with `args` and `env`; `Ok`: the address it
/// listens on, and the process, `Err`: what it printed as it exited.
fn serve(dir: &TempDir, args: &[&str], env: &[(&str, &str)]) -> Result<(String, Served), String> {
    let database = format!("sqlite://{}", dir.0.join("relay.db").display());
    let mut served = Served(
        Command::new(env!("CARGO_BIN_EXE_sealpost-relay"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "off",
            ])
            .args(args)
            .env_clear()
            .env("SEALPOST_DATABASE_URL", &database)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = BufReader::new(served.0.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let mut stderr = String::new();
            let mut pipe = served.0.stderr.take().unwrap();
            pipe.read_to_string(&mut stderr).unwrap();
            assert!(!served.0.wait().unwrap().success(), "{stderr}");
            return Err(stderr);
        }
        if let Some(addr) = line.trim().strip_prefix("sealpost-relay listening on ") {
            std::thread::spawn(move || stdout.read_to_end(&mut Vec::new()));
            return Ok((addr.to_owned(), served));
        }
    }
}

#[test]
fn a_bad_app_origin_keeps_the_relay_from_starting_and_says_why() {
    let dir = TempDir::new();
    for (value, problem) in [
        ("https://app.example.com/app", "it has a path (/app)"),
        ("*", "`*` is not an origin"),
        ("null", "`null` is the origin of sandboxed"),
        ("app.example.com", "does not start with http:// or https://"),
        ("https://user@app.example.com", "user name or password"),
        ("https://app.example.com?x", "it has a query"),
    ] {
        let said = serve(&dir, &["--app-origin", value], &[]).expect_err(value);
        assert!(
            said.contains(value) && said.contains(problem),
            "{value}: {said}"
        );
        assert!(
            said.contains("an app origin is http:// or https://"),
            "{said}"
        );
    }
    let listed = "https://app.example.com,https://app.example.com#top";
    let said = serve(&dir, &[], &[("SEALPOST_APP_ORIGINS", listed)]).expect_err(listed);
    assert!(said.contains("it has a fragment"), "{said}");
    assert!(
        !dir.0.join("relay.db").exists(),
        "refused before the database is opened"
    );
}

#[tokio::test]
async fn the_origins_listed_in_the_environment_are_the_ones_allowed() {
    let dir = TempDir::new();
    let listed = "https://app.example.com, http://localhost:5173";
    let (base, _served) = serve(&dir, &[], &[("SEALPOST_APP_ORIGINS", listed)]).unwrap();
    let relay = Relay::connect(base, None, None);
    for origin in [APP, "http://localhost:5173"] {
        let answer = preflight(&relay, Some(origin)).await;
        assert_eq!(answer.status(), StatusCode::OK, "{origin}");
        assert_eq!(
            header(&answer, "access-control-allow-origin").as_deref(),
            Some(origin)
        );
    }
    assert_refused(preflight(&relay, Some(ELSEWHERE)).await, ELSEWHERE).await;
}
