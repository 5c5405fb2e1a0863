//! Sealpost relay: stores sealed envelopes and hands them between a person's MCP plugin and
//! their browser tab, holding only ciphertext and never a key.
//!
//! - [`app`]: start, serve, sweep, shut down.
//! - [`accounts`]: sign-in links, for the CLI, the first start and the API alike.
//! - [`http`]: the `/v1` API, health, readiness, metrics, OpenAPI, the web app.
//! - [`store`]: the only module that knows SQL (SQLite and PostgreSQL behind one trait).
//! - [`wake`]: in-process wake-ups for long-polls.
//! - [`config`]: configuration and every limit.
//! - [`origins`]: the app origins an operator lists (`--app-origin`) and the rule a request's
//!   `Origin` is judged by.
//! - [`scope`]: which app a code, token, session or call belongs to, and what each reaches.
//! - [`clock`]: the relay's one clock read.
//! - [`cli`]: the binary's command line.
//!
//! Only the crate uses the rest: `serve` (connections: timeouts, caps, the shutdown deadline),
//! `caps`, `quota`, `ratelimit`, `admitted` (the work whose completion a rate does not refuse),
//! `metrics` and `ids`.

#![warn(missing_docs)]

pub mod accounts;
pub(crate) mod admitted;
pub mod app;
pub(crate) mod caps;
pub mod cli;
pub mod clock;
pub mod config;
pub mod handoff;
pub mod healthcheck;
pub mod http;
pub(crate) mod ids;
pub(crate) mod logging;
pub(crate) mod metrics;
pub mod oidc;
pub mod origins;
pub(crate) mod quota;
pub(crate) mod ratelimit;
pub mod scope;
pub(crate) mod serve;
pub(crate) mod shares;
pub mod store;
pub mod wake;
