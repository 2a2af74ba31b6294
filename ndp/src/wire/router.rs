//! Router Solicitation and Router Advertisement (RFC 4861 §4.1, §4.2), as
//! BGP unnumbered peering uses them: each end advertises itself so the
//! other learns its link-local address (the IPv6 source of the
//! advertisement), and a solicitation asks the router for one at once.
//! The prefix, MTU and other options a host would act on are kept raw and
//! skipped.
//!
//! Pure wire code: no I/O, no clock. These messages travel through the
//! kernel's raw ICMPv6 socket, which verifies the checksum of what it
//! delivers and fills in the checksum of what it sends; [`Repr::parse`]
//! does not look at it, and [`Repr::emit`] fills it in anyway so the bytes
//! are a complete message (the golden tests compare them with a capture).
//!
//! ```text
//! Router Solicitation (type 133):
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            Reserved                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Options ...
//!
//! Router Advertisement (type 134):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Cur Hop Limit |M|O|  Reserved |       Router Lifetime         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Reachable Time                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                          Retrans Timer                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Options ...
//! ```

use std::fmt;
use std::net::Ipv6Addr;
use std::time::Duration;

use l2::EthernetAddress;

use super::icmpv6::{self, Message, Packet};
use super::option::{self, NdiscOption, NdiscOptionRepr, Options};

/// A message that is not a valid Router Solicitation or Advertisement
/// (RFC 4861 §6.1.1, §6.1.2, the checks that need no IP context).
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The ICMPv6 header is cut short.
    #[error(transparent)]
    Icmpv6(#[from] icmpv6::Error),
    /// Another ICMPv6 message.
    #[error("not a router solicitation or advertisement: icmpv6 type {}", u8::from(*.0))]
    NotRouter(Message),
    /// ICMP Code is not 0.
    #[error("icmpv6 code {0}, not 0")]
    Code(u8),
    /// Shorter than the message's fixed part (8 for a solicitation, 16 for
    /// an advertisement).
    #[error("router discovery message truncated: {len} octets, need {need}")]
    Truncated {
        /// Octets given.
        len: usize,
        /// Octets needed.
        need: usize,
    },
    /// An option is malformed (a zero length, or cut short).
    #[error(transparent)]
    Option(#[from] option::Error),
}

mod field {
    use core::ops::Range;

    pub(super) const CUR_HOP_LIMIT: usize = 4;
    pub(super) const FLAGS: usize = 5;
    pub(super) const ROUTER_LIFETIME: Range<usize> = 6..8;
    pub(super) const REACHABLE_TIME: Range<usize> = 8..12;
    pub(super) const RETRANS_TIMER: Range<usize> = 12..16;
    pub(super) const RS_RESERVED: Range<usize> = 4..8;
}

/// Length of a Router Solicitation without options.
pub const RS_BODY_LEN: usize = 8;
/// Length of a Router Advertisement without options.
pub const RA_BODY_LEN: usize = 16;

/// The M and O flags of a Router Advertisement (RFC 4861 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RouterFlags(u8);

impl RouterFlags {
    /// Managed address configuration (M).
    pub const MANAGED: Self = Self(0x80);
    /// Other configuration (O).
    pub const OTHER: Self = Self(0x40);
    /// No flag.
    pub const EMPTY: Self = Self(0);

    /// The flags in `bits`; the reserved bits (and RFC 5175's extensions,
    /// which Neighbor Discovery ignores) are dropped.
    pub const fn from_bits_truncate(bits: u8) -> Self {
        Self(bits & 0xc0)
    }

    /// The flags as the octet carries them.
    pub const fn bits(&self) -> u8 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(&self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the message holds the 16-octet RA body, after which the
    /// RA accessors below do not panic.
    pub fn check_router_advert_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < RA_BODY_LEN {
            return Err(Error::Truncated {
                len,
                need: RA_BODY_LEN,
            });
        }
        Ok(())
    }

    /// Cur Hop Limit of an RA (0: unspecified).
    pub fn cur_hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::CUR_HOP_LIMIT]
    }

    /// The M and O flags of an RA.
    pub fn router_flags(&self) -> RouterFlags {
        RouterFlags::from_bits_truncate(self.buffer.as_ref()[field::FLAGS])
    }

    /// Router Lifetime of an RA, in seconds (0: not a default router).
    pub fn router_lifetime(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::ROUTER_LIFETIME];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Reachable Time of an RA, in milliseconds (0: unspecified).
    pub fn reachable_time(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::REACHABLE_TIME])
    }

    /// Retrans Timer of an RA, in milliseconds (0: unspecified).
    pub fn retrans_timer(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::RETRANS_TIMER])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets Cur Hop Limit.
    pub fn set_cur_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::CUR_HOP_LIMIT] = value;
    }

    /// Sets the M and O flags and zeroes the reserved bits.
    pub fn set_router_flags(&mut self, value: RouterFlags) {
        self.buffer.as_mut()[field::FLAGS] = value.bits();
    }

    /// Sets Router Lifetime, in seconds.
    pub fn set_router_lifetime(&mut self, value: u16) {
        self.buffer.as_mut()[field::ROUTER_LIFETIME].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets Reachable Time, in milliseconds.
    pub fn set_reachable_time(&mut self, value: u32) {
        self.buffer.as_mut()[field::REACHABLE_TIME].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets Retrans Timer, in milliseconds.
    pub fn set_retrans_timer(&mut self, value: u32) {
        self.buffer.as_mut()[field::RETRANS_TIMER].copy_from_slice(&value.to_be_bytes());
    }

    /// Zeroes the 32 reserved bits of an RS.
    pub fn clear_solicit_reserved(&mut self) {
        self.buffer.as_mut()[field::RS_RESERVED].fill(0);
    }
}

/// A Router Solicitation or Advertisement as plain values. Of the options,
/// only the Source Link-layer Address is kept (the first, if several);
/// the others are skipped, as RFC 4861 §4.6 lets a receiver do with what
/// it does not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr {
    /// Router Solicitation (RFC 4861 §4.1).
    RouterSolicit {
        /// The Source Link-layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Router Advertisement (RFC 4861 §4.2).
    RouterAdvert {
        /// Cur Hop Limit (0: unspecified).
        hop_limit: u8,
        /// M and O.
        flags: RouterFlags,
        /// Router Lifetime, whole seconds up to 65535 (0: not a default
        /// router; BGP unnumbered advertisements use 0 where the router
        /// must not become the hosts' default).
        router_lifetime: Duration,
        /// Reachable Time, whole milliseconds (0: unspecified).
        reachable_time: Duration,
        /// Retrans Timer, whole milliseconds (0: unspecified).
        retrans_time: Duration,
        /// The Source Link-layer Address option.
        lladdr: Option<EthernetAddress>,
    },
}

impl Repr {
    /// Reads an RS or RA: ICMP code 0, the fixed part present, every
    /// option's length above zero and within the message. The checksum is
    /// not checked (see the module docs).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self, Error> {
        packet.check_len()?;
        let msg_type = packet.msg_type();
        let need = match msg_type {
            Message::RouterSolicit => RS_BODY_LEN,
            Message::RouterAdvert => RA_BODY_LEN,
            other => return Err(Error::NotRouter(other)),
        };
        if packet.msg_code() != 0 {
            return Err(Error::Code(packet.msg_code()));
        }
        let bytes: &[u8] = packet.buffer.as_ref();
        if bytes.len() < need {
            return Err(Error::Truncated {
                len: bytes.len(),
                need,
            });
        }
        let mut lladdr = None;
        for option in Options::new(&bytes[need..]) {
            if let NdiscOptionRepr::SourceLinkLayerAddr(addr) = option? {
                lladdr.get_or_insert(addr);
            }
        }
        Ok(if msg_type == Message::RouterSolicit {
            Self::RouterSolicit { lladdr }
        } else {
            Self::RouterAdvert {
                hop_limit: packet.cur_hop_limit(),
                flags: packet.router_flags(),
                router_lifetime: Duration::from_secs(packet.router_lifetime().into()),
                reachable_time: Duration::from_millis(packet.reachable_time().into()),
                retrans_time: Duration::from_millis(packet.retrans_timer().into()),
                lladdr,
            }
        })
    }

    /// Length of the message: 8 (RS) or 16 (RA), plus 8 with a link-layer
    /// address option.
    pub const fn buffer_len(&self) -> usize {
        let (body, lladdr) = match self {
            Self::RouterSolicit { lladdr } => (RS_BODY_LEN, lladdr.is_some()),
            Self::RouterAdvert { lladdr, .. } => (RA_BODY_LEN, lladdr.is_some()),
        };
        if lladdr {
            body + option::LINK_LAYER_OPTION_LEN
        } else {
            body
        }
    }

    /// Writes the message, checksum included, into `packet`, whose buffer
    /// must be exactly [`buffer_len`](Self::buffer_len) octets. Durations
    /// beyond their field saturate (65535 s, 2^32-1 ms).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        src_addr: Ipv6Addr,
        dst_addr: Ipv6Addr,
        packet: &mut Packet<T>,
    ) {
        packet.set_msg_code(0);
        let (body, lladdr) = match *self {
            Self::RouterSolicit { lladdr } => {
                packet.set_msg_type(Message::RouterSolicit);
                packet.clear_solicit_reserved();
                (RS_BODY_LEN, lladdr)
            }
            Self::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_time,
                lladdr,
            } => {
                packet.set_msg_type(Message::RouterAdvert);
                packet.set_cur_hop_limit(hop_limit);
                packet.set_router_flags(flags);
                let lifetime = u16::try_from(router_lifetime.as_secs()).unwrap_or(u16::MAX);
                packet.set_router_lifetime(lifetime);
                packet.set_reachable_time(millis(reachable_time));
                packet.set_retrans_timer(millis(retrans_time));
                (RA_BODY_LEN, lladdr)
            }
        };
        if let Some(addr) = lladdr {
            let at = &mut packet.buffer.as_mut()[body..];
            NdiscOptionRepr::SourceLinkLayerAddr(addr).emit(&mut NdiscOption::new_unchecked(at));
        }
        packet.fill_checksum(src_addr, dst_addr);
    }
}

impl fmt::Display for Repr {
    /// Like tcpdump: `router advertisement, lifetime 0s (source
    /// link-address 02:00:00:00:00:01)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lladdr = match self {
            Self::RouterSolicit { lladdr } => {
                f.write_str("router solicitation")?;
                lladdr
            }
            Self::RouterAdvert {
                router_lifetime,
                lladdr,
                ..
            } => {
                write!(
                    f,
                    "router advertisement, lifetime {}s",
                    router_lifetime.as_secs()
                )?;
                lladdr
            }
        };
        if let Some(addr) = lladdr {
            write!(f, " (source link-address {addr})")?;
        }
        Ok(())
    }
}

fn be32(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe10, 0x1);
    const MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x01]);

    /// An RA from fe80::5eff:fe10:1 to ff02::1, as FRR sends for BGP
    /// unnumbered peering (lifetime 0 here, so nobody takes it as a
    /// default router).
    static RA: [u8; 24] = [
        // type 134, code 0, checksum 0x7e04
        0x86, 0x00, 0x7e, 0x04, //
        // cur hop limit 64, M=0 O=0, router lifetime 0 s
        0x40, 0x00, 0x00, 0x00, //
        // reachable time 0 ms
        0x00, 0x00, 0x00, 0x00, //
        // retrans timer 0 ms
        0x00, 0x00, 0x00, 0x00, //
        // option: source link-layer address 02:00:5e:10:00:01
        0x01, 0x01, 0x02, 0x00, 0x5e, 0x10, 0x00, 0x01,
    ];

    /// An RS from fe80::5eff:fe10:1 to ff02::2 (all routers).
    static RS: [u8; 16] = [
        // type 133, code 0, checksum 0xbf0b
        0x85, 0x00, 0xbf, 0x0b, //
        // reserved
        0x00, 0x00, 0x00, 0x00, //
        // option: source link-layer address 02:00:5e:10:00:01
        0x01, 0x01, 0x02, 0x00, 0x5e, 0x10, 0x00, 0x01,
    ];

    const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

    fn ra_repr() -> Repr {
        Repr::RouterAdvert {
            hop_limit: 64,
            flags: RouterFlags::EMPTY,
            router_lifetime: Duration::ZERO,
            reachable_time: Duration::ZERO,
            retrans_time: Duration::ZERO,
            lladdr: Some(MAC),
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&RA[..]).unwrap();
        p.check_router_advert_len().unwrap();
        assert_eq!(p.msg_type(), Message::RouterAdvert);
        assert_eq!(p.cur_hop_limit(), 64);
        assert_eq!(p.router_flags(), RouterFlags::EMPTY);
        assert_eq!(p.router_lifetime(), 0);
        assert_eq!(p.reachable_time(), 0);
        assert_eq!(p.retrans_timer(), 0);
        assert!(p.verify_checksum(SRC, super::super::ALL_NODES));
    }

    #[test]
    fn parse() {
        let p = Packet::new_unchecked(&RA[..]);
        assert_eq!(Repr::parse(&p).unwrap(), ra_repr());
        let p = Packet::new_unchecked(&RS[..]);
        assert_eq!(
            Repr::parse(&p).unwrap(),
            Repr::RouterSolicit { lladdr: Some(MAC) }
        );
    }

    #[test]
    fn emit() {
        let repr = ra_repr();
        assert_eq!(repr.buffer_len(), 24);
        let mut bytes = [0xa5; 24];
        repr.emit(
            SRC,
            super::super::ALL_NODES,
            &mut Packet::new_unchecked(&mut bytes[..]),
        );
        assert_eq!(bytes, RA);
        let repr = Repr::RouterSolicit { lladdr: Some(MAC) };
        assert_eq!(repr.buffer_len(), 16);
        let mut bytes = [0xa5; 16];
        repr.emit(SRC, ALL_ROUTERS, &mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, RS);
    }

    #[test]
    fn fields_round_trip_and_saturate() {
        let repr = Repr::RouterAdvert {
            hop_limit: 0,
            flags: RouterFlags::MANAGED,
            router_lifetime: Duration::from_secs(1800),
            reachable_time: Duration::from_millis(30_000),
            retrans_time: Duration::from_millis(1_000),
            lladdr: None,
        };
        let mut bytes = vec![0; repr.buffer_len()];
        repr.emit(SRC, ALL_ROUTERS, &mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes.len(), 16);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&bytes[..])).unwrap(),
            repr
        );
        let big = Repr::RouterAdvert {
            hop_limit: 0,
            flags: RouterFlags::EMPTY,
            router_lifetime: Duration::from_secs(100_000),
            reachable_time: Duration::ZERO,
            retrans_time: Duration::ZERO,
            lladdr: None,
        };
        big.emit(SRC, ALL_ROUTERS, &mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(
            Packet::new_unchecked(&bytes[..]).router_lifetime(),
            u16::MAX
        );
    }

    #[test]
    fn malformed() {
        let p = |b: &[u8]| Repr::parse(&Packet::new_unchecked(b)).unwrap_err();
        assert_eq!(p(&RA[..15]), Error::Truncated { len: 15, need: 16 });
        assert_eq!(p(&RS[..7]), Error::Truncated { len: 7, need: 8 });
        assert!(matches!(p(&RA[..3]), Error::Icmpv6(_)));
        let mut v = RA;
        v[1] = 1;
        assert_eq!(p(&v), Error::Code(1));
        v = RA;
        v[0] = 135;
        assert_eq!(p(&v), Error::NotRouter(Message::NeighborSolicit));
        v = RA;
        v[17] = 0; // option length 0
        assert!(matches!(p(&v), Error::Option(_)));
        // An option cut short.
        assert!(matches!(p(&RA[..20]), Error::Option(_)));
        // Unknown options are skipped, the first SLLA wins.
        let mut long = RA.to_vec();
        long.splice(16..16, [0x05, 0x01, 0, 0, 0, 0, 0x05, 0xdc]); // MTU 1500
        long.extend_from_slice(&[0x01, 0x01, 0x02, 0, 0, 0, 0, 0x09]);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&long[..])).unwrap(),
            ra_repr()
        );
    }

    #[test]
    fn display() {
        assert_eq!(
            ra_repr().to_string(),
            "router advertisement, lifetime 0s (source link-address 02:00:5e:10:00:01)"
        );
        assert_eq!(
            Repr::RouterSolicit { lladdr: None }.to_string(),
            "router solicitation"
        );
    }
}
