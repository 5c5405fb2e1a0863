//! Calls: posting, claiming, answering, reading and cancelling; at-most-once hand-out, leases,
//! delivery, and owner isolation.

use std::collections::HashSet;
use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_protocol::content::CancelReason;
use sealpost_relay::store::{Inspect, NewCall, StoreError};
use sealpost_time::UnixMillis;

use super::{HOUR, RELAY_APP, T0, new_session, token, world};
use sealpost_testkit::id;

pub(super) async fn check_concurrent_claimers_take_every_call_exactly_once(
    store: Arc<dyn Inspect>,
) {
    const CLAIMERS: usize = 8;
    const CALLS_PER_POSTER: usize = 2_000;
    let w = Arc::new(world(store).await);
    let posters: Vec<_> = (0..CLAIMERS)
        .map(|_| {
            let w = w.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..CALLS_PER_POSTER {
                    let call_id = id();
                    w.store
                        .post_call(
                            w.mcp,
                            &w.call(call_id, T0.saturating_add_ms(i as u64), HOUR),
                            None,
                        )
                        .await
                        .unwrap();
                    ids.push(call_id);
                }
                ids
            })
        })
        .collect();
    let total = CLAIMERS * CALLS_PER_POSTER;
    let claimed_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|n| {
            let (w, claimed_count) = (w.clone(), claimed_count.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                while claimed_count.load(std::sync::atomic::Ordering::SeqCst) < total {
                    let max = 1 + (n as u32 * 7) % 50;
                    let got = w
                        .store
                        .claim_calls(w.tab, w.session, T0.saturating_add_ms(10), max, 30_000)
                        .await
                        .unwrap();
                    assert!(got.len() <= max as usize, "a claim takes at most max calls");
                    claimed_count.fetch_add(got.len(), std::sync::atomic::Ordering::SeqCst);
                    for call in &got {
                        assert_eq!(
                            call.envelope,
                            call.call_id.as_bytes().to_vec(),
                            "a claim returns its own envelope"
                        );
                    }
                    mine.extend(got.into_iter().map(|c| c.call_id));
                    tokio::task::yield_now().await;
                }
                mine
            })
        })
        .collect();
    let mut posted = HashSet::new();
    for poster in posters {
        posted.extend(poster.await.unwrap());
    }
    let mut claimed = HashSet::new();
    let mut claims = 0;
    for claimer in claimers {
        for call_id in claimer.await.unwrap() {
            claims += 1;
            assert!(claimed.insert(call_id), "call {call_id} was claimed twice");
        }
    }
    assert_eq!(posted.len(), total);
    assert_eq!(claims, total, "every call claimed once");
    assert_eq!(claimed, posted, "no call lost");
}

pub(super) async fn check_a_lapsed_lease_expires_the_call_and_it_is_never_offered_again(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call = w.post(T0, 60_000).await;
    let got = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 10, 1_000)
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].lease_expires_at, T0.saturating_add_ms(1_001));
    let later = T0.saturating_add_ms(2_000);
    assert!(
        w.store
            .claim_calls(w.tab, w.session, later, 10, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    let view = w
        .store
        .read_call(w.mcp, call, later)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.state, CallState::Expired);
    let reply = w
        .store
        .reply_call(w.tab, call, b"late".to_vec(), later)
        .await;
    assert!(matches!(reply, Err(StoreError::LeaseExpired)), "{reply:?}");
    w.store.sweep(later, HOUR).await.unwrap();
    assert!(
        w.store
            .claim_calls(w.tab, w.session, later, 10, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        w.store
            .read_call(w.mcp, call, later)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Expired
    );
}

pub(super) async fn check_a_lease_never_runs_past_the_call_expiry(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    w.post(T0, 5_000).await;
    let got = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 10, 30_000)
        .await
        .unwrap();
    assert_eq!(got[0].lease_expires_at, T0.saturating_add_ms(5_000));
}

pub(super) async fn check_answer_then_read_marks_delivered_and_reads_repeat(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call = w.post(T0, 60_000).await;
    assert_eq!(
        w.store
            .read_call(w.mcp, call, T0)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Pending
    );
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 10, 30_000)
        .await
        .unwrap();
    assert_eq!(
        w.store
            .read_call(w.mcp, call, T0.saturating_add_ms(1))
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Claimed
    );
    w.store
        .reply_call(
            w.tab,
            call,
            b"sealed reply".to_vec(),
            T0.saturating_add_ms(2),
        )
        .await
        .unwrap();
    let first = w
        .store
        .read_call(w.mcp, call, T0.saturating_add_ms(3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.state, CallState::Answered);
    assert_eq!(first.reply.as_deref(), Some(&b"sealed reply"[..]));
    let again = w
        .store
        .read_call(w.mcp, call, T0.saturating_add_ms(4))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.state, CallState::Delivered);
    assert_eq!(
        again.reply, first.reply,
        "a repeated read returns the same reply"
    );
    let twice = w
        .store
        .reply_call(w.tab, call, b"again".to_vec(), T0.saturating_add_ms(5))
        .await;
    assert!(
        matches!(twice, Err(StoreError::WrongState(CallState::Delivered))),
        "{twice:?}"
    );
    let cancel = w
        .store
        .cancel_call(
            w.mcp,
            call,
            CancelReason::ClientCancelled,
            T0.saturating_add_ms(6),
        )
        .await;
    assert!(
        matches!(cancel, Err(StoreError::WrongState(CallState::Delivered))),
        "{cancel:?}"
    );
    // The mark may be written after the read, but it is written: the database itself comes to
    // count the call delivered (what another replica would read).
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let by_state = w.store.count_calls_by_state().await.unwrap();
            if by_state.contains(&(CallState::Delivered, 1)) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the delivery mark reached the database");
}

pub(super) async fn check_cancel_applies_to_open_calls_only(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let pending = w.post(T0, 60_000).await;
    w.store
        .cancel_call(
            w.mcp,
            pending,
            CancelReason::ClientCancelled,
            T0.saturating_add_ms(1),
        )
        .await
        .unwrap();
    let view = w
        .store
        .read_call(w.mcp, pending, T0.saturating_add_ms(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (view.state, view.reason),
        (CallState::Cancelled, Some(CancelReason::ClientCancelled))
    );
    assert!(
        w.store
            .claim_calls(w.tab, w.session, T0.saturating_add_ms(2), 10, 30_000)
            .await
            .unwrap()
            .is_empty()
    );

    let claimed = w.post(T0.saturating_add_ms(3), 60_000).await;
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(4), 10, 30_000)
        .await
        .unwrap();
    w.store
        .cancel_call(
            w.tab,
            claimed,
            CancelReason::Undecryptable,
            T0.saturating_add_ms(5),
        )
        .await
        .unwrap();
    let late = w
        .store
        .reply_call(w.tab, claimed, b"x".to_vec(), T0.saturating_add_ms(6))
        .await;
    assert!(
        matches!(late, Err(StoreError::WrongState(CallState::Cancelled))),
        "{late:?}"
    );

    let answered = w.post(T0.saturating_add_ms(7), 60_000).await;
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(8), 10, 30_000)
        .await
        .unwrap();
    w.store
        .reply_call(w.tab, answered, b"r".to_vec(), T0.saturating_add_ms(9))
        .await
        .unwrap();
    let cancel = w
        .store
        .cancel_call(
            w.mcp,
            answered,
            CancelReason::ClientCancelled,
            T0.saturating_add_ms(10),
        )
        .await;
    assert!(
        matches!(cancel, Err(StoreError::WrongState(CallState::Answered))),
        "{cancel:?}"
    );

    let other_pair = token(&*w.store, w.owner, Some(id())).await;
    let foreign = w
        .store
        .cancel_call(
            other_pair,
            w.post(T0.saturating_add_ms(11), 60_000).await,
            CancelReason::ClientCancelled,
            T0.saturating_add_ms(12),
        )
        .await;
    assert!(matches!(foreign, Err(StoreError::NotFound)), "{foreign:?}");
}

pub(super) async fn check_duplicate_ids_are_refused_per_owner(store: Arc<dyn Inspect>) {
    let w = world(store.clone()).await;
    let call_id = w.post(T0, 60_000).await;
    let again = w
        .store
        .post_call(
            w.mcp,
            &w.call(call_id, T0.saturating_add_ms(1), 60_000),
            None,
        )
        .await;
    assert!(matches!(again, Err(StoreError::Duplicate)), "{again:?}");
    let dup_session = w
        .store
        .create_session(
            &new_session(w.owner, w.session, id(), T0.saturating_add_ms(HOUR)),
            10,
        )
        .await;
    assert!(
        matches!(dup_session, Err(StoreError::Duplicate)),
        "{dup_session:?}"
    );
    // The failed duplicate left the first session live.
    assert!(
        w.store
            .live_session(w.owner, RELAY_APP, w.pair, T0)
            .await
            .unwrap()
            .is_some()
    );
    // Another owner may use the same call id: ids are unique per owner.
    let other = world(store).await;
    other
        .store
        .post_call(other.mcp, &other.call(call_id, T0, 60_000), None)
        .await
        .unwrap();
}

/// Times are `i64` in SQL and never negative as the relay writes them; a negative one (a row
/// written by hand) reads as the epoch, earlier than any `now`, so the call is expired.
pub(super) async fn check_a_negative_stored_expiry_reads_as_the_epoch_so_expired(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call = w.post(T0, HOUR).await;
    w.store
        .overwrite_call_expiry(w.owner, call, -1)
        .await
        .unwrap();
    let view = w.store.read_call(w.mcp, call, T0).await.unwrap().unwrap();
    assert_eq!(view.state, CallState::Expired);
    assert_eq!(view.expires_at, UnixMillis::EPOCH);
    assert_eq!(view.next_change_at, None);
    let claimed = w.store.claim_calls(w.tab, w.session, T0, 10, 30_000).await;
    assert!(claimed.unwrap().is_empty());
}

pub(super) async fn check_expired_calls_are_not_claimable_and_read_as_expired(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call = w.post(T0, 1_000).await;
    assert!(
        w.store
            .claim_calls(w.tab, w.session, T0.saturating_add_ms(1_000), 10, 30_000)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        w.store
            .read_call(w.mcp, call, T0.saturating_add_ms(1_000))
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Expired
    );
    // A call's expiry never outlives its session.
    let short = world(w.store.clone()).await;
    let s2 = id();
    short
        .store
        .create_session(
            &new_session(short.owner, s2, short.pair, T0.saturating_add_ms(500)),
            10,
        )
        .await
        .unwrap();
    let e = short
        .store
        .post_call(
            short.mcp,
            &NewCall {
                session_id: s2,
                ..short.call(id(), T0, 60_000)
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(e, T0.saturating_add_ms(500));
}

pub(super) async fn check_another_owner_sees_nothing(store: Arc<dyn Inspect>) {
    let w = world(store.clone()).await;
    let other = world(store).await;
    let call = w.post(T0, 60_000).await;
    assert_eq!(w.store.read_call(other.mcp, call, T0).await.unwrap(), None);
    assert!(matches!(
        w.store
            .cancel_call(other.tab, call, CancelReason::ClientCancelled, T0)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        w.store
            .claim_calls(other.tab, w.session, T0, 10, 1_000)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        w.store
            .end_session(other.owner, RELAY_APP, w.session, T0)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(
        w.store
            .live_session(other.owner, RELAY_APP, w.pair, T0)
            .await
            .unwrap()
            .is_none()
    );
    let post = w
        .store
        .post_call(
            other.mcp,
            &NewCall {
                owner_id: other.owner,
                ..w.call(id(), T0, 60_000)
            },
            None,
        )
        .await;
    assert!(matches!(post, Err(StoreError::NotFound)), "{post:?}");
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 10, 30_000)
        .await
        .unwrap();
    assert!(matches!(
        w.store
            .reply_call(other.tab, call, b"x".to_vec(), T0.saturating_add_ms(2))
            .await,
        Err(StoreError::NotFound)
    ));
}

pub(super) async fn check_a_claim_takes_at_most_max_calls_oldest_first(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let mut posted = Vec::new();
    for age in [5, 1, 4, 2, 3] {
        let call_id = id();
        w.store
            .post_call(
                w.mcp,
                &w.call(call_id, T0.saturating_add_ms(age), HOUR),
                None,
            )
            .await
            .unwrap();
        posted.push((age, call_id));
    }
    posted.sort();
    let oldest: Vec<_> = posted.iter().map(|(_, call_id)| *call_id).collect();
    let first = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(10), 2, 30_000)
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|c| c.call_id).collect::<Vec<_>>(),
        oldest[..2]
    );
    let rest = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(10), 50, 30_000)
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|c| c.call_id).collect::<Vec<_>>(),
        oldest[2..]
    );
}
