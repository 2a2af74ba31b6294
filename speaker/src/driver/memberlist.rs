//! The memberlist driver: one tokio task owns a `memberlist::Swim` core and
//! moves datagrams (UDP), stream frames (TCP) and time between it and the
//! OS. No protocol decisions are made here: what to send, to whom and when
//! is the core's; the driver only bounds the I/O (timeouts, frame sizes,
//! concurrent connections) and counts what it drops.
//!
//! [`Memberlist`] is the API the speaker uses: start a member, join seeds,
//! change its metadata, leave, and receive its [`Events`] for the layer 2
//! election.
//!
//! # Stream connections
//!
//! Every stream connection carries exactly one frame (the core's full-state
//! exchange: connect, write one frame, close), so the listener reads one
//! frame, hands it to the core and closes. A connection that has not
//! delivered its whole frame within `stream_timeout` of the accept is
//! closed, whatever it sends; a frame that fails authentication is the
//! connection's last. Inbound and outbound connections have their own slots,
//! and one source address holds at most `max_streams_per_source` inbound
//! slots: a client without the key cannot keep the slots, and joins go
//! through.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use memberlist::{Event, Keyring, Member, Meta, Output, Swim, frame};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{self, JoinSet};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, trace, warn};

/// Everything needed to run one member.
#[derive(Debug, Clone)]
pub struct Config {
    /// The core: identity, keys, timings. `swim.addr` is the address others
    /// reach this member at; a port of 0 there is replaced by the bound one.
    pub swim: memberlist::Config,
    /// Where the UDP socket and the TCP listener are bound (same port).
    pub bind: SocketAddr,
    /// Members to join at start (replaced with [`Memberlist::join`]); the
    /// core rejoins those without a live member, with backoff.
    pub seeds: Vec<SocketAddr>,
    /// Lifetime of a stream connection: an inbound one must deliver its
    /// whole frame within this time of the accept, an outbound one must
    /// connect and write its frame within it. Past it the connection is
    /// closed (`IoStats::stream_timeouts`).
    pub stream_timeout: Duration,
    /// Largest stream frame read (prefix excluded), at most
    /// [`frame::MAX_LEN`].
    pub max_stream_len: usize,
    /// Inbound stream connections open at once; more are closed at once
    /// (`IoStats::streams_refused`).
    pub max_inbound_streams: usize,
    /// Outbound stream connections open at once; frames beyond are not
    /// sent (`IoStats::streams_dropped`), and the core's rejoin and
    /// push-pull rounds try again later.
    pub max_outbound_streams: usize,
    /// Inbound stream connections open at once from one IP address; more
    /// are closed at once (`IoStats::streams_refused_source`), so one host
    /// cannot take every inbound slot.
    pub max_streams_per_source: usize,
    /// How long the driver keeps running after [`Memberlist::leave`], so
    /// that the core's leave retransmissions go out and late probes get
    /// their acks.
    pub leave_drain: Duration,
}

impl Config {
    /// `swim` bound at `bind`, no seeds, and the default I/O bounds: 2 s
    /// stream lifetime, 1 MiB frames, 64 inbound and 64 outbound streams,
    /// 4 inbound streams per source address, 150 ms leave drain.
    #[must_use]
    pub fn new(swim: memberlist::Config, bind: SocketAddr) -> Self {
        Self {
            swim,
            bind,
            seeds: Vec::new(),
            stream_timeout: Duration::from_secs(2),
            max_stream_len: 1 << 20,
            max_inbound_streams: 64,
            max_outbound_streams: 64,
            max_streams_per_source: 4,
            leave_drain: Duration::from_millis(150),
        }
    }
}

/// A membership event, stamped with the wall-clock time the driver pulled
/// it from the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberEvent {
    /// What happened (`Up` and `Alive` are both "alive": a join and a
    /// refuted suspicion; `Isolated` and `Connected` are about this member's
    /// own connectivity, see [`Stats::isolated`]).
    pub event: Event,
    /// When.
    pub at: SystemTime,
}

/// The events of one member, in order.
///
/// Coalescing: the driver hands over all the events of one input together
/// (one join reply can bring every member of the cluster at once), and
/// [`recv_batch`](Self::recv_batch) takes every event waiting. A consumer
/// that reconciles once per batch therefore reconciles once for a burst of
/// N joins, not N times; and while it reconciles, new events pile up into
/// the next batch, so its rate of reconciles never exceeds what it can do.
/// No event is dropped or merged: a batch holds them all, in order.
#[derive(Debug)]
pub struct Events {
    rx: mpsc::UnboundedReceiver<Vec<MemberEvent>>,
    pending: VecDeque<MemberEvent>,
}

impl Events {
    /// The next event; `None` once the driver has stopped and every event
    /// was taken. Cancel-safe.
    pub async fn recv(&mut self) -> Option<MemberEvent> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            let batch = self.rx.recv().await?;
            self.pending.extend(batch);
        }
    }

    /// Waits for at least one event, then returns every event waiting, in
    /// order (never empty); `None` once the driver has stopped and every
    /// event was taken. Cancel-safe.
    pub async fn recv_batch(&mut self) -> Option<Vec<MemberEvent>> {
        if self.pending.is_empty() {
            let batch = self.rx.recv().await?;
            self.pending.extend(batch);
        }
        while let Ok(batch) = self.rx.try_recv() {
            self.pending.extend(batch);
        }
        Some(self.pending.drain(..).collect())
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<MemberEvent> {
        if self.pending.is_empty()
            && let Ok(batch) = self.rx.try_recv()
        {
            self.pending.extend(batch);
        }
        self.pending.pop_front()
    }
}

/// Counters: the core's (every malformed, unauthenticated or misdirected
/// message is counted there) and the driver's own I/O counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// The core's counters.
    pub core: memberlist::Stats,
    /// The driver's I/O counters.
    pub io: IoStats,
    /// Other members alive or suspect.
    pub members_up: usize,
    /// Other members remembered in any state, at most
    /// `swim.max_members` (beyond: `core.members_rejected`).
    pub members_known: usize,
    /// Lifeguard's local health multiplier (1 when healthy).
    pub health_multiplier: u32,
    /// This member has seeds but no other member alive or suspect, and a
    /// join went unanswered or its last member was lost (a gauge; the
    /// edges are `Event::Isolated` and `Event::Connected`, the count
    /// `core.isolations`). It cannot tell whether the others are down or
    /// it is cut off (a blocked network, a wrong or stale key), and it keeps
    /// rejoining its seeds (`core.rejoins`).
    pub isolated: bool,
}

/// I/O failures and refusals seen by the driver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Datagrams the OS refused to send (or would have blocked on).
    pub udp_send_errors: u64,
    /// Errors receiving datagrams.
    pub udp_recv_errors: u64,
    /// Stream connections accepted.
    pub streams_accepted: u64,
    /// Stream connections opened to send a frame.
    pub streams_opened: u64,
    /// Outbound stream connects that failed.
    pub stream_connect_failures: u64,
    /// Stream connections closed at the end of their lifetime
    /// (`stream_timeout`): an inbound frame not read whole in time, an
    /// outbound connect or write not done in time.
    pub stream_timeouts: u64,
    /// Other stream read or write errors.
    pub stream_io_errors: u64,
    /// Stream frames larger than `max_stream_len` (connection dropped).
    pub stream_oversize: u64,
    /// Inbound connections closed at once: `max_inbound_streams` were open.
    pub streams_refused: u64,
    /// Inbound connections closed at once: their source address had
    /// `max_streams_per_source` open.
    pub streams_refused_source: u64,
    /// Inbound streams whose frame the core rejected (authentication,
    /// framing, decoding; the core's counters say which), each closed on
    /// that first frame.
    pub streams_rejected: u64,
    /// Outbound frames not sent: `max_outbound_streams` were open.
    pub streams_dropped: u64,
}

/// The handle of a running member. Cheap to clone; the member stops when
/// it leaves or when every handle is dropped.
#[derive(Debug, Clone)]
pub struct Memberlist {
    commands: mpsc::UnboundedSender<Command>,
    local_addr: SocketAddr,
}

/// The driver task has stopped (it left, or failed to start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memberlist driver stopped")]
pub struct Stopped;

enum Command {
    Join(Vec<SocketAddr>),
    SetMeta(Meta),
    SetKeyring(Keyring),
    Members(oneshot::Sender<Vec<Member>>),
    Stats(oneshot::Sender<Stats>),
    Leave(oneshot::Sender<()>),
}

/// A datagram socket and a listener on one port: `bind`'s, or, when its
/// port is 0, a port free for both. The listener takes the port the
/// datagram socket got; TCP connections share the ephemeral range, so a
/// TCP socket may hold that number already, and then another is drawn.
fn bind_pair(
    bind: SocketAddr,
) -> io::Result<(std::net::UdpSocket, std::net::TcpListener, SocketAddr)> {
    const DRAWS: usize = 64;
    let mut draws = 0;
    loop {
        let udp = std::net::UdpSocket::bind(bind)?;
        let local = udp.local_addr()?;
        match std::net::TcpListener::bind(local) {
            Ok(tcp) => return Ok((udp, tcp, local)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && bind.port() == 0 => {
                draws += 1;
                if draws == DRAWS {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

impl Memberlist {
    /// Binds UDP and TCP on `config.bind`, starts the driver task, joins
    /// `config.seeds`, and returns the handle with the event stream. Must
    /// be called inside a tokio runtime.
    ///
    /// # Errors
    /// Binding failed, or the core's configuration is invalid
    /// (`InvalidInput`).
    pub fn start(mut config: Config) -> io::Result<(Self, Events)> {
        let (udp, tcp, local_addr) = bind_pair(config.bind)?;
        udp.set_nonblocking(true)?;
        tcp.set_nonblocking(true)?;
        let udp = UdpSocket::from_std(udp)?;
        let listener = TcpListener::from_std(tcp)?;
        if config.swim.addr.port() == 0 {
            config.swim.addr.set_port(local_addr.port());
        }
        if config.swim.addr.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the advertised address must not be unspecified",
            ));
        }
        // The core draws AES-GCM nonces from this generator: it must be a
        // CSPRNG seeded by the OS.
        let rng = StdRng::from_os_rng();
        let swim = Swim::new(config.swim.clone(), rng, now())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let (commands, cmd_rx) = mpsc::unbounded_channel();
        let (events, events_rx) = mpsc::unbounded_channel();
        let (frames_tx, frames_rx) = mpsc::channel(64);
        let span = info_span!("memberlist", name = %config.swim.name, addr = %config.swim.addr);
        let seeds = std::mem::take(&mut config.seeds);
        let driver = Driver {
            swim,
            config,
            udp,
            listener,
            events,
            frames_tx,
            frames_rx,
            inbound: JoinSet::new(),
            inbound_sources: HashMap::new(),
            per_source: HashMap::new(),
            outbound: JoinSet::new(),
            io: Arc::default(),
        };
        shell::task::spawn("memberlist", driver.run(cmd_rx, seeds).instrument(span));
        Ok((
            Self {
                commands,
                local_addr,
            },
            Events {
                rx: events_rx,
                pending: VecDeque::new(),
            },
        ))
    }

    /// The bound address (UDP and TCP).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Sets the seeds (replacing the previous ones: pass the whole set
    /// each time it changes) and joins those without a live member. The
    /// core keeps rejoining them with backoff while they have none; see
    /// `memberlist::Swim::join`.
    pub fn join(&self, seeds: impl IntoIterator<Item = SocketAddr>) -> Result<(), Stopped> {
        self.send(Command::Join(seeds.into_iter().collect()))
    }

    /// Replaces this member's metadata; others see it as `Updated`.
    pub fn set_meta(&self, meta: Meta) -> Result<(), Stopped> {
        self.send(Command::SetMeta(meta))
    }

    /// Replaces the keyring (a rotated key file): the primary key encrypts
    /// from the next message on, every key is accepted. A no-op in
    /// plaintext mode.
    pub fn set_keyring(&self, keyring: Keyring) -> Result<(), Stopped> {
        self.send(Command::SetKeyring(keyring))
    }

    /// Every member known, this one first, in any state.
    pub async fn members(&self) -> Result<Vec<Member>, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Members(tx))?;
        rx.await.map_err(|_| Stopped)
    }

    /// The counters.
    pub async fn stats(&self) -> Result<Stats, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Stats(tx))?;
        rx.await.map_err(|_| Stopped)
    }

    /// Leaves gracefully: the leave goes to every member and is gossiped,
    /// the driver keeps running for `leave_drain`, then stops. Returns when
    /// it has stopped (at once if it already had).
    pub async fn leave(&self) {
        let (tx, rx) = oneshot::channel();
        if self.send(Command::Leave(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    fn send(&self, cmd: Command) -> Result<(), Stopped> {
        self.commands.send(cmd).map_err(|_| Stopped)
    }
}

/// Counters written by the stream tasks.
#[derive(Debug, Default)]
struct IoCounters {
    udp_send_errors: AtomicU64,
    udp_recv_errors: AtomicU64,
    streams_accepted: AtomicU64,
    streams_opened: AtomicU64,
    stream_connect_failures: AtomicU64,
    stream_timeouts: AtomicU64,
    stream_io_errors: AtomicU64,
    stream_oversize: AtomicU64,
    streams_refused: AtomicU64,
    streams_refused_source: AtomicU64,
    streams_rejected: AtomicU64,
    streams_dropped: AtomicU64,
}

impl IoCounters {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> IoStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IoStats {
            udp_send_errors: get(&self.udp_send_errors),
            udp_recv_errors: get(&self.udp_recv_errors),
            streams_accepted: get(&self.streams_accepted),
            streams_opened: get(&self.streams_opened),
            stream_connect_failures: get(&self.stream_connect_failures),
            stream_timeouts: get(&self.stream_timeouts),
            stream_io_errors: get(&self.stream_io_errors),
            stream_oversize: get(&self.stream_oversize),
            streams_refused: get(&self.streams_refused),
            streams_refused_source: get(&self.streams_refused_source),
            streams_rejected: get(&self.streams_rejected),
            streams_dropped: get(&self.streams_dropped),
        }
    }
}

struct Driver {
    swim: Swim<StdRng>,
    config: Config,
    udp: UdpSocket,
    listener: TcpListener,
    events: mpsc::UnboundedSender<Vec<MemberEvent>>,
    /// Whole frames read by the inbound stream tasks.
    frames_tx: mpsc::Sender<Bytes>,
    frames_rx: mpsc::Receiver<Bytes>,
    /// Inbound stream tasks (one frame each); aborted when the driver
    /// stops.
    inbound: JoinSet<()>,
    /// The source address of each inbound task.
    inbound_sources: HashMap<task::Id, IpAddr>,
    /// Inbound tasks open per source address.
    per_source: HashMap<IpAddr, usize>,
    /// Outbound stream tasks; aborted when the driver stops.
    outbound: JoinSet<()>,
    io: Arc<IoCounters>,
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Largest datagram read; the core builds at most `max_packet_size`, and
/// anything truncated here fails authentication or parsing in the core.
const RECV_BUF: usize = 65_536;

impl Driver {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>, seeds: Vec<SocketAddr>) {
        info!("memberlist started");
        if !seeds.is_empty() {
            self.swim.join(now(), seeds);
        }
        let mut buf = vec![0; RECV_BUF];
        // Set by a leave: when to stop, and who waits for it.
        let mut leaving: Option<(std::time::Instant, Vec<oneshot::Sender<()>>)> = None;
        let mut sleep_deadline = None;
        let sleep = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(sleep);
        loop {
            self.drain();
            let t = now();
            if let Some((until, _)) = &leaving
                && t >= *until
            {
                break;
            }
            // Check the clock before sleeping: a due timer fires at once.
            if self.swim.poll_timeout().is_some_and(|d| d <= t) {
                self.swim.handle_timeout(t);
                continue;
            }
            let deadline = match (self.swim.poll_timeout(), leaving.as_ref().map(|l| l.0)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Reset the sleep only when the deadline changes.
            if deadline != sleep_deadline {
                sleep_deadline = deadline;
                if let Some(at) = deadline {
                    sleep.as_mut().reset(Instant::from_std(at));
                }
            }
            tokio::select! {
                r = self.udp.recv_from(&mut buf) => match r {
                    Ok((n, from)) => {
                        if let Err(e) = self.swim.handle_packet(now(), from, &buf[..n]) {
                            trace!(%from, error = %e, "datagram dropped");
                        }
                    }
                    Err(e) => {
                        IoCounters::add(&self.io.udp_recv_errors);
                        trace!(error = %e, "udp receive failed");
                    }
                },
                r = self.listener.accept() => match r {
                    Ok((stream, remote)) => self.on_accept(stream, remote),
                    Err(e) => {
                        // Out of descriptors and the like: back off briefly
                        // instead of spinning.
                        debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                },
                Some(frame) = self.frames_rx.recv() => {
                    if let Err(e) = self.swim.handle_stream(now(), &frame) {
                        // The reader closed the connection after this frame.
                        IoCounters::add(&self.io.streams_rejected);
                        trace!(error = %e, "stream frame dropped");
                    }
                }
                Some(done) = self.inbound.join_next_with_id(), if !self.inbound.is_empty() => {
                    let id = match done {
                        Ok((id, ())) => id,
                        Err(e) => e.id(),
                    };
                    self.release_source(id);
                }
                Some(_) = self.outbound.join_next(), if !self.outbound.is_empty() => {}
                cmd = commands.recv() => match cmd {
                    Some(Command::Join(seeds)) => self.swim.join(now(), seeds),
                    Some(Command::SetMeta(meta)) => self.swim.set_metadata(now(), meta),
                    Some(Command::SetKeyring(ring)) => {
                        if let Some(k) = self.swim.keyring_mut() {
                            *k = ring;
                        }
                    }
                    Some(Command::Members(tx)) => {
                        let mut all = vec![self.swim.local().clone()];
                        all.extend(self.swim.members().cloned());
                        let _ = tx.send(all);
                    }
                    Some(Command::Stats(tx)) => {
                        let _ = tx.send(Stats {
                            core: self.swim.stats().clone(),
                            io: self.io.snapshot(),
                            members_up: self.swim.num_up(),
                            members_known: self.swim.members().count(),
                            health_multiplier: self.swim.health_multiplier(),
                            isolated: self.swim.isolated(),
                        });
                    }
                    Some(Command::Leave(tx)) => match &mut leaving {
                        Some((_, waiters)) => waiters.push(tx),
                        None => {
                            info!("leaving");
                            let t = now();
                            self.swim.leave(t);
                            leaving = Some((t + self.config.leave_drain, vec![tx]));
                        }
                    },
                    // Every handle dropped: stop without a leave.
                    None => break,
                },
                () = &mut sleep, if sleep_deadline.is_some() => {
                    self.swim.handle_timeout(now());
                }
            }
        }
        // Flush what the last input produced, then stop the stream tasks.
        self.drain();
        self.inbound.abort_all();
        self.outbound.abort_all();
        info!("memberlist stopped");
        if let Some((_, waiters)) = leaving {
            for w in waiters {
                let _ = w.send(());
            }
        }
    }

    /// Carries out every pending output of the core; its events go to the
    /// consumer together, as one batch.
    fn drain(&mut self) {
        let mut batch = Vec::new();
        while let Some(output) = self.swim.poll_output() {
            match output {
                Output::Send { to, packet } => {
                    // Never wait on a full socket buffer: a datagram lost
                    // here is like one lost on the wire.
                    if let Err(e) = self.udp.try_send_to(&packet, to) {
                        let count = self.io.udp_send_errors.fetch_add(1, Ordering::Relaxed) + 1;
                        // Visible at the default level, but at most about
                        // log2(count) times: a kernel refusing sends (a full
                        // neighbour table, a firewall) must not go unseen.
                        if count.is_power_of_two() {
                            warn!(%to, error = %e, count, "udp send failed");
                        } else {
                            trace!(%to, error = %e, "udp send failed");
                        }
                    }
                }
                Output::Stream { to, frame } => self.open_stream(to, frame),
                // This driver sleeps until `poll_timeout` instead.
                Output::Arm { .. } => {}
                Output::Event(event) => {
                    match &event {
                        Event::Up(m) => info!(member = %m.name, addr = %m.addr, "member up"),
                        Event::Down(m) => info!(member = %m.name, "member down"),
                        Event::Left(m) => info!(member = %m.name, "member left"),
                        Event::Alive(m) | Event::Suspect(m) | Event::Updated(m) => {
                            debug!(member = %m, "member event");
                        }
                        // An operator must see this: the node cannot tell
                        // whether the others are down or it is cut off.
                        Event::Isolated => warn!(
                            seeds = self.swim.seeds().count(),
                            "memberlist isolated: no member reachable; rejoining seeds"
                        ),
                        Event::Connected => info!(
                            members = self.swim.num_up(),
                            "memberlist no longer isolated"
                        ),
                    }
                    batch.push(MemberEvent {
                        event,
                        at: SystemTime::now(),
                    });
                }
            }
        }
        if !batch.is_empty() {
            let _ = self.events.send(batch);
        }
    }

    /// An accepted connection: refused (closed at once, counted) when the
    /// inbound slots or its source's share are taken, else read for one
    /// frame.
    fn on_accept(&mut self, stream: TcpStream, remote: SocketAddr) {
        // Dropping `stream` closes it. Refusals are peer-driven: debug, not
        // warn (the counters show a flood).
        if self.inbound.len() >= self.config.max_inbound_streams {
            IoCounters::add(&self.io.streams_refused);
            debug!(%remote, "stream refused: every inbound slot taken");
            return;
        }
        let source = remote.ip();
        let open = self.per_source.entry(source).or_insert(0);
        if *open >= self.config.max_streams_per_source {
            IoCounters::add(&self.io.streams_refused_source);
            debug!(%remote, open = *open, "stream refused: too many from this address");
            return;
        }
        *open += 1;
        IoCounters::add(&self.io.streams_accepted);
        let reader = StreamReader {
            max_len: self.config.max_stream_len.min(frame::MAX_LEN),
            lifetime: self.config.stream_timeout,
            frames: self.frames_tx.clone(),
            io: Arc::clone(&self.io),
        };
        let id = self.inbound.spawn(reader.run(stream)).id();
        self.inbound_sources.insert(id, source);
    }

    /// An inbound task ended: its slot of its source is free again.
    fn release_source(&mut self, id: task::Id) {
        let Some(source) = self.inbound_sources.remove(&id) else {
            return;
        };
        if let Some(open) = self.per_source.get_mut(&source) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                self.per_source.remove(&source);
            }
        }
    }

    fn open_stream(&mut self, to: SocketAddr, frame: Bytes) {
        if self.outbound.len() >= self.config.max_outbound_streams {
            IoCounters::add(&self.io.streams_dropped);
            debug!(%to, "stream not sent: every outbound slot taken");
            return;
        }
        IoCounters::add(&self.io.streams_opened);
        let io = Arc::clone(&self.io);
        let deadline = Instant::now() + self.config.stream_timeout;
        self.outbound.spawn(async move {
            // One deadline for the connect and the write together.
            let send = async {
                let mut stream = TcpStream::connect(to).await.inspect_err(|e| {
                    IoCounters::add(&io.stream_connect_failures);
                    trace!(%to, error = %e, "stream connect failed");
                })?;
                let _ = stream.set_nodelay(true);
                let written = async {
                    stream.write_all(&frame).await?;
                    stream.shutdown().await
                };
                written.await.inspect_err(|e| {
                    IoCounters::add(&io.stream_io_errors);
                    trace!(%to, error = %e, "stream write failed");
                })
            };
            if tokio::time::timeout_at(deadline, send).await.is_err() {
                IoCounters::add(&io.stream_timeouts);
                trace!(%to, "stream connect or write timed out");
            }
        });
    }
}

/// Reads the one length-prefixed frame of an accepted connection and hands
/// it to the driver, then closes. Malformed framing is handed over too, so
/// the core counts it.
struct StreamReader {
    max_len: usize,
    /// From the accept to the whole frame.
    lifetime: Duration,
    frames: mpsc::Sender<Bytes>,
    io: Arc<IoCounters>,
}

impl StreamReader {
    async fn run(self, mut stream: TcpStream) {
        let mut buf = BytesMut::with_capacity(4096);
        // The whole frame must arrive within the lifetime from the accept,
        // however the sender paces it.
        let deadline = Instant::now() + self.lifetime;
        loop {
            match frame::decode(&buf) {
                Ok(Some(n)) => {
                    // One frame per connection (the core's full-state
                    // exchange): whatever follows is not read, and a frame
                    // that fails authentication is the last one.
                    let f = buf.split_to(n).freeze();
                    let _ = self.frames.send(f).await;
                    return;
                }
                Ok(None) => {}
                Err(_) => {
                    // An out-of-bounds length prefix: the core counts it as
                    // an envelope error. Nothing was reserved for it.
                    let _ = self
                        .frames
                        .send(buf.split_to(frame::PREFIX_LEN).freeze())
                        .await;
                    return;
                }
            }
            if let Some(prefix) = buf.get(..frame::PREFIX_LEN) {
                let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
                if usize::try_from(len).is_err_and(|_| true)
                    || usize::try_from(len).is_ok_and(|l| l > self.max_len)
                {
                    IoCounters::add(&self.io.stream_oversize);
                    trace!(len, "stream frame too large");
                    return;
                }
            }
            match tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)).await {
                Ok(Ok(0)) => {
                    if !buf.is_empty() {
                        // A truncated frame: the core counts it.
                        let _ = self.frames.send(buf.split().freeze()).await;
                    }
                    return;
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    IoCounters::add(&self.io.stream_io_errors);
                    trace!(error = %e, "stream read failed");
                    return;
                }
                Err(_) => {
                    IoCounters::add(&self.io.stream_timeouts);
                    trace!("stream read timed out");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use memberlist::{Key, Keyring, Name, Security, State};

    use super::*;

    fn config(name: &str, key: Option<[u8; 32]>) -> Config {
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let security = match key {
            Some(k) => Security::Encrypted(Keyring::new(Key::new(k))),
            None => Security::Plaintext,
        };
        let swim = memberlist::Config::lan(Name::new(name).unwrap(), addr, security);
        Config::new(swim, addr)
    }

    async fn wait_for(events: &mut Events, pred: impl Fn(&Event) -> bool) -> MemberEvent {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let ev = events.recv().await.unwrap();
                if pred(&ev.event) {
                    return ev;
                }
            }
        })
        .await
        .unwrap()
    }

    /// Polls `a`'s counters until `done` holds; the deadline only bounds
    /// a failure.
    async fn stats_until(a: &Memberlist, done: impl Fn(&Stats) -> bool) -> Stats {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stats = a.stats().await.unwrap();
            if done(&stats) {
                return stats;
            }
            assert!(
                Instant::now() < deadline,
                "counters never matched: {stats:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn two_members_join_update_and_leave() {
        let (a, mut a_events) = Memberlist::start(config("a", Some([7; 32]))).unwrap();
        let mut b_config = config("b", Some([7; 32]));
        b_config.seeds = vec![a.local_addr()];
        let (b, mut b_events) = Memberlist::start(b_config).unwrap();

        wait_for(
            &mut a_events,
            |e| matches!(e, Event::Up(m) if m.name.as_str() == "b"),
        )
        .await;
        wait_for(
            &mut b_events,
            |e| matches!(e, Event::Up(m) if m.name.as_str() == "a"),
        )
        .await;
        let members = a.members().await.unwrap();
        assert_eq!(members.len(), 2);
        assert!(members.iter().all(|m| m.state == State::Alive));

        b.set_meta(Meta::new(&b"zone-1"[..]).unwrap()).unwrap();
        let ev = wait_for(&mut a_events, |e| matches!(e, Event::Updated(_))).await;
        assert_eq!(
            ev.event.member().unwrap().meta.as_bytes().as_ref(),
            b"zone-1"
        );

        b.leave().await;
        wait_for(
            &mut a_events,
            |e| matches!(e, Event::Left(m) if m.name.as_str() == "b"),
        )
        .await;
        assert_eq!(b.stats().await, Err(Stopped));
        let stats = a.stats().await.unwrap();
        assert_eq!(stats.members_up, 0);
        assert_eq!(stats.core.auth_failures, 0);
    }

    #[tokio::test]
    async fn garbage_is_counted_not_fatal() {
        let (a, _events) = Memberlist::start(config("a", Some([7; 32]))).unwrap();
        let to = a.local_addr();
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        udp.send_to(b"\x01\x01garbage", to).await.unwrap();
        udp.send_to(b"", to).await.unwrap();
        // An out-of-bounds length prefix, and a truncated frame.
        let mut s = TcpStream::connect(to).await.unwrap();
        s.write_all(&[0xff, 0xff, 0xff, 0xff]).await.unwrap();
        drop(s);
        let mut s = TcpStream::connect(to).await.unwrap();
        s.write_all(&[0, 0, 0, 40, 1, 1]).await.unwrap();
        drop(s);
        // Until everything sent was handled, then no more than that.
        let stats = stats_until(&a, |s| {
            s.core.packets_received >= 2
                && s.core.envelope_errors >= 3
                && s.io.streams_accepted >= 2
        })
        .await;
        assert_eq!(stats.core.packets_received, 2);
        assert!(stats.core.envelope_errors >= 3, "{stats:?}");
        assert_eq!(stats.io.streams_accepted, 2);
    }

    #[tokio::test]
    async fn wrong_key_and_plaintext_do_not_join() {
        let (a, _a_events) = Memberlist::start(config("a", Some([7; 32]))).unwrap();
        let mut wrong = config("wrong", Some([8; 32]));
        wrong.seeds = vec![a.local_addr()];
        let (w, _w_events) = Memberlist::start(wrong).unwrap();
        let mut plain = config("plain", None);
        plain.seeds = vec![a.local_addr()];
        let (p, _p_events) = Memberlist::start(plain).unwrap();
        // Once `a` has rejected both joins, nobody is a member anywhere.
        let stats = stats_until(&a, |s| {
            s.core.auth_failures + s.core.unknown_key >= 1 && s.core.mode_mismatch >= 1
        })
        .await;
        assert_eq!(a.members().await.unwrap().len(), 1, "{stats:?}");
        assert_eq!(w.members().await.unwrap().len(), 1);
        assert_eq!(p.members().await.unwrap().len(), 1);
    }

    /// A keyless client holding many stream connections from one address,
    /// some sending a 6-byte frame, some a length prefix and nothing more:
    /// none keeps a slot past its first frame or its lifetime, and a new
    /// member still joins through the same seed.
    #[tokio::test]
    async fn keyless_clients_cannot_hold_the_stream_slots() {
        let (a, mut a_events) = Memberlist::start(config("a", Some([7; 32]))).unwrap();
        let to = a.local_addr();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut attackers = JoinSet::new();
        for i in 0..100 {
            let stop = Arc::clone(&stop);
            attackers.spawn(async move {
                let mut held = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // From 127.0.0.2, so the member's own streams (from
                    // 127.0.0.1) are another source.
                    let socket = tokio::net::TcpSocket::new_v4().unwrap();
                    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                    let Ok(mut s) = socket.connect(to).await else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let junk: &[u8] = if i % 2 == 0 {
                        &[0, 0, 0, 2, 1, 1]
                    } else {
                        &[0, 0, 4, 0]
                    };
                    // Hold it until the member closes it.
                    if s.write_all(junk).await.is_ok() {
                        let mut b = [0; 16];
                        let _ = s.read(&mut b).await;
                    }
                    held += 1;
                }
                held
            });
        }
        // Until the member has turned away more than its slots' worth.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let io = a.stats().await.unwrap().io;
            if io.streams_refused_source + io.streams_rejected + io.stream_timeouts > 200 {
                break;
            }
            assert!(Instant::now() < deadline, "{io:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut b_config = config("b", Some([7; 32]));
        b_config.seeds = vec![to];
        let (_b, mut b_events) = Memberlist::start(b_config).unwrap();
        wait_for(
            &mut b_events,
            |e| matches!(e, Event::Up(m) if m.name.as_str() == "a"),
        )
        .await;
        wait_for(
            &mut a_events,
            |e| matches!(e, Event::Up(m) if m.name.as_str() == "b"),
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        let io = a.stats().await.unwrap().io;
        assert!(io.streams_refused_source > 0, "{io:?}");
        assert!(io.streams_rejected > 0, "{io:?}");
        // Nobody else was refused for lack of slots.
        assert_eq!(io.streams_refused, 0, "{io:?}");
        attackers.abort_all();
    }

    /// A given port is used as it is (an error when TCP holds it); port 0
    /// gets one that UDP and TCP both have free.
    #[test]
    fn bind_pair_takes_one_port_for_both() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        let given = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let err = bind_pair(given).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let (udp, tcp, local) = bind_pair(any).unwrap();
        assert_ne!(local.port(), 0);
        assert_eq!(udp.local_addr().unwrap(), local);
        assert_eq!(tcp.local_addr().unwrap(), local);
    }

    /// One join reply lists every member: the new member's consumer gets
    /// them in one batch, not one wake-up per member.
    #[tokio::test]
    async fn a_burst_of_joins_is_one_batch() {
        let n = 12;
        // All on 127.0.0.1: one source address for every member.
        let local = |name: &str| {
            let mut c = config(name, Some([7; 32]));
            c.max_streams_per_source = 64;
            c
        };
        let (seed, mut seed_events) = Memberlist::start(local("m0")).unwrap();
        let mut others = Vec::new();
        for i in 1..n {
            let mut c = local(&format!("m{i}"));
            c.seeds = vec![seed.local_addr()];
            others.push(Memberlist::start(c).unwrap());
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while seed.stats().await.unwrap().members_up < n - 1 {
                let _ = seed_events.recv_batch().await;
            }
        })
        .await
        .unwrap();
        let mut c = local("new");
        c.seeds = vec![seed.local_addr()];
        let (_new, mut events) = Memberlist::start(c).unwrap();
        let mut ups = 0;
        let mut batches = 0;
        tokio::time::timeout(Duration::from_secs(10), async {
            while ups < n {
                let batch = events.recv_batch().await.unwrap();
                let up = batch
                    .iter()
                    .filter(|e| matches!(e.event, Event::Up(_)))
                    .count();
                if up > 0 {
                    batches += 1;
                    ups += up;
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(ups, n);
        // The join reply brings all of them; gossip may bring one or two
        // first.
        assert!(batches <= 3, "{n} joins in {batches} batches");
    }
}
