//! Parses any bytes as a BFD Control packet, through the view and the
//! repr, then feeds them to a core with one session. Must never panic;
//! whatever parses must emit and re-parse to the same value.
//!
//! The first octet picks the TTL (its value), multihop (its low bit) and
//! how far the clock moves (its high nibble, in 10 ms steps) before the
//! packet is handled; the rest is the datagram. The core's events go
//! through a `client::Gate`, as the speaker's do. The session has echo
//! mode, and the datagram is also handed in as a returned echo packet (and
//! round-tripped through `EchoRepr` when it parses as one).
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use bfd::client::Gate;
use bfd::echo::EchoRepr;
use bfd::wire::{PACKET_LEN, Packet, Repr};
use bfd::{Bfd, Output, PeerKey, Profile, SessionConfig};
use libfuzzer_sys::fuzz_target;
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

fuzz_target!(|data: &[u8]| {
    let Some((&control, datagram)) = data.split_first() else {
        return;
    };
    if let Ok(packet) = Packet::new_checked(datagram) {
        let _ = packet.to_string();
        if let Ok(repr) = Repr::parse(&packet) {
            let _ = repr.to_string();
            let out = repr.to_bytes();
            assert_eq!(out.len(), PACKET_LEN);
            assert_eq!(
                Repr::parse_bytes(&out).expect("emitted packet must parse"),
                repr
            );
            // Emit gives back the header (length 24, no auth).
            assert_eq!(out[4..], datagram[4..PACKET_LEN]);
        }
    }

    let t0 = Instant::now();
    let multihop = control & 1 == 1;
    let mut core = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(7));
    let key = PeerKey {
        peer: PEER,
        multihop,
    };
    core.add_session(
        t0,
        SessionConfig {
            key,
            local: None,
            profile: Profile {
                echo_interval: Some(Duration::from_millis(50)),
                ..Profile::default()
            },
        },
    );
    if let Ok(echo) = EchoRepr::parse(datagram) {
        let _ = echo.to_string();
        assert_eq!(EchoRepr::parse(&echo.to_bytes()), Ok(echo));
    }
    let mut gate = Gate::new();
    let drain = |core: &mut Bfd<Xoshiro256PlusPlus>, gate: &mut Gate| {
        while let Some(o) = core.poll_output() {
            if let Output::Event(e) = o {
                let _ = gate.handle_event(&e);
            }
        }
    };
    let now = t0 + Duration::from_millis(10 * u64::from(control >> 4));
    core.handle_timeout(now);
    // Twice: the second time the session may know the peer.
    for step in 0..2u64 {
        let at = now + Duration::from_millis(step);
        core.handle_packet(at, datagram, PEER, control, multihop);
        drain(&mut core, &mut gate);
        core.handle_echo(at, datagram);
        drain(&mut core, &mut gate);
        if let Some(t) = core.poll_timeout() {
            core.handle_timeout(t);
            drain(&mut core, &mut gate);
        }
    }
    if let Some(t) = gate.poll_timeout() {
        let down = gate.handle_timeout(t);
        assert!(down.iter().all(|k| !gate.is_up(*k)));
    }
    let s = core.stats();
    assert_eq!(
        s.received + s.malformed + s.authenticated + s.bad_ttl + s.unknown_session,
        2
    );
    assert_eq!(s.echo_received + s.echo_dropped, 2);
});
