//! Path attributes (RFC 4271 §4.3 and §5, RFC 1997, 4360, 4456, 4760, 5701,
//! 6793, 8092) with RFC 7606 error handling.
//!
//! ```text
//!  0                   1
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Attr. Flags  |Attr. Type Code|  then Length (1 octet, or 2 when
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  Extended Length is set) and Value
//! ```

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::{BufMut, Bytes, BytesMut};

use super::error::{Action, AttrError, UpdateError};
use super::iana::{AS_TRANS, Afi, AttrType, Safi, update_subcode as sub};
use super::nlri::{self, Ipv4Prefix, Ipv6Prefix, Nlri, NlriError};
use super::reader::Reader;
use super::records::{
    ClusterList, Communities, ExtendedCommunities, Ipv6ExtendedCommunities, LargeCommunities,
    Record, Records,
};
use super::{DecodeCtx, EncodeCtx, Family};

/// One path attribute: its flags as received (or canonical when built)
/// and its decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct PathAttribute {
    /// Flags. For known attributes only Partial and Extended Length are
    /// taken from here on emit; Optional and Transitive follow the type.
    pub flags: AttrFlags,
    /// The value.
    pub value: AttrValue,
}

/// Attribute flags octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct AttrFlags(pub u8);

impl AttrFlags {
    /// Optional (1) or well-known (0).
    pub const OPTIONAL: u8 = 0x80;
    /// Transitive.
    pub const TRANSITIVE: u8 = 0x40;
    /// Partial: an optional transitive attribute passed on by a speaker that
    /// did not recognise it.
    pub const PARTIAL: u8 = 0x20;
    /// Extended Length: the length field has 2 octets.
    pub const EXTENDED_LENGTH: u8 = 0x10;

    /// Whether all bits of `mask` are set.
    pub fn has(self, mask: u8) -> bool {
        self.0 & mask == mask
    }
}

/// A decoded path attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum AttrValue {
    /// ORIGIN.
    Origin(Origin),
    /// AS_PATH, 2- or 4-octet per the session.
    AsPath(AsPath),
    /// NEXT_HOP.
    NextHop(Ipv4Addr),
    /// MULTI_EXIT_DISC.
    MultiExitDisc(u32),
    /// LOCAL_PREF.
    LocalPref(u32),
    /// ATOMIC_AGGREGATE.
    AtomicAggregate,
    /// AGGREGATOR, 2- or 4-octet AS per the session.
    Aggregator(Aggregator),
    /// COMMUNITIES.
    Communities(Communities),
    /// ORIGINATOR_ID.
    OriginatorId(Ipv4Addr),
    /// CLUSTER_LIST.
    ClusterList(ClusterList),
    /// MP_REACH_NLRI.
    MpReach(MpReach),
    /// MP_UNREACH_NLRI.
    MpUnreach(MpUnreach),
    /// EXTENDED COMMUNITIES.
    ExtendedCommunities(ExtendedCommunities),
    /// AS4_PATH (always 4-octet).
    As4Path(AsPath),
    /// AS4_AGGREGATOR.
    As4Aggregator(Aggregator),
    /// IPv6 Address Specific Extended Communities.
    Ipv6ExtendedCommunities(Ipv6ExtendedCommunities),
    /// LARGE_COMMUNITY.
    LargeCommunities(LargeCommunities),
    /// Any other optional attribute, kept as bytes (its flags are in
    /// [`PathAttribute::flags`]).
    Unknown(UnknownAttr),
}

/// An attribute of a type code this crate does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAttr {
    /// Type code (never one that [`AttrValue`] names).
    pub type_code: u8,
    /// Value octets.
    pub data: Bytes,
}

/// ORIGIN values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Origin {
    /// Learned by an interior protocol.
    Igp,
    /// Learned by EGP.
    Egp,
    /// Learned some other way.
    Incomplete,
}

/// An AS path: a list of segments, kept as its octets in the 4-octet
/// encoding (RFC 6793), checked once.
///
/// ```text
/// +-----------------+-----------------+------------------------------+
/// | segment type    | number of ASes  | ASes, 4 octets each          | ...
/// +-----------------+-----------------+------------------------------+
/// ```
///
/// Every value is valid: each segment has a known type and 1..=255 ASes.
/// A path parsed with [`Message::parse_bytes`](super::Message::parse_bytes)
/// on a 4-octet session is a slice of the received message (no allocation);
/// on a 2-octet session it is widened into octets of its own. Equality and
/// hashing compare the octets, which is comparing the segments.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct AsPath {
    /// Segments, each `type, count, count * 4 octets`, `1 <= count`.
    wire: Bytes,
}

/// One AS path segment, borrowed from its [`AsPath`]. It holds 1..=255
/// ASes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsSegment<'a> {
    /// Segment type.
    pub kind: SegmentType,
    /// The ASes, 4 octets each.
    asns: &'a [[u8; 4]],
}

/// The segments of an [`AsPath`], in order.
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    rest: &'a [u8],
}

/// AS path segment types (RFC 4271, RFC 5065).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum SegmentType {
    /// AS_SET (1).
    Set,
    /// AS_SEQUENCE (2).
    Sequence,
    /// AS_CONFED_SEQUENCE (3).
    ConfedSequence,
    /// AS_CONFED_SET (4).
    ConfedSet,
}

/// AGGREGATOR / AS4_AGGREGATOR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Aggregator {
    /// AS of the aggregating speaker.
    pub asn: u32,
    /// Its BGP Identifier.
    pub addr: Ipv4Addr,
}

/// A standard community (RFC 1997).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Community(pub u32);

/// An extended community (RFC 4360).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ExtendedCommunity(pub [u8; 8]);

/// An IPv6 address specific extended community (RFC 5701).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Ipv6ExtendedCommunity(pub [u8; 20]);

/// A large community (RFC 8092).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct LargeCommunity {
    /// Global Administrator (an AS).
    pub global_admin: u32,
    /// Local Data Part 1.
    pub local_data1: u32,
    /// Local Data Part 2.
    pub local_data2: u32,
}

/// A next hop carried in MP_REACH_NLRI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum NextHop {
    /// An IPv4 next hop.
    V4(Ipv4Addr),
    /// An IPv6 next hop: global, plus link-local when the peer shares the
    /// link (RFC 2545 §3). Also used for IPv4 NLRI (RFC 8950).
    V6 {
        /// Global address.
        global: Ipv6Addr,
        /// Link-local address.
        link_local: Option<Ipv6Addr>,
    },
}

/// MP_REACH_NLRI (RFC 4760 §3).
///
/// ```text
/// +---------------------------------------------------------+
/// | Address Family Identifier (2 octets)                    |
/// | Subsequent Address Family Identifier (1 octet)          |
/// | Length of Next Hop Network Address (1 octet)            |
/// | Network Address of Next Hop (variable)                  |
/// | Reserved (1 octet)                                      |
/// | Network Layer Reachability Information (variable)       |
/// +---------------------------------------------------------+
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum MpReach {
    /// IPv4 unicast, next hop IPv4 or (RFC 8950) IPv6.
    Ipv4Unicast {
        /// Next hop.
        next_hop: NextHop,
        /// Reachable prefixes.
        nlri: Vec<Nlri<Ipv4Prefix>>,
    },
    /// IPv6 unicast.
    Ipv6Unicast {
        /// Next hop; `NextHop::V4` is not valid here and is never parsed.
        next_hop: NextHop,
        /// Reachable prefixes.
        nlri: Vec<Nlri<Ipv6Prefix>>,
    },
    /// Another AFI/SAFI, or a next hop of a length invalid for the family
    /// (then the UPDATE also carries a treat-as-withdraw error).
    Other(RawMp),
}

/// MP_UNREACH_NLRI (RFC 4760 §4): AFI, SAFI and withdrawn routes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum MpUnreach {
    /// IPv4 unicast withdrawals.
    Ipv4Unicast(Vec<Nlri<Ipv4Prefix>>),
    /// IPv6 unicast withdrawals.
    Ipv6Unicast(Vec<Nlri<Ipv6Prefix>>),
    /// Another AFI/SAFI, raw (`next_hop` is empty).
    Other(RawMp),
}

/// MP attribute contents for a family this crate does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMp {
    /// Address family.
    pub afi: Afi,
    /// Subsequent address family.
    pub safi: Safi,
    /// Next hop octets (MP_REACH_NLRI only; at most 255).
    pub next_hop: Bytes,
    /// NLRI octets, undecoded.
    pub nlri: Bytes,
}

impl Community {
    /// NO_EXPORT (RFC 1997).
    pub const NO_EXPORT: Self = Self(0xFFFF_FF01);
    /// NO_ADVERTISE (RFC 1997).
    pub const NO_ADVERTISE: Self = Self(0xFFFF_FF02);
    /// NO_EXPORT_SUBCONFED (RFC 1997).
    pub const NO_EXPORT_SUBCONFED: Self = Self(0xFFFF_FF03);
    /// NOPEER (RFC 3765).
    pub const NOPEER: Self = Self(0xFFFF_FF04);
    /// GRACEFUL_SHUTDOWN (RFC 8326).
    pub const GRACEFUL_SHUTDOWN: Self = Self(0xFFFF_0000);
    /// ACCEPT_OWN (RFC 7611).
    pub const ACCEPT_OWN: Self = Self(0xFFFF_0001);
    /// LLGR_STALE (RFC 9494).
    pub const LLGR_STALE: Self = Self(0xFFFF_0006);
    /// NO_LLGR (RFC 9494).
    pub const NO_LLGR: Self = Self(0xFFFF_0007);
    /// BLACKHOLE (RFC 7999).
    pub const BLACKHOLE: Self = Self(0xFFFF_029A);

    /// A community from its two halves (`asn:value`).
    pub const fn new(high: u16, low: u16) -> Self {
        Self(((high as u32) << 16) | low as u32)
    }

    /// The IANA name of a well-known community.
    pub fn well_known_name(self) -> Option<&'static str> {
        Some(match self {
            Self::NO_EXPORT => "no-export",
            Self::NO_ADVERTISE => "no-advertise",
            Self::NO_EXPORT_SUBCONFED => "no-export-subconfed",
            Self::NOPEER => "nopeer",
            Self::GRACEFUL_SHUTDOWN => "graceful-shutdown",
            Self::ACCEPT_OWN => "accept-own",
            Self::LLGR_STALE => "llgr-stale",
            Self::NO_LLGR => "no-llgr",
            Self::BLACKHOLE => "blackhole",
            _ => return None,
        })
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.well_known_name() {
            Some(name) => f.write_str(name),
            None => write!(f, "{}:{}", self.0 >> 16, self.0 & 0xffff),
        }
    }
}

impl fmt::Display for LargeCommunity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.global_admin, self.local_data1, self.local_data2
        )
    }
}

impl ExtendedCommunity {
    /// Type high octet (with the IANA authority and transitive bits).
    pub fn type_high(&self) -> u8 {
        self.0[0]
    }

    /// Sub-type octet.
    pub fn subtype(&self) -> u8 {
        self.0[1]
    }

    /// A transitive two-octet-AS route target (RFC 4360 §4).
    pub fn route_target(asn: u16, value: u32) -> Self {
        let mut b = [0, 0x02, 0, 0, 0, 0, 0, 0];
        b[2..4].copy_from_slice(&asn.to_be_bytes());
        b[4..8].copy_from_slice(&value.to_be_bytes());
        Self(b)
    }
}

impl fmt::Display for ExtendedCommunity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        let kind = match b[1] {
            0x02 => "rt",
            0x03 => "soo",
            _ => "",
        };
        let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        match (b[0] & 0xbf, kind) {
            (_, "") => write!(f, "0x{}", super::HexBytes(b)),
            (0x00, k) => write!(f, "{k} {}:{}", u16::from_be_bytes([b[2], b[3]]), word(4)),
            (0x01, k) => write!(
                f,
                "{k} {}:{}",
                Ipv4Addr::new(b[2], b[3], b[4], b[5]),
                u16::from_be_bytes([b[6], b[7]])
            ),
            (0x02, k) => write!(f, "{k} {}:{}", word(2), u16::from_be_bytes([b[6], b[7]])),
            _ => write!(f, "0x{}", super::HexBytes(b)),
        }
    }
}

impl Ipv6ExtendedCommunity {
    /// The IPv6 Global Administrator.
    pub fn global_admin(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.0[2..18]);
        Ipv6Addr::from(a)
    }

    /// The Local Administrator.
    pub fn local_admin(&self) -> u16 {
        u16::from_be_bytes([self.0[18], self.0[19]])
    }
}

impl Origin {
    fn from_wire(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Igp),
            1 => Some(Self::Egp),
            2 => Some(Self::Incomplete),
            _ => None,
        }
    }

    fn to_wire(self) -> u8 {
        match self {
            Self::Igp => 0,
            Self::Egp => 1,
            Self::Incomplete => 2,
        }
    }
}

impl SegmentType {
    fn from_wire(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Set),
            2 => Some(Self::Sequence),
            3 => Some(Self::ConfedSequence),
            4 => Some(Self::ConfedSet),
            _ => None,
        }
    }

    fn to_wire(self) -> u8 {
        match self {
            Self::Set => 1,
            Self::Sequence => 2,
            Self::ConfedSequence => 3,
            Self::ConfedSet => 4,
        }
    }
}

impl AsPath {
    /// A path of one AS_SEQUENCE (empty for an empty list), split into
    /// segments of at most 255 ASes.
    pub fn sequence(asns: Vec<u32>) -> Self {
        Self::from_segments([(SegmentType::Sequence, asns)])
    }

    /// A path of the given segments in order. Empty segments are left out
    /// (RFC 7606 §7.2 makes them malformed); a segment of more than 255
    /// ASes is split into consecutive segments of its type.
    pub fn from_segments<I, A>(segments: I) -> Self
    where
        I: IntoIterator<Item = (SegmentType, A)>,
        A: AsRef<[u32]>,
    {
        let mut wire = Vec::new();
        for (kind, asns) in segments {
            for chunk in asns.as_ref().chunks(255) {
                wire.push(kind.to_wire());
                // `chunks(255)`: fits.
                wire.push(chunk.len() as u8);
                for asn in chunk {
                    wire.extend_from_slice(&asn.to_be_bytes());
                }
            }
        }
        Self {
            wire: Bytes::from(wire),
        }
    }

    /// The segments in order.
    pub fn segments(&self) -> Segments<'_> {
        Segments { rest: &self.wire }
    }

    /// Whether the path has no segment.
    pub fn is_empty(&self) -> bool {
        self.wire.is_empty()
    }

    /// The path length for route selection (RFC 4271 §9.1.2.2: a set
    /// counts 1, confederation segments 0).
    pub fn path_len(&self) -> usize {
        self.segments()
            .map(|s| match s.kind {
                SegmentType::Sequence => s.len(),
                SegmentType::Set => 1,
                SegmentType::ConfedSequence | SegmentType::ConfedSet => 0,
            })
            .sum()
    }

    /// The first AS of the path (the neighbour for eBGP), if it starts
    /// with a sequence.
    pub fn first_as(&self) -> Option<u32> {
        match self.segments().next() {
            Some(s) if s.kind == SegmentType::Sequence => s.first(),
            _ => None,
        }
    }

    /// The octets in the 4-octet encoding (the AS4_PATH value, or the
    /// AS_PATH value of a 4-octet session).
    pub fn as_bytes(&self) -> &[u8] {
        &self.wire
    }

    fn value_len(&self, as4: bool) -> usize {
        if as4 {
            return self.wire.len();
        }
        self.segments().map(|s| 2 + 2 * s.len()).sum()
    }

    fn emit(&self, as4: bool, out: &mut BytesMut) {
        if as4 {
            out.put_slice(&self.wire);
            return;
        }
        for s in self.segments() {
            out.put_u8(s.kind.to_wire());
            // At most 255: checked when built or parsed.
            out.put_u8(s.len() as u8);
            for asn in s.asns() {
                // RFC 6793 §4.2.2: ASes that do not fit become AS_TRANS
                // (the real path goes in AS4_PATH: `as4::outbound`).
                out.put_u16(u16::try_from(asn).unwrap_or(AS_TRANS));
            }
        }
    }

    /// Checks an AS_PATH value and keeps it: `v` itself when it is in the
    /// 4-octet encoding (`view` makes it a slice of the message), widened
    /// otherwise.
    fn parse(r: Reader<'_>, as4: bool, view: Backing<'_>) -> Option<Self> {
        let w = if as4 { 4 } else { 2 };
        let value = r.rest();
        let mut rest = value;
        while let Some((&[kind, count], tail)) = rest.split_first_chunk::<2>() {
            SegmentType::from_wire(kind)?;
            // RFC 7606 §7.2: a segment of length 0 is malformed.
            if count == 0 {
                return None;
            }
            rest = tail.get(usize::from(count) * w..)?;
        }
        // A lone octet left over: a truncated segment header.
        if !rest.is_empty() {
            return None;
        }
        if as4 {
            return Some(Self {
                wire: view.keep(value),
            });
        }
        // Checked above: whole segments of 2-octet ASes.
        let mut wire = Vec::with_capacity(value.len() * 2);
        let mut rest = value;
        while let Some((&[kind, count], tail)) = rest.split_first_chunk::<2>() {
            let (asns, tail) = tail.split_at_checked(usize::from(count) * 2)?;
            wire.extend_from_slice(&[kind, count]);
            for asn in asns.as_chunks::<2>().0 {
                wire.extend_from_slice(&u32::from(u16::from_be_bytes(*asn)).to_be_bytes());
            }
            rest = tail;
        }
        Some(Self {
            wire: Bytes::from(wire),
        })
    }
}

impl fmt::Debug for AsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.segments()).finish()
    }
}

impl fmt::Display for AsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            let (open, close) = match s.kind {
                SegmentType::Sequence => ("", ""),
                SegmentType::Set => ("{", "}"),
                SegmentType::ConfedSequence => ("(", ")"),
                SegmentType::ConfedSet => ("[", "]"),
            };
            f.write_str(open)?;
            for (j, asn) in s.asns().enumerate() {
                if j > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{asn}")?;
            }
            f.write_str(close)?;
        }
        Ok(())
    }
}

impl<'a> AsSegment<'a> {
    /// How many ASes (1..=255).
    pub fn len(&self) -> usize {
        self.asns.len()
    }

    /// Always false: a segment holds at least one AS.
    pub fn is_empty(&self) -> bool {
        self.asns.is_empty()
    }

    /// The ASes in order.
    pub fn asns(&self) -> impl ExactSizeIterator<Item = u32> + DoubleEndedIterator + 'a {
        self.asns.iter().map(|b| u32::from_be_bytes(*b))
    }

    /// The first AS.
    pub fn first(&self) -> Option<u32> {
        self.asns.first().map(|b| u32::from_be_bytes(*b))
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = AsSegment<'a>;

    fn next(&mut self) -> Option<AsSegment<'a>> {
        // The octets were checked when the path was built or parsed; a
        // segment that did not fit would end the iteration, never panic.
        let (&[kind, count], tail) = self.rest.split_first_chunk::<2>()?;
        let (asns, tail) = tail.split_at_checked(usize::from(count) * 4)?;
        self.rest = tail;
        Some(AsSegment {
            kind: SegmentType::from_wire(kind)?,
            asns: asns.as_chunks::<4>().0,
        })
    }
}

impl fmt::Display for NextHop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(a) => write!(f, "{a}"),
            Self::V6 {
                global,
                link_local: None,
            } => write!(f, "{global}"),
            Self::V6 {
                global,
                link_local: Some(ll),
            } => write!(f, "{global} {ll}"),
        }
    }
}

impl NextHop {
    fn wire_len(&self) -> usize {
        match self {
            Self::V4(_) => 4,
            Self::V6 {
                link_local: None, ..
            } => 16,
            Self::V6 {
                link_local: Some(_),
                ..
            } => 32,
        }
    }

    fn emit(&self, out: &mut BytesMut) {
        match self {
            Self::V4(a) => out.put_slice(&a.octets()),
            Self::V6 { global, link_local } => {
                out.put_slice(&global.octets());
                if let Some(ll) = link_local {
                    out.put_slice(&ll.octets());
                }
            }
        }
    }

    fn parse(bytes: &[u8], v4_allowed: bool) -> Option<Self> {
        let v6 = |b: &[u8]| {
            let mut a = [0; 16];
            a.copy_from_slice(b);
            Ipv6Addr::from(a)
        };
        match bytes.len() {
            4 if v4_allowed => Some(Self::V4(Ipv4Addr::new(
                bytes[0], bytes[1], bytes[2], bytes[3],
            ))),
            16 => Some(Self::V6 {
                global: v6(bytes),
                link_local: None,
            }),
            32 => Some(Self::V6 {
                global: v6(&bytes[..16]),
                link_local: Some(v6(&bytes[16..])),
            }),
            _ => None,
        }
    }
}

impl MpReach {
    /// The address family.
    pub fn afi_safi(&self) -> (Afi, Safi) {
        match self {
            Self::Ipv4Unicast { .. } => (Afi::Ipv4, Safi::Unicast),
            Self::Ipv6Unicast { .. } => (Afi::Ipv6, Safi::Unicast),
            Self::Other(raw) => (raw.afi, raw.safi),
        }
    }

    fn value_len(&self, ctx: &EncodeCtx) -> usize {
        match self {
            Self::Ipv4Unicast { next_hop, nlri } => {
                5 + next_hop.wire_len()
                    + nlri::list_len(nlri, ctx.add_path.contains(Family::Ipv4Unicast))
            }
            Self::Ipv6Unicast { next_hop, nlri } => {
                5 + next_hop.wire_len()
                    + nlri::list_len(nlri, ctx.add_path.contains(Family::Ipv6Unicast))
            }
            Self::Other(raw) => 5 + raw.next_hop.len().min(255) + raw.nlri.len(),
        }
    }

    fn emit(&self, ctx: &EncodeCtx, out: &mut BytesMut) {
        let (afi, safi) = self.afi_safi();
        out.put_u16(afi.into());
        out.put_u8(safi.into());
        match self {
            Self::Ipv4Unicast { next_hop, nlri } => {
                out.put_u8(next_hop.wire_len() as u8);
                next_hop.emit(out);
                out.put_u8(0);
                nlri::emit_list(nlri, ctx.add_path.contains(Family::Ipv4Unicast), out);
            }
            Self::Ipv6Unicast { next_hop, nlri } => {
                out.put_u8(next_hop.wire_len() as u8);
                next_hop.emit(out);
                out.put_u8(0);
                nlri::emit_list(nlri, ctx.add_path.contains(Family::Ipv6Unicast), out);
            }
            Self::Other(raw) => {
                let nh = &raw.next_hop[..raw.next_hop.len().min(255)];
                out.put_u8(nh.len() as u8);
                out.put_slice(nh);
                out.put_u8(0);
                out.put_slice(&raw.nlri);
            }
        }
    }
}

impl MpUnreach {
    /// The address family.
    pub fn afi_safi(&self) -> (Afi, Safi) {
        match self {
            Self::Ipv4Unicast(_) => (Afi::Ipv4, Safi::Unicast),
            Self::Ipv6Unicast(_) => (Afi::Ipv6, Safi::Unicast),
            Self::Other(raw) => (raw.afi, raw.safi),
        }
    }

    /// Whether no route is withdrawn (an End-of-RIB marker when alone).
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Ipv4Unicast(v) => v.is_empty(),
            Self::Ipv6Unicast(v) => v.is_empty(),
            Self::Other(raw) => raw.nlri.is_empty(),
        }
    }

    fn value_len(&self, ctx: &EncodeCtx) -> usize {
        3 + match self {
            Self::Ipv4Unicast(v) => nlri::list_len(v, ctx.add_path.contains(Family::Ipv4Unicast)),
            Self::Ipv6Unicast(v) => nlri::list_len(v, ctx.add_path.contains(Family::Ipv6Unicast)),
            Self::Other(raw) => raw.nlri.len(),
        }
    }

    fn emit(&self, ctx: &EncodeCtx, out: &mut BytesMut) {
        let (afi, safi) = self.afi_safi();
        out.put_u16(afi.into());
        out.put_u8(safi.into());
        match self {
            Self::Ipv4Unicast(v) => {
                nlri::emit_list(v, ctx.add_path.contains(Family::Ipv4Unicast), out)
            }
            Self::Ipv6Unicast(v) => {
                nlri::emit_list(v, ctx.add_path.contains(Family::Ipv6Unicast), out)
            }
            Self::Other(raw) => out.put_slice(&raw.nlri),
        }
    }
}

impl AttrValue {
    /// The type code.
    pub fn type_code(&self) -> AttrType {
        match self {
            Self::Origin(_) => AttrType::Origin,
            Self::AsPath(_) => AttrType::AsPath,
            Self::NextHop(_) => AttrType::NextHop,
            Self::MultiExitDisc(_) => AttrType::MultiExitDisc,
            Self::LocalPref(_) => AttrType::LocalPref,
            Self::AtomicAggregate => AttrType::AtomicAggregate,
            Self::Aggregator(_) => AttrType::Aggregator,
            Self::Communities(_) => AttrType::Communities,
            Self::OriginatorId(_) => AttrType::OriginatorId,
            Self::ClusterList(_) => AttrType::ClusterList,
            Self::MpReach(_) => AttrType::MpReachNlri,
            Self::MpUnreach(_) => AttrType::MpUnreachNlri,
            Self::ExtendedCommunities(_) => AttrType::ExtendedCommunities,
            Self::As4Path(_) => AttrType::As4Path,
            Self::As4Aggregator(_) => AttrType::As4Aggregator,
            Self::Ipv6ExtendedCommunities(_) => AttrType::Ipv6ExtendedCommunities,
            Self::LargeCommunities(_) => AttrType::LargeCommunities,
            Self::Unknown(u) => AttrType::from(u.type_code),
        }
    }

    fn value_len(&self, ctx: &EncodeCtx) -> usize {
        match self {
            Self::Origin(_) => 1,
            Self::AsPath(p) => p.value_len(ctx.as4),
            Self::As4Path(p) => p.value_len(true),
            Self::NextHop(_)
            | Self::MultiExitDisc(_)
            | Self::LocalPref(_)
            | Self::OriginatorId(_) => 4,
            Self::AtomicAggregate => 0,
            Self::Aggregator(_) => {
                if ctx.as4 {
                    8
                } else {
                    6
                }
            }
            Self::As4Aggregator(_) => 8,
            Self::Communities(v) => v.as_bytes().len(),
            Self::ClusterList(v) => v.as_bytes().len(),
            Self::MpReach(m) => m.value_len(ctx),
            Self::MpUnreach(m) => m.value_len(ctx),
            Self::ExtendedCommunities(v) => v.as_bytes().len(),
            Self::Ipv6ExtendedCommunities(v) => v.as_bytes().len(),
            Self::LargeCommunities(v) => v.as_bytes().len(),
            Self::Unknown(u) => u.data.len(),
        }
    }

    fn emit(&self, ctx: &EncodeCtx, out: &mut BytesMut) {
        match self {
            Self::Origin(o) => out.put_u8(o.to_wire()),
            Self::AsPath(p) => p.emit(ctx.as4, out),
            Self::As4Path(p) => p.emit(true, out),
            Self::NextHop(a) | Self::OriginatorId(a) => out.put_slice(&a.octets()),
            Self::MultiExitDisc(v) | Self::LocalPref(v) => out.put_u32(*v),
            Self::AtomicAggregate => {}
            Self::Aggregator(a) => {
                if ctx.as4 {
                    out.put_u32(a.asn);
                } else {
                    out.put_u16(u16::try_from(a.asn).unwrap_or(AS_TRANS));
                }
                out.put_slice(&a.addr.octets());
            }
            Self::As4Aggregator(a) => {
                out.put_u32(a.asn);
                out.put_slice(&a.addr.octets());
            }
            Self::Communities(v) => out.put_slice(v.as_bytes()),
            Self::ClusterList(v) => out.put_slice(v.as_bytes()),
            Self::MpReach(m) => m.emit(ctx, out),
            Self::MpUnreach(m) => m.emit(ctx, out),
            Self::ExtendedCommunities(v) => out.put_slice(v.as_bytes()),
            Self::Ipv6ExtendedCommunities(v) => out.put_slice(v.as_bytes()),
            Self::LargeCommunities(v) => out.put_slice(v.as_bytes()),
            Self::Unknown(u) => out.put_slice(&u.data),
        }
    }
}

/// The flags kept for an attribute of type `t` received (or built) with
/// `flags`: Optional/Transitive per type (as given for unknown types),
/// Partial only where RFC 4271 §4.3 allows it (optional transitive; for
/// well-known and optional non-transitive attributes it is ignored on
/// receipt), Extended Length as given, the unused low bits zero.
fn canonical_flags(t: AttrType, flags: u8) -> u8 {
    let ot = expected_flags(t).unwrap_or(flags & (AttrFlags::OPTIONAL | AttrFlags::TRANSITIVE));
    let partial = if ot == AttrFlags::OPTIONAL | AttrFlags::TRANSITIVE {
        flags & AttrFlags::PARTIAL
    } else {
        0
    };
    ot | partial | (flags & AttrFlags::EXTENDED_LENGTH)
}

/// The Optional and Transitive bits a known attribute must carry.
fn expected_flags(t: AttrType) -> Option<u8> {
    const WELL_KNOWN: u8 = AttrFlags::TRANSITIVE;
    const OPT_TRANS: u8 = AttrFlags::OPTIONAL | AttrFlags::TRANSITIVE;
    const OPT_NON_TRANS: u8 = AttrFlags::OPTIONAL;
    Some(match t {
        AttrType::Origin
        | AttrType::AsPath
        | AttrType::NextHop
        | AttrType::LocalPref
        | AttrType::AtomicAggregate => WELL_KNOWN,
        AttrType::MultiExitDisc
        | AttrType::OriginatorId
        | AttrType::ClusterList
        | AttrType::MpReachNlri
        | AttrType::MpUnreachNlri => OPT_NON_TRANS,
        AttrType::Aggregator
        | AttrType::Communities
        | AttrType::ExtendedCommunities
        | AttrType::As4Path
        | AttrType::As4Aggregator
        | AttrType::Ipv6ExtendedCommunities
        | AttrType::LargeCommunities => OPT_TRANS,
        AttrType::Unknown(_) => return None,
    })
}

impl PathAttribute {
    /// An attribute with the canonical flags for its type.
    pub fn new(value: AttrValue) -> Self {
        let flags = expected_flags(value.type_code())
            .unwrap_or(AttrFlags::OPTIONAL | AttrFlags::TRANSITIVE);
        Self {
            flags: AttrFlags(flags),
            value,
        }
    }

    /// The flags that go on the wire: Optional/Transitive per type (or as
    /// given for unknown types), Partial only where allowed, Extended
    /// Length when set or needed, low bits zero.
    fn wire_flags(&self, len: usize) -> u8 {
        let f = canonical_flags(self.value.type_code(), self.flags.0);
        if len > 255 {
            f | AttrFlags::EXTENDED_LENGTH
        } else {
            f
        }
    }

    /// Encoded size, header included.
    pub fn wire_len(&self, ctx: &EncodeCtx) -> usize {
        let len = self.value.value_len(ctx);
        let ext = self.wire_flags(len) & AttrFlags::EXTENDED_LENGTH != 0;
        2 + if ext { 2 } else { 1 } + len
    }

    /// Appends the attribute. Values longer than 65535 octets cannot be
    /// encoded; the UPDATE encoder never builds them.
    pub fn emit(&self, ctx: &EncodeCtx, out: &mut BytesMut) {
        let len = self.value.value_len(ctx);
        let flags = self.wire_flags(len);
        out.put_u8(flags);
        out.put_u8(self.value.type_code().into());
        if flags & AttrFlags::EXTENDED_LENGTH != 0 {
            out.put_u16(len.min(usize::from(u16::MAX)) as u16);
        } else {
            out.put_u8(len as u8);
        }
        self.value.emit(ctx, out);
    }
}

/// The result of parsing the path attributes of an UPDATE.
pub(crate) struct Parsed {
    pub(crate) attributes: Vec<PathAttribute>,
    pub(crate) errors: Vec<AttrError>,
    /// Every type code met, kept or not (a malformed attribute that was
    /// dropped is in `errors` under its type code).
    pub(crate) seen: TypeSet,
}

/// A set of attribute type codes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TypeSet([u64; 4]);

impl TypeSet {
    pub(crate) fn contains(&self, code: u8) -> bool {
        self.0[usize::from(code / 64)] & (1 << (code % 64)) != 0
    }

    fn insert(&mut self, code: u8) {
        self.0[usize::from(code / 64)] |= 1 << (code % 64);
    }
}

/// Why a single attribute failed, before the RFC 7606 action is chosen.
struct Fault {
    subcode: u8,
    reason: &'static str,
}

const fn fault(subcode: u8, reason: &'static str) -> Fault {
    Fault { subcode, reason }
}

/// Where an attribute sits in the message, for its errors.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    /// The error for fault `f`, with the attribute's octets as data.
    #[cold]
    fn error(self, msg: &[u8], f: Fault) -> UpdateError {
        UpdateError {
            subcode: f.subcode,
            offset: self.start,
            reason: f.reason,
            data: Bytes::copy_from_slice(msg.get(self.start..self.end).unwrap_or_default()),
        }
    }

    /// A malformed attribute of type `t`: recorded with the RFC 7606 §7
    /// action for its type, or a session reset where there is none.
    #[cold]
    fn record(
        self,
        msg: &[u8],
        t: AttrType,
        type_code: u8,
        f: Fault,
        errors: &mut Vec<AttrError>,
    ) -> Result<(), UpdateError> {
        let Some(action) = action_for(t) else {
            return Err(self.error(msg, f));
        };
        errors.push(AttrError {
            action,
            type_code,
            error: self.error(msg, f),
        });
        Ok(())
    }
}

/// Where parsed values keep their octets: slices of the received message
/// when it is shared ([`super::Message::parse_bytes`]), copies otherwise.
#[derive(Clone, Copy)]
pub(crate) struct Backing<'a>(pub(crate) Option<&'a Bytes>);

impl Backing<'_> {
    /// The octets `v`, a sub-slice of the message being parsed.
    #[inline]
    fn keep(self, v: &[u8]) -> Bytes {
        match self.0 {
            // `v` lies inside the message, which is `b` (`parse_bytes`), so
            // `slice_ref` cannot panic.
            Some(b) => b.slice_ref(v),
            None => Bytes::copy_from_slice(v),
        }
    }
}

/// Parses the path attribute area `area` of the message `msg`.
///
/// Returns `Err` only for the cases RFC 7606 still answers with a session
/// reset; everything else is recorded in `Parsed::errors`.
pub(crate) fn parse_all(
    area: Reader<'_>,
    msg: &[u8],
    view: Backing<'_>,
    ctx: &DecodeCtx,
) -> Result<Parsed, UpdateError> {
    // A cursor of our own: the argument lives in the caller's memory, and
    // reads through it were stores per field (measured).
    let mut r = Reader::with_base(area.rest(), area.offset());
    let mut attrs = Vec::with_capacity(8);
    let mut errors = Vec::new();
    let mut seen = TypeSet::default();
    let mut seen_mp = false;
    while !r.is_empty() {
        let start = r.offset();
        let header = parse_header(&mut r);
        let Some((flags, type_code, value)) = header else {
            // RFC 7606 §4: the attribute area cannot be parsed further.
            // Treat-as-withdraw is only safe when the MP attributes, which
            // RFC 7606 §5.1 asks senders to put first, were already found;
            // otherwise their NLRI is lost: reset.
            let error = UpdateError {
                subcode: sub::MALFORMED_ATTRIBUTE_LIST,
                offset: start,
                reason: "attribute overruns the path attribute area",
                data: Bytes::new(),
            };
            if !seen_mp {
                return Err(error);
            }
            errors.push(AttrError {
                action: Action::TreatAsWithdraw,
                type_code: 0,
                error,
            });
            break;
        };
        // The attribute octets are NOTIFICATION data; copied only on error.
        let at = Span {
            start,
            end: value.offset() + value.remaining(),
        };
        let t = AttrType::from(type_code);
        let is_mp = matches!(t, AttrType::MpReachNlri | AttrType::MpUnreachNlri);
        if seen.contains(type_code) {
            let error = UpdateError {
                subcode: sub::MALFORMED_ATTRIBUTE_LIST,
                offset: start,
                reason: "duplicate attribute",
                data: Bytes::new(),
            };
            // RFC 7606 §3 (g): a repeated MP attribute resets the session;
            // other repeats are discarded after the first.
            if is_mp {
                return Err(error);
            }
            errors.push(AttrError {
                action: Action::Discard,
                type_code,
                error,
            });
            continue;
        }
        seen.insert(type_code);
        seen_mp |= is_mp;

        let Some(expected) = expected_flags(t) else {
            if flags & AttrFlags::OPTIONAL == 0 {
                // RFC 4271 §6.3; RFC 7606 keeps the session reset.
                return Err(at.error(
                    msg,
                    fault(
                        sub::UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE,
                        "unrecognized well-known attribute",
                    ),
                ));
            }
            let data = view.keep(value.rest());
            attrs.push(PathAttribute {
                flags: AttrFlags(canonical_flags(t, flags)),
                value: AttrValue::Unknown(UnknownAttr { type_code, data }),
            });
            continue;
        };
        // A fault MP_REACH_NLRI reports beside its value (RFC 7606 §7.11:
        // a bad next hop length, with NLRI that could still be located).
        let mut beside = None;
        let kept = AttrFlags(canonical_flags(t, flags));
        if let Err(f) = push_value(t, value, ctx, view, kept, &mut attrs, &mut beside) {
            at.record(msg, t, type_code, f, &mut errors)?;
            continue;
        }
        if flags & (AttrFlags::OPTIONAL | AttrFlags::TRANSITIVE) != expected {
            // RFC 7606 §3 (c): wrong O/T bits make it malformed.
            let f = fault(
                sub::ATTRIBUTE_FLAGS_ERROR,
                "attribute flags conflict with type",
            );
            at.record(msg, t, type_code, f, &mut errors)?;
            if action_for(t) == Some(Action::Discard) {
                // Malformed, so not kept after all.
                attrs.pop();
                continue;
            }
        }
        if let Some(f) = beside {
            // Treat-as-withdraw, not the session reset `record` gives MP
            // attributes.
            errors.push(AttrError {
                action: Action::TreatAsWithdraw,
                type_code,
                error: at.error(msg, f),
            });
        }
    }
    Ok(Parsed {
        attributes: attrs,
        errors,
        seen,
    })
}

/// Reads flags, type and length, and splits off the value.
fn parse_header<'a>(r: &mut Reader<'a>) -> Option<(u8, u8, Reader<'a>)> {
    let flags = r.u8().ok()?;
    let type_code = r.u8().ok()?;
    let len = if flags & AttrFlags::EXTENDED_LENGTH != 0 {
        r.u16().ok()?
    } else {
        u16::from(r.u8().ok()?)
    };
    let value = r.sub(usize::from(len)).ok()?;
    Some((flags, type_code, value))
}

/// The RFC 7606 §7 action for a malformed attribute of type `t`; `None`
/// means session reset.
fn action_for(t: AttrType) -> Option<Action> {
    match t {
        // RFC 7606 §7.6, §7.7; RFC 6793 §6.
        AttrType::AtomicAggregate
        | AttrType::Aggregator
        | AttrType::As4Path
        | AttrType::As4Aggregator => Some(Action::Discard),
        // RFC 7606 §7.11: the NLRI cannot be located reliably.
        AttrType::MpReachNlri | AttrType::MpUnreachNlri => None,
        _ => Some(Action::TreatAsWithdraw),
    }
}

/// Decodes the value of a known attribute of type `t` and appends it to
/// `out` with `flags`. A non-fatal fault to record next to the value goes
/// to `beside` (MP_REACH_NLRI with a bad next hop keeps its NLRI but is
/// treated as withdrawn).
///
/// Each arm appends its own variant: built in place in the vector, where
/// returning the value would copy the whole 80-octet enum twice (measured).
fn push_value(
    t: AttrType,
    mut v: Reader<'_>,
    ctx: &DecodeCtx,
    view: Backing<'_>,
    flags: AttrFlags,
    out: &mut Vec<PathAttribute>,
    beside: &mut Option<Fault>,
) -> Result<(), Fault> {
    let mut keep = |value| out.push(PathAttribute { flags, value });
    let len = v.remaining();
    let length_error = fault(
        sub::ATTRIBUTE_LENGTH_ERROR,
        "attribute length is wrong for its type",
    );
    match t {
        AttrType::Origin => {
            if len != 1 {
                return Err(length_error);
            }
            let o = v
                .u8()
                .map_err(|_| fault(sub::ATTRIBUTE_LENGTH_ERROR, "empty ORIGIN"))?;
            keep(AttrValue::Origin(Origin::from_wire(o).ok_or(fault(
                sub::INVALID_ORIGIN_ATTRIBUTE,
                "undefined ORIGIN value",
            ))?));
        }
        AttrType::AsPath => keep(AttrValue::AsPath(
            AsPath::parse(v, ctx.as4, view)
                .ok_or(fault(sub::MALFORMED_AS_PATH, "malformed AS_PATH segment"))?,
        )),
        AttrType::As4Path => keep(AttrValue::As4Path(AsPath::parse(v, true, view).ok_or(
            fault(sub::OPTIONAL_ATTRIBUTE_ERROR, "malformed AS4_PATH segment"),
        )?)),
        AttrType::NextHop => {
            let octets: [u8; 4] = fixed(&mut v, length_error)?;
            let addr = Ipv4Addr::from(octets);
            // RFC 4271 §6.3: not a valid host address.
            if addr.is_unspecified()
                || addr.is_multicast()
                || addr.is_broadcast()
                || octets[0] >= 240
            {
                return Err(fault(
                    sub::INVALID_NEXT_HOP_ATTRIBUTE,
                    "NEXT_HOP is not a host address",
                ));
            }
            keep(AttrValue::NextHop(addr));
        }
        AttrType::MultiExitDisc => keep(AttrValue::MultiExitDisc(u32::from_be_bytes(fixed(
            &mut v,
            length_error,
        )?))),
        AttrType::LocalPref => keep(AttrValue::LocalPref(u32::from_be_bytes(fixed(
            &mut v,
            length_error,
        )?))),
        AttrType::OriginatorId => keep(AttrValue::OriginatorId(Ipv4Addr::from(fixed::<4>(
            &mut v,
            length_error,
        )?))),
        AttrType::AtomicAggregate => {
            if len != 0 {
                return Err(length_error);
            }
            keep(AttrValue::AtomicAggregate);
        }
        AttrType::Aggregator => {
            let aggregator = if ctx.as4 {
                let b: [u8; 8] = fixed(&mut v, length_error)?;
                Aggregator {
                    asn: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    addr: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
                }
            } else {
                let b: [u8; 6] = fixed(&mut v, length_error)?;
                Aggregator {
                    asn: u32::from(u16::from_be_bytes([b[0], b[1]])),
                    addr: Ipv4Addr::new(b[2], b[3], b[4], b[5]),
                }
            };
            keep(AttrValue::Aggregator(aggregator));
        }
        AttrType::As4Aggregator => {
            let b: [u8; 8] = fixed(&mut v, length_error)?;
            keep(AttrValue::As4Aggregator(Aggregator {
                asn: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                addr: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
            }));
        }
        AttrType::Communities => keep(AttrValue::Communities(records(v, view, length_error)?)),
        AttrType::ClusterList => keep(AttrValue::ClusterList(records(v, view, length_error)?)),
        AttrType::ExtendedCommunities => keep(AttrValue::ExtendedCommunities(records(
            v,
            view,
            length_error,
        )?)),
        AttrType::Ipv6ExtendedCommunities => keep(AttrValue::Ipv6ExtendedCommunities(records(
            v,
            view,
            length_error,
        )?)),
        AttrType::LargeCommunities => {
            keep(AttrValue::LargeCommunities(records(v, view, length_error)?))
        }
        AttrType::MpReachNlri => keep(AttrValue::MpReach(parse_mp_reach(v, ctx, view, beside)?)),
        AttrType::MpUnreachNlri => keep(AttrValue::MpUnreach(parse_mp_unreach(v, ctx, view)?)),
        // Unknown types are kept raw by the caller and never get here.
        AttrType::Unknown(_) => {
            return Err(fault(
                sub::MALFORMED_ATTRIBUTE_LIST,
                "unknown attribute type",
            ));
        }
    }
    Ok(())
}

/// Reads a value of exactly `N` octets.
fn fixed<const N: usize>(v: &mut Reader<'_>, err: Fault) -> Result<[u8; N], Fault> {
    if v.remaining() != N {
        return Err(err);
    }
    v.array::<N>().map_err(|_| err)
}

/// Checks a non-empty list of `N`-octet records filling the value, and
/// keeps its octets.
fn records<T: Record<N>, const N: usize>(
    v: Reader<'_>,
    view: Backing<'_>,
    err: Fault,
) -> Result<Records<T, N>, Fault> {
    // RFC 7606 §7.8, §7.10, §7.14, RFC 8092 §6: a non-zero multiple of N.
    let value = v.rest();
    if value.is_empty() || !value.len().is_multiple_of(N) {
        return Err(err);
    }
    Records::from_wire(view.keep(value)).ok_or(err)
}

fn nlri_fault(e: NlriError) -> Fault {
    match e {
        NlriError::BadLength { .. } => fault(
            sub::OPTIONAL_ATTRIBUTE_ERROR,
            "MP NLRI prefix length too long",
        ),
        NlriError::Truncated { .. } => fault(sub::OPTIONAL_ATTRIBUTE_ERROR, "MP NLRI truncated"),
    }
}

fn parse_mp_reach(
    mut v: Reader<'_>,
    ctx: &DecodeCtx,
    view: Backing<'_>,
    beside: &mut Option<Fault>,
) -> Result<MpReach, Fault> {
    let short = |_| fault(sub::OPTIONAL_ATTRIBUTE_ERROR, "MP_REACH_NLRI truncated");
    let afi = Afi::from(v.u16().map_err(short)?);
    let safi = Safi::from(v.u8().map_err(short)?);
    let nh_len = v.u8().map_err(short)?;
    let nh = v.take(usize::from(nh_len)).map_err(short)?;
    let _reserved = v.u8().map_err(short)?;
    let family = Family::from_afi_safi(afi, safi);
    let add_path = family.is_some_and(|f| ctx.add_path.contains(f));
    let raw = |v: &Reader<'_>| RawMp {
        afi,
        safi,
        next_hop: view.keep(nh),
        nlri: view.keep(v.rest()),
    };
    let bad_next_hop = || {
        fault(
            sub::OPTIONAL_ATTRIBUTE_ERROR,
            "MP_REACH_NLRI next hop length invalid for the address family",
        )
    };
    let value = match family {
        Some(Family::Ipv4Unicast) => match NextHop::parse(nh, true) {
            Some(next_hop) => MpReach::Ipv4Unicast {
                next_hop,
                nlri: nlri::parse_list(v, add_path).map_err(nlri_fault)?,
            },
            None => {
                nlri::parse_list::<Ipv4Prefix>(v.clone(), add_path).map_err(nlri_fault)?;
                *beside = Some(bad_next_hop());
                return Ok(MpReach::Other(raw(&v)));
            }
        },
        Some(Family::Ipv6Unicast) => match NextHop::parse(nh, false) {
            Some(next_hop) => MpReach::Ipv6Unicast {
                next_hop,
                nlri: nlri::parse_list(v, add_path).map_err(nlri_fault)?,
            },
            None => {
                nlri::parse_list::<Ipv6Prefix>(v.clone(), add_path).map_err(nlri_fault)?;
                *beside = Some(bad_next_hop());
                return Ok(MpReach::Other(raw(&v)));
            }
        },
        None => MpReach::Other(raw(&v)),
    };
    Ok(value)
}

fn parse_mp_unreach(
    mut v: Reader<'_>,
    ctx: &DecodeCtx,
    view: Backing<'_>,
) -> Result<MpUnreach, Fault> {
    let short = |_| fault(sub::OPTIONAL_ATTRIBUTE_ERROR, "MP_UNREACH_NLRI truncated");
    let afi = Afi::from(v.u16().map_err(short)?);
    let safi = Safi::from(v.u8().map_err(short)?);
    let family = Family::from_afi_safi(afi, safi);
    let add_path = family.is_some_and(|f| ctx.add_path.contains(f));
    Ok(match family {
        Some(Family::Ipv4Unicast) => {
            MpUnreach::Ipv4Unicast(nlri::parse_list(v, add_path).map_err(nlri_fault)?)
        }
        Some(Family::Ipv6Unicast) => {
            MpUnreach::Ipv6Unicast(nlri::parse_list(v, add_path).map_err(nlri_fault)?)
        }
        None => MpUnreach::Other(RawMp {
            afi,
            safi,
            next_hop: Bytes::new(),
            nlri: view.keep(v.rest()),
        }),
    })
}

#[cfg(feature = "arbitrary")]
mod arb {
    use super::*;
    use arbitrary::{Arbitrary, Result, Unstructured};

    impl<'a> Arbitrary<'a> for UnknownAttr {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            // Only type codes that `AttrValue` does not name, so that the
            // value survives emit then parse.
            let mut type_code = u8::arbitrary(u)?;
            while !matches!(AttrType::from(type_code), AttrType::Unknown(_)) {
                type_code = type_code.wrapping_add(19);
            }
            Ok(Self {
                type_code,
                data: super::super::arbitrary_bytes(u)?,
            })
        }
    }

    impl<'a> Arbitrary<'a> for AsPath {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            let mut segments = Vec::new();
            for _ in 0..u.int_in_range(0..=4)? {
                let len = u.int_in_range(1..=20)?;
                let asns = (0..len)
                    .map(|_| u32::arbitrary(u))
                    .collect::<Result<Vec<_>>>()?;
                segments.push((SegmentType::arbitrary(u)?, asns));
            }
            Ok(Self::from_segments(segments))
        }
    }

    impl<'a> Arbitrary<'a> for RawMp {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            // A family that is not decoded, so it stays raw.
            let afi = Afi::arbitrary(u)?;
            let safi = match Safi::arbitrary(u)? {
                Safi::Unicast => Safi::Multicast,
                s => s,
            };
            Ok(Self {
                afi,
                safi,
                next_hop: super::super::arbitrary_bytes(u)?.slice(..0),
                nlri: super::super::arbitrary_bytes(u)?,
            })
        }
    }
}
