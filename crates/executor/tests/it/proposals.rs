//! Proposal tools save, never write; the review operations apply (only an unchanged document),
//! reject, and audit.

use sealpost_executor::limits::MAX_PENDING_PROPOSALS;
use sealpost_executor::{
    Applied, ApplyError, AuditOutcome, CREATED_NOTE_ID_PREFIX, DocId, ProposedChange,
};
use sealpost_protocol::content::RefusalCode;
use sealpost_protocol::ids::ProposalId;
use serde_json::json;

use crate::support::*;

fn body(h: &Harness, id: &str) -> String {
    h.executor
        .workspace()
        .get(&DocId::new(id).unwrap())
        .unwrap()
        .body
        .clone()
}

fn proposal_id(value: &serde_json::Value) -> ProposalId {
    value["proposal_id"].as_str().unwrap().parse().unwrap()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_proposal_is_saved_and_listed_without_writing() {
    let h = Harness::new();
    let before = body(&h, "n2");
    let saved = h.ok(
        "propose_append_note",
        json!({"doc_id": "n2", "text": "Cheese."}),
    );
    assert_eq!(saved["status"], "pending_review");
    assert_eq!(body(&h, "n2"), before);
    let pending = h.executor.pending_proposals();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, proposal_id(&saved));
    assert_eq!(pending[0].tool, "propose_append_note");
    assert_eq!(
        pending[0].change,
        ProposedChange::AppendNote {
            doc_id: DocId::new("n2").unwrap(),
            text: "Cheese.".into()
        }
    );
    assert_eq!(
        h.audit.last().unwrap().outcome,
        AuditOutcome::ProposalSaved {
            proposal_id: pending[0].id
        }
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn applying_an_append_writes_reindexes_and_audits() {
    let h = Harness::new();
    let id = proposal_id(&h.ok(
        "propose_append_note",
        json!({"doc_id": "n2", "text": "Cheese."}),
    ));
    h.now.set(START_MS.saturating_add_ms(5000));
    let applied = h
        .executor
        .apply_proposal(id, START_MS.saturating_add_ms(5000))
        .unwrap();
    assert_eq!(
        applied,
        Applied::DocumentWritten {
            doc_id: DocId::new("n2").unwrap()
        }
    );
    assert_eq!(body(&h, "n2"), "Milk, eggs, bread.\nApples.\nCheese.");
    assert_eq!(
        h.executor
            .workspace()
            .get(&DocId::new("n2").unwrap())
            .unwrap()
            .updated_at_ms,
        START_MS.saturating_add_ms(5000)
    );
    assert!(h.executor.pending_proposals().is_empty());
    let record = h.audit.last().unwrap();
    assert_eq!(
        record.outcome,
        AuditOutcome::ProposalApplied { proposal_id: id }
    );
    assert_eq!(record.tool.as_deref(), Some("propose_append_note"));
    assert_eq!(
        h.ok("search_workspace", json!({"query": "cheese"}))["results"][0]["doc_id"],
        "n2"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn applying_an_edit_replaces_the_one_passage() {
    let h = Harness::new();
    let id = proposal_id(&h.ok(
        "propose_edit_note",
        json!({"doc_id": "n1", "find": "ninety", "replace": "thirty"}),
    ));
    h.executor.apply_proposal(id, START_MS).unwrap();
    assert_eq!(body(&h, "n1"), "Rotate the signing keys every thirty days.");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_edit_must_name_a_passage_that_occurs_exactly_once() {
    let h = Harness::new();
    assert!(
        h.tool_error(
            "propose_edit_note",
            json!({"doc_id": "n2", "find": "Pears", "replace": "x"})
        )
        .contains("does not occur")
    );
    assert!(
        h.tool_error(
            "propose_edit_note",
            json!({"doc_id": "n2", "find": "e", "replace": "x"})
        )
        .contains("more than once")
    );
    assert!(h.executor.pending_proposals().is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn applying_a_create_adds_a_note_to_the_source() {
    let h = Harness::new();
    let id = proposal_id(&h.ok(
        "propose_create_note",
        json!({"source": "notes", "title": "Plan", "body": "Ship it."}),
    ));
    assert_eq!(h.executor.workspace().len(), 4);
    let Applied::DocumentWritten { doc_id } = h.executor.apply_proposal(id, START_MS).unwrap()
    else {
        panic!()
    };
    assert_eq!(doc_id.as_str(), format!("{CREATED_NOTE_ID_PREFIX}{id}"));
    assert_eq!(body(&h, doc_id.as_str()), "Ship it.");
    assert_eq!(h.executor.workspace().len(), 5);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_apply_is_refused_when_the_document_changed_since_the_proposal() {
    let h = Harness::new();
    let id = proposal_id(&h.ok(
        "propose_append_note",
        json!({"doc_id": "n2", "text": "Cheese."}),
    ));
    let mut changed = h
        .executor
        .workspace()
        .get(&DocId::new("n2").unwrap())
        .unwrap()
        .clone();
    changed.body.push_str(" Pears.");
    h.executor.workspace_mut().put(changed).unwrap();

    assert_eq!(
        h.executor.apply_proposal(id, START_MS),
        Err(ApplyError::DocumentChanged)
    );
    assert_eq!(body(&h, "n2"), "Milk, eggs, bread.\nApples. Pears.");
    assert_eq!(
        h.executor.pending_proposals().len(),
        1,
        "kept for the person to reject"
    );
    assert_eq!(
        h.audit.last().unwrap().outcome,
        AuditOutcome::ProposalApplyRefused { proposal_id: id }
    );

    h.executor
        .workspace_mut()
        .remove(&DocId::new("n2").unwrap());
    assert_eq!(
        h.executor.apply_proposal(id, START_MS),
        Err(ApplyError::DocumentGone)
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn rejecting_drops_the_proposal_and_audits() {
    let h = Harness::new();
    let id = proposal_id(&h.ok(
        "propose_edit_note",
        json!({"doc_id": "n1", "find": "ninety", "replace": "x"}),
    ));
    h.executor.reject_proposal(id, START_MS).unwrap();
    assert!(h.executor.pending_proposals().is_empty());
    assert_eq!(body(&h, "n1"), "Rotate the signing keys every ninety days.");
    assert_eq!(
        h.audit.last().unwrap().outcome,
        AuditOutcome::ProposalRejected { proposal_id: id }
    );
    assert_eq!(
        h.executor.reject_proposal(id, START_MS),
        Err(ApplyError::NoSuchProposal)
    );
    assert_eq!(
        h.executor.apply_proposal(id, START_MS),
        Err(ApplyError::NoSuchProposal)
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn proposals_survive_a_reload_through_restore() {
    let h = Harness::new();
    h.ok(
        "propose_create_note",
        json!({"source": "notes", "title": "A", "body": ""}),
    );
    let stored = serde_json::to_string(&h.executor.pending_proposals()).unwrap();
    let reloaded = Harness::new();
    reloaded
        .executor
        .restore_proposals(serde_json::from_str::<Vec<_>>(&stored).unwrap());
    assert_eq!(
        reloaded.executor.pending_proposals(),
        h.executor.pending_proposals()
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn pending_proposals_are_bounded() {
    let h = Harness::new();
    for n in 0..MAX_PENDING_PROPOSALS {
        h.ok(
            "propose_create_note",
            json!({"source": "notes", "title": format!("n{n}"), "body": ""}),
        );
    }
    assert_eq!(
        h.refusal_code(
            "propose_create_note",
            json!({"source": "notes", "title": "one more", "body": ""})
        ),
        RefusalCode::ToolFailed
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn proposal_arguments_are_checked() {
    let h = Harness::new();
    for (tool, bad) in [
        (
            "propose_create_note",
            json!({"source": "notes", "title": "", "body": "b"}),
        ),
        (
            "propose_create_note",
            json!({"source": "notes", "body": "b"}),
        ),
        ("propose_append_note", json!({"doc_id": "n1", "text": ""})),
        (
            "propose_edit_note",
            json!({"doc_id": "n1", "find": "", "replace": "x"}),
        ),
        (
            "propose_edit_note",
            json!({"doc_id": "n1", "find": "a", "replace": 1}),
        ),
    ] {
        assert_eq!(
            h.refusal_code(tool, bad),
            RefusalCode::BadArguments,
            "{tool}"
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_proposals_text_carries_its_structured_answer_as_json() {
    let h = Harness::new();
    let reply = h.call(
        "propose_append_note",
        json!({"doc_id": "n2", "text": "Cheese."}),
    );
    let sealpost_protocol::content::Reply::Result(result) = reply else {
        panic!("{reply:?}")
    };
    let sealpost_protocol::content::ContentBlock::Text { text } = &result.content[0];
    let json_line = text.lines().next().unwrap();
    let carried: serde_json::Value = serde_json::from_str(json_line).unwrap();
    assert_eq!(Some(&carried), result.structured.as_ref());
    assert_eq!(carried["status"], "pending_review");
}
