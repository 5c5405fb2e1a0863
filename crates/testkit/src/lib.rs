//! Sealpost's test kit, shared by the relay's tests, the plugin's tests, the cross-process tests
//! and the relay benchmark: a relay started in-process on a fresh database (a temporary SQLite
//! file, or a new database on the PostgreSQL cluster `SEALPOST_TEST_POSTGRES_URL` names, with a
//! skip reported and counted as docs/TESTING.md says), owners signed in through
//! `/v1/auth/signin`, MCP tokens, sessions, typed requests for both ends, and the metrics.
//!
//! It never depends on `sealpost-seal` (the relay's tests use it, and the relay links no
//! cipher): pairing secrets and codes live in `sealpost-e2e`, on top of this kit.

pub mod client;
pub mod db;
pub mod relay;

pub use client::Client;
pub use db::{TempDir, TestDb, id, postgres_admin_url, report_skip};
pub use relay::{Pairing, Relay, SESSION_TTL_S, TEST_KEY, b64, pairing, test_config, unb64};
