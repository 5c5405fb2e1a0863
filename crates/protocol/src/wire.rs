//! What the wire enums share. Each lists its variants through `strum::VariantArray` and ends in
//! `Unknown`: the value an older reader gives a name it does not know, never sent.

/// Every variant but the last, `Unknown`: the values a peer may send.
pub(crate) const fn known<T>(variants: &'static [T]) -> &'static [T] {
    match variants.split_last() {
        Some((_, known)) => known,
        None => variants,
    }
}
