//! BGP UPDATE parse and emit: ferrolb versus bgpkit-parser and zettabgp on
//! the same bytes, in the same run. See BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::net::Ipv4Addr;

use bgp::wire::{
    AsPath, AttrValue, DecodeCtx, Message, NextHop, Nlri, Origin, PathAttribute, UpdateEncoder,
};
use bgpkit_parser::models::AsnLength;
use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use zettabgp::prelude::{
    BgpCapability, BgpMessage, BgpSessionParams, BgpTransportMode, BgpUpdateMessage,
};

fn zetta_params() -> BgpSessionParams {
    let mut p = BgpSessionParams::new(
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
    p.has_as32bit = true;
    p.fuzzy_pathid = false;
    p
}

fn parse(c: &mut Criterion) {
    let ctx = DecodeCtx::default();
    let zparams = zetta_params();
    for f in ferrolb_bench::all() {
        // Every parser must accept the fixture, or the comparison is void.
        assert!(f.prefixes > 0, "{}: no prefixes", f.name);
        assert!(Message::parse_bytes(&f.bytes, &ctx).is_ok());
        assert_eq!(
            Message::parse(&f.bytes, &ctx).ok(),
            Message::parse_bytes(&f.bytes, &ctx).ok()
        );
        assert!(
            bgpkit_parser::parser::bgp::messages::parse_bgp_message(
                &mut f.bytes.clone(),
                false,
                &AsnLength::Bits32
            )
            .is_ok()
        );
        let (_, body_len) = zparams.decode_message_head(&f.bytes).unwrap();
        let mut z = BgpUpdateMessage::new();
        z.decode_from(&zparams, &f.bytes[19..19 + body_len])
            .unwrap();

        let mut g = c.benchmark_group(format!("parse/{}", f.name));
        g.throughput(Throughput::Bytes(f.bytes.len() as u64));
        // What the speaker does: the frame is a `Bytes`, and the values
        // that keep octets share it (bgpkit-parser also gets a `Bytes`).
        g.bench_function("ferrolb", |b| {
            b.iter(|| Message::parse_bytes(black_box(&f.bytes), &ctx).unwrap())
        });
        // From a plain slice: those values copy their octets.
        g.bench_function("ferrolb-copy", |b| {
            b.iter(|| Message::parse(black_box(&f.bytes), &ctx).unwrap())
        });
        g.bench_function("bgpkit-parser", |b| {
            b.iter(|| {
                bgpkit_parser::parser::bgp::messages::parse_bgp_message(
                    &mut black_box(f.bytes.clone()),
                    false,
                    &AsnLength::Bits32,
                )
                .unwrap()
            })
        });
        g.bench_function("zettabgp", |b| {
            b.iter(|| {
                let bytes = black_box(&f.bytes);
                let (_, len) = zparams.decode_message_head(bytes).unwrap();
                let mut m = BgpUpdateMessage::new();
                m.decode_from(&zparams, &bytes[19..19 + len]).unwrap();
                m
            })
        });
        g.finish();
    }
}

fn emit(c: &mut Criterion) {
    let ctx = DecodeCtx::default();
    let attrs = vec![
        PathAttribute::new(AttrValue::Origin(Origin::Igp)),
        PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![64512]))),
    ];
    let prefixes: Vec<_> = (0..100_000u32)
        .map(|i| Nlri::new(bgp::wire::Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000 + i))))
        .collect();
    let enc = UpdateEncoder::new(ctx);
    let mut g = c.benchmark_group("emit/ipv4_32_x100k");
    g.throughput(Throughput::Elements(prefixes.len() as u64));
    g.bench_function("ferrolb", |b| {
        let mut out = BytesMut::with_capacity(1 << 20);
        b.iter(|| {
            out.clear();
            enc.announce_ipv4(
                &attrs,
                NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
                black_box(&prefixes),
                &mut out,
            )
            .unwrap()
        })
    });
    g.finish();
    for f in ferrolb_bench::all() {
        let msg = Message::parse(&f.bytes, &ctx).unwrap();
        let mut g = c.benchmark_group(format!("emit/{}", f.name));
        g.throughput(Throughput::Bytes(f.bytes.len() as u64));
        g.bench_function("ferrolb", |b| {
            let mut out = BytesMut::with_capacity(8192);
            b.iter(|| {
                out.clear();
                black_box(&msg).emit(&ctx, &mut out).unwrap();
            })
        });
        g.finish();
    }
}

criterion_group!(benches, parse, emit);
criterion_main!(benches);
