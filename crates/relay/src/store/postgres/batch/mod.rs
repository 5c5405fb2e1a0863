//! Grouped statements for the call loop: post, claim, reply and read. Each kind has one task
//! that takes every operation queued while its last statement ran and runs them as one
//! statement (arrays bound as `unnest`), so under load many calls share one statement's
//! set-up, one round trip and, for the writes, one commit and one flush. A lone operation is
//! run at once, alone, as if there were no task.
//!
//! A grouped statement does only the happy path: each row is acted on only if its token, its
//! session (or claimed call) and its limits allow, exactly as the one-call statements in
//! `calls` check them. An operation the group did not complete, or whose key appears twice in
//! one group, is run again on its own through those statements, which complete it or say why
//! not, so a group never changes an answer, only how many share a statement. So is every
//! operation of a group the server refused (nothing of it committed).

/// The first five columns of a grouped statement's `unnest`, as [`with_bearers`] binds them.
macro_rules! bearer_columns {
    () => {
        "$1::bytea[], $2::bytea[], $3::text[], $4::bytea[], $5::bigint[]"
    };
}

/// [`token_live!`] over the `r` rows of a grouped statement.
macro_rules! token_live_r {
    () => {
        token_live!("r.token_id", "r.owner_id", "r.kind", "r.pair_id", "r.now")
    };
}

mod claims;
mod posts;
mod reads;
mod replies;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sealpost_protocol::ids::{Id, OwnerId};
use sealpost_time::UnixMillis;
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgPool};
use tokio::sync::{mpsc, oneshot};

pub(super) use claims::ClaimOp;
pub(super) use posts::PostOp;
pub(super) use reads::ReadOp;
pub(super) use replies::ReplyOp;

use super::Notifier;
use crate::store::{Bearer, StoreError, StoreResult, b, time_to_sql};

/// Most operations one grouped statement carries.
const MAX_GROUP: usize = 64;
/// Operations queued per kind before a caller waits for room.
const QUEUE_DEPTH: usize = 1_024;

/// `(owner, call)` or `(owner, session)`: what one operation acts on.
type Key<I> = (OwnerId, I);

/// One kind of operation that can be grouped.
pub(super) trait Grouped: Sized + Send + 'static {
    type Output: Send + 'static;
    /// The id the operation acts on within its owner: a call or a session.
    type Id: Id;

    /// What the operation acts on; a group holds each key once.
    fn key(&self) -> Key<Self::Id>;

    /// The one-call statement, which completes the operation or says why not.
    fn alone(
        self,
        pool: &PgPool,
        notifier: &Notifier,
    ) -> impl Future<Output = StoreResult<Self::Output>> + Send;

    /// The grouped statement: the output of each operation it completed, by key. An operation
    /// missing from the map is run alone.
    fn group(
        pool: &PgPool,
        ops: &[Self],
    ) -> impl Future<Output = StoreResult<HashMap<Key<Self::Id>, Self::Output>>> + Send;

    /// What follows a grouped completion (the wake-up a write owes other waiters).
    fn completed(&self, _notifier: &Notifier) {}
}

struct Queued<G: Grouped> {
    op: G,
    answer: oneshot::Sender<StoreResult<G::Output>>,
}

/// The queue of one kind's grouping task; the task ends when the last clone is dropped.
struct Queue<G: Grouped>(mpsc::Sender<Queued<G>>);

impl<G: Grouped> std::fmt::Debug for Queue<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("kind", &std::any::type_name::<G>())
            .finish()
    }
}

impl<G: Grouped> Clone for Queue<G> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<G: Grouped> Queue<G> {
    fn start(pool: PgPool, notifier: Notifier, refused: Arc<AtomicU64>) -> Self {
        let (sender, queue) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(group_loop(pool, notifier, refused, queue));
        Self(sender)
    }

    /// Runs `op` with its group; answers once the group's statement has ended (committed).
    async fn run(&self, op: G) -> StoreResult<G::Output> {
        let (answer, answered) = oneshot::channel();
        self.0
            .send(Queued { op, answer })
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answered.await.map_err(|_| StoreError::WriterStopped)?
    }
}

/// The four grouping tasks' queues.
#[derive(Debug, Clone)]
pub(super) struct Batcher {
    posts: Queue<PostOp>,
    claims: Queue<ClaimOp>,
    replies: Queue<ReplyOp>,
    reads: Queue<ReadOp>,
    /// Grouped statements the server refused, of every kind.
    refused: Arc<AtomicU64>,
}

impl Batcher {
    pub(super) fn start(pool: PgPool, notifier: Notifier) -> Self {
        let refused = Arc::new(AtomicU64::new(0));
        Self {
            posts: Queue::start(pool.clone(), notifier.clone(), refused.clone()),
            claims: Queue::start(pool.clone(), notifier.clone(), refused.clone()),
            replies: Queue::start(pool.clone(), notifier.clone(), refused.clone()),
            reads: Queue::start(pool, notifier, refused.clone()),
            refused,
        }
    }

    /// Grouped statements the server refused so far.
    pub(super) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    pub(super) async fn post(&self, op: PostOp) -> StoreResult<UnixMillis> {
        self.posts.run(op).await
    }

    pub(super) async fn claim(&self, op: ClaimOp) -> StoreResult<Vec<crate::store::ClaimedRow>> {
        self.claims.run(op).await
    }

    pub(super) async fn reply(&self, op: ReplyOp) -> StoreResult<()> {
        self.replies.run(op).await
    }

    pub(super) async fn read(&self, op: ReadOp) -> StoreResult<Option<crate::store::CallView>> {
        self.reads.run(op).await
    }
}

async fn group_loop<G: Grouped>(
    pool: PgPool,
    notifier: Notifier,
    refused: Arc<AtomicU64>,
    mut queue: mpsc::Receiver<Queued<G>>,
) {
    let mut queued = Vec::with_capacity(MAX_GROUP);
    while queue.recv_many(&mut queued, MAX_GROUP).await > 0 {
        if queued.len() == 1 {
            let Queued { op, answer } = queued.pop().expect("one operation");
            let _ = answer.send(op.alone(&pool, &notifier).await);
            continue;
        }
        // The first operation per key goes in the group; repeats run alone after it (they
        // then find its work done, or not).
        let mut seen = HashSet::with_capacity(queued.len());
        let (group, mut alone): (Vec<_>, Vec<_>) = std::mem::take(&mut queued)
            .into_iter()
            .partition(|q| seen.insert(q.op.key()));
        let (ops, answers): (Vec<G>, Vec<_>) = group.into_iter().map(|q| (q.op, q.answer)).unzip();
        match G::group(&pool, &ops).await {
            Ok(mut done) => {
                for (op, answer) in ops.into_iter().zip(answers) {
                    match done.remove(&op.key()) {
                        Some(output) => {
                            op.completed(&notifier);
                            let _ = answer.send(Ok(output));
                        }
                        None => alone.push(Queued { op, answer }),
                    }
                }
            }
            // The server refused the statement (a deadlock, a constraint), so nothing of it
            // committed: each operation runs alone, and only its own fault fails it.
            Err(StoreError::Db(sqlx::Error::Database(error))) => {
                refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, ops = ops.len(), "a grouped statement failed; running its operations alone");
                alone.extend(
                    ops.into_iter()
                        .zip(answers)
                        .map(|(op, answer)| Queued { op, answer }),
                );
            }
            // Otherwise (the connection failed) whether it committed is unknown: no retry.
            Err(error) => {
                let error = Arc::new(error);
                for answer in answers {
                    let _ = answer.send(Err(StoreError::Grouped(error.clone())));
                }
            }
        }
        // Off the loop: the next group need not wait for these.
        for Queued { op, answer } in alone {
            let (pool, notifier) = (pool.clone(), notifier.clone());
            tokio::spawn(async move {
                let _ = answer.send(op.alone(&pool, &notifier).await);
            });
        }
    }
}

/// A grouped statement with its bearers and times bound as its first five arrays, in the
/// order `token_live!("r.token_id", "r.owner_id", "r.kind", "r.pair_id", "r.now")` reads them.
fn with_bearers<'q>(
    sql: &'static str,
    rows: impl Iterator<Item = (&'q Bearer, UnixMillis)> + Clone,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    sqlx::query(sql)
        .bind(rows.clone().map(|(t, _)| b(t.token_id)).collect::<Vec<_>>())
        .bind(rows.clone().map(|(t, _)| b(t.owner_id)).collect::<Vec<_>>())
        .bind(
            rows.clone()
                .map(|(t, _)| t.kind.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            rows.clone()
                .map(|(t, _)| t.pair_id.map(b))
                .collect::<Vec<_>>(),
        )
        .bind(rows.map(|(_, now)| time_to_sql(now)).collect::<Vec<_>>())
}
