//! The BFD driver: one tokio task owns a `bfd::Bfd` (every BFD session of
//! the speaker) and moves datagrams and time between it and the OS. One
//! receiving socket per port and family (UDP 3784 single-hop, 4784
//! multihop; IPv4, IPv6), opened with the first session that needs it; one
//! sending socket per session (its own source port, TTL 255). No protocol
//! decisions are made here.
//!
//! Each receiver's kernel filter follows the sessions: it takes datagrams
//! only from the peers of its family's sessions, with TTL 255 (single-hop)
//! or at least the lowest `minimum_ttl` of the multihop sessions
//! (`crate::net::udp_bfd`), so that a flood from anyone else never fills
//! the queue the peers' packets wait in. The core checks the TTL again.
//!
//! Echo packets (IPv4 sessions whose profile has echo mode) go out and
//! come back through two `AF_PACKET` sockets (`crate::net::bfd_echo`),
//! opened with the first echo the core asks for. Each session's echo path
//! (our address, the interface, the peer's MAC address) is looked up when
//! needed and forgotten at each state change of the session, so that a
//! peer whose MAC address changed is found again.
//!
//! [`BfdSpeaker`] is the API: add, change and remove sessions, hold them
//! administratively down, read counters, and receive a stream of the
//! core's [`Event`]s. The speaker's reconcile loop (`crate::run`) passes
//! them to a `bfd::client::Gate`, which decides when a BGP peer's session
//! goes down (Cease, subcode 10 "BFD Down", RFC 9384).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;

use bfd::{Bfd, Event, Output, PeerKey, SessionConfig, SessionInfo, Stats};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::net::bfd_echo::{self, EchoReceiver, EchoSender};
use crate::net::udp_bfd::{self, Datagram, MULTIHOP_PORT, SINGLE_HOP_PORT};

/// Where the driver listens and sends. The defaults are the RFC ports on
/// every address; tests move them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Single-hop port (3784), ours and the peers'.
    pub single_hop_port: u16,
    /// Multihop port (4784), ours and the peers'.
    pub multihop_port: u16,
    /// IPv4 address to listen on.
    pub listen_v4: Ipv4Addr,
    /// IPv6 address to listen on.
    pub listen_v6: Ipv6Addr,
    /// Seed for discriminators and jitter; `None` seeds from the OS.
    pub seed: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            single_hop_port: SINGLE_HOP_PORT,
            multihop_port: MULTIHOP_PORT,
            listen_v4: Ipv4Addr::UNSPECIFIED,
            listen_v6: Ipv6Addr::UNSPECIFIED,
            seed: None,
        }
    }
}

/// Counters of the driver: the core's, plus what the OS refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// The core's counters.
    pub core: Stats,
    /// Packets the core produced that the socket did not take (full send
    /// buffer, no route).
    pub send_errors: u64,
    /// Datagrams the kernel dropped at the receiving sockets: not from a
    /// peer, TTL below the minimum, or a full queue. Reported with the
    /// next datagram that gets through, so it lags a flood.
    pub kernel_drops: u64,
    /// Echo packets the core produced that could not go out: no echo
    /// socket (no `CAP_NET_RAW`), the peer's MAC address not resolved, an
    /// IPv6 session, or the socket refused it.
    pub echo_send_errors: u64,
}

enum Command {
    Add(SessionConfig, oneshot::Sender<io::Result<()>>),
    Remove(PeerKey, oneshot::Sender<bool>),
    AdminDown(PeerKey, bool, oneshot::Sender<bool>),
    Stats(oneshot::Sender<(DriverStats, Vec<SessionInfo>)>),
}

/// Runs the BFD sessions of a speaker. Dropping it stops the task.
pub struct BfdSpeaker {
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<()>,
}

impl BfdSpeaker {
    /// Starts the driver task (no sessions yet) and returns the stream of
    /// state changes. The task runs on a thread of its own
    /// ([`shell::task::spawn_on_thread`]): its sockets and timers are not
    /// served by the speaker's runtime, so whatever keeps that busy (a
    /// flood of garbage on the memberlist or BGP port, a reconcile of
    /// thousands of services) does not delay a BFD packet past the peer's
    /// detection time.
    ///
    /// # Errors
    /// If the thread cannot be started.
    pub fn spawn(options: Options) -> io::Result<(Self, mpsc::UnboundedReceiver<Event>)> {
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (events, event_rx) = mpsc::unbounded_channel();
        let rng = match options.seed {
            Some(s) => SmallRng::seed_from_u64(s),
            None => SmallRng::from_os_rng(),
        };
        let (datagram_tx, datagram_rx) = mpsc::channel(1024);
        let (echo_tx, echo_rx) = mpsc::channel(1024);
        let driver = Driver {
            echo: None,
            echo_paths: HashMap::new(),
            echo_tx,
            echo_rx,
            core: Bfd::new(rng),
            options,
            senders: HashMap::new(),
            receivers: HashMap::new(),
            accepted: HashMap::new(),
            datagram_tx,
            datagram_rx,
            events,
            stats: DriverStats::default(),
        };
        let task = shell::task::spawn_on_thread(
            "bfd",
            driver.run(command_rx).instrument(info_span!("bfd")),
        )?;
        Ok((Self { commands, task }, event_rx))
    }

    /// Adds a session, or changes its profile and source address. Fails if
    /// a socket cannot be opened.
    pub async fn add_session(&self, config: SessionConfig) -> io::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Add(config, tx))?;
        rx.await.map_err(|_| gone())?
    }

    /// Removes a session (the peer gets an AdminDown packet). Returns
    /// whether it existed.
    pub async fn remove_session(&self, key: PeerKey) -> io::Result<bool> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Remove(key, tx))?;
        rx.await.map_err(|_| gone())
    }

    /// Holds a session in AdminDown, or releases it. Returns whether it
    /// exists.
    pub async fn set_admin_down(&self, key: PeerKey, down: bool) -> io::Result<bool> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::AdminDown(key, down, tx))?;
        rx.await.map_err(|_| gone())
    }

    /// Counters and a snapshot of every session.
    pub async fn stats(&self) -> io::Result<(DriverStats, Vec<SessionInfo>)> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Stats(tx))?;
        rx.await.map_err(|_| gone())
    }

    fn send(&self, c: Command) -> io::Result<()> {
        self.commands.send(c).map_err(|_| gone())
    }
}

impl Drop for BfdSpeaker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn gone() -> io::Error {
    io::Error::other("bfd driver task has stopped")
}

/// `(is IPv6, multihop)`: one receiving socket each.
type Family = (bool, bool);

fn family(key: PeerKey) -> Family {
    (key.peer.is_ipv6(), key.multihop)
}

/// A receiving socket and the task that reads it.
struct Receiver {
    socket: Arc<UdpSocket>,
    task: JoinHandle<()>,
    /// The kernel's drop count for the socket, as last reported.
    kernel_drops: u32,
}

/// The echo sockets and the task that reads returned echoes.
struct EchoIo {
    sender: EchoSender,
    task: JoinHandle<()>,
}

struct Driver {
    core: Bfd<SmallRng>,
    /// Opened with the first echo to send; `Err` once opening failed (it
    /// is not tried again: the process lacks the capability).
    echo: Option<io::Result<EchoIo>>,
    echo_paths: HashMap<PeerKey, bfd_echo::Path>,
    /// Payloads of returned echoes, from the echo reader task.
    echo_tx: mpsc::Sender<Vec<u8>>,
    echo_rx: mpsc::Receiver<Vec<u8>>,
    options: Options,
    senders: HashMap<PeerKey, UdpSocket>,
    receivers: HashMap<Family, Receiver>,
    /// What the receivers let in: each session's peer and the lowest TTL
    /// accepted from it (255 single-hop, the profile's minimum multihop).
    accepted: HashMap<PeerKey, u8>,
    datagram_tx: mpsc::Sender<(bool, Datagram)>,
    datagram_rx: mpsc::Receiver<(bool, Datagram)>,
    events: mpsc::UnboundedSender<Event>,
    stats: DriverStats,
}

impl Driver {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let sleep = tokio::time::sleep_until(Instant::now());
        let mut sleep = pin!(sleep);
        let mut armed: Option<std::time::Instant> = None;
        loop {
            self.drain();
            let deadline = self.core.poll_timeout();
            if deadline != armed {
                if let Some(at) = deadline {
                    sleep.as_mut().reset(Instant::from_std(at));
                }
                armed = deadline;
            }
            tokio::select! {
                cmd = commands.recv() => {
                    let Some(cmd) = cmd else { break };
                    self.command(cmd);
                }
                Some((multihop, d)) = self.datagram_rx.recv() => {
                    if let (Some(n), Some(r)) = (
                        d.kernel_drops,
                        self.receivers.get_mut(&(d.from.is_ipv6(), multihop)),
                    ) {
                        r.kernel_drops = n;
                    }
                    let now = Instant::now().into_std();
                    self.core.handle_packet(now, d.data(), d.from.ip(), d.ttl, multihop);
                }
                Some(payload) = self.echo_rx.recv() => {
                    self.core.handle_echo(Instant::now().into_std(), &payload);
                }
                () = &mut sleep, if armed.is_some() => {
                    armed = None;
                    self.core.handle_timeout(Instant::now().into_std());
                }
            }
        }
        for (_, r) in self.receivers.drain() {
            r.task.abort();
        }
        if let Some(Ok(e)) = self.echo.take() {
            e.task.abort();
        }
    }

    fn command(&mut self, cmd: Command) {
        let now = Instant::now().into_std();
        match cmd {
            Command::Add(config, reply) => {
                let r = self.open(&config);
                if r.is_ok() {
                    self.core.add_session(now, config);
                }
                let _ = reply.send(r);
            }
            Command::Remove(key, reply) => {
                let existed = self.core.remove_session(now, key);
                // Send the farewell AdminDown before closing the socket.
                self.drain();
                self.senders.remove(&key);
                self.echo_paths.remove(&key);
                if self.accepted.remove(&key).is_some()
                    && let Err(e) = self.receive(family(key))
                {
                    warn!(peer = %key.peer, error = %e, "bfd receive filter not updated");
                }
                let _ = reply.send(existed);
            }
            Command::AdminDown(key, down, reply) => {
                let _ = reply.send(self.core.set_admin_down(now, key, down));
            }
            Command::Stats(reply) => {
                self.stats.core = self.core.stats();
                self.stats.kernel_drops = self
                    .receivers
                    .values()
                    .map(|r| u64::from(r.kernel_drops))
                    .sum();
                let _ = reply.send((self.stats, self.core.sessions().collect()));
            }
        }
    }

    /// Lets the session's peer in at the receiver of its family (opened if
    /// new) and opens the session's sender. On failure nothing changes.
    fn open(&mut self, config: &SessionConfig) -> io::Result<()> {
        let key = config.key;
        let min_ttl = if key.multihop {
            config.profile.minimum_ttl
        } else {
            255
        };
        let previous = self.accepted.insert(key, min_ttl);
        let opened = self
            .receive(family(key))
            .and_then(|()| self.open_sender(config));
        if opened.is_err() {
            match previous {
                Some(p) => self.accepted.insert(key, p),
                None => self.accepted.remove(&key),
            };
            if let Err(e) = self.receive(family(key)) {
                warn!(peer = %key.peer, error = %e, "bfd receive filter not restored");
            }
        }
        opened
    }

    /// Makes the receiver of `family` take exactly what `accepted` says
    /// (the peers, the lowest minimum TTL); opens it if there is none yet
    /// and some session needs it.
    fn receive(&mut self, family: Family) -> io::Result<()> {
        let peers: Vec<udp_bfd::Peer> = self
            .accepted
            .iter()
            .filter(|(k, _)| self::family(**k) == family)
            .map(|(k, t)| udp_bfd::Peer {
                addr: k.peer,
                min_ttl: *t,
            })
            .collect();
        if let Some(r) = self.receivers.get(&family) {
            return udp_bfd::set_peers(&r.socket, &peers);
        }
        if peers.is_empty() {
            return Ok(());
        }
        let (v6, multihop) = family;
        let port = if multihop {
            self.options.multihop_port
        } else {
            self.options.single_hop_port
        };
        let ip = if v6 {
            IpAddr::V6(self.options.listen_v6)
        } else {
            IpAddr::V4(self.options.listen_v4)
        };
        let addr = SocketAddr::new(ip, port);
        let socket = Arc::new(udp_bfd::listen(addr, &peers)?);
        debug!(%addr, "bfd listening");
        let tx = self.datagram_tx.clone();
        let reader = Arc::clone(&socket);
        let task = shell::task::spawn(
            format!("bfd receiver {addr}"),
            async move {
                loop {
                    match udp_bfd::recv(&reader).await {
                        Ok(d) => {
                            if tx.send((multihop, d)).await.is_err() {
                                break;
                            }
                        }
                        Err(e) => debug!(error = %e, "bfd recv"),
                    }
                }
            }
            .in_current_span(),
        );
        self.receivers.insert(
            family,
            Receiver {
                socket,
                task,
                kernel_drops: 0,
            },
        );
        Ok(())
    }

    /// Opens the session's sender unless it has one from the same address.
    fn open_sender(&mut self, config: &SessionConfig) -> io::Result<()> {
        let key = config.key;
        let family = family(key);
        let known_local = self
            .core
            .session(key)
            .is_some()
            .then(|| self.senders.get(&key))
            .flatten()
            .and_then(|s| s.local_addr().ok())
            .map(|a| a.ip());
        let wanted = config.local.unwrap_or(if family.0 {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        });
        if known_local != Some(wanted) {
            self.senders
                .insert(key, udp_bfd::sender(key.peer, config.local)?);
        }
        Ok(())
    }

    fn drain(&mut self) {
        while let Some(o) = self.core.poll_output() {
            match o {
                Output::Transmit(t) => {
                    let port = if t.key.multihop {
                        self.options.multihop_port
                    } else {
                        self.options.single_hop_port
                    };
                    let to = SocketAddr::new(t.key.peer, port);
                    let sent = self
                        .senders
                        .get(&t.key)
                        .map(|s| s.try_send_to(&t.packet, to));
                    if !matches!(sent, Some(Ok(_))) {
                        self.stats.send_errors += 1;
                        debug!(peer = %t.key.peer, ?sent, "bfd send failed");
                    }
                }
                Output::Echo(e) => {
                    if let Err(error) = self.send_echo(&e) {
                        self.stats.echo_send_errors += 1;
                        debug!(peer = %e.key.peer, %error, "bfd echo send failed");
                    }
                }
                Output::Event(e) => {
                    // Look the echo path up again after any change.
                    self.echo_paths.remove(&e.key);
                    if e.to == bfd::State::Up || e.from == bfd::State::Up {
                        info!(peer = %e.key.peer, from = %e.from, to = %e.to, diag = %e.diag, cause = ?e.cause, "bfd session");
                    }
                    if self.events.send(e).is_err() {
                        warn!("bfd event receiver dropped");
                    }
                }
            }
        }
    }
}

impl Driver {
    /// Sends one echo on the session's path (looked up if unknown),
    /// opening the echo sockets first if this is the first echo.
    fn send_echo(&mut self, e: &bfd::EchoTransmit) -> io::Result<()> {
        let IpAddr::V4(peer) = e.key.peer else {
            return Err(io::Error::other("echo over IPv6 is not supported"));
        };
        let local = match e.local {
            Some(IpAddr::V4(l)) => Some(l),
            _ => None,
        };
        let io = self.echo.get_or_insert_with(|| {
            let r = open_echo(self.echo_tx.clone());
            if let Err(error) = &r {
                warn!(%error, "bfd echo sockets not opened: echoes will not be sent");
            }
            r
        });
        let io = io
            .as_mut()
            .map_err(|e| io::Error::new(e.kind(), e.to_string()))?;
        let path = match self.echo_paths.get(&e.key) {
            Some(p) => p,
            None => {
                let p = bfd_echo::path(peer, local)?
                    .ok_or_else(|| io::Error::other("the peer's MAC address is not resolved"))?;
                debug!(peer = %peer, local = %p.local, ifindex = p.ifindex, "bfd echo path");
                self.echo_paths.entry(e.key).or_insert(p)
            }
        };
        io.sender.send(path, &e.packet)
    }
}

/// Opens the echo sockets and starts the task that passes the payloads
/// of returned echoes to the driver.
fn open_echo(tx: mpsc::Sender<Vec<u8>>) -> io::Result<EchoIo> {
    let sender = EchoSender::open()?;
    let receiver = EchoReceiver::open()?;
    let task = shell::task::spawn(
        "bfd echo receiver".to_string(),
        async move {
            let mut buf = [0u8; 256];
            loop {
                match receiver.recv(&mut buf).await {
                    Ok(n) => {
                        let Some((_, _, payload)) = bfd_echo::returned(&buf[..n.min(buf.len())])
                        else {
                            continue;
                        };
                        if tx.send(payload.to_vec()).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => debug!(error = %e, "bfd echo recv"),
                }
            }
        }
        .in_current_span(),
    );
    Ok(EchoIo { sender, task })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bfd::{Profile, State};

    use super::*;

    /// Two drivers on loopback (127.0.0.1 and 127.0.0.2, a free port each
    /// run) bring a session Up, then one removes it and the other sees
    /// AdminDown (diag 3). Intervals of 300 ms (900 ms detection), so that
    /// a busy machine does not flap the session; a flap would only add
    /// events, which are skipped.
    #[tokio::test]
    async fn two_drivers_on_loopback() {
        let a_ip = Ipv4Addr::new(127, 0, 0, 1);
        let b_ip = Ipv4Addr::new(127, 0, 0, 2);
        let profile = Profile {
            transmit_interval: Duration::from_millis(300),
            receive_interval: Duration::from_millis(300),
            ..Profile::default()
        };
        let key = |peer: Ipv4Addr| PeerKey {
            peer: peer.into(),
            multihop: false,
        };
        // A port found free may be taken again before the drivers bind it:
        // then try another.
        let mut attempts = 0;
        let (a, mut a_events, _b, mut b_events) = loop {
            attempts += 1;
            let port = {
                let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                s.local_addr().unwrap().port()
            };
            let opts = |ip| Options {
                single_hop_port: port,
                listen_v4: ip,
                seed: Some(u64::from(port)),
                ..Options::default()
            };
            let (a, a_events) = BfdSpeaker::spawn(opts(a_ip)).unwrap();
            let (b, b_events) = BfdSpeaker::spawn(opts(b_ip)).unwrap();
            let added = async {
                a.add_session(SessionConfig {
                    key: key(b_ip),
                    local: Some(a_ip.into()),
                    profile,
                })
                .await?;
                b.add_session(SessionConfig {
                    key: key(a_ip),
                    local: Some(b_ip.into()),
                    profile,
                })
                .await
            };
            match added.await {
                Ok(()) => break (a, a_events, b, b_events),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempts < 10 => {}
                Err(e) => panic!("adding the sessions on port {port}: {e}"),
            }
        };
        /// The next event matching `pred`; a deadline bounds a failure.
        async fn next(
            rx: &mut mpsc::UnboundedReceiver<Event>,
            pred: impl Fn(&Event) -> bool,
        ) -> Event {
            let fut = async {
                loop {
                    let e = rx.recv().await.unwrap();
                    if pred(&e) {
                        return e;
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(30), fut)
                .await
                .unwrap()
        }
        next(&mut a_events, |e| e.to == State::Up).await;
        next(&mut b_events, |e| e.to == State::Up).await;
        let (stats, sessions) = a.stats().await.unwrap();
        assert_eq!(sessions[0].state, State::Up);
        assert!(
            stats.core.received > 0 && stats.send_errors == 0,
            "{stats:?}"
        );
        assert!(a.remove_session(key(b_ip)).await.unwrap());
        let down = next(&mut b_events, |e| {
            e.to == State::Down && e.cause == Some(bfd::DownCause::NeighborAdminDown)
        })
        .await;
        assert_eq!(
            down.diag,
            bfd::Diag::NeighborSignaledSessionDown,
            "{down:?}"
        );
    }
}
