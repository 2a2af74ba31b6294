//! A bounded cursor over received bytes.
//!
//! Every read checks the bytes are there and, when they are not, reports
//! [`Short`] (where the field that did not fit starts) instead of
//! panicking. The reads are plain slice splits (`split_first_chunk`,
//! `split_at_checked`) the compiler inlines into the parsers; they used to
//! go through nom's leaf parsers, whose `take` stayed an out-of-line call
//! and cost about a tenth of the instructions of an attribute-heavy UPDATE
//! (BENCHMARKS.md).

/// The input ended before a field did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short {
    /// Absolute offset (in the message) of the field that did not fit.
    pub(crate) offset: usize,
}

/// A cursor over `buf`, whose first byte is at absolute offset `base`.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader over a whole message (offsets count from its first byte).
    #[cfg(test)]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, base: 0 }
    }

    /// A reader over `buf`, reporting offsets from `base`.
    pub(crate) fn with_base(buf: &'a [u8], base: usize) -> Self {
        Self { buf, base }
    }

    /// Absolute offset of the next unread byte.
    pub(crate) fn offset(&self) -> usize {
        self.base
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The unread bytes, without consuming them.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.buf
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, Short> {
        self.array::<1>().map(|[b]| b)
    }

    #[inline]
    pub(crate) fn u16(&mut self) -> Result<u16, Short> {
        self.array().map(u16::from_be_bytes)
    }

    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, Short> {
        self.array().map(u32::from_be_bytes)
    }

    /// Takes exactly `n` bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        let (head, rest) = self
            .buf
            .split_at_checked(n)
            .ok_or(Short { offset: self.base })?;
        self.buf = rest;
        self.base += n;
        Ok(head)
    }

    /// Takes exactly `N` bytes as an array.
    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Short> {
        let (head, rest) = self
            .buf
            .split_first_chunk::<N>()
            .ok_or(Short { offset: self.base })?;
        self.buf = rest;
        self.base += N;
        Ok(*head)
    }

    /// Splits off the next `n` bytes as a reader of their own: a length field
    /// becomes a bounded sub-slice before its contents are read.
    #[inline]
    pub(crate) fn sub(&mut self, n: usize) -> Result<Self, Short> {
        let base = self.base;
        let buf = self.take(n)?;
        Ok(Reader { buf, base })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_tracks_offsets() {
        let data = [1, 0, 2, 0, 0, 0, 3, 9, 9];
        let mut r = Reader::new(&data);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(2));
        assert_eq!(r.u32(), Ok(3));
        assert_eq!(r.offset(), 7);
        let mut sub = r.sub(1).unwrap();
        assert_eq!(sub.offset(), 7);
        assert_eq!(sub.u8(), Ok(9));
        assert_eq!(sub.u8(), Err(Short { offset: 8 }));
        assert_eq!(r.u16(), Err(Short { offset: 8 }));
        assert_eq!(r.rest(), &[9]);
    }

    #[test]
    fn a_short_read_consumes_nothing() {
        let data = [1, 2, 3];
        let mut r = Reader::with_base(&data, 10);
        assert_eq!(r.u32(), Err(Short { offset: 10 }));
        assert_eq!(r.take(4), Err(Short { offset: 10 }));
        assert_eq!(r.array::<3>(), Ok([1, 2, 3]));
        assert!(r.is_empty());
        assert_eq!(r.offset(), 13);
    }
}
