//! Ethernet II framing (IEEE 802.3 with an EtherType, RFC 894): the
//! zero-copy [`Frame`] view, its [`Repr`], and [`EthernetAddress`].
//!
//! Pure wire code: no I/O, no clock. After [`Frame::check_len`] no accessor
//! panics. 802.1Q tags are not parsed: a tagged frame shows EtherType
//! `0x8100` and is not ARP or IPv6 to the responders (AF_PACKET hands the
//! driver untagged frames; the VLAN rides in the auxiliary data).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      Destination Address                      |
//! +                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! |                        Source Address                         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           EtherType           |  Payload ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use std::fmt;

/// A 48-bit IEEE 802 MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Self = Self([0xff; 6]);
    /// 00:00:00:00:00:00, the "unknown" target hardware address of an ARP
    /// request (RFC 5227 §2.3).
    pub const UNSPECIFIED: Self = Self([0; 6]);

    /// The address in the first six octets of `data`, or `None` if `data`
    /// is not exactly six octets long.
    pub fn from_bytes(data: &[u8]) -> Option<Self> {
        data.try_into().ok().map(Self)
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The group bit (I/G, least significant bit of the first octet) is set;
    /// true for the broadcast address too.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// An individual address that is not all zeroes: one a host may own.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && *self != Self::UNSPECIFIED
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(octets: [u8; 6]) -> Self {
        Self(octets)
    }
}

codepoint::enum_with_unknown! {
    /// The EtherType of an Ethernet II frame (IEEE 802 numbers registry),
    /// also the ARP protocol type (RFC 826).
    pub enum EtherType(u16) {
        /// IPv4, 0x0800.
        Ipv4 = 0x0800,
        /// ARP, 0x0806.
        Arp = 0x0806,
        /// IPv6, 0x86dd.
        Ipv6 = 0x86dd,
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ipv4 => f.write_str("IPv4"),
            Self::Arp => f.write_str("ARP"),
            Self::Ipv6 => f.write_str("IPv6"),
            Self::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

/// An Ethernet frame that does not hold a header.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer octets than the 14-octet header.
    #[error("ethernet frame truncated: {len} octets, need {HEADER_LEN}")]
    Truncated {
        /// Octets given.
        len: usize,
    },
}

/// A zero-copy view of an Ethernet II frame (header and payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use core::ops::{Range, RangeFrom};

    pub(super) const DESTINATION: Range<usize> = 0..6;
    pub(super) const SOURCE: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    pub(super) const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps `buffer` without checking its length: accessors may panic
    /// until [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` and checks that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that the buffer holds the 14-octet header, after which no
    /// accessor panics.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated { len });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length plus `payload_len`.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// The destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress(read6(&self.buffer.as_ref()[field::DESTINATION]))
    }

    /// The source address.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress(read6(&self.buffer.as_ref()[field::SOURCE]))
    }

    /// The EtherType.
    pub fn ethertype(&self) -> EtherType {
        let d = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([d[0], d[1]]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// The payload, Ethernet padding included.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, value: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(value).to_be_bytes());
    }

    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Frame<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(self) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "ether ({err})"),
        }
    }
}

/// The Ethernet II header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// EtherType of the payload.
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads the header of `frame`.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Self, Error> {
        frame.check_len()?;
        Ok(Self {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the header: 14.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `frame`, which must hold at least
    /// [`buffer_len`](Self::buffer_len) octets.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} > {} {}",
            self.src_addr, self.dst_addr, self.ethertype
        )
    }
}

/// The EtherType of `frame`, or `None` if it is shorter than a header:
/// enough to pick the protocol that parses the rest.
pub fn ethertype_of(frame: &[u8]) -> Option<EtherType> {
    let d = frame.get(field::ETHERTYPE)?;
    Some(EtherType::from(u16::from_be_bytes([d[0], d[1]])))
}

fn read6(data: &[u8]) -> [u8; 6] {
    let mut out = [0; 6];
    out.copy_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    static FRAME_BYTES: [u8; 18] = [
        // destination: ff:ff:ff:ff:ff:ff
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //
        // source: 02:00:00:00:00:01
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        // EtherType: ARP
        0x08, 0x06, //
        // payload
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    const SRC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);

    #[test]
    fn deconstruct() {
        let frame = Frame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr(), SRC);
        assert_eq!(frame.ethertype(), EtherType::Arp);
        assert_eq!(frame.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 18];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(EthernetAddress::BROADCAST);
        frame.set_src_addr(SRC);
        frame.set_ethertype(EtherType::Arp);
        frame
            .payload_mut()
            .copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(bytes, FRAME_BYTES);
    }

    fn repr() -> Repr {
        Repr {
            src_addr: SRC,
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
        }
    }

    #[test]
    fn parse() {
        let frame = Frame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&frame).unwrap(), repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5; 18];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        repr().emit(&mut frame);
        frame
            .payload_mut()
            .copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(bytes, FRAME_BYTES);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&FRAME_BYTES[..13]),
            Err(Error::Truncated { len: 13 })
        );
        // A bare header is a frame with an empty payload.
        let frame = Frame::new_checked(&FRAME_BYTES[..14]).unwrap();
        assert!(frame.payload().is_empty());
    }

    #[test]
    fn ethertype_of_raw_frames() {
        assert_eq!(ethertype_of(&FRAME_BYTES), Some(EtherType::Arp));
        assert_eq!(ethertype_of(&FRAME_BYTES[..14]), Some(EtherType::Arp));
        assert_eq!(ethertype_of(&FRAME_BYTES[..13]), None);
    }

    #[test]
    fn address_kinds() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(!EthernetAddress::BROADCAST.is_unicast());
        let mcast = EthernetAddress([0x33, 0x33, 0, 0, 0, 1]);
        assert!(mcast.is_multicast() && !mcast.is_broadcast() && !mcast.is_unicast());
        assert!(SRC.is_unicast() && !SRC.is_multicast());
        assert!(!EthernetAddress::UNSPECIFIED.is_unicast());
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn display() {
        assert_eq!(SRC.to_string(), "02:00:00:00:00:01");
        assert_eq!(EtherType::from(0x88cc).to_string(), "0x88cc");
        let frame = Frame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(
            frame.to_string(),
            "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff ARP"
        );
    }
}
