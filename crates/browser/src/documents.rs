//! `TabCore`'s workspace methods: sources and documents, and restoring them at start with the
//! search index snapshot kept beside them (so the tab does not re-read every document's text).

use sealpost_executor::{DocId, Document, IndexOrigin, search::SnapshotError};
use serde_json::{Value, json};
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;

use crate::tab::{TabCore, from_js, to_js};

#[wasm_bindgen]
impl TabCore {
    /// Adds a source (a named folder of documents).
    #[wasm_bindgen(js_name = addSource)]
    pub fn add_source(&self, name: &str) -> Result<(), JsError> {
        let mut workspace = self.inner.executor.workspace_mut();
        if workspace.has_source(name) {
            return Ok(());
        }
        workspace
            .add_source(name)
            .map_err(|e| JsError::new(&e.to_string()))
    }

    /// The sources, in name order.
    pub fn sources(&self) -> JsValue {
        let names: Vec<String> = self
            .inner
            .executor
            .workspace()
            .sources()
            .map(str::to_owned)
            .collect();
        to_js(&names)
    }

    /// Adds or replaces a document `{id, source, title, body, updated_at_ms}`.
    #[wasm_bindgen(js_name = putDocument)]
    pub fn put_document(&self, document: JsValue) -> Result<(), JsError> {
        let document: Document = from_js(document, "a document")?;
        self.inner
            .executor
            .workspace_mut()
            .put(document)
            .map_err(|e| JsError::new(&e.to_string()))
    }

    /// Removes a document; whether it was there.
    #[wasm_bindgen(js_name = removeDocument)]
    pub fn remove_document(&self, id: &str) -> Result<bool, JsError> {
        let id = DocId::new(id).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(self.inner.executor.workspace_mut().remove(&id).is_some())
    }

    /// One document, or `null`.
    pub fn document(&self, id: &str) -> JsValue {
        let Ok(id) = DocId::new(id) else {
            return JsValue::NULL;
        };
        self.inner
            .executor
            .workspace()
            .get(&id)
            .map_or(JsValue::NULL, to_js)
    }

    /// Every document without its body: `[{id, source, title, chars, updated_at_ms}]`.
    pub fn documents(&self) -> JsValue {
        let workspace = self.inner.executor.workspace();
        let list: Vec<Value> = workspace
            .documents()
            .map(|d| {
                json!({"id": d.id.as_str(), "source": d.source, "title": d.title,
                       "chars": d.body.chars().count(), "updated_at_ms": d.updated_at_ms})
            })
            .collect();
        to_js(&list)
    }

    /// Restores the documents kept in IndexedDB, in one go, with the index `snapshot` kept
    /// beside them (or `null`). Answers `{index: "snapshot"|"documents", reason, message,
    /// refused: [{id, error}]}`: the index comes from the snapshot only when it covers exactly
    /// these documents; otherwise from their text, with `reason` `"damaged"`, `"version"` or
    /// `"stale"` (and a sentence in `message`) when a snapshot was given but not used.
    #[wasm_bindgen(js_name = restoreDocuments)]
    pub fn restore_documents(
        &self,
        documents: JsValue,
        snapshot: Option<Vec<u8>>,
    ) -> Result<JsValue, JsError> {
        // One document that does not read (an id the workspace refuses, say) is reported and
        // skipped, as `putDocument` would refuse it alone; it must not fail the rest.
        let list: js_sys::Array = documents
            .dyn_into()
            .map_err(|_| JsError::new("documents: expected an array"))?;
        let mut readable = Vec::with_capacity(list.length() as usize);
        let mut refused: Vec<Value> = Vec::new();
        for item in list.iter() {
            match serde_wasm_bindgen::from_value::<Document>(item) {
                Ok(document) => readable.push(document),
                Err(error) => refused.push(json!({"id": null, "error": error.to_string()})),
            }
        }
        let restored = self
            .inner
            .executor
            .workspace_mut()
            .restore(readable, snapshot.as_deref());
        refused.extend(
            restored
                .refused
                .iter()
                .map(|(id, error)| json!({"id": id.as_str(), "error": error.to_string()})),
        );
        let (index, problem) = match restored.index {
            IndexOrigin::Snapshot => ("snapshot", None),
            IndexOrigin::Documents(problem) => ("documents", problem),
        };
        let reason = problem.as_ref().map(|problem| match problem {
            SnapshotError::Damaged => "damaged",
            SnapshotError::Version { .. } => "version",
            SnapshotError::Stale => "stale",
        });
        Ok(to_js(&json!({
            "index": index,
            "reason": reason,
            "message": problem.map(|p| p.to_string()),
            "refused": refused,
        })))
    }

    /// The search index as bytes, for the page to keep (sealed) and pass back to
    /// [`TabCore::restore_documents`] at the next start.
    #[wasm_bindgen(js_name = indexSnapshot)]
    pub fn index_snapshot(&self) -> Vec<u8> {
        self.inner.executor.workspace().index_snapshot()
    }
}
