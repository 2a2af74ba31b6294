//! Parses one fixture in a loop with one implementation, for profilers
//! and instruction counts that do not depend on machine load:
//! `valgrind --tool=callgrind target/release/deps/parse_loop-<hash> ferrolb attribute_heavy 20000`
//! (`bench/instructions` builds it with `cargo bench --no-run` and finds it).
//! (implementations: ferrolb, ferrolb-copy (`Message::parse` from a slice),
//! bgpkit-parser, zettabgp).
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::net::Ipv4Addr;

use bgpkit_parser::models::AsnLength;
use zettabgp::prelude::{
    BgpCapability, BgpMessage, BgpSessionParams, BgpTransportMode, BgpUpdateMessage,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let imp = args.next().unwrap_or_else(|| "ferrolb".into());
    let name = args.next().unwrap_or_else(|| "attribute_heavy".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let f = ferrolb_bench::all()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap();
    let ctx = bgp::DecodeCtx::default();
    let mut zp = BgpSessionParams::new(
        64512,
        90,
        BgpTransportMode::IPv4,
        Ipv4Addr::new(192, 0, 2, 1),
        vec![
            BgpCapability::SafiIPv4u,
            BgpCapability::SafiIPv6u,
            BgpCapability::CapASN32(64512),
        ],
    );
    zp.fuzzy_pathid = false;
    let mut ok = 0usize;
    for _ in 0..n {
        let bytes = black_box(&f.bytes);
        ok += match imp.as_str() {
            "ferrolb" => usize::from(bgp::Message::parse_bytes(bytes, &ctx).is_ok()),
            "ferrolb-copy" => usize::from(bgp::Message::parse(bytes, &ctx).is_ok()),
            "bgpkit-parser" => usize::from(
                bgpkit_parser::parser::bgp::messages::parse_bgp_message(
                    &mut bytes.clone(),
                    false,
                    &AsnLength::Bits32,
                )
                .is_ok(),
            ),
            "zettabgp" => {
                let (_, len) = zp.decode_message_head(bytes).unwrap();
                let mut m = BgpUpdateMessage::new();
                usize::from(m.decode_from(&zp, &bytes[19..19 + len]).is_ok())
            }
            other => panic!("unknown implementation {other}"),
        };
    }
    assert_eq!(ok, n, "every parse must succeed");
    println!("{imp} {name} {n}");
}
