//! The ordered migrations of each backend, embedded in the binary.
//!
//! A tiny runner instead of sqlx's: each backend keeps a `relay_migrations` table of applied
//! versions, and PostgreSQL replicas starting together serialise on an advisory lock.

/// One migration: its version (the file's number) and SQL.
pub(crate) struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

pub(crate) const SQLITE: &[Migration] = &[Migration {
    version: 1,
    sql: include_str!("../../../../migrations/sqlite/0001_initial.sql"),
}];

pub(crate) const POSTGRES: &[Migration] = &[Migration {
    version: 1,
    sql: include_str!("../../../../migrations/postgres/0001_initial.sql"),
}];

/// Creates the bookkeeping table (same SQL on both backends).
pub(crate) const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS relay_migrations \
     (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";
