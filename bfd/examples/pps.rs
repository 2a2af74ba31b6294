//! Microbenchmark of the pure core: two `Bfd`s with `SESSIONS` sessions
//! each, all Up at `INTERVAL` x 3, joined in memory and run through
//! `SECONDS` of simulated time on one thread as fast as the CPU allows.
//! Every packet is emitted by one core and parsed and handled by the other.
//!
//! `cargo run --release -p bfd --example pps [SESSIONS] [INTERVAL_MS] [SECONDS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use bfd::{Bfd, Output, PeerKey, Profile, SessionConfig, State};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

type Core = Bfd<Xoshiro256PlusPlus>;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().unwrap());
    let sessions = args.next().unwrap_or(100);
    let interval = Duration::from_millis(args.next().unwrap_or(50));
    let seconds = args.next().unwrap_or(600);
    let profile = Profile {
        receive_interval: interval,
        transmit_interval: interval,
        detect_multiplier: NonZeroU8::new(3).unwrap(),
        ..Profile::default()
    };
    let t0 = Instant::now();
    let mut a: Core = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(1));
    let mut b: Core = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(2));
    // Session i: A is 10.1.x.y, B is 10.2.x.y.
    let addr = |net: u8, i: u64| IpAddr::V4(Ipv4Addr::new(10, net, (i >> 8) as u8, i as u8));
    for i in 0..sessions {
        let key = |peer| PeerKey {
            peer,
            multihop: false,
        };
        a.add_session(
            t0,
            SessionConfig {
                key: key(addr(2, i)),
                local: Some(addr(1, i)),
                profile,
            },
        );
        b.add_session(
            t0,
            SessionConfig {
                key: key(addr(1, i)),
                local: Some(addr(2, i)),
                profile,
            },
        );
    }
    let mut now = t0;
    let mut packets = 0u64;
    let run = |a: &mut Core, b: &mut Core, now: &mut Instant, until: Instant| {
        let mut n = 0u64;
        loop {
            loop {
                let mut moved = false;
                while let Some(o) = a.poll_output() {
                    moved = true;
                    if let Output::Transmit(t) = o {
                        n += 1;
                        b.handle_packet(*now, &t.packet, t.local.unwrap(), 255, false);
                    }
                }
                while let Some(o) = b.poll_output() {
                    moved = true;
                    if let Output::Transmit(t) = o {
                        n += 1;
                        a.handle_packet(*now, &t.packet, t.local.unwrap(), 255, false);
                    }
                }
                if !moved {
                    break;
                }
            }
            let next = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            if next > until {
                return n;
            }
            *now = (*now).max(next);
            a.handle_timeout(*now);
            b.handle_timeout(*now);
        }
    };
    // Warm up: every session Up and done with its Poll Sequence.
    run(&mut a, &mut b, &mut now, t0 + Duration::from_secs(5));
    assert!(a.sessions().all(|s| s.state == State::Up && !s.polling));
    let start = Instant::now();
    let end = now + Duration::from_secs(seconds);
    packets += run(&mut a, &mut b, &mut now, end);
    let wall = start.elapsed();
    assert!(
        a.sessions()
            .chain(b.sessions())
            .all(|s| s.state == State::Up)
    );
    let pps = packets as f64 / wall.as_secs_f64();
    println!(
        "{sessions} sessions x2 at {interval:?}: {packets} packets ({seconds} s simulated) in \
         {wall:.2?}: {pps:.0} packets/s (each emitted, parsed and handled), {:.0} ns/packet; \
         real-time load {:.0} packets/s = {:.3} % of one core",
        wall.as_nanos() as f64 / packets as f64,
        packets as f64 / seconds as f64,
        100.0 * wall.as_secs_f64() / seconds as f64,
    );
}
