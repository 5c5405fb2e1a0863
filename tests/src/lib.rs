//! The harness the cross-process tests and the load benchmark share: a relay on loopback with
//! an owner signed in through the API, pairings with their MCP tokens, and typed requests for
//! the two ends of a session (the plugin with its MCP token, the tab with the owner token).

pub mod tab;

use std::path::PathBuf;

use anyhow::{Context, Result, ensure};
use reqwest::StatusCode;
use sealpost_protocol::api::{
    CallStatusResponse, ClaimResponse, CreateMcpTokenRequest, CreateMcpTokenResponse,
    CreateSessionRequest, LiveSessionResponse, PostCallRequest, ReplyRequest, SigninRequest,
    SigninResponse,
};
use sealpost_protocol::ids::{Base64Bytes, Id16};
use sealpost_relay::accounts::create_signin_link;
use sealpost_relay::app::{self, Running};
use sealpost_relay::config::Config;
use sealpost_relay::store::Store;
use sealpost_seal::PairingSecret;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The throwaway PostgreSQL cluster `cargo xtask test` starts. Without it a test fails loudly,
/// unless `SEALPOST_SKIP_POSTGRES=1` opts out; a skipped test says so (see [`report_skip`]).
pub fn postgres_url() -> Option<String> {
    match std::env::var("SEALPOST_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("SEALPOST_SKIP_POSTGRES").as_deref() == Ok("1") => {
            report_skip("postgres");
            None
        }
        _ => panic!(
            "SEALPOST_TEST_POSTGRES_URL is not set: run `cargo xtask test`, or set SEALPOST_SKIP_POSTGRES=1"
        ),
    }
}

/// Prints `SKIPPED: <what> <test>` straight to stderr (the test harness captures `eprintln!`,
/// not the stream itself) and appends the same line to the file `SEALPOST_SKIP_LOG` names, which
/// `cargo xtask test` counts.
pub fn report_skip(what: &str) {
    use std::io::Write as _;
    let thread = std::thread::current();
    let line = format!("SKIPPED: {what} {}\n", thread.name().unwrap_or("unnamed"));
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os("SEALPOST_SKIP_LOG") {
        // One write of one short line to a file opened for appending: lines from parallel
        // tests and processes do not interleave.
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open SEALPOST_SKIP_LOG");
        log.write_all(line.as_bytes())
            .expect("write SEALPOST_SKIP_LOG");
    }
}

pub fn random_id() -> Id16 {
    Id16(rand::random())
}

/// A fresh SQLite database file in its own folder, removed on drop.
#[derive(Debug)]
pub struct SqliteFile {
    pub dir: PathBuf,
}

impl SqliteFile {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("sealpost-e2e-{}", random_id()));
        std::fs::create_dir_all(&dir).expect("create a temporary folder");
        Self { dir }
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}/relay.db", self.dir.display())
    }

    /// Every file SQLite keeps for the database (main file, WAL, shared memory).
    pub fn files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.dir)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    }
}

impl Default for SqliteFile {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A relay on loopback and an owner signed in to it.
#[derive(Debug)]
pub struct LiveRelay {
    pub base: String,
    pub http: reqwest::Client,
    pub owner_token: String,
    running: Option<Running>,
}

/// One pairing: the secret both ends share, its routing handle, and the plugin's MCP token.
#[derive(Debug)]
pub struct Pairing {
    pub secret: PairingSecret,
    pub pair_id: Id16,
    pub mcp_token: String,
    /// The MCP token's id, for revoking it.
    pub token_id: Id16,
}

impl Pairing {
    /// The pairing code the web app would show for this pairing on the relay at `base`.
    pub fn code(&self, base: &str) -> String {
        let secret = PairingSecret::from_bytes(*self.secret.expose());
        let origin = sealpost_seal::RelayOrigin::parse(base).expect("a loopback relay");
        sealpost_seal::PairingCode::new(origin, self.mcp_token.clone(), secret)
            .expect("a loopback relay and a fresh token make a valid code")
            .encode()
            .to_string()
    }
}

impl LiveRelay {
    /// Starts a relay on `database_url` (limits tuned for load: no rate limit, many sessions),
    /// creates an owner and signs in through `/v1/auth/signin` with a one-time code.
    pub async fn start(database_url: &str) -> Result<Self> {
        Self::start_with(database_url, |_| {}).await
    }

    /// As [`LiveRelay::start`], with `limits` changed by `tune` after the load-test defaults.
    pub async fn start_with(
        database_url: &str,
        tune: impl FnOnce(&mut sealpost_relay::config::Limits),
    ) -> Result<Self> {
        let mut config = Config::new(database_url);
        config.listen = "127.0.0.1:0".parse()?;
        config.metrics_listen = Some("127.0.0.1:0".parse()?);
        config.limits.rate_per_token_per_s = 0;
        config.limits.rate_per_owner_per_s = 0;
        config.limits.max_bytes_held_per_owner = 0;
        config.limits.max_live_sessions_per_owner = 1_000;
        tune(&mut config.limits);
        let signin_code_ttl_s = config.limits.signin_code_ttl_s;
        let running = app::start(config).await?;
        let base = format!("http://{}", running.addr);
        let (owner_id, now) = (random_id(), sealpost_relay::clock::now_ms());
        let store = running.store.as_ref();
        store
            .create_owner(owner_id, &format!("e2e-{owner_id}"), now)
            .await?;
        let (link, _) = create_signin_link(store, &base, owner_id, signin_code_ttl_s).await?;
        let code = link
            .split("#signin=")
            .nth(1)
            .context("a sign-in link carries a code")?;
        let code = code.to_owned();
        let mut relay = Self::echo(base);
        relay.running = Some(running);
        let signin: SigninResponse = relay
            .post("/v1/auth/signin", None, &SigninRequest { code })
            .await?;
        relay.owner_token = signin.token;
        Ok(relay)
    }

    /// The Prometheus text from the relay's own metrics address (empty for an [`LiveRelay::echo`]
    /// client, which started no relay).
    pub async fn metrics(&self) -> Result<String> {
        let Some(addr) = self.running.as_ref().and_then(|r| r.metrics_addr) else {
            return Ok(String::new());
        };
        Ok(self
            .http
            .get(format!("http://{addr}/metrics"))
            .send()
            .await?
            .text()
            .await?)
    }

    /// A client for the same relay acting with `owner_token` (for a tab on its own thread).
    pub fn with_owner(mut self, owner_token: String) -> Self {
        self.owner_token = owner_token;
        self
    }

    /// The tab cancels a call it cannot answer.
    pub async fn cancel(
        &self,
        call_id: Id16,
        reason: sealpost_protocol::content::CancelReason,
    ) -> Result<()> {
        let request = self
            .http
            .post(format!("{}/v1/calls/{call_id}/cancel", self.base))
            .json(&sealpost_protocol::api::CancelRequest { reason });
        self.owner_no_content(request, "cancel").await
    }

    /// The tab ends its session (as on `pagehide`): its open calls are cancelled.
    pub async fn end_session(&self, session_id: Id16) -> Result<()> {
        let request = self
            .http
            .delete(format!("{}/v1/sessions/{session_id}", self.base));
        self.owner_no_content(request, "ending the session").await
    }

    /// The owner revokes an MCP token by its id.
    pub async fn revoke_mcp_token(&self, token_id: Id16) -> Result<()> {
        let request = self
            .http
            .delete(format!("{}/v1/mcp-tokens/{token_id}", self.base));
        self.owner_no_content(request, "revoking the token").await
    }

    /// Sends `request` with the owner token; it must answer 204.
    async fn owner_no_content(&self, request: reqwest::RequestBuilder, what: &str) -> Result<()> {
        let response = request.bearer_auth(&self.owner_token).send().await?;
        ensure!(
            response.status() == StatusCode::NO_CONTENT,
            "{what} answered {}",
            response.status()
        );
        Ok(())
    }

    /// A client for a server at `base` that only answers like a relay (the benchmark's echo).
    pub fn echo(base: String) -> Self {
        Self {
            base,
            http: reqwest::Client::new(),
            owner_token: String::new(),
            running: None,
        }
    }

    /// The relay's store, for setting up what the API cannot (owners).
    pub fn store(&self) -> &dyn Store {
        self.running
            .as_ref()
            .expect("a relay started by this harness")
            .store
            .as_ref()
    }

    /// Stops the relay: long-polls end, in-flight requests finish.
    pub async fn stop(self) -> Result<()> {
        match self.running {
            Some(running) => running.stop().await,
            None => Ok(()),
        }
    }

    /// A new pairing, as the web app makes one: a fresh secret and an MCP token for its pair_id.
    pub async fn pair(&self) -> Result<Pairing> {
        let secret = PairingSecret::generate(&mut rand::rng());
        let pair_id = Id16(secret.pair_id());
        let request = CreateMcpTokenRequest {
            label: "e2e".into(),
            pair_id,
            ttl_s: None,
        };
        let token: CreateMcpTokenResponse = self
            .post("/v1/mcp-tokens", Some(&self.owner_token), &request)
            .await?;
        Ok(Pairing {
            secret,
            pair_id,
            mcp_token: token.token,
            token_id: token.id,
        })
    }

    /// The tab publishes a session hello.
    pub async fn create_session(
        &self,
        session_id: Id16,
        pair_id: Id16,
        hello: Vec<u8>,
        ttl_s: u64,
    ) -> Result<()> {
        let request = CreateSessionRequest {
            session_id,
            pair_id,
            hello: Base64Bytes(hello),
            ttl_s,
        };
        let _: serde_json::Value = self
            .post("/v1/sessions", Some(&self.owner_token), &request)
            .await?;
        Ok(())
    }

    /// The plugin looks up its pairing's live session.
    pub async fn live_session(&self, pairing: &Pairing) -> Result<LiveSessionResponse> {
        self.get(
            &format!("/v1/pairings/{}/session", pairing.pair_id),
            &pairing.mcp_token,
        )
        .await
    }

    /// The plugin posts a sealed call.
    pub async fn post_call(
        &self,
        pairing: &Pairing,
        session_id: Id16,
        call_id: Id16,
        envelope: Vec<u8>,
    ) -> Result<()> {
        let request = PostCallRequest {
            call_id,
            envelope: Base64Bytes(envelope),
            ttl_s: 60,
        };
        let path = format!("/v1/sessions/{session_id}/calls");
        let _: serde_json::Value = self.post(&path, Some(&pairing.mcp_token), &request).await?;
        Ok(())
    }

    /// The tab claims up to `max` calls, waiting up to `wait_ms` for one.
    pub async fn claim(&self, session_id: Id16, max: u32, wait_ms: u64) -> Result<ClaimResponse> {
        let path = format!("/v1/sessions/{session_id}/claims?wait_ms={wait_ms}&max={max}");
        self.post(&path, Some(&self.owner_token), &serde_json::json!({}))
            .await
    }

    /// The tab posts a sealed reply.
    pub async fn reply(&self, call_id: Id16, envelope: Vec<u8>) -> Result<()> {
        let request = self
            .http
            .put(format!("{}/v1/calls/{call_id}/reply", self.base))
            .json(&ReplyRequest {
                envelope: Base64Bytes(envelope),
            });
        self.owner_no_content(request, "reply").await
    }

    /// The plugin reads its call, waiting up to `wait_ms` for an answer.
    pub async fn read_call(
        &self,
        pairing: &Pairing,
        call_id: Id16,
        wait_ms: u64,
    ) -> Result<CallStatusResponse> {
        self.get(
            &format!("/v1/calls/{call_id}?wait_ms={wait_ms}"),
            &pairing.mcp_token,
        )
        .await
    }

    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        token: Option<&str>,
        body: &B,
    ) -> Result<T> {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        decode(request.send().await?, path).await
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str, token: &str) -> Result<T> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await?;
        decode(response, path).await
    }
}

async fn decode<T: DeserializeOwned>(response: reqwest::Response, path: &str) -> Result<T> {
    let status = response.status();
    let text = response.text().await?;
    ensure!(status.is_success(), "{path} answered {status}: {text}");
    serde_json::from_str(&text).with_context(|| format!("{path} answered {text}"))
}
