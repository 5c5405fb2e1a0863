//! The read tools: search, excerpt, outline, source list. They answer from the workspace at
//! once and never change it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};

use super::{
    BuiltinAnswer, View, error_answer, no_such_document, no_such_source, structured_answer,
};
use crate::limits::{
    DEFAULT_EXCERPT_CHARS, DEFAULT_SEARCH_LIMIT, MAX_DOC_ID_BYTES, MAX_EXCERPT_CHARS,
    MAX_OUTLINE_ENTRIES, MAX_QUERY_CHARS, MAX_SEARCH_LIMIT, MAX_SOURCE_NAME_BYTES,
};
use crate::search::Snippet;

/// Search the person's workspace documents, best match first. Words match regardless of case,
/// accents and word endings; "quoted words" must appear in that order; word* matches by prefix.
/// Each result has a snippet whose `start` and `matches` are character offsets into the
/// document body (pass `start` to get_source_excerpt to read on).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchArgs {
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    query: String,
    /// Search only this source.
    #[schemars(length(min = 1, max = MAX_SOURCE_NAME_BYTES))]
    source: Option<String>,
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT), extend("default" = DEFAULT_SEARCH_LIMIT))]
    limit: Option<u64>,
}

/// One document a search found.
#[derive(Debug, Serialize, JsonSchema)]
struct SearchResult<'a> {
    doc_id: &'a str,
    source: &'a str,
    title: &'a str,
    score: f64,
    snippet: Snippet,
}

/// What a search found, best match first.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct SearchAnswer<'a> {
    query: &'a str,
    results: Vec<SearchResult<'a>>,
}

pub(super) fn search(view: &View<'_>, args: SearchArgs) -> Result<BuiltinAnswer, String> {
    if let Some(source) = &args.source
        && !view.source(source)
    {
        return Ok(no_such_source(view, source));
    }
    let limit = args.limit.unwrap_or(DEFAULT_SEARCH_LIMIT) as usize;
    let only = args.source.as_deref();
    let (query, hits) = view.workspace.search(
        &args.query,
        |source| view.grants.allows_source(source) && only.is_none_or(|only| only == source),
        limit,
    );
    let results: Vec<SearchResult<'_>> = hits
        .iter()
        .filter_map(|hit| {
            let doc = view.workspace.get(&hit.doc_id)?;
            Some(SearchResult {
                doc_id: doc.id.as_str(),
                source: &doc.source,
                title: &doc.title,
                // Three decimals: enough to compare, and no float noise in the reply.
                score: (f64::from(hit.score) * 1000.0).round() / 1000.0,
                snippet: view.workspace.snippet(doc, &query),
            })
        })
        .collect();
    Ok(structured_answer(&SearchAnswer {
        query: &args.query,
        results,
    }))
}

/// Read part of one document's body, from character offset `start` (default 0), at most
/// `max_chars` characters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExcerptArgs {
    #[schemars(length(min = 1, max = MAX_DOC_ID_BYTES))]
    doc_id: String,
    start: Option<u64>,
    #[schemars(range(min = 1, max = MAX_EXCERPT_CHARS), extend("default" = DEFAULT_EXCERPT_CHARS))]
    max_chars: Option<u64>,
}

/// Part of one document's body.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Excerpt<'a> {
    doc_id: &'a str,
    source: &'a str,
    title: &'a str,
    /// Character offsets of `text` in the body.
    start: usize,
    end: usize,
    total_chars: usize,
    /// Whether the body goes on after `end`.
    more: bool,
    text: String,
}

pub(super) fn excerpt(view: &View<'_>, args: ExcerptArgs) -> Result<BuiltinAnswer, String> {
    let Some(doc) = view.document(&args.doc_id) else {
        return Ok(no_such_document(view, &args.doc_id));
    };
    let total_chars = doc.body.chars().count();
    let start = usize::try_from(args.start.unwrap_or(0)).unwrap_or(usize::MAX);
    if start > total_chars {
        return Ok(error_answer(format!(
            "start {start} is past the end of document {:?}, which has {total_chars} characters.",
            args.doc_id
        )));
    }
    let max_chars = args.max_chars.unwrap_or(DEFAULT_EXCERPT_CHARS) as usize;
    let text: String = doc.body.chars().skip(start).take(max_chars).collect();
    let end = start + text.chars().count();
    Ok(structured_answer(&Excerpt {
        doc_id: doc.id.as_str(),
        source: &doc.source,
        title: &doc.title,
        start,
        end,
        total_chars,
        more: end < total_chars,
        text,
    }))
}

/// List the documents (id, title, length, last change) of every source this session may read,
/// or of one source.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OutlineArgs {
    #[schemars(length(min = 1, max = MAX_SOURCE_NAME_BYTES))]
    source: Option<String>,
}

/// One document of an outline.
#[derive(Debug, Serialize, JsonSchema)]
struct OutlineEntry<'a> {
    doc_id: &'a str,
    title: &'a str,
    chars: usize,
    /// When it last changed, in Unix milliseconds.
    #[schemars(with = "u64")]
    updated_at_ms: UnixMillis,
}

/// One source of an outline, with its documents.
#[derive(Debug, Serialize, JsonSchema)]
struct OutlineSource<'a> {
    name: &'a str,
    documents: Vec<OutlineEntry<'a>>,
}

/// The readable sources and their documents; at most a bounded number of documents are listed.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Outline<'a> {
    sources: Vec<OutlineSource<'a>>,
    /// Documents listed.
    listed: usize,
    /// Documents in the sources asked about.
    total: usize,
    /// Whether some were left out.
    truncated: bool,
}

pub(super) fn outline(view: &View<'_>, args: OutlineArgs) -> Result<BuiltinAnswer, String> {
    if let Some(source) = &args.source
        && !view.source(source)
    {
        return Ok(no_such_source(view, source));
    }
    let mut sources: BTreeMap<&str, Vec<OutlineEntry<'_>>> = view
        .workspace
        .sources()
        .filter(|name| view.source(name))
        .filter(|name| args.source.as_deref().is_none_or(|only| only == *name))
        .map(|name| (name, Vec::new()))
        .collect();
    let mut total = 0usize;
    let mut listed = 0usize;
    for doc in view.workspace.documents() {
        let Some(entries) = sources.get_mut(doc.source.as_str()) else {
            continue;
        };
        total += 1;
        if listed == MAX_OUTLINE_ENTRIES {
            continue;
        }
        listed += 1;
        entries.push(OutlineEntry {
            doc_id: doc.id.as_str(),
            title: &doc.title,
            chars: doc.body.chars().count(),
            updated_at_ms: doc.updated_at_ms,
        });
    }
    let sources = sources
        .into_iter()
        .map(|(name, documents)| OutlineSource { name, documents })
        .collect();
    Ok(structured_answer(&Outline {
        sources,
        listed,
        total,
        truncated: listed < total,
    }))
}

/// List the sources this session may read, with their document counts.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArgs {}

pub(super) fn list_sources(view: &View<'_>, _: NoArgs) -> Result<BuiltinAnswer, String> {
    let mut counts: BTreeMap<&str, usize> = view
        .workspace
        .sources()
        .filter(|name| view.source(name))
        .map(|name| (name, 0))
        .collect();
    for doc in view.workspace.documents() {
        if let Some(count) = counts.get_mut(doc.source.as_str()) {
            *count += 1;
        }
    }
    let sources = counts
        .into_iter()
        .map(|(name, documents)| SourceCount { name, documents })
        .collect();
    Ok(structured_answer(&Sources { sources }))
}

/// One readable source.
#[derive(Debug, Serialize, JsonSchema)]
struct SourceCount<'a> {
    name: &'a str,
    /// How many documents it holds.
    documents: usize,
}

/// The sources this session may read.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Sources<'a> {
    sources: Vec<SourceCount<'a>>,
}
