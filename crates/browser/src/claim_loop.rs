//! The claim loop: `TabCore::serve` claims calls for the live session, runs each through the
//! executor and sends its answer, over the session channel when one is open (`channel.rs`) and
//! over `fetch` otherwise (`relay.rs`), until a stop. An answer refused for a passing reason is
//! sent again until its call's lease ends (`delivery.rs`), and the call's audit record says
//! whether the relay took it.

use std::rc::Rc;

use sealpost_executor::{Delivery, Outcome};
use sealpost_protocol::ids::CallId;
use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortController;

use crate::backoff::Backoff;
use crate::channel::Channel;
use crate::delivery::{Attempts, Next};
use crate::host_tool::sleep;
use crate::relay::RelayError;
use crate::stop::StopReason;
use crate::tab::{TabCore, emit, now_ms};
use crate::timing::{self, TabClock};

/// Longest one claim waits for a call (the relay allows 30 s).
const CLAIM_WAIT_MS: u64 = 25_000;
/// Most calls one claim takes.
const CLAIM_MAX: u32 = 50;
/// After the channel failed to open or closed under the loop, how long the loop uses HTTP
/// before it tries the channel again.
const CHANNEL_RETRY_MS: f64 = 30_000.0;
/// How close to its expiry a session the relay reports gone counts as expired, not ended: the
/// relay's clock and this tab's differ by a little.
const EXPIRY_SLACK_MS: u64 = 1_000;

#[wasm_bindgen]
impl TabCore {
    /// Serves the session until a stop; resolves to the reason (`locked`, `signed_out`,
    /// `session_ended`, `expired`, `token_revoked`, `taken_over`).
    pub fn serve(&self) -> js_sys::Promise {
        let core = self.clone_handle();
        future_to_promise(async move {
            let reason = core.claim_loop().await;
            core.close_channel();
            emit(
                &core.inner.listener,
                &json!({"type": "stopped", "reason": reason}),
            );
            Ok(JsValue::from_str(reason.as_str()))
        })
    }
}

impl TabCore {
    pub(crate) fn close_channel(&self) {
        if let Some(channel) = self.inner.channel.borrow_mut().take() {
            channel.close();
        }
    }

    /// The open channel, opening one if none is open and the last failure is old enough;
    /// `None`: use HTTP. Tells the page when the transport changes.
    async fn channel(&self) -> Option<Rc<Channel>> {
        let open = self.inner.channel.borrow().clone().filter(|c| c.is_open());
        let channel = match open {
            Some(channel) => Some(channel),
            None if js_sys::Date::now() < self.inner.channel_retry_at.get() => None,
            None => {
                let relay = self.inner.relay.borrow().clone();
                let stopped = || self.inner.stop.get().is_some();
                match Channel::open(relay.origin(), relay.token(), &stopped).await {
                    Some(channel) => {
                        let channel = Rc::new(channel);
                        *self.inner.channel.borrow_mut() = Some(channel.clone());
                        Some(channel)
                    }
                    None => {
                        self.channel_failed();
                        None
                    }
                }
            }
        };
        let on_channel = channel.is_some();
        if self.inner.on_channel.replace(Some(on_channel)) != Some(on_channel) {
            let transport = if on_channel { "channel" } else { "http" };
            emit(
                &self.inner.listener,
                &json!({"type": "transport", "transport": transport}),
            );
        }
        channel
    }

    /// The channel failed: HTTP for a while.
    fn channel_failed(&self) {
        self.close_channel();
        self.inner
            .channel_retry_at
            .set(js_sys::Date::now() + CHANNEL_RETRY_MS);
    }

    async fn claim_loop(&self) -> StopReason {
        let mut backoff = Backoff::default();
        // The session the relay has seen this tab claim from: until then a claim does not
        // wait, so the relay records the tab at once and `ready` can be said.
        let mut ready_for = None;
        emit(&self.inner.listener, &json!({"type": "serving"}));
        loop {
            if let Some(reason) = self.inner.stop.get() {
                return reason;
            }
            let Some((session_id, expires_at)) = self.inner.session.get() else {
                return StopReason::SessionEnded;
            };
            let now = now_ms();
            if now >= expires_at {
                self.inner.session.set(None);
                self.inner.executor.end_session();
                return StopReason::Expired;
            }
            if self.catalog_unpublished() {
                self.publish_catalog().await;
            }
            let wait = if ready_for == Some(session_id) {
                CLAIM_WAIT_MS.min(expires_at.saturating_sub(now))
            } else {
                0
            };
            let channel = self.channel().await;
            if let Some(reason) = self.inner.stop.get() {
                return reason;
            }
            let relay = self.inner.relay.borrow().clone();
            let claimed = match &channel {
                Some(channel) => channel.claim(session_id, wait, CLAIM_MAX).await,
                None => {
                    let controller = AbortController::new().expect("AbortController exists");
                    let signal = controller.signal();
                    *self.inner.serving.borrow_mut() = Some(controller);
                    let claimed = relay.claim(session_id, wait, CLAIM_MAX, &signal).await;
                    self.inner.serving.borrow_mut().take();
                    claimed
                }
            };
            if let Some(reason) = self.inner.stop.get() {
                return reason;
            }
            if let Some(used) = &channel
                && matches!(claimed, Err(RelayError::Unreachable(_)))
            {
                // The channel closed under the claim. Closed by this tab (a new owner token),
                // it is opened again at once; closed on its own, HTTP carries on for a while.
                let still_ours = self
                    .inner
                    .channel
                    .borrow()
                    .as_ref()
                    .is_some_and(|current| Rc::ptr_eq(current, used));
                if still_ours {
                    self.channel_failed();
                }
                continue;
            }
            match claimed {
                Ok(claimed) => {
                    backoff.reset();
                    if ready_for != Some(session_id) {
                        ready_for = Some(session_id);
                        emit(
                            &self.inner.listener,
                            &json!({"type": "ready", "sessionId": session_id.to_string()}),
                        );
                    }
                    if !claimed.calls.is_empty() {
                        emit(
                            &self.inner.listener,
                            &json!({"type": "claimed", "count": claimed.calls.len()}),
                        );
                    }
                    // Leases in this tab's clock: the relay's times differ from it by a skew.
                    let received = js_sys::Date::now();
                    if !claimed.calls.is_empty() {
                        timing::mark("received");
                    }
                    for call in claimed.calls {
                        let lease_ms = call.lease_expires_at.saturating_sub(claimed.now_ms);
                        self.answer(call.call_id, &call.envelope.0, received + lease_ms as f64)
                            .await;
                    }
                }
                Err(RelayError::Status { status: 401, .. }) => return StopReason::TokenRevoked,
                Err(RelayError::Status {
                    status: 404 | 410, ..
                }) => {
                    // `startSession` while serving ends the session this claim was for: the
                    // loop serves the new one, whose keys the executor holds now, once the
                    // relay has made it.
                    if self.inner.session_starting.get() {
                        self.abortable_sleep(50).await;
                        continue;
                    }
                    if self.inner.session.get().map(|(id, _)| id) != Some(session_id) {
                        continue;
                    }
                    self.inner.session.set(None);
                    self.inner.executor.end_session();
                    // The relay ends a session that ran out as it ends one that was ended; the
                    // loop tells them apart by the clock (the claim waited until the expiry).
                    if now_ms().saturating_add_ms(EXPIRY_SLACK_MS) >= expires_at {
                        return StopReason::Expired;
                    }
                    return StopReason::SessionEnded;
                }
                Err(RelayError::Aborted) => {
                    return self.inner.stop.get().unwrap_or(StopReason::SessionEnded);
                }
                Err(error) => {
                    let asked = match &error {
                        RelayError::Status {
                            retry_after_s: Some(seconds),
                            ..
                        } => seconds.saturating_mul(1000),
                        _ => 0,
                    };
                    let delay = backoff.next_delay_ms(js_sys::Math::random()).max(asked);
                    emit(
                        &self.inner.listener,
                        &json!({"type": "retrying", "delayMs": delay, "error": error.describe()}),
                    );
                    self.abortable_sleep(delay as u32).await;
                }
            }
        }
    }

    /// Sleeps `ms`, or less when a stop comes first.
    async fn abortable_sleep(&self, ms: u32) {
        let step = 100;
        let mut slept = 0;
        while slept < ms && self.inner.stop.get().is_none() {
            sleep(step.min(ms - slept)).await;
            slept += step;
        }
    }

    /// Runs a claimed call, sends its answer (again, while the lease lasts, when the relay
    /// refuses it for a passing reason) and audits what became of it.
    async fn answer(&self, call_id: CallId, envelope: &[u8], lease_ends_at_ms: f64) {
        let mut outcome = self
            .inner
            .executor
            .handle(envelope, &TabClock, &mut rand::rng())
            .await;
        let mut attempts = Attempts::new(lease_ends_at_ms);
        let delivery = loop {
            let error = match self.send_answer(call_id, &outcome).await {
                Ok(()) => {
                    timing::mark("acknowledged");
                    break Delivery::Accepted;
                }
                Err(error) => error,
            };
            let shrunk = !matches!(
                outcome.audit().outcome,
                sealpost_executor::AuditOutcome::Answered
                    | sealpost_executor::AuditOutcome::AnsweredWithError
                    | sealpost_executor::AuditOutcome::ProposalSaved { .. }
            );
            match attempts.after(&error, js_sys::Date::now(), shrunk, js_sys::Math::random()) {
                Next::Shrink => {
                    outcome.refuse_as_too_large(&now_ms, &mut rand::rng());
                }
                Next::Retry { after_ms } => {
                    emit(
                        &self.inner.listener,
                        &json!({"type": "retrying_answer", "delayMs": after_ms, "error": error.describe()}),
                    );
                    self.abortable_sleep(after_ms.min(u32::MAX.into()) as u32)
                        .await;
                    if self.inner.stop.get().is_some() {
                        break Delivery::NotDelivered {
                            why: "the tab stopped before the relay took it".into(),
                        };
                    }
                }
                Next::GiveUp(why) => break Delivery::NotDelivered { why },
            }
        };
        if let Delivery::NotDelivered { why } = &delivery {
            emit(
                &self.inner.listener,
                &json!({"type": "warning", "message": format!("answering a call: {why}")}),
            );
        }
        self.inner.executor.settle(&outcome, delivery);
    }

    /// Sends an answer once: on the channel if one is open, over HTTP if none is or it closes
    /// first (the relay client as it is now: the owner token may have been renewed meanwhile).
    async fn send_answer(&self, call_id: CallId, outcome: &Outcome) -> Result<(), RelayError> {
        let channel = self.inner.channel.borrow().clone().filter(|c| c.is_open());
        if let Some(channel) = channel {
            let sent = match outcome {
                Outcome::Reply { envelope, .. } => channel.reply(call_id, envelope.clone()).await,
                Outcome::Cancel { reason, .. } => channel.cancel(call_id, *reason).await,
            };
            if !matches!(sent, Err(RelayError::Unreachable(_))) {
                return sent;
            }
        }
        let relay = self.inner.relay.borrow().clone();
        match outcome {
            Outcome::Reply { envelope, .. } => relay.reply(call_id, envelope.clone()).await,
            Outcome::Cancel { reason, .. } => relay.cancel(call_id, *reason).await,
        }
    }
}
