//! Glue between the BGP decisions and the BGP and BFD drivers: a decided
//! [`PeerPlan`] (plain data) becomes the BGP driver's [`PeerConfig`] and
//! its socket options, and [`BfdPeers`] runs the BFD driver for the peers
//! with a BFD profile and applies the pure [`BfdGate`]'s actions to the
//! BGP speaker. No decisions are made here.

use std::net::{SocketAddr, SocketAddrV6};
use std::time::Instant;

use api::model::PeerTarget;

use bfd::SessionConfig;
use bgp::wire::iana::cease_subcode;
use bgp::wire::{ErrorCode, Notification};
use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::announce::bfd_gate::{Action, BfdGate};
use crate::announce::{PeerPlan, Transport};
use crate::driver::bfd::{self as bfd_driver, BfdSpeaker, DriverStats};
use crate::driver::bgp::{BgpSpeaker, PeerConfig};
use crate::net::tcp::ConnectOptions;

/// What [`crate::driver::bgp::BgpSpeaker::set_peer`] takes for a planned
/// peer. An unnumbered peer's address is its interface's neighbor, as
/// [`Unnumbered::neighbor`](crate::driver::unnumbered::Unnumbered::neighbor)
/// knows it (link-local, with the interface as scope): `None` until
/// learned.
#[must_use]
pub fn peer_config(plan: &PeerPlan, neighbor: Option<SocketAddrV6>) -> Option<PeerConfig> {
    let address = match &plan.target {
        PeerTarget::Address(a) => *a,
        PeerTarget::Interface { port, .. } => {
            let n = neighbor?;
            SocketAddr::V6(SocketAddrV6::new(*n.ip(), *port, 0, n.scope_id()))
        }
    };
    Some(PeerConfig {
        session: plan.session.clone(),
        address,
        connect: connect_options(&plan.transport),
    })
}

/// The socket options of a decided transport. GTSM and a connect timeout
/// are not configured by BGPPeers, so they stay off.
fn connect_options(t: &Transport) -> ConnectOptions {
    ConnectOptions {
        bind: t.bind,
        device: t.device.clone(),
        ttl: t.ttl,
        min_ttl: None,
        md5_key: t.md5_key.clone(),
        timeout: None,
    }
}

/// The BFD sessions of the BGP peers (RFC 9384): the BFD driver, started
/// when a peer first needs it, and the [`BfdGate`] that holds, releases
/// and tears down their BGP sessions.
pub struct BfdPeers {
    gate: BfdGate,
    options: bfd_driver::Options,
    driver: Option<BfdSpeaker>,
    events: Option<mpsc::UnboundedReceiver<bfd::Event>>,
}

impl BfdPeers {
    /// No sessions; the driver is not started yet.
    #[must_use]
    pub fn new(options: bfd_driver::Options, bgp_without_bfd_up: bool) -> Self {
        Self {
            gate: BfdGate::new(bgp_without_bfd_up),
            options,
            driver: None,
            events: None,
        }
    }

    /// Starts, changes or removes the BFD session of a BGP peer (`None`:
    /// none, or the peer is gone), and holds or releases its BGP session to
    /// match. Call before the peer is configured, so that a new peer starts
    /// held.
    pub async fn set_peer(
        &mut self,
        bgp: &mut BgpSpeaker,
        name: &str,
        want: Option<SessionConfig>,
    ) {
        let actions = self.gate.set_peer(name, want);
        self.apply(bgp, actions).await;
    }

    /// The next BFD state change; pending forever while the driver is not
    /// started, `None` when its task ended.
    pub async fn recv(&mut self) -> Option<bfd::Event> {
        match &mut self.events {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Handles a BFD state change (from [`recv`](Self::recv)).
    pub async fn handle_event(&mut self, bgp: &mut BgpSpeaker, ev: &bfd::Event) {
        let actions = self.gate.handle_event(ev);
        self.apply(bgp, actions).await;
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.gate.poll_timeout()
    }

    /// A restart hold-off may have ended without the session back Up.
    pub async fn handle_timeout(&mut self, bgp: &mut BgpSpeaker) {
        let now = tokio::time::Instant::now().into_std();
        let actions = self.gate.handle_timeout(now);
        self.apply(bgp, actions).await;
    }

    /// The BFD driver's counters and sessions, once it runs.
    pub async fn stats(&self) -> Option<(DriverStats, Vec<bfd::SessionInfo>)> {
        self.driver.as_ref()?.stats().await.ok()
    }

    /// Removes every session, so that the BFD peers see AdminDown, not a
    /// failure (RFC 5882 §3.2).
    pub async fn shutdown(&self) {
        if let Some(bfd) = &self.driver {
            for key in self.gate.sessions() {
                let _ = bfd.remove_session(key).await;
            }
        }
    }

    async fn apply(&mut self, bgp: &mut BgpSpeaker, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::AddSession { peer, config } => {
                    if self.driver.is_none() {
                        match BfdSpeaker::spawn(self.options) {
                            Ok((bfd, events)) => {
                                self.driver = Some(bfd);
                                self.events = Some(events);
                            }
                            Err(e) => {
                                error!(peer = %peer, error = %e, "cannot start the bfd driver thread");
                                continue;
                            }
                        }
                    }
                    let Some(bfd) = &self.driver else { continue };
                    match bfd.add_session(config).await {
                        Ok(()) => {
                            info!(peer = %peer, address = %config.key.peer, multihop = config.key.multihop, "bfd session configured")
                        }
                        Err(e) => error!(peer = %peer, error = %e, "cannot start bfd session"),
                    }
                }
                Action::RemoveSession(key) => {
                    if let Some(bfd) = &self.driver {
                        let _ = bfd.remove_session(key).await;
                    }
                }
                Action::HoldDown(peer) => bgp.hold_down(&peer, bfd_down()),
                Action::Release(peer) => bgp.release(&peer),
                Action::TearDown {
                    peer,
                    address,
                    reason,
                } => {
                    warn!(peer = %peer, address = %address, %reason, "bfd down: bgp session torn down");
                    bgp.hold_down(&peer, bfd_down());
                }
                Action::HoldOff { address, at, until } => {
                    let hold_off_ms = until.saturating_duration_since(at).as_millis();
                    info!(address = %address, hold_off_ms, "bfd peer restarted its session: bgp kept up");
                }
            }
        }
    }
}

/// Cease / BFD Down (RFC 9384 §4).
fn bfd_down() -> Notification {
    Notification::new(ErrorCode::Cease, cease_subcode::BFD_DOWN, Bytes::new())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use bgp::session::{self, PeerAs};

    use super::*;

    #[test]
    fn plan_becomes_driver_config_field_by_field() {
        let plan = PeerPlan {
            session: session::Config::new(64512, PeerAs::Exact(65000), Ipv4Addr::new(10, 0, 0, 1)),
            target: PeerTarget::Address("10.0.0.2:1179".parse().unwrap()),
            transport: Transport {
                bind: Some("10.0.0.1".parse().unwrap()),
                device: Some("red".into()),
                ttl: Some(1),
                md5_key: Some(b"key".to_vec().into()),
            },
            ibgp: false,
            bfd_profile: None,
            multihop: false,
            routes: BTreeMap::new(),
        };
        let c = peer_config(&plan, None).unwrap();
        assert_eq!(c.session, plan.session);
        assert_eq!(c.address, "10.0.0.2:1179".parse().unwrap());
        assert_eq!(
            c.connect,
            ConnectOptions {
                bind: plan.transport.bind,
                device: Some("red".into()),
                ttl: Some(1),
                min_ttl: None,
                md5_key: Some(b"key".to_vec().into()),
                timeout: None,
            }
        );
        // Unnumbered: no address until the neighbor is learned; then the
        // neighbor's, the interface as scope, the BGPPeer's port.
        let plan = PeerPlan {
            target: PeerTarget::Interface {
                name: "eth1".into(),
                port: 1179,
            },
            ..plan
        };
        assert_eq!(peer_config(&plan, None), None);
        let n = SocketAddrV6::new("fe80::a".parse().unwrap(), 0, 0, 7);
        let c = peer_config(&plan, Some(n)).unwrap();
        assert_eq!(
            c.address,
            SocketAddr::V6(SocketAddrV6::new("fe80::a".parse().unwrap(), 1179, 0, 7))
        );
    }
}
