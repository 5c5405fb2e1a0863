//! Reads, grouped: one statement that writes nothing, a row per read.

use std::collections::HashMap;

use sealpost_protocol::ids::CallId;
use sealpost_time::UnixMillis;
use sqlx::postgres::PgPool;

use super::{Grouped, Key, with_bearers};
use crate::store::postgres::{Notifier, calls};
use crate::store::rows::{self, Columns};
use crate::store::{Bearer, CallView, StoreResult, b};

/// A read of a call by its bearer.
pub(in crate::store::postgres) struct ReadOp {
    pub bearer: Bearer,
    pub call_id: CallId,
    pub now: UnixMillis,
}

/// Per row, what `calls::READ_CALL` reads: whether the token is live, and the call if the
/// scope holds one.
const READ_GROUP: &str = concat!(
    "WITH r AS (SELECT * FROM unnest(",
    bearer_columns!(),
    ", $6::bytea[]) AS r(token_id, owner_id, kind, pair_id, now, call_id)) \
     SELECT r.owner_id AS key_owner, r.call_id AS key_call, r.now AS key_now, ",
    token_live_r!(),
    " AS token, c.state, c.reply, c.cancel_reason, c.expires_at, c.lease_expires_at \
     FROM r LEFT JOIN calls c ON c.owner_id = r.owner_id AND c.call_id = r.call_id \
            AND (r.pair_id IS NULL OR c.pair_id = r.pair_id) AND c.app_origin = ",
    token_app!("r.token_id")
);

impl Grouped for ReadOp {
    type Output = Option<CallView>;
    type Id = CallId;

    fn key(&self) -> Key<Self::Id> {
        (self.bearer.owner_id, self.call_id)
    }

    async fn alone(self, pool: &PgPool, _notifier: &Notifier) -> StoreResult<Option<CallView>> {
        calls::read_call(pool, &self.bearer, self.call_id, self.now).await
    }

    async fn group(
        pool: &PgPool,
        ops: &[Self],
    ) -> StoreResult<HashMap<Key<Self::Id>, Option<CallView>>> {
        let rows = with_bearers(READ_GROUP, ops.iter().map(|op| (&op.bearer, op.now)))
            .bind(ops.iter().map(|op| b(op.call_id)).collect::<Vec<_>>())
            .fetch_all(pool)
            .await?;
        let mut found = HashMap::with_capacity(rows.len());
        for row in rows {
            // A read whose token was not live is left out: alone, it says so.
            if !row.flag("token")? {
                continue;
            }
            let key = (row.id("key_owner")?, row.id("key_call")?);
            let view = match row.opt_text("state")? {
                None => None,
                Some(_) => Some(rows::view_at(&row, row.time("key_now")?)?),
            };
            found.insert(key, view);
        }
        Ok(found)
    }
}
