//! Real router discovery messages: every `testdata/ndp/router/*.icmp` (FRR's
//! zebra's Router Advertisement, the Linux kernel's Router Solicitation,
//! captured by `testdata/ndp/router/capture.sh`) must
//!
//! - parse, print exactly the reviewed `<name>.txt` (`UPDATE_GOLDEN=1 cargo
//!   test -p ndp --test router_captures` rewrites them), and emit back to
//!   the same octets, checksum included, from the address the sender had;
//!
//! and FRR's advertisement, given to the unnumbered core as the raw socket
//! hands it over, makes its source the neighbor.
// clippy.toml allows unwrap in #[test] fns; the helpers here need it too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::time::Instant;

use ndp::ALL_NODES;
use ndp::unnumbered::{ALL_ROUTERS, Link, LinkConfig, Output};
use ndp::wire::RouterRepr;
use ndp::wire::icmpv6::Packet;
use rstest::rstest;

/// The link-local addresses of the capture's two ends (EUI-64 of
/// 02:00:5e:10:00:01 and :02; see capture.sh).
const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe10, 1);
const HOST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0x5eff, 0xfe10, 2);

#[rstest]
fn capture_parses(#[files("../testdata/ndp/router/*.icmp")] path: PathBuf) {
    let bytes = std::fs::read(&path).unwrap();
    let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
    let repr = RouterRepr::parse(&Packet::new_unchecked(&bytes[..]))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let (src, dst) = match repr {
        RouterRepr::RouterAdvert { .. } => (ROUTER, ALL_NODES),
        RouterRepr::RouterSolicit { .. } => (HOST, ALL_ROUTERS),
    };
    assert!(
        Packet::new_unchecked(&bytes[..]).verify_checksum(src, dst),
        "{name}"
    );
    let mut out = vec![0xa5; repr.buffer_len()];
    repr.emit(src, dst, &mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, bytes, "{name}: emitted differently");

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

#[test]
fn frr_advertisement_teaches_the_neighbor() {
    let ra = include_bytes!("../../testdata/ndp/router/frr-ra.icmp");
    let t0 = Instant::now();
    let mut link = Link::new(LinkConfig::default());
    link.handle_up(t0, None);
    while link.poll_output().is_some() {}
    link.handle_message(t0, ROUTER, 255, ra).unwrap();
    assert_eq!(link.poll_output(), Some(Output::Neighbor(Some(ROUTER))));
    assert_eq!(link.neighbor(), Some(ROUTER));
}
