//! The sans-IO SWIM core with Lifeguard: probing, suspicion, refutation,
//! dissemination, push-pull and leave.
//!
//! This is the protocol layer. It never touches a socket, reads a clock,
//! spawns a task or draws randomness of its own: time comes in as `now`,
//! randomness from the owned `R: RngCore`, and packets, stream messages,
//! timers and events come out through [`Swim::poll_output`]. The same
//! inputs and seed give the same outputs, which the simulations rely on.
//!
//! References: SWIM (Das, Gupta, Motivala, DSN 2002) §3-§4; Lifeguard
//! (Dadgar, Phillips, Currey, arXiv:1707.00788) §IV-A local health, §IV-B
//! dynamic suspicion, §IV-C buddy system; hashicorp/memberlist for
//! push-pull and the transmit-limited queue.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand_core::RngCore;
use tracing::{debug, trace};

use crate::broadcast::Queue;
use crate::config::{Config, ConfigError};
use crate::envelope::{self, OpenError, Transport, frame};
use crate::keyring::Keyring;
use crate::member::{Incarnation, Member, Meta, Name, State, is_current, is_newer};
use crate::message::{
    DecodeError, MAX_MEMBERS, MAX_UPDATES, Message, Packet, PushPull, Seq, Update,
};
use crate::timer::{Timer, TimerKind, TimerTable};

/// One member's SWIM + Lifeguard state machine.
///
/// Feed it with the `handle_*` methods and drain [`poll_output`] after
/// every call (see the crate docs for a driver loop).
///
/// [`poll_output`]: Swim::poll_output
pub struct Swim<R> {
    config: Config,
    rng: R,
    local: Member,
    left: bool,
    members: BTreeMap<Name, Entry>,
    /// Every member's name once, in no order: random picks by index
    /// ([`Entry::slot`] is each one's place).
    slots: Vec<Name>,
    /// Members alive or suspect: [`Swim::num_up`], kept as members change
    /// state, since every datagram sent reads it.
    up: usize,
    /// How many members alive or suspect each address has.
    up_addrs: BTreeMap<SocketAddr, u32>,
    /// Seeds with no member alive or suspect at their address.
    seeds_missing: usize,
    /// Round-robin probe order (SWIM §4.3), reshuffled each pass.
    probe_order: Vec<Name>,
    probe_next: usize,
    probes: BTreeMap<Seq, Probe>,
    relays: BTreeMap<Seq, Relay>,
    next_seq: Seq,
    /// Lifeguard's local health score, 0..max_health_multiplier.
    health: u32,
    queue: Queue,
    timers: TimerTable<Due>,
    probe_timer: Option<Timer>,
    push_pull_timer: Option<Timer>,
    gossip_timer: Option<Timer>,
    reap_timer: Option<Timer>,
    last_gossip: Option<Instant>,
    /// The addresses of the last [`join`](Swim::join), this member's own
    /// excepted: where members are expected.
    seeds: BTreeSet<SocketAddr>,
    rejoin_timer: Option<Timer>,
    /// Rejoins sent since every seed last had a live member: the backoff
    /// exponent.
    rejoin_attempt: u32,
    /// The membership or the seeds changed since [`Self::check_seeds`]
    /// last ran.
    seeds_dirty: bool,
    /// Some other member was up at the last check.
    connected: bool,
    /// See [`Swim::isolated`].
    isolated: bool,
    outputs: VecDeque<Output>,
    stats: Stats,
}

/// Something the driver must do, pulled with [`Swim::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send one datagram (UDP) to `to`.
    Send {
        /// Destination.
        to: SocketAddr,
        /// The whole datagram.
        packet: Bytes,
    },
    /// Open a stream (TCP) to `to`, write `frame`, close. Replies come
    /// back as their own streams.
    Stream {
        /// Destination.
        to: SocketAddr,
        /// One length-prefixed frame.
        frame: Bytes,
    },
    /// Call [`Swim::handle_timer`] with `timer` at `at` (or later).
    Arm {
        /// Deadline.
        at: Instant,
        /// The token to hand back.
        timer: Timer,
    },
    /// A change in membership for the speaker.
    Event(Event),
}

/// A membership change. Each carries the member as it is now, except the
/// two about this member's own connectivity ([`Event::Isolated`],
/// [`Event::Connected`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A member joined, or came back after being dead or gone.
    Up(Member),
    /// A suspected member refuted the suspicion and is alive again.
    Alive(Member),
    /// A member is suspected; it is still up until [`Event::Down`].
    Suspect(Member),
    /// A member was declared dead.
    Down(Member),
    /// A member left gracefully.
    Left(Member),
    /// A live member's metadata or address changed.
    Updated(Member),
    /// This member has seeds but no other member alive or suspect, and
    /// either a join went unanswered or its last member was lost. From
    /// here it cannot tell "the others are down" from "I am cut off" (a
    /// blocked network, a wrong or stale key); it keeps rejoining its seeds
    /// with backoff. See [`Swim::isolated`].
    Isolated,
    /// The end of an isolation: a member is up again, or no seeds are left
    /// to expect.
    Connected,
}

impl Event {
    /// The member concerned; `None` for [`Event::Isolated`] and
    /// [`Event::Connected`], which are about this member's connectivity.
    #[must_use]
    pub fn member(&self) -> Option<&Member> {
        match self {
            Self::Up(m)
            | Self::Alive(m)
            | Self::Suspect(m)
            | Self::Down(m)
            | Self::Left(m)
            | Self::Updated(m) => Some(m),
            Self::Isolated | Self::Connected => None,
        }
    }
}

/// Counters for the operator; they only grow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams handed to `handle_packet`.
    pub packets_received: u64,
    /// Datagrams emitted.
    pub packets_sent: u64,
    /// Frames handed to `handle_stream`.
    pub streams_received: u64,
    /// Frames emitted.
    pub streams_sent: u64,
    /// Messages that failed authentication (wrong key, tampering).
    pub auth_failures: u64,
    /// Messages under a key id not in the keyring.
    pub unknown_key: u64,
    /// Plaintext received while encrypted, or the reverse.
    pub mode_mismatch: u64,
    /// Other envelope errors: version, flags, truncation, framing.
    pub envelope_errors: u64,
    /// Authenticated messages whose body did not parse.
    pub decode_errors: u64,
    /// Pings for another member name.
    pub misdirected: u64,
    /// Probes started.
    pub probes: u64,
    /// Probes that ended without an ack.
    pub probe_failures: u64,
    /// Suspicions started here (raised or learned).
    pub suspicions: u64,
    /// Times this member refuted a suspicion, death or leave about itself.
    pub refutations: u64,
    /// Timers that fired late enough to show this member was paused.
    pub late_timers: u64,
    /// Stale timers handed back and ignored.
    pub stale_timers: u64,
    /// Rejoin rounds: joins sent again to seeds without a live member.
    pub rejoins: u64,
    /// Times this member became isolated ([`Event::Isolated`]).
    pub isolations: u64,
    /// New members dropped because the table held
    /// [`Config::max_members`] and none was dead or left.
    pub members_rejected: u64,
    /// Dead or left members forgotten early to make room for a new one.
    pub members_evicted: u64,
}

/// A message the core dropped. The core's state is unchanged, except for
/// the counters in [`Stats`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A stream frame whose length prefix is out of bounds or does not
    /// match the octets handed in.
    #[error("bad stream frame")]
    Frame,
    /// The envelope was rejected (authentication included).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The authenticated body did not parse.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A ping meant for another member name (a restart under a new name at
    /// the same address).
    #[error("ping for {target}, not for this member")]
    Misdirected {
        /// The name the ping was for.
        target: Name,
    },
}

/// What a timer fires with.
#[derive(Debug, Clone)]
enum Due {
    Probe,
    ProbeTimeout(Seq),
    ProbeDeadline(Seq),
    Relay(Seq),
    Suspicion(Name, Incarnation),
    Confirm(Name, Incarnation),
    Gossip,
    PushPull,
    Reap,
    Rejoin,
}

impl Due {
    fn kind(&self) -> TimerKind {
        match self {
            Self::Probe => TimerKind::Probe,
            Self::ProbeTimeout(_) => TimerKind::ProbeTimeout,
            Self::ProbeDeadline(_) => TimerKind::ProbeDeadline,
            Self::Relay(_) => TimerKind::RelayDeadline,
            Self::Suspicion(..) => TimerKind::Suspicion,
            Self::Confirm(..) => TimerKind::Confirm,
            Self::Gossip => TimerKind::Gossip,
            Self::PushPull => TimerKind::PushPull,
            Self::Reap => TimerKind::Reap,
            Self::Rejoin => TimerKind::Rejoin,
        }
    }
}

#[derive(Debug)]
struct Entry {
    member: Member,
    /// Index of the name in [`Swim::slots`].
    slot: usize,
    /// The name is in the probe order, not yet probed this pass.
    queued: bool,
    /// When `member.state` last changed.
    since: Instant,
    /// Present exactly when `member.state` is `Suspect`.
    suspicion: Option<Suspicion>,
}

/// Lifeguard §IV-B: a suspicion whose timeout shrinks as independent
/// members confirm it.
#[derive(Debug)]
struct Suspicion {
    start: Instant,
    /// Who raised it (first heard of here).
    suspector: Name,
    /// Other members that confirmed it, each counted once.
    confirmations: BTreeSet<Name>,
    /// Confirmations expected (Lifeguard's K, capped by cluster size).
    expected: usize,
    timer: Timer,
    /// The timer already fired late once and was given a grace period.
    graced: bool,
}

#[derive(Debug)]
struct Probe {
    target: Name,
    addr: SocketAddr,
    /// Ping-reqs sent, hence nacks expected.
    expected_nacks: usize,
    nacks: usize,
    timers: [Timer; 2],
    /// The target was already suspected when the probe started (a
    /// confirmation probe, or its turn in the round-robin came).
    of_suspect: bool,
}

#[derive(Debug)]
struct Relay {
    requester: SocketAddr,
    seq: Seq,
    timer: Timer,
}

impl<R: RngCore> Swim<R> {
    /// A core for `config`, alone until [`join`](Self::join). Drain
    /// [`poll_output`](Self::poll_output) afterwards: the first timers are
    /// armed here.
    ///
    /// # Errors
    /// [`ConfigError`] if the configuration is invalid.
    pub fn new(config: Config, rng: R, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        let local = Member {
            name: config.name.clone(),
            addr: config.addr,
            incarnation: config.incarnation,
            meta: config.meta.clone(),
            state: State::Alive,
        };
        let mut swim = Self {
            config,
            rng,
            local,
            left: false,
            members: BTreeMap::new(),
            slots: Vec::new(),
            up: 0,
            up_addrs: BTreeMap::new(),
            seeds_missing: 0,
            probe_order: Vec::new(),
            probe_next: 0,
            probes: BTreeMap::new(),
            relays: BTreeMap::new(),
            next_seq: 0,
            health: 0,
            queue: Queue::default(),
            timers: TimerTable::new(),
            probe_timer: None,
            push_pull_timer: None,
            gossip_timer: None,
            reap_timer: None,
            last_gossip: None,
            seeds: BTreeSet::new(),
            rejoin_timer: None,
            rejoin_attempt: 0,
            seeds_dirty: false,
            connected: false,
            isolated: false,
            outputs: VecDeque::new(),
            stats: Stats::default(),
        };
        swim.next_seq = swim.rng.next_u32();
        // Random phases keep members from probing in lockstep.
        let probe_at = now + swim.jitter(swim.config.probe_interval);
        swim.probe_timer = Some(swim.arm(probe_at, Due::Probe));
        let push_pull_at = now + swim.jitter(swim.config.push_pull_interval);
        swim.push_pull_timer = Some(swim.arm(push_pull_at, Due::PushPull));
        Ok(swim)
    }

    /// Sets the seeds, the addresses where members are expected (this
    /// member's own address is skipped), and sends this member's full state
    /// to each seed that has no live member yet, asking for theirs back
    /// (the join of hashicorp/memberlist).
    ///
    /// The seeds replace those of the previous call: pass the whole set
    /// each time it changes (the speaker Pods' addresses, say). While a
    /// seed has no live member the core joins it again by itself, with a
    /// backoff from [`Config::rejoin_min`] doubling to
    /// [`Config::rejoin_max`], jittered; a seed whose member is up costs
    /// nothing. With seeds and no live member, the core reports
    /// [`Event::Isolated`]. Ignored after [`leave`](Self::leave).
    pub fn join(&mut self, now: Instant, seeds: impl IntoIterator<Item = SocketAddr>) {
        if self.left {
            return;
        }
        let local = self.local.addr;
        self.seeds = seeds.into_iter().filter(|s| *s != local).collect();
        self.seeds_missing = self.missing_seeds().len();
        // New seeds: start the backoff over.
        self.rejoin_attempt = 0;
        if let Some(t) = self.rejoin_timer.take() {
            self.timers.cancel(t);
        }
        for seed in self.missing_seeds() {
            debug!(%seed, "join");
            self.send_state(seed, true, true);
        }
        self.seeds_dirty = true;
        self.check_seeds(now);
    }

    /// Leaves gracefully: every known member is told directly, at once, and
    /// the leave is gossiped too. Keep driving the core for a few gossip
    /// intervals so retransmissions go out, then drop it. A core that left
    /// only answers pings.
    pub fn leave(&mut self, now: Instant) {
        if self.left {
            return;
        }
        debug!(incarnation = self.local.incarnation, "leave");
        self.left = true;
        self.local.state = State::Left;
        for t in [
            self.probe_timer.take(),
            self.push_pull_timer.take(),
            self.rejoin_timer.take(),
        ]
        .into_iter()
        .flatten()
        {
            self.timers.cancel(t);
        }
        for (_, p) in std::mem::take(&mut self.probes) {
            self.cancel_probe_timers(&p);
        }
        let update = Update::Left {
            name: self.local.name.clone(),
            incarnation: self.local.incarnation,
        };
        // A planned restart hands over at once: waiting for gossip to
        // reach everyone would cost a few gossip rounds.
        let targets: Vec<SocketAddr> = self
            .members
            .values()
            .filter(|e| e.member.state.is_up())
            .map(|e| e.member.addr)
            .collect();
        for to in targets {
            self.send(to, Message::Gossip, Some(update.clone()));
        }
        self.broadcast(now, update);
    }

    /// Replaces this member's metadata and announces it with a higher
    /// incarnation; others see [`Event::Updated`]. Ignored after
    /// [`leave`](Self::leave).
    pub fn set_metadata(&mut self, now: Instant, meta: Meta) {
        if self.left {
            return;
        }
        self.local.meta = meta;
        self.bump_incarnation(self.local.incarnation);
        self.broadcast_local(now);
    }

    /// Handles one datagram received from `from`. Call for every datagram
    /// on the member's UDP socket, then drain
    /// [`poll_output`](Self::poll_output).
    ///
    /// # Errors
    /// [`InputError`] when the datagram is dropped (counted in
    /// [`Stats`]); log it at trace level, it is peer input.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &[u8],
    ) -> Result<(), InputError> {
        self.stats.packets_received += 1;
        let body = envelope::open(&self.config.security, Transport::Packet, data)
            .map_err(|e| self.count_open_error(e))?;
        let packet = Packet::parse(&body).inspect_err(|_| self.stats.decode_errors += 1)?;
        trace!(%from, %packet, "recv");
        if let Message::Ping { target, .. } = &packet.message
            && *target != self.local.name
        {
            self.stats.misdirected += 1;
            return Err(InputError::Misdirected {
                target: target.clone(),
            });
        }
        if self.left {
            // Answer probes so the leave is not mistaken for a failure
            // while it spreads; the ack carries the leave.
            if let Message::Ping { seq, .. } = packet.message {
                self.send(from, Message::Ack { seq }, None);
            }
            return Ok(());
        }
        // The sender still believes an old suspicion, death or leave of
        // ours: whatever else reaches it, our answer carries the refutation.
        let behind = packet.updates.iter().any(|u| {
            !matches!(u, Update::Alive { .. })
                && *u.name() == self.local.name
                && is_newer(self.local.incarnation, u.incarnation())
        });
        // The sender still holds an older life of a member we know alive:
        // it missed that member's refutation, or its restart, whose alive
        // spreads in one short burst (each member passes it on λ log n
        // times within a few gossip rounds, then falls silent). Our answer
        // carries the newer alive, instead of leaving the sender to
        // push-pull: simulated at 200 members, one member that no datagram
        // of that burst reached held a restarted member dead for 7.8 s,
        // while it kept gossiping the old death to members that knew.
        let stale: Vec<Update> = packet
            .updates
            .iter()
            .filter_map(|u| {
                let e = self.members.get(u.name())?;
                (e.member.state == State::Alive && is_newer(e.member.incarnation, u.incarnation()))
                    .then(|| Update::Alive {
                        name: e.member.name.clone(),
                        incarnation: e.member.incarnation,
                        addr: e.member.addr,
                        meta: e.member.meta.clone(),
                    })
            })
            .take(MAX_CORRECTIONS)
            .collect();
        // Updates first: a buddy suspicion about us is refuted before the
        // ack goes out, so the ack carries the refutation.
        for update in packet.updates {
            self.apply(now, update);
        }
        let mut corrections: VecDeque<Update> = behind
            .then(|| self.local_alive())
            .into_iter()
            .chain(stale)
            .collect();
        match packet.message {
            Message::Ping { seq, .. } => {
                self.send(from, Message::Ack { seq }, corrections.pop_front());
            }
            Message::Ack { seq } => self.handle_ack(now, seq),
            Message::PingReq { seq, target, addr } => {
                self.handle_ping_req(now, from, seq, target, addr);
            }
            Message::Nack { seq } => {
                if let Some(p) = self.probes.get_mut(&seq) {
                    p.nacks += 1;
                }
            }
            Message::Gossip => {}
        }
        for correction in corrections {
            self.send(from, Message::Gossip, Some(correction));
        }
        self.check_seeds(now);
        Ok(())
    }

    /// Handles one whole stream frame (length prefix included, as
    /// [`frame::decode`] delimits it). Call for every frame read from an
    /// accepted stream connection, then drain
    /// [`poll_output`](Self::poll_output).
    ///
    /// # Errors
    /// [`InputError`] when the frame is dropped (counted in [`Stats`]).
    pub fn handle_stream(&mut self, now: Instant, frame: &[u8]) -> Result<(), InputError> {
        self.stats.streams_received += 1;
        if frame::decode(frame) != Ok(Some(frame.len())) {
            self.stats.envelope_errors += 1;
            return Err(InputError::Frame);
        }
        let body = envelope::open(
            &self.config.security,
            Transport::Stream,
            &frame[frame::PREFIX_LEN..],
        )
        .map_err(|e| self.count_open_error(e))?;
        let state = PushPull::parse(&body).inspect_err(|_| self.stats.decode_errors += 1)?;
        trace!(%state, "recv stream");
        if self.left || state.from == self.local.name {
            return Ok(());
        }
        for m in state.members {
            match m.state {
                State::Alive => self.apply_alive(now, m.name, m.incarnation, m.addr, m.meta),
                // A remote death is only a suspicion here: the sender's
                // view may be old, and a live member gets to refute
                // (hashicorp/memberlist `mergeState`).
                State::Suspect | State::Dead => {
                    self.apply_suspect(now, m.name, m.incarnation, state.from.clone());
                }
                State::Left => self.apply_left(now, m.name, m.incarnation),
            }
        }
        if state.reply {
            self.send_state(state.addr, false, false);
        }
        self.check_seeds(now);
        Ok(())
    }

    /// Handles a timer from [`Output::Arm`] once its deadline has passed.
    /// Stale timers (cancelled or replaced since) and early calls are
    /// ignored. Drain [`poll_output`](Self::poll_output) afterwards.
    pub fn handle_timer(&mut self, now: Instant, timer: Timer) {
        match self.timers.take(timer, now) {
            Ok((at, due)) => {
                self.fire(now, at, due);
                self.check_seeds(now);
            }
            Err(true) => trace!(%timer, "timer not due yet"),
            Err(false) => {
                self.stats.stale_timers += 1;
                trace!(%timer, "stale timer");
            }
        }
    }

    /// Fires every live timer due at `now`: the alternative to keeping
    /// the [`Output::Arm`] timers, for drivers that sleep until
    /// [`poll_timeout`](Self::poll_timeout). Drain
    /// [`poll_output`](Self::poll_output) afterwards.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(timer) = self.timers.next_due(now, Due::kind) {
            self.handle_timer(now, timer);
        }
    }

    /// The next output, or `None` when drained. Call after every
    /// `new`/`join`/`leave`/`set_metadata`/`handle_*` until it returns
    /// `None`.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The earliest deadline of a live timer. Drivers that ignore
    /// [`Output::Arm`] sleep until then and call
    /// [`handle_timeout`](Self::handle_timeout); check it after draining
    /// outputs.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// This member as others see it.
    #[must_use]
    pub fn local(&self) -> &Member {
        &self.local
    }

    /// Every other member known, in any state, by name.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values().map(|e| &e.member)
    }

    /// One member by name (not this one).
    #[must_use]
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.get(name).map(|e| &e.member)
    }

    /// Other members that are alive or suspect.
    #[must_use]
    pub fn num_up(&self) -> usize {
        self.up
    }

    /// Whether this member is isolated: it has seeds (from
    /// [`join`](Self::join)) but no other member alive or suspect, and a
    /// join went unanswered or its last member was lost. Set with
    /// [`Event::Isolated`], cleared with [`Event::Connected`]. A member
    /// without seeds (the first of a cluster) is never isolated. While
    /// isolated it cannot know whether the others are down or it is cut
    /// off, so a caller should not take over work that others may be
    /// doing.
    #[must_use]
    pub fn isolated(&self) -> bool {
        self.isolated
    }

    /// The seeds of the last [`join`](Self::join).
    pub fn seeds(&self) -> impl Iterator<Item = &SocketAddr> {
        self.seeds.iter()
    }

    /// Lifeguard's local health multiplier, 1 when healthy.
    #[must_use]
    pub fn health_multiplier(&self) -> u32 {
        self.health + 1
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The keyring (`None` in plaintext mode).
    #[must_use]
    pub fn keyring(&self) -> Option<&Keyring> {
        self.config.security.keyring()
    }

    /// The keyring, for rotation (`None` in plaintext mode). Changes apply
    /// to the next message.
    pub fn keyring_mut(&mut self) -> Option<&mut Keyring> {
        self.config.security.keyring_mut()
    }

    fn fire(&mut self, now: Instant, at: Instant, due: Due) {
        let late = now.saturating_duration_since(at);
        if self.left && !matches!(due, Due::Gossip | Due::Relay(_)) {
            // Gone: only the leave itself still needs spreading.
            return;
        }
        match due {
            Due::Probe => self.probe_round(now),
            Due::ProbeTimeout(seq) => self.probe_timeout(seq, late),
            Due::ProbeDeadline(seq) => self.probe_deadline(now, seq, late),
            Due::Relay(seq) => {
                if let Some(r) = self.relays.remove(&seq) {
                    self.send(r.requester, Message::Nack { seq: r.seq }, None);
                }
            }
            Due::Suspicion(name, incarnation) => {
                self.suspicion_expired(now, name, incarnation, late);
            }
            Due::Confirm(name, incarnation) => {
                let still = self.members.get(&name).is_some_and(|e| {
                    e.member.state == State::Suspect && e.member.incarnation == incarnation
                });
                if still && !self.probing(&name) {
                    self.start_probe(now, name);
                }
            }
            Due::Gossip => self.gossip(now),
            Due::PushPull => self.push_pull_round(now),
            Due::Reap => self.reap(now),
            Due::Rejoin => self.rejoin(now),
        }
    }

    // ---- probing (SWIM §3.1, §4.3; Lifeguard §IV-A) ----

    fn probe_round(&mut self, now: Instant) {
        let interval = self.config.probe_interval * self.health_multiplier();
        self.probe_timer = Some(self.arm(now + interval, Due::Probe));
        if let Some(target) = self.next_probe_target() {
            self.start_probe(now, target);
        }
    }

    /// The next member in the shuffled round-robin order, skipping ones
    /// gone or already being probed.
    fn next_probe_target(&mut self) -> Option<Name> {
        for _ in 0..2 * (self.members.len() + 1) {
            if self.probe_next >= self.probe_order.len() {
                self.probe_order.clear();
                for e in self.members.values_mut() {
                    e.queued = e.member.state.is_up();
                    if e.queued {
                        self.probe_order.push(e.member.name.clone());
                    }
                }
                shuffle(&mut self.rng, &mut self.probe_order);
                self.probe_next = 0;
                if self.probe_order.is_empty() {
                    return None;
                }
            }
            let name = self.probe_order[self.probe_next].clone();
            self.probe_next += 1;
            let up = self.members.get_mut(&name).is_some_and(|e| {
                e.queued = false;
                e.member.state.is_up()
            });
            if up && !self.probing(&name) {
                return Some(name);
            }
        }
        None
    }

    fn probing(&self, name: &Name) -> bool {
        self.probes.values().any(|p| p.target == *name)
    }

    fn start_probe(&mut self, now: Instant, target: Name) {
        let Some((addr, of_suspect)) = self
            .members
            .get(&target)
            .map(|e| (e.member.addr, e.member.state == State::Suspect))
        else {
            return;
        };
        let seq = self.seq();
        let m = self.health_multiplier();
        let t1 = self.arm(now + self.config.probe_timeout * m, Due::ProbeTimeout(seq));
        let t2 = self.arm(
            now + self.config.probe_interval * m,
            Due::ProbeDeadline(seq),
        );
        self.stats.probes += 1;
        trace!(%target, seq, "probe");
        self.send_ping(seq, &target, addr);
        self.probes.insert(
            seq,
            Probe {
                target,
                addr,
                expected_nacks: 0,
                nacks: 0,
                timers: [t1, t2],
                of_suspect,
            },
        );
    }

    /// Pings `target`; if we suspect it, the suspicion rides along so the
    /// suspect hears of it first and can refute (Lifeguard §IV-C).
    fn send_ping(&mut self, seq: Seq, target: &Name, addr: SocketAddr) {
        let buddy = self.members.get(target).and_then(|e| {
            e.suspicion.as_ref().map(|s| Update::Suspect {
                name: target.clone(),
                incarnation: e.member.incarnation,
                from: s.suspector.clone(),
            })
        });
        self.send(
            addr,
            Message::Ping {
                seq,
                target: target.clone(),
            },
            buddy,
        );
    }

    fn probe_timeout(&mut self, seq: Seq, late: Duration) {
        let Some(p) = self.probes.get(&seq) else {
            return;
        };
        if late > self.config.probe_timeout {
            // This member was paused: the ack may be waiting unread, so
            // the probe proves nothing about the target.
            self.stats.late_timers += 1;
            if let Some(p) = self.probes.remove(&seq) {
                self.cancel_probe_timers(&p);
            }
            self.adjust_health(1);
            return;
        }
        let (target, addr) = (p.target.clone(), p.addr);
        // A second direct ping: under random loss it makes a false
        // suspicion about ten times rarer for one packet.
        self.send_ping(seq, &target, addr);
        let relays = self.random_members(self.config.indirect_probes, |e| {
            e.member.state == State::Alive && e.member.name != target
        });
        for relay in &relays {
            self.send(
                *relay,
                Message::PingReq {
                    seq,
                    target: target.clone(),
                    addr,
                },
                None,
            );
        }
        if let Some(p) = self.probes.get_mut(&seq) {
            p.expected_nacks = relays.len();
        }
    }

    fn probe_deadline(&mut self, now: Instant, seq: Seq, late: Duration) {
        let Some(p) = self.probes.remove(&seq) else {
            return;
        };
        self.cancel_probe_timers(&p);
        if late > self.config.probe_timeout {
            self.stats.late_timers += 1;
            self.adjust_health(1);
            return;
        }
        self.stats.probe_failures += 1;
        // Lifeguard §IV-A: relays that did not even nack suggest the
        // problem is on our side; with no relays, any failure counts.
        // Not so for a member already suspected: its failure is expected,
        // and when many die at once the relays picked are often dead too.
        // Counted, the confirmation probes of 10% of 1,000 members dying
        // together took the mean multiplier from 1 to 3.7 within 400 ms,
        // every member probed up to 8 times slower, and the last deaths
        // were seen 2-3 s late.
        let missed = if p.of_suspect {
            0
        } else if p.expected_nacks > 0 {
            p.expected_nacks.saturating_sub(p.nacks)
        } else {
            1
        };
        self.adjust_health(i64::try_from(missed).unwrap_or(i64::MAX));
        debug!(target = %p.target, nacks = p.nacks, expected = p.expected_nacks, "probe failed");
        let Some(incarnation) = self
            .members
            .get(&p.target)
            .filter(|e| e.member.state.is_up())
            .map(|e| e.member.incarnation)
        else {
            return;
        };
        let me = self.local.name.clone();
        self.apply_suspect(now, p.target, incarnation, me);
    }

    fn handle_ack(&mut self, now: Instant, seq: Seq) {
        if let Some(p) = self.probes.remove(&seq) {
            self.cancel_probe_timers(&p);
            self.adjust_health(-1);
            // The suspect answers but its refutation has not reached us:
            // probe again next interval; the ping carries the suspicion, so
            // the suspect's ack will carry the refutation.
            let suspected = self
                .members
                .get(&p.target)
                .filter(|e| e.member.state == State::Suspect)
                .map(|e| e.member.incarnation);
            if let Some(incarnation) = suspected
                && self.config.confirm_suspicions
            {
                let at = now + self.config.probe_interval * self.health_multiplier();
                self.arm(at, Due::Confirm(p.target, incarnation));
            }
        } else if let Some(r) = self.relays.remove(&seq) {
            self.timers.cancel(r.timer);
            self.send(r.requester, Message::Ack { seq: r.seq }, None);
        }
    }

    fn handle_ping_req(
        &mut self,
        now: Instant,
        from: SocketAddr,
        seq: Seq,
        target: Name,
        addr: SocketAddr,
    ) {
        if target == self.local.name {
            self.send(from, Message::Ack { seq }, None);
            return;
        }
        // Bounds memory against a flood from a member holding the key.
        if self.relays.len() >= MAX_RELAYS {
            return;
        }
        let relay_seq = self.seq();
        let timer = self.arm(now + self.config.probe_timeout, Due::Relay(relay_seq));
        self.relays.insert(
            relay_seq,
            Relay {
                requester: from,
                seq,
                timer,
            },
        );
        self.send_ping(relay_seq, &target, addr);
    }

    fn cancel_probe_timers(&mut self, p: &Probe) {
        for t in p.timers {
            self.timers.cancel(t);
        }
    }

    fn adjust_health(&mut self, delta: i64) {
        let max = i64::from(self.config.max_health_multiplier) - 1;
        let new = (i64::from(self.health) + delta).clamp(0, max);
        if new != i64::from(self.health) {
            debug!(from = self.health + 1, to = new + 1, "health multiplier");
        }
        // Clamped to 0..=63 above, so it fits.
        self.health = u32::try_from(new).unwrap_or(0);
    }

    // ---- membership updates (SWIM §4.2) ----

    fn apply(&mut self, now: Instant, update: Update) {
        match update {
            Update::Alive {
                name,
                incarnation,
                addr,
                meta,
            } => self.apply_alive(now, name, incarnation, addr, meta),
            Update::Suspect {
                name,
                incarnation,
                from,
            } => self.apply_suspect(now, name, incarnation, from),
            Update::Dead {
                name,
                incarnation,
                from,
            } => self.apply_dead(now, name, incarnation, from),
            Update::Left { name, incarnation } => self.apply_left(now, name, incarnation),
        }
    }

    /// Alive overrides anything about an older incarnation.
    fn apply_alive(
        &mut self,
        now: Instant,
        name: Name,
        incarnation: Incarnation,
        addr: SocketAddr,
        meta: Meta,
    ) {
        if name == self.local.name {
            // Someone speaks for a newer us (a previous life, or a name
            // clash): outbid it.
            let differs = addr != self.local.addr || meta != self.local.meta;
            if is_newer(incarnation, self.local.incarnation)
                || (incarnation == self.local.incarnation && differs)
            {
                self.refute(now, incarnation);
            }
            return;
        }
        if !self.members.contains_key(&name) && !self.make_room(&name) {
            return;
        }
        let event = match self.members.get_mut(&name) {
            None => {
                let member = Member {
                    name: name.clone(),
                    addr,
                    incarnation,
                    meta: meta.clone(),
                    state: State::Alive,
                };
                self.slots.push(name.clone());
                self.members.insert(
                    name.clone(),
                    Entry {
                        member: member.clone(),
                        slot: self.slots.len() - 1,
                        queued: false,
                        since: now,
                        suspicion: None,
                    },
                );
                self.note_up(addr);
                self.add_to_probe_order(name.clone());
                Event::Up(member)
            }
            Some(e) => {
                if !is_newer(incarnation, e.member.incarnation) {
                    return;
                }
                let old = e.member.clone();
                if let Some(s) = e.suspicion.take() {
                    self.timers.cancel(s.timer);
                }
                e.member.incarnation = incarnation;
                e.member.addr = addr;
                e.member.meta = meta.clone();
                e.member.state = State::Alive;
                if old.state != State::Alive {
                    e.since = now;
                }
                let member = e.member.clone();
                if !old.state.is_up() {
                    self.note_up(addr);
                } else if old.addr != addr {
                    self.note_down(old.addr);
                    self.note_up(addr);
                }
                let changed = old.addr != member.addr || old.meta != member.meta;
                match old.state {
                    State::Alive if changed => Event::Updated(member),
                    State::Alive => {
                        // Nothing new for the speaker; still spread it, it
                        // may clear a suspicion elsewhere.
                        self.broadcast(
                            now,
                            Update::Alive {
                                name,
                                incarnation,
                                addr,
                                meta,
                            },
                        );
                        return;
                    }
                    State::Suspect => {
                        if changed {
                            self.event(Event::Updated(member.clone()));
                        }
                        Event::Alive(member)
                    }
                    State::Dead | State::Left => {
                        self.add_to_probe_order(name.clone());
                        Event::Up(member)
                    }
                }
            }
        };
        if let Some(m) = event.member() {
            debug!(member = %m, "alive");
        }
        self.event(event);
        self.broadcast(
            now,
            Update::Alive {
                name,
                incarnation,
                addr,
                meta,
            },
        );
    }

    /// Suspect overrides alive at the same or an older incarnation; a
    /// second suspector of the same incarnation is a confirmation.
    fn apply_suspect(&mut self, now: Instant, name: Name, incarnation: Incarnation, from: Name) {
        if name == self.local.name {
            if is_current(incarnation, self.local.incarnation) {
                self.refute(now, incarnation);
            }
            return;
        }
        let n = self.num_up() + 1;
        let Some(e) = self.members.get_mut(&name) else {
            return;
        };
        if !is_current(incarnation, e.member.incarnation) || !e.member.state.is_up() {
            return;
        }
        if let Some(s) = e.suspicion.as_mut()
            && incarnation == e.member.incarnation
        {
            // Lifeguard §IV-B: each independent suspector shortens the
            // timeout; its message is passed on so others count it too.
            // Once the expected confirmations are in, the timeout is at its
            // minimum and more change nothing, so they are neither counted
            // nor passed on (hashicorp/memberlist `suspicion.Confirm`):
            // with confirmation probes every member confirms a death, and
            // relaying each of n confirmations to n members cost O(n²)
            // datagrams per death (at 1,000 members, 10% killed at once,
            // over 100 kB/s per member).
            if from == s.suspector
                || s.confirmations.len() >= s.expected
                || !s.confirmations.insert(from.clone())
            {
                return;
            }
            let (min, max) = (self.config.suspicion_min, self.config.suspicion_max);
            let at = s.start + lifeguard_timeout(min, max, s.expected, s.confirmations.len());
            let old = s.timer;
            trace!(member = %name, by = %from, count = s.confirmations.len(), "confirmation");
            self.timers.cancel(old);
            let timer = self.arm(at.max(now), Due::Suspicion(name.clone(), incarnation));
            if let Some(s) = self
                .members
                .get_mut(&name)
                .and_then(|e| e.suspicion.as_mut())
            {
                s.timer = timer;
            }
            self.broadcast(
                now,
                Update::Suspect {
                    name,
                    incarnation,
                    from,
                },
            );
            return;
        }
        // A new suspicion (or one about a newer incarnation).
        if let Some(s) = e.suspicion.take() {
            self.timers.cancel(s.timer);
        }
        let expected = self.config.suspicion_confirmations.min(n.saturating_sub(2));
        let timeout = self.suspicion_timeout(expected, 0);
        let timer = self.arm(now + timeout, Due::Suspicion(name.clone(), incarnation));
        let Some(e) = self.members.get_mut(&name) else {
            return;
        };
        e.member.incarnation = incarnation;
        e.member.state = State::Suspect;
        e.since = now;
        e.suspicion = Some(Suspicion {
            start: now,
            suspector: from.clone(),
            confirmations: BTreeSet::new(),
            expected,
            timer,
            graced: false,
        });
        let member = e.member.clone();
        let addr = member.addr;
        self.stats.suspicions += 1;
        debug!(member = %name, by = %from, ?timeout, "suspect");
        self.event(Event::Suspect(member));
        let update = Update::Suspect {
            name: name.clone(),
            incarnation,
            from: from.clone(),
        };
        if from == self.local.name {
            // Buddy system (Lifeguard §IV-C): the suspect is told first.
            self.send(addr, Message::Gossip, Some(update.clone()));
        } else if self.config.confirm_suspicions && !self.probing(&name) {
            // Check it ourselves: a dead member is confirmed within one
            // probe, a live one is not, and the timeout follows.
            self.start_probe(now, name);
        }
        self.broadcast(now, update);
    }

    fn suspicion_timeout(&self, expected: usize, confirmations: usize) -> Duration {
        lifeguard_timeout(
            self.config.suspicion_min,
            self.config.suspicion_max,
            expected,
            confirmations,
        )
    }

    fn suspicion_expired(
        &mut self,
        now: Instant,
        name: Name,
        incarnation: Incarnation,
        late: Duration,
    ) {
        let grace = self.config.probe_timeout;
        let Some(s) = self
            .members
            .get_mut(&name)
            .filter(|e| e.member.incarnation == incarnation)
            .and_then(|e| e.suspicion.as_mut())
        else {
            return;
        };
        if late > grace && !s.graced {
            // This member was paused: a refutation may be waiting unread
            // at the driver. Give it one probe timeout to come in.
            s.graced = true;
            self.stats.late_timers += 1;
            let timer = self.arm(now + grace, Due::Suspicion(name.clone(), incarnation));
            if let Some(s) = self
                .members
                .get_mut(&name)
                .and_then(|e| e.suspicion.as_mut())
            {
                s.timer = timer;
            }
            return;
        }
        let me = self.local.name.clone();
        self.apply_dead(now, name, incarnation, me);
    }

    /// Dead overrides alive and suspect at the same or an older
    /// incarnation.
    fn apply_dead(&mut self, now: Instant, name: Name, incarnation: Incarnation, from: Name) {
        if name == self.local.name {
            if is_current(incarnation, self.local.incarnation) {
                self.refute(now, incarnation);
            }
            return;
        }
        let Some(e) = self.members.get_mut(&name) else {
            return;
        };
        if !is_current(incarnation, e.member.incarnation) || !e.member.state.is_up() {
            return;
        }
        let suspicion = e.suspicion.take();
        e.member.incarnation = incarnation;
        e.member.state = State::Dead;
        e.since = now;
        let member = e.member.clone();
        self.note_down(member.addr);
        if let Some(s) = suspicion {
            self.timers.cancel(s.timer);
        }
        debug!(member = %name, by = %from, "dead");
        self.event(Event::Down(member));
        self.schedule_reap(now);
        self.broadcast(
            now,
            Update::Dead {
                name,
                incarnation,
                from,
            },
        );
    }

    /// Left overrides every other state at the same or an older
    /// incarnation.
    fn apply_left(&mut self, now: Instant, name: Name, incarnation: Incarnation) {
        if name == self.local.name {
            if is_current(incarnation, self.local.incarnation) {
                self.refute(now, incarnation);
            }
            return;
        }
        let Some(e) = self.members.get_mut(&name) else {
            return;
        };
        if !is_current(incarnation, e.member.incarnation) || e.member.state == State::Left {
            return;
        }
        let was_up = e.member.state.is_up();
        let suspicion = e.suspicion.take();
        e.member.incarnation = incarnation;
        e.member.state = State::Left;
        e.since = now;
        let member = e.member.clone();
        if was_up {
            self.note_down(member.addr);
        }
        if let Some(s) = suspicion {
            self.timers.cancel(s.timer);
        }
        debug!(member = %name, "left");
        self.event(Event::Left(member));
        self.schedule_reap(now);
        self.broadcast(now, Update::Left { name, incarnation });
    }

    /// Answers a suspicion, death or leave about ourselves at `seen` with
    /// a higher incarnation (SWIM §4.2).
    fn refute(&mut self, now: Instant, seen: Incarnation) {
        if self.left {
            return;
        }
        self.bump_incarnation(seen);
        self.stats.refutations += 1;
        // Lifeguard §IV-A: being suspected hints that we are the slow one.
        self.adjust_health(1);
        debug!(incarnation = self.local.incarnation, "refute");
        self.broadcast_local(now);
    }

    /// Moves past `seen` (a statement about us) and our own incarnation,
    /// whichever is newer. Serial arithmetic: the next incarnation after
    /// `u32::MAX` is 0, and every member takes it as newer, so a statement
    /// about us at any incarnation can be refuted.
    fn bump_incarnation(&mut self, seen: Incarnation) {
        let base = if is_newer(seen, self.local.incarnation) {
            seen
        } else {
            self.local.incarnation
        };
        self.local.incarnation = base.wrapping_add(1);
    }

    fn broadcast_local(&mut self, now: Instant) {
        let update = self.local_alive();
        self.broadcast(now, update);
    }

    fn local_alive(&self) -> Update {
        Update::Alive {
            name: self.local.name.clone(),
            incarnation: self.local.incarnation,
            addr: self.local.addr,
            meta: self.local.meta.clone(),
        }
    }

    fn add_to_probe_order(&mut self, name: Name) {
        // At a random place among those not yet probed this pass, so a
        // newcomer is probed within one pass (hashicorp/memberlist).
        // `queued` says whether it is there already, without a search
        // through the order (thousands of names, for each newcomer).
        match self.members.get_mut(&name) {
            Some(e) if !e.queued => e.queued = true,
            _ => return,
        }
        let start = self.probe_next.min(self.probe_order.len());
        let at = start + index(&mut self.rng, self.probe_order.len() - start + 1);
        self.probe_order.insert(at, name);
    }

    // ---- dissemination (SWIM §4.1) ----

    fn broadcast(&mut self, now: Instant, update: Update) {
        self.queue.push(update);
        if self.gossip_timer.is_none() {
            // At once after a quiet spell, then at most once per interval.
            let at = self
                .last_gossip
                .map_or(now, |t| (t + self.config.gossip_interval).max(now));
            self.gossip_timer = Some(self.arm(at, Due::Gossip));
        }
    }

    fn gossip(&mut self, now: Instant) {
        self.gossip_timer = None;
        if self.queue.is_empty() {
            return;
        }
        let to_dead = self.config.gossip_to_dead;
        // Members declared dead recently still hear gossip: one that is
        // alive learns of its death and refutes.
        let targets = self.random_members(self.config.gossip_fanout, |e| {
            e.member.state.is_up()
                || (e.member.state == State::Dead
                    && now.saturating_duration_since(e.since) < to_dead)
        });
        if targets.is_empty() {
            // Alone: wait for the next update (a join) to try again.
            return;
        }
        self.last_gossip = Some(now);
        for to in targets {
            if self.queue.is_empty() {
                break;
            }
            self.send(to, Message::Gossip, None);
        }
        if !self.queue.is_empty() {
            let at = now + self.config.gossip_interval;
            self.gossip_timer = Some(self.arm(at, Due::Gossip));
        }
    }

    /// How many times each update is sent: λ ⌈log10(n + 1)⌉, n counting
    /// this member.
    fn retransmit_limit(&self) -> usize {
        let x = self.num_up() + 2;
        let mut digits = 0;
        let mut power = 1usize;
        while power < x {
            digits += 1;
            power = power.saturating_mul(10);
        }
        self.config.retransmit_mult * digits
    }

    /// Builds and emits one datagram: `message`, then `first` if given,
    /// then as many queued updates as fit.
    fn send(&mut self, to: SocketAddr, message: Message, first: Option<Update>) {
        let from = self.local.name.clone();
        let mut budget = self
            .config
            .max_packet_size
            .saturating_sub(envelope::overhead(&self.config.security))
            .saturating_sub(Packet::header_len(&from, &message));
        let mut updates = Vec::new();
        let skip = first.as_ref().map(|u| u.name().clone());
        if let Some(u) = first {
            budget = budget.saturating_sub(u.buffer_len());
            updates.push(u);
        }
        let limit = self.retransmit_limit();
        let room = MAX_UPDATES - updates.len();
        updates.extend(self.queue.fill(budget, room, limit, skip.as_ref()));
        let packet = Packet {
            from,
            message,
            updates,
        };
        trace!(%to, %packet, "send");
        let len = packet.buffer_len();
        // At most MAX_UPDATES updates were taken, so emit cannot fail.
        let sealed = envelope::seal(
            &self.config.security,
            Transport::Packet,
            &mut self.rng,
            len,
            |buf| {
                let _ = packet.emit(buf);
            },
        );
        if let Some(packet) = sealed {
            self.stats.packets_sent += 1;
            self.outputs.push_back(Output::Send { to, packet });
        }
    }

    // ---- push-pull anti-entropy ----

    fn push_pull_round(&mut self, now: Instant) {
        let at = now + self.config.push_pull_interval;
        self.push_pull_timer = Some(self.arm(at, Due::PushPull));
        // Dead members are tried too: after a partition heals, that is how
        // the two sides find each other again.
        let target = self.random_members(1, |e| e.member.state != State::Left);
        if let Some(&to) = target.first() {
            self.send_state(to, false, true);
        }
    }

    fn send_state(&mut self, to: SocketAddr, join: bool, reply: bool) {
        let members: Vec<Member> = std::iter::once(self.local.clone())
            .chain(self.members.values().map(|e| e.member.clone()))
            .take(MAX_MEMBERS)
            .collect();
        let state = PushPull {
            from: self.local.name.clone(),
            addr: self.local.addr,
            join,
            reply,
            members,
        };
        trace!(%to, %state, "send stream");
        let len = state.buffer_len();
        // At most MAX_MEMBERS members were taken, so emit cannot fail.
        let sealed = envelope::seal(
            &self.config.security,
            Transport::Stream,
            &mut self.rng,
            len,
            |buf| {
                let _ = state.emit(buf);
            },
        );
        if let Some(frame) = sealed {
            self.stats.streams_sent += 1;
            self.outputs.push_back(Output::Stream { to, frame });
        }
    }

    // ---- housekeeping ----

    fn schedule_reap(&mut self, now: Instant) {
        if self.reap_timer.is_none() {
            let at = now + self.config.dead_retention;
            self.reap_timer = Some(self.arm(at, Due::Reap));
        }
    }

    fn reap(&mut self, now: Instant) {
        self.reap_timer = None;
        let retention = self.config.dead_retention;
        let expired: Vec<Name> = self
            .members
            .values()
            .filter(|e| {
                !e.member.state.is_up() && now.saturating_duration_since(e.since) >= retention
            })
            .map(|e| e.member.name.clone())
            .collect();
        for name in expired {
            self.forget(&name);
        }
        let next = self
            .members
            .values()
            .filter(|e| !e.member.state.is_up())
            .map(|e| e.since + retention)
            .min();
        if let Some(at) = next {
            self.reap_timer = Some(self.arm(at, Due::Reap));
        }
    }

    fn count_open_error(&mut self, e: OpenError) -> OpenError {
        match e {
            OpenError::Authentication { .. } => self.stats.auth_failures += 1,
            OpenError::UnknownKey { .. } => self.stats.unknown_key += 1,
            OpenError::PlaintextRejected | OpenError::EncryptedRejected => {
                self.stats.mode_mismatch += 1;
            }
            _ => self.stats.envelope_errors += 1,
        }
        trace!(error = %e, "dropped");
        e
    }

    fn event(&mut self, event: Event) {
        self.seeds_dirty = true;
        self.outputs.push_back(Output::Event(event));
    }

    // ---- seeds, rejoin and isolation ----

    /// Seeds with no live member at their address.
    fn missing_seeds(&self) -> Vec<SocketAddr> {
        self.seeds
            .iter()
            .filter(|s| !self.up_addrs.contains_key(s))
            .copied()
            .collect()
    }

    /// A member at `addr` became alive or suspect (from nothing, dead or
    /// left, or from another address).
    fn note_up(&mut self, addr: SocketAddr) {
        self.up += 1;
        let count = self.up_addrs.entry(addr).or_insert(0);
        *count += 1;
        if *count == 1 && self.seeds.contains(&addr) {
            self.seeds_missing -= 1;
        }
    }

    /// A member at `addr` stopped being alive or suspect (or moved away).
    fn note_down(&mut self, addr: SocketAddr) {
        self.up = self.up.saturating_sub(1);
        let Some(count) = self.up_addrs.get_mut(&addr) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.up_addrs.remove(&addr);
            if self.seeds.contains(&addr) {
                self.seeds_missing += 1;
            }
        }
    }

    /// Removes a dead or left member from the table.
    fn forget(&mut self, name: &Name) {
        let Some(e) = self.members.remove(name) else {
            return;
        };
        debug_assert!(!e.member.state.is_up());
        self.slots.swap_remove(e.slot);
        if let Some(moved) = self.slots.get(e.slot)
            && let Some(m) = self.members.get_mut(moved)
        {
            m.slot = e.slot;
        }
    }

    /// Runs after every input that changed the membership or the seeds:
    /// keeps the rejoin timer armed exactly while a seed has no live
    /// member, declares an isolation when the last member is lost, and
    /// ends one when a member is up.
    fn check_seeds(&mut self, now: Instant) {
        if !std::mem::take(&mut self.seeds_dirty) || self.left {
            return;
        }
        let up = self.num_up() > 0;
        let missing = self.seeds_missing > 0;
        if !missing {
            self.rejoin_attempt = 0;
            if let Some(t) = self.rejoin_timer.take() {
                self.timers.cancel(t);
            }
        } else if self.rejoin_timer.is_none() {
            let at = now + self.rejoin_delay();
            self.rejoin_timer = Some(self.arm(at, Due::Rejoin));
        }
        let alone = !up && !self.seeds.is_empty();
        if alone && self.connected {
            // The failure detector took the last member: already
            // established, no need to wait for a rejoin to go unanswered.
            self.set_isolated(true);
        } else if !alone {
            self.set_isolated(false);
        }
        self.connected = up;
    }

    /// The rejoin timer: join the seeds without a live member again.
    fn rejoin(&mut self, now: Instant) {
        self.rejoin_timer = None;
        let missing = self.missing_seeds();
        if missing.is_empty() {
            self.rejoin_attempt = 0;
            return;
        }
        if self.num_up() == 0 {
            // The previous join went unanswered for a whole backoff.
            self.set_isolated(true);
        }
        self.stats.rejoins += 1;
        debug!(
            seeds = missing.len(),
            attempt = self.rejoin_attempt,
            "rejoin"
        );
        for seed in missing {
            self.send_state(seed, true, true);
        }
        self.rejoin_attempt = self.rejoin_attempt.saturating_add(1);
        let at = now + self.rejoin_delay();
        self.rejoin_timer = Some(self.arm(at, Due::Rejoin));
    }

    /// The delay before the next rejoin: `rejoin_min · 2^attempt`, at most
    /// `rejoin_max`, drawn uniformly from the upper half of that.
    fn rejoin_delay(&mut self) -> Duration {
        let factor = 1u32 << self.rejoin_attempt.min(31);
        let full = self
            .config
            .rejoin_min
            .saturating_mul(factor)
            .min(self.config.rejoin_max);
        let half = full / 2;
        half + self.jitter(full - half)
    }

    fn set_isolated(&mut self, isolated: bool) {
        if isolated == self.isolated {
            return;
        }
        self.isolated = isolated;
        if isolated {
            self.stats.isolations += 1;
            debug!(seeds = self.seeds.len(), "isolated");
            self.outputs.push_back(Output::Event(Event::Isolated));
        } else {
            debug!("connected");
            self.outputs.push_back(Output::Event(Event::Connected));
        }
    }

    /// Room in the table for the new member `name`: true if there is
    /// room, or the oldest dead or left member was forgotten to make it;
    /// false (counted) if the table is full of live members.
    fn make_room(&mut self, name: &Name) -> bool {
        if self.members.len() < self.config.max_members {
            return true;
        }
        let oldest = self
            .members
            .values()
            .filter(|e| !e.member.state.is_up())
            .min_by_key(|e| e.since)
            .map(|e| e.member.name.clone());
        match oldest {
            Some(old) => {
                self.forget(&old);
                self.stats.members_evicted += 1;
                trace!(member = %old, "forgotten to make room");
                true
            }
            None => {
                self.stats.members_rejected += 1;
                trace!(member = %name, max = self.config.max_members, "member table full");
                false
            }
        }
    }

    fn arm(&mut self, at: Instant, due: Due) -> Timer {
        let timer = self.timers.arm(at, due.kind(), due);
        self.outputs.push_back(Output::Arm { at, timer });
        timer
    }

    fn seq(&mut self) -> Seq {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    /// A uniform duration in `0..d`.
    fn jitter(&mut self, d: Duration) -> Duration {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(below(&mut self.rng, nanos))
    }

    /// Up to `k` distinct random members matching `filter`, as addresses.
    ///
    /// Draws members at random first, which costs O(k) when most match
    /// (gossip and ping-req targets, several times per probe interval, in
    /// a table of thousands); only when that falls short does it go
    /// through the whole table. Either way every set of `k` matching
    /// members is equally likely.
    fn random_members(&mut self, k: usize, filter: impl Fn(&Entry) -> bool) -> Vec<SocketAddr> {
        let n = self.slots.len();
        let mut picked: Vec<usize> = Vec::with_capacity(k);
        for _ in 0..4 * k + 8 {
            if picked.len() >= k.min(n) {
                break;
            }
            let slot = index(&mut self.rng, n);
            if picked.contains(&slot) {
                continue;
            }
            if self.members.get(&self.slots[slot]).is_some_and(&filter) {
                picked.push(slot);
            }
        }
        if picked.len() == k {
            return picked
                .iter()
                .filter_map(|&slot| self.members.get(&self.slots[slot]))
                .map(|e| e.member.addr)
                .collect();
        }
        let mut candidates: Vec<SocketAddr> = self
            .members
            .values()
            .filter(|e| filter(e))
            .map(|e| e.member.addr)
            .collect();
        let k = k.min(candidates.len());
        // A partial Fisher-Yates shuffle.
        for i in 0..k {
            let j = i + index(&mut self.rng, candidates.len() - i);
            candidates.swap(i, j);
        }
        candidates.truncate(k);
        candidates
    }
}

impl State {
    /// Alive or suspect: probed, gossiped to, counted in the cluster size.
    fn is_up(self) -> bool {
        matches!(self, Self::Alive | Self::Suspect)
    }
}

/// Lifeguard §IV-B: `max(min, max − (max − min) · log(c + 1) / log(k + 1))`
/// for `c` confirmations out of `k` expected; `min` when none are expected.
#[must_use]
pub fn lifeguard_timeout(min: Duration, max: Duration, k: usize, c: usize) -> Duration {
    if k == 0 || c >= k {
        return min;
    }
    #[allow(clippy::cast_precision_loss)]
    let frac = ((c + 1) as f64).ln() / ((k + 1) as f64).ln();
    let span = max.saturating_sub(min);
    max.saturating_sub(span.mul_f64(frac)).max(min)
}

/// A uniform integer in `0..n` (0 when `n` is 0), by Lemire's
/// multiply-shift; the bias is below n / 2^64.
fn below<R: RngCore>(rng: &mut R, n: u64) -> u64 {
    let wide = u128::from(rng.next_u64()) * u128::from(n);
    // The high half is below n, so it fits.
    u64::try_from(wide >> 64).unwrap_or(0)
}

/// A uniform index in `0..n`.
fn index<R: RngCore>(rng: &mut R, n: usize) -> usize {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    usize::try_from(below(rng, n)).unwrap_or(0)
}

fn shuffle<R: RngCore, T>(rng: &mut R, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = index(rng, i + 1);
        v.swap(i, j);
    }
}

/// Relays in flight at once, at most.
const MAX_RELAYS: usize = 1024;

/// Stale statements about other members answered per datagram, at most
/// (each answer is a datagram back to the sender, so a datagram full of
/// stale updates costs a bounded reply).
const MAX_CORRECTIONS: usize = 4;

#[cfg(test)]
mod tests;
