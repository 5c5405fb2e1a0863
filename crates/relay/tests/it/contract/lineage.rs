//! Lineage: signing a sign-in out ends, in the same transaction, every sign-in made from its
//! links (to any depth), voids their unused links, and ends the sessions any of them started;
//! a signed-out sign-in makes no sign-in, link or session more.

use std::sync::Arc;

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, TokenId};
use sealpost_relay::store::{Inspect, NewSession, NewSigninCode, Store, StoreError, TokenRow};

use super::{HOUR, RELAY_APP, T0, World, new_session, signin_code, world};
use sealpost_testkit::id;

/// A sign-in of the owner's made from a link `parent` minted (none: the operator's link).
fn sign_in_row(owner: OwnerId, parent: Option<TokenId>) -> TokenRow {
    TokenRow {
        id: id(),
        owner_id: owner,
        kind: TokenKind::Owner,
        pair_id: None,
        label: "sign-in".into(),
        created_at: T0,
        expires_at: T0.saturating_add_ms(HOUR),
        app: RELAY_APP.clone(),
        lifetime_ends_at: Some(T0.saturating_add_ms(HOUR)),
        parent_id: parent,
    }
}

async fn sign_in(store: &dyn Store, owner: OwnerId, parent: Option<TokenId>) -> TokenId {
    let row = sign_in_row(owner, parent);
    store.create_token(&row).await.unwrap();
    row.id
}

/// A link `minter` mints, with code hash `[n; 32]`.
fn link(owner: OwnerId, minter: TokenId, n: u8) -> NewSigninCode {
    NewSigninCode {
        minted_by: Some(minter),
        ..signin_code(n, owner, T0.saturating_add_ms(HOUR))
    }
}

fn session_of(owner: OwnerId, starter: TokenId) -> NewSession {
    NewSession {
        started_by: Some(starter),
        ..new_session(owner, id(), id(), T0.saturating_add_ms(HOUR))
    }
}

async fn live(store: &dyn Store, token: TokenId) -> bool {
    store.active_token(token, T0).await.unwrap().is_some()
}

pub(super) async fn check_signing_out_ends_the_lineage_its_links_and_its_sessions(
    store: Arc<dyn Inspect>,
) {
    let w: World = world(store).await;
    let store = &*w.store;
    let root = sign_in(store, w.owner, None).await;
    let child = sign_in(store, w.owner, Some(root)).await;
    let grandchild = sign_in(store, w.owner, Some(child)).await;
    let sibling = sign_in(store, w.owner, None).await;
    let sibling_child = sign_in(store, w.owner, Some(sibling)).await;
    store
        .create_signin_code(&link(w.owner, root, 1))
        .await
        .unwrap();
    store
        .create_signin_code(&link(w.owner, grandchild, 2))
        .await
        .unwrap();
    store
        .create_signin_code(&link(w.owner, sibling, 3))
        .await
        .unwrap();
    let grandchilds = session_of(w.owner, grandchild);
    store.create_session(&grandchilds, 10).await.unwrap();
    let siblings = session_of(w.owner, sibling);
    store.create_session(&siblings, 10).await.unwrap();

    let ended = store
        .sign_out(w.owner, RELAY_APP, root, None, T0)
        .await
        .unwrap()
        .expect("the token is found");
    assert_eq!(ended.sessions, vec![(w.owner, grandchilds.session_id)]);
    for (token, what) in [(root, "root"), (child, "child"), (grandchild, "grandchild")] {
        assert!(!live(store, token).await, "{what} is signed out");
    }
    for (token, what) in [(sibling, "sibling"), (sibling_child, "its child")] {
        assert!(live(store, token).await, "{what} goes on");
    }
    let links = store
        .list_signin_links(w.owner, RELAY_APP, T0)
        .await
        .unwrap();
    assert_eq!(
        links.iter().map(|l| l.minted_by).collect::<Vec<_>>(),
        vec![Some(sibling)],
        "only the sibling's link is left"
    );
    assert_eq!(store.consume_signin_code([1; 32], T0).await.unwrap(), None);
    assert_eq!(store.consume_signin_code([2; 32], T0).await.unwrap(), None);
    let sessions = store.live_sessions_by_app(w.owner, T0).await.unwrap();
    assert_eq!(
        sessions,
        vec![(RELAY_APP.clone(), 2)],
        "the world's session and the sibling's"
    );
}

pub(super) async fn check_a_signed_out_sign_in_makes_no_sign_in_link_or_session(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let store = &*w.store;
    let gone = sign_in(store, w.owner, None).await;
    assert!(
        store
            .revoke_token(w.owner, RELAY_APP, gone, None, T0)
            .await
            .unwrap()
    );
    let made = store.create_token(&sign_in_row(w.owner, Some(gone))).await;
    assert!(matches!(made, Err(StoreError::TokenNotLive)), "{made:?}");
    let minted = store.create_signin_code(&link(w.owner, gone, 9)).await;
    assert!(
        matches!(minted, Err(StoreError::TokenNotLive)),
        "{minted:?}"
    );
    let started = store.create_session(&session_of(w.owner, gone), 10).await;
    assert!(
        matches!(started, Err(StoreError::TokenNotLive)),
        "{started:?}"
    );
    // Nor does another owner's token stand parent.
    let other: OwnerId = id();
    store.create_owner(other, "other", T0).await.unwrap();
    let theirs = sign_in(store, other, None).await;
    let made = store
        .create_token(&sign_in_row(w.owner, Some(theirs)))
        .await;
    assert!(matches!(made, Err(StoreError::TokenNotLive)), "{made:?}");
}
