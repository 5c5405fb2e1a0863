//! SQLite backend: one writer connection with group commit, plus a pool of read connections.
//!
//! WAL with `synchronous=NORMAL`: readers never block the writer, and a commit costs no fsync
//! (durability across power loss is bounded by the last checkpoint; a process crash loses
//! nothing committed). Every write goes through one task that owns the only write connection
//! (see `sqlite_writer`), which puts the writes of concurrent requests into one transaction and
//! answers each request only after that transaction commits.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::Id16;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection, Row};

use super::hot_path::{DeliveryMarks, MarkOutcome, SeenThrottle};
use super::sqlite_writer::{Completion, Job, Writer};
use super::{
    CallView, ClaimedRow, HeldBytes, LiveSession, Ms, NewCall, NewSession, OwnerRow, Scope,
    SessionInfo, Store, StoreError, StoreResult, SweepStats, TokenRow, call_view, id_from, migrate,
    parse_kind, parse_reason, parse_state,
};
use crate::wake::Hub;

/// Read connections: enough for the HTTP workers on a small machine; reads are short.
const READ_POOL_SIZE: u32 = 4;
/// How long a connection waits on a lock held by another process (e.g. the admin CLI).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite store.
#[derive(Debug)]
pub struct SqliteStore {
    writer: Writer,
    readers: SqlitePool,
    pub(super) seen: SeenThrottle,
    deliveries: Arc<DeliveryMarks>,
}

pub(super) fn b(id: Id16) -> Vec<u8> {
    id.0.to_vec()
}

impl SqliteStore {
    /// Opens (creating if missing) the database file a `sqlite://PATH` URL names and migrates it.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let mut conn = SqliteConnection::connect_with(&options).await?;
        run_migrations(&mut conn).await?;
        let readers = SqlitePoolOptions::new()
            .max_connections(READ_POOL_SIZE)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self {
            writer: Writer::spawn(conn),
            readers,
            seen: SeenThrottle::default(),
            deliveries: Arc::default(),
        })
    }

    pub(super) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        self.writer.run(false, f).await
    }

    /// Like `write`, inside a savepoint: a multi-statement operation that fails leaves nothing.
    pub(super) async fn write_atomic<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        self.writer.run(true, f).await
    }

    /// Queues one write of every delivery mark taken so far; reads do not wait for it.
    async fn flush_delivery_marks(&self) -> StoreResult<()> {
        let deliveries = self.deliveries.clone();
        let job: Job = Box::new(move |conn| {
            Box::pin(async move {
                let marks = deliveries.take_queued();
                let written = mark_delivered(conn, &marks).await;
                if let Err(error) = &written {
                    tracing::warn!(%error, marks = marks.len(), "could not mark calls delivered");
                }
                let completion: Completion = Box::new(move |_| deliveries.settled(&marks));
                (written.is_ok(), completion)
            })
        });
        self.writer.submit(job).await
    }
}

/// Most delivery marks one statement carries.
const MARKS_PER_STATEMENT: usize = 100;

async fn mark_delivered(
    conn: &mut SqliteConnection,
    marks: &[(Id16, Id16)],
) -> Result<(), sqlx::Error> {
    for chunk in marks.chunks(MARKS_PER_STATEMENT) {
        let pairs = vec!["(?, ?)"; chunk.len()].join(", ");
        let sql = format!(
            "UPDATE calls SET state = 'delivered' WHERE state = 'answered' \
             AND (owner_id, call_id) IN (VALUES {pairs})"
        );
        // Safe: the text varies only in how many placeholders it has; every value is bound.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (owner_id, call_id) in chunk {
            query = query.bind(b(*owner_id)).bind(b(*call_id));
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

async fn run_migrations(conn: &mut SqliteConnection) -> StoreResult<()> {
    sqlx::query(migrate::CREATE_TABLE)
        .execute(&mut *conn)
        .await?;
    for migration in migrate::SQLITE {
        let done: Option<i64> =
            sqlx::query_scalar("SELECT version FROM relay_migrations WHERE version = ?1")
                .bind(migration.version)
                .fetch_optional(&mut *conn)
                .await?;
        if done.is_some() {
            continue;
        }
        let mut tx = conn.begin().await?;
        sqlx::raw_sql(migration.sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO relay_migrations (version, applied_at) VALUES (?1, ?2)")
            .bind(migration.version)
            .bind(crate::clock::now_ms())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
}

pub(super) fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn owner_row(row: &SqliteRow) -> StoreResult<OwnerRow> {
    Ok(OwnerRow {
        id: id_from(row.try_get("id")?)?,
        name: row.try_get("name")?,
        created_at: row.try_get("created_at")?,
        disabled: row.try_get::<Option<i64>, _>("disabled_at")?.is_some(),
    })
}

fn token_row(row: &SqliteRow) -> StoreResult<TokenRow> {
    let pair_id: Option<Vec<u8>> = row.try_get("pair_id")?;
    Ok(TokenRow {
        id: id_from(row.try_get("id")?)?,
        owner_id: id_from(row.try_get("owner_id")?)?,
        kind: parse_kind(row.try_get("kind")?)?,
        pair_id: pair_id.map(id_from).transpose()?,
        label: row.try_get("label")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

/// Ends the given live sessions' open calls; returns the cancelled call ids.
pub(super) async fn cancel_open_calls(
    conn: &mut SqliteConnection,
    owner_id: Id16,
    session_id: Id16,
) -> StoreResult<Vec<Id16>> {
    let rows = sqlx::query(
        "UPDATE calls SET state = 'cancelled', cancel_reason = 'session_ended', envelope = NULL \
         WHERE owner_id = ?1 AND session_id = ?2 AND state IN ('pending', 'claimed') \
         RETURNING call_id",
    )
    .bind(b(owner_id))
    .bind(b(session_id))
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|r| id_from(r.try_get("call_id")?))
        .collect()
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.readers).await?;
        Ok(())
    }

    fn start_wakeup_listener(
        &self,
        _hub: Arc<Hub>,
        _shutdown: tokio_util::sync::CancellationToken,
    ) {
        // One process owns an SQLite file: every wake-up is already in-process.
    }

    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        let name = name.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query("INSERT INTO relay_secrets (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING")
                    .bind(&name)
                    .bind(fresh)
                    .execute(&mut *conn)
                    .await?;
                Ok(sqlx::query_scalar("SELECT value FROM relay_secrets WHERE name = ?1")
                    .bind(&name)
                    .fetch_one(&mut *conn)
                    .await?)
            })
        })
        .await
    }

    async fn create_owner(&self, id: Id16, name: &str, now: Ms) -> StoreResult<()> {
        let name = name.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                match sqlx::query("INSERT INTO owners (id, name, created_at) VALUES (?1, ?2, ?3)")
                    .bind(b(id))
                    .bind(&name)
                    .bind(now)
                    .execute(&mut *conn)
                    .await
                {
                    Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate),
                    other => other.map(|_| ()).map_err(Into::into),
                }
            })
        })
        .await
    }

    async fn list_owners(&self) -> StoreResult<Vec<OwnerRow>> {
        let rows = sqlx::query("SELECT * FROM owners ORDER BY name")
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(owner_row).collect()
    }

    async fn owner_by_name(&self, name: &str) -> StoreResult<Option<OwnerRow>> {
        let row = sqlx::query("SELECT * FROM owners WHERE name = ?1")
            .bind(name)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(owner_row).transpose()
    }

    async fn owner_by_id(&self, id: Id16) -> StoreResult<Option<OwnerRow>> {
        let row = sqlx::query("SELECT * FROM owners WHERE id = ?1")
            .bind(b(id))
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(owner_row).transpose()
    }

    async fn disable_owner(&self, name: &str, now: Ms) -> StoreResult<bool> {
        let name = name.to_owned();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let id: Option<Vec<u8>> =
                    sqlx::query_scalar("SELECT id FROM owners WHERE name = ?1")
                        .bind(&name)
                        .fetch_optional(&mut *conn)
                        .await?;
                let Some(id) = id else { return Ok(false) };
                sqlx::query(
                    "UPDATE owners SET disabled_at = COALESCE(disabled_at, ?2) WHERE id = ?1",
                )
                .bind(&id)
                .bind(now)
                .execute(&mut *conn)
                .await?;
                sqlx::query(
                    "UPDATE tokens SET revoked_at = ?2 WHERE owner_id = ?1 AND revoked_at IS NULL",
                )
                .bind(&id)
                .bind(now)
                .execute(&mut *conn)
                .await?;
                sqlx::query("DELETE FROM signin_codes WHERE owner_id = ?1")
                    .bind(&id)
                    .execute(&mut *conn)
                    .await?;
                Ok(true)
            })
        })
        .await
    }

    async fn create_signin_code(
        &self,
        code_hash: [u8; 32],
        owner_id: Id16,
        expires_at: Ms,
    ) -> StoreResult<()> {
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query("INSERT INTO signin_codes (code_hash, owner_id, expires_at) VALUES (?1, ?2, ?3)")
                    .bind(code_hash.to_vec())
                    .bind(b(owner_id))
                    .bind(expires_at)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    async fn consume_signin_code(&self, code_hash: [u8; 32], now: Ms) -> StoreResult<Option<Id16>> {
        self.write(move |conn| {
            Box::pin(async move {
                let owner: Option<Vec<u8>> = sqlx::query_scalar(
                    "DELETE FROM signin_codes WHERE code_hash = ?1 AND expires_at > ?2 \
                     AND owner_id IN (SELECT id FROM owners WHERE disabled_at IS NULL) \
                     RETURNING owner_id",
                )
                .bind(code_hash.to_vec())
                .bind(now)
                .fetch_optional(&mut *conn)
                .await?;
                owner.map(id_from).transpose()
            })
        })
        .await
    }

    async fn create_token(&self, token: &TokenRow) -> StoreResult<()> {
        let t = token.clone();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO tokens (id, owner_id, kind, pair_id, label, created_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .bind(b(t.id))
                .bind(b(t.owner_id))
                .bind(t.kind.as_str())
                .bind(t.pair_id.map(b))
                .bind(&t.label)
                .bind(t.created_at)
                .bind(t.expires_at)
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn active_token(&self, id: Id16, now: Ms) -> StoreResult<Option<TokenRow>> {
        let row = sqlx::query(
            "SELECT t.* FROM tokens t JOIN owners o ON o.id = t.owner_id \
             WHERE t.id = ?1 AND t.revoked_at IS NULL AND t.expires_at > ?2 AND o.disabled_at IS NULL",
        )
        .bind(b(id))
        .bind(now)
        .fetch_optional(&self.readers)
        .await?;
        row.as_ref().map(token_row).transpose()
    }

    async fn extend_token(&self, id: Id16, expires_at: Ms, now: Ms) -> StoreResult<bool> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE tokens SET expires_at = MAX(expires_at, ?2) \
                     WHERE id = ?1 AND revoked_at IS NULL AND expires_at > ?3",
                )
                .bind(b(id))
                .bind(expires_at)
                .bind(now)
                .execute(&mut *conn)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    async fn revoke_token(
        &self,
        owner_id: Id16,
        id: Id16,
        kind: Option<TokenKind>,
        now: Ms,
    ) -> StoreResult<bool> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?3) \
                     WHERE id = ?1 AND owner_id = ?2 AND (?4 IS NULL OR kind = ?4)",
                )
                .bind(b(id))
                .bind(b(owner_id))
                .bind(now)
                .bind(kind.map(TokenKind::as_str))
                .execute(&mut *conn)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    async fn list_mcp_tokens(&self, owner_id: Id16, now: Ms) -> StoreResult<Vec<TokenRow>> {
        let rows = sqlx::query(
            "SELECT * FROM tokens WHERE owner_id = ?1 AND kind = 'mcp' \
             AND revoked_at IS NULL AND expires_at > ?2 ORDER BY created_at",
        )
        .bind(b(owner_id))
        .bind(now)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(token_row).collect()
    }

    async fn create_session(&self, session: &NewSession, max_live: u32) -> StoreResult<Vec<Id16>> {
        let s = session.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let others: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM sessions WHERE owner_id = ?1 AND pair_id != ?2 \
                     AND ended_at IS NULL AND expires_at > ?3",
                )
                .bind(b(s.owner_id))
                .bind(b(s.pair_id))
                .bind(s.created_at)
                .fetch_one(&mut *conn)
                .await?;
                if others >= i64::from(max_live) {
                    return Err(StoreError::TooManySessions);
                }
                let replaced = sqlx::query(
                    "UPDATE sessions SET ended_at = ?3, hello = NULL \
                     WHERE owner_id = ?1 AND pair_id = ?2 AND ended_at IS NULL RETURNING session_id",
                )
                .bind(b(s.owner_id))
                .bind(b(s.pair_id))
                .bind(s.created_at)
                .fetch_all(&mut *conn)
                .await?;
                let inserted = sqlx::query(
                    "INSERT INTO sessions (owner_id, session_id, pair_id, hello, created_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .bind(b(s.owner_id))
                .bind(b(s.session_id))
                .bind(b(s.pair_id))
                .bind(&s.hello)
                .bind(s.created_at)
                .bind(s.expires_at)
                .execute(&mut *conn)
                .await;
                match inserted {
                    Err(e) if is_unique_violation(&e) => return Err(StoreError::Duplicate),
                    other => other?,
                };
                let mut cancelled = Vec::new();
                for row in replaced {
                    let old = id_from(row.try_get("session_id")?)?;
                    cancelled.extend(cancel_open_calls(conn, s.owner_id, old).await?);
                }
                Ok(cancelled)
            })
        })
        .await
    }

    async fn live_session(
        &self,
        owner_id: Id16,
        pair_id: Id16,
        now: Ms,
    ) -> StoreResult<Option<LiveSession>> {
        let row = sqlx::query(
            "SELECT session_id, hello, expires_at, claimer_seen_at FROM sessions \
             WHERE owner_id = ?1 AND pair_id = ?2 AND ended_at IS NULL AND expires_at > ?3 \
             ORDER BY created_at DESC LIMIT 1",
        )
        .bind(b(owner_id))
        .bind(b(pair_id))
        .bind(now)
        .fetch_optional(&self.readers)
        .await?;
        row.map(|row| {
            Ok(LiveSession {
                session_id: id_from(row.try_get("session_id")?)?,
                hello: row
                    .try_get::<Option<Vec<u8>>, _>("hello")?
                    .unwrap_or_default(),
                expires_at: row.try_get("expires_at")?,
                claimer_seen_at: row.try_get("claimer_seen_at")?,
            })
        })
        .transpose()
    }

    async fn session_info(
        &self,
        owner_id: Id16,
        session_id: Id16,
    ) -> StoreResult<Option<SessionInfo>> {
        let row = sqlx::query(
            "SELECT pair_id, expires_at, ended_at FROM sessions WHERE owner_id = ?1 AND session_id = ?2",
        )
        .bind(b(owner_id))
        .bind(b(session_id))
        .fetch_optional(&self.readers)
        .await?;
        row.map(|row| {
            Ok(SessionInfo {
                session_id,
                pair_id: id_from(row.try_get("pair_id")?)?,
                expires_at: row.try_get("expires_at")?,
                ended: row.try_get::<Option<i64>, _>("ended_at")?.is_some(),
            })
        })
        .transpose()
    }

    async fn end_session(
        &self,
        owner_id: Id16,
        session_id: Id16,
        now: Ms,
    ) -> StoreResult<Vec<Id16>> {
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let exists: Option<i64> = sqlx::query_scalar(
                    "SELECT 1 FROM sessions WHERE owner_id = ?1 AND session_id = ?2",
                )
                .bind(b(owner_id))
                .bind(b(session_id))
                .fetch_optional(&mut *conn)
                .await?;
                if exists.is_none() {
                    return Err(StoreError::NotFound);
                }
                sqlx::query(
                    "UPDATE sessions SET ended_at = ?3, hello = NULL \
                     WHERE owner_id = ?1 AND session_id = ?2 AND ended_at IS NULL",
                )
                .bind(b(owner_id))
                .bind(b(session_id))
                .bind(now)
                .execute(&mut *conn)
                .await?;
                cancel_open_calls(conn, owner_id, session_id).await
            })
        })
        .await
    }

    async fn post_call(
        &self,
        call: &NewCall,
        pair_id: Option<Id16>,
        max_pending: Option<u32>,
    ) -> StoreResult<Ms> {
        self.post_call_impl(call, pair_id, max_pending).await
    }

    async fn claim_calls(
        &self,
        owner_id: Id16,
        session_id: Id16,
        now: Ms,
        max: u32,
        lease_ms: Ms,
    ) -> StoreResult<Vec<ClaimedRow>> {
        self.claim_calls_impl(owner_id, session_id, now, max, lease_ms)
            .await
    }

    async fn reply_call(
        &self,
        owner_id: Id16,
        call_id: Id16,
        reply: Vec<u8>,
        now: Ms,
    ) -> StoreResult<()> {
        self.reply_call_impl(owner_id, call_id, reply, now).await
    }

    async fn cancel_call(
        &self,
        scope: Scope,
        call_id: Id16,
        reason: CancelReason,
        now: Ms,
    ) -> StoreResult<()> {
        self.cancel_call_impl(scope, call_id, reason, now).await
    }

    async fn read_call(
        &self,
        scope: Scope,
        call_id: Id16,
        now: Ms,
    ) -> StoreResult<Option<CallView>> {
        let row = sqlx::query(
            "SELECT state, reply, cancel_reason, expires_at, lease_expires_at FROM calls \
             WHERE owner_id = ?1 AND call_id = ?2 AND (?3 IS NULL OR pair_id = ?3)",
        )
        .bind(b(scope.owner_id))
        .bind(b(call_id))
        .bind(scope.pair_id.map(b))
        .fetch_optional(&self.readers)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut view = call_view(
            parse_state(row.try_get("state")?)?,
            row.try_get("reply")?,
            parse_reason(row.try_get("cancel_reason")?),
            row.try_get("expires_at")?,
            row.try_get("lease_expires_at")?,
            now,
        );
        if view.state == CallState::Answered {
            match self.deliveries.mark(scope.owner_id, call_id) {
                MarkOutcome::AlreadyMarked => view.state = CallState::Delivered,
                MarkOutcome::MarkedStartFlush => self.flush_delivery_marks().await?,
                MarkOutcome::Marked => {}
            }
        }
        Ok(Some(view))
    }

    async fn sweep(&self, now: Ms, grace_ms: Ms) -> StoreResult<SweepStats> {
        self.sweep_impl(now, grace_ms).await
    }

    async fn held_bytes(&self, owner_id: Id16, call_id: Id16) -> StoreResult<Option<HeldBytes>> {
        let row = sqlx::query(
            "SELECT envelope IS NOT NULL AS e, reply IS NOT NULL AS r FROM calls WHERE owner_id = ?1 AND call_id = ?2",
        )
        .bind(b(owner_id))
        .bind(b(call_id))
        .fetch_optional(&self.readers)
        .await?;
        row.map(|row| {
            Ok(HeldBytes {
                envelope: row.try_get("e")?,
                reply: row.try_get("r")?,
            })
        })
        .transpose()
    }

    async fn count_calls_by_state(&self) -> StoreResult<Vec<(CallState, i64)>> {
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM calls GROUP BY state")
            .fetch_all(&self.readers)
            .await?;
        rows.iter()
            .map(|row| Ok((parse_state(row.try_get("state")?)?, row.try_get("n")?)))
            .collect()
    }
}
