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
            if let Err(error) = checkpoint(&mut conn, MAX_WAL_FRAMES).await {
                tracing::warn!(error = %crate::store::ErrorChain(&error), "sqlite checkpoint failed");
            }
        }
        let _ = conn.close().await;
    });
    Ok(())
}

/// One round: a passive checkpoint, and a `RESTART` if it left more than `max_wal_frames`.
async fn checkpoint(conn: &mut SqliteConnection, max_wal_frames: i64) -> Result<(), sqlx::Error> {
    let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&mut *conn)
        .await?;
    let (log, done): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
    if log > max_wal_frames && done < log {
        tracing::debug!(log, done, "sqlite WAL is large: restarting it");
        sqlx::query("PRAGMA wal_checkpoint(RESTART)")
            .fetch_one(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::sqlite::SqliteJournalMode;

    use super::*;

    async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sql).execute(conn).await.map(|_| ())
    }

    /// Under load some reader always holds an older snapshot, so a passive checkpoint never
    /// empties the WAL. The round then restarts it: it makes the writer wait (it holds the
    /// write lock until the readers move on) and the next write starts the WAL over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wal_that_passive_checkpoints_cannot_empty_is_restarted_while_the_writer_waits() {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "sealpost-checkpoint-{}",
            u64::from_le_bytes(random)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}/wal.db", dir.display()))
            .unwrap()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .pragma("wal_autocheckpoint", "0")
            .busy_timeout(Duration::from_secs(60));
        let mut writer = SqliteConnection::connect_with(&options).await.unwrap();
        exec(&mut writer, "CREATE TABLE t (x BLOB)").await.unwrap();
        let mut reader = SqliteConnection::connect_with(&options).await.unwrap();
        exec(&mut reader, "BEGIN").await.unwrap();
        sqlx::query("SELECT COUNT(*) FROM t")
            .fetch_one(&mut reader)
            .await
            .unwrap();
        // The load: many more WAL frames than the threshold below, past the reader's snapshot.
        for _ in 0..64 {
            exec(&mut writer, "INSERT INTO t VALUES (zeroblob(16384))")
                .await
                .unwrap();
        }
        let wal_frames = |row: sqlx::sqlite::SqliteRow| row.try_get::<i64, _>(1).unwrap();

        let mut checkpointer = SqliteConnection::connect_with(&options).await.unwrap();
        let round = tokio::spawn(async move { checkpoint(&mut checkpointer, 100).await });
        // While the round waits for the reader, a writer that will not wait finds the lock taken.
        let mut probe =
            SqliteConnection::connect_with(&options.clone().busy_timeout(Duration::ZERO))
                .await
                .unwrap();
        loop {
            assert!(
                !round.is_finished(),
                "the round ended without making the writer wait: no RESTART ({:?})",
                round.await
            );
            match exec(&mut probe, "BEGIN IMMEDIATE").await {
                Ok(()) => {
                    exec(&mut probe, "ROLLBACK").await.unwrap();
                    tokio::task::yield_now().await;
                }
                Err(_) => break,
            }
        }
        exec(&mut reader, "COMMIT").await.unwrap();
        round.await.unwrap().unwrap();

        // Restarted: the next write goes to the start of the WAL instead of after the load.
        exec(&mut writer, "INSERT INTO t VALUES (1)").await.unwrap();
        let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut writer)
            .await
            .unwrap();
        let frames = wal_frames(row);
        assert!(
            frames < 64,
            "the WAL holds {frames} frames: it was not restarted"
        );
        drop((writer, reader, probe));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
