//! The call loop's three writes, each run for a whole writer batch in one statement: every
//! statement is a round trip to sqlx's worker thread, so under load one statement for N posts
//! (and one for N claims, one for N replies) is what lets the single writer keep up.
//!
//! Each grouped statement is the single-call statement over a `VALUES` list, with the same
//! conditions per row, the bearer's token check among them ([`token_live`]): a request whose
//! token is not live changes nothing. A request the grouped statement did not satisfy is then
//! explained (or, for a second request on the same call or session in one batch, run alone) by
//! the per-call statements, token first, so every answer is what the call would have got on
//! its own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sealpost_protocol::api::CallState;
use sealpost_protocol::ids::{CallId, OwnerId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::AssertSqlSafe;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use tokio::sync::oneshot;

use super::batch_read::Deliveries;
use crate::store::ReadFor;
use crate::store::rows::{self, Columns};
use crate::store::sql;
use crate::store::{
    Bearer, ClaimedRow, NewCall, StoreError, StoreResult, b, duration_to_sql, time_to_sql,
};

/// Rows per grouped statement (SQLite allows 32,766 bound values; a post binds 9).
const ROWS_PER_STATEMENT: usize = 128;

/// A post waiting for the writer.
pub(crate) struct PostOp {
    pub bearer: Bearer,
    pub call: NewCall,
    pub max_pending: Option<u32>,
    pub answer: oneshot::Sender<StoreResult<UnixMillis>>,
    /// A claim for a claimer standing on this replica, run in the same batch after the posts.
    pub then_claim: Option<ClaimOp>,
}

/// A claim waiting for the writer. `write_seen`: also refresh the session's `claimer_seen_at`.
pub(crate) struct ClaimOp {
    pub bearer: Bearer,
    pub session_id: SessionId,
    pub now: UnixMillis,
    pub max: u32,
    pub lease_ms: u64,
    pub write_seen: bool,
    pub answer: oneshot::Sender<StoreResult<Vec<ClaimedRow>>>,
}

/// A reply waiting for the writer.
pub(crate) struct ReplyOp {
    pub bearer: Bearer,
    pub call_id: CallId,
    pub reply: Vec<u8>,
    pub now: UnixMillis,
    pub answer: oneshot::Sender<StoreResult<()>>,
    /// A read to run for a standing reader once the batch's replies are stored.
    pub then_read: Option<ReadFor>,
}

/// The token check of every call-loop statement, as SQL over the expressions that hold the
/// token's id, owner, kind and pairing and the operation's `now`: the row exists, agrees with
/// the claims, is unrevoked and unexpired, and its owner is enabled.
pub(crate) fn token_live(token: &str, owner: &str, kind: &str, pair: &str, now: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM tokens t JOIN owners o ON o.id = t.owner_id \
         WHERE t.id = {token} AND t.owner_id = {owner} AND t.kind = {kind} AND t.pair_id IS {pair} \
         AND t.revoked_at IS NULL AND t.expires_at > {now} AND o.disabled_at IS NULL \
         AND (o.confirmed_until IS NULL OR o.confirmed_until > {now}))"
    )
}

/// Whether `bearer`'s token is live at `now`: how a request that changed nothing learns
/// whether its token is why.
pub(crate) async fn bearer_live(
    conn: &mut SqliteConnection,
    bearer: &Bearer,
    now: UnixMillis,
) -> StoreResult<bool> {
    let sql = format!(
        "SELECT {} AS live",
        token_live("?1", "?2", "?3", "?4", "?5")
    );
    // Safe: the text is fixed; every value is bound.
    let live: bool = sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(b(bearer.token_id))
        .bind(b(bearer.owner_id))
        .bind(bearer.kind.as_str())
        .bind(bearer.pair_id.map(b))
        .bind(time_to_sql(now))
        .fetch_one(&mut *conn)
        .await?;
    Ok(live)
}

pub(crate) fn placeholders(rows: usize, columns: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    vec![row; rows].join(", ")
}

/// Splits `ops` into the first request per key (run grouped) and the repeats (run alone after).
pub(crate) fn first_per_key<T, K: std::hash::Hash + Eq>(
    ops: Vec<T>,
    key: impl Fn(&T) -> K,
) -> (Vec<T>, Vec<T>) {
    let mut seen = HashSet::new();
    ops.into_iter().partition(|op| seen.insert(key(op)))
}

pub(crate) async fn post_calls(conn: &mut SqliteConnection, ops: Vec<PostOp>) {
    let (grouped, repeats) = first_per_key(ops, |op| (op.call.owner_id, op.call.call_id));
    for chunk in chunk_owned(grouped)
        .into_iter()
        .chain(repeats.into_iter().map(|op| vec![op]))
    {
        let inserted = insert_posts(conn, &chunk).await.map_err(Arc::new);
        for op in chunk {
            let result = match &inserted {
                Err(error) => Err(StoreError::Grouped(error.clone())),
                Ok(inserted) => match inserted.get(&(op.call.owner_id, op.call.call_id)) {
                    Some(expires_at) => Ok(*expires_at),
                    None => Err(why_not_posted(conn, &op).await),
                },
            };
            let _ = op.answer.send(result);
        }
    }
}

pub(crate) fn chunk_owned<T>(ops: Vec<T>) -> Vec<Vec<T>> {
    let mut chunks = Vec::new();
    let mut ops = ops.into_iter().peekable();
    while ops.peek().is_some() {
        chunks.push(ops.by_ref().take(ROWS_PER_STATEMENT).collect());
    }
    chunks
}

/// One INSERT for every post: each row only if its token is live, its session is live and
/// belongs to the token's pairing, and has room under the pending limit (counting the rows before it in this batch).
/// `INDEXED BY` the pending queue: left to itself the planner counts through every call the
/// session ever had.
async fn insert_posts(
    conn: &mut SqliteConnection,
    ops: &[PostOp],
) -> StoreResult<HashMap<(OwnerId, CallId), UnixMillis>> {
    let sql = format!(
        "INSERT INTO calls (owner_id, call_id, session_id, pair_id, app_origin, state, envelope, created_at, expires_at) \
         SELECT owner_id, call_id, session_id, pair_id, app_origin, 'pending', envelope, created_at, expires_at FROM ( \
            SELECT s.owner_id, v.column2 AS call_id, s.session_id, s.pair_id, s.app_origin, v.column3 AS envelope, \
                   v.column4 AS created_at, MIN(v.column5, s.expires_at) AS expires_at, v.column8 AS max_pending, \
                   ROW_NUMBER() OVER (PARTITION BY s.owner_id, s.session_id ORDER BY v.column9) AS nth, \
                   (SELECT COUNT(*) FROM calls p INDEXED BY calls_pending_by_session \
                      WHERE p.owner_id = s.owner_id \
                      AND p.session_id = s.session_id AND p.state = 'pending') AS pending \
            FROM (VALUES {}) AS v \
            JOIN sessions s ON s.owner_id = v.column1 AND s.session_id = v.column6 \
            WHERE s.ended_at IS NULL AND s.expires_at > v.column4 \
              AND (v.column7 IS NULL OR s.pair_id = v.column7) AND s.app_origin = {} AND {}) \
         WHERE max_pending IS NULL OR pending + nth <= max_pending \
         ON CONFLICT DO NOTHING \
         RETURNING owner_id, call_id, expires_at",
        placeholders(ops.len(), 11),
        token_app!("v.column10"),
        token_live(
            "v.column10",
            "v.column1",
            "v.column11",
            "v.column7",
            "v.column4"
        ),
    );
    // Safe: the text varies only in how many placeholders it has; every value is bound.
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for (n, op) in ops.iter().enumerate() {
        let c = &op.call;
        query = query
            .bind(b(c.owner_id))
            .bind(b(c.call_id))
            .bind(&c.envelope)
            .bind(time_to_sql(c.created_at))
            .bind(time_to_sql(c.expires_at))
            .bind(b(c.session_id))
            .bind(op.bearer.pair_id.map(b))
            .bind(op.max_pending.map(i64::from))
            .bind(n as i64)
            .bind(b(op.bearer.token_id))
            .bind(op.bearer.kind.as_str());
    }
    let mut inserted = HashMap::new();
    for row in query.fetch_all(&mut *conn).await? {
        inserted.insert(
            (row.id("owner_id")?, row.id("call_id")?),
            row.time("expires_at")?,
        );
    }
    Ok(inserted)
}

/// Why a post was not inserted, in the order a client can act on.
async fn why_not_posted(conn: &mut SqliteConnection, op: &PostOp) -> StoreError {
    let c = &op.call;
    match bearer_live(conn, &op.bearer, c.created_at).await {
        Ok(true) => {}
        Ok(false) => return StoreError::TokenNotLive,
        Err(error) => return error,
    }
    let session = sqlx::query(sql::SELECT_SESSION_STATE)
        .bind(b(c.owner_id))
        .bind(b(c.session_id))
        .bind(b(op.bearer.token_id))
        .fetch_optional(&mut *conn)
        .await;
    let session = match session {
        Ok(session) => session,
        Err(error) => return error.into(),
    };
    let why = rows::why_not_posted(session.as_ref(), op.bearer.pair_id, c.created_at);
    if !matches!(why, StoreError::TooManyPending) {
        return why;
    }
    // The session would take it: either the id is taken, or the session is full.
    let taken: Result<Option<i64>, sqlx::Error> =
        sqlx::query_scalar("SELECT 1 FROM calls WHERE owner_id = ?1 AND call_id = ?2")
            .bind(b(c.owner_id))
            .bind(b(c.call_id))
            .fetch_optional(&mut *conn)
            .await;
    match taken {
        Ok(Some(_)) => StoreError::Duplicate,
        Ok(None) => why,
        Err(error) => error.into(),
    }
}

pub(crate) async fn claim_calls(conn: &mut SqliteConnection, ops: Vec<ClaimOp>) {
    let mut live_ops = Vec::new();
    for op in ops {
        if op.write_seen {
            match write_claimer_seen(conn, &op).await {
                Ok(()) => live_ops.push(op),
                Err(error) => {
                    let _ = op.answer.send(Err(error));
                }
            }
        } else {
            live_ops.push(op);
        }
    }
    let (grouped, repeats) = first_per_key(live_ops, |op| (op.bearer.owner_id, op.session_id));
    for chunk in chunk_owned(grouped)
        .into_iter()
        .chain(repeats.into_iter().map(|op| vec![op]))
    {
        let mut claimed = claim_grouped(conn, &chunk).await.map_err(Arc::new);
        for op in chunk {
            let result = match &mut claimed {
                Err(error) => Err(StoreError::Grouped(error.clone())),
                Ok(claimed) => {
                    let rows = claimed
                        .remove(&(op.bearer.owner_id, op.session_id))
                        .unwrap_or_default();
                    if rows.is_empty() && !op.write_seen {
                        session_live(conn, &op).await.map(|()| rows)
                    } else {
                        Ok(rows)
                    }
                }
            };
            let _ = op.answer.send(result);
        }
    }
}

/// Records that the tab polled; fails like the claim would if the token or session is not live.
async fn write_claimer_seen(conn: &mut SqliteConnection, op: &ClaimOp) -> StoreResult<()> {
    let sql = format!(
        "UPDATE sessions SET claimer_seen_at = ?3 WHERE owner_id = ?1 AND session_id = ?2 \
         AND ended_at IS NULL AND expires_at > ?3 AND (?6 IS NULL OR pair_id = ?6) \
         AND app_origin = {} AND {}",
        token_app!("?4"),
        token_live("?4", "?1", "?5", "?6", "?3")
    );
    // Safe: the text is fixed; every value is bound.
    let live = sqlx::query(AssertSqlSafe(sql))
        .bind(b(op.bearer.owner_id))
        .bind(b(op.session_id))
        .bind(time_to_sql(op.now))
        .bind(b(op.bearer.token_id))
        .bind(op.bearer.kind.as_str())
        .bind(op.bearer.pair_id.map(b))
        .execute(&mut *conn)
        .await?;
    if live.rows_affected() == 0 {
        return Err(why_not_live(conn, op).await);
    }
    Ok(())
}

/// One UPDATE for every claim: per session, its oldest pending unexpired calls, at most `max`,
/// and only while the session and the token are live. The pick and the state change are one statement, so a
/// call is handed out once. Calls posted in the same millisecond go in posting order (`rowid`).
/// `INDEXED BY` the pending queue, as for posts.
async fn claim_grouped(
    conn: &mut SqliteConnection,
    ops: &[ClaimOp],
) -> StoreResult<HashMap<(OwnerId, SessionId), Vec<ClaimedRow>>> {
    let sql = format!(
        "UPDATE calls SET state = 'claimed', lease_expires_at = MIN(picked.lease_until, calls.expires_at) \
         FROM ( \
            SELECT c.owner_id, c.call_id, v.column3 + v.column5 AS lease_until, v.column4 AS max, \
                   ROW_NUMBER() OVER (PARTITION BY c.owner_id, c.session_id ORDER BY c.created_at, c.rowid) AS nth \
            FROM (VALUES {}) AS v \
            JOIN sessions s ON s.owner_id = v.column1 AND s.session_id = v.column2 \
                 AND s.ended_at IS NULL AND s.expires_at > v.column3 \
                 AND (v.column8 IS NULL OR s.pair_id = v.column8) AND s.app_origin = {} AND {} \
            JOIN calls AS c INDEXED BY calls_pending_by_session \
                 ON c.owner_id = v.column1 AND c.session_id = v.column2 \
                 AND c.state = 'pending' AND c.expires_at > v.column3) AS picked \
         WHERE calls.owner_id = picked.owner_id AND calls.call_id = picked.call_id \
           AND picked.nth <= picked.max AND calls.state = 'pending' \
         RETURNING calls.owner_id, calls.session_id, calls.call_id, calls.envelope, \
                   calls.lease_expires_at, calls.created_at",
        placeholders(ops.len(), 8),
        token_app!("v.column6"),
        token_live(
            "v.column6",
            "v.column1",
            "v.column7",
            "v.column8",
            "v.column3"
        ),
    );
    // Safe: the text varies only in how many placeholders it has; every value is bound.
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for op in ops {
        query = query
            .bind(b(op.bearer.owner_id))
            .bind(b(op.session_id))
            .bind(time_to_sql(op.now))
            .bind(i64::from(op.max))
            .bind(duration_to_sql(op.lease_ms))
            .bind(b(op.bearer.token_id))
            .bind(op.bearer.kind.as_str())
            .bind(op.bearer.pair_id.map(b));
    }
    let mut by_session: HashMap<(OwnerId, SessionId), Vec<SqliteRow>> = HashMap::new();
    for row in query.fetch_all(&mut *conn).await? {
        let key = (row.id("owner_id")?, row.id("session_id")?);
        by_session.entry(key).or_default().push(row);
    }
    // `rows::claimed` maps each session's rows and puts them oldest first.
    by_session
        .into_iter()
        .map(|(key, rows)| Ok((key, rows::claimed(rows)?)))
        .collect()
}

/// A claim that found nothing and skipped the `claimer_seen_at` write: are its token and its
/// session live?
async fn session_live(conn: &mut SqliteConnection, op: &ClaimOp) -> StoreResult<()> {
    let live: Option<i64> = sqlx::query_scalar(concat!(
        "SELECT 1 FROM sessions WHERE owner_id = ?1 AND session_id = ?2 \
         AND ended_at IS NULL AND expires_at > ?3 AND (?4 IS NULL OR pair_id = ?4) \
         AND app_origin = ",
        token_app!("?5")
    ))
    .bind(b(op.bearer.owner_id))
    .bind(b(op.session_id))
    .bind(time_to_sql(op.now))
    .bind(op.bearer.pair_id.map(b))
    .bind(b(op.bearer.token_id))
    .fetch_optional(&mut *conn)
    .await?;
    if live.is_some() && bearer_live(conn, &op.bearer, op.now).await? {
        return Ok(());
    }
    Err(why_not_live(conn, op).await)
}

/// A claim found its token or session not live: which answer (401, 404 or 410)?
async fn why_not_live(conn: &mut SqliteConnection, op: &ClaimOp) -> StoreError {
    match bearer_live(conn, &op.bearer, op.now).await {
        Ok(true) => {}
        Ok(false) => return StoreError::TokenNotLive,
        Err(error) => return error,
    }
    let exists: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(concat!(
        "SELECT 1 FROM sessions WHERE owner_id = ?1 AND session_id = ?2 \
         AND (?3 IS NULL OR pair_id = ?3) AND app_origin = ",
        token_app!("?4")
    ))
    .bind(b(op.bearer.owner_id))
    .bind(b(op.session_id))
    .bind(op.bearer.pair_id.map(b))
    .bind(b(op.bearer.token_id))
    .fetch_optional(&mut *conn)
    .await;
    match exists {
        Ok(Some(_)) => StoreError::SessionEnded,
        Ok(None) => StoreError::NotFound,
        Err(error) => error.into(),
    }
}

pub(crate) async fn reply_calls(
    conn: &mut SqliteConnection,
    deliveries: &Deliveries,
    ops: Vec<ReplyOp>,
) {
    let (grouped, repeats) = first_per_key(ops, |op| (op.bearer.owner_id, op.call_id));
    for chunk in chunk_owned(grouped)
        .into_iter()
        .chain(repeats.into_iter().map(|op| vec![op]))
    {
        let answered = answer_grouped(conn, &chunk).await.map_err(Arc::new);
        for op in chunk {
            let result = match &answered {
                Err(error) => Err(StoreError::Grouped(error.clone())),
                Ok(answered) if answered.contains(&(op.bearer.owner_id, op.call_id)) => Ok(()),
                Ok(_) => Err(match why_not_answered(conn, &op).await {
                    // Read already; its mark is not written yet.
                    StoreError::WrongState(CallState::Answered)
                        if deliveries.is_marked(op.bearer.owner_id, op.call_id) =>
                    {
                        StoreError::WrongState(CallState::Delivered)
                    }
                    why => why,
                }),
            };
            let _ = op.answer.send(result);
        }
    }
}

/// One UPDATE for every reply: each call must be claimed with its lease still running, and in
/// the scope of a live token.
async fn answer_grouped(
    conn: &mut SqliteConnection,
    ops: &[ReplyOp],
) -> StoreResult<HashSet<(OwnerId, CallId)>> {
    let sql = format!(
        "UPDATE calls SET state = 'answered', reply = v.column3, envelope = NULL, answered_at = v.column4 \
         FROM (VALUES {}) AS v \
         WHERE calls.owner_id = v.column1 AND calls.call_id = v.column2 \
           AND calls.state = 'claimed' AND calls.lease_expires_at > v.column4 \
           AND (v.column7 IS NULL OR calls.pair_id = v.column7) AND calls.app_origin = {} AND {} \
         RETURNING calls.owner_id, calls.call_id",
        placeholders(ops.len(), 7),
        token_app!("v.column5"),
        token_live(
            "v.column5",
            "v.column1",
            "v.column6",
            "v.column7",
            "v.column4"
        ),
    );
    // Safe: the text varies only in how many placeholders it has; every value is bound.
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for op in ops {
        query = query
            .bind(b(op.bearer.owner_id))
            .bind(b(op.call_id))
            .bind(&op.reply)
            .bind(time_to_sql(op.now))
            .bind(b(op.bearer.token_id))
            .bind(op.bearer.kind.as_str())
            .bind(op.bearer.pair_id.map(b));
    }
    let mut answered = HashSet::new();
    for row in query.fetch_all(&mut *conn).await? {
        answered.insert((row.id("owner_id")?, row.id("call_id")?));
    }
    Ok(answered)
}

/// Why a reply was not taken. A claimed call whose lease lapsed expires here, for good
/// (at-most-once execution).
async fn why_not_answered(conn: &mut SqliteConnection, op: &ReplyOp) -> StoreError {
    let explain = async {
        if !bearer_live(conn, &op.bearer, op.now).await? {
            return Ok(StoreError::TokenNotLive);
        }
        let row: Option<SqliteRow> = sqlx::query(concat!(
            "SELECT state, expires_at, lease_expires_at FROM calls \
             WHERE owner_id = ?1 AND call_id = ?2 AND (?3 IS NULL OR pair_id = ?3) \
             AND app_origin = ",
            token_app!("?4")
        ))
        .bind(b(op.bearer.owner_id))
        .bind(b(op.call_id))
        .bind(op.bearer.pair_id.map(b))
        .bind(b(op.bearer.token_id))
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else {
            return Ok(StoreError::NotFound);
        };
        if rows::stored_state(&row)? == CallState::Claimed {
            sqlx::query(sql::EXPIRE_LAPSED_CLAIM)
                .bind(b(op.bearer.owner_id))
                .bind(b(op.call_id))
                .execute(&mut *conn)
                .await?;
            return Ok(StoreError::LeaseExpired);
        }
        Ok::<_, StoreError>(StoreError::WrongState(rows::state_at(&row, op.now)?))
    };
    explain.await.unwrap_or_else(|error| error)
}
