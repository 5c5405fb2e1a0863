//! Each built-in tool: answers, limits, bad arguments, and grants on documents and sources.

use sealpost_executor::limits::{MAX_EXCERPT_CHARS, MAX_OUTLINE_ENTRIES, MAX_SEARCH_LIMIT};
use sealpost_executor::{DocId, Document, Grants, Workspace};
use sealpost_protocol::content::RefusalCode;
use serde_json::json;

use crate::support::*;

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn list_sources_names_only_granted_sources() {
    let h = Harness::new();
    assert_eq!(
        h.ok("list_sources", empty()),
        json!({"sources": [{"name": "journal", "documents": 1}, {"name": "notes", "documents": 2}]})
    );
    assert_eq!(
        h.refusal_code("list_sources", json!({"x": 1})),
        RefusalCode::BadArguments
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_outline_lists_granted_documents_by_source() {
    let h = Harness::new();
    let outline = h.ok("get_workspace_outline", empty());
    assert_eq!(outline["total"], 3);
    assert_eq!(outline["truncated"], false);
    let notes = &outline["sources"][1];
    assert_eq!(notes["name"], "notes");
    assert_eq!(notes["documents"][0]["doc_id"], "n1");
    assert_eq!(notes["documents"][0]["title"], "Key rotation");
    assert_eq!(notes["documents"][0]["chars"], 42);
    let journal_only = h.ok("get_workspace_outline", json!({"source": "journal"}));
    assert_eq!(journal_only["total"], 1);
    assert!(
        h.tool_error("get_workspace_outline", json!({"source": "private"}))
            .contains("No source")
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_outline_is_bounded() {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    for n in 0..MAX_OUTLINE_ENTRIES + 5 {
        workspace
            .put(doc(&format!("d{n:04}"), "notes", "t", "b"))
            .unwrap();
    }
    let h = Harness::with_workspace(workspace, open_grants());
    let outline = h.ok("get_workspace_outline", empty());
    assert_eq!(outline["listed"], MAX_OUTLINE_ENTRIES);
    assert_eq!(outline["total"], MAX_OUTLINE_ENTRIES + 5);
    assert_eq!(outline["truncated"], true);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_excerpt_reads_characters_from_start() {
    let h = Harness::new();
    let whole = h.ok("get_source_excerpt", json!({"doc_id": "n1"}));
    assert_eq!(whole["text"], "Rotate the signing keys every ninety days.");
    assert_eq!(whole["more"], false);
    let part = h.ok(
        "get_source_excerpt",
        json!({"doc_id": "n1", "start": 7, "max_chars": 3}),
    );
    assert_eq!(part["text"], "the");
    assert_eq!(
        (
            part["start"].clone(),
            part["end"].clone(),
            part["more"].clone()
        ),
        (json!(7), json!(10), json!(true))
    );
    let at_end = h.ok("get_source_excerpt", json!({"doc_id": "n1", "start": 42}));
    assert_eq!(at_end["text"], "");
    assert!(
        h.tool_error("get_source_excerpt", json!({"doc_id": "n1", "start": 43}))
            .contains("past the end")
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn excerpt_offsets_count_characters_not_bytes() {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    workspace.put(doc("u", "notes", "Ünï", "ééé—abc")).unwrap();
    let h = Harness::with_workspace(workspace, open_grants());
    let part = h.ok(
        "get_source_excerpt",
        json!({"doc_id": "u", "start": 3, "max_chars": 2}),
    );
    assert_eq!(part["text"], "—a");
    assert_eq!(part["total_chars"], 7);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn excerpt_limits_are_enforced_by_the_schema() {
    let h = Harness::new();
    for bad in [
        json!({"doc_id": "n1", "max_chars": 0}),
        json!({"doc_id": "n1", "max_chars": MAX_EXCERPT_CHARS + 1}),
        json!({"doc_id": "n1", "start": -1}),
        json!({"doc_id": ""}),
        json!({"start": 0}),
    ] {
        assert_eq!(
            h.refusal_code("get_source_excerpt", bad),
            RefusalCode::BadArguments
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_ungranted_document_answers_exactly_like_a_missing_one() {
    let h = Harness::new();
    let ungranted = h.call_bytes("get_source_excerpt", json!({"doc_id": "p1"}));
    let ungranted_append =
        h.call_bytes("propose_append_note", json!({"doc_id": "p1", "text": "x"}));
    let ungranted_edit = h.call_bytes(
        "propose_edit_note",
        json!({"doc_id": "p1", "find": "mat", "replace": "rug"}),
    );
    h.executor
        .workspace_mut()
        .remove(&DocId::new("p1").unwrap());
    let missing = h.call_bytes("get_source_excerpt", json!({"doc_id": "p1"}));
    assert_eq!(ungranted, missing);
    assert_eq!(
        ungranted_append,
        h.call_bytes("propose_append_note", json!({"doc_id": "p1", "text": "x"}))
    );
    assert_eq!(
        ungranted_edit,
        h.call_bytes(
            "propose_edit_note",
            json!({"doc_id": "p1", "find": "mat", "replace": "rug"})
        )
    );
    assert!(h.executor.pending_proposals().is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_ungranted_source_answers_exactly_like_a_missing_one() {
    let h = Harness::new();
    for (tool, arguments) in [
        (
            "search_workspace",
            json!({"query": "keys", "source": "private"}),
        ),
        ("get_workspace_outline", json!({"source": "private"})),
        (
            "propose_create_note",
            json!({"source": "private", "title": "t", "body": "b"}),
        ),
    ] {
        let ungranted = h.call_bytes(tool, arguments.clone());
        let missing_arguments = serde_json::to_string(&arguments)
            .unwrap()
            .replace("private", "nowhere");
        let missing = h.call_bytes(tool, serde_json::from_str(&missing_arguments).unwrap());
        assert_eq!(
            String::from_utf8(ungranted)
                .unwrap()
                .replace("private", "nowhere"),
            String::from_utf8(missing).unwrap(),
            "{tool}"
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn search_never_returns_ungranted_documents() {
    let h = Harness::new();
    let results = h.ok("search_workspace", json!({"query": "keys"}));
    let ids: Vec<&str> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["doc_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"n1") && ids.contains(&"j1"), "{ids:?}");
    assert!(!ids.contains(&"p1"));
    let secret = h.ok("search_workspace", json!({"query": "mat"}));
    assert_eq!(secret["results"], json!([]));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn search_can_be_limited_to_one_source() {
    let h = Harness::new();
    let results = h.ok(
        "search_workspace",
        json!({"query": "keys", "source": "journal"}),
    );
    assert_eq!(results["results"].as_array().unwrap().len(), 1);
    assert_eq!(results["results"][0]["doc_id"], "j1");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn search_results_carry_snippets_with_match_offsets() {
    let h = Harness::new();
    let results = h.ok("search_workspace", json!({"query": "signing"}));
    let hit = &results["results"][0];
    assert_eq!(hit["doc_id"], "n1");
    assert_eq!(hit["title"], "Key rotation");
    assert_eq!(hit["snippet"]["matches"], json!([[11, 18]]));
    let body: Vec<char> = "Rotate the signing keys every ninety days."
        .chars()
        .collect();
    assert_eq!(body[11..18].iter().collect::<String>(), "signing");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn search_honours_limit_and_its_bounds() {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    for n in 0..60 {
        workspace
            .put(doc(&format!("d{n}"), "notes", "t", "common word"))
            .unwrap();
    }
    let h = Harness::with_workspace(workspace, open_grants());
    let count = |arguments| {
        h.ok("search_workspace", arguments)["results"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(count(json!({"query": "common"})), 10);
    assert_eq!(count(json!({"query": "common", "limit": 3})), 3);
    assert_eq!(
        count(json!({"query": "common", "limit": MAX_SEARCH_LIMIT})),
        MAX_SEARCH_LIMIT as usize
    );
    for bad in [
        json!({"query": "common", "limit": 0}),
        json!({"query": "common", "limit": MAX_SEARCH_LIMIT + 1}),
        json!({"query": "x".repeat(501)}),
    ] {
        assert_eq!(
            h.refusal_code("search_workspace", bad),
            RefusalCode::BadArguments
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_grant_of_no_sources_shows_an_empty_workspace() {
    let grants = Grants {
        sources: Default::default(),
        ..open_grants()
    };
    let h = Harness::with_workspace(small_workspace(), grants);
    assert_eq!(h.ok("list_sources", empty()), json!({"sources": []}));
    assert_eq!(
        h.ok("search_workspace", json!({"query": "keys"}))["results"],
        json!([])
    );
    assert_eq!(h.ok("get_workspace_outline", empty())["total"], 0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_read_answer_crosses_once_as_structured_output_of_the_listed_schema() {
    let h = Harness::new();
    let catalog = h.executor.catalog();
    for (tool, arguments) in [
        ("list_sources", empty()),
        ("search_workspace", json!({"query": "rotation"})),
        ("get_workspace_outline", empty()),
        ("get_source_excerpt", json!({"doc_id": "n1"})),
    ] {
        let sealpost_protocol::content::Reply::Result(result) = h.call(tool, arguments) else {
            panic!("{tool} answers")
        };
        // Sealed once: the plugin renders the text from it.
        assert!(result.content.is_empty(), "{tool}: {:?}", result.content);
        let structured = result.structured.expect("a structured answer");
        let entry = catalog.tools.iter().find(|t| t.name == tool).unwrap();
        let schema = entry.output_schema.as_ref().expect("an output schema");
        // Its top level as the schema says (a client validates the whole: the web app's tests
        // call the tools through the official TypeScript SDK, which does).
        assert_eq!(schema["type"], "object", "{tool}: {schema}");
        for key in schema["required"].as_array().expect("required properties") {
            let key = key.as_str().unwrap();
            assert!(
                structured.get(key).is_some(),
                "{tool}: {key} in {structured}"
            );
            assert!(
                schema["properties"].get(key).is_some(),
                "{tool}: {key} described"
            );
        }
    }
    let propose = catalog
        .tools
        .iter()
        .find(|t| t.name == "propose_edit_note")
        .unwrap();
    assert_eq!(propose.output_schema, None);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_workspace_refuses_documents_it_cannot_hold() {
    let mut workspace = Workspace::default();
    assert!(workspace.put(doc("a", "nowhere", "t", "b")).is_err());
    assert!(workspace.add_source("").is_err());
    assert!(
        DocId::new("").is_err()
            && DocId::new("a\nb").is_err()
            && DocId::new("x".repeat(129)).is_err()
    );
    workspace.add_source("notes").unwrap();
    let long_title = Document {
        title: "t".repeat(2000),
        ..doc("a", "notes", "", "")
    };
    assert!(workspace.put(long_title).is_err());
}
