//! The PostgreSQL schema: `migrations/postgres`, embedded by `sqlx::migrate!` and bookkept in
//! `_sqlx_migrations` (sqlx's runner takes its own advisory lock while it applies them).
//!
//! Databases made before the relay used sqlx's runner kept their own `relay_migrations` table
//! (the versions applied, same files, same schema). Such a database is adopted: its versions
//! are recorded as applied in `_sqlx_migrations` (`Migrator::skip`), the old table goes, and
//! the newer migrations then run as on any database. Replicas starting together serialise the
//! whole of it on one advisory lock, and every step can be repeated.

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnection, PgPool};

static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// Arbitrary key serialising the adoption and the migrations of replicas that start together
/// (the key the earlier runner used, so an earlier replica and a newer one never overlap).
const MIGRATION_LOCK_KEY: i64 = 0x5ea1_9057;

/// Brings the database up to date, under [`MIGRATION_LOCK_KEY`].
pub(super) async fn run(pool: &PgPool) -> Result<(), MigrateError> {
    let mut conn = pool.acquire().await?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK_KEY)
        .execute(&mut *conn)
        .await?;
    let migrated = adopt_and_run(&mut conn).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATION_LOCK_KEY)
        .execute(&mut *conn)
        .await;
    if unlocked.is_err() {
        // A session lock lives as long as its connection: do not hand this one back.
        conn.detach();
    }
    migrated?;
    unlocked?;
    Ok(())
}

async fn adopt_and_run(conn: &mut PgConnection) -> Result<(), MigrateError> {
    let earlier: bool = sqlx::query_scalar("SELECT to_regclass('relay_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if earlier {
        let version: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM relay_migrations")
            .fetch_one(&mut *conn)
            .await?;
        if let Some(version) = version {
            MIGRATOR.skip(&mut *conn, Some(version)).await?;
        }
        sqlx::raw_sql("DROP TABLE relay_migrations")
            .execute(&mut *conn)
            .await?;
    }
    MIGRATOR.run(&mut *conn).await
}
