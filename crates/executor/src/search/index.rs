//! The ranked full-text index over the workspace: an inverted index scored with BM25F (title and
//! body fields, the title weighted up), kept up to date one document at a time.
//!
//! Each document also keeps its term sequence (title, a separator, body; varint-encoded, see
//! `sequence.rs`), which is what exact phrases are checked against and what lets a document be
//! removed without rescanning its text.
//!
//! Every statistic a search depends on (the document count, the average field lengths, a term's
//! document frequency, whether a term occurs at all, what a prefix expands to) is taken over the
//! sources of the search's [`SourceFilter`] only. Documents outside it then change nothing in an
//! answer, not even a score, which is what lets an ungranted source look exactly like no source.

use std::collections::{HashMap, HashSet};

use super::query::Query;
use super::sequence::{self, EncodedPhrase, FIELD_SEPARATOR};
use super::snippet::Place;
use super::terms::Terms;
use super::tokenize::for_each_term;
use crate::workspace::DocId;

/// BM25 term-frequency saturation.
const K1: f32 = 1.2;
/// Length normalisation of the body field.
const B_BODY: f32 = 0.75;
/// Length normalisation of the title field (titles are short and vary less).
const B_TITLE: f32 = 0.5;
/// How much one title occurrence counts against one body occurrence.
const TITLE_WEIGHT: f32 = 3.0;
/// Score multiplier for a multi-word query whose words appear next to each other, in order.
const ADJACENT_PHRASE_BONUS: f32 = 1.5;
/// How many of the best candidates are re-checked for the adjacency bonus.
const ADJACENCY_RERANK_DEPTH: usize = 200;
/// Source id of a removed document's slot: never allowed (no filter has that many sources).
const DEAD: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
pub(super) struct Posting {
    pub(super) slot: u32,
    pub(super) title_tf: u16,
    pub(super) body_tf: u16,
}

#[derive(Debug)]
pub(super) struct IndexedDoc {
    pub(super) id: DocId,
    /// Title terms, a separator, body terms (`sequence.rs`).
    pub(super) sequence: Box<[u8]>,
}

/// The sources one search ranges over, resolved against an index's source numbering. Built by
/// [`SearchIndex::source_filter`] and given to both [`Query::parse`] and [`SearchIndex::search`],
/// so parsing and ranking see the same documents.
#[derive(Debug, Clone)]
pub struct SourceFilter {
    allowed: Vec<bool>,
    /// Every source is allowed: a term's document frequency is then its postings' length, with
    /// no pass over them.
    all: bool,
}

impl SourceFilter {
    fn allows(&self, source: u32) -> bool {
        // A source numbered after the filter was built, or a dead slot, is outside it.
        self.allowed.get(source as usize).copied().unwrap_or(false)
    }
}

/// One ranked hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The matching document.
    pub doc_id: DocId,
    /// Its BM25F score; higher ranks first.
    pub score: f32,
}

/// The inverted index. Slots number documents in insertion order; a removed or replaced document
/// leaves a dead slot until [`SearchIndex::compact`] renumbers (postings stay sorted by slot, so
/// removal is a binary search per term).
#[derive(Debug, Default)]
pub struct SearchIndex {
    pub(super) terms: Terms,
    /// Per term id, the documents holding it, by slot.
    pub(super) postings: Vec<Vec<Posting>>,
    pub(super) docs: Vec<Option<IndexedDoc>>,
    pub(super) slot_source: Vec<u32>,
    pub(super) slot_title_len: Vec<u32>,
    pub(super) slot_body_len: Vec<u32>,
    pub(super) slot_of: HashMap<DocId, u32>,
    pub(super) source_ids: HashMap<String, u32>,
    pub(super) live_docs: u32,
    /// Live documents and their summed title and body lengths, per source id: the collection
    /// statistics of any set of sources are then a sum over those sources, not over documents.
    pub(super) source_docs: Vec<u32>,
    pub(super) source_title_len: Vec<u64>,
    pub(super) source_body_len: Vec<u64>,
}

impl SearchIndex {
    /// An index holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of documents indexed.
    pub fn len(&self) -> usize {
        self.live_docs as usize
    }

    /// Whether no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.live_docs == 0
    }

    /// Whether the document is indexed, in that source.
    pub fn holds(&self, id: &DocId, source: &str) -> bool {
        self.slot_of.get(id).is_some_and(|&slot| {
            self.source_ids.get(source) == Some(&self.slot_source[slot as usize])
        })
    }

    /// Resolves `allow_source` over the sources this index knows.
    pub fn source_filter(&self, allow_source: impl Fn(&str) -> bool) -> SourceFilter {
        let mut allowed = vec![false; self.source_ids.len()];
        for (name, &id) in &self.source_ids {
            allowed[id as usize] = allow_source(name);
        }
        let all = allowed.iter().all(|&a| a);
        SourceFilter { allowed, all }
    }

    /// The term's id when it occurs in a document `filter` allows.
    pub(crate) fn term_id(&self, term: &str, filter: &SourceFilter) -> Option<u32> {
        let id = self.terms.get(term)?;
        self.occurs(id, filter).then_some(id)
    }

    /// Terms starting with `prefix`, at most `max`, in dictionary order, that occur in a document
    /// `filter` allows. Terms only outside it are skipped before counting towards `max`, so they
    /// cannot push an allowed term out of the expansion.
    pub(crate) fn terms_with_prefix(
        &self,
        prefix: &str,
        max: usize,
        filter: &SourceFilter,
    ) -> Vec<u32> {
        self.terms
            .with_prefix(prefix)
            .map(|(id, _)| id)
            .filter(|&id| self.occurs(id, filter))
            .take(max)
            .collect()
    }

    fn occurs(&self, term_id: u32, filter: &SourceFilter) -> bool {
        let list = &self.postings[term_id as usize];
        if self.allows_every_source(filter) {
            return !list.is_empty();
        }
        list.iter().any(|p| self.slot_allowed(p.slot, filter))
    }

    /// How many documents `filter` allows hold the term.
    fn document_frequency(&self, term_id: u32, filter: &SourceFilter) -> usize {
        let list = &self.postings[term_id as usize];
        if self.allows_every_source(filter) {
            return list.len();
        }
        list.iter()
            .filter(|p| self.slot_allowed(p.slot, filter))
            .count()
    }

    /// Whether `filter` allows every source this index holds now (a filter built before a
    /// source was added does not allow that one).
    fn allows_every_source(&self, filter: &SourceFilter) -> bool {
        filter.all && filter.allowed.len() == self.source_docs.len()
    }

    fn slot_allowed(&self, slot: u32, filter: &SourceFilter) -> bool {
        filter.allows(self.slot_source[slot as usize])
    }

    /// The text of each of the terms `ids`, as [`crate::search::snippet`] takes them.
    pub(crate) fn term_texts(&self, ids: &[u32]) -> HashSet<String> {
        ids.iter()
            .map(|&id| self.terms.text(id).to_owned())
            .collect()
    }

    /// Where the terms `wanted` (sorted ids) sit in the body of document `id`, in order. `None`
    /// if the document is not indexed or its sequence does not decode.
    pub(crate) fn body_places(&self, id: &DocId, wanted: &[u32]) -> Option<Vec<Place<'_>>> {
        let slot = *self.slot_of.get(id)?;
        let doc = self.docs.get(slot as usize)?.as_ref()?;
        let body = sequence::body(&doc.sequence)?;
        let mut places = Vec::new();
        for (word, term_id) in sequence::terms(body).enumerate() {
            let term_id = term_id?;
            if let Ok(term_number) = wanted.binary_search(&term_id) {
                places.push(Place {
                    word: u32::try_from(word).ok()?,
                    term: self.terms.text(term_id),
                    term_number,
                });
            }
        }
        Some(places)
    }

    /// Adds a document, or replaces the indexed text of one with the same id.
    pub fn upsert(&mut self, id: &DocId, source: &str, title: &str, body: &str) {
        self.remove(id);
        let slot = u32::try_from(self.docs.len()).expect("fewer than 4 billion index slots");
        let source_id = self.source_id(source);

        let mut sequence = Vec::with_capacity(body.len() / 4 + 8);
        let mut counts: HashMap<u32, (u16, u16)> = HashMap::new();
        let mut title_len = 0u32;
        for_each_term(title, |_, _, term| {
            let term_id = self.intern(term);
            sequence::push_term(&mut sequence, term_id);
            title_len += 1;
            let entry = counts.entry(term_id).or_default();
            entry.0 = entry.0.saturating_add(1);
        });
        sequence.push(FIELD_SEPARATOR);
        let mut body_len = 0u32;
        for_each_term(body, |_, _, term| {
            let term_id = self.intern(term);
            sequence::push_term(&mut sequence, term_id);
            body_len += 1;
            let entry = counts.entry(term_id).or_default();
            entry.1 = entry.1.saturating_add(1);
        });

        for (term_id, (title_tf, body_tf)) in counts {
            self.postings[term_id as usize].push(Posting {
                slot,
                title_tf,
                body_tf,
            });
        }
        self.docs.push(Some(IndexedDoc {
            id: id.clone(),
            sequence: sequence.into_boxed_slice(),
        }));
        self.slot_source.push(source_id);
        self.slot_title_len.push(title_len);
        self.slot_body_len.push(body_len);
        self.slot_of.insert(id.clone(), slot);
        self.live_docs += 1;
        let source = source_id as usize;
        self.source_docs[source] += 1;
        self.source_title_len[source] += u64::from(title_len);
        self.source_body_len[source] += u64::from(body_len);
    }

    /// Removes a document from the index. Returns whether it was there.
    pub fn remove(&mut self, id: &DocId) -> bool {
        let Some(slot) = self.slot_of.remove(id) else {
            return false;
        };
        let doc = self.docs[slot as usize]
            .take()
            .expect("a mapped slot holds a document");
        // The index wrote this sequence, so every value decodes.
        let mut terms: Vec<u32> = sequence::terms(&doc.sequence).flatten().collect();
        terms.sort_unstable();
        terms.dedup();
        for term_id in terms {
            let list = &mut self.postings[term_id as usize];
            if let Ok(at) = list.binary_search_by_key(&slot, |p| p.slot) {
                list.remove(at);
            }
        }
        self.live_docs -= 1;
        let source = self.slot_source[slot as usize] as usize;
        self.source_docs[source] -= 1;
        self.source_title_len[source] -= u64::from(self.slot_title_len[slot as usize]);
        self.source_body_len[source] -= u64::from(self.slot_body_len[slot as usize]);
        self.slot_source[slot as usize] = DEAD;
        if self.docs.len() > 1024 && self.docs.len() > 2 * self.live_docs as usize {
            self.compact();
        }
        true
    }

    /// Renumbers slots so dead ones stop costing memory and scoring time. Order is kept, so
    /// postings stay sorted.
    pub fn compact(&mut self) {
        let mut new_slot = vec![DEAD; self.docs.len()];
        let mut next = 0u32;
        for (old, doc) in self.docs.iter().enumerate() {
            if doc.is_some() {
                new_slot[old] = next;
                next += 1;
            }
        }
        for list in &mut self.postings {
            for posting in list.iter_mut() {
                posting.slot = new_slot[posting.slot as usize];
            }
        }
        let keep = |old: usize| new_slot[old] != DEAD;
        self.slot_source = retain_by_slot(&self.slot_source, keep);
        self.slot_title_len = retain_by_slot(&self.slot_title_len, keep);
        self.slot_body_len = retain_by_slot(&self.slot_body_len, keep);
        self.docs = std::mem::take(&mut self.docs)
            .into_iter()
            .flatten()
            .map(Some)
            .collect();
        for slot in self.slot_of.values_mut() {
            *slot = new_slot[*slot as usize];
        }
    }

    /// Ranks the documents `filter` allows against `query` (parsed with the same filter), best
    /// first, at most `limit`. Ties are broken by document id so the order is reproducible.
    pub fn search(&self, query: &Query, filter: &SourceFilter, limit: usize) -> Vec<Hit> {
        let (mut docs, mut title_len, mut body_len) = (0u64, 0u64, 0u64);
        for source in 0..self.source_docs.len() {
            if filter.allows(source as u32) {
                docs += u64::from(self.source_docs[source]);
                title_len += self.source_title_len[source];
                body_len += self.source_body_len[source];
            }
        }
        if query.clauses.is_empty() || limit == 0 || docs == 0 {
            return Vec::new();
        }
        let is_allowed = |slot: u32| self.slot_allowed(slot, filter);

        // Integer sums divided once: the same allowed documents give bit-identical statistics
        // whatever else the index holds.
        let n = docs as f32;
        let avg_title = (title_len as f32 / n).max(1.0);
        let avg_body = (body_len as f32 / n).max(1.0);
        let weight = |p: &Posting| {
            let title_norm =
                1.0 - B_TITLE + B_TITLE * self.slot_title_len[p.slot as usize] as f32 / avg_title;
            let body_norm =
                1.0 - B_BODY + B_BODY * self.slot_body_len[p.slot as usize] as f32 / avg_body;
            let tf = TITLE_WEIGHT * f32::from(p.title_tf) / title_norm
                + f32::from(p.body_tf) / body_norm;
            tf / (K1 + tf)
        };

        let mut scores = vec![0f32; self.docs.len()];
        let mut matched = vec![0u64; self.docs.len()];
        // Per-clause best score of a document over the clause's alternatives (prefix
        // expansions), dense and reset through `touched` so no map is built per query.
        let mut best_alternative = vec![0f32; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for (index, clause) in query.clauses.iter().enumerate() {
            let bit = 1u64 << index;
            if let [term_id] = clause.terms[..] {
                // One term: no alternatives to take the best of.
                let list = &self.postings[term_id as usize];
                let idf = idf(n, self.document_frequency(term_id, filter));
                for posting in list.iter().filter(|p| is_allowed(p.slot)) {
                    scores[posting.slot as usize] += idf * weight(posting);
                    matched[posting.slot as usize] |= bit;
                }
                continue;
            }
            for &term_id in &clause.terms {
                let list = &self.postings[term_id as usize];
                let idf = idf(n, self.document_frequency(term_id, filter));
                for posting in list.iter().filter(|p| is_allowed(p.slot)) {
                    let best = &mut best_alternative[posting.slot as usize];
                    if *best == 0.0 {
                        touched.push(posting.slot);
                    }
                    *best = best.max(idf * weight(posting));
                }
            }
            for slot in touched.drain(..) {
                let best = std::mem::take(&mut best_alternative[slot as usize]);
                scores[slot as usize] += best;
                matched[slot as usize] |= bit;
            }
        }

        let required = query.required_mask();
        let phrases: Vec<EncodedPhrase> = query
            .phrases
            .iter()
            .map(|phrase| self.encode_phrase(phrase))
            .collect();
        let mut candidates: Vec<(u32, f32)> = scores
            .iter()
            .enumerate()
            .filter(|&(slot, &score)| score > 0.0 && matched[slot] & required == required)
            .map(|(slot, &score)| (slot as u32, score))
            .filter(|&(slot, _)| {
                phrases
                    .iter()
                    .all(|phrase| phrase.occurs_in(&self.doc(slot).sequence))
            })
            .collect();

        if let Some(words) = query.adjacent_words() {
            let words = self.encode_phrase(&words);
            self.sort_candidates(&mut candidates);
            for (slot, score) in candidates.iter_mut().take(ADJACENCY_RERANK_DEPTH) {
                if words.occurs_in(&self.doc(*slot).sequence) {
                    *score *= ADJACENT_PHRASE_BONUS;
                }
            }
        }
        self.sort_candidates(&mut candidates);
        candidates.truncate(limit);
        candidates
            .into_iter()
            .map(|(slot, score)| Hit {
                doc_id: self.doc(slot).id.clone(),
                score,
            })
            .collect()
    }

    fn sort_candidates(&self, candidates: &mut [(u32, f32)]) {
        candidates.sort_unstable_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.doc(a.0).id.cmp(&self.doc(b.0).id))
        });
    }

    fn doc(&self, slot: u32) -> &IndexedDoc {
        self.docs[slot as usize]
            .as_ref()
            .expect("a scored slot holds a document")
    }

    /// `phrase` encoded for matching, anchored on its rarest term: most positions of a
    /// sequence then fail on one byte comparison, which is far cheaper than comparing every
    /// window of a long document.
    fn encode_phrase(&self, phrase: &[u32]) -> EncodedPhrase {
        let anchor = phrase
            .iter()
            .enumerate()
            .min_by_key(|(_, term)| self.postings[**term as usize].len())
            .map_or(0, |(at, _)| at);
        EncodedPhrase::new(phrase, anchor)
    }

    fn intern(&mut self, term: &str) -> u32 {
        let id = self.terms.intern(term).expect("fewer than 4 billion terms");
        if id as usize == self.postings.len() {
            self.postings.push(Vec::new());
        }
        id
    }

    fn source_id(&mut self, source: &str) -> u32 {
        if let Some(&id) = self.source_ids.get(source) {
            return id;
        }
        let id = u32::try_from(self.source_docs.len()).expect("fewer than 4 billion sources");
        self.source_ids.insert(source.to_owned(), id);
        self.source_docs.push(0);
        self.source_title_len.push(0);
        self.source_body_len.push(0);
        id
    }
}

/// BM25's inverse document frequency: rare terms weigh more, and never below zero.
fn idf(live_docs: f32, document_frequency: usize) -> f32 {
    let df = document_frequency as f32;
    (1.0 + (live_docs - df + 0.5) / (df + 0.5)).ln()
}

fn retain_by_slot(values: &[u32], keep: impl Fn(usize) -> bool) -> Vec<u32> {
    values
        .iter()
        .enumerate()
        .filter(|&(slot, _)| keep(slot))
        .map(|(_, &v)| v)
        .collect()
}
