//! The IPv6 fixed header (RFC 8200 §3): the zero-copy [`Packet`] view and
//! its [`Repr`].
//!
//! Pure wire code: no I/O, no clock. Extension headers are not walked: the
//! responder only reads Neighbor Discovery, whose messages must follow the
//! fixed header directly (see [`crate::wire`]).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Traffic Class |           Flow Label                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Payload Length        |  Next Header  |   Hop Limit   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +                         Source Address                        +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +                      Destination Address                      +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use std::fmt;
use std::net::Ipv6Addr;

/// An IPv6 header the responder cannot read.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer octets than the fixed header, or than the payload length claims.
    #[error("ipv6 packet truncated: {len} octets, need {need}")]
    Truncated {
        /// Octets given.
        len: usize,
        /// Octets the header calls for.
        need: usize,
    },
    /// The version field is not 6.
    #[error("ip version {0}, not 6")]
    Version(u8),
}

/// A zero-copy view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use core::ops::Range;

    pub(super) const VER_TC_FLOW: Range<usize> = 0..4;
    pub(super) const LENGTH: Range<usize> = 4..6;
    pub(super) const NXT_HDR: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC_ADDR: Range<usize> = 8..24;
    pub(super) const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// Next Header value of ICMPv6 (IANA protocol numbers).
pub const NEXT_HEADER_ICMPV6: u8 = 58;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking its length: accessors may panic
    /// until [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` and checks its length.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the fixed header and the payload length
    /// it announces, after which no accessor panics. Octets after the
    /// payload (Ethernet padding) are allowed and not part of the payload.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated {
                len,
                need: HEADER_LEN,
            });
        }
        let need = HEADER_LEN + usize::from(self.payload_len());
        if len < need {
            return Err(Error::Truncated { len, need });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW.start] >> 4
    }

    /// The traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// The flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// The payload length.
    pub fn payload_len(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// The next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// The hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        read_addr(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        read_addr(&self.buffer.as_ref()[field::DST_ADDR])
    }

    fn ver_tc_flow(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload: exactly `payload_len` octets, padding excluded.
    pub fn payload(&self) -> &'a [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &self.buffer.as_ref()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version, traffic class and flow label.
    pub fn set_ver_tc_flow(&mut self, version: u8, traffic_class: u8, flow_label: u32) {
        let value = (u32::from(version) << 28)
            | (u32::from(traffic_class) << 20)
            | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = value;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The payload, mutable: everything after the fixed header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The IPv6 fixed header as plain values. Traffic class and flow label are
/// not kept: Neighbor Discovery does not use them, and we emit them as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Payload length.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Repr {
    /// Reads the fixed header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, Error> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Version(packet.version()));
        }
        Ok(Self {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len(),
            hop_limit: packet.hop_limit(),
        })
    }

    /// Length of the fixed header: 40.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into `packet`, which must hold at least
    /// [`buffer_len`](Self::buffer_len) octets.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ver_tc_flow(6, 0, 0);
        packet.set_payload_len(self.payload_len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} > {} nh {} hlim {} len {}",
            self.src_addr, self.dst_addr, self.next_header, self.hop_limit, self.payload_len
        )
    }
}

fn read_addr(data: &[u8]) -> Ipv6Addr {
    let mut out = [0; 16];
    out.copy_from_slice(data);
    Ipv6Addr::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    static PACKET_BYTES: [u8; 44] = [
        // version 6, traffic class 0, flow label 0x12345
        0x60, 0x01, 0x23, 0x45, //
        // payload length 4, next header 58 (ICMPv6), hop limit 255
        0x00, 0x04, 0x3a, 0xff, //
        // source 2001:db8::1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        // destination ff02::1:ff00:a
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x0a, //
        // payload
        0xde, 0xad, 0xbe, 0xef,
    ];

    const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 0x0a);

    fn repr() -> Repr {
        Repr {
            src_addr: SRC,
            dst_addr: DST,
            next_header: NEXT_HEADER_ICMPV6,
            payload_len: 4,
            hop_limit: 255,
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0);
        assert_eq!(packet.flow_label(), 0x12345);
        assert_eq!(packet.payload_len(), 4);
        assert_eq!(packet.next_header(), 58);
        assert_eq!(packet.hop_limit(), 255);
        assert_eq!(packet.src_addr(), SRC);
        assert_eq!(packet.dst_addr(), DST);
        assert_eq!(packet.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 44];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_ver_tc_flow(6, 0, 0x12345);
        packet.set_payload_len(4);
        packet.set_next_header(58);
        packet.set_hop_limit(255);
        packet.set_src_addr(SRC);
        packet.set_dst_addr(DST);
        packet
            .payload_mut()
            .copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5; 44];
        let mut expected = PACKET_BYTES;
        // Flow label is emitted as zero.
        expected[1..4].copy_from_slice(&[0, 0, 0]);
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        repr().emit(&mut packet);
        packet
            .payload_mut()
            .copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn payload_bounded_by_length_field() {
        // Trailing padding is not payload.
        let mut padded = PACKET_BYTES.to_vec();
        padded.extend_from_slice(&[0; 6]);
        let packet = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(packet.payload().len(), 4);
        // A length beyond the buffer is refused.
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..43]),
            Err(Error::Truncated { len: 43, need: 44 })
        );
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..39]),
            Err(Error::Truncated { len: 39, need: 40 })
        );
    }

    #[test]
    fn wrong_version() {
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x45;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&packet), Err(Error::Version(4)));
    }

    #[test]
    fn display() {
        assert_eq!(
            repr().to_string(),
            "2001:db8::1 > ff02::1:ff00:a nh 58 hlim 255 len 4"
        );
    }
}
