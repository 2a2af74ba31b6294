//! FSM scenarios: inputs at `t0 + Duration`, assertions on drained outputs.

use std::net::{IpAddr, Ipv4Addr};

use bytes::{BufMut, BytesMut};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::keyring::{Key, Keyring, Security};

type Rng = Xoshiro256PlusPlus;

fn name(i: usize) -> Name {
    Name::new(&format!("n{i}")).unwrap()
}

fn addr(i: usize) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8)), 7946)
}

fn config(i: usize) -> Config {
    Config::lan(name(i), addr(i), Security::Plaintext)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Node {
    swim: Swim<Rng>,
    timers: Vec<(Instant, Timer)>,
    events: Vec<Event>,
    sent: Vec<(SocketAddr, Packet)>,
    raw: Vec<(SocketAddr, Bytes)>,
    streams: Vec<(SocketAddr, Bytes)>,
}

impl Node {
    fn new(i: usize, now: Instant) -> Self {
        Self::with(config(i), now)
    }

    fn with(config: Config, now: Instant) -> Self {
        let mut n = Self {
            swim: Swim::new(config, Rng::seed_from_u64(7), now).unwrap(),
            timers: Vec::new(),
            events: Vec::new(),
            sent: Vec::new(),
            raw: Vec::new(),
            streams: Vec::new(),
        };
        n.drain();
        n
    }

    fn drain(&mut self) {
        while let Some(out) = self.swim.poll_output() {
            match out {
                Output::Send { to, packet } => {
                    let body =
                        envelope::open(&Security::Plaintext, Transport::Packet, &packet).unwrap();
                    self.sent.push((to, Packet::parse(&body).unwrap()));
                    self.raw.push((to, packet));
                }
                Output::Stream { to, frame } => self.streams.push((to, frame)),
                Output::Arm { at, timer } => self.timers.push((at, timer)),
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    /// The last armed timer of `kind`.
    fn timer(&self, kind: TimerKind) -> (Instant, Timer) {
        *self
            .timers
            .iter()
            .rev()
            .find(|(_, t)| t.kind() == kind)
            .unwrap_or_else(|| panic!("no {kind:?} timer"))
    }

    fn fire(&mut self, kind: TimerKind) -> Instant {
        let (at, t) = self.timer(kind);
        self.swim.handle_timer(at, t);
        self.drain();
        at
    }

    fn recv(&mut self, now: Instant, from: usize, p: &Packet) -> Result<(), InputError> {
        let mut body = BytesMut::new();
        p.emit(&mut body).unwrap();
        let data = envelope::seal(
            &Security::Plaintext,
            Transport::Packet,
            &mut Rng::seed_from_u64(0),
            body.len(),
            |b| b.put_slice(&body),
        )
        .unwrap();
        let r = self.swim.handle_packet(now, addr(from), &data);
        self.drain();
        r
    }

    /// Makes this node know members `others` as alive at incarnation 0,
    /// through a full-state message from the first of them; forgets the
    /// events it caused.
    fn know(&mut self, now: Instant, others: &[usize]) {
        self.hear_state(now, others);
        self.events.clear();
    }

    /// A full-state message from `others[0]` listing `others` alive at
    /// incarnation 0.
    fn hear_state(&mut self, now: Instant, others: &[usize]) {
        let state = PushPull {
            from: name(others[0]),
            addr: addr(others[0]),
            join: false,
            reply: false,
            members: others
                .iter()
                .map(|&i| Member {
                    name: name(i),
                    addr: addr(i),
                    incarnation: 0,
                    meta: Meta::default(),
                    state: State::Alive,
                })
                .collect(),
        };
        let frame = envelope::seal(
            &Security::Plaintext,
            Transport::Stream,
            &mut Rng::seed_from_u64(0),
            state.buffer_len(),
            |b| state.emit(b).unwrap(),
        )
        .unwrap();
        self.swim.handle_stream(now, &frame).unwrap();
        self.drain();
    }

    /// Runs this node alone in virtual time until `until`, each timer at
    /// its deadline; returns when each join frame went out, and where.
    fn run_alone(&mut self, until: Instant) -> Vec<(Instant, SocketAddr)> {
        self.run(until, None)
    }

    /// As [`Self::run_alone`], with member `peer` acking every ping at once.
    fn run(&mut self, until: Instant, peer: Option<usize>) -> Vec<(Instant, SocketAddr)> {
        let mut joins = Vec::new();
        while let Some(at) = self.swim.poll_timeout().filter(|at| *at <= until) {
            self.streams.clear();
            self.swim.handle_timeout(at);
            self.drain();
            if let Some(peer) = peer {
                for (to, p) in self.take_sent() {
                    if let (true, Message::Ping { seq, .. }) = (to == addr(peer), p.message) {
                        let ack = packet(peer, Message::Ack { seq }, vec![]);
                        self.recv(at, peer, &ack).unwrap();
                    }
                }
            }
            for (to, frame) in &self.streams {
                let body =
                    envelope::open(&Security::Plaintext, Transport::Stream, &frame[4..]).unwrap();
                if PushPull::parse(&body).unwrap().join {
                    joins.push((at, *to));
                }
            }
        }
        self.streams.clear();
        joins
    }

    fn take_sent(&mut self) -> Vec<(SocketAddr, Packet)> {
        self.raw.clear();
        std::mem::take(&mut self.sent)
    }
}

fn packet(from: usize, message: Message, updates: Vec<Update>) -> Packet {
    Packet {
        from: name(from),
        message,
        updates,
    }
}

#[test]
fn join_exchanges_state() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    let mut b = Node::new(2, t0);
    a.swim.join(t0, [addr(2), addr(1)]);
    a.drain();
    assert_eq!(a.streams.len(), 1, "no join to itself");
    let (to, frame) = a.streams.pop().unwrap();
    assert_eq!(to, addr(2));
    assert_eq!(frame::decode(&frame), Ok(Some(frame.len())));
    b.swim.handle_stream(t0, &frame).unwrap();
    b.drain();
    assert!(matches!(&b.events[..], [Event::Up(m)] if m.name == name(1)));
    let (to, reply) = b.streams.pop().unwrap();
    assert_eq!(to, addr(1));
    a.swim.handle_stream(t0, &reply).unwrap();
    a.drain();
    assert!(matches!(&a.events[..], [Event::Up(m)] if m.name == name(2)));
    // The reply asked for none back.
    assert!(a.streams.is_empty());
    assert_eq!(a.swim.num_up(), 1);
    // A truncated or mislabelled frame is dropped.
    assert_eq!(
        a.swim.handle_stream(t0, &reply[..reply.len() - 1]),
        Err(InputError::Frame)
    );
    assert!(matches!(
        a.swim.handle_stream(t0, &[0, 0, 0, 2, 1, 0]),
        Err(InputError::Open(OpenError::WrongTransport))
    ));
}

#[test]
fn direct_probe_ack() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    let mut b = Node::new(2, t0);
    a.know(t0, &[2]);
    let at = a.fire(TimerKind::Probe);
    let sent = a.take_sent();
    let [(to, ping)] = &sent[..] else {
        panic!("{sent:?}")
    };
    assert_eq!(*to, addr(2));
    let Message::Ping { seq, ref target } = ping.message else {
        panic!()
    };
    assert_eq!(*target, name(2));
    b.recv(at + ms(1), 1, ping).unwrap();
    let acks = b.take_sent();
    assert_eq!(acks[0].0, addr(1));
    assert_eq!(acks[0].1.message, Message::Ack { seq });
    a.recv(at + ms(2), 2, &acks[0].1).unwrap();
    // The probe's timers are now stale.
    let (dl, t) = a.timer(TimerKind::ProbeDeadline);
    a.swim.handle_timer(dl, t);
    assert_eq!(a.swim.stats().stale_timers, 1);
    assert_eq!(a.swim.stats().probe_failures, 0);
    assert!(a.events.is_empty());
    // The next probe round is one interval after the last.
    assert_eq!(a.timer(TimerKind::Probe).0, at + ms(100));
}

#[test]
fn indirect_probe_through_relay() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    let mut relay = Node::new(2, t0);
    let mut c = Node::new(3, t0);
    a.know(t0, &[2, 3]);
    // Probe until the target is 3.
    let (at, seq) = loop {
        let at = a.fire(TimerKind::Probe);
        let sent = a.take_sent();
        if let Message::Ping { seq, target } = &sent[0].1.message
            && *target == name(3)
        {
            break (at, *seq);
        }
        // Answer the probe of 2 so it does not linger.
        relay.recv(at, 1, &sent[0].1).unwrap();
        let ack = relay.take_sent();
        a.recv(at, 2, &ack[0].1).unwrap();
    };
    // The direct ping is lost; at the timeout, a retry and a ping-req.
    let timeout = a.fire(TimerKind::ProbeTimeout);
    assert_eq!(timeout, at + ms(40));
    let sent = a.take_sent();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0].0, addr(3));
    assert_eq!(sent[1].0, addr(2));
    let Message::PingReq {
        seq: s,
        target,
        addr: a3,
    } = &sent[1].1.message
    else {
        panic!("{sent:?}")
    };
    assert_eq!((*s, target, *a3), (seq, &name(3), addr(3)));
    // The relay pings 3, which answers; the relay forwards the ack.
    relay.recv(timeout + ms(1), 1, &sent[1].1).unwrap();
    let relayed = relay.take_sent();
    assert_eq!(relayed[0].0, addr(3));
    c.recv(timeout + ms(2), 2, &relayed[0].1).unwrap();
    let ack = c.take_sent();
    relay.recv(timeout + ms(3), 3, &ack[0].1).unwrap();
    let fwd = relay.take_sent();
    assert_eq!(fwd[0].0, addr(1));
    assert_eq!(fwd[0].1.message, Message::Ack { seq });
    a.recv(timeout + ms(4), 2, &fwd[0].1).unwrap();
    let (dl, t) = a.timer(TimerKind::ProbeDeadline);
    a.swim.handle_timer(dl, t);
    a.drain();
    assert!(a.events.is_empty());
    assert_eq!(a.swim.stats().probe_failures, 0);
    // The relay's nack timer is stale too.
    let (rl, t) = relay.timer(TimerKind::RelayDeadline);
    relay.swim.handle_timer(rl, t);
    relay.drain();
    assert!(relay.take_sent().is_empty());
}

/// Probes member 3 of a node knowing 2 and 3 until 3 is the target, and
/// lets the direct ping and its retry go unanswered.
fn probe_dead(a: &mut Node, relay: &mut Node) -> (Seq, Packet) {
    loop {
        let at = a.fire(TimerKind::Probe);
        let sent = a.take_sent();
        if let Message::Ping { target, seq } = &sent[0].1.message
            && *target == name(3)
        {
            let seq = *seq;
            a.fire(TimerKind::ProbeTimeout);
            let req = a.take_sent().pop().unwrap().1;
            return (seq, req);
        }
        relay.recv(at, 1, &sent[0].1).unwrap();
        let ack = relay.take_sent();
        a.recv(at, 2, &ack[0].1).unwrap();
    }
}

#[test]
fn failed_probe_with_nack_suspects_without_blaming_self() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    let mut relay = Node::new(2, t0);
    relay.know(t0, &[1, 3]);
    a.know(t0, &[2, 3]);
    let (seq, req) = probe_dead(&mut a, &mut relay);
    relay.recv(t0, 1, &req).unwrap();
    relay.take_sent();
    relay.fire(TimerKind::RelayDeadline);
    let nack = relay.take_sent();
    assert_eq!(nack[0].1.message, Message::Nack { seq });
    a.recv(t0, 2, &nack[0].1).unwrap();
    a.fire(TimerKind::ProbeDeadline);
    assert!(matches!(&a.events[..], [Event::Suspect(m)] if m.name == name(3)));
    assert_eq!(a.swim.health_multiplier(), 1, "the nack came back");
    // Buddy system: the suspect is told at once, directly.
    let sent = a.take_sent();
    let told = sent.iter().find(|(to, _)| *to == addr(3)).unwrap();
    assert!(matches!(
        &told.1.updates[0],
        Update::Suspect { name: n, incarnation: 0, from } if *n == name(3) && *from == name(1)
    ));
    // With 3 members, one confirmation is expected: the max timeout.
    let (at, _) = a.timer(TimerKind::Suspicion);
    let (dl, _) = a.timer(TimerKind::ProbeDeadline);
    assert_eq!(at, dl + ms(1000));
}

#[test]
fn failed_probe_without_nack_lowers_health() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    let mut relay = Node::new(2, t0);
    a.know(t0, &[2, 3]);
    probe_dead(&mut a, &mut relay);
    a.fire(TimerKind::ProbeDeadline);
    assert_eq!(a.swim.health_multiplier(), 2);
    // Lifeguard: the next probe round is stretched.
    let (next, _) = a.timer(TimerKind::Probe);
    let at = a.fire(TimerKind::Probe);
    assert_eq!(at, next);
    assert_eq!(a.timer(TimerKind::Probe).0, at + ms(200));
    assert_eq!(a.timer(TimerKind::ProbeTimeout).0, at + ms(80));
}

#[test]
fn suspicion_is_refuted_by_the_suspect() {
    let t0 = Instant::now();
    let mut b = Node::new(2, t0);
    b.know(t0, &[1]);
    // A ping carrying a suspicion about b itself (buddy system).
    let ping = packet(
        1,
        Message::Ping {
            seq: 9,
            target: name(2),
        },
        vec![Update::Suspect {
            name: name(2),
            incarnation: 0,
            from: name(1),
        }],
    );
    b.recv(t0, 1, &ping).unwrap();
    assert_eq!(b.swim.local().incarnation, 1);
    assert_eq!(b.swim.stats().refutations, 1);
    // The ack carries the refutation.
    let sent = b.take_sent();
    assert_eq!(sent[0].1.message, Message::Ack { seq: 9 });
    assert!(matches!(
        &sent[0].1.updates[0],
        Update::Alive { name: n, incarnation: 1, .. } if *n == name(2)
    ));
    // Older news about b changes nothing.
    let stale = packet(
        1,
        Message::Gossip,
        vec![Update::Dead {
            name: name(2),
            incarnation: 0,
            from: name(1),
        }],
    );
    b.recv(t0, 1, &stale).unwrap();
    assert_eq!(b.swim.local().incarnation, 1);
}

#[test]
fn suspect_then_alive_then_dead_events() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2, 3, 4, 5, 6]);
    let suspect = |inc, from| Update::Suspect {
        name: name(3),
        incarnation: inc,
        from: name(from),
    };
    a.recv(t0, 2, &packet(2, Message::Gossip, vec![suspect(0, 2)]))
        .unwrap();
    assert!(matches!(&a.events[..], [Event::Suspect(_)]));
    // Confirmation probe of the suspect, carrying the suspicion.
    let sent = a.take_sent();
    let ping = sent.iter().find(|(to, _)| *to == addr(3)).unwrap();
    assert!(matches!(ping.1.message, Message::Ping { .. }));
    assert_eq!(ping.1.updates[0], suspect(0, 2));
    // 6 members: K = 3 confirmations expected, none yet: the max.
    let (at, _) = a.timer(TimerKind::Suspicion);
    assert_eq!(at, t0 + ms(1000));
    // Two independent confirmations shorten it (Lifeguard §IV-B).
    a.recv(
        t0 + ms(10),
        4,
        &packet(4, Message::Gossip, vec![suspect(0, 4)]),
    )
    .unwrap();
    a.recv(
        t0 + ms(20),
        5,
        &packet(5, Message::Gossip, vec![suspect(0, 5)]),
    )
    .unwrap();
    // A repeated confirmer counts once.
    a.recv(
        t0 + ms(30),
        5,
        &packet(5, Message::Gossip, vec![suspect(0, 5)]),
    )
    .unwrap();
    let expected = lifeguard_timeout(ms(250), ms(1000), 3, 2);
    assert_eq!(a.timer(TimerKind::Suspicion).0, t0 + expected);
    // The refutation clears it.
    let alive = Update::Alive {
        name: name(3),
        incarnation: 1,
        addr: addr(3),
        meta: Meta::default(),
    };
    a.recv(t0 + ms(40), 3, &packet(3, Message::Gossip, vec![alive]))
        .unwrap();
    assert!(matches!(&a.events[1..], [Event::Alive(m)] if m.incarnation == 1));
    let (at, t) = a.timer(TimerKind::Suspicion);
    a.swim.handle_timer(at, t);
    a.drain();
    assert_eq!(a.events.len(), 2, "the old suspicion timer is stale");
    // A new suspicion at the new incarnation, left to time out.
    a.recv(
        t0 + ms(50),
        2,
        &packet(2, Message::Gossip, vec![suspect(1, 2)]),
    )
    .unwrap();
    a.fire(TimerKind::Suspicion);
    assert!(matches!(&a.events[2..], [Event::Suspect(_), Event::Down(m)] if m.incarnation == 1));
    assert_eq!(a.swim.member("n3").unwrap().state, State::Dead);
    // Dead is final for this incarnation: a suspicion changes nothing.
    a.recv(
        t0 + ms(60),
        2,
        &packet(2, Message::Gossip, vec![suspect(1, 2)]),
    )
    .unwrap();
    assert_eq!(a.events.len(), 4);
}

#[test]
fn lifeguard_timeout_curve() {
    let (min, max) = (ms(250), ms(1000));
    assert_eq!(lifeguard_timeout(min, max, 0, 0), min);
    assert_eq!(lifeguard_timeout(min, max, 3, 0), max);
    assert_eq!(lifeguard_timeout(min, max, 3, 3), min);
    assert_eq!(lifeguard_timeout(min, max, 3, 9), min);
    // log(2) / log(4) = 1/2 of the span.
    let one = lifeguard_timeout(min, max, 3, 1);
    assert!(one.abs_diff(ms(625)) < Duration::from_micros(1), "{one:?}");
    let two = lifeguard_timeout(min, max, 3, 2);
    assert!(two < one && two > min);
}

#[test]
fn leave_tells_everyone_then_only_acks() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2, 3, 4]);
    a.swim.leave(t0);
    a.drain();
    let sent = a.take_sent();
    let mut to: Vec<SocketAddr> = sent.iter().map(|(t, _)| *t).collect();
    to.sort();
    assert_eq!(to, vec![addr(2), addr(3), addr(4)]);
    for (_, p) in &sent {
        assert!(matches!(&p.updates[0], Update::Left { name: n, .. } if *n == name(1)));
    }
    let ping = packet(
        2,
        Message::Ping {
            seq: 1,
            target: name(1),
        },
        vec![Update::Dead {
            name: name(3),
            incarnation: 0,
            from: name(2),
        }],
    );
    a.recv(t0, 2, &ping).unwrap();
    assert_eq!(a.take_sent()[0].1.message, Message::Ack { seq: 1 });
    assert!(a.events.is_empty(), "updates are ignored after leaving");
    // The receiving side: Left, not Down, and at once.
    let mut b = Node::new(2, t0);
    b.know(t0, &[1, 3]);
    b.recv(t0, 1, &sent[0].1).unwrap();
    assert!(matches!(&b.events[0], Event::Left(m) if m.name == name(1)));
    assert!(!b.events.iter().any(|e| matches!(e, Event::Down(_))));
}

#[test]
fn misdirected_ping_is_dropped() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    let ping = packet(
        2,
        Message::Ping {
            seq: 1,
            target: name(7),
        },
        vec![],
    );
    assert_eq!(
        a.recv(t0, 2, &ping),
        Err(InputError::Misdirected { target: name(7) })
    );
    assert!(a.take_sent().is_empty());
    assert_eq!(a.swim.stats().misdirected, 1);
}

#[test]
fn late_timers_mean_we_were_paused() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2]);
    a.fire(TimerKind::Probe);
    // The driver wakes 300 ms late (a GC pause): the probe proves
    // nothing, and nobody is suspected.
    let (at, t) = a.timer(TimerKind::ProbeTimeout);
    a.swim.handle_timer(at + ms(300), t);
    a.drain();
    let (at, t) = a.timer(TimerKind::ProbeDeadline);
    a.swim.handle_timer(at + ms(300), t);
    a.drain();
    assert!(a.events.is_empty());
    assert_eq!(a.swim.stats().late_timers, 1);
    assert_eq!(a.swim.health_multiplier(), 2);
}

#[test]
fn late_suspicion_timer_gets_grace() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2, 3]);
    let suspect = Update::Suspect {
        name: name(3),
        incarnation: 0,
        from: name(2),
    };
    a.recv(t0, 2, &packet(2, Message::Gossip, vec![suspect]))
        .unwrap();
    let (at, t) = a.timer(TimerKind::Suspicion);
    a.swim.handle_timer(at + ms(500), t);
    a.drain();
    assert!(!a.events.iter().any(|e| matches!(e, Event::Down(_))));
    // The refutation that was waiting is read; the grace timer is stale.
    let alive = Update::Alive {
        name: name(3),
        incarnation: 1,
        addr: addr(3),
        meta: Meta::default(),
    };
    a.recv(at + ms(500), 3, &packet(3, Message::Gossip, vec![alive]))
        .unwrap();
    a.fire(TimerKind::Suspicion);
    assert!(!a.events.iter().any(|e| matches!(e, Event::Down(_))));
}

#[test]
fn handle_timeout_fires_due_timers() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2]);
    // Gossip of what `know` taught is due at once.
    assert_eq!(a.swim.poll_timeout(), Some(t0));
    let (next, _) = a.timer(TimerKind::Probe);
    a.swim.handle_timeout(next);
    a.drain();
    assert_eq!(a.swim.stats().probes, 1);
    assert!(a.swim.poll_timeout().unwrap() > next);
    // Nothing due yet: nothing happens.
    let sent = a.take_sent().len();
    a.swim.handle_timeout(next);
    a.drain();
    assert_eq!(a.swim.stats().probes, 1);
    assert_eq!(a.take_sent().len(), 0);
    assert!(sent > 0);
}

#[test]
fn metadata_change_is_an_update() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2]);
    let meta = Meta::new(&b"node-2 10.0.0.2"[..]).unwrap();
    let alive = |inc, meta: Meta| Update::Alive {
        name: name(2),
        incarnation: inc,
        addr: addr(2),
        meta,
    };
    a.recv(
        t0,
        2,
        &packet(2, Message::Gossip, vec![alive(1, meta.clone())]),
    )
    .unwrap();
    assert!(matches!(&a.events[..], [Event::Updated(m)] if m.meta == meta));
    // Same incarnation again: nothing new.
    a.recv(
        t0,
        2,
        &packet(2, Message::Gossip, vec![alive(1, Meta::default())]),
    )
    .unwrap();
    assert_eq!(a.events.len(), 1);
    // Our own metadata: a higher incarnation, gossiped.
    a.swim.set_metadata(t0, meta.clone());
    a.drain();
    assert_eq!(a.swim.local().incarnation, 1);
    a.fire(TimerKind::Gossip);
    let sent = a.take_sent();
    assert!(sent.iter().any(|(_, p)| {
        p.updates
            .iter()
            .any(|u| matches!(u, Update::Alive { name: n, incarnation: 1, .. } if *n == name(1)))
    }));
}

#[test]
fn encrypted_nodes_talk_and_count_failures() {
    let t0 = Instant::now();
    let keyed = |i, k: u8| {
        let mut c = config(i);
        c.security = Security::Encrypted(Keyring::new(Key::new([k; 32])));
        let mut s = Swim::new(c, Rng::seed_from_u64(i as u64), t0).unwrap();
        while s.poll_output().is_some() {}
        s
    };
    let mut a = keyed(1, 1);
    let mut b = keyed(2, 1);
    let mut c = keyed(3, 2);
    a.join(t0, [addr(2)]);
    let Some(Output::Stream { frame, .. }) = a.poll_output() else {
        panic!()
    };
    b.handle_stream(t0, &frame).unwrap();
    assert_eq!(b.num_up(), 1);
    assert!(matches!(
        c.handle_stream(t0, &frame),
        Err(InputError::Open(OpenError::UnknownKey { .. }))
    ));
    assert_eq!(c.num_up(), 0);
    assert_eq!(c.stats().unknown_key, 1);
    assert!(c.keyring().is_some());
}

#[test]
fn invalid_config_is_refused() {
    let mut c = config(1);
    c.suspicion_max = ms(1);
    assert!(matches!(
        Swim::new(c, Rng::seed_from_u64(0), Instant::now()),
        Err(ConfigError::Suspicion)
    ));
}

#[test]
fn stale_news_about_us_gets_the_refutation_back() {
    let t0 = Instant::now();
    let mut b = Node::new(2, t0);
    b.know(t0, &[1, 3]);
    let suspect = Update::Suspect {
        name: name(2),
        incarnation: 0,
        from: name(1),
    };
    b.recv(t0, 1, &packet(1, Message::Gossip, vec![suspect.clone()]))
        .unwrap();
    assert_eq!(b.swim.local().incarnation, 1);
    b.take_sent();
    // Member 3 missed the refutation: its ping still carries the old
    // suspicion, and the ack answers it first thing.
    let ping = Message::Ping {
        seq: 4,
        target: name(2),
    };
    b.recv(t0, 3, &packet(3, ping, vec![suspect])).unwrap();
    let sent = b.take_sent();
    assert_eq!(sent[0].1.message, Message::Ack { seq: 4 });
    assert!(matches!(
        &sent[0].1.updates[0],
        Update::Alive { name: n, incarnation: 1, .. } if *n == name(2)
    ));
    // Gossip of an old death: answered directly.
    let dead = Update::Dead {
        name: name(2),
        incarnation: 0,
        from: name(3),
    };
    b.recv(t0, 3, &packet(3, Message::Gossip, vec![dead]))
        .unwrap();
    let sent = b.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, addr(3));
    assert!(matches!(
        &sent[0].1.updates[0],
        Update::Alive { name: n, incarnation: 1, .. } if *n == name(2)
    ));
    assert_eq!(b.swim.local().incarnation, 1, "no new refutation");
}

/// A member that missed another's restart (its alive at a new
/// incarnation) and still gossips the old death gets the alive back from
/// whoever knows it, on an ack or in a datagram of its own; news that is
/// not stale is not answered.
#[test]
fn stale_news_about_another_gets_its_newer_alive_back() {
    let t0 = Instant::now();
    let mut b = Node::new(2, t0);
    b.know(t0, &[1, 3, 4]);
    let alive = Update::Alive {
        name: name(3),
        incarnation: 1,
        addr: addr(3),
        meta: Meta::default(),
    };
    b.recv(t0, 3, &packet(3, Message::Gossip, vec![alive.clone()]))
        .unwrap();
    b.take_sent();
    let dead = Update::Dead {
        name: name(3),
        incarnation: 0,
        from: name(4),
    };
    b.recv(t0, 1, &packet(1, Message::Gossip, vec![dead]))
        .unwrap();
    let sent = b.take_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, addr(1));
    assert_eq!(sent[0].1.updates[0], alive);
    assert_eq!(b.swim.member(name(3).as_str()).unwrap().state, State::Alive);
    // On a ping, the ack carries it.
    let suspect = Update::Suspect {
        name: name(3),
        incarnation: 0,
        from: name(4),
    };
    let ping = Message::Ping {
        seq: 9,
        target: name(2),
    };
    b.recv(t0, 4, &packet(4, ping, vec![suspect])).unwrap();
    let sent = b.take_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].1.message, Message::Ack { seq: 9 });
    assert_eq!(sent[0].1.updates[0], alive);
    // A suspicion of the current incarnation is news, not stale.
    let suspect = Update::Suspect {
        name: name(3),
        incarnation: 1,
        from: name(4),
    };
    b.recv(t0, 4, &packet(4, Message::Gossip, vec![suspect]))
        .unwrap();
    assert!(b.take_sent().iter().all(|(to, _)| *to != addr(4)));
    assert_eq!(
        b.swim.member(name(3).as_str()).unwrap().state,
        State::Suspect
    );
}

#[test]
fn answering_suspect_is_probed_again() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2, 3, 4, 5, 6]);
    let suspect = Update::Suspect {
        name: name(3),
        incarnation: 0,
        from: name(2),
    };
    a.recv(t0, 2, &packet(2, Message::Gossip, vec![suspect.clone()]))
        .unwrap();
    let sent = a.take_sent();
    let (_, ping) = sent.iter().find(|(to, _)| *to == addr(3)).unwrap();
    let Message::Ping { seq, .. } = ping.message else {
        panic!("{ping:?}")
    };
    // It answers, yet no refutation came with the ack.
    a.recv(t0 + ms(1), 3, &packet(3, Message::Ack { seq }, vec![]))
        .unwrap();
    let (at, _) = a.timer(TimerKind::Confirm);
    assert_eq!(at, t0 + ms(101));
    a.fire(TimerKind::Confirm);
    let sent = a.take_sent();
    let (_, again) = sent.iter().find(|(to, _)| *to == addr(3)).unwrap();
    assert!(matches!(again.message, Message::Ping { .. }));
    assert_eq!(again.updates[0], suspect);
}

/// The rejoin delays: the k-th (from 0) is drawn from [d/2, d] with
/// d = min(rejoin_max, rejoin_min · 2^k).
fn rejoin_bounds(c: &Config, k: u32) -> (Duration, Duration) {
    let d = c
        .rejoin_min
        .saturating_mul(1 << k.min(31))
        .min(c.rejoin_max);
    (d / 2, d)
}

#[test]
fn rejoin_backs_off_with_jitter_up_to_the_cap() {
    let t0 = Instant::now();
    let c = config(1);
    let mut a = Node::with(c.clone(), t0);
    a.swim.join(t0, [addr(2)]);
    a.drain();
    assert_eq!(a.streams.len(), 1, "the join goes out at once");
    a.streams.clear();
    assert!(
        a.events.is_empty(),
        "not isolated before a join went unanswered"
    );
    let joins = a.run_alone(t0 + Duration::from_secs(120));
    assert!(joins.iter().all(|(_, to)| *to == addr(2)));
    let mut last = t0;
    let mut capped = Vec::new();
    for (k, (at, _)) in joins.iter().enumerate() {
        let gap = *at - last;
        let (lo, hi) = rejoin_bounds(&c, u32::try_from(k).unwrap());
        assert!(
            lo <= gap && gap <= hi,
            "rejoin {k}: {gap:?} not in {lo:?}..={hi:?}"
        );
        if hi == c.rejoin_max {
            capped.push(gap);
        }
        last = *at;
    }
    // 0.25-0.5, 0.5-1, 1-2, 2-4, 4-8 s, then 5-10 s: at least 11 in 120 s.
    assert!(joins.len() >= 11 && capped.len() >= 6, "{joins:?}");
    capped.sort();
    assert!(
        capped[0] < capped[capped.len() - 1],
        "no jitter: {capped:?}"
    );
    assert_eq!(a.swim.stats().rejoins, joins.len() as u64);
    // Isolated once, when the first rejoin found the join unanswered.
    assert_eq!(a.events, [Event::Isolated]);
    assert!(a.swim.isolated());
    assert_eq!(a.swim.stats().isolations, 1);

    // The seed answers: connected, and the rejoins stop.
    let now = last + ms(1);
    a.hear_state(now, &[2]);
    assert!(matches!(
        &a.events[..],
        [Event::Isolated, Event::Up(_), Event::Connected]
    ));
    assert!(!a.swim.isolated());
    a.events.clear();
    let until = now + Duration::from_secs(30);
    assert!(
        a.run(until, Some(2)).is_empty(),
        "rejoin while the seed is up"
    );
    assert!(a.events.is_empty(), "{:?}", a.events);

    // The seed's member dies: isolated at once (the failure detector
    // established it), and the backoff starts over from rejoin_min.
    let dead = Update::Dead {
        name: name(2),
        incarnation: 0,
        from: name(3),
    };
    let now = until + ms(1);
    a.recv(now, 3, &packet(3, Message::Gossip, vec![dead]))
        .unwrap();
    assert!(a.events.ends_with(&[Event::Isolated]), "{:?}", a.events);
    let joins = a.run_alone(now + Duration::from_secs(2));
    let (lo, hi) = rejoin_bounds(&c, 0);
    let gap = joins[0].0 - now;
    assert!(lo <= gap && gap <= hi, "{gap:?}");
    assert_eq!(a.swim.stats().isolations, 2);
}

#[test]
fn rejoin_only_the_seeds_without_a_live_member() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2]);
    a.swim.join(t0, [addr(2), addr(3), addr(1)]);
    a.drain();
    let to: Vec<SocketAddr> = a.streams.drain(..).map(|(to, _)| to).collect();
    assert_eq!(to, [addr(3)], "member 2 is up, 1 is this node");
    let joins = a.run(t0 + ms(900), Some(2));
    assert!(!joins.is_empty() && joins.iter().all(|(_, to)| *to == addr(3)));
    // Member 2 is up: not isolated, even though a seed is missing.
    assert!(!a.swim.isolated() && a.events.is_empty());
    // New seeds replace the old ones: without 3, no more rejoins.
    a.swim.join(t0 + ms(900), [addr(2)]);
    a.drain();
    assert!(a.streams.is_empty());
    assert!(a.run(t0 + Duration::from_secs(30), Some(2)).is_empty());
    assert_eq!(a.swim.seeds().collect::<Vec<_>>(), [&addr(2)]);
}

#[test]
fn no_seeds_no_isolation() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    assert!(a.run_alone(t0 + Duration::from_secs(60)).is_empty());
    assert!(!a.swim.isolated() && a.events.is_empty());
    // A join answered before the first rejoin is no isolation either.
    a.swim.join(t0 + Duration::from_secs(60), [addr(2)]);
    a.hear_state(t0 + Duration::from_secs(60) + ms(2), &[2]);
    assert!(matches!(&a.events[..], [Event::Up(_)]), "{:?}", a.events);
    assert_eq!(a.swim.stats().rejoins, 0);
    // Seeds set to none: an isolation ends too.
    let mut b = Node::new(2, t0);
    b.swim.join(t0, [addr(1)]);
    b.run_alone(t0 + Duration::from_secs(1));
    assert!(b.swim.isolated());
    b.swim.join(t0 + Duration::from_secs(1), []);
    b.drain();
    assert!(!b.swim.isolated());
    assert_eq!(b.events, [Event::Isolated, Event::Connected]);
}

#[test]
fn forged_death_at_the_largest_incarnation_is_refuted() {
    let t0 = Instant::now();
    // b's incarnation is near the top (say it came from a clock far ahead).
    let mut bc = config(2);
    bc.incarnation = u32::MAX - 1;
    let mut b = Node::with(bc, t0);
    b.know(t0, &[1]);
    let mut a = Node::new(1, t0);
    let alive = |inc| Update::Alive {
        name: name(2),
        incarnation: inc,
        addr: addr(2),
        meta: Meta::default(),
    };
    a.recv(
        t0,
        2,
        &packet(2, Message::Gossip, vec![alive(u32::MAX - 1)]),
    )
    .unwrap();
    a.events.clear();
    // A buggy or stale member declares b dead at u32::MAX, the largest
    // incarnation there is.
    let forged = |inc| Update::Dead {
        name: name(2),
        incarnation: inc,
        from: name(3),
    };
    a.recv(t0, 3, &packet(3, Message::Gossip, vec![forged(u32::MAX)]))
        .unwrap();
    assert!(matches!(&a.events[..], [Event::Down(_)]));
    b.recv(t0, 3, &packet(3, Message::Gossip, vec![forged(u32::MAX)]))
        .unwrap();
    // b refutes with the next incarnation, which wraps to 0 ...
    assert_eq!(b.swim.local().incarnation, 0);
    b.fire(TimerKind::Gossip);
    let refutation = b
        .take_sent()
        .into_iter()
        .flat_map(|(_, p)| p.updates)
        .find(|u| *u.name() == name(2))
        .unwrap();
    assert_eq!(refutation, alive(0));
    // ... and 0 is newer than u32::MAX: a takes b back.
    a.recv(t0 + ms(1), 2, &packet(2, Message::Gossip, vec![refutation]))
        .unwrap();
    assert!(matches!(&a.events[..], [Event::Down(_), Event::Up(m)] if m.incarnation == 0));
    assert_eq!(a.swim.member("n2").unwrap().state, State::Alive);
    // Again at the new incarnation: refuted again.
    b.recv(t0 + ms(2), 3, &packet(3, Message::Gossip, vec![forged(0)]))
        .unwrap();
    assert_eq!(b.swim.local().incarnation, 1);

    // A member at a low incarnation: u32::MAX is 2^32 - 1 steps ahead,
    // that is one behind in serial arithmetic, so the forgery is stale
    // news, ignored everywhere.
    let mut c = Node::new(3, t0);
    c.know(t0, &[2]);
    c.recv(t0, 4, &packet(4, Message::Gossip, vec![forged(u32::MAX)]))
        .unwrap();
    assert!(c.events.is_empty());
    assert_eq!(c.swim.member("n2").unwrap().state, State::Alive);
    let mut d = Node::new(2, t0);
    d.know(t0, &[1]);
    d.recv(t0, 4, &packet(4, Message::Gossip, vec![forged(u32::MAX)]))
        .unwrap();
    assert_eq!(d.swim.local().incarnation, 0, "nothing to refute");
}

/// A restart whose initial incarnation is lower than the previous life's
/// (a clock stepped back, or no clock at all): the others hand the old
/// incarnation back in the join reply, and the member outbids it, with its
/// new metadata.
#[test]
fn restart_with_a_lower_incarnation_is_taken_back() {
    let t0 = Instant::now();
    for previous in [State::Alive, State::Dead, State::Left] {
        let mut b = Node::new(2, t0);
        // b remembers a's previous life at incarnation 1000.
        let old = Update::Alive {
            name: name(1),
            incarnation: 1000,
            addr: addr(1),
            meta: Meta::new(&b"old"[..]).unwrap(),
        };
        b.recv(t0, 1, &packet(1, Message::Gossip, vec![old]))
            .unwrap();
        let end = match previous {
            State::Dead => Some(Update::Dead {
                name: name(1),
                incarnation: 1000,
                from: name(2),
            }),
            State::Left => Some(Update::Left {
                name: name(1),
                incarnation: 1000,
            }),
            _ => None,
        };
        if let Some(u) = end {
            b.recv(t0, 3, &packet(3, Message::Gossip, vec![u])).unwrap();
        }
        b.events.clear();
        b.take_sent();

        // a restarts at incarnation 0 with new metadata and joins b.
        let mut ac = config(1);
        ac.meta = Meta::new(&b"new"[..]).unwrap();
        let mut a = Node::with(ac, t0 + ms(10));
        a.swim.join(t0 + ms(10), [addr(2)]);
        a.drain();
        let (_, join) = a.streams.pop().unwrap();
        b.swim.handle_stream(t0 + ms(11), &join).unwrap();
        b.drain();
        // Its statement at 0 is stale news for b ...
        assert!(b.events.is_empty(), "{previous}: {:?}", b.events);
        let (_, reply) = b.streams.pop().unwrap();
        a.swim.handle_stream(t0 + ms(12), &reply).unwrap();
        a.drain();
        // ... and b's reply tells a about its previous life: a outbids it.
        assert_eq!(a.swim.local().incarnation, 1001, "{previous}");
        assert_eq!(a.swim.local().meta.as_bytes().as_ref(), b"new");
        a.fire(TimerKind::Gossip);
        for (to, p) in a.take_sent() {
            assert_eq!(to, addr(2));
            b.recv(t0 + ms(13), 1, &p).unwrap();
        }
        let m = b.swim.member("n1").unwrap();
        assert_eq!((m.state, m.incarnation), (State::Alive, 1001), "{previous}");
        assert_eq!(m.meta.as_bytes().as_ref(), b"new");
        match previous {
            State::Alive => assert!(matches!(&b.events[..], [Event::Updated(_)])),
            _ => assert!(matches!(&b.events[..], [Event::Up(_)]), "{:?}", b.events),
        }
    }
}

#[test]
fn member_table_is_bounded() {
    let t0 = Instant::now();
    let mut c = config(1);
    c.max_members = 4;
    let mut a = Node::with(c, t0);
    // One full-state message naming 10 members: 4 are taken.
    a.hear_state(t0, &(2..12).collect::<Vec<_>>());
    assert_eq!(a.swim.members().count(), 4);
    assert_eq!(a.swim.stats().members_rejected, 6);
    assert_eq!(a.events.len(), 4);
    a.events.clear();
    // A gossiped newcomer is dropped too, and not passed on.
    let newcomer = Update::Alive {
        name: name(20),
        incarnation: 0,
        addr: addr(20),
        meta: Meta::default(),
    };
    a.take_sent();
    a.recv(t0, 2, &packet(2, Message::Gossip, vec![newcomer.clone()]))
        .unwrap();
    assert!(a.swim.member("n20").is_none() && a.events.is_empty());
    assert_eq!(a.swim.stats().members_rejected, 7);
    a.fire(TimerKind::Gossip);
    assert!(
        a.take_sent()
            .iter()
            .all(|(_, p)| p.updates.iter().all(|u| *u.name() != name(20)))
    );
    // Once a member is dead, a newcomer takes its place.
    let dead = Update::Dead {
        name: name(3),
        incarnation: 0,
        from: name(2),
    };
    a.recv(
        t0 + ms(1),
        2,
        &packet(2, Message::Gossip, vec![dead, newcomer]),
    )
    .unwrap();
    assert!(a.swim.member("n3").is_none());
    assert_eq!(a.swim.member("n20").unwrap().state, State::Alive);
    assert_eq!(a.swim.members().count(), 4);
    assert_eq!(a.swim.stats().members_evicted, 1);
}

/// The counts kept as members change state (members up, up addresses,
/// seeds missing, the slot index) equal a recount of the table.
fn assert_books(swim: &Swim<Rng>) {
    let up: Vec<&Member> = swim.members().filter(|m| m.state.is_up()).collect();
    assert_eq!(swim.num_up(), up.len());
    let mut addrs: BTreeMap<SocketAddr, u32> = BTreeMap::new();
    for m in &up {
        *addrs.entry(m.addr).or_default() += 1;
    }
    assert_eq!(swim.up_addrs, addrs);
    let missing = swim.seeds.iter().filter(|s| !addrs.contains_key(s)).count();
    assert_eq!(swim.seeds_missing, missing);
    assert_eq!(swim.slots.len(), swim.members.len());
    for (slot, name) in swim.slots.iter().enumerate() {
        assert_eq!(swim.members[name].slot, slot, "{name}");
    }
    let pending = &swim.probe_order[swim.probe_next.min(swim.probe_order.len())..];
    for e in swim.members.values().filter(|e| e.queued) {
        assert!(pending.contains(&e.member.name), "{}", e.member.name);
    }
}

/// Random updates from a peer (alive at new addresses, suspicions,
/// deaths, leaves, at random incarnations), reaps and evictions from a
/// small table: the books stay exact after every input.
#[test]
fn member_counts_follow_every_change() {
    let t0 = Instant::now();
    let mut c = config(1);
    c.max_members = 12;
    c.dead_retention = ms(300);
    let mut a = Node::with(c, t0);
    a.swim.join(t0, [addr(2), addr(3), addr(40)]);
    a.drain();
    assert_books(&a.swim);
    let mut rng = Rng::seed_from_u64(11);
    let mut now = t0;
    for step in 0..3000 {
        now += ms(1);
        let who = 2 + index(&mut rng, 18);
        let incarnation = u32::try_from(index(&mut rng, 4)).unwrap();
        let update = match index(&mut rng, 4) {
            0 => Update::Alive {
                name: name(who),
                incarnation,
                // Sometimes at another member's address.
                addr: addr(2 + index(&mut rng, 40)),
                meta: Meta::default(),
            },
            1 => Update::Suspect {
                name: name(who),
                incarnation,
                from: name(2),
            },
            2 => Update::Dead {
                name: name(who),
                incarnation,
                from: name(2),
            },
            _ => Update::Left {
                name: name(who),
                incarnation,
            },
        };
        a.recv(now, 2, &packet(2, Message::Gossip, vec![update]))
            .unwrap();
        if step % 10 == 0 {
            a.swim.handle_timeout(now);
            a.drain();
        }
        assert_books(&a.swim);
        a.take_sent();
        a.timers.clear();
        a.events.clear();
    }
    let s = a.swim.stats();
    assert!(s.members_evicted > 0, "{s:?}");
}

/// Confirmations past the K expected change nothing: they are neither
/// counted nor passed on, so a death seen by every member of a large
/// cluster is not relayed once per member (Lifeguard §IV-B, as
/// hashicorp/memberlist's `suspicion.Confirm`).
#[test]
fn confirmations_past_k_are_not_relayed() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &(2..12).collect::<Vec<_>>());
    let suspect = |from| Update::Suspect {
        name: name(3),
        incarnation: 0,
        from: name(from),
    };
    let relayed = |a: &mut Node, from| {
        a.recv(
            t0 + ms(10),
            from,
            &packet(from, Message::Gossip, vec![suspect(from)]),
        )
        .unwrap();
        // Gossip rounds until the queue is empty: was it passed on?
        let mut seen = false;
        while a.timers.iter().any(|(_, t)| t.kind() == TimerKind::Gossip) {
            let (at, t) = a.timer(TimerKind::Gossip);
            a.timers.retain(|(_, x)| x.kind() != TimerKind::Gossip);
            a.swim.handle_timer(at, t);
            a.drain();
            seen |= a
                .take_sent()
                .iter()
                .any(|(_, p)| p.updates.contains(&suspect(from)));
        }
        seen
    };
    // The suspector, then K = 3 confirmations: each is passed on.
    assert!(relayed(&mut a, 2));
    for from in 4..7 {
        assert!(relayed(&mut a, from), "confirmation from n{from}");
    }
    let (at, _) = a.timer(TimerKind::Suspicion);
    assert_eq!(at, t0 + ms(10) + ms(250), "K confirmations: the minimum");
    let arms = a.timers.len();
    // A fourth changes nothing: not relayed, no timer re-armed.
    assert!(!relayed(&mut a, 7));
    assert_eq!(a.timers.len(), arms);
    assert_eq!(
        a.swim.members["n3"]
            .suspicion
            .as_ref()
            .unwrap()
            .confirmations
            .len(),
        3
    );
}

/// A failed probe of a member already suspected (here the confirmation
/// probe of a suspicion heard by gossip) says nothing about our own
/// health, even when no relay nacks: under a mass death the relays are
/// often dead too.
#[test]
fn failed_probe_of_a_suspect_leaves_health_alone() {
    let t0 = Instant::now();
    let mut a = Node::new(1, t0);
    a.know(t0, &[2, 3, 4]);
    let suspect = Update::Suspect {
        name: name(3),
        incarnation: 0,
        from: name(2),
    };
    a.recv(t0, 2, &packet(2, Message::Gossip, vec![suspect]))
        .unwrap();
    let sent = a.take_sent();
    assert!(
        sent.iter()
            .any(|(to, p)| *to == addr(3) && matches!(p.message, Message::Ping { .. }))
    );
    a.fire(TimerKind::ProbeTimeout);
    let reqs = a
        .take_sent()
        .iter()
        .filter(|(_, p)| matches!(p.message, Message::PingReq { .. }))
        .count();
    assert_eq!(reqs, 2, "both other members asked");
    // Neither relay nacks.
    a.fire(TimerKind::ProbeDeadline);
    assert_eq!(a.swim.stats().probe_failures, 1);
    assert_eq!(a.swim.health_multiplier(), 1);
}
