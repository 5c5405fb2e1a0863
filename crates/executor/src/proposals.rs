//! Pending proposals: changes a proposal tool asked for, waiting for a person. Saving one writes
//! nothing to the workspace; only [`crate::Executor::apply_proposal`], called from the app's
//! review page, writes, and only if the document is still exactly as the proposal saw it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sealpost_protocol::ids::ProposalId;
use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::workspace::{DocId, Document, WorkspaceError};

/// The change a proposal would make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProposedChange {
    /// A new note; its id is [`crate::CREATED_NOTE_ID_PREFIX`] and the proposal id.
    CreateNote {
        /// The source it goes into.
        source: String,
        /// The note's title, shown at review and then in outlines.
        title: String,
        /// The note's whole text, shown at review before anything is written.
        body: String,
    },
    /// Text added at the end of a document, on a new line.
    AppendNote {
        /// The document to extend.
        doc_id: DocId,
        /// What to add.
        text: String,
    },
    /// One passage of a document replaced.
    EditNote {
        /// The document to change.
        doc_id: DocId,
        /// The passage, which occurred exactly once when proposed.
        find: String,
        /// What takes its place.
        replace: String,
    },
    /// A host proposal tool's call, to be carried out by the host once a person approves it.
    HostTool {
        /// Which host tool proposed it, and will carry it out once approved.
        tool: String,
        /// The arguments it was called with, already checked against its schema.
        arguments: Value,
    },
}

/// One proposal awaiting review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// How the review page and the audit log refer to it (drawn at random).
    pub id: ProposalId,
    /// When the call that proposed it was handled.
    pub created_at_ms: UnixMillis,
    /// The tool that proposed it.
    pub tool: String,
    /// What approving it would do.
    pub change: ProposedChange,
    /// [`document_digest`] of the document when the proposal was made (append and edit only).
    pub base_digest: Option<String>,
}

/// What applying a proposal did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The workspace now holds the changed (or new) document.
    DocumentWritten {
        /// The new or changed document, so the app can show it.
        doc_id: DocId,
    },
    /// A host tool's proposal: the person approved it, the host now carries it out.
    HostTool {
        /// The host tool that carries it out.
        tool: String,
        /// The arguments the model proposed it with.
        arguments: Value,
    },
}

/// Why a proposal was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The id is not pending.
    #[error("no pending proposal with that id; it may have been applied or rejected already")]
    NoSuchProposal,
    /// The document is not as the proposal saw it, so the change might not fit.
    #[error("the document changed since this proposal was made; reject it and ask for a new one")]
    DocumentChanged,
    /// The document was removed after the proposal.
    #[error("the document no longer exists; reject this proposal")]
    DocumentGone,
    /// The source a new note was to go into was removed.
    #[error("the source {0:?} no longer exists; reject this proposal")]
    SourceGone(String),
    /// The changed document would break a workspace rule, such as the body limit.
    #[error("the workspace refused the change: {0}")]
    Workspace(#[from] WorkspaceError),
}

/// Proposals keyed by id, oldest id first.
#[derive(Debug, Default, Clone)]
pub struct Proposals {
    pending: BTreeMap<ProposalId, Proposal>,
}

impl Proposals {
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn insert(&mut self, proposal: Proposal) {
        self.pending.insert(proposal.id, proposal);
    }

    pub fn get(&self, id: &ProposalId) -> Option<&Proposal> {
        self.pending.get(id)
    }

    pub fn remove(&mut self, id: &ProposalId) -> Option<Proposal> {
        self.pending.remove(id)
    }

    /// Pending proposals, oldest first.
    pub fn list(&self) -> Vec<Proposal> {
        let mut list: Vec<Proposal> = self.pending.values().cloned().collect();
        list.sort_by_key(|p| (p.created_at_ms, p.id));
        list
    }
}

/// Hex SHA-256 over a document's source, title and body: what "unchanged" means for a proposal.
pub fn document_digest(document: &Document) -> String {
    let mut hasher = Sha256::new();
    for part in [&document.source, &document.title, &document.body] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The body after appending `text`: on a new line unless the body is empty or already ends
/// with one. A body that ended with a newline (as text files do) still ends with one.
pub fn appended(body: &str, text: &str) -> String {
    let mut out = String::with_capacity(body.len() + text.len() + 2);
    out.push_str(body);
    if !body.is_empty() && !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(text);
    if body.ends_with('\n') && !text.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::appended;

    #[test]
    fn an_append_goes_on_a_new_line_and_keeps_the_final_newline_the_body_had() {
        assert_eq!(appended("a\nb\n", "c"), "a\nb\nc\n");
        assert_eq!(appended("a\nb\n", "c\n"), "a\nb\nc\n");
        assert_eq!(appended("a\nb", "c"), "a\nb\nc");
        assert_eq!(appended("", "c"), "c");
    }
}
