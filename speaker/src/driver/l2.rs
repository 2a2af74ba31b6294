//! The layer 2 driver: one tokio task owns the dual-stack responder
//! ([`l2::DualStack`] of ARP and NDP) and moves frames, interface changes
//! and time between it and the OS. No protocol decisions are made here:
//! where an address is announced is the pure
//! [`crate::announce::interfaces::select_interfaces`].
//!
//! [`L2Announcer`] is the API the speaker uses: announce and withdraw
//! service IPs, optionally on named interfaces only, read the counters, and
//! receive [`L2Event`]s when the interfaces an IP is announced on change.
//!
//! Interfaces and addresses come from rtnetlink (`crate::net::netlink`),
//! with change notifications, so an interface that appears or comes up is
//! used at once (MetalLB rescans every 10 s). Each selected interface gets
//! a filtered `AF_PACKET` socket (`crate::net::packet_socket`), opened
//! when the first IP is announced there and closed with the last; the
//! multicast groups the responder asks for (IPv6 solicited-node groups) are
//! joined on that socket.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::future::poll_fn;
use std::io;
use std::net::IpAddr;
use std::task::{Context, Poll, Waker};

use ipnetwork::IpNetwork;
use l2::{AsFrame, Burst, EthernetAddress, Output};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, trace, warn};

use crate::announce::interfaces::{self, Host, select_interfaces, usable};
use crate::net::netlink::{self, RouteSocket};
use crate::net::packet_socket::{PacketSocket, RecvBatch};

/// The ARP and NDP responders behind one `IpAddr` API.
type Responder = l2::DualStack<arp::Arp, ndp::Ndp>;

/// A reply of either family.
type Reply = l2::dual::Transmit<arp::Transmit, ndp::Transmit>;

/// How the responders are set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L2Config {
    /// Gratuitous ARP / unsolicited NA bursts after an address is announced
    /// on an interface (MetalLB's: 5 rounds, 1.1 s apart).
    pub burst: Burst,
    /// Interfaces never answered on, by name (MetalLB's
    /// `announcedInterfacesToExclude`).
    pub exclude: Exclude,
    /// Answers per sender (interface and source MAC), see [`l2::limit`];
    /// `None`: no limit. The driver replaces the seed with a random one.
    pub limit: Option<l2::Limit>,
    /// `SO_BUSY_POLL` on the packet sockets, in microseconds; 0: off.
    pub busy_poll_us: u32,
}

impl Default for L2Config {
    fn default() -> Self {
        Self {
            burst: Burst::default(),
            exclude: Exclude::default(),
            limit: Some(l2::Limit::DEFAULT),
            busy_poll_us: 0,
        }
    }
}

/// Interface names matching any of a list of regular expressions
/// (unanchored, as MetalLB's Go `regexp` matches them).
#[derive(Debug, Clone, Default)]
pub struct Exclude(Option<regex::RegexSet>);

impl Exclude {
    /// Compiles `patterns`; none: nothing is excluded.
    ///
    /// # Errors
    /// The first pattern that is not a valid regular expression.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, regex::Error> {
        if patterns.is_empty() {
            return Ok(Self(None));
        }
        regex::RegexSet::new(patterns).map(|set| Self(Some(set)))
    }

    /// Whether interface `name` is excluded.
    pub fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_some_and(|set| set.is_match(name))
    }

    /// The patterns, in order.
    pub fn patterns(&self) -> &[String] {
        self.0.as_ref().map_or(&[], regex::RegexSet::patterns)
    }
}

impl PartialEq for Exclude {
    fn eq(&self, other: &Self) -> bool {
        self.patterns() == other.patterns()
    }
}

impl Eq for Exclude {}

/// A change the speaker may want to log or report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L2Event {
    /// The interfaces `ip` is announced on changed (empty: nowhere, e.g.
    /// withdrawn or no usable interface).
    Selected {
        /// The announced IP.
        ip: IpAddr,
        /// Interface names, sorted.
        interfaces: Vec<String>,
    },
    /// An interface could not be used (its socket failed).
    InterfaceError {
        /// Interface name.
        interface: String,
        /// What failed.
        error: String,
    },
}

/// Counters of the responders and the driver, for metrics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct L2Stats {
    /// The ARP responder's counters.
    pub arp: arp::Stats,
    /// The NDP responder's counters.
    pub ndp: ndp::Stats,
    /// Per address ever announced (MetalLB's `ip` label), both families.
    pub per_ip: BTreeMap<IpAddr, l2::IpCounters>,
    /// Frames longer than the receive buffer, dropped unread.
    pub oversize: u64,
    /// Replies and announcements the kernel refused to send.
    pub send_errors: u64,
    /// Failed reads.
    pub recv_errors: u64,
    /// Frames the kernel dropped because a socket's buffer was full.
    pub kernel_drops: u64,
    /// Interfaces with an open socket.
    pub interfaces: usize,
    /// Netlink datagrams dropped because they did not come from the
    /// kernel.
    pub netlink_foreign: u64,
}

impl L2Stats {
    /// MetalLB's `metallb_layer2_requests_received`: ARP requests and
    /// Neighbor Solicitations for an announced address.
    pub fn requests_received(&self) -> u64 {
        self.arp.requests_received + self.ndp.requests_received
    }

    /// MetalLB's `metallb_layer2_responses_sent`.
    pub fn responses_sent(&self) -> u64 {
        self.arp.responses_sent + self.ndp.responses_sent
    }

    /// MetalLB's `metallb_layer2_gratuitous_sent`.
    pub fn gratuitous_sent(&self) -> u64 {
        self.arp.announcements_sent + self.ndp.announcements_sent
    }
}

enum Command {
    Announce(IpAddr, Option<BTreeSet<String>>),
    Withdraw(IpAddr),
    Stats(oneshot::Sender<L2Stats>),
    Stop(oneshot::Sender<()>),
}

/// Runs the ARP and NDP responders of a node.
pub struct L2Announcer {
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<()>,
}

impl L2Announcer {
    /// Starts the driver task (inside a tokio runtime), and returns it with
    /// the stream of its events. Fails if the netlink socket cannot be
    /// opened.
    pub fn start(config: L2Config) -> io::Result<(Self, mpsc::UnboundedReceiver<L2Event>)> {
        let (events, rx) = mpsc::unbounded_channel();
        let (commands, cmd_rx) = mpsc::unbounded_channel();
        let mut netlink = RouteSocket::open()?;
        netlink.request_links()?;
        // The limiter's hash seed: random per process, so a flooder cannot
        // pick a MAC that shares a victim's budget.
        let limit = config.limit.map(|l| l2::Limit {
            seed: std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                l.seed,
            ),
            ..l
        });
        let driver = Driver {
            responder: Responder::new(l2::Config {
                burst: config.burst,
                limit,
            }),
            busy_poll_us: config.busy_poll_us,
            netlink,
            exclude: config.exclude,
            dump: Dump::Links,
            resync: false,
            synced: false,
            host: Host::default(),
            wanted: BTreeMap::new(),
            active: BTreeMap::new(),
            sockets: BTreeMap::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            stats: L2Stats::default(),
            events,
            rx: RecvBatch::new(),
            replies: Vec::with_capacity(crate::net::packet_socket::BATCH),
            netlink_buf: Vec::new(),
        };
        let task = shell::task::spawn("l2", driver.run(cmd_rx));
        Ok((Self { commands, task }, rx))
    }

    /// Answers for `ip` from now on, on the interfaces named in
    /// `interfaces` when given, else as the module docs say. Announcing an
    /// IP again replaces its interface list; unchanged interfaces keep
    /// their state (no new burst).
    pub fn announce(&self, ip: IpAddr, interfaces: Option<BTreeSet<String>>) {
        let _ = self.commands.send(Command::Announce(ip, interfaces));
    }

    /// Stops answering for `ip` everywhere.
    pub fn withdraw(&self, ip: IpAddr) {
        let _ = self.commands.send(Command::Withdraw(ip));
    }

    /// The current counters; `None` if the driver has stopped.
    pub async fn stats(&self) -> Option<L2Stats> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(Command::Stats(tx)).ok()?;
        rx.await.ok()
    }

    /// Stops answering and closes every socket.
    pub async fn shutdown(self) {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Stop(tx)).is_ok() {
            let _ = rx.await;
        }
        let _ = self.task.await;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dump {
    Links,
    Addrs,
    Idle,
}

struct Iface {
    socket: PacketSocket,
    mac: [u8; 6],
    name: String,
}

struct Driver {
    responder: Responder,
    netlink: RouteSocket,
    /// Interface names never answered on.
    exclude: Exclude,
    dump: Dump,
    /// Notifications were lost during a dump: dump again after it.
    resync: bool,
    /// The first dumps (links, then addresses) are complete. Nothing is
    /// announced before: a partial view would pick the wrong interfaces.
    synced: bool,
    host: Host,
    /// What the speaker asked for.
    wanted: BTreeMap<IpAddr, Option<BTreeSet<String>>>,
    /// What the cores announce: IP -> interfaces.
    active: BTreeMap<IpAddr, BTreeSet<u32>>,
    sockets: BTreeMap<u32, Iface>,
    /// Burst timers, by deadline (the sequence number breaks ties).
    timers: BTreeMap<(Instant, u64), l2::dual::Timer>,
    timer_seq: u64,
    stats: L2Stats,
    events: mpsc::UnboundedSender<L2Event>,
    /// `SO_BUSY_POLL` for new sockets, in microseconds; 0: off.
    busy_poll_us: u32,
    rx: RecvBatch,
    /// Replies to the frames of one read, sent together.
    replies: Vec<Reply>,
    netlink_buf: Vec<netlink::Event>,
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

impl Driver {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut sleep_deadline = None;
        let sleep = tokio::time::sleep(std::time::Duration::from_secs(3600));
        tokio::pin!(sleep);
        loop {
            // Reset the sleep only when the deadline changes.
            let deadline = self.timers.keys().next().map(|(at, _)| *at);
            if deadline != sleep_deadline {
                sleep_deadline = deadline;
                sleep
                    .as_mut()
                    .reset(deadline.unwrap_or_else(|| Instant::now() + FAR));
            }
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Announce(ip, names)) => {
                        info!(%ip, interfaces = ?names, "announce");
                        self.wanted.insert(ip, names);
                        self.reconcile();
                    }
                    Some(Command::Withdraw(ip)) => {
                        info!(%ip, "withdraw");
                        self.wanted.remove(&ip);
                        self.reconcile();
                    }
                    Some(Command::Stats(tx)) => {
                        let _ = tx.send(self.collect_stats());
                    }
                    Some(Command::Stop(done)) => {
                        self.stop();
                        let _ = done.send(());
                        return;
                    }
                    None => {
                        self.stop();
                        return;
                    }
                },
                res = poll_fn(|cx| self.netlink.poll_recv(cx, &mut self.netlink_buf)) => {
                    match res {
                        Ok(()) => self.on_netlink(),
                        Err(e) => {
                            warn!(error = %e, "netlink read failed");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                    }
                }
                (ifindex, res) = poll_fn(|cx| poll_frames(&self.sockets, &mut self.rx, cx)) => {
                    self.on_batch(ifindex, res);
                    self.drain_socket(ifindex);
                }
                () = &mut sleep, if sleep_deadline.is_some() => self.on_timers(),
            }
        }
    }

    /// Handles the frames of one read from `ifindex`, then sends their
    /// replies in one batch.
    fn on_batch(&mut self, ifindex: u32, res: io::Result<usize>) {
        if let Err(e) = res {
            self.stats.recv_errors += 1;
            debug!(ifindex, error = %e, "packet socket read failed");
            return;
        }
        // One clock read per batch: its frames were queued together.
        let now = now();
        for (recv, frame) in self.rx.frames() {
            if let Some(len) = recv.truncated {
                self.stats.oversize += 1;
                trace!(ifindex, len, "oversize frame dropped");
                continue;
            }
            if let Some(reply) = self.responder.handle_frame(now, ifindex, frame) {
                self.replies.push(reply);
            }
        }
        self.send_replies(ifindex);
    }

    fn send_replies(&mut self, ifindex: u32) {
        if self.replies.is_empty() {
            return;
        }
        // Replies go back where their request came from.
        if let Some(s) = self.sockets.get(&ifindex) {
            let (refused, err) = s.socket.send_batch(&self.replies, AsFrame::frame);
            self.stats.send_errors += refused as u64;
            if let Some(e) = err {
                debug!(iface = %s.name, error = %e, refused, "send failed");
            }
        }
        self.replies.clear();
    }

    /// Handles what else is queued on `ifindex`, up to [`ROUNDS`] more
    /// reads, without a trip through `select!` for each. The noop waker
    /// is harmless: the next `select!` polls the socket again with the
    /// task's own waker before sleeping.
    fn drain_socket(&mut self, ifindex: u32) {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..ROUNDS {
            let Some(s) = self.sockets.get(&ifindex) else {
                return;
            };
            let res = match s.socket.poll_recv_batch(&mut cx, &mut self.rx) {
                Poll::Ready(res) => res,
                Poll::Pending => return,
            };
            self.on_batch(ifindex, res);
        }
    }

    fn on_timers(&mut self) {
        let now_tokio = Instant::now();
        let now = now_tokio.into_std();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now_tokio {
                break;
            }
            self.responder.handle_timer(now, entry.remove());
        }
        self.drain();
    }

    fn on_netlink(&mut self) {
        let mut changed = false;
        for ev in std::mem::take(&mut self.netlink_buf) {
            match ev {
                netlink::Event::NewLink(link) => {
                    let link = host_link(link, &self.exclude);
                    changed |= self.host.links.get(&link.index) != Some(&link);
                    self.host.links.insert(link.index, link);
                }
                netlink::Event::DelLink(index) => {
                    changed |= self.host.links.remove(&index).is_some();
                    self.host.addrs.retain(|a| a.index != index);
                }
                netlink::Event::NewAddr(a) => {
                    changed |= host_addr(a).is_some_and(|a| self.host.addrs.insert(a));
                }
                netlink::Event::DelAddr(a) => {
                    changed |= host_addr(a).is_some_and(|a| self.host.addrs.remove(&a));
                }
                netlink::Event::Done => self.next_dump(),
                netlink::Event::Resync => {
                    debug!("netlink overrun: dumping again");
                    // Announcements stay as they are until the fresh view
                    // is complete (reconcile waits for `synced`).
                    self.synced = false;
                    if self.dump == Dump::Idle {
                        self.host = Host::default();
                        self.request(Dump::Links);
                    } else {
                        self.resync = true;
                    }
                }
            }
        }
        if self.synced && changed {
            self.reconcile();
        }
    }

    fn next_dump(&mut self) {
        match self.dump {
            Dump::Links => self.request(Dump::Addrs),
            Dump::Addrs | Dump::Idle if self.resync => {
                self.resync = false;
                self.host = Host::default();
                self.request(Dump::Links);
            }
            Dump::Addrs | Dump::Idle => {
                self.dump = Dump::Idle;
                if !self.synced {
                    self.synced = true;
                    self.reconcile();
                }
            }
        }
    }

    fn request(&mut self, dump: Dump) {
        let res = match dump {
            Dump::Links => self.netlink.request_links(),
            Dump::Addrs => self.netlink.request_addrs(),
            Dump::Idle => Ok(()),
        };
        match res {
            Ok(()) => self.dump = dump,
            Err(e) => {
                warn!(error = %e, "netlink dump request failed");
                self.dump = Dump::Idle;
            }
        }
    }

    /// Brings the cores, sockets and group memberships in line with
    /// `wanted` and the current interfaces.
    fn reconcile(&mut self) {
        if !self.synced {
            return;
        }
        let now = now();
        let target: BTreeMap<IpAddr, BTreeSet<u32>> = self
            .wanted
            .iter()
            .map(|(ip, names)| (*ip, select_interfaces(*ip, names.as_ref(), &self.host)))
            .collect();
        // Interfaces that changed MAC (vanished ones are released below).
        for (index, s) in &mut self.sockets {
            let Some(link) = self.host.links.get(index) else {
                continue;
            };
            if let Some(mac) = link.mac
                && mac != s.mac
                && usable(link)
            {
                info!(ifindex = index, "interface mac changed");
                s.mac = mac;
                let _ = self
                    .responder
                    .set_interface(now, *index, EthernetAddress(mac));
            }
        }
        // Withdraw first, so a socket with nothing left closes.
        let old = std::mem::take(&mut self.active);
        for (ip, ifaces) in &old {
            let keep = target.get(ip);
            for &index in ifaces {
                if keep.is_some_and(|k| k.contains(&index)) {
                    continue;
                }
                self.responder.withdraw(*ip, index);
            }
        }
        for (ip, ifaces) in &target {
            for &index in ifaces {
                if old.get(ip).is_some_and(|o| o.contains(&index)) {
                    self.active.entry(*ip).or_default().insert(index);
                    continue;
                }
                if self.announce_on(now, *ip, index) {
                    self.active.entry(*ip).or_default().insert(index);
                }
            }
        }
        // Close sockets nothing is announced on.
        let used: BTreeSet<u32> = self.active.values().flatten().copied().collect();
        let unused: Vec<u32> = self
            .sockets
            .keys()
            .filter(|i| !used.contains(i))
            .copied()
            .collect();
        for index in unused {
            if let Some(s) = self.sockets.remove(&index) {
                info!(iface = %s.name, "interface released");
                self.absorb_kernel_stats(&s);
            }
            self.responder.remove_interface(index);
        }
        // Report changed selections.
        let ips: BTreeSet<IpAddr> = old.keys().chain(self.active.keys()).copied().collect();
        for ip in ips {
            let before = old.get(&ip);
            let after = self.active.get(&ip);
            if before == after {
                continue;
            }
            let interfaces = after
                .into_iter()
                .flatten()
                .filter_map(|i| self.host.links.get(i).map(|l| l.name.clone()))
                .collect();
            info!(%ip, ?interfaces, "announced on");
            let _ = self.events.send(L2Event::Selected { ip, interfaces });
        }
        self.drain();
    }

    /// Announces `ip` on `index`, opening the socket if needed; returns
    /// whether it is announced.
    fn announce_on(&mut self, now: std::time::Instant, ip: IpAddr, index: u32) -> bool {
        let Some(link) = self.host.links.get(&index) else {
            return false;
        };
        let Some(mac) = link.mac else { return false };
        if let Entry::Vacant(slot) = self.sockets.entry(index) {
            match PacketSocket::open(index) {
                Ok(socket) => {
                    if self.busy_poll_us > 0
                        && let Err(e) = socket.busy_poll(self.busy_poll_us)
                    {
                        warn!(iface = %link.name, error = %e, "SO_BUSY_POLL refused");
                    }
                    info!(iface = %link.name, ifindex = index, "interface in use");
                    slot.insert(Iface {
                        socket,
                        mac,
                        name: link.name.clone(),
                    });
                    let _ = self
                        .responder
                        .set_interface(now, index, EthernetAddress(mac));
                }
                Err(e) => {
                    warn!(iface = %link.name, error = %e, "packet socket failed");
                    let _ = self.events.send(L2Event::InterfaceError {
                        interface: link.name.clone(),
                        error: e.to_string(),
                    });
                    return false;
                }
            }
        }
        let res = self.responder.announce(now, ip, index);
        if let Err(e) = res {
            warn!(%ip, ifindex = index, error = %e, "announce refused");
            return false;
        }
        true
    }

    /// Sends the responder's queued frames, arms its timers and joins or
    /// leaves the groups it asks for.
    fn drain(&mut self) {
        while let Some(out) = self.responder.poll_output() {
            match out {
                Output::Transmit(t) => self.send(t.ifindex(), t.frame()),
                Output::Arm { at, timer } => {
                    self.timer_seq += 1;
                    self.timers
                        .insert((Instant::from_std(at), self.timer_seq), timer);
                }
                Output::Join { ifindex, group } => {
                    if let Some(s) = self.sockets.get(&ifindex)
                        && let Err(e) = s.socket.join_multicast(group.0)
                    {
                        warn!(iface = %s.name, error = %e, "joining multicast group failed");
                    }
                }
                Output::Leave { ifindex, group } => {
                    if let Some(s) = self.sockets.get(&ifindex) {
                        let _ = s.socket.leave_multicast(group.0);
                    }
                }
            }
        }
    }

    fn send(&mut self, ifindex: u32, frame: &[u8]) {
        let Some(s) = self.sockets.get(&ifindex) else {
            return;
        };
        if let Err(e) = s.socket.send(frame) {
            self.stats.send_errors += 1;
            debug!(iface = %s.name, error = %e, "send failed");
        }
    }

    fn absorb_kernel_stats(&mut self, s: &Iface) {
        if let Ok(k) = s.socket.kernel_stats() {
            self.stats.kernel_drops += k.drops;
        }
    }

    fn collect_stats(&mut self) -> L2Stats {
        let mut drops = 0;
        for s in self.sockets.values() {
            if let Ok(k) = s.socket.kernel_stats() {
                drops += k.drops;
            }
        }
        self.stats.kernel_drops += drops;
        L2Stats {
            arp: *self.responder.v4_stats(),
            ndp: *self.responder.v6_stats(),
            per_ip: self.responder.ip_counters().collect(),
            interfaces: self.sockets.len(),
            netlink_foreign: self.netlink.foreign(),
            oversize: self.stats.oversize,
            send_errors: self.stats.send_errors,
            recv_errors: self.stats.recv_errors,
            kernel_drops: self.stats.kernel_drops,
        }
    }

    fn stop(&mut self) {
        self.synced = true;
        self.wanted.clear();
        self.reconcile();
    }
}

/// Reads a batch of frames from whichever socket has one.
fn poll_frames(
    sockets: &BTreeMap<u32, Iface>,
    rx: &mut RecvBatch,
    cx: &mut Context<'_>,
) -> Poll<(u32, io::Result<usize>)> {
    for (index, s) in sockets {
        if let Poll::Ready(res) = s.socket.poll_recv_batch(cx, rx) {
            return Poll::Ready((*index, res));
        }
    }
    Poll::Pending
}

/// Reads (of up to `packet_socket::BATCH` frames each) per wakeup before
/// the other inputs get a turn: 128 frames, as many as before batching.
const ROUNDS: usize = 3;

const FAR: std::time::Duration = std::time::Duration::from_secs(3600);

/// The decision side's view of a link.
fn host_link(link: netlink::Link, exclude: &Exclude) -> interfaces::Link {
    interfaces::Link {
        excluded: exclude.matches(&link.name),
        index: link.index,
        name: link.name,
        mac: link.mac,
        up: link.up,
        loopback: link.loopback,
        broadcast: link.broadcast,
        ethernet: link.ethernet,
        master: link.master,
    }
}

/// The decision side's view of an address; `None` for a prefix length
/// longer than the address (the kernel sends none).
fn host_addr(addr: netlink::Addr) -> Option<interfaces::Addr> {
    Some(interfaces::Addr {
        index: addr.index,
        network: IpNetwork::new(addr.addr, addr.prefix_len).ok()?,
    })
}
