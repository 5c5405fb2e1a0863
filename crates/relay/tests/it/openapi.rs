//! `/openapi.json` is written by hand, so this keeps it honest: it lists exactly the routes the
//! router serves (read from the router's source), with the same methods.

use std::collections::BTreeSet;

const ROUTER_SOURCE: &str = include_str!("../../src/http/mod.rs");
const SPEC: &str = include_str!("../../src/http/openapi.json");
const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];
/// The document does not describe itself.
const UNDOCUMENTED: [&str; 1] = ["/openapi.json"];

/// `(path, method)` for every `.route("PATH", method(..).method(..))` in the router.
fn served_routes() -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for chunk in ROUTER_SOURCE.split(".route(").skip(1) {
        let chunk = chunk.split(".fallback_service(").next().unwrap();
        let path = chunk
            .split('"')
            .nth(1)
            .expect("a route's path is its first string");
        for method in METHODS {
            // A method router is `get(` after a space, a newline or a dot, never `x::get(`.
            let call = format!("{method}(");
            let serves = chunk
                .match_indices(&call)
                .any(|(at, _)| chunk[..at].ends_with([' ', '\n', '.']));
            if serves {
                routes.insert((path.to_owned(), method.to_owned()));
            }
        }
    }
    routes
}

fn documented_routes() -> BTreeSet<(String, String)> {
    let spec: serde_json::Value = serde_json::from_str(SPEC).unwrap();
    let mut routes = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        // Path-level `parameters` (and any extension) are not operations.
        let methods = item
            .as_object()
            .unwrap()
            .keys()
            .filter(|key| METHODS.contains(&key.as_str()));
        for method in methods {
            routes.insert((path.clone(), method.clone()));
        }
    }
    routes
}

#[test]
fn the_openapi_document_lists_exactly_the_routes_the_router_serves() {
    let served: BTreeSet<_> = served_routes()
        .into_iter()
        .filter(|(path, _)| !UNDOCUMENTED.contains(&path.as_str()))
        .collect();
    let documented = documented_routes();
    assert!(served.len() >= 15, "the router parse found {served:?}");
    let missing: Vec<_> = served.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&served).collect();
    assert!(missing.is_empty(), "served but not documented: {missing:?}");
    assert!(stale.is_empty(), "documented but not served: {stale:?}");
}
