//! The SQLite writer task: the only write connection, and the connection of the call loop.
//!
//! Requests queue on a channel. The writer takes the first one and every request already
//! queued behind it (up to `MAX_BATCH`) and runs them as one batch. A batch closes when the
//! queue is empty, never on a timer, so a lone request is not delayed.
//!
//! Every statement is a round trip to sqlx's worker thread, which under load is the relay's
//! bottleneck, so the batch is built to make few of them:
//! - the four requests of the call loop (post, claim, reply, read) are data, not closures, and
//!   each kind runs for the whole batch in one statement (`batch`, `batch_read`),
//!   with the bearer's token row checked inside that statement;
//! - statements autocommit: with WAL and `synchronous=NORMAL` a commit costs no fsync, so one
//!   transaction around the batch would only add two round trips. An operation of several
//!   statements that must be all-or-nothing runs in its own transaction (`atomic`).
//!
//! Within a batch, jobs run first in arrival order, then the posts, the claims, the replies and
//! the reads; the requests of one batch are concurrent, so any order is a valid one, and reads
//! last see the batch's own answers. A post that carries a claim for a standing claimer
//! (`crate::handoff`) has it run with the claims, so it sees the call just stored; a reply
//! that carries a read for a standing reader has it run with the reads, after every reply.
//! Each request is answered as soon as its statement is done. Delivery marks are written
//! between batches, when due (`batch_read::Deliveries`).

use futures_util::future::BoxFuture;
use sealpost_time::UnixMillis;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

use super::batch::{self, ClaimOp, PostOp, ReplyOp};
use super::batch_read::{self, Deliveries, ReadOp};
use crate::store::{CallView, ClaimedRow, ErrorChain, StoreError, StoreResult};

/// Most operations one batch takes, so one batch cannot grow without bound.
const MAX_BATCH: usize = 256;
/// Queued write requests before callers wait for room.
const QUEUE_DEPTH: usize = 4096;

/// Runs one operation on the writer's connection and says whether it succeeded; the closure it
/// returns answers the caller, given how the operation's transaction ended.
pub(crate) type Job =
    Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, (bool, Answer)> + Send>;
/// Answers a job's caller: `Ok` if its writes are committed (or it wrote nothing), else the
/// commit's error.
pub(crate) type Answer = Box<dyn FnOnce(Result<(), sqlx::Error>) + Send>;

enum Request {
    Job { atomic: bool, job: Job },
    Post(PostOp),
    Claim(ClaimOp),
    Reply(ReplyOp),
    Read(ReadOp),
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

    /// Runs `f` on the writer's connection and returns its result once it is committed.
    /// `atomic`: `f` runs in a transaction of its own, rolled back if it fails.
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
                let answer: Answer = Box::new(move |committed| {
                    let result = match committed {
                        Ok(()) => result,
                        Err(error) => Err(StoreError::NotCommitted(error)),
                    };
                    let _ = answer.send(result);
                });
                (ok, answer)
            })
        });
        self.send(Request::Job { atomic, job }).await?;
        receive(answered).await
    }

    pub(crate) async fn post(
        &self,
        op: impl FnOnce(oneshot::Sender<StoreResult<UnixMillis>>) -> PostOp,
    ) -> StoreResult<UnixMillis> {
        let (answer, answered) = oneshot::channel();
        self.send(Request::Post(op(answer))).await?;
        receive(answered).await
    }

    pub(crate) async fn claim(
        &self,
        op: impl FnOnce(oneshot::Sender<StoreResult<Vec<ClaimedRow>>>) -> ClaimOp,
    ) -> StoreResult<Vec<ClaimedRow>> {
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

    pub(crate) async fn read(
        &self,
        op: impl FnOnce(oneshot::Sender<StoreResult<Option<CallView>>>) -> ReadOp,
    ) -> StoreResult<Option<CallView>> {
        let (answer, answered) = oneshot::channel();
        self.send(Request::Read(op(answer))).await?;
        receive(answered).await
    }

    async fn send(&self, request: Request) -> StoreResult<()> {
        self.queue
            .send(request)
            .await
            .map_err(|_| StoreError::WriterStopped)
    }
}

async fn receive<T>(answered: oneshot::Receiver<StoreResult<T>>) -> StoreResult<T> {
    answered.await.map_err(|_| StoreError::WriterStopped)?
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sql).execute(conn).await.map(|_| ())
}

async fn writer_loop(mut conn: SqliteConnection, mut requests: mpsc::Receiver<Request>) {
    let mut deliveries = Deliveries::default();
    while let Some(first) = requests.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        run_batch(&mut conn, &mut deliveries, batch).await;
        deliveries
            .write_if_due(&mut conn, requests.is_empty())
            .await;
    }
}

async fn run_batch(conn: &mut SqliteConnection, deliveries: &mut Deliveries, batch: Vec<Request>) {
    let (mut posts, mut claims, mut replies, mut reads) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Claims posts make for standing claimers: after the posts, so they see the new calls.
    // Reads replies make for standing readers run with the reads, after every reply.
    let mut claims_after_posts = Vec::new();
    // Jobs (cancels, sessions, the sweeper...) read call states directly: marks first.
    if batch.iter().any(|r| matches!(r, Request::Job { .. })) {
        deliveries.write(conn).await;
    }
    for request in batch {
        match request {
            Request::Job { atomic, job } => run_job(conn, atomic, job).await,
            Request::Post(mut op) => {
                claims_after_posts.extend(op.then_claim.take());
                posts.push(op);
            }
            Request::Claim(op) => claims.push(op),
            Request::Reply(mut op) => {
                reads.extend(op.then_read.take().map(|read| ReadOp {
                    bearer: read.bearer,
                    call_id: op.call_id,
                    now: op.now,
                    answer: read.answer,
                }));
                replies.push(op);
            }
            Request::Read(op) => reads.push(op),
        }
    }
    batch::post_calls(conn, posts).await;
    claims.append(&mut claims_after_posts);
    batch::claim_calls(conn, claims).await;
    batch::reply_calls(conn, deliveries, replies).await;
    batch_read::read_calls(conn, deliveries, reads).await;
}

async fn run_job(conn: &mut SqliteConnection, atomic: bool, job: Job) {
    if !atomic {
        let (_, answer) = job(conn).await;
        return answer(Ok(()));
    }
    if let Err(error) = exec(conn, "BEGIN IMMEDIATE").await {
        tracing::error!(error = %ErrorChain(&error), "sqlite writer could not begin a transaction");
        // Dropping the job drops its answer channel: the caller sees a store error.
        return;
    }
    let (ok, answer) = job(conn).await;
    if !ok {
        // The job's own error is its answer; its partial writes go.
        let _ = exec(conn, "ROLLBACK").await;
        return answer(Ok(()));
    }
    match exec(conn, "COMMIT").await {
        Ok(()) => answer(Ok(())),
        Err(error) => {
            let _ = exec(conn, "ROLLBACK").await;
            answer(Err(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sealpost_protocol::api::{CallState, TokenKind};
    use sealpost_protocol::ids::{CallId, OwnerId, PairId, SessionId, TokenId};
    use sqlx::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};

    use super::*;
    use crate::ids::random_id as id;
    use crate::store::{Bearer, b};

    /// A database holding one owner with an MCP token and an owner token, a live session, and
    /// one answered call; and a read of that call in a batch of its own, which leaves its
    /// delivery mark unwritten (the writer was not idle).
    struct Marked {
        dir: std::path::PathBuf,
        conn: SqliteConnection,
        deliveries: Deliveries,
        tab: Bearer,
        owner: OwnerId,
        call: CallId,
        now: UnixMillis,
    }

    async fn answered_call_read_once() -> Marked {
        let dir = std::env::temp_dir().join(format!("sealpost-marks-{}", id::<CallId>()));
        std::fs::create_dir_all(&dir).unwrap();
        let options =
            SqliteConnectOptions::from_str(&format!("sqlite://{}/marks.db", dir.display()))
                .unwrap()
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal);
        let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
        super::super::migrate::run(&mut conn).await.unwrap();
        let (owner, token, tab_token): (OwnerId, TokenId, TokenId) = (id(), id(), id());
        let (pair, session, call): (PairId, SessionId, CallId) = (id(), id(), id());
        let now = UnixMillis::from_ms(1_700_000_000_000);
        for (sql, binds) in [
            (
                "INSERT INTO owners (id, name, created_at) VALUES ($1, 'o', 0)",
                vec![b(owner)],
            ),
            (
                "INSERT INTO tokens (id, owner_id, kind, pair_id, label, created_at, expires_at) \
                 VALUES ($1, $2, 'mcp', $3, 'l', 0, 9000000000000)",
                vec![b(token), b(owner), b(pair)],
            ),
            (
                "INSERT INTO tokens (id, owner_id, kind, pair_id, label, created_at, expires_at) \
                 VALUES ($1, $2, 'owner', NULL, 'tab', 0, 9000000000000)",
                vec![b(tab_token), b(owner)],
            ),
            (
                "INSERT INTO sessions (owner_id, session_id, pair_id, hello, created_at, expires_at) \
                 VALUES ($1, $2, $3, x'00', 0, 9000000000000)",
                vec![b(owner), b(session), b(pair)],
            ),
            (
                "INSERT INTO calls (owner_id, call_id, session_id, pair_id, state, reply, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, 'answered', x'01', 0, 9000000000000)",
                vec![b(owner), b(call), b(session), b(pair)],
            ),
        ] {
            let mut query = sqlx::query(sql);
            for bind in binds {
                query = query.bind(bind);
            }
            query.execute(&mut conn).await.unwrap();
        }
        let bearer = Bearer {
            token_id: token,
            owner_id: owner,
            kind: TokenKind::Mcp,
            pair_id: Some(pair),
        };
        let tab = Bearer {
            token_id: tab_token,
            owner_id: owner,
            kind: TokenKind::Owner,
            pair_id: None,
        };

        // One batch: the read. The writer was not idle, so the mark stays in memory.
        let mut deliveries = Deliveries::default();
        let (answer, answered) = oneshot::channel();
        let read = ReadOp {
            bearer,
            call_id: call,
            now,
            answer,
        };
        run_batch(&mut conn, &mut deliveries, vec![Request::Read(read)]).await;
        let view = answered.await.unwrap().unwrap().unwrap();
        assert_eq!(view.state, CallState::Answered);
        assert!(deliveries.is_marked(owner, call));
        Marked {
            dir,
            conn,
            deliveries,
            tab,
            owner,
            call,
            now,
        }
    }

    /// A read marks an answered call delivered in memory only. Jobs (cancels, session changes,
    /// the sweeper) read call states from the table, so the writer writes the marks before a
    /// job runs, even when the read's batch left them unwritten because more work was queued.
    #[tokio::test]
    async fn a_delivery_mark_is_written_before_the_next_job_reads_call_states() {
        let Marked {
            dir,
            mut conn,
            mut deliveries,
            owner,
            call,
            ..
        } = answered_call_read_once().await;

        // The next batch: a job that reads the call's state from the table.
        let (seen, state) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            Box::pin(async move {
                let stored: String = sqlx::query_scalar(
                    "SELECT state FROM calls WHERE owner_id = $1 AND call_id = $2",
                )
                .bind(b(owner))
                .bind(b(call))
                .fetch_one(&mut *conn)
                .await
                .unwrap();
                let _ = seen.send(stored);
                let answer: Answer = Box::new(|_| {});
                (true, answer)
            })
        });
        let job = Request::Job { atomic: false, job };
        run_batch(&mut conn, &mut deliveries, vec![job]).await;
        assert_eq!(state.await.unwrap(), "delivered");
        assert!(!deliveries.is_marked(owner, call));
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A second reply to a call that was read while its mark is still in memory says it was
    /// delivered, as it would once the mark is written: the table alone still says answered.
    #[tokio::test]
    async fn a_reply_to_a_call_read_before_its_mark_is_written_reads_delivered() {
        let Marked {
            dir,
            mut conn,
            mut deliveries,
            tab,
            call,
            now,
            ..
        } = answered_call_read_once().await;
        let (answer, answered) = oneshot::channel();
        let reply = ReplyOp {
            bearer: tab,
            call_id: call,
            reply: b"again".to_vec(),
            now,
            answer,
            then_read: None,
        };
        batch::reply_calls(&mut conn, &deliveries, vec![reply]).await;
        assert!(matches!(
            answered.await.unwrap(),
            Err(crate::store::StoreError::WrongState(CallState::Delivered))
        ));
        deliveries.write(&mut conn).await;
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
