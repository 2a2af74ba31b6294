//! Arbitrary input sequences into one memberlist core: structured and raw
//! datagrams and stream frames, timers fired on time, late or early,
//! joins, leaves and metadata changes. The core must never panic, never
//! arm a timer in the past, and stay within its bounds.
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use bytes::BufMut;
use libfuzzer_sys::fuzz_target;
use memberlist::envelope::{self, Transport};
use memberlist::message::{MAX_UPDATES, Packet, PushPull, Update};
use memberlist::{Config, Key, Keyring, Meta, Name, Output, Security, Swim, Timer, frame};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[derive(Arbitrary, Debug)]
enum Op {
    /// Let time pass (ms).
    Advance(u16),
    /// Fire one armed timer: on time, `late` ms late, or early.
    Fire {
        index: u8,
        late: u16,
        early: bool,
    },
    /// Fire everything due.
    Timeout,
    /// A well-formed datagram from 10.0.0.`from`.
    Packet {
        from: u8,
        packet: Packet,
    },
    /// An update about this member itself (refutation paths).
    AboutMe {
        from: u8,
        kind: u8,
        incarnation: u32,
    },
    /// Raw octets as a datagram.
    Raw {
        from: u8,
        data: Vec<u8>,
    },
    /// A well-formed full-state frame.
    Stream(PushPull),
    /// Raw octets as a stream frame.
    RawStream(Vec<u8>),
    Join(Vec<u8>),
    Leave,
    SetMeta(Meta),
}

#[derive(Arbitrary, Debug)]
struct Input {
    encrypted: bool,
    seed: u64,
    ops: Vec<Op>,
}

fn addr(i: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), 7946)
}

/// Drains the outputs after an input, checking each.
fn drain(swim: &mut Swim<Xoshiro256PlusPlus>, now: Instant, timers: &mut Vec<(Instant, Timer)>) {
    while let Some(out) = swim.poll_output() {
        match out {
            Output::Arm { at, timer } => {
                assert!(at >= now, "timer armed in the past");
                timers.push((at, timer));
            }
            Output::Send { packet, .. } => assert!(packet.len() <= 1400, "oversized datagram"),
            Output::Stream { frame, .. } => {
                assert_eq!(frame::decode(&frame), Ok(Some(frame.len())));
            }
            Output::Event(_) => {}
        }
    }
}

fuzz_target!(|input: Input| {
    let security = if input.encrypted {
        Security::Encrypted(Keyring::new(Key::new([7; 32])))
    } else {
        Security::Plaintext
    };
    let me = Name::new("n0").unwrap();
    let mut config = Config::lan(me.clone(), addr(0), security.clone());
    config.dead_retention = Duration::from_secs(5);
    let t0 = Instant::now();
    let mut now = t0;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(input.seed);
    let mut swim = Swim::new(config, Xoshiro256PlusPlus::seed_from_u64(input.seed), now).unwrap();
    let mut timers: Vec<(Instant, Timer)> = Vec::new();
    drain(&mut swim, now, &mut timers);
    let seal = |rng: &mut Xoshiro256PlusPlus,
                t: Transport,
                len: usize,
                emit: &dyn Fn(&mut bytes::BytesMut)| {
        envelope::seal(&security, t, rng, len, |b| emit(b)).unwrap()
    };
    for op in input.ops.into_iter().take(256) {
        match op {
            Op::Advance(ms) => now += Duration::from_millis(u64::from(ms)),
            Op::Fire { index, late, early } => {
                if timers.is_empty() {
                    continue;
                }
                let (at, t) = timers.remove(usize::from(index) % timers.len());
                let when = if early {
                    now
                } else {
                    now.max(at) + Duration::from_millis(u64::from(late))
                };
                now = now.max(when);
                swim.handle_timer(now, t);
                if at > now {
                    // Too early: the core keeps it armed.
                    timers.push((at, t));
                }
            }
            Op::Timeout => swim.handle_timeout(now),
            Op::Packet { from, mut packet } => {
                packet.updates.truncate(MAX_UPDATES);
                let data = seal(&mut rng, Transport::Packet, packet.buffer_len(), &|b| {
                    packet.emit(b).unwrap();
                });
                let _ = swim.handle_packet(now, addr(from), &data);
            }
            Op::AboutMe {
                from,
                kind,
                incarnation,
            } => {
                let update = match kind % 4 {
                    0 => Update::Alive {
                        name: me.clone(),
                        incarnation,
                        addr: addr(from),
                        meta: Meta::default(),
                    },
                    1 => Update::Suspect {
                        name: me.clone(),
                        incarnation,
                        from: me.clone(),
                    },
                    2 => Update::Dead {
                        name: me.clone(),
                        incarnation,
                        from: me.clone(),
                    },
                    _ => Update::Left {
                        name: me.clone(),
                        incarnation,
                    },
                };
                let packet = Packet {
                    from: Name::new("x").unwrap(),
                    message: memberlist::message::Message::Gossip,
                    updates: vec![update],
                };
                let data = seal(&mut rng, Transport::Packet, packet.buffer_len(), &|b| {
                    packet.emit(b).unwrap();
                });
                let _ = swim.handle_packet(now, addr(from), &data);
            }
            Op::Raw { from, data } => {
                let _ = swim.handle_packet(now, addr(from), &data);
            }
            Op::Stream(state) => {
                if state.members.len() > 1024 {
                    continue;
                }
                let frame = seal(&mut rng, Transport::Stream, state.buffer_len(), &|b| {
                    state.emit(b).unwrap();
                });
                let _ = swim.handle_stream(now, &frame);
            }
            Op::RawStream(mut data) => {
                // Half the time with a correct length prefix.
                if rng.next_u32() % 2 == 0 {
                    let len = u32::try_from(data.len()).unwrap_or(0);
                    let mut framed = Vec::with_capacity(data.len() + 4);
                    framed.put_u32(len);
                    framed.extend_from_slice(&data);
                    data = framed;
                }
                let _ = swim.handle_stream(now, &data);
            }
            Op::Join(seeds) => swim.join(now, seeds.into_iter().take(8).map(addr)),
            Op::Leave => swim.leave(now),
            Op::SetMeta(meta) => swim.set_metadata(now, meta),
        }
        drain(&mut swim, now, &mut timers);
        assert!(swim.num_up() <= swim.members().count());
        if let Some(t) = swim.poll_timeout() {
            // Every live deadline was announced by an Arm.
            assert!(
                timers.iter().any(|(at, _)| *at == t) || t <= now,
                "unannounced deadline"
            );
        }
    }
});
