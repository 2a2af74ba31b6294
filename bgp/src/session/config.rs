//! Session configuration and the admin choices around it: plain data,
//! parsed by the caller (the speaker turns a BGPPeer into a [`Config`]).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use super::GracefulRestartConfig;
#[cfg(doc)]
use super::Session;
use crate::wire::{Family, HoldTime};

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

/// Another AS presented to one peer instead of ours: FRR's
/// `neighbor X local-as N [no-prepend [replace-as]]`.
///
/// The OPEN carries N (2-octet My AS: N, or AS_TRANS when N needs 4
/// octets; the 4-octet AS capability: N), the peer must be configured with
/// `remote-as N`, and whether the session is internal is decided against N
/// (as FRR's `peer_calc_sort` does with `change_local_as`). Routes we
/// originate carry N first in their AS_PATH: alone with `replace_as`, else
/// followed by our real AS (FRR's default, "prepended ... after the process
/// local AS"). `no-prepend` only concerns routes received from the peer,
/// which this speaker does not import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAs {
    /// The AS presented to the peer (N).
    pub asn: u32,
    /// `no-prepend replace-as`: our real AS is left out of the AS_PATH.
    pub replace_as: bool,
}

/// Session configuration: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our AS.
    pub local_as: u32,
    /// Another AS presented to this peer instead of `local_as` (MetalLB
    /// `localASN`); see [`LocalAs`].
    pub local_as_override: Option<LocalAs>,
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
            local_as_override: None,
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

impl Config {
    /// The AS this session presents to the peer: the override's, else ours.
    /// The OPEN carries it and the peer's AS is compared with it.
    #[must_use]
    pub fn session_as(&self) -> u32 {
        self.local_as_override.map_or(self.local_as, |o| o.asn)
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
