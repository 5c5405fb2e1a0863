//! Owners, one-time sign-in codes, tokens and the stored secret.

use std::sync::Arc;

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::TokenId;
use sealpost_relay::store::{Inspect, Page, SigninGrant, StoreError, TokenRow};

use super::{HOUR, RELAY_APP, T0, signin_code};
use sealpost_testkit::id;

const FIRST_PAGE: Page = Page {
    after: None,
    limit: 100,
};

pub(super) async fn check_mcp_tokens_list_in_pages_by_id_live_ones_only(store: Arc<dyn Inspect>) {
    let owner = id();
    store.create_owner(owner, "paged", T0).await.unwrap();
    let mut live = Vec::new();
    for n in 0..7u64 {
        let token = TokenRow {
            id: id(),
            owner_id: owner,
            kind: TokenKind::Mcp,
            pair_id: Some(id()),
            label: format!("token {n}"),
            created_at: T0,
            expires_at: T0.saturating_add_ms(HOUR),
            app: RELAY_APP.clone(),
            lifetime_ends_at: None,
            parent_id: None,
        };
        store.create_token(&token).await.unwrap();
        live.push(token.id);
    }
    let revoked = live.remove(3);
    assert!(
        store
            .revoke_token(owner, RELAY_APP, revoked, None, T0)
            .await
            .unwrap()
    );
    live.sort();

    let mut listed: Vec<TokenId> = Vec::new();
    let mut after = None;
    // Bounded: a listing that never ends would otherwise hang the check.
    for _ in 0..=live.len() {
        let page = store
            .list_mcp_tokens(owner, RELAY_APP, T0, Page { after, limit: 4 })
            .await
            .unwrap();
        assert!(page.len() <= 4);
        listed.extend(page.iter().map(|t| t.id));
        if page.len() < 4 {
            break;
        }
        after = page.last().map(|t| t.id);
    }
    assert_eq!(
        listed, live,
        "every live token once, in id order, the revoked one not"
    );
}

pub(super) async fn check_signin_codes_work_once_and_tokens_are_revocable(store: Arc<dyn Inspect>) {
    let owner = id();
    store.create_owner(owner, "alice", T0).await.unwrap();
    assert!(matches!(
        store.create_owner(id(), "alice", T0).await,
        Err(StoreError::Duplicate)
    ));
    store
        .create_signin_code(&signin_code(1, owner, T0.saturating_add_ms(1_000)))
        .await
        .unwrap();
    store
        .create_signin_code(&signin_code(2, owner, T0.saturating_add_ms(1_000)))
        .await
        .unwrap();
    assert_eq!(
        store.consume_signin_code([1; 32], T0).await.unwrap(),
        Some(SigninGrant {
            owner_id: owner,
            app: RELAY_APP.clone(),
            lifetime_ends_at: None,
            pkce_challenge: None,
            minted_by: None,
        })
    );
    assert_eq!(
        store.consume_signin_code([1; 32], T0).await.unwrap(),
        None,
        "a code works once"
    );
    assert_eq!(
        store
            .consume_signin_code([2; 32], T0.saturating_add_ms(1_000))
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
        expires_at: T0.saturating_add_ms(HOUR),
        app: RELAY_APP.clone(),
        lifetime_ends_at: None,
        parent_id: None,
    };
    store.create_token(&token).await.unwrap();
    assert_eq!(
        store.active_token(token.id, T0).await.unwrap(),
        Some(token.clone())
    );
    assert_eq!(
        store
            .list_mcp_tokens(owner, RELAY_APP, T0, FIRST_PAGE)
            .await
            .unwrap(),
        vec![token.clone()]
    );
    assert!(
        store
            .active_token(token.id, T0.saturating_add_ms(HOUR))
            .await
            .unwrap()
            .is_none(),
        "expired"
    );
    assert!(
        !store
            .revoke_token(id(), RELAY_APP, token.id, None, T0)
            .await
            .unwrap(),
        "another owner cannot revoke it"
    );
    assert!(
        store
            .revoke_token(owner, RELAY_APP, token.id, Some(TokenKind::Mcp), T0)
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
            .extend_token(session_token.id, T0.saturating_add_ms(2 * HOUR), T0)
            .await
            .unwrap()
    );
    assert!(
        store
            .active_token(session_token.id, T0.saturating_add_ms(HOUR))
            .await
            .unwrap()
            .is_some(),
        "slid forward"
    );
    store
        .create_signin_code(&signin_code(3, owner, T0.saturating_add_ms(1_000)))
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
