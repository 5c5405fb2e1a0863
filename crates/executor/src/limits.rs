//! Every limit the executor enforces, in one place, named for what it bounds.
//!
//! Limits shared with the plugin and the relay (envelope sizes, clock skew, catalog size) live in
//! `sealpost_protocol::limits`; the ones here only the browser needs.

/// Most plugin keys whose derived session keys are cached at once. A plugin that restarts
/// mid-session brings a new key; sixteen covers restarts without letting anyone grow memory.
pub const MAX_CACHED_PLUGIN_KEYS: usize = 16;
/// Size of the seen-call set above which entries that can no longer be replayed (their envelope
/// has expired) are dropped.
pub const SEEN_CALLS_PRUNE_THRESHOLD: usize = 4096;

/// Longest document id, in bytes.
pub const MAX_DOC_ID_BYTES: usize = 128;
/// Longest source name, in bytes.
pub const MAX_SOURCE_NAME_BYTES: usize = 128;
/// Longest document title, in bytes.
pub const MAX_TITLE_BYTES: usize = 1024;
/// Largest document body the workspace accepts, in bytes.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Longest search query, in characters.
pub const MAX_QUERY_CHARS: usize = 500;
/// Results `search_workspace` returns when the call names no `limit`.
pub const DEFAULT_SEARCH_LIMIT: u64 = 10;
/// Most results one `search_workspace` call may ask for.
pub const MAX_SEARCH_LIMIT: u64 = 50;
/// Length of a search snippet, in characters.
pub const SNIPPET_CHARS: usize = 240;
/// Most dictionary terms one query word may expand to by prefix.
pub const MAX_PREFIX_EXPANSIONS: usize = 64;
/// Shortest query word (in characters) that is expanded by prefix when it matches no term.
pub const MIN_PREFIX_CHARS: usize = 3;
/// Longest token the index keeps, in bytes; longer "words" are hashes or encoded blobs.
pub const MAX_TOKEN_BYTES: usize = 64;

/// Characters `get_source_excerpt` returns when the call names no `max_chars`.
pub const DEFAULT_EXCERPT_CHARS: u64 = 4000;
/// Most characters one `get_source_excerpt` call may ask for.
pub const MAX_EXCERPT_CHARS: u64 = 50_000;
/// Most documents `get_workspace_outline` lists; the rest are counted, not listed.
pub const MAX_OUTLINE_ENTRIES: usize = 500;

/// Longest note body or appended text a proposal may carry, in characters.
pub const MAX_PROPOSAL_TEXT_CHARS: u64 = 200_000;
/// Longest `find` or `replace` text of an edit proposal, in characters.
pub const MAX_EDIT_TEXT_CHARS: u64 = 20_000;
/// Most proposals waiting for review at once; more would only bury the person in review work.
pub const MAX_PENDING_PROPOSALS: usize = 200;

/// Audit records kept in memory by [`crate::audit::MemoryAuditLog`] before the oldest are dropped.
pub const MAX_MEMORY_AUDIT_RECORDS: usize = 10_000;
