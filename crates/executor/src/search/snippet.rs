//! Picks the passage of a document body that best shows why it matched, and reports where each
//! matched word sits.
//!
//! Offsets count Unicode scalar values (characters) from the start of the body, the same unit
//! `get_source_excerpt` takes, so a caller can read on from a snippet.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use unicode_segmentation::UnicodeSegmentation as _;

use super::tokenize::{fold_word, for_each_wanted_term, stem};
use crate::limits::{MAX_TOKEN_BYTES, SNIPPET_CHARS};

/// Characters of context kept before the first match of the chosen window.
const LEADING_CONTEXT_CHARS: usize = 40;
/// Most matches considered when choosing a window; enough for any real passage.
const MAX_MATCHES_CONSIDERED: usize = 2000;

/// A passage of a body with its highlighted words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    around(body, &byte_matches)
}

/// A body word that holds a highlighted term, as the index has it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    /// The word's number among the body's words the tokeniser keeps.
    pub word: u32,
    /// Its term.
    pub term: &'a str,
    /// Its term's number among the highlighted terms (one per term; which one does not matter).
    pub term_number: usize,
}

/// The same snippet as [`snippet`], from where the index says the highlighted terms sit:
/// `places`, in order. Only those words are folded and stemmed, to check that each holds its
/// term; `None` if one does not (the index and the body disagree), and the caller tokenises
/// the body instead.
pub(crate) fn snippet_at(body: &str, places: &[Place<'_>]) -> Option<Snippet> {
    let places = &places[..places.len().min(MAX_MATCHES_CONSIDERED)];
    let mut byte_matches: Vec<(usize, usize, usize)> = Vec::with_capacity(places.len());
    let mut wanted = places.iter().peekable();
    let mut number = 0u32;
    let mut folded = String::new();
    for (start, word) in body.unicode_word_indices() {
        let Some(&&place) = wanted.peek() else {
            break;
        };
        // The words the tokeniser skips (`tokenize::walk`): over-long ones, and ones that fold
        // to nothing, which only a word with a non-ASCII letter can.
        if word.len() > MAX_TOKEN_BYTES {
            continue;
        }
        let folded_yet = !word.is_ascii();
        if folded_yet {
            fold_word(word, &mut folded);
            if folded.is_empty() {
                continue;
            }
        }
        if number == place.word {
            if !folded_yet {
                fold_word(word, &mut folded);
            }
            if stem(&folded) != place.term {
                return None;
            }
            byte_matches.push((start, start + word.len(), place.term_number));
            wanted.next();
        }
        number += 1;
    }
    if wanted.peek().is_some() {
        return None;
    }
    Some(around(body, &byte_matches))
}

/// The snippet around the best window of `byte_matches` (sorted byte spans, each with its
/// term's number).
fn around(body: &str, byte_matches: &[(usize, usize, usize)]) -> Snippet {
    // Character offsets are byte offsets in an ASCII body, the common case: no counting.
    let ascii = body.is_ascii();
    let matches = if ascii {
        byte_matches.to_vec()
    } else {
        to_char_spans(body, byte_matches)
    };

    let Some((first, last)) = best_window(&matches) else {
        let text: String = body.chars().take(SNIPPET_CHARS).collect();
        return Snippet {
            text,
            start: 0,
            matches: Vec::new(),
        };
    };
    let body_chars = if ascii {
        body.len()
    } else {
        body.chars().count()
    };
    let window_start = matches[first].0.saturating_sub(LEADING_CONTEXT_CHARS);
    let window_end = (window_start + SNIPPET_CHARS)
        .max(matches[last].1)
        .min(body_chars);
    let text: String = if ascii {
        body[window_start..window_end].to_owned()
    } else {
        body.chars()
            .skip(window_start)
            .take(window_end - window_start)
            .collect()
    };
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

/// Indices of the first and last match of the best window, if any match exists: of the windows
/// starting at each match and reaching `SNIPPET_CHARS - LEADING_CONTEXT_CHARS` characters on,
/// the first with the most distinct terms, then the most matches. One pass: as the window's
/// start moves on a match, its end only moves on.
fn best_window(matches: &[(usize, usize, usize)]) -> Option<(usize, usize)> {
    let span = SNIPPET_CHARS - LEADING_CONTEXT_CHARS;
    let terms = matches.iter().map(|m| m.2 + 1).max()?;
    let mut counts = vec![0u32; terms];
    let mut distinct = 0usize;
    // The window is `first..end`, `end` exclusive.
    let mut end = 0;
    let mut best: Option<(usize, usize, (usize, usize))> = None;
    for first in 0..matches.len() {
        let reach = matches[first].0 + span;
        end = end.max(first);
        while end < matches.len() && matches[end].1 <= reach {
            counts[matches[end].2] += 1;
            distinct += usize::from(counts[matches[end].2] == 1);
            end += 1;
        }
        // An empty window (a word longer than the span) still counts its one match.
        let last = end.saturating_sub(1).max(first);
        let quality = (distinct, last - first + 1);
        if best.is_none_or(|(_, _, q)| quality > q) {
            best = Some((first, last, quality));
        }
        if end > first {
            counts[matches[first].2] -= 1;
            distinct -= usize::from(counts[matches[first].2] == 0);
        }
    }
    best.map(|(first, last, _)| (first, last))
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{RngExt as _, SeedableRng as _};

    use super::*;
    use crate::search::{Query, SearchIndex};
    use crate::workspace::DocId;

    /// Words that stem, fold, repeat, run over the token cap, fold to nothing (an alphabetic
    /// combining mark starting a line is a word of its own), or are not words at all, so the
    /// index's word numbering is tested where it skips.
    const WORDS: [&str; 25] = [
        "\n\u{345}",
        "running",
        "runner",
        "ran",
        "Café",
        "cafés",
        "Ångström",
        "ﬁle",
        "files",
        "Привет",
        "東京",
        "dying",
        "die",
        "skies",
        "sky",
        "it's",
        "x",
        "42",
        "\u{301}",
        "—",
        "...",
        "key-value",
        "rotation",
        "ROTATE",
        "naïve",
    ];

    fn random_body(rng: &mut StdRng) -> String {
        let long = "z".repeat(MAX_TOKEN_BYTES + 1);
        let mut body = String::new();
        for _ in 0..rng.random_range(0..400) {
            match rng.random_range(0..40) {
                0 => body.push_str(&long),
                1 => body.push_str("\n\n"),
                _ => body.push_str(WORDS[rng.random_range(0..WORDS.len())]),
            }
            body.push(if rng.random_range(0..10) == 0 {
                ','
            } else {
                ' '
            });
        }
        body
    }

    #[test]
    fn snippets_from_the_index_are_the_snippets_from_the_body() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut index = SearchIndex::new();
        let bodies: Vec<String> = (0..300).map(|_| random_body(&mut rng)).collect();
        for (n, body) in bodies.iter().enumerate() {
            let title = WORDS[n % WORDS.len()];
            index.upsert(&DocId::new(format!("d{n}")).unwrap(), "notes", title, body);
        }
        let filter = index.source_filter(|_| true);
        let mut compared = 0;
        for n in 0..2_000 {
            let words = rng.random_range(1..=3);
            let mut text: Vec<String> = (0..words)
                .map(|_| WORDS[rng.random_range(0..WORDS.len())].to_owned())
                .collect();
            if n % 7 == 0 {
                text[0] = format!("{}*", &text[0].chars().take(3).collect::<String>());
            }
            let query = Query::parse(&text.join(" "), &index, &filter);
            let (at, body) = (n % bodies.len(), &bodies[n % bodies.len()]);
            let places = index
                .body_places(&DocId::new(format!("d{at}")).unwrap(), &query.highlight)
                .expect("an indexed document");
            let from_index = snippet_at(body, &places).expect("the index agrees with the body");
            assert_eq!(
                from_index,
                snippet(body, &index.term_texts(&query.highlight)),
                "{text:?} in d{at}"
            );
            compared += usize::from(!from_index.matches.is_empty());
        }
        assert!(compared > 500, "most comparisons have matches: {compared}");
    }

    #[test]
    fn an_index_that_disagrees_with_the_body_gives_no_snippet() {
        let body = "the rotation of keys";
        let place = |word, term| Place {
            word,
            term,
            term_number: 0,
        };
        assert!(snippet_at(body, &[place(1, "rotat")]).is_some());
        // Another word at that number, and a number past the body's words.
        assert!(snippet_at(body, &[place(2, "rotat")]).is_none());
        assert!(snippet_at(body, &[place(4, "rotat")]).is_none());
    }

    /// The window search as first written: every start, every window counted afresh.
    fn best_window_by_every_start(matches: &[(usize, usize, usize)]) -> Option<(usize, usize)> {
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

    #[test]
    fn the_one_pass_window_is_the_window_of_every_start() {
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..5_000 {
            let mut at = 0;
            let matches: Vec<(usize, usize, usize)> = (0..rng.random_range(0..60))
                .map(|_| {
                    at += rng.random_range(1..80);
                    // Now and then a word longer than the window.
                    let len = if rng.random_range(0..50) == 0 {
                        300
                    } else {
                        rng.random_range(1..12)
                    };
                    let span = (at, at + len, rng.random_range(0..5));
                    at += len;
                    span
                })
                .collect();
            assert_eq!(
                best_window(&matches),
                best_window_by_every_start(&matches),
                "{matches:?}"
            );
        }
    }

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
