//! Search answers the same bytes whether or not an ungranted source exists: scores, the order of
//! results, which documents match and what a snippet highlights all come from granted documents
//! only, so a session cannot count or detect words it may not read.

use sealpost_executor::{Access, AuditOutcome, DocId, Document, Grants, Workspace};
use sealpost_protocol::content::RefusalCode;
use serde_json::{Value, json};

use crate::support::*;

/// Granted documents: two sources, so the filter is a strict subset of the workspace once an
/// ungranted source is added.
fn granted_docs() -> Vec<Document> {
    vec![
        doc(
            "w1",
            "work",
            "Standup",
            "Short meeting with alice about the release.",
        ),
        doc(
            "w2",
            "work",
            "Planning",
            "Planning the budget with the team. Alice and Bob review the plan on Friday.",
        ),
        doc(
            "w3",
            "work",
            "Buzzword",
            "The zzz marker closes the sprint.",
        ),
        doc(
            "w4",
            "work",
            "Deploy",
            "Deployments go out on Tuesday after the meeting.",
        ),
        doc(
            "r1",
            "reading",
            "Meetings considered",
            "A long essay on meetings, alice in wonderland and the art of planning.",
        ),
    ]
}

/// Ungranted documents mentioning every queried word, terms that exist nowhere else (`payroll`,
/// the exact token `ali`), and more than the prefix-expansion cap of longer completions.
fn ungranted_docs() -> Vec<Document> {
    let mut docs = vec![
        doc(
            "h1",
            "hr",
            "Alice",
            "Alice alice alice: meeting with alice about payroll.",
        ),
        doc(
            "h2",
            "hr",
            "Review",
            "Review meeting with alice. Ali signed the planetary plan.",
        ),
        doc(
            "h3",
            "hr",
            "Payroll",
            "Payroll meetup, planning the salary review.",
        ),
    ];
    let completions: Vec<String> = (0..70).map(|n| format!("zza{n:02}")).collect();
    docs.push(doc("h4", "hr", "Codes", &completions.join(" ")));
    docs
}

fn grants() -> Grants {
    Grants {
        access: Access::On,
        sources: ["work", "reading"].map(str::to_owned).into(),
        tools: all_builtin_tools().into_iter().collect(),
        ..Grants::default()
    }
}

fn workspace(before: &[Document], after: &[Document]) -> Workspace {
    let mut workspace = Workspace::default();
    for document in before.iter().chain(&granted_docs()).chain(after) {
        // `add_source` refuses a name twice; only the document matters here.
        let _ = workspace.add_source(&document.source);
        workspace.put(document.clone()).unwrap();
    }
    workspace
}

fn queries() -> Vec<Value> {
    [
        json!({"query": "alice"}),
        json!({"query": "alice meeting"}),
        json!({"query": "meeting with alice"}),
        json!({"query": "\"meeting with alice\""}),
        json!({"query": "\"alice payroll\""}),
        json!({"query": "meet*"}),
        json!({"query": "plan*"}),
        json!({"query": "zz*"}),
        json!({"query": "ali"}),
        json!({"query": "payroll"}),
        json!({"query": "payroll alice"}),
        json!({"query": "review"}),
        json!({"query": "alice", "source": "work"}),
        json!({"query": "plan*", "source": "reading", "limit": 1}),
    ]
    .into()
}

/// The reply bytes of every query, in order.
fn replies(workspace: Workspace) -> Vec<Vec<u8>> {
    let h = Harness::with_workspace(workspace, grants());
    queries()
        .into_iter()
        .map(|arguments| h.call_bytes("search_workspace", arguments))
        .collect()
}

fn assert_same_replies(expected: &[Vec<u8>], actual: &[Vec<u8>], variant: &str) {
    assert_eq!(expected.len(), actual.len());
    for ((arguments, expected), actual) in queries().iter().zip(expected).zip(actual) {
        // Bytes compared, text shown.
        assert!(
            actual == expected,
            "{variant}: {arguments}\n  expected: {}\n  actual:   {}",
            String::from_utf8_lossy(expected),
            String::from_utf8_lossy(actual),
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn search_replies_do_not_depend_on_ungranted_documents() {
    let without = replies(workspace(&[], &[]));
    // Slots and term numbering differ with the ungranted documents first or last.
    assert_same_replies(
        &without,
        &replies(workspace(&ungranted_docs(), &[])),
        "before",
    );
    assert_same_replies(
        &without,
        &replies(workspace(&[], &ungranted_docs())),
        "after",
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_comparison_is_over_real_matches() {
    // Guards the test above against passing vacuously on empty answers.
    let h = Harness::with_workspace(workspace(&ungranted_docs(), &[]), grants());
    let ids = |query: &str| -> Vec<String> {
        h.ok("search_workspace", json!({"query": query}))["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["doc_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let alice = ids("alice");
    assert_eq!(alice.len(), 3, "{alice:?}");
    assert_eq!(alice[0], "w1");
    assert_eq!(ids("\"meeting with alice\""), ["w1"]);
    // `ali` and `zzz` are reached by prefix expansion even though the exact token `ali` and 70
    // other `zz` terms exist in the ungranted source.
    assert!(ids("ali").contains(&"w1".to_owned()));
    assert_eq!(ids("zz*"), ["w3"]);
    assert!(ids("payroll").is_empty());
    let scores = h.ok("search_workspace", json!({"query": "alice"}))["results"][0]["score"].clone();
    assert!(scores.as_f64().unwrap() > 0.0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn replies_stay_the_same_as_ungranted_documents_change() {
    let without = replies(workspace(&[], &[]));
    let mut changing = workspace(&ungranted_docs(), &[]);
    // Replaced and removed ungranted documents must leave nothing behind in the statistics.
    changing
        .put(doc("h1", "hr", "Alice again", "alice alice planetary zzb"))
        .unwrap();
    changing.remove(&DocId::new("h2").unwrap());
    assert_same_replies(&without, &replies(changing), "changed");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_source_grant_removed_mid_session_stops_counting_at_once() {
    let without = replies(workspace(&[], &[]));
    let mut wider = grants();
    wider.sources.insert("hr".to_owned());
    let h = Harness::with_workspace(workspace(&ungranted_docs(), &[]), wider);
    let granted = h.call_bytes("search_workspace", json!({"query": "alice"}));
    assert_ne!(granted, without[0], "hr documents count while granted");
    h.grants.update(|g| {
        g.sources.remove("hr");
    });
    let after: Vec<Vec<u8>> = queries()
        .into_iter()
        .map(|arguments| h.call_bytes("search_workspace", arguments))
        .collect();
    assert_same_replies(&without, &after, "grant removed");
}

/// A document or source that exists but is not granted gets the very bytes a missing one gets
/// (the agent cannot tell them apart), and the person's Activity records it as refused.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_ungranted_document_or_source_answers_as_a_missing_one_and_is_recorded_as_refused() {
    let with_hr = Harness::with_workspace(workspace(&ungranted_docs(), &[]), grants());
    let without = Harness::with_workspace(workspace(&[], &[]), grants());
    let asks = [
        ("get_source_excerpt", json!({"doc_id": "h1"})),
        ("get_workspace_outline", json!({"source": "hr"})),
        (
            "search_workspace",
            json!({"query": "alice", "source": "hr"}),
        ),
        ("propose_append_note", json!({"doc_id": "h1", "text": "x"})),
        (
            "propose_create_note",
            json!({"source": "hr", "title": "t", "body": "b"}),
        ),
    ];
    for (tool, arguments) in asks {
        let withheld = with_hr.call_bytes(tool, arguments.clone());
        let missing = without.call_bytes(tool, arguments.clone());
        assert_eq!(
            String::from_utf8_lossy(&withheld),
            String::from_utf8_lossy(&missing),
            "{tool} {arguments}"
        );
        assert_eq!(
            with_hr.audit.last().unwrap().outcome,
            AuditOutcome::Refused {
                code: RefusalCode::NotGranted
            },
            "{tool} {arguments}"
        );
        assert_eq!(
            without.audit.last().unwrap().outcome,
            AuditOutcome::AnsweredWithError,
            "{tool} {arguments}"
        );
    }
}
