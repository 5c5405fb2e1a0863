//! Migrations run through `sqlx::migrate!`. A database made by the relay's earlier runner (its
//! own `relay_migrations` table, the same schema) upgrades in place: its rows stay, its
//! bookkeeping moves to `_sqlx_migrations`, and opening it again changes nothing. A PostgreSQL
//! database from before in-place updates (migration 3) keeps its calls working in every state.

use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::ids::{CallId, OwnerId, PairId, SessionId, TokenId};
use sealpost_relay::scope::AppScope;
use sealpost_relay::store::{self, Bearer};
use sealpost_time::UnixMillis;
use sqlx::{AssertSqlSafe, Connection};

use sealpost_testkit::{TestDb, id};

/// The schema exactly as the earlier runner applied it (version 1).
const PREVIOUS_SQLITE: &str = include_str!("fixtures/previous_runner_sqlite_0001.sql");
const PREVIOUS_POSTGRES: &str = include_str!("fixtures/previous_runner_postgres_0001.sql");
/// The earlier runner's bookkeeping, as it created and filled it.
const PREVIOUS_TABLE: &str = "CREATE TABLE IF NOT EXISTS relay_migrations \
     (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";

const NOW: UnixMillis = UnixMillis::from_ms(1_700_000_000_000);
const HOUR: u64 = 3_600_000;

/// What the earlier relay left in the database: an owner with an MCP token, a live session
/// and an answered call.
struct Held {
    owner: OwnerId,
    token: TokenId,
    pair: PairId,
    session: SessionId,
    call: CallId,
}

impl Held {
    fn new() -> Self {
        Held {
            owner: id(),
            token: id(),
            pair: id(),
            session: id(),
            call: id(),
        }
    }

    /// The earlier runner's statements, then the rows, in `$N` SQL both backends accept.
    fn statements(&self, schema: &str) -> Vec<(String, Vec<Vec<u8>>)> {
        let (o, t, p, s, c) = (
            self.owner.as_bytes().to_vec(),
            self.token.as_bytes().to_vec(),
            self.pair.as_bytes().to_vec(),
            self.session.as_bytes().to_vec(),
            self.call.as_bytes().to_vec(),
        );
        vec![
            (PREVIOUS_TABLE.into(), vec![]),
            (schema.into(), vec![]),
            (
                format!("INSERT INTO relay_migrations (version, applied_at) VALUES (1, {NOW})"),
                vec![],
            ),
            (
                format!("INSERT INTO owners (id, name, created_at) VALUES ($1, 'kept', {NOW})"),
                vec![o.clone()],
            ),
            (
                format!(
                    "INSERT INTO tokens (id, owner_id, kind, pair_id, label, created_at, expires_at) \
                     VALUES ($1, $2, 'mcp', $3, 'plugin', {NOW}, {})",
                    NOW.saturating_add_ms(1000 * HOUR)
                ),
                vec![t, o.clone(), p.clone()],
            ),
            (
                format!(
                    "INSERT INTO sessions (owner_id, session_id, pair_id, hello, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, {NOW}, {})",
                    NOW.saturating_add_ms(HOUR)
                ),
                vec![o.clone(), s.clone(), p.clone(), b"hello".to_vec()],
            ),
            (
                format!(
                    "INSERT INTO calls (owner_id, call_id, session_id, pair_id, state, reply, created_at, expires_at, answered_at) \
                     VALUES ($1, $2, $3, $4, 'answered', $5, {NOW}, {}, {NOW})",
                    NOW.saturating_add_ms(HOUR)
                ),
                vec![o, c, s, p, b"reply".to_vec()],
            ),
        ]
    }

    /// Opens the database with the current relay and checks every row is there and works.
    async fn check_kept(&self, url: &str) {
        let store = store::open(url).await.expect("the earlier database opens");
        let owner = store
            .owner_by_name("kept")
            .await
            .unwrap()
            .expect("owner kept");
        assert_eq!(owner.id, self.owner);
        let token = store.active_token(self.token, NOW).await.unwrap();
        assert_eq!(token.expect("token kept").pair_id, Some(self.pair));
        let live = store
            .live_session(self.owner, &AppScope::RelayApp, self.pair, NOW)
            .await
            .unwrap();
        assert_eq!(live.expect("session kept").hello, b"hello");
        let bearer = Bearer {
            token_id: self.token,
            owner_id: self.owner,
            kind: TokenKind::Mcp,
            pair_id: Some(self.pair),
        };
        let view = store.read_call(bearer, self.call, NOW).await.unwrap();
        let view = view.expect("call kept");
        // The first read marks it delivered; both read the same reply.
        assert!(matches!(
            view.state,
            CallState::Answered | CallState::Delivered
        ));
        assert_eq!(view.reply.as_deref(), Some(&b"reply"[..]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_database_from_the_previous_runner_upgrades_with_its_data() {
    let db = TestDb::sqlite();
    let held = Held::new();
    {
        let path = db.url.trim_start_matches("sqlite://");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{path}?mode=rwc"))
            .await
            .unwrap();
        for (sql, binds) in held.statements(PREVIOUS_SQLITE) {
            if binds.is_empty() {
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .execute(&mut conn)
                    .await
                    .unwrap();
            } else {
                let mut query = sqlx::query(AssertSqlSafe(sql));
                for bind in binds {
                    query = query.bind(bind);
                }
                query.execute(&mut conn).await.unwrap();
            }
        }
        conn.close().await.unwrap();
    }
    held.check_kept(&db.url).await;
    // A second start finds nothing to do.
    held.check_kept(&db.url).await;
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(versions.first(), Some(&1));
    let old: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'relay_migrations'",
    )
    .fetch_optional(&mut conn)
    .await
    .unwrap();
    assert_eq!(old, None, "the earlier bookkeeping is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_the_previous_runner_upgrades_with_its_data() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let held = Held::new();
    {
        let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
        execute_postgres(&mut conn, held.statements(PREVIOUS_POSTGRES)).await;
        conn.close().await.unwrap();
    }
    held.check_kept(&db.url).await;
    held.check_kept(&db.url).await;
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(versions.first(), Some(&1));
    let old: Option<String> = sqlx::query_scalar("SELECT to_regclass('relay_migrations')::text")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(old, None, "the earlier bookkeeping is gone");
}

/// Runs `statements` (SQL and its `$N` byte parameters) in order on `conn`.
async fn execute_postgres(conn: &mut sqlx::PgConnection, statements: Vec<(String, Vec<Vec<u8>>)>) {
    for (sql, binds) in statements {
        if binds.is_empty() {
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut *conn)
                .await
                .unwrap();
        } else {
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for bind in binds {
                query = query.bind(bind);
            }
            query.execute(&mut *conn).await.unwrap();
        }
    }
}

/// A reply and a delivery mark change only these columns of a call. While no index of `calls`
/// covers one of them (not even in a partial index's WHERE), PostgreSQL can make those updates
/// in place, without new index entries (HOT).
const CHANGED_BY_REPLY_AND_MARK: [&str; 4] = ["state", "reply", "envelope", "answered_at"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_postgres_index_covers_what_a_reply_or_delivery_mark_changes() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    store::open(&db.url).await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let indexes: Vec<String> =
        sqlx::query_scalar("SELECT indexdef FROM pg_indexes WHERE tablename = 'calls'")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert!(indexes.len() >= 4, "{indexes:?}");
    for column in CHANGED_BY_REPLY_AND_MARK {
        let covering: Vec<String> = sqlx::query_scalar(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'calls' \
             AND indexdef ~ ('\\m' || $1 || '\\M')",
        )
        .bind(column)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert!(covering.is_empty(), "`{column}` is indexed: {covering:?}");
    }
}

/// A PostgreSQL database from before in-place updates (migrations 1 and 2), holding a call in
/// each state a call could then have without a lease: after the upgrade every call that left
/// `pending` has one, the pending call is still claimed, and a lapsed claim still expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_before_in_place_updates_upgrades_with_calls_in_every_state() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (owner, token, pair, session) = (
        id::<OwnerId>(),
        id::<TokenId>(),
        id::<PairId>(),
        id::<SessionId>(),
    );
    let calls = [
        ("pending", None, id::<CallId>()),
        ("claimed", Some(NOW.saturating_add_ms(30_000)), id()),
        ("cancelled", None, id()),
        ("expired", None, id()),
    ];
    let (o, s) = (owner.as_bytes().to_vec(), session.as_bytes().to_vec());
    let until = NOW.saturating_add_ms(HOUR);
    let mut rows = vec![
        (
            format!("INSERT INTO owners (id, name, created_at) VALUES ($1, 'kept', {NOW})"),
            vec![o.clone()],
        ),
        (
            format!(
                "INSERT INTO tokens (id, owner_id, kind, label, created_at, expires_at) \
                 VALUES ($1, $2, 'owner', 'tab', {NOW}, {until})"
            ),
            vec![token.as_bytes().to_vec(), o.clone()],
        ),
        (
            format!(
                "INSERT INTO sessions (owner_id, session_id, pair_id, hello, created_at, expires_at) \
                 VALUES ($1, $2, $3, 'hello', {NOW}, {until})"
            ),
            vec![o.clone(), s.clone(), pair.as_bytes().to_vec()],
        ),
    ];
    for (state, lease, call) in &calls {
        let lease = lease.map_or("NULL".to_owned(), |at| at.to_string());
        rows.push((
            format!(
                "INSERT INTO calls (owner_id, call_id, session_id, pair_id, state, envelope, \
                 created_at, expires_at, lease_expires_at) \
                 VALUES ($1, $2, $3, $4, '{state}', 'sealed', {NOW}, {until}, {lease})"
            ),
            vec![
                o.clone(),
                call.as_bytes().to_vec(),
                s.clone(),
                pair.as_bytes().to_vec(),
            ],
        ));
    }
    {
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        sqlx::migrate!("../../migrations/postgres")
            .run_to(2, &pool)
            .await
            .unwrap();
        execute_postgres(&mut pool.acquire().await.unwrap(), rows).await;
        pool.close().await;
    }

    let store = store::open(&db.url).await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let unleased: Vec<String> = sqlx::query_scalar(
        "SELECT state FROM calls WHERE state <> 'pending' AND lease_expires_at IS NULL",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        unleased,
        Vec::<String>::new(),
        "calls that left pending without a lease"
    );

    let bearer = Bearer {
        token_id: token,
        owner_id: owner,
        kind: TokenKind::Owner,
        pair_id: None,
    };
    let claimed = store
        .claim_calls(bearer, session, NOW, 10, 30_000)
        .await
        .unwrap();
    let claimed: Vec<CallId> = claimed.iter().map(|row| row.call_id).collect();
    assert_eq!(
        claimed,
        vec![calls[0].2],
        "only the pending call is claimed"
    );

    store
        .sweep(NOW.saturating_add_ms(60_000), HOUR)
        .await
        .unwrap();
    let state: String = sqlx::query_scalar("SELECT state FROM calls WHERE call_id = $1")
        .bind(calls[1].2.as_bytes().to_vec())
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        state,
        CallState::Expired.as_str(),
        "the lapsed claim expires"
    );
}
