//! Group commit for the call loop's posts and replies. Each kind has one task that takes every
//! operation queued while its last statement ran and stores them with one statement (arrays
//! bound as `unnest`), so under load many calls share one commit and one flush; a lone call
//! is run at once, alone, as if there were no task.
//!
//! The grouped statement does only the happy path: each row is stored only if its token, its
//! session (or claimed call) and its limits allow, exactly as the one-call statements in
//! `calls` check them. An operation the group did not store, or whose id appears twice in one
//! group, is run again on its own through those statements, which store it or say why not, so
//! a group never changes an answer, only how many share a commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sealpost_protocol::ids::Id16;
use sealpost_time::UnixMillis;
use sqlx::postgres::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::{Notifier, calls};
use crate::store::rows::Columns;
use crate::store::{Bearer, NewCall, StoreError, StoreResult, b, time_to_sql};
use crate::wake::Topic;

/// Most operations one grouped statement carries.
const MAX_GROUP: usize = 64;
/// Operations queued per kind before a caller waits for room.
const QUEUE_DEPTH: usize = 1_024;

/// A post waiting for its group.
struct PostOp {
    bearer: Bearer,
    call: NewCall,
    max_pending: Option<u32>,
    answer: oneshot::Sender<StoreResult<UnixMillis>>,
}

/// A reply waiting for its group.
struct ReplyOp {
    bearer: Bearer,
    call_id: Id16,
    reply: Vec<u8>,
    now: UnixMillis,
    answer: oneshot::Sender<StoreResult<()>>,
}

/// The queues of the two grouping tasks; the tasks end when the last clone is dropped.
#[derive(Debug, Clone)]
pub(super) struct Batcher {
    posts: mpsc::Sender<PostOp>,
    replies: mpsc::Sender<ReplyOp>,
}

impl Batcher {
    pub(super) fn start(pool: PgPool, notifier: Notifier) -> Self {
        let (posts, post_queue) = mpsc::channel(QUEUE_DEPTH);
        let (replies, reply_queue) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(post_loop(pool.clone(), notifier.clone(), post_queue));
        tokio::spawn(reply_loop(pool, notifier, reply_queue));
        Self { posts, replies }
    }

    /// Stores a post with its group; answers once the group has committed.
    pub(super) async fn post(
        &self,
        bearer: Bearer,
        call: NewCall,
        max_pending: Option<u32>,
    ) -> StoreResult<UnixMillis> {
        let (answer, answered) = oneshot::channel();
        let op = PostOp {
            bearer,
            call,
            max_pending,
            answer,
        };
        self.posts
            .send(op)
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answered.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Stores a reply with its group; answers once the group has committed.
    pub(super) async fn reply(
        &self,
        bearer: Bearer,
        call_id: Id16,
        reply: Vec<u8>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        let (answer, answered) = oneshot::channel();
        let op = ReplyOp {
            bearer,
            call_id,
            reply,
            now,
            answer,
        };
        self.replies
            .send(op)
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answered.await.map_err(|_| StoreError::WriterStopped)?
    }
}

/// Splits a group into the first operation per `(owner, call)` and the repeats, which run
/// alone after it (they then find the call stored, or not).
fn first_per_call<T>(ops: Vec<T>, key: impl Fn(&T) -> (Id16, Id16)) -> (Vec<T>, Vec<T>) {
    let mut seen = HashSet::with_capacity(ops.len());
    ops.into_iter().partition(|op| seen.insert(key(op)))
}

async fn post_loop(pool: PgPool, notifier: Notifier, mut queue: mpsc::Receiver<PostOp>) {
    let mut ops = Vec::with_capacity(MAX_GROUP);
    while queue.recv_many(&mut ops, MAX_GROUP).await > 0 {
        if ops.len() == 1 {
            let op = ops.pop().expect("one operation");
            let stored =
                calls::post_call(&pool, &notifier, &op.bearer, &op.call, op.max_pending).await;
            let _ = op.answer.send(stored);
            continue;
        }
        let (group, repeats) = first_per_call(std::mem::take(&mut ops), |op| {
            (op.bearer.owner_id, op.call.call_id)
        });
        let stored = post_group(&pool, &group).await;
        let mut alone = repeats;
        for op in group {
            match &stored {
                Ok(stored) => match stored.get(&(op.bearer.owner_id, op.call.call_id)) {
                    Some(&expires_at) => {
                        notifier.send(Topic::Session(op.call.owner_id, op.call.session_id));
                        let _ = op.answer.send(Ok(expires_at));
                    }
                    None => alone.push(op),
                },
                Err(error) => {
                    let _ = op.answer.send(Err(StoreError::Grouped(error.clone())));
                }
            }
        }
        // Off the loop: the next group need not wait for these.
        for op in alone {
            let (pool, notifier) = (pool.clone(), notifier.clone());
            tokio::spawn(async move {
                let stored =
                    calls::post_call(&pool, &notifier, &op.bearer, &op.call, op.max_pending).await;
                let _ = op.answer.send(stored);
            });
        }
    }
}

/// The posts of a group, each stored under the same conditions as `calls::POST_CALL`'s (a
/// duplicate id is skipped, not an error, so one cannot fail the group).
const POST_GROUP: &str = concat!(
    "WITH r AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::bytea[], \
        $5::bigint[], $6::bytea[], $7::bytea[], $8::bigint[], $9::bytea[], $10::bigint[]) \
        AS r(token_id, owner_id, kind, pair_id, now, call_id, envelope, expires_at, session_id, max_pending)), \
     posted AS ( \
        INSERT INTO calls (owner_id, call_id, session_id, pair_id, state, envelope, created_at, expires_at) \
        SELECT s.owner_id, r.call_id, s.session_id, s.pair_id, 'pending', r.envelope, r.now, \
            LEAST(r.expires_at, s.expires_at) \
        FROM r JOIN sessions s ON s.owner_id = r.owner_id AND s.session_id = r.session_id \
        WHERE s.ended_at IS NULL AND s.expires_at > r.now \
        AND (r.pair_id IS NULL OR s.pair_id = r.pair_id) \
        AND (r.max_pending IS NULL OR (SELECT COUNT(*) FROM calls p WHERE p.owner_id = r.owner_id \
             AND p.session_id = r.session_id AND p.state = 'pending') < r.max_pending) \
        AND ",
    token_live!("r.token_id", "r.owner_id", "r.kind", "r.pair_id", "r.now"),
    " FOR SHARE OF s \
        ON CONFLICT (owner_id, call_id) DO NOTHING \
        RETURNING owner_id, call_id, expires_at) \
     SELECT owner_id, call_id, expires_at FROM posted"
);

async fn post_group(
    pool: &PgPool,
    group: &[PostOp],
) -> Result<HashMap<(Id16, Id16), UnixMillis>, Arc<StoreError>> {
    let column = |f: &dyn Fn(&PostOp) -> Vec<u8>| group.iter().map(f).collect::<Vec<_>>();
    let rows = sqlx::query(POST_GROUP)
        .bind(column(&|op| b(op.bearer.token_id)))
        .bind(column(&|op| b(op.bearer.owner_id)))
        .bind(
            group
                .iter()
                .map(|op| op.bearer.kind.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            group
                .iter()
                .map(|op| op.bearer.pair_id.map(b))
                .collect::<Vec<_>>(),
        )
        .bind(
            group
                .iter()
                .map(|op| time_to_sql(op.call.created_at))
                .collect::<Vec<_>>(),
        )
        .bind(column(&|op| b(op.call.call_id)))
        .bind(column(&|op| op.call.envelope.clone()))
        .bind(
            group
                .iter()
                .map(|op| time_to_sql(op.call.expires_at))
                .collect::<Vec<_>>(),
        )
        .bind(column(&|op| b(op.call.session_id)))
        .bind(
            group
                .iter()
                .map(|op| op.max_pending.map(i64::from))
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await
        .map_err(|error| Arc::new(StoreError::from(error)))?;
    rows.iter()
        .map(|row| {
            Ok((
                (row.id("owner_id")?, row.id("call_id")?),
                row.time("expires_at")?,
            ))
        })
        .collect::<StoreResult<_>>()
        .map_err(Arc::new)
}

async fn reply_loop(pool: PgPool, notifier: Notifier, mut queue: mpsc::Receiver<ReplyOp>) {
    let mut ops = Vec::with_capacity(MAX_GROUP);
    while queue.recv_many(&mut ops, MAX_GROUP).await > 0 {
        if ops.len() == 1 {
            let op = ops.pop().expect("one operation");
            let stored =
                calls::reply_call(&pool, &notifier, &op.bearer, op.call_id, op.reply, op.now).await;
            let _ = op.answer.send(stored);
            continue;
        }
        let (group, repeats) = first_per_call(std::mem::take(&mut ops), |op| {
            (op.bearer.owner_id, op.call_id)
        });
        let stored = reply_group(&pool, &group).await;
        let mut alone = repeats;
        for op in group {
            match &stored {
                Ok(stored) if stored.contains(&(op.bearer.owner_id, op.call_id)) => {
                    notifier.send(Topic::Call(op.bearer.owner_id, op.call_id));
                    let _ = op.answer.send(Ok(()));
                }
                Ok(_) => alone.push(op),
                Err(error) => {
                    let _ = op.answer.send(Err(StoreError::Grouped(error.clone())));
                }
            }
        }
        for op in alone {
            let (pool, notifier) = (pool.clone(), notifier.clone());
            tokio::spawn(async move {
                let stored =
                    calls::reply_call(&pool, &notifier, &op.bearer, op.call_id, op.reply, op.now)
                        .await;
                let _ = op.answer.send(stored);
            });
        }
    }
}

/// The replies of a group, each stored under the same conditions as `calls::REPLY_CALL`'s.
const REPLY_GROUP: &str = concat!(
    "WITH r AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::bytea[], \
        $5::bigint[], $6::bytea[], $7::bytea[]) \
        AS r(token_id, owner_id, kind, pair_id, now, call_id, reply)), \
     answered AS ( \
        UPDATE calls c SET state = 'answered', reply = r.reply, envelope = NULL, answered_at = r.now \
        FROM r WHERE c.owner_id = r.owner_id AND c.call_id = r.call_id AND c.state = 'claimed' \
        AND c.lease_expires_at > r.now AND (r.pair_id IS NULL OR c.pair_id = r.pair_id) \
        AND ",
    token_live!("r.token_id", "r.owner_id", "r.kind", "r.pair_id", "r.now"),
    " RETURNING c.owner_id, c.call_id) \
     SELECT owner_id, call_id FROM answered"
);

async fn reply_group(
    pool: &PgPool,
    group: &[ReplyOp],
) -> Result<HashSet<(Id16, Id16)>, Arc<StoreError>> {
    let column = |f: &dyn Fn(&ReplyOp) -> Vec<u8>| group.iter().map(f).collect::<Vec<_>>();
    let rows = sqlx::query(REPLY_GROUP)
        .bind(column(&|op| b(op.bearer.token_id)))
        .bind(column(&|op| b(op.bearer.owner_id)))
        .bind(
            group
                .iter()
                .map(|op| op.bearer.kind.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            group
                .iter()
                .map(|op| op.bearer.pair_id.map(b))
                .collect::<Vec<_>>(),
        )
        .bind(
            group
                .iter()
                .map(|op| time_to_sql(op.now))
                .collect::<Vec<_>>(),
        )
        .bind(column(&|op| b(op.call_id)))
        .bind(column(&|op| op.reply.clone()))
        .fetch_all(pool)
        .await
        .map_err(|error| Arc::new(StoreError::from(error)))?;
    rows.iter()
        .map(|row| Ok((row.id("owner_id")?, row.id("call_id")?)))
        .collect::<StoreResult<_>>()
        .map_err(Arc::new)
}
