//! A workspace restored from kept documents takes the index snapshot kept with them only when
//! it covers exactly those documents; otherwise it indexes their text and says why. Searching
//! answers the same either way.

use sealpost_executor::{Document, IndexOrigin, Workspace, WorkspaceError, search::SnapshotError};

use crate::support::doc;

fn documents() -> Vec<Document> {
    vec![
        doc(
            "rotation",
            "notes",
            "Key rotation",
            "Signing keys are rotated every ninety days.",
        ),
        doc(
            "backup",
            "notes",
            "Backups",
            "Nightly backups go to cold storage.",
        ),
        doc("trip", "journal", "Lisbon", "Pastéis de nata by the river."),
    ]
}

fn empty() -> Workspace {
    let mut workspace = Workspace::default();
    workspace.add_source("notes").unwrap();
    workspace.add_source("journal").unwrap();
    workspace
}

fn kept() -> (Vec<Document>, Vec<u8>) {
    let mut workspace = empty();
    for document in documents() {
        workspace.put(document).unwrap();
    }
    (documents(), workspace.index_snapshot())
}

fn found(workspace: &Workspace, query: &str) -> Vec<String> {
    let (_, hits) = workspace.search(query, |_| true, 10);
    hits.into_iter().map(|h| h.doc_id.to_string()).collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_snapshot_of_the_same_documents_is_used() {
    let (documents, snapshot) = kept();
    let mut workspace = empty();
    let restored = workspace.restore(documents, Some(&snapshot));
    assert_eq!(restored.index, IndexOrigin::Snapshot);
    assert!(restored.refused.is_empty());
    assert_eq!(found(&workspace, "rotating keys"), ["rotation"]);
    assert_eq!(found(&workspace, "pasteis"), ["trip"]);
    assert_eq!(workspace.index_snapshot(), snapshot);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_snapshot_of_documents_that_changed_since_is_stale_and_the_text_is_indexed() {
    let (mut documents, snapshot) = kept();
    documents[1].body = "Weekly backups go to a vault.".into();
    let mut workspace = empty();
    let restored = workspace.restore(documents, Some(&snapshot));
    assert_eq!(
        restored.index,
        IndexOrigin::Documents(Some(SnapshotError::Stale))
    );
    assert_eq!(found(&workspace, "vault"), ["backup"]);
    assert!(
        found(&workspace, "nightly").is_empty(),
        "the old text is not searched"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_document_more_or_less_is_stale_too() {
    let (mut documents, snapshot) = kept();
    documents.pop();
    let restored = empty().restore(documents, Some(&snapshot));
    assert_eq!(
        restored.index,
        IndexOrigin::Documents(Some(SnapshotError::Stale))
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_damaged_snapshot_is_reported_and_the_text_is_indexed() {
    let (documents, mut snapshot) = kept();
    let middle = snapshot.len() / 2;
    snapshot[middle] ^= 0xff;
    let mut workspace = empty();
    let restored = workspace.restore(documents, Some(&snapshot));
    assert_eq!(
        restored.index,
        IndexOrigin::Documents(Some(SnapshotError::Damaged))
    );
    assert_eq!(found(&workspace, "rotating keys"), ["rotation"]);
    assert_eq!(
        workspace.index_snapshot(),
        kept().1,
        "a fresh snapshot replaces it"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn without_a_snapshot_the_text_is_indexed_and_refused_documents_are_named() {
    let mut documents = documents();
    documents.push(doc("stray", "nowhere", "Stray", "in no source"));
    let mut workspace = empty();
    let restored = workspace.restore(documents, None);
    assert_eq!(restored.index, IndexOrigin::Documents(None));
    assert_eq!(restored.refused.len(), 1);
    assert_eq!(restored.refused[0].0.as_str(), "stray");
    assert_eq!(
        restored.refused[0].1,
        WorkspaceError::NoSuchSource("nowhere".into())
    );
    assert_eq!(found(&workspace, "cold storage"), ["backup"]);
}
