//! List-valued attributes as checked views over their wire octets.
//!
//! COMMUNITIES, EXTENDED_COMMUNITIES, LARGE_COMMUNITY, CLUSTER_LIST and the
//! IPv6 address specific extended communities are lists of fixed-size
//! records. A parsed list keeps the octets it was parsed from, checked once
//! (the length is a multiple of the record size), and decodes a record when
//! it is read. Parsed with [`Message::parse_bytes`](super::Message::parse_bytes)
//! the octets are a reference-counted slice of the received message: no
//! allocation and no copy per attribute (one allocation per list-valued
//! attribute was about a quarter of the instructions of an attribute-heavy
//! UPDATE, BENCHMARKS.md). A list built locally is encoded once, when built.
//!
//! Pure code: no I/O, no clock.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::net::Ipv4Addr;

use bytes::Bytes;

use super::attr::{Community, ExtendedCommunity, Ipv6ExtendedCommunity, LargeCommunity};

/// A value of `N` octets on the wire, the element of a [`Records`] list.
pub trait Record<const N: usize>: Copy + sealed::Sealed {
    /// Decodes one record.
    fn decode(b: &[u8; N]) -> Self;
    /// Its octets.
    fn encode(&self) -> [u8; N];
}

/// A list of `N`-octet records, kept as its wire octets.
///
/// Every value is valid: the octets always hold a whole number of records.
/// Equality and hashing compare the octets, which for fixed-size records is
/// comparing the records in order.
pub struct Records<T, const N: usize> {
    /// `len() % N == 0`, checked by every constructor.
    wire: Bytes,
    _record: PhantomData<fn() -> T>,
}

/// COMMUNITIES (RFC 1997).
pub type Communities = Records<Community, 4>;
/// CLUSTER_LIST (RFC 4456).
pub type ClusterList = Records<Ipv4Addr, 4>;
/// EXTENDED COMMUNITIES (RFC 4360).
pub type ExtendedCommunities = Records<ExtendedCommunity, 8>;
/// IPv6 Address Specific Extended Communities (RFC 5701).
pub type Ipv6ExtendedCommunities = Records<Ipv6ExtendedCommunity, 20>;
/// LARGE_COMMUNITY (RFC 8092).
pub type LargeCommunities = Records<LargeCommunity, 12>;

impl<T: Record<N>, const N: usize> Records<T, N> {
    /// An empty list.
    pub const fn new() -> Self {
        Self {
            wire: Bytes::new(),
            _record: PhantomData,
        }
    }

    /// The list over `wire`, if it holds a whole number of records.
    pub(crate) fn from_wire(wire: Bytes) -> Option<Self> {
        if !wire.len().is_multiple_of(N) {
            return None;
        }
        Some(Self {
            wire,
            _record: PhantomData,
        })
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.wire.len() / N
    }

    /// Whether the list is empty (never, when parsed: RFC 7606 makes an
    /// empty list malformed).
    pub fn is_empty(&self) -> bool {
        self.wire.is_empty()
    }

    /// The records in order.
    pub fn iter(&self) -> Iter<'_, T, N> {
        Iter {
            chunks: self.wire.as_chunks::<N>().0.iter(),
            _record: PhantomData,
        }
    }

    /// The record at `index`.
    pub fn get(&self, index: usize) -> Option<T> {
        self.wire.as_chunks::<N>().0.get(index).map(T::decode)
    }

    /// Whether `record` is in the list.
    pub fn contains(&self, record: &T) -> bool {
        let b = record.encode();
        self.wire.as_chunks::<N>().0.contains(&b)
    }

    /// The records, decoded into a vector.
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().collect()
    }

    /// The wire octets (the attribute value).
    pub fn as_bytes(&self) -> &[u8] {
        &self.wire
    }
}

impl<T: Record<N>, const N: usize> Default for Records<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> Clone for Records<T, N> {
    fn clone(&self) -> Self {
        Self {
            wire: self.wire.clone(),
            _record: PhantomData,
        }
    }
}

impl<T, const N: usize> PartialEq for Records<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.wire == other.wire
    }
}

impl<T, const N: usize> Eq for Records<T, N> {}

impl<T, const N: usize> Hash for Records<T, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.wire.hash(state);
    }
}

impl<T: Record<N> + fmt::Debug, const N: usize> fmt::Debug for Records<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Record<N>, const N: usize> FromIterator<T> for Records<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut wire = Vec::with_capacity(iter.size_hint().0 * N);
        for r in iter {
            wire.extend_from_slice(&r.encode());
        }
        Self {
            wire: Bytes::from(wire),
            _record: PhantomData,
        }
    }
}

impl<T: Record<N>, const N: usize> From<&[T]> for Records<T, N> {
    fn from(records: &[T]) -> Self {
        records.iter().copied().collect()
    }
}

impl<T: Record<N>, const N: usize> From<Vec<T>> for Records<T, N> {
    fn from(records: Vec<T>) -> Self {
        records.into_iter().collect()
    }
}

impl<T: Record<N>, const N: usize, const M: usize> From<[T; M]> for Records<T, N> {
    fn from(records: [T; M]) -> Self {
        records.into_iter().collect()
    }
}

impl<'a, T: Record<N>, const N: usize> IntoIterator for &'a Records<T, N> {
    type Item = T;
    type IntoIter = Iter<'a, T, N>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The records of a [`Records`] list, decoded as they are read.
#[derive(Debug, Clone)]
pub struct Iter<'a, T, const N: usize> {
    chunks: std::slice::Iter<'a, [u8; N]>,
    _record: PhantomData<fn() -> T>,
}

impl<T: Record<N>, const N: usize> Iterator for Iter<'_, T, N> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        self.chunks.next().map(T::decode)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.chunks.size_hint()
    }
}

impl<T: Record<N>, const N: usize> DoubleEndedIterator for Iter<'_, T, N> {
    fn next_back(&mut self) -> Option<T> {
        self.chunks.next_back().map(T::decode)
    }
}

impl<T: Record<N>, const N: usize> ExactSizeIterator for Iter<'_, T, N> {}

impl Record<4> for Community {
    fn decode(b: &[u8; 4]) -> Self {
        Self(u32::from_be_bytes(*b))
    }

    fn encode(&self) -> [u8; 4] {
        self.0.to_be_bytes()
    }
}

impl Record<4> for Ipv4Addr {
    fn decode(b: &[u8; 4]) -> Self {
        Self::from(*b)
    }

    fn encode(&self) -> [u8; 4] {
        self.octets()
    }
}

impl Record<8> for ExtendedCommunity {
    fn decode(b: &[u8; 8]) -> Self {
        Self(*b)
    }

    fn encode(&self) -> [u8; 8] {
        self.0
    }
}

impl Record<20> for Ipv6ExtendedCommunity {
    fn decode(b: &[u8; 20]) -> Self {
        Self(*b)
    }

    fn encode(&self) -> [u8; 20] {
        self.0
    }
}

impl Record<12> for LargeCommunity {
    fn decode(b: &[u8; 12]) -> Self {
        let [a0, a1, a2, a3, d0, d1, d2, d3, e0, e1, e2, e3] = *b;
        Self {
            global_admin: u32::from_be_bytes([a0, a1, a2, a3]),
            local_data1: u32::from_be_bytes([d0, d1, d2, d3]),
            local_data2: u32::from_be_bytes([e0, e1, e2, e3]),
        }
    }

    fn encode(&self) -> [u8; 12] {
        let mut b = [0; 12];
        b[..4].copy_from_slice(&self.global_admin.to_be_bytes());
        b[4..8].copy_from_slice(&self.local_data1.to_be_bytes());
        b[8..].copy_from_slice(&self.local_data2.to_be_bytes());
        b
    }
}

mod sealed {
    /// Only this crate's record types go in a [`super::Records`] list.
    pub trait Sealed {}
    impl Sealed for super::Community {}
    impl Sealed for std::net::Ipv4Addr {}
    impl Sealed for super::ExtendedCommunity {}
    impl Sealed for super::Ipv6ExtendedCommunity {}
    impl Sealed for super::LargeCommunity {}
}

#[cfg(feature = "arbitrary")]
impl<'a, T, const N: usize> arbitrary::Arbitrary<'a> for Records<T, N>
where
    T: Record<N> + arbitrary::Arbitrary<'a>,
{
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        u.arbitrary_iter::<T>()?.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_whole_records_only() {
        // Two communities, 65000:1 and NO_EXPORT.
        let wire = Bytes::from_static(&[0xfd, 0xe8, 0x00, 0x01, 0xff, 0xff, 0xff, 0x01]);
        let list = Communities::from_wire(wire.clone()).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            list.to_vec(),
            [Community::new(65000, 1), Community::NO_EXPORT]
        );
        assert_eq!(list.get(1), Some(Community::NO_EXPORT));
        assert_eq!(list.get(2), None);
        assert!(list.contains(&Community::NO_EXPORT));
        assert_eq!(list.as_bytes(), &wire[..]);
        assert!(Communities::from_wire(wire.slice(..7)).is_none());
        assert!(LargeCommunities::from_wire(wire).is_none());
    }

    #[test]
    fn built_equals_parsed() {
        let built: LargeCommunities = [LargeCommunity {
            global_admin: 4_200_000_000,
            local_data1: 1,
            local_data2: 2,
        }]
        .into();
        let parsed = LargeCommunities::from_wire(Bytes::copy_from_slice(built.as_bytes())).unwrap();
        assert_eq!(built, parsed);
        assert_eq!(format!("{parsed:?}"), format!("{:?}", built.to_vec()));
        assert_eq!(built.iter().rev().count(), 1);
        assert!(Communities::new().is_empty());
    }
}
