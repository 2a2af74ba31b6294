//! The pure ARP responder: frames in, replies and gratuitous ARPs out.
//!
//! No I/O, no clock: the driver passes `now`, hands received frames to
//! [`Responder::handle_frame`] (which returns the reply to send, if any),
//! and drains [`Responder::poll_output`] after every call for gratuitous
//! ARPs and the timers of their bursts (see [`l2::announce`] for the
//! schedule).
//!
//! # What is answered
//!
//! An ARP request (RFC 826) whose target protocol address is announced on
//! the interface it arrived on, sent to the broadcast address or to the
//! interface's MAC (the kernel's unicast reachability probes; MetalLB
//! checks the same). The reply goes unicast to the sender hardware address
//! of the request, as Linux does, from the interface's MAC.
//!
//! RFC 5227 probes (sender protocol address 0.0.0.0) and gratuitous
//! requests for our address are answered too, as the Linux kernel does:
//! answering a probe is how a host defends its address, so another host
//! about to claim the VIP learns it is taken. The reply to a probe has
//! target protocol address 0.0.0.0, exactly like the kernel's.
//!
//! Everything else is dropped and counted in [`Stats`] by [`DropReason`].

use std::fmt;
use std::net::Ipv4Addr;

use l2::announce::{self, Announced, Round};
use l2::ethernet::{EtherType, EthernetAddress};
use l2::responder::{self, Reason};
use tracing::trace;

use crate::wire::{self, FRAME_LEN, FrameRepr, Operation, Repr};

/// The timer of an announcement burst (see [`Output::Arm`]).
pub type Timer = announce::Timer<Ipv4Addr>;

/// A frame to send on an interface: a whole ARP frame, no padding (the
/// NIC pads it to 60 octets).
pub type Transmit = responder::Transmit<FRAME_LEN>;

/// Why a received frame got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its headers claim.
    Malformed,
    /// Not an ARP frame (EtherType).
    NotArp,
    /// Hardware is not Ethernet with 6-octet addresses.
    WrongHardware,
    /// Protocol is not IPv4 with 4-octet addresses.
    WrongProtocol,
    /// Sent from one of our own MAC addresses (our own announcements).
    OwnMac,
    /// Not a request (replies, unknown operations).
    NotRequest,
    /// Unicast to a MAC address other than the interface's.
    OtherHost,
    /// Sender hardware address not unicast, or sender protocol address
    /// multicast or broadcast: nobody to answer.
    BadSender,
    /// Target address not announced on this interface (or the interface is
    /// unknown).
    NotOurs,
}

impl DropReason {
    /// A stable snake_case name, for metric labels and logs.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::NotArp => "not_arp",
            Self::WrongHardware => "wrong_hardware",
            Self::WrongProtocol => "wrong_protocol",
            Self::OwnMac => "own_mac",
            Self::NotRequest => "not_request",
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
        match err {
            wire::Error::Ethernet(_) | wire::Error::Truncated { .. } => Self::Malformed,
            wire::Error::NotArp(_) => Self::NotArp,
            wire::Error::UnsupportedHardware { .. } => Self::WrongHardware,
            wire::Error::UnsupportedProtocol { .. } => Self::WrongProtocol,
        }
    }
}

impl Reason for DropReason {
    type Counters = [u64; Self::ALL.len()];
    const ALL: &'static [Self] = &[
        Self::Malformed,
        Self::NotArp,
        Self::WrongHardware,
        Self::WrongProtocol,
        Self::OwnMac,
        Self::NotRequest,
        Self::OtherHost,
        Self::BadSender,
        Self::NotOurs,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters for metrics: requests, replies, gratuitous ARPs (two per
/// round) and one drop counter per [`DropReason`].
pub type Stats = responder::Stats<DropReason>;

/// Something the driver must do, from [`Responder::poll_output`].
pub type Output = responder::Output<Transmit, Timer>;

/// The ARP responder of one node: the shared [`l2::Responder`] with the
/// ARP (IPv4) protocol.
pub type Responder = responder::Responder<Arp>;

/// The ARP (IPv4) protocol of [`Responder`].
#[derive(Debug, Clone, Copy)]
pub struct Arp;

impl responder::Protocol for Arp {
    type Addr = Ipv4Addr;
    type Transmit = Transmit;
    type Drop = DropReason;
    const ETHERTYPE: EtherType = EtherType::Arp;

    fn answer(
        announced: &Announced<Ipv4Addr>,
        ifindex: u32,
        frame: &[u8],
    ) -> Result<(Ipv4Addr, Transmit), DropReason> {
        let request = FrameRepr::parse(frame).map_err(|err| {
            trace!(ifindex, %err, "arp frame dropped");
            DropReason::from(&err)
        })?;
        let drop = |reason: DropReason| {
            trace!(ifindex, %reason, frame = %request, "arp frame dropped");
            reason
        };
        let arp = &request.arp;
        if announced.is_own_mac(request.eth_src) || announced.is_own_mac(arp.source_hardware_addr) {
            return Err(drop(DropReason::OwnMac));
        }
        if arp.operation != Operation::Request {
            return Err(drop(DropReason::NotRequest));
        }
        let Some(mac) = announced.interface_mac(ifindex) else {
            return Err(drop(DropReason::NotOurs));
        };
        if !request.eth_dst.is_broadcast() && request.eth_dst != mac {
            return Err(drop(DropReason::OtherHost));
        }
        let sender_ip = arp.source_protocol_addr;
        if !arp.source_hardware_addr.is_unicast()
            || sender_ip.is_multicast()
            || sender_ip.is_broadcast()
        {
            return Err(drop(DropReason::BadSender));
        }
        if !announced.contains(arp.target_protocol_addr, ifindex) {
            return Err(drop(DropReason::NotOurs));
        }
        let reply = FrameRepr {
            eth_src: mac,
            // The sender hardware address, as Linux answers (arp_process).
            eth_dst: arp.source_hardware_addr,
            arp: Repr {
                operation: Operation::Reply,
                source_hardware_addr: mac,
                source_protocol_addr: arp.target_protocol_addr,
                target_hardware_addr: arp.source_hardware_addr,
                // 0.0.0.0 when answering an RFC 5227 probe, like Linux.
                target_protocol_addr: sender_ip,
            },
        };
        trace!(ifindex, %reply, "arp reply");
        Ok((arp.target_protocol_addr, emit(ifindex, &reply)))
    }

    /// Queues the gratuitous ARPs of one round.
    ///
    /// Both forms go out, broadcast, like MetalLB: a request (RFC 5227
    /// §2.3 ARP Announcement: sender and target protocol address ours,
    /// target hardware address zero) and a reply (target hardware address
    /// broadcast), because some hosts only update their cache from one.
    fn announcements(round: &Round<Ipv4Addr>, send: &mut dyn FnMut(Transmit)) {
        for (operation, target_hardware_addr) in [
            (Operation::Request, EthernetAddress::UNSPECIFIED),
            (Operation::Reply, EthernetAddress::BROADCAST),
        ] {
            let frame = FrameRepr {
                eth_src: round.mac,
                eth_dst: EthernetAddress::BROADCAST,
                arp: Repr {
                    operation,
                    source_hardware_addr: round.mac,
                    source_protocol_addr: round.addr,
                    target_hardware_addr,
                    target_protocol_addr: round.addr,
                },
            };
            trace!(ifindex = round.ifindex, %frame, "gratuitous arp");
            send(emit(round.ifindex, &frame));
        }
    }
}

fn emit(ifindex: u32, repr: &FrameRepr) -> Transmit {
    let mut frame = [0; FRAME_LEN];
    repr.emit(&mut frame);
    Transmit { ifindex, frame }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use l2::Config;

    const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);
    const OTHER_MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0b]);
    const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
    const PEER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
    const IF: u32 = 3;

    /// A broadcast request from PEER for VIP, as a kernel sends it (padded
    /// to 60 octets).
    static REQUEST: [u8; 60] = [
        // Ethernet: ff:ff:ff:ff:ff:ff < 02:00:00:00:00:01, ARP
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,
        // ARP: Ethernet, IPv4, 6, 4, request
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, //
        // sender 02:00:00:00:00:01 192.0.2.1
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x02, 0x01, //
        // target 00:00:00:00:00:00 192.0.2.10
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x02, 0x0a, //
        // padding
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    /// Our reply to REQUEST.
    static REPLY: [u8; FRAME_LEN] = [
        // Ethernet: 02:00:00:00:00:01 < 02:00:00:00:00:0a, ARP
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x06,
        // ARP: Ethernet, IPv4, 6, 4, reply
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, //
        // sender 02:00:00:00:00:0a 192.0.2.10
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xc0, 0x00, 0x02, 0x0a, //
        // target 02:00:00:00:00:01 192.0.2.1
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x02, 0x01,
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

    fn request(f: impl FnOnce(&mut FrameRepr)) -> [u8; FRAME_LEN] {
        let mut repr = FrameRepr::parse(&REQUEST).unwrap();
        f(&mut repr);
        let mut out = [0; FRAME_LEN];
        repr.emit(&mut out);
        out
    }

    fn drain(r: &mut Responder) -> Vec<Output> {
        std::iter::from_fn(|| r.poll_output()).collect()
    }

    #[test]
    fn answers_request() {
        let (t0, mut r) = announced();
        let reply = r.handle_frame(t0, IF, &REQUEST).unwrap();
        assert_eq!(reply.ifindex, IF);
        assert_eq!(reply.frame, REPLY);
        let parsed = FrameRepr::parse(&reply.frame).unwrap();
        assert_eq!(parsed.eth_src, OUR_MAC);
        assert_eq!(parsed.eth_dst, PEER_MAC);
        assert_eq!(parsed.arp.operation, Operation::Reply);
        assert_eq!(parsed.arp.source_hardware_addr, OUR_MAC);
        assert_eq!(parsed.arp.source_protocol_addr, VIP);
        assert_eq!(parsed.arp.target_hardware_addr, PEER_MAC);
        assert_eq!(parsed.arp.target_protocol_addr, PEER_IP);
        assert_eq!(r.stats().requests_received, 1);
        assert_eq!(r.stats().responses_sent, 1);
        assert_eq!(r.stats().dropped_total(), 0);
        // Answering queues nothing.
        assert!(r.poll_output().is_none());
    }

    #[test]
    fn answers_unicast_request_to_our_mac() {
        let (t0, mut r) = announced();
        let frame = request(|f| f.eth_dst = OUR_MAC);
        assert!(r.handle_frame(t0, IF, &frame).is_some());
    }

    #[test]
    fn answers_probe_with_zero_target() {
        let (t0, mut r) = announced();
        let frame = request(|f| f.arp.source_protocol_addr = Ipv4Addr::UNSPECIFIED);
        let reply = r.handle_frame(t0, IF, &frame).unwrap();
        let parsed = FrameRepr::parse(&reply.frame).unwrap();
        assert_eq!(parsed.eth_dst, PEER_MAC);
        assert_eq!(parsed.arp.target_protocol_addr, Ipv4Addr::UNSPECIFIED);
        assert_eq!(parsed.arp.source_protocol_addr, VIP);
    }

    #[test]
    fn answers_gratuitous_request_for_our_address() {
        // Another host claiming the VIP gets told it is ours.
        let (t0, mut r) = announced();
        let frame = request(|f| f.arp.source_protocol_addr = VIP);
        let reply = r.handle_frame(t0, IF, &frame).unwrap();
        let parsed = FrameRepr::parse(&reply.frame).unwrap();
        assert_eq!(parsed.arp.target_protocol_addr, VIP);
        assert_eq!(parsed.eth_dst, PEER_MAC);
    }

    #[test]
    fn replies_to_sender_hardware_address() {
        let (t0, mut r) = announced();
        let bridge = EthernetAddress([0x02, 0, 0, 0, 0, 0x99]);
        let frame = request(|f| f.eth_src = bridge);
        let parsed = FrameRepr::parse(&r.handle_frame(t0, IF, &frame).unwrap().frame).unwrap();
        assert_eq!(parsed.eth_dst, PEER_MAC);
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
        assert_drops(&mut r, t, IF, &REQUEST[..20], DropReason::Malformed);
        assert_drops(&mut r, t, IF, &REQUEST[..5], DropReason::Malformed);
        let mut not_arp = REQUEST;
        not_arp[13] = 0x00;
        assert_drops(&mut r, t, IF, &not_arp, DropReason::NotArp);
        let mut hw = REQUEST;
        hw[15] = 6;
        assert_drops(&mut r, t, IF, &hw, DropReason::WrongHardware);
        let mut proto = REQUEST;
        proto[16] = 0x86;
        proto[17] = 0xdd;
        assert_drops(&mut r, t, IF, &proto, DropReason::WrongProtocol);
        let reply = request(|f| f.arp.operation = Operation::Reply);
        assert_drops(&mut r, t, IF, &reply, DropReason::NotRequest);
        let unknown = request(|f| f.arp.operation = Operation::Unknown(8));
        assert_drops(&mut r, t, IF, &unknown, DropReason::NotRequest);
        // From our own MACs, on either interface, in either field.
        for mac in [OUR_MAC, OTHER_MAC] {
            let own = request(|f| f.eth_src = mac);
            assert_drops(&mut r, t, IF, &own, DropReason::OwnMac);
            let own = request(|f| f.arp.source_hardware_addr = mac);
            assert_drops(&mut r, t, IF, &own, DropReason::OwnMac);
        }
        let other = request(|f| f.eth_dst = PEER_MAC);
        assert_drops(&mut r, t, IF, &other, DropReason::OtherHost);
        let bad = request(|f| f.arp.source_hardware_addr = EthernetAddress::BROADCAST);
        assert_drops(&mut r, t, IF, &bad, DropReason::BadSender);
        let bad = request(|f| f.arp.source_protocol_addr = Ipv4Addr::new(224, 0, 0, 1));
        assert_drops(&mut r, t, IF, &bad, DropReason::BadSender);
        let bad = request(|f| f.arp.source_protocol_addr = Ipv4Addr::BROADCAST);
        assert_drops(&mut r, t, IF, &bad, DropReason::BadSender);
        let other_ip = request(|f| f.arp.target_protocol_addr = Ipv4Addr::new(192, 0, 2, 11));
        assert_drops(&mut r, t, IF, &other_ip, DropReason::NotOurs);
        // Announced on IF, asked on interface 4 or an unknown interface.
        assert_drops(&mut r, t, 4, &REQUEST, DropReason::NotOurs);
        assert_drops(&mut r, t, 99, &REQUEST, DropReason::NotOurs);
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
        let mut sent = Vec::new();
        let mut now = t0;
        loop {
            let outputs = drain(&mut r);
            let frames: Vec<FrameRepr> = outputs
                .iter()
                .filter_map(|o| match o {
                    Output::Transmit(t) => {
                        assert_eq!(t.ifindex, IF);
                        Some(FrameRepr::parse(&t.frame).unwrap())
                    }
                    _ => None,
                })
                .collect();
            // Each round: request form, then reply form, both broadcast.
            assert_eq!(frames.len(), 2);
            for (frame, op, tha) in [
                (frames[0], Operation::Request, EthernetAddress::UNSPECIFIED),
                (frames[1], Operation::Reply, EthernetAddress::BROADCAST),
            ] {
                assert_eq!(frame.eth_src, OUR_MAC);
                assert_eq!(frame.eth_dst, EthernetAddress::BROADCAST);
                assert_eq!(frame.arp.operation, op);
                assert_eq!(frame.arp.source_hardware_addr, OUR_MAC);
                assert_eq!(frame.arp.source_protocol_addr, VIP);
                assert_eq!(frame.arp.target_hardware_addr, tha);
                assert_eq!(frame.arp.target_protocol_addr, VIP);
            }
            sent.push((now - t0).as_millis());
            let arm = outputs.iter().find_map(|o| match o {
                Output::Arm { at, timer } => Some((*at, *timer)),
                _ => None,
            });
            let Some((at, timer)) = arm else { break };
            assert_eq!((timer.addr(), timer.ifindex()), (VIP, IF));
            now = at;
            r.handle_timer(now, timer);
        }
        assert_eq!(sent, [0, 1100, 2200, 3300, 4400]);
        assert_eq!(r.stats().announcements_sent, 10);
    }

    #[test]
    fn reannounce_does_not_restart_burst() {
        let (t0, mut r) = responder();
        r.announce(t0, VIP, IF).unwrap();
        let first = drain(&mut r);
        assert_eq!(first.len(), 3);
        let Output::Arm { at, timer } = first[2] else {
            panic!("expected a timer, got {first:?}")
        };
        // A resync half a second later: nothing new.
        r.announce(t0 + Duration::from_millis(500), VIP, IF)
            .unwrap();
        assert!(drain(&mut r).is_empty());
        // The original burst goes on.
        r.handle_timer(at, timer);
        assert_eq!(drain(&mut r).len(), 3);
        assert_eq!(r.stats().announcements_sent, 4);
    }

    #[test]
    fn withdraw_stops_replies_and_announcements() {
        let (t0, mut r) = responder();
        r.announce(t0, VIP, IF).unwrap();
        let Some(Output::Arm { at, timer }) = drain(&mut r).pop() else {
            panic!("expected a timer")
        };
        assert!(r.withdraw(VIP, IF));
        assert!(!r.withdraw(VIP, IF));
        assert!(!r.is_announced(VIP, IF));
        assert_eq!(r.handle_frame(t0, IF, &REQUEST), None);
        assert_eq!(r.stats().dropped(DropReason::NotOurs), 1);
        r.handle_timer(at, timer);
        assert!(drain(&mut r).is_empty());
        // Announcing again starts a fresh burst; the old timer stays stale.
        r.announce(at, VIP, IF).unwrap();
        assert_eq!(drain(&mut r).len(), 3);
        r.handle_timer(at, timer);
        assert!(drain(&mut r).is_empty());
    }

    #[test]
    fn remove_interface_withdraws() {
        let (t0, mut r) = announced();
        r.remove_interface(IF);
        assert!(!r.is_announced(VIP, IF));
        assert_eq!(r.handle_frame(t0, IF, &REQUEST), None);
        assert_eq!(
            r.announce(t0, VIP, IF),
            Err(announce::Error::UnknownInterface(IF))
        );
    }

    #[test]
    fn mac_change_reannounces_with_new_mac() {
        let (t0, mut r) = announced();
        r.set_interface(t0, IF, OTHER_MAC).unwrap();
        let outputs = drain(&mut r);
        assert_eq!(outputs.len(), 3);
        let Output::Transmit(t) = outputs[0] else {
            panic!("expected a frame")
        };
        assert_eq!(FrameRepr::parse(&t.frame).unwrap().eth_src, OTHER_MAC);
        let reply = r.handle_frame(t0, IF, &REQUEST).unwrap();
        assert_eq!(FrameRepr::parse(&reply.frame).unwrap().eth_src, OTHER_MAC);
        // Setting the same MAC again is quiet.
        r.set_interface(t0, IF, OTHER_MAC).unwrap();
        assert!(drain(&mut r).is_empty());
    }

    #[test]
    fn same_ip_on_two_interfaces() {
        let (t0, mut r) = responder();
        r.set_interface(t0, 4, OTHER_MAC).unwrap();
        r.announce(t0, VIP, IF).unwrap();
        r.announce(t0, VIP, 4).unwrap();
        let outputs = drain(&mut r);
        assert_eq!(outputs.len(), 6);
        let reply = r.handle_frame(t0, 4, &REQUEST).unwrap();
        assert_eq!(reply.ifindex, 4);
        assert_eq!(FrameRepr::parse(&reply.frame).unwrap().eth_src, OTHER_MAC);
        // Withdrawing on one leaves the other.
        r.withdraw(VIP, 4);
        assert!(r.handle_frame(t0, 4, &REQUEST).is_none());
        assert!(r.handle_frame(t0, IF, &REQUEST).is_some());
    }
    /// The per-sender limit, frame by frame: (sender MAC, for our address,
    /// requests at t0, answers expected), applied in order to one responder
    /// with a limit of 10 per second, bursts of 5.
    #[test]
    fn rate_limit_per_sender() {
        let t0 = Instant::now();
        let mut r = Responder::new(Config {
            limit: Some(l2::Limit {
                rate: 10,
                burst: 5,
                seed: 1,
            }),
            ..Config::default()
        });
        r.set_interface(t0, IF, OUR_MAC).unwrap();
        r.announce(t0, VIP, IF).unwrap();
        let _ = drain(&mut r);
        let flooder = EthernetAddress([0x02, 0, 0, 0, 0, 0xf1]);
        let from = |mac: EthernetAddress, ours: bool| {
            request(|f| {
                f.eth_src = mac;
                f.arp.source_hardware_addr = mac;
                if !ours {
                    f.arp.target_protocol_addr = Ipv4Addr::new(192, 0, 2, 99);
                }
            })
        };
        let cases = [
            // The flooder gets its burst, then nothing.
            (flooder, true, 1000, 5),
            // Another sender is answered in full.
            (PEER_MAC, true, 5, 5),
            // Requests not for us spend nothing: dropped as not ours.
            (OTHER_MAC, false, 100, 0),
            (OTHER_MAC, true, 5, 5),
        ];
        for (i, (mac, ours, n, want)) in cases.into_iter().enumerate() {
            let frame = from(mac, ours);
            let got = (0..n)
                .filter(|_| r.handle_frame(t0, IF, &frame).is_some())
                .count();
            assert_eq!(got, want, "case {i}");
        }
        let s = r.stats();
        assert_eq!(s.rate_limited, 995);
        assert_eq!(s.dropped(DropReason::NotOurs), 100);
        // Rate-limited requests are neither received nor answered.
        assert_eq!((s.requests_received, s.responses_sent), (15, 15));
        // A tenth of a second later the flooder has one more.
        let t1 = t0 + Duration::from_millis(100);
        let frame = from(flooder, true);
        assert!(r.handle_frame(t1, IF, &frame).is_some());
        assert!(r.handle_frame(t1, IF, &frame).is_none());
    }

    #[test]
    fn no_limit_answers_everything() {
        let t0 = Instant::now();
        let mut r = Responder::new(Config {
            limit: None,
            ..Config::default()
        });
        r.set_interface(t0, IF, OUR_MAC).unwrap();
        r.announce(t0, VIP, IF).unwrap();
        let _ = drain(&mut r);
        let n = (0..5000)
            .filter(|_| r.handle_frame(t0, IF, &REQUEST).is_some())
            .count();
        assert_eq!(n, 5000);
        assert_eq!(r.stats().rate_limited, 0);
    }
}
