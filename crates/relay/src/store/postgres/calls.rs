//! PostgreSQL call operations: post, claim, reply, cancel, and the sweeper.
//!
//! This is the hot path whose statements decide at-most-once delivery; each one changes state
//! in a single statement. Post, claim, reply and read are each one statement in its own
//! implicit transaction, the bearer's token row checked inside it, so a call costs four round
//! trips and three durable commits; the wake-ups for other replicas follow the commit
//! (`wakeups`). A post that claims for a claim standing on its replica (`crate::handoff`) does
//! both in one statement, so one round trip and one commit for the two (`POST_THEN_CLAIM`); a
//! reply that reads for a read standing there does both in one statement, in a transaction
//! whose commit the reader does not wait for (`REPLY_THEN_READ`,
//! `PgStore::reply_call_then_read`). Under load, `batch` runs many of them as one grouped
//! statement and falls back to these for what a group did not complete. Only when
//! a statement finds nothing to do does a second look say why (the cold path).

use sealpost_protocol::api::CallState;
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgPool, PgRow};

use super::sessions::cancel_open_calls;
use super::{Notifier, notify, require_live};
use crate::store::rows::{self, Columns};
use crate::store::{
    Bearer, CallView, ClaimFor, ClaimedRow, LAPSED_SWEEP_FULL_EVERY_MS, NewCall, StoreError,
    StoreResult, SweepStats, b, duration_to_sql, is_unique_violation, time_to_sql,
};
use crate::store::{sql, sweep};
use crate::wake::Topic;

/// The bearer and the time as a hot-path statement's first five parameters (see
/// [`token_live!`]).
fn with_bearer<'q>(
    sql: &'static str,
    bearer: &Bearer,
    now: UnixMillis,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    sqlx::query(sql)
        .bind(b(bearer.token_id))
        .bind(b(bearer.owner_id))
        .bind(bearer.kind.as_str())
        .bind(bearer.pair_id.map(b))
        .bind(time_to_sql(now))
}

/// Where a post may store its call, over `sessions s`: the session `$9` of owner `$2` is live at
/// `$5` and of the poster's pairing (`$4`) and app (token `$1`), it holds fewer than `$10`
/// pending calls, and the poster's token is live; the session row share-locked (see
/// [`POST_CALL`]).
macro_rules! post_allowed {
    () => {
        concat!(
            "WHERE s.owner_id = $2 AND s.session_id = $9 AND s.ended_at IS NULL \
             AND s.expires_at > $5 AND ($4::bytea IS NULL OR s.pair_id = $4) AND s.app_origin = ",
            token_app!("$1"),
            " AND ($10::bigint IS NULL OR (SELECT COUNT(*) FROM calls p WHERE p.owner_id = $2 \
                 AND p.session_id = $9 AND p.state = 'pending' AND p.lease_expires_at IS NULL) \
                 < $10) AND ",
            token_live!(),
            " FOR SHARE OF s"
        )
    };
}

/// `$6` call id, `$7` envelope, `$8` expires_at, `$9` session id, `$10` most pending calls
/// (NULL: no cap).
///
/// `FOR SHARE OF s`: the session row is share-locked until this post commits, so ending or
/// replacing the session (an UPDATE of that row) waits for the post and then cancels its
/// call; a post that comes second waits for the end and then sees the session ended. Posts
/// share the lock, so they do not wait for each other.
const POST_CALL: &str = concat!(
    "WITH posted AS ( \
        INSERT INTO calls (owner_id, call_id, session_id, pair_id, app_origin, state, envelope, \
            created_at, expires_at) \
        SELECT s.owner_id, $6, s.session_id, s.pair_id, s.app_origin, 'pending', $7, $5, \
            LEAST($8, s.expires_at) \
        FROM sessions s \
        ",
    post_allowed!(),
    " \
        RETURNING expires_at) \
     SELECT expires_at FROM posted"
);

pub(super) async fn post_call(
    pool: &PgPool,
    notifier: &Notifier,
    bearer: &Bearer,
    c: &NewCall,
    max_pending: Option<u32>,
) -> StoreResult<UnixMillis> {
    let inserted = with_post(POST_CALL, bearer, c, max_pending)
        .fetch_optional(pool)
        .await;
    match inserted {
        Ok(Some(row)) => {
            notifier.send(Topic::Session(c.owner_id, c.session_id));
            row.time("expires_at")
        }
        Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate),
        Err(e) => Err(e.into()),
        // The cold path: say why nothing was stored.
        Ok(None) => {
            require_live(pool, bearer, c.created_at).await?;
            let session = sqlx::query(sql::SELECT_SESSION_STATE)
                .bind(b(c.owner_id))
                .bind(b(c.session_id))
                .bind(b(bearer.token_id))
                .fetch_optional(pool)
                .await?;
            Err(rows::why_not_posted(
                session.as_ref(),
                bearer.pair_id,
                c.created_at,
            ))
        }
    }
}

/// A post's statement with its first ten parameters bound: the bearer and the call's time
/// ([`with_bearer`]), then `$6` call id, `$7` envelope, `$8` expires_at, `$9` session id, `$10`
/// most pending calls.
fn with_post<'q>(
    sql: &'static str,
    bearer: &Bearer,
    c: &'q NewCall,
    max_pending: Option<u32>,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    with_bearer(sql, bearer, c.created_at)
        .bind(b(c.call_id))
        .bind(&c.envelope)
        .bind(time_to_sql(c.expires_at))
        .bind(b(c.session_id))
        .bind(max_pending.map(i64::from))
}

/// A claim's first two parts: `live`, whether the claimer's token (`$token`, of kind `$kind`
/// and pairing `$pair`, owner `$2`, at `$5`) and the session `$session` are live, and `picked`,
/// up to `$max` of the session's pending calls, oldest first, locked, skipping any another
/// claim holds. [`CLAIM_CALLS`] and [`POST_THEN_CLAIM`] claim what `picked` holds.
macro_rules! live_and_picked {
    ($token:literal, $kind:literal, $pair:literal, $session:literal, $max:literal) => {
        concat!(
            "WITH live AS MATERIALIZED (SELECT ",
            token_live!($token, "$2", $kind, $pair, "$5"),
            " AS token, EXISTS (SELECT 1 FROM sessions WHERE owner_id = $2 AND session_id = ",
            $session,
            " AND ended_at IS NULL AND expires_at > $5 AND (",
            $pair,
            "::bytea IS NULL OR pair_id = ",
            $pair,
            ") AND app_origin = ",
            token_app!($token),
            ") AS session), \
             picked AS (SELECT c.owner_id, c.call_id FROM calls c, live \
                WHERE live.token AND live.session \
                AND c.owner_id = $2 AND c.session_id = ",
            $session,
            " AND c.state = 'pending' \
                AND c.lease_expires_at IS NULL AND c.expires_at > $5 \
                ORDER BY c.created_at LIMIT ",
            $max,
            " FOR UPDATE OF c SKIP LOCKED)"
        )
    };
}

/// `$6` session id, `$7` most calls, `$8` lease.
///
/// One statement whatever it finds: its first row says whether the token and the session are
/// live, and carries a claimed call if there is one; every further row is another claimed
/// call. SKIP LOCKED: concurrent claimers (on any replica) take disjoint rows instead of
/// queueing; the outer UPDATE re-checks the state, so a row is claimed once. A pending call's
/// lease is unset, so `lease_expires_at IS NULL` changes nothing but lets the planner use the
/// pending index (keyed on it: migrations/postgres/0003); the post's count says it for the same
/// reason. It locks calls only: `claimer_seen_at` is written apart (`PgStore::claim_calls`), so
/// no claim holds a call while it waits for a session row that a session's end holds.
const CLAIM_CALLS: &str = concat!(
    live_and_picked!("$1", "$3", "$4", "$6", "$7"),
    ", \
     claimed AS (UPDATE calls c SET state = 'claimed', lease_expires_at = LEAST($5 + $8, c.expires_at) \
            FROM picked WHERE c.owner_id = picked.owner_id AND c.call_id = picked.call_id \
            AND c.state = 'pending' \
            RETURNING c.call_id, c.envelope, c.lease_expires_at, c.created_at) \
     SELECT live.token, live.session, claimed.* FROM live LEFT JOIN claimed ON true"
);

pub(super) async fn claim_calls(
    pool: &PgPool,
    bearer: &Bearer,
    session_id: SessionId,
    now: UnixMillis,
    max: u32,
    lease_ms: u64,
) -> StoreResult<Vec<ClaimedRow>> {
    let rows = with_bearer(CLAIM_CALLS, bearer, now)
        .bind(b(session_id))
        .bind(i64::from(max))
        .bind(duration_to_sql(lease_ms))
        .fetch_all(pool)
        .await?;
    let first = rows.first().ok_or_else(|| {
        StoreError::Unreadable("the claim statement returned no status row".into())
    })?;
    if !first.flag("token")? {
        return Err(StoreError::TokenNotLive);
    }
    if !first.flag("session")? {
        return Err(why_not_live(pool, bearer, session_id).await);
    }
    let claimed = rows
        .into_iter()
        .filter(|row| matches!(row.opt_bytes("call_id"), Ok(Some(_))))
        .collect();
    rows::claimed(claimed)
}

/// [`POST_CALL`] and [`CLAIM_CALLS`] for a standing claimer as one statement: one round trip
/// and one commit. `$11` the claimer's token id, `$12` its kind, `$13` its pair id, `$14` most
/// calls to claim, `$15` the lease; the claimer is of the poster's owner (`$2`), at the post's
/// `now` (`$5`).
///
/// A statement's parts do not see each other's rows, so the claim is split: `picked` picks and
/// `claimed` claims the session's pending calls as [`CLAIM_CALLS`] does, and the new call is
/// stored already claimed when the claim is live and took fewer than `$14` of them (else it is
/// stored pending, as a post stores it). Nothing is claimed unless the call is stored, so a
/// post that stores nothing changes nothing at all.
const POST_THEN_CLAIM: &str = concat!(
    live_and_picked!("$11", "$12", "$13", "$9", "$14"),
    ", \
     hand AS (SELECT live.token AND live.session AND (SELECT COUNT(*) FROM picked) < $14 AS new \
            FROM live), \
     posted AS ( \
        INSERT INTO calls (owner_id, call_id, session_id, pair_id, app_origin, state, envelope, \
            created_at, expires_at, lease_expires_at) \
        SELECT s.owner_id, $6, s.session_id, s.pair_id, s.app_origin, \
            CASE WHEN hand.new THEN 'claimed' ELSE 'pending' END, $7, $5, \
            LEAST($8, s.expires_at), CASE WHEN hand.new THEN LEAST($5 + $15, $8, s.expires_at) END \
        FROM sessions s, hand \
        ",
    post_allowed!(),
    " \
        RETURNING call_id, envelope, lease_expires_at, created_at, expires_at, state), \
     claimed AS (UPDATE calls c SET state = 'claimed', \
            lease_expires_at = LEAST($5 + $15, c.expires_at) \
            FROM picked WHERE c.owner_id = picked.owner_id AND c.call_id = picked.call_id \
            AND c.state = 'pending' AND EXISTS (SELECT 1 FROM posted) \
            RETURNING c.call_id, c.envelope, c.lease_expires_at, c.created_at) \
     SELECT true AS posted, call_id, envelope, lease_expires_at, created_at, expires_at, state \
        FROM posted \
     UNION ALL SELECT false, call_id, envelope, lease_expires_at, created_at, NULL, 'claimed' \
        FROM claimed"
);

/// [`POST_THEN_CLAIM`]. A post it did not store is left to [`post_call`], which stores it or
/// says why; the claim's answer is then dropped, as it is when the claimer's token or session
/// is not live, and the claimer claims on its own, which says why.
pub(super) async fn post_call_then_claim(
    pool: &PgPool,
    notifier: &Notifier,
    bearer: &Bearer,
    c: &NewCall,
    max_pending: Option<u32>,
    claim: ClaimFor,
) -> StoreResult<UnixMillis> {
    let rows = with_post(POST_THEN_CLAIM, bearer, c, max_pending)
        .bind(b(claim.bearer.token_id))
        .bind(claim.bearer.kind.as_str())
        .bind(claim.bearer.pair_id.map(b))
        .bind(i64::from(claim.max))
        .bind(duration_to_sql(claim.lease_ms))
        .fetch_all(pool)
        .await;
    let posted = match &rows {
        Ok(rows) => rows.iter().find(|row| row.flag("posted").unwrap_or(false)),
        Err(_) => None,
    };
    let Some(posted) = posted else {
        drop(claim);
        return post_call(pool, notifier, bearer, c, max_pending).await;
    };
    let expires_at = posted.time("expires_at")?;
    notifier.send(Topic::Session(c.owner_id, c.session_id));
    let rows = rows.unwrap_or_default();
    let claimed: Vec<_> = rows
        .into_iter()
        .filter(|row| row.text("state").is_ok_and(|state| state == "claimed"))
        .collect();
    if !claimed.is_empty() {
        let _ = claim.answer.send(rows::claimed(claimed));
    }
    Ok(expires_at)
}

/// Answers the claimed call `$6` with `$7`, returning `$returning` of the answered row.
macro_rules! answer_claimed {
    ($returning:literal) => {
        concat!(
            "UPDATE calls SET state = 'answered', reply = $7, envelope = NULL, answered_at = $5 \
             WHERE owner_id = $2 AND call_id = $6 AND state = 'claimed' AND lease_expires_at > $5 \
             AND ($4::bytea IS NULL OR pair_id = $4) AND app_origin = ",
            token_app!("$1"),
            " AND ",
            token_live!(),
            " RETURNING ",
            $returning
        )
    };
}

/// `$6` call id, `$7` reply.
const REPLY_CALL: &str = concat!(
    "WITH answered AS (",
    answer_claimed!("call_id"),
    ") SELECT call_id FROM answered"
);

/// [`REPLY_CALL`], then [`READ_CALL`] of the answered row for the reader `$8` (token), `$9`
/// (kind), `$10` (pairing) of the same owner, in one statement: `replied` says whether the reply
/// was stored; if it was, the rest is what the reader's own read would find.
const REPLY_THEN_READ: &str = concat!(
    "WITH answered AS (",
    answer_claimed!(
        "pair_id, app_origin, state, reply, cancel_reason, expires_at, lease_expires_at"
    ),
    "), live AS MATERIALIZED (SELECT ",
    token_live!("$8", "$2", "$9", "$10", "$5"),
    " AS token) \
     SELECT EXISTS (SELECT 1 FROM answered) AS replied, live.token, c.state, c.reply, \
            c.cancel_reason, c.expires_at, c.lease_expires_at \
     FROM live LEFT JOIN answered c ON live.token \
            AND ($10::bytea IS NULL OR c.pair_id = $10) AND c.app_origin = ",
    token_app!("$8")
);

/// Answers a claimed call in `tx` without committing and reads it for `reader` (of the same
/// owner) in the same statement: `None` if the reply was not stored (then [`reply_call`] says
/// why), else what the reader's read finds.
pub(super) async fn reply_then_read_in(
    tx: &mut sqlx::PgConnection,
    bearer: &Bearer,
    call_id: CallId,
    reply: &[u8],
    now: UnixMillis,
    reader: &Bearer,
) -> StoreResult<Option<StoreResult<Option<CallView>>>> {
    let row = with_bearer(REPLY_THEN_READ, bearer, now)
        .bind(b(call_id))
        .bind(reply)
        .bind(b(reader.token_id))
        .bind(reader.kind.as_str())
        .bind(reader.pair_id.map(b))
        .fetch_one(tx)
        .await?;
    if !row.flag("replied")? {
        return Ok(None);
    }
    Ok(Some(read_view(&row, now)))
}

pub(super) async fn reply_call(
    pool: &PgPool,
    notifier: &Notifier,
    bearer: &Bearer,
    call_id: CallId,
    reply: Vec<u8>,
    now: UnixMillis,
) -> StoreResult<()> {
    let (owner_id, pair_id) = (bearer.owner_id, bearer.pair_id.map(b));
    let done = with_bearer(REPLY_CALL, bearer, now)
        .bind(b(call_id))
        .bind(&reply)
        .fetch_optional(pool)
        .await?;
    if done.is_some() {
        notifier.send(Topic::Call(owner_id, call_id));
        return Ok(());
    }
    // The cold path: say why nothing was stored, expiring a claim whose lease lapsed.
    require_live(pool, bearer, now).await?;
    let mut tx = pool.begin().await?;
    let row = sqlx::query(concat!(
        "SELECT state, expires_at, lease_expires_at FROM calls WHERE owner_id = $1 AND call_id = $2 \
         AND ($3::bytea IS NULL OR pair_id = $3) AND app_origin = ",
        token_app!("$4"),
        " FOR UPDATE"
    ))
    .bind(b(owner_id))
    .bind(b(call_id))
    .bind(pair_id)
    .bind(b(bearer.token_id))
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

/// `$6` call id.
///
/// One statement that writes nothing: its one row says whether the token is live and carries
/// the call, if the scope holds one. The delivery mark of a first read is written afterwards
/// (`deliveries.rs`).
const READ_CALL: &str = concat!(
    "WITH live AS MATERIALIZED (SELECT ",
    token_live!(),
    " AS token) \
     SELECT live.token, c.state, c.reply, c.cancel_reason, c.expires_at, c.lease_expires_at \
     FROM live LEFT JOIN calls c ON live.token AND c.owner_id = $2 AND c.call_id = $6 \
            AND ($4::bytea IS NULL OR c.pair_id = $4) AND c.app_origin = ",
    token_app!("$1")
);

pub(super) async fn read_call<'e>(
    executor: impl sqlx::Executor<'e, Database = Postgres>,
    bearer: &Bearer,
    call_id: CallId,
    now: UnixMillis,
) -> StoreResult<Option<CallView>> {
    let row = with_bearer(READ_CALL, bearer, now)
        .bind(b(call_id))
        .fetch_one(executor)
        .await?;
    read_view(&row, now)
}

/// What a read finds from its row (`token, state, reply, …`).
fn read_view(row: &PgRow, now: UnixMillis) -> StoreResult<Option<CallView>> {
    if !row.flag("token")? {
        return Err(StoreError::TokenNotLive);
    }
    if row.opt_text("state")?.is_none() {
        return Ok(None);
    }
    rows::view_at(row, now).map(Some)
}

pub(super) async fn cancel_call(
    pool: &PgPool,
    bearer: &Bearer,
    call_id: CallId,
    reason: CancelReason,
    now: UnixMillis,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query(concat!(
        "UPDATE calls SET state = 'cancelled', cancel_reason = $4, envelope = NULL, \
         lease_expires_at = COALESCE(lease_expires_at, expires_at) \
         WHERE owner_id = $1 AND call_id = $2 AND ($3::bytea IS NULL OR pair_id = $3) \
         AND app_origin = ",
        token_app!("$6"),
        " AND expires_at > $5 \
         AND (state = 'pending' OR (state = 'claimed' AND lease_expires_at > $5))"
    ))
    .bind(b(bearer.owner_id))
    .bind(b(call_id))
    .bind(bearer.pair_id.map(b))
    .bind(reason.as_str())
    .bind(time_to_sql(now))
    .bind(b(bearer.token_id))
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 1 {
        notify(&mut tx, Topic::Call(bearer.owner_id, call_id)).await?;
        tx.commit().await?;
        return Ok(());
    }
    let row = sqlx::query(concat!(
        "SELECT state, expires_at, lease_expires_at FROM calls \
         WHERE owner_id = $1 AND call_id = $2 AND ($3::bytea IS NULL OR pair_id = $3) \
         AND app_origin = ",
        token_app!("$4")
    ))
    .bind(b(bearer.owner_id))
    .bind(b(call_id))
    .bind(bearer.pair_id.map(b))
    .bind(b(bearer.token_id))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound);
    };
    Err(StoreError::WrongState(rows::state_at(&row, now)?))
}

/// `$1` now, `$2` the lower bound of lease ends to look at: claims whose lease lapsed expire
/// for good. The lease index covers every call that left `pending` (see
/// migrations/postgres/0003), so the sweep reads only the lease ends since its last run.
const SWEEP_EXPIRE_LAPSED_SINCE: &str = "UPDATE calls SET state = 'expired', envelope = NULL \
     WHERE state = 'claimed' AND lease_expires_at <= $1 AND lease_expires_at > $2";

/// How far before its last sweep the sweeper looks again for lapsed leases: a margin for
/// clocks that step back and for replicas whose clocks differ.
const LAPSED_SWEEP_OVERLAP_MS: u64 = 10_000;

/// Which lease ends this process's sweeps have read. Each sweep's window starts at the last
/// one's `now` less [`LAPSED_SWEEP_OVERLAP_MS`]; a sweep reads every lease end when none has
/// for [`LAPSED_SWEEP_FULL_EVERY_MS`] (so does the first one after a start). A lease end older
/// than the window, written by a replica whose clock lags by more than the overlap, is found
/// by that full read; until then it reads as expired (`effective_state`).
#[derive(Debug, Default)]
pub(super) struct SweepWindow {
    last: Option<UnixMillis>,
    last_full: Option<UnixMillis>,
}

impl SweepWindow {
    /// The lower bound (exclusive) of the lease ends a sweep at `now` reads; `None`: all.
    fn since(&self, now: UnixMillis) -> Option<UnixMillis> {
        let full_due = self
            .last_full
            .is_none_or(|full| now.saturating_sub(full) >= LAPSED_SWEEP_FULL_EVERY_MS);
        if full_due {
            return None;
        }
        self.last
            .map(|last| last.saturating_sub_ms(LAPSED_SWEEP_OVERLAP_MS))
    }

    /// Records a sweep at `now` that read from `since`.
    fn swept(&mut self, now: UnixMillis, since: Option<UnixMillis>) {
        self.last = Some(now);
        if since.is_none() {
            self.last_full = Some(now);
        }
    }
}

/// `window`: the lease ends this process's earlier sweeps read; updated once this one commits.
pub(super) async fn sweep(
    pool: &PgPool,
    now: UnixMillis,
    grace_ms: u64,
    window: &std::sync::Mutex<SweepWindow>,
) -> StoreResult<SweepStats> {
    let since = window.lock().expect("sweep window lock").since(now);
    let mut tx = pool.begin().await?;
    let mut stats = SweepStats::default();
    stats.expired_calls += sqlx::query(sql::SWEEP_EXPIRE_PENDING)
        .bind(time_to_sql(now))
        .execute(&mut *tx)
        .await?
        .rows_affected();
    stats.expired_calls += sqlx::query(SWEEP_EXPIRE_LAPSED_SINCE)
        .bind(time_to_sql(now))
        .bind(since.map_or(i64::MIN, time_to_sql))
        .execute(&mut *tx)
        .await?
        .rows_affected();
    sweep::after_expiry::<Postgres>(&mut tx, now, grace_ms, &mut stats, cancel_open_calls).await?;
    tx.commit().await?;
    window.lock().expect("sweep window lock").swept(now, since);
    Ok(stats)
}

/// A claim found its session not live: missing (404, as another app's is) or ended (410)?
async fn why_not_live(pool: &PgPool, bearer: &Bearer, session_id: SessionId) -> StoreError {
    let exists: Result<Option<i32>, sqlx::Error> = sqlx::query_scalar(concat!(
        "SELECT 1 FROM sessions WHERE owner_id = $1 AND session_id = $2 \
         AND ($3::bytea IS NULL OR pair_id = $3) AND app_origin = ",
        token_app!("$4")
    ))
    .bind(b(bearer.owner_id))
    .bind(b(session_id))
    .bind(bearer.pair_id.map(b))
    .bind(b(bearer.token_id))
    .fetch_optional(pool)
    .await;
    match exists {
        Ok(Some(_)) => StoreError::SessionEnded,
        Ok(None) => StoreError::NotFound,
        Err(error) => error.into(),
    }
}
