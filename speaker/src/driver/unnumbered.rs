//! The router-discovery driver of BGP unnumbered peering: one task owns an
//! [`ndp::unnumbered::Link`] core per interface a BGPPeer names in
//! `spec.interface`, moves Router Solicitations and Advertisements between
//! them and one raw ICMPv6 socket (`net::router_socket`), feeds
//! them the interfaces' up/down changes from rtnetlink, and reports each
//! neighbor address the cores learn or forget. No protocol decisions are
//! made here.
//!
//! [`Unnumbered`] is the API the reconcile loop uses: the interfaces to
//! run, the neighbor of each (a link-local address with the interface as
//! scope, what the BGP driver connects to), and a stream of changes. The
//! task is started when the first interface is asked for.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::poll_fn;
use std::io;
use std::net::{Ipv6Addr, SocketAddrV6};

use l2::EthernetAddress;
use ndp::unnumbered::{Link, LinkConfig, Output};
use ndp::wire::icmpv6::Packet;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, trace, warn};

use crate::net::netlink::{self, RouteSocket};
use crate::net::router_socket::RouterSocket;

/// The neighbors of the unnumbered interfaces (see the module docs).
#[derive(Debug, Default)]
pub struct Unnumbered {
    running: Option<Running>,
    neighbors: BTreeMap<String, SocketAddrV6>,
}

#[derive(Debug)]
struct Running {
    commands: mpsc::UnboundedSender<BTreeSet<String>>,
    events: mpsc::UnboundedReceiver<(String, Option<SocketAddrV6>)>,
    task: JoinHandle<()>,
}

impl Unnumbered {
    /// Runs router discovery on exactly these interfaces (by name; one
    /// that does not exist yet starts when it appears). The first call
    /// with a name starts the task; an empty set leaves it idle.
    ///
    /// # Errors
    /// The raw ICMPv6 or the netlink socket could not be opened (no
    /// `CAP_NET_RAW`?); nothing runs then, and the next call tries again.
    pub fn set_interfaces(&mut self, names: BTreeSet<String>) -> io::Result<()> {
        self.neighbors.retain(|n, _| names.contains(n));
        if self.running.is_none() {
            if names.is_empty() {
                return Ok(());
            }
            self.running = Some(start()?);
        }
        if let Some(r) = &self.running {
            let _ = r.commands.send(names);
        }
        Ok(())
    }

    /// The neighbor learned on `interface`: its link-local address with the
    /// interface's index as scope (port 0).
    #[must_use]
    pub fn neighbor(&self, interface: &str) -> Option<SocketAddrV6> {
        self.neighbors.get(interface).copied()
    }

    /// Waits for the next neighbor change and returns the interface it
    /// happened on; [`neighbor`](Self::neighbor) has the new value.
    /// Pending forever while the task is not started; `None` when the
    /// task ended.
    pub async fn recv(&mut self) -> Option<String> {
        let Some(r) = &mut self.running else {
            return std::future::pending().await;
        };
        let (name, neighbor) = r.events.recv().await?;
        match neighbor {
            Some(n) => self.neighbors.insert(name.clone(), n),
            None => self.neighbors.remove(&name),
        };
        Some(name)
    }
}

impl Drop for Unnumbered {
    fn drop(&mut self) {
        if let Some(r) = &self.running {
            r.task.abort();
        }
    }
}

fn start() -> io::Result<Running> {
    let socket = RouterSocket::open()?;
    let mut netlink = RouteSocket::open()?;
    netlink.request_links()?;
    let (commands, commands_rx) = mpsc::unbounded_channel();
    let (events_tx, events) = mpsc::unbounded_channel();
    let task = Task {
        socket,
        netlink,
        netlink_buf: Vec::new(),
        host: HashMap::new(),
        links: BTreeMap::new(),
        events: events_tx,
    };
    let task = shell::task::spawn(
        "unnumbered router discovery".to_owned(),
        task.run(commands_rx).instrument(info_span!("unnumbered")),
    );
    info!("unnumbered router discovery started");
    Ok(Running {
        commands,
        events,
        task,
    })
}

/// One interface a BGPPeer names.
#[derive(Debug)]
struct Iface {
    core: Link,
    /// The interface's index while it exists and is operationally up.
    up: Option<u32>,
}

struct Task {
    socket: RouterSocket,
    netlink: RouteSocket,
    netlink_buf: Vec<netlink::Event>,
    /// Every interface of the host, by index (rtnetlink's view).
    host: HashMap<u32, netlink::Link>,
    links: BTreeMap<String, Iface>,
    events: mpsc::UnboundedSender<(String, Option<SocketAddrV6>)>,
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

impl Task {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<BTreeSet<String>>) {
        let mut buf = vec![0u8; RECV_BUF];
        loop {
            self.drain();
            let deadline = self
                .links
                .values()
                .filter_map(|l| l.core.poll_timeout())
                .min();
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                names = commands.recv() => match names {
                    Some(names) => self.set_interfaces(&names),
                    None => return,
                },
                res = poll_fn(|cx| self.netlink.poll_recv(cx, &mut self.netlink_buf)) => match res {
                    Ok(()) => self.on_netlink(),
                    Err(e) => {
                        warn!(error = %e, "netlink receive failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                res = self.socket.recv(&mut buf) => match res {
                    Ok(r) => self.on_message(r.src, r.ifindex, r.hop_limit, &buf[..r.len]),
                    Err(e) => {
                        warn!(error = %e, "icmpv6 receive failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                () = sleep => {
                    let now = now();
                    for l in self.links.values_mut() {
                        l.core.handle_timeout(now);
                    }
                }
            }
        }
    }

    fn set_interfaces(&mut self, names: &BTreeSet<String>) {
        self.links.retain(|name, _| names.contains(name));
        for name in names {
            if !self.links.contains_key(name) {
                debug!(iface = %name, "unnumbered interface added");
                self.links.insert(
                    name.clone(),
                    Iface {
                        core: Link::new(LinkConfig::default()),
                        up: None,
                    },
                );
                self.sync(name);
            }
        }
    }

    fn on_netlink(&mut self) {
        for ev in std::mem::take(&mut self.netlink_buf) {
            match ev {
                netlink::Event::NewLink(link) => {
                    let name = link.name.clone();
                    self.host.insert(link.index, link);
                    self.sync(&name);
                }
                netlink::Event::DelLink(index) => {
                    if let Some(link) = self.host.remove(&index) {
                        self.sync(&link.name);
                    }
                }
                netlink::Event::Resync => {
                    debug!("netlink overrun: dumping links again");
                    if let Err(e) = self.netlink.request_links() {
                        warn!(error = %e, "netlink dump request failed");
                    }
                }
                netlink::Event::NewAddr(_) | netlink::Event::DelAddr(_) | netlink::Event::Done => {}
            }
        }
    }

    /// Tells the core of `name` (if a BGPPeer names it) whether its
    /// interface is operationally up.
    fn sync(&mut self, name: &str) {
        let Some(iface) = self.links.get_mut(name) else {
            return;
        };
        let found = self.host.values().find(|l| l.name == name);
        let link = found.filter(|l| l.up && l.running);
        let now_up = link.map(|l| l.index);
        if now_up == iface.up {
            return;
        }
        if iface.up.is_some() {
            info!(
                iface = %name,
                exists = found.is_some(),
                admin_up = found.is_some_and(|l| l.up),
                running = found.is_some_and(|l| l.running),
                "unnumbered interface down"
            );
            iface.core.handle_down();
        }
        iface.up = now_up;
        if let Some(link) = link {
            info!(iface = %name, index = link.index, "unnumbered interface up");
            if let Err(e) = self.socket.join_all_routers(link.index) {
                warn!(iface = %name, error = %e, "cannot join ff02::2: solicitations go unanswered");
            }
            iface.core.handle_up(now(), link.mac.map(EthernetAddress));
        }
    }

    fn on_message(&mut self, src: Ipv6Addr, ifindex: u32, hop_limit: u8, message: &[u8]) {
        let Some((name, iface)) = self.links.iter_mut().find(|(_, l)| l.up == Some(ifindex)) else {
            return;
        };
        if let Err(why) = iface.core.handle_message(now(), src, hop_limit, message) {
            trace!(iface = %name, %src, %why, "router discovery message dropped");
        }
    }

    /// Sends what the cores want sent and reports their neighbors.
    fn drain(&mut self) {
        for (name, iface) in &mut self.links {
            while let Some(out) = iface.core.poll_output() {
                match out {
                    Output::Send { dst, message } => {
                        let Some(index) = iface.up else { continue };
                        let mut bytes = vec![0; message.buffer_len()];
                        // The kernel fills in the checksum (it knows the
                        // source address it picks); this one is a stand-in.
                        message.emit(
                            Ipv6Addr::UNSPECIFIED,
                            dst,
                            &mut Packet::new_unchecked(&mut bytes[..]),
                        );
                        trace!(iface = %name, %dst, %message, "router discovery sent");
                        if let Err(e) = self.socket.send(dst, index, &bytes) {
                            debug!(iface = %name, error = %e, "router discovery send failed");
                        }
                    }
                    Output::Neighbor(n) => {
                        let addr = match (n, iface.up) {
                            (Some(ip), Some(index)) => Some(SocketAddrV6::new(ip, 0, 0, index)),
                            _ => None,
                        };
                        info!(iface = %name, neighbor = ?addr, "unnumbered neighbor");
                        let _ = self.events.send((name.clone(), addr));
                    }
                }
            }
        }
    }
}

/// Longest RS/RA read: an interface MTU's worth.
const RECV_BUF: usize = 1500;
