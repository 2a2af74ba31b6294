//! Feeds one arbitrary frame to an ARP responder that announces the
//! addresses of testdata/arp (and, depending on the first octet, the
//! frame's own target), then fires its timers and withdraws. Must never
//! panic; every reply must be a well-formed ARP reply from our MAC.
//!
//! Input: one control octet, then the frame.
//!   bit 0: the frame arrives on interface 2 instead of 1
//!   bit 1: announce the frame's target address first (if it parses)
//!   bit 2: withdraw it again after the frame
//!   bit 3: run every timer to the end of the bursts
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use arp::{Config, EthernetAddress, FrameRepr, Operation, Output, Responder};
use libfuzzer_sys::fuzz_target;

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
    for ip in [[192, 0, 2, 2], [192, 0, 2, 10], [192, 0, 2, 1]] {
        r.announce(t0, Ipv4Addr::from(ip), 1).unwrap();
    }
    r.announce(t0, Ipv4Addr::new(192, 0, 2, 10), 2).unwrap();
    let ifindex = if control & 1 == 0 { 1 } else { 2 };
    let target = FrameRepr::parse(frame)
        .ok()
        .map(|f| f.arp.target_protocol_addr);
    if control & 2 != 0
        && let Some(ip) = target
    {
        r.announce(t0, ip, ifindex).unwrap();
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
        assert_eq!(parsed.arp.source_hardware_addr, mac);
        assert_eq!(parsed.arp.operation, Operation::Reply);
        assert!(parsed.eth_dst.is_unicast());
    }

    if control & 4 != 0
        && let Some(ip) = target
    {
        r.withdraw(ip, ifindex);
    }
    let mut timers = Vec::new();
    while let Some(output) = r.poll_output() {
        match output {
            Output::Transmit(t) => {
                FrameRepr::parse(&t.frame).expect("our announcement must parse");
            }
            Output::Arm { at, timer } => timers.push((at, timer)),
            Output::Join { .. } | Output::Leave { .. } => panic!("ARP requests are broadcast"),
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
