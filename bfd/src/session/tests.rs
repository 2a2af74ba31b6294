//! FSM scenarios with explicit time: two [`Bfd`] cores joined by an
//! in-memory link with zero delay, stepped from deadline to deadline.

use std::net::{IpAddr, Ipv4Addr};

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::echo::EchoRepr;
use crate::wire::Packet;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn profile(tx: u64, rx: u64, mult: u8) -> Profile {
    Profile {
        receive_interval: ms(rx),
        transmit_interval: ms(tx),
        detect_multiplier: NonZeroU8::new(mult).unwrap(),
        ..Profile::default()
    }
}

fn key(peer: IpAddr) -> PeerKey {
    PeerKey {
        peer,
        multihop: false,
    }
}

type Core = Bfd<Xoshiro256PlusPlus>;

/// Two speakers, A (10.0.0.1) and B (10.0.0.2), one session each way.
struct Pair {
    /// Both sessions are multihop (RFC 5883).
    multihop: bool,
    t0: Instant,
    now: Instant,
    a: Core,
    b: Core,
    /// Drop everything in flight (both directions).
    cut: bool,
    /// Drop only what B sends.
    cut_b: bool,
    /// The peer's forwarding plane drops echo packets: A's (true) or B's
    /// (false) do not come back.
    cut_echo: [bool; 2],
    /// Every echo sent, A's with `true`.
    echoes: Vec<(bool, Instant)>,
    /// Every event, A's with `true`.
    events: Vec<(bool, Event)>,
    /// Every packet sent, A's with `true`.
    packets: Vec<(bool, Instant, Repr)>,
}

impl Pair {
    fn new(pa: Profile, pb: Profile) -> Self {
        Self::with(pa, pb, false)
    }

    fn with(pa: Profile, pb: Profile, multihop: bool) -> Self {
        let t0 = Instant::now();
        let mut a = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(1));
        let mut b = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(2));
        let cfg = |peer, profile| SessionConfig {
            key: PeerKey { peer, multihop },
            ..config(peer, profile)
        };
        a.add_session(t0, cfg(B, pa));
        b.add_session(t0, cfg(A, pb));
        let mut pair = Self {
            multihop,
            t0,
            now: t0,
            a,
            b,
            cut: false,
            cut_b: false,
            cut_echo: [false; 2],
            echoes: Vec::new(),
            events: Vec::new(),
            packets: Vec::new(),
        };
        pair.drain();
        pair
    }

    /// Moves outputs until both cores are quiet.
    fn drain(&mut self) {
        loop {
            let mut moved = false;
            while let Some(o) = self.a.poll_output() {
                moved = true;
                self.deliver(true, o);
            }
            while let Some(o) = self.b.poll_output() {
                moved = true;
                self.deliver(false, o);
            }
            if !moved {
                break;
            }
        }
    }

    fn deliver(&mut self, from_a: bool, o: Output) {
        match o {
            Output::Event(e) => self.events.push((from_a, e)),
            Output::Echo(e) => {
                // The peer's forwarding plane sends it straight back.
                self.echoes.push((from_a, self.now));
                let cut = self.cut || self.cut_echo[usize::from(!from_a)];
                if from_a {
                    assert_eq!(e.key.peer, B);
                    if !cut {
                        self.a.handle_echo(self.now, &e.packet);
                    }
                } else {
                    assert_eq!(e.key.peer, A);
                    if !cut {
                        self.b.handle_echo(self.now, &e.packet);
                    }
                }
            }
            Output::Transmit(t) => {
                let repr = Repr::parse_bytes(&t.packet).unwrap();
                self.packets.push((from_a, self.now, repr));
                if self.cut || (!from_a && self.cut_b) {
                    return;
                }
                if from_a {
                    // A's other peers (if any) never answer.
                    if t.key.peer != B {
                        return;
                    }
                    self.b
                        .handle_packet(self.now, &t.packet, A, 255, self.multihop);
                } else {
                    assert_eq!(t.key.peer, A);
                    self.a
                        .handle_packet(self.now, &t.packet, B, 255, self.multihop);
                }
            }
        }
    }

    /// Runs until `until` (after t0), deadline by deadline.
    fn run_until(&mut self, until: Duration) {
        let end = self.t0 + until;
        loop {
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                    self.drain();
                    self.a.check_timers();
                    self.b.check_timers();
                }
                _ => break,
            }
        }
        self.now = end;
    }

    fn info_a(&self) -> SessionInfo {
        let key = PeerKey {
            peer: B,
            multihop: self.multihop,
        };
        self.a.session(key).unwrap()
    }

    fn info_b(&self) -> SessionInfo {
        let key = PeerKey {
            peer: A,
            multihop: self.multihop,
        };
        self.b.session(key).unwrap()
    }

    fn transitions(&self, of_a: bool) -> Vec<(State, State, Diag)> {
        self.events
            .iter()
            .filter(|(a, _)| *a == of_a)
            .map(|(_, e)| (e.from, e.to, e.diag))
            .collect()
    }

    fn last_event(&self, of_a: bool) -> Event {
        self.events
            .iter()
            .rev()
            .find(|(a, _)| *a == of_a)
            .unwrap()
            .1
    }
}

impl<R: RngCore> Bfd<R> {
    /// The timer heap agrees with a scan of every session, and stale
    /// entries do not pile up.
    fn check_timers(&self) {
        let scan = self
            .sessions
            .values()
            .filter_map(Session::next_deadline)
            .min();
        assert_eq!(self.poll_timeout(), scan);
        assert!(
            self.timers.len() <= 2 * self.sessions.len() + STALE_SLACK,
            "{} heap entries for {} sessions",
            self.timers.len(),
            self.sessions.len()
        );
    }
}

fn config(peer: IpAddr, profile: Profile) -> SessionConfig {
    SessionConfig {
        key: key(peer),
        local: None,
        profile,
    }
}

#[test]
fn three_way_handshake_then_fast_timers_by_poll() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(10));
    // Both spoke at once (Down), both went Init, then Up on hearing
    // Init: each state change is sent at once, no timer is waited for.
    for side in [true, false] {
        assert_eq!(
            p.transitions(side),
            vec![
                (State::Down, State::Init, Diag::None),
                (State::Init, State::Up, Diag::None)
            ]
        );
    }
    assert!(p.events.iter().all(|(_, e)| e.at == p.t0));
    // Leaving the 1 s slow rate takes a Poll Sequence each way.
    let polls = p.packets.iter().filter(|(_, _, r)| r.poll).count();
    let finals = p.packets.iter().filter(|(_, _, r)| r.final_).count();
    assert!(polls >= 2 && finals >= 2, "{polls} polls, {finals} finals");
    p.run_until(ms(1000));
    let (a, b) = (p.info_a(), p.info_b());
    assert!(!a.polling && !b.polling);
    assert_eq!(a.tx_interval, ms(50));
    assert_eq!(a.detection_time, ms(150));
    assert_eq!(b.detection_time, ms(150));
    assert_eq!(a.remote_discriminator, b.local_discriminator);
    // About 20 packets a second each way, jittered.
    let sent = p
        .packets
        .iter()
        .filter(|(a, t, _)| *a && *t > p.t0 + ms(500))
        .count();
    assert!((10..=14).contains(&sent), "{sent} packets in 500 ms");
}

#[test]
fn detection_expiry_takes_the_session_down_with_diag_1() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(500));
    assert_eq!(p.info_a().state, State::Up);
    p.cut_b = true;
    let cut = p.now;
    // The last packet from B arrived at most 50 ms before the cut.
    let last_rx = p
        .packets
        .iter()
        .rev()
        .find(|(a, _, _)| !*a)
        .map(|(_, t, _)| *t)
        .unwrap();
    p.run_until(ms(800));
    let down = p.last_event(true);
    assert_eq!(
        (down.to, down.diag, down.cause),
        (
            State::Down,
            Diag::ControlDetectionTimeExpired,
            Some(DownCause::DetectionTimeExpired)
        )
    );
    assert_eq!(
        down.at - last_rx,
        ms(150),
        "3 x 50 ms after the last packet"
    );
    assert!(down.at - cut <= ms(150));
    // A's Down packets take B down too (diag 3), though B still hears A.
    // Same discriminator: the peer's failure, not a restart.
    let b = p.last_event(false);
    assert_eq!(
        (b.to, b.diag, b.cause),
        (
            State::Down,
            Diag::NeighborSignaledSessionDown,
            Some(DownCause::NeighborDown)
        )
    );
    assert_eq!(b.at, down.at);
    // A forgot B's discriminator and is back at the slow rate.
    let a = p.info_a();
    assert_eq!(a.remote_discriminator, 0);
    assert_eq!(a.tx_interval, ms(1000));
    // Restore: Up again within the slow rate.
    p.cut_b = false;
    p.run_until(ms(3000));
    assert_eq!(p.info_a().state, State::Up);
    assert_eq!(p.info_b().state, State::Up);
    assert_eq!(p.info_a().ups, 2);
}

#[test]
fn detection_time_uses_the_peers_multiplier_and_slower_side() {
    // A can only take a packet every 200 ms; B would send every 50 ms.
    let mut p = Pair::new(profile(50, 200, 3), profile(50, 50, 5));
    p.run_until(ms(2000));
    let (a, b) = (p.info_a(), p.info_b());
    // A: B's multiplier 5 x max(A's rx 200, B's tx 50).
    assert_eq!(a.detection_time, ms(1000));
    // B: A's multiplier 3 x max(B's rx 50, A's tx 50).
    assert_eq!(b.detection_time, ms(150));
    // B sends at A's pace.
    assert_eq!(b.tx_interval, ms(200));
}

#[test]
fn poll_final_on_interval_change() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(500));
    // Slower transmission: advertised at once, used after the Final.
    let cut_from = p.packets.len();
    p.cut = true;
    p.a.add_session(p.now, config(B, profile(200, 300, 3)));
    let a = p.info_a();
    assert!(a.polling);
    assert_eq!(a.tx_interval, ms(50), "an increase waits for the Final");
    // A longer detection time for B's packets applies at once.
    assert_eq!(a.detection_time, ms(300 * 3));
    p.run_until(ms(560));
    let (_, _, poll) = p.packets[cut_from..].iter().find(|(a, _, _)| *a).unwrap();
    assert!(poll.poll && !poll.final_);
    assert_eq!(poll.desired_min_tx, ms(200));
    assert_eq!(poll.required_min_rx, ms(300));
    p.cut = false;
    let before = p.packets.len();
    p.run_until(ms(700));
    let final_ = p.packets[before..]
        .iter()
        .find(|(a, _, r)| !*a && r.final_)
        .unwrap();
    assert!(!final_.2.poll);
    let a = p.info_a();
    assert!(!a.polling);
    // A sends at max(its 200, B's rx 50); B at max(50, A's rx 300).
    assert_eq!(a.tx_interval, ms(200));
    assert_eq!(p.info_b().tx_interval, ms(300));
    assert_eq!(p.info_b().detection_time, ms(600));
    assert_eq!(p.info_a().state, State::Up);
    assert_eq!(p.info_b().state, State::Up);
}

#[test]
fn admin_down_from_the_peer_is_down_with_diag_3() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(500));
    assert!(p.b.set_admin_down(p.now, key(A), true));
    p.drain();
    let b = p.last_event(false);
    assert_eq!(
        (b.to, b.diag, b.cause),
        (
            State::AdminDown,
            Diag::AdministrativelyDown,
            Some(DownCause::AdminDown)
        )
    );
    let a = p.last_event(true);
    assert_eq!(
        (a.to, a.diag, a.cause),
        (
            State::Down,
            Diag::NeighborSignaledSessionDown,
            Some(DownCause::NeighborAdminDown)
        )
    );
    assert_eq!(a.at, p.now, "at once, not after the detection time");
    // A stays Down while B is AdminDown: no detection-time expiry either.
    p.run_until(ms(5000));
    assert_eq!(p.info_a().state, State::Down);
    assert_eq!(p.info_b().state, State::AdminDown);
    p.b.set_admin_down(p.now, key(A), false);
    p.run_until(ms(8000));
    assert_eq!(p.info_a().state, State::Up);
    assert_eq!(p.info_b().state, State::Up);
}

#[test]
fn removing_a_session_sends_admin_down() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(500));
    assert!(p.b.remove_session(p.now, key(A)));
    assert!(!p.b.remove_session(p.now, key(A)));
    p.drain();
    let a = p.last_event(true);
    assert_eq!(
        (a.to, a.diag),
        (State::Down, Diag::NeighborSignaledSessionDown)
    );
    assert!(p.b.session(key(A)).is_none());
}

/// FRR 8.4's bgpd replaces its BFD session once BGP is up: the new one
/// has a new discriminator, does not know ours and says Down. RFC 5880
/// §6.8.6 takes our session Down (diag 3) and the handshake starts over;
/// the event tells this apart from a failure.
#[test]
fn a_peer_that_replaces_its_session_is_a_restart() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(500));
    let old = p.info_b().local_discriminator;
    assert_eq!(p.info_a().remote_discriminator, old);
    // B forgets its session without a word, and makes a new one.
    p.b = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(5));
    p.b.add_session(p.now, config(A, profile(50, 50, 3)));
    let restart = p.now;
    p.b.handle_timeout(p.now);
    p.drain();
    let new = p.info_b().local_discriminator;
    assert_ne!(new, old);
    let downs: Vec<Event> = p
        .events
        .iter()
        .filter(|(a, e)| *a && e.from == State::Up)
        .map(|(_, e)| *e)
        .collect();
    assert_eq!(downs.len(), 1);
    assert_eq!(
        (downs[0].to, downs[0].diag, downs[0].cause, downs[0].at),
        (
            State::Down,
            Diag::NeighborSignaledSessionDown,
            Some(DownCause::NeighborRestarted),
            restart
        )
    );
    // Every state change is sent at once: Up again without waiting for a
    // timer (FRR waits for its next slow-rate packet, up to 1 s).
    p.run_until(ms(2000));
    let a = p.info_a();
    assert_eq!((a.state, a.ups, a.downs), (State::Up, 2, 1));
    assert_eq!(a.remote_discriminator, new);
    let up_again = p.last_event(true);
    assert_eq!((up_again.to, up_again.at), (State::Up, restart));
    assert_eq!(p.info_b().state, State::Up);
}

/// What FRR 8.4's bfdd sends from a session it deletes (seen on the wire):
/// Down, diag 3, both discriminators unchanged; then nothing. Only the
/// peer's diagnostic tells this apart from a failure it detected.
#[test]
fn a_peer_down_is_a_failure_only_with_a_failure_diagnostic() {
    let cases = [
        (
            Diag::NeighborSignaledSessionDown,
            DownCause::NeighborRestarted,
        ),
        (Diag::None, DownCause::NeighborRestarted),
        (Diag::AdministrativelyDown, DownCause::NeighborRestarted),
        (Diag::ControlDetectionTimeExpired, DownCause::NeighborDown),
        (Diag::PathDown, DownCause::NeighborDown),
        (Diag::ForwardingPlaneReset, DownCause::NeighborDown),
        (Diag::Unknown(20), DownCause::NeighborDown),
    ];
    for (diag, cause) in cases {
        let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
        p.run_until(ms(500));
        let (a, b) = (p.info_a(), p.info_b());
        let down = Repr {
            diag,
            state: State::Down,
            poll: false,
            final_: false,
            control_plane_independent: false,
            detect_mult: NonZeroU8::new(3).unwrap(),
            my_discriminator: NonZeroU32::new(b.local_discriminator).unwrap(),
            your_discriminator: a.local_discriminator,
            desired_min_tx: ms(1000),
            required_min_rx: ms(50),
            required_min_echo_rx: ms(50),
        }
        .to_bytes();
        p.a.handle_packet(p.now, &down, B, 255, false);
        p.drain();
        let e = p.last_event(true);
        assert_eq!(
            (e.from, e.to, e.diag, e.cause),
            (
                State::Up,
                State::Down,
                Diag::NeighborSignaledSessionDown,
                Some(cause)
            ),
            "peer diag {diag}"
        );
    }
}

/// Many sessions on one core, some answered and some not: the heap gives
/// the same deadlines as a scan (checked at every step by `run_until`),
/// and every session keeps its own rate.
#[test]
fn timer_heap_with_many_sessions() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    // A also talks to 100 peers that never answer, at 100-300 ms.
    for i in 0..100u8 {
        let peer = IpAddr::V4(Ipv4Addr::new(10, 0, 1, i));
        let tx = 100 + u64::from(i % 3) * 100;
        p.a.add_session(p.now, config(peer, profile(tx, tx, 3)));
    }
    p.run_until(ms(5000));
    assert_eq!(p.info_a().state, State::Up);
    // Down, so each silent session sends at the 1 s slow rate: 4-6 in 5 s.
    let silent: Vec<u64> =
        p.a.sessions()
            .filter(|s| s.key.peer != B)
            .map(|s| s.sent)
            .collect();
    assert_eq!(silent.len(), 100);
    assert!(silent.iter().all(|n| (4..=7).contains(n)), "{silent:?}");
    // Removing sessions leaves no live timer behind.
    for i in 0..100u8 {
        assert!(p.a.remove_session(p.now, key(IpAddr::V4(Ipv4Addr::new(10, 0, 1, i)))));
    }
    p.a.check_timers();
    p.run_until(ms(6000));
    assert_eq!(p.info_a().state, State::Up);
}

#[test]
fn passive_waits_for_the_peer() {
    let passive = Profile {
        passive: true,
        ..profile(50, 50, 3)
    };
    let mut p = Pair::new(passive, passive);
    p.run_until(ms(5000));
    assert!(p.packets.is_empty(), "two passive sides never speak");
    assert_eq!(p.info_a().tx_interval, Duration::ZERO);

    let mut p = Pair::new(passive, profile(50, 50, 3));
    p.run_until(ms(3000));
    let first_a = p.packets.iter().position(|(a, _, _)| *a).unwrap();
    assert!(first_a > 0, "A answers only after B's packet");
    assert_eq!(p.info_a().state, State::Up);
    // Losing B, A goes quiet again.
    p.cut_b = true;
    p.run_until(ms(3500));
    assert_eq!(p.info_a().state, State::Down);
    let n = p.packets.len();
    p.run_until(ms(6000));
    assert!(p.packets[n..].iter().all(|(a, _, _)| !*a));
}

#[test]
fn jitter_is_75_to_100_percent_or_75_to_90_with_mult_1() {
    for (mult, max) in [(3, 100), (1, 90)] {
        let mut p = Pair::new(profile(100, 100, mult), profile(100, 100, 3));
        p.run_until(ms(20_000));
        let times: Vec<Instant> = p
            .packets
            .iter()
            .filter(|(a, t, r)| *a && *t > p.t0 + ms(2000) && !r.final_)
            .map(|(_, t, _)| *t)
            .collect();
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 150);
        let lo = gaps.iter().min().unwrap();
        let hi = gaps.iter().max().unwrap();
        assert!(
            *lo >= ms(75) && *hi <= ms(max),
            "mult {mult}: {lo:?}..{hi:?}"
        );
        assert!(*lo < ms(78) && *hi > ms(max - 3), "spread: {lo:?}..{hi:?}");
    }
}

#[test]
fn bad_input_is_dropped_and_counted() {
    let mut p = Pair::new(profile(50, 50, 3), profile(50, 50, 3));
    p.run_until(ms(500));
    let before = p.a.stats();
    let up = p.info_a();
    let good = p
        .packets
        .iter()
        .rev()
        .find(|(a, _, r)| !*a && !r.final_)
        .unwrap()
        .2
        .to_bytes();
    let now = p.now;
    // Single-hop GTSM: TTL 254 is dropped.
    p.a.handle_packet(now, &good, B, 254, false);
    // Malformed: truncated, version 0.
    p.a.handle_packet(now, &good[..20], B, 255, false);
    let mut v0 = good;
    v0[0] &= 0x1f;
    p.a.handle_packet(now, &v0, B, 255, false);
    // Unknown discriminator; right discriminator from the wrong address.
    let mut unknown = good;
    Packet::new_unchecked(&mut unknown[..]).set_your_discriminator(up.local_discriminator ^ 1);
    p.a.handle_packet(now, &unknown, B, 255, false);
    p.a.handle_packet(now, &good, A, 255, false);
    // ... or over the multihop port.
    p.a.handle_packet(now, &good, B, 255, true);
    // Authentication present.
    let mut auth = good.to_vec();
    auth[1] |= 0x04;
    auth[3] = 28;
    auth.extend([1, 4, 1, 0]);
    p.a.handle_packet(now, &auth, B, 255, false);
    let s = p.a.stats();
    assert_eq!(s.bad_ttl - before.bad_ttl, 1);
    assert_eq!(s.malformed - before.malformed, 2);
    assert_eq!(s.unknown_session - before.unknown_session, 3);
    assert_eq!(s.authenticated - before.authenticated, 1);
    assert_eq!(s.received, before.received);
    assert_eq!(p.info_a().received, up.received);
    assert!(p.a.poll_output().is_none());
}

#[test]
fn multihop_checks_the_minimum_ttl() {
    let t0 = Instant::now();
    let mut a: Core = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(3));
    let k = PeerKey {
        peer: B,
        multihop: true,
    };
    let prof = Profile {
        minimum_ttl: 250,
        ..profile(100, 100, 3)
    };
    a.add_session(
        t0,
        SessionConfig {
            key: k,
            local: None,
            profile: prof,
        },
    );
    let mut b: Core = Bfd::new(Xoshiro256PlusPlus::seed_from_u64(4));
    b.add_session(
        t0,
        SessionConfig {
            key: PeerKey {
                peer: A,
                multihop: true,
            },
            local: None,
            profile: prof,
        },
    );
    b.handle_timeout(t0);
    let Some(Output::Transmit(t)) = b.poll_output() else {
        panic!("B sends first")
    };
    a.handle_packet(t0, &t.packet, B, 249, true);
    assert_eq!(a.stats().bad_ttl, 1);
    a.handle_packet(t0, &t.packet, B, 250, true);
    assert_eq!(a.stats().received, 1);
    assert_eq!(a.session(k).unwrap().state, State::Init);
}

fn echo_profile(tx: u64, rx: u64, mult: u8, echo: Option<u64>) -> Profile {
    Profile {
        echo_interval: echo.map(ms),
        ..profile(tx, rx, mult)
    }
}

/// Echoes sent by A (true) or B between `from` and `to` after t0.
fn echoes_between(p: &Pair, of_a: bool, from: Duration, to: Duration) -> usize {
    p.echoes
        .iter()
        .filter(|(a, t)| *a == of_a && *t >= p.t0 + from && *t < p.t0 + to)
        .count()
}

/// RFC 5880 §6.8.9: a system sends echoes only if it wants to (its
/// profile), only on a single-hop session that is Up, and only while the
/// peer advertises a nonzero Required Min Echo RX Interval; never faster
/// than that interval. What each side advertises is its own echo interval,
/// or zero without echo mode.
#[test]
fn echo_is_sent_only_when_both_sides_allow_it() {
    struct Row {
        a_echo: Option<u64>,
        b_echo: Option<u64>,
        multihop: bool,
        /// A's echo interval once Up (0: A sends none).
        a_interval: u64,
        /// B's echo interval once Up.
        b_interval: u64,
    }
    let rows = [
        // Both want echoes: each at the slower of its own interval and
        // the other's Required Min Echo RX.
        Row {
            a_echo: Some(50),
            b_echo: Some(50),
            multihop: false,
            a_interval: 50,
            b_interval: 50,
        },
        Row {
            a_echo: Some(20),
            b_echo: Some(70),
            multihop: false,
            a_interval: 70,
            b_interval: 70,
        },
        // B has no echo mode: it advertises 0, so A sends none, and B
        // sends none although A advertises 50.
        Row {
            a_echo: Some(50),
            b_echo: None,
            multihop: false,
            a_interval: 0,
            b_interval: 0,
        },
        Row {
            a_echo: None,
            b_echo: None,
            multihop: false,
            a_interval: 0,
            b_interval: 0,
        },
        // RFC 5883 §3: no echo on multihop sessions, whatever the profile.
        Row {
            a_echo: Some(50),
            b_echo: Some(50),
            multihop: true,
            a_interval: 0,
            b_interval: 0,
        },
    ];
    for (i, r) in rows.iter().enumerate() {
        let mut p = Pair::with(
            echo_profile(50, 50, 3, r.a_echo),
            echo_profile(50, 50, 3, r.b_echo),
            r.multihop,
        );
        p.run_until(ms(3000));
        let (a, b) = (p.info_a(), p.info_b());
        assert_eq!((a.state, b.state), (State::Up, State::Up), "row {i}");
        // What each advertises, as the other learned it.
        let advertised = |e: Option<u64>| if r.multihop { 0 } else { e.unwrap_or(0) };
        assert_eq!(b.remote_min_echo_rx, ms(advertised(r.a_echo)), "row {i}");
        assert_eq!(a.remote_min_echo_rx, ms(advertised(r.b_echo)), "row {i}");
        assert_eq!(a.echo_interval, ms(r.a_interval), "row {i}");
        assert_eq!(b.echo_interval, ms(r.b_interval), "row {i}");
        // Echoes went out only once Up, and never faster than 75 % of the
        // interval; every one came back.
        let up_at = |of_a| {
            p.events
                .iter()
                .find(|(x, e)| *x == of_a && e.to == State::Up)
                .map(|(_, e)| e.at)
                .unwrap()
        };
        for (of_a, interval, info) in [(true, r.a_interval, a), (false, r.b_interval, b)] {
            let mine: Vec<Instant> = p
                .echoes
                .iter()
                .filter(|(x, _)| *x == of_a)
                .map(|(_, t)| *t)
                .collect();
            if interval == 0 {
                assert!(mine.is_empty(), "row {i}: {mine:?}");
                assert_eq!(info.echo_detection_time, Duration::ZERO, "row {i}");
                continue;
            }
            assert!(mine[0] >= up_at(of_a), "row {i}: echo before Up");
            for w in mine.windows(2) {
                assert!(
                    w[1] - w[0] >= ms(interval) * 3 / 4,
                    "row {i}: {:?}",
                    w[1] - w[0]
                );
                assert!(w[1] - w[0] <= ms(interval), "row {i}: {:?}", w[1] - w[0]);
            }
            assert_eq!(info.echo_sent, mine.len() as u64, "row {i}");
            assert_eq!(info.echo_received, info.echo_sent, "row {i}");
            assert_eq!(info.echo_detection_time, ms(interval) * 3, "row {i}");
        }
        let stats = p.a.stats();
        assert_eq!(stats.echo_sent, a.echo_sent, "row {i}");
        assert_eq!(stats.echo_dropped, 0, "row {i}");
    }
}

/// §6.8.3: while echoes flow, A asks for Control packets no faster than
/// once a second (by a Poll Sequence), so B slows down and A's Control
/// detection time grows to 3 s; when B stops wanting echoes (advertises
/// 0), A stops them and asks for the configured rate again.
#[test]
fn control_slows_to_one_second_while_echo_is_active() {
    let mut p = Pair::new(
        echo_profile(50, 50, 3, Some(50)),
        echo_profile(50, 50, 3, Some(50)),
    );
    p.run_until(ms(3000));
    let (a, b) = (p.info_a(), p.info_b());
    assert!(!a.polling && !b.polling);
    assert_eq!(a.detection_time, ms(3000), "{a:?}");
    assert_eq!(b.tx_interval, ms(1000), "{b:?}");
    // Our own Control packets keep the configured rate.
    assert_eq!(a.tx_interval, ms(1000), "B asks the same of A: {a:?}");
    let last = p.packets.iter().rev().find(|(x, _, _)| *x).unwrap().2;
    assert_eq!(last.required_min_rx, ms(1000));
    assert_eq!(last.required_min_echo_rx, ms(50));
    assert_eq!(last.desired_min_tx, ms(50));
    // Control packets B sent in the last second: one or two, not twenty.
    let b_sent = p
        .packets
        .iter()
        .filter(|(x, t, _)| !*x && *t >= p.t0 + ms(2000))
        .count();
    assert!((1..=2).contains(&b_sent), "{b_sent}");

    // B drops echo mode: it advertises 0, A stops echoing and polls its
    // Required Min RX back to 50 ms.
    let now = p.t0 + ms(3000);
    p.b.add_session(now, config(A, echo_profile(50, 50, 3, None)));
    p.drain();
    p.run_until(ms(6000));
    let (a, b) = (p.info_a(), p.info_b());
    assert_eq!(a.echo_interval, Duration::ZERO, "{a:?}");
    assert_eq!(a.detection_time, ms(150), "{a:?}");
    assert_eq!(b.tx_interval, ms(50), "{b:?}");
    assert_eq!(echoes_between(&p, true, ms(4500), ms(6000)), 0);
    assert_eq!((a.state, b.state), (State::Up, State::Up));
    assert_eq!(
        p.transitions(true).len(),
        2,
        "no flap: {:?}",
        p.transitions(true)
    );
}

/// §6.8.5: when A's echoes stop coming back (B's forwarding plane drops
/// them) while Control packets still flow both ways, A goes Down with
/// diag 2 one echo detection time (3 x 50 ms) after the last echo came
/// back, long before the 3 s Control detection time; B hears it (diag 3).
/// When the path is repaired the session comes back Up and echoes flow.
#[test]
fn echo_loss_takes_the_session_down_with_diag_2() {
    // Both want echoes; only A's come back no more.
    let mut p = Pair::new(
        echo_profile(50, 50, 3, Some(50)),
        echo_profile(50, 50, 3, Some(50)),
    );
    p.run_until(ms(3000));
    assert_eq!(p.info_a().state, State::Up);
    assert_eq!(p.info_a().detection_time, ms(3000));
    p.cut_echo[0] = true;
    let cut_at = p.now;
    p.run_until(ms(3400));
    let down = p
        .events
        .iter()
        .find(|(x, e)| *x && e.at >= cut_at)
        .unwrap()
        .1;
    assert_eq!(
        (down.from, down.to, down.diag, down.cause),
        (
            State::Up,
            State::Down,
            Diag::EchoFunctionFailed,
            Some(DownCause::EchoFunctionFailed)
        )
    );
    let a = p.info_a();
    let last_echo = a.last_echo_received.unwrap();
    assert!(last_echo <= cut_at);
    assert_eq!(down.at - last_echo, ms(150), "one echo detection time");
    // Control packets still flowed: B's last one before A went Down was
    // well within A's 3 s Control detection time.
    let last_control = p
        .packets
        .iter()
        .filter(|(x, t, _)| !*x && *t < down.at)
        .map(|(_, t, _)| *t)
        .max()
        .unwrap();
    assert!(
        down.at - last_control < ms(1000),
        "{:?}",
        down.at - last_control
    );
    let b_down = p
        .events
        .iter()
        .find(|(x, e)| !*x && e.at >= cut_at)
        .unwrap()
        .1;
    assert_eq!(
        (b_down.to, b_down.cause),
        (State::Down, Some(DownCause::NeighborDown))
    );
    assert_eq!(b_down.at, down.at, "A tells B at once");

    // While still cut, the session comes Up again by the handshake (at
    // once here: the link has no delay) and fails by echo again, one echo
    // detection time after each Up.
    p.run_until(ms(6000));
    let cycles: Vec<Event> = p
        .events
        .iter()
        .filter(|(x, _)| *x)
        .map(|(_, e)| *e)
        .skip_while(|e| *e != down)
        .skip(1)
        .filter(|e| e.to == State::Up || e.from == State::Up)
        .collect();
    assert!(cycles.len() >= 2, "{cycles:?}");
    for pair in cycles.chunks(2) {
        if let [up, down] = pair {
            assert_eq!((up.to, down.diag), (State::Up, Diag::EchoFunctionFailed));
            assert_eq!(down.at - up.at, ms(150));
        }
    }
    // Repaired: Up for good, echoes flowing, and exactly the echoes sent
    // while cut are missing.
    p.cut_echo[0] = false;
    let restored = p.now;
    p.run_until(ms(10_000));
    let a = p.info_a();
    assert_eq!(a.state, State::Up);
    assert_eq!(a.echo_interval, ms(50));
    assert!(
        p.events
            .iter()
            .all(|(x, e)| !*x || e.at < restored + ms(3000) || e.to == State::Up)
    );
    assert!(echoes_between(&p, true, ms(9000), ms(10_000)) >= 20);
    let lost = echoes_between(&p, true, ms(3000), ms(6000)) as u64;
    assert_eq!(a.echo_sent - a.echo_received, lost);
}

/// Echo packets that are not ours, or for a session without echo, are
/// dropped and counted; they refresh nothing.
#[test]
fn foreign_echo_packets_are_dropped_and_counted() {
    let mut p = Pair::new(
        echo_profile(50, 50, 3, Some(50)),
        echo_profile(50, 50, 3, None),
    );
    p.run_until(ms(3000));
    let discr = NonZeroU32::new(p.info_a().local_discriminator).unwrap();
    let ours = EchoRepr {
        discriminator: discr,
        sequence: 1,
    }
    .to_bytes();
    // A's session has no echo active (B advertises 0).
    p.a.handle_echo(p.now, &ours);
    p.a.handle_echo(p.now, &[1, 24, 0, 0, 0, 0, 0, 1]);
    let other = EchoRepr {
        discriminator: discr.saturating_add(1),
        sequence: 1,
    }
    .to_bytes();
    p.a.handle_echo(p.now, &other);
    let s = p.a.stats();
    assert_eq!((s.echo_received, s.echo_dropped), (0, 3));
    assert_eq!(p.info_a().echo_received, 0);
}
