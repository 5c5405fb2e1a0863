//! The sweeper: bytes go at a call's expiry, rows after the grace; expired sessions end and
//! are named so their claimers can be woken.

use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_relay::store::{Inspect, LAPSED_SWEEP_FULL_EVERY_MS, StoreError};

use super::{HOUR, T0, world};

pub(super) async fn check_sweeper_drops_bytes_then_rows(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let answered = w.post(T0, 10_000).await;
    let pending = w.post(T0, 10_000).await;
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 1, 30_000)
        .await
        .unwrap();
    w.store
        .reply_call(w.tab, answered, b"reply".to_vec(), T0.saturating_add_ms(2))
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
    let stats = w
        .store
        .sweep(T0.saturating_add_ms(10_000), 60_000)
        .await
        .unwrap();
    assert!(
        stats.expired_calls >= 1 && stats.cleared_calls >= 1,
        "{stats:?}"
    );
    for call in [answered, pending] {
        let held = w.store.held_bytes(w.owner, call).await.unwrap().unwrap();
        assert!(!held.envelope && !held.reply, "no bytes kept past expiry");
    }
    assert_eq!(
        w.store
            .read_call(w.mcp, pending, T0.saturating_add_ms(10_000))
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Expired
    );
    w.store
        .sweep(T0.saturating_add_ms(70_000), 60_000)
        .await
        .unwrap();
    assert_eq!(
        w.store.held_bytes(w.owner, answered).await.unwrap(),
        None,
        "rows deleted after the grace"
    );
    assert_eq!(
        w.store
            .read_call(w.mcp, answered, T0.saturating_add_ms(70_000))
            .await
            .unwrap(),
        None
    );
}

pub(super) async fn check_the_sweeper_ends_expired_sessions_and_names_them(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let before = w
        .store
        .sweep(T0.saturating_add_ms(HOUR - 1), 60_000)
        .await
        .unwrap();
    assert!(before.ended.sessions.is_empty(), "{before:?}");
    let stats = w
        .store
        .sweep(T0.saturating_add_ms(HOUR), 60_000)
        .await
        .unwrap();
    assert_eq!(stats.ended_sessions, 1);
    assert_eq!(stats.ended.sessions, vec![(w.owner, w.session)]);
    let claim = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(HOUR), 1, 30_000)
        .await;
    assert!(matches!(claim, Err(StoreError::SessionEnded)), "{claim:?}");
    let again = w
        .store
        .sweep(T0.saturating_add_ms(HOUR + 1), 60_000)
        .await
        .unwrap();
    assert!(again.ended.sessions.is_empty(), "a session ends once");
}

pub(super) async fn check_every_sweep_expires_the_claims_whose_lease_lapsed_since(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let swept = |at: u64| {
        let store = w.store.clone();
        async move {
            let stats = store.sweep(T0.saturating_add_ms(at), HOUR).await.unwrap();
            stats.expired_calls
        }
    };
    assert_eq!(swept(1).await, 0, "a first sweep, with nothing to do");
    // Two claims, leased until 1,002 and 40,002; sweeps further apart than any overlap.
    let (early, late) = (w.post(T0, 120_000).await, w.post(T0, 120_000).await);
    for (at, lease) in [(2, 1_000), (2, 40_000)] {
        let got = w
            .store
            .claim_calls(w.tab, w.session, T0.saturating_add_ms(at), 1, lease)
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
    }
    let envelope_held = |call| {
        let store = w.store.clone();
        async move {
            let held = store.held_bytes(w.owner, call).await.unwrap().unwrap();
            held.envelope
        }
    };
    assert_eq!(swept(500).await, 0, "no lease has lapsed");
    assert_eq!(swept(25_000).await, 1, "the first lease lapsed");
    assert!(!envelope_held(early).await && envelope_held(late).await);
    assert_eq!(swept(60_000).await, 1, "the second lease lapsed since");
    assert!(
        !envelope_held(late).await,
        "a lapsed claim keeps no envelope"
    );
    let expired = w.store.count_calls_by_state().await.unwrap();
    assert!(expired.contains(&(CallState::Expired, 2)), "{expired:?}");
}

/// A replica whose clock lags by more than the sweeps' overlap writes a lease end older than
/// this process's window: a sweep soon after may miss it (PostgreSQL reads only the lease ends
/// since its last sweep), a sweep [`LAPSED_SWEEP_FULL_EVERY_MS`] after the last full read does
/// not.
pub(super) async fn check_a_lease_a_lagging_clock_wrote_expires_within_the_full_sweep_period(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let at = |ms: u64| T0.saturating_add_ms(ms);
    // This process's first sweep reads everything; the second only a window from 90 s.
    for now in [100_000, 101_000] {
        w.store.sweep(at(now), HOUR).await.unwrap();
    }
    let call = w.post(T0, HOUR).await;
    // The lagging replica, 100 s behind, claims it with a lease that ends at 1,002 ms.
    let got = w
        .store
        .claim_calls(w.tab, w.session, at(2), 1, 1_000)
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    w.store.sweep(at(102_000), HOUR).await.unwrap();
    w.store
        .sweep(at(100_000 + LAPSED_SWEEP_FULL_EVERY_MS), HOUR)
        .await
        .unwrap();
    let held = w.store.held_bytes(w.owner, call).await.unwrap().unwrap();
    assert!(!held.envelope, "the lapsed claim keeps its envelope");
    let states = w.store.count_calls_by_state().await.unwrap();
    assert_eq!(
        states,
        vec![(CallState::Expired, 1)],
        "the lapsed claim expired"
    );
}
