//! Neighbor Discovery options (RFC 4861 §4.6): the zero-copy
//! [`NdiscOption`] view, its [`NdiscOptionRepr`] and the [`Options`]
//! iterator over an option list.
//!
//! Pure wire code: no I/O, no clock. The names carry an `Ndisc` prefix
//! because `Option` is taken by the prelude.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |    Length     |              ...              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                              ...                              ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! Source/Target Link-layer Address (RFC 4861 §4.6.1; Ethernet, RFC 2464 §6):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Type (1/2)  |  Length (1)   |    Link-Layer Address ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Length is in units of 8 octets, type and length included; a length of
//! zero is invalid and the whole message must be dropped (§4.6, §7.1.1).

use std::fmt;

use l2::EthernetAddress;

use codepoint::enum_with_unknown;

enum_with_unknown! {
    /// The option type (IANA "IPv6 Neighbor Discovery Option Formats").
    pub enum OptionType(u8) {
        /// Source Link-layer Address, 1.
        SourceLinkLayerAddr = 1,
        /// Target Link-layer Address, 2.
        TargetLinkLayerAddr = 2,
        /// Prefix Information, 3.
        PrefixInformation = 3,
        /// Redirected Header, 4.
        RedirectedHeader = 4,
        /// MTU, 5.
        Mtu = 5,
        /// Nonce (RFC 3971; enhanced DAD, RFC 7527), 14.
        Nonce = 14,
    }
}

/// An option list the responder cannot read. The whole message is dropped.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An option with a length of zero (RFC 4861 §4.6: silently discard).
    #[error("option at offset {offset} has length zero")]
    ZeroLength {
        /// Offset of the option in the option list.
        offset: usize,
    },
    /// An option longer than what is left of the message.
    #[error("option at offset {offset} truncated")]
    Truncated {
        /// Offset of the option in the option list.
        offset: usize,
    },
    /// A link-layer address option of a length other than 1 (8 octets), the
    /// only one Ethernet has (RFC 2464 §6).
    #[error("link-layer address option at offset {offset} has length {length}, not 1")]
    LinkLayerLength {
        /// Offset of the option in the option list.
        offset: usize,
        /// The length field, in units of 8 octets.
        length: u8,
    },
}

/// A zero-copy view of one option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdiscOption<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use core::ops::Range;

    pub(super) const TYPE: usize = 0;
    pub(super) const LENGTH: usize = 1;
    pub(super) const DATA_START: usize = 2;
    pub(super) const LINK_LAYER_ADDR: Range<usize> = 2..8;
}

/// Length of a link-layer address option over Ethernet.
pub const LINK_LAYER_OPTION_LEN: usize = 8;

impl<T: AsRef<[u8]>> NdiscOption<T> {
    /// Wraps `buffer` without checking its length: accessors may panic
    /// until [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` and checks it holds a whole option.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let option = Self::new_unchecked(buffer);
        option.check_len_at(0)?;
        Ok(option)
    }

    /// Checks that the buffer holds type, a non-zero length and the
    /// `length * 8` octets it claims, after which no accessor panics.
    pub fn check_len(&self) -> Result<(), Error> {
        self.check_len_at(0)
    }

    fn check_len_at(&self, offset: usize) -> Result<(), Error> {
        let data = self.buffer.as_ref();
        if data.len() < field::DATA_START {
            return Err(Error::Truncated { offset });
        }
        let len = usize::from(data[field::LENGTH]) * 8;
        if len == 0 {
            return Err(Error::ZeroLength { offset });
        }
        if data.len() < len {
            return Err(Error::Truncated { offset });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The option type.
    pub fn option_type(&self) -> OptionType {
        OptionType::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The length field, in units of 8 octets.
    pub fn data_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// The whole option's length in octets.
    pub fn total_len(&self) -> usize {
        usize::from(self.data_len()) * 8
    }

    /// The link-layer address of a length-1 link-layer option.
    pub fn link_layer_addr(&self) -> EthernetAddress {
        let mut out = [0; 6];
        out.copy_from_slice(&self.buffer.as_ref()[field::LINK_LAYER_ADDR]);
        EthernetAddress(out)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> NdiscOption<&'a T> {
    /// The octets after type and length, up to the option's length.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::DATA_START..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NdiscOption<T> {
    /// Sets the option type.
    pub fn set_option_type(&mut self, value: OptionType) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the length field, in units of 8 octets.
    pub fn set_data_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::LENGTH] = value;
    }

    /// Sets the link-layer address of a length-1 link-layer option.
    pub fn set_link_layer_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::LINK_LAYER_ADDR].copy_from_slice(&value.0);
    }

    /// The octets after type and length, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA_START..]
    }
}

/// One option as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscOptionRepr<'a> {
    /// Source Link-layer Address (RFC 4861 §4.6.1).
    SourceLinkLayerAddr(EthernetAddress),
    /// Target Link-layer Address (RFC 4861 §4.6.1).
    TargetLinkLayerAddr(EthernetAddress),
    /// Any other option, kept raw so it round-trips; Neighbor Discovery
    /// ignores options it does not use (§4.6).
    Unknown {
        /// The option type.
        option_type: OptionType,
        /// The octets after type and length (`length * 8 - 2` of them).
        data: &'a [u8],
    },
}

impl<'a> NdiscOptionRepr<'a> {
    /// Reads one option.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(option: &NdiscOption<&'a T>) -> Result<Self, Error> {
        Self::parse_at(option, 0)
    }

    fn parse_at<T: AsRef<[u8]> + ?Sized>(
        option: &NdiscOption<&'a T>,
        offset: usize,
    ) -> Result<Self, Error> {
        option.check_len_at(offset)?;
        match option.option_type() {
            t @ (OptionType::SourceLinkLayerAddr | OptionType::TargetLinkLayerAddr) => {
                let length = option.data_len();
                if length != 1 {
                    return Err(Error::LinkLayerLength { offset, length });
                }
                let addr = option.link_layer_addr();
                Ok(if t == OptionType::SourceLinkLayerAddr {
                    Self::SourceLinkLayerAddr(addr)
                } else {
                    Self::TargetLinkLayerAddr(addr)
                })
            }
            option_type => Ok(Self::Unknown {
                option_type,
                data: option.data(),
            }),
        }
    }

    /// Length of the option in octets.
    ///
    /// An `Unknown` option's data should be `8n - 2` octets; emit pads it
    /// with zeroes to the next multiple of 8.
    pub fn buffer_len(&self) -> usize {
        match self {
            Self::SourceLinkLayerAddr(_) | Self::TargetLinkLayerAddr(_) => LINK_LAYER_OPTION_LEN,
            Self::Unknown { data, .. } => (field::DATA_START + data.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option into `option`, which must hold at least
    /// [`buffer_len`](Self::buffer_len) octets. An `Unknown` option longer
    /// than 255 units is cut at 2038 octets of data.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, option: &mut NdiscOption<T>) {
        match self {
            Self::SourceLinkLayerAddr(addr) | Self::TargetLinkLayerAddr(addr) => {
                option.set_option_type(if matches!(self, Self::SourceLinkLayerAddr(_)) {
                    OptionType::SourceLinkLayerAddr
                } else {
                    OptionType::TargetLinkLayerAddr
                });
                option.set_data_len(1);
                option.set_link_layer_addr(*addr);
            }
            Self::Unknown { option_type, data } => {
                let units = self.buffer_len().min(255 * 8) / 8;
                option.set_option_type(*option_type);
                // units <= 255 by the min above.
                option.set_data_len(u8::try_from(units).unwrap_or(u8::MAX));
                let body = &mut option.data_mut()[..units * 8 - field::DATA_START];
                let n = data.len().min(body.len());
                body[..n].copy_from_slice(&data[..n]);
                body[n..].fill(0);
            }
        }
    }
}

impl fmt::Display for NdiscOptionRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SourceLinkLayerAddr(addr) => write!(f, "source link-address {addr}"),
            Self::TargetLinkLayerAddr(addr) => write!(f, "target link-address {addr}"),
            Self::Unknown { option_type, data } => {
                write!(
                    f,
                    "option {} len {}",
                    u8::from(*option_type),
                    data.len() + 2
                )
            }
        }
    }
}

/// Iterates over an option list; yields an error once and then stops.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> Options<'a> {
    /// The options in `data` (the octets after a message's fixed part).
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, offset: 0 }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<NdiscOptionRepr<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.data.get(self.offset..)?;
        if rest.is_empty() {
            return None;
        }
        let option = NdiscOption::new_unchecked(rest);
        match NdiscOptionRepr::parse_at(&option, self.offset) {
            Ok(repr) => {
                self.offset += option.total_len();
                Some(Ok(repr))
            }
            Err(err) => {
                // Stop: nothing after a broken option can be framed.
                self.offset = self.data.len();
                Some(Err(err))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static OPTIONS_BYTES: [u8; 24] = [
        // type 1 (source link-layer address), length 1
        0x01, 0x01, //
        // 02:00:00:00:00:01
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        // type 14 (nonce), length 1
        0x0e, 0x01, //
        // nonce
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, //
        // type 2 (target link-layer address), length 1
        0x02, 0x01, //
        // 02:00:00:00:00:0a
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    const SLLA: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const TLLA: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);

    fn reprs() -> [NdiscOptionRepr<'static>; 3] {
        [
            NdiscOptionRepr::SourceLinkLayerAddr(SLLA),
            NdiscOptionRepr::Unknown {
                option_type: OptionType::Nonce,
                data: &OPTIONS_BYTES[10..16],
            },
            NdiscOptionRepr::TargetLinkLayerAddr(TLLA),
        ]
    }

    #[test]
    fn deconstruct() {
        let option = NdiscOption::new_checked(&OPTIONS_BYTES[..]).unwrap();
        assert_eq!(option.option_type(), OptionType::SourceLinkLayerAddr);
        assert_eq!(option.data_len(), 1);
        assert_eq!(option.total_len(), 8);
        assert_eq!(option.link_layer_addr(), SLLA);
        assert_eq!(option.data(), &SLLA.0);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 8];
        let mut option = NdiscOption::new_unchecked(&mut bytes[..]);
        option.set_option_type(OptionType::SourceLinkLayerAddr);
        option.set_data_len(1);
        option.set_link_layer_addr(SLLA);
        assert_eq!(bytes, OPTIONS_BYTES[..8]);
    }

    #[test]
    fn parse() {
        let parsed: Result<Vec<_>, _> = Options::new(&OPTIONS_BYTES).collect();
        assert_eq!(parsed.unwrap(), reprs());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5; 24];
        let mut at = 0;
        for repr in reprs() {
            let len = repr.buffer_len();
            repr.emit(&mut NdiscOption::new_unchecked(&mut bytes[at..at + len]));
            at += len;
        }
        assert_eq!(at, 24);
        assert_eq!(bytes, OPTIONS_BYTES);
    }

    #[test]
    fn unknown_data_is_padded() {
        let repr = NdiscOptionRepr::Unknown {
            option_type: OptionType::Unknown(200),
            data: &[1, 2, 3],
        };
        assert_eq!(repr.buffer_len(), 8);
        let mut bytes = [0xa5; 8];
        repr.emit(&mut NdiscOption::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, [200, 1, 1, 2, 3, 0, 0, 0]);
    }

    #[test]
    fn zero_length_is_invalid() {
        let mut bytes = OPTIONS_BYTES;
        bytes[9] = 0;
        let parsed: Vec<_> = Options::new(&bytes).collect();
        assert_eq!(
            parsed,
            [
                Ok(NdiscOptionRepr::SourceLinkLayerAddr(SLLA)),
                Err(Error::ZeroLength { offset: 8 })
            ]
        );
    }

    #[test]
    fn truncated_and_bad_lengths() {
        assert_eq!(
            Options::new(&OPTIONS_BYTES[..20]).last(),
            Some(Err(Error::Truncated { offset: 16 }))
        );
        assert_eq!(
            Options::new(&OPTIONS_BYTES[..1]).next(),
            Some(Err(Error::Truncated { offset: 0 }))
        );
        let mut bytes = [0u8; 16];
        bytes[0] = 1;
        bytes[1] = 2;
        assert_eq!(
            Options::new(&bytes).next(),
            Some(Err(Error::LinkLayerLength {
                offset: 0,
                length: 2
            }))
        );
        assert_eq!(Options::new(&[]).next(), None);
    }

    #[test]
    fn display() {
        let shown: Vec<String> = reprs().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "source link-address 02:00:00:00:00:01",
                "option 14 len 8",
                "target link-address 02:00:00:00:00:0a"
            ]
        );
    }
}
