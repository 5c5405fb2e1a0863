//! Sealpost's browser module: turns a tab (a dedicated Worker of it) into the trusted executor.
//!
//! It moves bytes and calls `sealpost-executor`; it decides nothing itself. The parts:
//! - [`backoff`], [`delivery`] and [`stop`]: how the claim loop waits after errors, how an
//!   answer is sent again until its lease ends, and why the loop stops (pure, tested natively).
//! - `relay` (wasm32): the relay's API over `fetch` with the owner token.
//! - `claim_loop` (wasm32): `TabCore::serve`, the loop that claims, runs and answers calls.
//! - `catalog` (wasm32): a live session's tool list kept current (sealed catalog updates).
//! - `channel` (wasm32): the session channel, a WebSocket on which the claim loop claims and
//!   answers when the relay offers one (HTTP otherwise).
//! - `tab` (wasm32): [`TabCore`](tab::TabCore), exported to JavaScript: documents, grants, host
//!   tools, the pairing, a session, the claim loop, proposals and the audit trail.
//! - `documents` (wasm32): `TabCore`'s sources and documents, restored at start with the
//!   search index snapshot kept beside them.
//! - `bench` (wasm32, feature `bench`): what `cargo xtask bench browser` times in the page;
//!   left out of the module that ships.
//! - `timing` (wasm32): the tab's clock, and the performance marks (benchmark builds only)
//!   that say where a call's time goes.
//! - `host_tool` (wasm32): a JavaScript function as an executor `HostTool`, bounded by the
//!   call's expiry.
//!
//! `js/worker.js` runs `TabCore` in a dedicated Worker (so a hidden tab answers as fast as a
//! visible one: the loop is driven by the long-poll, not by timers), holds the Web Lock that
//! makes one tab serve a pairing, and persists to IndexedDB; `js/sealpost.js` is the page's API.

#![warn(missing_docs)]

pub mod backoff;
pub mod delivery;
pub mod stop;

#[cfg(all(target_arch = "wasm32", feature = "bench"))]
pub mod bench;

#[cfg(target_arch = "wasm32")]
mod catalog;
#[cfg(target_arch = "wasm32")]
mod channel;
#[cfg(target_arch = "wasm32")]
mod claim_loop;
#[cfg(target_arch = "wasm32")]
mod documents;
#[cfg(target_arch = "wasm32")]
mod host_tool;
#[cfg(target_arch = "wasm32")]
mod relay;
#[cfg(target_arch = "wasm32")]
pub mod tab;
#[cfg(target_arch = "wasm32")]
mod timing;
