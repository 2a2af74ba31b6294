//! The ICMPv6 header (RFC 4443 §2.1) and its checksum (§2.3, with the
//! RFC 8200 §8.1 pseudo-header): the zero-copy [`Packet`] view.
//!
//! Pure wire code: no I/O, no clock. The Neighbor Discovery bodies are read
//! through the same view, with the accessors in [`super::ndisc`].
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                         Message Body                          +
//! |                                                               |
//! ```

use std::net::Ipv6Addr;

use super::ipv6::NEXT_HEADER_ICMPV6;
use codepoint::enum_with_unknown;

enum_with_unknown! {
    /// The ICMPv6 message type (IANA "ICMPv6 Parameters").
    pub enum Message(u8) {
        /// Echo Request, 128.
        EchoRequest = 128,
        /// Echo Reply, 129.
        EchoReply = 129,
        /// Router Solicitation, 133.
        RouterSolicit = 133,
        /// Router Advertisement, 134.
        RouterAdvert = 134,
        /// Neighbor Solicitation, 135.
        NeighborSolicit = 135,
        /// Neighbor Advertisement, 136.
        NeighborAdvert = 136,
        /// Redirect, 137.
        Redirect = 137,
    }
}

/// An ICMPv6 message shorter than its 4-octet header.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer octets than the header.
    #[error("icmpv6 message truncated: {len} octets, need {HEADER_LEN}")]
    Truncated {
        /// Octets given.
        len: usize,
    },
}

/// A zero-copy view of an ICMPv6 message: exactly the IPv6 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    pub(super) buffer: T,
}

mod field {
    use core::ops::Range;

    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Range<usize> = 2..4;
}

/// Length of the ICMPv6 header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

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

    /// Checks that the buffer holds the header, after which the header
    /// accessors do not panic (the Neighbor Discovery ones need
    /// [`check_ndisc_len`](Self::check_ndisc_len)).
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

    /// The message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Whether the checksum over the pseudo-header (`src_addr`, `dst_addr`,
    /// length, next header 58) and the whole message is right.
    pub fn verify_checksum(&self, src_addr: Ipv6Addr, dst_addr: Ipv6Addr) -> bool {
        checksum(src_addr, dst_addr, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the message code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Computes and sets the checksum; the whole buffer is the message.
    pub fn fill_checksum(&mut self, src_addr: Ipv6Addr, dst_addr: Ipv6Addr) {
        self.set_checksum(0);
        let sum = checksum(src_addr, dst_addr, self.buffer.as_ref());
        self.set_checksum(sum);
    }
}

/// The ones' complement of the ones' complement sum of the pseudo-header
/// and `message` (RFC 4443 §2.3): 0 over a message with a right checksum.
pub fn checksum(src_addr: Ipv6Addr, dst_addr: Ipv6Addr, message: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    for addr in [src_addr, dst_addr] {
        sum += sum_words(&addr.octets());
    }
    // Upper-layer length as 32 bits (an ND message is far below 2^32), then
    // three zero octets and the next header.
    sum += message.len() as u64;
    sum += u64::from(NEXT_HEADER_ICMPV6);
    sum += sum_words(message);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // The loop above leaves sum <= 0xffff.
    !(sum as u16)
}

/// Sum of big-endian 16-bit words, an odd last octet padded with zero.
fn sum_words(data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    let mut sum: u64 = chunks
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo request "ab" from 2001:db8::1 to 2001:db8::2 (odd length, to
    /// exercise the padding of the last octet).
    static ECHO_BYTES: [u8; 10] = [
        // type 128, code 0
        0x80, 0x00, //
        // checksum
        0xc2, 0xe1, //
        // identifier 1, sequence 1
        0x00, 0x01, 0x00, 0x01, //
        // data "ab"
        0x61, 0x62,
    ];

    const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0xc2e1);
        assert!(packet.verify_checksum(SRC, DST));
        assert!(!packet.verify_checksum(SRC, Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 10];
        bytes[4..].copy_from_slice(&ECHO_BYTES[4..]);
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Message::EchoRequest);
        packet.set_msg_code(0);
        packet.fill_checksum(SRC, DST);
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn bad_checksum() {
        let mut bytes = ECHO_BYTES;
        bytes[9] ^= 1;
        assert!(
            !Packet::new_checked(&bytes[..])
                .unwrap()
                .verify_checksum(SRC, DST)
        );
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&ECHO_BYTES[..3]),
            Err(Error::Truncated { len: 3 })
        );
    }
}
