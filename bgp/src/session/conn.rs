//! The connections of a session and the per-connection FSM state.
//!
//! A session may hold two TCP connections at once (one we opened, one the
//! peer opened) until collision detection (RFC 4271 §6.8) keeps one.

use std::fmt;
use std::net::SocketAddr;

use super::{Negotiated, State};

/// One TCP connection of a session: slot 0 is the one we open, slot 1 the
/// one the peer opens; the generation tells reused slots apart so that a
/// late event for a closed connection is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId {
    slot: u8,
    generation: u32,
}

impl ConnId {
    /// A new connection in `slot` (0 outbound, 1 inbound).
    pub(super) fn new(slot: u8, generation: u32) -> Self {
        Self { slot, generation }
    }

    /// The slot: an index into the session's two connections.
    pub(super) fn slot(self) -> usize {
        usize::from(self.slot)
    }

    /// Names a slot rather than one connection (timers are kept per slot).
    pub(super) fn from_slot(slot: usize) -> Self {
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

/// Where one connection is in the RFC 4271 §8 state machine. Each variant
/// carries only what is valid in it: the negotiated parameters exist from
/// OpenConfirm on.
#[derive(Debug)]
pub(super) enum ConnState {
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

/// One TCP connection of a session.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) id: ConnId,
    /// Transport addresses, known once TCP is up.
    pub(super) local: Option<SocketAddr>,
    pub(super) remote: Option<SocketAddr>,
    pub(super) state: ConnState,
}

impl Conn {
    /// A connection whose TCP is being set up.
    pub(super) fn new(id: ConnId, addrs: Option<(SocketAddr, SocketAddr)>) -> Self {
        Self {
            id,
            local: addrs.map(|a| a.0),
            remote: addrs.map(|a| a.1),
            state: ConnState::Connecting,
        }
    }

    /// The RFC state this connection is in.
    pub(super) fn rfc_state(&self) -> State {
        match self.state {
            ConnState::Connecting => State::Connect,
            ConnState::DelayOpen => State::Active,
            ConnState::OpenSent => State::OpenSent,
            ConnState::OpenConfirm(_) => State::OpenConfirm,
            ConnState::Established(_) => State::Established,
        }
    }

    /// What was negotiated, from OpenConfirm on.
    pub(super) fn negotiated(&self) -> Option<&Negotiated> {
        match &self.state {
            ConnState::OpenConfirm(n) | ConnState::Established(n) => Some(n),
            _ => None,
        }
    }
}
