//! The sweep's steps both backends share, each statement bound once.
//!
//! A sweep expires calls (each backend its own way: PostgreSQL reads only the lease ends since
//! its last sweep), then [`clear_and_end`] clears the bytes of ended calls, deletes calls past
//! their grace and ends expired sessions; the backend cancels those sessions' open calls (which
//! wakes its own waiters); then [`delete_ended`] deletes what has ended for longer than the
//! grace. The order is the same on both, and runs inside one write.

use sealpost_protocol::ids::{OwnerId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::rows::{self, Columns};
use super::{StoreResult, SweepStats, sql, time_to_sql};

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

/// Clears the bytes of calls past their expiry, deletes calls `grace_ms` past it, and ends the
/// sessions that reached their expiry; returns those, for the backend to cancel their calls.
pub(crate) async fn clear_and_end<DB>(
    conn: &mut DB::Connection,
    now: UnixMillis,
    grace_ms: u64,
    stats: &mut SweepStats,
) -> StoreResult<Vec<(OwnerId, SessionId)>>
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
    Ok(ended)
}

/// Deletes sessions ended `grace_ms` ago (once no call rows remain), expired sign-in codes, and
/// tokens `grace_ms` past their end.
pub(crate) async fn delete_ended<DB>(
    conn: &mut DB::Connection,
    now: UnixMillis,
    grace_ms: u64,
    stats: &mut SweepStats,
) -> StoreResult<()>
where
    DB: Database,
    DB::QueryResult: Affected,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    let past_grace = now.saturating_sub_ms(grace_ms);
    stats.deleted_sessions = run::<DB>(&mut *conn, sql::SWEEP_DELETE_SESSIONS, past_grace).await?;
    run::<DB>(&mut *conn, sql::SWEEP_DELETE_SIGNIN_CODES, now).await?;
    run::<DB>(&mut *conn, sql::SWEEP_DELETE_TOKENS, past_grace).await?;
    Ok(())
}
