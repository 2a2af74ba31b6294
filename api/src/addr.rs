//! Address ranges as written in `IPAddressPool.spec.addresses`.
//!
//! MetalLB accepts two spellings, both for IPv4 and IPv6: a CIDR prefix
//! (`192.168.10.0/24`, `fc00:f853:ccd:e799::/124`) and an inclusive range of
//! two addresses of one family (`192.168.9.1-192.168.9.5`, spaces allowed
//! around the dash). Like Go's `net.ParseCIDR`, which MetalLB uses, a prefix
//! with host bits set (`10.0.0.1/24`) means its network (`10.0.0.0/24`).
//! CIDR values are [`IpNetwork`]s (the `ipnetwork` crate); the syntax is
//! checked here, because `ipnetwork`'s parser takes spellings Go rejects
//! (`10.0.0.0` alone as a /32, leading zeros).
//!
//! Two spellings differ from MetalLB on purpose or by its own logic:
//!
//! - A range from one family to the other. MetalLB compares the two ends
//!   as 16-byte addresses (IPv4 `a.b.c.d` as `::ffff:a.b.c.d`): when the
//!   first is after the last it refuses the range as reversed, otherwise it
//!   accepts it and it holds no address (its range summarizer gives nothing
//!   for two families). [`Entry::parse`] reads it the same way:
//!   [`Entry::Empty`], or [`AddressError::Reversed`].
//! - An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`), which Go reads as the
//!   IPv4 address and Kubernetes' CEL `isIP`/`isCIDR` refuse. The CRDs'
//!   rules refuse it as those functions do, so the parser refuses it too
//!   ([`AddressError::Ipv4Mapped`]): write the IPv4 address.
//!
//! Pure parsing: no I/O.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use ipnetwork::IpNetwork;

/// One `spec.addresses` entry, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// A CIDR or a range of one family.
    Range(AddressRange),
    /// A range from an IPv4 to an IPv6 address (or the reverse) whose first
    /// end is not after its last, compared as MetalLB does: it holds no
    /// address, as in MetalLB.
    Empty,
}

impl Entry {
    /// Parses a pool entry as MetalLB does (see the module doc).
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        let Some((start, end)) = text.split_once('-') else {
            return parse_cidr(text).map(Self::Range);
        };
        let start = start.trim();
        let end = end.trim();
        let first = address(start).map_err(|e| e.unwrap_or(AddressError::Start(start.into())))?;
        let last = address(end).map_err(|e| e.unwrap_or(AddressError::End(end.into())))?;
        if first.is_ipv4() != last.is_ipv4() {
            // MetalLB's order: IPv4 as IPv4-mapped IPv6. No end is mapped
            // (refused above), so the two never compare equal.
            return if as_16_bytes(first) < as_16_bytes(last) {
                Ok(Self::Empty)
            } else {
                Err(AddressError::Reversed)
            };
        }
        if first > last {
            return Err(AddressError::Reversed);
        }
        Ok(Self::Range(AddressRange {
            first,
            last,
            cidr: None,
        }))
    }
}

/// An inclusive range of addresses of one family, parsed from a pool entry.
///
/// Invariant: `first` and `last` are of the same family and `first <= last`;
/// a CIDR entry's network is `first/len` with no host bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AddressRange {
    first: IpAddr,
    last: IpAddr,
    /// The network when the entry was written as a CIDR.
    cidr: Option<IpNetwork>,
}

impl AddressRange {
    /// Parses a pool entry: `a.b.c.d/n`, `a.b.c.d-e.f.g.h` or their IPv6
    /// forms. An entry that holds no address ([`Entry::Empty`]) is
    /// [`AddressError::MixedFamilies`] here.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        match Entry::parse(text)? {
            Entry::Range(r) => Ok(r),
            Entry::Empty => Err(AddressError::MixedFamilies),
        }
    }

    /// The range of a CIDR value (its network, host bits cleared).
    pub fn from_network(net: IpNetwork) -> Self {
        let network = net.network();
        Self {
            first: network,
            last: net.broadcast(),
            cidr: IpNetwork::new(network, net.prefix()).ok(),
        }
    }

    /// Whether `ip` is in the range (an address of the other family never
    /// is).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.is_ipv4() && self.first <= ip && ip <= self.last
    }

    /// How many addresses the range holds, saturating at `u128::MAX` (only
    /// `::/0` holds more).
    pub fn len(&self) -> u128 {
        (to_u128(self.last) - to_u128(self.first)).saturating_add(1)
    }

    /// Never true: a range holds at least one address.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The network, when the entry was written as a CIDR.
    pub fn cidr(&self) -> Option<IpNetwork> {
        self.cidr
    }

    /// The first address of the range.
    pub fn first(&self) -> IpAddr {
        self.first
    }

    /// The last address of the range (inclusive).
    pub fn last(&self) -> IpAddr {
        self.last
    }

    /// Whether this is an IPv4 range.
    pub fn is_ipv4(&self) -> bool {
        self.first.is_ipv4()
    }

    /// Whether the two ranges share at least one address.
    pub fn overlaps(&self, other: &Self) -> bool {
        self.is_ipv4() == other.is_ipv4() && self.first <= other.last && other.first <= self.last
    }

    /// The smallest CIDR blocks that together cover exactly this range, in
    /// order; a CIDR entry gives itself.
    pub fn prefixes(&self) -> Vec<IpNetwork> {
        if let Some(net) = self.cidr {
            return vec![net];
        }
        let bits = family_bits(self.first);
        let (mut start, end) = (to_u128(self.first), to_u128(self.last));
        let mut out = Vec::new();
        loop {
            // The largest block aligned at `start` that does not pass `end`.
            let mut host_bits = start.trailing_zeros().min(bits);
            while host_bits > 0 && block_end(start, host_bits) > end {
                host_bits -= 1;
            }
            // `host_bits <= bits <= 128`, so the length fits in a u8 and is
            // valid for the family.
            if let Ok(net) = IpNetwork::new(from_u128(self.first, start), (bits - host_bits) as u8)
            {
                out.push(net);
            }
            let last = block_end(start, host_bits);
            if last >= end {
                return out;
            }
            start = last + 1;
        }
    }

    /// The shortest prefix length among [`Self::prefixes`]: the widest block.
    ///
    /// MetalLB requires an advertisement's aggregation length to be at least
    /// this, so that aggregation never announces addresses outside the pool.
    pub fn shortest_prefix_len(&self) -> u8 {
        self.prefixes()
            .iter()
            .map(IpNetwork::prefix)
            .min()
            .unwrap_or(family_bits(self.first) as u8)
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cidr {
            Some(net) => write!(f, "{net}"),
            None => write!(f, "{}-{}", self.first, self.last),
        }
    }
}

/// Why a pool entry is not an address range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// No dash, and not `address/length` with a length within the family.
    #[error("is not a valid CIDR")]
    Cidr,
    /// The part before the dash is not an IP address.
    #[error("is not a valid range: start {0:?} is not an IP address")]
    Start(String),
    /// The part after the dash is not an IP address.
    #[error("is not a valid range: end {0:?} is not an IP address")]
    End(String),
    /// One end is IPv4 and the other IPv6, in MetalLB's order: a range
    /// that holds no address ([`Entry::Empty`]), which
    /// [`AddressRange::parse`] cannot return.
    #[error("is a range from one address family to the other: it holds no address")]
    MixedFamilies,
    /// The start is after the end (with MetalLB's order between families:
    /// IPv4 `a.b.c.d` as `::ffff:a.b.c.d`).
    #[error("is a reversed range: its first address is after its last")]
    Reversed,
    /// An IPv4-mapped IPv6 address, which the CRDs refuse (as Kubernetes'
    /// CEL `isIP` and `isCIDR` do).
    #[error("holds the IPv4-mapped IPv6 address {written:?}: write it as IPv4 ({ipv4})")]
    Ipv4Mapped {
        /// The address as written.
        written: String,
        /// The IPv4 address it maps.
        ipv4: Ipv4Addr,
    },
}

/// Parses one address of a pool entry: `Err(None)` when it is not one,
/// `Err(Some(_))` when it is IPv4-mapped.
fn address(text: &str) -> Result<IpAddr, Option<AddressError>> {
    let addr = IpAddr::from_str(text).map_err(|_| None)?;
    match ipv4_mapped(addr) {
        Some(ipv4) => Err(Some(AddressError::Ipv4Mapped {
            written: text.into(),
            ipv4,
        })),
        None => Ok(addr),
    }
}

/// The IPv4 address an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) maps,
/// `None` for any other address. Such an address is refused wherever
/// metallb.io objects hold one, as the CRDs refuse it.
pub fn ipv4_mapped(addr: IpAddr) -> Option<Ipv4Addr> {
    match addr {
        IpAddr::V6(a) => a.to_ipv4_mapped(),
        IpAddr::V4(_) => None,
    }
}

/// An address as Go's 16-byte `net.IP` holds it: IPv4 as `::ffff:a.b.c.d`.
fn as_16_bytes(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Parses a CIDR entry, `address/length`.
fn parse_cidr(text: &str) -> Result<AddressRange, AddressError> {
    let (written, len) = text.split_once('/').ok_or(AddressError::Cidr)?;
    let addr = address(written).map_err(|e| e.unwrap_or(AddressError::Cidr))?;
    // `u8::from_str` would take "+24"; Go's parser takes digits only.
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddressError::Cidr);
    }
    let len: u8 = len.parse().map_err(|_| AddressError::Cidr)?;
    let bits = family_bits(addr);
    if u32::from(len) > bits {
        return Err(AddressError::Cidr);
    }
    let host_mask = if u32::from(len) == bits {
        0
    } else {
        u128::MAX >> (128 - bits + u32::from(len))
    };
    let network = to_u128(addr) & !host_mask;
    let first = from_u128(addr, network);
    Ok(AddressRange {
        first,
        last: from_u128(addr, network | host_mask),
        // `len` is within the family's bits (checked above).
        cidr: IpNetwork::new(first, len).ok(),
    })
}

fn family_bits(addr: IpAddr) -> u32 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// An address as a number: an IPv4 address in the low 32 bits. Ranges of
/// one family map to intervals of these numbers (the controller's free-list
/// is built on them).
pub fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Builds an address of `like`'s family from a number that fits it (an
/// IPv4 one keeps the low 32 bits).
pub fn from_u128(like: IpAddr, value: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4((value as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(value.into()),
    }
}

fn block_end(start: u128, host_bits: u32) -> u128 {
    if host_bits >= 128 {
        u128::MAX
    } else {
        start | ((1u128 << host_bits) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs() {
        let r = AddressRange::parse("192.168.10.0/24").unwrap();
        assert_eq!(
            (r.first(), r.last()),
            (ip("192.168.10.0"), ip("192.168.10.255"))
        );
        // Host bits set: the network, as Go's net.ParseCIDR does.
        let r = AddressRange::parse("10.0.0.7/30").unwrap();
        assert_eq!((r.first(), r.last()), (ip("10.0.0.4"), ip("10.0.0.7")));
        let r = AddressRange::parse("fc00:f853:ccd:e799::/124").unwrap();
        assert_eq!(r.last(), ip("fc00:f853:ccd:e799::f"));
        assert_eq!(
            AddressRange::parse("0.0.0.0/0").unwrap().last(),
            ip("255.255.255.255")
        );
        assert_eq!(
            AddressRange::parse("::/0").unwrap().last(),
            ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
        );
        assert_eq!(
            AddressRange::parse("10.1.1.1/32").unwrap().to_string(),
            "10.1.1.1/32"
        );
    }

    #[test]
    fn bad_cidrs() {
        for text in [
            "10.0.0.0/33",
            "10.0.0.0",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0/8",
            "::/129",
            "010.0.0.0/8",
            "10.0.0.0/8/8",
            "",
        ] {
            assert_eq!(AddressRange::parse(text), Err(AddressError::Cidr), "{text}");
        }
    }

    #[test]
    fn ranges() {
        let r = AddressRange::parse("192.168.9.1-192.168.9.5").unwrap();
        assert_eq!(
            (r.first(), r.last()),
            (ip("192.168.9.1"), ip("192.168.9.5"))
        );
        let r = AddressRange::parse("192.168.9.1 - 192.168.9.1").unwrap();
        assert_eq!(r.first(), r.last());
        let r = AddressRange::parse("fc00::1-fc00::ff").unwrap();
        assert!(!r.is_ipv4());
        assert_eq!(r.to_string(), "fc00::1-fc00::ff");
    }

    #[test]
    fn bad_ranges() {
        assert_eq!(
            AddressRange::parse("10.0.0.5-10.0.0.1"),
            Err(AddressError::Reversed)
        );
        assert_eq!(
            AddressRange::parse("10.0.0.1-fc00::1"),
            Err(AddressError::MixedFamilies)
        );
        assert_eq!(
            AddressRange::parse("fc00::1-10.0.0.1"),
            Err(AddressError::Reversed)
        );
        assert_eq!(
            AddressRange::parse("10.0.0.x-10.0.0.9"),
            Err(AddressError::Start("10.0.0.x".into()))
        );
        assert_eq!(
            AddressRange::parse("10.0.0.1-"),
            Err(AddressError::End(String::new()))
        );
        assert_eq!(
            AddressRange::parse("10.0.0.1-10.0.0.2-10.0.0.3"),
            Err(AddressError::End("10.0.0.2-10.0.0.3".into()))
        );
    }

    #[test]
    fn entries_across_families_follow_metallb() {
        // MetalLB compares the ends as 16-byte addresses, IPv4 a.b.c.d as
        // ::ffff:a.b.c.d: in order, the range holds nothing; else reversed.
        let table = [
            ("10.0.0.1-fc00::1", Ok(Entry::Empty)),
            ("255.255.255.255 - 2001:db8::", Ok(Entry::Empty)),
            ("::1-10.0.0.1", Ok(Entry::Empty)),
            ("::fffe:ffff:ffff-0.0.0.0", Ok(Entry::Empty)),
            ("fc00::1-10.0.0.1", Err(AddressError::Reversed)),
            ("10.0.0.1-::1", Err(AddressError::Reversed)),
            ("0.0.0.0-::fffe:ffff:ffff", Err(AddressError::Reversed)),
            ("1::-0.0.0.0", Err(AddressError::Reversed)),
        ];
        for (text, want) in table {
            assert_eq!(Entry::parse(text), want, "{text}");
        }
        assert_eq!(
            Entry::parse("10.0.0.1-10.0.0.2"),
            Ok(Entry::Range(
                AddressRange::parse("10.0.0.1-10.0.0.2").unwrap()
            ))
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_refused() {
        let mapped = |written: &str, ipv4: &str| {
            Err(AddressError::Ipv4Mapped {
                written: written.into(),
                ipv4: ipv4.parse().unwrap(),
            })
        };
        let table = [
            ("::ffff:10.0.0.0/120", mapped("::ffff:10.0.0.0", "10.0.0.0")),
            ("::FFFF:a00:0/104", mapped("::FFFF:a00:0", "10.0.0.0")),
            (
                "0:0:0:0:0:ffff:10.0.0.1/128",
                mapped("0:0:0:0:0:ffff:10.0.0.1", "10.0.0.1"),
            ),
            (
                "::ffff:10.0.0.1-::ffff:10.0.0.9",
                mapped("::ffff:10.0.0.1", "10.0.0.1"),
            ),
            (
                "10.0.0.1 - ::ffff:10.0.0.9",
                mapped("::ffff:10.0.0.9", "10.0.0.9"),
            ),
        ];
        for (text, want) in table {
            assert_eq!(Entry::parse(text), want, "{text}");
        }
        let error = AddressError::Ipv4Mapped {
            written: "::ffff:10.0.0.1".into(),
            ipv4: Ipv4Addr::new(10, 0, 0, 1),
        };
        assert_eq!(
            error.to_string(),
            r#"holds the IPv4-mapped IPv6 address "::ffff:10.0.0.1": write it as IPv4 (10.0.0.1)"#
        );
        // Neighbours that are not mapped: IPv4-compatible, NAT64, ::ffff:0:0/80.
        for ok in [
            "::10.0.0.1/128",
            "64:ff9b::10.0.0.1/128",
            "::/80",
            "::fffe:0:0/96",
        ] {
            assert!(Entry::parse(ok).is_ok(), "{ok}");
        }
    }

    fn nets(texts: &[&str]) -> Vec<IpNetwork> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    #[test]
    fn prefixes_summarize_a_range() {
        let r = AddressRange::parse("10.0.0.1-10.0.0.6").unwrap();
        assert_eq!(
            r.prefixes(),
            nets(&["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"])
        );
        assert_eq!(r.shortest_prefix_len(), 31);
        let r = AddressRange::parse("10.0.0.0-10.0.1.255").unwrap();
        assert_eq!(r.prefixes(), nets(&["10.0.0.0/23"]));
        let r = AddressRange::parse("0.0.0.0-255.255.255.255").unwrap();
        assert_eq!(r.prefixes(), nets(&["0.0.0.0/0"]));
        let r = AddressRange::parse("::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff").unwrap();
        assert_eq!(r.prefixes(), nets(&["::/0"]));
        // A CIDR with host bits set is its network.
        assert_eq!(
            AddressRange::parse("10.0.0.7/30").unwrap().prefixes(),
            nets(&["10.0.0.4/30"])
        );
        assert_eq!(
            AddressRange::parse("fc00::/64")
                .unwrap()
                .shortest_prefix_len(),
            64
        );
    }

    #[test]
    fn overlaps() {
        let a = AddressRange::parse("10.0.0.0/24").unwrap();
        let b = AddressRange::parse("10.0.0.255-10.0.1.3").unwrap();
        let c = AddressRange::parse("10.0.1.0/24").unwrap();
        let v6 = AddressRange::parse("::a00:0/120").unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a) && b.overlaps(&c));
        assert!(!a.overlaps(&c));
        // Same integers, different families: no overlap.
        assert!(!a.overlaps(&v6));
    }

    #[test]
    fn contains_and_len() {
        let r = AddressRange::parse("10.0.0.5-10.0.0.9").unwrap();
        assert!(r.contains(ip("10.0.0.5")) && r.contains(ip("10.0.0.9")));
        assert!(!r.contains(ip("10.0.0.4")) && !r.contains(ip("10.0.0.10")));
        // The same number in the other family is not inside.
        assert!(!r.contains(ip("::a00:5")));
        assert_eq!(r.len(), 5);
        assert_eq!(AddressRange::parse("2001:db8::/64").unwrap().len(), 1 << 64);
        assert_eq!(AddressRange::parse("::/0").unwrap().len(), u128::MAX);
        assert_eq!(AddressRange::parse("10.0.0.0/30").unwrap().len(), 4);
        let net: IpNetwork = "10.0.0.7/30".parse().unwrap();
        let r = AddressRange::from_network(net);
        assert_eq!((r.first(), r.last()), (ip("10.0.0.4"), ip("10.0.0.7")));
        assert_eq!(r.cidr(), Some("10.0.0.4/30".parse().unwrap()));
        assert_eq!(r, AddressRange::parse("10.0.0.4/30").unwrap());
    }
}
