//! Operations that arrive together. A backend may store concurrent posts and replies with one
//! statement (PostgreSQL groups them); each must still get the answer it would get alone.

use std::collections::HashMap;
use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_protocol::ids::Id16;
use sealpost_relay::store::{Bearer, Inspect, NewCall, StoreError};
use sealpost_time::UnixMillis;

use super::{HOUR, T0, World, new_session, token, world};
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
        .end_session(w.owner, ended, T0.saturating_add_ms(1))
        .await
        .unwrap();
    let revoked_mcp = revoked(&w, Some(w.pair)).await;
    let revoked_tab = revoked(&w, None).await;

    let ids: Vec<Id16> = (0..32).map(|_| id()).collect();
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

async fn revoked(w: &World, pair: Option<Id16>) -> Bearer {
    let bearer = token(&*w.store, w.owner, pair).await;
    assert!(
        w.store
            .revoke_token(w.owner, bearer.token_id, None, T0)
            .await
            .unwrap()
    );
    bearer
}
