//! `TabCore`, exported to JavaScript: one executor, its pairing, its session and its claim loop.
//!
//! Everything that decides is in `sealpost-executor`; this moves bytes. Methods that talk to
//! the relay return promises; the rest answer at once. Events (each audit record, each change
//! of serving state) go to the function given to `onEvent`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sealpost_executor::{
    Applied, AuditRecord, AuditSink, Executor, Grants, GrantsHandle, MemoryAuditLog, Proposal,
    ToolSpec, Workspace,
};
use sealpost_protocol::api::{CreateMcpTokenRequest, CreateSessionRequest};
use sealpost_protocol::content::ToolKind;
use sealpost_protocol::ids::{Base64Bytes, ProposalId, SessionId, TokenId};
use sealpost_seal::{PairingCode, PairingSecret, RelayOrigin};
use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortController;

use crate::channel::Channel;
use crate::host_tool::JsTool;
use crate::relay::{Relay, RelayError};
use crate::stop::StopReason;

pub(crate) fn now_ms() -> UnixMillis {
    UnixMillis::from_ms(js_sys::Date::now() as u64)
}

pub(crate) fn to_js<T: Serialize>(value: &T) -> JsValue {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .unwrap_or(JsValue::NULL)
}

pub(crate) fn from_js<T: for<'de> Deserialize<'de>>(
    value: JsValue,
    what: &str,
) -> Result<T, JsError> {
    serde_wasm_bindgen::from_value(value).map_err(|e| JsError::new(&format!("{what}: {e}")))
}

fn relay_error(error: RelayError) -> JsValue {
    JsError::new(&error.describe()).into()
}

/// The pairing this tab holds: the secret, and the MCP token minted for it.
struct Pairing {
    secret: PairingSecret,
    token_id: TokenId,
    mcp_token: String,
}

/// A pairing as the page persists it (encrypted, by `worker.js`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredPairing {
    secret: String,
    token_id: TokenId,
    mcp_token: String,
}

/// The callback events go to; shared with the audit sink.
pub(crate) type Listener = Rc<RefCell<Option<js_sys::Function>>>;

pub(crate) fn emit(listener: &Listener, event: &Value) {
    if let Some(callback) = listener.borrow().as_ref() {
        let _ = callback.call1(&JsValue::NULL, &to_js(event));
    }
}

/// Keeps records in memory and hands each to the page (which stores it encrypted).
struct EventAudit {
    log: MemoryAuditLog,
    listener: Listener,
}

impl AuditSink for EventAudit {
    fn record(&self, record: &AuditRecord) {
        self.log.record(record);
        emit(&self.listener, &json!({"type": "audit", "record": record}));
    }
}

/// How a pairing's MCP token is listed on the Tokens page: it is the plugin's, not the tab's.
const DEFAULT_PAIRING_LABEL: &str = "The sealpost plugin, paired from a browser tab";

pub(crate) struct Inner {
    origin: String,
    pub(crate) relay: RefCell<Relay>,
    pub(crate) executor: Executor,
    audit: MemoryAuditLog,
    pub(crate) listener: Listener,
    pairing: RefCell<Option<Pairing>>,
    pub(crate) session: Cell<Option<(SessionId, UnixMillis)>>,
    /// A new session is being made at the relay (`start_session`).
    pub(crate) session_starting: Cell<bool>,
    pub(crate) serving: RefCell<Option<AbortController>>,
    pub(crate) stop: Cell<Option<StopReason>>,
    /// The session channel, while one is open.
    pub(crate) channel: RefCell<Option<Rc<Channel>>>,
    /// When the loop may next try to open the channel (`Date.now()` ms).
    pub(crate) channel_retry_at: Cell<f64>,
    /// The transport last reported to the page (`true`: the channel).
    pub(crate) on_channel: Cell<Option<bool>>,
    /// A catalog update the relay has not taken yet (`catalog.rs`).
    pub(crate) catalog_unpublished: RefCell<Option<Vec<u8>>>,
}

/// The tab's trusted core, as JavaScript holds it.
#[wasm_bindgen]
pub struct TabCore {
    pub(crate) inner: Rc<Inner>,
}

impl std::fmt::Debug for TabCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TabCore")
            .field("session", &self.inner.session.get().map(|(id, _)| id))
            .finish_non_exhaustive()
    }
}

/// A host tool's description, as JavaScript gives it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JsToolSpec {
    name: String,
    description: String,
    input_schema: Value,
    kind: ToolKind,
    #[serde(default)]
    annotations: Option<Value>,
    /// Registered through the page's WebMCP API (the module's bridge sets it).
    #[serde(default)]
    from_page: bool,
}

#[wasm_bindgen]
impl TabCore {
    /// A core talking to the relay at `relay_origin` (the origin people open, which the
    /// pairing code carries) with the signed-in person's owner token.
    #[wasm_bindgen(constructor)]
    pub fn new(relay_origin: String, owner_token: String) -> TabCore {
        let listener: Listener = Rc::default();
        let audit = MemoryAuditLog::new();
        let sink = Rc::new(EventAudit {
            log: audit.clone(),
            listener: listener.clone(),
        });
        let executor = Executor::new(
            Workspace::default(),
            GrantsHandle::new(Grants::default()),
            sink,
        );
        TabCore {
            inner: Rc::new(Inner {
                relay: RefCell::new(Relay::new(&relay_origin, &owner_token)),
                origin: relay_origin,
                executor,
                audit,
                listener,
                pairing: RefCell::new(None),
                session: Cell::new(None),
                session_starting: Cell::new(false),
                serving: RefCell::new(None),
                stop: Cell::new(None),
                channel: RefCell::new(None),
                channel_retry_at: Cell::new(0.0),
                on_channel: Cell::new(None),
                catalog_unpublished: RefCell::new(None),
            }),
        }
    }

    /// Where events go: `{type: "audit", record}`, `{type: "serving"}`, `{type: "ready",
    /// sessionId}` (the relay has seen the tab claim: calls are served from now on),
    /// `{type: "claimed", count}`, `{type: "retrying", delayMs, error}`, `{type:
    /// "retrying_answer", delayMs, error}`, `{type: "stopped", reason}`.
    #[wasm_bindgen(js_name = onEvent)]
    pub fn on_event(&self, callback: js_sys::Function) {
        *self.inner.listener.borrow_mut() = Some(callback);
    }

    /// Replaces the grants `{access: "on"|"off", sources: [...], tools: [...]}`. Applies to
    /// the next call, including calls already claimed; a live session's tool list follows at
    /// once (a catalog update).
    #[wasm_bindgen(js_name = setGrants)]
    pub fn set_grants(&self, grants: JsValue) -> Result<(), JsError> {
        let grants: Grants = from_js(grants, "grants")?;
        self.inner.executor.set_grants(grants);
        self.catalog_may_have_changed();
        Ok(())
    }

    /// The current grants, as the host stores them (`pins` binds each granted host tool to
    /// the tool as registered when granted; pass them back unchanged).
    pub fn grants(&self) -> JsValue {
        to_js(&self.inner.executor.current_grants())
    }

    /// Registers a host tool `{name, description, inputSchema, kind: "read"|"proposal"}` run by
    /// `handler(arguments)`. A live session's tool list follows once the tool is granted.
    #[wasm_bindgen(js_name = registerTool)]
    pub fn register_tool(&self, spec: JsValue, handler: js_sys::Function) -> Result<(), JsError> {
        let spec: JsToolSpec = from_js(spec, "a tool")?;
        self.inner
            .executor
            .register_tool(
                ToolSpec {
                    annotations: spec.annotations,
                    from_page: spec.from_page,
                    ..ToolSpec::new(spec.name, spec.description, spec.input_schema, spec.kind)
                },
                Rc::new(JsTool::new(handler)),
            )
            .map_err(|e| JsError::new(&e.to_string()))?;
        self.catalog_may_have_changed();
        Ok(())
    }

    /// Removes a host tool (a page withdrew it). A live session's tool list follows.
    #[wasm_bindgen(js_name = unregisterTool)]
    pub fn unregister_tool(&self, name: &str) -> bool {
        let removed = self.inner.executor.unregister_tool(name);
        if removed {
            self.catalog_may_have_changed();
        }
        removed
    }

    /// Every tool the executor knows, granted or not: `[{name, description, kind, builtin,
    /// source: "builtin"|"app"|"page", granted, changedSinceGrant}]`.
    #[wasm_bindgen(js_name = allTools)]
    pub fn all_tools(&self) -> JsValue {
        let list: Vec<Value> = self
            .inner
            .executor
            .tool_list()
            .iter()
            .map(|t| {
                let source = match (t.entry.builtin, t.from_page) {
                    (true, _) => "builtin",
                    (false, true) => "page",
                    (false, false) => "app",
                };
                json!({
                    "name": t.entry.name, "description": t.entry.description, "kind": t.entry.kind,
                    "builtin": t.entry.builtin, "source": source, "granted": t.granted,
                    "changedSinceGrant": t.changed_since_grant,
                })
            })
            .collect();
        to_js(&list)
    }

    /// The pairing, without its secrets: `{pairId, tokenId, fingerprint, pairingCode}` or
    /// `null`.
    pub fn pairing(&self) -> JsValue {
        self.shown_pairing()
            .map_or(JsValue::NULL, |shown| to_js(&shown))
    }

    fn shown_pairing(&self) -> Option<Value> {
        let pairing = self.inner.pairing.borrow();
        let pairing = pairing.as_ref()?;
        // A page served from an origin no plugin would accept has no fingerprint and no code.
        let origin = RelayOrigin::parse(&self.inner.origin).ok();
        Some(json!({
            "pairId": pairing.secret.pair_id().to_string(),
            "tokenId": pairing.token_id.to_string(),
            "fingerprint": origin.as_ref().map(|origin| pairing.secret.fingerprint(origin)),
            "pairingCode": origin.and_then(|origin| Self::pairing_code(origin, pairing)),
        }))
    }

    fn pairing_code(origin: RelayOrigin, pairing: &Pairing) -> Option<String> {
        let secret = PairingSecret::from_bytes(*pairing.secret.expose());
        PairingCode::new(origin, pairing.mcp_token.clone(), secret)
            .ok()
            .map(|code| code.encode().to_string())
    }

    /// The pairing's secrets as text, for the page to keep encrypted; `null` when unpaired.
    #[wasm_bindgen(js_name = exportPairing)]
    pub fn export_pairing(&self) -> Option<String> {
        let pairing = self.inner.pairing.borrow();
        let pairing = pairing.as_ref()?;
        serde_json::to_string(&StoredPairing {
            secret: URL_SAFE_NO_PAD.encode(pairing.secret.expose()),
            token_id: pairing.token_id,
            mcp_token: pairing.mcp_token.clone(),
        })
        .ok()
    }

    /// Restores a pairing [`TabCore::export_pairing`] gave. A damaged one is refused (and the
    /// tab stays unpaired: a new pairing costs a `sealpost pair`, trusting junk costs more).
    #[wasm_bindgen(js_name = importPairing)]
    pub fn import_pairing(&self, text: &str) -> Result<(), JsError> {
        let stored: StoredPairing = serde_json::from_str(text)
            .map_err(|_| JsError::new("the remembered pairing is damaged"))?;
        let secret: [u8; 32] = URL_SAFE_NO_PAD
            .decode(&stored.secret)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| JsError::new("the remembered pairing is damaged"))?;
        *self.inner.pairing.borrow_mut() = Some(Pairing {
            secret: PairingSecret::from_bytes(secret),
            token_id: stored.token_id,
            mcp_token: stored.mcp_token,
        });
        Ok(())
    }

    /// Makes a new pairing (a fresh secret and an MCP token for it), replacing any other.
    /// Resolves to what [`TabCore::pairing`] shows.
    #[wasm_bindgen(js_name = newPairing)]
    pub fn new_pairing(&self, label: String) -> js_sys::Promise {
        let core = self.clone_handle();
        future_to_promise(async move {
            core.mint_pairing(label).await?;
            Ok(core.pairing())
        })
    }

    async fn mint_pairing(&self, label: String) -> Result<(), JsValue> {
        let secret = PairingSecret::generate(&mut rand::rng());
        let pair_id = secret.pair_id();
        let relay = self.inner.relay.borrow().clone();
        let token = relay
            .create_mcp_token(&CreateMcpTokenRequest {
                label,
                pair_id,
                ttl_s: None,
            })
            .await
            .map_err(relay_error)?;
        *self.inner.pairing.borrow_mut() = Some(Pairing {
            secret,
            token_id: token.id,
            mcp_token: token.token,
        });
        Ok(())
    }

    /// Unpairs: ends the session, revokes the MCP token, forgets the pairing.
    pub fn unpair(&self) -> js_sys::Promise {
        let core = self.clone_handle();
        future_to_promise(async move {
            core.request_stop(StopReason::SessionEnded);
            core.end(false).await;
            let token = core.inner.pairing.borrow_mut().take().map(|p| p.token_id);
            if let Some(token) = token {
                let relay = core.inner.relay.borrow().clone();
                relay.revoke_mcp_token(token).await.map_err(relay_error)?;
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Starts a session of `ttl_s` seconds on the pairing (made first when there is none);
    /// ends any previous one. Resolves to `{sessionId, expiresAt, pairingCode, fingerprint}`.
    #[wasm_bindgen(js_name = startSession)]
    pub fn start_session(&self, ttl_s: u32) -> js_sys::Promise {
        let core = self.clone_handle();
        future_to_promise(async move {
            if core.inner.pairing.borrow().is_none() {
                core.mint_pairing(DEFAULT_PAIRING_LABEL.into()).await?;
            }
            let session_id = SessionId::from_bytes(rand::random());
            let created = now_ms();
            let expires = created.saturating_add_ms(u64::from(ttl_s) * 1000);
            let (hello, pair_id) = {
                let pairing = core.inner.pairing.borrow();
                let pairing = pairing.as_ref().expect("made above");
                let hello = core
                    .inner
                    .executor
                    .start_session(
                        &pairing.secret,
                        session_id,
                        created,
                        expires,
                        &mut rand::rng(),
                    )
                    .map_err(|e| JsError::new(&e.to_string()))?;
                (hello, pairing.secret.pair_id())
            };
            // Until the relay has made it, a claim loop serving the previous session waits
            // rather than stop when that session ends under it (`claim_loop.rs`).
            core.inner.session_starting.set(true);
            let relay = core.inner.relay.borrow().clone();
            let created_on_relay = relay
                .create_session(&CreateSessionRequest {
                    session_id,
                    pair_id,
                    hello: Base64Bytes(hello),
                    ttl_s: u64::from(ttl_s),
                })
                .await;
            core.inner.session_starting.set(false);
            let created_on_relay = created_on_relay.map_err(|error| {
                // Neither session is served now: the executor holds the new one's keys.
                core.inner.session.set(None);
                core.inner.executor.end_session();
                relay_error(error)
            })?;
            // The earlier of the relay's and the hello's end: the plugin judges by the hello.
            let expires_at = created_on_relay.expires_at.min(expires);
            core.inner.session.set(Some((session_id, expires_at)));
            core.inner.stop.set(None);
            let shown = core.shown_pairing().unwrap_or_default();
            let result = json!({
                "sessionId": session_id.to_string(),
                "expiresAt": expires_at,
                "pairingCode": shown["pairingCode"],
                "fingerprint": shown["fingerprint"],
            });
            Ok(to_js(&result))
        })
    }

    /// The live session `{sessionId, expiresAt}`, or `null`.
    pub fn session(&self) -> JsValue {
        match self.inner.session.get() {
            Some((id, expires)) => {
                to_js(&json!({"sessionId": id.to_string(), "expiresAt": expires}))
            }
            None => JsValue::NULL,
        }
    }

    /// What the relay knows of the live session: `{tabSeenAgoMs, pluginSeenAgoMs, expiresAt}`,
    /// each "ago" measured on the relay's clock (`null`: never seen), or `null` when the
    /// relay has no live session for the pairing.
    #[wasm_bindgen(js_name = liveStatus)]
    pub fn live_status(&self) -> js_sys::Promise {
        let core = self.clone_handle();
        future_to_promise(async move {
            let pair_id = match core.inner.pairing.borrow().as_ref() {
                Some(pairing) => pairing.secret.pair_id(),
                None => return Ok(JsValue::NULL),
            };
            let relay = core.inner.relay.borrow().clone();
            let Some(live) = relay.live_session(pair_id).await.map_err(relay_error)? else {
                return Ok(JsValue::NULL);
            };
            let ago = |seen: Option<UnixMillis>| seen.map(|at| live.now_ms.saturating_sub(at));
            Ok(to_js(&json!({
                "tabSeenAgoMs": ago(live.claimer_seen_at),
                "pluginSeenAgoMs": ago(live.plugin_seen_at),
                "expiresAt": live.expires_at,
            })))
        })
    }

    /// Ends the session: the relay cancels its open calls, the keys are dropped. With
    /// `keepalive`, the request outlives the page (for `pagehide`).
    #[wasm_bindgen(js_name = endSession)]
    pub fn end_session(&self, keepalive: bool) -> js_sys::Promise {
        let core = self.clone_handle();
        future_to_promise(async move {
            // A stop already asked for (a lock, a sign-out) keeps its reason.
            if core.inner.stop.get().is_none() {
                core.request_stop(StopReason::SessionEnded);
            }
            core.end(keepalive).await;
            Ok(JsValue::UNDEFINED)
        })
    }

    async fn end(&self, keepalive: bool) {
        self.inner.executor.end_session();
        if let Some((session_id, _)) = self.inner.session.take() {
            let relay = self.inner.relay.borrow().clone();
            if let Err(error) = relay.end_session(session_id, keepalive).await {
                emit(
                    &self.inner.listener,
                    &json!({"type": "warning", "message": format!("ending the session: {}", error.describe())}),
                );
            }
        }
    }

    /// Stops the claim loop at once: `locked` (also drops the session's keys), `signed_out`,
    /// `session_ended`, `taken_over`.
    pub fn stop(&self, reason: &str) -> Result<(), JsError> {
        let reason = StopReason::requested(reason)
            .ok_or_else(|| JsError::new(&format!("unknown stop reason {reason:?}")))?;
        self.request_stop(reason);
        if reason == StopReason::Locked {
            self.inner.executor.end_session();
        }
        Ok(())
    }

    fn request_stop(&self, reason: StopReason) {
        self.inner.stop.set(Some(reason));
        if let Some(controller) = self.inner.serving.borrow().as_ref() {
            controller.abort();
        }
        // A claim waiting on the channel ends with it, and the relay drops it unclaimed.
        self.close_channel();
    }

    /// Proposals waiting for review.
    #[wasm_bindgen(js_name = pendingProposals)]
    pub fn pending_proposals(&self) -> JsValue {
        to_js(&self.inner.executor.pending_proposals())
    }

    /// Restores proposals the page kept (encrypted) across a reload.
    #[wasm_bindgen(js_name = restoreProposals)]
    pub fn restore_proposals(&self, proposals: JsValue) -> Result<(), JsError> {
        let proposals: Vec<Proposal> = from_js(proposals, "proposals")?;
        self.inner.executor.restore_proposals(proposals);
        Ok(())
    }

    /// Applies a proposal through the typed write: `{docId}` of the document written, or
    /// `{hostTool: {tool, arguments}}` for the host to carry out.
    #[wasm_bindgen(js_name = applyProposal)]
    pub fn apply_proposal(&self, id: &str) -> Result<JsValue, JsError> {
        let id: ProposalId = id.parse().map_err(|_| JsError::new("not a proposal id"))?;
        let applied = self
            .inner
            .executor
            .apply_proposal(id, now_ms())
            .map_err(|e| JsError::new(&e.to_string()))?;
        Ok(to_js(&match applied {
            Applied::DocumentWritten { doc_id } => json!({"docId": doc_id.as_str()}),
            Applied::HostTool { tool, arguments } => {
                json!({"hostTool": {"tool": tool, "arguments": arguments}})
            }
        }))
    }

    /// Rejects a proposal.
    #[wasm_bindgen(js_name = rejectProposal)]
    pub fn reject_proposal(&self, id: &str) -> Result<(), JsError> {
        let id: ProposalId = id.parse().map_err(|_| JsError::new("not a proposal id"))?;
        self.inner
            .executor
            .reject_proposal(id, now_ms())
            .map_err(|e| JsError::new(&e.to_string()))
    }

    /// The audit records of this page's lifetime (the page keeps older ones).
    pub fn audit(&self) -> JsValue {
        to_js(&self.inner.audit.records())
    }

    /// Replaces the owner token (after a renewal or a new sign-in).
    #[wasm_bindgen(js_name = setOwnerToken)]
    pub fn set_owner_token(&self, token: &str) {
        *self.inner.relay.borrow_mut() = Relay::new(&self.inner.origin, token);
        // The channel was opened with the old token: the loop opens the next with this one.
        self.close_channel();
        self.inner.channel_retry_at.set(0.0);
    }

    pub(crate) fn clone_handle(&self) -> TabCore {
        TabCore {
            inner: self.inner.clone(),
        }
    }
}
