//! Delivery marks, written after the read that takes them, as on SQLite. The first read of an
//! answered call says `answered` and marks the call delivered; the mark is advisory (an
//! `answered` call reads like a `delivered` one), so the read does not wait for it: this
//! replica keeps it in memory, where later reads, replies and cancels of the call find it and
//! say `delivered`, and one task writes the marks that gathered over 25 ms with one statement,
//! its commit not waiting for the disk. A crash or a failed write leaves calls `answered`,
//! never loses an acknowledged write. Another replica sees a mark once it is written.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use sealpost_protocol::ids::{CallId, OwnerId};
use sqlx::postgres::PgPool;
use tokio::sync::mpsc;

use crate::store::{ErrorChain, b};

/// Most marks one statement carries.
const MARKS_PER_STATEMENT: usize = 1_000;
/// How long marks gather before they are written: a mark written at once lands on the next
/// call's post (measured: one call at a time got slower), and a group costs one statement.
const GATHER: std::time::Duration = std::time::Duration::from_millis(25);

type Marks = Arc<Mutex<HashSet<(OwnerId, CallId)>>>;

/// Marks taken by reads and not yet written; the writing task ends with the last clone.
#[derive(Debug, Clone)]
pub(super) struct Deliveries {
    unwritten: Marks,
    kick: mpsc::Sender<()>,
}

impl Deliveries {
    pub(super) fn start(pool: PgPool) -> Self {
        let unwritten = Marks::default();
        let (kick, kicks) = mpsc::channel(1);
        tokio::spawn(write_marks(pool, unwritten.clone(), kicks));
        Self { unwritten, kick }
    }

    /// Marks the call delivered; `true` if this is the first mark (the read says `answered`).
    pub(super) fn mark(&self, owner_id: OwnerId, call_id: CallId) -> bool {
        let first = lock(&self.unwritten).insert((owner_id, call_id));
        if first {
            // A kick already queued covers this mark too.
            let _ = self.kick.try_send(());
        }
        first
    }

    /// Whether a read marked the call and the mark is not written yet.
    pub(super) fn is_marked(&self, owner_id: OwnerId, call_id: CallId) -> bool {
        lock(&self.unwritten).contains(&(owner_id, call_id))
    }
}

fn lock(marks: &Marks) -> std::sync::MutexGuard<'_, HashSet<(OwnerId, CallId)>> {
    marks.lock().unwrap_or_else(|e| e.into_inner())
}

async fn write_marks(pool: PgPool, unwritten: Marks, mut kicks: mpsc::Receiver<()>) {
    while kicks.recv().await.is_some() {
        tokio::time::sleep(GATHER).await;
        let marks: Vec<(OwnerId, CallId)> = lock(&unwritten).iter().copied().collect();
        for chunk in marks.chunks(MARKS_PER_STATEMENT) {
            if let Err(error) = write(&pool, chunk).await {
                // The calls stay `answered`, which reads the same.
                tracing::warn!(error = %ErrorChain(&error), marks = chunk.len(), "could not mark calls delivered");
            }
            // Forgotten only once written (or given up): until then reads find them here.
            let mut unwritten = lock(&unwritten);
            for mark in chunk {
                unwritten.remove(mark);
            }
        }
    }
}

async fn write(pool: &PgPool, marks: &[(OwnerId, CallId)]) -> sqlx::Result<()> {
    let owners: Vec<Vec<u8>> = marks.iter().map(|(owner, _)| b(*owner)).collect();
    let calls: Vec<Vec<u8>> = marks.iter().map(|(_, call)| b(*call)).collect();
    let mut tx = pool.begin().await?;
    // The mark is advisory: its commit does not wait for the disk.
    sqlx::query("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE calls SET state = 'delivered' \
         FROM unnest($1::bytea[], $2::bytea[]) AS m(owner_id, call_id) \
         WHERE calls.owner_id = m.owner_id AND calls.call_id = m.call_id \
         AND calls.state = 'answered'",
    )
    .bind(owners)
    .bind(calls)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}
