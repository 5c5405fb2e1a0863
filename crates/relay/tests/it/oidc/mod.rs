//! Team sign-in against a real OpenID provider: `oidc-provider` (web/tests/oidc/provider.mjs)
//! on loopback, driven as a browser would (cookies kept, redirects followed one by one), with a
//! relay whose callback is the provider's registered redirect URI.

mod attacks;
mod flow;
mod issuer;
mod process;
mod recheck;
mod replicas;
mod settings;

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use base64::Engine as _;
use reqwest::StatusCode;
use reqwest::header::LOCATION;
use sealpost_protocol::api::{SigninRequest, SigninResponse};
use sealpost_relay::config::Config;
use sealpost_relay::oidc::{OidcArgs, OidcConfig};
use sealpost_testkit::{Relay, TestDb};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

pub const CLIENT_ID: &str = "sealpost-relay";
pub const CLIENT_SECRET: &str = "relay-client-secret-for-tests";

/// The provider, a Node process that stops when this handle drops (its stdin closes).
pub struct TestProvider {
    pub issuer: String,
    control: reqwest::Client,
    child: Child,
    _stdin: ChildStdin,
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl TestProvider {
    /// Starts the provider with `redirect_uris` registered for the relay's client.
    pub fn start(redirect_uris: &[String]) -> Self {
        let web = workspace().join("web");
        assert!(
            web.join("node_modules/oidc-provider").is_dir(),
            "oidc-provider is missing from web/node_modules: run `npm ci --prefix web` \
             (cargo xtask test does)"
        );
        let mut command = Command::new("node");
        command
            .arg(web.join("tests/oidc/provider.mjs"))
            .args(["--client-secret", CLIENT_SECRET])
            .current_dir(&web)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for uri in redirect_uris {
            command.args(["--redirect-uri", uri]);
        }
        let mut child = command
            .spawn()
            .expect("node runs (apt-get install -y nodejs npm)");
        let stdin = child.stdin.take().expect("piped");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        stdout
            .read_line(&mut line)
            .expect("the provider prints its issuer");
        // Whatever else it prints is drained, so it never writes into a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let ready: Value = serde_json::from_str(&line).expect("a JSON line");
        Self {
            issuer: ready["issuer"].as_str().expect("issuer").to_owned(),
            control: reqwest::Client::new(),
            child,
            _stdin: stdin,
        }
    }

    /// The relay's flags for this provider, admitting `team.example`.
    pub fn args(&self) -> OidcArgs {
        OidcArgs {
            oidc_issuer: Some(self.issuer.clone()),
            oidc_client_id: Some(CLIENT_ID.into()),
            oidc_client_secret_file: Some(file_with(CLIENT_SECRET)),
            oidc_allowed_domains: vec!["team.example".into()],
            ..Default::default()
        }
    }

    /// The relay's configuration from [`Self::args`].
    pub fn config(&self) -> OidcConfig {
        self.args().into_config().unwrap().unwrap()
    }

    async fn control(&self, path: &str, body: Option<Value>) {
        let mut request = self.control.post(format!("{}/_test/{path}", self.issuer));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let status = request.send().await.unwrap().status();
        assert_eq!(status, StatusCode::NO_CONTENT, "/_test/{path}");
    }

    /// The next ID token the provider issues is replaced as `plan` says (see provider.mjs).
    pub async fn tamper(&self, plan: Value) {
        self.control("tamper", Some(plan)).await;
    }

    /// The person is removed at the provider.
    pub async fn remove(&self, user: &str) {
        self.control(&format!("remove?user={user}"), None).await;
    }

    /// The provider's token endpoint answers `ms` late from now on.
    pub async fn slow_down(&self, ms: u64) {
        self.control(&format!("slow?ms={ms}"), None).await;
    }

    /// The token endpoint answers `status` with `{"error": error}` from now on; `None` ends it.
    pub async fn fail_tokens(&self, failure: Option<(u16, &str)>) {
        let path = match failure {
            Some((status, error)) => format!("fail?status={status}&error={error}"),
            None => "fail".to_owned(),
        };
        self.control(&path, None).await;
    }

    /// The person's claims at the provider change as `claims` says.
    pub async fn set_claims(&self, user: &str, claims: Value) {
        self.control(&format!("claims?user={user}"), Some(claims))
            .await;
    }

    /// The provider signs with a new key from now on.
    pub async fn rotate_key(&self) {
        self.control("rotate", None).await;
    }
}

impl Drop for TestProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file holding `text`, for flags that read a file; removed when the process ends' temp
/// folder is cleaned, small and harmless until then.
fn file_with(text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "sealpost-oidc-{}-{}",
        std::process::id(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(text.as_bytes()))
    ));
    std::fs::write(&path, text).unwrap();
    path
}

/// A loopback address no one listens on now, for a relay whose callback must be registered
/// with the provider before it starts.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A relay on `db` at `addr` whose public URL is `public_url`, set up for `provider`.
pub async fn relay_for(
    provider: &TestProvider,
    db: TestDb,
    addr: std::net::SocketAddr,
    public_url: &str,
    tweak: impl FnOnce(&mut Config),
) -> Relay {
    let oidc = provider.config();
    let public_url = public_url.to_owned();
    Relay::start(db, move |config| {
        config.listen = addr;
        config.public_url = public_url;
        config.oidc = Some(oidc);
        tweak(config);
    })
    .await
}

/// A relay on `db` set up with `oidc`, wherever it listens.
pub async fn relay_for_config(oidc: OidcConfig, db: TestDb) -> Relay {
    Relay::start(db, move |config| config.oidc = Some(oidc)).await
}

/// A provider and a relay on SQLite, the relay's callback registered.
pub async fn provider_and_relay(tweak: impl FnOnce(&mut Config)) -> (TestProvider, Relay) {
    let addr = free_addr();
    let public_url = format!("http://{addr}");
    let provider = TestProvider::start(&[format!("{public_url}/auth/oidc/callback")]);
    let relay = relay_for(&provider, TestDb::sqlite(), addr, &public_url, tweak).await;
    (provider, relay)
}

/// A browser: cookies kept per host, each redirect seen.
pub struct Browser {
    http: reqwest::Client,
}

/// Where a sign-in ended: the app's page with its one-time code, or a page of the relay's.
#[derive(Debug)]
pub enum Landed {
    /// The app's page, `…#signin=CODE…`.
    App { url: String, code: String },
    /// A page that is not a redirect: its status and body.
    Page { status: StatusCode, body: String },
}

impl Landed {
    pub fn code(&self) -> &str {
        match self {
            Landed::App { code, .. } => code,
            Landed::Page { status, body } => panic!("no code: {status} {body}"),
        }
    }

    /// The relay's error code on a refusal page.
    pub fn error_code(&self) -> String {
        match self {
            Landed::Page { body, .. } => body
                .split("id=\"signin-error\">")
                .nth(1)
                .and_then(|rest| rest.split('<').next())
                .unwrap_or_else(|| panic!("no error code in {body}"))
                .to_owned(),
            Landed::App { url, .. } => panic!("signed in ({url}), not refused"),
        }
    }
}

impl Default for Browser {
    fn default() -> Self {
        Self::new()
    }
}

impl Browser {
    pub fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// GETs `url` and follows redirects until a page or the app's `#signin=` link. `reroute`
    /// may send a URL elsewhere (another replica) before it is requested.
    pub async fn follow(&self, url: &str, reroute: impl Fn(&str) -> String) -> Landed {
        let mut url = reroute(url);
        for _ in 0..20 {
            let response = self.http.get(&url).send().await.unwrap();
            let status = response.status();
            if status.is_redirection() {
                let location = response.headers()[LOCATION].to_str().unwrap().to_owned();
                let next = reqwest::Url::parse(&url).unwrap().join(&location).unwrap();
                if let Some(fragment) = next.fragment()
                    && let Some(code) = fragment
                        .split('&')
                        .find_map(|pair| pair.strip_prefix("signin="))
                {
                    return Landed::App {
                        url: next.to_string(),
                        code: code.to_owned(),
                    };
                }
                url = reroute(next.as_str());
                continue;
            }
            let body = response.text().await.unwrap();
            return Landed::Page { status, body };
        }
        panic!("too many redirects from {url}");
    }

    /// Submits the provider's own login form (`body`, the page at `page_url`) as `user`.
    pub async fn log_in(&self, page_url: &str, body: &str, user: &str) -> reqwest::Response {
        let action = body
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no login form in {body}"));
        let action = reqwest::Url::parse(page_url).unwrap().join(action).unwrap();
        self.http
            .post(action)
            .form(&[("prompt", "login"), ("login", user), ("password", "any")])
            .send()
            .await
            .unwrap()
    }

    /// The whole sign-in as a person does it: the app's start, the provider's login page as
    /// `user`, and back to the relay's callback and on. Returns where it landed.
    pub async fn sign_in(
        &self,
        start_url: &str,
        user: &str,
        reroute: impl Fn(&str) -> String + Copy,
    ) -> Landed {
        match self.to_callback(start_url, user, reroute).await {
            Ok(callback) => self.follow(&callback, reroute).await,
            Err(page) => page,
        }
    }

    /// The sign-in up to the provider's redirect back: the callback URL, not yet requested (or
    /// the page the start stopped at).
    pub async fn callback_url(&self, start_url: &str, user: &str) -> String {
        match self.to_callback(start_url, user, direct).await {
            Ok(callback) => callback,
            Err(page) => panic!("the sign-in stopped before the callback: {page:?}"),
        }
    }

    /// Starts a sign-in and, on the provider's login page, cancels it ("abort" in the
    /// provider's own interaction), following where the provider sends the browser.
    pub async fn cancel_at_provider(&self, start_url: &str) -> Landed {
        let mut url = start_url.to_owned();
        for _ in 0..20 {
            let response = self.http.get(&url).send().await.unwrap();
            if !response.status().is_redirection() {
                break;
            }
            let location = response.headers()[LOCATION].to_str().unwrap().to_owned();
            url = reqwest::Url::parse(&url)
                .unwrap()
                .join(&location)
                .unwrap()
                .to_string();
        }
        assert!(
            url.contains("/interaction/"),
            "not the provider's login page: {url}"
        );
        self.follow(&format!("{url}/abort"), direct).await
    }

    async fn to_callback(
        &self,
        start_url: &str,
        user: &str,
        reroute: impl Fn(&str) -> String + Copy,
    ) -> Result<String, Landed> {
        let mut url = reroute(start_url);
        let mut logged_in = false;
        for _ in 0..20 {
            if reqwest::Url::parse(&url).unwrap().path() == "/auth/oidc/callback" {
                return Ok(url);
            }
            let response = self.http.get(&url).send().await.unwrap();
            let mut response = if response.status().is_redirection() {
                response
            } else {
                let status = response.status();
                let body = response.text().await.unwrap();
                if logged_in || !body.contains("name=\"login\"") {
                    return Err(Landed::Page { status, body });
                }
                logged_in = true;
                self.log_in(&url, &body, user).await
            };
            assert!(
                response.status().is_redirection(),
                "{url}: {}",
                response.status()
            );
            let location = response.headers_mut()[LOCATION]
                .to_str()
                .unwrap()
                .to_owned();
            url = reroute(
                reqwest::Url::parse(&url)
                    .unwrap()
                    .join(&location)
                    .unwrap()
                    .as_str(),
            );
        }
        panic!("too many redirects before the callback");
    }
}

/// An app's PKCE pair: the verifier it keeps, the S256 challenge it sends.
pub fn pkce() -> (String, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).unwrap();
    let verifier = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// The relay's start URL for its own app with `challenge`.
pub fn start_url(relay: &Relay, challenge: &str) -> String {
    format!(
        "{}/auth/oidc/start?code_challenge={challenge}&code_challenge_method=S256",
        relay.base
    )
}

/// Exchanges a handed-back code with `verifier`.
pub async fn exchange(
    relay: &Relay,
    code: &str,
    verifier: Option<&str>,
) -> Result<SigninResponse, (StatusCode, Value)> {
    let response = relay
        .client
        .post(format!("{}/v1/auth/signin", relay.base))
        .json(&SigninRequest {
            code: code.to_owned(),
            code_verifier: verifier.map(str::to_owned),
        })
        .send()
        .await
        .unwrap();
    let status = response.status();
    if status == StatusCode::OK {
        Ok(response.json().await.unwrap())
    } else {
        Err((status, response.json().await.unwrap()))
    }
}

/// `user` signs in to the relay's own app through the provider, as a person does: the owner
/// token and who it is.
pub async fn sign_in_as(relay: &Relay, user: &str) -> SigninResponse {
    let (verifier, challenge) = pkce();
    let landed = Browser::new()
        .sign_in(&start_url(relay, &challenge), user, direct)
        .await;
    exchange(relay, landed.code(), Some(&verifier))
        .await
        .unwrap()
}

/// `GET /v1/me` with `token`: its status and body.
pub async fn me(relay: &Relay, token: &str) -> (StatusCode, Value) {
    let response = relay
        .client
        .get(format!("{}/v1/me", relay.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

/// No rerouting: every request goes where its URL says.
pub fn direct(url: &str) -> String {
    url.to_owned()
}
