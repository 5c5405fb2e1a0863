//! The SQLite writer task: the only write connection, with group commit.
//!
//! Requests queue on a channel. The writer opens a transaction for the first one, then keeps
//! taking requests that are already queued and runs them in the same transaction; when the
//! queue is empty (the writer is idle) it commits and only then answers every request of the
//! batch. A lone write is therefore never delayed by a timer, and under load many requests
//! share one commit. A lone non-atomic write skips the explicit transaction altogether: its
//! statements autocommit, so it is answered after its own commit just the same. An operation that needs several statements runs inside a savepoint so its
//! failure undoes only its own work.

use futures_util::future::BoxFuture;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

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

struct Request {
    atomic: bool,
    job: Job,
}

/// Handle to the writer task.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Request>,
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
                let ok = result.is_ok();
                let completion: Completion = Box::new(move |committed| {
                    let result = if committed {
                        result
                    } else {
                        Err(StoreError::Db("the transaction did not commit".into()))
                    };
                    let _ = answer.send(result);
                });
                (ok, completion)
            })
        });
        self.queue
            .send(Request { atomic, job })
            .await
            .map_err(|_| StoreError::Db("the SQLite writer has stopped".into()))?;
        answered
            .await
            .map_err(|_| StoreError::Db("the SQLite writer dropped the operation".into()))?
    }
}

impl Writer {
    /// Queues a job without waiting for its batch to commit (its completion still runs then).
    /// Returns once the job is in the queue, so later writes of this caller run after it.
    pub(crate) async fn submit(&self, job: Job) -> StoreResult<()> {
        self.queue
            .send(Request { atomic: false, job })
            .await
            .map_err(|_| StoreError::Db("the SQLite writer has stopped".into()))
    }
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sql).execute(conn).await.map(|_| ())
}

async fn writer_loop(mut conn: SqliteConnection, mut requests: mpsc::Receiver<Request>) {
    while let Some(first) = requests.recv().await {
        if requests.is_empty() && !first.atomic {
            // A lone write: each of its statements commits as it runs (SQLite's autocommit), which
            // spares a lone call the BEGIN and COMMIT round trips. Nothing is waiting to share it.
            let (_, completion) = (first.job)(&mut conn).await;
            completion(true);
            continue;
        }
        if let Err(error) = exec(&mut conn, "BEGIN IMMEDIATE").await {
            tracing::error!(%error, "sqlite writer could not begin a transaction");
            // Dropping the request drops its answer channel: the caller sees a store error.
            drop(first);
            continue;
        }
        let mut completions = Vec::new();
        let mut next = Some(first);
        while let Some(request) = next.take() {
            completions.extend(run_one(&mut conn, request).await);
            if completions.len() < MAX_BATCH {
                // Idle writer = empty queue: close the batch now rather than wait for company.
                next = requests.try_recv().ok();
            }
        }
        let committed = match exec(&mut conn, "COMMIT").await {
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

async fn run_one(conn: &mut SqliteConnection, request: Request) -> Option<Completion> {
    if !request.atomic {
        return Some((request.job)(conn).await.1);
    }
    if let Err(error) = exec(conn, "SAVEPOINT op").await {
        tracing::error!(%error, "sqlite savepoint failed");
        return None;
    }
    let (ok, completion) = (request.job)(conn).await;
    if !ok {
        let _ = exec(conn, "ROLLBACK TO op").await;
    }
    let _ = exec(conn, "RELEASE op").await;
    Some(completion)
}
