//! The statements both backends run, with their values bound, written once: sessions and the
//! accounts' counts, tokens and disabling.
//!
//! [`super::sql`] shares the text; this shares the binding, so the order of a statement's
//! values cannot drift between SQLite and PostgreSQL. Each backend still owns its control
//! flow: SQLite runs these on its writer or its readers, PostgreSQL on its pool or in a
//! transaction that also locks and notifies.

use sealpost_protocol::ids::{LinkId, OwnerId, PairId, SessionId, TokenId};
use sealpost_time::UnixMillis;
use sqlx::query::{Query, QueryScalar};
use sqlx::{Database, Encode, Type};

use super::sql;
use super::{CatalogUpdate, NewSession, NewSigninCode, Page, TokenRow, b, time_to_sql};
use crate::scope::AppScope;

/// A statement of `DB` with its values bound.
type Bound<DB> = Query<'static, DB, <DB as Database>::Arguments>;

/// How many live sessions the owner has in each app (`app_origin, n`), but the one this
/// session replaces.
pub(crate) fn count_other_live<DB>(s: &NewSession) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::COUNT_OTHER_LIVE_SESSIONS)
        .bind(b(s.owner_id))
        .bind(b(s.pair_id))
        .bind(time_to_sql(s.created_at))
        .bind(app(&s.app))
}

/// How many live sessions the owner has in each app at `now` (`app_origin, n`).
pub(crate) fn count_live_sessions<DB>(owner_id: OwnerId, now: UnixMillis) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::COUNT_LIVE_SESSIONS)
        .bind(b(owner_id))
        .bind(time_to_sql(now))
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
    Option<Vec<u8>>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::INSERT_SESSION)
        .bind(b(s.owner_id))
        .bind(b(s.session_id))
        .bind(b(s.pair_id))
        .bind(s.hello.clone())
        .bind(time_to_sql(s.created_at))
        .bind(time_to_sql(s.expires_at))
        .bind(app(&s.app))
        .bind(s.started_by.map(b))
}

/// The pairing's live session of `scope` at `now`, as [`super::rows::live_session`] reads it.
pub(crate) fn select_live<DB>(
    owner_id: OwnerId,
    scope: &AppScope,
    pair_id: PairId,
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
pub(crate) fn mark_plugin_seen<DB>(
    owner_id: OwnerId,
    session_id: SessionId,
    now: UnixMillis,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    by_session(sql::MARK_PLUGIN_SEEN, owner_id, session_id, now)
}

/// Records that a tab claimed from the session at `now` (a live session only).
pub(crate) fn mark_claimer_seen<DB>(
    owner_id: OwnerId,
    session_id: SessionId,
    now: UnixMillis,
) -> Bound<DB>
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
    owner_id: OwnerId,
    session_id: SessionId,
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
    owner_id: OwnerId,
    scope: &AppScope,
    session_id: SessionId,
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
pub(crate) fn cancel_calls<DB>(owner_id: OwnerId, session_id: SessionId) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::CANCEL_SESSION_CALLS)
        .bind(b(owner_id))
        .bind(b(session_id))
}

/// Disables the owner named `name` at `now`; its id when there is one.
pub(crate) fn disable_owner<DB>(
    name: &str,
    now: UnixMillis,
) -> QueryScalar<'static, DB, Vec<u8>, DB::Arguments>
where
    DB: Database,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    (Vec<u8>,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    sqlx::query_scalar(sql::DISABLE_OWNER)
        .bind(name.to_owned())
        .bind(time_to_sql(now))
}

/// Revokes every token of the owner `owner_id` (as [`disable_owner`] returned it) at `now`.
pub(crate) fn revoke_owner_tokens<DB>(owner_id: &[u8], now: UnixMillis) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::REVOKE_OWNER_TOKENS)
        .bind(owner_id.to_vec())
        .bind(time_to_sql(now))
}

/// Deletes the sign-in codes of the owner `owner_id` (as [`disable_owner`] returned it).
pub(crate) fn delete_owner_signin_codes<DB>(owner_id: &[u8]) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::DELETE_OWNER_SIGNIN_CODES).bind(owner_id.to_vec())
}

/// How many live MCP tokens and unused sign-in codes the owner holds at `now`, per app
/// (`app_origin, mcp, codes`).
pub(crate) fn count_live_grants<DB>(owner_id: OwnerId, now: UnixMillis) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::COUNT_LIVE_GRANTS)
        .bind(b(owner_id))
        .bind(time_to_sql(now))
}

/// Stores a token row.
pub(crate) fn insert_token<DB>(t: &TokenRow) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<Vec<u8>>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::INSERT_TOKEN)
        .bind(b(t.id))
        .bind(b(t.owner_id))
        .bind(t.kind.as_str().to_owned())
        .bind(t.pair_id.map(b))
        .bind(t.label.clone())
        .bind(time_to_sql(t.created_at))
        .bind(time_to_sql(t.expires_at))
        .bind(app(&t.app))
        .bind(t.lifetime_ends_at.map(time_to_sql))
        .bind(t.parent_id.map(b))
}

/// Stores a sign-in code (its hash).
pub(crate) fn insert_signin_code<DB>(c: &NewSigninCode) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<Vec<u8>>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::INSERT_SIGNIN_CODE)
        .bind(c.code_hash.to_vec())
        .bind(b(c.owner_id))
        .bind(time_to_sql(c.expires_at))
        .bind(app(&c.app))
        .bind(c.lifetime_ends_at.map(time_to_sql))
        .bind(c.pkce_challenge.map(|challenge| challenge.to_vec()))
        .bind(b(c.id))
        .bind(c.minted_by.map(b))
        .bind(time_to_sql(c.created_at))
}

/// Whether the owner's token `id` is unrevoked: a row comes back then.
pub(crate) fn select_unrevoked<DB>(owner_id: OwnerId, id: TokenId) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::SELECT_UNREVOKED_TOKEN)
        .bind(b(id))
        .bind(b(owner_id))
}

/// Signing out `root`: revokes it and its descendants.
pub(crate) fn revoke_lineage<DB>(owner_id: OwnerId, root: TokenId, now: UnixMillis) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::REVOKE_LINEAGE)
        .bind(b(root))
        .bind(b(owner_id))
        .bind(time_to_sql(now))
}

/// Signing out `root`: voids the unused links it and its descendants minted.
pub(crate) fn void_lineage_links<DB>(owner_id: OwnerId, root: TokenId) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::VOID_LINEAGE_LINKS)
        .bind(b(root))
        .bind(b(owner_id))
}

/// Signing out `root`: ends the live sessions it and its descendants started; returns
/// `owner_id, session_id` of each.
pub(crate) fn end_lineage_sessions<DB>(
    owner_id: OwnerId,
    root: TokenId,
    now: UnixMillis,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::END_LINEAGE_SESSIONS)
        .bind(b(root))
        .bind(b(owner_id))
        .bind(time_to_sql(now))
}

/// The owner's unused links that `reach` may see at `now`, as [`super::rows::signin_link`]
/// reads them.
pub(crate) fn select_signin_links<DB>(
    owner_id: OwnerId,
    reach: &AppScope,
    now: UnixMillis,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::SELECT_SIGNIN_LINKS)
        .bind(b(owner_id))
        .bind(time_to_sql(now))
        .bind(app(reach))
}

/// Voids one unused link of the owner that `reach` reaches.
pub(crate) fn delete_signin_link<DB>(owner_id: OwnerId, reach: &AppScope, id: LinkId) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::DELETE_SIGNIN_LINK)
        .bind(b(id))
        .bind(b(owner_id))
        .bind(app(reach))
}

/// The owner's live sign-ins that `reach` may see at `now`, as [`super::rows::token`] reads
/// them.
pub(crate) fn select_owner_tokens<DB>(
    owner_id: OwnerId,
    now: UnixMillis,
    reach: &AppScope,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::SELECT_OWNER_TOKENS)
        .bind(b(owner_id))
        .bind(time_to_sql(now))
        .bind(app(reach))
}

/// A page of the owner's live MCP tokens that `reach` may see at `now`, in id order, as
/// [`super::rows::token`] reads them.
pub(crate) fn select_mcp_tokens<DB>(
    owner_id: OwnerId,
    reach: &AppScope,
    now: UnixMillis,
    page: Page,
) -> Bound<DB>
where
    DB: Database,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(sql::SELECT_MCP_TOKENS)
        .bind(b(owner_id))
        .bind(time_to_sql(now))
        .bind(page.after.map(b).unwrap_or_default())
        .bind(i64::from(page.limit))
        .bind(app(reach))
}
