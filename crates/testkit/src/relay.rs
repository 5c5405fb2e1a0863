//! An in-process relay on loopback with its own fresh database, and a small JSON client.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{Method, StatusCode};
use sealpost_protocol::ids::Id16;
use sealpost_relay::app::{self, Running};
use sealpost_relay::config::{Config, Limits};
use serde_json::{Value, json};

use crate::support::{TestDb, id};

/// The signing key the test relays use, so tests can forge tokens to check they are refused.
pub const TEST_KEY: &[u8] = b"sealpost-relay-test-signing-key-0123456789";

#[derive(Debug)]
pub struct Relay {
    pub base: String,
    /// `http://ADDR` of the relay's own metrics address.
    pub metrics_base: String,
    pub running: Option<Running>,
    pub client: reqwest::Client,
    pub _db: TestDb,
}

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
    pub async fn start(db: TestDb, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut config = test_config(&db.url);
        tweak(&mut config);
        let running = app::start(config).await.expect("start relay");
        Relay {
            base: format!("http://{}", running.addr),
            metrics_base: format!("http://{}", running.metrics_addr.expect("metrics address")),
            running: Some(running),
            client: reqwest::Client::new(),
            _db: db,
        }
    }

    pub async fn sqlite() -> Self {
        Self::start(TestDb::sqlite(), |_| {}).await
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

    /// Creates an owner and signs them in through the API; returns (owner id, owner token).
    pub async fn owner(&self, name: &str) -> (Id16, String) {
        let store = &self.running.as_ref().unwrap().store;
        let owner_id = id();
        store
            .create_owner(owner_id, name, sealpost_relay::clock::now_ms())
            .await
            .unwrap();
        let (link, _) = sealpost_relay::accounts::create_signin_link(
            store.as_ref(),
            &self.base,
            owner_id,
            Limits::default().signin_code_ttl_s,
        )
        .await
        .unwrap();
        let code = link.split("#signin=").nth(1).unwrap();
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

    pub async fn mcp_token(&self, owner_token: &str, pair: Id16) -> (Id16, String) {
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

    pub async fn session(&self, owner_token: &str, pair: Id16, hello: &[u8]) -> Id16 {
        let session = id();
        let (status, body) = self
            .send(
                Method::POST,
                "/v1/sessions",
                Some(owner_token),
                Some(json!({"session_id": session, "pair_id": pair, "hello": b64(hello), "ttl_s": 3600})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        session
    }

    /// The Prometheus text from the relay's metrics address (a connection of its own, closed
    /// after, so it is not counted on the main address).
    pub async fn metrics(&self) -> String {
        let response = self
            .client
            .get(format!("{}/metrics", self.metrics_base))
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
    pub async fn wait_for_claimer(&self, token: &str, pair: Id16) {
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

    pub async fn post_call(&self, mcp_token: &str, session: Id16, envelope: &[u8]) -> Id16 {
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
    pub pair: Id16,
    pub mcp: String,
    pub mcp_id: Id16,
    pub session: Id16,
}

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
