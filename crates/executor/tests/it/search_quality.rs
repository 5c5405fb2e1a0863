//! Ranking on a small hand-made corpus: for each query, the document a person would want first
//! comes first.

use sealpost_executor::search::Query;
use sealpost_executor::{DocId, Workspace};

use crate::support::doc;

fn corpus() -> Workspace {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    let docs = [
        (
            "rotation",
            "Key rotation policy",
            "Signing keys are rotated every ninety days. The old key stays valid for a week so clients can catch up.",
        ),
        (
            "backup",
            "Backups",
            "Nightly backups of the database go to cold storage. Restores are tested every quarter by restoring a random backup.",
        ),
        (
            "kubernetes",
            "Cluster notes",
            "The kubernetes cluster runs three nodes. Deployments roll out one pod at a time and the ingress terminates TLS.",
        ),
        (
            "cooking",
            "Weekend cooking",
            "Bake the sourdough at 250 degrees. The starter needs feeding the night before; running late means a flat loaf.",
        ),
        (
            "running",
            "Training log",
            "Ran ten kilometres on Sunday. Running in the rain was fine; the runners' club meets on Thursdays.",
        ),
        (
            "meeting",
            "Meeting notes",
            "We discussed the release plan, the budget and the hiring plan. The team will review the plan next week.",
        ),
        (
            "release",
            "Release checklist",
            "Tag the release, build artifacts, publish the changelog, announce the release on the mailing list.",
        ),
        (
            "budget",
            "Budget",
            "The budget for the quarter covers hardware, travel and the conference. Travel is capped per person.",
        ),
        (
            "incident",
            "Incident review: outage",
            "The outage started when the certificate expired. The on-call engineer renewed the certificate and wrote the review.",
        ),
        (
            "cafe",
            "Café visits",
            "The café near the station serves excellent espresso. Crème brûlée on Fridays.",
        ),
        (
            "poem",
            "A poem",
            "The quick brown fox jumps over the lazy dog while the plan waits for the team.",
        ),
        (
            "fox-facts",
            "Animals",
            "A fox is quick and brown. Dogs are often lazy in the afternoon sun.",
        ),
        (
            "glossary",
            "Glossary",
            "Idempotent: an operation that can be applied many times with the same result. Replay: sending a message again.",
        ),
        (
            "plan",
            "The plan",
            "Plan: the plan is to plan the plan. Team meeting about the plan.",
        ),
    ];
    for (id, title, body) in docs {
        workspace.put(doc(id, "notes", title, body)).unwrap();
    }
    workspace
}

fn first(workspace: &Workspace, query: &str) -> String {
    let (_, hits) = workspace.search(query, |_| true, 5);
    hits.first()
        .map(|hit| hit.doc_id.as_str().to_owned())
        .unwrap_or_else(|| panic!("no result for {query:?}"))
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_expected_document_ranks_first() {
    let workspace = corpus();
    let cases = [
        // exact words
        ("kubernetes cluster", "kubernetes"),
        // stemming: "rotating" meets "rotated", "restoring" meets "restores"
        ("rotating signing key", "rotation"),
        ("restoring backups", "backup"),
        ("run", "running"),
        // accents folded
        ("cafe creme", "cafe"),
        // prefix: explicit and for a word that matches nothing whole
        ("idempot*", "glossary"),
        ("certific", "incident"),
        // quoted phrase: only the document with the words in order
        ("\"quick brown fox\"", "poem"),
        // unquoted phrase: adjacency beats scattered words
        ("lazy dog", "poem"),
        // rare term beats common term
        ("team travel", "budget"),
        ("the espresso", "cafe"),
        // title boost
        ("checklist", "release"),
        ("outage", "incident"),
        ("sourdough starter", "cooking"),
    ];
    for (query, expected) in cases {
        assert_eq!(first(&workspace, query), expected, "query {query:?}");
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_quoted_phrase_excludes_documents_with_the_words_apart() {
    let workspace = corpus();
    let (_, hits) = workspace.search("\"quick brown fox\"", |_| true, 10);
    let ids: Vec<&str> = hits.iter().map(|h| h.doc_id.as_str()).collect();
    assert_eq!(ids, ["poem"]);
    let (_, none) = workspace.search("\"quick zebra\"", |_| true, 10);
    assert!(none.is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_index_follows_updates_and_removals() {
    let mut workspace = corpus();
    assert_eq!(first(&workspace, "espresso"), "cafe");
    workspace
        .put(doc("cafe", "notes", "Café visits", "Tea only from now on."))
        .unwrap();
    assert!(workspace.search("espresso", |_| true, 5).1.is_empty());
    assert_eq!(first(&workspace, "tea"), "cafe");
    workspace.remove(&DocId::new("cafe").unwrap());
    // Once no document holds "tea" it is a word like any unseen one (tried as a prefix), and
    // answers exactly as if the document had never been indexed.
    let mut fresh = corpus();
    fresh.remove(&DocId::new("cafe").unwrap());
    let (_, hits) = workspace.search("tea", |_| true, 5);
    assert!(hits.iter().all(|hit| hit.doc_id.as_str() != "cafe"));
    assert_eq!(hits, fresh.search("tea", |_| true, 5).1);
    assert_eq!(workspace.len(), 13);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn ranking_is_reproducible_and_ties_break_by_id() {
    let mut workspace = Workspace::default();
    workspace.add_source("s").unwrap();
    for id in ["c", "a", "b"] {
        workspace
            .put(doc(id, "s", "same", "identical text"))
            .unwrap();
    }
    let (_, hits) = workspace.search("identical", |_| true, 10);
    let ids: Vec<&str> = hits.iter().map(|h| h.doc_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn many_removals_compact_the_index_without_losing_documents() {
    let mut workspace = Workspace::default();
    workspace.add_source("s").unwrap();
    for round in 0..5 {
        for n in 0..600 {
            workspace
                .put(doc(
                    &format!("d{n}"),
                    "s",
                    "t",
                    &format!("round{round} shared"),
                ))
                .unwrap();
        }
    }
    assert_eq!(workspace.len(), 600);
    assert_eq!(workspace.search("shared", |_| true, 1000).1.len(), 600);
    assert_eq!(workspace.search("round4", |_| true, 1000).1.len(), 600);
    assert!(workspace.search("round3", |_| true, 1000).1.is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_query_of_only_punctuation_matches_nothing() {
    let workspace = corpus();
    let (query, hits) = workspace.search("?!… --", |_| true, 5);
    assert_eq!(query, Query::default());
    assert!(hits.is_empty());
}
