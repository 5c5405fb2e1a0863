//! The decision for one opened call: access, tool, arguments, grants, then the tool itself.
//! Every refusal the executor can seal back is decided here.

use std::rc::Rc;

use rand_core::CryptoRng;
use sealpost_protocol::content::{Refusal, RefusalCode, Reply, ToolCall, ToolKind, ToolResult};
use sealpost_protocol::ids::ProposalId;

use crate::Executor;
use crate::audit::AuditOutcome;
use crate::builtin::BuiltinAnswer;
use crate::builtin::BuiltinTool;
use crate::clock::Clock;
use crate::grants::Access;
use crate::limits::MAX_PENDING_PROPOSALS;
use crate::proposals::{Proposal, ProposedChange};
use crate::registry::{Action, HostTool, PersonsAnswer, ToolFailure};

/// The executor's answer to one call, before sealing.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// What is sealed back to the plugin.
    pub reply: Reply,
    /// What the audit record will say.
    pub outcome: AuditOutcome,
}

/// How a call that passed the checks will run.
enum Plan {
    Builtin(BuiltinTool),
    /// A host proposal tool: saved for review, its handler not called.
    HostProposal,
    HostRead(Rc<dyn HostTool>),
}

/// Most validation errors quoted back; the first few say enough to fix a call.
const MAX_REPORTED_SCHEMA_ERRORS: usize = 3;

pub(crate) fn refusal(code: RefusalCode, message: impl Into<String>) -> Decision {
    Decision {
        reply: Reply::Refusal(Refusal {
            code,
            message: message.into(),
        }),
        outcome: AuditOutcome::Refused { code },
    }
}

fn answered(result: ToolResult) -> Decision {
    let outcome = if result.is_error {
        AuditOutcome::AnsweredWithError
    } else {
        AuditOutcome::Answered
    };
    Decision {
        reply: Reply::Result(result),
        outcome,
    }
}

/// Nothing runs: the refusal names which of the two reasons holds (the code is `locked` for
/// both, as the protocol lists it).
fn not_serving(access: Access) -> Decision {
    let message = match access {
        Access::Locked => {
            "The Sealpost tab is locked. Ask the person to unlock it if they want calls served."
        }
        _ => {
            "AI access is switched off in the Sealpost tab. Ask the person to switch it on \
             under AI access if they want calls served."
        }
    };
    refusal(RefusalCode::Locked, message)
}

fn not_granted(tool: &str) -> Decision {
    refusal(
        RefusalCode::NotGranted,
        format!(
            "The person has not allowed the tool {tool:?} for this session. They can allow it \
             on the AI access page of the Sealpost tab."
        ),
    )
}

impl Executor {
    /// Decides and runs one already opened call. [`Executor::handle`] calls this between opening
    /// and sealing; a host may also call it directly to run a tool locally under the same rules.
    pub async fn execute(
        &self,
        call: &ToolCall,
        clock: &impl Clock,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Decision {
        if !self.grants.read(|g| g.is_on()) {
            return not_serving(self.grants.read(|g| g.access));
        }
        let plan = match self.plan(call) {
            Ok(plan) => plan,
            Err(refused) => return refused,
        };
        clock.mark(crate::clock::Stage::Granted);
        match plan {
            Plan::Builtin(builtin) => {
                let answer = {
                    let workspace = self.workspace.borrow();
                    self.grants
                        .read(|grants| builtin.run(&call.arguments, &workspace, grants))
                };
                match answer {
                    Err(message) => refusal(RefusalCode::BadArguments, message),
                    Ok(BuiltinAnswer::Answer(result)) => answered(result),
                    Ok(BuiltinAnswer::Withheld(result)) => Decision {
                        reply: Reply::Result(result),
                        outcome: AuditOutcome::Refused {
                            code: RefusalCode::NotGranted,
                        },
                    },
                    Ok(BuiltinAnswer::Propose {
                        change,
                        base_digest,
                    }) => self.save_proposal(&call.name, change, base_digest, clock, rng),
                }
            }
            Plan::HostProposal => {
                let change = ProposedChange::HostTool {
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                };
                self.save_proposal(&call.name, change, None, clock, rng)
            }
            Plan::HostRead(handler) => {
                let result = handler.call(call.arguments.clone()).await;
                // Re-read the grants: a lock or a removed grant applies to this answer too.
                if !self.grants.read(|g| g.is_on()) {
                    return not_serving(self.grants.read(|g| g.access));
                }
                if !self.tool_granted(&call.name) {
                    return not_granted(&call.name);
                }
                match result {
                    Ok(result) => answered(result),
                    Err(ToolFailure {
                        message,
                        person: Some(answer),
                    }) => refusal(
                        match answer {
                            PersonsAnswer::Declined => RefusalCode::Declined,
                            PersonsAnswer::NotConfirmed => RefusalCode::NotConfirmed,
                        },
                        message,
                    ),
                    Err(failure) => refusal(
                        RefusalCode::ToolFailed,
                        format!("The tool {:?} failed: {}", call.name, failure.message),
                    ),
                }
            }
        }
    }

    /// The checks before anything runs: known tool, arguments match its schema, tool granted.
    /// Returns owned values only, so no registry borrow outlives it (the host may register
    /// tools while a host tool runs).
    fn plan(&self, call: &ToolCall) -> Result<Plan, Decision> {
        let registry = self.registry.borrow();
        let Some(tool) = registry.get(&call.name) else {
            return Err(refusal(
                RefusalCode::UnknownTool,
                format!(
                    "No tool named {:?} is offered by this tab. Its tools are listed in the \
                     session's catalog.",
                    call.name
                ),
            ));
        };
        // `is_valid` is the fast path; errors are collected only to explain a refusal.
        let errors: Vec<String> = if tool.validator.is_valid(&call.arguments) {
            Vec::new()
        } else {
            tool.validator
                .errors(&call.arguments, MAX_REPORTED_SCHEMA_ERRORS)
        };
        if !errors.is_empty() {
            return Err(refusal(
                RefusalCode::BadArguments,
                format!(
                    "The arguments do not match the schema of {:?}: {}",
                    call.name,
                    errors.join("; ")
                ),
            ));
        }
        let granted = self
            .grants
            .read(|g| g.is_on() && crate::executor::granted(g, tool));
        if !granted {
            return Err(not_granted(&call.name));
        }
        Ok(match &tool.action {
            Action::Builtin(builtin) => Plan::Builtin(*builtin),
            Action::Host(_) if tool.entry.kind == ToolKind::Proposal => Plan::HostProposal,
            Action::Host(handler) => Plan::HostRead(handler.clone()),
        })
    }

    fn save_proposal(
        &self,
        tool: &str,
        change: ProposedChange,
        base_digest: Option<String>,
        clock: &impl Clock,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Decision {
        let mut proposals = self.proposals.borrow_mut();
        if proposals.len() >= MAX_PENDING_PROPOSALS {
            return refusal(
                RefusalCode::ToolFailed,
                format!(
                    "{MAX_PENDING_PROPOSALS} proposals are already waiting for review. Ask the \
                     person to review them in the Sealpost tab before proposing more."
                ),
            );
        }
        let mut id = [0u8; 16];
        rng.fill_bytes(&mut id);
        let id = ProposalId::from_bytes(id);
        proposals.insert(Proposal {
            id,
            created_at_ms: clock.now_ms(),
            tool: tool.to_owned(),
            change,
            base_digest,
        });
        let structured = serde_json::json!({
            "proposal_id": id,
            "status": "pending_review",
        });
        // The structured answer as JSON text, as every built-in gives it (the plugin passes only
        // text on), then what it means.
        let text = format!(
            "{structured}\n\nSaved for review as proposal {id}. Nothing has changed yet: a \
             person will approve or reject it in the Sealpost tab."
        );
        Decision {
            reply: Reply::Result(ToolResult {
                structured: Some(structured),
                ..ToolResult::text(text)
            }),
            outcome: AuditOutcome::ProposalSaved { proposal_id: id },
        }
    }
}
