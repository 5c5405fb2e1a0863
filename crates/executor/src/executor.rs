//! The executor: one value the browser holds for the life of the tab. It owns the session, the
//! tool registry, the workspace and the pending proposals, reads the shared grants, and writes
//! every decision to the audit sink: a call's once the shell reports what became of its answer
//! ([`Executor::settle`]), so the record says whether the agent can have it.
//!
//! Every method takes `&self` (state sits in `RefCell`s, never borrowed across an await), so
//! the browser can run several calls at once on one thread while the person changes grants.

use std::cell::{Ref, RefCell, RefMut};
use std::fmt;
use std::rc::Rc;

use rand_core::CryptoRng;
use sealpost_protocol::content::{CancelReason, Catalog, CatalogEntry, RefusalCode, ToolCall};
use sealpost_seal::{
    CallId, ENVELOPE_OVERHEAD, Header, MAX_REPLY_ENVELOPE_BYTES, PairingSecret, SealError,
    SessionId, SessionKeys, seal_reply,
};
use sealpost_time::UnixMillis;

use crate::audit::{AuditOutcome, AuditRecord, AuditSink, Delivery, arguments_digest};
use crate::clock::{Clock, Stage};
use crate::dispatch::{Decision, refusal};
use crate::grants::{Grants, GrantsHandle};
use crate::proposals::Proposals;
use crate::registry::{HostTool, RegisteredTool, Registry, RegistryError, ToolSpec};
use crate::session::Session;
use crate::workspace::Workspace;

/// Largest reply plaintext that still fits a reply envelope.
pub const MAX_REPLY_PLAINTEXT_BYTES: usize = MAX_REPLY_ENVELOPE_BYTES - ENVELOPE_OVERHEAD;

/// What the browser does with a claimed call. Its audit record is not written yet: the shell
/// sends the answer, then hands the outcome to [`Executor::settle`] with what the relay did.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "settle the outcome once its answer is sent, or the call leaves no audit record"]
pub enum Outcome {
    /// Post this sealed reply (a result or a refusal: the relay cannot tell which).
    Reply {
        /// The call it answers.
        call_id: CallId,
        /// The sealed reply, to post as it is.
        envelope: Vec<u8>,
        /// The record to write once the reply's fate is known.
        audit: AuditRecord,
        /// What seals a short refusal in the reply's place ([`Outcome::refuse_as_too_large`]).
        resealer: Resealer,
    },
    /// Cancel the call with this reason; there is nothing to seal an answer with.
    Cancel {
        /// The call, when its header could be read.
        call_id: Option<CallId>,
        /// What to tell the relay, and through it the plugin.
        reason: CancelReason,
        /// The record to write once the cancel's fate is known.
        audit: AuditRecord,
    },
}

/// The opened call's keys and header, kept with its reply so that a short refusal can be
/// sealed in the reply's place when the relay will not hold the reply.
#[derive(Clone)]
pub struct Resealer {
    keys: SessionKeys,
    header: Header,
}

impl fmt::Debug for Resealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resealer").finish_non_exhaustive()
    }
}

impl PartialEq for Resealer {
    /// Equal when they answer the same call (keys are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header
    }
}

impl Outcome {
    /// The audit record this outcome will write.
    pub fn audit(&self) -> &AuditRecord {
        match self {
            Self::Reply { audit, .. } | Self::Cancel { audit, .. } => audit,
        }
    }

    /// Replaces a reply the relay would not hold (the account's bytes quota is full) with a
    /// short sealed `too_large` refusal, so the agent is told rather than left waiting. Returns
    /// false when there is nothing to replace (a cancel, or a reply already replaced).
    pub fn refuse_as_too_large(
        &mut self,
        clock: &impl Clock,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> bool {
        let Self::Reply {
            envelope,
            audit,
            resealer,
            ..
        } = self
        else {
            return false;
        };
        if audit.outcome
            == (AuditOutcome::Refused {
                code: RefusalCode::TooLarge,
            })
        {
            return false;
        }
        let refused = refusal(
            RefusalCode::TooLarge,
            format!(
                "The answer ({} bytes sealed) is more than the relay will hold for this account \
                 now: earlier answers still wait to be read. Ask for less, or try again shortly.",
                envelope.len()
            ),
        );
        let plaintext = serde_json::to_vec(&refused.reply).expect("a reply serialises");
        *envelope = seal_reply(
            &resealer.keys,
            &resealer.header,
            &plaintext,
            clock.now_ms(),
            rng,
        )
        .expect("a short refusal to an opened call seals");
        audit.outcome = refused.outcome;
        audit.reply_bytes = envelope.len();
        true
    }
}

/// Why a session could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The expiry given is not after the start.
    #[error("a session must expire after it is created")]
    BadTimes,
    /// The catalog would not fit, or could not be sealed, in a hello.
    #[error("the catalog could not be sealed into the hello: {0}")]
    Seal(#[from] SealError),
}

/// The browser's trusted core.
pub struct Executor {
    pub(crate) session: RefCell<Option<Session>>,
    pub(crate) registry: RefCell<Registry>,
    pub(crate) workspace: RefCell<Workspace>,
    pub(crate) proposals: RefCell<Proposals>,
    pub(crate) grants: GrantsHandle,
    pub(crate) audit: Rc<dyn AuditSink>,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("session_live", &self.session.borrow().is_some())
            .field("workspace", &self.workspace.borrow())
            .field("pending_proposals", &self.proposals.borrow().len())
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor over `workspace` with the built-in tools registered and no session.
    pub fn new(workspace: Workspace, grants: GrantsHandle, audit: Rc<dyn AuditSink>) -> Self {
        Self {
            session: RefCell::new(None),
            registry: RefCell::new(Registry::new()),
            workspace: RefCell::new(workspace),
            proposals: RefCell::new(Proposals::default()),
            grants,
            audit,
        }
    }

    /// Registers a host tool. Register before starting a session so the catalog lists it.
    pub fn register_tool(
        &self,
        spec: ToolSpec,
        handler: Rc<dyn HostTool>,
    ) -> Result<(), RegistryError> {
        self.registry.borrow_mut().register(spec, handler)
    }

    /// Removes a host tool, returning whether one was removed; built-ins stay (grants switch
    /// them off).
    pub fn unregister_tool(&self, name: &str) -> bool {
        self.registry.borrow_mut().unregister(name)
    }

    /// The catalog a session offers now: the registered tools the grants allow, in a stable
    /// order.
    pub fn catalog(&self) -> Catalog {
        let registry = self.registry.borrow();
        self.grants
            .read(|grants| registry.catalog(|tool| granted(grants, tool)))
    }

    /// Every registered tool with what the person's picker shows of it: where it comes from and
    /// whether it is granted now (a grant of a tool since registered differently is not).
    pub fn tool_list(&self) -> Vec<ListedTool> {
        let registry = self.registry.borrow();
        self.grants.read(|grants| {
            registry
                .tools()
                .map(|tool| ListedTool {
                    entry: tool.entry.clone(),
                    from_page: tool.from_page,
                    granted: granted(grants, tool),
                    changed_since_grant: grants.tools.contains(&tool.entry.name)
                        && !granted(grants, tool),
                })
                .collect()
        })
    }

    /// Sets the grants, binding each newly granted host tool to the tool as registered now.
    /// A pin given (grants restored from storage) is kept, and so is the current pin of a tool
    /// not registered at the moment (a page that has not registered it again yet); a host tool
    /// granted by name before any tool has that name stays ungranted, since nothing says which
    /// tool the person meant.
    pub fn set_grants(&self, mut grants: Grants) {
        let registry = self.registry.borrow();
        let current = self.grants.snapshot();
        grants.pins.retain(|name, _| grants.tools.contains(name));
        for name in &grants.tools {
            if grants.pins.contains_key(name) {
                continue;
            }
            let pin = match registry.get(name) {
                Some(tool) if tool.is_builtin() => None,
                Some(tool) => Some(tool.digest.clone()),
                None => current.pins.get(name).cloned(),
            };
            if let Some(pin) = pin {
                grants.pins.insert(name.clone(), pin);
            }
        }
        self.grants.set(grants);
    }

    /// The grants as the host stores and shows them: a grant of a host tool that was since
    /// registered differently is dropped (the person grants the new one afresh).
    pub fn current_grants(&self) -> Grants {
        let registry = self.registry.borrow();
        let mut grants = self.grants.snapshot();
        let stale: Vec<String> = registry
            .tools()
            .filter(|tool| grants.tools.contains(&tool.entry.name) && !granted(&grants, tool))
            .map(|tool| tool.entry.name.clone())
            .collect();
        for name in stale {
            grants.tools.remove(&name);
            grants.pins.remove(&name);
        }
        grants
    }

    /// Whether the grants allow `name` as it is registered now (access aside).
    pub(crate) fn tool_granted(&self, name: &str) -> bool {
        let registry = self.registry.borrow();
        registry
            .get(name)
            .is_some_and(|tool| self.grants.read(|grants| granted(grants, tool)))
    }

    /// The workspace, for the host's own reading (browsing, review diffs).
    pub fn workspace(&self) -> Ref<'_, Workspace> {
        self.workspace.borrow()
    }

    /// The workspace, for the host's own edits and imports (the person's, not a session's).
    pub fn workspace_mut(&self) -> RefMut<'_, Workspace> {
        self.workspace.borrow_mut()
    }

    /// The shared handle the executor reads at every decision.
    pub fn grants(&self) -> &GrantsHandle {
        &self.grants
    }

    /// Starts a session for `pairing`, ending any previous one, and returns the hello to
    /// publish. The hello carries the current catalog.
    pub fn start_session(
        &self,
        pairing: &PairingSecret,
        session_id: SessionId,
        created_at_ms: UnixMillis,
        expires_at_ms: UnixMillis,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Vec<u8>, SessionError> {
        if expires_at_ms <= created_at_ms {
            return Err(SessionError::BadTimes);
        }
        let catalog = serde_json::to_vec(&self.catalog()).expect("a catalog serialises");
        let session = Session::start(
            pairing,
            session_id,
            created_at_ms,
            expires_at_ms,
            &catalog,
            rng,
        )?;
        let hello = session.hello().to_vec();
        *self.session.borrow_mut() = Some(session);
        Ok(hello)
    }

    /// The live session's next catalog update, when the tools it offers (registered tools,
    /// and grants) changed since the hello or the last update: publish it so the paired
    /// plugin lists the change without a new session. `None` when nothing changed or no
    /// session is live.
    pub fn catalog_update(
        &self,
        now_ms: UnixMillis,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let catalog = serde_json::to_vec(&self.catalog()).expect("a catalog serialises");
        match self.session.borrow_mut().as_mut() {
            Some(session) => Ok(session.catalog_update(&catalog, now_ms, rng)?),
            None => Ok(None),
        }
    }

    /// Ends the session: its ephemeral secret and derived keys are dropped (and zeroized), and
    /// every later envelope is cancelled as `session_ended`.
    pub fn end_session(&self) {
        self.session.borrow_mut().take();
    }

    /// The live session's id, if any.
    pub fn session_id(&self) -> Option<SessionId> {
        self.session.borrow().as_ref().map(|s| *s.session_id())
    }

    /// The live session's hello, if any (to publish again after a relay restart).
    pub fn hello(&self) -> Option<Vec<u8>> {
        self.session.borrow().as_ref().map(|s| s.hello().to_vec())
    }

    /// Answers one claimed envelope: open, refuse or run, seal. Never panics on what the relay
    /// sends, never spawns, and holds no borrow across the tool's await. The outcome's audit
    /// record is written by [`Executor::settle`], once the shell has sent the answer.
    pub async fn handle(
        &self,
        envelope: &[u8],
        clock: &impl Clock,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Outcome {
        let opened = match self.session.borrow_mut().as_mut() {
            None => Err((None, CancelReason::SessionEnded)),
            Some(session) => session
                .open(envelope, clock.now_ms())
                .map_err(|rejected| (rejected.call_id, rejected.reason)),
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err((call_id, reason)) => return self.cancel(call_id, None, reason, clock),
        };
        clock.mark(Stage::Opened);
        let call_id = *opened.header.call_id();
        let (decision, call) = match serde_json::from_slice::<ToolCall>(&opened.plaintext) {
            Ok(call) => (self.execute(&call, clock, rng).await, Some(call)),
            Err(_) => (
                refusal(
                    RefusalCode::BadArguments,
                    "The call is not a tool call this tab understands (expected {\"name\", \
                     \"arguments\"}).",
                ),
                None,
            ),
        };

        // Time passed and the person may have acted while the tool ran.
        let session_still_live = {
            let mut session = self.session.borrow_mut();
            match session.as_mut() {
                Some(session) if session.session_id() == opened.header.session_id() => {
                    if session.is_over(clock.now_ms()) {
                        Err(CancelReason::SessionEnded)
                    } else if session.call_expired(opened.header.expires_at_ms(), clock.now_ms()) {
                        Err(CancelReason::Expired)
                    } else {
                        Ok(())
                    }
                }
                _ => Err(CancelReason::SessionEnded),
            }
        };
        if let Err(reason) = session_still_live {
            return self.cancel(Some(call_id), call.as_ref(), reason, clock);
        }

        clock.mark(Stage::Ran);
        let (outcome, plaintext) = bounded(decision);
        let envelope = seal_reply(
            &opened.keys,
            &opened.header,
            &plaintext,
            clock.now_ms(),
            rng,
        )
        .expect("a bounded reply to an opened call seals");
        clock.mark(Stage::Sealed);
        let audit = AuditRecord {
            at_ms: clock.now_ms(),
            call_id: Some(call_id),
            tool: call.as_ref().map(|c| c.name.clone()),
            arguments_digest: call.as_ref().map(|c| arguments_digest(&c.arguments)),
            outcome,
            reply_bytes: envelope.len(),
            delivery: None,
        };
        Outcome::Reply {
            call_id,
            envelope,
            audit,
            resealer: Resealer {
                keys: opened.keys,
                header: opened.header,
            },
        }
    }

    /// Writes a call's audit record with what became of its answer: the person's Activity says
    /// "answered" only for a reply the relay accepted.
    pub fn settle(&self, outcome: &Outcome, delivery: Delivery) {
        let mut audit = outcome.audit().clone();
        audit.delivery = Some(delivery);
        self.audit.record(&audit);
    }

    fn cancel(
        &self,
        call_id: Option<CallId>,
        call: Option<&ToolCall>,
        reason: CancelReason,
        clock: &impl Clock,
    ) -> Outcome {
        let audit = AuditRecord {
            at_ms: clock.now_ms(),
            call_id,
            tool: call.map(|c| c.name.clone()),
            arguments_digest: call.map(|c| arguments_digest(&c.arguments)),
            outcome: AuditOutcome::Cancelled { reason },
            reply_bytes: 0,
            delivery: None,
        };
        Outcome::Cancel {
            call_id,
            reason,
            audit,
        }
    }
}

/// The reply's plaintext, or a `too_large` refusal's when the reply would not fit a reply
/// envelope.
/// A tool is granted when its name is, and a host tool only as the tool that was granted.
pub(crate) fn granted(grants: &Grants, tool: &RegisteredTool) -> bool {
    grants.tools.contains(&tool.entry.name)
        && (tool.is_builtin() || grants.pins.get(&tool.entry.name) == Some(&tool.digest))
}

/// One tool as the person's picker shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    /// Name, description, schema and kind, as a session's catalog would list it.
    pub entry: CatalogEntry,
    /// Registered by page script through WebMCP.
    pub from_page: bool,
    /// Offered to a session now (access aside).
    pub granted: bool,
    /// Granted once, but registered since with other text, schema or hints.
    pub changed_since_grant: bool,
}

fn bounded(decision: Decision) -> (AuditOutcome, Vec<u8>) {
    let plaintext = serde_json::to_vec(&decision.reply).expect("a reply serialises");
    if plaintext.len() <= MAX_REPLY_PLAINTEXT_BYTES {
        return (decision.outcome, plaintext);
    }
    let refused = refusal(
        RefusalCode::TooLarge,
        format!(
            "The result is {} bytes, more than the {MAX_REPLY_PLAINTEXT_BYTES} a reply can \
             carry. Ask for less (a smaller limit or max_chars).",
            plaintext.len()
        ),
    );
    let plaintext = serde_json::to_vec(&refused.reply).expect("a reply serialises");
    (refused.outcome, plaintext)
}
