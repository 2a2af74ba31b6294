//! Parse time of ferrolb against bgpkit-parser, interleaved: short batches
//! of each alternate, round after round, so that load from other work on
//! the machine falls on both alike (criterion measures one after the
//! other, seconds apart). Prints per fixture the fastest batch of each
//! (time per message; on a shared machine the estimate least disturbed by
//! other load), the ratio of the two, and the median of the per-round
//! ratios with the median times.
//!
//! `cargo run --profile bench -p ferrolb-bench --example parse_ratio [ROUNDS]`
//! (default 400 rounds of about 2 ms per implementation).
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use bgpkit_parser::models::AsnLength;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let ctx = bgp::DecodeCtx::default();
    println!(
        "| fixture | ferrolb fastest | bgpkit-parser fastest | bgpkit / ferrolb | per-round ratio, median of {rounds} (median times) |"
    );
    println!("|---|---|---|---|---|");
    for f in ferrolb_bench::all() {
        let ours = || {
            let _ = black_box(bgp::Message::parse(black_box(&f.bytes), &ctx));
        };
        let theirs = || {
            let _ = black_box(bgpkit_parser::parser::bgp::messages::parse_bgp_message(
                &mut black_box(f.bytes.clone()),
                false,
                &AsnLength::Bits32,
            ));
        };
        let n_ours = calibrate(ours);
        let n_theirs = calibrate(theirs);
        let mut a = Vec::with_capacity(rounds);
        let mut b = Vec::with_capacity(rounds);
        let mut ratio = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let x = batch(n_ours, ours);
            let y = batch(n_theirs, theirs);
            a.push(x);
            b.push(y);
            ratio.push(y / x);
        }
        let (ma, mb) = (median(&mut a), median(&mut b));
        println!(
            "| {} | {} | {} | **{:.2}x** | {:.2}x ({} / {}) |",
            f.name,
            fmt(a[0]),
            fmt(b[0]),
            b[0] / a[0],
            median(&mut ratio),
            fmt(ma),
            fmt(mb),
        );
    }
}

/// Calls per batch so that one takes about 2 ms.
fn calibrate(mut f: impl FnMut()) -> u64 {
    let mut n = 1u64;
    loop {
        let t = Instant::now();
        (0..n).for_each(|_| f());
        if t.elapsed() >= Duration::from_micros(200) {
            return n * 10;
        }
        n *= 2;
    }
}

/// Nanoseconds per call over one batch of `n` calls.
fn batch(n: u64, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    (0..n).for_each(|_| f());
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// Sorts `v` and returns its median.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn fmt(ns: f64) -> String {
    if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
