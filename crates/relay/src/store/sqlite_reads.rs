//! Token-row reads, coalesced. Every request checks its token's row (so sign-out and revocation
//! apply to the next request), and on SQLite each read is a round trip to a reader's worker
//! thread. One task takes the lookups that are waiting and answers them all from one query;
//! a lookup's query always starts after the lookup arrived, so it sees every revocation
//! committed before the request came in, exactly as a read of its own would.

use std::collections::HashMap;

use sealpost_protocol::ids::Id16;
use sqlx::AssertSqlSafe;
use sqlx::sqlite::SqlitePool;
use tokio::sync::{mpsc, oneshot};

use super::rows;
use super::{Ms, StoreError, StoreResult, TokenRow, b};

/// Most lookups one query answers.
const MAX_LOOKUPS: usize = 256;

struct Lookup {
    id: Id16,
    now: Ms,
    answer: oneshot::Sender<StoreResult<Option<TokenRow>>>,
}

/// Handle to the token-reading task.
#[derive(Debug, Clone)]
pub(crate) struct TokenReader {
    queue: mpsc::UnboundedSender<Lookup>,
}

impl TokenReader {
    pub(crate) fn spawn(readers: SqlitePool) -> Self {
        let (queue, lookups) = mpsc::unbounded_channel();
        tokio::spawn(read_loop(readers, lookups));
        Self { queue }
    }

    /// The token's row if it is live at `now`: not revoked, not expired, its owner not disabled.
    pub(crate) async fn active_token(&self, id: Id16, now: Ms) -> StoreResult<Option<TokenRow>> {
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Lookup { id, now, answer })
            .map_err(|_| StoreError::Db("the token reader has stopped".into()))?;
        answered
            .await
            .map_err(|_| StoreError::Db("the token reader dropped the lookup".into()))?
    }
}

async fn read_loop(readers: SqlitePool, mut lookups: mpsc::UnboundedReceiver<Lookup>) {
    while let Some(first) = lookups.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_LOOKUPS {
            match lookups.try_recv() {
                Ok(lookup) => batch.push(lookup),
                Err(_) => break,
            }
        }
        match read_tokens(&readers, &batch).await {
            Ok(found) => {
                for lookup in batch {
                    let row = found
                        .get(&lookup.id)
                        .filter(|row| row.expires_at > lookup.now);
                    let _ = lookup.answer.send(Ok(row.cloned()));
                }
            }
            Err(error) => {
                for lookup in batch {
                    let _ = lookup.answer.send(Err(StoreError::Db(error.to_string())));
                }
            }
        }
    }
}

async fn read_tokens(
    readers: &SqlitePool,
    batch: &[Lookup],
) -> StoreResult<HashMap<Id16, TokenRow>> {
    let mut ids: Vec<Id16> = batch.iter().map(|lookup| lookup.id).collect();
    ids.sort_unstable();
    ids.dedup();
    let sql = format!(
        "SELECT t.* FROM tokens t JOIN owners o ON o.id = t.owner_id \
         WHERE t.id IN ({}) AND t.revoked_at IS NULL AND o.disabled_at IS NULL",
        vec!["?"; ids.len()].join(", ")
    );
    // Safe: the text varies only in how many placeholders it has; every value is bound.
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for id in &ids {
        query = query.bind(b(*id));
    }
    let mut found = HashMap::new();
    for row in query.fetch_all(readers).await? {
        let token = rows::token(&row)?;
        found.insert(token.id, token);
    }
    Ok(found)
}
