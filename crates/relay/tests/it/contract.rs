//! The store contract: every property here holds on SQLite and on PostgreSQL alike.
//! Each `check_*` function states one property; the macro at the bottom runs it on both.

use std::collections::HashSet;
use std::sync::Arc;

use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::Id16;
use sealpost_relay::store::{NewCall, NewSession, Scope, Store, StoreError, TokenRow};

use crate::support::id;

const T0: i64 = 1_700_000_000_000;
const HOUR: i64 = 3_600_000;

struct World {
    store: Arc<dyn Store>,
    owner: Id16,
    session: Id16,
    pair: Id16,
}

async fn world(store: Arc<dyn Store>) -> World {
    let owner = id();
    store
        .create_owner(owner, &format!("owner-{owner}"), T0)
        .await
        .unwrap();
    let (session, pair) = (id(), id());
    store
        .create_session(&new_session(owner, session, pair, T0 + HOUR), 10)
        .await
        .unwrap();
    World {
        store,
        owner,
        session,
        pair,
    }
}

fn new_session(owner: Id16, session: Id16, pair: Id16, expires_at: i64) -> NewSession {
    NewSession {
        owner_id: owner,
        session_id: session,
        pair_id: pair,
        hello: b"hello".to_vec(),
        created_at: T0,
        expires_at,
    }
}

impl World {
    fn call(&self, call_id: Id16, at: i64, ttl: i64) -> NewCall {
        NewCall {
            owner_id: self.owner,
            session_id: self.session,
            call_id,
            envelope: call_id.0.to_vec(),
            created_at: at,
            expires_at: at + ttl,
        }
    }

    async fn post(&self, at: i64, ttl: i64) -> Id16 {
        let call_id = id();
        self.store
            .post_call(&self.call(call_id, at, ttl), Some(self.pair), Some(1000))
            .await
            .unwrap();
        call_id
    }

    fn scope(&self) -> Scope {
        Scope {
            owner_id: self.owner,
            pair_id: Some(self.pair),
        }
    }
}

async fn check_concurrent_claimers_take_every_call_exactly_once(store: Arc<dyn Store>) {
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
                        .post_call(&w.call(call_id, T0 + i as i64, HOUR), None, None)
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
                        .claim_calls(w.owner, w.session, T0 + 10, max, 30_000)
                        .await
                        .unwrap();
                    claimed_count.fetch_add(got.len(), std::sync::atomic::Ordering::SeqCst);
                    for call in &got {
                        assert_eq!(
                            call.envelope,
                            call.call_id.0.to_vec(),
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

async fn check_a_lapsed_lease_expires_the_call_and_it_is_never_offered_again(
    store: Arc<dyn Store>,
) {
    let w = world(store).await;
    let call = w.post(T0, 60_000).await;
    let got = w
        .store
        .claim_calls(w.owner, w.session, T0 + 1, 10, 1_000)
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].lease_expires_at, T0 + 1_001);
    let later = T0 + 2_000;
    assert!(
        w.store
            .claim_calls(w.owner, w.session, later, 10, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    let view = w
        .store
        .read_call(w.scope(), call, later)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.state, CallState::Expired);
    let reply = w
        .store
        .reply_call(w.owner, call, b"late".to_vec(), later)
        .await;
    assert!(matches!(reply, Err(StoreError::LeaseExpired)), "{reply:?}");
    w.store.sweep(later, HOUR).await.unwrap();
    assert!(
        w.store
            .claim_calls(w.owner, w.session, later, 10, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        w.store
            .read_call(w.scope(), call, later)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Expired
    );
}

async fn check_a_lease_never_runs_past_the_call_expiry(store: Arc<dyn Store>) {
    let w = world(store).await;
    w.post(T0, 5_000).await;
    let got = w
        .store
        .claim_calls(w.owner, w.session, T0 + 1, 10, 30_000)
        .await
        .unwrap();
    assert_eq!(got[0].lease_expires_at, T0 + 5_000);
}

async fn check_answer_then_read_marks_delivered_and_reads_repeat(store: Arc<dyn Store>) {
    let w = world(store).await;
    let call = w.post(T0, 60_000).await;
    assert_eq!(
        w.store
            .read_call(w.scope(), call, T0)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Pending
    );
    w.store
        .claim_calls(w.owner, w.session, T0 + 1, 10, 30_000)
        .await
        .unwrap();
    assert_eq!(
        w.store
            .read_call(w.scope(), call, T0 + 1)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Claimed
    );
    w.store
        .reply_call(w.owner, call, b"sealed reply".to_vec(), T0 + 2)
        .await
        .unwrap();
    let first = w
        .store
        .read_call(w.scope(), call, T0 + 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.state, CallState::Answered);
    assert_eq!(first.reply.as_deref(), Some(&b"sealed reply"[..]));
    let again = w
        .store
        .read_call(w.scope(), call, T0 + 4)
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
        .reply_call(w.owner, call, b"again".to_vec(), T0 + 5)
        .await;
    assert!(
        matches!(twice, Err(StoreError::WrongState(CallState::Delivered))),
        "{twice:?}"
    );
}

async fn check_cancel_applies_to_open_calls_only(store: Arc<dyn Store>) {
    let w = world(store).await;
    let pending = w.post(T0, 60_000).await;
    w.store
        .cancel_call(w.scope(), pending, CancelReason::ClientCancelled, T0 + 1)
        .await
        .unwrap();
    let view = w
        .store
        .read_call(w.scope(), pending, T0 + 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (view.state, view.reason),
        (CallState::Cancelled, Some(CancelReason::ClientCancelled))
    );
    assert!(
        w.store
            .claim_calls(w.owner, w.session, T0 + 2, 10, 30_000)
            .await
            .unwrap()
            .is_empty()
    );

    let claimed = w.post(T0 + 3, 60_000).await;
    w.store
        .claim_calls(w.owner, w.session, T0 + 4, 10, 30_000)
        .await
        .unwrap();
    let owner_scope = Scope {
        owner_id: w.owner,
        pair_id: None,
    };
    w.store
        .cancel_call(owner_scope, claimed, CancelReason::Undecryptable, T0 + 5)
        .await
        .unwrap();
    let late = w
        .store
        .reply_call(w.owner, claimed, b"x".to_vec(), T0 + 6)
        .await;
    assert!(
        matches!(late, Err(StoreError::WrongState(CallState::Cancelled))),
        "{late:?}"
    );

    let answered = w.post(T0 + 7, 60_000).await;
    w.store
        .claim_calls(w.owner, w.session, T0 + 8, 10, 30_000)
        .await
        .unwrap();
    w.store
        .reply_call(w.owner, answered, b"r".to_vec(), T0 + 9)
        .await
        .unwrap();
    let cancel = w
        .store
        .cancel_call(w.scope(), answered, CancelReason::ClientCancelled, T0 + 10)
        .await;
    assert!(
        matches!(cancel, Err(StoreError::WrongState(CallState::Answered))),
        "{cancel:?}"
    );

    let other_pair = Scope {
        owner_id: w.owner,
        pair_id: Some(id()),
    };
    let foreign = w
        .store
        .cancel_call(
            other_pair,
            w.post(T0 + 11, 60_000).await,
            CancelReason::ClientCancelled,
            T0 + 12,
        )
        .await;
    assert!(matches!(foreign, Err(StoreError::NotFound)), "{foreign:?}");
}

async fn check_duplicate_ids_are_refused_per_owner(store: Arc<dyn Store>) {
    let w = world(store.clone()).await;
    let call_id = w.post(T0, 60_000).await;
    let again = w
        .store
        .post_call(&w.call(call_id, T0 + 1, 60_000), None, None)
        .await;
    assert!(matches!(again, Err(StoreError::Duplicate)), "{again:?}");
    let dup_session = w
        .store
        .create_session(&new_session(w.owner, w.session, id(), T0 + HOUR), 10)
        .await;
    assert!(
        matches!(dup_session, Err(StoreError::Duplicate)),
        "{dup_session:?}"
    );
    // The failed duplicate left the first session live.
    assert!(
        w.store
            .live_session(w.owner, w.pair, T0)
            .await
            .unwrap()
            .is_some()
    );
    // Another owner may use the same call id: ids are unique per owner.
    let other = world(store).await;
    other
        .store
        .post_call(&other.call(call_id, T0, 60_000), None, None)
        .await
        .unwrap();
}

async fn check_expired_calls_are_not_claimable_and_read_as_expired(store: Arc<dyn Store>) {
    let w = world(store).await;
    let call = w.post(T0, 1_000).await;
    assert!(
        w.store
            .claim_calls(w.owner, w.session, T0 + 1_000, 10, 30_000)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        w.store
            .read_call(w.scope(), call, T0 + 1_000)
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
        .create_session(&new_session(short.owner, s2, id(), T0 + 500), 10)
        .await
        .unwrap();
    let e = short
        .store
        .post_call(
            &NewCall {
                session_id: s2,
                ..short.call(id(), T0, 60_000)
            },
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(e, T0 + 500);
}

async fn check_sweeper_drops_bytes_then_rows(store: Arc<dyn Store>) {
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

async fn check_ending_a_session_cancels_only_open_calls(store: Arc<dyn Store>) {
    let w = world(store).await;
    let answered = w.post(T0, 60_000).await;
    w.store
        .claim_calls(w.owner, w.session, T0 + 1, 1, 30_000)
        .await
        .unwrap();
    w.store
        .reply_call(w.owner, answered, b"r".to_vec(), T0 + 2)
        .await
        .unwrap();
    let claimed = w.post(T0 + 3, 60_000).await;
    w.store
        .claim_calls(w.owner, w.session, T0 + 4, 1, 30_000)
        .await
        .unwrap();
    let pending = w.post(T0 + 5, 60_000).await;
    // A new session for the same pairing ends this one.
    let next = id();
    let cancelled = w
        .store
        .create_session(&new_session(w.owner, next, w.pair, T0 + HOUR), 10)
        .await
        .unwrap();
    assert_eq!(
        cancelled.into_iter().collect::<HashSet<_>>(),
        HashSet::from([claimed, pending])
    );
    for call in [claimed, pending] {
        let view = w
            .store
            .read_call(w.scope(), call, T0 + 6)
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
            .read_call(w.scope(), answered, T0 + 6)
            .await
            .unwrap()
            .unwrap()
            .state,
        CallState::Answered
    );
    assert_eq!(
        w.store
            .live_session(w.owner, w.pair, T0 + 6)
            .await
            .unwrap()
            .unwrap()
            .session_id,
        next
    );
    let claim = w
        .store
        .claim_calls(w.owner, w.session, T0 + 7, 1, 30_000)
        .await;
    assert!(matches!(claim, Err(StoreError::SessionEnded)), "{claim:?}");
    let post = w
        .store
        .post_call(&w.call(id(), T0 + 7, 60_000), None, None)
        .await;
    assert!(matches!(post, Err(StoreError::SessionEnded)), "{post:?}");
    w.store.end_session(w.owner, next, T0 + 8).await.unwrap();
    assert!(
        w.store
            .live_session(w.owner, w.pair, T0 + 8)
            .await
            .unwrap()
            .is_none()
    );
}

async fn check_another_owner_sees_nothing(store: Arc<dyn Store>) {
    let w = world(store.clone()).await;
    let other = world(store).await;
    let call = w.post(T0, 60_000).await;
    let theirs = Scope {
        owner_id: other.owner,
        pair_id: None,
    };
    assert_eq!(w.store.read_call(theirs, call, T0).await.unwrap(), None);
    assert!(matches!(
        w.store
            .cancel_call(theirs, call, CancelReason::ClientCancelled, T0)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        w.store
            .claim_calls(other.owner, w.session, T0, 10, 1_000)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        w.store.end_session(other.owner, w.session, T0).await,
        Err(StoreError::NotFound)
    ));
    assert!(
        w.store
            .live_session(other.owner, w.pair, T0)
            .await
            .unwrap()
            .is_none()
    );
    let post = w
        .store
        .post_call(
            &NewCall {
                owner_id: other.owner,
                ..w.call(id(), T0, 60_000)
            },
            None,
            None,
        )
        .await;
    assert!(matches!(post, Err(StoreError::NotFound)), "{post:?}");
    w.store
        .claim_calls(w.owner, w.session, T0 + 1, 10, 30_000)
        .await
        .unwrap();
    assert!(matches!(
        w.store
            .reply_call(other.owner, call, b"x".to_vec(), T0 + 2)
            .await,
        Err(StoreError::NotFound)
    ));
}

async fn check_limits_on_pending_calls_and_live_sessions(store: Arc<dyn Store>) {
    let w = world(store).await;
    for _ in 0..3 {
        w.store
            .post_call(&w.call(id(), T0, 60_000), None, Some(3))
            .await
            .unwrap();
    }
    let over = w
        .store
        .post_call(&w.call(id(), T0, 60_000), None, Some(3))
        .await;
    assert!(matches!(over, Err(StoreError::TooManyPending)), "{over:?}");
    // Live sessions: the world holds one; a limit of 2 allows one more pairing.
    w.store
        .create_session(&new_session(w.owner, id(), id(), T0 + HOUR), 2)
        .await
        .unwrap();
    let third = w
        .store
        .create_session(&new_session(w.owner, id(), id(), T0 + HOUR), 2)
        .await;
    assert!(
        matches!(third, Err(StoreError::TooManySessions)),
        "{third:?}"
    );
    // Replacing a pairing's own session is always allowed.
    w.store
        .create_session(&new_session(w.owner, id(), w.pair, T0 + HOUR), 2)
        .await
        .unwrap();
}

async fn check_signin_codes_work_once_and_tokens_are_revocable(store: Arc<dyn Store>) {
    let owner = id();
    store.create_owner(owner, "alice", T0).await.unwrap();
    assert!(matches!(
        store.create_owner(id(), "alice", T0).await,
        Err(StoreError::Duplicate)
    ));
    store
        .create_signin_code([1; 32], owner, T0 + 1_000)
        .await
        .unwrap();
    store
        .create_signin_code([2; 32], owner, T0 + 1_000)
        .await
        .unwrap();
    assert_eq!(
        store.consume_signin_code([1; 32], T0).await.unwrap(),
        Some(owner)
    );
    assert_eq!(
        store.consume_signin_code([1; 32], T0).await.unwrap(),
        None,
        "a code works once"
    );
    assert_eq!(
        store
            .consume_signin_code([2; 32], T0 + 1_000)
            .await
            .unwrap(),
        None,
        "an expired code fails"
    );
    let token = TokenRow {
        id: id(),
        owner_id: owner,
        kind: TokenKind::Mcp,
        pair_id: Some(id()),
        label: "laptop".into(),
        created_at: T0,
        expires_at: T0 + HOUR,
    };
    store.create_token(&token).await.unwrap();
    assert_eq!(
        store.active_token(token.id, T0).await.unwrap(),
        Some(token.clone())
    );
    assert_eq!(
        store.list_mcp_tokens(owner, T0).await.unwrap(),
        vec![token.clone()]
    );
    assert!(
        store
            .active_token(token.id, T0 + HOUR)
            .await
            .unwrap()
            .is_none(),
        "expired"
    );
    assert!(
        !store.revoke_token(id(), token.id, None, T0).await.unwrap(),
        "another owner cannot revoke it"
    );
    assert!(
        store
            .revoke_token(owner, token.id, Some(TokenKind::Mcp), T0)
            .await
            .unwrap()
    );
    assert!(
        store.active_token(token.id, T0).await.unwrap().is_none(),
        "revoked"
    );
    let session_token = TokenRow {
        id: id(),
        kind: TokenKind::Owner,
        pair_id: None,
        ..token
    };
    store.create_token(&session_token).await.unwrap();
    assert!(
        store
            .extend_token(session_token.id, T0 + 2 * HOUR, T0)
            .await
            .unwrap()
    );
    assert!(
        store
            .active_token(session_token.id, T0 + HOUR)
            .await
            .unwrap()
            .is_some(),
        "slid forward"
    );
    store
        .create_signin_code([3; 32], owner, T0 + 1_000)
        .await
        .unwrap();
    assert!(store.disable_owner("alice", T0).await.unwrap());
    assert!(
        store
            .active_token(session_token.id, T0)
            .await
            .unwrap()
            .is_none(),
        "disabling revokes"
    );
    assert_eq!(store.consume_signin_code([3; 32], T0).await.unwrap(), None);
    assert_eq!(store.secret("k", vec![1]).await.unwrap(), vec![1]);
    assert_eq!(
        store.secret("k", vec![2]).await.unwrap(),
        vec![1],
        "a secret is generated once"
    );
}

macro_rules! contract {
    ($($check:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $check() {
                    let db = crate::support::TestDb::sqlite();
                    super::$check(db.open().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $check() {
                    let Some(db) = crate::support::TestDb::postgres().await else { return };
                    super::$check(db.open().await).await;
                }
            )*
        }
    };
}

contract!(
    check_concurrent_claimers_take_every_call_exactly_once,
    check_a_lapsed_lease_expires_the_call_and_it_is_never_offered_again,
    check_a_lease_never_runs_past_the_call_expiry,
    check_answer_then_read_marks_delivered_and_reads_repeat,
    check_cancel_applies_to_open_calls_only,
    check_duplicate_ids_are_refused_per_owner,
    check_expired_calls_are_not_claimable_and_read_as_expired,
    check_sweeper_drops_bytes_then_rows,
    check_ending_a_session_cancels_only_open_calls,
    check_another_owner_sees_nothing,
    check_limits_on_pending_calls_and_live_sessions,
    check_signin_codes_work_once_and_tokens_are_revocable,
);
