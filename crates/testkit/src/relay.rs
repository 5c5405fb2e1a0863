//! A relay in-process on loopback with its own fresh database (or a client for one started
//! elsewhere), owners signed in through the API, and the JSON requests the relay's tests make.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::{CallId, OwnerId, PairId, SessionId, TokenId};
use sealpost_relay::app::{self, Running};
use sealpost_relay::config::{Config, Limits};
use sealpost_relay::store::Store;
use serde_json::{Value, json};

use crate::client::Client;
use crate::db::{TestDb, id};

/// The signing key the test relays use, so tests can forge tokens to check they are refused.
pub const TEST_KEY: &[u8] = b"sealpost-relay-test-signing-key-0123456789";

/// How long a test session lives, in seconds: longer than any test.
pub const SESSION_TTL_S: u64 = 3_600;

#[derive(Debug)]
pub struct Relay {
    pub base: String,
    /// `http://ADDR` of the relay's own metrics address, if it serves one.
    pub metrics_base: Option<String>,
    pub running: Option<Running>,
    pub client: reqwest::Client,
    /// The database, held so it lives as long as the relay; `None` for a relay that keeps
    /// nothing (the benchmark's echo).
    pub db: Option<TestDb>,
    /// What the relay was started with; `None` for a relay started elsewhere.
    config: Option<Config>,
}

/// A relay on a free loopback port with its metrics on another, signing with [`TEST_KEY`], and
/// no rate limits (the tests that are about them set their own).
pub fn test_config(url: &str) -> Config {
    let mut config = Config::new(url);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.signing_key = Some(TEST_KEY.to_vec());
    config.limits.rate_per_token_per_s = 0;
    config.limits.rate_per_owner_per_s = 0;
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    config
}

impl Relay {
    /// Starts a relay on `db` with [`test_config`] changed by `tweak`.
    pub async fn start(db: TestDb, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut config = test_config(&db.url);
        tweak(&mut config);
        let running = app::start(config.clone()).await.expect("start relay");
        Relay {
            base: format!("http://{}", running.addr),
            metrics_base: running.metrics_addr.map(|addr| format!("http://{addr}")),
            running: Some(running),
            client: reqwest::Client::new(),
            db: Some(db),
            config: Some(config),
        }
    }

    pub async fn sqlite() -> Self {
        Self::start(TestDb::sqlite(), |_| {}).await
    }

    /// A client for a relay this test did not start in-process (a child process on `db`, or a
    /// server that only answers like a relay, with no database).
    pub fn connect(base: String, metrics_base: Option<String>, db: Option<TestDb>) -> Self {
        Relay {
            base,
            metrics_base,
            running: None,
            client: reqwest::Client::new(),
            db,
            config: None,
        }
    }

    /// The relay's store, for setting up what the API cannot (owners).
    pub fn store(&self) -> &dyn Store {
        self.running
            .as_ref()
            .expect("a relay started in-process")
            .store
            .as_ref()
    }

    /// Stops the relay (long-polls end, in-flight requests finish) and hands back its
    /// database, to be read after.
    pub async fn stop(self) -> Option<TestDb> {
        if let Some(running) = self.running {
            running.stop().await.expect("stop relay");
        }
        self.db
    }

    /// Stops the relay and starts it again on the same address, database and configuration,
    /// as after an outage: every connection to it has closed.
    pub async fn restart(mut self) -> Self {
        let mut config = self.config.take().expect("a relay started in-process");
        let running = self.running.take().expect("a running relay");
        config.listen = running.addr;
        config.metrics_listen = running.metrics_addr;
        running.stop().await.expect("stop relay");
        let running = app::start(config.clone()).await.expect("restart relay");
        Relay {
            running: Some(running),
            config: Some(config),
            ..self
        }
    }

    /// How long a sign-in code lives on this relay: as configured, or the default for a relay
    /// started elsewhere (the tests start those with the default limits).
    fn signin_code_ttl_s(&self) -> u64 {
        self.config
            .as_ref()
            .map_or(Limits::default().signin_code_ttl_s, |c| {
                c.limits.signin_code_ttl_s
            })
    }

    /// A typed client acting with `token` (an owner's or an MCP token).
    pub fn client_as(&self, token: impl Into<String>) -> Client {
        Client::new(self.base.clone(), self.client.clone(), token.into())
    }

    pub async fn send(
        &self,
        method: Method,
        path: impl AsRef<str>,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .client
            .request(method, format!("{}{}", self.base, path.as_ref()));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Creates an owner and signs them in through `/v1/auth/signin` with a one-time code;
    /// returns (owner id, owner token). The owner is made in the relay's store, or, for a relay
    /// started elsewhere, in its database.
    pub async fn owner(&self, name: &str) -> (OwnerId, String) {
        let store: Arc<dyn Store> = match &self.running {
            Some(running) => running.store.clone(),
            None => {
                let db = self.db.as_ref().expect("a relay with a database");
                sealpost_relay::store::open(&db.url)
                    .await
                    .expect("open store")
            }
        };
        let owner_id = id();
        store
            .create_owner(owner_id, name, sealpost_relay::clock::now_ms())
            .await
            .unwrap();
        let (link, _) = sealpost_relay::accounts::create_signin_link(
            store.as_ref(),
            &self.base,
            owner_id,
            self.signin_code_ttl_s(),
        )
        .await
        .unwrap();
        let code = link.split("#signin=").nth(1).expect("a code in the link");
        let (status, body) = self
            .send(
                Method::POST,
                "/v1/auth/signin",
                None,
                Some(json!({"code": code})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        (owner_id, body["token"].as_str().unwrap().to_owned())
    }

    /// An MCP token for `pair`; returns (token id, token).
    pub async fn mcp_token(&self, owner_token: &str, pair: PairId) -> (TokenId, String) {
        let (status, body) = self
            .send(
                Method::POST,
                "/v1/mcp-tokens",
                Some(owner_token),
                Some(json!({"label": "test", "pair_id": pair})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["id"].as_str().unwrap().parse().unwrap(),
            body["token"].as_str().unwrap().to_owned(),
        )
    }

    /// A new session for `pair` publishing `hello`, for [`SESSION_TTL_S`]; its id.
    pub async fn session(&self, owner_token: &str, pair: PairId, hello: &[u8]) -> SessionId {
        let session = id();
        let (status, body) = self
            .send(
                Method::POST,
                "/v1/sessions",
                Some(owner_token),
                Some(json!({"session_id": session, "pair_id": pair, "hello": b64(hello), "ttl_s": SESSION_TTL_S})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        session
    }

    /// The Prometheus text from the relay's metrics address (a connection of its own, closed
    /// after, so it is not counted on the main address).
    pub async fn metrics(&self) -> String {
        let metrics_base = self.metrics_base.as_ref().expect("a metrics address");
        let response = self
            .client
            .get(format!("{metrics_base}/metrics"))
            .header("connection", "close")
            .send()
            .await
            .expect("metrics request");
        assert_eq!(response.status(), StatusCode::OK);
        response.text().await.expect("metrics body")
    }

    /// The value of the metric line that starts with `series` (a name with its labels).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let text = self.metrics().await;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Waits until the metric `series` reads `value`. This waits for a state, it does not
    /// guess a duration.
    pub async fn wait_for_metric(&self, series: &str, value: f64) {
        while self.metric(series).await.unwrap_or(0.0) != value {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Waits until at least `n` long-polls are registered (read from `/metrics`). This waits
    /// for a state, it does not guess a duration.
    pub async fn wait_for_waiters(&self, n: i64) {
        while self
            .metric("sealpost_longpoll_waiters")
            .await
            .unwrap_or(0.0)
            < n as f64
        {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Waits until the pairing's live session has been claimed from (`claimer_seen_at` is set),
    /// so a claim has made its first check of the store; or until no session is live. This
    /// waits for a state, it does not guess a duration.
    pub async fn wait_for_claimer(&self, token: &str, pair: PairId) {
        loop {
            let (status, live) = self
                .send(
                    Method::GET,
                    format!("/v1/pairings/{pair}/session"),
                    Some(token),
                    None,
                )
                .await;
            if status != StatusCode::OK || !live["claimer_seen_at"].is_null() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Posts a call carrying `envelope` to `session`; its new id.
    pub async fn post_call(&self, mcp_token: &str, session: SessionId, envelope: &[u8]) -> CallId {
        let call = id();
        let (status, body) = self
            .send(
                Method::POST,
                &format!("/v1/sessions/{session}/calls"),
                Some(mcp_token),
                Some(json!({"call_id": call, "envelope": b64(envelope), "ttl_s": 60})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        call
    }
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn unb64(value: &Value) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(value.as_str().expect("base64 string"))
        .expect("base64")
}

/// A full fixture: an owner with a session and an MCP token for its pairing.
#[derive(Debug)]
pub struct Pairing {
    pub owner: String,
    pub pair: PairId,
    pub mcp: String,
    pub mcp_id: TokenId,
    pub session: SessionId,
}

/// An owner named `name` signed in, an MCP token for a fresh pair id, and a session for it
/// with an opaque hello.
pub async fn pairing(relay: &Relay, name: &str) -> Pairing {
    let (_, owner) = relay.owner(name).await;
    let pair = id();
    let (mcp_id, mcp) = relay.mcp_token(&owner, pair).await;
    let session = relay.session(&owner, pair, b"opaque hello bytes").await;
    Pairing {
        owner,
        pair,
        mcp,
        mcp_id,
        session,
    }
}
