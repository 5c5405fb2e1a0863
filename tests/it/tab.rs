//! The native tab itself: a test that drops it must never wait on the relay, and tabs that
//! share a thread each serve their own session on their own channel. Tests run the
//! relay in-process on their own thread, and dropping the tab blocks that thread until the
//! tab's thread ends, so a tab still waiting for the relay's answer would wait forever.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sealpost_e2e::LiveRelay;
use sealpost_e2e::tab::{Tab, TabMode, TabThreads, TabTransport};
use sealpost_executor::{Executor, GrantsHandle, MemoryAuditLog, Workspace};
use sealpost_protocol::api::CallState;
use sealpost_testkit::{Relay, TestDb, id};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A hang guard, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(30);

/// A proxy to `upstream` that passes everything until a request names `/cancel` or `/reply`,
/// then holds that request (and its connection) forever: a relay that never answers the tab's
/// answer. Its address, and a signal raised once it holds one.
async fn proxy_holding_answers(upstream: String) -> (String, Arc<Notify>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let holding = Arc::new(Notify::new());
    let signal = holding.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let relay = TcpStream::connect(&upstream).await.unwrap();
            let signal = signal.clone();
            tokio::spawn(async move {
                let (mut from_client, mut to_relay) = (client, relay);
                let (mut relay_read, mut relay_write) = to_relay.split();
                let (mut client_read, mut client_write) = from_client.split();
                let upward = async {
                    let mut buffer = vec![0_u8; 64 * 1024];
                    loop {
                        let n = client_read.read(&mut buffer).await.unwrap_or(0);
                        let chunk = &buffer[..n];
                        if n == 0 {
                            return;
                        }
                        let answer = [b"/cancel ".as_slice(), b"/reply "]
                            .iter()
                            .any(|path| chunk.windows(path.len()).any(|w| w == *path));
                        if answer {
                            signal.notify_one();
                            std::future::pending::<()>().await;
                        }
                        relay_write.write_all(chunk).await.unwrap();
                    }
                };
                let downward = tokio::io::copy(&mut relay_read, &mut client_write);
                let _ = tokio::join!(upward, downward);
            });
        }
    });
    (base, holding)
}

/// A tab's executor with nothing in it and nothing granted.
fn nothing_granted() -> Executor {
    let grants = GrantsHandle::new(Default::default());
    Executor::new(
        Workspace::default(),
        grants,
        std::rc::Rc::new(MemoryAuditLog::new()),
    )
}

#[tokio::test]
async fn a_tab_dropped_while_its_answer_waits_on_the_relay_stops() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let pairing = relay.pair().await.unwrap();
    let (proxy, holding) = proxy_holding_answers(relay.base["http://".len()..].to_owned()).await;
    let proxied = Relay::connect(proxy, None, None);
    let through_proxy = LiveRelay {
        owner: proxied.client_as(relay.owner.token.clone()),
        relay: proxied,
    };
    let tab = Tab::start(&through_proxy, &pairing.secret, 600, nothing_granted)
        .await
        .unwrap();

    // An envelope the tab cannot open: it claims the call and posts a cancel, which the proxy
    // holds.
    let notified = holding.notified();
    relay
        .plugin(&pairing)
        .post_call(tab.session_id, id(), vec![7; 64])
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, notified)
        .await
        .expect("the tab answers the call");

    let dropped = tokio::task::spawn_blocking(move || drop(tab));
    tokio::time::timeout(PATIENCE, dropped)
        .await
        .expect("the tab stops while its answer waits")
        .unwrap();
    relay.stop().await;
}

#[tokio::test]
async fn tabs_sharing_a_thread_each_answer_on_their_own_channel_and_stop_when_dropped() {
    let relay = LiveRelay::start(TestDb::sqlite()).await;
    let threads = TabThreads::new(1);
    let mut tabs = Vec::new();
    let mut plugins = Vec::new();
    for _ in 0..2 {
        let pairing = relay.pair().await.unwrap();
        let tab = threads
            .start(
                &relay,
                &pairing.secret,
                600,
                TabMode::Serve,
                TabTransport::Channel,
                nothing_granted,
            )
            .await
            .unwrap();
        plugins.push(relay.plugin(&pairing));
        tabs.push(tab);
    }
    // An envelope neither tab can open: each claims its own call on its channel and cancels it.
    for (tab, plugin) in tabs.iter().zip(&plugins) {
        let call = id();
        let posted = tokio::time::timeout(
            PATIENCE,
            plugin.post_call_waiting(tab.session_id, call, vec![7; 64], 20_000),
        )
        .await
        .expect("the tab answered within the post's wait")
        .unwrap();
        let status = posted.status.expect("the post waited");
        assert_eq!(status.state, CallState::Cancelled, "{status:?}");
        assert_eq!(tab.log.cancelled.load(Ordering::SeqCst), 1);
    }
    let dropped = tokio::task::spawn_blocking(move || {
        drop(tabs);
        drop(threads);
    });
    tokio::time::timeout(PATIENCE, dropped)
        .await
        .expect("the tabs and their thread stop")
        .unwrap();
    relay.stop().await;
}
