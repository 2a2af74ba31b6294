//! An in-memory network for cluster simulations: N cores, a seeded lossy
//! network with LAN latency, partitions, stalls and kills, and simulated
//! time that jumps to the next event (`quinn-proto: tests/util.rs`
//! `Pair::step`, `smoltcp: tests/netsim.rs`).

// Each test binary uses part of the harness; tests report by panicking.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::Bytes;
use memberlist::{Config, Event, Key, Keyring, Name, Output, Security, State, Swim, Timer};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub type Rng = Xoshiro256PlusPlus;

/// Installs a tracing subscriber for this test thread when `RUST_LOG` is
/// set (at debug level; trace with `RUST_LOG=trace`).
pub fn test_log() -> Option<tracing::subscriber::DefaultGuard> {
    let level = match std::env::var("RUST_LOG").ok()?.as_str() {
        "trace" => tracing::Level::TRACE,
        _ => tracing::Level::DEBUG,
    };
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_test_writer()
        .finish();
    Some(tracing::subscriber::set_default(subscriber))
}

pub fn name(i: usize) -> Name {
    Name::new(&format!("node-{i}")).unwrap()
}

pub fn addr(i: usize) -> SocketAddr {
    let i = u16::try_from(i).unwrap();
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8)),
        7946,
    )
}

pub fn key(k: u8) -> Key {
    Key::new([k; 32])
}

/// The default LAN profile under one shared key.
pub fn lan(i: usize) -> Config {
    Config::lan(name(i), addr(i), Security::Encrypted(Keyring::new(key(1))))
}

pub struct Node {
    pub swim: Option<Swim<Rng>>,
    /// Bumped on kill and restart, so old timers never reach a new core.
    pub epoch: u32,
    pub stalled_until: Option<Instant>,
}

enum Action {
    Packet {
        to: usize,
        from: SocketAddr,
        data: Bytes,
    },
    Stream {
        to: usize,
        frame: Bytes,
    },
    Timer {
        node: usize,
        epoch: u32,
        timer: Timer,
    },
}

struct Item {
    at: Instant,
    seq: u64,
    action: Action,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// See [`Sim::tap`].
pub type Tap = Box<dyn FnMut(Instant, usize, bool, &[u8])>;

pub struct Sim {
    pub t0: Instant,
    pub now: Instant,
    pub nodes: Vec<Node>,
    queue: BinaryHeap<Reverse<Item>>,
    seq: u64,
    seed: u64,
    rng: Rng,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// One-way latency, uniform in this range.
    pub latency: (Duration, Duration),
    /// Group of each node; only nodes of one group reach each other.
    pub partition: Option<Vec<u8>>,
    /// Called with every datagram (`true`) and stream frame delivered to a
    /// running node: when, to which node, the octets.
    pub tap: Option<Tap>,
    /// Every event, with when and at which node.
    pub events: Vec<(Instant, usize, Event)>,
    by_addr: BTreeMap<SocketAddr, usize>,
    pub delivered: u64,
    /// Datagrams emitted by the cores (lost ones included), and their
    /// encoded octets as sent (envelope included).
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Stream frames emitted (push-pull, joins) and their octets.
    pub sent_streams: u64,
    pub stream_bytes: u64,
}

impl Sim {
    pub fn new(seed: u64) -> Self {
        let t0 = Instant::now();
        Self {
            t0,
            now: t0,
            nodes: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            seed,
            rng: Rng::seed_from_u64(seed),
            loss: 0.0,
            latency: (Duration::from_micros(100), Duration::from_micros(1000)),
            partition: None,
            tap: None,
            events: Vec::new(),
            by_addr: BTreeMap::new(),
            delivered: 0,
            sent_packets: 0,
            sent_bytes: 0,
            sent_streams: 0,
            stream_bytes: 0,
        }
    }

    /// A cluster of `n` nodes with `config`, each joining node 0 at a
    /// random time in the first 100 ms, run until everyone sees everyone.
    pub fn cluster(seed: u64, n: usize, config: impl Fn(usize) -> Config) -> Self {
        let mut sim = Self::new(seed);
        for i in 0..n {
            sim.add(config(i));
        }
        for i in 1..n {
            let at = sim.rand_below(100_000);
            sim.run_for(Duration::from_micros(at) / n as u32);
            sim.join(i, &[0]);
        }
        let deadline = sim.now + Duration::from_secs(60);
        assert!(
            sim.run_until_cond(deadline, Self::converged),
            "seed {seed}: {n} nodes did not converge"
        );
        sim
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    pub fn rand_below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn node_rng(&mut self, i: usize) -> Rng {
        let s = self.seed.wrapping_mul(1_000_003) ^ (i as u64) << 32 ^ self.rng.next_u64();
        Rng::seed_from_u64(s)
    }

    /// Adds a node (index = its number in names and addresses).
    pub fn add(&mut self, config: Config) -> usize {
        let i = self.nodes.len();
        self.by_addr.insert(config.addr, i);
        self.nodes.push(Node {
            swim: None,
            epoch: 0,
            stalled_until: None,
        });
        self.start(i, config);
        i
    }

    /// (Re)starts node `i` with a fresh core.
    pub fn start(&mut self, i: usize, config: Config) {
        let rng = self.node_rng(i);
        let swim = Swim::new(config, rng, self.now).unwrap();
        self.nodes[i].epoch += 1;
        self.nodes[i].swim = Some(swim);
        self.nodes[i].stalled_until = None;
        self.drain(i);
    }

    pub fn kill(&mut self, i: usize) {
        self.nodes[i].swim = None;
        self.nodes[i].epoch += 1;
    }

    /// Node `i` processes nothing for `d`; its input waits, in order.
    pub fn stall(&mut self, i: usize, d: Duration) {
        self.nodes[i].stalled_until = Some(self.now + d);
    }

    pub fn join(&mut self, i: usize, seeds: &[usize]) {
        let now = self.now;
        let seeds: Vec<SocketAddr> = seeds.iter().map(|&s| addr(s)).collect();
        self.swim(i).join(now, seeds);
        self.drain(i);
    }

    pub fn leave(&mut self, i: usize) {
        let now = self.now;
        self.swim(i).leave(now);
        self.drain(i);
    }

    /// Collects node `i`'s outputs after a direct call on its core.
    pub fn drain_node(&mut self, i: usize) {
        self.drain(i);
    }

    pub fn swim(&mut self, i: usize) -> &mut Swim<Rng> {
        self.nodes[i].swim.as_mut().expect("node is running")
    }

    pub fn get(&self, i: usize) -> &Swim<Rng> {
        self.nodes[i].swim.as_ref().expect("node is running")
    }

    pub fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].swim.is_some())
    }

    /// Every running node sees every other running node alive, and no
    /// other member up.
    pub fn converged(&self) -> bool {
        let running: Vec<usize> = self.running().collect();
        // The cheap count first: this is checked after every step that
        // produced an event, thousands of times while 1,000 members form.
        if !running
            .iter()
            .all(|&i| self.get(i).num_up() == running.len() - 1)
        {
            return false;
        }
        running.iter().all(|&i| {
            let s = self.get(i);
            running.iter().filter(|&&j| j != i).all(|&j| {
                s.member(name(j).as_str())
                    .is_some_and(|m| m.state == State::Alive)
            }) && s.num_up() == running.len() - 1
        })
    }

    fn push(&mut self, at: Instant, action: Action) {
        self.seq += 1;
        self.queue.push(Reverse(Item {
            at,
            seq: self.seq,
            action,
        }));
    }

    fn latency(&mut self) -> Duration {
        let (lo, hi) = self.latency;
        let span = (hi - lo).as_nanos() as u64;
        lo + Duration::from_nanos(self.rand_below(span + 1))
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        self.partition.as_ref().is_none_or(|g| g[a] == g[b])
    }

    fn drain(&mut self, i: usize) {
        let now = self.now;
        let epoch = self.nodes[i].epoch;
        while let Some(out) = self.nodes[i].swim.as_mut().and_then(Swim::poll_output) {
            match out {
                Output::Send { to, packet } => {
                    self.sent_packets += 1;
                    self.sent_bytes += packet.len() as u64;
                    let Some(&j) = self.by_addr.get(&to) else {
                        continue;
                    };
                    let lost = (self.rng.next_u64() as f64) < self.loss * 2f64.powi(64);
                    if lost || !self.reachable(i, j) {
                        continue;
                    }
                    let at = now + self.latency();
                    self.push(
                        at,
                        Action::Packet {
                            to: j,
                            from: addr(i),
                            data: packet,
                        },
                    );
                }
                Output::Stream { to, frame } => {
                    self.sent_streams += 1;
                    self.stream_bytes += frame.len() as u64;
                    let Some(&j) = self.by_addr.get(&to) else {
                        continue;
                    };
                    if !self.reachable(i, j) {
                        continue;
                    }
                    // A TCP connect plus one write: a few round trips.
                    let at = now + self.latency() * 3;
                    self.push(at, Action::Stream { to: j, frame });
                }
                Output::Arm { at, timer } => {
                    self.push(
                        at,
                        Action::Timer {
                            node: i,
                            epoch,
                            timer,
                        },
                    );
                }
                Output::Event(e) => self.events.push((now, i, e)),
            }
        }
    }

    /// Processes the next queued item; `false` when there is none.
    pub fn step(&mut self) -> bool {
        let Some(Reverse(item)) = self.queue.pop() else {
            return false;
        };
        self.now = self.now.max(item.at);
        let node = match &item.action {
            Action::Packet { to, .. } | Action::Stream { to, .. } => *to,
            Action::Timer { node, .. } => *node,
        };
        if let Some(until) = self.nodes[node].stalled_until {
            if until > self.now {
                // Held until the stall ends, keeping its place in line.
                self.queue.push(Reverse(Item { at: until, ..item }));
                return true;
            }
            self.nodes[node].stalled_until = None;
        }
        let now = self.now;
        if self.nodes[node].swim.is_some()
            && let Some(tap) = self.tap.as_mut()
        {
            match &item.action {
                Action::Packet { data, .. } => tap(now, node, true, data),
                Action::Stream { frame, .. } => tap(now, node, false, frame),
                Action::Timer { .. } => {}
            }
        }
        let Node { swim, epoch, .. } = &mut self.nodes[node];
        let Some(swim) = swim.as_mut() else {
            return true;
        };
        match item.action {
            Action::Packet { from, data, .. } => {
                self.delivered += 1;
                let _ = swim.handle_packet(now, from, &data);
            }
            Action::Stream { frame, .. } => {
                let _ = swim.handle_stream(now, &frame);
            }
            Action::Timer {
                epoch: e, timer, ..
            } => {
                if e != *epoch {
                    return true;
                }
                swim.handle_timer(now, timer);
            }
        }
        self.drain(node);
        true
    }

    /// Items waiting in the event queue, by kind: datagrams, stream
    /// frames, and timers per [`TimerKind`](memberlist::TimerKind).
    pub fn pending(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for Reverse(item) in &self.queue {
            let kind = match &item.action {
                Action::Packet { .. } => "datagram".to_string(),
                Action::Stream { .. } => "stream".to_string(),
                Action::Timer { timer, .. } => format!("{:?}", timer.kind()),
            };
            *counts.entry(kind).or_default() += 1;
        }
        counts
    }

    /// Processes the next queued item if it is due by `deadline`;
    /// otherwise moves the clock to `deadline` and returns `false`.
    pub fn step_before(&mut self, deadline: Instant) -> bool {
        if self.queue.peek().is_some_and(|Reverse(i)| i.at <= deadline) {
            self.step()
        } else {
            self.now = self.now.max(deadline);
            false
        }
    }

    pub fn run_until(&mut self, t: Instant) {
        while self.queue.peek().is_some_and(|Reverse(i)| i.at <= t) {
            self.step();
        }
        self.now = self.now.max(t);
    }

    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Runs until `cond` holds (checked after each event-producing step
    /// and every 10 ms of simulated time) or `deadline`; whether it held.
    pub fn run_until_cond(&mut self, deadline: Instant, cond: impl Fn(&Self) -> bool) -> bool {
        let mut next_check = self.now;
        loop {
            if self.now >= next_check {
                if cond(self) {
                    return true;
                }
                next_check = self.now + Duration::from_millis(10);
            }
            let Some(Reverse(next)) = self.queue.peek() else {
                return cond(self);
            };
            if next.at > deadline {
                self.now = deadline;
                return cond(self);
            }
            let before = self.events.len();
            self.step();
            if self.events.len() != before && cond(self) {
                return true;
            }
        }
    }

    /// Events about `member` seen by others, since `from`.
    pub fn events_about(
        &self,
        member: usize,
        from: Instant,
    ) -> impl Iterator<Item = &(Instant, usize, Event)> {
        let n = name(member);
        self.events
            .iter()
            .filter(move |(t, _, e)| *t >= from && e.member().is_some_and(|m| m.name == n))
    }

    /// Down events since `from`, as (when, observer, member name).
    pub fn downs_since(&self, from: Instant) -> Vec<(Duration, usize, String)> {
        self.events
            .iter()
            .filter_map(|(t, i, e)| match e {
                Event::Down(m) if *t >= from => Some((*t - self.t0, *i, m.name.to_string())),
                _ => None,
            })
            .collect()
    }

    /// How many Suspect events members reported since `from`.
    pub fn suspects_since(&self, from: Instant) -> usize {
        self.events
            .iter()
            .filter(|(t, _, e)| *t >= from && matches!(e, Event::Suspect(_)))
            .count()
    }
}

/// The `q` quantile (0..=1) of sorted samples, nearest rank.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
