//! A relay that lies: it streams an endless answer, or points the plugin at another session's
//! hello. Faults a real relay cannot be made to commit, so a small hostile server plays it;
//! and a session about to end, through the real relay and tab.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::response::IntoResponse as _;
use axum::routing::{get, post};
use sealpost_e2e::LiveRelay;
use sealpost_e2e::tab::Tab;
use sealpost_executor::{Executor, Workspace};
use sealpost_protocol::api::LiveSessionResponse;
use sealpost_protocol::ids::{Base64Bytes, SessionId};
use sealpost_seal::{PairingCode, PairingSecret, RelayOrigin};
use sealpost_testkit::{TestDb, id};
use sealpost_time::UnixMillis;
use serde_json::json;

use crate::{Mcp, config_dir, granted_executor, result_text, ten_minute_hello, write_pairing};

fn executor() -> Executor {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    granted_executor(workspace)
}

fn now_ms() -> UnixMillis {
    sealpost_relay::clock::now_ms()
}

/// Serves `session` on `listener` for every pairing, and counts the calls posted to it.
fn lying_relay(listener: tokio::net::TcpListener, session: Router) -> Arc<AtomicUsize> {
    let posts = Arc::new(AtomicUsize::new(0));
    let counter = posts.clone();
    let app = session.route(
        "/v1/sessions/{id}/calls",
        post(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { axum::http::StatusCode::NOT_FOUND }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    posts
}

async fn listener() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    (listener, origin)
}

fn pair_with(config: &std::path::Path, origin: &str) -> PairingSecret {
    let secret = PairingSecret::generate(&mut rand::rng());
    let copy = PairingSecret::from_bytes(*secret.expose());
    let origin = RelayOrigin::parse(origin).unwrap();
    let code = PairingCode::new(origin, "h.p.s", copy).unwrap().encode();
    write_pairing(config, &code);
    secret
}

#[tokio::test]
async fn an_endless_answer_is_cut_at_the_cap_before_it_is_parsed() {
    // A valid-looking answer carrying a 4 MiB hello, streamed without Content-Length: read
    // whole, it would parse, and only the hello check would refuse it.
    let hello = Base64Bytes(vec![1u8; 4 * 1024 * 1024]);
    let body = serde_json::to_vec(&LiveSessionResponse {
        session_id: id(),
        hello,
        expires_at: UnixMillis::EPOCH,
        claimer_seen_at: None,
        plugin_seen_at: None,
        catalog_update: None,
        now_ms: UnixMillis::EPOCH,
    })
    .unwrap();
    let body = Arc::new(body);
    let session = Router::new().route(
        "/v1/pairings/{id}/session",
        get(move || {
            let body = body.clone();
            async move {
                let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                    body.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
                Body::from_stream(futures_util::stream::iter(chunks))
            }
        }),
    );
    let (listener, origin) = listener().await;
    let posts = lying_relay(listener, session);
    let config = config_dir();
    pair_with(config.path(), &origin);
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("search_workspace", json!({"query": "x"})).await);
    assert!(is_error);
    assert!(text.contains("too large or malformed"), "{text}");
    assert_eq!(posts.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_hello_of_another_session_than_the_relay_names_is_not_sealed_to() {
    let config = config_dir();
    // The pairing is made first so the lying relay can serve a genuine hello for it.
    let (listener, origin) = listener().await;
    let secret = pair_with(config.path(), &origin);
    let now = now_ms();
    let hello = ten_minute_hello(&executor(), &secret, id(), now);
    let answer = LiveSessionResponse {
        session_id: id(), // not the hello's
        hello: Base64Bytes(hello),
        expires_at: now.saturating_add_ms(600_000),
        claimer_seen_at: Some(now),
        plugin_seen_at: None,
        catalog_update: None,
        now_ms: now,
    };
    let session = Router::new().route(
        "/v1/pairings/{id}/session",
        get(move || {
            let answer = answer.clone();
            async move { axum::Json(answer) }
        }),
    );
    let posts = lying_relay(listener, session);

    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("search_workspace", json!({"query": "x"})).await);
    assert!(is_error);
    assert!(text.contains("could not be trusted"), "{text}");
    assert_eq!(posts.load(Ordering::SeqCst), 0, "nothing was sealed to it");
}

#[tokio::test]
async fn a_call_never_outlives_its_session() {
    // A session with less time left than a call's usual expiry: the call is capped at the
    // session's end, so the tab runs it instead of cancelling it as past the session.
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let pairing = relay.pair().await.unwrap();
    let config = config_dir();
    write_pairing(config.path(), &pairing.code(&relay.base));
    let tab = Tab::start(&relay, &pairing.secret, 20, executor)
        .await
        .unwrap();
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("list_sources", json!({})).await);
    assert!(!is_error, "{text}");
    assert!(text.contains("notes"), "{text}");
    drop(tab);
    relay.stop().await;
}

#[tokio::test]
async fn a_hello_expired_by_the_plugins_clock_is_not_sealed_to_whatever_the_relay_says() {
    // A genuine hello from a year ago, replayed by a relay whose `now_ms` says it is still
    // that day: by the relay's clock the hello is live.
    let config = config_dir();
    let (listener, origin) = listener().await;
    let secret = pair_with(config.path(), &origin);
    let then = UnixMillis::from_ms(now_ms().as_ms() - 365 * 24 * 3600 * 1000);
    let session_id = id::<SessionId>();
    let hello = ten_minute_hello(&executor(), &secret, session_id, then);
    let answer = LiveSessionResponse {
        session_id,
        hello: Base64Bytes(hello),
        expires_at: then.saturating_add_ms(600_000),
        claimer_seen_at: Some(then.saturating_add_ms(60_000)),
        plugin_seen_at: None,
        catalog_update: None,
        now_ms: then.saturating_add_ms(60_000),
    };
    let session = Router::new().route(
        "/v1/pairings/{id}/session",
        get(move || {
            let answer = answer.clone();
            async move { axum::Json(answer) }
        }),
    );
    let posts = lying_relay(listener, session);

    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("list_sources", json!({})).await);
    assert!(is_error);
    assert!(text.contains("expired by this computer's clock"), "{text}");
    assert_eq!(posts.load(Ordering::SeqCst), 0, "nothing was sealed to it");
}

#[tokio::test]
async fn a_relay_at_its_connection_cap_is_waited_out_not_reported() {
    // The relay's canned answer past its connection cap: 503 with `Retry-After: 1`. Then it
    // answers (no session is live), and that is what the agent hears.
    let lookups = Arc::new(AtomicUsize::new(0));
    let seen = lookups.clone();
    let session = Router::new().route(
        "/v1/pairings/{id}/session",
        get(move || {
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first {
                    let busy = r#"{"error":{"code":"too_many_connections","message":"retry"}}"#;
                    (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        [(axum::http::header::RETRY_AFTER, "1")],
                        busy,
                    )
                        .into_response()
                } else {
                    axum::http::StatusCode::NOT_FOUND.into_response()
                }
            }
        }),
    );
    let (listener, origin) = listener().await;
    let posts = lying_relay(listener, session);
    let config = config_dir();
    pair_with(config.path(), &origin);
    let mut mcp = Mcp::spawn(config.path());
    mcp.initialize("2025-11-25").await;
    let (text, is_error) = result_text(&mcp.call("list_sources", json!({})).await);
    assert!(is_error);
    assert!(!text.contains("503"), "{text}");
    assert!(text.contains("start a session"), "{text}");
    assert_eq!(
        lookups.load(Ordering::SeqCst),
        2,
        "asked again after the wait"
    );
    assert_eq!(posts.load(Ordering::SeqCst), 0);
}

/// A live session whose tab withdrew `list_sources` (update 1), then `search_workspace` too
/// (update 2), served by a relay that hands back whichever update the test sets.
struct ReplayingRelay {
    config: tempfile::TempDir,
    answer: Arc<std::sync::Mutex<LiveSessionResponse>>,
    fetches: Arc<AtomicUsize>,
    first: Base64Bytes,
}

impl ReplayingRelay {
    async fn start() -> Self {
        let config = config_dir();
        let (listener, origin) = listener().await;
        let secret = pair_with(config.path(), &origin);
        let now = now_ms();
        let session_id = id::<SessionId>();
        let tab = executor();
        let hello = ten_minute_hello(&tab, &secret, session_id, now);
        let update = |withdrawn: &str| {
            tab.grants().update(|g| {
                g.tools.remove(withdrawn);
            });
            Base64Bytes(tab.catalog_update(now, &mut rand::rng()).unwrap().unwrap())
        };
        let (first, second) = (update("list_sources"), update("search_workspace"));
        let answer = Arc::new(std::sync::Mutex::new(LiveSessionResponse {
            session_id,
            hello: Base64Bytes(hello),
            expires_at: now.saturating_add_ms(600_000),
            claimer_seen_at: Some(now),
            plugin_seen_at: None,
            catalog_update: Some(second),
            now_ms: now,
        }));
        let (served, fetches) = (answer.clone(), Arc::new(AtomicUsize::new(0)));
        let counted = fetches.clone();
        let session = Router::new().route(
            "/v1/pairings/{id}/session",
            get(move || {
                // Counted before the answer is read, so a fetch counted after the replay is
                // set carries the replay.
                counted.fetch_add(1, Ordering::SeqCst);
                let answer = served.lock().unwrap().clone();
                async move { axum::Json(answer) }
            }),
        );
        lying_relay(listener, session);
        Self {
            config,
            answer,
            fetches,
            first,
        }
    }

    /// From now on the relay hands back `update` with the hello.
    fn serve(&self, update: Option<Base64Bytes>) {
        self.answer.lock().unwrap().catalog_update = update;
    }

    /// A `sealpost mcp` that has listed the newest tools: `tools/list` answers from the cache
    /// and refreshes it in the background, announcing the change with `list_changed`.
    async fn plugin_with_the_newest_list(&self) -> (Mcp, Vec<String>) {
        let mut mcp = Mcp::spawn(self.config.path());
        mcp.initialize("2025-11-25").await;
        mcp.request("tools/list", json!({})).await;
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while mcp.recv().await["method"] != "notifications/tools/list_changed" {}
        })
        .await
        .expect("list_changed after the first refresh");
        let newest = listed(&mut mcp).await;
        assert!(
            !newest.iter().any(|n| n == "search_workspace"),
            "{newest:?}"
        );
        assert!(
            newest.iter().any(|n| n == "get_source_excerpt"),
            "{newest:?}"
        );
        (mcp, newest)
    }

    /// Lists until `mcp` has asked the relay twice more: refreshes run one at a time, so the
    /// first of those answers has been opened and judged.
    async fn refresh_twice(&self, mcp: &mut Mcp) {
        let asked = self.fetches.load(Ordering::SeqCst);
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while self.fetches.load(Ordering::SeqCst) < asked + 2 {
                mcp.request("tools/list", json!({})).await;
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("two refreshes");
    }

    /// The tools `catalog.json` holds.
    fn cached(&self) -> Vec<String> {
        let pairing = sealpost::config::ConfigDir::at(self.config.path())
            .load_pairing()
            .unwrap();
        let cached = sealpost::config::ConfigDir::at(self.config.path())
            .load_catalog(pairing.secret().pair_id())
            .expect("a cached catalog");
        let mut names: Vec<String> = cached.tools.into_iter().map(|t| t.name).collect();
        names.extend(["sealpost_status".into(), "sealpost_call".into()]);
        names.sort();
        names
    }
}

async fn listed(mcp: &mut Mcp) -> Vec<String> {
    let listed = mcp.request("tools/list", json!({})).await;
    let mut names: Vec<String> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn an_older_catalog_update_replayed_by_the_relay_does_not_roll_the_tool_list_back() {
    let relay = ReplayingRelay::start().await;
    let (mut mcp, newest) = relay.plugin_with_the_newest_list().await;
    relay.serve(Some(relay.first.clone()));
    relay.refresh_twice(&mut mcp).await;
    assert_eq!(
        listed(&mut mcp).await,
        newest,
        "the older update is refused"
    );
}

#[tokio::test]
async fn a_new_plugin_process_does_not_take_an_update_older_than_one_its_pairing_opened() {
    // Another client, or the same one restarted, starts a second process of the pairing. The
    // relay replays update 1, then leaves the update out: neither brings `search_workspace`
    // back, in the new process, in the long-running one or in `catalog.json`.
    let relay = ReplayingRelay::start().await;
    let (mut running, newest) = relay.plugin_with_the_newest_list().await;
    for replay in [Some(relay.first.clone()), None] {
        relay.serve(replay.clone());
        let mut fresh = Mcp::spawn(relay.config.path());
        fresh.initialize("2025-11-25").await;
        relay.refresh_twice(&mut fresh).await;
        let named = if replay.is_some() { "older" } else { "absent" };
        assert_eq!(listed(&mut fresh).await, newest, "{named}: the new process");
        assert_eq!(relay.cached(), newest, "{named}: catalog.json");
        assert_eq!(
            listed(&mut running).await,
            newest,
            "{named}: the running one"
        );
        let (text, is_error) =
            result_text(&fresh.call("search_workspace", json!({"query": "x"})).await);
        assert!(is_error, "{named}: {text}");
        assert!(text.contains("does not offer"), "{named}: {text}");
        fresh.exit().await;
    }
}
