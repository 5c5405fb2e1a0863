//! The call loop's operations check the presented token themselves: a token that is revoked,
//! expired, or does not match its row changes nothing and is told so, whatever the call's state.

use std::sync::Arc;

use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_relay::store::{Bearer, Inspect, StoreError};

use super::{HOUR, RELAY_APP, T0, World, token, world};
use sealpost_testkit::id;

fn not_live<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::TokenNotLive)),
        "{what}: {result:?}"
    );
}

/// Three calls: one pending, one claimed, one answered.
async fn three_calls(w: &World) -> [sealpost_protocol::ids::CallId; 3] {
    let answered = w.post(T0, HOUR).await;
    let claimed_one = w
        .store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(1), 1, 60_000)
        .await
        .unwrap();
    assert_eq!(claimed_one[0].call_id, answered);
    w.store
        .reply_call(w.tab, answered, b"reply".to_vec(), T0.saturating_add_ms(2))
        .await
        .unwrap();
    let claimed = w.post(T0.saturating_add_ms(3), HOUR).await;
    w.store
        .claim_calls(w.tab, w.session, T0.saturating_add_ms(4), 1, 60_000)
        .await
        .unwrap();
    let pending = w.post(T0.saturating_add_ms(5), HOUR).await;
    [pending, claimed, answered]
}

pub(super) async fn check_a_revoked_token_changes_nothing(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let [pending, claimed, answered] = three_calls(&w).await;
    let t = T0.saturating_add_ms(10);
    w.store
        .revoke_token(w.owner, RELAY_APP, w.mcp.token_id, None, t)
        .await
        .unwrap();
    w.store
        .revoke_token(w.owner, RELAY_APP, w.tab.token_id, None, t)
        .await
        .unwrap();

    let unposted = id();
    not_live(
        w.store
            .post_call(w.mcp, &w.call(unposted, t, HOUR), None)
            .await,
        "post",
    );
    not_live(w.store.read_call(w.mcp, answered, t).await, "read");
    // The tab claimed at T0.saturating_add_ms(4), so this claim skips the `claimer_seen_at` write (the grouped
    // claim itself must refuse); the next one, a second later, writes it (that write must).
    not_live(
        w.store.claim_calls(w.tab, w.session, t, 10, 60_000).await,
        "claim",
    );
    not_live(
        w.store
            .claim_calls(w.tab, w.session, t.saturating_add_ms(2_000), 10, 60_000)
            .await,
        "claim that records the poll",
    );
    not_live(
        w.store
            .reply_call(w.tab, claimed, b"late".to_vec(), t)
            .await,
        "reply",
    );

    // Fresh tokens see that nothing changed.
    let (mcp, tab) = (
        token(&*w.store, w.owner, Some(w.pair)).await,
        token(&*w.store, w.owner, None).await,
    );
    assert_eq!(
        w.store.held_bytes(w.owner, unposted).await.unwrap(),
        None,
        "the post stored nothing"
    );
    let view = w.store.read_call(mcp, answered, t).await.unwrap().unwrap();
    assert_eq!(
        view.state,
        CallState::Answered,
        "the refused read did not mark the answer delivered"
    );
    let got = w
        .store
        .claim_calls(tab, w.session, t.saturating_add_ms(3_000), 10, 60_000)
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|c| c.call_id).collect::<Vec<_>>(),
        vec![pending],
        "the refused claims took nothing"
    );
    w.store
        .reply_call(tab, claimed, b"reply".to_vec(), t.saturating_add_ms(3_000))
        .await
        .expect("the refused reply left the call claimed");
}

pub(super) async fn check_an_expired_token_changes_nothing(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let [pending, claimed, answered] = three_calls(&w).await;
    // Tokens that lapse at T0.saturating_add_ms(100), used just after.
    let short = |mut bearer: Bearer| {
        let w = &w;
        async move {
            let row = sealpost_relay::store::TokenRow {
                id: id(),
                owner_id: w.owner,
                kind: bearer.kind,
                pair_id: bearer.pair_id,
                label: "short".into(),
                created_at: T0,
                expires_at: T0.saturating_add_ms(100),
                app: RELAY_APP.clone(),
                lifetime_ends_at: None,
                parent_id: None,
            };
            w.store.create_token(&row).await.unwrap();
            bearer.token_id = row.id;
            bearer
        }
    };
    let (mcp, tab) = (short(w.mcp).await, short(w.tab).await);
    let t = T0.saturating_add_ms(100);
    not_live(
        w.store.post_call(mcp, &w.call(id(), t, HOUR), None).await,
        "post",
    );
    not_live(w.store.read_call(mcp, answered, t).await, "read");
    not_live(
        w.store.claim_calls(tab, w.session, t, 10, 60_000).await,
        "claim",
    );
    not_live(
        w.store.reply_call(tab, claimed, b"x".to_vec(), t).await,
        "reply",
    );
    // One millisecond earlier the same tokens work.
    let got = w
        .store
        .claim_calls(tab, w.session, t.saturating_sub_ms(1), 10, 60_000)
        .await
        .unwrap();
    assert_eq!(got[0].call_id, pending);
}

pub(super) async fn check_a_token_that_does_not_match_its_row_changes_nothing(
    store: Arc<dyn Inspect>,
) {
    let w = world(store.clone()).await;
    let other = world(store).await;
    let [_, claimed, answered] = three_calls(&w).await;
    let t = T0.saturating_add_ms(10);
    // The row is the other owner's; the claims name this owner.
    let borrowed = Bearer {
        token_id: other.tab.token_id,
        ..w.tab
    };
    not_live(
        w.store
            .claim_calls(borrowed, w.session, t, 10, 60_000)
            .await,
        "claim with another owner's row",
    );
    not_live(
        w.store
            .reply_call(borrowed, claimed, b"x".to_vec(), t)
            .await,
        "reply with another owner's row",
    );
    // The MCP row presented as an owner token, and with another pairing.
    let as_owner = Bearer {
        kind: TokenKind::Owner,
        pair_id: None,
        ..w.mcp
    };
    not_live(
        w.store.read_call(as_owner, answered, t).await,
        "an MCP row as an owner token",
    );
    let other_pair = Bearer {
        pair_id: Some(id()),
        ..w.mcp
    };
    not_live(
        w.store
            .post_call(other_pair, &w.call(id(), t, HOUR), None)
            .await,
        "another pairing than the row's",
    );
}
