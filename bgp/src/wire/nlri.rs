//! Prefixes and NLRI lists (RFC 4271 §4.3, RFC 4760 §5, RFC 7911 §3).
//!
//! ```text
//! +---------------------------+
//! |   Path Identifier (4)     |   only when ADD-PATH is negotiated
//! +---------------------------+
//! |   Length (1 octet, bits)  |
//! +---------------------------+
//! |   Prefix (variable)       |   ceil(Length / 8) octets
//! +---------------------------+
//! ```

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use bytes::{BufMut, BytesMut};

use super::reader::Reader;

/// A prefix length above the family's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("prefix length {len} exceeds {max}")]
pub struct PrefixLenError {
    /// The length that was given.
    pub len: u8,
    /// The family's maximum (32 or 128).
    pub max: u8,
}

/// A prefix string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid prefix {0:?}: expected ADDRESS/LENGTH")]
pub struct PrefixParseError(pub String);

/// An IPv4 prefix. Bits past the length are always zero (RFC 4271 says they
/// are irrelevant on receipt; we clear them so equal prefixes compare equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Prefix {
    addr: Ipv4Addr,
    len: u8,
}

/// An IPv6 prefix, with the same invariant as [`Ipv4Prefix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv6Prefix {
    addr: Ipv6Addr,
    len: u8,
}

/// One NLRI entry: a prefix, with its ADD-PATH path identifier when the
/// direction it travels in negotiated ADD-PATH (RFC 7911).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Nlri<P> {
    /// Path identifier; `None` when ADD-PATH is not in use. When it is in
    /// use and this is `None`, 0 is sent.
    pub path_id: Option<u32>,
    /// The prefix.
    pub prefix: P,
}

impl<P> Nlri<P> {
    /// An entry without a path identifier.
    pub fn new(prefix: P) -> Self {
        Self {
            path_id: None,
            prefix,
        }
    }
}

impl<P: fmt::Display> fmt::Display for Nlri<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path_id {
            Some(id) => write!(f, "{} (path {id})", self.prefix),
            None => write!(f, "{}", self.prefix),
        }
    }
}

/// What the NLRI codec needs of a prefix family.
pub trait Prefix: Copy + Sized {
    /// Longest valid prefix length for the family.
    const MAX_LEN: u8;
    /// Builds a prefix from `bytes`, which start with its `ceil(len/8)`
    /// address octets and may go on with octets of whatever follows (they
    /// are masked off with the host bits); `len` is already checked
    /// against `MAX_LEN`.
    fn from_wire(bytes: &[u8], len: u8) -> Self;
    /// Prefix length in bits.
    fn prefix_len(&self) -> u8;
    /// The address octets (4 or 16).
    fn octets(&self) -> [u8; 16];
}

impl Ipv4Prefix {
    /// Builds a prefix, clearing host bits.
    pub fn new(addr: Ipv4Addr, len: u8) -> Result<Self, PrefixLenError> {
        if len > 32 {
            return Err(PrefixLenError { len, max: 32 });
        }
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        Ok(Self {
            addr: Ipv4Addr::from(u32::from(addr) & mask),
            len,
        })
    }

    /// A /32 host route.
    pub fn host(addr: Ipv4Addr) -> Self {
        Self { addr, len: 32 }
    }

    /// The network address.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// Whether this is the default route (`0.0.0.0/0`).
    pub fn is_default(&self) -> bool {
        self.len == 0
    }
}

impl Ipv6Prefix {
    /// Builds a prefix, clearing host bits.
    pub fn new(addr: Ipv6Addr, len: u8) -> Result<Self, PrefixLenError> {
        if len > 128 {
            return Err(PrefixLenError { len, max: 128 });
        }
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        Ok(Self {
            addr: Ipv6Addr::from(u128::from(addr) & mask),
            len,
        })
    }

    /// A /128 host route.
    pub fn host(addr: Ipv6Addr) -> Self {
        Self { addr, len: 128 }
    }

    /// The network address.
    pub fn addr(&self) -> Ipv6Addr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// Whether this is the default route (`::/0`).
    pub fn is_default(&self) -> bool {
        self.len == 0
    }
}

impl Prefix for Ipv4Prefix {
    const MAX_LEN: u8 = 32;

    #[inline]
    fn from_wire(bytes: &[u8], len: u8) -> Self {
        // Four octets in one load whenever the list goes on for them (all
        // but the last entries), whatever the prefix length: a branch or a
        // copy per length costs more than the mask.
        let raw = match bytes.first_chunk::<4>() {
            Some(word) => u32::from_be_bytes(*word),
            // The last entry of a list: shifts, not a copy (which would
            // be a memcpy call in the loop that calls this).
            None => bytes
                .iter()
                .take(4)
                .enumerate()
                .fold(0, |raw, (k, &b)| raw | u32::from(b) << (24 - 8 * k)),
        };
        // `len <= 32` is checked by the caller; clear the host bits (all
        // of them for /0: the shift leaves only the high word).
        let len = len.min(32);
        let mask = (u64::from(u32::MAX) << (32 - u32::from(len))) as u32;
        Self {
            addr: Ipv4Addr::from(raw & mask),
            len,
        }
    }

    fn prefix_len(&self) -> u8 {
        self.len
    }

    fn octets(&self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..4].copy_from_slice(&self.addr.octets());
        out
    }
}

impl Prefix for Ipv6Prefix {
    const MAX_LEN: u8 = 128;

    #[inline]
    fn from_wire(bytes: &[u8], len: u8) -> Self {
        let raw = match bytes.first_chunk::<16>() {
            Some(full) => u128::from_be_bytes(*full),
            None => bytes
                .iter()
                .take(16)
                .enumerate()
                .fold(0, |raw, (k, &b)| raw | u128::from(b) << (120 - 8 * k)),
        };
        // `len <= 128` is checked by the caller; clear the host bits.
        let len = len.min(128);
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        Self {
            addr: Ipv6Addr::from(raw & mask),
            len,
        }
    }

    fn prefix_len(&self) -> u8 {
        self.len
    }

    fn octets(&self) -> [u8; 16] {
        self.addr.octets()
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Display for Ipv6Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Ipv4Prefix {
    type Err = PrefixParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PrefixParseError(s.to_owned());
        let (addr, len) = s.split_once('/').ok_or_else(err)?;
        let addr = addr.parse().map_err(|_| err())?;
        let len = len.parse().map_err(|_| err())?;
        Self::new(addr, len).map_err(|_| err())
    }
}

impl FromStr for Ipv6Prefix {
    type Err = PrefixParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PrefixParseError(s.to_owned());
        let (addr, len) = s.split_once('/').ok_or_else(err)?;
        let addr = addr.parse().map_err(|_| err())?;
        let len = len.parse().map_err(|_| err())?;
        Self::new(addr, len).map_err(|_| err())
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Ipv4Prefix {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let addr = Ipv4Addr::from(u32::arbitrary(u)?);
        let len = u.int_in_range(0..=32)?;
        Self::new(addr, len).map_err(|_| arbitrary::Error::IncorrectFormat)
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Ipv6Prefix {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let addr = Ipv6Addr::from(u128::arbitrary(u)?);
        let len = u.int_in_range(0..=128)?;
        Self::new(addr, len).map_err(|_| arbitrary::Error::IncorrectFormat)
    }
}

/// Why an NLRI list did not parse (RFC 7606 §5.3: the session is reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NlriError {
    /// A prefix length above the family maximum, at this offset.
    BadLength { offset: usize, len: u8 },
    /// The list ended inside an entry, at this offset.
    Truncated { offset: usize },
}

/// Parses a list of NLRI filling all of `r`.
///
/// This is the hottest loop of the decoder (a full UPDATE holds 800 host
/// routes), so it works on the slice directly instead of going through
/// `Reader`; every read is bounds-checked (`get`, `split_first`,
/// `first_chunk`).
pub(crate) fn parse_list<P: Prefix>(
    r: Reader<'_>,
    add_path: bool,
) -> Result<Vec<Nlri<P>>, NlriError> {
    // One loop per layout, so the hot one tests nothing it need not.
    if add_path {
        parse_entries::<P, true>(r)
    } else {
        parse_entries::<P, false>(r)
    }
}

fn parse_entries<P: Prefix, const ADD_PATH: bool>(
    r: Reader<'_>,
) -> Result<Vec<Nlri<P>>, NlriError> {
    let buf = r.rest();
    if buf.is_empty() {
        return Ok(Vec::new());
    }
    // Check the whole list first (it only hops over the lengths), then
    // decode entries known to be whole into a vector allocated once, never
    // beyond the bytes present: overwriting its slots needs no capacity
    // check, no error path and no spill per entry, which `push` costs.
    let count = check_entries::<P, ADD_PATH>(buf, r.offset())?;
    let filler = Nlri::new(P::from_wire(&[], 0));
    let mut out = vec![filler; count];
    let mut rest = buf;
    for slot in &mut out {
        let (nlri, tail) = decode_entry::<P, ADD_PATH>(rest);
        *slot = nlri;
        rest = tail;
    }
    Ok(out)
}

/// How many entries `buf` (at offset `base` in the message) holds, or the
/// first one that is malformed.
fn check_entries<P: Prefix, const ADD_PATH: bool>(
    buf: &[u8],
    base: usize,
) -> Result<usize, NlriError> {
    let mut i = 0;
    let mut n = 0;
    while i < buf.len() {
        if ADD_PATH {
            if buf.len() - i < 4 {
                return Err(NlriError::Truncated { offset: base + i });
            }
            i += 4;
        }
        let offset = base + i;
        let Some(&len) = buf.get(i) else {
            return Err(NlriError::Truncated { offset });
        };
        if len > P::MAX_LEN {
            return Err(NlriError::BadLength { offset, len });
        }
        i += 1 + usize::from(len).div_ceil(8);
        if i > buf.len() {
            return Err(NlriError::Truncated { offset });
        }
        n += 1;
    }
    Ok(n)
}

/// Decodes the entry at the start of `buf`, which [`check_entries`]
/// found whole, and returns it with the bytes after it. (Were it not
/// whole, the missing octets would read as zero: no panic either way.)
#[inline]
fn decode_entry<P: Prefix, const ADD_PATH: bool>(buf: &[u8]) -> (Nlri<P>, &[u8]) {
    let (path_id, buf) = if ADD_PATH {
        match buf.split_first_chunk::<4>() {
            Some((id, rest)) => (Some(u32::from_be_bytes(*id)), rest),
            None => (Some(0), &[][..]),
        }
    } else {
        (None, buf)
    };
    let (len, rest) = match buf.split_first() {
        Some((&len, rest)) => (len, rest),
        None => (0, buf),
    };
    let octets = usize::from(len).div_ceil(8);
    // `rest` goes on past the prefix; `from_wire` masks what follows.
    let prefix = P::from_wire(rest, len);
    (
        Nlri { path_id, prefix },
        rest.get(octets..).unwrap_or_default(),
    )
}

/// Encoded size of one entry.
pub(crate) fn entry_len<P: Prefix>(nlri: &Nlri<P>, add_path: bool) -> usize {
    usize::from(add_path) * 4 + 1 + usize::from(nlri.prefix.prefix_len()).div_ceil(8)
}

/// Appends one entry.
pub(crate) fn emit_entry<P: Prefix>(nlri: &Nlri<P>, add_path: bool, out: &mut BytesMut) {
    if add_path {
        out.put_u32(nlri.path_id.unwrap_or(0));
    }
    let len = nlri.prefix.prefix_len();
    out.put_u8(len);
    out.put_slice(&nlri.prefix.octets()[..usize::from(len).div_ceil(8)]);
}

/// Appends a whole list.
pub(crate) fn emit_list<P: Prefix>(list: &[Nlri<P>], add_path: bool, out: &mut BytesMut) {
    for nlri in list {
        emit_entry(nlri, add_path, out);
    }
}

/// Encoded size of a whole list.
pub(crate) fn list_len<P: Prefix>(list: &[Nlri<P>], add_path: bool) -> usize {
    list.iter().map(|n| entry_len(n, add_path)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_masks_host_bits() {
        let p = Ipv4Prefix::new(Ipv4Addr::new(10, 1, 2, 3), 16).unwrap();
        assert_eq!(p.to_string(), "10.1.0.0/16");
        assert_eq!(
            Ipv4Prefix::new(Ipv4Addr::LOCALHOST, 33),
            Err(PrefixLenError { len: 33, max: 32 })
        );
        let p: Ipv6Prefix = "2001:db8::1/32".parse().unwrap();
        assert_eq!(p.to_string(), "2001:db8::/32");
        assert_eq!(
            Ipv4Prefix::new(Ipv4Addr::BROADCAST, 0).unwrap().to_string(),
            "0.0.0.0/0"
        );
    }

    #[test]
    fn parse_and_emit_list() {
        let wire = [
            32, 192, 0, 2, 1, // 192.0.2.1/32
            24, 198, 51, 100, // 198.51.100.0/24
            0,   // 0.0.0.0/0
        ];
        let list: Vec<Nlri<Ipv4Prefix>> = parse_list(Reader::new(&wire), false).unwrap();
        let text: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(text, ["192.0.2.1/32", "198.51.100.0/24", "0.0.0.0/0"]);
        let mut out = BytesMut::new();
        emit_list(&list, false, &mut out);
        assert_eq!(&out[..], &wire[..]);
        assert_eq!(list_len(&list, false), wire.len());
    }

    #[test]
    fn prefixes_mid_list_and_at_its_end_clear_the_same_host_bits() {
        // Each prefix has host bits set on the wire. In the middle of the
        // list the decoder loads a whole address that runs into the next
        // entry; at the end fewer octets are left.
        let wire = [
            20, 10, 1, 0xff, // 10.1.240.0/20, then the next entry's octets
            25, 192, 0, 2, 0xff, // 192.0.2.128/25
            0,    // 0.0.0.0/0
            20, 10, 1, 0xff, // 10.1.240.0/20, last
        ];
        let list: Vec<Nlri<Ipv4Prefix>> = parse_list(Reader::new(&wire), false).unwrap();
        let text: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "10.1.240.0/20",
                "192.0.2.128/25",
                "0.0.0.0/0",
                "10.1.240.0/20"
            ]
        );
        let mut out = BytesMut::new();
        emit_list(&list, false, &mut out);
        // Emitted without the host bits the wire had.
        assert_eq!(
            &out[..],
            &[20, 10, 1, 0xf0, 25, 192, 0, 2, 0x80, 0, 20, 10, 1, 0xf0]
        );

        let wire = [
            64, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, // 2001:db8:0:1::/64
            65, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0xff, // 2001:db8:0:1:8000::/65, last
        ];
        let list: Vec<Nlri<Ipv6Prefix>> = parse_list(Reader::new(&wire), false).unwrap();
        let text: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(text, ["2001:db8:0:1::/64", "2001:db8:0:1:8000::/65"]);
    }

    #[test]
    fn parse_add_path() {
        let wire = [
            0, 0, 0, 7, 128, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        let list: Vec<Nlri<Ipv6Prefix>> = parse_list(Reader::new(&wire), true).unwrap();
        assert_eq!(list[0].path_id, Some(7));
        assert_eq!(list[0].prefix.to_string(), "2001:db8::1/128");
        let mut out = BytesMut::new();
        emit_list(&list, true, &mut out);
        assert_eq!(&out[..], &wire[..]);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            parse_list::<Ipv4Prefix>(Reader::new(&[33, 1, 2, 3, 4, 5]), false),
            Err(NlriError::BadLength { offset: 0, len: 33 })
        );
        assert_eq!(
            parse_list::<Ipv4Prefix>(Reader::new(&[24, 1, 2]), false),
            Err(NlriError::Truncated { offset: 0 })
        );
        assert_eq!(
            parse_list::<Ipv4Prefix>(Reader::new(&[0, 0]), true),
            Err(NlriError::Truncated { offset: 0 })
        );
        // The first bad entry is reported, at its offset, after good ones.
        assert_eq!(
            parse_list::<Ipv4Prefix>(Reader::with_base(&[8, 10, 40, 1], 23), false),
            Err(NlriError::BadLength {
                offset: 25,
                len: 40
            })
        );
        assert_eq!(
            parse_list::<Ipv4Prefix>(Reader::new(&[0, 0, 0, 7, 8, 10, 0, 0]), true),
            Err(NlriError::Truncated { offset: 6 })
        );
        assert_eq!(
            parse_list::<Ipv6Prefix>(Reader::new(&[129]), false),
            Err(NlriError::BadLength {
                offset: 0,
                len: 129
            })
        );
    }
}
