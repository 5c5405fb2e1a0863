//! Sealpost's browser executor: the only party that sees plaintext. It opens each call, decides
//! whether it may run, runs it, seals the answer and records what happened.
//!
//! Pure Rust with no I/O, no clock reads, no threads and no OS randomness: time comes in as a
//! [`Clock`], randomness as a `&mut impl CryptoRng`, storage as a [`DocumentStore`], audit
//! records go out through an [`AuditSink`]. The browser crate supplies all four and moves bytes.
//!
//! The path of one call ([`Executor::handle`]): open (undecryptable, replayed, expired or past
//! the session → a cancel reason) → access on? → known tool → arguments match its JSON Schema →
//! tool granted → run (built-in, or a host tool's async handler; documents and sources checked
//! against the grants) → grants and expiry re-checked → bounded → sealed; the shell sends the
//! answer and [`Executor::settle`] audits it with what the relay did.
//!
//! docs/EXECUTOR.md describes the decisions, the tools and the search ranking.

#![warn(missing_docs)]

mod audit;
mod builtin;
mod clock;
mod dispatch;
mod executor;
mod grants;
pub mod limits;
mod proposals;
mod registry;
mod review;
mod schema;
pub mod search;
mod session;
mod workspace;

pub use audit::{AuditOutcome, AuditRecord, AuditSink, Delivery, MemoryAuditLog, arguments_digest};
pub use builtin::BuiltinTool;
pub use clock::{Clock, Stage};
pub use dispatch::Decision;
pub use executor::{
    Executor, ListedTool, MAX_REPLY_PLAINTEXT_BYTES, Outcome, Resealer, SessionError,
};
pub use grants::{Access, Grants, GrantsHandle};
pub use proposals::{Applied, ApplyError, Proposal, ProposedChange, document_digest};
pub use registry::{HostTool, PersonsAnswer, RegistryError, ToolFailure, ToolFuture, ToolSpec};
pub use review::CREATED_NOTE_ID_PREFIX;
pub use workspace::{
    DocId, Document, DocumentStore, IndexOrigin, MemoryStore, Restored, Workspace, WorkspaceError,
};
