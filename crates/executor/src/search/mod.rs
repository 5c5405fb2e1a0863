//! Full-text search over the workspace: tokenising, the ranked index, query parsing and
//! snippets. Nothing here knows about grants; callers pass a source filter.

mod index;
mod query;
mod sequence;
mod snapshot;
mod snippet;
mod terms;
mod tokenize;

pub use index::{Hit, SearchIndex, SourceFilter};
pub use query::Query;
pub use snapshot::{SNAPSHOT_VERSION, SnapshotError};
pub(crate) use snippet::snippet_at;
pub use snippet::{Snippet, snippet};
pub use tokenize::{fold_word, for_each_term, terms};
