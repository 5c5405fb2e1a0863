//! WAL checkpoints on a connection of their own, so the writer never waits for one.
//!
//! Left to SQLite, the connection whose commit crosses the WAL's size threshold copies the WAL
//! back into the database file and fsyncs it, inside that commit: a pause of several
//! milliseconds for the writer, and so for every request queued behind it. The writer instead
//! runs with `wal_autocheckpoint=0`, and this task checkpoints every [`EVERY`] with `PASSIVE`,
//! which runs beside the writer. A passive checkpoint can fall behind a writer that never
//! pauses, so when the WAL holds more than [`MAX_WAL_FRAMES`] after one, a `RESTART`
//! checkpoint (which makes the writer wait while it finishes) brings it back to the start.

use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{Connection, Row};
use tokio_util::sync::CancellationToken;

/// How often the checkpointer runs.
const EVERY: Duration = Duration::from_millis(100);
/// WAL frames (pages) past which the checkpointer makes the writer wait: 64 MiB of 4 KiB pages.
const MAX_WAL_FRAMES: i64 = 16_384;
/// The WAL file is truncated to this size when it restarts, so a burst does not keep its space.
pub(crate) const JOURNAL_SIZE_LIMIT: &str = "67108864";

/// Starts the checkpointer on a new connection; it stops when `stop` is cancelled.
pub(crate) async fn spawn(
    options: &SqliteConnectOptions,
    stop: CancellationToken,
) -> Result<(), sqlx::Error> {
    let mut conn = SqliteConnection::connect_with(options).await?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(EVERY) => {}
            }
            if let Err(error) = checkpoint(&mut conn).await {
                tracing::warn!(error = %crate::store::ErrorChain(&error), "sqlite checkpoint failed");
            }
        }
        let _ = conn.close().await;
    });
    Ok(())
}

async fn checkpoint(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&mut *conn)
        .await?;
    let (log, done): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
    if log > MAX_WAL_FRAMES && done < log {
        tracing::debug!(log, done, "sqlite WAL is large: restarting it");
        sqlx::query("PRAGMA wal_checkpoint(RESTART)")
            .fetch_one(&mut *conn)
            .await?;
    }
    Ok(())
}
