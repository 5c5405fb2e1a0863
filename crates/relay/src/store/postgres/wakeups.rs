//! Wake-ups across replicas. A long-poll waits on its own replica's hub; a write that should
//! wake a waiter on another replica tells PostgreSQL (`pg_notify` on one channel), and every
//! replica runs one `PgListener` that feeds what arrives into its hub.
//!
//! The call loop's posts and replies do not notify inside their own transaction: a notifying
//! commit holds PostgreSQL's global notify lock until its WAL is on disk, so every such commit
//! would wait for the one before it, and group commit could never share a flush between them.
//! Instead they hand the topic, once committed, to the [`Notifier`]: one task that sends every
//! topic queued since its last statement in one `pg_notify` statement whose commit does not
//! wait for the disk (a wake-up is not data; a lost one is covered by the listener's wake-all on
//! reconnect and the long-poll's fallback poll). The rare writes (cancels, session ends, a
//! lapsed lease) still notify inside their transaction, with [`notify`].

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnection, PgListener, PgPool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::{ErrorChain, StoreResult};
use crate::wake::{Hub, Topic};

/// The notification channel every replica listens on.
pub(super) const WAKE_CHANNEL: &str = "sealpost_wake";
/// Pause before reconnecting a lost listener.
const LISTENER_RETRY: Duration = Duration::from_secs(1);
/// Topics the notifier holds before it drops new ones (the fallback poll covers a dropped one).
const QUEUE_DEPTH: usize = 4_096;
/// Most topics one notifying statement carries.
const MAX_BATCH: usize = 512;

/// Sends `topic` on commit of the transaction `conn` is in.
pub(super) async fn notify(conn: &mut PgConnection, topic: Topic) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(WAKE_CHANNEL)
        .bind(topic.encode())
        .execute(conn)
        .await?;
    Ok(())
}

/// The queue of committed writes' wake-ups, drained by one task in batches.
#[derive(Debug, Clone)]
pub(super) struct Notifier {
    queue: mpsc::Sender<Topic>,
}

impl Notifier {
    /// Starts the task; it ends when the last `Notifier` is dropped.
    pub(super) fn start(pool: PgPool) -> Self {
        let (queue, topics) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(notify_loop(pool, topics));
        Self { queue }
    }

    /// Queues `topic`, whose write has committed. Never waits.
    pub(super) fn send(&self, topic: Topic) {
        if self.queue.try_send(topic).is_err() {
            tracing::debug!("wake-up queue full; other replicas fall back to polling");
        }
    }
}

/// Sends whatever is queued, one statement at a time: a lone wake-up goes out at once, and
/// under load one statement carries all that queued while the last one ran.
async fn notify_loop(pool: PgPool, mut topics: mpsc::Receiver<Topic>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while topics.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let payloads: Vec<String> = batch.drain(..).map(Topic::encode).collect();
        let sent = sqlx::query(
            "SELECT pg_notify($1, topic), set_config('synchronous_commit', 'off', true) \
             FROM unnest($2::text[]) AS topic",
        )
        .bind(WAKE_CHANNEL)
        .bind(&payloads)
        .execute(&pool)
        .await;
        if let Err(error) = sent {
            tracing::warn!(error = %ErrorChain(&error), topics = payloads.len(), "could not send wake-ups to other replicas");
        }
    }
}

/// Forwards notifications into the hub until shutdown, reconnecting after a loss.
pub(super) async fn listen_loop(pool: PgPool, hub: Arc<Hub>, shutdown: CancellationToken) {
    loop {
        let listening = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(WAKE_CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            _ = shutdown.cancelled() => return,
            listener = listening => match listener {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::warn!(%error, "wake-up listener could not connect; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(LISTENER_RETRY) => continue,
                    }
                }
            },
        };
        // Anything posted while nobody listened would otherwise wait for the fallback poll.
        hub.wake_all();
        loop {
            let received = tokio::select! {
                _ = shutdown.cancelled() => return,
                received = listener.try_recv() => received,
            };
            match received {
                Ok(Some(notification)) => {
                    if let Some(topic) = Topic::decode(notification.payload()) {
                        hub.wake(topic);
                    }
                }
                Ok(None) | Err(_) => {
                    tracing::warn!("wake-up listener lost its connection; reconnecting");
                    break;
                }
            }
        }
    }
}
