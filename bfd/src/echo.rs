//! The BFD Echo packet (RFC 5880 §4, §6.4; RFC 5881 §4): its contents are
//! a local matter, since only the sender ever reads it (the peer's
//! forwarding plane sends it straight back). Ours:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    |    Length     |           Reserved            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       My Discriminator                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                        Sequence Number                        |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The first eight octets have the layout FRR's bfdd uses for its own
//! echo packets (version 1, length, discriminator), so that a capture
//! reads the same; the sequence number tells our echoes apart. Pure wire
//! code: no I/O, no clock.

use std::fmt;
use std::num::NonZeroU32;

/// Length of our echo packet.
pub const ECHO_LEN: usize = 16;
/// The version octet we write and expect.
pub const ECHO_VERSION: u8 = 1;

/// One of our echo packets, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EchoRepr {
    /// The sending session's discriminator (bfd.LocalDiscr).
    pub discriminator: NonZeroU32,
    /// Counts the session's echo packets, from 1.
    pub sequence: u64,
}

/// Why an echo datagram is not one of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EchoError {
    /// Shorter than [`ECHO_LEN`] (the length received).
    #[error("echo packet of {0} octets, want {ECHO_LEN}")]
    Truncated(usize),
    /// Not version 1 or not our length.
    #[error("echo packet version {version}, length {length}")]
    Format {
        /// The version octet.
        version: u8,
        /// The length octet.
        length: u8,
    },
    /// My Discriminator is zero.
    #[error("echo packet with discriminator 0")]
    DiscriminatorZero,
}

impl EchoRepr {
    /// Parses a datagram's payload; octets after [`ECHO_LEN`] are ignored.
    pub fn parse(data: &[u8]) -> Result<Self, EchoError> {
        let Some(head) = data.get(..ECHO_LEN) else {
            return Err(EchoError::Truncated(data.len()));
        };
        let (version, length) = (head[0], head[1]);
        if version != ECHO_VERSION || usize::from(length) != ECHO_LEN {
            return Err(EchoError::Format { version, length });
        }
        let discriminator =
            NonZeroU32::new(u32::from_be_bytes([head[4], head[5], head[6], head[7]]))
                .ok_or(EchoError::DiscriminatorZero)?;
        let mut seq = [0; 8];
        seq.copy_from_slice(&head[8..16]);
        Ok(Self {
            discriminator,
            sequence: u64::from_be_bytes(seq),
        })
    }

    /// The packet as a fresh array.
    pub fn to_bytes(&self) -> [u8; ECHO_LEN] {
        let mut out = [0; ECHO_LEN];
        out[0] = ECHO_VERSION;
        out[1] = ECHO_LEN as u8;
        out[4..8].copy_from_slice(&self.discriminator.get().to_be_bytes());
        out[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        out
    }
}

impl fmt::Display for EchoRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BFD echo discr {} seq {}",
            self.discriminator, self.sequence
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static BYTES: [u8; ECHO_LEN] = [
        0x01, // version 1
        0x10, // length 16
        0x00, 0x00, // reserved
        0x12, 0x34, 0x56, 0x78, // my discriminator
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, // sequence 258
    ];

    fn repr() -> EchoRepr {
        EchoRepr {
            discriminator: NonZeroU32::new(0x1234_5678).unwrap(),
            sequence: 258,
        }
    }

    #[test]
    fn parse_and_emit() {
        assert_eq!(EchoRepr::parse(&BYTES), Ok(repr()));
        assert_eq!(repr().to_bytes(), BYTES);
        assert_eq!(repr().to_string(), "BFD echo discr 305419896 seq 258");
        // Trailing octets (padding) are ignored.
        let mut long = BYTES.to_vec();
        long.extend_from_slice(&[0xa5; 8]);
        assert_eq!(EchoRepr::parse(&long), Ok(repr()));
    }

    #[test]
    fn foreign_packets_are_errors() {
        assert_eq!(EchoRepr::parse(&BYTES[..15]), Err(EchoError::Truncated(15)));
        let mut b = BYTES;
        b[1] = 24; // FRR's echo packet: 24 octets, with a send time.
        assert_eq!(
            EchoRepr::parse(&b),
            Err(EchoError::Format {
                version: 1,
                length: 24
            })
        );
        let mut b = BYTES;
        b[4..8].fill(0);
        assert_eq!(EchoRepr::parse(&b), Err(EchoError::DiscriminatorZero));
    }
}
