//! Limits shared by the plugin, the relay and the browser. Each bounds one thing; the table in
//! docs/PROTOCOL.md lists them with their reasons.

/// Largest decoded call envelope the relay accepts (a call carries tool arguments only).
pub const MAX_CALL_ENVELOPE_BYTES: usize = 256 * 1024;
/// Largest decoded reply envelope the relay accepts (results can carry document text).
pub const MAX_REPLY_ENVELOPE_BYTES: usize = 2 * 1024 * 1024;
/// Largest decoded session hello (binary record, sealed catalog, tag).
pub const MAX_HELLO_BYTES: usize = 64 * 1024;
/// Longest a long-poll (claim or read) may wait before answering empty.
pub const MAX_WAIT_MS: u64 = 30_000;
/// Most calls one claim may take at once.
pub const MAX_CLAIM_BATCH: usize = 50;
/// Default claim lease: how long an executor has to answer a claimed call.
pub const DEFAULT_LEASE_MS: u64 = 30_000;
/// Tolerance either end allows when judging another party's timestamps.
pub const CLOCK_SKEW_MS: u64 = 120_000;
/// Most tools a catalog may offer.
pub const MAX_TOOLS: usize = 100;
/// Longest tool name, in bytes (names are ASCII: `[A-Za-z0-9_.-]`). Codex shows a tool as
/// `mcp__sealpost__NAME` and caps that at 64 characters, which leaves 48.
pub const MAX_TOOL_NAME_BYTES: usize = 48;
/// Longest tool description kept, in characters, after flattening.
pub const MAX_TOOL_DESCRIPTION_CHARS: usize = 1024;
/// Most characters of a tool's title, as the catalog carries it.
pub const MAX_TOOL_TITLE_CHARS: usize = 100;
/// Largest input schema the plugin lists for a tool, serialised, after cleaning; a larger one
/// is listed as `{"type":"object"}` (the tab still checks arguments against the real one).
pub const MAX_LISTED_SCHEMA_BYTES: usize = 8 * 1024;
/// Tool names that start with this, in any case, belong to the plugin itself and are refused
/// in a catalog: `Sealpost_status`, `SEALPOST-STATUS` and `sealpost.status` would read as the
/// plugin's own `sealpost_status` to a person or a model.
pub const RESERVED_TOOL_PREFIX: &str = "sealpost";
