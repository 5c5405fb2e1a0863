//! The call loop's reads, run for a whole writer batch in one statement, on the writer's
//! connection: after the batch's writes, so a read sees every answer stored before it.
//!
//! Reading an answered call marks it delivered. The mark is advisory (an `answered` call reads
//! exactly like a `delivered` one: the reply stays readable until the call expires), so it is
//! not written per read: the writer keeps the marks in [`Deliveries`] and writes them in one
//! UPDATE when it has nothing else to do, or every [`MARKS_AT_MOST_EVERY`] under load. Until
//! then a later read of a marked call is told `delivered` from memory, and so is a reply that
//! finds it; the marks are written before any other kind of request runs. A crash before the
//! write leaves the call `answered`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sealpost_protocol::api::CallState;
use sealpost_protocol::ids::{CallId, OwnerId};
use sealpost_time::UnixMillis;
use sqlx::AssertSqlSafe;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::oneshot;

use super::batch::{chunk_owned, placeholders, token_live};
use crate::store::rows::{self, Columns};
use crate::store::{Bearer, CallView, ErrorChain, StoreError, StoreResult, b, time_to_sql};

/// A read waiting for the writer.
pub(crate) struct ReadOp {
    pub bearer: Bearer,
    pub call_id: CallId,
    pub now: UnixMillis,
    pub answer: oneshot::Sender<StoreResult<Option<CallView>>>,
}

/// What one read found: its token was not live, no call in its scope, or the call.
enum Found {
    TokenNotLive,
    Missing,
    Call(CallView),
}

/// Under load, marks wait at most this long to be written.
const MARKS_AT_MOST_EVERY: Duration = Duration::from_millis(50);
/// Marks past which they are written at once.
const MOST_MARKS: usize = 1_000;

/// Delivery marks taken by reads and not yet written; owned by the writer task.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    unwritten: HashSet<(OwnerId, CallId)>,
    oldest: Option<Instant>,
}

impl Deliveries {
    /// Records that `call` was read answered; false if it was already (so it reads delivered).
    fn mark(&mut self, owner_id: OwnerId, call_id: CallId) -> bool {
        self.oldest.get_or_insert_with(Instant::now);
        self.unwritten.insert((owner_id, call_id))
    }

    /// Whether a read marked `call` and the mark is not written yet.
    pub(crate) fn is_marked(&self, owner_id: OwnerId, call_id: CallId) -> bool {
        self.unwritten.contains(&(owner_id, call_id))
    }

    /// Writes the marks if the writer is `idle`, or they are many or old enough.
    pub(crate) async fn write_if_due(&mut self, conn: &mut SqliteConnection, idle: bool) {
        let due = idle
            || self.unwritten.len() >= MOST_MARKS
            || self
                .oldest
                .is_some_and(|t| t.elapsed() >= MARKS_AT_MOST_EVERY);
        if due {
            self.write(conn).await;
        }
    }

    /// Writes the marks now (before work that reads call states other than through here).
    pub(crate) async fn write(&mut self, conn: &mut SqliteConnection) {
        if self.unwritten.is_empty() {
            return;
        }
        if let Err(error) = mark_delivered(conn, &self.unwritten).await {
            // The calls stay `answered`, which reads the same; the marks are dropped so a
            // failing write is not retried forever.
            tracing::warn!(error = %ErrorChain(&error), marks = self.unwritten.len(), "could not mark calls delivered");
        }
        self.unwritten.clear();
        self.oldest = None;
    }
}

pub(crate) async fn read_calls(
    conn: &mut SqliteConnection,
    deliveries: &mut Deliveries,
    ops: Vec<ReadOp>,
) {
    for chunk in chunk_owned(ops) {
        let found = select_calls(conn, &chunk).await.map_err(Arc::new);
        for (n, op) in chunk.into_iter().enumerate() {
            let result = match &found {
                Err(error) => Err(StoreError::Grouped(error.clone())),
                Ok(found) => match &found[n] {
                    Found::TokenNotLive => Err(StoreError::TokenNotLive),
                    Found::Missing => Ok(None),
                    Found::Call(view) => {
                        let mut view = view.clone();
                        let key = (op.bearer.owner_id, op.call_id);
                        if view.state == CallState::Answered && !deliveries.mark(key.0, key.1) {
                            view.state = CallState::Delivered;
                        }
                        Ok(Some(view))
                    }
                },
            };
            let _ = op.answer.send(result);
        }
    }
}

/// One SELECT for every read: a row per read (`n`, in order), whether its token is live, and
/// its call if there is one in the token's scope.
async fn select_calls(conn: &mut SqliteConnection, ops: &[ReadOp]) -> StoreResult<Vec<Found>> {
    let sql = format!(
        "SELECT v.column1 AS n, {} AS live, \
                c.state, c.reply, c.cancel_reason, c.expires_at, c.lease_expires_at \
         FROM (VALUES {}) AS v \
         LEFT JOIN calls c ON c.owner_id = v.column2 AND c.call_id = v.column3 \
              AND (v.column4 IS NULL OR c.pair_id = v.column4) AND c.app_origin = {}",
        token_live(
            "v.column5",
            "v.column2",
            "v.column6",
            "v.column4",
            "v.column7"
        ),
        placeholders(ops.len(), 7),
        token_app!("v.column5"),
    );
    // Safe: the text varies only in how many placeholders it has; every value is bound.
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for (n, op) in ops.iter().enumerate() {
        query = query
            .bind(n as i64)
            .bind(b(op.bearer.owner_id))
            .bind(b(op.call_id))
            .bind(op.bearer.pair_id.map(b))
            .bind(b(op.bearer.token_id))
            .bind(op.bearer.kind.as_str())
            .bind(time_to_sql(op.now));
    }
    let mut found: Vec<Found> = ops.iter().map(|_| Found::Missing).collect();
    for row in query.fetch_all(&mut *conn).await? {
        let n = usize::try_from(row.int("n")?)
            .ok()
            .filter(|n| *n < ops.len())
            .ok_or_else(|| StoreError::Unreadable("a read row names no read".into()))?;
        found[n] = if !row.flag("live")? {
            Found::TokenNotLive
        } else if row.opt_text("state")?.is_none() {
            Found::Missing
        } else {
            Found::Call(rows::view_at(&row, ops[n].now)?)
        };
    }
    Ok(found)
}

/// Most delivery marks one statement carries.
const MARKS_PER_STATEMENT: usize = 100;

async fn mark_delivered(
    conn: &mut SqliteConnection,
    marks: &HashSet<(OwnerId, CallId)>,
) -> Result<(), sqlx::Error> {
    let marks: Vec<_> = marks.iter().collect();
    for chunk in marks.chunks(MARKS_PER_STATEMENT) {
        let sql = format!(
            "UPDATE calls SET state = 'delivered' WHERE state = 'answered' \
             AND (owner_id, call_id) IN (VALUES {})",
            placeholders(chunk.len(), 2)
        );
        // Safe: the text varies only in how many placeholders it has; every value is bound.
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for (owner_id, call_id) in chunk {
            query = query.bind(b(*owner_id)).bind(b(*call_id));
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}
