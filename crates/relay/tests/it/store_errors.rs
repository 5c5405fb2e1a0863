//! A database failure keeps its cause: the store error holds the driver's error as its source,
//! and the log line the relay writes for the 500 carries the whole chain, so an operator sees
//! why, not only that, the database failed.

use std::io::Write;
use std::sync::{Arc, Mutex};

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, SessionId};
use sealpost_relay::http::error::ApiError;
use sealpost_relay::scope::AppScope;
use sealpost_relay::store::{Bearer, ErrorChain, NewCall, NewSession, Store, StoreError, TokenRow};
use sealpost_time::UnixMillis;
use sqlx::Connection;

use sealpost_testkit::{TestDb, id};

/// Log lines written while `f` runs.
fn logs_of(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
}

/// The driver's error is the source of `error`, and the chain names the missing table.
fn assert_cause_kept(error: StoreError) {
    let mut source = std::error::Error::source(&error);
    let mut found_driver_error = false;
    while let Some(cause) = source {
        found_driver_error |= cause.downcast_ref::<sqlx::Error>().is_some();
        source = cause.source();
    }
    assert!(
        found_driver_error,
        "no sqlx::Error among the sources of {error:?}"
    );
    let chain = ErrorChain(&error).to_string();
    assert!(chain.contains("no such table: calls"), "{chain}");
    let logged = logs_of(|| drop(ApiError::from(error)));
    assert!(
        logged.contains("no such table: calls"),
        "the 500's log line: {logged}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_failure_keeps_its_cause_up_to_the_log_line_of_the_500() {
    let db = TestDb::sqlite();
    let store = db.open().await;
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("DROP TABLE calls")
        .execute(&mut conn)
        .await
        .unwrap();

    // A single statement on the read pool.
    let error = store.count_calls_by_state().await.unwrap_err();
    assert_cause_kept(error);

    // A grouped statement of the writer, whose one failure answers every request it carried.
    let bearer = Bearer {
        token_id: id(),
        owner_id: id(),
        kind: TokenKind::Mcp,
        pair_id: Some(id()),
    };
    let call = NewCall {
        owner_id: bearer.owner_id,
        session_id: id(),
        call_id: id(),
        envelope: vec![1],
        created_at: UnixMillis::from_ms(1),
        expires_at: UnixMillis::from_ms(2),
    };
    let error = store.post_call(bearer, &call, None).await.unwrap_err();
    assert_cause_kept(error);
}

/// PostgreSQL: pooled connections that the server cut while they sat idle (a restart, a
/// failover) are found out before use, so the first request after a quiet spell does not fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_cut_while_idle_are_replaced_before_use() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let store = db.open().await;
    // Fill the pool with open connections.
    let opened: Vec<_> = (0..4).map(|_| store.count_calls_by_state()).collect();
    for counted in futures_util::future::join_all(opened).await {
        counted.unwrap();
    }
    let database = db.url.rsplit_once('/').unwrap().1.to_owned();
    let admin_url = sealpost_testkit::postgres_admin_url().unwrap();
    let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
    let cut: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()) AS t",
    )
    .bind(&database)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(cut > 0, "no connection of the store's to cut");
    // Every backend the store held has gone (the server has closed their sockets) before the
    // store is used again.
    // A wait for a state, not a guessed duration, with a guard against a hang.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cut backends never went"
        );
        let left: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(&database)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // The one deliberate sleep (docs/TESTING.md): being idle is the condition under test. The
    // store pings a connection idle for a second or more (`PING_IF_IDLE_FOR`) before use.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    for _ in 0..4 {
        store
            .count_calls_by_state()
            .await
            .expect("a cut connection was handed out");
    }
}

/// PostgreSQL: a grouped statement the server refuses commits nothing, so each operation it
/// carried runs again alone and gets its own answer. The refusal is the server's own: a
/// trigger that refuses to store more than one call in one statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_operations_of_a_group_the_server_refused_run_again_alone() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let store = db.open().await;
    install(
        &db,
        "CREATE FUNCTION one_call_at_a_time() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF (SELECT COUNT(*) FROM added) > 1 THEN \
         RAISE EXCEPTION 'more than one call in one statement'; END IF; RETURN NULL; END $$; \
         CREATE TRIGGER one_call_at_a_time AFTER INSERT ON calls REFERENCING NEW TABLE AS added \
         FOR EACH STATEMENT EXECUTE FUNCTION one_call_at_a_time();",
    )
    .await;
    let pairing = Arc::new(OnePairing::new(&*store).await);
    let posts: Vec<_> = (0..32)
        .map(|_| {
            let (store, pairing) = (store.clone(), pairing.clone());
            tokio::spawn(async move { store.post_call(pairing.mcp, &pairing.call(), None).await })
        })
        .collect();
    for post in posts {
        let answer = post.await.unwrap();
        assert!(answer.is_ok(), "each post stored alone: {answer:?}");
    }
    assert!(
        store.refused_groups() > 0,
        "posts were grouped, and refused"
    );
}

/// PostgreSQL: writing `claimer_seen_at` is advisory, so when it fails (here a trigger refuses
/// every update of a session) the claim still hands over the calls it claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_claimer_seen_write_does_not_cost_the_claim_its_calls() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let store = db.open().await;
    let pairing = OnePairing::new(&*store).await;
    let call = pairing.call();
    store.post_call(pairing.mcp, &call, None).await.unwrap();
    install(
        &db,
        "CREATE FUNCTION no_session_updates() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN RAISE EXCEPTION 'sessions are read-only'; END $$; \
         CREATE TRIGGER no_session_updates BEFORE UPDATE ON sessions \
         FOR EACH ROW EXECUTE FUNCTION no_session_updates();",
    )
    .await;
    let claimed = store
        .claim_calls(pairing.tab, pairing.session, pairing.now, 10, 30_000)
        .await;
    let claimed = claimed.expect("the claim stands");
    assert_eq!(claimed.len(), 1, "the claimed call is handed over");
    assert_eq!(claimed[0].call_id, call.call_id);
}

/// Runs `sql` (a trigger that causes a fault) on the test's database.
async fn install(db: &TestDb, sql: &'static str) {
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
}

/// An owner with one live session of one pairing, the pairing's MCP token and the owner's own
/// token, all lasting an hour from `now`.
struct OnePairing {
    owner: OwnerId,
    session: SessionId,
    mcp: Bearer,
    tab: Bearer,
    now: UnixMillis,
}

impl OnePairing {
    async fn new(store: &dyn Store) -> Self {
        let now = sealpost_relay::clock::now_ms();
        let (owner, session, pair) = (id(), id(), id());
        store
            .create_owner(owner, &format!("owner-{owner}"), now)
            .await
            .unwrap();
        let new_session = NewSession {
            owner_id: owner,
            session_id: session,
            pair_id: pair,
            hello: b"hello".to_vec(),
            created_at: now,
            expires_at: now.saturating_add_ms(HOUR_MS),
            app: AppScope::RelayApp,
            started_by: None,
        };
        store.create_session(&new_session, 10).await.unwrap();
        let mut bearers = Vec::new();
        for (kind, pair_id) in [(TokenKind::Mcp, Some(pair)), (TokenKind::Owner, None)] {
            let token = TokenRow {
                id: id(),
                owner_id: owner,
                kind,
                pair_id,
                label: "one pairing".into(),
                created_at: now,
                expires_at: now.saturating_add_ms(HOUR_MS),
                app: AppScope::RelayApp,
                lifetime_ends_at: None,
                parent_id: None,
            };
            store.create_token(&token).await.unwrap();
            bearers.push(Bearer {
                token_id: token.id,
                owner_id: owner,
                kind,
                pair_id,
            });
        }
        OnePairing {
            owner,
            session,
            mcp: bearers[0],
            tab: bearers[1],
            now,
        }
    }

    /// A new call in the session, lasting an hour.
    fn call(&self) -> NewCall {
        NewCall {
            owner_id: self.owner,
            session_id: self.session,
            call_id: id(),
            envelope: vec![1],
            created_at: self.now,
            expires_at: self.now.saturating_add_ms(HOUR_MS),
        }
    }
}

const HOUR_MS: u64 = 3_600_000;
