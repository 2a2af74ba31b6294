//! Real frames: every `testdata/ndp/*.frame` (sent by the Linux kernel
//! inside network namespaces; see testdata/ndp/README.md) must
//!
//! - pass every RFC 4861 §7.1 check, agree with what its name says it is,
//!   and emit back to the same octets when it carries no option we drop;
//! - print exactly the reviewed `<name>.txt` (`UPDATE_GOLDEN=1 cargo test
//!   -p ndp --test captures` rewrites them);
//!
//! and the responder must answer the kernel's real solicitations (multicast,
//! unicast NUD probe, DAD) as RFC 4861 §7.2.4 says, octet for octet like
//! the kernel where the kernel made the same choices.
// clippy.toml allows unwrap in #[test] fns; the helpers here need it too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::time::Instant;

use ndp::responder::DropReason;
use ndp::wire::ipv6;
use ndp::{
    ALL_NODES, Config, EthernetAddress, FrameRepr, NdiscRepr, NeighborFlags, Output, Responder,
    multicast_mac, solicited_node,
};
use rstest::rstest;

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x01]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x02]);
const IP_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const IP_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const VIP: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10);
const LL_A: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe10, 1);
const IF: u32 = 7;

macro_rules! frame {
    ($name:literal) => {
        include_bytes!(concat!("../../testdata/ndp/", $name, ".frame")).as_slice()
    };
}

#[rstest]
fn capture_parses(#[files("../testdata/ndp/*.frame")] path: PathBuf) {
    let bytes = std::fs::read(&path).unwrap();
    let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
    let repr = FrameRepr::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));

    // The name says kernel-<kind>-<target> (testdata/ndp/extract.py).
    let (kind, target) = name
        .strip_prefix("kernel-")
        .and_then(|rest| rest.rsplit_once('-'))
        .unwrap();
    let target: Ipv6Addr = target.replace('_', ":").parse().unwrap();
    assert_eq!(repr.message.target_addr(), target, "{name}");
    let bare = kind.ends_with("-bare");
    match (kind.trim_end_matches("-bare"), repr.message) {
        ("ns", NdiscRepr::NeighborSolicit { lladdr, .. }) => {
            assert_eq!(repr.dst_addr, solicited_node(target), "{name}");
            assert_eq!(repr.eth_dst, multicast_mac(repr.dst_addr), "{name}");
            assert_eq!(lladdr.is_none(), bare, "{name}");
        }
        ("unicast-ns", NdiscRepr::NeighborSolicit { lladdr, .. }) => {
            assert_eq!(repr.dst_addr, target, "{name}");
            assert!(repr.eth_dst.is_unicast(), "{name}");
            assert_eq!(lladdr.is_none(), bare, "{name}");
        }
        ("dad-ns", NdiscRepr::NeighborSolicit { lladdr, .. }) => {
            assert!(repr.src_addr.is_unspecified(), "{name}");
            assert_eq!(repr.dst_addr, solicited_node(target), "{name}");
            assert_eq!(lladdr, None, "{name}");
        }
        ("na", NdiscRepr::NeighborAdvert { flags, lladdr, .. }) => {
            assert!(flags.contains(NeighborFlags::SOLICITED), "{name}");
            assert_eq!(repr.src_addr, target, "{name}");
            assert_eq!(lladdr.is_none(), bare, "{name}");
        }
        ("unsolicited-na", NdiscRepr::NeighborAdvert { flags, lladdr, .. }) => {
            assert_eq!(flags, NeighborFlags::OVERRIDE, "{name}");
            assert_eq!(repr.dst_addr, ALL_NODES, "{name}");
            assert_eq!(lladdr, Some(repr.eth_src), "{name}");
        }
        (kind, message) => panic!("{name}: {kind} does not match {message}"),
    }
    assert!([MAC_A, MAC_B].contains(&repr.eth_src), "{name}");

    // Emit gives back the frame, checksum included, unless it had an
    // option we do not keep (the DAD nonce).
    if repr.buffer_len() == bytes.len() {
        let mut out = vec![0xa5; bytes.len()];
        repr.emit(&mut out);
        assert_eq!(out, bytes, "{name}");
    } else {
        assert!(kind == "dad-ns", "{name}: only the DAD nonce is dropped");
    }

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

fn responder(mac: EthernetAddress, addrs: &[Ipv6Addr]) -> (Instant, Responder) {
    let t0 = Instant::now();
    let mut r = Responder::new(Config::default());
    r.set_interface(t0, IF, mac).unwrap();
    for addr in addrs {
        r.announce(t0, *addr, IF).unwrap();
    }
    while r.poll_output().is_some() {}
    (t0, r)
}

fn na(frame: &[u8]) -> (FrameRepr, NeighborFlags, Option<EthernetAddress>) {
    let repr = FrameRepr::parse(frame).unwrap();
    let hop_limit = ipv6::Packet::new_checked(&frame[14..]).unwrap().hop_limit();
    assert_eq!(hop_limit, 255);
    let NdiscRepr::NeighborAdvert { flags, lladdr, .. } = repr.message else {
        panic!("not an NA: {repr}")
    };
    (repr, flags, lladdr)
}

/// Standing in for b, our answer to a's multicast NS is b's kernel's own.
#[test]
fn answers_multicast_ns_like_the_kernel() {
    let (t0, mut r) = responder(MAC_B, &[IP_B]);
    let reply = r
        .handle_frame(t0, IF, frame!("kernel-ns-2001_db8__2"))
        .unwrap();
    assert_eq!(reply.frame, frame!("kernel-na-2001_db8__2"));
}

/// a's NUD probe: unicast to 2001:db8::2 from a's link-local, to b's MAC.
/// Linux answers it with S=1, O=0 and no option; we answer S=1, O=1 with
/// the option (RFC 4861 §7.2.4 allows both; O=1 is what makes a takeover
/// immediate), to the probe's source.
#[test]
fn answers_nud_probe() {
    let (t0, mut r) = responder(MAC_B, &[IP_B]);
    let probe = FrameRepr::parse(frame!("kernel-unicast-ns-2001_db8__2")).unwrap();
    assert_eq!(
        (probe.src_addr, probe.dst_addr, probe.eth_dst),
        (LL_A, IP_B, MAC_B)
    );
    let reply = r
        .handle_frame(t0, IF, frame!("kernel-unicast-ns-2001_db8__2"))
        .unwrap();
    let (ours, flags, lladdr) = na(&reply.frame);
    let (kernel, kernel_flags, kernel_lladdr) = na(frame!("kernel-na-bare-2001_db8__2"));
    assert_eq!(
        (ours.eth_src, ours.eth_dst, ours.src_addr, ours.dst_addr),
        (
            kernel.eth_src,
            kernel.eth_dst,
            kernel.src_addr,
            kernel.dst_addr
        )
    );
    assert_eq!((ours.eth_dst, ours.dst_addr), (MAC_A, LL_A));
    assert_eq!(flags, NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE);
    assert_eq!(kernel_flags, NeighborFlags::SOLICITED);
    assert_eq!((lladdr, kernel_lladdr), (Some(MAC_B), None));
}

#[test]
fn answers_kernel_ns_for_vip() {
    let ours = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0a]);
    let (t0, mut r) = responder(ours, &[VIP]);
    let reply = r
        .handle_frame(t0, IF, frame!("kernel-ns-2001_db8__10"))
        .unwrap();
    let (repr, flags, lladdr) = na(&reply.frame);
    assert_eq!((repr.eth_src, repr.eth_dst), (ours, MAC_A));
    assert_eq!((repr.src_addr, repr.dst_addr), (VIP, IP_A));
    assert_eq!(repr.message.target_addr(), VIP);
    assert_eq!(flags, NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE);
    assert_eq!(lladdr, Some(ours));
}

/// a's DAD for 2001:db8::3 (no SLLA, an RFC 7527 nonce option we skip):
/// if we own it, we tell all nodes, S=0.
#[test]
fn answers_kernel_dad() {
    let dad_target = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3);
    let (t0, mut r) = responder(MAC_B, &[dad_target]);
    let reply = r
        .handle_frame(t0, IF, frame!("kernel-dad-ns-2001_db8__3"))
        .unwrap();
    let (repr, flags, lladdr) = na(&reply.frame);
    assert_eq!(
        (repr.eth_src, repr.eth_dst),
        (MAC_B, multicast_mac(ALL_NODES))
    );
    assert_eq!((repr.src_addr, repr.dst_addr), (dad_target, ALL_NODES));
    assert_eq!(flags, NeighborFlags::OVERRIDE);
    assert_eq!(lladdr, Some(MAC_B));
}

#[test]
fn ignores_what_is_not_a_solicitation_for_us() {
    let (t0, mut r) = responder(MAC_B, &[IP_B]);
    for (frame, why) in [
        (frame!("kernel-ns-2001_db8__10"), DropReason::NotOurs),
        (frame!("kernel-dad-ns-2001_db8__3"), DropReason::NotOurs),
        (
            frame!("kernel-unsolicited-na-2001_db8__1"),
            DropReason::NotSolicit,
        ),
        (frame!("kernel-na-bare-2001_db8__1"), DropReason::NotSolicit),
        // b's own frames, seen from b's interface.
        (frame!("kernel-na-2001_db8__2"), DropReason::OwnMac),
        (frame!("kernel-unicast-ns-2001_db8__1"), DropReason::OwnMac),
    ] {
        let before = r.stats().dropped(why);
        assert_eq!(r.handle_frame(t0, IF, frame), None);
        assert_eq!(r.stats().dropped(why), before + 1, "{why}");
    }
}

/// Our unsolicited NA is the kernel's own (ndisc_notify).
#[test]
fn unsolicited_na_matches_kernel() {
    let t0 = Instant::now();
    let mut r = Responder::new(Config::default());
    r.set_interface(t0, IF, MAC_A).unwrap();
    r.announce(t0, IP_A, IF).unwrap();
    // The solicited-node group is joined first, then the NA goes out.
    assert!(matches!(r.poll_output(), Some(Output::Join { .. })));
    let Some(Output::Transmit(first)) = r.poll_output() else {
        panic!("expected a frame")
    };
    assert_eq!(first.frame, frame!("kernel-unsolicited-na-2001_db8__1"));
}
