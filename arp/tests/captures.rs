//! Real frames: every `testdata/arp/*.frame` (sent by the Linux kernel or
//! arping inside network namespaces; see testdata/arp/README.md) must
//!
//! - parse, agree with what its name says it is, and emit back to the same
//!   octets (Ethernet padding aside);
//! - print exactly the reviewed `<name>.txt` (`UPDATE_GOLDEN=1 cargo test
//!   -p arp --test captures` rewrites them);
//!
//! and the responder must answer the kernel's real requests exactly as the
//! kernel itself answered them.
// clippy.toml allows unwrap in #[test] fns; the helpers here need it too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

use arp::responder::DropReason;
use arp::wire::FRAME_LEN;
use arp::{Config, EthernetAddress, FrameRepr, Operation, Output, Responder};
use rstest::rstest;

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x01]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x02]);
const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const IF: u32 = 7;

macro_rules! frame {
    ($name:literal) => {
        include_bytes!(concat!("../../testdata/arp/", $name, ".frame")).as_slice()
    };
}

#[rstest]
fn capture_parses(#[files("../testdata/arp/*.frame")] path: PathBuf) {
    let bytes = std::fs::read(&path).unwrap();
    let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
    let repr = FrameRepr::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let arp = repr.arp;

    // The name says <sender>-<kind>-<address> (testdata/arp/extract.py).
    let (kind, addr) = name
        .split_once('-')
        .and_then(|(_, rest)| rest.rsplit_once('-'))
        .unwrap();
    let addr: Ipv4Addr = addr.parse().unwrap();
    let broadcast = repr.eth_dst.is_broadcast();
    match kind {
        "request" | "unicast-request" | "gratuitous-request" | "probe" => {
            assert_eq!(arp.operation, Operation::Request, "{name}");
            assert_eq!(arp.target_protocol_addr, addr, "{name}");
            assert_eq!(broadcast, kind != "unicast-request", "{name}");
        }
        "reply" | "reply-to-probe" => {
            assert_eq!(arp.operation, Operation::Reply, "{name}");
            assert_eq!(arp.source_protocol_addr, addr, "{name}");
            assert!(!broadcast, "{name}");
        }
        other => panic!("{name}: kind {other} not understood by this test"),
    }
    match kind {
        "gratuitous-request" => assert_eq!(arp.source_protocol_addr, addr, "{name}"),
        "probe" => assert_eq!(arp.source_protocol_addr, Ipv4Addr::UNSPECIFIED, "{name}"),
        "reply-to-probe" => {
            assert_eq!(arp.target_protocol_addr, Ipv4Addr::UNSPECIFIED, "{name}")
        }
        _ => {}
    }
    // Every sender here is a or b, and says so in both places.
    assert!([MAC_A, MAC_B].contains(&repr.eth_src), "{name}");
    assert_eq!(repr.eth_src, arp.source_hardware_addr, "{name}");

    // Emit gives back the frame (arping pads to 60 octets with zeroes).
    let mut out = [0xa5; FRAME_LEN];
    repr.emit(&mut out);
    assert_eq!(out, bytes[..FRAME_LEN], "{name}");
    assert!(bytes[FRAME_LEN..].iter().all(|b| *b == 0), "{name}");

    let text = format!("{repr}\n");
    let golden = path.with_extension("txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with UPDATE_GOLDEN=1 and review it",
            golden.display()
        )
    });
    assert_eq!(text, expected, "{name}");
}

fn responder(mac: EthernetAddress, ips: &[Ipv4Addr]) -> (Instant, Responder) {
    let t0 = Instant::now();
    let mut r = Responder::new(Config::default());
    r.set_interface(t0, IF, mac).unwrap();
    for ip in ips {
        r.announce(t0, *ip, IF).unwrap();
    }
    while r.poll_output().is_some() {}
    (t0, r)
}

#[test]
fn kernel_request_fields() {
    let repr = FrameRepr::parse(frame!("kernel-request-192.0.2.2")).unwrap();
    assert_eq!(repr.eth_src, MAC_A);
    assert_eq!(repr.eth_dst, EthernetAddress::BROADCAST);
    assert_eq!(repr.arp.operation, Operation::Request);
    assert_eq!(repr.arp.source_hardware_addr, MAC_A);
    assert_eq!(repr.arp.source_protocol_addr, IP_A);
    // Linux leaves the target hardware address zero in a request.
    assert_eq!(repr.arp.target_hardware_addr, EthernetAddress::UNSPECIFIED);
    assert_eq!(repr.arp.target_protocol_addr, IP_B);
}

/// Standing in for b, we answer a's requests octet for octet as b's kernel
/// did: broadcast, unicast (NUD probe) and RFC 5227 probe.
#[test]
fn answers_like_the_kernel() {
    let (t0, mut r) = responder(MAC_B, &[IP_B]);
    for (request, kernel_reply) in [
        (
            frame!("kernel-request-192.0.2.2"),
            frame!("kernel-reply-192.0.2.2"),
        ),
        (
            frame!("kernel-unicast-request-192.0.2.2"),
            frame!("kernel-reply-192.0.2.2"),
        ),
        (
            frame!("arping-probe-192.0.2.2"),
            frame!("kernel-reply-to-probe-192.0.2.2"),
        ),
    ] {
        let reply = r.handle_frame(t0, IF, request).unwrap();
        assert_eq!(
            reply.frame,
            kernel_reply,
            "{}",
            FrameRepr::parse(request).unwrap()
        );
    }
    assert_eq!(r.stats().requests_received, 3);
    assert_eq!(r.stats().responses_sent, 3);
}

#[test]
fn answers_kernel_request_for_vip() {
    let ours = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0a]);
    let (t0, mut r) = responder(ours, &[VIP]);
    let reply = r
        .handle_frame(t0, IF, frame!("kernel-request-192.0.2.10"))
        .unwrap();
    let repr = FrameRepr::parse(&reply.frame).unwrap();
    assert_eq!(repr.eth_src, ours);
    assert_eq!(repr.eth_dst, MAC_A);
    assert_eq!(repr.arp.operation, Operation::Reply);
    assert_eq!(repr.arp.source_hardware_addr, ours);
    assert_eq!(repr.arp.source_protocol_addr, VIP);
    assert_eq!(repr.arp.target_hardware_addr, MAC_A);
    assert_eq!(repr.arp.target_protocol_addr, IP_A);
}

#[test]
fn ignores_what_is_not_a_request_for_us() {
    let (t0, mut r) = responder(MAC_B, &[IP_B]);
    for (frame, why) in [
        (frame!("kernel-request-192.0.2.10"), DropReason::NotOurs),
        (
            frame!("kernel-gratuitous-request-192.0.2.1"),
            DropReason::NotOurs,
        ),
        (
            frame!("arping-gratuitous-request-192.0.2.1"),
            DropReason::NotOurs,
        ),
        (frame!("kernel-reply-192.0.2.1"), DropReason::NotRequest),
        // b's own frames, seen from b's interface.
        (frame!("kernel-reply-192.0.2.2"), DropReason::OwnMac),
        (
            frame!("kernel-unicast-request-192.0.2.1"),
            DropReason::OwnMac,
        ),
    ] {
        let before = r.stats().dropped(why);
        assert_eq!(r.handle_frame(t0, IF, frame), None);
        assert_eq!(r.stats().dropped(why), before + 1, "{why}");
    }
}

/// Our request-form gratuitous ARP is the kernel's own (arp_notify).
#[test]
fn gratuitous_request_matches_kernel() {
    let t0 = Instant::now();
    let mut r = Responder::new(Config::default());
    r.set_interface(t0, IF, MAC_A).unwrap();
    r.announce(t0, IP_A, IF).unwrap();
    let Some(Output::Transmit(first)) = r.poll_output() else {
        panic!("expected a frame")
    };
    assert_eq!(first.frame, frame!("kernel-gratuitous-request-192.0.2.1"));
}
