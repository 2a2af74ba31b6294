//! Address ranges as written in `IPAddressPool.spec.addresses`.
//!
//! MetalLB accepts two spellings, both for IPv4 and IPv6: a CIDR prefix
//! (`192.168.10.0/24`, `fc00:f853:ccd:e799::/124`) and an inclusive range of
//! two addresses of one family (`192.168.9.1-192.168.9.5`, spaces allowed
//! around the dash). Like Go's `net.ParseCIDR`, which MetalLB uses, a prefix
//! with host bits set (`10.0.0.1/24`) means its network (`10.0.0.0/24`).
//! CIDR values are [`IpNetwork`]s (the `ipnetwork` crate); the syntax is
//! checked here, because `ipnetwork`'s parser takes spellings Go rejects
//! (`10.0.0.0` alone as a /32, leading zeros). Pure parsing: no I/O.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnetwork::IpNetwork;

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
    /// Parses a pool entry: `a.b.c.d/n`, `a.b.c.d-e.f.g.h` or their IPv6 forms.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        if let Some((start, end)) = text.split_once('-') {
            let start = start.trim();
            let end = end.trim();
            let first = IpAddr::from_str(start).map_err(|_| AddressError::Start(start.into()))?;
            let last = IpAddr::from_str(end).map_err(|_| AddressError::End(end.into()))?;
            if first.is_ipv4() != last.is_ipv4() {
                return Err(AddressError::MixedFamilies);
            }
            if first > last {
                return Err(AddressError::Reversed);
            }
            return Ok(Self {
                first,
                last,
                cidr: None,
            });
        }
        let (addr, len) = text.split_once('/').ok_or(AddressError::Cidr)?;
        let addr = IpAddr::from_str(addr).map_err(|_| AddressError::Cidr)?;
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
        Ok(Self {
            first,
            last: from_u128(addr, network | host_mask),
            // `len` is within the family's bits (checked above).
            cidr: IpNetwork::new(first, len).ok(),
        })
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
    /// One end is IPv4 and the other IPv6.
    #[error("is not a valid range: start and end are of different address families")]
    MixedFamilies,
    /// The start is after the end.
    #[error("is not a valid range: start is after end")]
    Reversed,
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
