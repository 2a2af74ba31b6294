//! A bounded cursor over received bytes, built on nom's leaf parsers.
//!
//! nom stays inside this module: callers see `Reader` methods that return
//! [`Short`] (how many bytes were missing, and where) instead of `IResult`.

use nom::Parser;
use nom::bytes::complete::take;
use nom::number::complete::{be_u8, be_u16, be_u32};

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

type NomErr<'a> = nom::error::Error<&'a [u8]>;

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

    fn run<O>(
        &mut self,
        mut p: impl Parser<&'a [u8], Output = O, Error = NomErr<'a>>,
    ) -> Result<O, Short> {
        match p.parse(self.buf) {
            Ok((rest, out)) => {
                self.base += self.buf.len() - rest.len();
                self.buf = rest;
                Ok(out)
            }
            Err(_) => Err(Short { offset: self.base }),
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Short> {
        self.run(be_u8)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Short> {
        self.run(be_u16)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Short> {
        self.run(be_u32)
    }

    /// Takes exactly `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        self.run(take(n))
    }

    /// Takes exactly `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Short> {
        let bytes = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// Splits off the next `n` bytes as a reader of their own: a length field
    /// becomes a bounded sub-slice before its contents are read.
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
}
