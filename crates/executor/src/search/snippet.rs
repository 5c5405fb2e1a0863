//! Picks the passage of a document body that best shows why it matched, and reports where each
//! matched word sits.
//!
//! Offsets count Unicode scalar values (characters) from the start of the body, the same unit
//! `get_source_excerpt` takes, so a caller can read on from a snippet.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::tokenize::for_each_wanted_term;
use crate::limits::SNIPPET_CHARS;

/// Characters of context kept before the first match of the chosen window.
const LEADING_CONTEXT_CHARS: usize = 40;
/// Most matches considered when choosing a window; enough for any real passage.
const MAX_MATCHES_CONSIDERED: usize = 2000;

/// A passage of a body with its highlighted words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// About [`SNIPPET_CHARS`] characters of the body around the matches.
    pub text: String,
    /// Character offset of `text` in the body.
    pub start: usize,
    /// `[start, end)` character offsets, in the body, of each matched word inside `text`.
    pub matches: Vec<[usize; 2]>,
}

/// The window of about [`SNIPPET_CHARS`] characters holding the most distinct highlighted terms
/// (then the most matches); the body's opening when nothing in it matches.
pub fn snippet(body: &str, highlight: &HashSet<String>) -> Snippet {
    let mut byte_matches: Vec<(usize, usize, usize)> = Vec::new();
    let mut term_numbers: HashMap<String, usize> = HashMap::new();
    for_each_wanted_term(body, highlight, |start, end, term| {
        if byte_matches.len() < MAX_MATCHES_CONSIDERED {
            let next = term_numbers.len();
            let number = *term_numbers.entry(term.to_owned()).or_insert(next);
            byte_matches.push((start, end, number));
        }
    });
    let matches = to_char_spans(body, &byte_matches);

    let Some((first, last)) = best_window(&matches) else {
        let text: String = body.chars().take(SNIPPET_CHARS).collect();
        return Snippet {
            text,
            start: 0,
            matches: Vec::new(),
        };
    };
    let body_chars = body.chars().count();
    let window_start = matches[first].0.saturating_sub(LEADING_CONTEXT_CHARS);
    let window_end = (window_start + SNIPPET_CHARS)
        .max(matches[last].1)
        .min(body_chars);
    let text: String = body
        .chars()
        .skip(window_start)
        .take(window_end - window_start)
        .collect();
    Snippet {
        text,
        start: window_start,
        matches: matches
            .iter()
            .filter(|(s, e, _)| *s >= window_start && *e <= window_end)
            .map(|(s, e, _)| [*s, *e])
            .collect(),
    }
}

/// Converts sorted byte spans to character spans in one pass over the body.
fn to_char_spans(body: &str, spans: &[(usize, usize, usize)]) -> Vec<(usize, usize, usize)> {
    let mut boundaries: Vec<usize> = spans.iter().flat_map(|(s, e, _)| [*s, *e]).collect();
    boundaries.sort_unstable();
    boundaries.dedup();
    let mut char_at: HashMap<usize, usize> = HashMap::with_capacity(boundaries.len());
    let mut wanted = boundaries.iter().peekable();
    for (chars, (byte, _)) in body
        .char_indices()
        .chain(std::iter::once((body.len(), ' ')))
        .enumerate()
    {
        while wanted.peek() == Some(&&byte) {
            char_at.insert(byte, chars);
            wanted.next();
        }
        if wanted.peek().is_none() {
            break;
        }
    }
    spans
        .iter()
        .map(|(s, e, term)| (char_at[s], char_at[e], *term))
        .collect()
}

/// Indices of the first and last match of the best window, if any match exists.
fn best_window(matches: &[(usize, usize, usize)]) -> Option<(usize, usize)> {
    let span = SNIPPET_CHARS - LEADING_CONTEXT_CHARS;
    let mut best: Option<(usize, usize, (usize, usize))> = None;
    for first in 0..matches.len() {
        let mut distinct: HashSet<usize> = HashSet::new();
        let mut last = first;
        for (index, m) in matches.iter().enumerate().skip(first) {
            if m.1 > matches[first].0 + span {
                break;
            }
            distinct.insert(m.2);
            last = index;
        }
        let quality = (distinct.len(), last - first + 1);
        if best.is_none_or(|(_, _, q)| quality > q) {
            best = Some((first, last, quality));
        }
    }
    best.map(|(first, last, _)| (first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn highlight(terms: &[&str]) -> HashSet<String> {
        terms.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn offsets_count_characters_and_point_at_the_words() {
        let body = "Ünïcödé first. Then the key word appears: rotation.";
        let snip = snippet(body, &highlight(&["rotat"]));
        let chars: Vec<char> = body.chars().collect();
        let [s, e] = snip.matches[0];
        assert_eq!(chars[s..e].iter().collect::<String>(), "rotation");
        let text: Vec<char> = snip.text.chars().collect();
        let local: String = text[s - snip.start..e - snip.start].iter().collect();
        assert_eq!(local, "rotation");
    }

    #[test]
    fn the_window_with_most_distinct_terms_wins() {
        let filler = "lorem ipsum ".repeat(60);
        let body = format!("alpha {filler} alpha beta gamma {filler}");
        let snip = snippet(&body, &highlight(&["alpha", "beta", "gamma"]));
        assert!(snip.text.contains("alpha beta gamma"), "{}", snip.text);
        assert_eq!(snip.matches.len(), 3);
    }

    #[test]
    fn a_body_without_matches_shows_its_opening() {
        let body = "x".repeat(10) + &" y".repeat(500);
        let snip = snippet(&body, &highlight(&["absent"]));
        assert_eq!(snip.start, 0);
        assert_eq!(snip.text.chars().count(), SNIPPET_CHARS);
        assert!(snip.matches.is_empty());
    }
}
