//! codec-time: times ferrolb's BGP codec on the bench fixtures with nothing
//! but `std`, so that builds of the same code under different profiles
//! (panic strategy, overflow checks, LTO) can be compared: `bench/profiles`
//! builds one binary per profile and runs them in turn, round after round,
//! in the same run. BENCHMARKS.md has the figures.
//!
//! Prints one line per case: `CASE NANOSECONDS` (per parse or emit; the
//! fastest of several batches, the estimate least disturbed by other load).

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bgp::wire::{AsPath, AttrValue, DecodeCtx, Message, NextHop, Nlri, Origin, PathAttribute};
use bgp::wire::{Ipv4Prefix, UpdateEncoder};
use bytes::BytesMut;

/// Batches per case; the fastest counts.
const BATCHES: usize = 7;

fn main() -> ExitCode {
    let batch = match std::env::args().nth(1).map(|s| s.parse::<u64>()) {
        None => Duration::from_millis(30),
        Some(Ok(ms)) if ms > 0 => Duration::from_millis(ms),
        Some(_) => {
            eprintln!("usage: codec-time [BATCH_MILLISECONDS]  (default 30)");
            return ExitCode::FAILURE;
        }
    };
    let ctx = DecodeCtx::default();
    for f in ferrolb_bench::all() {
        if Message::parse(&f.bytes, &ctx).is_err() {
            eprintln!("codec-time: fixture {} does not parse", f.name);
            return ExitCode::FAILURE;
        }
        let ns = time(batch, || {
            let _ = black_box(Message::parse(black_box(&f.bytes), &ctx));
        });
        println!("parse/{} {ns:.1}", f.name);
    }
    for f in ferrolb_bench::all() {
        let Ok(msg) = Message::parse(&f.bytes, &ctx) else {
            return ExitCode::FAILURE;
        };
        let mut out = BytesMut::with_capacity(8192);
        let ns = time(batch, || {
            out.clear();
            let _ = black_box(&msg).emit(&ctx, &mut out);
        });
        println!("emit/{} {ns:.1}", f.name);
    }
    let attrs = [
        PathAttribute::new(AttrValue::Origin(Origin::Igp)),
        PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![64512]))),
    ];
    let prefixes: Vec<_> = (0..100_000u32)
        .map(|i| Nlri::new(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000 + i))))
        .collect();
    let enc = UpdateEncoder::new(ctx);
    let mut out = BytesMut::with_capacity(1 << 21);
    let ns = time(batch, || {
        out.clear();
        let _ = enc.announce_ipv4(
            &attrs,
            NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
            black_box(&prefixes),
            &mut out,
        );
    });
    println!("emit/ipv4_32_x100k {ns:.1}");
    ExitCode::SUCCESS
}

/// Nanoseconds per call of `f`: the fastest of [`BATCHES`] batches of
/// about `batch` each.
fn time(batch: Duration, mut f: impl FnMut()) -> f64 {
    // Calibrate: double the count until one batch takes a tenth of `batch`.
    let mut n: u64 = 1;
    loop {
        let t = Instant::now();
        (0..n).for_each(|_| f());
        let took = t.elapsed();
        if took >= batch / 10 {
            n = n.saturating_mul(10);
            break;
        }
        n = n.saturating_mul(2);
    }
    (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            (0..n).for_each(|_| f());
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}
