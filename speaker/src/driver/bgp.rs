//! The BGP driver: one tokio task per peer owns a `bgp::session::Session`
//! and moves bytes, connections and time between it and the OS. No
//! protocol decisions are made here.
//!
//! [`BgpSpeaker`] is the API the speaker uses: add, change and remove
//! peers at runtime, set each peer's routes, and receive a stream of
//! [`PeerEvent`]s (for metrics, logs and ServiceBGPStatus).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bgp::frame;
use bgp::session::{
    self, ConnId, DownReason, IpPrefix, Negotiated, Output, RouteAttrs, Session, State, Stats,
    StopMode,
};
use bgp::wire::{DecodeCtx, DecodeError, HeaderError, Message, Notification};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::codec::{Decoder, FramedRead};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::net::addrs;
use crate::net::tcp;

// `PeerConfig` carries the socket options (an MD5 key of at most
// `MAX_MD5_KEY` octets); `net` itself is private to the crate.
pub use crate::net::tcp::{ConnectOptions, MAX_MD5_KEY};

/// Everything needed to run a session with one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The session (AS numbers, timers, capabilities).
    pub session: session::Config,
    /// The peer's address and port.
    pub address: SocketAddr,
    /// Socket options for connections to the peer (also applied, for the
    /// MD5 key, to the listening sockets).
    pub connect: ConnectOptions,
}

/// A change in a peer's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerEvent {
    /// The RFC state changed.
    StateChanged {
        /// Peer name.
        peer: String,
        /// Old state.
        from: State,
        /// New state.
        to: State,
    },
    /// The session reached Established.
    Established {
        /// Peer name.
        peer: String,
        /// What was negotiated.
        negotiated: Box<Negotiated>,
    },
    /// The Established session went down.
    Down {
        /// Peer name.
        peer: String,
        /// Why.
        reason: DownReason,
    },
}

/// How a peer's session ended at [`BgpSpeaker::shutdown`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerClosed {
    /// Peer name.
    pub name: String,
    /// Whether what was queued for the peer (the NOTIFICATION) reached
    /// the socket within [`CLOSE_TIMEOUT`]; `false` when the peer did not
    /// read and the connection was dropped.
    pub flushed: bool,
}

/// How long a stopping session may take to hand its last messages (the
/// NOTIFICATION) to a peer that does not read before the connection is
/// dropped. Sessions stop concurrently, so this also bounds the BGP part
/// of the speaker's shutdown.
pub const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Beyond [`CLOSE_TIMEOUT`], how long [`BgpSpeaker::shutdown`] waits for a
/// peer task to report before it aborts it.
const STOP_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// A snapshot of a peer, refreshed after every input the driver handles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerStatus {
    /// The RFC state.
    pub state: Option<State>,
    /// Counters.
    pub stats: Stats,
    /// Prefixes the peer has from us.
    pub advertised: usize,
    /// Octets queued for the peer that its socket has not taken yet (the
    /// peer is slow or does not read).
    pub unsent: usize,
    /// The socket refused more octets and the writer waits for it to take
    /// some (the peer's window is closed, or its ACKs do not arrive).
    pub send_blocked: bool,
}

enum Command {
    SetRoutes(BTreeMap<IpPrefix, Arc<RouteAttrs>>),
    UpdateRoutes(Vec<(IpPrefix, Option<Arc<RouteAttrs>>)>),
    HoldDown(Notification),
    Release,
    /// Stop; the answer says whether the last messages were flushed
    /// within [`CLOSE_TIMEOUT`].
    Stop(StopMode, oneshot::Sender<bool>),
}

struct PeerHandle {
    config: PeerConfig,
    commands: mpsc::UnboundedSender<Command>,
    status: watch::Receiver<PeerStatus>,
    task: JoinHandle<()>,
}

/// Where accepted connections go: peer address ([`dispatch_key`]) ->
/// that peer's task.
type Dispatch = Arc<Mutex<HashMap<(IpAddr, u32), mpsc::Sender<TcpStream>>>>;

/// Runs the BGP sessions of a speaker.
pub struct BgpSpeaker {
    peers: HashMap<String, PeerHandle>,
    dispatch: Dispatch,
    listeners: Vec<(Arc<TcpListener>, JoinHandle<()>)>,
    events: mpsc::UnboundedSender<PeerEvent>,
    /// Peers held down, with the NOTIFICATION that held them; kept across
    /// [`BgpSpeaker::set_peer`] so a reconfigured session starts held.
    holds: HashMap<String, Notification>,
}

impl BgpSpeaker {
    /// A speaker without peers, and the stream of their events.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<PeerEvent>) {
        let (events, rx) = mpsc::unbounded_channel();
        let speaker = Self {
            peers: HashMap::new(),
            dispatch: Arc::default(),
            listeners: Vec::new(),
            events,
            holds: HashMap::new(),
        };
        (speaker, rx)
    }

    /// Accepts BGP connections on `addr` (passive peers and collisions).
    /// Returns the bound address.
    pub fn listen(&mut self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let listener = Arc::new(tcp::listen(addr)?);
        for p in self.peers.values() {
            if let Some(key) = &p.config.connect.md5_key {
                tcp::set_md5_key(listener.as_raw_fd(), p.config.address.ip(), key)?;
            }
        }
        let local = listener.local_addr()?;
        let task = shell::task::spawn(
            format!("bgp listener {local}"),
            accept_loop(Arc::clone(&listener), Arc::clone(&self.dispatch)),
        );
        self.listeners.push((listener, task));
        Ok(local)
    }

    /// Adds a peer, or replaces its configuration: an unchanged
    /// configuration is left alone (`Ok(false)`); a changed one resets the
    /// session (Cease / Administrative Reset) and starts a new one
    /// (`Ok(true)`). A new session has no routes: the caller, who owns
    /// them, gives them with [`BgpSpeaker::set_routes`].
    ///
    /// # Errors
    /// The listening sockets refused the peer's MD5 key. Nothing changed
    /// then: a running session goes on with its old configuration, so the
    /// caller may report the error and try again.
    pub async fn set_peer(&mut self, name: &str, config: PeerConfig) -> io::Result<bool> {
        let old = self.peers.get(name).map(|p| {
            (
                p.config.address.ip(),
                p.config.connect.md5_key.clone(),
                p.config == config,
            )
        });
        if let Some((_, _, true)) = old {
            return Ok(false);
        }
        let (old_ip, old_key) = old.map_or((None, None), |(ip, key, _)| (Some(ip), key));
        let ip = config.address.ip();
        // The listeners' keys first: if they refuse, the old session is
        // still running, untouched.
        let had_key_here = old_ip == Some(ip) && old_key.is_some();
        if let Err(e) = self.key_listeners(ip, config.connect.md5_key.as_deref(), had_key_here) {
            // Put back what the listeners held (best effort: these
            // calls succeeded before).
            let restore = if had_key_here {
                old_key.as_deref()
            } else {
                None
            };
            let _ = self.key_listeners(ip, restore, true);
            return Err(e);
        }
        if let (Some(old_ip), Some(_)) = (old_ip, &old_key)
            && old_ip != ip
            && let Err(e) = self.key_listeners(old_ip, None, true)
        {
            warn!(peer = name, address = %old_ip, error = %e, "cannot clear the old address's MD5 key");
        }
        if old_ip.is_some() {
            self.stop_peer(name, StopMode::Reset("configuration changed".into()))
                .await;
        }
        let (commands, cmd_rx) = mpsc::unbounded_channel();
        let (incoming_tx, incoming_rx) = mpsc::channel(4);
        let (status_tx, status) = watch::channel(PeerStatus::default());
        self.dispatch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dispatch_key(config.address), incoming_tx);
        let span = info_span!("bgp", peer = %config.address, name);
        let mut driver = PeerDriver::new(
            name.to_owned(),
            config.clone(),
            self.events.clone(),
            status_tx,
        );
        driver.initial_hold = self.holds.get(name).cloned();
        let task = shell::task::spawn(
            format!("bgp peer {name}"),
            driver.run(cmd_rx, incoming_rx).instrument(span),
        );
        self.peers.insert(
            name.to_owned(),
            PeerHandle {
                config,
                commands,
                status,
                task,
            },
        );
        Ok(true)
    }

    /// Sets (`key`) or clears the MD5 key of `peer` on every listener;
    /// clearing only when one was set (`had_key`): the kernel has none
    /// otherwise.
    fn key_listeners(&self, peer: IpAddr, key: Option<&[u8]>, had_key: bool) -> io::Result<()> {
        for (listener, _) in &self.listeners {
            match key {
                Some(key) => tcp::set_md5_key(listener.as_raw_fd(), peer, key)?,
                None if had_key => tcp::set_md5_key(listener.as_raw_fd(), peer, &[])?,
                None => {}
            }
        }
        Ok(())
    }

    /// Removes a peer, ending its session as `mode` says, and forgets
    /// any hold on it and its MD5 key on the listeners (else the kernel
    /// would go on dropping unsigned SYNs from that address, and a later
    /// peer there without a password could never connect in).
    pub async fn remove_peer(&mut self, name: &str, mode: StopMode) {
        self.holds.remove(name);
        if let Some(p) = self.peers.get(name)
            && p.config.connect.md5_key.is_some()
        {
            let ip = p.config.address.ip();
            if let Err(e) = self.key_listeners(ip, None, true) {
                warn!(peer = name, address = %ip, error = %e, "cannot clear the removed peer's MD5 key");
            }
        }
        self.stop_peer(name, mode).await;
    }

    /// Holds a peer's session down (BFD Down, RFC 9384): `notification`
    /// goes to the peer if a connection is up, the session closes and
    /// stays Idle, neither connecting nor accepting, until
    /// [`BgpSpeaker::release`]. May be called before
    /// [`BgpSpeaker::set_peer`]: the session then starts held. Holding a
    /// held peer changes nothing.
    pub fn hold_down(&mut self, name: &str, notification: Notification) {
        if self.holds.contains_key(name) {
            return;
        }
        self.holds.insert(name.to_owned(), notification.clone());
        if let Some(p) = self.peers.get(name) {
            let _ = p.commands.send(Command::HoldDown(notification));
        }
    }

    /// Ends [`BgpSpeaker::hold_down`]: the session connects at once.
    pub fn release(&mut self, name: &str) {
        if self.holds.remove(name).is_some()
            && let Some(p) = self.peers.get(name)
        {
            let _ = p.commands.send(Command::Release);
        }
    }

    /// Whether the peer is held down.
    pub fn is_held(&self, name: &str) -> bool {
        self.holds.contains_key(name)
    }

    /// Sets the routes the peer should have, all of them; they are sent
    /// (as the minimal UPDATEs) when the session is Established. The
    /// session compares them with what it has, so giving the same routes
    /// again sends nothing.
    pub fn set_routes(&mut self, name: &str, routes: BTreeMap<IpPrefix, Arc<RouteAttrs>>) {
        if let Some(p) = self.peers.get(name) {
            debug!(
                peer = name,
                prefixes = routes.len(),
                "routes handed to peer task"
            );
            let _ = p.commands.send(Command::SetRoutes(routes));
        }
    }

    /// Changes some of the peer's routes: `Some` announces or changes a
    /// prefix, `None` withdraws it. Only these prefixes are compared and
    /// sent, however many routes the peer has.
    pub fn update_routes(&mut self, name: &str, changes: Vec<(IpPrefix, Option<Arc<RouteAttrs>>)>) {
        if changes.is_empty() {
            return;
        }
        if let Some(p) = self.peers.get(name) {
            debug!(
                peer = name,
                changes = changes.len(),
                "route changes handed to peer task"
            );
            let _ = p.commands.send(Command::UpdateRoutes(changes));
        }
    }

    /// The latest status of a peer.
    pub fn status(&self, name: &str) -> Option<PeerStatus> {
        self.peers.get(name).map(|p| p.status.borrow().clone())
    }

    /// The address of a configured peer.
    pub fn address(&self, name: &str) -> Option<SocketAddr> {
        self.peers.get(name).map(|p| p.config.address)
    }

    /// Names of the configured peers.
    pub fn peers(&self) -> impl Iterator<Item = &str> {
        self.peers.keys().map(String::as_str)
    }

    /// Ends every session as `mode` says and stops listening. The
    /// sessions stop concurrently, each flushing its last messages (the
    /// NOTIFICATION) for at most [`CLOSE_TIMEOUT`]: however many peers
    /// do not read, the whole shutdown takes about that long, well within
    /// a Pod's `terminationGracePeriodSeconds` of 10 s. Returns, and logs,
    /// how each peer's session closed.
    pub async fn shutdown(mut self, mode: StopMode) -> Vec<PeerClosed> {
        for (_, task) in self.listeners.drain(..) {
            task.abort();
        }
        self.dispatch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        info!(
            peers = self.peers.len(),
            close_timeout_ms = CLOSE_TIMEOUT.as_millis(),
            "stopping bgp sessions"
        );
        let stops = self.peers.drain().map(|(name, p)| {
            let mode = mode.clone();
            async move {
                let (done_tx, done) = oneshot::channel();
                let mut flushed = false;
                if p.commands.send(Command::Stop(mode, done_tx)).is_ok() {
                    // The task bounds its flush by CLOSE_TIMEOUT; the
                    // margin covers a task that is slow to get there.
                    match tokio::time::timeout(CLOSE_TIMEOUT + STOP_MARGIN, done).await {
                        Ok(Ok(f)) => flushed = f,
                        Ok(Err(_)) => {}
                        Err(_) => warn!(peer = name, "peer task did not stop in time"),
                    }
                }
                p.task.abort();
                if let Err(e) = p.task.await
                    && !e.is_cancelled()
                {
                    warn!(error = %e, peer = name, "peer task failed");
                }
                info!(peer = name, flushed, "bgp session closed");
                PeerClosed { name, flushed }
            }
        });
        futures::future::join_all(stops).await
    }

    /// Stops a peer's task.
    async fn stop_peer(&mut self, name: &str, mode: StopMode) {
        let Some(p) = self.peers.remove(name) else {
            return;
        };
        self.dispatch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&dispatch_key(p.config.address));
        let (done_tx, done) = oneshot::channel();
        if p.commands.send(Command::Stop(mode, done_tx)).is_ok() {
            let _ = done.await;
        }
        if let Err(e) = p.task.await {
            warn!(error = %e, peer = name, "peer task failed");
        }
    }
}

/// IPv4 peers accepted on a dual-stack socket appear IPv4-mapped.
fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A peer as connections from it are told apart: its address and, for a
/// link-local one (an unnumbered peer), the interface it is on, since the
/// same link-local address may be a neighbor on two links.
fn dispatch_key(addr: SocketAddr) -> (IpAddr, u32) {
    match addr {
        SocketAddr::V6(a) if a.ip().is_unicast_link_local() => (IpAddr::V6(*a.ip()), a.scope_id()),
        other => (normalize(other.ip()), 0),
    }
}

/// [`normalize`] for a socket address; others (a link-local address with
/// its scope) are kept whole.
fn normalize_addr(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_some() => {
            SocketAddr::new(normalize(addr.ip()), a.port())
        }
        other => other,
    }
}

async fn accept_loop(listener: Arc<TcpListener>, dispatch: Dispatch) {
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let target = dispatch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&dispatch_key(remote))
            .cloned();
        match target {
            Some(tx) => {
                if tx.try_send(stream).is_err() {
                    debug!(%remote, "peer busy: connection dropped");
                }
            }
            None => debug!(%remote, "connection from an unknown peer dropped"),
        }
    }
}

/// What connection tasks report to the peer task.
enum ConnEvent {
    Connected(ConnId, TcpStream),
    ConnectFailed(ConnId, io::Error),
    Frame(ConnId, Bytes),
    FrameError(ConnId, HeaderError),
    Closed(ConnId),
    /// The writer wrote a chunk; `true` when nothing is left queued.
    Written(ConnId, bool),
    /// The socket refused octets; the writer waits for it.
    Blocked,
}

struct ConnIo {
    writer: mpsc::UnboundedSender<Bytes>,
    /// Octets queued for the writer and not yet written.
    unsent: Arc<AtomicUsize>,
    /// The writer waits for the socket to take more.
    blocked: Arc<AtomicBool>,
    /// Ends `true` once everything queued is written and the socket shut
    /// down, `false` on a write error.
    write_task: JoinHandle<bool>,
    reader: JoinHandle<()>,
    ctx: DecodeCtx,
    /// Shared with the reader's [`BgpFrames`].
    extended: Arc<AtomicBool>,
}

struct PeerDriver {
    name: String,
    config: PeerConfig,
    session: Session<SmallRng>,
    events: mpsc::UnboundedSender<PeerEvent>,
    status: watch::Sender<PeerStatus>,
    conns: HashMap<ConnId, ConnIo>,
    connecting: HashMap<ConnId, JoinHandle<()>>,
    /// Writers of closed connections, still flushing (a NOTIFICATION).
    closing: Vec<JoinHandle<bool>>,
    conn_tx: mpsc::Sender<ConnEvent>,
    conn_rx: mpsc::Receiver<ConnEvent>,
    /// Hold the session down before starting it.
    initial_hold: Option<Notification>,
}

/// Connection events queued for the peer task. A reader that gets this far
/// ahead waits, so a peer flooding us meets TCP backpressure instead of
/// growing our memory.
const CONN_EVENTS: usize = 64;

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

impl PeerDriver {
    fn new(
        name: String,
        config: PeerConfig,
        events: mpsc::UnboundedSender<PeerEvent>,
        status: watch::Sender<PeerStatus>,
    ) -> Self {
        let session = Session::new(config.session.clone(), SmallRng::from_os_rng());
        let (conn_tx, conn_rx) = mpsc::channel(CONN_EVENTS);
        Self {
            name,
            config,
            session,
            events,
            status,
            conns: HashMap::new(),
            connecting: HashMap::new(),
            closing: Vec::new(),
            conn_tx,
            conn_rx,
            initial_hold: None,
        }
    }

    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut incoming: mpsc::Receiver<TcpStream>,
    ) {
        if let Some(n) = self.initial_hold.take() {
            self.session.hold_down(now(), n);
        }
        self.session.start(now());
        let mut sleep_deadline = None;
        let sleep = tokio::time::sleep(std::time::Duration::from_secs(3600));
        tokio::pin!(sleep);
        loop {
            if self.drain() {
                // Let the writers put what was queued on the wire before the
                // next input: with the current-thread runtime, a KEEPALIVE
                // would otherwise wait behind the next input's work (such
                // as encoding a full table right after Established).
                tokio::task::yield_now().await;
            }
            // Reset the sleep only when the deadline changes.
            let deadline = self.session.poll_timeout();
            if deadline != sleep_deadline {
                sleep_deadline = deadline;
                let at = deadline.map_or_else(
                    || Instant::now() + std::time::Duration::from_secs(3600),
                    Instant::from_std,
                );
                sleep.as_mut().reset(at);
            }
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::SetRoutes(routes)) => self.session.set_routes(routes),
                    Some(Command::UpdateRoutes(changes)) => {
                        debug!(changes = changes.len(), "route changes received");
                        for (prefix, attrs) in changes {
                            match attrs {
                                Some(a) => self.session.announce(prefix, a),
                                None => self.session.withdraw(&prefix),
                            }
                        }
                    }
                    Some(Command::HoldDown(n)) => {
                        info!(notification = %n, "session held down");
                        self.session.hold_down(now(), n);
                    }
                    Some(Command::Release) => {
                        info!("session released");
                        self.session.release(now());
                    }
                    Some(Command::Stop(mode, done)) => {
                        self.session.stop(now(), mode);
                        self.drain();
                        let flushed = self.close_all().await;
                        let _ = done.send(flushed);
                        return;
                    }
                    None => {
                        self.session.stop(now(), StopMode::Shutdown(String::new()));
                        self.drain();
                        self.close_all().await;
                        return;
                    }
                },
                Some(ev) = self.conn_rx.recv() => self.on_conn_event(ev),
                Some(stream) = incoming.recv() => self.on_incoming(stream),
                () = &mut sleep, if sleep_deadline.is_some() => self.session.handle_timeout(now()),
            }
        }
    }

    fn on_incoming(&mut self, stream: TcpStream) {
        let (Ok(local), Ok(remote)) = (stream.local_addr(), stream.peer_addr()) else {
            return;
        };
        // On a dual-stack listener an IPv4 connection shows IPv4-mapped
        // addresses; the session (next hops, families) sees it as IPv4.
        let (local, remote) = (normalize_addr(local), normalize_addr(remote));
        self.learn_interface_v6(local);
        match self.session.handle_incoming(now(), local, remote) {
            Some(id) => self.spawn_io(id, stream),
            None => debug!(%remote, "incoming connection refused"),
        }
    }

    /// Over IPv4, the IPv6 next hop for IPv6 routes: a global address of
    /// the interface the connection uses.
    fn learn_interface_v6(&mut self, local: SocketAddr) {
        if let IpAddr::V4(v4) = local.ip() {
            let v6 = addrs::global_v6_beside(v4);
            debug!(%local, next_hop_v6 = ?v6, "interface IPv6 address for IPv6 routes");
            self.session.set_interface_v6(v6);
        }
    }

    fn on_conn_event(&mut self, ev: ConnEvent) {
        match ev {
            ConnEvent::Connected(id, stream) => {
                self.connecting.remove(&id);
                let (Ok(local), Ok(remote)) = (stream.local_addr(), stream.peer_addr()) else {
                    self.session.handle_connect_failed(now(), id);
                    return;
                };
                self.spawn_io(id, stream);
                self.learn_interface_v6(local);
                self.session.handle_connected(now(), id, local, remote);
            }
            ConnEvent::ConnectFailed(id, e) => {
                self.connecting.remove(&id);
                debug!(conn = %id, error = %e, "connect failed");
                self.session.handle_connect_failed(now(), id);
            }
            ConnEvent::Frame(id, bytes) => {
                let Some(io) = self.conns.get(&id) else {
                    return;
                };
                // Shared, not copied: the session counts an UPDATE and drops
                // it, so its values never keep the frame's buffer alive.
                match Message::parse_bytes(&bytes, &io.ctx) {
                    Ok(msg) => self.session.handle_message(now(), id, msg),
                    Err(e) => {
                        warn!(conn = %id, error = %e, "malformed message from peer");
                        self.session.handle_decode_error(now(), id, &e);
                    }
                }
            }
            ConnEvent::FrameError(id, e) => {
                warn!(conn = %id, error = %e, "broken framing from peer");
                self.session
                    .handle_decode_error(now(), id, &DecodeError::Header(e));
            }
            ConnEvent::Closed(id) => self.session.handle_closed(now(), id),
            // RFC 9687's SendHoldTimer lives in the session; this is its
            // evidence that the peer reads.
            ConnEvent::Written(id, drained) => {
                if self.conns.contains_key(&id) {
                    self.session.handle_send_progress(now(), id, drained);
                }
            }
            // Nothing for the session (pending octets already run its
            // SendHoldTimer); the status shows the socket is full.
            ConnEvent::Blocked => {}
        }
    }

    fn spawn_io(&mut self, id: ConnId, stream: TcpStream) {
        let (read, write) = stream.into_split();
        let (writer, rx) = mpsc::unbounded_channel();
        let unsent = Arc::new(AtomicUsize::new(0));
        let blocked = Arc::new(AtomicBool::new(false));
        let write_task = tokio::spawn(
            write_loop(
                id,
                write,
                rx,
                WriterState {
                    unsent: Arc::clone(&unsent),
                    blocked: Arc::clone(&blocked),
                },
                self.conn_tx.clone(),
            )
            .in_current_span(),
        );
        let extended = Arc::new(AtomicBool::new(false));
        let frames = BgpFrames {
            extended: Arc::clone(&extended),
        };
        let reader = tokio::spawn(read_loop(id, read, frames, self.conn_tx.clone()));
        self.conns.insert(
            id,
            ConnIo {
                writer,
                unsent,
                blocked,
                write_task,
                reader,
                ctx: DecodeCtx::default(),
                extended,
            },
        );
    }

    /// Drains the session's outputs after every input.
    /// Drains the session's outputs; returns whether bytes were queued.
    fn drain(&mut self) -> bool {
        let mut stalled = Vec::new();
        let mut sent = false;
        loop {
            for conn in stalled.drain(..) {
                warn!(%conn, limit = MAX_UNSENT, "peer does not read what we send: closing");
                // Nothing queued can be delivered: close the socket at once
                // (no flush), then tell the session the transport is gone.
                if let Some(io) = self.conns.remove(&conn) {
                    io.reader.abort();
                    io.write_task.abort();
                }
                self.session.handle_closed(now(), conn);
            }
            sent |= self.drain_outputs(&mut stalled);
            if stalled.is_empty() {
                break;
            }
        }
        self.publish_status();
        sent
    }

    fn drain_outputs(&mut self, stalled: &mut Vec<ConnId>) -> bool {
        let mut sent = false;
        while let Some(out) = self.session.poll_output() {
            match out {
                Output::Connect(id) => {
                    let tx = self.conn_tx.clone();
                    let addr = self.config.address;
                    let opts = self.config.connect.clone();
                    let task = tokio::spawn(async move {
                        let ev = match tcp::connect(addr, &opts).await {
                            Ok(s) => ConnEvent::Connected(id, s),
                            Err(e) => ConnEvent::ConnectFailed(id, e),
                        };
                        let _ = tx.send(ev).await;
                    });
                    self.connecting.insert(id, task);
                }
                Output::Send { conn, bytes } => {
                    sent = true;
                    if let Some(io) = self.conns.get(&conn) {
                        let cost = queued_cost(&bytes);
                        let queued = io.unsent.fetch_add(cost, Ordering::Relaxed) + cost;
                        let _ = io.writer.send(bytes);
                        // Pending bytes start the session's SendHoldTimer
                        // (RFC 9687); the writer's progress restarts or
                        // stops it. A peer that does not read must not make
                        // us queue without limit either: past MAX_UNSENT the
                        // connection is given up at once.
                        self.session.handle_send_blocked(now(), conn);
                        if queued > MAX_UNSENT {
                            stalled.push(conn);
                        }
                    }
                }
                Output::Disconnect(conn) => {
                    if let Some(task) = self.connecting.remove(&conn) {
                        task.abort();
                    }
                    // Dropping the writer flushes what is queued, then
                    // closes; the reader is no longer needed.
                    if let Some(io) = self.conns.remove(&conn) {
                        io.reader.abort();
                        drop(io.writer);
                        self.closing.retain(|t| !t.is_finished());
                        // A peer that does not read would keep the flush,
                        // and the socket, forever: bound it.
                        let mut task = io.write_task;
                        self.closing.push(tokio::spawn(async move {
                            match tokio::time::timeout(FLUSH_ON_CLOSE, &mut task).await {
                                Ok(done) => done.unwrap_or(false),
                                Err(_) => {
                                    task.abort();
                                    false
                                }
                            }
                        }));
                    }
                }
                Output::Negotiated { conn, decode } => {
                    if let Some(io) = self.conns.get_mut(&conn) {
                        io.ctx = decode;
                        // Before our KEEPALIVE goes out, so before the peer
                        // may send an extended message.
                        io.extended
                            .store(decode.extended_message, Ordering::Release);
                    }
                }
                Output::StateChanged { from, to } => {
                    let _ = self.events.send(PeerEvent::StateChanged {
                        peer: self.name.clone(),
                        from,
                        to,
                    });
                }
                Output::Established(negotiated) => {
                    let four_octet_as = negotiated.encode.as4;
                    info!(remote_as = negotiated.remote_as, remote_id = %negotiated.remote_id, four_octet_as, "session established");
                    let c = self.session.config();
                    let big = |asn: u32| asn > u32::from(u16::MAX);
                    // Our real AS follows the session's in the AS_PATH
                    // unless replace-as.
                    let real_in_path = c.local_as_override.as_ref().is_none_or(|o| !o.replace_as);
                    if !four_octet_as && (big(c.session_as()) || (real_in_path && big(c.local_as)))
                    {
                        // RFC 6793 §4.2.2, no error: the peer's own view
                        // shows AS_TRANS unless it reads AS4_PATH.
                        info!(
                            local_as = c.session_as(),
                            "peer without 4-octet AS numbers: AS_PATH carries AS_TRANS 23456, AS4_PATH the real path"
                        );
                    }
                    let _ = self.events.send(PeerEvent::Established {
                        peer: self.name.clone(),
                        negotiated,
                    });
                }
                Output::Down(reason) => {
                    info!(?reason, "session down");
                    let _ = self.events.send(PeerEvent::Down {
                        peer: self.name.clone(),
                        reason,
                    });
                }
            }
        }
        sent
    }

    fn publish_status(&mut self) {
        let status = PeerStatus {
            state: Some(self.session.state()),
            stats: *self.session.stats(),
            advertised: self.session.rib().sent_len(),
            unsent: self
                .conns
                .values()
                .map(|io| io.unsent.load(Ordering::Relaxed))
                .sum(),
            send_blocked: self
                .conns
                .values()
                .any(|io| io.blocked.load(Ordering::Relaxed)),
        };
        self.status.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }

    /// Lets queued writes (a final NOTIFICATION) reach the socket, for at
    /// most [`CLOSE_TIMEOUT`]; returns whether they all did (a writer that
    /// failed did not).
    async fn close_all(&mut self) -> bool {
        for (_, task) in self.connecting.drain() {
            task.abort();
        }
        let mut writers = std::mem::take(&mut self.closing);
        for (_, io) in self.conns.drain() {
            io.reader.abort();
            writers.push(io.write_task);
        }
        // Each writer exits once its queue is written and the socket shut
        // down; a peer that does not read cannot hold us up for long.
        let aborts: Vec<_> = writers.iter().map(JoinHandle::abort_handle).collect();
        let all = futures::future::join_all(writers);
        tokio::pin!(all);
        let deadline = tokio::time::sleep(CLOSE_TIMEOUT);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                done = &mut all => return done.into_iter().all(|d| d.unwrap_or(false)),
                () = &mut deadline => {
                    aborts.iter().for_each(tokio::task::AbortHandle::abort);
                    return false;
                }
                // A writer's progress reports must not wait on a full
                // channel that nobody reads any more.
                Some(_) = self.conn_rx.recv() => {}
            }
        }
    }
}

/// What a writer shares with its peer task.
struct WriterState {
    /// Octets queued and not yet written.
    unsent: Arc<AtomicUsize>,
    /// Waiting for the socket to take more.
    blocked: Arc<AtomicBool>,
}

/// Writes what the peer task queues, in order. Returns `true` once the
/// queue is closed and everything is written and the socket shut down;
/// `false` on a write error, which the peer task is told of (as a closed
/// connection: nothing more can reach the peer).
async fn write_loop(
    id: ConnId,
    mut write: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    state: WriterState,
    progress: mpsc::Sender<ConnEvent>,
) -> bool {
    while let Some(bytes) = rx.recv().await {
        if let Err(e) = write_chunk(&write, &bytes, &state.blocked, &progress).await {
            debug!(conn = %id, error = %e, "write failed");
            let _ = progress.send(ConnEvent::Closed(id)).await;
            return false;
        }
        debug!(conn = %id, octets = bytes.len(), "written to the socket");
        let cost = queued_cost(&bytes);
        let left = state
            .unsent
            .fetch_sub(cost, Ordering::Relaxed)
            .saturating_sub(cost);
        if progress
            .send(ConnEvent::Written(id, left == 0))
            .await
            .is_err()
        {
            return false;
        }
    }
    write.shutdown().await.is_ok()
}

/// Writes one chunk. Each time the socket refuses octets the writer says
/// so (`blocked`, and a [`ConnEvent::Blocked`] so the status shows it)
/// before it waits for the socket.
async fn write_chunk(
    write: &OwnedWriteHalf,
    mut buf: &[u8],
    blocked: &AtomicBool,
    progress: &mpsc::Sender<ConnEvent>,
) -> io::Result<()> {
    while !buf.is_empty() {
        match write.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                blocked.store(true, Ordering::Relaxed);
                // A full channel holds events whose handling publishes the
                // status anyway.
                let _ = progress.try_send(ConnEvent::Blocked);
                let ready = write.writable().await;
                blocked.store(false, Ordering::Relaxed);
                ready?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn read_loop(id: ConnId, read: OwnedReadHalf, codec: BgpFrames, tx: mpsc::Sender<ConnEvent>) {
    let mut frames = FramedRead::new(read, codec);
    while let Some(item) = frames.next().await {
        let ev = match item {
            Ok(bytes) => ConnEvent::Frame(id, bytes),
            Err(FrameError::Header(e)) => {
                let _ = tx.send(ConnEvent::FrameError(id, e)).await;
                return;
            }
            Err(FrameError::Io(e)) => {
                debug!(conn = %id, error = %e, "read failed");
                break;
            }
        };
        if tx.send(ev).await.is_err() {
            return;
        }
    }
    let _ = tx.send(ConnEvent::Closed(id)).await;
}

/// Most octets queued for a connection before the peer is considered not
/// to read (RFC 9687 closes such sessions with its send hold timer; a
/// byte bound also caps our memory). A full table of 100k routes is about
/// 0.6 MB of UPDATEs, so this leaves room for several full re-sends on top
/// of what the socket buffers hold.
const MAX_UNSENT: usize = 4 << 20;

/// How long a closing connection may take to flush what is queued (the
/// NOTIFICATION, typically) before the socket is dropped.
const FLUSH_ON_CLOSE: std::time::Duration = std::time::Duration::from_secs(5);

/// Memory a queued chunk costs: its octets plus the channel node, the
/// `Bytes` header and the allocation's own overhead (about 128 octets),
/// which dominate when a peer provokes many small sends.
fn queued_cost(bytes: &Bytes) -> usize {
    bytes.len() + 128
}

/// Cuts a TCP stream into whole BGP messages with `bgp::frame`.
///
/// Lengths above 4096 are allowed only once the session negotiated RFC 8654
/// extended messages, so a bad length is rejected as soon as its header is
/// in, before anything is reserved. The peer task parses each frame with
/// the negotiated context.
struct BgpFrames {
    /// Set by the peer task when extended messages are negotiated.
    extended: Arc<AtomicBool>,
}

#[derive(Debug)]
enum FrameError {
    Header(HeaderError),
    Io(io::Error),
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

const FRAMING: DecodeCtx = DecodeCtx {
    as4: true,
    extended_message: false,
    add_path: bgp::wire::AddPathSet::EMPTY,
};

impl Decoder for BgpFrames {
    type Item = Bytes;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let ctx = DecodeCtx {
            extended_message: self.extended.load(Ordering::Acquire),
            ..FRAMING
        };
        match frame::decode(src, &ctx) {
            Ok(Some(len)) => Ok(Some(src.split_to(len).freeze())),
            Ok(None) => {
                src.reserve(frame::needed(src));
                Ok(None)
            }
            Err(e) => Err(FrameError::Header(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use bgp::session::{ConnectMode, PeerAs};

    use super::*;

    /// Accepted connections find their peer: IPv4-mapped addresses as
    /// IPv4, a link-local address with its interface (the same address on
    /// two links is two peers), other IPv6 addresses alone.
    #[test]
    fn connections_are_told_apart_by_address_and_link() {
        let key = |s: &str| dispatch_key(s.parse().unwrap());
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        let ll: IpAddr = "fe80::a".parse().unwrap();
        let global: IpAddr = "2001:db8::2".parse().unwrap();
        let table = [
            ("10.0.0.2:179", (v4, 0)),
            ("[::ffff:10.0.0.2]:40000", (v4, 0)),
            ("[fe80::a%3]:179", (ll, 3)),
            ("[fe80::a%4]:40000", (ll, 4)),
            ("[2001:db8::2]:179", (global, 0)),
        ];
        for (addr, want) in table {
            assert_eq!(key(addr), want, "{addr}");
        }
        // The scope survives normalisation; a mapped address loses its
        // IPv6 form.
        let a: SocketAddr = "[fe80::a%3]:179".parse().unwrap();
        assert_eq!(normalize_addr(a), a);
        let mapped: SocketAddr = "[::ffff:10.0.0.2]:40000".parse().unwrap();
        assert_eq!(normalize_addr(mapped), "10.0.0.2:40000".parse().unwrap());
    }

    fn peer(key: &[u8]) -> PeerConfig {
        let mut session = session::Config::new(64512, PeerAs::Exact(64500), Ipv4Addr::LOCALHOST);
        session.mode = ConnectMode::Passive;
        PeerConfig {
            session,
            address: "127.0.0.2:179".parse().unwrap(),
            connect: ConnectOptions {
                md5_key: Some(key.to_vec().into()),
                ..ConnectOptions::default()
            },
        }
    }

    /// Issue 14 finding 4: a configuration the listeners refuse leaves the
    /// running session alone instead of stopping it and dropping the peer.
    #[tokio::test]
    async fn a_refused_configuration_keeps_the_running_session() {
        let (mut speaker, _events) = BgpSpeaker::new();
        speaker.listen("[::]:0".parse().unwrap()).unwrap();
        let good = peer(b"s3cret");
        speaker.set_peer("p", good.clone()).await.unwrap();
        let bad = peer(&[b'k'; 81]);
        assert!(speaker.set_peer("p", bad).await.is_err());
        assert_eq!(speaker.peers().collect::<Vec<_>>(), ["p"]);
        let p = &speaker.peers["p"];
        assert_eq!(p.config, good);
        assert!(!p.task.is_finished());
        assert!(!p.commands.is_closed());
        // A good change afterwards applies as usual.
        speaker.set_peer("p", peer(b"other")).await.unwrap();
        assert_eq!(
            speaker.peers["p"].config.connect.md5_key.as_deref(),
            Some(&b"other"[..])
        );
        speaker.shutdown(StopMode::Shutdown(String::new())).await;
    }

    /// The session's identity includes the AS it presents (`localASN`):
    /// the same configuration again changes nothing, another local AS
    /// restarts the session, since the peer must see the new AS in an OPEN.
    #[tokio::test]
    async fn a_changed_local_as_restarts_the_session() {
        let (mut speaker, _events) = BgpSpeaker::new();
        speaker.listen("[::]:0".parse().unwrap()).unwrap();
        let mut first = peer(b"s3cret");
        first.session.local_as_override = Some(session::LocalAs {
            asn: 65410,
            replace_as: true,
        });
        assert!(speaker.set_peer("p", first.clone()).await.unwrap());
        assert!(!speaker.set_peer("p", first.clone()).await.unwrap());
        let mut other = first.clone();
        other.session.local_as_override = Some(session::LocalAs {
            asn: 65411,
            replace_as: true,
        });
        assert!(speaker.set_peer("p", other.clone()).await.unwrap());
        assert_eq!(speaker.peers["p"].config, other);
        let mut none = other;
        none.session.local_as_override = None;
        assert!(speaker.set_peer("p", none).await.unwrap());
        speaker.shutdown(StopMode::Shutdown(String::new())).await;
    }

    /// A removed peer's MD5 key leaves the listeners: an unsigned
    /// connection from its address is accepted again (with the key in
    /// place the kernel drops its SYNs, and the connect never completes).
    #[tokio::test]
    async fn a_removed_peer_leaves_no_md5_key_on_the_listeners() {
        let (mut speaker, _events) = BgpSpeaker::new();
        let listening = speaker.listen("127.0.0.1:0".parse().unwrap()).unwrap();
        speaker.set_peer("p", peer(b"s3cret")).await.unwrap();
        speaker
            .remove_peer("p", StopMode::Shutdown(String::new()))
            .await;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        socket.connect(listening).await.unwrap();
        speaker.shutdown(StopMode::Shutdown(String::new())).await;
    }
}
