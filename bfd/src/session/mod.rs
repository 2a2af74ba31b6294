//! BFD asynchronous mode (RFC 5880 §6.8) for every session of a speaker.
//!
//! [`Bfd`] owns the sessions, keyed by [`PeerKey`] (peer address, and
//! single-hop RFC 5881 or multihop RFC 5883), demultiplexes received
//! Control packets by Your Discriminator (or by source address while the
//! peer does not know ours yet), applies GTSM, and runs each session's
//! state machine and its two timers: the transmit timer (§6.8.7, jittered)
//! and the detection timer (§6.8.4). A min-heap of session deadlines makes
//! [`Bfd::poll_timeout`] O(1) and each expiry O(log n), so the cost per
//! packet does not grow with the number of sessions.
//!
//! The echo function (RFC 5880 §6.4, §6.8.9) runs beside asynchronous
//! mode on single-hop sessions whose profile asks for it: once Up, and
//! while the peer advertises a nonzero Required Min Echo RX Interval, the
//! session emits [`Output::Echo`] packets that the driver sends to the
//! peer's forwarding plane addressed to ourselves (RFC 5881 §4), and the
//! driver hands the ones that come back to [`Bfd::handle_echo`]. A
//! detection time without a returned echo takes the session Down with
//! diag 2. While echoes flow, our Required Min RX Interval is raised to at
//! least one second (§6.8.3's SHOULD), so the peer's Control packets slow
//! down and the echoes do the fast detection.
//!
//! No I/O, no clock: the driver feeds `now` and datagrams (with their
//! received TTL / hop limit) and drains [`Output`]s. Demand mode is off and
//! authentication is not implemented.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::IpAddr;
use std::num::{NonZeroU8, NonZeroU32};
use std::time::{Duration, Instant};

use rand_core::RngCore;
use tracing::{debug, trace};

use crate::echo::{ECHO_LEN, EchoRepr};
use crate::wire::{Diag, Error, PACKET_LEN, Repr, State};

/// Timer values of a session: the fields of MetalLB's `BFDProfile` that
/// apply to asynchronous mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Profile {
    /// `receiveInterval`: the minimum interval between received packets
    /// we can handle (our Required Min RX Interval).
    pub receive_interval: Duration,
    /// `transmitInterval`: the minimum interval we would like to send at
    /// (our Desired Min TX Interval, once Up).
    pub transmit_interval: Duration,
    /// `detectMultiplier`: the peer declares us down after this many
    /// missed packets.
    pub detect_multiplier: NonZeroU8,
    /// `passiveMode`: send nothing until the peer has sent a packet.
    pub passive: bool,
    /// `minimumTtl`: for multihop sessions, the lowest TTL accepted
    /// (single-hop sessions always require 255).
    pub minimum_ttl: u8,
    /// `echoMode` with its `echoInterval`, or `None` without echo mode.
    /// The interval is both what we advertise as Required Min Echo RX
    /// Interval and the fastest we send echoes at (as FRR's
    /// `echo-interval`). Ignored on multihop sessions (RFC 5883 §3).
    pub echo_interval: Option<Duration>,
}

impl Default for Profile {
    /// MetalLB's defaults: 300 ms both ways, multiplier 3, active, 254.
    fn default() -> Self {
        Self {
            receive_interval: Duration::from_millis(300),
            transmit_interval: Duration::from_millis(300),
            detect_multiplier: NonZeroU8::MIN.saturating_add(2),
            passive: false,
            minimum_ttl: 254,
            echo_interval: None,
        }
    }
}

/// Which session: the peer's address and the encapsulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerKey {
    /// The peer's address.
    pub peer: IpAddr,
    /// RFC 5883 multihop (UDP 4784, minimum TTL) rather than RFC 5881
    /// single-hop (UDP 3784, TTL 255).
    pub multihop: bool,
}

/// A session to add: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// Peer and encapsulation.
    pub key: PeerKey,
    /// The source address to send from (the driver's business; kept here
    /// so that it travels with [`Transmit`]).
    pub local: Option<IpAddr>,
    /// Timers.
    pub profile: Profile,
}

/// Something for the driver to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Send a Control packet.
    Transmit(Transmit),
    /// Send an Echo packet.
    Echo(EchoTransmit),
    /// A session changed state.
    Event(Event),
}

/// A Control packet to send: to `key.peer`, UDP port 3784 (single-hop) or
/// 4784 (multihop), TTL 255, from the session's own source port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The session.
    pub key: PeerKey,
    /// The configured source address.
    pub local: Option<IpAddr>,
    /// The packet.
    pub packet: [u8; PACKET_LEN],
}

/// An Echo packet to send (RFC 5881 §4): UDP port 3785 from and to our
/// own address (`local`, or the one the driver sends the session's
/// Control packets from), through the link to `key.peer`, whose
/// forwarding plane returns it to us. Its TTL is 255, so that only a
/// packet that was forwarded comes back with less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoTransmit {
    /// The session.
    pub key: PeerKey,
    /// The configured source address.
    pub local: Option<IpAddr>,
    /// The packet.
    pub packet: [u8; ECHO_LEN],
}

/// A state change of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The session.
    pub key: PeerKey,
    /// When (the `now` of the input that caused it).
    pub at: Instant,
    /// Old state.
    pub from: State,
    /// New state.
    pub to: State,
    /// Our diagnostic: why we left Up (Down), or None.
    pub diag: Diag,
    /// Why the session left Init or Up, in more detail than `diag`; `None`
    /// for every other transition. A client of BFD (RFC 5882 §3) reacts to
    /// it: see [`crate::client`].
    pub cause: Option<DownCause>,
}

/// Why a session left Init or Up. The diagnostic we send (RFC 5880 §4.1)
/// is the same for several of these; a client needs to tell them apart,
/// because only some are failures of the path (RFC 5882 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DownCause {
    /// No packet for the detection time (diag 1, RFC 5880 §6.8.4): the
    /// path or the peer failed.
    DetectionTimeExpired,
    /// None of our echo packets came back for the echo detection time
    /// (diag 2, RFC 5880 §6.8.5): the peer's forwarding plane or the path
    /// failed, whatever its control plane says.
    EchoFunctionFailed,
    /// The peer said Down with the discriminator we knew and a diagnostic
    /// of a failure it detected (its own detection time expired, diag 1;
    /// or echo, forwarding plane, path down: 2, 4, 5, 6, 8; or one we do
    /// not know): the path fails at least one way. We send diag 3.
    NeighborDown,
    /// The peer said AdminDown: it was taken down on purpose, and RFC 5882
    /// §3.2 forbids treating this as a path failure. We send diag 3.
    NeighborAdminDown,
    /// The peer said Down while we were Up, for a reason of its own rather
    /// than a failure it detected: with a new My Discriminator (it replaced
    /// its session), or with diagnostic 0 (a fresh start), or 3 or 7
    /// although we never signalled Down (FRR 8.4's bfdd sends Down, diag 3,
    /// from a session it deletes; bgpd deletes and re-creates its session
    /// once BGP is Established, to add the source address). Its packets
    /// still arrive, so the path works, and a new session comes Up after
    /// one slow-rate handshake (RFC 5880 §6.8.3, §6.8.6). We send diag 3.
    NeighborRestarted,
    /// We held the session AdminDown ([`Bfd::set_admin_down`]).
    AdminDown,
}

/// Counters of a [`Bfd`]: everything received is either handled by a
/// session or counted in exactly one drop counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets handed to a session.
    pub received: u64,
    /// Packets sent.
    pub sent: u64,
    /// Dropped: failed the RFC 5880 §6.8.6 checks.
    pub malformed: u64,
    /// Dropped: the A bit is set (authentication is not implemented).
    pub authenticated: u64,
    /// Dropped: TTL not 255 (single-hop) or below the minimum (multihop).
    pub bad_ttl: u64,
    /// Dropped: no session for the discriminator or the source address.
    pub unknown_session: u64,
    /// Echo packets sent.
    pub echo_sent: u64,
    /// Echo packets of ours that came back to a session with echo active.
    pub echo_received: u64,
    /// Echo datagrams dropped: not our format, or no session with echo
    /// active for the discriminator.
    pub echo_dropped: u64,
}

/// A snapshot of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session.
    pub key: PeerKey,
    /// bfd.SessionState.
    pub state: State,
    /// bfd.RemoteSessionState.
    pub remote_state: State,
    /// bfd.LocalDiag.
    pub diag: Diag,
    /// bfd.LocalDiscr.
    pub local_discriminator: u32,
    /// bfd.RemoteDiscr (0 while unknown).
    pub remote_discriminator: u32,
    /// The interval we send at now, before jitter (zero: not sending).
    pub tx_interval: Duration,
    /// The detection time in use (zero until a packet arrived).
    pub detection_time: Duration,
    /// A Poll Sequence is in progress.
    pub polling: bool,
    /// Packets received by this session.
    pub received: u64,
    /// When the last of them was handed in (the `now` of that input).
    pub last_received: Option<Instant>,
    /// Packets sent by this session.
    pub sent: u64,
    /// Times the session went Up.
    pub ups: u64,
    /// Times the session left Up.
    pub downs: u64,
    /// The peer's Required Min Echo RX Interval (zero: it wants none).
    pub remote_min_echo_rx: Duration,
    /// The interval we send echoes at, before jitter (zero: the echo
    /// function is not active).
    pub echo_interval: Duration,
    /// The echo detection time in use (zero while echo is not active).
    pub echo_detection_time: Duration,
    /// Echo packets sent by this session.
    pub echo_sent: u64,
    /// Echo packets that came back to this session.
    pub echo_received: u64,
    /// When the last of them came back.
    pub last_echo_received: Option<Instant>,
}

/// Every BFD session of a speaker.
#[derive(Debug)]
pub struct Bfd<R> {
    rng: R,
    sessions: HashMap<PeerKey, Session>,
    by_discriminator: HashMap<u32, PeerKey>,
    /// Every session's next deadline, earliest first. An entry is current
    /// while it equals its session's `armed`; others are stale and skipped
    /// (lazy deletion: a deadline that moves pushes a new entry). Stale
    /// entries are popped as soon as they reach the top, so the top is
    /// always current.
    timers: BinaryHeap<Reverse<(Instant, PeerKey)>>,
    out: VecDeque<Output>,
    stats: Stats,
}

impl<R: RngCore> Bfd<R> {
    /// No sessions; `rng` gives discriminators and transmit jitter.
    pub fn new(rng: R) -> Self {
        Self {
            rng,
            sessions: HashMap::new(),
            by_discriminator: HashMap::new(),
            timers: BinaryHeap::new(),
            out: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// Adds a session in Down, or changes the profile of an existing one
    /// (a Poll Sequence when it is Up, RFC 5880 §6.8.3). Returns our
    /// discriminator for it.
    pub fn add_session(&mut self, now: Instant, config: SessionConfig) -> NonZeroU32 {
        if let Some(s) = self.sessions.get_mut(&config.key) {
            s.local = config.local;
            s.set_profile(now, config.profile, &mut self.rng);
            let discr = s.local_discr;
            self.arm(config.key);
            return discr;
        }
        let discr = loop {
            if let Some(d) = NonZeroU32::new(self.rng.next_u32())
                && !self.by_discriminator.contains_key(&d.get())
            {
                break d;
            }
        };
        let session = Session::new(now, config, discr);
        debug!(peer = %config.key.peer, multihop = config.key.multihop, discr = discr.get(), "bfd session added");
        self.by_discriminator.insert(discr.get(), config.key);
        self.sessions.insert(config.key, session);
        self.arm(config.key);
        discr
    }

    /// Removes a session. A peer that knows us gets one AdminDown packet
    /// (diag 7), so that it goes Down with diag 3 instead of waiting for
    /// its detection time. Returns whether the session existed.
    pub fn remove_session(&mut self, now: Instant, key: PeerKey) -> bool {
        let Some(mut s) = self.sessions.remove(&key) else {
            return false;
        };
        self.by_discriminator.remove(&s.local_discr.get());
        if s.remote_discr != 0 {
            s.state = State::AdminDown;
            s.diag = Diag::AdministrativelyDown;
            s.transmit(false, &mut self.out, &mut self.stats);
        }
        self.prune();
        trace!(peer = %key.peer, ?now, "bfd session removed");
        true
    }

    /// Holds a session in AdminDown (diag 7; the peer goes Down with
    /// diag 3), or releases it to Down. Returns whether the session exists.
    pub fn set_admin_down(&mut self, now: Instant, key: PeerKey, down: bool) -> bool {
        let Some(s) = self.sessions.get_mut(&key) else {
            return false;
        };
        match (down, s.state) {
            (true, State::AdminDown) | (false, State::Down | State::Init | State::Up) => {}
            (true, from) => {
                let cause = matches!(from, State::Init | State::Up).then_some(DownCause::AdminDown);
                s.change_state(
                    now,
                    State::AdminDown,
                    Diag::AdministrativelyDown,
                    cause,
                    &mut self.out,
                );
                s.detect_at = None;
                // Tell the peer at once; keep sending AdminDown at the slow
                // rate (RFC 5880 §6.8.16).
                s.transmit(false, &mut self.out, &mut self.stats);
            }
            (false, _) => {
                s.change_state(now, State::Down, Diag::None, None, &mut self.out);
                s.schedule_tx_now(now);
            }
        }
        self.arm(key);
        true
    }

    /// Handles one received datagram: call for every datagram on UDP 3784
    /// (`multihop` false) or 4784 (`multihop` true), with its source
    /// address and received TTL / hop limit. Then drain
    /// [`poll_output`](Self::poll_output).
    pub fn handle_packet(
        &mut self,
        now: Instant,
        data: &[u8],
        from: IpAddr,
        ttl: u8,
        multihop: bool,
    ) {
        // RFC 5881 §5: single-hop packets must arrive with TTL 255 (GTSM);
        // checked first, as it is the cheapest filter for off-link senders.
        if !multihop && ttl != 255 {
            trace!(%from, ttl, "bfd drop: ttl");
            self.stats.bad_ttl += 1;
            return;
        }
        let repr = match Repr::parse_bytes(data) {
            Ok(r) => r,
            Err(Error::Authenticated) => {
                trace!(%from, "bfd drop: authentication not supported");
                self.stats.authenticated += 1;
                return;
            }
            Err(e) => {
                trace!(%from, error = %e, "bfd drop: malformed");
                self.stats.malformed += 1;
                return;
            }
        };
        // RFC 5880 §6.8.6: select the session by Your Discriminator, or by
        // the source address while the peer does not know ours.
        let key = if repr.your_discriminator != 0 {
            self.by_discriminator.get(&repr.your_discriminator).copied()
        } else {
            Some(PeerKey {
                peer: from,
                multihop,
            })
        };
        // A discriminator must also come from the session's peer and
        // encapsulation (RFC 5881 §4, RFC 5883 §3: the source address MAY
        // be checked; we do, so a spoofed discriminator cannot reach it).
        let Some(s) = key
            .filter(|k| k.peer == from && k.multihop == multihop)
            .and_then(|k| self.sessions.get_mut(&k))
        else {
            trace!(%from, your = repr.your_discriminator, "bfd drop: no session");
            self.stats.unknown_session += 1;
            return;
        };
        // RFC 5883 §2: multihop GTSM with a configured minimum.
        if multihop && ttl < s.profile.minimum_ttl {
            trace!(%from, ttl, "bfd drop: ttl below minimum");
            self.stats.bad_ttl += 1;
            return;
        }
        self.stats.received += 1;
        s.handle_packet(now, &repr, &mut self.rng, &mut self.out, &mut self.stats);
        let key = s.key;
        self.arm(key);
    }

    /// Handles an echo packet that came back: call for every datagram on
    /// UDP 3785 that the driver saw arrive from the link with our own
    /// address as both source and destination and a TTL below 255 (it was
    /// forwarded). Then drain [`poll_output`](Self::poll_output).
    pub fn handle_echo(&mut self, now: Instant, data: &[u8]) {
        let echo = match EchoRepr::parse(data) {
            Ok(e) => e,
            Err(e) => {
                trace!(error = %e, "bfd echo drop: malformed");
                self.stats.echo_dropped += 1;
                return;
            }
        };
        let Some(s) = self
            .by_discriminator
            .get(&echo.discriminator.get())
            .and_then(|k| self.sessions.get_mut(k))
            .filter(|s| s.echo.is_some())
        else {
            trace!(
                discr = echo.discriminator.get(),
                "bfd echo drop: no session with echo"
            );
            self.stats.echo_dropped += 1;
            return;
        };
        s.handle_echo(now);
        self.stats.echo_received += 1;
        let key = s.key;
        self.arm(key);
    }

    /// Fires expired timers: call when [`poll_timeout`](Self::poll_timeout)
    /// has passed (spurious calls are harmless). Then drain
    /// [`poll_output`](Self::poll_output).
    pub fn handle_timeout(&mut self, now: Instant) {
        // Take every due entry first: a session re-armed at `now` (a zero
        // interval) waits for the next call instead of looping here.
        let mut due = Vec::new();
        while let Some(&Reverse((at, key))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.sessions.get(&key).is_some_and(|s| s.armed == Some(at)) {
                due.push(key);
            }
        }
        for key in due {
            if let Some(s) = self.sessions.get_mut(&key) {
                s.armed = None;
                s.handle_timeout(now, &mut self.rng, &mut self.out, &mut self.stats);
                self.arm(key);
            }
        }
        self.prune();
    }

    /// The next thing to do. Call after every `handle_*`, `add_session`,
    /// `remove_session` and `set_admin_down` until it returns `None`.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next. Call
    /// after draining [`poll_output`](Self::poll_output).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _))| *at)
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// A snapshot of one session.
    pub fn session(&self, key: PeerKey) -> Option<SessionInfo> {
        self.sessions.get(&key).map(Session::info)
    }

    /// Snapshots of every session.
    pub fn sessions(&self) -> impl Iterator<Item = SessionInfo> + '_ {
        self.sessions.values().map(Session::info)
    }

    /// Puts a session's next deadline in the heap if it changed, then
    /// drops stale entries from the top. Call after every change to a
    /// session.
    fn arm(&mut self, key: PeerKey) {
        if let Some(s) = self.sessions.get_mut(&key) {
            let next = s.next_deadline();
            if next != s.armed {
                s.armed = next;
                if let Some(at) = next {
                    self.timers.push(Reverse((at, key)));
                }
            }
        }
        self.prune();
    }

    /// Pops stale entries until the top is current (or the heap empty).
    /// Each entry is popped once, so this is O(log n) amortised. Stale
    /// entries below the top (deadlines moved earlier, sessions removed)
    /// are swept when they outnumber the sessions, which takes O(n) once
    /// per at least n stale pushes.
    fn prune(&mut self) {
        let current = |sessions: &HashMap<PeerKey, Session>, at: Instant, key: &PeerKey| {
            sessions.get(key).is_some_and(|s| s.armed == Some(at))
        };
        while let Some(&Reverse((at, key))) = self.timers.peek() {
            if current(&self.sessions, at, &key) {
                break;
            }
            self.timers.pop();
        }
        if self.timers.len() > 2 * self.sessions.len() + STALE_SLACK {
            let sessions = &self.sessions;
            self.timers
                .retain(|Reverse((at, key))| current(sessions, *at, key));
        }
    }
}

/// One session's RFC 5880 §6.8.1 state variables and timers.
#[derive(Debug)]
struct Session {
    key: PeerKey,
    local: Option<IpAddr>,
    profile: Profile,
    /// bfd.SessionState.
    state: State,
    /// bfd.RemoteSessionState.
    remote_state: State,
    /// bfd.LocalDiscr.
    local_discr: NonZeroU32,
    /// bfd.RemoteDiscr.
    remote_discr: u32,
    /// bfd.LocalDiag.
    diag: Diag,
    /// bfd.DesiredMinTxInterval: what we advertise.
    desired_tx: Duration,
    /// bfd.RequiredMinRxInterval: what we advertise.
    required_rx: Duration,
    /// The Desired Min TX in effect for our transmit interval: an increase
    /// waits for the Final of a Poll Sequence (§6.8.3).
    tx_in_use: Duration,
    /// The Required Min RX in effect for the detection time: a decrease
    /// waits for the Final.
    rx_in_use: Duration,
    /// bfd.RemoteMinRxInterval.
    remote_min_rx: Duration,
    /// The peer's last Desired Min TX Interval.
    remote_desired_tx: Duration,
    /// The peer's last Detect Mult (0 before any packet).
    remote_detect_mult: u8,
    /// A Poll Sequence is in progress: periodic packets carry P.
    polling: bool,
    /// Passive mode: the peer has sent us a packet since we last lost it.
    heard: bool,
    next_tx: Option<Instant>,
    detect_at: Option<Instant>,
    /// The deadline this session has in [`Bfd`]'s heap.
    armed: Option<Instant>,
    received: u64,
    last_received: Option<Instant>,
    sent: u64,
    ups: u64,
    downs: u64,
    /// bfd.RemoteMinEchoRxInterval (RFC 5880 §6.8.1 calls it
    /// RequiredMinEchoRxInterval on the peer's side).
    remote_min_echo_rx: Duration,
    /// The echo function, while active.
    echo: Option<Echo>,
    echo_sent: u64,
    echo_received: u64,
    last_echo_received: Option<Instant>,
}

/// The echo function of a session while it is active: only in Up, on a
/// single-hop session with an echo interval, while the peer advertises a
/// nonzero Required Min Echo RX Interval.
#[derive(Debug, Clone, Copy)]
struct Echo {
    /// The larger of our echo interval and the peer's Required Min Echo RX
    /// Interval (§6.8.9: never faster than the peer asks).
    interval: Duration,
    next_tx: Instant,
    detect_at: Instant,
    /// Sequence number of the last echo sent.
    sequence: u64,
}

impl Session {
    fn new(now: Instant, config: SessionConfig, local_discr: NonZeroU32) -> Self {
        let p = config.profile;
        let desired_tx = slow(p.transmit_interval);
        let mut s = Self {
            key: config.key,
            local: config.local,
            profile: p,
            state: State::Down,
            remote_state: State::Down,
            local_discr,
            remote_discr: 0,
            diag: Diag::None,
            desired_tx,
            required_rx: p.receive_interval,
            tx_in_use: desired_tx,
            rx_in_use: p.receive_interval,
            // §6.8.1: initialised to 1 (microsecond), so that we send.
            remote_min_rx: Duration::from_micros(1),
            remote_desired_tx: Duration::ZERO,
            remote_detect_mult: 0,
            polling: false,
            heard: false,
            next_tx: None,
            detect_at: None,
            armed: None,
            received: 0,
            last_received: None,
            sent: 0,
            ups: 0,
            downs: 0,
            remote_min_echo_rx: Duration::ZERO,
            echo: None,
            echo_sent: 0,
            echo_received: 0,
            last_echo_received: None,
        };
        s.schedule_tx_now(now);
        s
    }

    fn info(&self) -> SessionInfo {
        SessionInfo {
            key: self.key,
            state: self.state,
            remote_state: self.remote_state,
            diag: self.diag,
            local_discriminator: self.local_discr.get(),
            remote_discriminator: self.remote_discr,
            tx_interval: if self.may_transmit() {
                self.tx_interval()
            } else {
                Duration::ZERO
            },
            detection_time: self.detection_time(),
            polling: self.polling,
            received: self.received,
            last_received: self.last_received,
            sent: self.sent,
            ups: self.ups,
            downs: self.downs,
            remote_min_echo_rx: self.remote_min_echo_rx,
            echo_interval: self.echo.map_or(Duration::ZERO, |e| e.interval),
            echo_detection_time: self
                .echo
                .map_or(Duration::ZERO, |e| self.echo_detection_time(e.interval)),
            echo_sent: self.echo_sent,
            echo_received: self.echo_received,
            last_echo_received: self.last_echo_received,
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        [
            self.next_tx,
            self.detect_at,
            self.echo.map(|e| e.next_tx),
            self.echo.map(|e| e.detect_at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Our Required Min Echo RX Interval: the profile's echo interval on a
    /// single-hop session, else zero (we want no echoes: our node's
    /// forwarding plane may not loop them, §6.8.3).
    fn echo_rx(&self) -> Duration {
        match self.profile.echo_interval {
            Some(i) if !self.key.multihop => i,
            _ => Duration::ZERO,
        }
    }

    /// Our echo detection time: our Detect Mult times the echo interval
    /// (RFC 5880 leaves it to the implementation; FRR multiplies by the
    /// peer's Detect Mult, the same with equal profiles).
    fn echo_detection_time(&self, interval: Duration) -> Duration {
        interval * u32::from(self.profile.detect_multiplier.get())
    }

    /// The Required Min RX Interval for the profile: at least one second
    /// while the echo function is active (§6.8.3: echoes do the
    /// detection, Control packets only keep the session).
    fn profile_rx(&self) -> Duration {
        if self.echo.is_some() {
            self.profile.receive_interval.max(SLOW_TX)
        } else {
            self.profile.receive_interval
        }
    }

    /// Starts, retimes or stops the echo function after anything that can
    /// change whether it may run: a state change, a packet (the peer's
    /// Required Min Echo RX Interval), a profile change. Starting or
    /// stopping it while Up changes our Required Min RX Interval by a Poll
    /// Sequence.
    fn update_echo(&mut self, now: Instant) {
        let wanted =
            self.state == State::Up && !self.key.multihop && !self.remote_min_echo_rx.is_zero();
        let want = self
            .profile
            .echo_interval
            .filter(|_| wanted)
            .map(|i| i.max(self.remote_min_echo_rx));
        match (want, &mut self.echo) {
            (None, None) => return,
            (Some(interval), Some(e)) => {
                if e.interval != interval {
                    // The next echo keeps its time; the detection time
                    // grows at once, shrinks with the next echo back.
                    e.interval = interval;
                    let detect = now + interval * u32::from(self.profile.detect_multiplier.get());
                    e.detect_at = e.detect_at.max(detect);
                }
                return;
            }
            (Some(interval), None) => {
                debug!(peer = %self.key.peer, ?interval, "bfd echo start");
                self.echo = Some(Echo {
                    interval,
                    next_tx: now,
                    detect_at: now + self.echo_detection_time(interval),
                    sequence: 0,
                });
            }
            (None, Some(_)) => {
                debug!(peer = %self.key.peer, "bfd echo stop");
                self.echo = None;
            }
        }
        if self.state == State::Up {
            self.update_timers_up(self.profile.transmit_interval, self.profile_rx());
        }
    }

    /// One of our echoes came back.
    fn handle_echo(&mut self, now: Instant) {
        self.echo_received += 1;
        self.last_echo_received = Some(now);
        if let Some(e) = &mut self.echo {
            e.detect_at = now + e.interval * u32::from(self.profile.detect_multiplier.get());
        }
    }

    /// §6.8.7: the larger of our Desired Min TX (in use) and the peer's
    /// Required Min RX.
    fn tx_interval(&self) -> Duration {
        self.tx_in_use.max(self.remote_min_rx)
    }

    /// §6.8.4, asynchronous mode: the peer's Detect Mult times the larger
    /// of our Required Min RX (in use) and its last Desired Min TX.
    fn detection_time(&self) -> Duration {
        self.rx_in_use.max(self.remote_desired_tx) * u32::from(self.remote_detect_mult)
    }

    /// Whether periodic packets may go out: a passive session waits for
    /// the peer (§6.1), and a peer asking for Required Min RX 0 gets none
    /// (§6.8.3).
    fn may_transmit(&self) -> bool {
        (!self.profile.passive || self.heard) && !self.remote_min_rx.is_zero()
    }

    fn schedule_tx_now(&mut self, now: Instant) {
        self.next_tx = self.may_transmit().then_some(now);
    }

    /// The next periodic transmission: 75-100 % of the interval, or 75-90 %
    /// with a Detect Mult of 1 (§6.8.7).
    fn jittered(&self, now: Instant, rng: &mut impl RngCore) -> Instant {
        jitter(now, self.tx_interval(), self.profile.detect_multiplier, rng)
    }

    fn set_profile(&mut self, now: Instant, profile: Profile, rng: &mut impl RngCore) {
        let old_interval = self.tx_interval();
        self.profile = profile;
        let (tx, rx) = (profile.transmit_interval, profile.receive_interval);
        if self.state == State::Up {
            self.update_echo(now);
            self.update_timers_up(tx, self.profile_rx());
        } else {
            // No Poll Sequence outside Up: the change applies at once.
            self.desired_tx = slow(tx);
            self.required_rx = rx;
            self.tx_in_use = self.desired_tx;
            self.rx_in_use = rx;
        }
        if !self.may_transmit() {
            self.next_tx = None;
        } else if self.tx_interval() < old_interval || self.next_tx.is_none() {
            self.next_tx = Some(self.jittered(now, rng));
        }
    }

    /// §6.8.3 while Up: advertise the new values in a Poll Sequence; a
    /// faster transmit rate and a longer detection time apply at once, the
    /// others when the Final arrives.
    fn update_timers_up(&mut self, tx: Duration, rx: Duration) {
        if tx == self.desired_tx && rx == self.required_rx {
            return;
        }
        self.desired_tx = tx;
        self.required_rx = rx;
        self.tx_in_use = self.tx_in_use.min(tx);
        self.rx_in_use = self.rx_in_use.max(rx);
        self.polling = true;
    }

    /// Moves to `to` and reports it; `cause` is `Some` exactly when the
    /// session leaves Init or Up for Down or AdminDown.
    fn change_state(
        &mut self,
        now: Instant,
        to: State,
        diag: Diag,
        cause: Option<DownCause>,
        out: &mut VecDeque<Output>,
    ) {
        let from = self.state;
        if from == to {
            return;
        }
        self.state = to;
        self.diag = diag;
        debug!(peer = %self.key.peer, %from, %to, %diag, ?cause, "bfd state change");
        if to == State::Up {
            self.ups += 1;
            // Leave the slow (1 s) rate of §6.8.3 for the configured one.
            self.update_timers_up(
                self.profile.transmit_interval,
                self.profile.receive_interval,
            );
            // And start echoes if the peer wants them.
            self.update_echo(now);
        } else if from == State::Up {
            self.downs += 1;
            self.echo = None;
            self.polling = false;
            self.desired_tx = slow(self.profile.transmit_interval);
            self.tx_in_use = self.desired_tx;
            self.required_rx = self.profile.receive_interval;
            self.rx_in_use = self.required_rx;
        }
        out.push_back(Output::Event(Event {
            key: self.key,
            at: now,
            from,
            to,
            diag,
            cause,
        }));
    }

    /// RFC 5880 §6.8.6 from "If the A bit is clear" on: the packet passed
    /// the stateless checks, demultiplexing and GTSM.
    fn handle_packet(
        &mut self,
        now: Instant,
        repr: &Repr,
        rng: &mut impl RngCore,
        out: &mut VecDeque<Output>,
        stats: &mut Stats,
    ) {
        self.received += 1;
        self.last_received = Some(now);
        let old_interval = self.may_transmit().then(|| self.tx_interval());
        // Whether the peer replaced its session: §6.8.6 selected ours by
        // source address (a new session does not know our discriminator
        // yet), and bfd.RemoteDiscr simply takes the new value below.
        let restarted = self.remote_discr != 0 && self.remote_discr != repr.my_discriminator.get();
        self.remote_discr = repr.my_discriminator.get();
        self.remote_state = repr.state;
        self.remote_min_rx = repr.required_min_rx;
        self.remote_desired_tx = repr.desired_min_tx;
        self.remote_detect_mult = repr.detect_mult.get();
        self.remote_min_echo_rx = repr.required_min_echo_rx;
        self.heard = true;
        if repr.final_ && self.polling {
            // The Poll Sequence is over: the new values apply.
            self.polling = false;
            self.tx_in_use = self.desired_tx;
            self.rx_in_use = self.required_rx;
        }
        if self.state == State::AdminDown {
            return;
        }
        self.detect_at = Some(now + self.detection_time());

        let before = self.state;
        match (self.state, repr.state) {
            (State::Init | State::Up, State::AdminDown) => self.change_state(
                now,
                State::Down,
                Diag::NeighborSignaledSessionDown,
                Some(DownCause::NeighborAdminDown),
                out,
            ),
            (State::Down, State::Down) => {
                self.change_state(now, State::Init, Diag::None, None, out);
            }
            (State::Down, State::Init) | (State::Init, State::Init | State::Up) => {
                self.change_state(now, State::Up, Diag::None, None, out);
            }
            // §6.8.6 takes the session Down whatever the peer's reason
            // (diag 3), so that the handshake starts again from Down on both
            // sides; only the cause we report differs.
            (State::Up, State::Down) => self.change_state(
                now,
                State::Down,
                Diag::NeighborSignaledSessionDown,
                Some(if restarted || !reports_failure(repr.diag) {
                    DownCause::NeighborRestarted
                } else {
                    DownCause::NeighborDown
                }),
                out,
            ),
            // Down hears Up (stale), Init hears Down (the peer restarts the
            // handshake from its side), Up hears Init or Up: no change.
            _ => {}
        }
        // The peer may have started or stopped wanting echoes.
        self.update_echo(now);

        if repr.poll {
            // §6.8.6: answer a Poll with a Final at once, outside the
            // transmit timer; never P and F together.
            self.transmit_final(out, stats);
        }
        if !self.may_transmit() {
            self.next_tx = None;
        } else if self.state != before {
            // Tell the peer about the new state at once: the three-way
            // handshake takes round trips, not transmit intervals.
            self.next_tx = Some(now);
        } else if old_interval.is_none_or(|old| self.tx_interval() < old) {
            // First packet to a passive session, or the rate went up.
            let at = self.jittered(now, rng);
            self.next_tx = Some(self.next_tx.map_or(at, |t| t.min(at)));
        }
    }

    fn handle_timeout(
        &mut self,
        now: Instant,
        rng: &mut impl RngCore,
        out: &mut VecDeque<Output>,
        stats: &mut Stats,
    ) {
        if self.echo.is_some_and(|e| e.detect_at <= now) {
            // §6.8.5: no echo came back for the detection time. The peer's
            // Control packets may still arrive: its control plane is fine,
            // the forwarding path is not. Down, and tell the peer at once;
            // the handshake starts again at the slow rate.
            self.change_state(
                now,
                State::Down,
                Diag::EchoFunctionFailed,
                Some(DownCause::EchoFunctionFailed),
                out,
            );
            if self.may_transmit() {
                self.next_tx = Some(now);
            }
        }
        if let Some(e) = &mut self.echo
            && e.next_tx <= now
        {
            e.sequence += 1;
            let packet = EchoRepr {
                discriminator: self.local_discr,
                sequence: e.sequence,
            }
            .to_bytes();
            let interval = e.interval;
            e.next_tx = jitter(now, interval, self.profile.detect_multiplier, rng);
            self.echo_sent += 1;
            stats.echo_sent += 1;
            out.push_back(Output::Echo(EchoTransmit {
                key: self.key,
                local: self.local,
                packet,
            }));
        }
        if self.detect_at.is_some_and(|t| t <= now) {
            self.detect_at = None;
            let was_up = matches!(self.state, State::Init | State::Up);
            if was_up {
                self.change_state(
                    now,
                    State::Down,
                    Diag::ControlDetectionTimeExpired,
                    Some(DownCause::DetectionTimeExpired),
                    out,
                );
            }
            // §6.8.1: the peer's discriminator is forgotten when the
            // detection time passes; a passive session goes quiet again.
            self.remote_discr = 0;
            self.remote_state = State::Down;
            self.remote_min_rx = Duration::from_micros(1);
            self.remote_desired_tx = Duration::ZERO;
            self.remote_detect_mult = 0;
            self.heard = false;
            if !self.may_transmit() {
                self.next_tx = None;
            } else if was_up {
                // Tell the peer (diag 1) at once.
                self.next_tx = Some(now);
            } else if self.next_tx.is_none() {
                self.next_tx = Some(self.jittered(now, rng));
            }
        }
        if self.next_tx.is_some_and(|t| t <= now) {
            if self.may_transmit() {
                self.transmit(self.polling, out, stats);
                self.next_tx = Some(self.jittered(now, rng));
            } else {
                self.next_tx = None;
            }
        }
    }

    fn repr(&self, poll: bool, final_: bool) -> Repr {
        Repr {
            diag: self.diag,
            state: self.state,
            poll,
            final_,
            control_plane_independent: false,
            detect_mult: self.profile.detect_multiplier,
            my_discriminator: self.local_discr,
            your_discriminator: self.remote_discr,
            desired_min_tx: self.desired_tx,
            required_min_rx: self.required_rx,
            required_min_echo_rx: self.echo_rx(),
        }
    }

    fn transmit(&mut self, poll: bool, out: &mut VecDeque<Output>, stats: &mut Stats) {
        self.push(self.repr(poll, false), out, stats);
    }

    fn transmit_final(&mut self, out: &mut VecDeque<Output>, stats: &mut Stats) {
        self.push(self.repr(false, true), out, stats);
    }

    fn push(&mut self, repr: Repr, out: &mut VecDeque<Output>, stats: &mut Stats) {
        self.sent += 1;
        stats.sent += 1;
        out.push_back(Output::Transmit(Transmit {
            key: self.key,
            local: self.local,
            packet: repr.to_bytes(),
        }));
    }
}

/// Whether a peer that says Down with this diagnostic (its
/// bfd.LocalDiag, RFC 5880 §4.1) detected a failure. Unknown codes count
/// as failures. Diag 3 and 7 do not: they say that *we* signalled Down, or
/// that the peer was taken down administratively, and a peer that tells an
/// Up session so has reset its own.
fn reports_failure(diag: Diag) -> bool {
    match diag {
        Diag::ControlDetectionTimeExpired
        | Diag::EchoFunctionFailed
        | Diag::ForwardingPlaneReset
        | Diag::PathDown
        | Diag::ConcatenatedPathDown
        | Diag::ReverseConcatenatedPathDown
        | Diag::Unknown(_) => true,
        Diag::None | Diag::NeighborSignaledSessionDown | Diag::AdministrativelyDown => false,
    }
}

/// `now` plus 75-100 % of `interval`, or 75-90 % with a Detect Mult of 1
/// (§6.8.7; §6.8.9 allows the same jitter for echoes).
fn jitter(
    now: Instant,
    interval: Duration,
    detect_mult: NonZeroU8,
    rng: &mut impl RngCore,
) -> Instant {
    let span = if detect_mult.get() == 1 { 1500 } else { 2500 };
    let permyriad = 7500 + u64::from(rng.next_u32()) % (span + 1);
    let us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
    now + Duration::from_micros(us / 10_000 * permyriad + us % 10_000 * permyriad / 10_000)
}

/// §6.8.3: outside Up, Desired Min TX is at least one second.
fn slow(tx: Duration) -> Duration {
    tx.max(SLOW_TX)
}

const SLOW_TX: Duration = Duration::from_secs(1);
/// Stale timer entries tolerated beyond one per session before a sweep.
const STALE_SLACK: usize = 16;

#[cfg(test)]
mod tests;
