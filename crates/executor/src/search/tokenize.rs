//! Turns text into index terms: Unicode word boundaries (UAX #29), case folding, accent folding,
//! and English (Porter2) stemming. The same function runs at index time and at query time, so a
//! query word and a document word meet on the same term.

use std::borrow::Cow;
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
pub fn for_each_term(text: &str, mut emit: impl FnMut(usize, usize, &str)) {
    let mut folded = String::new();
    for (start, word) in text.unicode_word_indices() {
        if word.len() > MAX_TOKEN_BYTES {
            continue;
        }
        fold_word(word, &mut folded);
        if folded.is_empty() {
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

    #[test]
    fn very_long_tokens_are_skipped() {
        let blob = "a".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(terms(&format!("x {blob} y")), ["x", "y"]);
    }
}
