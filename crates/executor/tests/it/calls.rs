//! The path of one envelope: open, cancel reasons, refusals, re-checks after an async tool, the
//! sealed reply and its audit record.

use std::cell::Cell;
use std::future::Future;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use sealpost_executor::{
    Access, AuditOutcome, AuditRecord, Delivery, HostTool, Outcome, ToolFailure, ToolFuture,
    ToolSpec, arguments_digest,
};
use sealpost_protocol::content::{CancelReason, RefusalCode, Reply, ToolKind, ToolResult};
use sealpost_seal::{CallId, Header, SessionId};
use serde_json::{Value, json};

use crate::support::*;

fn cancel_reason(outcome: &Outcome) -> CancelReason {
    match outcome {
        Outcome::Cancel { reason, .. } => *reason,
        Outcome::Reply { .. } => panic!("expected a cancel"),
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_reply_opens_on_the_plugin_side_and_is_audited() {
    let h = Harness::new();
    let (header, envelope) = h.envelope("list_sources", empty());
    let outcome = h.handle(&envelope);
    let Outcome::Reply {
        call_id,
        envelope: sealed,
        audit,
        ..
    } = &outcome
    else {
        panic!("expected a reply")
    };
    assert_eq!(call_id, header.call_id());
    let reply: Reply = serde_json::from_slice(&h.reply_bytes(&header, &outcome)).unwrap();
    assert!(matches!(reply, Reply::Result(_)));
    assert_eq!(audit.tool.as_deref(), Some("list_sources"));
    assert_eq!(audit.arguments_digest, Some(arguments_digest(&empty())));
    assert_eq!(audit.outcome, AuditOutcome::Answered);
    assert_eq!(audit.reply_bytes, sealed.len());
    assert_eq!(audit.at_ms, START_MS);
    let recorded = AuditRecord {
        delivery: Some(Delivery::Accepted),
        ..audit.clone()
    };
    assert_eq!(h.audit.last(), Some(recorded));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_call_is_audited_once_settled_with_what_the_relay_did() {
    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    let outcome = h.handle_unsettled(&envelope);
    assert!(
        h.audit.is_empty(),
        "nothing is recorded before the answer is sent"
    );
    let why = "the relay answered 429 (owner_rate_limited) until the lease ended";
    h.executor
        .settle(&outcome, Delivery::NotDelivered { why: why.into() });
    let record = h.audit.last().unwrap();
    assert_eq!(record.outcome, AuditOutcome::Answered, "what was decided");
    assert_eq!(
        record.delivery,
        Some(Delivery::NotDelivered { why: why.into() }),
        "and that the agent never got it"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_reply_the_relay_will_not_hold_becomes_a_short_too_large_refusal_for_the_same_call() {
    let h = Harness::new();
    let (header, envelope) = h.envelope("list_sources", empty());
    let mut outcome = h.handle_unsettled(&envelope);
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
    assert!(outcome.refuse_as_too_large(&h.now, &mut rng));
    let Reply::Refusal(refusal) =
        serde_json::from_slice(&h.reply_bytes(&header, &outcome)).unwrap()
    else {
        panic!("expected a refusal")
    };
    assert_eq!(refusal.code, RefusalCode::TooLarge);
    assert_eq!(
        outcome.audit().outcome,
        AuditOutcome::Refused {
            code: RefusalCode::TooLarge
        }
    );
    let Outcome::Reply { envelope, .. } = &outcome else {
        panic!("still a reply")
    };
    assert_eq!(outcome.audit().reply_bytes, envelope.len());
    assert!(
        !outcome.refuse_as_too_large(&h.now, &mut rng),
        "a refusal is not replaced again"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_replayed_envelope_is_cancelled_and_not_run_again() {
    let h = Harness::new();
    let (_, envelope) = h.envelope(
        "propose_create_note",
        json!({"source": "notes", "title": "t", "body": "b"}),
    );
    assert!(matches!(h.handle(&envelope), Outcome::Reply { .. }));
    let again = h.handle(&envelope);
    assert_eq!(cancel_reason(&again), CancelReason::Replayed);
    assert_eq!(h.executor.pending_proposals().len(), 1);
    assert_eq!(
        h.audit.last().unwrap().outcome,
        AuditOutcome::Cancelled {
            reason: CancelReason::Replayed
        }
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_corrupted_copy_does_not_burn_the_real_call_id() {
    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    let mut corrupted = envelope.clone();
    *corrupted.last_mut().unwrap() ^= 1;
    assert_eq!(
        cancel_reason(&h.handle(&corrupted)),
        CancelReason::Undecryptable
    );
    assert!(matches!(h.handle(&envelope), Outcome::Reply { .. }));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn garbage_and_other_sessions_are_undecryptable() {
    let h = Harness::new();
    let outcome = h.handle(b"not an envelope");
    assert_eq!(cancel_reason(&outcome), CancelReason::Undecryptable);
    assert!(matches!(outcome, Outcome::Cancel { call_id: None, .. }));

    let ours = h.header();
    let header = Header::call(
        SessionId::from_bytes([2; 16]),
        *ours.call_id(),
        *ours.plugin_public(),
        ours.created_at_ms(),
        ours.expires_at_ms(),
    );
    let envelope = h.seal(&header, br#"{"name":"list_sources"}"#);
    assert_eq!(
        cancel_reason(&h.handle(&envelope)),
        CancelReason::Undecryptable
    );

    // A header edited in transit no longer matches the sealed body.
    let (_, mut envelope) = h.envelope("list_sources", empty());
    envelope[70] ^= 1; // created_at
    assert_eq!(
        cancel_reason(&h.handle(&envelope)),
        CancelReason::Undecryptable
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_call_from_another_pairing_is_undecryptable() {
    let h = Harness::new();
    let other = Harness::new_with_pairing([3; 32]);
    let (_, envelope) = other.envelope("list_sources", empty());
    assert_eq!(
        cancel_reason(&h.handle(&envelope)),
        CancelReason::Undecryptable
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_expired_call_is_cancelled() {
    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    h.now
        .set(START_MS.saturating_add_ms(CALL_TTL_MS + sealpost_seal::CLOCK_SKEW_MS + 1));
    assert_eq!(cancel_reason(&h.handle(&envelope)), CancelReason::Expired);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_call_within_the_clock_tolerance_still_runs() {
    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    h.now
        .set(START_MS.saturating_add_ms(CALL_TTL_MS + sealpost_seal::CLOCK_SKEW_MS));
    assert!(matches!(h.handle(&envelope), Outcome::Reply { .. }));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_call_expiring_after_the_session_is_cancelled() {
    let h = Harness::new();
    let header = h.plugin.call_header(
        CallId::from_bytes([42; 16]),
        START_MS,
        START_MS.saturating_add_ms(SESSION_MS + 1),
    );
    let envelope = h.seal(&header, br#"{"name":"list_sources"}"#);
    assert_eq!(cancel_reason(&h.handle(&envelope)), CancelReason::Expired);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_call_stamped_in_the_future_is_cancelled() {
    let h = Harness::new();
    let created = START_MS.saturating_add_ms(sealpost_seal::CLOCK_SKEW_MS + 1);
    let header = h.plugin.call_header(
        CallId::from_bytes([43; 16]),
        created,
        created.saturating_add_ms(1000),
    );
    let envelope = h.seal(&header, br#"{"name":"list_sources"}"#);
    assert_eq!(cancel_reason(&h.handle(&envelope)), CancelReason::Expired);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_clock_stepping_back_does_not_revive_an_expired_call() {
    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    h.now
        .set(START_MS.saturating_add_ms(CALL_TTL_MS + sealpost_seal::CLOCK_SKEW_MS + 1));
    assert_eq!(cancel_reason(&h.handle(&envelope)), CancelReason::Expired);
    h.now.set(START_MS);
    assert_eq!(cancel_reason(&h.handle(&envelope)), CancelReason::Expired);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_ended_or_expired_session_cancels_everything() {
    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    h.executor.end_session();
    assert_eq!(
        cancel_reason(&h.handle(&envelope)),
        CancelReason::SessionEnded
    );

    let h = Harness::new();
    let (_, envelope) = h.envelope("list_sources", empty());
    h.now
        .set(START_MS.saturating_add_ms(SESSION_MS + sealpost_seal::CLOCK_SKEW_MS + 1));
    assert_eq!(
        cancel_reason(&h.handle(&envelope)),
        CancelReason::SessionEnded
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_plaintext_that_is_not_a_tool_call_is_refused_as_bad_arguments() {
    let h = Harness::new();
    let header = h.header();
    let envelope = h.seal(&header, b"[1,2,3]");
    let outcome = h.handle(&envelope);
    let reply: Reply = serde_json::from_slice(&h.reply_bytes(&header, &outcome)).unwrap();
    assert!(matches!(reply, Reply::Refusal(r) if r.code == RefusalCode::BadArguments));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_unknown_tool_is_refused() {
    let h = Harness::new();
    assert_eq!(
        h.refusal_code("delete_everything", empty()),
        RefusalCode::UnknownTool
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn arguments_that_break_the_schema_are_refused_with_the_reason() {
    let h = Harness::new();
    let refusal = h.refusal("search_workspace", json!({"query": "keys", "limit": 1000}));
    assert_eq!(refusal.code, RefusalCode::BadArguments);
    assert!(refusal.message.contains("/limit"), "{}", refusal.message);
    for bad in [
        json!({}),
        json!({"query": ""}),
        json!({"query": 7}),
        json!({"query": "keys", "extra": true}),
        json!("keys"),
    ] {
        assert_eq!(
            h.refusal_code("search_workspace", bad),
            RefusalCode::BadArguments
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn access_off_or_locked_runs_nothing_and_says_which() {
    let h = Harness::new();
    for (access, cause) in [
        (Access::Off, "AI access is switched off"),
        (Access::Locked, "is locked"),
    ] {
        h.grants.update(|g| g.access = access);
        assert_eq!(h.refusal_code("list_sources", empty()), RefusalCode::Locked);
        let Reply::Refusal(refusal) = h.call("list_sources", empty()) else {
            panic!("refused")
        };
        assert!(refusal.message.contains(cause), "{}", refusal.message);
        assert_eq!(
            h.refusal_code(
                "propose_create_note",
                json!({"source": "notes", "title": "t", "body": "b"})
            ),
            RefusalCode::Locked
        );
    }
    assert!(h.executor.pending_proposals().is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_tool_grant_removed_between_two_calls_applies_to_the_next() {
    let h = Harness::new();
    assert!(matches!(h.call("list_sources", empty()), Reply::Result(_)));
    h.grants.update(|g| {
        g.tools.remove("list_sources");
    });
    assert_eq!(
        h.refusal_code("list_sources", empty()),
        RefusalCode::NotGranted
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_source_grant_removed_between_two_calls_hides_its_documents() {
    let h = Harness::new();
    assert_eq!(
        h.ok("get_source_excerpt", json!({"doc_id": "n1"}))["doc_id"],
        "n1"
    );
    h.grants.update(|g| {
        g.sources.remove("notes");
    });
    let text = h.tool_error("get_source_excerpt", json!({"doc_id": "n1"}));
    assert!(text.contains("No document"), "{text}");
}

/// A host tool that stays pending until `gate` opens, then answers `result`.
struct GatedTool {
    gate: Rc<Cell<bool>>,
    calls: Rc<Cell<u32>>,
    result: Result<ToolResult, ToolFailure>,
}

struct Gate {
    gate: Rc<Cell<bool>>,
    result: Option<Result<ToolResult, ToolFailure>>,
}

impl Future for Gate {
    type Output = Result<ToolResult, ToolFailure>;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if self.gate.get() {
            Poll::Ready(self.result.take().unwrap())
        } else {
            Poll::Pending
        }
    }
}

impl HostTool for GatedTool {
    fn call(&self, _: Value) -> ToolFuture {
        self.calls.set(self.calls.get() + 1);
        Box::pin(Gate {
            gate: self.gate.clone(),
            result: Some(self.result.clone()),
        })
    }
}

fn host_tool(
    h: &Harness,
    name: &str,
    kind: ToolKind,
    result: Result<ToolResult, ToolFailure>,
) -> (Rc<Cell<bool>>, Rc<Cell<u32>>) {
    let gate = Rc::new(Cell::new(true));
    let calls = Rc::new(Cell::new(0));
    h.executor
        .register_tool(
            ToolSpec::new(
                name,
                "A host tool.",
                json!({
                    "type": "object",
                    "properties": {"n": {"type": "integer", "minimum": 0}},
                    "required": ["n"],
                    "additionalProperties": false
                }),
                kind,
            ),
            Rc::new(GatedTool {
                gate: gate.clone(),
                calls: calls.clone(),
                result,
            }),
        )
        .unwrap();
    h.grant_tool(name);
    (gate, calls)
}

/// Polls `handle` once (the host tool is pending), runs `meanwhile`, opens the gate, finishes.
fn handle_with_pause(
    h: &Harness,
    envelope: &[u8],
    gate: &Cell<bool>,
    meanwhile: impl FnOnce(),
) -> Outcome {
    gate.set(false);
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
    let mut future = pin!(h.executor.handle(envelope, &h.now, &mut rng));
    let mut context = Context::from_waker(Waker::noop());
    assert!(future.as_mut().poll(&mut context).is_pending());
    meanwhile();
    gate.set(true);
    match future.as_mut().poll(&mut context) {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => panic!("the tool was released"),
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_host_tool_answers_through_the_same_path() {
    let h = Harness::new();
    host_tool(
        &h,
        "host.echo",
        ToolKind::Read,
        Ok(ToolResult::text("hello")),
    );
    assert_eq!(
        h.call("host.echo", json!({"n": 1})),
        Reply::Result(ToolResult::text("hello"))
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_host_tool_is_not_called_with_arguments_its_schema_refuses() {
    let h = Harness::new();
    let (_, calls) = host_tool(
        &h,
        "host.count",
        ToolKind::Read,
        Ok(ToolResult::text("ran")),
    );
    assert_eq!(
        h.refusal_code("host.count", json!({"n": -1})),
        RefusalCode::BadArguments
    );
    assert_eq!(
        h.refusal_code("host.count", json!({})),
        RefusalCode::BadArguments
    );
    assert_eq!(calls.get(), 0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_failing_host_tool_is_refused_as_tool_failed() {
    let h = Harness::new();
    host_tool(
        &h,
        "host.fail",
        ToolKind::Read,
        Err(ToolFailure::new("disk on fire")),
    );
    let refusal = h.refusal("host.fail", json!({"n": 1}));
    assert_eq!(refusal.code, RefusalCode::ToolFailed);
    assert!(refusal.message.contains("disk on fire"));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_result_too_large_for_a_reply_is_refused_as_too_large() {
    let h = Harness::new();
    let huge = ToolResult::text("x".repeat(sealpost_executor::MAX_REPLY_PLAINTEXT_BYTES));
    host_tool(&h, "host.huge", ToolKind::Read, Ok(huge));
    assert_eq!(
        h.refusal_code("host.huge", json!({"n": 1})),
        RefusalCode::TooLarge
    );
    assert_eq!(
        h.audit.last().unwrap().outcome,
        AuditOutcome::Refused {
            code: RefusalCode::TooLarge
        }
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_grant_removed_while_a_host_tool_runs_withholds_its_answer() {
    let h = Harness::new();
    let (gate, calls) = host_tool(
        &h,
        "host.slow",
        ToolKind::Read,
        Ok(ToolResult::text("secret")),
    );
    let (header, envelope) = h.envelope("host.slow", json!({"n": 1}));
    let outcome = handle_with_pause(&h, &envelope, &gate, || {
        h.grants.update(|g| {
            g.tools.remove("host.slow");
        })
    });
    assert_eq!(calls.get(), 1);
    let reply: Reply = serde_json::from_slice(&h.reply_bytes(&header, &outcome)).unwrap();
    assert!(matches!(reply, Reply::Refusal(r) if r.code == RefusalCode::NotGranted));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn locking_while_a_host_tool_runs_withholds_its_answer() {
    let h = Harness::new();
    let (gate, _) = host_tool(
        &h,
        "host.slow",
        ToolKind::Read,
        Ok(ToolResult::text("secret")),
    );
    let (header, envelope) = h.envelope("host.slow", json!({"n": 1}));
    let outcome = handle_with_pause(&h, &envelope, &gate, || {
        h.grants.update(|g| g.access = Access::Locked)
    });
    let reply: Reply = serde_json::from_slice(&h.reply_bytes(&header, &outcome)).unwrap();
    assert!(matches!(reply, Reply::Refusal(r) if r.code == RefusalCode::Locked));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn ending_the_session_while_a_host_tool_runs_cancels_the_call() {
    let h = Harness::new();
    let (gate, _) = host_tool(
        &h,
        "host.slow",
        ToolKind::Read,
        Ok(ToolResult::text("secret")),
    );
    let (_, envelope) = h.envelope("host.slow", json!({"n": 1}));
    let outcome = handle_with_pause(&h, &envelope, &gate, || h.executor.end_session());
    assert_eq!(cancel_reason(&outcome), CancelReason::SessionEnded);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_call_that_expires_while_a_host_tool_runs_is_cancelled() {
    let h = Harness::new();
    let (gate, _) = host_tool(
        &h,
        "host.slow",
        ToolKind::Read,
        Ok(ToolResult::text("late")),
    );
    let (_, envelope) = h.envelope("host.slow", json!({"n": 1}));
    let outcome = handle_with_pause(&h, &envelope, &gate, || {
        h.now
            .set(START_MS.saturating_add_ms(CALL_TTL_MS + sealpost_seal::CLOCK_SKEW_MS + 1))
    });
    assert_eq!(cancel_reason(&outcome), CancelReason::Expired);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_host_proposal_tool_is_saved_for_review_and_not_run() {
    let h = Harness::new();
    let (_, calls) = host_tool(
        &h,
        "host.send_mail",
        ToolKind::Proposal,
        Ok(ToolResult::text("sent")),
    );
    let result = h.ok("host.send_mail", json!({"n": 3}));
    assert_eq!(result["status"], "pending_review");
    assert_eq!(calls.get(), 0);
    let pending = h.executor.pending_proposals();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "host.send_mail");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_plugin_that_restarts_mid_session_is_answered_under_its_new_key() {
    let mut h = Harness::new();
    assert!(matches!(h.call("list_sources", empty()), Reply::Result(_)));
    let old_key = h.plugin.plugin_public().to_owned();
    h.rejoin();
    assert_ne!(h.plugin.plugin_public(), &old_key);
    assert!(matches!(h.call("list_sources", empty()), Reply::Result(_)));
}
