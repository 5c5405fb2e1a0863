//! PostgreSQL call operations: post, claim, reply, cancel, and the sweeper.
//!
//! This is the hot path whose statements decide at-most-once delivery; each one changes state
//! in a single statement.

use sealpost_protocol::api::CallState;
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::Id16;
use sqlx::postgres::PgPool;

use super::notify;
use super::sessions::cancel_open_calls;
use crate::store::hot_path::SeenThrottle;
use crate::store::{
    ClaimedRow, Ms, NewCall, Scope, StoreError, StoreResult, SweepStats, b, is_unique_violation,
};
use crate::store::{rows, sql};
use crate::wake::Topic;

pub(super) async fn post_call(
    pool: &PgPool,
    c: &NewCall,
    pair_id: Option<Id16>,
    max_pending: Option<u32>,
) -> StoreResult<Ms> {
    let mut tx = pool.begin().await?;
    // `FOR SHARE OF s`: the session row is share-locked until this post commits, so ending or
    // replacing the session (an UPDATE of that row) waits for the post and then cancels its
    // call; a post that comes second waits for the end and then sees the session ended. Posts
    // share the lock, so they do not wait for each other.
    let inserted: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(
        "INSERT INTO calls (owner_id, call_id, session_id, pair_id, state, envelope, created_at, expires_at) \
         SELECT s.owner_id, $2, s.session_id, s.pair_id, 'pending', $3, $4, LEAST($5, s.expires_at) \
         FROM sessions s \
         WHERE s.owner_id = $1 AND s.session_id = $6 AND s.ended_at IS NULL AND s.expires_at > $4 \
         AND ($7::bytea IS NULL OR s.pair_id = $7) \
         AND ($8::bigint IS NULL OR (SELECT COUNT(*) FROM calls p WHERE p.owner_id = $1 \
              AND p.session_id = $6 AND p.state = 'pending') < $8) \
         FOR SHARE OF s \
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
    .fetch_optional(&mut *tx)
    .await;
    match inserted {
        Ok(Some(expires_at)) => {
            notify(&mut tx, Topic::Session(c.owner_id, c.session_id)).await?;
            tx.commit().await?;
            return Ok(expires_at);
        }
        Err(e) if is_unique_violation(&e) => {
            return Err(StoreError::Duplicate);
        }
        Err(e) => return Err(e.into()),
        Ok(None) => {}
    }
    let session = sqlx::query(sql::SELECT_SESSION_STATE)
        .bind(b(c.owner_id))
        .bind(b(c.session_id))
        .fetch_optional(&mut *tx)
        .await?;
    Err(rows::why_not_posted(
        session.as_ref(),
        pair_id,
        c.created_at,
    ))
}

pub(super) async fn claim_calls(
    pool: &PgPool,
    seen: &SeenThrottle,
    scope: Scope,
    session_id: Id16,
    now: Ms,
    max: u32,
    lease_ms: Ms,
) -> StoreResult<Vec<ClaimedRow>> {
    let (owner_id, pair_id) = (scope.owner_id, scope.pair_id.map(b));
    let write_seen = seen.due(owner_id, session_id, now);
    if write_seen {
        let live = sqlx::query(
            "UPDATE sessions SET claimer_seen_at = $3 WHERE owner_id = $1 AND session_id = $2 \
             AND ended_at IS NULL AND expires_at > $3 AND ($4::bytea IS NULL OR pair_id = $4)",
        )
        .bind(b(owner_id))
        .bind(b(session_id))
        .bind(now)
        .bind(pair_id.clone())
        .execute(pool)
        .await?;
        if live.rows_affected() == 0 {
            return Err(why_not_live(pool, scope, session_id).await);
        }
    }
    // SKIP LOCKED: concurrent claimers (on any replica) take disjoint rows instead of queueing;
    // the outer UPDATE re-checks the state, so a row is claimed once. The session must still be
    // live, for the claims that skip the `claimer_seen_at` write.
    let claimed = sqlx::query(
        "WITH picked AS ( \
            SELECT owner_id, call_id FROM calls \
            WHERE owner_id = $1 AND session_id = $2 AND state = 'pending' AND expires_at > $3 \
            AND EXISTS (SELECT 1 FROM sessions WHERE owner_id = $1 AND session_id = $2 \
                AND ended_at IS NULL AND expires_at > $3 AND ($6::bytea IS NULL OR pair_id = $6)) \
            ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED) \
         UPDATE calls c SET state = 'claimed', lease_expires_at = LEAST($3 + $5, c.expires_at) \
         FROM picked WHERE c.owner_id = picked.owner_id AND c.call_id = picked.call_id \
         AND c.state = 'pending' \
         RETURNING c.call_id, c.envelope, c.lease_expires_at, c.created_at",
    )
    .bind(b(owner_id))
    .bind(b(session_id))
    .bind(now)
    .bind(i64::from(max))
    .bind(lease_ms)
    .bind(pair_id.clone())
    .fetch_all(pool)
    .await?;
    if claimed.is_empty() && !write_seen {
        let live: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM sessions WHERE owner_id = $1 AND session_id = $2 \
             AND ended_at IS NULL AND expires_at > $3 AND ($4::bytea IS NULL OR pair_id = $4)",
        )
        .bind(b(owner_id))
        .bind(b(session_id))
        .bind(now)
        .bind(pair_id)
        .fetch_optional(pool)
        .await?;
        if live.is_none() {
            return Err(why_not_live(pool, scope, session_id).await);
        }
    }
    rows::claimed(claimed)
}

pub(super) async fn reply_call(
    pool: &PgPool,
    scope: Scope,
    call_id: Id16,
    reply: Vec<u8>,
    now: Ms,
) -> StoreResult<()> {
    let (owner_id, pair_id) = (scope.owner_id, scope.pair_id.map(b));
    let mut tx = pool.begin().await?;
    let done = sqlx::query(
        "UPDATE calls SET state = 'answered', reply = $3, envelope = NULL, answered_at = $4 \
         WHERE owner_id = $1 AND call_id = $2 AND state = 'claimed' AND lease_expires_at > $4 \
         AND ($5::bytea IS NULL OR pair_id = $5)",
    )
    .bind(b(owner_id))
    .bind(b(call_id))
    .bind(&reply)
    .bind(now)
    .bind(pair_id.clone())
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 1 {
        notify(&mut tx, Topic::Call(owner_id, call_id)).await?;
        tx.commit().await?;
        return Ok(());
    }
    let row = sqlx::query(
        "SELECT state, expires_at, lease_expires_at FROM calls WHERE owner_id = $1 AND call_id = $2 \
         AND ($3::bytea IS NULL OR pair_id = $3) FOR UPDATE",
    )
    .bind(b(owner_id))
    .bind(b(call_id))
    .bind(pair_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound);
    };
    if rows::stored_state(&row)? == CallState::Claimed {
        // The lease lapsed: the call expires for good (at-most-once execution).
        sqlx::query(sql::EXPIRE_LAPSED_CLAIM)
            .bind(b(owner_id))
            .bind(b(call_id))
            .execute(&mut *tx)
            .await?;
        notify(&mut tx, Topic::Call(owner_id, call_id)).await?;
        tx.commit().await?;
        return Err(StoreError::LeaseExpired);
    }
    Err(StoreError::WrongState(rows::state_at(&row, now)?))
}

pub(super) async fn cancel_call(
    pool: &PgPool,
    scope: Scope,
    call_id: Id16,
    reason: CancelReason,
    now: Ms,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query(
        "UPDATE calls SET state = 'cancelled', cancel_reason = $4, envelope = NULL \
         WHERE owner_id = $1 AND call_id = $2 AND ($3::bytea IS NULL OR pair_id = $3) AND expires_at > $5 \
         AND (state = 'pending' OR (state = 'claimed' AND lease_expires_at > $5))",
    )
    .bind(b(scope.owner_id))
    .bind(b(call_id))
    .bind(scope.pair_id.map(b))
    .bind(reason.as_str())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 1 {
        notify(&mut tx, Topic::Call(scope.owner_id, call_id)).await?;
        tx.commit().await?;
        return Ok(());
    }
    let row = sqlx::query(
        "SELECT state, expires_at, lease_expires_at FROM calls \
         WHERE owner_id = $1 AND call_id = $2 AND ($3::bytea IS NULL OR pair_id = $3)",
    )
    .bind(b(scope.owner_id))
    .bind(b(call_id))
    .bind(scope.pair_id.map(b))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound);
    };
    Err(StoreError::WrongState(rows::state_at(&row, now)?))
}

pub(super) async fn sweep(pool: &PgPool, now: Ms, grace_ms: Ms) -> StoreResult<SweepStats> {
    let mut tx = pool.begin().await?;
    let mut stats = SweepStats::default();
    for statement in [sql::SWEEP_EXPIRE_PENDING, sql::SWEEP_EXPIRE_LAPSED] {
        stats.expired_calls += sqlx::query(statement)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    }
    stats.cleared_replies = sqlx::query(sql::SWEEP_CLEAR_BYTES)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    stats.deleted_calls = sqlx::query(sql::SWEEP_DELETE_CALLS)
        .bind(now - grace_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    let ended = sqlx::query(sql::SWEEP_END_SESSIONS)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
    let ended = rows::owner_sessions(&ended)?;
    stats.ended_sessions = ended.len() as u64;
    stats.ended = cancel_open_calls(&mut tx, ended).await?;
    stats.deleted_sessions = sqlx::query(sql::SWEEP_DELETE_SESSIONS)
        .bind(now - grace_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    sqlx::query(sql::SWEEP_DELETE_SIGNIN_CODES)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query(sql::SWEEP_DELETE_TOKENS)
        .bind(now - grace_ms)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(stats)
}

/// A claim found its session not live: missing (404) or ended (410)?
async fn why_not_live(pool: &PgPool, scope: Scope, session_id: Id16) -> StoreError {
    let exists: Result<Option<i32>, sqlx::Error> = sqlx::query_scalar(
        "SELECT 1 FROM sessions WHERE owner_id = $1 AND session_id = $2 \
         AND ($3::bytea IS NULL OR pair_id = $3)",
    )
    .bind(b(scope.owner_id))
    .bind(b(session_id))
    .bind(scope.pair_id.map(b))
    .fetch_optional(pool)
    .await;
    match exists {
        Ok(Some(_)) => StoreError::SessionEnded,
        Ok(None) => StoreError::NotFound,
        Err(error) => error.into(),
    }
}
