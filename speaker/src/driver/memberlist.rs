//! The memberlist driver: one tokio task owns a `memberlist::Swim` core and
//! moves datagrams (UDP), stream frames (TCP) and time between it and the
//! OS. No protocol decisions are made here: what to send, to whom and when
//! is the core's; the driver only bounds the I/O (timeouts, frame sizes,
//! concurrent connections) and counts what it drops.
//!
//! [`Memberlist`] is the API the speaker uses: start a member, join seeds,
//! change its metadata, leave, and receive a stream of [`MemberEvent`]s for
//! the layer 2 election.

use std::io;
use std::net::SocketAddr;
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
use tokio::task::JoinSet;
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
    /// Members to join at start (more with [`Memberlist::join`]).
    pub seeds: Vec<SocketAddr>,
    /// Bound on a stream connect, and on reading or writing one frame.
    pub stream_timeout: Duration,
    /// Largest stream frame read (prefix excluded), at most
    /// [`frame::MAX_LEN`].
    pub max_stream_len: usize,
    /// Stream connections open at once, inbound and outbound together;
    /// more are refused (and counted).
    pub max_streams: usize,
    /// How long the driver keeps running after [`Memberlist::leave`], so
    /// that the core's leave retransmissions go out and late probes get
    /// their acks.
    pub leave_drain: Duration,
}

impl Config {
    /// `swim` bound at `bind`, no seeds, and the default I/O bounds: 2 s
    /// stream timeout, 1 MiB frames, 64 streams, 150 ms leave drain.
    #[must_use]
    pub fn new(swim: memberlist::Config, bind: SocketAddr) -> Self {
        Self {
            swim,
            bind,
            seeds: Vec::new(),
            stream_timeout: Duration::from_secs(2),
            max_stream_len: 1 << 20,
            max_streams: 64,
            leave_drain: Duration::from_millis(150),
        }
    }
}

/// A membership event, stamped with the wall-clock time the driver pulled
/// it from the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberEvent {
    /// What happened (`Up` and `Alive` are both "alive": a join and a
    /// refuted suspicion).
    pub event: Event,
    /// When.
    pub at: SystemTime,
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
    /// Lifeguard's local health multiplier (1 when healthy).
    pub health_multiplier: u32,
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
    /// Outbound stream connects that failed or timed out.
    pub stream_connect_failures: u64,
    /// Streams closed for a read or write timeout.
    pub stream_timeouts: u64,
    /// Other stream read or write errors.
    pub stream_io_errors: u64,
    /// Stream frames larger than `max_stream_len` (connection dropped).
    pub stream_oversize: u64,
    /// Streams refused because `max_streams` were open.
    pub streams_refused: u64,
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

impl Memberlist {
    /// Binds UDP and TCP on `config.bind`, starts the driver task, joins
    /// `config.seeds`, and returns the handle with the event stream. Must
    /// be called inside a tokio runtime.
    ///
    /// # Errors
    /// Binding failed, or the core's configuration is invalid
    /// (`InvalidInput`).
    pub fn start(mut config: Config) -> io::Result<(Self, mpsc::UnboundedReceiver<MemberEvent>)> {
        let udp = std::net::UdpSocket::bind(config.bind)?;
        let local_addr = udp.local_addr()?;
        // The listener takes the port the datagram socket got.
        let tcp = std::net::TcpListener::bind(local_addr)?;
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
            streams: JoinSet::new(),
            io: Arc::default(),
        };
        tokio::spawn(driver.run(cmd_rx, seeds).instrument(span));
        Ok((
            Self {
                commands,
                local_addr,
            },
            events_rx,
        ))
    }

    /// The bound address (UDP and TCP).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Sends this member's state to each seed (again). Harmless when
    /// already joined.
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
        }
    }
}

struct Driver {
    swim: Swim<StdRng>,
    config: Config,
    udp: UdpSocket,
    listener: TcpListener,
    events: mpsc::UnboundedSender<MemberEvent>,
    /// Whole frames read by the inbound stream tasks.
    frames_tx: mpsc::Sender<Bytes>,
    frames_rx: mpsc::Receiver<Bytes>,
    /// Inbound and outbound stream tasks; aborted when the driver stops.
    streams: JoinSet<()>,
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
                        trace!(error = %e, "stream frame dropped");
                    }
                }
                Some(_) = self.streams.join_next(), if !self.streams.is_empty() => {}
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
                            health_multiplier: self.swim.health_multiplier(),
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
        self.streams.abort_all();
        info!("memberlist stopped");
        if let Some((_, waiters)) = leaving {
            for w in waiters {
                let _ = w.send(());
            }
        }
    }

    /// Carries out every pending output of the core.
    fn drain(&mut self) {
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
                    let m = event.member();
                    match &event {
                        Event::Up(_) => info!(member = %m.name, addr = %m.addr, "member up"),
                        Event::Down(_) => info!(member = %m.name, "member down"),
                        Event::Left(_) => info!(member = %m.name, "member left"),
                        _ => debug!(member = %m, "member event"),
                    }
                    let _ = self.events.send(MemberEvent {
                        event,
                        at: SystemTime::now(),
                    });
                }
            }
        }
    }

    fn on_accept(&mut self, stream: TcpStream, remote: SocketAddr) {
        if self.streams.len() >= self.config.max_streams {
            IoCounters::add(&self.io.streams_refused);
            debug!(%remote, "stream refused: too many open");
            return;
        }
        IoCounters::add(&self.io.streams_accepted);
        let reader = StreamReader {
            max_len: self.config.max_stream_len.min(frame::MAX_LEN),
            timeout: self.config.stream_timeout,
            frames: self.frames_tx.clone(),
            io: Arc::clone(&self.io),
        };
        self.streams.spawn(reader.run(stream));
    }

    fn open_stream(&mut self, to: SocketAddr, frame: Bytes) {
        if self.streams.len() >= self.config.max_streams {
            IoCounters::add(&self.io.streams_refused);
            debug!(%to, "stream not sent: too many open");
            return;
        }
        IoCounters::add(&self.io.streams_opened);
        let io = Arc::clone(&self.io);
        let timeout = self.config.stream_timeout;
        self.streams.spawn(async move {
            let stream = match tokio::time::timeout(timeout, TcpStream::connect(to)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    IoCounters::add(&io.stream_connect_failures);
                    trace!(%to, error = %e, "stream connect failed");
                    return;
                }
                Err(_) => {
                    IoCounters::add(&io.stream_connect_failures);
                    trace!(%to, "stream connect timed out");
                    return;
                }
            };
            let _ = stream.set_nodelay(true);
            let mut stream = stream;
            let write = async {
                stream.write_all(&frame).await?;
                stream.shutdown().await
            };
            match tokio::time::timeout(timeout, write).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    IoCounters::add(&io.stream_io_errors);
                    trace!(%to, error = %e, "stream write failed");
                }
                Err(_) => {
                    IoCounters::add(&io.stream_timeouts);
                    trace!(%to, "stream write timed out");
                }
            }
        });
    }
}

/// Reads length-prefixed frames from one accepted connection and hands each
/// whole frame to the driver. Malformed framing is handed over too, so the
/// core counts it.
struct StreamReader {
    max_len: usize,
    timeout: Duration,
    frames: mpsc::Sender<Bytes>,
    io: Arc<IoCounters>,
}

impl StreamReader {
    async fn run(self, mut stream: TcpStream) {
        let mut buf = BytesMut::with_capacity(4096);
        // Each frame must arrive within the timeout from the end of the
        // previous one (or the accept).
        let mut deadline = Instant::now() + self.timeout;
        loop {
            match frame::decode(&buf) {
                Ok(Some(n)) => {
                    let f = buf.split_to(n).freeze();
                    if self.frames.send(f).await.is_err() {
                        return;
                    }
                    deadline = Instant::now() + self.timeout;
                    continue;
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

    async fn wait_for(
        events: &mut mpsc::UnboundedReceiver<MemberEvent>,
        pred: impl Fn(&Event) -> bool,
    ) -> MemberEvent {
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
        assert_eq!(ev.event.member().meta.as_bytes().as_ref(), b"zone-1");

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
}
