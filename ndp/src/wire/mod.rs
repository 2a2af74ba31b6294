//! The Neighbor Discovery wire format as the responder sees it: Ethernet,
//! the IPv6 fixed header, ICMPv6, Neighbor Solicitation and Advertisement
//! and their options; [`FrameRepr`] reads and writes the whole frame.
//! Router Solicitation and Advertisement ([`router`]), for BGP unnumbered
//! peering, are ICMPv6 messages only: they travel through a raw socket.
//!
//! Pure wire code: no I/O, no clock. Each layer is a smoltcp-style
//! zero-copy view with a `Repr`: [`ipv6`], [`icmpv6`], [`ndisc`],
//! [`option`]; Ethernet comes from `l2::ethernet`.
//!
//! ```text
//! +----------+--------------------+-----------------------------------+
//! | Ethernet | IPv6 fixed header  | ICMPv6 NS/NA (24) | options (8n)  |
//! | 14       | 40, next header 58 | type code cksum   | SLLA / TLLA   |
//! +----------+--------------------+-----------------------------------+
//! ```
//!
//! **Extension headers are not followed.** RFC 4861 messages are sent by
//! every stack we know with ICMPv6 directly after the fixed header; a frame
//! whose next header is anything but 58 is reported as
//! [`Error::NotIcmpv6`] and the responder ignores it. This also keeps a
//! hop-by-hop or fragment header from smuggling a solicitation past the
//! hop-limit check (RFC 6980 forbids fragmented Neighbor Discovery).

pub mod icmpv6;
pub mod ipv6;
pub mod ndisc;
pub mod option;
pub mod router;

use std::fmt;
use std::net::Ipv6Addr;

use l2::ethernet::{self, EtherType, EthernetAddress};

pub use self::icmpv6::Message;
pub use self::ndisc::{NeighborFlags, Repr as NdiscRepr};
pub use self::option::{NdiscOption, NdiscOptionRepr, OptionType};
pub use self::router::{Repr as RouterRepr, RouterFlags};

/// A frame that is not a valid Neighbor Solicitation or Advertisement.
///
/// Decoding is pure: nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The Ethernet header is cut short.
    #[error(transparent)]
    Ethernet(#[from] ethernet::Error),
    /// The frame's EtherType is not IPv6.
    #[error("not IPv6: ethertype {0}")]
    NotIpv6(EtherType),
    /// The IPv6 header is cut short or not version 6.
    #[error(transparent)]
    Ipv6(#[from] ipv6::Error),
    /// The next header is not ICMPv6 (extension headers are not followed).
    #[error("next header {0}, not ICMPv6")]
    NotIcmpv6(u8),
    /// IP Hop Limit is not 255: the message may come from off-link
    /// (RFC 4861 §7.1.1, §7.1.2).
    #[error("hop limit {0}, not 255")]
    HopLimit(u8),
    /// The IPv6 source is a multicast address (RFC 4291 §2.7).
    #[error("source {0} is multicast")]
    SourceMulticast(Ipv6Addr),
    /// The ICMPv6 message is not a valid NS or NA.
    #[error(transparent)]
    Ndisc(#[from] ndisc::Error),
    /// A DAD solicitation (source ::) not sent to a solicited-node multicast
    /// address (RFC 4861 §7.1.1).
    #[error("solicitation from :: to {0}, not a solicited-node address")]
    DadDestination(Ipv6Addr),
    /// A DAD solicitation (source ::) with a Source Link-layer Address
    /// option (RFC 4861 §7.1.1).
    #[error("solicitation from :: with a source link-layer address")]
    DadSourceLladdr,
    /// An advertisement to a multicast address with the Solicited flag set
    /// (RFC 4861 §7.1.2).
    #[error("solicited advertisement to multicast {0}")]
    SolicitedToMulticast(Ipv6Addr),
}

/// A whole Neighbor Solicitation or Advertisement frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    /// Ethernet source.
    pub eth_src: EthernetAddress,
    /// Ethernet destination.
    pub eth_dst: EthernetAddress,
    /// IPv6 source.
    pub src_addr: Ipv6Addr,
    /// IPv6 destination.
    pub dst_addr: Ipv6Addr,
    /// The message (hop limit is always 255).
    pub message: NdiscRepr,
}

impl FrameRepr {
    /// Reads an Ethernet frame holding an NS or NA and applies every
    /// validity check of RFC 4861 §7.1.1 (NS) and §7.1.2 (NA). Octets after
    /// the IPv6 payload (Ethernet padding) are ignored.
    pub fn parse(frame: &[u8]) -> Result<Self, Error> {
        let eth = ethernet::Frame::new_checked(frame)?;
        let ethertype = eth.ethertype();
        if ethertype != EtherType::Ipv6 {
            return Err(Error::NotIpv6(ethertype));
        }
        let ip_packet = ipv6::Packet::new_checked(eth.payload())?;
        let ip = ipv6::Repr::parse(&ip_packet)?;
        if ip.next_header != ipv6::NEXT_HEADER_ICMPV6 {
            return Err(Error::NotIcmpv6(ip.next_header));
        }
        if ip.hop_limit != HOP_LIMIT {
            return Err(Error::HopLimit(ip.hop_limit));
        }
        if ip.src_addr.is_multicast() {
            return Err(Error::SourceMulticast(ip.src_addr));
        }
        let icmp = icmpv6::Packet::new_unchecked(ip_packet.payload());
        let message = NdiscRepr::parse(ip.src_addr, ip.dst_addr, &icmp)?;
        match message {
            NdiscRepr::NeighborSolicit { lladdr, .. } if ip.src_addr.is_unspecified() => {
                if !is_solicited_node(ip.dst_addr) {
                    return Err(Error::DadDestination(ip.dst_addr));
                }
                if lladdr.is_some() {
                    return Err(Error::DadSourceLladdr);
                }
            }
            NdiscRepr::NeighborAdvert { flags, .. }
                if ip.dst_addr.is_multicast() && flags.contains(NeighborFlags::SOLICITED) =>
            {
                return Err(Error::SolicitedToMulticast(ip.dst_addr));
            }
            _ => {}
        }
        Ok(Self {
            eth_src: eth.src_addr(),
            eth_dst: eth.dst_addr(),
            src_addr: ip.src_addr,
            dst_addr: ip.dst_addr,
            message,
        })
    }

    /// Length of the frame: 14 + 40 + the message.
    pub const fn buffer_len(&self) -> usize {
        ethernet::HEADER_LEN + ipv6::HEADER_LEN + self.message.buffer_len()
    }

    /// Writes the frame, ICMPv6 checksum included, into the first
    /// [`buffer_len`](Self::buffer_len) octets of `buffer`, with hop limit
    /// 255.
    ///
    /// # Panics
    ///
    /// If `buffer` is shorter than `buffer_len` (a caller bug: the responder
    /// always passes a buffer of the exact size).
    pub fn emit(&self, buffer: &mut [u8]) {
        let buffer = &mut buffer[..self.buffer_len()];
        let mut eth = ethernet::Frame::new_unchecked(buffer);
        ethernet::Repr {
            src_addr: self.eth_src,
            dst_addr: self.eth_dst,
            ethertype: EtherType::Ipv6,
        }
        .emit(&mut eth);
        let mut ip = ipv6::Packet::new_unchecked(eth.payload_mut());
        let message_len = self.message.buffer_len();
        ipv6::Repr {
            src_addr: self.src_addr,
            dst_addr: self.dst_addr,
            next_header: ipv6::NEXT_HEADER_ICMPV6,
            // An NS/NA with one option is 32 octets.
            payload_len: u16::try_from(message_len).unwrap_or(u16::MAX),
            hop_limit: HOP_LIMIT,
        }
        .emit(&mut ip);
        let mut icmp = icmpv6::Packet::new_unchecked(ip.payload_mut());
        self.message.emit(self.src_addr, self.dst_addr, &mut icmp);
    }
}

impl fmt::Display for FrameRepr {
    /// `eth_src > eth_dst, src_addr > dst_addr: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} > {}, {} > {}: {}",
            self.eth_src, self.eth_dst, self.src_addr, self.dst_addr, self.message
        )
    }
}

/// The hop limit every Neighbor Discovery message carries (RFC 4861 §7.1).
pub const HOP_LIMIT: u8 = 255;
/// ff02::1, the link-local all-nodes multicast address.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1):
/// ff02::1:ff00:0/104 with the low 24 bits of `addr`.
pub const fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | o[13] as u16,
        ((o[14] as u16) << 8) | o[15] as u16,
    )
}

/// Whether `addr` is in ff02::1:ff00:0/104.
pub fn is_solicited_node(addr: Ipv6Addr) -> bool {
    addr.octets()[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]
}

/// The Ethernet address an IPv6 multicast address maps to (RFC 2464 §7):
/// 33:33 and the last four octets.
pub const fn multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// The Ethernet address of the solicited-node group of `addr`: the one the
/// driver must join to hear solicitations for `addr`.
pub const fn solicited_node_mac(addr: Ipv6Addr) -> EthernetAddress {
    multicast_mac(solicited_node(addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const VIP: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x0a);
    const SN_VIP: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 0x0a);

    /// A multicast NS for 2001:db8::a from 2001:db8::1.
    static NS_FRAME: [u8; 86] = [
        // Ethernet: 33:33:ff:00:00:0a < 02:00:00:00:00:01, IPv6
        0x33, 0x33, 0xff, 0x00, 0x00, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,
        // IPv6: version 6, payload length 32, next header 58, hop limit 255
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, //
        // source 2001:db8::1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        // destination ff02::1:ff00:a
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x0a, //
        // ICMPv6: type 135, code 0, checksum 0x1c17, reserved
        0x87, 0x00, 0x1c, 0x17, 0x00, 0x00, 0x00, 0x00, //
        // target 2001:db8::a
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, //
        // option: source link-layer address 02:00:00:00:00:01
        0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    fn ns_repr() -> FrameRepr {
        FrameRepr {
            eth_src: PEER_MAC,
            eth_dst: multicast_mac(SN_VIP),
            src_addr: PEER,
            dst_addr: SN_VIP,
            message: NdiscRepr::NeighborSolicit {
                target_addr: VIP,
                lladdr: Some(PEER_MAC),
            },
        }
    }

    #[test]
    fn parse() {
        assert_eq!(FrameRepr::parse(&NS_FRAME).unwrap(), ns_repr());
        // Ethernet padding after the IPv6 payload is ignored.
        let mut padded = NS_FRAME.to_vec();
        padded.extend_from_slice(&[0; 4]);
        assert_eq!(FrameRepr::parse(&padded).unwrap(), ns_repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5; 88];
        let repr = ns_repr();
        assert_eq!(repr.buffer_len(), 86);
        repr.emit(&mut bytes);
        assert_eq!(bytes[..86], NS_FRAME);
        assert_eq!(bytes[86..], [0xa5, 0xa5]);
    }

    /// NS_FRAME changed by `f` (on the parsed repr), re-emitted with a good
    /// checksum.
    fn frame(f: impl FnOnce(&mut FrameRepr)) -> Vec<u8> {
        let mut repr = ns_repr();
        f(&mut repr);
        let mut out = vec![0; repr.buffer_len()];
        repr.emit(&mut out);
        out
    }

    /// NS_FRAME with raw octets changed and the checksum redone.
    fn raw(f: impl FnOnce(&mut [u8])) -> Vec<u8> {
        let mut v = NS_FRAME.to_vec();
        f(&mut v);
        let ip = ipv6::Packet::new_unchecked(&v[14..]);
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        icmpv6::Packet::new_unchecked(&mut v[54..]).fill_checksum(src, dst);
        v
    }

    #[test]
    fn rfc4861_7_1_checks() {
        let p = |b: &[u8]| FrameRepr::parse(b).unwrap_err();
        assert_eq!(p(&raw(|b| b[21] = 64)), Error::HopLimit(64));
        assert_eq!(p(&raw(|b| b[20] = 0)), Error::NotIcmpv6(0));
        assert_eq!(
            p(&raw(|b| b[13] = 0x00)),
            Error::NotIpv6(EtherType::Unknown(0x8600))
        );
        assert_eq!(
            p(&raw(|b| b[14] = 0x40)),
            Error::Ipv6(ipv6::Error::Version(4))
        );
        // DAD: source :: must go to a solicited-node address, without SLLA.
        let dad = |dst: Ipv6Addr, lladdr| {
            frame(|f| {
                f.src_addr = Ipv6Addr::UNSPECIFIED;
                f.dst_addr = dst;
                f.message = NdiscRepr::NeighborSolicit {
                    target_addr: VIP,
                    lladdr,
                };
            })
        };
        assert!(FrameRepr::parse(&dad(SN_VIP, None)).is_ok());
        assert_eq!(p(&dad(VIP, None)), Error::DadDestination(VIP));
        assert_eq!(p(&dad(SN_VIP, Some(PEER_MAC))), Error::DadSourceLladdr);
        // NA to multicast must not claim to be solicited.
        let na = |flags| {
            frame(|f| {
                f.dst_addr = ALL_NODES;
                f.message = NdiscRepr::NeighborAdvert {
                    flags,
                    target_addr: VIP,
                    lladdr: None,
                };
            })
        };
        assert!(FrameRepr::parse(&na(NeighborFlags::OVERRIDE)).is_ok());
        assert_eq!(
            p(&na(NeighborFlags::SOLICITED)),
            Error::SolicitedToMulticast(ALL_NODES)
        );
        let mcast_src = frame(|f| f.src_addr = ALL_NODES);
        assert_eq!(p(&mcast_src), Error::SourceMulticast(ALL_NODES));
        // Checksum over the pseudo-header: a changed destination breaks it.
        let mut v = NS_FRAME;
        v[53] = 0x0b;
        assert_eq!(p(&v), Error::Ndisc(ndisc::Error::Checksum(0x1c17)));
        // IPv6 payload length beyond the frame.
        assert!(matches!(
            p(&NS_FRAME[..85]),
            Error::Ipv6(ipv6::Error::Truncated { .. })
        ));
    }

    #[test]
    fn solicited_node_addresses() {
        let addr: Ipv6Addr = "2001:db8::1:2345:6789".parse().unwrap();
        assert_eq!(
            solicited_node(addr),
            "ff02::1:ff45:6789".parse::<Ipv6Addr>().unwrap()
        );
        assert!(is_solicited_node(solicited_node(addr)));
        assert!(!is_solicited_node(ALL_NODES));
        assert_eq!(
            solicited_node_mac(addr),
            EthernetAddress([0x33, 0x33, 0xff, 0x45, 0x67, 0x89])
        );
        assert_eq!(multicast_mac(ALL_NODES).to_string(), "33:33:00:00:00:01");
    }

    #[test]
    fn display() {
        assert_eq!(
            ns_repr().to_string(),
            "02:00:00:00:00:01 > 33:33:ff:00:00:0a, 2001:db8::1 > ff02::1:ff00:a: \
             neighbor solicitation, who has 2001:db8::a (source link-address 02:00:00:00:00:01)"
        );
    }
}
