//! Parses a search query into clauses the index can score.
//!
//! Syntax, kept small enough to explain in one line of a tool description: words are matched
//! after stemming; `"quoted words"` must appear in that order; `word*` also matches every term
//! that starts with `word`. A word that matches no term at all is tried as a prefix, so a
//! half-typed word still finds something.
//!
//! Whether a term exists and what a prefix expands to are decided over the documents of the
//! search's source filter only: a term found only elsewhere must not change which clauses a
//! query has, or which documents it returns.

use unicode_segmentation::UnicodeSegmentation;

use super::index::{SearchIndex, SourceFilter};
use super::tokenize::{fold_word, stem};
use crate::limits::{MAX_PREFIX_EXPANSIONS, MAX_TOKEN_BYTES, MIN_PREFIX_CHARS};

/// Most words of one query that are scored (each clause takes one bit of a `u64`).
const MAX_CLAUSES: usize = 64;

/// One query word: a document matches it through any of `terms` (its exact stem, or the terms
/// its prefix expands to), and scores by the best of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    pub terms: Vec<u32>,
    /// Whether the word matched only through prefix expansion.
    pub expanded: bool,
    pub in_phrase: bool,
}

/// A parsed query, resolved against one index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// The scored words, at most 64.
    pub clauses: Vec<Clause>,
    /// Quoted phrases as term sequences; each must appear in a matching document.
    pub phrases: Vec<Vec<u32>>,
    /// The ids of the index terms a snippet should highlight, sorted.
    pub highlight: Vec<u32>,
}

impl Query {
    /// Parses `text` against the documents of `index` that `filter` allows. A quoted phrase with
    /// a word none of them holds can match nothing, so the whole query then matches nothing.
    pub fn parse(text: &str, index: &SearchIndex, filter: &SourceFilter) -> Self {
        let mut query = Query::default();
        let mut impossible = false;
        for (position, segment) in text.split('"').enumerate() {
            let quoted = position % 2 == 1;
            if quoted {
                let mut phrase = Vec::new();
                for word in segment.unicode_words() {
                    match query.add_word(word, false, true, index, filter) {
                        Some(term) => phrase.push(term),
                        None => impossible = true,
                    }
                }
                if phrase.len() > 1 {
                    query.phrases.push(phrase);
                }
                continue;
            }
            for chunk in segment.split_whitespace() {
                let explicit_prefix = chunk.ends_with('*');
                let words: Vec<&str> = chunk.unicode_words().collect();
                for (i, word) in words.iter().enumerate() {
                    let prefix = explicit_prefix && i + 1 == words.len();
                    query.add_word(word, prefix, false, index, filter);
                }
            }
        }
        if impossible {
            query.clauses.clear();
        }
        query.highlight.sort_unstable();
        query.highlight.dedup();
        query
    }

    /// Bits of the clauses every match must have (the words of quoted phrases).
    pub fn required_mask(&self) -> u64 {
        self.clauses
            .iter()
            .enumerate()
            .filter(|(_, clause)| clause.in_phrase)
            .fold(0, |mask, (index, _)| mask | (1 << index))
    }

    /// For a plain query of several exact words, their terms in order: documents holding them
    /// side by side earn a bonus, so "exact phrase" ranking works without quotes too.
    pub fn adjacent_words(&self) -> Option<Vec<u32>> {
        if self.clauses.len() < 2 || !self.phrases.is_empty() {
            return None;
        }
        self.clauses
            .iter()
            .map(|clause| match clause.terms[..] {
                [term] if !clause.expanded => Some(term),
                _ => None,
            })
            .collect()
    }

    /// Adds one word as a clause; returns its exact term when the index has it.
    fn add_word(
        &mut self,
        word: &str,
        explicit_prefix: bool,
        in_phrase: bool,
        index: &SearchIndex,
        filter: &SourceFilter,
    ) -> Option<u32> {
        if word.len() > MAX_TOKEN_BYTES || self.clauses.len() == MAX_CLAUSES {
            return None;
        }
        let mut folded = String::new();
        fold_word(word, &mut folded);
        if folded.is_empty() {
            return None;
        }
        let stemmed = stem(&folded).into_owned();
        let exact = index.term_id(&stemmed, filter);
        let mut terms: Vec<u32> = exact.into_iter().collect();
        let mut expanded = false;
        let try_prefix = explicit_prefix
            || (exact.is_none() && !in_phrase && folded.chars().count() >= MIN_PREFIX_CHARS);
        if try_prefix {
            for term in index.terms_with_prefix(&folded, MAX_PREFIX_EXPANSIONS, filter) {
                if Some(term) != exact {
                    terms.push(term);
                    self.highlight.push(term);
                    expanded = exact.is_none();
                }
            }
        }
        if terms.is_empty() {
            return None;
        }
        if let Some(exact) = exact {
            self.highlight.push(exact);
        }
        self.clauses.push(Clause {
            terms,
            expanded,
            in_phrase,
        });
        exact
    }
}
