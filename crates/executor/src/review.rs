//! The review side of proposals: listing, applying and rejecting. Only the host's review page
//! calls these; no tool call can reach them. Each decision is written to the audit log.

use sealpost_protocol::ids::ProposalId;
use sealpost_time::UnixMillis;

use crate::Executor;
use crate::audit::{AuditOutcome, AuditRecord, arguments_digest};
use crate::proposals::{Applied, ApplyError, Proposal, ProposedChange, appended, document_digest};
use crate::workspace::{DocId, Document};

/// Prefix of the ids of notes created from proposals (followed by the proposal id).
pub const CREATED_NOTE_ID_PREFIX: &str = "note-";

impl Executor {
    /// Proposals waiting for review, oldest first.
    pub fn pending_proposals(&self) -> Vec<Proposal> {
        self.proposals.borrow().list()
    }

    /// Puts back proposals the host stored earlier (after a reload of the tab).
    pub fn restore_proposals(&self, proposals: impl IntoIterator<Item = Proposal>) {
        let mut pending = self.proposals.borrow_mut();
        for proposal in proposals {
            pending.insert(proposal);
        }
    }

    /// Applies a proposal the person approved. An append or edit is applied only if the
    /// document is exactly as it was when proposed; otherwise nothing is written and the
    /// proposal stays pending, so the person can reject it. Audited either way.
    pub fn apply_proposal(
        &self,
        id: ProposalId,
        now_ms: UnixMillis,
    ) -> Result<Applied, ApplyError> {
        let Some(proposal) = self.proposals.borrow().get(&id).cloned() else {
            return Err(ApplyError::NoSuchProposal);
        };
        let result = self.write_proposal(&proposal, now_ms);
        let outcome = match &result {
            Ok(_) => {
                self.proposals.borrow_mut().remove(&id);
                AuditOutcome::ProposalApplied { proposal_id: id }
            }
            Err(_) => AuditOutcome::ProposalApplyRefused { proposal_id: id },
        };
        self.audit_review(&proposal, outcome, now_ms);
        result
    }

    /// Rejects a proposal: it is dropped, nothing is written, the rejection is audited.
    pub fn reject_proposal(&self, id: ProposalId, now_ms: UnixMillis) -> Result<(), ApplyError> {
        let proposal = self
            .proposals
            .borrow_mut()
            .remove(&id)
            .ok_or(ApplyError::NoSuchProposal)?;
        self.audit_review(
            &proposal,
            AuditOutcome::ProposalRejected { proposal_id: id },
            now_ms,
        );
        Ok(())
    }

    fn write_proposal(
        &self,
        proposal: &Proposal,
        now_ms: UnixMillis,
    ) -> Result<Applied, ApplyError> {
        let mut workspace = self.workspace.borrow_mut();
        let base = |doc_id: &DocId| -> Result<Document, ApplyError> {
            let doc = workspace.get(doc_id).ok_or(ApplyError::DocumentGone)?;
            if proposal.base_digest.as_deref() != Some(document_digest(doc).as_str()) {
                return Err(ApplyError::DocumentChanged);
            }
            Ok(doc.clone())
        };
        let document = match &proposal.change {
            ProposedChange::CreateNote {
                source,
                title,
                body,
            } => {
                if !workspace.has_source(source) {
                    return Err(ApplyError::SourceGone(source.clone()));
                }
                Document {
                    id: DocId::new(format!("{CREATED_NOTE_ID_PREFIX}{}", proposal.id))
                        .expect("a proposal id makes a valid document id"),
                    source: source.clone(),
                    title: title.clone(),
                    body: body.clone(),
                    updated_at_ms: now_ms,
                }
            }
            ProposedChange::AppendNote { doc_id, text } => {
                let mut doc = base(doc_id)?;
                doc.body = appended(&doc.body, text);
                doc.updated_at_ms = now_ms;
                doc
            }
            ProposedChange::EditNote {
                doc_id,
                find,
                replace,
            } => {
                let mut doc = base(doc_id)?;
                // Unchanged since the proposal, when `find` occurred exactly once.
                doc.body = doc.body.replacen(find.as_str(), replace, 1);
                doc.updated_at_ms = now_ms;
                doc
            }
            ProposedChange::HostTool { tool, arguments } => {
                return Ok(Applied::HostTool {
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                });
            }
        };
        let doc_id = document.id.clone();
        workspace.put(document)?;
        Ok(Applied::DocumentWritten { doc_id })
    }

    fn audit_review(&self, proposal: &Proposal, outcome: AuditOutcome, now_ms: UnixMillis) {
        let change = serde_json::to_value(&proposal.change).expect("a change serialises");
        self.audit.record(&AuditRecord {
            at_ms: now_ms,
            call_id: None,
            tool: Some(proposal.tool.clone()),
            arguments_digest: Some(arguments_digest(&change)),
            outcome,
            reply_bytes: 0,
            delivery: None,
        });
    }
}
