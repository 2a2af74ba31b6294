//! ARP (RFC 826): the zero-copy [`Packet`] view, the Ethernet/IPv4 [`Repr`]
//! and the whole-frame [`FrameRepr`] the responder reads and writes.
//!
//! Pure wire code: no I/O, no clock. [`Packet`] reads any hardware and
//! protocol address lengths; [`Repr`] only accepts IPv4 over Ethernet
//! (hardware type 1, length 6; protocol 0x0800, length 4), the only kind a
//! load balancer answers.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Hardware Type         |         Protocol Type         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  HW Addr Len  | Proto Addr Len|           Operation           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Sender Hardware Address (HW Addr Len octets) ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Sender Protocol Address (Proto Addr Len octets) ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Target Hardware Address (HW Addr Len octets) ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Target Protocol Address (Proto Addr Len octets) ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use std::fmt;
use std::net::Ipv4Addr;

use codepoint::enum_with_unknown;
use l2::ethernet::{self, EtherType, EthernetAddress};

enum_with_unknown! {
    /// The ARP hardware type (IANA "Hardware Types").
    pub enum Hardware(u16) {
        /// Ethernet (10Mb), 1.
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// The ARP operation (RFC 826; IANA "Operation Codes").
    pub enum Operation(u16) {
        /// REQUEST, 1.
        Request = 1,
        /// REPLY, 2.
        Reply = 2,
    }
}

/// An ARP frame the responder cannot read.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The Ethernet header is cut short.
    #[error(transparent)]
    Ethernet(#[from] ethernet::Error),
    /// The frame's EtherType is not ARP.
    #[error("not ARP: ethertype {0}")]
    NotArp(EtherType),
    /// Fewer octets than the fixed header and the four addresses need.
    #[error("arp packet truncated: {len} octets, need {need}")]
    Truncated {
        /// Octets given.
        len: usize,
        /// Octets the header (and its address lengths) call for.
        need: usize,
    },
    /// Hardware other than Ethernet with 6-octet addresses.
    #[error("unsupported hardware type {hardware:?} length {len}")]
    UnsupportedHardware {
        /// The hardware type field.
        hardware: Hardware,
        /// The hardware address length field.
        len: u8,
    },
    /// Protocol other than IPv4 with 4-octet addresses.
    #[error("unsupported protocol type {protocol} length {len}")]
    UnsupportedProtocol {
        /// The protocol type field.
        protocol: EtherType,
        /// The protocol address length field.
        len: u8,
    },
}

/// A zero-copy view of an ARP packet (the Ethernet payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use core::ops::Range;

    pub(super) const HTYPE: Range<usize> = 0..2;
    pub(super) const PTYPE: Range<usize> = 2..4;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: Range<usize> = 6..8;

    pub(super) const fn sha(hlen: u8, _plen: u8) -> Range<usize> {
        let start = OPER.end;
        start..start + hlen as usize
    }

    pub(super) const fn spa(hlen: u8, plen: u8) -> Range<usize> {
        let start = sha(hlen, plen).end;
        start..start + plen as usize
    }

    pub(super) const fn tha(hlen: u8, plen: u8) -> Range<usize> {
        let start = spa(hlen, plen).end;
        start..start + hlen as usize
    }

    pub(super) const fn tpa(hlen: u8, plen: u8) -> Range<usize> {
        let start = tha(hlen, plen).end;
        start..start + plen as usize
    }
}

/// Length of the fixed part (before the addresses).
pub const FIXED_LEN: usize = field::OPER.end;
/// Length of an IPv4-over-Ethernet ARP packet.
pub const PACKET_LEN: usize = field::tpa(6, 4).end;
/// Length of a whole IPv4-over-Ethernet ARP frame as we emit it (no padding:
/// the NIC pads to the 60-octet minimum).
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + PACKET_LEN;

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

    /// Checks that the buffer holds the fixed header and the four addresses
    /// its length fields announce, after which no accessor panics. Octets
    /// after the target protocol address (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<(), Error> {
        let data = self.buffer.as_ref();
        let len = data.len();
        if len < FIXED_LEN {
            return Err(Error::Truncated {
                len,
                need: FIXED_LEN,
            });
        }
        let need = field::tpa(data[field::HLEN], data[field::PLEN]).end;
        if len < need {
            return Err(Error::Truncated { len, need });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The hardware type.
    pub fn hardware_type(&self) -> Hardware {
        Hardware::from(self.read_u16(field::HTYPE.start))
    }

    /// The protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(self.read_u16(field::PTYPE.start))
    }

    /// The hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// The protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// The operation.
    pub fn operation(&self) -> Operation {
        Operation::from(self.read_u16(field::OPER.start))
    }

    /// The sender hardware address, `hardware_len` octets.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::sha(self.hardware_len(), self.protocol_len())]
    }

    /// The sender protocol address, `protocol_len` octets.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::spa(self.hardware_len(), self.protocol_len())]
    }

    /// The target hardware address, `hardware_len` octets.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tha(self.hardware_len(), self.protocol_len())]
    }

    /// The target protocol address, `protocol_len` octets.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tpa(self.hardware_len(), self.protocol_len())]
    }

    fn read_u16(&self, at: usize) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[at], d[at + 1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: Hardware) {
        self.write_u16(field::HTYPE.start, value.into());
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        self.write_u16(field::PTYPE.start, value.into());
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, value: Operation) {
        self.write_u16(field::OPER.start, value.into());
    }

    /// Sets the sender hardware address; `value` must be `hardware_len`
    /// octets long.
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let range = field::sha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the sender protocol address; `value` must be `protocol_len`
    /// octets long.
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let range = field::spa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target hardware address; `value` must be `hardware_len`
    /// octets long.
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let range = field::tha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target protocol address; `value` must be `protocol_len`
    /// octets long.
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let range = field::tpa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    fn write_u16(&mut self, at: usize, value: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(self) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "arp ({err})"),
        }
    }
}

/// An IPv4-over-Ethernet ARP packet as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request, reply or an unknown operation.
    pub operation: Operation,
    /// Sender hardware address.
    pub source_hardware_addr: EthernetAddress,
    /// Sender protocol address (0.0.0.0 in an RFC 5227 probe).
    pub source_protocol_addr: Ipv4Addr,
    /// Target hardware address (ignored in a request).
    pub target_hardware_addr: EthernetAddress,
    /// Target protocol address.
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    /// Reads an IPv4-over-Ethernet ARP packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, Error> {
        packet.check_len()?;
        let (hardware, hlen) = (packet.hardware_type(), packet.hardware_len());
        if hardware != Hardware::Ethernet || hlen != 6 {
            return Err(Error::UnsupportedHardware {
                hardware,
                len: hlen,
            });
        }
        let (protocol, plen) = (packet.protocol_type(), packet.protocol_len());
        if protocol != EtherType::Ipv4 || plen != 4 {
            return Err(Error::UnsupportedProtocol {
                protocol,
                len: plen,
            });
        }
        // The lengths are 6 and 4 and check_len passed: these reads are exact.
        Ok(Self {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr()),
            source_protocol_addr: ipv4(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr()),
            target_protocol_addr: ipv4(packet.target_protocol_addr()),
        })
    }

    /// Length of the packet: 28.
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet into `packet`, which must hold at least
    /// [`buffer_len`](Self::buffer_len) octets.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_hardware_type(Hardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(&self.source_hardware_addr.0);
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(&self.target_hardware_addr.0);
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

impl fmt::Display for Repr {
    /// Like tcpdump: `arp who-has 192.0.2.10 tell 192.0.2.1 (02:..)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operation {
            Operation::Request => write!(
                f,
                "arp who-has {} tell {} ({})",
                self.target_protocol_addr, self.source_protocol_addr, self.source_hardware_addr
            ),
            Operation::Reply => write!(
                f,
                "arp reply {} is-at {} to {} ({})",
                self.source_protocol_addr,
                self.source_hardware_addr,
                self.target_protocol_addr,
                self.target_hardware_addr
            ),
            Operation::Unknown(op) => write!(
                f,
                "arp op {op} {} ({}) > {} ({})",
                self.source_protocol_addr,
                self.source_hardware_addr,
                self.target_protocol_addr,
                self.target_hardware_addr
            ),
        }
    }
}

/// A whole ARP frame: the Ethernet addresses around an ARP [`Repr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    /// Ethernet source.
    pub eth_src: EthernetAddress,
    /// Ethernet destination.
    pub eth_dst: EthernetAddress,
    /// The ARP packet.
    pub arp: Repr,
}

impl FrameRepr {
    /// Reads an Ethernet frame holding an IPv4-over-Ethernet ARP packet.
    /// Octets after the ARP packet (Ethernet padding) are ignored.
    pub fn parse(frame: &[u8]) -> Result<Self, Error> {
        let eth = ethernet::Frame::new_checked(frame)?;
        let ethertype = eth.ethertype();
        if ethertype != EtherType::Arp {
            return Err(Error::NotArp(ethertype));
        }
        let arp = Repr::parse(&Packet::new_checked(eth.payload())?)?;
        Ok(Self {
            eth_src: eth.src_addr(),
            eth_dst: eth.dst_addr(),
            arp,
        })
    }

    /// Length of the frame: [`FRAME_LEN`].
    pub const fn buffer_len(&self) -> usize {
        FRAME_LEN
    }

    /// Writes the frame into the first [`FRAME_LEN`] octets of `buffer`.
    ///
    /// # Panics
    ///
    /// If `buffer` is shorter than [`FRAME_LEN`] (a caller bug: the
    /// responder always passes a `[u8; FRAME_LEN]`).
    pub fn emit(&self, buffer: &mut [u8]) {
        let mut eth = ethernet::Frame::new_unchecked(&mut buffer[..FRAME_LEN]);
        ethernet::Repr {
            src_addr: self.eth_src,
            dst_addr: self.eth_dst,
            ethertype: EtherType::Arp,
        }
        .emit(&mut eth);
        self.arp.emit(&mut Packet::new_unchecked(eth.payload_mut()));
    }
}

impl fmt::Display for FrameRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} > {} {}", self.eth_src, self.eth_dst, self.arp)
    }
}

/// Six octets known to be six long.
fn mac(data: &[u8]) -> EthernetAddress {
    let mut out = [0; 6];
    out.copy_from_slice(data);
    EthernetAddress(out)
}

/// Four octets known to be four long.
fn ipv4(data: &[u8]) -> Ipv4Addr {
    let mut out = [0; 4];
    out.copy_from_slice(data);
    Ipv4Addr::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    static PACKET_BYTES: [u8; 28] = [
        // hardware type: Ethernet
        0x00, 0x01, //
        // protocol type: IPv4
        0x08, 0x00, //
        // hardware length 6, protocol length 4
        0x06, 0x04, //
        // operation: request
        0x00, 0x01, //
        // sender hardware address: 02:00:00:00:00:01
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        // sender protocol address: 192.0.2.1
        0xc0, 0x00, 0x02, 0x01, //
        // target hardware address: 00:00:00:00:00:00
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        // target protocol address: 192.0.2.10
        0xc0, 0x00, 0x02, 0x0a,
    ];

    const SHA: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);

    fn packet_repr() -> Repr {
        Repr {
            operation: Operation::Request,
            source_hardware_addr: SHA,
            source_protocol_addr: Ipv4Addr::new(192, 0, 2, 1),
            target_hardware_addr: EthernetAddress::UNSPECIFIED,
            target_protocol_addr: Ipv4Addr::new(192, 0, 2, 10),
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.hardware_type(), Hardware::Ethernet);
        assert_eq!(packet.protocol_type(), EtherType::Ipv4);
        assert_eq!(packet.hardware_len(), 6);
        assert_eq!(packet.protocol_len(), 4);
        assert_eq!(packet.operation(), Operation::Request);
        assert_eq!(packet.source_hardware_addr(), &SHA.0);
        assert_eq!(packet.source_protocol_addr(), &[192, 0, 2, 1]);
        assert_eq!(packet.target_hardware_addr(), &[0; 6]);
        assert_eq!(packet.target_protocol_addr(), &[192, 0, 2, 10]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 28];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_hardware_type(Hardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(Operation::Request);
        packet.set_source_hardware_addr(&SHA.0);
        packet.set_source_protocol_addr(&[192, 0, 2, 1]);
        packet.set_target_hardware_addr(&[0; 6]);
        packet.set_target_protocol_addr(&[192, 0, 2, 10]);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), packet_repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5; 28];
        let repr = packet_repr();
        assert_eq!(repr.buffer_len(), bytes.len());
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    static FRAME_BYTES: [u8; 60] = [
        // Ethernet destination: ff:ff:ff:ff:ff:ff
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //
        // Ethernet source: 02:00:00:00:00:01
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        // EtherType: ARP
        0x08, 0x06, //
        // ARP: Ethernet, IPv4, 6, 4, reply
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, //
        // sender 02:00:00:00:00:01 192.0.2.1
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x02, 0x01, //
        // target ff:ff:ff:ff:ff:ff 192.0.2.1
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc0, 0x00, 0x02, 0x01, //
        // Ethernet padding to 60 octets
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn frame_repr() -> FrameRepr {
        FrameRepr {
            eth_src: SHA,
            eth_dst: EthernetAddress::BROADCAST,
            arp: Repr {
                operation: Operation::Reply,
                source_hardware_addr: SHA,
                source_protocol_addr: Ipv4Addr::new(192, 0, 2, 1),
                target_hardware_addr: EthernetAddress::BROADCAST,
                target_protocol_addr: Ipv4Addr::new(192, 0, 2, 1),
            },
        }
    }

    #[test]
    fn frame_parse_ignores_padding() {
        assert_eq!(FrameRepr::parse(&FRAME_BYTES).unwrap(), frame_repr());
        assert_eq!(
            FrameRepr::parse(&FRAME_BYTES[..FRAME_LEN]).unwrap(),
            frame_repr()
        );
    }

    #[test]
    fn frame_emit() {
        let mut bytes = [0xa5; FRAME_LEN + 2];
        frame_repr().emit(&mut bytes);
        assert_eq!(bytes[..FRAME_LEN], FRAME_BYTES[..FRAME_LEN]);
        // Not one octet past buffer_len is written.
        assert_eq!(bytes[FRAME_LEN..], [0xa5, 0xa5]);
    }

    #[test]
    fn truncated() {
        for len in 0..PACKET_LEN {
            let err = Packet::new_checked(&PACKET_BYTES[..len]).unwrap_err();
            assert!(matches!(err, Error::Truncated { .. }), "{len}: {err}");
        }
        assert_eq!(
            FrameRepr::parse(&FRAME_BYTES[..FRAME_LEN - 1]),
            Err(Error::Truncated {
                len: PACKET_LEN - 1,
                need: PACKET_LEN
            })
        );
        assert!(matches!(
            FrameRepr::parse(&FRAME_BYTES[..10]),
            Err(Error::Ethernet(_))
        ));
    }

    #[test]
    fn long_addresses_are_bounded() {
        // hlen 255 and plen 255 claim 8 + 2 * 510 octets: check_len must
        // refuse rather than let an accessor slice past the end.
        let mut bytes = PACKET_BYTES;
        bytes[4] = 0xff;
        bytes[5] = 0xff;
        assert_eq!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Truncated {
                len: 28,
                need: 8 + 4 * 255
            })
        );
    }

    #[test]
    fn unsupported() {
        let mut bytes = PACKET_BYTES;
        bytes[1] = 6; // IEEE 802
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet),
            Err(Error::UnsupportedHardware {
                hardware: Hardware::Unknown(6),
                len: 6
            })
        );
        let mut bytes = PACKET_BYTES;
        bytes[2] = 0x86;
        bytes[3] = 0xdd;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet),
            Err(Error::UnsupportedProtocol {
                protocol: EtherType::Ipv6,
                len: 4
            })
        );
        let mut frame = FRAME_BYTES;
        frame[13] = 0x00; // IPv4
        assert_eq!(
            FrameRepr::parse(&frame),
            Err(Error::NotArp(EtherType::Ipv4))
        );
    }

    #[test]
    fn unknown_operation_round_trips() {
        let mut bytes = PACKET_BYTES;
        bytes[7] = 9;
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr.operation, Operation::Unknown(9));
        let mut out = [0xa5; 28];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn display() {
        assert_eq!(
            packet_repr().to_string(),
            "arp who-has 192.0.2.10 tell 192.0.2.1 (02:00:00:00:00:01)"
        );
        assert_eq!(
            frame_repr().to_string(),
            "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff arp reply 192.0.2.1 is-at \
             02:00:00:00:00:01 to 192.0.2.1 (ff:ff:ff:ff:ff:ff)"
        );
        let mut bytes = PACKET_BYTES;
        bytes[1] = 6;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            packet.to_string(),
            "arp (unsupported hardware type Unknown(6) length 6)"
        );
    }
}
