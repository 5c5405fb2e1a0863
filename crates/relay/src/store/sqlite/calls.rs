//! SQLite call operations: post, claim and reply (handed to the writer as data, which runs them
//! grouped; see `batch`), cancel, and the sweeper. Reads are in `batch_read`. Every write runs
//! on the single writer, so one statement is atomic.

use super::SqliteStore;
use super::batch::{ClaimOp, PostOp, ReplyOp};
use super::sessions::cancel_open_calls;
use crate::store::{
    Bearer, ClaimFor, ClaimedRow, NewCall, ReadFor, StoreError, StoreResult, SweepStats, b,
    time_to_sql,
};
use crate::store::{rows, sql, sweep};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::Sqlite;

impl SqliteStore {
    pub(super) async fn post_call_impl(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
    ) -> StoreResult<UnixMillis> {
        self.post(bearer, call, max_pending, None).await
    }

    pub(super) async fn post_call_then_claim_impl(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
        claim: ClaimFor,
    ) -> StoreResult<UnixMillis> {
        let (session_id, now) = (call.session_id, call.created_at);
        let then_claim = ClaimOp {
            bearer: claim.bearer,
            session_id,
            now,
            max: claim.max,
            lease_ms: claim.lease_ms,
            write_seen: self.seen.due(claim.bearer.owner_id, session_id, now),
            answer: claim.answer,
        };
        self.post(bearer, call, max_pending, Some(then_claim)).await
    }

    /// Hands a post, and the claim to run after it if any, to the writer.
    async fn post(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
        then_claim: Option<ClaimOp>,
    ) -> StoreResult<UnixMillis> {
        let call = call.clone();
        self.writer
            .post(|answer| PostOp {
                bearer,
                call,
                max_pending,
                answer,
                then_claim,
            })
            .await
    }

    pub(super) async fn claim_calls_impl(
        &self,
        bearer: Bearer,
        session_id: SessionId,
        now: UnixMillis,
        max: u32,
        lease_ms: u64,
    ) -> StoreResult<Vec<ClaimedRow>> {
        let write_seen = self.seen.due(bearer.owner_id, session_id, now);
        self.writer
            .claim(|answer| ClaimOp {
                bearer,
                session_id,
                now,
                max,
                lease_ms,
                write_seen,
                answer,
            })
            .await
    }

    /// Hands a reply, and the read to run after it if any, to the writer.
    pub(super) async fn reply_call_impl(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
        then_read: Option<ReadFor>,
    ) -> StoreResult<()> {
        self.writer
            .reply(|answer| ReplyOp {
                bearer,
                call_id,
                reply,
                now,
                answer,
                then_read,
            })
            .await
    }

    pub(super) async fn cancel_call_impl(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reason: CancelReason,
        now: UnixMillis,
    ) -> StoreResult<()> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(concat!(
                    "UPDATE calls SET state = 'cancelled', cancel_reason = ?4, envelope = NULL \
                     WHERE owner_id = ?1 AND call_id = ?2 AND (?3 IS NULL OR pair_id = ?3) \
                     AND app_origin = ",
                    token_app!("?6"),
                    " AND expires_at > ?5 \
                     AND (state = 'pending' OR (state = 'claimed' AND lease_expires_at > ?5))"
                ))
                .bind(b(bearer.owner_id))
                .bind(b(call_id))
                .bind(bearer.pair_id.map(b))
                .bind(reason.as_str())
                .bind(time_to_sql(now))
                .bind(b(bearer.token_id))
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(());
                }
                let row = sqlx::query(concat!(
                    "SELECT state, expires_at, lease_expires_at FROM calls \
                     WHERE owner_id = ?1 AND call_id = ?2 AND (?3 IS NULL OR pair_id = ?3) \
                     AND app_origin = ",
                    token_app!("?4")
                ))
                .bind(b(bearer.owner_id))
                .bind(b(call_id))
                .bind(bearer.pair_id.map(b))
                .bind(b(bearer.token_id))
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else {
                    return Err(StoreError::NotFound);
                };
                Err(StoreError::WrongState(rows::state_at(&row, now)?))
            })
        })
        .await
    }

    pub(super) async fn sweep_impl(
        &self,
        now: UnixMillis,
        grace_ms: u64,
    ) -> StoreResult<SweepStats> {
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let mut stats = SweepStats::default();
                for statement in [sql::SWEEP_EXPIRE_PENDING, sql::SWEEP_EXPIRE_LAPSED] {
                    stats.expired_calls += sqlx::query(statement)
                        .bind(time_to_sql(now))
                        .execute(&mut *conn)
                        .await?
                        .rows_affected();
                }
                sweep::after_expiry::<Sqlite>(conn, now, grace_ms, &mut stats, cancel_open_calls)
                    .await?;
                Ok(stats)
            })
        })
        .await
    }
}
