//! The RFC 4271 §8 finite state machine of one connection.
//!
//! [`Session::step`] matches on the connection's state first, then on the
//! [`Event`]. Each state lists the events it acts on; events that end the
//! connection in every state ([`End`]) share one handler; everything else
//! is unexpected in that state and answered, by the state's last arm,
//! with a Finite State Machine Error NOTIFICATION whose subcode names the
//! state (RFC 6608 §3).
//!
//! Session-wide events (ManualStart, ManualStop, ConnectRetryTimer_Expires,
//! IdleHoldTimer_Expires, an inbound connection) are handled by the
//! [`Session`] methods of the same names; they create or drop connections
//! rather than move one.

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand_core::RngCore;
use tracing::{debug, trace};

use super::{
    Conn, ConnId, ConnState, ConnectMode, DownReason, MIN_BACKOFF, OPEN_HOLD, Output, Session,
    Timer,
};
use crate::wire::iana::fsm_subcode;
use crate::wire::{
    DecodeError, EncodeCtx, ErrorCode, Message, MpReach, MpUnreach, Notification, Open,
    RouteRefresh, Update,
};

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

/// An input to the state machine of one connection.
#[derive(Debug)]
pub(super) enum Event<'a> {
    /// Our outbound TCP connection is up (RFC 4271 events 16 Tcp_CR_Acked
    /// and 17 TcpConnectionConfirmed).
    TcpConnected {
        /// Local transport address.
        local: SocketAddr,
        /// Remote transport address.
        remote: SocketAddr,
    },
    /// An OPEN arrived (event 19 BGPOpen; event 20 BGPOpen with
    /// DelayOpenTimer running, when the state is DelayOpen).
    Open(Open),
    /// A KEEPALIVE arrived (event 26 KeepAliveMsg).
    Keepalive,
    /// An UPDATE arrived (event 27 UpdateMsg).
    Update(Update),
    /// A ROUTE-REFRESH arrived (RFC 2918; no RFC 4271 event).
    RouteRefresh(RouteRefresh),
    /// The KeepaliveTimer expired (event 11 KeepaliveTimer_Expires).
    KeepaliveTimerExpires,
    /// The DelayOpenTimer expired (event 12 DelayOpenTimer_Expires).
    DelayOpenTimerExpires,
    /// Something that ends the connection whatever its state.
    End(End<'a>),
}

/// An event that takes every state to Idle (RFC 4271 §8.2.2): the
/// connection is closed and, after a failure, the session backs off.
#[derive(Debug)]
pub(super) enum End<'a> {
    /// Our outbound connection attempt failed (event 18
    /// TcpConnectionFails, before TCP was up).
    TcpConnectFails,
    /// The TCP connection closed or failed (event 18 TcpConnectionFails).
    TcpFails,
    /// A NOTIFICATION arrived (events 24 NotifMsgVerErr, 25 NotifMsg).
    NotifMsg(Notification),
    /// A message did not decode (events 21 BGPHeaderErr, 22
    /// BGPOpenMsgErr, 28 UpdateMsgErr).
    DecodeError(&'a DecodeError),
    /// The HoldTimer expired (event 10 HoldTimer_Expires).
    HoldTimerExpires,
    /// The SendHoldTimer expired (RFC 9687 §4; no RFC 4271 event).
    SendHoldTimerExpires,
}

impl<R: RngCore> Session<R> {
    /// Moves connection `conn` on `event`. Events for a connection that
    /// is gone (closed since the driver saw it) are ignored.
    pub(super) fn step(&mut self, now: Instant, conn: ConnId, event: Event<'_>) {
        let Some(c) = self.conn(conn) else {
            return;
        };
        match &c.state {
            // RFC state Connect: our TCP connection is being set up.
            ConnState::Connecting => match event {
                Event::TcpConnected { local, remote } => {
                    self.tcp_connected(now, conn, local, remote);
                }
                Event::End(e) => self.end(now, conn, e),
                _ => self.fsm_error(now, conn, fsm_subcode::UNSPECIFIED),
            },
            // RFC state Connect or Active with the DelayOpenTimer running.
            ConnState::DelayOpen => match event {
                Event::Open(open) => {
                    // §8.2.2: send our OPEN now, then process theirs.
                    self.send_open(now, conn);
                    self.open_received(now, conn, &open);
                }
                Event::DelayOpenTimerExpires => self.send_open(now, conn),
                // TCP was up already: a stale report changes nothing.
                Event::TcpConnected { .. } => {}
                Event::End(e) => self.end(now, conn, e),
                _ => self.fsm_error(now, conn, fsm_subcode::UNSPECIFIED),
            },
            ConnState::OpenSent => match event {
                Event::Open(open) => self.open_received(now, conn, &open),
                Event::TcpConnected { .. } => {}
                Event::End(e) => self.end(now, conn, e),
                _ => self.fsm_error(now, conn, fsm_subcode::UNEXPECTED_IN_OPEN_SENT),
            },
            ConnState::OpenConfirm(_) => match event {
                Event::Keepalive => {
                    self.restart_hold_timer(now, conn);
                    self.become_established(conn);
                    self.keep_only(now, conn);
                }
                Event::KeepaliveTimerExpires => self.send_keepalive(now, conn),
                Event::TcpConnected { .. } => {}
                Event::End(e) => self.end(now, conn, e),
                _ => self.fsm_error(now, conn, fsm_subcode::UNEXPECTED_IN_OPEN_CONFIRM),
            },
            ConnState::Established(_) => match event {
                Event::Keepalive => {
                    self.restart_hold_timer(now, conn);
                    self.keep_only(now, conn);
                }
                Event::Update(update) => {
                    self.restart_hold_timer(now, conn);
                    self.count_update(&update);
                }
                Event::RouteRefresh(rr) => {
                    let families = self
                        .conn(conn)
                        .and_then(Conn::negotiated)
                        .map(|n| n.families.clone())
                        .unwrap_or_default();
                    self.route_refresh_received(&families, &rr);
                }
                Event::KeepaliveTimerExpires => self.send_keepalive(now, conn),
                Event::TcpConnected { .. } => {}
                Event::End(e) => self.end(now, conn, e),
                _ => self.fsm_error(now, conn, fsm_subcode::UNEXPECTED_IN_ESTABLISHED),
            },
        }
    }

    /// The events of [`End`], alike in every state.
    fn end(&mut self, now: Instant, conn: ConnId, event: End<'_>) {
        match event {
            End::TcpConnectFails => {
                self.close(now, conn, None, DownReason::TransportClosed);
                // The ConnectRetry timer, still running, schedules the retry.
                if self.active() && self.timers.get(Timer::ConnectRetry).is_none() {
                    self.arm_connect_retry(now);
                }
            }
            End::TcpFails => {
                debug!(%conn, "transport closed");
                self.close(now, conn, None, DownReason::TransportClosed);
                self.after_failure(now);
            }
            End::NotifMsg(n) => {
                self.stats.notifications_received += 1;
                debug!(%conn, notification = %n, "notification received");
                self.remember_rejected_capabilities(&n);
                self.close(now, conn, None, DownReason::NotificationReceived(n));
                self.after_failure(now);
            }
            End::DecodeError(err) => {
                debug!(%conn, error = %err, "decode error");
                self.fail(now, conn, Notification::from(err));
            }
            End::HoldTimerExpires => {
                debug!(%conn, "hold timer expired");
                let n = Notification::new(ErrorCode::HoldTimerExpired, 0, Bytes::new());
                self.fail(now, conn, n);
            }
            End::SendHoldTimerExpires => {
                // RFC 9687 §4: the peer has not read for SendHoldTime. The
                // NOTIFICATION is queued behind what it did not read, so it
                // will rarely arrive; the driver closes the connection
                // without waiting for it.
                debug!(%conn, "send hold timer expired");
                self.stats.send_hold_expired += 1;
                let n = Notification::new(ErrorCode::SendHoldTimerExpired, 0, Bytes::new());
                self.fail(now, conn, n);
            }
        }
    }

    /// Connecting: TCP is up; send our OPEN, or wait DelayOpen for theirs.
    fn tcp_connected(&mut self, now: Instant, conn: ConnId, local: SocketAddr, remote: SocketAddr) {
        if let Some(c) = self.conn_mut(conn) {
            c.local = Some(local);
            c.remote = Some(remote);
        }
        self.timers.stop(Timer::ConnectRetry);
        self.transport_up(now, conn);
    }

    /// OpenSent (DelayOpen has sent ours just before): check and negotiate
    /// the peer's OPEN, resolve a collision, and go to OpenConfirm.
    fn open_received(&mut self, now: Instant, conn: ConnId, open: &Open) {
        let Some((local, remote)) = self.conn(conn).and_then(|c| c.local.zip(c.remote)) else {
            // Both are set before any OPEN can be sent or received.
            return self.fsm_error(now, conn, fsm_subcode::UNEXPECTED_IN_OPEN_SENT);
        };
        let negotiated = match self.negotiate(open, local, remote) {
            Ok(n) => n,
            Err((subcode, data)) => {
                let n = Notification::new(ErrorCode::OpenMessage, subcode, data);
                return self.fail(now, conn, n);
            }
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

    /// OpenConfirm, on the peer's KEEPALIVE: the session is Established.
    /// The initial sync and End-of-RIB go out with the next flush.
    fn become_established(&mut self, conn: ConnId) {
        let Some(c) = self.conn_mut(conn) else { return };
        let ConnState::OpenConfirm(n) = &c.state else {
            return;
        };
        let n = n.clone();
        c.state = ConnState::Established(n.clone());
        self.stats.established += 1;
        self.failures = 0;
        debug!(%conn, "established");
        self.out.push_back(Output::Established(n));
        self.rib.reset_sent();
        self.pending_eor = true;
    }

    /// Established on `conn`: the other connection, if any, was still
    /// being set up; drop it, and stop trying to connect.
    fn keep_only(&mut self, now: Instant, conn: ConnId) {
        let other = 1 - conn.slot();
        if let Some(id) = self.conns[other].as_ref().map(|c| c.id) {
            self.close(now, id, None, DownReason::TransportClosed);
        }
        self.timers.stop(Timer::ConnectRetry);
        self.timers.stop(Timer::IdleHold);
    }

    /// A KEEPALIVE or UPDATE from the peer restarts the HoldTimer.
    fn restart_hold_timer(&mut self, now: Instant, conn: ConnId) {
        let hold = self
            .conn(conn)
            .and_then(Conn::negotiated)
            .map(|n| n.hold_time);
        if let Some(hold) = hold.filter(|h| !h.is_zero()) {
            self.timers.set(Timer::Hold(conn), now + hold);
        }
    }

    /// Established: received routes are validated by the codec, counted
    /// and dropped.
    fn count_update(&mut self, update: &Update) {
        self.stats.updates_received += 1;
        let mp_reach = match update.mp_reach() {
            Some(MpReach::Ipv4Unicast { nlri, .. }) => nlri.len(),
            Some(MpReach::Ipv6Unicast { nlri, .. }) => nlri.len(),
            _ => 0,
        };
        let mp_unreach = match update.mp_unreach() {
            Some(MpUnreach::Ipv4Unicast(v)) => v.len(),
            Some(MpUnreach::Ipv6Unicast(v)) => v.len(),
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

    /// The catch-all of every state: an event unexpected there (RFC 4271
    /// §8.2.2 "any other event") gets a Finite State Machine Error with
    /// the state's subcode (RFC 6608 §3) and closes the connection.
    fn fsm_error(&mut self, now: Instant, conn: ConnId, subcode: u8) {
        let n = Notification::new(ErrorCode::Fsm, subcode, Bytes::new());
        self.fail(now, conn, n);
    }

    /// Sends `n`, closes the connection, and backs off.
    fn fail(&mut self, now: Instant, conn: ConnId, n: Notification) {
        self.close(now, conn, Some(n.clone()), DownReason::NotificationSent(n));
        self.after_failure(now);
    }

    // --- actions shared with the session-wide events ---------------------

    /// Opens a new outbound connection (slot 0) and arms ConnectRetry.
    pub(super) fn connect(&mut self, now: Instant) {
        let id = self.new_conn_id(0);
        self.conns[0] = Some(Conn::new(id, None));
        self.out.push_back(Output::Connect(id));
        self.arm_connect_retry(now);
    }

    /// TCP is up on `conn`: OPEN now, or after DelayOpen (RFC 4271 §8.1.1).
    pub(super) fn transport_up(&mut self, now: Instant, conn: ConnId) {
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

    /// RFC 4271 §10: timers are jittered by a factor in [0.75, 1.0].
    pub(super) fn jitter(&mut self, d: Duration) -> Duration {
        let factor = 0.75 + 0.25 * (f64::from(self.rng.next_u32()) / f64::from(u32::MAX));
        d.mul_f64(factor)
    }

    pub(super) fn arm_connect_retry(&mut self, now: Instant) {
        let d = self.jitter(self.config.connect_retry);
        self.timers.set(Timer::ConnectRetry, now + d);
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
        let interval = self
            .conn(conn)
            .and_then(Conn::negotiated)
            .and_then(|n| n.keepalive);
        if let Some(interval) = interval {
            let d = self.jitter(interval);
            self.timers.set(Timer::Keepalive(conn), now + d);
        }
    }

    /// Sends `notification` (if any), closes the connection, and reports
    /// `reason` if it was Established.
    pub(super) fn close(
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

    /// Recomputes the session's visible state and reports a change.
    pub(super) fn update_state(&mut self) {
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
