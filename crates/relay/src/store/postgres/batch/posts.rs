//! Posts, grouped: one `INSERT … SELECT` over the group's rows.

use std::collections::HashMap;

use sealpost_protocol::ids::CallId;
use sealpost_time::UnixMillis;
use sqlx::postgres::PgPool;

use super::{Grouped, Key, with_bearers};
use crate::store::postgres::{Notifier, calls};
use crate::store::rows::Columns;
use crate::store::{Bearer, NewCall, StoreResult, b, time_to_sql};
use crate::wake::Topic;

/// A post: the call, by its bearer, under the session's cap on pending calls.
pub(in crate::store::postgres) struct PostOp {
    pub bearer: Bearer,
    pub call: NewCall,
    pub max_pending: Option<u32>,
}

/// Each row stored under the same conditions as `calls::POST_CALL`'s (a duplicate id is
/// skipped, not an error, so one cannot fail the group). The cap on pending calls counts the
/// group's own earlier rows for the same session (`nth`), since the count cannot see what this
/// statement inserts: a row past the cap is left to run alone, which stores it or refuses it.
const POST_GROUP: &str = concat!(
    "WITH r AS (SELECT *, row_number() OVER (PARTITION BY owner_id, session_id ORDER BY ord) AS nth \
        FROM unnest(",
    bearer_columns!(),
    ", $6::bytea[], $7::bytea[], $8::bigint[], $9::bytea[], $10::bigint[]) WITH ORDINALITY \
        AS r(token_id, owner_id, kind, pair_id, now, call_id, envelope, expires_at, session_id, \
             max_pending, ord)), \
     posted AS ( \
        INSERT INTO calls (owner_id, call_id, session_id, pair_id, app_origin, state, envelope, \
            created_at, expires_at) \
        SELECT s.owner_id, r.call_id, s.session_id, s.pair_id, s.app_origin, 'pending', r.envelope, \
            r.now, LEAST(r.expires_at, s.expires_at) \
        FROM r JOIN sessions s ON s.owner_id = r.owner_id AND s.session_id = r.session_id \
        WHERE s.ended_at IS NULL AND s.expires_at > r.now \
        AND (r.pair_id IS NULL OR s.pair_id = r.pair_id) AND s.app_origin = ",
    token_app!("r.token_id"),
    " \
        AND (r.max_pending IS NULL OR (SELECT COUNT(*) FROM calls p WHERE p.owner_id = r.owner_id \
             AND p.session_id = r.session_id AND p.state = 'pending' AND p.lease_expires_at IS NULL) \
             + r.nth <= r.max_pending) \
        AND ",
    token_live_r!(),
    " FOR SHARE OF s \
        ON CONFLICT (owner_id, call_id) DO NOTHING \
        RETURNING owner_id, call_id, expires_at) \
     SELECT owner_id, call_id, expires_at FROM posted"
);

impl Grouped for PostOp {
    type Output = UnixMillis;
    type Id = CallId;

    fn key(&self) -> Key<Self::Id> {
        (self.bearer.owner_id, self.call.call_id)
    }

    async fn alone(self, pool: &PgPool, notifier: &Notifier) -> StoreResult<UnixMillis> {
        calls::post_call(pool, notifier, &self.bearer, &self.call, self.max_pending).await
    }

    async fn group(pool: &PgPool, ops: &[Self]) -> StoreResult<HashMap<Key<Self::Id>, UnixMillis>> {
        let rows = with_bearers(
            POST_GROUP,
            ops.iter().map(|op| (&op.bearer, op.call.created_at)),
        )
        .bind(ops.iter().map(|op| b(op.call.call_id)).collect::<Vec<_>>())
        .bind(
            ops.iter()
                .map(|op| op.call.envelope.clone())
                .collect::<Vec<_>>(),
        )
        .bind(
            ops.iter()
                .map(|op| time_to_sql(op.call.expires_at))
                .collect::<Vec<_>>(),
        )
        .bind(
            ops.iter()
                .map(|op| b(op.call.session_id))
                .collect::<Vec<_>>(),
        )
        .bind(
            ops.iter()
                .map(|op| op.max_pending.map(i64::from))
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    (row.id("owner_id")?, row.id("call_id")?),
                    row.time("expires_at")?,
                ))
            })
            .collect()
    }

    fn completed(&self, notifier: &Notifier) {
        notifier.send(Topic::Session(self.call.owner_id, self.call.session_id));
    }
}
