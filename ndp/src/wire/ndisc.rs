//! Neighbor Solicitation and Neighbor Advertisement (RFC 4861 §4.3, §4.4):
//! the accessors of the [`Packet`] view for their bodies and the
//! [`Repr`] with the message-level checks of §7.1.1 and §7.1.2.
//!
//! Pure wire code: no I/O, no clock. The checksum is verified in
//! [`Repr::parse`] (except under `cfg(fuzzing)`, so the fuzzer reaches the
//! code behind it) and filled in [`Repr::emit`].
//!
//! ```text
//! Neighbor Solicitation (type 135):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                           Reserved                            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +                       Target Address                          +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Options ...
//! +-+-+-+-+-+-+-+-+-+-+-+-
//!
//! Neighbor Advertisement (type 136): the same, but the first octet after
//! the checksum carries the flags:
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |R|S|O|                     Reserved                            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use std::fmt;
use std::net::Ipv6Addr;

use l2::EthernetAddress;

use super::icmpv6::{self, Message, Packet};
use super::option::{self, NdiscOption, NdiscOptionRepr, Options};

/// A Neighbor Solicitation or Advertisement that must be dropped
/// (RFC 4861 §7.1.1, §7.1.2), or not one at all.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The ICMPv6 header is cut short.
    #[error(transparent)]
    Icmpv6(#[from] icmpv6::Error),
    /// Another ICMPv6 message (echo, router discovery, redirect, ...).
    #[error("not a neighbor solicitation or advertisement: icmpv6 type {}", u8::from(*.0))]
    NotNdisc(Message),
    /// ICMP Code is not 0.
    #[error("icmpv6 code {0}, not 0")]
    Code(u8),
    /// ICMP length (from the IP length) below 24 octets.
    #[error("neighbor discovery message truncated: {len} octets, need {BODY_LEN}")]
    Truncated {
        /// Octets given.
        len: usize,
    },
    /// The ICMPv6 checksum is wrong.
    #[error("bad icmpv6 checksum 0x{0:04x}")]
    Checksum(u16),
    /// The Target Address is a multicast address.
    #[error("target {0} is multicast")]
    TargetMulticast(Ipv6Addr),
    /// An option is malformed.
    #[error(transparent)]
    Option(#[from] option::Error),
}

mod field {
    use core::ops::{Range, RangeFrom};

    pub(super) const FLAGS: usize = 4;
    pub(super) const RESERVED: Range<usize> = 4..8;
    pub(super) const TARGET: Range<usize> = 8..24;
    pub(super) const OPTIONS: RangeFrom<usize> = 24..;
}

/// Length of an NS or NA without options.
pub const BODY_LEN: usize = field::OPTIONS.start;

/// The R, S and O flags of a Neighbor Advertisement (RFC 4861 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NeighborFlags(u8);

impl NeighborFlags {
    /// R: the sender is a router.
    pub const ROUTER: Self = Self(0x80);
    /// S: sent in response to a Neighbor Solicitation.
    pub const SOLICITED: Self = Self(0x40);
    /// O: override an existing cache entry.
    pub const OVERRIDE: Self = Self(0x20);
    /// No flag set.
    pub const EMPTY: Self = Self(0);

    /// The flags in the first octet of an NA body; reserved bits dropped
    /// (they "MUST be ignored by the receiver").
    pub const fn from_bits_truncate(bits: u8) -> Self {
        Self(bits & 0xe0)
    }

    /// The flags as the first octet of an NA body.
    pub const fn bits(&self) -> u8 {
        self.0
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(&self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for NeighborFlags {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Display for NeighborFlags {
    /// Like tcpdump: `[router, solicited, override]`, `[none]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::ROUTER, "router"),
            (Self::SOLICITED, "solicited"),
            (Self::OVERRIDE, "override"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(flag, _)| self.contains(*flag))
            .map(|(_, name)| *name)
            .collect();
        if set.is_empty() {
            f.write_str("[none]")
        } else {
            write!(f, "[{}]", set.join(", "))
        }
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the message holds the 24-octet NS/NA body, after which
    /// the accessors below do not panic.
    pub fn check_ndisc_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < BODY_LEN {
            return Err(Error::Truncated { len });
        }
        Ok(())
    }

    /// The R, S and O flags of an NA.
    pub fn neighbor_flags(&self) -> NeighborFlags {
        NeighborFlags::from_bits_truncate(self.buffer.as_ref()[field::FLAGS])
    }

    /// The Target Address.
    pub fn target_addr(&self) -> Ipv6Addr {
        let mut out = [0; 16];
        out.copy_from_slice(&self.buffer.as_ref()[field::TARGET]);
        Ipv6Addr::from(out)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The option list.
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::OPTIONS]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the NA flags and zeroes the reserved bits (an NS has all 32
    /// bits reserved: pass [`NeighborFlags::EMPTY`]).
    pub fn set_neighbor_flags(&mut self, value: NeighborFlags) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&[value.bits(), 0, 0, 0]);
    }

    /// Sets the Target Address.
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET].copy_from_slice(&value.octets());
    }

    /// The option list, mutable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::OPTIONS]
    }
}

/// A Neighbor Solicitation or Advertisement as plain values. Only the
/// link-layer address option that applies is kept (the first one, if
/// several); other options are skipped (RFC 4861 §4.3, §4.4: "future
/// versions ... may define new option types. Receivers MUST silently ignore
/// any options they do not recognize").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr {
    /// Neighbor Solicitation (RFC 4861 §4.3).
    NeighborSolicit {
        /// The address whose link-layer address is asked for.
        target_addr: Ipv6Addr,
        /// The Source Link-layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor Advertisement (RFC 4861 §4.4).
    NeighborAdvert {
        /// R, S and O.
        flags: NeighborFlags,
        /// The address advertised.
        target_addr: Ipv6Addr,
        /// The Target Link-layer Address option.
        lladdr: Option<EthernetAddress>,
    },
}

impl Repr {
    /// Reads an NS or NA sent from `src_addr` to `dst_addr`, with the checks
    /// that need no IP context (RFC 4861 §7.1.1, §7.1.2): ICMP code 0,
    /// length at least 24, checksum, target not multicast, every option's
    /// length above zero.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        src_addr: Ipv6Addr,
        dst_addr: Ipv6Addr,
        packet: &Packet<&T>,
    ) -> Result<Self, Error> {
        packet.check_len()?;
        let msg_type = packet.msg_type();
        if !matches!(msg_type, Message::NeighborSolicit | Message::NeighborAdvert) {
            return Err(Error::NotNdisc(msg_type));
        }
        if packet.msg_code() != 0 {
            return Err(Error::Code(packet.msg_code()));
        }
        packet.check_ndisc_len()?;
        if cfg!(not(fuzzing)) && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::Checksum(packet.checksum()));
        }
        let target_addr = packet.target_addr();
        if target_addr.is_multicast() {
            return Err(Error::TargetMulticast(target_addr));
        }
        let (mut source_lladdr, mut target_lladdr) = (None, None);
        for option in Options::new(packet.options()) {
            match option? {
                NdiscOptionRepr::SourceLinkLayerAddr(addr) => {
                    source_lladdr.get_or_insert(addr);
                }
                NdiscOptionRepr::TargetLinkLayerAddr(addr) => {
                    target_lladdr.get_or_insert(addr);
                }
                NdiscOptionRepr::Unknown { .. } => {}
            }
        }
        Ok(if msg_type == Message::NeighborSolicit {
            Self::NeighborSolicit {
                target_addr,
                lladdr: source_lladdr,
            }
        } else {
            Self::NeighborAdvert {
                flags: packet.neighbor_flags(),
                target_addr,
                lladdr: target_lladdr,
            }
        })
    }

    /// Length of the message: 24, plus 8 with a link-layer address option.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::NeighborSolicit { lladdr, .. } | Self::NeighborAdvert { lladdr, .. } => {
                if lladdr.is_some() {
                    BODY_LEN + option::LINK_LAYER_OPTION_LEN
                } else {
                    BODY_LEN
                }
            }
        }
    }

    /// The Target Address.
    pub const fn target_addr(&self) -> Ipv6Addr {
        match self {
            Self::NeighborSolicit { target_addr, .. }
            | Self::NeighborAdvert { target_addr, .. } => *target_addr,
        }
    }

    /// Writes the message, checksum included, into `packet`, whose buffer
    /// must be exactly [`buffer_len`](Self::buffer_len) octets (the
    /// checksum covers all of it).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        src_addr: Ipv6Addr,
        dst_addr: Ipv6Addr,
        packet: &mut Packet<T>,
    ) {
        packet.set_msg_code(0);
        let (flags, target_addr, option) = match *self {
            Self::NeighborSolicit {
                target_addr,
                lladdr,
            } => {
                packet.set_msg_type(Message::NeighborSolicit);
                (
                    NeighborFlags::EMPTY,
                    target_addr,
                    lladdr.map(NdiscOptionRepr::SourceLinkLayerAddr),
                )
            }
            Self::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => {
                packet.set_msg_type(Message::NeighborAdvert);
                (
                    flags,
                    target_addr,
                    lladdr.map(NdiscOptionRepr::TargetLinkLayerAddr),
                )
            }
        };
        packet.set_neighbor_flags(flags);
        packet.set_target_addr(target_addr);
        if let Some(option) = option {
            option.emit(&mut NdiscOption::new_unchecked(packet.options_mut()));
        }
        packet.fill_checksum(src_addr, dst_addr);
    }
}

impl fmt::Display for Repr {
    /// Like tcpdump: `neighbor solicitation, who has 2001:db8::a (source
    /// link-address 02:00:00:00:00:01)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NeighborSolicit {
                target_addr,
                lladdr,
            } => {
                write!(f, "neighbor solicitation, who has {target_addr}")?;
                if let Some(addr) = lladdr {
                    write!(f, " (source link-address {addr})")?;
                }
            }
            Self::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => {
                write!(f, "neighbor advertisement, tgt is {target_addr} {flags}")?;
                if let Some(addr) = lladdr {
                    write!(f, " (target link-address {addr})")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const VIP: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x0a);
    const SN_VIP: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 0x0a);
    const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);

    /// NS from 2001:db8::1 to ff02::1:ff00:a.
    static NS_BYTES: [u8; 32] = [
        // type 135, code 0
        0x87, 0x00, //
        // checksum
        0x1c, 0x17, //
        // reserved
        0x00, 0x00, 0x00, 0x00, //
        // target 2001:db8::a
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, //
        // option: source link-layer address 02:00:00:00:00:01
        0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    /// NA from 2001:db8::a to 2001:db8::1.
    static NA_BYTES: [u8; 32] = [
        // type 136, code 0
        0x88, 0x00, //
        // checksum
        0x8a, 0x59, //
        // flags S, O; reserved
        0x60, 0x00, 0x00, 0x00, //
        // target 2001:db8::a
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, //
        // option: target link-layer address 02:00:00:00:00:0a
        0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    fn ns_repr() -> Repr {
        Repr::NeighborSolicit {
            target_addr: VIP,
            lladdr: Some(PEER_MAC),
        }
    }

    fn na_repr() -> Repr {
        Repr::NeighborAdvert {
            flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
            target_addr: VIP,
            lladdr: Some(OUR_MAC),
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&NS_BYTES[..]).unwrap();
        packet.check_ndisc_len().unwrap();
        assert_eq!(packet.msg_type(), Message::NeighborSolicit);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0x1c17);
        assert_eq!(packet.target_addr(), VIP);
        assert_eq!(packet.options(), &NS_BYTES[24..]);
        let packet = Packet::new_checked(&NA_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Message::NeighborAdvert);
        assert_eq!(
            packet.neighbor_flags(),
            NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE
        );
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 32];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Message::NeighborAdvert);
        packet.set_msg_code(0);
        packet.set_neighbor_flags(NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE);
        packet.set_target_addr(VIP);
        packet.options_mut().copy_from_slice(&NA_BYTES[24..]);
        packet.fill_checksum(VIP, PEER);
        assert_eq!(bytes, NA_BYTES);
    }

    #[test]
    fn parse() {
        let ns = Packet::new_checked(&NS_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(PEER, SN_VIP, &ns).unwrap(), ns_repr());
        let na = Packet::new_checked(&NA_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(VIP, PEER, &na).unwrap(), na_repr());
    }

    #[test]
    fn emit() {
        for (repr, src, dst, expected) in [
            (ns_repr(), PEER, SN_VIP, NS_BYTES),
            (na_repr(), VIP, PEER, NA_BYTES),
        ] {
            let mut bytes = [0xa5; 32];
            assert_eq!(repr.buffer_len(), 32);
            repr.emit(src, dst, &mut Packet::new_unchecked(&mut bytes[..]));
            assert_eq!(bytes, expected);
        }
    }

    #[test]
    fn without_lladdr() {
        let repr = Repr::NeighborSolicit {
            target_addr: VIP,
            lladdr: None,
        };
        let mut bytes = [0xa5; 24];
        assert_eq!(repr.buffer_len(), 24);
        repr.emit(
            Ipv6Addr::UNSPECIFIED,
            SN_VIP,
            &mut Packet::new_unchecked(&mut bytes[..]),
        );
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(Ipv6Addr::UNSPECIFIED, SN_VIP, &packet),
            Ok(repr)
        );
    }

    fn with<const N: usize>(bytes: [u8; N], f: impl FnOnce(&mut [u8])) -> Vec<u8> {
        let mut v = bytes.to_vec();
        f(&mut v);
        // Re-checksum so the checks behind the checksum are reached.
        Packet::new_unchecked(&mut v[..]).fill_checksum(PEER, SN_VIP);
        v
    }

    fn parse_err(bytes: &[u8]) -> Error {
        let packet = Packet::new_unchecked(bytes);
        Repr::parse(PEER, SN_VIP, &packet).unwrap_err()
    }

    #[test]
    fn rfc4861_7_1_1_checks() {
        // Code not 0.
        assert_eq!(parse_err(&with(NS_BYTES, |b| b[1] = 1)), Error::Code(1));
        // Shorter than 24.
        assert_eq!(parse_err(&NS_BYTES[..23]), Error::Truncated { len: 23 });
        // Checksum.
        let mut bad = NS_BYTES;
        bad[31] ^= 0xff;
        assert_eq!(parse_err(&bad), Error::Checksum(0x1c17));
        // Target multicast.
        let mcast = with(NS_BYTES, |b| b[8..24].copy_from_slice(&SN_VIP.octets()));
        assert_eq!(parse_err(&mcast), Error::TargetMulticast(SN_VIP));
        // Option length zero.
        let zero = with(NS_BYTES, |b| b[25] = 0);
        assert_eq!(
            parse_err(&zero),
            Error::Option(option::Error::ZeroLength { offset: 0 })
        );
        // Not NS or NA.
        assert_eq!(
            parse_err(&with(NS_BYTES, |b| b[0] = 128)),
            Error::NotNdisc(Message::EchoRequest)
        );
        assert_eq!(
            parse_err(&NS_BYTES[..3]),
            Error::Icmpv6(icmpv6::Error::Truncated { len: 3 })
        );
    }

    #[test]
    fn skips_unknown_options_and_keeps_first_lladdr() {
        let mut v = NS_BYTES[..24].to_vec();
        // nonce, then two SLLAs and a TLLA (ignored in an NS).
        v.extend_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]);
        v.extend_from_slice(&[1, 1, 2, 0, 0, 0, 0, 7]);
        v.extend_from_slice(&[1, 1, 2, 0, 0, 0, 0, 8]);
        v.extend_from_slice(&[2, 1, 2, 0, 0, 0, 0, 9]);
        Packet::new_unchecked(&mut v[..]).fill_checksum(PEER, SN_VIP);
        let repr = Repr::parse(PEER, SN_VIP, &Packet::new_unchecked(&v[..])).unwrap();
        assert_eq!(
            repr,
            Repr::NeighborSolicit {
                target_addr: VIP,
                lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 7]))
            }
        );
    }

    #[test]
    fn display() {
        assert_eq!(
            ns_repr().to_string(),
            "neighbor solicitation, who has 2001:db8::a (source link-address 02:00:00:00:00:01)"
        );
        assert_eq!(
            na_repr().to_string(),
            "neighbor advertisement, tgt is 2001:db8::a [solicited, override] \
             (target link-address 02:00:00:00:00:0a)"
        );
        assert_eq!(NeighborFlags::EMPTY.to_string(), "[none]");
    }
}
