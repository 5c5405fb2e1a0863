//! The search index as bytes, so a host can keep it and start without re-reading every
//! document's text: tokenising and stemming are most of an index build; reading this back is
//! decoding integers.
//!
//! Layout (integers are LEB128 varints unless said otherwise):
//!
//! ```text
//! "SPIX"                     4 bytes
//! version                    u32, little-endian (SNAPSHOT_VERSION)
//! documents digest           32 bytes: what the host says the index covers (see Workspace)
//! terms                      count, then each: byte length, UTF-8 bytes; in id order
//! sources                    count, then each: byte length, UTF-8 bytes; in id order
//! documents                  count, then each: id length, id bytes, source id,
//!                            sequence length, sequence bytes (sequence.rs)
//! checksum                   32 bytes: SHA-256 of everything before it
//! ```
//!
//! Only what cannot be derived is kept: postings, field lengths and per-source statistics are
//! recomputed from the sequences, so they agree with them by construction. Removed documents'
//! slots are left out (the index comes back compacted). Decoding checks everything it reads, so
//! a damaged snapshot is an error, never a panic or a wrong index: a bad checksum, a term or
//! source id out of range, a repeated term or document, a malformed sequence, trailing bytes.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::index::{IndexedDoc, Posting, SearchIndex};
use super::sequence::{FIELD_SEPARATOR, push_varint, read_varint};
use super::terms::Terms;
use crate::workspace::DocId;

/// The snapshot layout's version, and the tokeniser's: bump it when either changes, so a
/// snapshot written by an older build is rebuilt rather than read wrongly.
pub const SNAPSHOT_VERSION: u32 = 1;
const MAGIC: &[u8; 4] = b"SPIX";
const DIGEST_BYTES: usize = 32;
const HEADER_BYTES: usize = MAGIC.len() + 4 + DIGEST_BYTES;

/// Why a snapshot was not used. Whatever the reason, the index is rebuilt from the documents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes are not a snapshot, or do not match their checksum, or do not decode.
    #[error("the saved search index is damaged")]
    Damaged,
    /// Written by a build with another layout or tokeniser.
    #[error(
        "the saved search index is from another version (format {found}, this one reads {SNAPSHOT_VERSION})"
    )]
    Version {
        /// The version the snapshot says it is.
        found: u32,
    },
    /// It covers other documents than the ones given (they changed after it was saved).
    #[error("the saved search index is out of date: the documents changed after it was saved")]
    Stale,
}

fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    push_varint(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

impl SearchIndex {
    /// The index as bytes, stamped with `documents_digest`: the digest of the documents it
    /// covers, which [`SearchIndex::from_snapshot`] must be given again to accept it.
    pub fn snapshot(&self, documents_digest: &[u8; DIGEST_BYTES]) -> Vec<u8> {
        let sequences: usize = self.docs.iter().flatten().map(|d| d.sequence.len()).sum();
        let mut out = Vec::with_capacity(HEADER_BYTES + sequences + self.docs.len() * 24);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out.extend_from_slice(documents_digest);

        push_varint(&mut out, self.terms.len() as u32);
        for term in self.terms.iter() {
            push_bytes(&mut out, term.as_bytes());
        }
        let mut sources = vec![""; self.source_ids.len()];
        for (name, &id) in &self.source_ids {
            sources[id as usize] = name;
        }
        push_varint(&mut out, sources.len() as u32);
        for name in sources {
            push_bytes(&mut out, name.as_bytes());
        }
        push_varint(&mut out, self.live_docs);
        for (slot, doc) in self.docs.iter().enumerate() {
            let Some(doc) = doc else { continue };
            push_bytes(&mut out, doc.id.as_str().as_bytes());
            push_varint(&mut out, self.slot_source[slot]);
            push_bytes(&mut out, &doc.sequence);
        }
        let checksum = Sha256::digest(&out);
        out.extend_from_slice(&checksum);
        out
    }

    /// The index `bytes` hold, if they are an intact snapshot of this version covering the
    /// documents `documents_digest` describes.
    pub fn from_snapshot(
        bytes: &[u8],
        documents_digest: &[u8; DIGEST_BYTES],
    ) -> Result<SearchIndex, SnapshotError> {
        if bytes.len() < HEADER_BYTES + DIGEST_BYTES || &bytes[..MAGIC.len()] != MAGIC {
            return Err(SnapshotError::Damaged);
        }
        let version = u32::from_le_bytes(bytes[4..8].try_into().expect("four bytes"));
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version { found: version });
        }
        let (content, checksum) = bytes.split_at(bytes.len() - DIGEST_BYTES);
        if Sha256::digest(content)[..] != checksum[..] {
            return Err(SnapshotError::Damaged);
        }
        if &content[8..HEADER_BYTES] != documents_digest {
            return Err(SnapshotError::Stale);
        }
        decode(&content[HEADER_BYTES..]).ok_or(SnapshotError::Damaged)
    }
}

/// Reads the body of a snapshot; `None` on anything inconsistent.
fn decode(body: &[u8]) -> Option<SearchIndex> {
    let mut reader = Reader { bytes: body, at: 0 };

    let term_count = reader.count()?;
    let mut term_texts = Vec::with_capacity(term_count.min(body.len()));
    for _ in 0..term_count {
        term_texts.push(reader.text()?);
    }
    let terms = Terms::from_ordered(term_texts)?;

    let source_count = reader.count()?;
    let mut source_ids = HashMap::new();
    for id in 0..source_count {
        let name = reader.text()?.to_owned();
        if source_ids.insert(name, id as u32).is_some() {
            return None;
        }
    }

    let mut index = SearchIndex {
        terms,
        postings: vec![Vec::new(); term_count],
        source_ids,
        source_docs: vec![0; source_count],
        source_title_len: vec![0; source_count],
        source_body_len: vec![0; source_count],
        ..SearchIndex::default()
    };
    let doc_count = reader.count()?;
    let mut counts: HashMap<u32, (u16, u16)> = HashMap::new();
    for slot in 0..doc_count as u32 {
        let id = DocId::new(reader.text()?).ok()?;
        let source = reader.varint()?;
        if source as usize >= source_count {
            return None;
        }
        let sequence = reader.bytes()?;
        let (title_len, body_len) = count_terms(sequence, term_count, &mut counts)?;
        for (term, (title_tf, body_tf)) in counts.drain() {
            index.postings[term as usize].push(Posting {
                slot,
                title_tf,
                body_tf,
            });
        }
        if index.slot_of.insert(id.clone(), slot).is_some() {
            return None;
        }
        index.docs.push(Some(IndexedDoc {
            id,
            sequence: sequence.into(),
        }));
        index.slot_source.push(source);
        index.slot_title_len.push(title_len);
        index.slot_body_len.push(body_len);
        index.source_docs[source as usize] += 1;
        index.source_title_len[source as usize] += u64::from(title_len);
        index.source_body_len[source as usize] += u64::from(body_len);
    }
    index.live_docs = doc_count as u32;
    (reader.at == body.len()).then_some(index)
}

/// Counts each term's occurrences in the title and the body of an encoded sequence into
/// `counts`; answers the two fields' lengths. `None` unless it holds exactly one separator and
/// only known terms.
fn count_terms(
    sequence: &[u8],
    term_count: usize,
    counts: &mut HashMap<u32, (u16, u16)>,
) -> Option<(u32, u32)> {
    let mut lengths = [0u32; 2];
    let mut field = 0;
    let mut at = 0;
    while at < sequence.len() {
        if sequence[at] == FIELD_SEPARATOR {
            field += 1;
            at += 1;
            if field > 1 {
                return None;
            }
            continue;
        }
        let term = read_varint(sequence, &mut at)?.checked_sub(1)?;
        if term as usize >= term_count {
            return None;
        }
        lengths[field] += 1;
        let entry = counts.entry(term).or_default();
        let tf = if field == 0 {
            &mut entry.0
        } else {
            &mut entry.1
        };
        *tf = tf.saturating_add(1);
    }
    (field == 1).then_some((lengths[0], lengths[1]))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u32> {
        read_varint(self.bytes, &mut self.at)
    }

    /// A count of items, each at least one byte: more than the bytes left is damage (and
    /// must not size an allocation).
    fn count(&mut self) -> Option<usize> {
        let count = self.varint()? as usize;
        (count <= self.bytes.len() - self.at).then_some(count)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.varint()? as usize;
        let bytes = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(bytes)
    }

    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
}

#[cfg(test)]
mod tests {
    // Snapshots: a round trip answers every query as the index it came from; a snapshot of
    // another version, of other documents, or with any byte damaged is refused, never trusted and
    // never a panic.

    use sha2::{Digest, Sha256};

    use super::*;
    use crate::search::Query;

    const DIGEST: [u8; 32] = [7; 32];

    fn id(s: &str) -> DocId {
        DocId::new(s).unwrap()
    }

    fn sample() -> SearchIndex {
        let mut index = SearchIndex::new();
        index.upsert(
            &id("a"),
            "notes",
            "Key rotation",
            "Rotate the signing keys every ninety days.",
        );
        index.upsert(
            &id("b"),
            "docs",
            "Café guide",
            "Ångström units and the lazy dog sleeps.",
        );
        index.upsert(
            &id("c"),
            "notes",
            "Gone",
            "This one is removed before the snapshot.",
        );
        index.upsert(
            &id("d"),
            "archive",
            "東京 notes",
            "The quick brown fox jumps over the lazy dog.",
        );
        index.remove(&id("c"));
        index.upsert(
            &id("a"),
            "notes",
            "Key rotation",
            "Rotate signing keys every sixty days.",
        );
        index
    }

    fn answers(index: &SearchIndex, text: &str, source: Option<&str>) -> Vec<(String, u32)> {
        let filter = index.source_filter(|s| source.is_none_or(|only| only == s));
        let query = Query::parse(text, index, &filter);
        index
            .search(&query, &filter, 10)
            .into_iter()
            .map(|hit| (hit.doc_id.to_string(), hit.score.to_bits()))
            .collect()
    }

    /// Rewrites the checksum so the damage reaches the decoder instead of the checksum check.
    fn rechecksum(bytes: &mut [u8]) {
        let (content, checksum) = bytes.split_at_mut(bytes.len() - 32);
        checksum.copy_from_slice(&Sha256::digest(content));
    }

    #[test]
    fn a_restored_index_answers_every_query_as_the_original_did() {
        let original = sample();
        let bytes = original.snapshot(&DIGEST);
        let restored = SearchIndex::from_snapshot(&bytes, &DIGEST).expect("an intact snapshot");
        assert_eq!(restored.len(), 3);
        for (query, source) in [
            ("rotation keys", None),
            ("\"lazy dog\"", None),
            ("lazy dog", Some("docs")),
            ("rot*", None),
            ("cafe angstrom", None),
            ("東", None),
            ("removed", None),
            ("sixty", Some("notes")),
        ] {
            assert_eq!(
                answers(&restored, query, source),
                answers(&original, query, source),
                "{query}"
            );
        }
        assert_eq!(
            restored.snapshot(&DIGEST),
            bytes,
            "the same index gives the same bytes"
        );
    }

    #[test]
    fn a_restored_index_keeps_changing_like_the_original() {
        let mut original = sample();
        let mut restored =
            SearchIndex::from_snapshot(&original.snapshot(&DIGEST), &DIGEST).unwrap();
        for index in [&mut original, &mut restored] {
            index.upsert(&id("e"), "journal", "Ninety", "ninety days of rotation");
            index.remove(&id("b"));
        }
        for query in ["ninety", "lazy dog", "rotat*"] {
            assert_eq!(
                answers(&restored, query, None),
                answers(&original, query, None),
                "{query}"
            );
        }
    }

    #[test]
    fn an_empty_index_round_trips() {
        let restored = SearchIndex::from_snapshot(&SearchIndex::new().snapshot(&DIGEST), &DIGEST);
        assert!(restored.expect("an empty snapshot").is_empty());
    }

    #[test]
    fn another_version_is_refused() {
        let mut bytes = sample().snapshot(&DIGEST);
        bytes[4..8].copy_from_slice(&(SNAPSHOT_VERSION + 1).to_le_bytes());
        assert_eq!(
            SearchIndex::from_snapshot(&bytes, &DIGEST).unwrap_err(),
            SnapshotError::Version {
                found: SNAPSHOT_VERSION + 1
            }
        );
    }

    #[test]
    fn a_snapshot_of_other_documents_is_stale() {
        let bytes = sample().snapshot(&DIGEST);
        assert_eq!(
            SearchIndex::from_snapshot(&bytes, &[8; 32]).unwrap_err(),
            SnapshotError::Stale
        );
    }

    #[test]
    fn any_damaged_byte_is_refused() {
        let bytes = sample().snapshot(&DIGEST);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            assert!(
                SearchIndex::from_snapshot(&damaged, &DIGEST).is_err(),
                "byte {at}"
            );
        }
        for len in [0, 10, bytes.len() - 1] {
            assert!(
                SearchIndex::from_snapshot(&bytes[..len], &DIGEST).is_err(),
                "cut at {len}"
            );
        }
    }

    #[test]
    fn damage_behind_a_valid_checksum_is_refused_without_a_panic() {
        let bytes = sample().snapshot(&DIGEST);
        let mut refused = 0;
        for at in HEADER_BYTES..bytes.len() - 32 {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[at] ^= 1 << bit;
                rechecksum(&mut damaged);
                // Some flips still decode (a letter of a term changed): only a panic is a failure.
                refused += usize::from(SearchIndex::from_snapshot(&damaged, &DIGEST).is_err());
            }
        }
        assert!(refused > 0);
        let mut longer = bytes[..bytes.len() - 32].to_vec();
        longer.push(0);
        longer.extend_from_slice(&[0; 32]);
        rechecksum(&mut longer);
        assert_eq!(
            SearchIndex::from_snapshot(&longer, &DIGEST).unwrap_err(),
            SnapshotError::Damaged,
            "trailing bytes"
        );
    }
}
