//! Capabilities (RFC 5492): the OPEN we send, the checks on the peer's
//! OPEN, and what the two negotiate (families, 4-octet AS, extended
//! messages, route refresh, extended next hop, hold and keepalive times).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use rand_core::RngCore;

use super::{PeerAs, Session};
use crate::wire::iana::open_subcode;
use crate::wire::open::{ExtendedNextHop, GracefulRestart};
use crate::wire::{
    AddPathSet, Afi, Capability, CapabilityCode, DecodeCtx, EncodeCtx, ErrorCode, Family,
    Notification, Open, Safi,
};

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

impl<R: RngCore> Session<R> {
    /// Our OPEN: the configured capabilities, less those the peer
    /// rejected before.
    pub(super) fn open_message(&self) -> Open {
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
        // FRR's local-as: the capability carries the AS the peer sees too.
        caps.push(Capability::FourOctetAs(c.session_as()));
        if let Some(gr) = self.graceful_restart_capability() {
            caps.push(Capability::GracefulRestart(gr));
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
        Open::new(c.session_as(), c.hold_time, c.router_id, caps)
    }

    /// RFC 5492 §5: a NOTIFICATION Unsupported Capability lists the
    /// capabilities the peer rejects; they are not offered again.
    pub(super) fn remember_rejected_capabilities(&mut self, n: &Notification) {
        if n.code != ErrorCode::OpenMessage || n.subcode != open_subcode::UNSUPPORTED_CAPABILITY {
            return;
        }
        let mut data = &n.data[..];
        while let [code, len, rest @ ..] = data {
            if !self.suppressed.contains(code) {
                self.suppressed.push(*code);
            }
            data = rest.get(usize::from(*len)..).unwrap_or_default();
        }
    }

    /// Checks the peer's OPEN and negotiates; on error returns the OPEN
    /// Message Error subcode and data.
    pub(super) fn negotiate(
        &self,
        open: &Open,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<Negotiated, (u8, Bytes)> {
        let c = &self.config;
        let remote_as = open.asn();
        // Internal or external is decided against the AS the peer sees.
        let local_as = c.session_as();
        let as_ok = match c.peer_as {
            PeerAs::Exact(asn) => remote_as == asn,
            PeerAs::Internal => remote_as == local_as,
            PeerAs::External => remote_as != local_as,
        };
        if !as_ok {
            return Err((open_subcode::BAD_PEER_AS, Bytes::new()));
        }
        // RFC 6286 §2.2: identical identifiers are an error within an AS.
        if open.bgp_id == c.router_id && remote_as == local_as {
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
            add_path: AddPathSet::EMPTY,
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
}
