//! Audit records: one per call and one per review decision, so the person can see what was
//! asked of their tab and what it answered. Records carry a digest of the arguments, never the
//! arguments, so the log does not become a second copy of what was read.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::rc::Rc;

use sealpost_protocol::content::{CancelReason, RefusalCode};
use sealpost_protocol::ids::{CallId, ProposalId};
use sealpost_time::UnixMillis;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::limits::MAX_MEMORY_AUDIT_RECORDS;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuditOutcome {
    /// A read tool answered.
    Answered,
    /// A tool ran and reported a failure of its own (no such document, ...).
    AnsweredWithError,
    /// A proposal tool saved a proposal for review.
    ProposalSaved {
        /// The review page's handle on it.
        proposal_id: ProposalId,
    },
    /// The call was opened and refused.
    Refused {
        /// Why, as the plugin reports it to the model.
        code: RefusalCode,
    },
    /// The call was not answered (could not be opened, replayed, expired, session over).
    Cancelled {
        /// Why no answer could be sealed.
        reason: CancelReason,
    },
    /// The person applied a proposal.
    ProposalApplied {
        /// The proposal whose change is now in the workspace.
        proposal_id: ProposalId,
    },
    /// The person rejected a proposal.
    ProposalRejected {
        /// The proposal, now dropped.
        proposal_id: ProposalId,
    },
    /// Applying was refused because the document changed since the proposal (or is gone).
    ProposalApplyRefused {
        /// The proposal, still pending so the person can reject it.
        proposal_id: ProposalId,
    },
}

/// What became of a call's answer (a reply or a cancel) once the tab sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delivery {
    /// The relay accepted it: the agent can read it.
    Accepted,
    /// The relay never accepted it (refused until the call's lease ended, or for good); the
    /// agent was not given this answer.
    NotDelivered {
        /// What the relay last answered, or why the tab gave up, in a few words.
        why: String,
    },
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// When the decision was made.
    pub at_ms: UnixMillis,
    /// The call, when one is concerned and its header could be read.
    pub call_id: Option<CallId>,
    /// The tool, when the call could be opened (or the proposal's tool).
    pub tool: Option<String>,
    /// SHA-256 of the arguments' JSON, hex; absent when the call could not be opened.
    pub arguments_digest: Option<String>,
    /// What was decided.
    pub outcome: AuditOutcome,
    /// Bytes of the sealed reply sent (0 when none was).
    pub reply_bytes: usize,
    /// For a call: whether the relay accepted the answer. Absent for review decisions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
}

/// Hex SHA-256 of the arguments as JSON. serde_json writes object keys in sorted order, so equal
/// arguments give equal digests however the plugin ordered them.
pub fn arguments_digest(arguments: &serde_json::Value) -> String {
    let bytes = serde_json::to_vec(arguments).expect("a JSON value always serialises");
    let digest = Sha256::digest(&bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Where audit records go. The browser implements it by encrypting each record into IndexedDB.
pub trait AuditSink {
    /// Keeps one record; called once per decision: for a call, once its answer was sent.
    fn record(&self, record: &AuditRecord);
}

/// An [`AuditSink`] kept in memory, newest last, at most [`MAX_MEMORY_AUDIT_RECORDS`]. Clones
/// share one log.
#[derive(Debug, Clone, Default)]
pub struct MemoryAuditLog(Rc<RefCell<VecDeque<AuditRecord>>>);

impl MemoryAuditLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every kept record, oldest first.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.0.borrow().iter().cloned().collect()
    }

    /// The newest record, if any.
    pub fn last(&self) -> Option<AuditRecord> {
        self.0.borrow().back().cloned()
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }

    /// Whether nothing has been recorded yet.
    pub fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }
}

impl AuditSink for MemoryAuditLog {
    fn record(&self, record: &AuditRecord) {
        let mut log = self.0.borrow_mut();
        if log.len() == MAX_MEMORY_AUDIT_RECORDS {
            log.pop_front();
        }
        log.push_back(record.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_ignores_key_order() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        assert_eq!(
            arguments_digest(&a),
            arguments_digest(&json!({"a":2,"b":1}))
        );
        assert_eq!(arguments_digest(&a).len(), 64);
    }
}
