//! Parses any bytes as an Ethernet/ARP frame, through the views and the
//! reprs. Must never panic; whatever parses must emit and re-parse to the
//! same value.
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use arp::wire::{FRAME_LEN, FrameRepr, Packet, Repr};
use l2::ethernet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The raw views accept any address lengths: every accessor must stay in
    // bounds once check_len passed.
    if let Ok(frame) = ethernet::Frame::new_checked(data) {
        let _ = frame.to_string();
        if let Ok(packet) = Packet::new_checked(frame.payload()) {
            let _ = (
                packet.hardware_type(),
                packet.protocol_type(),
                packet.operation(),
                packet.source_hardware_addr(),
                packet.source_protocol_addr(),
                packet.target_hardware_addr(),
                packet.target_protocol_addr(),
            );
            let _ = packet.to_string();
            if let Ok(repr) = Repr::parse(&packet) {
                let _ = repr.to_string();
            }
        }
    }
    let Ok(repr) = FrameRepr::parse(data) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = [0u8; FRAME_LEN];
    repr.emit(&mut out);
    assert_eq!(out[..], data[..FRAME_LEN], "emit must give back the frame");
    assert_eq!(
        FrameRepr::parse(&out).expect("emitted frame must parse"),
        repr
    );
});
