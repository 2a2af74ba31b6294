//! Parses any bytes as an Ethernet/IPv6/ICMPv6 Neighbor Discovery frame,
//! through the views and the reprs. Must never panic; whatever parses must
//! emit and re-parse to the same value. The same for Router Solicitations
//! and Advertisements, read as bare ICMPv6 messages and inside the frame.
//! (Checksums are not verified under cfg(fuzzing), so the fuzzer reaches
//! what lies behind them.)
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use libfuzzer_sys::fuzz_target;
use ndp::wire::option::Options;
use ndp::wire::{FrameRepr, RouterRepr, icmpv6, ipv6};

/// Router Solicitations and Advertisements come as bare ICMPv6 messages
/// (a raw socket's): whatever parses must emit and re-parse to itself.
fn router_round_trip(message: &[u8]) {
    let Ok(repr) = RouterRepr::parse(&icmpv6::Packet::new_unchecked(message)) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len()];
    let a = std::net::Ipv6Addr::UNSPECIFIED;
    repr.emit(a, a, &mut icmpv6::Packet::new_unchecked(&mut out[..]));
    let again = RouterRepr::parse(&icmpv6::Packet::new_unchecked(&out[..]))
        .expect("emitted router message must parse");
    assert_eq!(again, repr);
}

fuzz_target!(|data: &[u8]| {
    router_round_trip(data);
    // The views on their own, at every layer.
    if let Ok(ip) = ipv6::Packet::new_checked(data) {
        let _ = ipv6::Repr::parse(&ip).map(|r| r.to_string());
        let payload = ip.payload();
        if let Ok(icmp) = icmpv6::Packet::new_checked(payload) {
            let _ = (icmp.msg_type(), icmp.msg_code(), icmp.checksum());
            let _ = icmp.verify_checksum(ip.src_addr(), ip.dst_addr());
            router_round_trip(payload);
            if icmp.check_router_advert_len().is_ok() {
                let _ = (
                    icmp.cur_hop_limit(),
                    icmp.router_flags(),
                    icmp.router_lifetime(),
                );
                let _ = (icmp.reachable_time(), icmp.retrans_timer());
            }
            if icmp.check_ndisc_len().is_ok() {
                let _ = (icmp.neighbor_flags(), icmp.target_addr());
                for option in Options::new(icmp.options()) {
                    let _ = option.map(|o| o.to_string());
                }
            }
        }
    }
    for option in Options::new(data) {
        let _ = option.map(|o| o.to_string());
    }

    let Ok(repr) = FrameRepr::parse(data) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out);
    let again = FrameRepr::parse(&out).expect("emitted frame must parse");
    assert_eq!(again, repr);
});
