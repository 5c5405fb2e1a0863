//! The person's workspace: documents in named sources, kept behind [`DocumentStore`] and mirrored
//! into the search index. Every change goes through [`Workspace`], so the index never drifts
//! from the documents.
//!
//! The store trait is synchronous on purpose: the index needs every body in memory anyway, so
//! the browser keeps the documents in memory and writes each change through to IndexedDB.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::limits::{MAX_BODY_BYTES, MAX_DOC_ID_BYTES, MAX_SOURCE_NAME_BYTES, MAX_TITLE_BYTES};
use crate::search::{Hit, Query, SearchIndex, SnapshotError, Snippet, snippet, snippet_at};

/// A document id chosen by the host app (1 to [`MAX_DOC_ID_BYTES`] bytes, no control
/// characters).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DocId(String);

impl DocId {
    /// Checks `id`, refusing an empty, overlong or control-character one.
    pub fn new(id: impl Into<String>) -> Result<Self, WorkspaceError> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_DOC_ID_BYTES || id.chars().any(char::is_control) {
            return Err(WorkspaceError::BadDocId);
        }
        Ok(Self(id))
    }

    /// The id as the host app chose it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for DocId {
    type Error = WorkspaceError;
    fn try_from(id: String) -> Result<Self, WorkspaceError> {
        Self::new(id)
    }
}

impl From<DocId> for String {
    fn from(id: DocId) -> String {
        id.0
    }
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DocId({:?})", self.0)
    }
}

/// One document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Unique across the workspace.
    pub id: DocId,
    /// The source it belongs to; grants are given per source.
    pub source: String,
    /// Shown in outlines and results, and weighted above the body in search.
    pub title: String,
    /// The text that is searched and read.
    pub body: String,
    /// When it last changed, set by whoever changed it.
    pub updated_at_ms: UnixMillis,
}

/// Why the workspace refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    /// The id is empty, too long or holds a control character.
    #[error("a document id must be 1 to {MAX_DOC_ID_BYTES} bytes without control characters")]
    BadDocId,
    /// The source name is empty, too long or holds a control character.
    #[error("a source name must be 1 to {MAX_SOURCE_NAME_BYTES} bytes without control characters")]
    BadSourceName,
    /// A document names a source that was never added.
    #[error("no source named {0:?}; create it first")]
    NoSuchSource(String),
    /// The title is over [`MAX_TITLE_BYTES`].
    #[error("a document title may be at most {MAX_TITLE_BYTES} bytes")]
    TitleTooLong,
    /// The body is over [`MAX_BODY_BYTES`].
    #[error("a document body may be at most {MAX_BODY_BYTES} bytes")]
    BodyTooLarge,
}

/// Where documents and source names are kept. The in-memory [`MemoryStore`] serves tests and
/// benchmarks; the browser implements it over IndexedDB (in memory, written through).
pub trait DocumentStore {
    /// Every source name kept, including those without documents.
    fn sources(&self) -> Vec<String>;
    /// Keeps a source name, so an empty source survives a reload.
    fn put_source(&mut self, name: &str);
    /// The document with this id, if kept.
    fn get(&self, id: &DocId) -> Option<&Document>;
    /// Keeps a document, replacing any with its id.
    fn put(&mut self, document: Document);
    /// Drops a document, returning it if it was kept.
    fn remove(&mut self, id: &DocId) -> Option<Document>;
    /// Every document, in id order.
    fn documents(&self) -> Box<dyn Iterator<Item = &Document> + '_>;
}

/// A [`DocumentStore`] held in memory.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    sources: BTreeSet<String>,
    documents: BTreeMap<DocId, Document>,
}

impl DocumentStore for MemoryStore {
    fn sources(&self) -> Vec<String> {
        self.sources.iter().cloned().collect()
    }
    fn put_source(&mut self, name: &str) {
        self.sources.insert(name.to_owned());
    }
    fn get(&self, id: &DocId) -> Option<&Document> {
        self.documents.get(id)
    }
    fn put(&mut self, document: Document) {
        self.documents.insert(document.id.clone(), document);
    }
    fn remove(&mut self, id: &DocId) -> Option<Document> {
        self.documents.remove(id)
    }
    fn documents(&self) -> Box<dyn Iterator<Item = &Document> + '_> {
        Box::new(self.documents.values())
    }
}

/// Where the index came from when documents were restored with [`Workspace::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexOrigin {
    /// The snapshot given, which covered exactly these documents.
    Snapshot,
    /// The documents themselves; with why the snapshot given, if any, was not used.
    Documents(Option<SnapshotError>),
}

/// What [`Workspace::restore`] did.
#[derive(Debug)]
pub struct Restored {
    /// Where the index came from.
    pub index: IndexOrigin,
    /// Documents refused, as [`Workspace::put`] would refuse them, and why.
    pub refused: Vec<(DocId, WorkspaceError)>,
}

/// Documents plus their search index.
pub struct Workspace {
    store: Box<dyn DocumentStore>,
    sources: BTreeSet<String>,
    index: SearchIndex,
}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workspace")
            .field("sources", &self.sources)
            .field("documents", &self.index.len())
            .finish_non_exhaustive()
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::load(Box::new(MemoryStore::default()))
    }
}

impl Workspace {
    /// Opens a store and indexes every document in it. A stored document that no longer passes
    /// the workspace's checks is still indexed: it is the person's data, and checks guard writes.
    pub fn load(store: Box<dyn DocumentStore>) -> Self {
        let mut index = SearchIndex::new();
        let mut sources: BTreeSet<String> = store.sources().into_iter().collect();
        for doc in store.documents() {
            sources.insert(doc.source.clone());
            index.upsert(&doc.id, &doc.source, &doc.title, &doc.body);
        }
        Self {
            store,
            sources,
            index,
        }
    }

    /// Adds a source (a no-op if it exists), checking its name.
    pub fn add_source(&mut self, name: &str) -> Result<(), WorkspaceError> {
        if name.is_empty()
            || name.len() > MAX_SOURCE_NAME_BYTES
            || name.chars().any(char::is_control)
        {
            return Err(WorkspaceError::BadSourceName);
        }
        if self.sources.insert(name.to_owned()) {
            self.store.put_source(name);
        }
        Ok(())
    }

    /// Whether a source of that name exists.
    pub fn has_source(&self, name: &str) -> bool {
        self.sources.contains(name)
    }

    /// Source names in order.
    pub fn sources(&self) -> impl Iterator<Item = &str> {
        self.sources.iter().map(String::as_str)
    }

    /// Adds or replaces a document (its source must exist) and re-indexes it.
    pub fn put(&mut self, document: Document) -> Result<(), WorkspaceError> {
        self.check(&document)?;
        self.index.upsert(
            &document.id,
            &document.source,
            &document.title,
            &document.body,
        );
        self.store.put(document);
        Ok(())
    }

    /// Adds kept documents (checked as [`Workspace::put`] checks them) and indexes them from
    /// `snapshot` when it is one [`Workspace::index_snapshot`] made of exactly the documents the
    /// workspace then holds; otherwise from the documents' text, saying why. Either way the
    /// index matches the documents: a snapshot of other, older or damaged data is never used.
    pub fn restore(&mut self, documents: Vec<Document>, snapshot: Option<&[u8]>) -> Restored {
        let mut refused = Vec::new();
        let mut added = Vec::with_capacity(documents.len());
        for document in documents {
            match self.check(&document) {
                Ok(()) => {
                    added.push(document.id.clone());
                    // A second copy of an id replaces the first, as `put` would.
                    self.store.put(document);
                }
                Err(error) => refused.push((document.id, error)),
            }
        }
        let problem = match snapshot.map(|bytes| self.index_from_snapshot(bytes)) {
            Some(Ok(index)) => {
                self.index = index;
                return Restored {
                    index: IndexOrigin::Snapshot,
                    refused,
                };
            }
            Some(Err(error)) => Some(error),
            None => None,
        };
        for id in added {
            if let Some(doc) = self.store.get(&id) {
                self.index
                    .upsert(&doc.id, &doc.source, &doc.title, &doc.body);
            }
        }
        Restored {
            index: IndexOrigin::Documents(problem),
            refused,
        }
    }

    fn index_from_snapshot(&self, bytes: &[u8]) -> Result<SearchIndex, SnapshotError> {
        let index = SearchIndex::from_snapshot(bytes, &self.documents_digest())?;
        // The digest already says these are the documents; this only guards against a snapshot
        // written wrongly, cheaply.
        let covers_them = index.len() == self.store.documents().count()
            && self
                .store
                .documents()
                .all(|d| index.holds(&d.id, &d.source));
        covers_them.then_some(index).ok_or(SnapshotError::Damaged)
    }

    /// The search index as bytes for the host to keep, stamped with a digest of the documents
    /// it covers; [`Workspace::restore`] uses it only for those same documents.
    pub fn index_snapshot(&self) -> Vec<u8> {
        self.index.snapshot(&self.documents_digest())
    }

    /// SHA-256 over every document's id, source, title and body (what the index depends on),
    /// in id order, each field length-prefixed.
    fn documents_digest(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(b"sealpost index documents\0");
        for doc in self.store.documents() {
            for field in [doc.id.as_str(), &doc.source, &doc.title, &doc.body] {
                hasher.update((field.len() as u64).to_le_bytes());
                hasher.update(field.as_bytes());
            }
        }
        hasher.finalize().into()
    }

    fn check(&self, document: &Document) -> Result<(), WorkspaceError> {
        if !self.sources.contains(&document.source) {
            return Err(WorkspaceError::NoSuchSource(document.source.clone()));
        }
        if document.title.len() > MAX_TITLE_BYTES {
            return Err(WorkspaceError::TitleTooLong);
        }
        if document.body.len() > MAX_BODY_BYTES {
            return Err(WorkspaceError::BodyTooLarge);
        }
        Ok(())
    }

    /// Removes a document from the store and the index, returning it if it existed.
    pub fn remove(&mut self, id: &DocId) -> Option<Document> {
        self.index.remove(id);
        self.store.remove(id)
    }

    /// The document with this id, if any.
    pub fn get(&self, id: &DocId) -> Option<&Document> {
        self.store.get(id)
    }

    /// Every document, in id order.
    pub fn documents(&self) -> impl Iterator<Item = &Document> {
        self.store.documents()
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds no document.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Ranks documents in sources `allow_source` accepts; see [`SearchIndex::search`]. The query
    /// is parsed and scored over those sources alone, so the rest of the workspace cannot
    /// change the answer.
    pub fn search(
        &self,
        query: &str,
        allow_source: impl Fn(&str) -> bool,
        limit: usize,
    ) -> (Query, Vec<Hit>) {
        let filter = self.index.source_filter(allow_source);
        let query = Query::parse(query, &self.index, &filter);
        let hits = self.index.search(&query, &filter, limit);
        (query, hits)
    }

    /// The snippet of `doc`'s body for `query` (from [`Workspace::search`]): built from where
    /// the index says the query's terms sit, which spares tokenising the body; by tokenising it
    /// if the index and the body disagree.
    pub fn snippet(&self, doc: &Document, query: &Query) -> Snippet {
        self.index
            .body_places(&doc.id, &query.highlight)
            .and_then(|places| snippet_at(&doc.body, &places))
            .unwrap_or_else(|| snippet(&doc.body, &self.index.term_texts(&query.highlight)))
    }
}
