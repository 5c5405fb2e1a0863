//! Operations that arrive together. A backend may store concurrent posts and replies with one
//! statement (PostgreSQL groups them); each must still get the answer it would get alone.

use std::collections::HashMap;
use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_protocol::ids::{CallId, PairId};
use sealpost_relay::store::{Bearer, Inspect, NewCall, StoreError};
use sealpost_time::UnixMillis;

use super::{HOUR, RELAY_APP, T0, World, new_session, token, world};
use sealpost_testkit::id;

const AT: UnixMillis = T0.saturating_add_ms(5);

/// What each concurrent post was, and the answer it got.
enum Post {
    /// The `n`th id, posted twice or once.
    Id(usize),
    EndedSession,
    RevokedToken,
}

pub(super) async fn check_operations_arriving_together_each_get_their_own_answer(
    store: Arc<dyn Inspect>,
) {
    let w = Arc::new(world(store).await);
    // A second pairing whose session has ended, and a revoked token for each end.
    let (ended, other_pair) = (id(), id());
    w.store
        .create_session(
            &new_session(w.owner, ended, other_pair, T0.saturating_add_ms(HOUR)),
            10,
        )
        .await
        .unwrap();
    let other_mcp = token(&*w.store, w.owner, Some(other_pair)).await;
    w.store
        .end_session(w.owner, RELAY_APP, ended, T0.saturating_add_ms(1))
        .await
        .unwrap();
    let revoked_mcp = revoked(&w, Some(w.pair)).await;
    let revoked_tab = revoked(&w, None).await;

    let ids: Vec<CallId> = (0..32).map(|_| id()).collect();
    let mut posts = Vec::new();
    for n in 0..ids.len() {
        posts.push(Post::Id(n));
        if n < 8 {
            posts.push(Post::Id(n));
        }
        if n % 8 == 0 {
            posts.push(Post::EndedSession);
            posts.push(Post::RevokedToken);
        }
    }
    let tasks: Vec<_> = posts
        .into_iter()
        .map(|post| {
            let (w, ids) = (w.clone(), ids.clone());
            tokio::spawn(async move {
                let (bearer, call) = match post {
                    Post::Id(n) => (w.mcp, w.call(ids[n], AT, HOUR)),
                    Post::EndedSession => (
                        other_mcp,
                        NewCall {
                            session_id: ended,
                            ..w.call(id(), AT, HOUR)
                        },
                    ),
                    Post::RevokedToken => (revoked_mcp, w.call(id(), AT, HOUR)),
                };
                let answer = w.store.post_call(bearer, &call, Some(1_000)).await;
                (post, answer)
            })
        })
        .collect();
    let mut stored = HashMap::new();
    for task in tasks {
        match task.await.unwrap() {
            (Post::Id(n), Ok(_)) => *stored.entry(n).or_insert(0) += 1,
            (Post::Id(_), Err(StoreError::Duplicate)) => {}
            (Post::EndedSession, Err(StoreError::SessionEnded)) => {}
            (Post::RevokedToken, Err(StoreError::TokenNotLive)) => {}
            (Post::Id(n), other) => panic!("post of id {n}: {other:?}"),
            (Post::EndedSession, other) => panic!("post to an ended session: {other:?}"),
            (Post::RevokedToken, other) => panic!("post with a revoked token: {other:?}"),
        }
    }
    assert_eq!(stored.len(), ids.len(), "every id stored once: {stored:?}");
    assert!(stored.values().all(|&n| n == 1), "{stored:?}");

    let claimed = w
        .store
        .claim_calls(w.tab, w.session, AT.saturating_add_ms(1), 50, 30_000)
        .await
        .unwrap();
    assert_eq!(claimed.len(), ids.len());

    // Two replies to each call at once, and one with a revoked token: one wins per call.
    let mut tasks = Vec::new();
    for (n, &call_id) in ids.iter().enumerate() {
        for (attempt, bearer) in [(0u8, w.tab), (1, w.tab), (2, revoked_tab)] {
            let w = w.clone();
            tasks.push(tokio::spawn(async move {
                let reply = vec![n as u8, attempt];
                let answer = w
                    .store
                    .reply_call(bearer, call_id, reply, AT.saturating_add_ms(2))
                    .await;
                (n, attempt, answer)
            }));
        }
    }
    let mut winners = HashMap::new();
    for task in tasks {
        match task.await.unwrap() {
            (n, 2, answer) => assert!(
                matches!(answer, Err(StoreError::TokenNotLive)),
                "reply {n} with a revoked token: {answer:?}"
            ),
            (n, attempt, Ok(())) => {
                assert!(
                    winners.insert(n, attempt).is_none(),
                    "call {n} answered twice"
                );
            }
            (n, _, answer) => assert!(
                matches!(answer, Err(StoreError::WrongState(CallState::Answered))),
                "second reply to call {n}: {answer:?}"
            ),
        }
    }
    assert_eq!(winners.len(), ids.len(), "every call answered once");
    for (n, &call_id) in ids.iter().enumerate() {
        let view = w
            .store
            .read_call(w.mcp, call_id, AT.saturating_add_ms(3))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(view.reply, Some(vec![n as u8, winners[&n]]), "call {n}");
    }
}

async fn revoked(w: &World, pair: Option<PairId>) -> Bearer {
    let bearer = token(&*w.store, w.owner, pair).await;
    assert!(
        w.store
            .revoke_token(w.owner, RELAY_APP, bearer.token_id, None, T0)
            .await
            .unwrap()
    );
    bearer
}

/// What each concurrent claim was.
#[derive(Debug, Clone, Copy)]
enum Claim {
    /// Of the `n`th live session (each is claimed twice at once).
    Session(usize),
    EndedSession,
    MissingSession,
    /// Of the `n`th spare live session (one pending call), by a revoked token.
    RevokedToken(usize),
}

/// What each concurrent read was.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Of the `n`th session's first call, by its own pairing's token (each is read twice at
    /// once).
    Own(usize),
    /// Of the `n`th session's third call, by the next session's pairing.
    OtherPairing(usize),
    Missing,
    /// Of the `n`th session's second call, by a revoked token of its pairing.
    RevokedToken(usize),
}

pub(super) async fn check_claims_and_reads_arriving_together_each_get_their_own_answer(
    store: Arc<dyn Inspect>,
) {
    const SESSIONS: usize = 8;
    const CALLS_EACH: usize = 3;
    let w = Arc::new(world(store).await);
    // Live sessions of their own pairings, each with its MCP token and three pending calls.
    let (mut sessions, mut spare) = (Vec::new(), Vec::new());
    for _ in 0..SESSIONS {
        let (session, pair) = (id(), id());
        let expiry = T0.saturating_add_ms(HOUR);
        let s = new_session(w.owner, session, pair, expiry);
        w.store.create_session(&s, 100).await.unwrap();
        let mcp = token(&*w.store, w.owner, Some(pair)).await;
        let mut calls = Vec::new();
        for _ in 0..CALLS_EACH {
            let call = NewCall {
                session_id: session,
                ..w.call(id(), AT, HOUR)
            };
            w.store.post_call(mcp, &call, Some(100)).await.unwrap();
            calls.push(call.call_id);
        }
        sessions.push((session, mcp, calls));
        // And one with a call that only a revoked token claims below: it must stay pending.
        let (spare_session, spare_pair) = (id(), id());
        let s = new_session(w.owner, spare_session, spare_pair, expiry);
        w.store.create_session(&s, 100).await.unwrap();
        let spare_mcp = token(&*w.store, w.owner, Some(spare_pair)).await;
        let call = NewCall {
            session_id: spare_session,
            ..w.call(id(), AT, HOUR)
        };
        w.store
            .post_call(spare_mcp, &call, Some(100))
            .await
            .unwrap();
        spare.push((spare_session, call.call_id));
    }
    let ended = id();
    let s = new_session(w.owner, ended, id(), T0.saturating_add_ms(HOUR));
    w.store.create_session(&s, 100).await.unwrap();
    w.store
        .end_session(w.owner, RELAY_APP, ended, AT)
        .await
        .unwrap();
    let revoked_tab = revoked(&w, None).await;

    let mut claims: Vec<Claim> = (0..SESSIONS)
        .flat_map(|n| [Claim::Session(n), Claim::Session(n), Claim::RevokedToken(n)])
        .collect();
    claims.extend([Claim::EndedSession, Claim::MissingSession]);
    let (sessions, spare) = (Arc::new(sessions), Arc::new(spare));
    let tasks: Vec<_> = claims
        .into_iter()
        .map(|claim| {
            let (w, sessions, spare) = (w.clone(), sessions.clone(), spare.clone());
            tokio::spawn(async move {
                let (bearer, session) = match claim {
                    Claim::Session(n) => (w.tab, sessions[n].0),
                    Claim::EndedSession => (w.tab, ended),
                    Claim::MissingSession => (w.tab, id()),
                    Claim::RevokedToken(n) => (revoked_tab, spare[n].0),
                };
                let at = AT.saturating_add_ms(1);
                (
                    claim,
                    w.store.claim_calls(bearer, session, at, 2, 30_000).await,
                )
            })
        })
        .collect();
    let mut claimed: HashMap<usize, Vec<CallId>> = HashMap::new();
    for task in tasks {
        match task.await.unwrap() {
            (Claim::Session(n), Ok(rows)) => {
                assert!(rows.len() <= 2, "a claim of at most 2 took {}", rows.len());
                claimed
                    .entry(n)
                    .or_default()
                    .extend(rows.iter().map(|r| r.call_id));
            }
            (Claim::EndedSession, Err(StoreError::SessionEnded)) => {}
            (Claim::MissingSession, Err(StoreError::NotFound)) => {}
            (Claim::RevokedToken(_), Err(StoreError::TokenNotLive)) => {}
            (claim, other) => panic!("{claim:?}: {other:?}"),
        }
    }
    for (n, (_, _, calls)) in sessions.iter().enumerate() {
        let mut got = claimed.remove(&n).unwrap_or_default();
        got.sort();
        let mut want = calls.clone();
        want.sort();
        assert_eq!(
            got, want,
            "session {n}: each call claimed once, by its own session"
        );
    }
    for &(session, call_id) in spare.iter() {
        let at = AT.saturating_add_ms(1);
        let got = w.store.claim_calls(w.tab, session, at, 10, 30_000).await;
        let got: Vec<CallId> = got.unwrap().iter().map(|c| c.call_id).collect();
        assert_eq!(got, vec![call_id], "a revoked token's claim took nothing");
    }

    // Each call answered; then read together, by whom may and by whom may not.
    for (n, (_, _, calls)) in sessions.iter().enumerate() {
        for &call_id in calls {
            let reply = vec![n as u8];
            let at = AT.saturating_add_ms(2);
            w.store.reply_call(w.tab, call_id, reply, at).await.unwrap();
        }
    }
    let mut revoked_mcp = Vec::new();
    for (_, mcp, _) in sessions.iter() {
        revoked_mcp.push(revoked(&w, mcp.pair_id).await);
    }
    let revoked_mcp = Arc::new(revoked_mcp);
    let mut reads = Vec::new();
    for n in 0..SESSIONS {
        reads.extend([
            Read::Own(n),
            Read::Own(n),
            Read::OtherPairing(n),
            Read::RevokedToken(n),
        ]);
    }
    reads.push(Read::Missing);
    let tasks: Vec<_> = reads
        .into_iter()
        .map(|read| {
            let (w, sessions, revoked_mcp) = (w.clone(), sessions.clone(), revoked_mcp.clone());
            tokio::spawn(async move {
                let (bearer, call_id) = match read {
                    Read::Own(n) => (sessions[n].1, sessions[n].2[0]),
                    Read::OtherPairing(n) => (sessions[(n + 1) % SESSIONS].1, sessions[n].2[2]),
                    Read::Missing => (w.mcp, id()),
                    Read::RevokedToken(n) => (revoked_mcp[n], sessions[n].2[1]),
                };
                let at = AT.saturating_add_ms(3);
                (read, w.store.read_call(bearer, call_id, at).await)
            })
        })
        .collect();
    let mut delivered = HashMap::new();
    for task in tasks {
        match task.await.unwrap() {
            (Read::Own(n), Ok(Some(view))) => {
                assert_eq!(view.reply, Some(vec![n as u8]), "call of session {n}");
                assert!(
                    matches!(view.state, CallState::Answered | CallState::Delivered),
                    "{:?}",
                    view.state
                );
                *delivered.entry(n).or_insert(0) += 1;
            }
            (Read::OtherPairing(_) | Read::Missing, Ok(None)) => {}
            (Read::RevokedToken(_), Err(StoreError::TokenNotLive)) => {}
            (read, other) => panic!("{read:?}: {other:?}"),
        }
    }
    assert_eq!(delivered.len(), SESSIONS, "every call read: {delivered:?}");
}

pub(super) async fn check_posts_arriving_together_keep_the_cap_on_pending_calls(
    store: Arc<dyn Inspect>,
) {
    const CAP: u32 = 5;
    let w = Arc::new(world(store).await);
    let tasks: Vec<_> = (0..48)
        .map(|_| {
            let w = w.clone();
            tokio::spawn(async move {
                let call = w.call(id(), AT, HOUR);
                w.store.post_call(w.mcp, &call, Some(CAP)).await
            })
        })
        .collect();
    let (mut stored, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => stored += 1,
            Err(StoreError::TooManyPending) => refused += 1,
            Err(other) => panic!("a post: {other:?}"),
        }
    }
    assert_eq!((stored, refused), (CAP, 48 - CAP), "stored, refused");
    let claimed = w
        .store
        .claim_calls(w.tab, w.session, AT.saturating_add_ms(1), 100, 30_000)
        .await
        .unwrap();
    assert_eq!(claimed.len(), CAP as usize, "pending calls");
}
