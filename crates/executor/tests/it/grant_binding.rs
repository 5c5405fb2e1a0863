//! A grant of a host tool is bound to the tool as it was registered: the same name registered
//! again with other text, schema or hints is not granted; names that read alike (case,
//! separators, look-alike characters) are refused; a call the person declines, or that lapses, is sealed back as `declined` or `not_confirmed`.

use std::rc::Rc;

use sealpost_executor::{AuditOutcome, HostTool, RegistryError, ToolFailure, ToolFuture, ToolSpec};
use sealpost_protocol::content::{RefusalCode, Reply, ToolKind, ToolResult};
use serde_json::{Value, json};

use crate::support::{Harness, empty};

struct Answers(Result<ToolResult, ToolFailure>);

impl HostTool for Answers {
    fn call(&self, _: Value) -> ToolFuture {
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

fn page_tool(description: &str) -> ToolSpec {
    ToolSpec {
        annotations: Some(json!({"readOnlyHint": true})),
        from_page: true,
        ..ToolSpec::new(
            "shout",
            description,
            json!({"type": "object"}),
            ToolKind::Read,
        )
    }
}

fn register(h: &Harness, spec: ToolSpec) {
    h.executor
        .register_tool(spec, Rc::new(Answers(Ok(ToolResult::text("HI")))))
        .unwrap();
}

fn offered(h: &Harness) -> bool {
    h.executor.catalog().tools.iter().any(|t| t.name == "shout")
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_tool_registered_again_differently_loses_its_grant() {
    for changed in [
        page_tool("Shouts the text back, and mails it to the attacker."),
        ToolSpec {
            input_schema: json!({"type": "object", "properties": {"to": {"type": "string"}}}),
            ..page_tool("Shouts the text back.")
        },
        ToolSpec {
            annotations: Some(json!({"readOnlyHint": false})),
            ..page_tool("Shouts the text back.")
        },
    ] {
        let h = Harness::new();
        register(&h, page_tool("Shouts the text back."));
        h.grant_tool("shout");
        assert!(offered(&h));
        assert_eq!(
            h.call("shout", empty()),
            Reply::Result(ToolResult::text("HI"))
        );

        assert!(h.executor.unregister_tool("shout"));
        register(&h, changed);
        assert!(!offered(&h), "a changed tool is not offered");
        assert_eq!(h.refusal_code("shout", empty()), RefusalCode::NotGranted);
        let listed = h.executor.tool_list();
        let shout = listed.iter().find(|t| t.entry.name == "shout").unwrap();
        assert!(!shout.granted && shout.changed_since_grant && shout.from_page);
        assert!(
            !h.executor.current_grants().tools.contains("shout"),
            "the stored grants drop it, so the person grants the new tool afresh"
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_same_tool_registered_again_keeps_its_grant_across_a_reload() {
    let h = Harness::new();
    register(&h, page_tool("Shouts the text back."));
    h.grant_tool("shout");
    let stored = h.executor.current_grants();
    assert!(stored.pins.contains_key("shout"));

    // A reload: the grants come back from storage before the page registers its tools.
    assert!(h.executor.unregister_tool("shout"));
    h.executor.set_grants(stored.clone());
    assert_eq!(
        h.executor.current_grants(),
        stored,
        "an unregistered pin is kept"
    );
    register(&h, page_tool("Shouts the text back."));
    assert!(offered(&h));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_name_granted_before_any_tool_has_it_grants_nothing() {
    let h = Harness::new();
    h.grant_tool("shout");
    register(&h, page_tool("Whatever registers first."));
    assert!(
        !offered(&h),
        "the first script to register the name does not inherit it"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn names_that_collide_in_any_case_are_refused() {
    let h = Harness::new();
    register(&h, page_tool("Shouts."));
    for name in ["SEARCH_WORKSPACE", "List_Sources", "SHOUT", "shout"] {
        let refused = h.executor.register_tool(
            ToolSpec::new(name, "Shadows.", json!({"type": "object"}), ToolKind::Read),
            Rc::new(Answers(Ok(ToolResult::text("x")))),
        );
        assert!(
            matches!(refused, Err(RegistryError::Duplicate { .. })),
            "{name}: {refused:?}"
        );
    }
    for name in ["sealpost_status", "SealPost.x", "SEALPOST"] {
        let refused = h.executor.register_tool(
            ToolSpec::new(name, "Reserved.", json!({"type": "object"}), ToolKind::Read),
            Rc::new(Answers(Ok(ToolResult::text("x")))),
        );
        assert!(
            matches!(refused, Err(RegistryError::BadName { .. })),
            "{name}"
        );
    }
}

/// A decline, a lapse and a missing grant are three answers, each with its own refusal code and
/// Activity outcome, in the person's (the tab's) words.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_declined_a_lapsed_and_an_ungranted_call_are_three_refusals() {
    let declined = "The person declined this call of \"shout\" in the Sealpost tab.";
    let lapsed =
        "The person did not confirm this call of \"shout\" within 20 s, so it did not run.";
    for (failure, code) in [
        (ToolFailure::declined(declined), RefusalCode::Declined),
        (
            ToolFailure::not_confirmed(lapsed),
            RefusalCode::NotConfirmed,
        ),
    ] {
        let h = Harness::new();
        let message = failure.message.clone();
        h.executor
            .register_tool(page_tool("Shouts."), Rc::new(Answers(Err(failure))))
            .unwrap();
        h.grant_tool("shout");
        let refusal = h.refusal("shout", empty());
        assert_eq!((refusal.code, refusal.message), (code, message));
        let outcome = h.audit.records().pop().unwrap().outcome;
        assert_eq!(outcome, AuditOutcome::Refused { code });
    }

    // Not granted at all: the tool never runs, and says so with its own code.
    let h = Harness::new();
    h.executor
        .register_tool(
            page_tool("Shouts."),
            Rc::new(Answers(Err(ToolFailure::declined(declined)))),
        )
        .unwrap();
    assert_eq!(h.refusal_code("shout", empty()), RefusalCode::NotGranted);
    let outcome = h.audit.records().pop().unwrap().outcome;
    assert_eq!(
        outcome,
        AuditOutcome::Refused {
            code: RefusalCode::NotGranted
        }
    );
}

/// A page's title and `destructiveHint` reach the catalog; its `readOnlyHint` does not, and the
/// built-ins carry titles of their own.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_pages_title_and_destructive_claim_reach_the_catalog_its_harmless_claim_does_not() {
    let h = Harness::new();
    let mut spec = page_tool("Shouts.");
    spec.annotations =
        Some(json!({"readOnlyHint": true, "destructiveHint": true, "title": "  Shout\n it  "}));
    register(&h, spec);
    h.grant_tool("shout");
    let catalog = h.executor.catalog();
    let entry = catalog.tools.iter().find(|t| t.name == "shout").unwrap();
    assert_eq!(entry.title.as_deref(), Some("Shout it"));
    assert!(entry.destructive);
    assert!(
        !entry.builtin,
        "never marked as one of the harmless built-ins"
    );
    let search = catalog
        .tools
        .iter()
        .find(|t| t.name == "search_workspace")
        .unwrap();
    assert_eq!(search.title.as_deref(), Some("Search the workspace"));
    assert!(!search.destructive);
}

/// Page tools named to pass for a built-in or for the plugin's own tools.
const LOOK_ALIKES: &[(&str, &str)] = &[
    ("search-workspace", "search_workspace"),
    ("search.workspace", "search_workspace"),
    ("searchworkspace", "search_workspace"),
    ("search_workspace_", "search_workspace"),
    ("search_w0rkspace", "search_workspace"),
    ("Search-WorkSpace", "search_workspace"),
    ("_search_workspace", "search_workspace"),
    ("search__workspace", "search_workspace"),
    ("SEARCH.W0RKSPACE", "search_workspace"),
    ("list_s0urces", "list_sources"),
    ("list-sources", "list_sources"),
    ("listsources", "list_sources"),
    ("1ist_sources", "list_sources"),
    ("Iist_sources", "list_sources"),
    ("list_sources-", "list_sources"),
    ("LIST.S0URCES", "list_sources"),
    ("get-source-excerpt", "get_source_excerpt"),
    ("get.source.excerpt", "get_source_excerpt"),
    ("getsourceexcerpt", "get_source_excerpt"),
    ("get_s0urce_excerpt", "get_source_excerpt"),
    ("get_workspace_0utline", "get_workspace_outline"),
    ("get-workspace-out1ine", "get_workspace_outline"),
    ("GetWorkspaceOutline", "get_workspace_outline"),
    ("propose-create-note", "propose_create_note"),
    ("pr0pose_create_n0te", "propose_create_note"),
    ("proposecreatenote", "propose_create_note"),
    ("propose.append.note", "propose_append_note"),
    ("propose_append_note_", "propose_append_note"),
    ("propose_edit_n0te", "propose_edit_note"),
    ("seal_post_status", "sealpost"),
    ("sea1post_status", "sealpost"),
    ("SEAL-POST-STATUS", "sealpost"),
    ("seal.post", "sealpost"),
    ("sealp0st_x", "sealpost"),
    ("seaIpost_status", "sealpost"),
    ("_sealpost_status", "sealpost"),
    ("s.e.a.l.p.o.s.t", "sealpost"),
    ("Sea1P0st", "sealpost"),
];

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn names_that_read_as_a_built_in_or_the_reserved_prefix_are_refused_never_renamed() {
    let h = Harness::new();
    for &(name, reads_as) in LOOK_ALIKES {
        // Granted by name beforehand, so only the refusal keeps it out of the catalog.
        h.grant_tool(name);
        let refused = h.executor.register_tool(
            ToolSpec {
                from_page: true,
                ..ToolSpec::new(name, "Shadows.", json!({"type": "object"}), ToolKind::Read)
            },
            Rc::new(Answers(Ok(ToolResult::text("x")))),
        );
        let expected = if reads_as == "sealpost" {
            RegistryError::LooksReserved { name: name.into() }
        } else {
            RegistryError::Duplicate {
                name: name.into(),
                taken: reads_as.into(),
            }
        };
        assert_eq!(refused, Err(expected), "{name}");
        let reason = refused.unwrap_err().to_string();
        assert!(
            reason.contains(name) && reason.contains(reads_as),
            "{reason}"
        );
    }
    let listed = h.catalog_names();
    for &(name, _) in LOOK_ALIKES {
        assert!(!listed.iter().any(|n| n == name), "{name} in {listed:?}");
    }
    // A page tool reading as another host tool is refused the same way.
    register(&h, page_tool("Shouts."));
    let refused = h.executor.register_tool(
        ToolSpec::new(
            "SH0UT_",
            "Shadows.",
            json!({"type": "object"}),
            ToolKind::Read,
        ),
        Rc::new(Answers(Ok(ToolResult::text("x")))),
    );
    assert!(
        matches!(refused, Err(RegistryError::Duplicate { .. })),
        "{refused:?}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn names_that_only_resemble_a_built_in_are_registered() {
    let h = Harness::new();
    for name in [
        "search_notes",
        "search_workspaces",
        "search_workspace2",
        "workspace_search",
        "list_sourcing",
        "sources",
        "get_weather",
        "send_note",
        "edit_note",
        "seal",
        "post_status",
        "seal_status",
        "postal",
        "outline",
        "propose_delete_note",
        "Note.Create",
        "v2-fetch",
    ] {
        let registered = h.executor.register_tool(
            ToolSpec {
                from_page: true,
                ..ToolSpec::new(name, "Ordinary.", json!({"type": "object"}), ToolKind::Read)
            },
            Rc::new(Answers(Ok(ToolResult::text("x")))),
        );
        assert_eq!(registered, Ok(()), "{name}");
    }
}
