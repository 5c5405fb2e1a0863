//! A post that claims for a claimer standing on its replica (`Store::post_call_then_claim`):
//! the claim sees the new call, is the same checked claim as any, and never costs the post. A
//! reply that reads for a reader standing on its replica (`Store::reply_call_then_read`): the
//! read sees the reply, is the same checked read as any, and tells what the call came to.

use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_relay::store::{CallView, ClaimFor, ClaimedRow, Inspect, ReadFor, StoreResult};
use tokio::sync::oneshot;

use sealpost_relay::origins::AppOrigin;
use sealpost_relay::scope::AppScope;

use super::{HOUR, RELAY_APP, T0, app_token, token, world};
use sealpost_testkit::id;

const LEASE_MS: u64 = 30_000;

fn claim_for(
    bearer: sealpost_relay::store::Bearer,
    max: u32,
) -> (ClaimFor, oneshot::Receiver<StoreResult<Vec<ClaimedRow>>>) {
    let (answer, answered) = oneshot::channel();
    let claim = ClaimFor {
        bearer,
        max,
        lease_ms: LEASE_MS,
        answer,
    };
    (claim, answered)
}

pub(super) async fn check_a_post_then_claim_hands_the_new_call_to_the_claimer_once(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let at = T0.saturating_add_ms(10);
    let older = w.post(T0, HOUR).await;
    let (claim, answered) = claim_for(w.tab, 10);
    let call_id = id();
    let expires_at = w
        .store
        .post_call_then_claim(w.mcp, &w.call(call_id, at, HOUR / 2), Some(1000), claim)
        .await
        .unwrap();
    assert_eq!(expires_at, at.saturating_add_ms(HOUR / 2));
    let claimed = answered.await.expect("an answer").unwrap();
    let ids: Vec<_> = claimed.iter().map(|c| c.call_id).collect();
    assert_eq!(
        ids,
        vec![older, call_id],
        "the claim sees the new call, oldest first"
    );
    assert!(
        claimed
            .iter()
            .all(|c| c.lease_expires_at == at.saturating_add_ms(LEASE_MS))
    );
    let again = w
        .store
        .claim_calls(w.tab, w.session, at, 10, LEASE_MS)
        .await
        .unwrap();
    assert!(again.is_empty(), "a handed call is claimed once");
    w.store
        .reply_call(w.tab, call_id, b"reply".to_vec(), at)
        .await
        .expect("the claimer answers a handed call as any claimed one");
}

pub(super) async fn check_a_post_then_claim_with_a_dead_claimer_posts_and_claims_nothing(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let at = T0.saturating_add_ms(10);
    let claimer = token(&*w.store, w.owner, None).await;
    w.store
        .revoke_token(w.owner, RELAY_APP, claimer.token_id, None, T0)
        .await
        .unwrap();
    let (claim, answered) = claim_for(claimer, 10);
    let call_id = id();
    w.store
        .post_call_then_claim(w.mcp, &w.call(call_id, at, HOUR), None, claim)
        .await
        .expect("the post does not depend on the claimer");
    // Refused, or left to the claimer's own claim; never claimed.
    if let Ok(Ok(rows)) = answered.await {
        panic!("a revoked claimer claimed {} calls", rows.len());
    }
    let live = w
        .store
        .claim_calls(w.tab, w.session, at, 10, LEASE_MS)
        .await
        .unwrap();
    assert_eq!(live.len(), 1, "the call waits for a live claimer");
    assert_eq!(live[0].call_id, call_id);
}

pub(super) async fn check_a_post_then_claim_that_is_refused_leaves_nothing_claimed(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call_id = w.post(T0, HOUR).await;
    let first = w
        .store
        .claim_calls(w.tab, w.session, T0, 10, LEASE_MS)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    let (claim, answered) = claim_for(w.tab, 10);
    let refused = w
        .store
        .post_call_then_claim(w.mcp, &w.call(call_id, T0, HOUR), None, claim)
        .await;
    assert!(
        matches!(refused, Err(sealpost_relay::store::StoreError::Duplicate)),
        "{refused:?}"
    );
    match answered.await {
        Ok(Ok(rows)) => assert!(rows.is_empty(), "nothing new to claim"),
        Ok(Err(error)) => panic!("{error}"),
        Err(_) => {}
    }
}

pub(super) async fn check_a_post_then_claim_takes_at_most_max_calls_oldest_first(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let first = w.post(T0, HOUR).await;
    let second = w.post(T0.saturating_add_ms(1), HOUR).await;
    let at = T0.saturating_add_ms(10);
    let (claim, answered) = claim_for(w.tab, 2);
    let newest = id();
    w.store
        .post_call_then_claim(w.mcp, &w.call(newest, at, HOUR / 2), None, claim)
        .await
        .unwrap();
    let claimed: Vec<_> = answered
        .await
        .expect("an answer")
        .unwrap()
        .into_iter()
        .map(|c| c.call_id)
        .collect();
    assert_eq!(claimed, vec![first, second], "the two oldest");
    let rest = w
        .store
        .claim_calls(w.tab, w.session, at, 10, LEASE_MS)
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|c| c.call_id).collect::<Vec<_>>(),
        vec![newest],
        "the new call waits, pending, for the next claim"
    );
}

fn read_for(
    bearer: sealpost_relay::store::Bearer,
) -> (ReadFor, oneshot::Receiver<StoreResult<Option<CallView>>>) {
    let (answer, answered) = oneshot::channel();
    (ReadFor { bearer, answer }, answered)
}

/// A call of `w`'s, claimed by the tab at `T0`.
async fn claimed_call(w: &super::World) -> sealpost_protocol::ids::CallId {
    let call_id = w.post(T0, HOUR).await;
    let claimed = w
        .store
        .claim_calls(w.tab, w.session, T0, 1, LEASE_MS)
        .await
        .unwrap();
    assert_eq!(claimed[0].call_id, call_id);
    call_id
}

pub(super) async fn check_a_reply_then_read_hands_the_answer_to_the_reader(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call_id = claimed_call(&w).await;
    let at = T0.saturating_add_ms(10);
    let (read, answered) = read_for(w.mcp);
    w.store
        .reply_call_then_read(w.tab, call_id, b"the answer".to_vec(), at, read)
        .await
        .unwrap();
    let view = answered
        .await
        .expect("an answer")
        .unwrap()
        .expect("the call");
    assert_eq!(view.state, CallState::Answered, "the read sees the reply");
    assert_eq!(view.reply.as_deref(), Some(b"the answer".as_slice()));
    let again = w
        .store
        .read_call(w.mcp, call_id, at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.state, again.reply.as_deref()),
        (CallState::Delivered, Some(b"the answer".as_slice())),
        "the handed read was the first: the call is delivered, and reads again"
    );
}

pub(super) async fn check_a_reply_then_read_for_a_dead_reader_reads_nothing(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call_id = claimed_call(&w).await;
    let reader = token(&*w.store, w.owner, Some(w.pair)).await;
    w.store
        .revoke_token(w.owner, RELAY_APP, reader.token_id, None, T0)
        .await
        .unwrap();
    let (read, answered) = read_for(reader);
    w.store
        .reply_call_then_read(w.tab, call_id, b"secret".to_vec(), T0, read)
        .await
        .expect("the reply does not depend on the reader");
    // Refused, or left to the reader's own read; never read.
    if let Ok(Ok(Some(view))) = answered.await {
        panic!("a revoked reader read the call: {:?}", view.state);
    }
    let view = w
        .store
        .read_call(w.mcp, call_id, T0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        view.state,
        CallState::Answered,
        "the live reader's first read"
    );
}

/// The read a reply does for its reader is the reader's own: a token of another pairing or of
/// another app of the same owner finds no call there, as its own read would.
pub(super) async fn check_a_reply_then_read_for_another_pairing_or_app_finds_no_call(
    store: Arc<dyn Inspect>,
) {
    let app = AppScope::HostApp(AppOrigin::parse("https://other.example").unwrap());
    let w = world(store).await;
    let strangers = [
        token(&*w.store, w.owner, Some(id())).await,
        app_token(&*w.store, w.owner, Some(w.pair), &app).await,
    ];
    for stranger in strangers {
        let call_id = claimed_call(&w).await;
        let (read, answered) = read_for(stranger);
        w.store
            .reply_call_then_read(w.tab, call_id, b"not yours".to_vec(), T0, read)
            .await
            .unwrap();
        let found = answered.await.expect("an answer").unwrap();
        assert!(found.is_none(), "a stranger read the call: {found:?}");
        let view = w
            .store
            .read_call(w.mcp, call_id, T0)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(view.state, CallState::Answered, "the caller's first read");
    }
}

pub(super) async fn check_a_refused_reply_then_read_tells_the_reader_where_the_call_is(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let call_id = claimed_call(&w).await;
    let past_lease = T0.saturating_add_ms(LEASE_MS + 1);
    let (read, answered) = read_for(w.mcp);
    let refused = w
        .store
        .reply_call_then_read(w.tab, call_id, b"late".to_vec(), past_lease, read)
        .await;
    assert!(
        matches!(
            refused,
            Err(sealpost_relay::store::StoreError::LeaseExpired)
        ),
        "{refused:?}"
    );
    let view = answered
        .await
        .expect("an answer")
        .unwrap()
        .expect("the call");
    assert_eq!(view.state, CallState::Expired, "what the call came to");
    assert!(view.reply.is_none());
}
