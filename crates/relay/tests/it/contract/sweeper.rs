//! The sweeper: bytes go at a call's expiry, rows after the grace.

use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_relay::store::Store;

use super::{T0, world};

pub(super) async fn check_sweeper_drops_bytes_then_rows(store: Arc<dyn Store>) {
    let w = world(store).await;
    let answered = w.post(T0, 10_000).await;
    let pending = w.post(T0, 10_000).await;
    w.store
        .claim_calls(w.owner, w.session, T0 + 1, 1, 30_000)
        .await
        .unwrap();
    w.store
        .reply_call(w.owner, answered, b"reply".to_vec(), T0 + 2)
        .await
        .unwrap();
    let held = w
        .store
        .held_bytes(w.owner, answered)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !held.envelope && held.reply,
        "an answered call keeps only its reply"
    );
    let stats = w.store.sweep(T0 + 10_000, 60_000).await.unwrap();
    assert!(
        stats.expired_calls >= 1 && stats.cleared_replies >= 1,
        "{stats:?}"
    );
    for call in [answered, pending] {
        let held = w.store.held_bytes(w.owner, call).await.unwrap().unwrap();
        assert!(!held.envelope && !held.reply, "no bytes kept past expiry");
    }
    assert_eq!(
        w.store
            .read_call(w.scope(), pending, T0 + 10_000)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Expired
    );
    w.store.sweep(T0 + 70_000, 60_000).await.unwrap();
    assert_eq!(
        w.store.held_bytes(w.owner, answered).await.unwrap(),
        None,
        "rows deleted after the grace"
    );
    assert_eq!(
        w.store
            .read_call(w.scope(), answered, T0 + 70_000)
            .await
            .unwrap(),
        None
    );
}
