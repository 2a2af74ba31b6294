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
//!
//! This module holds [`Session`] and its inputs and outputs; the logic
//! lives in one module per concern:
//!
//! - `fsm`: the per-connection state machine, state first, then event;
//! - `conn`: the connections and their states;
//! - `caps`: our OPEN, the checks on the peer's, and what is negotiated;
//! - `collision`: connection collision detection (RFC 4271 §6.8);
//! - `gr`: graceful restart (RFC 4724) and End-of-RIB;
//! - `refresh`: route refresh (RFC 2918, RFC 7313);
//! - `routes`: sending the Adj-RIB-Out (`rib`) with this session's next hops;
//! - `timer`: the fixed timers; `config` and `output`: plain data.

mod caps;
mod collision;
mod config;
mod conn;
mod fsm;
mod gr;
mod output;
mod refresh;
mod rib;
mod routes;
mod timer;

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::RngCore;
use tracing::{debug, trace};

pub use self::caps::Negotiated;
pub use self::config::{Config, ConnectMode, LocalAs, PeerAs, StopMode};
pub use self::conn::ConnId;
use self::conn::{Conn, ConnState};
pub use self::fsm::State;
use self::fsm::{End, Event};
pub use self::gr::GracefulRestartConfig;
pub use self::output::{DownReason, Output, Stats};
pub use self::rib::{AdjRibOut, FlushStats, IpPrefix, RouteAttrs};
pub use self::timer::Timer;
use self::timer::TimerTable;
use crate::wire::{DecodeError, Family, Message, Notification};

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
        self.step(now, conn, Event::TcpConnected { local, remote });
        self.update_state();
    }

    /// The outbound TCP connection failed (event 18, TcpConnectionFails).
    pub fn handle_connect_failed(&mut self, now: Instant, conn: ConnId) {
        self.step(now, conn, Event::End(End::TcpConnectFails));
        self.update_state();
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
        self.conns[1] = Some(Conn::new(id, Some((local, remote))));
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
        let hold = self
            .conn(conn)
            .and_then(Conn::negotiated)
            .map(|n| n.hold_time);
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
        self.step(now, conn, Event::End(End::TcpFails));
        self.update_state();
    }

    /// A message arrived on `conn` (events 19 BGPOpen, 24/25
    /// NotifMsg(VerErr), 26 KeepAliveMsg, 27 UpdateMsg, and ROUTE-REFRESH).
    pub fn handle_message(&mut self, now: Instant, conn: ConnId, msg: Message) {
        if self.conn(conn).is_none() {
            return;
        }
        self.stats.messages_received += 1;
        trace!(%conn, %msg, "received");
        let event = match msg {
            Message::Open(open) => {
                self.stats.opens_received += 1;
                Event::Open(open)
            }
            Message::Keepalive => {
                self.stats.keepalives_received += 1;
                Event::Keepalive
            }
            Message::Update(update) => Event::Update(update),
            Message::Notification(n) => Event::End(End::NotifMsg(n)),
            Message::RouteRefresh(rr) => Event::RouteRefresh(rr),
        };
        self.step(now, conn, event);
        self.update_state();
    }

    /// A message on `conn` failed to decode (events 21 BGPHeaderErr, 22
    /// BGPOpenMsgErr, 28 UpdateMsgErr): send the matching NOTIFICATION and
    /// close.
    pub fn handle_decode_error(&mut self, now: Instant, conn: ConnId, err: &DecodeError) {
        self.step(now, conn, Event::End(End::DecodeError(err)));
        self.update_state();
    }

    /// Fires the timers due at `now` (events 9 ConnectRetryTimer_Expires,
    /// 10 HoldTimer_Expires, 11 KeepaliveTimer_Expires, 12
    /// DelayOpenTimer_Expires, 13 IdleHoldTimer_Expires, and RFC 9687's
    /// SendHoldTimer). Spurious calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(timer) = self.timers.pop_expired(now) {
            trace!(?timer, "timer expired");
            // Per-connection timers are kept per slot: they belong to the
            // connection in the slot now.
            let in_slot = |s: &Self, slot: ConnId| s.conns[slot.slot()].as_ref().map(|c| c.id);
            match timer {
                Timer::ConnectRetry => {
                    // RFC 4271 §8.2.2, Connect state, event 9: an outbound
                    // attempt still pending when the timer expires is
                    // dropped and a new one made (FRR does so too), so
                    // ConnectRetryTime (MetalLB connectTime) spaces the
                    // attempts even when the peer's SYNs go unanswered,
                    // instead of the kernel's SYN retries (about 2 min).
                    let pending = self.conns[0]
                        .as_ref()
                        .filter(|c| matches!(c.state, ConnState::Connecting))
                        .map(|c| c.id);
                    if let Some(id) = pending
                        && self.active()
                        && !self.is_established()
                    {
                        debug!(conn = %id, "connect retry timer expired: attempt abandoned");
                        self.close(now, id, None, DownReason::TransportClosed);
                    }
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
                    if let Some(id) = in_slot(self, slot) {
                        self.step(now, id, Event::End(End::HoldTimerExpires));
                    }
                }
                Timer::Keepalive(slot) => {
                    if let Some(id) = in_slot(self, slot) {
                        self.step(now, id, Event::KeepaliveTimerExpires);
                    }
                }
                Timer::SendHold(slot) => {
                    if let Some(id) = in_slot(self, slot) {
                        self.step(now, id, Event::End(End::SendHoldTimerExpires));
                    }
                }
                Timer::DelayOpen(slot) => {
                    if let Some(id) = in_slot(self, slot) {
                        self.step(now, id, Event::DelayOpenTimerExpires);
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
        ConnId::new(slot, self.generation)
    }
}

#[cfg(test)]
mod tests;
