//! A document's term sequence, as the index keeps it for phrases and removal: each term id plus
//! one as a LEB128 varint (seven bits a byte, the high bit set on every byte but a value's
//! last), and a zero byte between the title and the body so no phrase spans both.
//!
//! Term ids are numbered in order of first sight, so common words have small ids and take one
//! or two bytes instead of four. The code is prefix-free and a value starts at byte 0 or after
//! a byte below 0x80, so a phrase is found by comparing encoded bytes, with no decoding.

/// The byte between title and body terms.
pub(crate) const FIELD_SEPARATOR: u8 = 0;

/// Appends `value` as a LEB128 varint.
pub(crate) fn push_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads the varint at `*at`, moving past it; `None` at the end or on a malformed value.
pub(crate) fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut value: u32 = 0;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        let part = u32::from(byte & 0x7f);
        if shift == 28 && part > 0x0f {
            return None;
        }
        value |= part << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// Appends term `id` to a sequence.
pub(crate) fn push_term(out: &mut Vec<u8>, id: u32) {
    push_varint(out, id + 1);
}

/// The body's part of a sequence (after the separator); `None` if it has none.
pub(crate) fn body(sequence: &[u8]) -> Option<&[u8]> {
    let at = sequence.iter().position(|&b| b == FIELD_SEPARATOR)?;
    Some(&sequence[at + 1..])
}

/// The term ids of an encoded sequence, both fields, in order; `None` for a malformed one.
pub(crate) fn terms(sequence: &[u8]) -> impl Iterator<Item = Option<u32>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < sequence.len() {
            if sequence[at] == FIELD_SEPARATOR {
                at += 1;
                continue;
            }
            return Some(read_varint(sequence, &mut at).and_then(|value| value.checked_sub(1)));
        }
        None
    })
}

/// A phrase encoded once per search, to be looked for in many sequences.
#[derive(Debug)]
pub(crate) struct EncodedPhrase {
    bytes: Vec<u8>,
    /// Where the anchor term's encoding starts and ends in `bytes`.
    anchor: (usize, usize),
}

impl EncodedPhrase {
    /// `phrase`, anchored on its term at `anchor` (the rarest: most positions of a sequence
    /// fail on its first byte).
    pub(crate) fn new(phrase: &[u32], anchor: usize) -> Self {
        let mut bytes = Vec::new();
        let mut span = (0, 0);
        for (at, &id) in phrase.iter().enumerate() {
            let start = bytes.len();
            push_term(&mut bytes, id);
            if at == anchor {
                span = (start, bytes.len());
            }
        }
        Self {
            bytes,
            anchor: span,
        }
    }

    /// Whether `sequence` holds the phrase's terms side by side, in order, in one field.
    pub(crate) fn occurs_in(&self, sequence: &[u8]) -> bool {
        let (anchor_start, anchor_end) = self.anchor;
        let anchor = &self.bytes[anchor_start..anchor_end];
        let suffix_len = self.bytes.len() - anchor_end;
        let Some(&first) = anchor.first() else {
            return true;
        };
        if sequence.len() < self.bytes.len() {
            return false;
        }
        let last_start = sequence.len() - anchor.len() - suffix_len;
        (anchor_start..=last_start).any(|at| {
            sequence[at] == first && {
                let start = at - anchor_start;
                // A value starts at byte 0 or after a value's last byte.
                (start == 0 || sequence[start - 1] < 0x80)
                    && sequence[start..start + self.bytes.len()] == self.bytes[..]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(title: &[u32], body: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        title.iter().for_each(|&t| push_term(&mut out, t));
        out.push(FIELD_SEPARATOR);
        body.iter().for_each(|&t| push_term(&mut out, t));
        out
    }

    #[test]
    fn varints_round_trip_at_every_width() {
        for value in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            2_097_152,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let mut bytes = Vec::new();
            push_varint(&mut bytes, value);
            let mut at = 0;
            assert_eq!(read_varint(&bytes, &mut at), Some(value));
            assert_eq!(at, bytes.len());
        }
        assert_eq!(read_varint(&[0x80], &mut 0), None, "cut short");
        assert_eq!(read_varint(&[0xff; 5], &mut 0), None, "over 32 bits");
    }

    #[test]
    fn terms_decode_across_the_separator() {
        let seq = encode(&[3, 200], &[70_000, 0]);
        let decoded: Option<Vec<u32>> = terms(&seq).collect();
        assert_eq!(decoded, Some(vec![3, 200, 70_000, 0]));
    }

    #[test]
    fn phrases_match_whole_values_in_order_within_one_field() {
        // 128 + 1 encodes as [0x81, 0x01]; 0 + 1 as [0x01]: the second byte of one must not
        // be taken for the other.
        let seq = encode(&[5, 6], &[128, 7, 8, 9]);
        let found = |phrase: &[u32], anchor| EncodedPhrase::new(phrase, anchor).occurs_in(&seq);
        assert!(found(&[7, 8], 0));
        assert!(found(&[7, 8, 9], 2));
        assert!(found(&[128, 7], 1));
        assert!(!found(&[0, 7], 0), "a continuation byte is not a value");
        assert!(!found(&[8, 7], 0), "order counts");
        assert!(!found(&[6, 128], 0), "no phrase spans title and body");
        assert!(found(&[5, 6], 1));
    }
}
