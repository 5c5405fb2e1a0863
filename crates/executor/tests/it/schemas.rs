//! The built-in tools' input schemas, derived from their argument types: they accept the
//! examples docs/EXECUTOR.md gives, and exactly what the hand-written schemas they replaced
//! accepted.

use sealpost_executor::BuiltinTool;
use sealpost_executor::limits::*;
use sealpost_protocol::content::Reply;
use serde_json::{Value, json};

use crate::support::*;

/// The example calls in docs/EXECUTOR.md ("Example calls"): one table row per call,
/// `| \`tool\` | \`{arguments}\` |`. The doc is the one copy; this reads it.
fn documented_examples() -> Vec<(String, Value)> {
    let doc = include_str!("../../../../docs/EXECUTOR.md");
    let table = doc
        .split_once("### Example calls")
        .expect("docs/EXECUTOR.md has an \"Example calls\" section")
        .1;
    table
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2) // header and separator
        .map(|row| {
            let cells: Vec<&str> = row
                .trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().trim_matches('`'))
                .collect();
            let [tool, arguments] = cells[..] else {
                panic!("an example row has two cells: {row}");
            };
            let arguments = serde_json::from_str(arguments).unwrap_or_else(|e| {
                panic!("example arguments of {tool} are not JSON ({e}): {row}")
            });
            (tool.to_owned(), arguments)
        })
        .collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_documented_example_passes_its_tools_schema_and_runs() {
    let examples = documented_examples();
    for &tool in BuiltinTool::ALL {
        assert!(
            examples.iter().any(|(name, _)| name == tool.name()),
            "docs/EXECUTOR.md gives no example call of {}",
            tool.name()
        );
    }
    let h = Harness::new();
    for (tool, arguments) in examples {
        // Through the executor: a refusal here would be `bad_arguments` (the schema) or
        // `unknown_tool`; a result, even a tool error, means the call got past both.
        match h.call(&tool, arguments.clone()) {
            Reply::Result(_) => {}
            other => panic!("the documented example {tool} {arguments} was refused: {other:?}"),
        }
    }
}

/// The schemas as they were written by hand before they were derived (less one empty
/// `properties`). Equal JSON Schemas accept the same arguments, so this pins what the executor
/// accepts.
fn hand_written() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "search_workspace",
            "Search the person's workspace documents, best match first. Words match \
                 regardless of case, accents and word endings; \"quoted words\" must appear in \
                 that order; word* matches by prefix. Each result has a snippet whose `start` and \
                 `matches` are character offsets into the document body (pass `start` to \
                 get_source_excerpt to read on).",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                    "source": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_NAME_BYTES,
                               "description": "Search only this source."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                              "default": DEFAULT_SEARCH_LIMIT}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        (
            "get_source_excerpt",
            "Read part of one document's body, from character offset `start` (default 0), \
                 at most `max_chars` characters.",
            json!({
                "type": "object",
                "properties": {
                    "doc_id": {"type": "string", "minLength": 1, "maxLength": MAX_DOC_ID_BYTES},
                    "start": {"type": "integer", "minimum": 0},
                    "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_EXCERPT_CHARS,
                                  "default": DEFAULT_EXCERPT_CHARS}
                },
                "required": ["doc_id"],
                "additionalProperties": false
            }),
        ),
        (
            "get_workspace_outline",
            "List the documents (id, title, length, last change) of every source this \
                 session may read, or of one source.",
            json!({
                "type": "object",
                "properties": {
                    "source": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_NAME_BYTES}
                },
                "additionalProperties": false
            }),
        ),
        (
            "list_sources",
            "List the sources this session may read, with their document counts.",
            // Written by hand with `"properties": {}`, which constrains nothing.
            json!({"type": "object", "additionalProperties": false}),
        ),
        (
            "propose_create_note",
            "Propose a new note in a source. Nothing is written: the proposal is saved and a \
                 person approves or rejects it in the Sealpost app.",
            json!({
                "type": "object",
                "properties": {
                    "source": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_NAME_BYTES},
                    "title": {"type": "string", "minLength": 1, "maxLength": 300},
                    "body": {"type": "string", "maxLength": MAX_PROPOSAL_TEXT_CHARS}
                },
                "required": ["source", "title", "body"],
                "additionalProperties": false
            }),
        ),
        (
            "propose_append_note",
            "Propose appending text to the end of a document (on a new line). Nothing is \
                 written until a person approves it in the Sealpost app.",
            json!({
                "type": "object",
                "properties": {
                    "doc_id": {"type": "string", "minLength": 1, "maxLength": MAX_DOC_ID_BYTES},
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_PROPOSAL_TEXT_CHARS}
                },
                "required": ["doc_id", "text"],
                "additionalProperties": false
            }),
        ),
        (
            "propose_edit_note",
            "Propose replacing one passage of a document. `find` must occur exactly once in \
                 the body. Nothing is written until a person approves it in the Sealpost app.",
            json!({
                "type": "object",
                "properties": {
                    "doc_id": {"type": "string", "minLength": 1, "maxLength": MAX_DOC_ID_BYTES},
                    "find": {"type": "string", "minLength": 1, "maxLength": MAX_EDIT_TEXT_CHARS},
                    "replace": {"type": "string", "maxLength": MAX_EDIT_TEXT_CHARS}
                },
                "required": ["doc_id", "find", "replace"],
                "additionalProperties": false
            }),
        ),
    ]
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_derived_schemas_and_descriptions_are_the_hand_written_ones() {
    let expected = hand_written();
    assert_eq!(expected.len(), BuiltinTool::ALL.len());
    for (tool, (name, description, schema)) in BuiltinTool::ALL.iter().copied().zip(expected) {
        let spec = tool.spec();
        assert_eq!(spec.name, name);
        assert_eq!(spec.input_schema, schema, "the schema of {name}");
        let flattened = spec
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(flattened, description, "the description of {name}");
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_optional_argument_may_be_left_out_but_not_null() {
    let h = Harness::new();
    assert!(matches!(
        h.call("search_workspace", json!({"query": "keys"})),
        Reply::Result(_)
    ));
    for (tool, arguments) in [
        ("search_workspace", json!({"query": "keys", "source": null})),
        ("search_workspace", json!({"query": "keys", "limit": null})),
        ("get_source_excerpt", json!({"doc_id": "n1", "start": null})),
        ("get_workspace_outline", json!({"source": null})),
    ] {
        assert_eq!(
            h.refusal_code(tool, arguments),
            sealpost_protocol::content::RefusalCode::BadArguments
        );
    }
}
