//! ARP and NDP request -> reply through the pure responders: the time to
//! parse a kernel request, look the target up and emit the reply, with 1 and
//! 1000 announced addresses, without the per-sender limit (`l2_reply`), and
//! the cost the limit adds (`l2_limit`): an answer it allows, and a request
//! it refuses. Requests are the real kernel frames of testdata/arp and
//! testdata/ndp.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const IF: u32 = 1;
const MAC: arp::EthernetAddress = arp::EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0a]);

/// a's broadcast request for 192.0.2.10.
static ARP_REQUEST: &[u8] = include_bytes!("../../testdata/arp/kernel-request-192.0.2.10.frame");
/// a's multicast NS for 2001:db8::10.
static NDP_REQUEST: &[u8] = include_bytes!("../../testdata/ndp/kernel-ns-2001_db8__10.frame");

fn arp_responder(n: u32, t0: Instant, limit: Option<arp::Limit>) -> arp::Responder {
    let mut r = arp::Responder::new(arp::Config {
        limit,
        ..arp::Config::default()
    });
    r.set_interface(t0, IF, MAC).unwrap();
    r.announce(t0, Ipv4Addr::new(192, 0, 2, 10), IF).unwrap();
    // The rest in 10.0.0.0/8, so the table really holds n addresses.
    for i in 1..n {
        r.announce(t0, Ipv4Addr::from(0x0a00_0000 + i), IF).unwrap();
    }
    while r.poll_output().is_some() {}
    r
}

fn ndp_responder(n: u32, t0: Instant) -> ndp::Responder {
    let mut r = ndp::Responder::new(ndp::Config {
        limit: None,
        ..ndp::Config::default()
    });
    r.set_interface(t0, IF, MAC).unwrap();
    r.announce(t0, "2001:db8::10".parse().unwrap(), IF).unwrap();
    for i in 1..n {
        let addr = Ipv6Addr::from(0x2001_0db8_0001_u128 << 80 | u128::from(i));
        r.announce(t0, addr, IF).unwrap();
    }
    while r.poll_output().is_some() {}
    r
}

fn reply(c: &mut Criterion) {
    let t0 = Instant::now();
    for n in [1, 1000] {
        let mut g = c.benchmark_group(format!("l2_reply/{n}_announced"));
        g.throughput(Throughput::Elements(1));

        let mut r = arp_responder(n, t0, None);
        assert!(r.handle_frame(t0, IF, ARP_REQUEST).is_some());
        g.bench_function("arp", |b| {
            b.iter(|| r.handle_frame(t0, IF, black_box(ARP_REQUEST)).unwrap())
        });

        let mut r = ndp_responder(n, t0);
        assert!(r.handle_frame(t0, IF, NDP_REQUEST).is_some());
        g.bench_function("ndp", |b| {
            b.iter(|| r.handle_frame(t0, IF, black_box(NDP_REQUEST)).unwrap())
        });
        g.finish();
    }

    // A request for an address we do not announce: the common case on a
    // busy segment, dropped after the lookup.
    let mut g = c.benchmark_group("l2_drop/1000_announced");
    g.throughput(Throughput::Elements(1));
    let mut r = arp_responder(1000, t0, None);
    let other = include_bytes!("../../testdata/arp/kernel-request-192.0.2.2.frame");
    assert!(r.handle_frame(t0, IF, other).is_none());
    g.bench_function("arp", |b| {
        b.iter(|| r.handle_frame(t0, IF, black_box(other)))
    });
    let mut r = ndp_responder(1000, t0);
    let other = include_bytes!("../../testdata/ndp/kernel-ns-2001_db8__2.frame");
    assert!(r.handle_frame(t0, IF, other).is_none());
    g.bench_function("ndp", |b| {
        b.iter(|| r.handle_frame(t0, IF, black_box(other)))
    });
    g.finish();

    // The per-sender limit: a limit so high it always allows (the lookup
    // and the arithmetic on every answer), and a sender over its budget
    // (the flood's case: parsed, looked up, refused).
    let mut g = c.benchmark_group("l2_limit/1000_announced");
    g.throughput(Throughput::Elements(1));
    let never = arp::Limit {
        rate: u32::MAX,
        burst: u32::MAX,
        seed: 1,
    };
    let mut r = arp_responder(1000, t0, Some(never));
    g.bench_function("arp_allowed", |b| {
        b.iter(|| r.handle_frame(t0, IF, black_box(ARP_REQUEST)).unwrap())
    });
    let mut r = arp_responder(1000, t0, Some(arp::Limit::DEFAULT));
    while r.handle_frame(t0, IF, ARP_REQUEST).is_some() {}
    g.bench_function("arp_rate_limited", |b| {
        b.iter(|| r.handle_frame(t0, IF, black_box(ARP_REQUEST)).is_none())
    });
    g.finish();
}

criterion_group!(benches, reply);
criterion_main!(benches);
