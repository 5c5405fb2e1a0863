//! SQLite sessions: create (ending the pairing's previous one), look up the live one, end.
//! Each change runs on the writer in a transaction of its own, with the cancelling of the
//! ended sessions' open calls.

use sealpost_protocol::ids::{OwnerId, PairId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::Sqlite;
use sqlx::sqlite::SqliteConnection;

use super::SqliteStore;
use crate::scope::AppScope;
use crate::shares::has_room;
use crate::store::rows;
use crate::store::{
    CatalogUpdate, EndedSessions, LiveSession, NewSession, StoreError, StoreResult,
    is_unique_violation,
};
use crate::store::{bound, lineage};

impl SqliteStore {
    pub(super) async fn create_session_impl(
        &self,
        session: &NewSession,
        max_live: u32,
    ) -> StoreResult<EndedSessions> {
        let s = session.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                lineage::require_unrevoked::<Sqlite>(conn, s.owner_id, s.started_by).await?;
                let others = bound::count_other_live(&s).fetch_all(&mut *conn).await?;
                if !has_room(max_live, &rows::app_sessions(&others)?, &s.app) {
                    return Err(StoreError::TooManySessions);
                }
                let replaced = bound::end_pairing_sessions(&s)
                    .fetch_all(&mut *conn)
                    .await?;
                let inserted = bound::insert(&s).execute(&mut *conn).await;
                match inserted {
                    Err(e) if is_unique_violation(&e) => return Err(StoreError::Duplicate),
                    other => other?,
                };
                let replaced = rows::owner_sessions(&replaced)?;
                cancel_open_calls(conn, replaced).await
            })
        })
        .await
    }

    pub(super) async fn live_session_impl(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        pair_id: PairId,
        now: UnixMillis,
    ) -> StoreResult<Option<LiveSession>> {
        let row = bound::select_live(owner_id, app, pair_id, now)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(rows::live_session).transpose()
    }

    pub(super) async fn set_catalog_update_impl(&self, update: &CatalogUpdate) -> StoreResult<()> {
        let u = update.clone();
        self.write(move |conn| {
            Box::pin(async move {
                let kept = bound::set_catalog_update(&u)
                    .fetch_optional(&mut *conn)
                    .await?;
                if kept.is_some() {
                    return Ok(());
                }
                let live = bound::select_session_live(&u)
                    .fetch_optional(&mut *conn)
                    .await?;
                Err(match live {
                    Some(_) => StoreError::StaleCatalogUpdate,
                    None => StoreError::NotFound,
                })
            })
        })
        .await
    }

    pub(super) async fn mark_plugin_seen_impl(
        &self,
        owner_id: OwnerId,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<()> {
        if !self.plugin_seen.due(owner_id, session_id, now) {
            return Ok(());
        }
        self.write(move |conn| {
            Box::pin(async move {
                bound::mark_plugin_seen(owner_id, session_id, now)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    pub(super) async fn end_session_impl(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<EndedSessions> {
        let app = app.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let found = bound::end(owner_id, &app, session_id, now)
                    .fetch_optional(&mut *conn)
                    .await?;
                if found.is_none() {
                    return Err(StoreError::NotFound);
                }
                cancel_open_calls(conn, vec![(owner_id, session_id)]).await
            })
        })
        .await
    }
}

/// Cancels the open calls of sessions that just ended (`(owner_id, session_id)` each).
pub(super) async fn cancel_open_calls(
    conn: &mut SqliteConnection,
    sessions: Vec<(OwnerId, SessionId)>,
) -> StoreResult<EndedSessions> {
    let mut cancelled_calls = Vec::new();
    for &(owner_id, session_id) in &sessions {
        let cancelled = bound::cancel_calls(owner_id, session_id)
            .fetch_all(&mut *conn)
            .await?;
        for row in &cancelled {
            cancelled_calls.push((owner_id, rows::Columns::id(row, "call_id")?));
        }
    }
    Ok(EndedSessions {
        sessions,
        cancelled_calls,
    })
}
