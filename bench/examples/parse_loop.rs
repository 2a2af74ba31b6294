//! Parses one fixture in a loop, for profilers (callgrind, perf):
//! `cargo run --release -p ferrolb-bench --example parse_loop -- attribute_heavy 100000`
#![allow(clippy::unwrap_used)]

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "attribute_heavy".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let f = ferrolb_bench::all()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap();
    let ctx = bgp::DecodeCtx::default();
    let mut total = 0;
    for _ in 0..n {
        if let Ok(bgp::Message::Update(u)) =
            bgp::Message::parse(std::hint::black_box(&f.bytes), &ctx)
        {
            total += u.attributes.len();
        }
    }
    println!("{total}");
}
