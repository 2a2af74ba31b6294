//! Sending the Adj-RIB-Out: what changed goes out as minimal UPDATEs on
//! the Established connection, with the next hops this session needs.

use std::net::IpAddr;

use bytes::BytesMut;
use rand_core::RngCore;
use tracing::debug;

use super::rib::Egress;
use super::{ConnState, Negotiated, Output, Session, refresh};
use crate::wire::{Family, NextHop, RefreshSubtype};

impl<R: RngCore> Session<R> {
    /// Sends pending route changes (and the End-of-RIB after the initial
    /// sync) on the Established connection.
    pub(super) fn flush_routes(&mut self) {
        let Some((conn, n)) = self.conns.iter().flatten().find_map(|c| match &c.state {
            ConnState::Established(n) => Some((c.id, n.clone())),
            _ => None,
        }) else {
            return;
        };
        let egress = self.egress(&n);
        let mut buf = BytesMut::new();
        // A refresh the peer asked for is framed only when it supports
        // enhanced route refresh.
        let refresh = self.refresh.take().filter(|_| n.enhanced_route_refresh);
        if let Some(f) = refresh {
            refresh::emit_marker(f, RefreshSubtype::BeginningOfRefresh, &n.encode, &mut buf);
        }
        let stats = self.rib.flush(&n.encode, &egress, &mut buf);
        if let Some(f) = refresh {
            refresh::emit_marker(f, RefreshSubtype::EndOfRefresh, &n.encode, &mut buf);
        }
        self.stats.updates_sent += stats.updates as u64;
        self.stats.prefixes_announced += stats.announced as u64;
        self.stats.prefixes_withdrawn += stats.withdrawn as u64;
        self.stats.prefixes_skipped += stats.skipped as u64;
        self.stats.updates_sent += self.emit_end_of_rib(&n, &mut buf) as u64;
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
        // FRR's local-as without replace-as: our real AS follows the
        // session's in the AS_PATH.
        let real_as = c
            .local_as_override
            .filter(|o| !o.replace_as)
            .map(|_| c.local_as);
        Egress {
            local_as: c.session_as(),
            real_as,
            ibgp: n.remote_as == c.session_as(),
            next_hop_v4,
            next_hop_v6,
            families,
        }
    }
}
