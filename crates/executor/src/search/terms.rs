//! The index's term dictionary: every term's text is kept once, in one buffer, numbered in the
//! order terms were first seen. A hash table of ids finds a term by its text; a list of ids in
//! dictionary order (plus a short unsorted tail of recent terms) lists the terms a prefix starts.
//!
//! One copy of each term instead of two (a `HashMap<String, u32>` for lookups beside a
//! `BTreeMap<String, u32>` for prefixes), and no allocation per term: the dictionary of a
//! 40,000-term workspace is about 1 MB instead of about 4.5 MB.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

/// Terms added since the dictionary-order list was last merged; a prefix search scans them, so
/// they stay few, and merging them costs one pass over the list per this many new terms.
const MAX_UNSORTED_TERMS: usize = 1024;

/// A set of terms, each with a dense id.
#[derive(Default, Clone)]
pub(crate) struct Terms {
    /// Every term's text, one after another, in id order.
    text: String,
    /// Where each term's text ends in `text`; it starts where the previous one ends.
    ends: Vec<u32>,
    /// Ids, hashed by their term's text.
    table: HashTable<u32>,
    /// Ids in dictionary (byte) order, except those in `unsorted`.
    sorted: Vec<u32>,
    /// Ids added since `sorted` was last merged, in id order.
    unsorted: Vec<u32>,
    /// Keyed per dictionary where the platform has randomness, as std's `HashMap` is.
    hasher: RandomState,
}

impl fmt::Debug for Terms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Terms")
            .field("terms", &self.ends.len())
            .field("bytes", &self.text.len())
            .finish_non_exhaustive()
    }
}

/// The text of term `id`, given the dictionary's buffer and ends (split out so the hash table
/// can be borrowed mutably beside them).
fn text_of<'a>(text: &'a str, ends: &[u32], id: u32) -> &'a str {
    let end = ends[id as usize] as usize;
    let start = match id {
        0 => 0,
        _ => ends[id as usize - 1] as usize,
    };
    &text[start..end]
}

impl Terms {
    /// How many terms there are (ids run from 0 to this, exclusive).
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The text of term `id`.
    pub(crate) fn text(&self, id: u32) -> &str {
        text_of(&self.text, &self.ends, id)
    }

    /// The id of `term`, if it is in the dictionary.
    pub(crate) fn get(&self, term: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(term);
        self.table.find(hash, |&id| self.text(id) == term).copied()
    }

    /// The id of `term`, added if it is new. `None` when no id is left (4 billion terms).
    pub(crate) fn intern(&mut self, term: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(term);
        let Self {
            text,
            ends,
            table,
            hasher,
            ..
        } = self;
        if let Some(&id) = table.find(hash, |&id| text_of(text, ends, id) == term) {
            return Some(id);
        }
        // The sequence encoding adds one to an id, so the last id is never handed out.
        let id = u32::try_from(ends.len()).ok().filter(|&id| id < u32::MAX)?;
        let end = u32::try_from(text.len() + term.len()).ok()?;
        text.push_str(term);
        ends.push(end);
        table.insert_unique(hash, id, |&id| hasher.hash_one(text_of(text, ends, id)));
        self.unsorted.push(id);
        if self.unsorted.len() >= MAX_UNSORTED_TERMS {
            self.merge_unsorted();
        }
        Some(id)
    }

    fn compare(&self, a: u32, b: u32) -> Ordering {
        self.text(a).cmp(self.text(b))
    }

    /// Moves the recent terms into the dictionary-order list.
    fn merge_unsorted(&mut self) {
        let mut recent = std::mem::take(&mut self.unsorted);
        recent.sort_unstable_by(|&a, &b| self.compare(a, b));
        let old = std::mem::take(&mut self.sorted);
        let mut merged = Vec::with_capacity(old.len() + recent.len());
        let (mut i, mut j) = (0, 0);
        while i < old.len() && j < recent.len() {
            if self.compare(old[i], recent[j]) == Ordering::Less {
                merged.push(old[i]);
                i += 1;
            } else {
                merged.push(recent[j]);
                j += 1;
            }
        }
        merged.extend_from_slice(&old[i..]);
        merged.extend_from_slice(&recent[j..]);
        self.sorted = merged;
    }

    /// The terms starting with `prefix`, in dictionary order, with their ids.
    pub(crate) fn with_prefix<'a>(
        &'a self,
        prefix: &str,
    ) -> impl Iterator<Item = (u32, &'a str)> + use<'a> {
        // Terms starting with a prefix are side by side in dictionary order.
        let from = self.sorted.partition_point(|&id| self.text(id) < prefix);
        let len = self.sorted[from..].partition_point(|&id| self.text(id).starts_with(prefix));
        let mut sorted = self.sorted[from..from + len].iter().copied().peekable();
        let mut recent: Vec<u32> = self
            .unsorted
            .iter()
            .copied()
            .filter(|&id| self.text(id).starts_with(prefix))
            .collect();
        recent.sort_unstable_by(|&a, &b| self.compare(a, b));
        let mut recent = recent.into_iter().peekable();
        std::iter::from_fn(move || {
            let id = match (sorted.peek(), recent.peek()) {
                (Some(&a), Some(&b)) if self.compare(a, b) == Ordering::Greater => recent.next(),
                (Some(_), _) => sorted.next(),
                (None, _) => recent.next(),
            }?;
            Some((id, self.text(id)))
        })
    }

    /// Every term's text in id order, for a snapshot.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.ends.len() as u32).map(|id| self.text(id))
    }

    /// A dictionary of `terms`, numbered in order. `None` if a term repeats or there are too
    /// many: a snapshot holding that is damaged.
    pub(crate) fn from_ordered<'a>(terms: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let mut dictionary = Terms::default();
        for (expected, term) in terms.into_iter().enumerate() {
            if dictionary.intern(term)? as usize != expected {
                return None;
            }
        }
        dictionary.merge_unsorted();
        Some(dictionary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_stable() {
        let mut terms = Terms::default();
        assert_eq!(terms.intern("key"), Some(0));
        assert_eq!(terms.intern("rotat"), Some(1));
        assert_eq!(terms.intern("key"), Some(0));
        assert_eq!(terms.get("rotat"), Some(1));
        assert_eq!(terms.get("absent"), None);
        assert_eq!(terms.text(1), "rotat");
        assert_eq!(terms.len(), 2);
    }

    #[test]
    fn prefixes_list_in_dictionary_order_across_the_sorted_list_and_the_recent_tail() {
        let mut terms = Terms::default();
        // Enough terms to merge the tail a few times, then some left in it.
        let words: Vec<String> = (0..3 * MAX_UNSORTED_TERMS + 17)
            .map(|n| format!("w{:05}", (n * 7919) % 100_000))
            .collect();
        for word in &words {
            terms.intern(word);
        }
        let mut expected: Vec<&str> = words
            .iter()
            .map(String::as_str)
            .filter(|w| w.starts_with("w1"))
            .collect();
        expected.sort_unstable();
        let listed: Vec<&str> = terms.with_prefix("w1").map(|(_, t)| t).collect();
        assert_eq!(listed, expected);
        for (id, text) in terms.with_prefix("w2") {
            assert_eq!(terms.text(id), text);
        }
        assert_eq!(terms.with_prefix("x").count(), 0);
    }

    #[test]
    fn a_dictionary_rebuilt_in_id_order_keeps_the_ids() {
        let mut terms = Terms::default();
        for word in ["b", "a", "c"] {
            terms.intern(word);
        }
        let rebuilt = Terms::from_ordered(terms.iter()).expect("distinct terms");
        assert_eq!(rebuilt.get("a"), Some(1));
        let listed: Vec<&str> = rebuilt.with_prefix("").map(|(_, t)| t).collect();
        assert_eq!(listed, ["a", "b", "c"]);
        assert!(Terms::from_ordered(["a", "a"]).is_none());
    }
}
