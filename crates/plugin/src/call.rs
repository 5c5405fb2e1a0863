//! One tool call, as docs/PLUGIN.md ("A call") puts it: find and trust the live session (or
//! reuse the one just trusted while nothing could have changed unseen), seal
//! the call with an expiry no later than the session's, post it, long-poll for the answer
//! (progress while waiting, cancellation honoured, an absent tab answered at once), open and
//! fence the reply.

use std::future::Future;
use std::time::{Duration, Instant};

use sealpost_protocol::api::{CallState, LiveSessionResponse, PostCallRequest};
use sealpost_protocol::content::{CancelReason, Reply, ToolCall};
use sealpost_protocol::ids::{Base64Bytes, CallId};
use sealpost_protocol::limits::MAX_CALL_ENVELOPE_BYTES;
use sealpost_seal::{ENVELOPE_OVERHEAD, PairingCode};
use sealpost_time::UnixMillis;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::Plugin;
use crate::fence;
use crate::follow::Followed;
use crate::messages::Failure;
use crate::relay::{RelayClient, RelayError};
use crate::session::TrustedSession;

/// How a call ended, for the MCP layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The tab's answer, fenced; `is_error` when the tool reported a failure of its own;
    /// `structured`, a built-in read tool's structured answer, cleaned (its text is `text`).
    Answered {
        text: String,
        is_error: bool,
        structured: Option<Value>,
    },
    /// The call failed; the sentence says what to do.
    Failed(String),
    /// The MCP client cancelled: nothing more is sent for this request.
    Cancelled,
}

/// Hooks the MCP layer gives a call: progress while waiting, and cancellation.
pub struct Waiting<P> {
    /// Sends one progress notification (called every few seconds while waiting), given how
    /// many rounds the call has waited and the state the relay last reported.
    pub progress: P,
    /// Cancelled when the client cancels the request.
    pub cancelled: CancellationToken,
}

impl<P> std::fmt::Debug for Waiting<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting").finish_non_exhaustive()
    }
}

/// Where one call's time went in the plugin, logged at debug under the target `sealpost::timing`
/// (`cargo xtask bench web` reads it; docs/BROWSER.md has its table).
#[derive(Debug, Default)]
struct Legs {
    /// Session look-ups (none when the session just trusted is reused).
    look_up: Duration,
    /// Sealing the call.
    seal: Duration,
    /// The post, to the relay's answer: it waits for the reply (the tab's work and the relay's)
    /// before it answers, up to the progress interval.
    post: Duration,
    /// From the post's answer to the answer read, when the post's wait did not bring it.
    wait: Duration,
    /// Opening the reply and fencing it.
    open: Duration,
}

fn micros(d: Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

pub(crate) fn local_now_ms() -> UnixMillis {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    UnixMillis::from_ms(ms)
}

impl Plugin {
    /// Runs one call of the tab's tool `name`.
    pub async fn call<P, F>(&self, name: &str, arguments: Value, waiting: Waiting<P>) -> CallOutcome
    where
        P: FnMut(u32, CallState) -> F,
        F: Future<Output = ()>,
    {
        let started = Instant::now();
        let mut legs = Legs::default();
        let outcome = match self.try_call(name, arguments, waiting, &mut legs).await {
            Ok(outcome) => outcome,
            Err(failure) => self.failed(&failure),
        };
        tracing::debug!(
            target: "sealpost::timing",
            tool = name,
            total_us = micros(started.elapsed()),
            look_up_us = micros(legs.look_up),
            seal_us = micros(legs.seal),
            post_us = micros(legs.post),
            wait_us = micros(legs.wait),
            open_us = micros(legs.open),
            "call"
        );
        outcome
    }

    fn failed(&self, failure: &Failure) -> CallOutcome {
        tracing::info!(?failure, "call failed");
        CallOutcome::Failed(failure.sentence())
    }

    /// Looks up the pairing's live session and checks it; refreshes the cached catalog.
    pub(crate) async fn trusted_session(
        &self,
        code: &PairingCode,
        relay: &RelayClient,
    ) -> Result<TrustedSession, Failure> {
        let live = relay
            .live_session(code.secret().pair_id())
            .await
            .inspect_err(|_| self.keys.forget_look_up())?
            .ok_or_else(|| {
                self.keys.forget_look_up();
                Failure::NoSession {
                    origin: code.relay_origin().clone(),
                }
            })?;
        self.trust_live(code, relay, &live)
    }

    /// Checks a live session the relay sent and refreshes the cached catalog from it.
    pub(crate) fn trust_live(
        &self,
        code: &PairingCode,
        relay: &RelayClient,
        live: &LiveSessionResponse,
    ) -> Result<TrustedSession, Failure> {
        let pair_id = code.secret().pair_id();
        let mut session = self
            .keys
            .trust(code.secret(), live, local_now_ms())
            .map_err(|e| Failure::untrusted(relay.host(), &e))
            .inspect_err(|_| self.keys.forget_look_up())?;
        if let Err(error) = self.remember_catalog(pair_id, &mut session) {
            self.keys.forget_look_up();
            return Err(Failure::untrusted(relay.host(), &error));
        }
        self.followed.send_replace(Some(Followed {
            pair_id,
            session: Some((session.session_id, session.catalog_seq)),
        }));
        Ok(session)
    }

    /// The tab's tools as they are now, for `sealpost_call`: the live session looked up afresh,
    /// each tool as `tools/list` would show it (cleaned, attributed), fenced; or the sentence
    /// that says why not.
    pub(crate) async fn current_tools(&self) -> Result<String, String> {
        let listing = async {
            let code = self.pairing()?;
            let relay = RelayClient::new(self.http.clone(), code.relay_origin(), code.mcp_token());
            let session = self.trusted_session(&code, &relay).await?;
            Ok::<_, Failure>((session, code.relay_origin().host().to_owned()))
        };
        let (session, host) = listing.await.map_err(|failure| failure.sentence())?;
        let tools: Vec<Value> = crate::tools::accepted(&session.tools)
            .values()
            .map(|entry| {
                let tool = crate::tools::listed_tool(entry, &host);
                serde_json::json!({
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": tool.input_schema,
                })
            })
            .collect();
        let listed = serde_json::to_string_pretty(&tools).expect("JSON values serialise");
        let source = format!("the list of tools of the Sealpost browser tab served by {host}");
        let fenced = fence::fence(
            &listed,
            &source,
            &fence::nonce(),
            self.options.max_result_chars,
        );
        Ok(format!(
            "The Sealpost tab offers {} tools now. Call one with sealpost_call, giving \
             {{\"tool\": its name, \"arguments\": {{...}}}}.\n\n{fenced}",
            tools.len()
        ))
    }

    /// `Some(seconds since seen)` when the tab has not polled within the configured window.
    pub(crate) fn tab_absent(&self, session: &TrustedSession) -> Option<Option<u64>> {
        let window = self.options.tab_absent_after.as_millis() as u64;
        match session.tab_unseen_ms() {
            Some(unseen) if unseen <= window => None,
            Some(unseen) => Some(Some(unseen / 1000)),
            None => Some(None),
        }
    }

    async fn try_call<P, F>(
        &self,
        name: &str,
        arguments: Value,
        mut waiting: Waiting<P>,
        legs: &mut Legs,
    ) -> Result<CallOutcome, Failure>
    where
        P: FnMut(u32, CallState) -> F,
        F: Future<Output = ()>,
    {
        let started = Instant::now();
        let deadline = started + self.options.call_timeout;
        let code = self.pairing()?;
        let relay = RelayClient::new(self.http.clone(), code.relay_origin(), code.mcp_token());
        let plaintext = serde_json::to_vec(&ToolCall {
            name: name.to_owned(),
            arguments,
        })
        .expect("JSON values serialise");
        if plaintext.len() + ENVELOPE_OVERHEAD > MAX_CALL_ENVELOPE_BYTES {
            return Err(Failure::ArgumentsTooLarge);
        }
        // The call asks the session to last its whole wait and the tab's margin.
        let wanted_ms = self.options.call_timeout.as_millis() as u64 + 5_000;
        // A session reused from an earlier look-up that ended by the post is looked up; one
        // looked up for this call that ended by the post is looked up once more.
        let (mut looked_up, mut may_reuse) = (0, true);
        let (session, call_id, header, mut status) = loop {
            let reused = std::mem::take(&mut may_reuse)
                .then(|| {
                    self.keys.reusable(
                        code.secret().pair_id(),
                        name,
                        self.options.tab_absent_after,
                        wanted_ms,
                        local_now_ms(),
                    )
                })
                .flatten();
            let session = match reused {
                Some(session) => session,
                None => {
                    looked_up += 1;
                    let looking = Instant::now();
                    let session = self.trusted_session(&code, &relay).await;
                    legs.look_up += looking.elapsed();
                    session?
                }
            };
            if !crate::tools::accepted(&session.tools).contains_key(name) {
                return Err(Failure::UnknownTool { name: name.into() });
            }
            if let Some(seen_secs_ago) = self.tab_absent(&session) {
                return Err(Failure::TabNotOpen {
                    origin: code.relay_origin().clone(),
                    seen_secs_ago,
                });
            }
            // Times are the relay's clock, which the tab also judges by (within the skew).
            let now = session.relay_now_ms;
            let wanted = now.saturating_add_ms(wanted_ms);
            let expires_at = wanted.min(session.expires_at_ms);
            if expires_at <= now.saturating_add_ms(1_000) {
                return Err(Failure::NoSession {
                    origin: code.relay_origin().clone(),
                });
            }
            let sealing = Instant::now();
            let call_id = CallId::from_bytes(rand::random());
            let header = session.keys.call_header(call_id, now, expires_at);
            let envelope = session
                .keys
                .seal_call(&header, &plaintext, &mut rand::rng())
                .map_err(|_| Failure::ArgumentsTooLarge)?;
            let request = PostCallRequest {
                call_id,
                envelope: Base64Bytes(envelope),
                ttl_s: expires_at.saturating_sub(now).div_ceil(1000),
            };
            let posting = Instant::now();
            legs.seal += posting - sealing;
            // The post waits for the answer as a read would, so most calls need no read.
            let wait = deadline
                .saturating_duration_since(posting)
                .min(self.options.progress_every);
            let post = async {
                match relay.post_call(session.session_id, &request, wait).await {
                    // The connection was lost, perhaps during the wait with the call stored:
                    // sent once more, it is stored now or answers 409.
                    Err(RelayError::Unreachable { .. }) => {
                        relay.post_call(session.session_id, &request, wait).await
                    }
                    posted => posted,
                }
            };
            let posted = tokio::select! {
                posted = post => posted,
                () = waiting.cancelled.cancelled() => {
                    // The call may or may not be stored: a cancel of a call not there is moot.
                    if let Err(error) = relay.cancel_call(call_id, CancelReason::ClientCancelled).await {
                        tracing::debug!(%error, "cancel not delivered");
                    }
                    return Ok(CallOutcome::Cancelled);
                }
            };
            legs.post += posting.elapsed();
            match posted {
                Ok(posted) => break (session, call_id, header, posted.status),
                // A retry of a post that landed: the call is there, read it.
                Err(RelayError::Duplicate) => break (session, call_id, header, None),
                // The session ended since it was looked up (a new one replaced it, as a
                // tab's reload does): look the live session up again, once.
                Err(RelayError::NotFound | RelayError::Refused { status: 410, .. })
                    if looked_up < 2 =>
                {
                    self.keys.forget_look_up();
                }
                Err(RelayError::NotFound | RelayError::Refused { status: 410, .. }) => {
                    return Err(Failure::Cancelled {
                        reason: CancelReason::SessionEnded,
                    });
                }
                Err(e) => return Err(e.into()),
            }
        };
        tracing::debug!(call = %call_id, tool = name, "call posted");
        let waited = Instant::now();

        let mut polls = 0u32;
        let cancel = |reason| {
            let relay = relay.clone();
            async move {
                if let Err(error) = relay.cancel_call(call_id, reason).await {
                    tracing::debug!(%error, "cancel not delivered");
                }
            }
        };
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                cancel(CancelReason::ClientCancelled).await;
                return Err(Failure::TimedOut {
                    secs: self.options.call_timeout.as_secs(),
                });
            }
            let wait = remaining.min(self.options.progress_every);
            let status = match status.take() {
                // What the post's own wait found.
                Some(status) => Ok(status),
                None => tokio::select! {
                    status = relay.read_call(call_id, wait) => status,
                    () = waiting.cancelled.cancelled() => {
                        cancel(CancelReason::ClientCancelled).await;
                        return Ok(CallOutcome::Cancelled);
                    }
                },
            };
            let status = match status {
                Ok(status) => status,
                Err(RelayError::NotFound) => return Err(Failure::Expired),
                // A lost long-poll, or one refused for a passing reason (a rate, a share of
                // long-polls, a busy relay), is sent again until the deadline: the call is
                // still there, and its answer must not be lost to a limit.
                Err(error) if error.is_transient() => {
                    let pause = error
                        .retry_after()
                        .unwrap_or(Duration::from_millis(200))
                        .min(remaining);
                    tracing::debug!(%error, ?pause, "read refused for now: again after a pause");
                    tokio::time::sleep(pause).await;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            match status.state {
                CallState::Answered | CallState::Delivered => {
                    let opening = Instant::now();
                    legs.wait = opening - waited;
                    let sealed = status.reply.ok_or(Failure::ReplyDoesNotOpen)?;
                    let opened = session
                        .keys
                        .open_reply(&header, &sealed.0)
                        .map_err(|_| Failure::ReplyDoesNotOpen)?;
                    let reply: Reply =
                        serde_json::from_slice(&opened).map_err(|_| Failure::ReplyDoesNotOpen)?;
                    // Only a built-in read tool's answer has a schema a client can check.
                    let structured = session
                        .tools
                        .iter()
                        .any(|t| t.name == name && t.builtin && t.output_schema.is_some());
                    let rendered = self.render(name, reply, relay.host(), structured);
                    legs.open = opening.elapsed();
                    return Ok(rendered);
                }
                CallState::Cancelled => {
                    return Err(Failure::Cancelled {
                        reason: status.reason.unwrap_or(CancelReason::SessionEnded),
                    });
                }
                CallState::Expired => return Err(Failure::Expired),
                // Not answered yet; a state this build does not know (a newer relay's) is
                // waited on the same way, until the call's deadline.
                _ => {
                    polls += 1;
                    if waiting.cancelled.is_cancelled() {
                        cancel(CancelReason::ClientCancelled).await;
                        return Ok(CallOutcome::Cancelled);
                    }
                    (waiting.progress)(polls, status.state).await;
                    if status.state == CallState::Pending {
                        // Still unclaimed: is the tab still there? A look-up refused for a
                        // passing reason leaves the question for the next round.
                        let session = match self.trusted_session(&code, &relay).await {
                            Ok(session) => Some(session),
                            Err(failure) if failure.is_transient() => None,
                            Err(failure) => return Err(failure),
                        };
                        if let Some(seen_secs_ago) =
                            session.and_then(|session| self.tab_absent(&session))
                        {
                            cancel(CancelReason::ClientCancelled).await;
                            return Err(Failure::TabNotOpen {
                                origin: code.relay_origin().clone(),
                                seen_secs_ago,
                            });
                        }
                    }
                }
            }
        }
    }

    /// The tab's reply as the model sees it: text fenced under a fresh nonce.
    fn render(&self, tool: &str, reply: Reply, host: &str, structured: bool) -> CallOutcome {
        let nonce = fence::nonce();
        let source = format!("the tool {tool} in the Sealpost browser tab served by {host}");
        match reply {
            Reply::Result(result) => {
                let mut text = result
                    .content
                    .iter()
                    .map(|sealpost_protocol::content::ContentBlock::Text { text }| text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n\n");
                if text.is_empty()
                    && let Some(structured) = &result.structured
                {
                    text = serde_json::to_string_pretty(structured).unwrap_or_default();
                }
                let structured = result
                    .structured
                    .as_ref()
                    .filter(|_| structured && !result.is_error)
                    .map(fence::clean_json);
                CallOutcome::Answered {
                    text: fence::fence(&text, &source, &nonce, self.options.max_result_chars),
                    is_error: result.is_error,
                    structured,
                }
            }
            Reply::Refusal(refusal) => {
                let sentence = crate::messages::refusal_sentence(refusal.code);
                let detail = fence::fence(
                    &refusal.message,
                    &format!("the Sealpost tab's explanation ({host})"),
                    &nonce,
                    self.options.max_result_chars,
                );
                CallOutcome::Failed(format!("{sentence}\n\n{detail}"))
            }
        }
    }
}
