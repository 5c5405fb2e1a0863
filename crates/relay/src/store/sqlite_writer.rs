//! The SQLite writer task: the only write connection, with group commit.
//!
//! Requests queue on a channel. The writer takes the first one and every request already
//! queued behind it (up to `MAX_BATCH`), runs them in one transaction, commits, and only then
//! answers each request of the batch. A batch closes when the queue is empty, never on a timer,
//! so a lone write is not delayed; a lone write that needs no savepoint even skips the explicit
//! transaction (its statements autocommit).
//!
//! Most requests are closures ([`Job`]). The three of the call loop (post, claim, reply) are
//! data instead, so the writer can run each kind for the whole batch in one statement
//! (`sqlite_batch`): a statement costs a round trip to sqlx's worker thread, which under load is
//! the relay's bottleneck. Within a batch, jobs run first in arrival order (each atomic one in a
//! savepoint), then the posts, the claims and the replies; the requests of one batch are
//! concurrent, so any order is a valid one.

use futures_util::future::BoxFuture;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

use super::sqlite_batch::{self, ClaimOp, PostOp, ReplyOp};
use super::{StoreError, StoreResult};

/// Most operations one transaction takes, so one batch cannot grow without bound.
const MAX_BATCH: usize = 256;
/// Queued write requests before callers wait for room.
const QUEUE_DEPTH: usize = 4096;

/// Called once the batch's fate is known: `true` if it committed.
pub(crate) type Completion = Box<dyn FnOnce(bool) + Send>;
/// Runs one operation on the writer's connection; says whether it succeeded.
pub(crate) type Job =
    Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, (bool, Completion)> + Send>;

enum Request {
    Job { atomic: bool, job: Job },
    Post(PostOp),
    Claim(ClaimOp),
    Reply(ReplyOp),
}

/// Handle to the writer task.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Request>,
}

/// The answer a request gets once its batch has committed, or an error if it did not.
pub(crate) fn answer_on_commit<T: Send + 'static>(
    answer: oneshot::Sender<StoreResult<T>>,
    result: StoreResult<T>,
) -> Completion {
    Box::new(move |committed| {
        let result = if committed {
            result
        } else {
            Err(StoreError::Db("the transaction did not commit".into()))
        };
        let _ = answer.send(result);
    })
}

impl Writer {
    pub(crate) fn spawn(conn: SqliteConnection) -> Self {
        let (queue, requests) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(writer_loop(conn, requests));
        Self { queue }
    }

    /// Runs `f` in the writer's current batch and returns its result once the batch commits.
    pub(crate) async fn run<T, F>(&self, atomic: bool, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            Box::pin(async move {
                let result = f(conn).await;
                (result.is_ok(), answer_on_commit(answer, result))
            })
        });
        self.send(Request::Job { atomic, job }).await?;
        receive(answered).await
    }

    /// Queues a job without waiting for its batch to commit (its completion still runs then).
    /// Returns once the job is in the queue, so later writes of this caller run after it.
    pub(crate) async fn submit(&self, job: Job) -> StoreResult<()> {
        self.send(Request::Job { atomic: false, job }).await
    }

    pub(crate) async fn post(
        &self,
        op: impl FnOnce(oneshot::Sender<StoreResult<i64>>) -> PostOp,
    ) -> StoreResult<i64> {
        let (answer, answered) = oneshot::channel();
        self.send(Request::Post(op(answer))).await?;
        receive(answered).await
    }

    pub(crate) async fn claim(
        &self,
        op: impl FnOnce(oneshot::Sender<StoreResult<Vec<super::ClaimedRow>>>) -> ClaimOp,
    ) -> StoreResult<Vec<super::ClaimedRow>> {
        let (answer, answered) = oneshot::channel();
        self.send(Request::Claim(op(answer))).await?;
        receive(answered).await
    }

    pub(crate) async fn reply(
        &self,
        op: impl FnOnce(oneshot::Sender<StoreResult<()>>) -> ReplyOp,
    ) -> StoreResult<()> {
        let (answer, answered) = oneshot::channel();
        self.send(Request::Reply(op(answer))).await?;
        receive(answered).await
    }

    async fn send(&self, request: Request) -> StoreResult<()> {
        self.queue
            .send(request)
            .await
            .map_err(|_| StoreError::Db("the SQLite writer has stopped".into()))
    }
}

async fn receive<T>(answered: oneshot::Receiver<StoreResult<T>>) -> StoreResult<T> {
    answered
        .await
        .map_err(|_| StoreError::Db("the SQLite writer dropped the operation".into()))?
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sql).execute(conn).await.map(|_| ())
}

async fn writer_loop(mut conn: SqliteConnection, mut requests: mpsc::Receiver<Request>) {
    while let Some(first) = requests.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        // A lone request that needs no savepoint autocommits each statement as it runs.
        let in_transaction =
            batch.len() > 1 || matches!(batch[0], Request::Job { atomic: true, .. });
        if in_transaction && let Err(error) = exec(&mut conn, "BEGIN IMMEDIATE").await {
            tracing::error!(%error, "sqlite writer could not begin a transaction");
            // Dropping the requests drops their answer channels: callers see a store error.
            continue;
        }
        let completions = run_batch(&mut conn, batch, in_transaction).await;
        let committed = !in_transaction
            || match exec(&mut conn, "COMMIT").await {
                Ok(()) => true,
                Err(error) => {
                    tracing::error!(%error, batch = completions.len(), "sqlite commit failed");
                    let _ = exec(&mut conn, "ROLLBACK").await;
                    false
                }
            };
        for completion in completions {
            completion(committed);
        }
    }
}

async fn run_batch(
    conn: &mut SqliteConnection,
    batch: Vec<Request>,
    in_transaction: bool,
) -> Vec<Completion> {
    let mut completions = Vec::with_capacity(batch.len());
    let (mut posts, mut claims, mut replies) = (Vec::new(), Vec::new(), Vec::new());
    for request in batch {
        match request {
            Request::Job { atomic, job } => {
                completions.extend(run_job(conn, atomic && in_transaction, job).await)
            }
            Request::Post(op) => posts.push(op),
            Request::Claim(op) => claims.push(op),
            Request::Reply(op) => replies.push(op),
        }
    }
    completions.extend(sqlite_batch::post_calls(conn, posts).await);
    completions.extend(sqlite_batch::claim_calls(conn, claims).await);
    completions.extend(sqlite_batch::reply_calls(conn, replies).await);
    completions
}

async fn run_job(conn: &mut SqliteConnection, savepoint: bool, job: Job) -> Option<Completion> {
    if !savepoint {
        return Some(job(conn).await.1);
    }
    if let Err(error) = exec(conn, "SAVEPOINT op").await {
        tracing::error!(%error, "sqlite savepoint failed");
        return None;
    }
    let (ok, completion) = job(conn).await;
    if !ok {
        let _ = exec(conn, "ROLLBACK TO op").await;
    }
    let _ = exec(conn, "RELEASE op").await;
    Some(completion)
}
