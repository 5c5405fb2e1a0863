//! Fixed-size fields read off the front of a byte string. Each read is an array whose length the
//! type states, taken with `split_first_chunk`: a parser says "16 bytes" once, in the type, and
//! has no `try_into().expect()` panic path behind its length check.

/// The bytes not read yet.
pub(crate) struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    /// The next `N` bytes; `None` when fewer are left.
    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    /// The next 16 bytes as an id of the kind the caller names.
    pub(crate) fn id<I: sealpost_ids::Id>(&mut self) -> Option<I> {
        self.array().map(I::from_bytes)
    }

    /// The next `n` bytes, `n` known only at run time (a length field's value).
    pub(crate) fn slice(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    /// What is left.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fields;

    #[test]
    fn reads_in_order_and_refuses_past_the_end() {
        let mut fields = Fields::new(&[1, 2, 3, 4, 5]);
        assert_eq!(fields.array::<2>(), Some([1, 2]));
        assert_eq!(fields.slice(1), Some(&[3][..]));
        assert_eq!(fields.array::<3>(), None, "two bytes left, not three");
        assert_eq!(fields.rest(), &[4, 5]);
    }
}
