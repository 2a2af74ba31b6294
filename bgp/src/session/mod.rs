//! The sans-IO BGP session: RFC 4271 §8 finite state machine, capability
//! negotiation, timers, collision detection (§6.8), graceful restart as a
//! restarting speaker (RFC 4724) and the Adj-RIB-Out.
//!
//! No I/O, no clock, no tasks: the driver feeds transport events, decoded
//! messages and `now`, and drains [`Output`]s. Randomness (the §10 timer
//! jitter) comes from the `R: RngCore` the session owns.
//!
//! A session may hold two TCP connections at once (one we opened, one the
//! peer opened) until collision detection keeps one; each has a [`ConnId`].
//!
//! Received routes are validated by the codec (RFC 7606), counted, and
//! dropped: a load balancer never installs or re-advertises them.

mod rib;
mod timer;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rand_core::RngCore;
use tracing::{debug, trace};

use self::rib::Egress;
pub use self::rib::{AdjRibOut, FlushStats, IpPrefix, RouteAttrs};
pub use self::timer::Timer;
use self::timer::TimerTable;
use crate::wire::iana::{cease_subcode, fsm_subcode, open_subcode};
use crate::wire::open::{ExtendedNextHop, GracefulRestart, GracefulRestartFamily};
use crate::wire::{
    Afi, Capability, CapabilityCode, DecodeCtx, DecodeError, EncodeCtx, ErrorCode, Family,
    HoldTime, Message, NextHop, Notification, Open, RefreshSubtype, RouteRefresh, Safi, Update,
    UpdateEncoder,
};

/// How the session sets up TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectMode {
    /// Only we connect (incoming connections are still accepted, for
    /// collisions).
    Active,
    /// Only the peer connects.
    Passive,
    /// Both: we connect and accept.
    Both,
}

/// Which AS the peer must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAs {
    /// Exactly this AS.
    Exact(u32),
    /// Our own AS (MetalLB `dynamicASN: internal`).
    Internal,
    /// Any AS but ours (MetalLB `dynamicASN: external`).
    External,
}

/// Graceful restart as a restarting speaker (RFC 4724).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GracefulRestartConfig {
    /// How long the peer should keep our routes as stale after the session
    /// drops (at most 4095 s).
    pub restart_time: Duration,
    /// Set `R` in the first OPEN this session sends: it starts after our
    /// own restart, so the peer keeps the stale routes until our
    /// End-of-RIB. Once it has been Established, later reconnections of
    /// the same session are no restart of ours and send `R` = 0.
    pub restarting: bool,
    /// Set `F` per family: forwarding (the service IPs) kept working while
    /// the speaker was down.
    pub forwarding_preserved: bool,
}

/// Session configuration: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our AS.
    pub local_as: u32,
    /// The peer's AS.
    pub peer_as: PeerAs,
    /// Our BGP Identifier.
    pub router_id: Ipv4Addr,
    /// Proposed hold time (0 disables keepalives and the hold timer).
    pub hold_time: HoldTime,
    /// Keepalive interval; `None` is a third of the negotiated hold time.
    pub keepalive: Option<Duration>,
    /// Time between outbound connection attempts (ConnectRetryTime).
    pub connect_retry: Duration,
    /// Who connects.
    pub mode: ConnectMode,
    /// DelayOpen (RFC 4271 §8.1.1): wait this long for the peer's OPEN
    /// before sending ours.
    pub delay_open: Option<Duration>,
    /// Families to negotiate.
    pub families: Vec<Family>,
    /// Send no multiprotocol capability (MetalLB `disableMP`): IPv4 only.
    pub disable_mp: bool,
    /// Offer RFC 8950 IPv4 routes with IPv6 next hops (IPv6 transport).
    pub extended_next_hop: bool,
    /// Offer RFC 8654 extended messages.
    pub extended_message: bool,
    /// Graceful restart, if enabled.
    pub graceful_restart: Option<GracefulRestartConfig>,
    /// Host name for the FQDN capability.
    pub hostname: Option<String>,
    /// Next hop for IPv4 routes; default the local IPv4 transport address.
    pub next_hop_v4: Option<Ipv4Addr>,
    /// Global next hop for IPv6 routes; default the local IPv6 transport
    /// address (or the IPv4-mapped local address over IPv4).
    pub next_hop_v6: Option<Ipv6Addr>,
    /// Link-local next hop to add for IPv6 routes (single-hop peers).
    pub link_local_v6: Option<Ipv6Addr>,
    /// SendHoldTime (RFC 9687): how long the transport may hold bytes it
    /// cannot write before the session is given up. `None`: the RFC's
    /// default, 8 minutes or twice the negotiated hold time if larger.
    pub send_hold_time: Option<Duration>,
}

impl Config {
    /// A configuration with RFC 4271 §10 defaults for the timers, IPv4 and
    /// IPv6 unicast, both connection directions.
    pub fn new(local_as: u32, peer_as: PeerAs, router_id: Ipv4Addr) -> Self {
        Self {
            local_as,
            peer_as,
            router_id,
            hold_time: HoldTime::DEFAULT,
            keepalive: None,
            connect_retry: Duration::from_secs(5),
            mode: ConnectMode::Both,
            delay_open: None,
            families: Family::ALL.to_vec(),
            disable_mp: false,
            extended_next_hop: false,
            extended_message: true,
            graceful_restart: None,
            hostname: None,
            next_hop_v4: None,
            next_hop_v6: None,
            link_local_v6: None,
            send_hold_time: None,
        }
    }
}

/// The RFC 4271 §8.2.2 state of the session as a whole: the most advanced
/// state among its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Stopped, or backing off after an error.
    Idle,
    /// Waiting for an outbound TCP connection.
    Connect,
    /// Waiting for the peer to connect, or for the next attempt.
    Active,
    /// OPEN sent, waiting for the peer's.
    OpenSent,
    /// OPENs exchanged, waiting for KEEPALIVE.
    OpenConfirm,
    /// Exchanging routes.
    Established,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One TCP connection of a session: slot 0 is the one we open, slot 1 the
/// one the peer opens; the generation tells reused slots apart so that a
/// late event for a closed connection is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId {
    slot: u8,
    generation: u32,
}

impl ConnId {
    fn slot(self) -> usize {
        usize::from(self.slot)
    }

    fn from_slot(slot: usize) -> Self {
        Self {
            slot: slot as u8,
            generation: 0,
        }
    }

    /// Whether we opened this connection.
    pub fn is_outbound(self) -> bool {
        self.slot == 0
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = if self.is_outbound() { "out" } else { "in" };
        write!(f, "{dir}#{}", self.generation)
    }
}

/// What the session learned about the peer when the OPENs were exchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The peer's AS.
    pub remote_as: u32,
    /// The peer's BGP Identifier.
    pub remote_id: Ipv4Addr,
    /// Negotiated hold time (zero: no hold timer, no keepalives).
    pub hold_time: Duration,
    /// Keepalive interval, if any.
    pub keepalive: Option<Duration>,
    /// Families both sides support.
    pub families: Vec<Family>,
    /// The peer accepts route refresh.
    pub route_refresh: bool,
    /// Both sides support enhanced route refresh (RFC 7313).
    pub enhanced_route_refresh: bool,
    /// The peer accepts IPv4 routes with IPv6 next hops (RFC 8950).
    pub extended_next_hop_v4: bool,
    /// The peer's graceful restart capability, if sent.
    pub peer_graceful_restart: Option<GracefulRestart>,
    /// How to decode what the peer sends.
    pub decode: DecodeCtx,
    /// How to encode what we send.
    pub encode: EncodeCtx,
    /// Local transport address.
    pub local: SocketAddr,
    /// Remote transport address.
    pub remote: SocketAddr,
}

/// Why an Established session went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    /// We sent this NOTIFICATION.
    NotificationSent(Notification),
    /// The peer sent this NOTIFICATION.
    NotificationReceived(Notification),
    /// The TCP connection closed or failed.
    TransportClosed,
    /// [`Session::stop`] without a NOTIFICATION (graceful restart).
    Stopped,
}

/// Something the driver must do or may report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open a TCP connection to the peer for this connection id, then call
    /// [`Session::handle_connected`] or [`Session::handle_connect_failed`].
    Connect(ConnId),
    /// Write these bytes (one or more whole messages) on the connection.
    Send {
        /// Connection.
        conn: ConnId,
        /// Bytes to write, in order.
        bytes: Bytes,
    },
    /// Flush what was sent, then close the connection.
    Disconnect(ConnId),
    /// Decode further messages of this connection with this context.
    Negotiated {
        /// Connection.
        conn: ConnId,
        /// Decode context.
        decode: DecodeCtx,
    },
    /// The session's RFC state changed.
    StateChanged {
        /// Old state.
        from: State,
        /// New state.
        to: State,
    },
    /// The session reached Established.
    Established(Box<Negotiated>),
    /// The Established session went down.
    Down(DownReason),
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// OPEN messages sent.
    pub opens_sent: u64,
    /// KEEPALIVE messages sent.
    pub keepalives_sent: u64,
    /// UPDATE messages sent.
    pub updates_sent: u64,
    /// NOTIFICATION messages sent.
    pub notifications_sent: u64,
    /// Messages received, any type.
    pub messages_received: u64,
    /// OPEN messages received.
    pub opens_received: u64,
    /// KEEPALIVE messages received.
    pub keepalives_received: u64,
    /// UPDATE messages received.
    pub updates_received: u64,
    /// NOTIFICATION messages received.
    pub notifications_received: u64,
    /// ROUTE-REFRESH requests honoured.
    pub route_refreshes_received: u64,
    /// Prefixes the peer announced to us (dropped).
    pub prefixes_received: u64,
    /// Prefixes the peer withdrew.
    pub withdrawals_received: u64,
    /// UPDATEs handled as treat-as-withdraw (RFC 7606).
    pub treat_as_withdraw: u64,
    /// Prefixes we announced.
    pub prefixes_announced: u64,
    /// Prefixes we withdrew.
    pub prefixes_withdrawn: u64,
    /// Prefixes we could not send (family not negotiated, no next hop).
    pub prefixes_skipped: u64,
    /// Times the session reached Established.
    pub established: u64,
    /// Times the SendHoldTimer expired (RFC 9687): the peer stopped
    /// reading.
    pub send_hold_expired: u64,
}

#[derive(Debug)]
enum ConnState {
    /// Outbound TCP in progress (RFC state Connect).
    Connecting,
    /// TCP up, DelayOpen running (RFC Connect/Active with DelayOpenTimer).
    DelayOpen,
    /// OPEN sent.
    OpenSent,
    /// OPENs exchanged; KEEPALIVE sent.
    OpenConfirm(Box<Negotiated>),
    /// Exchanging routes.
    Established(Box<Negotiated>),
}

#[derive(Debug)]
struct Conn {
    id: ConnId,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    state: ConnState,
}

impl Conn {
    fn rfc_state(&self) -> State {
        match self.state {
            ConnState::Connecting => State::Connect,
            ConnState::DelayOpen => State::Active,
            ConnState::OpenSent => State::OpenSent,
            ConnState::OpenConfirm(_) => State::OpenConfirm,
            ConnState::Established(_) => State::Established,
        }
    }
}

/// How [`Session::stop`] ends the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopMode {
    /// Cease / Administrative Shutdown with an RFC 9003 message: the peer
    /// withdraws our routes at once.
    Shutdown(String),
    /// Cease / Administrative Reset with a message (configuration change).
    Reset(String),
    /// Close TCP without a NOTIFICATION, so that a peer with graceful
    /// restart keeps our routes until we are back (upgrade, restart).
    PreserveForwarding,
}

/// RFC 9687 §3: the smallest default SendHoldTime.
const SEND_HOLD_MIN: Duration = Duration::from_secs(8 * 60);
/// RFC 4271 §8: "HoldTimer to a large value"; 4 minutes is suggested.
const OPEN_HOLD: Duration = Duration::from_secs(240);
/// First backoff after a failed session; doubles up to `connect_retry`.
const MIN_BACKOFF: Duration = Duration::from_secs(1);

/// A BGP session with one peer.
#[derive(Debug)]
pub struct Session<R> {
    config: Config,
    rng: R,
    running: bool,
    /// Held down by [`Session::hold_down`] (BFD Down): no connections
    /// until [`Session::release`], even while running.
    held: bool,
    conns: [Option<Conn>; 2],
    generation: u32,
    timers: TimerTable,
    out: VecDeque<Output>,
    rib: AdjRibOut,
    visible: State,
    /// Capability codes the peer rejected with 2/7; not offered again.
    suppressed: Vec<u8>,
    failures: u32,
    stats: Stats,
    /// The End-of-RIB markers are due with the next flush.
    pending_eor: bool,
    /// A ROUTE-REFRESH asked for this family: frame the re-send with
    /// BoRR/EoRR (RFC 7313) when enhanced route refresh was negotiated.
    refresh: Option<Family>,
    /// A global IPv6 address of the interface the session runs over, as
    /// the transport found it ([`Session::set_interface_v6`]).
    interface_v6: Option<Ipv6Addr>,
}

impl<R: RngCore> Session<R> {
    /// A stopped session; call [`Session::start`].
    pub fn new(config: Config, rng: R) -> Self {
        Self {
            config,
            rng,
            running: false,
            held: false,
            conns: [None, None],
            generation: 0,
            timers: TimerTable::default(),
            out: VecDeque::new(),
            rib: AdjRibOut::default(),
            visible: State::Idle,
            suppressed: Vec::new(),
            failures: 0,
            stats: Stats::default(),
            pending_eor: false,
            refresh: None,
            interface_v6: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The RFC state.
    pub fn state(&self) -> State {
        self.visible
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The Adj-RIB-Out (desired and sent routes).
    pub fn rib(&self) -> &AdjRibOut {
        &self.rib
    }

    /// What was negotiated, while Established.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.conns.iter().flatten().find_map(|c| match &c.state {
            ConnState::Established(n) => Some(&**n),
            _ => None,
        })
    }

    /// ManualStart (RFC 4271 event 1, or 4/5 when passive): start
    /// connecting or listening.
    pub fn start(&mut self, now: Instant) {
        if self.running {
            return;
        }
        self.running = true;
        self.failures = 0;
        if self.config.mode != ConnectMode::Passive && !self.held {
            self.connect(now);
        }
        self.update_state();
    }

    /// Holds the session down, as RFC 9384 §4 asks when BFD declares the
    /// peer unreachable: `notification` (Cease / BFD Down) goes out on
    /// every connection past TCP setup, every connection closes, and the
    /// session stays Idle, neither connecting nor accepting, until
    /// [`Session::release`]. Works before [`Session::start`] too (a
    /// session configured with BFD starts held). A second call while held
    /// changes nothing. Not an RFC 4271 event: an AutomaticStop (event 8)
    /// without the automatic restart.
    pub fn hold_down(&mut self, now: Instant, notification: Notification) {
        if self.held {
            return;
        }
        self.held = true;
        for slot in 0..2 {
            let Some(conn) = self.conns[slot].as_ref() else {
                continue;
            };
            let id = conn.id;
            // No NOTIFICATION on a TCP connection still being set up.
            let n = (!matches!(conn.state, ConnState::Connecting)).then(|| notification.clone());
            let reason = match &n {
                Some(n) => DownReason::NotificationSent(n.clone()),
                None => DownReason::Stopped,
            };
            self.close(now, id, n, reason);
        }
        self.timers = TimerTable::default();
        self.update_state();
    }

    /// Ends a [`Session::hold_down`]: a running session connects (or
    /// waits for the peer, when passive) at once, without the backoff of
    /// a failure. Does nothing when not held.
    pub fn release(&mut self, now: Instant) {
        if !self.held {
            return;
        }
        self.held = false;
        if self.running {
            self.failures = 0;
            if self.config.mode != ConnectMode::Passive {
                self.connect(now);
            }
        }
        self.update_state();
    }

    /// Whether [`Session::hold_down`] holds the session.
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// ManualStop (event 2): end the session as `mode` says and stay Idle.
    pub fn stop(&mut self, now: Instant, mode: StopMode) {
        self.running = false;
        for slot in 0..2 {
            let Some(conn) = self.conns[slot].as_ref() else {
                continue;
            };
            let id = conn.id;
            let connected = !matches!(conn.state, ConnState::Connecting);
            let notification = match &mode {
                StopMode::Shutdown(msg) if connected => {
                    Some(Notification::administrative_shutdown(msg))
                }
                StopMode::Reset(msg) if connected => Some(Notification::administrative_reset(msg)),
                _ => None,
            };
            let reason = match &notification {
                Some(n) => DownReason::NotificationSent(n.clone()),
                None => DownReason::Stopped,
            };
            self.close(now, id, notification, reason);
        }
        self.timers = TimerTable::default();
        self.update_state();
    }

    /// Replaces the routes the peer should have. Sent when Established, on
    /// the next [`Session::poll_output`], as the minimal UPDATEs.
    pub fn set_routes(&mut self, routes: BTreeMap<IpPrefix, Arc<RouteAttrs>>) {
        self.rib.set(routes);
    }

    /// Adds or changes one route.
    pub fn announce(&mut self, prefix: IpPrefix, attrs: Arc<RouteAttrs>) {
        self.rib.announce(prefix, attrs);
    }

    /// Removes one route.
    pub fn withdraw(&mut self, prefix: &IpPrefix) {
        self.rib.withdraw(prefix);
    }

    /// The outbound TCP connection is up (events 16/17,
    /// Tcp_CR_Acked / TcpConnectionConfirmed).
    pub fn handle_connected(
        &mut self,
        now: Instant,
        conn: ConnId,
        local: SocketAddr,
        remote: SocketAddr,
    ) {
        let Some(c) = self.conn_mut(conn) else { return };
        if !matches!(c.state, ConnState::Connecting) {
            return;
        }
        c.local = Some(local);
        c.remote = Some(remote);
        self.timers.stop(Timer::ConnectRetry);
        self.transport_up(now, conn);
        self.update_state();
    }

    /// The outbound TCP connection failed (event 18, TcpConnectionFails).
    pub fn handle_connect_failed(&mut self, now: Instant, conn: ConnId) {
        if self.conn(conn).is_some() {
            self.close(now, conn, None, DownReason::TransportClosed);
            // The ConnectRetry timer, still running, schedules the retry.
            if self.active() && self.timers.get(Timer::ConnectRetry).is_none() {
                self.arm_connect_retry(now);
            }
            self.update_state();
        }
    }

    /// The peer opened a connection (event 14, TcpConnection_Valid).
    /// Returns its id, or `None` when the driver must close it (session
    /// stopped, or an inbound connection already exists).
    pub fn handle_incoming(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<ConnId> {
        if !self.active() || self.conns[1].is_some() {
            return None;
        }
        let id = self.new_conn_id(1);
        self.conns[1] = Some(Conn {
            id,
            local: Some(local),
            remote: Some(remote),
            state: ConnState::Connecting,
        });
        self.transport_up(now, id);
        self.update_state();
        Some(id)
    }

    /// The transport of `conn` holds bytes it could not write yet (its
    /// socket buffer is full): starts the SendHoldTimer (RFC 9687 §3) unless
    /// it runs. Call it when bytes are queued and not written at once.
    pub fn handle_send_blocked(&mut self, now: Instant, conn: ConnId) {
        if self.conn(conn).is_none() || self.timers.get(Timer::SendHold(conn)).is_some() {
            return;
        }
        if let Some(d) = self.send_hold_time(conn) {
            self.timers.set(Timer::SendHold(conn), now + d);
        }
    }

    /// The transport of `conn` wrote bytes: the peer reads. With bytes
    /// still queued the SendHoldTimer starts over; with none it stops.
    pub fn handle_send_progress(&mut self, now: Instant, conn: ConnId, drained: bool) {
        if self.conn(conn).is_none() {
            return;
        }
        self.timers.stop(Timer::SendHold(conn));
        if !drained {
            self.handle_send_blocked(now, conn);
        }
    }

    /// RFC 9687 §3: the configured SendHoldTime, or 8 minutes or twice the
    /// negotiated hold time, whichever is larger. None when the negotiated
    /// hold time is zero (no hold timer: the peer asked for none either).
    fn send_hold_time(&self, conn: ConnId) -> Option<Duration> {
        let hold = match self.conn(conn).map(|c| &c.state) {
            Some(ConnState::OpenConfirm(n) | ConnState::Established(n)) => Some(n.hold_time),
            _ => None,
        };
        if hold.is_some_and(|h| h.is_zero()) {
            return None;
        }
        Some(
            self.config.send_hold_time.unwrap_or_else(|| {
                SEND_HOLD_MIN.max(hold.unwrap_or(Duration::ZERO).saturating_mul(2))
            }),
        )
    }

    /// A global IPv6 address of the interface the session's IPv4 transport
    /// uses, found by the driver (`None`: it has none). IPv6 routes sent
    /// over IPv4 carry it as their next hop unless [`Config::next_hop_v6`]
    /// is set: a next hop the peer can install, as FRR picks the
    /// interface's global address. Without one, the IPv4-mapped address
    /// is the fallback (RFC 4291 §2.5.5.2), which a router can rarely use.
    pub fn set_interface_v6(&mut self, addr: Option<Ipv6Addr>) {
        self.interface_v6 = addr;
    }

    /// The connection closed or failed (event 18, TcpConnectionFails).
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId) {
        if self.conn(conn).is_some() {
            debug!(%conn, "transport closed");
            self.close(now, conn, None, DownReason::TransportClosed);
            self.after_failure(now);
            self.update_state();
        }
    }

    /// A message arrived on `conn` (events 19 BGPOpen, 24/25
    /// NotifMsg(VerErr), 26 KeepAliveMsg, 27 UpdateMsg, and ROUTE-REFRESH).
    pub fn handle_message(&mut self, now: Instant, conn: ConnId, msg: Message) {
        if self.conn(conn).is_none() {
            return;
        }
        self.stats.messages_received += 1;
        trace!(%conn, %msg, "received");
        match msg {
            Message::Open(open) => {
                self.stats.opens_received += 1;
                self.on_open(now, conn, open);
            }
            Message::Keepalive => {
                self.stats.keepalives_received += 1;
                self.on_keepalive(now, conn);
            }
            Message::Update(update) => self.on_update(now, conn, &update),
            Message::Notification(n) => self.on_notification(now, conn, n),
            Message::RouteRefresh(rr) => self.on_route_refresh(now, conn, rr),
        }
        self.update_state();
    }

    /// A message on `conn` failed to decode (events 21 BGPHeaderErr, 22
    /// BGPOpenMsgErr, 28 UpdateMsgErr): send the matching NOTIFICATION and
    /// close.
    pub fn handle_decode_error(&mut self, now: Instant, conn: ConnId, err: &DecodeError) {
        if self.conn(conn).is_none() {
            return;
        }
        let n = Notification::from(err);
        debug!(%conn, error = %err, "decode error");
        self.close(now, conn, Some(n.clone()), DownReason::NotificationSent(n));
        self.after_failure(now);
        self.update_state();
    }

    /// Fires the timers due at `now` (events 9 ConnectRetryTimer_Expires,
    /// 10 HoldTimer_Expires, 11 KeepaliveTimer_Expires, 12
    /// DelayOpenTimer_Expires, 13 IdleHoldTimer_Expires). Spurious calls
    /// are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(timer) = self.timers.pop_expired(now) {
            trace!(?timer, "timer expired");
            match timer {
                Timer::ConnectRetry => {
                    if self.active() && self.conns[0].is_none() && !self.is_established() {
                        self.connect(now);
                    } else if self.active() {
                        self.arm_connect_retry(now);
                    }
                }
                Timer::IdleHold => {
                    if self.active()
                        && self.config.mode != ConnectMode::Passive
                        && self.conns[0].is_none()
                    {
                        self.connect(now);
                    }
                }
                Timer::Hold(slot) => {
                    if let Some(id) = self.conns[slot.slot()].as_ref().map(|c| c.id) {
                        let n = Notification::new(ErrorCode::HoldTimerExpired, 0, Bytes::new());
                        debug!(conn = %id, "hold timer expired");
                        self.close(now, id, Some(n.clone()), DownReason::NotificationSent(n));
                        self.after_failure(now);
                    }
                }
                Timer::Keepalive(slot) => {
                    if let Some(id) = self.conns[slot.slot()].as_ref().map(|c| c.id) {
                        self.send_keepalive(now, id);
                    }
                }
                Timer::SendHold(slot) => {
                    // RFC 9687 §4: the peer has not read for SendHoldTime.
                    // The NOTIFICATION is queued behind what it did not
                    // read, so it will rarely arrive; the driver closes the
                    // connection without waiting for it.
                    if let Some(id) = self.conns[slot.slot()].as_ref().map(|c| c.id) {
                        let n = Notification::new(ErrorCode::SendHoldTimerExpired, 0, Bytes::new());
                        debug!(conn = %id, "send hold timer expired");
                        self.stats.send_hold_expired += 1;
                        self.close(now, id, Some(n.clone()), DownReason::NotificationSent(n));
                        self.after_failure(now);
                    }
                }
                Timer::DelayOpen(slot) => {
                    if let Some(id) = self.conns[slot.slot()].as_ref().map(|c| c.id) {
                        self.send_open(now, id);
                    }
                }
            }
        }
        self.update_state();
    }

    /// The next output. Call after every input until it returns `None`;
    /// route changes are encoded here, so a burst of changes made between
    /// two drains goes out as one minimal set of UPDATEs.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        if self.out.is_empty() && self.rib.is_dirty() {
            self.flush_routes();
        }
        self.out.pop_front()
    }

    /// When [`Session::handle_timeout`] must next be called. Call after
    /// draining the outputs.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    // --- internals -----------------------------------------------------

    fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.conns[id.slot()].as_ref().filter(|c| c.id == id)
    }

    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.conns[id.slot()].as_mut().filter(|c| c.id == id)
    }

    /// Started and not held down: may connect and accept.
    fn active(&self) -> bool {
        self.running && !self.held
    }

    fn is_established(&self) -> bool {
        self.conns
            .iter()
            .flatten()
            .any(|c| matches!(c.state, ConnState::Established(_)))
    }

    fn new_conn_id(&mut self, slot: u8) -> ConnId {
        self.generation = self.generation.wrapping_add(1);
        ConnId {
            slot,
            generation: self.generation,
        }
    }

    /// RFC 4271 §10: timers are jittered by a factor in [0.75, 1.0].
    fn jitter(&mut self, d: Duration) -> Duration {
        let factor = 0.75 + 0.25 * (f64::from(self.rng.next_u32()) / f64::from(u32::MAX));
        d.mul_f64(factor)
    }

    fn arm_connect_retry(&mut self, now: Instant) {
        let d = self.jitter(self.config.connect_retry);
        self.timers.set(Timer::ConnectRetry, now + d);
    }

    fn connect(&mut self, now: Instant) {
        let id = self.new_conn_id(0);
        self.conns[0] = Some(Conn {
            id,
            local: None,
            remote: None,
            state: ConnState::Connecting,
        });
        self.out.push_back(Output::Connect(id));
        self.arm_connect_retry(now);
    }

    fn transport_up(&mut self, now: Instant, conn: ConnId) {
        match self.config.delay_open {
            Some(d) => {
                if let Some(c) = self.conn_mut(conn) {
                    c.state = ConnState::DelayOpen;
                }
                self.timers.set(Timer::DelayOpen(conn), now + d);
                self.timers.set(Timer::Hold(conn), now + OPEN_HOLD);
            }
            None => self.send_open(now, conn),
        }
    }

    /// After a session failure: back off before reconnecting, doubling up
    /// to ConnectRetryTime (RFC 4271 §8.1.1 DampPeerOscillations).
    fn after_failure(&mut self, now: Instant) {
        if !self.active()
            || self.config.mode == ConnectMode::Passive
            || self.conns.iter().any(Option::is_some)
        {
            return;
        }
        let backoff = MIN_BACKOFF
            .saturating_mul(1 << self.failures.min(10))
            .min(self.config.connect_retry.max(MIN_BACKOFF));
        self.failures = self.failures.saturating_add(1);
        let d = self.jitter(backoff);
        self.timers.stop(Timer::ConnectRetry);
        self.timers.set(Timer::IdleHold, now + d);
    }

    fn send(&mut self, conn: ConnId, msg: &Message, ctx: &EncodeCtx) {
        match msg.to_bytes(ctx) {
            Ok(bytes) => {
                trace!(%conn, %msg, "send");
                self.out.push_back(Output::Send { conn, bytes });
            }
            // Only our own oversized messages get here; they are not sent.
            Err(e) => debug!(%conn, error = %e, "cannot encode"),
        }
    }

    fn open_message(&self) -> Open {
        let c = &self.config;
        let mut caps = Vec::new();
        if !c.disable_mp {
            for f in &c.families {
                caps.push(Capability::Multiprotocol {
                    afi: f.afi(),
                    safi: f.safi(),
                });
            }
        }
        caps.push(Capability::RouteRefresh);
        caps.push(Capability::EnhancedRouteRefresh);
        caps.push(Capability::FourOctetAs(c.local_as));
        if let Some(gr) = &c.graceful_restart {
            let families = c
                .families
                .iter()
                .map(|f| GracefulRestartFamily {
                    afi: f.afi(),
                    safi: f.safi(),
                    flags: if gr.forwarding_preserved {
                        GracefulRestart::FORWARDING
                    } else {
                        0
                    },
                })
                .collect();
            caps.push(Capability::GracefulRestart(GracefulRestart {
                flags: if gr.restarting && self.stats.established == 0 {
                    GracefulRestart::RESTART_STATE
                } else {
                    0
                },
                restart_time: gr.restart_time.as_secs().min(4095) as u16,
                families,
            }));
        }
        if c.extended_message {
            caps.push(Capability::ExtendedMessage);
        }
        if c.extended_next_hop && c.families.contains(&Family::Ipv4Unicast) {
            caps.push(Capability::ExtendedNextHop(vec![ExtendedNextHop {
                afi: Afi::Ipv4,
                safi: u16::from(u8::from(Safi::Unicast)),
                next_hop_afi: Afi::Ipv6,
            }]));
        }
        if let Some(host) = &c.hostname {
            caps.push(Capability::Fqdn {
                hostname: Bytes::copy_from_slice(host.as_bytes()),
                domain: Bytes::new(),
            });
        }
        caps.retain(|cap| !self.suppressed.contains(&u8::from(cap.code())));
        Open::new(c.local_as, c.hold_time, c.router_id, caps)
    }

    fn send_open(&mut self, now: Instant, conn: ConnId) {
        let open = Message::Open(self.open_message());
        self.send(conn, &open, &EncodeCtx::default());
        self.stats.opens_sent += 1;
        self.timers.stop(Timer::DelayOpen(conn));
        self.timers.set(Timer::Hold(conn), now + OPEN_HOLD);
        if let Some(c) = self.conn_mut(conn) {
            c.state = ConnState::OpenSent;
        }
    }

    fn send_keepalive(&mut self, now: Instant, conn: ConnId) {
        self.send(conn, &Message::Keepalive, &EncodeCtx::default());
        self.stats.keepalives_sent += 1;
        let interval = self.conn(conn).and_then(|c| match &c.state {
            ConnState::OpenConfirm(n) | ConnState::Established(n) => n.keepalive,
            _ => None,
        });
        if let Some(interval) = interval {
            let d = self.jitter(interval);
            self.timers.set(Timer::Keepalive(conn), now + d);
        }
    }

    /// Sends `notification` (if any), closes the connection, and reports
    /// `reason` if it was Established.
    fn close(
        &mut self,
        _now: Instant,
        conn: ConnId,
        notification: Option<Notification>,
        reason: DownReason,
    ) {
        let Some(c) = self.conns[conn.slot()].take_if(|c| c.id == conn) else {
            return;
        };
        if let Some(n) = &notification {
            self.send(
                conn,
                &Message::Notification(n.clone()),
                &EncodeCtx::default(),
            );
            self.stats.notifications_sent += 1;
        }
        // For an outbound attempt still in progress, the driver abandons it.
        self.out.push_back(Output::Disconnect(conn));
        self.timers.stop_conn(conn);
        if let ConnState::Established(_) = c.state {
            self.rib.reset_sent();
            debug!(%conn, ?reason, "session down");
            self.out.push_back(Output::Down(reason));
        }
    }

    fn fsm_error(&mut self, now: Instant, conn: ConnId) {
        let subcode = match self.conn(conn).map(|c| &c.state) {
            Some(ConnState::OpenSent) => fsm_subcode::UNEXPECTED_IN_OPEN_SENT,
            Some(ConnState::OpenConfirm(_)) => fsm_subcode::UNEXPECTED_IN_OPEN_CONFIRM,
            Some(ConnState::Established(_)) => fsm_subcode::UNEXPECTED_IN_ESTABLISHED,
            _ => fsm_subcode::UNSPECIFIED,
        };
        let n = Notification::new(ErrorCode::Fsm, subcode, Bytes::new());
        self.close(now, conn, Some(n.clone()), DownReason::NotificationSent(n));
        self.after_failure(now);
    }

    fn reject_open(&mut self, now: Instant, conn: ConnId, subcode: u8, data: Bytes) {
        let n = Notification::new(ErrorCode::OpenMessage, subcode, data);
        self.close(now, conn, Some(n.clone()), DownReason::NotificationSent(n));
        self.after_failure(now);
    }

    fn on_open(&mut self, now: Instant, conn: ConnId, open: Open) {
        match self.conn(conn).map(|c| &c.state) {
            Some(ConnState::OpenSent) => {}
            // RFC 4271 §8.2.2 (Connect/Active with DelayOpenTimer running):
            // send our OPEN now, then process theirs.
            Some(ConnState::DelayOpen) => self.send_open(now, conn),
            _ => return self.fsm_error(now, conn),
        }
        let Some((local, remote)) = self.conn(conn).and_then(|c| c.local.zip(c.remote)) else {
            return self.fsm_error(now, conn);
        };
        let negotiated = match self.negotiate(&open, local, remote) {
            Ok(n) => n,
            Err((subcode, data)) => return self.reject_open(now, conn, subcode, data),
        };
        if !self.resolve_collision(now, conn, negotiated.remote_id) {
            return;
        }
        debug!(%conn, remote_as = negotiated.remote_as, remote_id = %negotiated.remote_id, "open received");
        let hold = negotiated.hold_time;
        self.out.push_back(Output::Negotiated {
            conn,
            decode: negotiated.decode,
        });
        if let Some(c) = self.conn_mut(conn) {
            c.state = ConnState::OpenConfirm(Box::new(negotiated));
        }
        self.send_keepalive(now, conn);
        if hold.is_zero() {
            self.timers.stop(Timer::Hold(conn));
        } else {
            self.timers.set(Timer::Hold(conn), now + hold);
        }
    }

    /// RFC 4271 §6.8: with two connections to the same peer, keep the one
    /// opened by the speaker with the higher BGP Identifier. Returns
    /// whether `conn` survives.
    fn resolve_collision(&mut self, now: Instant, conn: ConnId, remote_id: Ipv4Addr) -> bool {
        let other_slot = 1 - conn.slot();
        let Some(other) = self.conns[other_slot].as_ref() else {
            return true;
        };
        let other_id = other.id;
        let cease = || {
            let n = Notification::new(
                ErrorCode::Cease,
                cease_subcode::CONNECTION_COLLISION_RESOLUTION,
                Bytes::new(),
            );
            (n.clone(), DownReason::NotificationSent(n))
        };
        match other.state {
            // A connection not yet in OpenSent loses to one that is.
            ConnState::Connecting | ConnState::DelayOpen => {
                self.close(now, other_id, None, DownReason::TransportClosed);
                true
            }
            // A collision with an Established session closes the new one.
            ConnState::Established(_) => {
                let (n, r) = cease();
                self.close(now, conn, Some(n), r);
                false
            }
            ConnState::OpenSent | ConnState::OpenConfirm(_) => {
                // The connection opened by the higher identifier survives.
                let keep_outbound = u32::from(self.config.router_id) > u32::from(remote_id);
                let loser = if keep_outbound == conn.is_outbound() {
                    other_id
                } else {
                    conn
                };
                debug!(winner = %if loser == conn { other_id } else { conn }, "connection collision");
                let (n, r) = cease();
                self.close(now, loser, Some(n), r);
                loser != conn
            }
        }
    }

    /// Checks the peer's OPEN and negotiates; on error returns the OPEN
    /// Message Error subcode and data.
    fn negotiate(
        &self,
        open: &Open,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<Negotiated, (u8, Bytes)> {
        let c = &self.config;
        let remote_as = open.asn();
        let as_ok = match c.peer_as {
            PeerAs::Exact(asn) => remote_as == asn,
            PeerAs::Internal => remote_as == c.local_as,
            PeerAs::External => remote_as != c.local_as,
        };
        if !as_ok {
            return Err((open_subcode::BAD_PEER_AS, Bytes::new()));
        }
        // RFC 6286 §2.2: identical identifiers are an error within an AS.
        if open.bgp_id == c.router_id && remote_as == c.local_as {
            return Err((open_subcode::BAD_BGP_IDENTIFIER, Bytes::new()));
        }
        let ours = self.open_message();
        let has =
            |o: &Open, code: CapabilityCode| o.capabilities.iter().any(|cap| cap.code() == code);
        let mp = |o: &Open| -> Vec<Family> {
            o.capabilities
                .iter()
                .filter_map(|cap| match cap {
                    Capability::Multiprotocol { afi, safi } => Family::from_afi_safi(*afi, *safi),
                    _ => None,
                })
                .collect()
        };
        // RFC 4760 §8: without multiprotocol capabilities, IPv4 unicast.
        let families_of = |o: &Open| {
            let m = mp(o);
            if has(o, CapabilityCode::Multiprotocol) {
                m
            } else {
                vec![Family::Ipv4Unicast]
            }
        };
        let theirs = families_of(open);
        let families: Vec<Family> = families_of(&ours)
            .into_iter()
            .filter(|f| theirs.contains(f))
            .collect();
        let as4 = has(open, CapabilityCode::FourOctetAs) && has(&ours, CapabilityCode::FourOctetAs);
        let extended_message = has(open, CapabilityCode::ExtendedMessage)
            && has(&ours, CapabilityCode::ExtendedMessage);
        let extended_next_hop_v4 = has(&ours, CapabilityCode::ExtendedNextHop)
            && open.capabilities.iter().any(|cap| match cap {
                Capability::ExtendedNextHop(v) => v
                    .iter()
                    .any(|e| e.afi == Afi::Ipv4 && e.safi == 1 && e.next_hop_afi == Afi::Ipv6),
                _ => false,
            });
        let hold_secs = c.hold_time.secs().min(open.hold_time.secs());
        let hold_time = Duration::from_secs(u64::from(hold_secs));
        let keepalive = (hold_secs > 0).then(|| {
            let third = hold_time / 3;
            c.keepalive
                .map_or(third, |k| k.min(third).max(Duration::from_secs(1)))
        });
        let peer_graceful_restart = open.capabilities.iter().find_map(|cap| match cap {
            Capability::GracefulRestart(gr) => Some(gr.clone()),
            _ => None,
        });
        // We never offer ADD-PATH (a load balancer has one path per
        // prefix), so no path identifiers in either direction.
        let ctx = DecodeCtx {
            as4,
            extended_message,
            add_path: crate::wire::AddPathSet::EMPTY,
        };
        Ok(Negotiated {
            remote_as,
            remote_id: open.bgp_id,
            hold_time,
            keepalive,
            families,
            route_refresh: has(open, CapabilityCode::RouteRefresh)
                || has(open, CapabilityCode::RouteRefreshCisco),
            enhanced_route_refresh: has(open, CapabilityCode::EnhancedRouteRefresh),
            extended_next_hop_v4,
            peer_graceful_restart,
            decode: ctx,
            encode: ctx,
            local,
            remote,
        })
    }

    fn on_keepalive(&mut self, now: Instant, conn: ConnId) {
        let hold = match self.conn(conn).map(|c| &c.state) {
            Some(ConnState::OpenConfirm(n)) | Some(ConnState::Established(n)) => n.hold_time,
            _ => return self.fsm_error(now, conn),
        };
        if !hold.is_zero() {
            self.timers.set(Timer::Hold(conn), now + hold);
        }
        let Some(c) = self.conn_mut(conn) else { return };
        if let ConnState::OpenConfirm(n) = &c.state {
            let n = n.clone();
            c.state = ConnState::Established(n.clone());
            self.stats.established += 1;
            self.failures = 0;
            debug!(%conn, "established");
            self.out.push_back(Output::Established(n));
            // The initial sync and End-of-RIB go out with the next flush.
            self.rib.reset_sent();
            self.pending_eor = true;
        }
        if self.is_established() {
            // The other connection, if any, was still connecting: drop it.
            let other = 1 - conn.slot();
            if let Some(id) = self.conns[other].as_ref().map(|c| c.id) {
                self.close(now, id, None, DownReason::TransportClosed);
            }
            self.timers.stop(Timer::ConnectRetry);
            self.timers.stop(Timer::IdleHold);
        }
    }

    fn on_update(&mut self, now: Instant, conn: ConnId, update: &Update) {
        let hold = match self.conn(conn).map(|c| &c.state) {
            Some(ConnState::Established(n)) => n.hold_time,
            _ => return self.fsm_error(now, conn),
        };
        if !hold.is_zero() {
            self.timers.set(Timer::Hold(conn), now + hold);
        }
        self.stats.updates_received += 1;
        let mp_reach = match update.mp_reach() {
            Some(crate::wire::MpReach::Ipv4Unicast { nlri, .. }) => nlri.len(),
            Some(crate::wire::MpReach::Ipv6Unicast { nlri, .. }) => nlri.len(),
            _ => 0,
        };
        let mp_unreach = match update.mp_unreach() {
            Some(crate::wire::MpUnreach::Ipv4Unicast(v)) => v.len(),
            Some(crate::wire::MpUnreach::Ipv6Unicast(v)) => v.len(),
            _ => 0,
        };
        let announced = (update.nlri.len() + mp_reach) as u64;
        if update.treat_as_withdraw() {
            // RFC 7606: handled as a withdrawal of every prefix in it.
            self.stats.treat_as_withdraw += 1;
            self.stats.withdrawals_received += announced;
        } else {
            self.stats.prefixes_received += announced;
        }
        self.stats.withdrawals_received += (update.withdrawn.len() + mp_unreach) as u64;
    }

    fn on_notification(&mut self, now: Instant, conn: ConnId, n: Notification) {
        self.stats.notifications_received += 1;
        debug!(%conn, notification = %n, "notification received");
        // RFC 5492 §5: remember rejected capabilities and retry without.
        if n.code == ErrorCode::OpenMessage && n.subcode == open_subcode::UNSUPPORTED_CAPABILITY {
            let mut data = &n.data[..];
            while let [code, len, rest @ ..] = data {
                if !self.suppressed.contains(code) {
                    self.suppressed.push(*code);
                }
                data = rest.get(usize::from(*len)..).unwrap_or_default();
            }
        }
        self.close(now, conn, None, DownReason::NotificationReceived(n));
        self.after_failure(now);
    }

    fn on_route_refresh(&mut self, now: Instant, conn: ConnId, rr: RouteRefresh) {
        let families = match self.conn(conn).map(|c| &c.state) {
            Some(ConnState::Established(n)) => n.families.clone(),
            _ => return self.fsm_error(now, conn),
        };
        // RFC 7313 §5: unknown subtypes are ignored; BoRR/EoRR from the
        // peer concern routes we do not keep.
        if rr.subtype != RefreshSubtype::Request {
            return;
        }
        match Family::from_afi_safi(rr.afi, rr.safi) {
            // RFC 2918 §4: a family not negotiated is ignored.
            Some(f) if families.contains(&f) => {
                self.stats.route_refreshes_received += 1;
                self.rib.resend(f);
                self.refresh = Some(f);
            }
            _ => {}
        }
    }

    /// Sends pending route changes (and the End-of-RIB after the initial
    /// sync) on the Established connection.
    fn flush_routes(&mut self) {
        let Some((conn, n)) = self.conns.iter().flatten().find_map(|c| match &c.state {
            ConnState::Established(n) => Some((c.id, n.clone())),
            _ => None,
        }) else {
            return;
        };
        let egress = self.egress(&n);
        let enc = UpdateEncoder::new(n.encode);
        let mut buf = BytesMut::new();
        let refresh = self.refresh.take().filter(|_| n.enhanced_route_refresh);
        if let Some(f) = refresh {
            let borr = RouteRefresh {
                afi: f.afi(),
                subtype: RefreshSubtype::BeginningOfRefresh,
                safi: f.safi(),
            };
            let _ = Message::RouteRefresh(borr).emit(&n.encode, &mut buf);
        }
        let stats = self.rib.flush(&n.encode, &egress, &mut buf);
        if let Some(f) = refresh {
            let eorr = RouteRefresh {
                afi: f.afi(),
                subtype: RefreshSubtype::EndOfRefresh,
                safi: f.safi(),
            };
            let _ = Message::RouteRefresh(eorr).emit(&n.encode, &mut buf);
        }
        self.stats.updates_sent += stats.updates as u64;
        self.stats.prefixes_announced += stats.announced as u64;
        self.stats.prefixes_withdrawn += stats.withdrawn as u64;
        self.stats.prefixes_skipped += stats.skipped as u64;
        if self.pending_eor {
            // RFC 4724 §2: End-of-RIB after the initial update of each family.
            self.pending_eor = false;
            for f in &n.families {
                enc.end_of_rib(*f, &mut buf);
                self.stats.updates_sent += 1;
            }
        }
        if !buf.is_empty() {
            debug!(%conn, updates = stats.updates, announced = stats.announced, withdrawn = stats.withdrawn, "routes sent");
            self.out.push_back(Output::Send {
                conn,
                bytes: buf.freeze(),
            });
        }
    }

    /// Next hops and policy inputs for the Established session.
    fn egress(&self, n: &Negotiated) -> Egress {
        let c = &self.config;
        let local = n.local.ip();
        let next_hop_v4 = match (c.next_hop_v4, local) {
            (Some(a), _) => Some(NextHop::V4(a)),
            (None, IpAddr::V4(a)) => Some(NextHop::V4(a)),
            // RFC 8950: IPv4 routes with our IPv6 address as next hop.
            (None, IpAddr::V6(a)) if n.extended_next_hop_v4 => Some(NextHop::V6 {
                global: a,
                link_local: c.link_local_v6,
            }),
            (None, IpAddr::V6(_)) => None,
        };
        let global_v6 = match (c.next_hop_v6, local) {
            (Some(a), _) => a,
            (None, IpAddr::V6(a)) => a,
            // Over IPv4 transport without a configured IPv6 next hop: the
            // interface's global IPv6 address, else the IPv4-mapped one.
            (None, IpAddr::V4(a)) => self.interface_v6.unwrap_or_else(|| a.to_ipv6_mapped()),
        };
        let next_hop_v6 = Some(NextHop::V6 {
            global: global_v6,
            link_local: c.link_local_v6,
        });
        let families = [
            n.families.contains(&Family::Ipv4Unicast),
            n.families.contains(&Family::Ipv6Unicast),
        ];
        Egress {
            local_as: c.local_as,
            ibgp: n.remote_as == c.local_as,
            next_hop_v4,
            next_hop_v6,
            families,
        }
    }

    fn update_state(&mut self) {
        let best = self.conns.iter().flatten().map(Conn::rfc_state).max();
        let to = match best {
            _ if !self.active() => State::Idle,
            Some(s) => s,
            None if self.timers.get(Timer::IdleHold).is_some() => State::Idle,
            None => State::Active,
        };
        if to != self.visible {
            let from = std::mem::replace(&mut self.visible, to);
            debug!(%from, %to, "fsm transition");
            self.out.push_back(Output::StateChanged { from, to });
        }
    }
}

#[cfg(test)]
mod tests;
