//! Apps: a sign-in code hands its app and absolute end to its sign-in; a token acts on its own
//! app's sessions and calls alone, grouped or not; tokens are reached by their own app's
//! tokens and by the relay's own app's.

use std::sync::Arc;

use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{SessionId, TokenId};
use sealpost_relay::origins::AppOrigin;
use sealpost_relay::scope::AppScope;
use sealpost_relay::store::{
    Bearer, CatalogUpdate, Inspect, NewCall, NewSigninCode, Page, SigninGrant, StoreError, TokenRow,
};

use super::{HOUR, RELAY_APP, T0, World, app_token, new_session, world};
use sealpost_testkit::id;

fn app(origin: &str) -> AppScope {
    AppScope::HostApp(AppOrigin::parse(origin).unwrap())
}

pub(super) async fn check_a_sign_in_code_carries_its_app_and_end_to_its_sign_in(
    store: Arc<dyn Inspect>,
) {
    let owner = id();
    store.create_owner(owner, "chained", T0).await.unwrap();
    let a = app("https://a.example");
    let end = T0.saturating_add_ms(HOUR);
    store
        .create_signin_code(&NewSigninCode {
            id: id(),
            code_hash: [7; 32],
            owner_id: owner,
            app: a.clone(),
            expires_at: T0.saturating_add_ms(1_000),
            lifetime_ends_at: Some(end),
            pkce_challenge: None,
            minted_by: None,
            created_at: T0,
        })
        .await
        .unwrap();
    assert_eq!(
        store.consume_signin_code([7; 32], T0).await.unwrap(),
        Some(SigninGrant {
            owner_id: owner,
            app: a.clone(),
            lifetime_ends_at: Some(end),
            pkce_challenge: None,
            minted_by: None,
        })
    );
    let token = TokenRow {
        id: id(),
        owner_id: owner,
        kind: TokenKind::Owner,
        pair_id: None,
        label: "sign-in".into(),
        created_at: T0,
        expires_at: T0.saturating_add_ms(1_000),
        app: a,
        lifetime_ends_at: Some(end),
        parent_id: None,
    };
    store.create_token(&token).await.unwrap();
    assert_eq!(
        store.active_token(token.id, T0).await.unwrap(),
        Some(token),
        "the row keeps its app and its absolute end"
    );
}

/// The world's owner, signed in to a host app, with that app's own session of the world's
/// pairing (the same `pair_id`, as if the app's tab had it too).
struct OtherApp {
    tab: Bearer,
    mcp: Bearer,
    session: SessionId,
}

async fn other_app(w: &World) -> OtherApp {
    let a = app("https://a.example");
    let session = id();
    let ended = w
        .store
        .create_session(
            &sealpost_relay::store::NewSession {
                app: a.clone(),
                ..new_session(w.owner, session, w.pair, T0.saturating_add_ms(HOUR))
            },
            10,
        )
        .await
        .unwrap();
    assert!(
        ended.sessions.is_empty(),
        "a session of another app does not replace the relay's own app's"
    );
    OtherApp {
        tab: app_token(&*w.store, w.owner, None, &a).await,
        mcp: app_token(&*w.store, w.owner, Some(w.pair), &a).await,
        session,
    }
}

pub(super) async fn check_an_app_acts_on_its_own_sessions_and_calls_alone(store: Arc<dyn Inspect>) {
    let w = world(store).await;
    let o = other_app(&w).await;
    let a = app("https://a.example");
    let at = |ms| T0.saturating_add_ms(ms);
    // Each app looks up its own session of the pairing.
    let live = |scope: AppScope| {
        let store = w.store.clone();
        let (owner, pair) = (w.owner, w.pair);
        async move {
            store
                .live_session(owner, &scope, pair, at(1))
                .await
                .unwrap()
                .map(|live| live.session_id)
        }
    };
    assert_eq!(live(AppScope::RelayApp).await, Some(w.session));
    assert_eq!(live(a.clone()).await, Some(o.session));
    assert_eq!(live(app("https://b.example")).await, None);

    // Posting: each pairing's token to its own app's session only.
    let cross = w
        .store
        .post_call(o.mcp, &w.call(id(), at(2), HOUR), None)
        .await;
    assert!(matches!(cross, Err(StoreError::NotFound)), "{cross:?}");
    let into_other = NewCall {
        session_id: o.session,
        ..w.call(id(), at(2), HOUR)
    };
    let cross = w.store.post_call(w.mcp, &into_other, None).await;
    assert!(matches!(cross, Err(StoreError::NotFound)), "{cross:?}");
    let theirs = w.post(at(3), HOUR).await;
    let ours = id();
    w.store
        .post_call(
            o.mcp,
            &NewCall {
                call_id: ours,
                ..into_other.clone()
            },
            None,
        )
        .await
        .unwrap();

    // Claiming, replying, reading and cancelling: another app's session and calls are not found.
    let claim = w
        .store
        .claim_calls(o.tab, w.session, at(4), 10, 30_000)
        .await;
    assert!(matches!(claim, Err(StoreError::NotFound)), "{claim:?}");
    let claim = w
        .store
        .claim_calls(w.tab, o.session, at(4), 10, 30_000)
        .await;
    assert!(matches!(claim, Err(StoreError::NotFound)), "{claim:?}");
    let claimed = w
        .store
        .claim_calls(w.tab, w.session, at(5), 10, 30_000)
        .await
        .unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.call_id).collect::<Vec<_>>(),
        [theirs]
    );
    let claimed = w
        .store
        .claim_calls(o.tab, o.session, at(5), 10, 30_000)
        .await
        .unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.call_id).collect::<Vec<_>>(),
        [ours]
    );
    let reply = w
        .store
        .reply_call(o.tab, theirs, b"x".to_vec(), at(6))
        .await;
    assert!(matches!(reply, Err(StoreError::NotFound)), "{reply:?}");
    let reply = w.store.reply_call(w.tab, ours, b"x".to_vec(), at(6)).await;
    assert!(matches!(reply, Err(StoreError::NotFound)), "{reply:?}");
    for (bearer, call) in [
        (o.tab, theirs),
        (o.mcp, theirs),
        (w.tab, ours),
        (w.mcp, ours),
    ] {
        assert_eq!(w.store.read_call(bearer, call, at(6)).await.unwrap(), None);
        let cancel = w
            .store
            .cancel_call(bearer, call, CancelReason::ClientCancelled, at(6))
            .await;
        assert!(matches!(cancel, Err(StoreError::NotFound)), "{cancel:?}");
    }
    // The calls are untouched, and each app completes its own.
    w.store
        .reply_call(w.tab, theirs, b"ours".to_vec(), at(7))
        .await
        .unwrap();
    w.store
        .reply_call(o.tab, ours, b"theirs".to_vec(), at(7))
        .await
        .unwrap();
    let read = w
        .store
        .read_call(o.mcp, ours, at(8))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.state, CallState::Answered);

    // A catalog update and an end: only the session's own app's.
    let update = |app: &AppScope, session: SessionId| CatalogUpdate {
        owner_id: w.owner,
        app: app.clone(),
        session_id: session,
        seq: 1,
        update: b"update".to_vec(),
        now: at(9),
    };
    let kept = w.store.set_catalog_update(&update(&a, w.session)).await;
    assert!(matches!(kept, Err(StoreError::NotFound)), "{kept:?}");
    w.store
        .set_catalog_update(&update(&a, o.session))
        .await
        .unwrap();
    let ended = w.store.end_session(w.owner, &a, w.session, at(10)).await;
    assert!(matches!(ended, Err(StoreError::NotFound)), "{ended:?}");
    let ended = w
        .store
        .end_session(w.owner, RELAY_APP, o.session, at(10))
        .await;
    assert!(matches!(ended, Err(StoreError::NotFound)), "{ended:?}");
    assert_eq!(live(AppScope::RelayApp).await, Some(w.session));
    w.store
        .end_session(w.owner, &a, o.session, at(10))
        .await
        .unwrap();
    assert_eq!(live(a.clone()).await, None);
    assert_eq!(live(AppScope::RelayApp).await, Some(w.session));

    // A new session of the relay's own app replaces its own, and counts every app's against
    // the owner's cap.
    let again = id();
    w.store
        .create_session(
            &sealpost_relay::store::NewSession {
                app: a.clone(),
                ..new_session(w.owner, again, w.pair, at(HOUR))
            },
            10,
        )
        .await
        .unwrap();
    let full = w
        .store
        .create_session(&new_session(w.owner, id(), id(), at(HOUR)), 2)
        .await;
    assert!(matches!(full, Err(StoreError::TooManySessions)), "{full:?}");
    let replaced = w
        .store
        .create_session(&new_session(w.owner, id(), w.pair, at(HOUR)), 2)
        .await
        .unwrap();
    assert_eq!(replaced.sessions, [(w.owner, w.session)]);
    assert_eq!(live(a).await, Some(again));
}

pub(super) async fn check_another_apps_operations_arriving_together_find_nothing(
    store: Arc<dyn Inspect>,
) {
    let w = Arc::new(world(store).await);
    let o = other_app(&w).await;
    let at = |ms| T0.saturating_add_ms(ms);
    // Posts: the pairing's own token and the other app's, together.
    let mut tasks = Vec::new();
    for n in 0..32 {
        let w = w.clone();
        let bearer = if n % 2 == 0 { w.mcp } else { o.mcp };
        tasks.push(tokio::spawn(async move {
            let call = w.call(id(), at(1), HOUR);
            (
                n,
                call.call_id,
                w.store.post_call(bearer, &call, None).await,
            )
        }));
    }
    let mut calls = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (n, call, Ok(_)) if n % 2 == 0 => calls.push(call),
            (n, _, Err(StoreError::NotFound)) if n % 2 == 1 => {}
            (n, _, other) => panic!("post {n}: {other:?}"),
        }
    }
    // Claims by both apps' tabs, together: the session's own tab of its session, the other
    // app's of the relay's own app's sessions (one each, so a group may hold them all).
    let mut sessions = Vec::new();
    for _ in 0..4 {
        let session = id();
        w.store
            .create_session(&new_session(w.owner, session, id(), at(HOUR)), 10)
            .await
            .unwrap();
        sessions.push(session);
    }
    let mut tasks = Vec::new();
    for n in 0..8 {
        let w = w.clone();
        let (bearer, session) = if n % 2 == 0 {
            (w.tab, w.session)
        } else {
            (o.tab, sessions[n / 2])
        };
        tasks.push(tokio::spawn(async move {
            let claimed = w.store.claim_calls(bearer, session, at(2), 4, 30_000).await;
            (n, claimed)
        }));
    }
    let mut claimed = 0;
    for task in tasks {
        match task.await.unwrap() {
            (n, Ok(rows)) if n % 2 == 0 => claimed += rows.len(),
            (n, Err(StoreError::NotFound)) if n % 2 == 1 => {}
            (n, other) => panic!("claim {n}: {other:?}"),
        }
    }
    // Concurrent claims may leave some calls to a later one; the other app's took none.
    claimed += w
        .store
        .claim_calls(w.tab, w.session, at(2), 50, 30_000)
        .await
        .unwrap()
        .len();
    assert_eq!(claimed, 16, "the session's own tab claimed every call");
    // Replies and reads by both apps, together: the other app's find nothing.
    let mut tasks = Vec::new();
    for &call in &calls {
        for (own, bearer) in [(true, w.tab), (false, o.tab)] {
            let w = w.clone();
            tasks.push(tokio::spawn(async move {
                let reply = w.store.reply_call(bearer, call, b"r".to_vec(), at(3)).await;
                (own, reply)
            }));
        }
    }
    for task in tasks {
        match task.await.unwrap() {
            (true, Ok(())) | (false, Err(StoreError::NotFound)) => {}
            (own, other) => panic!("reply by its own app {own}: {other:?}"),
        }
    }
    let mut tasks = Vec::new();
    for &call in &calls {
        for (own, bearer) in [(true, w.mcp), (false, o.mcp)] {
            let w = w.clone();
            tasks.push(tokio::spawn(async move {
                (own, w.store.read_call(bearer, call, at(4)).await)
            }));
        }
    }
    for task in tasks {
        match task.await.unwrap() {
            (true, Ok(Some(view))) => assert!(
                matches!(view.state, CallState::Answered | CallState::Delivered),
                "{view:?}"
            ),
            (false, Ok(None)) => {}
            (own, other) => panic!("read by its own app {own}: {other:?}"),
        }
    }
}

pub(super) async fn check_tokens_are_reached_by_their_own_app_and_the_relays_own(
    store: Arc<dyn Inspect>,
) {
    let w = world(store).await;
    let (a, b) = (app("https://a.example"), app("https://b.example"));
    let a_tab = app_token(&*w.store, w.owner, None, &a).await;
    let a_mcp = app_token(&*w.store, w.owner, Some(id()), &a).await;
    let b_tab = app_token(&*w.store, w.owner, None, &b).await;
    let page = Page {
        after: None,
        limit: 100,
    };
    let sorted = |mut ids: Vec<TokenId>| {
        ids.sort();
        ids
    };
    let owner_tokens = |reach: AppScope| {
        let store = w.store.clone();
        let owner = w.owner;
        async move {
            let rows = store.list_owner_tokens(owner, &reach, T0).await.unwrap();
            sorted(rows.into_iter().map(|t| t.id).collect())
        }
    };
    let mcp_tokens = |reach: AppScope| {
        let store = w.store.clone();
        let owner = w.owner;
        async move {
            let rows = store
                .list_mcp_tokens(owner, &reach, T0, page)
                .await
                .unwrap();
            sorted(rows.into_iter().map(|t| t.id).collect())
        }
    };
    assert_eq!(
        owner_tokens(AppScope::RelayApp).await,
        sorted(vec![w.tab.token_id, a_tab.token_id, b_tab.token_id]),
        "the relay's own app lists every app's sign-ins"
    );
    assert_eq!(owner_tokens(a.clone()).await, [a_tab.token_id]);
    assert_eq!(
        mcp_tokens(AppScope::RelayApp).await,
        sorted(vec![w.mcp.token_id, a_mcp.token_id])
    );
    assert_eq!(mcp_tokens(a.clone()).await, [a_mcp.token_id]);
    assert_eq!(mcp_tokens(b.clone()).await, Vec::<TokenId>::new());

    for (reach, token) in [
        (&a, w.tab.token_id),
        (&a, w.mcp.token_id),
        (&a, b_tab.token_id),
        (&b, a_mcp.token_id),
    ] {
        assert!(
            !w.store
                .revoke_token(w.owner, reach, token, None, T0)
                .await
                .unwrap(),
            "{reach} cannot revoke another app's token"
        );
        assert!(w.store.active_token(token, T0).await.unwrap().is_some());
    }
    assert!(
        w.store
            .revoke_token(w.owner, &a, a_mcp.token_id, Some(TokenKind::Mcp), T0)
            .await
            .unwrap()
    );
    assert!(
        w.store
            .revoke_token(
                w.owner,
                RELAY_APP,
                b_tab.token_id,
                Some(TokenKind::Owner),
                T0
            )
            .await
            .unwrap(),
        "the relay's own app revokes a host app's sign-in"
    );
    assert_eq!(owner_tokens(b).await, Vec::<TokenId>::new());
}
