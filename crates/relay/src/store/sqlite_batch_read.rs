//! The call loop's reads, run for a whole writer batch in one statement, on the writer's
//! connection: after the batch's writes, so a read sees every answer stored before it.
//!
//! Reading an answered call marks it delivered. The reads are answered first, then one UPDATE
//! marks every call they found answered; the next batch runs only after that, so a later read
//! sees `delivered`. A second read of the same call in the same batch is told `delivered` too.
//! A crash between the answer and the mark leaves the call `answered`, which reads exactly like
//! `delivered` (the reply stays readable until the call expires).

use std::collections::HashSet;

use sealpost_protocol::api::CallState;
use sealpost_protocol::ids::Id16;
use sqlx::AssertSqlSafe;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::oneshot;

use super::rows::{self, Columns};
use super::sqlite_batch::{chunk_owned, placeholders, token_live};
use super::{Bearer, CallView, Ms, StoreError, StoreResult, b};

/// A read waiting for the writer.
pub(crate) struct ReadOp {
    pub bearer: Bearer,
    pub call_id: Id16,
    pub now: Ms,
    pub answer: oneshot::Sender<StoreResult<Option<CallView>>>,
}

/// What one read found: its token was not live, no call in its scope, or the call.
enum Found {
    TokenNotLive,
    Missing,
    Call(CallView),
}

pub(crate) async fn read_calls(conn: &mut SqliteConnection, ops: Vec<ReadOp>) {
    let mut delivered: HashSet<(Id16, Id16)> = HashSet::new();
    for chunk in chunk_owned(ops) {
        let found = select_calls(conn, &chunk).await;
        for (n, op) in chunk.into_iter().enumerate() {
            let result = match &found {
                Err(error) => Err(StoreError::Db(error.to_string())),
                Ok(found) => match &found[n] {
                    Found::TokenNotLive => Err(StoreError::TokenNotLive),
                    Found::Missing => Ok(None),
                    Found::Call(view) => {
                        let mut view = view.clone();
                        if view.state == CallState::Answered
                            && !delivered.insert((op.bearer.owner_id, op.call_id))
                        {
                            view.state = CallState::Delivered;
                        }
                        Ok(Some(view))
                    }
                },
            };
            let _ = op.answer.send(result);
        }
    }
    if let Err(error) = mark_delivered(conn, &delivered).await {
        tracing::warn!(%error, marks = delivered.len(), "could not mark calls delivered");
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
              AND (v.column4 IS NULL OR c.pair_id = v.column4)",
        token_live(
            "v.column5",
            "v.column2",
            "v.column6",
            "v.column4",
            "v.column7"
        ),
        placeholders(ops.len(), 7),
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
            .bind(op.now);
    }
    let mut found: Vec<Found> = ops.iter().map(|_| Found::Missing).collect();
    for row in query.fetch_all(&mut *conn).await? {
        let n = usize::try_from(row.int("n")?)
            .ok()
            .filter(|n| *n < ops.len())
            .ok_or_else(|| StoreError::Db("a read row names no read".into()))?;
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
    marks: &HashSet<(Id16, Id16)>,
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
