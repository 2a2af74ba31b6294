//! The pure Neighbor Discovery responder: frames in, Neighbor
//! Advertisements out.
//!
//! No I/O, no clock: the driver passes `now`, hands received frames to
//! [`Responder::handle_frame`] (which returns the advertisement to send, if
//! any), and drains [`Responder::poll_output`] after every call for
//! unsolicited advertisements and the timers of their bursts. The shape and
//! the burst schedule are the shared `l2` crate's (see [`l2::announce`]),
//! as for ARP.
//!
//! # What is answered
//!
//! A valid Neighbor Solicitation (RFC 4861 §7.1.1) whose target is announced
//! on the interface it arrived on: sent to the solicited-node multicast
//! address or unicast to the target (the kernel's NUD probes, which MetalLB
//! never answers, its bug #2920), with or without a Source Link-layer
//! Address option, Ethernet-addressed to a multicast group or to the
//! interface's MAC.
//!
//! The advertisement follows RFC 4861 §7.2.4: if the solicitation came from
//! the unspecified address (DAD by another node, which learns the address is
//! taken), it goes to ff02::1 with S=0; otherwise to the solicitation's
//! source with S=1, Ethernet-addressed to the Source Link-layer Address if
//! present, else to the frame's Ethernet source (so no Neighbor Discovery
//! of our own is needed to answer). Always O=1 and R=0, with a Target
//! Link-layer Address option, from the target address itself, hop limit
//! 255. MetalLB sends O=0, so a takeover there waits for neighbours' cache
//! entries to expire; O=1 replaces them at once.
//!
//! Everything else is dropped and counted in [`Stats`] by [`DropReason`].

use std::fmt;
use std::net::Ipv6Addr;

use l2::announce::{self, Announced, Round};
use l2::ethernet::{EtherType, EthernetAddress};
use l2::responder::{self, Reason};
use tracing::trace;

use crate::wire::{
    self, ALL_NODES, FrameRepr, NdiscRepr, NeighborFlags, icmpv6, multicast_mac, ndisc,
    solicited_node_mac,
};

/// The timer of an announcement burst (see [`Output::Arm`]).
pub type Timer = announce::Timer<Ipv6Addr>;

/// Length of every frame we send: an NA with a Target Link-layer Address
/// option (14 + 40 + 24 + 8).
pub const FRAME_LEN: usize = 86;

/// A frame to send on an interface: a whole NA frame.
pub type Transmit = responder::Transmit<FRAME_LEN>;

/// Why a received frame got no advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its headers claim, not IPv6 version 6, or a broken
    /// option.
    Malformed,
    /// Not Neighbor Discovery: not IPv6, next header not ICMPv6 (extension
    /// headers are not followed), or another ICMPv6 message.
    NotNdp,
    /// Wrong ICMPv6 checksum.
    BadChecksum,
    /// Fails a validity check of RFC 4861 §7.1.1/§7.1.2: hop limit, code,
    /// multicast target or source, DAD rules, solicited NA to multicast.
    Invalid,
    /// Sent from one of our own MAC addresses (our own advertisements).
    OwnMac,
    /// A valid advertisement, not a solicitation.
    NotSolicit,
    /// Unicast to a MAC address other than the interface's.
    OtherHost,
    /// The address to answer (SLLA or Ethernet source) is not unicast.
    BadSender,
    /// Target not announced on this interface (or the interface is unknown).
    NotOurs,
}

impl DropReason {
    /// A stable snake_case name, for metric labels and logs.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::NotNdp => "not_ndp",
            Self::BadChecksum => "bad_checksum",
            Self::Invalid => "invalid",
            Self::OwnMac => "own_mac",
            Self::NotSolicit => "not_solicit",
            Self::OtherHost => "other_host",
            Self::BadSender => "bad_sender",
            Self::NotOurs => "not_ours",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&wire::Error> for DropReason {
    fn from(err: &wire::Error) -> Self {
        use wire::Error as E;
        match err {
            E::Ethernet(_) | E::Ipv6(_) => Self::Malformed,
            E::NotIpv6(_) | E::NotIcmpv6(_) => Self::NotNdp,
            E::HopLimit(_)
            | E::SourceMulticast(_)
            | E::DadDestination(_)
            | E::DadSourceLladdr
            | E::SolicitedToMulticast(_) => Self::Invalid,
            E::Ndisc(err) => match err {
                ndisc::Error::Icmpv6(icmpv6::Error::Truncated { .. })
                | ndisc::Error::Truncated { .. }
                | ndisc::Error::Option(_) => Self::Malformed,
                ndisc::Error::NotNdisc(_) => Self::NotNdp,
                ndisc::Error::Checksum(_) => Self::BadChecksum,
                ndisc::Error::Code(_) | ndisc::Error::TargetMulticast(_) => Self::Invalid,
            },
        }
    }
}

impl Reason for DropReason {
    type Counters = [u64; Self::ALL.len()];
    const ALL: &'static [Self] = &[
        Self::Malformed,
        Self::NotNdp,
        Self::BadChecksum,
        Self::Invalid,
        Self::OwnMac,
        Self::NotSolicit,
        Self::OtherHost,
        Self::BadSender,
        Self::NotOurs,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters for metrics: solicitations, advertisements, unsolicited
/// advertisements and one drop counter per [`DropReason`].
pub type Stats = responder::Stats<DropReason>;

/// Something the driver must do, from [`Responder::poll_output`].
pub type Output = responder::Output<Transmit, Timer>;

/// The NDP responder of one node: the shared [`l2::Responder`] with the
/// NDP (IPv6) protocol.
pub type Responder = responder::Responder<Ndp>;

/// The NDP (IPv6) protocol of [`Responder`].
#[derive(Debug, Clone, Copy)]
pub struct Ndp;

impl responder::Protocol for Ndp {
    type Addr = Ipv6Addr;
    type Transmit = Transmit;
    type Drop = DropReason;
    const ETHERTYPE: EtherType = EtherType::Ipv6;

    fn answer(
        announced: &Announced<Ipv6Addr>,
        ifindex: u32,
        frame: &[u8],
    ) -> Result<(Ipv6Addr, Transmit), DropReason> {
        let request = FrameRepr::parse(frame).map_err(|err| {
            trace!(ifindex, %err, "ndp frame dropped");
            DropReason::from(&err)
        })?;
        let drop = |reason: DropReason| {
            trace!(ifindex, %reason, frame = %request, "ndp frame dropped");
            reason
        };
        let (target_addr, source_lladdr) = match request.message {
            NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr,
            } => (target_addr, lladdr),
            NdiscRepr::NeighborAdvert { lladdr, .. } => {
                if announced.is_own_mac(request.eth_src)
                    || lladdr.is_some_and(|mac| announced.is_own_mac(mac))
                {
                    return Err(drop(DropReason::OwnMac));
                }
                return Err(drop(DropReason::NotSolicit));
            }
        };
        if announced.is_own_mac(request.eth_src)
            || source_lladdr.is_some_and(|mac| announced.is_own_mac(mac))
        {
            return Err(drop(DropReason::OwnMac));
        }
        let Some(mac) = announced.interface_mac(ifindex) else {
            return Err(drop(DropReason::NotOurs));
        };
        if !request.eth_dst.is_multicast() && request.eth_dst != mac {
            return Err(drop(DropReason::OtherHost));
        }
        if !announced.contains(target_addr, ifindex) {
            return Err(drop(DropReason::NotOurs));
        }
        // RFC 4861 §7.2.4.
        let (dst_addr, eth_dst, flags) = if request.src_addr.is_unspecified() {
            (ALL_NODES, multicast_mac(ALL_NODES), NeighborFlags::OVERRIDE)
        } else {
            let eth_dst = source_lladdr.unwrap_or(request.eth_src);
            if !eth_dst.is_unicast() {
                return Err(drop(DropReason::BadSender));
            }
            (
                request.src_addr,
                eth_dst,
                NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
            )
        };
        let reply = FrameRepr {
            eth_src: mac,
            eth_dst,
            src_addr: target_addr,
            dst_addr,
            message: NdiscRepr::NeighborAdvert {
                flags,
                target_addr,
                lladdr: Some(mac),
            },
        };
        trace!(ifindex, %reply, "neighbor advertisement");
        Ok((target_addr, emit(ifindex, &reply)))
    }

    /// Queues the unsolicited advertisement of one round (RFC 4861 §7.2.6:
    /// to all-nodes, S=0; O=1 so neighbours replace the old owner's MAC).
    fn announcements(round: &Round<Ipv6Addr>, send: &mut dyn FnMut(Transmit)) {
        let frame = FrameRepr {
            eth_src: round.mac,
            eth_dst: multicast_mac(ALL_NODES),
            src_addr: round.addr,
            dst_addr: ALL_NODES,
            message: NdiscRepr::NeighborAdvert {
                flags: NeighborFlags::OVERRIDE,
                target_addr: round.addr,
                lladdr: Some(round.mac),
            },
        };
        trace!(ifindex = round.ifindex, %frame, "unsolicited neighbor advertisement");
        send(emit(round.ifindex, &frame));
    }

    /// Solicitations for `addr` go to its solicited-node group (RFC 4861
    /// §7.2.1); the driver joins it on each interface `addr` is announced
    /// on.
    fn group(addr: Ipv6Addr) -> Option<EthernetAddress> {
        Some(solicited_node_mac(addr))
    }
}

fn emit(ifindex: u32, repr: &FrameRepr) -> Transmit {
    debug_assert_eq!(repr.buffer_len(), FRAME_LEN);
    let mut frame = [0; FRAME_LEN];
    repr.emit(&mut frame);
    Transmit { ifindex, frame }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::wire::{ipv6, solicited_node};
    use l2::Config;

    const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
    const OTHER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
    const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const VIP: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x0a);
    const IF: u32 = 3;

    /// A multicast NS for VIP from PEER.
    static NS: [u8; 86] = [
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

    /// Our solicited NA in answer to NS.
    static NA: [u8; 86] = [
        // Ethernet: 02:00:00:00:00:01 < 02:00:00:00:00:0a, IPv6
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdd,
        // IPv6: version 6, payload length 32, next header 58, hop limit 255
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, //
        // source 2001:db8::a (the target itself)
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, //
        // destination 2001:db8::1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        // ICMPv6: type 136, code 0, checksum 0x8a59, flags S O
        0x88, 0x00, 0x8a, 0x59, 0x60, 0x00, 0x00, 0x00, //
        // target 2001:db8::a
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, //
        // option: target link-layer address 02:00:00:00:00:0a
        0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    fn responder() -> (Instant, Responder) {
        let t0 = Instant::now();
        let mut r = Responder::new(Config::default());
        r.set_interface(t0, IF, OUR_MAC).unwrap();
        (t0, r)
    }

    fn announced() -> (Instant, Responder) {
        let (t0, mut r) = responder();
        r.announce(t0, VIP, IF).unwrap();
        while r.poll_output().is_some() {}
        (t0, r)
    }

    fn solicit(f: impl FnOnce(&mut FrameRepr)) -> Vec<u8> {
        let mut repr = FrameRepr::parse(&NS).unwrap();
        f(&mut repr);
        let mut out = vec![0; repr.buffer_len()];
        repr.emit(&mut out);
        out
    }

    fn drain(r: &mut Responder) -> Vec<Output> {
        std::iter::from_fn(|| r.poll_output()).collect()
    }

    fn hop_limit(frame: &[u8]) -> u8 {
        ipv6::Packet::new_checked(&frame[14..]).unwrap().hop_limit()
    }

    #[test]
    fn answers_multicast_solicitation() {
        let (t0, mut r) = announced();
        let reply = r.handle_frame(t0, IF, &NS).unwrap();
        assert_eq!(reply.ifindex, IF);
        assert_eq!(reply.frame, NA);
        let na = FrameRepr::parse(&reply.frame).unwrap();
        assert_eq!(na.eth_src, OUR_MAC);
        assert_eq!(na.eth_dst, PEER_MAC);
        assert_eq!(na.src_addr, VIP);
        assert_eq!(na.dst_addr, PEER);
        assert_eq!(hop_limit(&reply.frame), 255);
        let NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        } = na.message
        else {
            panic!("not an NA: {na}")
        };
        assert!(flags.contains(NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE));
        assert!(!flags.contains(NeighborFlags::ROUTER));
        assert_eq!(target_addr, VIP);
        assert_eq!(lladdr, Some(OUR_MAC));
        assert_eq!(r.stats().requests_received, 1);
        assert_eq!(r.stats().responses_sent, 1);
        assert!(r.poll_output().is_none());
    }

    #[test]
    fn answers_unicast_nud_probe() {
        // The kernel's reachability probe: unicast to the target, to our MAC.
        let (t0, mut r) = announced();
        let probe = solicit(|f| {
            f.eth_dst = OUR_MAC;
            f.dst_addr = VIP;
        });
        let na = FrameRepr::parse(&r.handle_frame(t0, IF, &probe).unwrap().frame).unwrap();
        assert_eq!((na.dst_addr, na.eth_dst), (PEER, PEER_MAC));
    }

    #[test]
    fn without_slla_answers_ethernet_source() {
        let (t0, mut r) = announced();
        let bridge = EthernetAddress([0x02, 0, 0, 0, 0, 0x99]);
        let ns = solicit(|f| {
            f.eth_src = bridge;
            f.message = NdiscRepr::NeighborSolicit {
                target_addr: VIP,
                lladdr: None,
            };
        });
        let na = FrameRepr::parse(&r.handle_frame(t0, IF, &ns).unwrap().frame).unwrap();
        assert_eq!(na.eth_dst, bridge);
        // With an SLLA, the SLLA wins over the Ethernet source.
        let ns = solicit(|f| f.eth_src = bridge);
        let na = FrameRepr::parse(&r.handle_frame(t0, IF, &ns).unwrap().frame).unwrap();
        assert_eq!(na.eth_dst, PEER_MAC);
    }

    #[test]
    fn answers_dad_to_all_nodes() {
        let (t0, mut r) = announced();
        let dad = solicit(|f| {
            f.src_addr = Ipv6Addr::UNSPECIFIED;
            f.message = NdiscRepr::NeighborSolicit {
                target_addr: VIP,
                lladdr: None,
            };
        });
        let reply = r.handle_frame(t0, IF, &dad).unwrap();
        let na = FrameRepr::parse(&reply.frame).unwrap();
        assert_eq!(na.dst_addr, ALL_NODES);
        assert_eq!(na.eth_dst, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));
        assert_eq!(na.src_addr, VIP);
        assert_eq!(
            na.message,
            NdiscRepr::NeighborAdvert {
                flags: NeighborFlags::OVERRIDE,
                target_addr: VIP,
                lladdr: Some(OUR_MAC)
            }
        );
    }

    #[track_caller]
    fn assert_drops(r: &mut Responder, t: Instant, ifindex: u32, frame: &[u8], why: DropReason) {
        let before = r.stats().dropped(why);
        assert_eq!(r.handle_frame(t, ifindex, frame), None);
        assert_eq!(r.stats().dropped(why), before + 1, "{why}");
    }

    #[test]
    fn ignores() {
        let (t0, mut r) = announced();
        r.set_interface(t0, 4, OTHER_MAC).unwrap();
        let t = t0;
        assert_drops(&mut r, t, IF, &NS[..60], DropReason::Malformed);
        assert_drops(&mut r, t, IF, &NS[..10], DropReason::Malformed);
        let mut not_ipv6 = NS;
        not_ipv6[12] = 0x08;
        not_ipv6[13] = 0x00;
        assert_drops(&mut r, t, IF, &not_ipv6, DropReason::NotNdp);
        let mut ext = NS;
        ext[20] = 0; // hop-by-hop options header
        assert_drops(&mut r, t, IF, &ext, DropReason::NotNdp);
        let mut bad = NS;
        bad[85] ^= 1;
        assert_drops(&mut r, t, IF, &bad, DropReason::BadChecksum);
        let mut hops = NS;
        hops[21] = 254;
        assert_drops(&mut r, t, IF, &hops, DropReason::Invalid);
        let dad_slla = solicit(|f| f.src_addr = Ipv6Addr::UNSPECIFIED);
        assert_drops(&mut r, t, IF, &dad_slla, DropReason::Invalid);
        let na = solicit(|f| {
            f.message = NdiscRepr::NeighborAdvert {
                flags: NeighborFlags::SOLICITED,
                target_addr: VIP,
                lladdr: None,
            };
            f.dst_addr = PEER;
        });
        assert_drops(&mut r, t, IF, &na, DropReason::NotSolicit);
        for mac in [OUR_MAC, OTHER_MAC] {
            let own = solicit(|f| f.eth_src = mac);
            assert_drops(&mut r, t, IF, &own, DropReason::OwnMac);
            let own = solicit(|f| {
                f.message = NdiscRepr::NeighborSolicit {
                    target_addr: VIP,
                    lladdr: Some(mac),
                }
            });
            assert_drops(&mut r, t, IF, &own, DropReason::OwnMac);
        }
        // Our own unsolicited NA coming back.
        let (_, mut other) = responder();
        other.announce(t, VIP, IF).unwrap();
        let Some(Output::Transmit(ours)) = drain(&mut other).into_iter().nth(1) else {
            panic!("expected an NA after the join")
        };
        assert_drops(&mut r, t, IF, &ours.frame, DropReason::OwnMac);
        let other_host = solicit(|f| f.eth_dst = PEER_MAC);
        assert_drops(&mut r, t, IF, &other_host, DropReason::OtherHost);
        let bad_sender = solicit(|f| {
            f.message = NdiscRepr::NeighborSolicit {
                target_addr: VIP,
                lladdr: Some(EthernetAddress::BROADCAST),
            }
        });
        assert_drops(&mut r, t, IF, &bad_sender, DropReason::BadSender);
        let other_target = solicit(|f| {
            let target = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x0b);
            f.dst_addr = solicited_node(target);
            f.message = NdiscRepr::NeighborSolicit {
                target_addr: target,
                lladdr: Some(PEER_MAC),
            };
        });
        assert_drops(&mut r, t, IF, &other_target, DropReason::NotOurs);
        assert_drops(&mut r, t, 4, &NS, DropReason::NotOurs);
        assert_drops(&mut r, t, 99, &NS, DropReason::NotOurs);
        let s = r.stats();
        assert_eq!((s.requests_received, s.responses_sent), (0, 0));
        assert_eq!(s.dropped_total(), 18);
    }

    #[test]
    fn every_reason_has_its_counter() {
        for (i, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason}");
        }
    }

    #[test]
    fn burst_schedule() {
        let (t0, mut r) = responder();
        r.announce(t0, VIP, IF).unwrap();
        // First the solicited-node group, so solicitations can be heard.
        assert_eq!(
            r.poll_output(),
            Some(Output::Join {
                ifindex: IF,
                group: solicited_node_mac(VIP)
            })
        );
        let mut sent = Vec::new();
        let mut now = t0;
        loop {
            let outputs = drain(&mut r);
            let Output::Transmit(t) = outputs[0] else {
                panic!("expected an NA first: {outputs:?}")
            };
            assert_eq!(t.ifindex, IF);
            assert_eq!(hop_limit(&t.frame), 255);
            let na = FrameRepr::parse(&t.frame).unwrap();
            assert_eq!(na.eth_src, OUR_MAC);
            assert_eq!(na.eth_dst, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));
            assert_eq!((na.src_addr, na.dst_addr), (VIP, ALL_NODES));
            assert_eq!(
                na.message,
                NdiscRepr::NeighborAdvert {
                    flags: NeighborFlags::OVERRIDE,
                    target_addr: VIP,
                    lladdr: Some(OUR_MAC)
                }
            );
            sent.push((now - t0).as_millis());
            match outputs[1..] {
                [] => break,
                [Output::Arm { at, timer }] => {
                    now = at;
                    r.handle_timer(now, timer);
                }
                _ => panic!("unexpected outputs {outputs:?}"),
            }
        }
        assert_eq!(sent, [0, 1100, 2200, 3300, 4400]);
        assert_eq!(r.stats().announcements_sent, 5);
    }

    #[test]
    fn reannounce_does_not_restart_burst() {
        let (t0, mut r) = responder();
        r.announce(t0, VIP, IF).unwrap();
        let first = drain(&mut r);
        let [
            Output::Join { .. },
            Output::Transmit(_),
            Output::Arm { at, timer },
        ] = first[..]
        else {
            panic!("unexpected outputs {first:?}")
        };
        r.announce(t0 + Duration::from_millis(500), VIP, IF)
            .unwrap();
        assert!(drain(&mut r).is_empty());
        r.handle_timer(at, timer);
        assert_eq!(drain(&mut r).len(), 2);
    }

    #[test]
    fn withdraw_stops_replies_and_announcements() {
        let (t0, mut r) = responder();
        r.announce(t0, VIP, IF).unwrap();
        let Some(Output::Arm { at, timer }) = drain(&mut r).pop() else {
            panic!("expected a timer")
        };
        assert!(r.withdraw(VIP, IF));
        assert!(!r.is_announced(VIP, IF));
        let group = solicited_node_mac(VIP);
        assert_eq!(drain(&mut r), [Output::Leave { ifindex: IF, group }]);
        assert_eq!(r.handle_frame(t0, IF, &NS), None);
        r.handle_timer(at, timer);
        assert!(drain(&mut r).is_empty());
        r.announce(at, VIP, IF).unwrap();
        assert_eq!(drain(&mut r).len(), 3);
        r.handle_timer(at, timer);
        assert!(drain(&mut r).is_empty());
    }

    #[test]
    fn mac_change_reannounces() {
        let (t0, mut r) = announced();
        r.set_interface(t0, IF, OTHER_MAC).unwrap();
        let outputs = drain(&mut r);
        let Output::Transmit(t) = outputs[0] else {
            panic!("expected an NA")
        };
        assert_eq!(FrameRepr::parse(&t.frame).unwrap().eth_src, OTHER_MAC);
        r.remove_interface(IF);
        assert_eq!(r.handle_frame(t0, IF, &NS), None);
    }
}
