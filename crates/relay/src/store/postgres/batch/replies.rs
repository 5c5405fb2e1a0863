//! Replies, grouped: one `UPDATE … FROM` over the group's rows.

use std::collections::HashMap;

use sealpost_protocol::ids::CallId;
use sealpost_time::UnixMillis;
use sqlx::postgres::PgPool;

use super::{Grouped, Key, with_bearers};
use crate::store::postgres::{Notifier, calls};
use crate::store::rows::Columns;
use crate::store::{Bearer, StoreResult, b};
use crate::wake::Topic;

/// A reply to a claimed call, by its bearer.
pub(in crate::store::postgres) struct ReplyOp {
    pub bearer: Bearer,
    pub call_id: CallId,
    pub reply: Vec<u8>,
    pub now: UnixMillis,
}

/// Each row stored under the same conditions as `calls::REPLY_CALL`'s. The calls are locked
/// first, in `(owner_id, call_id)` order, the order a session's end takes them in
/// (`sessions::CANCEL_SESSION_CALLS_IN_ORDER`), so the two cannot deadlock.
const REPLY_GROUP: &str = concat!(
    "WITH r AS (SELECT * FROM unnest(",
    bearer_columns!(),
    ", $6::bytea[], $7::bytea[]) \
        AS r(token_id, owner_id, kind, pair_id, now, call_id, reply)), \
     locked AS (SELECT c.owner_id, c.call_id FROM calls c JOIN r \
        ON c.owner_id = r.owner_id AND c.call_id = r.call_id \
        WHERE c.state = 'claimed' AND c.lease_expires_at > r.now \
        ORDER BY c.owner_id, c.call_id FOR UPDATE OF c), \
     answered AS ( \
        UPDATE calls c SET state = 'answered', reply = r.reply, envelope = NULL, answered_at = r.now \
        FROM r, locked WHERE c.owner_id = locked.owner_id AND c.call_id = locked.call_id \
        AND c.owner_id = r.owner_id AND c.call_id = r.call_id AND c.state = 'claimed' \
        AND c.lease_expires_at > r.now AND (r.pair_id IS NULL OR c.pair_id = r.pair_id) \
        AND c.app_origin = ",
    token_app!("r.token_id"),
    " AND ",
    token_live_r!(),
    " RETURNING c.owner_id, c.call_id) \
     SELECT owner_id, call_id FROM answered"
);

impl Grouped for ReplyOp {
    type Output = ();
    type Id = CallId;

    fn key(&self) -> Key<Self::Id> {
        (self.bearer.owner_id, self.call_id)
    }

    async fn alone(self, pool: &PgPool, notifier: &Notifier) -> StoreResult<()> {
        calls::reply_call(
            pool,
            notifier,
            &self.bearer,
            self.call_id,
            self.reply,
            self.now,
        )
        .await
    }

    async fn group(pool: &PgPool, ops: &[Self]) -> StoreResult<HashMap<Key<Self::Id>, ()>> {
        let rows = with_bearers(REPLY_GROUP, ops.iter().map(|op| (&op.bearer, op.now)))
            .bind(ops.iter().map(|op| b(op.call_id)).collect::<Vec<_>>())
            .bind(ops.iter().map(|op| op.reply.clone()).collect::<Vec<_>>())
            .fetch_all(pool)
            .await?;
        rows.iter()
            .map(|row| Ok(((row.id("owner_id")?, row.id("call_id")?), ())))
            .collect()
    }

    fn completed(&self, notifier: &Notifier) {
        notifier.send(Topic::Call(self.bearer.owner_id, self.call_id));
    }
}
