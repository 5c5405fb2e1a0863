//! The SQLite schema: `migrations/sqlite`, embedded by `sqlx::migrate!` and bookkept in
//! `_sqlx_migrations`.
//!
//! Databases made before the relay used sqlx's runner kept their own `relay_migrations` table
//! (the versions applied, same files, same schema). Such a database is adopted: its versions
//! are recorded as applied in `_sqlx_migrations` (`Migrator::skip`), the old table goes, and
//! the newer migrations then run as on any database. Every step can be repeated, so a start
//! interrupted half-way finishes on the next.

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::sqlite::SqliteConnection;

static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Brings the database on `conn` up to date. The writer's connection runs it before any other
/// connection opens, so nothing else migrates at the same time.
pub(super) async fn run(conn: &mut SqliteConnection) -> Result<(), MigrateError> {
    let earlier: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'relay_migrations'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    let adopted: Option<i64> = match earlier {
        Some(_) => {
            sqlx::query_scalar("SELECT MAX(version) FROM relay_migrations")
                .fetch_one(&mut *conn)
                .await?
        }
        None => None,
    };
    if let Some(version) = adopted {
        MIGRATOR.skip(&mut *conn, Some(version)).await?;
        sqlx::raw_sql("DROP TABLE relay_migrations")
            .execute(&mut *conn)
            .await?;
    }
    MIGRATOR.run(&mut *conn).await
}
