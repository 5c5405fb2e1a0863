//! SQLite call operations: post, claim, reply, cancel, and the sweeper. Kept apart from
//! `sqlite.rs` (opening, sessions) and `sqlite_accounts.rs` because this is the hot path whose
//! statements decide at-most-once delivery; each runs on the single writer, so one statement is
//! atomic.

use super::rows;
use super::sqlite::{SqliteStore, cancel_open_calls};
use super::{
    ClaimedRow, Ms, NewCall, Scope, StoreError, StoreResult, SweepStats, b, is_unique_violation,
};
use sealpost_protocol::api::CallState;
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::Id16;

impl SqliteStore {
    pub(super) async fn post_call_impl(
        &self,
        call: &NewCall,
        pair_id: Option<Id16>,
        max_pending: Option<u32>,
    ) -> StoreResult<Ms> {
        let c = call.clone();
        self.write(move |conn| {
            Box::pin(async move {
                let inserted: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(
                    "INSERT INTO calls (owner_id, call_id, session_id, pair_id, state, envelope, created_at, expires_at) \
                     SELECT s.owner_id, ?2, s.session_id, s.pair_id, 'pending', ?3, ?4, MIN(?5, s.expires_at) \
                     FROM sessions s \
                     WHERE s.owner_id = ?1 AND s.session_id = ?6 AND s.ended_at IS NULL AND s.expires_at > ?4 \
                     AND (?7 IS NULL OR s.pair_id = ?7) \
                     AND (?8 IS NULL OR (SELECT COUNT(*) FROM calls p WHERE p.owner_id = ?1 \
                          AND p.session_id = ?6 AND p.state = 'pending') < ?8) \
                     RETURNING expires_at",
                )
                .bind(b(c.owner_id))
                .bind(b(c.call_id))
                .bind(&c.envelope)
                .bind(c.created_at)
                .bind(c.expires_at)
                .bind(b(c.session_id))
                .bind(pair_id.map(b))
                .bind(max_pending.map(i64::from))
                .fetch_optional(&mut *conn)
                .await;
                match inserted {
                    Ok(Some(expires_at)) => return Ok(expires_at),
                    Err(e) if is_unique_violation(&e) => return Err(StoreError::Duplicate),
                    Err(e) => return Err(e.into()),
                    Ok(None) => {}
                }
                let session = sqlx::query(
                    "SELECT pair_id, expires_at, ended_at FROM sessions WHERE owner_id = ?1 AND session_id = ?2",
                )
                .bind(b(c.owner_id))
                .bind(b(c.session_id))
                .fetch_optional(&mut *conn)
                .await?;
                Err(rows::why_not_posted(session.as_ref(), pair_id, c.created_at))
            })
        })
        .await
    }

    pub(super) async fn claim_calls_impl(
        &self,
        owner_id: Id16,
        session_id: Id16,
        now: Ms,
        max: u32,
        lease_ms: Ms,
    ) -> StoreResult<Vec<ClaimedRow>> {
        let write_seen = self.seen.due(owner_id, session_id, now);
        self.write(move |conn| {
            Box::pin(async move {
                if write_seen {
                    let live = sqlx::query(
                        "UPDATE sessions SET claimer_seen_at = ?3 WHERE owner_id = ?1 AND session_id = ?2 \
                         AND ended_at IS NULL AND expires_at > ?3",
                    )
                    .bind(b(owner_id))
                    .bind(b(session_id))
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                    if live.rows_affected() == 0 {
                        return Err(why_not_live(conn, owner_id, session_id).await);
                    }
                }
                // One statement: the selection and the state change cannot interleave with
                // another claim, so a call is handed out once. It also re-checks that the session
                // is live, for the claims that skip the `claimer_seen_at` write.
                let claimed = sqlx::query(
                    "UPDATE calls SET state = 'claimed', lease_expires_at = MIN(?3 + ?5, expires_at) \
                     WHERE owner_id = ?1 AND call_id IN ( \
                        SELECT call_id FROM calls WHERE owner_id = ?1 AND session_id = ?2 \
                        AND state = 'pending' AND expires_at > ?3 ORDER BY created_at LIMIT ?4) \
                     AND state = 'pending' \
                     AND EXISTS (SELECT 1 FROM sessions WHERE owner_id = ?1 AND session_id = ?2 \
                        AND ended_at IS NULL AND expires_at > ?3) \
                     RETURNING call_id, envelope, lease_expires_at, created_at",
                )
                .bind(b(owner_id))
                .bind(b(session_id))
                .bind(now)
                .bind(i64::from(max))
                .bind(lease_ms)
                .fetch_all(&mut *conn)
                .await?;
                if claimed.is_empty() && !write_seen {
                    let live: Option<i64> = sqlx::query_scalar(
                        "SELECT 1 FROM sessions WHERE owner_id = ?1 AND session_id = ?2 \
                         AND ended_at IS NULL AND expires_at > ?3",
                    )
                    .bind(b(owner_id))
                    .bind(b(session_id))
                    .bind(now)
                    .fetch_optional(&mut *conn)
                    .await?;
                    if live.is_none() {
                        return Err(why_not_live(conn, owner_id, session_id).await);
                    }
                }
                rows::claimed(claimed)
            })
        })
        .await
    }

    pub(super) async fn reply_call_impl(
        &self,
        owner_id: Id16,
        call_id: Id16,
        reply: Vec<u8>,
        now: Ms,
    ) -> StoreResult<()> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE calls SET state = 'answered', reply = ?3, envelope = NULL, answered_at = ?4 \
                     WHERE owner_id = ?1 AND call_id = ?2 AND state = 'claimed' AND lease_expires_at > ?4",
                )
                .bind(b(owner_id))
                .bind(b(call_id))
                .bind(&reply)
                .bind(now)
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(());
                }
                let row = sqlx::query(
                    "SELECT state, expires_at, lease_expires_at FROM calls WHERE owner_id = ?1 AND call_id = ?2",
                )
                .bind(b(owner_id))
                .bind(b(call_id))
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else { return Err(StoreError::NotFound) };
                if rows::stored_state(&row)? == CallState::Claimed {
                    // The lease lapsed: the call expires for good (at-most-once execution).
                    sqlx::query(
                        "UPDATE calls SET state = 'expired', envelope = NULL \
                         WHERE owner_id = ?1 AND call_id = ?2 AND state = 'claimed'",
                    )
                    .bind(b(owner_id))
                    .bind(b(call_id))
                    .execute(&mut *conn)
                    .await?;
                    return Err(StoreError::LeaseExpired);
                }
                Err(StoreError::WrongState(rows::state_at(&row, now)?))
            })
        })
        .await
    }

    pub(super) async fn cancel_call_impl(
        &self,
        scope: Scope,
        call_id: Id16,
        reason: CancelReason,
        now: Ms,
    ) -> StoreResult<()> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE calls SET state = 'cancelled', cancel_reason = ?4, envelope = NULL \
                     WHERE owner_id = ?1 AND call_id = ?2 AND (?3 IS NULL OR pair_id = ?3) AND expires_at > ?5 \
                     AND (state = 'pending' OR (state = 'claimed' AND lease_expires_at > ?5))",
                )
                .bind(b(scope.owner_id))
                .bind(b(call_id))
                .bind(scope.pair_id.map(b))
                .bind(reason.as_str())
                .bind(now)
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(());
                }
                let row = sqlx::query(
                    "SELECT state, expires_at, lease_expires_at FROM calls \
                     WHERE owner_id = ?1 AND call_id = ?2 AND (?3 IS NULL OR pair_id = ?3)",
                )
                .bind(b(scope.owner_id))
                .bind(b(call_id))
                .bind(scope.pair_id.map(b))
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else { return Err(StoreError::NotFound) };
                Err(StoreError::WrongState(rows::state_at(&row, now)?))
            })
        })
        .await
    }

    pub(super) async fn sweep_impl(&self, now: Ms, grace_ms: Ms) -> StoreResult<SweepStats> {
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let mut stats = SweepStats::default();
                for sql in [
                    "UPDATE calls SET state = 'expired', envelope = NULL WHERE state = 'pending' AND expires_at <= ?1",
                    "UPDATE calls SET state = 'expired', envelope = NULL WHERE state = 'claimed' AND lease_expires_at <= ?1",
                ] {
                    stats.expired_calls += sqlx::query(sql).bind(now).execute(&mut *conn).await?.rows_affected();
                }
                stats.cleared_replies = sqlx::query(
                    "UPDATE calls SET reply = NULL, envelope = NULL WHERE expires_at <= ?1 \
                     AND (reply IS NOT NULL OR envelope IS NOT NULL)",
                )
                .bind(now)
                .execute(&mut *conn)
                .await?
                .rows_affected();
                stats.deleted_calls = sqlx::query("DELETE FROM calls WHERE expires_at <= ?1")
                    .bind(now - grace_ms)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
                let ended = sqlx::query(
                    "UPDATE sessions SET ended_at = ?1, hello = NULL WHERE ended_at IS NULL AND expires_at <= ?1 \
                     RETURNING owner_id, session_id",
                )
                .bind(now)
                .fetch_all(&mut *conn)
                .await?;
                let ended = rows::owner_sessions(&ended)?;
                stats.ended_sessions = ended.len() as u64;
                stats.ended = cancel_open_calls(conn, ended).await?;
                stats.deleted_sessions = sqlx::query(
                    "DELETE FROM sessions WHERE ended_at <= ?1 AND NOT EXISTS \
                     (SELECT 1 FROM calls c WHERE c.owner_id = sessions.owner_id AND c.session_id = sessions.session_id)",
                )
                .bind(now - grace_ms)
                .execute(&mut *conn)
                .await?
                .rows_affected();
                sqlx::query("DELETE FROM signin_codes WHERE expires_at <= ?1").bind(now).execute(&mut *conn).await?;
                sqlx::query("DELETE FROM tokens WHERE expires_at <= ?1 OR revoked_at <= ?1")
                    .bind(now - grace_ms)
                    .execute(&mut *conn)
                    .await?;
                Ok(stats)
            })
        })
        .await
    }
}

/// A claim found its session not live: missing (404) or ended (410)?
async fn why_not_live(
    conn: &mut sqlx::SqliteConnection,
    owner_id: Id16,
    session_id: Id16,
) -> StoreError {
    let exists: Result<Option<i64>, sqlx::Error> =
        sqlx::query_scalar("SELECT 1 FROM sessions WHERE owner_id = ?1 AND session_id = ?2")
            .bind(b(owner_id))
            .bind(b(session_id))
            .fetch_optional(&mut *conn)
            .await;
    match exists {
        Ok(Some(_)) => StoreError::SessionEnded,
        Ok(None) => StoreError::NotFound,
        Err(error) => error.into(),
    }
}
