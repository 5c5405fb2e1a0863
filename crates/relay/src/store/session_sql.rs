//! The session statements with their arguments bound, written once for both backends.
//!
//! [`super::sql`] shares the text; this shares the binding, so the order of a statement's
//! values cannot drift between SQLite and PostgreSQL. Each backend still owns its control
//! flow: SQLite runs these on its writer, PostgreSQL in a transaction that also locks and
//! notifies.

use sealpost_protocol::ids::Id16;
use sealpost_time::UnixMillis;
use sqlx::query::{Query, QueryScalar};
use sqlx::{Database, Encode, Type};

use super::sql;
use super::{CatalogUpdate, NewSession, b, time_to_sql};
use crate::scope::AppScope;

/// A statement of `DB` with its values bound.
type Bound<DB> = Query<'static, DB, <DB as Database>::Arguments>;

/// How many live sessions the owner has, in every app, but the one this session replaces.
pub(crate) fn count_other_live<DB>(s: &NewSession) -> QueryScalar<'static, DB, i64, DB::Arguments>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    sqlx::query_scalar(sql::COUNT_OTHER_LIVE_SESSIONS)
        .bind(b(s.owner_id))
        .bind(b(s.pair_id))
        .bind(time_to_sql(s.created_at))
        .bind(app(&s.app))
}

/// An app as its column holds it, owned so a statement can keep it.
fn app(app: &AppScope) -> String {
    app.stored().to_owned()
}

/// Ends the pairing's live session in the new session's app; returns `owner_id, session_id`
/// of each ended.
pub(crate) fn end_pairing_sessions<DB>(s: &NewSession) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::END_PAIRING_SESSIONS)
        .bind(b(s.owner_id))
        .bind(b(s.pair_id))
        .bind(time_to_sql(s.created_at))
        .bind(app(&s.app))
}

/// Inserts the new session.
pub(crate) fn insert<DB>(s: &NewSession) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::INSERT_SESSION)
        .bind(b(s.owner_id))
        .bind(b(s.session_id))
        .bind(b(s.pair_id))
        .bind(s.hello.clone())
        .bind(time_to_sql(s.created_at))
        .bind(time_to_sql(s.expires_at))
        .bind(app(&s.app))
}

/// The pairing's live session of `scope` at `now`, as [`super::rows::live_session`] reads it.
pub(crate) fn select_live<DB>(
    owner_id: Id16,
    scope: &AppScope,
    pair_id: Id16,
    now: UnixMillis,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::SELECT_LIVE_SESSION)
        .bind(b(owner_id))
        .bind(b(pair_id))
        .bind(time_to_sql(now))
        .bind(app(scope))
}

/// Keeps update `seq` of a live session's catalog when it is newer than the one kept; returns
/// the session's id when it was kept.
pub(crate) fn set_catalog_update<DB>(u: &CatalogUpdate) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::SET_CATALOG_UPDATE)
        .bind(b(u.owner_id))
        .bind(b(u.session_id))
        .bind(time_to_sql(u.now))
        .bind(u.update.clone())
        // Numbers past i64 are refused before they get here.
        .bind(i64::try_from(u.seq).unwrap_or(i64::MAX))
        .bind(app(&u.app))
}

/// The session's id if it is live at `now` in `scope` (why an update was not kept: gone, or
/// older).
pub(crate) fn select_session_live<DB>(u: &CatalogUpdate) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    by_session(sql::SELECT_SESSION_LIVE, u.owner_id, u.session_id, u.now).bind(app(&u.app))
}

/// Records that the plugin looked the session up at `now` (a live session only).
pub(crate) fn mark_plugin_seen<DB>(owner_id: Id16, session_id: Id16, now: UnixMillis) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    by_session(sql::MARK_PLUGIN_SEEN, owner_id, session_id, now)
}

/// Records that a tab claimed from the session at `now` (a live session only).
pub(crate) fn mark_claimer_seen<DB>(owner_id: Id16, session_id: Id16, now: UnixMillis) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    by_session(sql::MARK_CLAIMER_SEEN, owner_id, session_id, now)
}

/// A statement that binds `$1` owner id, `$2` session id, `$3` now.
fn by_session<DB>(
    statement: &'static str,
    owner_id: Id16,
    session_id: Id16,
    now: UnixMillis,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(statement)
        .bind(b(owner_id))
        .bind(b(session_id))
        .bind(time_to_sql(now))
}

/// Ends one session of `scope` (keeping an earlier end); a row comes back when the session
/// exists in that app.
pub(crate) fn end<DB>(
    owner_id: Id16,
    scope: &AppScope,
    session_id: Id16,
    now: UnixMillis,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    by_session(sql::END_SESSION, owner_id, session_id, now).bind(app(scope))
}

/// Cancels an ended session's open calls; returns their `call_id`s.
pub(crate) fn cancel_calls<DB>(owner_id: Id16, session_id: Id16) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::CANCEL_SESSION_CALLS)
        .bind(b(owner_id))
        .bind(b(session_id))
}
