//! Sessions: replacing or ending one cancels only its open calls; per-session and per-owner
//! limits.

use std::collections::HashSet;
use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_protocol::content::CancelReason;
use sealpost_relay::store::{CatalogUpdate, Inspect, StoreError};

use super::{HOUR, RELAY_APP, T0, new_session, world};
use sealpost_testkit::id;

pub(super) async fn check_ending_a_session_cancels_only_open_calls(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let answered = w.post(T0, 60_000).await;
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 1, 30_000)
        .await
        .unwrap();
    w.store
        .reply_call(w.tab, answered, b"r".to_vec(), T0.saturating_add_ms(2))
        .await
        .unwrap();
    let claimed = w.post(T0.saturating_add_ms(3), 60_000).await;
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(4), 1, 30_000)
        .await
        .unwrap();
    let pending = w.post(T0.saturating_add_ms(5), 60_000).await;
    // A new session for the same pairing ends this one.
    let next = id();
    let ended = w
        .store
        .create_session(
            &new_session(w.owner, next, w.pair, T0.saturating_add_ms(HOUR)),
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        ended.sessions,
        vec![(w.owner, w.session)],
        "the replaced session is named, so its claimers can be woken"
    );
    assert_eq!(
        ended.cancelled_calls.into_iter().collect::<HashSet<_>>(),
        HashSet::from([(w.owner, claimed), (w.owner, pending)])
    );
    for call in [claimed, pending] {
        let view = w
            .store
            .read_call(w.mcp, call, T0.saturating_add_ms(6))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (view.state, view.reason),
            (CallState::Cancelled, Some(CancelReason::SessionEnded))
        );
    }
    assert_eq!(
        w.store
            .read_call(w.mcp, answered, T0.saturating_add_ms(6))
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Answered
    );
    assert_eq!(
        w.store
            .live_session(w.owner, RELAY_APP, w.pair, T0.saturating_add_ms(6))
            .await
            .unwrap()
            .unwrap()
            .session_id,
        next
    );
    let claim = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(7), 1, 30_000)
        .await;
    assert!(matches!(claim, Err(StoreError::SessionEnded)), "{claim:?}");
    let post = w
        .store
        .post_call(w.mcp, &w.call(id(), T0.saturating_add_ms(7), 60_000), None)
        .await;
    assert!(matches!(post, Err(StoreError::SessionEnded)), "{post:?}");
    let ended = w
        .store
        .end_session(w.owner, RELAY_APP, next, T0.saturating_add_ms(8))
        .await
        .unwrap();
    assert_eq!(ended.sessions, vec![(w.owner, next)]);
    assert!(ended.cancelled_calls.is_empty());
    assert!(
        w.store
            .live_session(w.owner, RELAY_APP, w.pair, T0.saturating_add_ms(8))
            .await
            .unwrap()
            .is_none()
    );
}

pub(super) async fn check_limits_on_pending_calls_and_live_sessions(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    for _ in 0..3 {
        w.store
            .post_call(w.mcp, &w.call(id(), T0, 60_000), Some(3))
            .await
            .unwrap();
    }
    let over = w
        .store
        .post_call(w.mcp, &w.call(id(), T0, 60_000), Some(3))
        .await;
    assert!(matches!(over, Err(StoreError::TooManyPending)), "{over:?}");
    // Live sessions: the world holds one; a limit of 2 allows one more pairing.
    w.store
        .create_session(
            &new_session(w.owner, id(), id(), T0.saturating_add_ms(HOUR)),
            2,
        )
        .await
        .unwrap();
    let third = w
        .store
        .create_session(
            &new_session(w.owner, id(), id(), T0.saturating_add_ms(HOUR)),
            2,
        )
        .await;
    assert!(
        matches!(third, Err(StoreError::TooManySessions)),
        "{third:?}"
    );
    // Replacing a pairing's own session is always allowed.
    w.store
        .create_session(
            &new_session(w.owner, id(), w.pair, T0.saturating_add_ms(HOUR)),
            2,
        )
        .await
        .unwrap();
}

/// Posts racing a session's end or replacement: every post the store acknowledged is either
/// cancelled `session_ended` with the session, or was refused. None is left pending in an
/// ended session, where its reader would wait until it expires.
pub(super) async fn check_posts_racing_a_session_end_leave_no_call_pending(
    store: Arc<dyn Inspect>,
) {
    const ROUNDS: usize = 12;
    const POSTERS: usize = 12;
    for round in 0..ROUNDS {
        let w = Arc::new(world(store.clone()).await);
        let mut posts = tokio::task::JoinSet::new();
        for i in 0..POSTERS {
            let w = w.clone();
            posts.spawn(async move {
                let call = id();
                let at = T0.saturating_add_ms(10 + i as u64);
                w.store
                    .post_call(w.mcp, &w.call(call, at, 60_000), Some(1000))
                    .await
                    .ok()
                    .map(|_| call)
            });
        }
        // Half the rounds end the session, half replace it with a new one for the pairing.
        let ender = {
            let w = w.clone();
            tokio::spawn(async move {
                if round % 2 == 0 {
                    w.store
                        .end_session(w.owner, RELAY_APP, w.session, T0.saturating_add_ms(15))
                        .await
                } else {
                    w.store
                        .create_session(
                            &new_session(w.owner, id(), w.pair, T0.saturating_add_ms(HOUR)),
                            10,
                        )
                        .await
                }
            })
        };
        let mut acknowledged = Vec::new();
        while let Some(posted) = posts.join_next().await {
            acknowledged.extend(posted.unwrap());
        }
        ender.await.unwrap().unwrap();
        for call in acknowledged {
            let view = w
                .store
                .read_call(w.mcp, call, T0.saturating_add_ms(20))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (view.state, view.reason),
                (CallState::Cancelled, Some(CancelReason::SessionEnded)),
                "round {round}: an acknowledged call outlived its session"
            );
        }
    }
}

pub(super) async fn check_the_plugin_lookup_is_recorded_once_a_second_on_live_sessions(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let seen = |at: u64| {
        let store = w.store.clone();
        let (owner, pair) = (w.owner, w.pair);
        async move {
            store
                .live_session(owner, RELAY_APP, pair, T0.saturating_add_ms(at))
                .await
                .unwrap()
                .expect("live")
                .plugin_seen_at
        }
    };
    assert_eq!(seen(1).await, None, "never looked up yet");

    let mark = |at: u64| {
        w.store
            .mark_plugin_seen(w.owner, w.session, T0.saturating_add_ms(at))
    };
    mark(10).await.unwrap();
    assert_eq!(seen(11).await, Some(T0.saturating_add_ms(10)));
    mark(500).await.unwrap();
    assert_eq!(
        seen(501).await,
        Some(T0.saturating_add_ms(10)),
        "within the second, the lookup writes nothing"
    );
    mark(1_010).await.unwrap();
    assert_eq!(seen(1_011).await, Some(T0.saturating_add_ms(1_010)));

    let next = id();
    w.store
        .create_session(
            &new_session(w.owner, next, w.pair, T0.saturating_add_ms(HOUR)),
            10,
        )
        .await
        .unwrap();
    assert_eq!(seen(1_100).await, None, "a new session starts unseen");
    w.store
        .mark_plugin_seen(w.owner, next, T0.saturating_add_ms(1_200))
        .await
        .unwrap();
    assert_eq!(
        seen(1_201).await,
        Some(T0.saturating_add_ms(1_200)),
        "each session is throttled on its own"
    );
}

pub(super) async fn check_replies_racing_a_session_end_each_get_an_answer(store: Arc<dyn Inspect>) {
    const ROUNDS: usize = 48;
    const CALLS: usize = 24;
    for round in 0..ROUNDS {
        let w = Arc::new(world(store.clone()).await);
        let mut calls = Vec::new();
        for i in 0..CALLS {
            calls.push(w.post(T0.saturating_add_ms(i as u64), 60_000).await);
        }
        let claimed = w
            .store
            .claim_calls(w.tab, w.session, T0.saturating_add_ms(100), 100, 30_000)
            .await
            .unwrap();
        assert_eq!(claimed.len(), CALLS);
        // The replies in reverse order of their ids, so a group that locked its calls in
        // arrival order would meet the session's end, which locks them in id order.
        calls.sort_by(|a, b| b.cmp(a));
        let mut replies = tokio::task::JoinSet::new();
        for call in calls {
            let w = w.clone();
            replies.spawn(async move {
                let at = T0.saturating_add_ms(200);
                w.store.reply_call(w.tab, call, b"r".to_vec(), at).await
            });
        }
        let ended = w
            .store
            .end_session(w.owner, RELAY_APP, w.session, T0.saturating_add_ms(200))
            .await;
        assert!(ended.is_ok(), "round {round}: the end failed: {ended:?}");
        while let Some(replied) = replies.join_next().await {
            match replied.unwrap() {
                Ok(()) | Err(StoreError::WrongState(CallState::Cancelled)) => {}
                other => panic!("round {round}: a reply: {other:?}"),
            }
        }
        // A deadlock whose victim was a group of replies ran them again alone: answered
        // right, but it still happened.
        assert_eq!(
            w.store.refused_groups(),
            0,
            "round {round}: a refused group"
        );
    }
}

pub(super) async fn check_a_catalog_update_is_kept_only_when_newer_and_goes_with_its_session(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let update = |seq: u64, at: u64, bytes: &[u8]| CatalogUpdate {
        owner_id: w.owner,
        app: RELAY_APP.clone(),
        session_id: w.session,
        seq,
        update: bytes.to_vec(),
        now: T0.saturating_add_ms(at),
    };
    let live = |at: u64| {
        let store = w.store.clone();
        let (owner, pair) = (w.owner, w.pair);
        async move {
            store
                .live_session(owner, RELAY_APP, pair, T0.saturating_add_ms(at))
                .await
                .unwrap()
        }
    };
    assert_eq!(live(1).await.unwrap().catalog_update, None);
    w.store
        .set_catalog_update(&update(2, 2, b"two"))
        .await
        .unwrap();
    assert_eq!(
        live(3).await.unwrap().catalog_update.as_deref(),
        Some(&b"two"[..])
    );
    for (seq, bytes) in [(2, &b"two again"[..]), (1, b"one")] {
        assert!(
            matches!(
                w.store.set_catalog_update(&update(seq, 4, bytes)).await,
                Err(StoreError::StaleCatalogUpdate)
            ),
            "number {seq} after 2"
        );
    }
    assert_eq!(
        live(5).await.unwrap().catalog_update.as_deref(),
        Some(&b"two"[..]),
        "an older or equal number changes nothing"
    );
    w.store
        .set_catalog_update(&update(3, 6, b"three"))
        .await
        .unwrap();
    assert_eq!(
        live(7).await.unwrap().catalog_update.as_deref(),
        Some(&b"three"[..])
    );

    // Another owner's session is not found; nor is an ended one, whose update is dropped.
    let mut foreign = update(9, 8, b"x");
    foreign.owner_id = id();
    assert!(matches!(
        w.store.set_catalog_update(&foreign).await,
        Err(StoreError::NotFound)
    ));
    w.store
        .end_session(w.owner, RELAY_APP, w.session, T0.saturating_add_ms(9))
        .await
        .unwrap();
    assert!(matches!(
        w.store.set_catalog_update(&update(10, 10, b"late")).await,
        Err(StoreError::NotFound)
    ));
    assert!(live(11).await.is_none());
    // A new session of the pairing starts from its own hello's catalog.
    let next = id();
    w.store
        .create_session(
            &new_session(w.owner, next, w.pair, T0.saturating_add_ms(HOUR)),
            10,
        )
        .await
        .unwrap();
    assert_eq!(live(12).await.unwrap().catalog_update, None);
}
