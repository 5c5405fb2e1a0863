//! The sweep's steps both backends share, each statement bound once.
//!
//! A sweep expires calls, each backend its own way (PostgreSQL reads only the lease ends since
//! its last sweep); then [`after_expiry`] runs the rest in one order on both, inside the same
//! write, with the backend's own step for cancelling the calls of sessions that ended.

use sealpost_protocol::ids::{OwnerId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::rows::{self, Columns};
use super::{EndedSessions, StoreResult, SweepStats, sql, time_to_sql};

/// Rows a statement changed, whichever backend ran it.
pub(crate) trait Affected {
    fn affected(&self) -> u64;
}

impl Affected for sqlx::sqlite::SqliteQueryResult {
    fn affected(&self) -> u64 {
        self.rows_affected()
    }
}

impl Affected for sqlx::postgres::PgQueryResult {
    fn affected(&self) -> u64 {
        self.rows_affected()
    }
}

/// Runs `statement` with one time bound; the rows it changed.
async fn run<DB>(
    conn: &mut DB::Connection,
    statement: &'static str,
    at: UnixMillis,
) -> StoreResult<u64>
where
    DB: Database,
    DB::QueryResult: Affected,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    let done = sqlx::query::<DB>(statement)
        .bind(time_to_sql(at))
        .execute(conn)
        .await?;
    Ok(done.affected())
}

/// After calls have expired: clears the bytes of calls past their expiry, deletes calls
/// `grace_ms` past it, ends the sessions that reached their expiry and has `cancel` cancel
/// their open calls (the backend's own step, which wakes its waiters), then deletes sessions
/// ended `grace_ms` ago (once no call rows remain), expired sign-in codes and sign-in flows, and tokens
/// `grace_ms` past their end.
pub(crate) async fn after_expiry<DB>(
    conn: &mut DB::Connection,
    now: UnixMillis,
    grace_ms: u64,
    stats: &mut SweepStats,
    cancel: impl AsyncFnOnce(
        &mut DB::Connection,
        Vec<(OwnerId, SessionId)>,
    ) -> StoreResult<EndedSessions>,
) -> StoreResult<()>
where
    DB: Database,
    DB::QueryResult: Affected,
    DB::Row: Columns,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    let past_grace = now.saturating_sub_ms(grace_ms);
    stats.cleared_calls = run::<DB>(&mut *conn, sql::SWEEP_CLEAR_BYTES, now).await?;
    stats.deleted_calls = run::<DB>(&mut *conn, sql::SWEEP_DELETE_CALLS, past_grace).await?;
    let ended = sqlx::query::<DB>(sql::SWEEP_END_SESSIONS)
        .bind(time_to_sql(now))
        .fetch_all(&mut *conn)
        .await?;
    let ended = rows::owner_sessions(&ended)?;
    stats.ended_sessions = ended.len() as u64;
    stats.ended = cancel(&mut *conn, ended).await?;
    stats.deleted_sessions = run::<DB>(&mut *conn, sql::SWEEP_DELETE_SESSIONS, past_grace).await?;
    run::<DB>(&mut *conn, sql::SWEEP_DELETE_SIGNIN_CODES, now).await?;
    run::<DB>(&mut *conn, sql::SWEEP_DELETE_OIDC_FLOWS, now).await?;
    run::<DB>(&mut *conn, sql::SWEEP_DELETE_TOKENS, past_grace).await?;
    Ok(())
}
