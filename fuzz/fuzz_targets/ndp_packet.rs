//! Parses any bytes as an Ethernet/IPv6/ICMPv6 Neighbor Discovery frame,
//! through the views and the reprs. Must never panic; whatever parses must
//! emit and re-parse to the same value. (Checksums are not verified under
//! cfg(fuzzing), so the fuzzer reaches what lies behind them.)
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use libfuzzer_sys::fuzz_target;
use ndp::wire::option::Options;
use ndp::wire::{FrameRepr, icmpv6, ipv6};

fuzz_target!(|data: &[u8]| {
    // The views on their own, at every layer.
    if let Ok(ip) = ipv6::Packet::new_checked(data) {
        let _ = ipv6::Repr::parse(&ip).map(|r| r.to_string());
        let payload = ip.payload();
        if let Ok(icmp) = icmpv6::Packet::new_checked(payload) {
            let _ = (icmp.msg_type(), icmp.msg_code(), icmp.checksum());
            let _ = icmp.verify_checksum(ip.src_addr(), ip.dst_addr());
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
