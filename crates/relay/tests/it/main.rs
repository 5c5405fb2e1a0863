//! The relay's integration tests, one binary: the store contract on both backends, and the
//! HTTP API on loopback against fresh databases.

mod admitted;
mod admitted_channel;
mod api;
mod app_shares;
mod apps;
mod boundaries;
mod catalog;
mod channel;
mod connections;
mod contract;
mod deploy;
mod handoff;
mod hardening;
mod isolation;
mod limits;
mod log_reader;
mod migrations;
mod oidc;
mod openapi;
mod origins;
mod owner_tokens;
mod post_wait;
mod processes;
mod quotas;
mod revocation;
mod session_end;
mod session_watch;
mod shares;
mod sqlite_wal;
mod store_errors;
mod token_kinds;
