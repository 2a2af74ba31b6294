//! Feeds one arbitrary frame to an NDP responder that announces the
//! addresses of testdata/ndp (and, depending on the first octet, the
//! frame's own target), then fires its timers and withdraws. Must never
//! panic; every reply must be a well-formed Neighbor Advertisement from our
//! MAC, for an address we announce.
//!
//! Input: one control octet, then the frame.
//!   bit 0: the frame arrives on interface 2 instead of 1
//!   bit 1: announce the frame's target address first (if it parses)
//!   bit 2: withdraw it again after the frame
//!   bit 3: run every timer to the end of the bursts
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use ndp::{Config, EthernetAddress, FrameRepr, NdiscRepr, NeighborFlags, Output, Responder};

const MACS: [EthernetAddress; 2] = [
    EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x02]),
    EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0a]),
];

fuzz_target!(|data: &[u8]| {
    let Some((&control, frame)) = data.split_first() else {
        return;
    };
    let t0 = Instant::now();
    let mut r = Responder::new(Config::default());
    for (i, mac) in MACS.iter().enumerate() {
        r.set_interface(t0, i as u32 + 1, *mac).unwrap();
    }
    let addrs = [2u16, 3, 0x10].map(|low| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, low));
    for addr in addrs {
        r.announce(t0, addr, 1).unwrap();
    }
    r.announce(t0, addrs[2], 2).unwrap();
    let ifindex = if control & 1 == 0 { 1 } else { 2 };
    let target = FrameRepr::parse(frame)
        .ok()
        .map(|f| f.message.target_addr());
    if control & 2 != 0
        && let Some(addr) = target
    {
        r.announce(t0, addr, ifindex).unwrap();
    }

    let before = *r.stats();
    let reply = r.handle_frame(t0 + Duration::from_millis(1), ifindex, frame);
    let after = *r.stats();
    let handled = (after.responses_sent + after.dropped_total())
        - (before.responses_sent + before.dropped_total());
    assert_eq!(handled, 1, "each frame is answered or dropped, once");
    if let Some(reply) = reply {
        assert_eq!(reply.ifindex, ifindex);
        let parsed = FrameRepr::parse(&reply.frame).expect("our reply must parse");
        let mac = MACS[ifindex as usize - 1];
        assert_eq!(parsed.eth_src, mac);
        let NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        } = parsed.message
        else {
            panic!("reply is not an NA: {parsed}")
        };
        assert!(r.is_announced(target_addr, ifindex));
        assert_eq!(parsed.src_addr, target_addr);
        assert_eq!(lladdr, Some(mac));
        assert!(flags.contains(NeighborFlags::OVERRIDE));
        assert!(!flags.contains(NeighborFlags::ROUTER));
    }

    if control & 4 != 0
        && let Some(addr) = target
    {
        r.withdraw(addr, ifindex);
    }
    let mut timers = Vec::new();
    while let Some(output) = r.poll_output() {
        match output {
            Output::Transmit(t) => {
                FrameRepr::parse(&t.frame).expect("our announcement must parse");
            }
            Output::Arm { at, timer } => timers.push((at, timer)),
            Output::Join { group, .. } | Output::Leave { group, .. } => {
                assert!(group.is_multicast(), "solicited-node groups are multicast");
            }
        }
    }
    if control & 8 != 0 {
        while let Some((at, timer)) = timers.pop() {
            r.handle_timer(at, timer);
            while let Some(output) = r.poll_output() {
                if let Output::Arm { at, timer } = output {
                    timers.push((at, timer));
                }
            }
        }
    }
});
