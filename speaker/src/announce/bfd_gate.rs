//! The BFD gate of the BGP peers (RFC 9384, RFC 5882 §3): which BFD
//! session each BGP peer with a `bfdProfile` uses, when its BGP session is
//! held down or released, and when it is torn down with Cease / BFD Down.
//!
//! Pure: no I/O, no clock (the caller passes `now`; events carry theirs),
//! no logging. [`BfdGate`] returns [`Action`]s; the driver glue
//! (`crate::driver::peers`) runs the BFD driver and applies them to the
//! BGP speaker. Whether a BFD state change is a failure is the `bfd`
//! crate's [`Gate`]; this module maps sessions to peers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::num::NonZeroU8;
use std::time::Instant;

use api::model::{BfdProfile, PeerTarget};
use bfd::client::{Gate, Verdict};
use bfd::{Diag, Event, PeerKey, Profile, SessionConfig};

use super::PeerPlan;

/// Something the driver glue does for the gate, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start the BFD session (or add a peer to it: adding is idempotent).
    AddSession {
        /// The BGP peer that asks for it.
        peer: String,
        /// The session.
        config: SessionConfig,
    },
    /// No peer uses this BFD session any more: remove it (AdminDown to
    /// the BFD peer, RFC 5882 §3.2).
    RemoveSession(PeerKey),
    /// Hold the peer's BGP session down (Cease / BFD Down if it runs).
    HoldDown(String),
    /// Let the peer's BGP session run.
    Release(String),
    /// BFD failed: tear the peer's BGP session down (Cease / BFD Down) and
    /// hold it until BFD is Up again.
    TearDown {
        /// The BGP peer.
        peer: String,
        /// The BFD peer address.
        address: IpAddr,
        /// Why, for the log.
        reason: TearDownReason,
    },
    /// The BFD peer restarted its session while the path works: BGP is
    /// kept up until `until` (nothing to do but log).
    HoldOff {
        /// The BFD peer address.
        address: IpAddr,
        /// When the restart happened.
        at: Instant,
        /// The end of the hold-off.
        until: Instant,
    },
}

/// Why BFD tore a BGP session down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TearDownReason {
    /// The session left Up with this diagnostic.
    Failed(Diag),
    /// The BFD peer restarted its session and the new one did not come Up
    /// within the hold-off.
    RestartNotUp,
}

impl fmt::Display for TearDownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed(diag) => diag.fmt(f),
            Self::RestartNotUp => f.write_str("restarted session not up in time"),
        }
    }
}

/// The BFD sessions of the BGP peers and the gate over them.
#[derive(Debug, Clone, Default)]
pub struct BfdGate {
    /// The BFD session of each BGP peer that has a profile.
    sessions: BTreeMap<String, SessionConfig>,
    /// Which BFD sessions let their BGP peers run, and restart hold-offs.
    gate: Gate,
    /// BGP runs even while BFD is not Up (a failure still tears it down,
    /// then it reconnects at once).
    bgp_without_bfd_up: bool,
}

impl BfdGate {
    /// No sessions; `bgp_without_bfd_up` as the speaker's flag.
    #[must_use]
    pub fn new(bgp_without_bfd_up: bool) -> Self {
        Self {
            bgp_without_bfd_up,
            ..Self::default()
        }
    }

    /// Sets the BFD session a BGP peer uses (`None`: none, or the peer is
    /// gone). Call before the peer is configured, so that a new peer
    /// starts held.
    pub fn set_peer(&mut self, name: &str, want: Option<SessionConfig>) -> Vec<Action> {
        let old = self.sessions.get(name).copied();
        if old == want {
            return Vec::new();
        }
        let mut actions = Vec::new();
        if let Some(config) = want {
            actions.push(Action::AddSession {
                peer: name.to_owned(),
                config,
            });
            self.sessions.insert(name.to_owned(), config);
            if !self.bgp_without_bfd_up && !self.gate.is_up(config.key) {
                actions.push(Action::HoldDown(name.to_owned()));
            }
        } else {
            self.sessions.remove(name);
            actions.push(Action::Release(name.to_owned()));
        }
        // A session no peer uses any more goes.
        if let Some(old) = old
            && Some(old.key) != want.map(|c| c.key)
            && !self.sessions.values().any(|c| c.key == old.key)
        {
            actions.push(Action::RemoveSession(old.key));
            self.gate.remove(old.key);
        }
        actions
    }

    /// A BFD session changed state; the [`Gate`] decides what that means
    /// to the BGP peers using it (RFC 5882 §3, RFC 9384): release them when
    /// it is Up; tear them down at once on a failure; leave them alone
    /// when the peer signalled AdminDown (RFC 5882 §3.2), and while a peer
    /// that replaced its session (FRR's bgpd does, right after
    /// Established) brings the new one Up, for a bounded time.
    pub fn handle_event(&mut self, ev: &Event) -> Vec<Action> {
        match self.gate.handle_event(ev) {
            Verdict::Up => self.peers(ev.key).map(Action::Release).collect(),
            Verdict::Down => self.tear_down(ev.key, TearDownReason::Failed(ev.diag)),
            Verdict::HoldOff { until } => vec![Action::HoldOff {
                address: ev.key.peer,
                at: ev.at,
                until,
            }],
            Verdict::Ignore => Vec::new(),
        }
    }

    /// Ends the restart hold-offs due by `now`: call when
    /// [`poll_timeout`](Self::poll_timeout) has passed. Sessions not back
    /// Up tear their peers down.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        for key in self.gate.handle_timeout(now) {
            actions.extend(self.tear_down(key, TearDownReason::RestartNotUp));
        }
        actions
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.gate.poll_timeout()
    }

    /// Every BFD session in use.
    #[must_use]
    pub fn sessions(&self) -> BTreeSet<PeerKey> {
        self.sessions.values().map(|c| c.key).collect()
    }

    /// Tears down the BGP peers that use a BFD session and holds them until
    /// it is Up again (released at once under `bgp_without_bfd_up`).
    fn tear_down(&self, key: PeerKey, reason: TearDownReason) -> Vec<Action> {
        let mut actions = Vec::new();
        for peer in self.peers(key) {
            actions.push(Action::TearDown {
                peer: peer.clone(),
                address: key.peer,
                reason,
            });
            if self.bgp_without_bfd_up {
                actions.push(Action::Release(peer));
            }
        }
        actions
    }

    /// The BGP peers that use a BFD session.
    fn peers(&self, key: PeerKey) -> impl Iterator<Item = String> + '_ {
        self.sessions
            .iter()
            .filter(move |(_, c)| c.key == key)
            .map(|(n, _)| n.clone())
    }
}

/// The BFD session a peer's profile asks for, if any: to the peer's
/// address, from its source address, single-hop unless `ebgpMultiHop`.
/// An unnumbered peer has none (its profile is refused).
#[must_use]
pub fn bfd_session(peer: &PeerPlan) -> Option<SessionConfig> {
    let (_, spec) = peer.bfd_profile.as_ref()?;
    let PeerTarget::Address(address) = &peer.target else {
        return None;
    };
    Some(SessionConfig {
        key: PeerKey {
            peer: address.ip(),
            multihop: peer.multihop,
        },
        local: peer.transport.bind,
        profile: bfd_profile(spec),
    })
}

/// A BFDProfile as the BFD core's profile (the model holds MetalLB's
/// defaults for unset fields, and its bounds).
fn bfd_profile(p: &BfdProfile) -> Profile {
    Profile {
        receive_interval: p.receive_interval,
        transmit_interval: p.transmit_interval,
        detect_multiplier: NonZeroU8::new(p.detect_multiplier)
            .unwrap_or(Profile::default().detect_multiplier),
        passive: p.passive,
        minimum_ttl: p.minimum_ttl,
        echo_interval: p.echo_mode.then_some(p.echo_interval),
    }
}

#[cfg(test)]
mod tests;
