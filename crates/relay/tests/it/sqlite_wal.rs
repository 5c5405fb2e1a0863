//! SQLite's WAL is checkpointed by a connection of its own (the writer never runs a checkpoint
//! in a commit): the data reaches the database file while the relay keeps writing.

use std::time::Duration;

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, SessionId};
use sealpost_relay::scope::AppScope;
use sealpost_relay::store::{self, Bearer, NewCall, NewSession, Store, TokenRow};
use sealpost_time::UnixMillis;

use sealpost_testkit::{TestDb, id};

/// An owner with a live session and an MCP token for it: (owner, session, bearer, now).
async fn live_session(store: &dyn Store, name: &str) -> (OwnerId, SessionId, Bearer, UnixMillis) {
    let (owner, session, pair, now) = (id(), id(), id(), sealpost_relay::clock::now_ms());
    store.create_owner(owner, name, now).await.unwrap();
    let session_row = NewSession {
        owner_id: owner,
        session_id: session,
        pair_id: pair,
        hello: b"hello".to_vec(),
        created_at: now,
        expires_at: now.saturating_add_ms(3_600_000),
        app: AppScope::RelayApp,
        started_by: None,
    };
    store.create_session(&session_row, 10).await.unwrap();
    let token = TokenRow {
        id: id(),
        owner_id: owner,
        kind: TokenKind::Mcp,
        pair_id: Some(pair),
        label: name.into(),
        created_at: now,
        expires_at: now.saturating_add_ms(3_600_000),
        app: AppScope::RelayApp,
        lifetime_ends_at: None,
        parent_id: None,
    };
    store.create_token(&token).await.unwrap();
    let bearer = Bearer {
        token_id: token.id,
        owner_id: owner,
        kind: TokenKind::Mcp,
        pair_id: Some(pair),
    };
    (owner, session, bearer, now)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_checkpointed_into_the_database_file_in_the_background() {
    let db = TestDb::sqlite();
    let store = store::open(&db.url).await.unwrap();
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let file_size = || std::fs::metadata(&path).unwrap().len();
    let (owner, session, bearer, now) = live_session(store.as_ref(), "wal").await;
    let before = file_size();
    // About 4 MiB of envelopes: far more than the file holds before, all first written to the WAL.
    for _ in 0..1_000 {
        let call = NewCall {
            owner_id: owner,
            session_id: session,
            call_id: id(),
            envelope: vec![7; 4096],
            created_at: now,
            expires_at: now.saturating_add_ms(60_000),
        };
        store.post_call(bearer, &call, None).await.unwrap();
    }
    // The checkpointer copies the WAL into the file within a few of its rounds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while file_size() < before + 4_000_000 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the database file stayed at {} bytes (was {before})",
            file_size()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_envelope_the_sweeper_cleared_is_not_left_in_the_database_file() {
    use sqlx::Connection as _;
    let db = TestDb::sqlite();
    let store = store::open(&db.url).await.unwrap();
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let (owner, session, bearer, now) = live_session(store.as_ref(), "clear").await;
    // Ciphertext as the relay sees it, marked so it can be found; large enough for overflow
    // pages.
    let canary = b"SEALPOST-CLEARED-CIPHERTEXT-CANARY";
    let envelope: Vec<u8> = canary.iter().copied().cycle().take(16 * 1024).collect();
    let call = NewCall {
        owner_id: owner,
        session_id: session,
        call_id: id(),
        envelope,
        created_at: now,
        expires_at: now.saturating_add_ms(1_000),
    };
    store.post_call(bearer, &call, None).await.unwrap();
    // Past the call's expiry and the grace: its bytes are cleared, then its row deleted.
    store.sweep(now.saturating_add_ms(10_000), 0).await.unwrap();
    store.sweep(now.saturating_add_ms(20_000), 0).await.unwrap();
    // Everything in the WAL into the file, and the WAL emptied.
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    for file in [path.clone(), format!("{path}-wal")] {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !bytes.windows(canary.len()).any(|w| w == canary),
            "{file} still holds a cleared envelope"
        );
    }
}
