//! Turns text into index terms: Unicode word boundaries (UAX #29), case folding, accent folding,
//! and English (Porter2) stemming. The same function runs at index time and at query time, so a
//! query word and a document word meet on the same term.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::char::{decompose_compatible, is_combining_mark};
use unicode_segmentation::UnicodeSegmentation;

use crate::limits::MAX_TOKEN_BYTES;

fn english() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Folds one word to its unstemmed search form: lower case, compatibility-decomposed, accents
/// dropped ("Café" → "cafe", "ﬁle" → "file"). ASCII words take a fast path.
pub fn fold_word(word: &str, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.extend(word.bytes().map(|b| b.to_ascii_lowercase() as char));
        return;
    }
    for c in word.chars() {
        decompose_compatible(c, |d| {
            if !is_combining_mark(d) {
                out.extend(d.to_lowercase());
            }
        });
    }
}

/// Stems a folded word. Only words made of ASCII letters are stemmed: the stemmer is English,
/// and stemming other scripts would only mangle them.
pub fn stem(folded: &str) -> Cow<'_, str> {
    if folded.len() > 2 && folded.bytes().all(|b| b.is_ascii_lowercase()) {
        english().stem(folded)
    } else {
        Cow::Borrowed(folded)
    }
}

/// Calls `emit(byte_start, byte_end, term)` for every indexable word of `text`, in order.
/// Words without a letter or digit and words longer than [`MAX_TOKEN_BYTES`] are skipped.
pub fn for_each_term(text: &str, emit: impl FnMut(usize, usize, &str)) {
    walk(text, |_| true, emit);
}

/// Calls `emit(byte_start, byte_end, term)` for every word of `text` whose term is in `wanted`,
/// in order: the same words and terms [`for_each_term`] gives, less the others. Much faster
/// than filtering that one, because a word is only stemmed when its stem could be wanted: a
/// stem is never empty and keeps its word's first letter (`a_stem_keeps_its_words_first_letter`
/// checks every word of up to four letters, random longer ones and the stemmer's exceptions,
/// such as "dying" → "die"), so a word that starts unlike every wanted term cannot stem to one.
pub fn for_each_wanted_term(
    text: &str,
    wanted: &HashSet<String>,
    mut emit: impl FnMut(usize, usize, &str),
) {
    // The first letters of the wanted terms, one bit per lower-case ASCII letter: a word that
    // starts with another such letter is not stemmed; any other word is.
    let letter_bit = |b: u8| 1u32 << (b - b'a');
    let starts = wanted
        .iter()
        .filter_map(|term| term.bytes().next())
        .filter(u8::is_ascii_lowercase)
        .fold(0, |bits, b| bits | letter_bit(b));
    let may_be_wanted = |folded: &str| {
        let first = folded.as_bytes()[0];
        !first.is_ascii_lowercase() || starts & letter_bit(first) != 0
    };
    walk(text, may_be_wanted, |start, end, term| {
        if wanted.contains(term) {
            emit(start, end, term);
        }
    });
}

/// The words of `text` folded, skipped as [`for_each_term`] says; each one `stem_it` accepts
/// (given the non-empty folded word) is stemmed and emitted.
fn walk(
    text: &str,
    mut stem_it: impl FnMut(&str) -> bool,
    mut emit: impl FnMut(usize, usize, &str),
) {
    let mut folded = String::new();
    for (start, word) in text.unicode_word_indices() {
        if word.len() > MAX_TOKEN_BYTES {
            continue;
        }
        fold_word(word, &mut folded);
        if folded.is_empty() || !stem_it(&folded) {
            continue;
        }
        emit(start, start + word.len(), &stem(&folded));
    }
}

/// The terms of `text` as owned strings (query side; documents use [`for_each_term`]).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |_, _, term| out.push(term.to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_folded_and_stemmed() {
        assert_eq!(terms("Running runners RAN"), ["run", "runner", "ran"]);
        assert_eq!(terms("Café Ångström"), ["cafe", "angstrom"]);
        assert_eq!(terms("ﬁle"), ["file"]);
    }

    #[test]
    fn punctuation_separates_words_and_is_dropped() {
        assert_eq!(terms("key-value, (pairs)!"), ["key", "valu", "pair"]);
        assert_eq!(terms("  ...  "), Vec::<String>::new());
    }

    #[test]
    fn non_latin_scripts_are_kept_unstemmed() {
        assert_eq!(terms("Привет мир"), ["привет", "мир"]);
        // Han ideographs are one word each under UAX #29.
        assert_eq!(terms("東京"), ["東", "京"]);
    }

    #[test]
    fn offsets_point_at_the_original_words() {
        let text = "Héllo, wörld";
        let mut spans = Vec::new();
        for_each_term(text, |s, e, _| spans.push(&text[s..e]));
        assert_eq!(spans, ["Héllo", "wörld"]);
    }

    /// What lets [`for_each_wanted_term`] skip stemming most words.
    #[test]
    fn a_stem_keeps_its_words_first_letter() {
        let keeps = |word: &str| {
            let stemmed = stem(word);
            assert_eq!(
                stemmed.as_bytes().first(),
                word.as_bytes().first(),
                "{word} → {stemmed}"
            );
        };
        let letters = b'a'..=b'z';
        let mut word = String::new();
        for a in letters.clone() {
            for b in letters.clone() {
                for c in letters.clone() {
                    word.clear();
                    word.extend([a, b, c].map(char::from));
                    keeps(&word);
                    for d in letters.clone() {
                        word.truncate(3);
                        word.push(char::from(d));
                        keeps(&word);
                    }
                }
            }
        }
        // Longer words, from letters and the suffixes the stemmer strips.
        const PIECES: [&str; 30] = [
            "a", "e", "i", "o", "u", "y", "s", "b", "l", "n", "t", "ing", "ed", "ly", "ies",
            "sses", "ational", "ization", "fulness", "iveness", "ement", "ness", "eed", "eedly",
            "ingly", "edly", "ment", "ous", "ive", "ize",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..200_000 {
            word.clear();
            while word.len() < 3 || (word.len() < 16 && !state.is_multiple_of(5)) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                word.push_str(PIECES[(state % PIECES.len() as u64) as usize]);
            }
            keeps(&word);
        }
        for exception in [
            "skis", "skies", "dying", "lying", "tying", "idly", "gently", "ugly", "early", "only",
            "singly", "news", "howe", "atlas", "cosmos", "bias", "andes",
        ] {
            keeps(exception);
        }
    }

    #[test]
    fn wanted_terms_are_the_same_words_as_all_terms_filtered() {
        let text = "Running runners ran; a RUN, an ai-run. Café cafés Привет ugly ugli \
                    skies sky idly it's gently x y yes dying";
        let mut all = Vec::new();
        for_each_term(text, |s, e, t| all.push((s, e, t.to_owned())));
        for wanted in [
            vec!["run"],
            vec!["a", "ran"],
            vec!["cafe", "привет"],
            vec!["ugli", "sky"],
            vec!["idl", "gentl", "it'"],
            vec!["x", "y", "yes"],
            vec!["die", "run"],
            vec!["absent"],
        ] {
            let wanted: HashSet<String> = wanted.into_iter().map(str::to_owned).collect();
            let mut got = Vec::new();
            for_each_wanted_term(text, &wanted, |s, e, t| got.push((s, e, t.to_owned())));
            let expected: Vec<_> = all
                .iter()
                .filter(|(_, _, t)| wanted.contains(t))
                .cloned()
                .collect();
            assert_eq!(got, expected, "{wanted:?}");
        }
    }

    #[test]
    fn very_long_tokens_are_skipped() {
        let blob = "a".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(terms(&format!("x {blob} y")), ["x", "y"]);
    }
}
