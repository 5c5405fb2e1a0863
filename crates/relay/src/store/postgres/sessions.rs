//! PostgreSQL sessions: create (ending the pairing's previous one), look up the live one, end.
//! Each change is one transaction that also cancels the ended sessions' open calls and, on
//! commit, wakes their waiters on every replica.

use sealpost_protocol::ids::{OwnerId, PairId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::postgres::{PgConnection, PgPool};

use super::notify;
use crate::scope::AppScope;
use crate::shares::has_room;
use crate::store::bound;
use crate::store::rows::{self, Columns};
use crate::store::{
    CatalogUpdate, EndedSessions, LiveSession, NewSession, StoreError, StoreResult, b,
    is_unique_violation,
};

pub(super) async fn create_session(
    pool: &PgPool,
    s: &NewSession,
    max_live: u32,
) -> StoreResult<EndedSessions> {
    let mut tx = pool.begin().await?;
    // Serialise session changes of one owner so the live-session count is exact.
    sqlx::query("SELECT 1 FROM owners WHERE id = $1 FOR UPDATE")
        .bind(b(s.owner_id))
        .execute(&mut *tx)
        .await?;
    super::accounts::require_unrevoked(&mut tx, s.owner_id, s.started_by).await?;
    let others = bound::count_other_live(s).fetch_all(&mut *tx).await?;
    if !has_room(max_live, &rows::app_sessions(&others)?, &s.app) {
        return Err(StoreError::TooManySessions);
    }
    let replaced = bound::end_pairing_sessions(s).fetch_all(&mut *tx).await?;
    let inserted = bound::insert(s).execute(&mut *tx).await;
    match inserted {
        Err(e) if is_unique_violation(&e) => return Err(StoreError::Duplicate),
        other => other?,
    };
    let replaced = rows::owner_sessions(&replaced)?;
    let ended = cancel_open_calls(&mut tx, replaced).await?;
    tx.commit().await?;
    Ok(ended)
}

pub(super) async fn live_session(
    pool: &PgPool,
    owner_id: OwnerId,
    app: &AppScope,
    pair_id: PairId,
    now: UnixMillis,
) -> StoreResult<Option<LiveSession>> {
    let row = bound::select_live(owner_id, app, pair_id, now)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::live_session).transpose()
}

pub(super) async fn set_catalog_update(pool: &PgPool, u: &CatalogUpdate) -> StoreResult<()> {
    let kept = bound::set_catalog_update(u).fetch_optional(pool).await?;
    if kept.is_some() {
        return Ok(());
    }
    let live = bound::select_session_live(u).fetch_optional(pool).await?;
    Err(match live {
        Some(_) => StoreError::StaleCatalogUpdate,
        None => StoreError::NotFound,
    })
}

pub(super) async fn end_session(
    pool: &PgPool,
    owner_id: OwnerId,
    app: &AppScope,
    session_id: SessionId,
    now: UnixMillis,
) -> StoreResult<EndedSessions> {
    let mut tx = pool.begin().await?;
    let found = bound::end(owner_id, app, session_id, now)
        .fetch_optional(&mut *tx)
        .await?;
    if found.is_none() {
        return Err(StoreError::NotFound);
    }
    let ended = cancel_open_calls(&mut tx, vec![(owner_id, session_id)]).await?;
    tx.commit().await?;
    Ok(ended)
}

/// `$1` owner id, `$2` session id: `sql::CANCEL_SESSION_CALLS`, taking the calls' locks in
/// `call_id` order, the order a group of replies takes them in (`batch::replies`), so a session
/// that ends while the tab answers its calls cannot deadlock with the answers.
const CANCEL_SESSION_CALLS_IN_ORDER: &str = "WITH locked AS (SELECT owner_id, call_id FROM calls \
        WHERE owner_id = $1 AND session_id = $2 AND state IN ('pending', 'claimed') \
        ORDER BY call_id FOR UPDATE) \
     UPDATE calls c SET state = 'cancelled', cancel_reason = 'session_ended', envelope = NULL, \
        lease_expires_at = COALESCE(c.lease_expires_at, c.expires_at) \
     FROM locked WHERE c.owner_id = locked.owner_id AND c.call_id = locked.call_id \
        AND c.state IN ('pending', 'claimed') \
     RETURNING c.call_id";

/// Cancels the open calls of sessions that just ended (`(owner_id, session_id)` each) and, when
/// the transaction commits, wakes on every replica those sessions' claimers and those calls'
/// readers.
pub(super) async fn cancel_open_calls(
    conn: &mut PgConnection,
    sessions: Vec<(OwnerId, SessionId)>,
) -> StoreResult<EndedSessions> {
    let mut cancelled_calls = Vec::new();
    for &(owner_id, session_id) in &sessions {
        let cancelled = sqlx::query(CANCEL_SESSION_CALLS_IN_ORDER)
            .bind(b(owner_id))
            .bind(b(session_id))
            .fetch_all(&mut *conn)
            .await?;
        for row in &cancelled {
            cancelled_calls.push((owner_id, row.id("call_id")?));
        }
    }
    let ended = EndedSessions {
        sessions,
        cancelled_calls,
    };
    for topic in ended.topics() {
        notify(conn, topic).await?;
    }
    Ok(ended)
}
