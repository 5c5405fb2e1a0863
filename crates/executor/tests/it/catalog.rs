//! The catalog a session offers, and what the registry refuses to register.

use std::rc::Rc;

use sealpost_executor::{HostTool, RegistryError, ToolFuture, ToolSpec};
use sealpost_protocol::content::{ToolKind, ToolResult};
use sealpost_protocol::limits::MAX_TOOLS;
use sealpost_seal::{PairingSecret, verify_hello};
use serde_json::{Value, json};

use crate::support::*;

struct Noop;

impl HostTool for Noop {
    fn call(&self, _: Value) -> ToolFuture {
        Box::pin(async { Ok(ToolResult::text("ok")) })
    }
}

fn spec(name: &str, kind: ToolKind) -> ToolSpec {
    ToolSpec::new(name, "Does\nnothing.", json!({"type": "object"}), kind)
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_catalog_lists_granted_tools_in_a_stable_order() {
    let h = Harness::new();
    for name in ["zeta", "alpha"] {
        h.executor
            .register_tool(spec(name, ToolKind::Read), Rc::new(Noop))
            .unwrap();
        h.grant_tool(name);
    }
    h.grants.update(|g| {
        g.tools.remove("list_sources");
    });
    let names = h.catalog_names();
    assert_eq!(
        names,
        [
            "search_workspace",
            "get_source_excerpt",
            "get_workspace_outline",
            "propose_create_note",
            "propose_append_note",
            "propose_edit_note",
            "alpha",
            "zeta"
        ]
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_built_in_tool_and_no_host_tool_is_marked_builtin() {
    let h = Harness::new();
    for (name, kind) in [
        ("host.read", ToolKind::Read),
        ("host.propose", ToolKind::Proposal),
    ] {
        h.executor
            .register_tool(spec(name, kind), Rc::new(Noop))
            .unwrap();
        h.grant_tool(name);
    }
    let catalog = h.executor.catalog();
    assert!(
        catalog
            .tools
            .iter()
            .any(|e| e.kind == ToolKind::Proposal && e.builtin),
        "the built-in proposal tools are built in"
    );
    for entry in catalog.tools {
        let expected = !entry.name.starts_with("host.");
        assert_eq!(entry.builtin, expected, "{}", entry.name);
        assert!(!entry.description.contains('\n'));
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_hello_carries_the_catalog() {
    let h = Harness::new();
    let hello = h.executor.hello().unwrap();
    let verified = verify_hello(&PairingSecret::from_bytes([9; 32]), &hello, START_MS).unwrap();
    let catalog: sealpost_protocol::content::Catalog =
        serde_json::from_slice(verified.catalog()).unwrap();
    assert_eq!(catalog, h.executor.catalog());
    // The catalog holds tool descriptions only, never workspace data.
    let text = String::from_utf8(verified.catalog().to_vec()).unwrap();
    assert!(!text.contains("Key rotation") && !text.contains("journal"));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn bad_registrations_are_refused() {
    let h = Harness::new();
    let register = |spec| h.executor.register_tool(spec, Rc::new(Noop));
    assert!(matches!(
        register(spec("rm -rf", ToolKind::Read)),
        Err(RegistryError::BadName { .. })
    ));
    assert!(matches!(
        register(spec("sealpost_status", ToolKind::Read)),
        Err(RegistryError::BadName { .. })
    ));
    assert_eq!(
        register(spec("list_sources", ToolKind::Read)),
        Err(RegistryError::Duplicate {
            name: "list_sources".into(),
            taken: "list_sources".into()
        })
    );
    let mut not_object = spec("arr", ToolKind::Read);
    not_object.input_schema = json!({"type": "array"});
    assert!(matches!(
        register(not_object),
        Err(RegistryError::SchemaNotObject { .. })
    ));
    // A kind this build does not know is not guessed at (it would otherwise run as a read).
    assert_eq!(
        register(spec("wipe", ToolKind::Unknown)),
        Err(RegistryError::UnknownKind {
            name: "wipe".into()
        })
    );
    let mut broken = spec("broken", ToolKind::Read);
    broken.input_schema = json!({"type": "object", "properties": {"n": {"type": 12}}});
    assert!(matches!(
        register(broken),
        Err(RegistryError::BadSchema { .. })
    ));
    let mut remote = spec("remote", ToolKind::Read);
    remote.input_schema = json!({"type": "object", "$ref": "https://example.com/schema.json"});
    assert!(matches!(
        register(remote),
        Err(RegistryError::BadSchema { .. })
    ));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn at_most_a_hundred_tools_are_offered() {
    let h = Harness::new();
    let builtins = sealpost_executor::BuiltinTool::ALL.len();
    for n in 0..MAX_TOOLS - builtins {
        h.executor
            .register_tool(spec(&format!("t{n}"), ToolKind::Read), Rc::new(Noop))
            .unwrap();
    }
    assert_eq!(
        h.executor
            .register_tool(spec("one_too_many", ToolKind::Read), Rc::new(Noop)),
        Err(RegistryError::TooMany)
    );
    assert!(h.executor.unregister_tool("t0"));
    assert!(!h.executor.unregister_tool("list_sources"));
    h.executor
        .register_tool(spec("one_too_many", ToolKind::Read), Rc::new(Noop))
        .unwrap();
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_changed_catalog_is_sealed_as_the_next_update_of_the_live_session() {
    let h = Harness::new();
    let update = || {
        h.executor
            .catalog_update(h.now.get(), &mut *h.rng.borrow_mut())
            .unwrap()
    };
    assert_eq!(update(), None, "nothing changed since the hello");
    h.executor
        .register_tool(spec("host.read", ToolKind::Read), Rc::new(Noop))
        .unwrap();
    assert_eq!(update(), None, "a tool not granted is not offered");
    h.grant_tool("host.read");
    let (seq, names) = h.open_update(&update().expect("a granted tool changes the list"));
    assert_eq!(seq, 1);
    assert!(names.contains(&"host.read".to_owned()), "{names:?}");
    assert_eq!(update(), None, "sealed once");
    h.grants.update(|g| {
        g.tools.remove("host.read");
    });
    let (seq, names) = h.open_update(&update().unwrap());
    assert_eq!(seq, 2);
    assert!(!names.contains(&"host.read".to_owned()));
    h.executor.end_session();
    assert_eq!(update(), None, "no session, no update");
}
