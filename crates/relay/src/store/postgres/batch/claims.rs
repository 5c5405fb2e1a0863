//! Claims, grouped: each row's session claims its oldest pending calls, as one statement.

use std::collections::HashMap;

use sealpost_protocol::ids::SessionId;
use sealpost_time::UnixMillis;
use sqlx::postgres::PgPool;

use super::{Grouped, Key, with_bearers};
use crate::store::postgres::{Notifier, calls};
use crate::store::rows::{self, Columns};
use crate::store::{Bearer, ClaimedRow, StoreResult, b, duration_to_sql};

/// A claim of up to `max` calls of a session, each leased for `lease_ms`.
pub(in crate::store::postgres) struct ClaimOp {
    pub bearer: Bearer,
    pub session_id: SessionId,
    pub now: UnixMillis,
    pub max: u32,
    pub lease_ms: u64,
}

/// Per row, the conditions and the claim of `calls::CLAIM_CALLS`: one status row per claim,
/// `token` and `session` saying whether both were live, joined with each call it claimed.
const CLAIM_GROUP: &str = concat!(
    "WITH r AS (SELECT * FROM unnest(",
    bearer_columns!(),
    ", $6::bytea[], $7::bigint[], $8::bigint[]) \
        AS r(token_id, owner_id, kind, pair_id, now, session_id, max, lease)), \
     live AS MATERIALIZED (SELECT r.owner_id, r.session_id, r.now, r.max, r.lease, ",
    token_live_r!(),
    " AS token, EXISTS (SELECT 1 FROM sessions s WHERE s.owner_id = r.owner_id \
            AND s.session_id = r.session_id AND s.ended_at IS NULL AND s.expires_at > r.now \
            AND (r.pair_id IS NULL OR s.pair_id = r.pair_id) AND s.app_origin = ",
    token_app!("r.token_id"),
    ") AS session FROM r), \
     picked AS (SELECT p.owner_id, p.call_id, l.now, l.lease FROM live l CROSS JOIN LATERAL \
            (SELECT c.owner_id, c.call_id FROM calls c WHERE l.token AND l.session \
             AND c.owner_id = l.owner_id AND c.session_id = l.session_id AND c.state = 'pending' \
             AND c.lease_expires_at IS NULL AND c.expires_at > l.now \
             ORDER BY c.created_at LIMIT l.max FOR UPDATE OF c SKIP LOCKED) p), \
     claimed AS (UPDATE calls c SET state = 'claimed', \
            lease_expires_at = LEAST(picked.now + picked.lease, c.expires_at) \
            FROM picked WHERE c.owner_id = picked.owner_id AND c.call_id = picked.call_id \
            AND c.state = 'pending' \
            RETURNING c.owner_id, c.session_id, c.call_id, c.envelope, c.lease_expires_at, c.created_at) \
     SELECT l.owner_id AS key_owner, l.session_id AS key_session, l.token, l.session, \
            claimed.call_id, claimed.envelope, claimed.lease_expires_at, claimed.created_at \
     FROM live l LEFT JOIN claimed ON claimed.owner_id = l.owner_id AND claimed.session_id = l.session_id"
);

impl Grouped for ClaimOp {
    type Output = Vec<ClaimedRow>;
    type Id = SessionId;

    fn key(&self) -> Key<Self::Id> {
        (self.bearer.owner_id, self.session_id)
    }

    async fn alone(self, pool: &PgPool, _notifier: &Notifier) -> StoreResult<Vec<ClaimedRow>> {
        let ClaimOp {
            bearer,
            session_id,
            now,
            max,
            lease_ms,
        } = self;
        calls::claim_calls(pool, &bearer, session_id, now, max, lease_ms).await
    }

    async fn group(
        pool: &PgPool,
        ops: &[Self],
    ) -> StoreResult<HashMap<Key<Self::Id>, Vec<ClaimedRow>>> {
        let rows = with_bearers(CLAIM_GROUP, ops.iter().map(|op| (&op.bearer, op.now)))
            .bind(ops.iter().map(|op| b(op.session_id)).collect::<Vec<_>>())
            .bind(ops.iter().map(|op| i64::from(op.max)).collect::<Vec<_>>())
            .bind(
                ops.iter()
                    .map(|op| duration_to_sql(op.lease_ms))
                    .collect::<Vec<_>>(),
            )
            .fetch_all(pool)
            .await?;
        // Rows per claim; a claim whose token or session was not live is left out (it runs
        // alone, which says why).
        let mut found: HashMap<Key<Self::Id>, Vec<_>> = HashMap::with_capacity(ops.len());
        for row in rows {
            let key = (row.id("key_owner")?, row.id("key_session")?);
            let live = row.flag("token")? && row.flag("session")?;
            let entry = found.entry(key).or_default();
            if live && row.opt_bytes("call_id")?.is_some() {
                entry.push(row);
            } else if !live {
                found.remove(&key);
            }
        }
        // Claims with every condition met but nothing to claim keep their empty entry.
        found
            .into_iter()
            .map(|(key, rows)| Ok((key, rows::claimed(rows)?)))
            .collect()
    }
}
