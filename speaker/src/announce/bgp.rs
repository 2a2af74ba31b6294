//! BGP decisions: the sessions this node runs and the routes each carries.
//! Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use api::community::{Community as ApiCommunity, CommunityError};
use api::duration;
use api::v1beta1::{BFDProfileSpec, BGPAdvertisement, IPAddressPool};
use api::v1beta2::{BGPPeer, DynamicASNMode};
use api::validate::{Problem, peer_timers};
use bgp::session::{self, GracefulRestartConfig, IpPrefix, PeerAs, RouteAttrs};
use bgp::wire::nlri::{Ipv4Prefix, Ipv6Prefix};
use bgp::wire::{Community, Family, HoldTime, LargeCommunity};

use super::view::{ClusterView, Exclusion, ObjectKey, TrafficPolicy};
use super::{Assigned, assigned, meta_name, selected, selects_pool, service_problem};
use crate::driver::bgp::PeerConfig;
use crate::net::tcp::{ConnectOptions, MAX_MD5_KEY};

/// What this node does over BGP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BgpPlan {
    /// The sessions to run, by BGPPeer name, each with its routes.
    pub peers: BTreeMap<String, PeerPlan>,
    /// For each announced service, the peers it goes to (ServiceBGPStatus).
    pub services: BTreeMap<ObjectKey, BTreeSet<String>>,
    /// Set when this node announces nothing; its sessions still run, so
    /// the routes are withdrawn rather than timed out.
    pub excluded: Option<Exclusion>,
    /// What was inconsistent, and skipped.
    pub problems: Vec<Problem>,
}

/// One session of this node and the routes it should carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPlan {
    /// What [`crate::driver::bgp::BgpSpeaker::set_peer`] takes.
    pub config: PeerConfig,
    /// Whether the peer is internal (same AS): LOCAL_PREF goes only there.
    pub ibgp: bool,
    /// The BFD profile the session should use, by name, carried for the
    /// BFD driver.
    pub bfd_profile: Option<(String, BFDProfileSpec)>,
    /// `ebgpMultiHop`: the peer is not directly connected, so its BFD
    /// session is multihop (RFC 5883).
    pub multihop: bool,
    /// What [`crate::driver::bgp::BgpSpeaker::set_routes`] takes.
    pub routes: BTreeMap<IpPrefix, Arc<RouteAttrs>>,
}

/// Decides the BGP sessions of this node and their routes.
///
/// Sessions: every BGPPeer whose `nodeSelectors` match this node (none
/// given: every node). A peer that cannot be configured is reported and
/// left out; the others run.
///
/// Routes, per MetalLB's `bgpController.ShouldAnnounce`/`SetBalancer`: for
/// each service of this speaker with IPs from a pool, the BGPAdvertisements
/// that select the pool, this node and the service. Nothing is announced
/// when the node is excluded ([`ClusterView::exclusion`]), when the service
/// has no serving endpoint, or, for `externalTrafficPolicy: Local`, none on
/// this node. Each IP becomes a prefix of the advertisement's aggregation
/// length, for the peers the advertisement names (none: all) that carry
/// its family. Two advertisements of one service that would give the same
/// prefix to a peer with different LOCAL_PREFs make MetalLB skip the
/// service; so does this. Routes from several services or advertisements
/// for the same prefix and peer merge: communities and large communities
/// are united. MetalLB's native mode keeps whichever LOCAL_PREF came first
/// (map order); here a LOCAL_PREF conflict between services is reported
/// and the prefix withheld from that peer, so the outcome never depends on
/// iteration order.
pub fn bgp_plan(view: &ClusterView) -> BgpPlan {
    let mut plan = BgpPlan::default();
    let problems = &mut plan.problems;
    if view.this_node().is_none() {
        problems.push(Problem {
            kind: "Node",
            name: view.node.clone(),
            field: "metadata.name".into(),
            message: "this node is not in the view: its labels are taken as empty".into(),
        });
    }
    let empty = BTreeMap::new();
    let labels = view.this_node().map_or(&empty, |n| &n.labels);
    for peer in &view.config.peers {
        if !selected(&peer.spec.node_selectors, labels) {
            continue;
        }
        if let Some((name, p)) = peer_plan(view, peer, problems) {
            plan.peers.insert(name, p);
        }
    }
    let ads: Vec<Adv<'_>> = view
        .config
        .bgp_advertisements
        .iter()
        .filter_map(|ad| Adv::parse(view, ad, problems))
        .filter(|ad| selected(&ad.ad.spec.node_selectors, labels))
        .collect();
    known_peer_names(view, &ads, problems);
    plan.excluded = view.exclusion(&view.node);
    let services = assigned(view, problems);
    if plan.excluded.is_some() {
        return plan;
    }
    let mut pending: BTreeMap<String, BTreeMap<IpPrefix, Pending>> = BTreeMap::new();
    for Assigned { svc, pool } in services {
        let for_service: Vec<&Adv<'_>> = ads
            .iter()
            .filter(|ad| {
                let spec = &ad.ad.spec;
                selects_pool(
                    &spec.ip_address_pools,
                    &spec.ip_address_pool_selectors,
                    pool,
                ) && selected(&spec.service_selectors, &svc.labels)
            })
            .collect();
        if for_service.is_empty() {
            continue;
        }
        if let Some(message) = local_pref_conflict(&for_service, pool) {
            problems.push(service_problem(svc, "metadata.labels", message));
            continue;
        }
        let serving = match svc.external_traffic_policy {
            TrafficPolicy::Cluster => svc.has_serving_endpoint(),
            TrafficPolicy::Local => svc.has_serving_endpoint_on(&view.node),
        };
        if !serving {
            continue;
        }
        for &ip in &svc.ingress {
            for ad in &for_service {
                let prefix = ad.prefix(ip);
                for (name, peer) in &plan.peers {
                    if !ad.selects_peer(name)
                        || !peer.config.session.families.contains(&prefix.family())
                    {
                        continue;
                    }
                    let entry = pending
                        .entry(name.clone())
                        .or_default()
                        .entry(prefix)
                        .or_default();
                    entry.merge(ad, peer.ibgp, &svc.key);
                }
            }
        }
    }
    for (name, routes) in pending {
        let Some(peer) = plan.peers.get_mut(&name) else {
            continue;
        };
        for (prefix, p) in routes {
            if let Some(prefs) = p.conflict() {
                problems.push(Problem {
                    kind: "BGPPeer",
                    name: name.clone(),
                    field: "routes".into(),
                    message: format!(
                        "{prefix}: services {} ask for different localPref values {prefs:?}; not announced to this peer",
                        keys(&p.services)
                    ),
                });
                continue;
            }
            for svc in &p.services {
                plan.services
                    .entry(svc.clone())
                    .or_default()
                    .insert(name.clone());
            }
            peer.routes.insert(prefix, Arc::new(p.attrs()));
        }
    }
    plan
}

/// A BGPAdvertisement with its strings parsed.
struct Adv<'a> {
    ad: &'a BGPAdvertisement,
    len_v4: u8,
    len_v6: u8,
    /// MetalLB's LocalPref: 0 and unset both mean "not set" (FRR then
    /// applies its default, as our session does for `None`).
    local_pref: Option<u32>,
    communities: BTreeSet<Community>,
    large: BTreeSet<LargeCommunity>,
}

impl<'a> Adv<'a> {
    /// Parses lengths and communities; reports and returns `None` when the
    /// advertisement is unusable.
    fn parse(
        view: &ClusterView,
        ad: &'a BGPAdvertisement,
        problems: &mut Vec<Problem>,
    ) -> Option<Self> {
        let name = meta_name(&ad.metadata);
        let before = problems.len();
        let mut bad = |field: &str, message: String| {
            problems.push(Problem {
                kind: "BGPAdvertisement",
                name: name.to_owned(),
                field: field.into(),
                message,
            });
        };
        let spec = &ad.spec;
        let len_v4 = spec.aggregation_length.unwrap_or(32);
        let len_v6 = spec.aggregation_length_v6.unwrap_or(128);
        if !(0..=32).contains(&len_v4) {
            bad(
                "spec.aggregationLength",
                format!("{len_v4} is not in 0..=32"),
            );
        }
        if !(0..=128).contains(&len_v6) {
            bad(
                "spec.aggregationLengthV6",
                format!("{len_v6} is not in 0..=128"),
            );
        }
        let mut communities = BTreeSet::new();
        let mut large = BTreeSet::new();
        for (i, text) in spec.communities.iter().enumerate() {
            match resolve_community(view, text) {
                Ok(ApiCommunity::Standard(high, low)) => {
                    communities.insert(Community(u32::from(high) << 16 | u32::from(low)));
                }
                Ok(ApiCommunity::Large(a, b, c)) => {
                    large.insert(LargeCommunity {
                        global_admin: a,
                        local_data1: b,
                        local_data2: c,
                    });
                }
                Err(message) => bad(&format!("spec.communities[{i}]"), message),
            }
        }
        if problems.len() != before {
            return None;
        }
        Some(Self {
            ad,
            // Both checked to be in range above.
            len_v4: len_v4 as u8,
            len_v6: len_v6 as u8,
            local_pref: spec.local_pref.filter(|&lp| lp != 0),
            communities,
            large,
        })
    }

    fn prefix(&self, ip: IpAddr) -> IpPrefix {
        // Lengths are in range (checked in `parse`), so neither call fails;
        // a host route is the safe fallback all the same.
        match ip {
            IpAddr::V4(a) => {
                Ipv4Prefix::new(a, self.len_v4).map_or_else(|_| IpPrefix::host(ip), IpPrefix::V4)
            }
            IpAddr::V6(a) => {
                Ipv6Prefix::new(a, self.len_v6).map_or_else(|_| IpPrefix::host(ip), IpPrefix::V6)
            }
        }
    }

    fn selects_peer(&self, peer: &str) -> bool {
        let peers = &self.ad.spec.peers;
        peers.is_empty() || peers.iter().any(|p| p == peer)
    }
}

/// Resolves one community string: a `Community` alias first (as MetalLB
/// does), then an RFC 1997 well-known name, then the literal syntax.
fn resolve_community(view: &ClusterView, text: &str) -> Result<ApiCommunity, String> {
    let alias = view
        .config
        .communities
        .iter()
        .flat_map(|c| &c.spec.communities)
        .find(|a| a.name == text);
    if let Some(alias) = alias {
        return ApiCommunity::parse(&alias.value)
            .map_err(|e| format!("alias {text:?} has value {:?}, which {e}", alias.value));
    }
    if let Some(value) = api::community::well_known(text) {
        return Ok(ApiCommunity::Standard((value >> 16) as u16, value as u16));
    }
    match ApiCommunity::parse(text) {
        Ok(c) => Ok(c),
        Err(CommunityError::Format) => Err(format!(
            "{text:?} is neither a community, a well-known community name nor an alias defined by a Community"
        )),
        Err(e) => Err(format!("{text:?} {e}")),
    }
}

/// Reports advertisement `peers` entries that name no BGPPeer at all.
fn known_peer_names(view: &ClusterView, ads: &[Adv<'_>], problems: &mut Vec<Problem>) {
    let known: BTreeSet<&str> = view
        .config
        .peers
        .iter()
        .map(|p| meta_name(&p.metadata))
        .collect();
    for ad in ads {
        for (i, peer) in ad.ad.spec.peers.iter().enumerate() {
            if !known.contains(peer.as_str()) {
                problems.push(Problem {
                    kind: "BGPAdvertisement",
                    name: meta_name(&ad.ad.metadata).to_owned(),
                    field: format!("spec.peers[{i}]"),
                    message: format!("{peer:?} is not a BGPPeer"),
                });
            }
        }
    }
}

/// MetalLB's `checkBGPAdvConflicts`: two advertisements of one service
/// conflict when their LOCAL_PREFs differ, their aggregation lengths give
/// the same prefixes, and they reach a common peer (both apply to this
/// node, so their node sets always meet).
fn local_pref_conflict(ads: &[&Adv<'_>], pool: &IPAddressPool) -> Option<String> {
    let families: BTreeSet<bool> = pool
        .spec
        .addresses
        .iter()
        .filter_map(|a| api::addr::AddressRange::parse(a).ok())
        .map(|r| r.is_ipv4())
        .collect();
    let (has_v4, has_v6) = (families.contains(&true), families.contains(&false));
    for (i, a) in ads.iter().enumerate() {
        for b in &ads[i + 1..] {
            if a.local_pref == b.local_pref {
                continue;
            }
            let v4_differs = a.len_v4 != b.len_v4;
            let v6_differs = a.len_v6 != b.len_v6;
            let lengths_differ = match (has_v4, has_v6) {
                (false, false) => true,
                (true, false) => v4_differs,
                (false, true) => v6_differs,
                (true, true) => v4_differs && v6_differs,
            };
            if lengths_differ {
                continue;
            }
            let (pa, pb) = (&a.ad.spec.peers, &b.ad.spec.peers);
            if !pa.is_empty() && !pb.is_empty() && !pa.iter().any(|p| pb.contains(p)) {
                continue;
            }
            return Some(format!(
                "BGPAdvertisements {:?} and {:?} select this service with conflicting localPref ({} vs {}): not announced over BGP",
                meta_name(&a.ad.metadata),
                meta_name(&b.ad.metadata),
                a.local_pref.unwrap_or(0),
                b.local_pref.unwrap_or(0)
            ));
        }
    }
    None
}

/// The attributes of one prefix for one peer, merged across advertisements.
#[derive(Default)]
struct Pending {
    local_prefs: BTreeSet<Option<u32>>,
    communities: BTreeSet<Community>,
    large: BTreeSet<LargeCommunity>,
    services: BTreeSet<ObjectKey>,
}

impl Pending {
    fn merge(&mut self, ad: &Adv<'_>, ibgp: bool, svc: &ObjectKey) {
        // LOCAL_PREF is an iBGP attribute (RFC 4271 §5.1.5): towards eBGP
        // peers it is not sent, so it cannot conflict either.
        self.local_prefs
            .insert(if ibgp { ad.local_pref } else { None });
        self.communities.extend(&ad.communities);
        self.large.extend(&ad.large);
        self.services.insert(svc.clone());
    }

    fn conflict(&self) -> Option<Vec<u32>> {
        (self.local_prefs.len() > 1)
            .then(|| self.local_prefs.iter().map(|lp| lp.unwrap_or(0)).collect())
    }

    fn attrs(&self) -> RouteAttrs {
        RouteAttrs {
            local_pref: self.local_prefs.first().copied().flatten(),
            communities: self.communities.iter().copied().collect(),
            large_communities: self.large.iter().copied().collect(),
            ..RouteAttrs::default()
        }
    }
}

/// Builds one peer's session and socket configuration, or reports why not.
fn peer_plan(
    view: &ClusterView,
    peer: &BGPPeer,
    problems: &mut Vec<Problem>,
) -> Option<(String, PeerPlan)> {
    let name = meta_name(&peer.metadata).to_owned();
    let namespace = peer.metadata.namespace.clone().unwrap_or_default();
    let spec = &peer.spec;
    let mut found = Vec::new();
    let mut bad = |field: &str, message: String| {
        found.push(Problem {
            kind: "BGPPeer",
            name: name.clone(),
            field: field.into(),
            message,
        });
    };
    if spec.my_asn == 0 {
        bad("spec.myASN", "0 is not a valid AS number".into());
    }
    let peer_as = match (spec.peer_asn.filter(|&a| a != 0), spec.dynamic_asn) {
        (Some(asn), None) => Some(PeerAs::Exact(asn)),
        (None, Some(DynamicASNMode::Internal)) => Some(PeerAs::Internal),
        (None, Some(DynamicASNMode::External)) => Some(PeerAs::External),
        (None, None) => {
            bad(
                "spec.peerASN",
                "one of peerASN and dynamicASN must be set".into(),
            );
            None
        }
        (Some(_), Some(_)) => {
            bad(
                "spec.peerASN",
                "peerASN and dynamicASN are mutually exclusive".into(),
            );
            None
        }
    };
    let ibgp = match peer_as {
        Some(PeerAs::Exact(asn)) => asn == spec.my_asn,
        Some(PeerAs::Internal) => true,
        Some(PeerAs::External) | None => false,
    };
    if spec.local_asn.is_some() {
        bad(
            "spec.localASN",
            "localASN is not supported by ferrolb's BGP speaker (as in MetalLB's native mode)"
                .into(),
        );
    }
    if !spec.interface.is_empty() {
        bad(
            "spec.interface",
            "unnumbered BGP peering is not supported yet".into(),
        );
    }
    let address = match spec.peer_address.parse::<IpAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            bad(
                "spec.peerAddress",
                format!("{:?} is not an IP address", spec.peer_address),
            );
            None
        }
    };
    let port = spec.peer_port.unwrap_or(DEFAULT_PORT);
    if port == 0 {
        bad("spec.peerPort", "0 is not a port".into());
    }
    let source = if spec.source_address.is_empty() {
        None
    } else {
        match spec.source_address.parse::<IpAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                bad(
                    "spec.sourceAddress",
                    format!("{:?} is not an IP address", spec.source_address),
                );
                None
            }
        }
    };
    let router_id = if spec.router_id.is_empty() {
        default_router_id(view, source)
    } else {
        match spec.router_id.parse::<Ipv4Addr>() {
            Ok(id) => id,
            Err(_) => {
                bad(
                    "spec.routerID",
                    format!(
                        "{:?} is not an IPv4 address (a BGP Identifier is 4 octets)",
                        spec.router_id
                    ),
                );
                Ipv4Addr::UNSPECIFIED
            }
        }
    };
    let timers = match peer_timers(spec.hold_time.as_deref(), spec.keepalive_time.as_deref()) {
        Ok(t) => t,
        Err(message) => {
            bad("spec.holdTime", message);
            None
        }
    };
    let mut hold_time = HoldTime::DEFAULT;
    let mut keepalive = None;
    if let Some((hold, ka)) = timers {
        match u16::try_from(hold.as_secs())
            .ok()
            .and_then(HoldTime::from_secs)
        {
            Some(h) => hold_time = h,
            None => bad("spec.holdTime", format!("{hold:?} is not 0 or 3s..=65535s")),
        }
        keepalive = Some(ka);
    }
    let mut connect_retry = None;
    if let Some(text) = &spec.connect_time {
        match duration::parse(text) {
            Ok(d) if !d.is_zero() => connect_retry = Some(d),
            Ok(_) => bad("spec.connectTime", format!("{text:?} must not be zero")),
            Err(e) => bad("spec.connectTime", format!("{text:?} {e}")),
        }
    }
    let secret = spec
        .password_secret
        .as_ref()
        .and_then(|s| s.name.as_deref().filter(|n| !n.is_empty()).map(|n| (s, n)));
    let md5_key = match (spec.password.is_empty(), secret) {
        (true, None) => None,
        (false, None) => Some(spec.password.as_bytes().to_vec()),
        (true, Some((reference, secret_name))) => {
            // MetalLB reads the secret from its own namespace, where the
            // peer lives too.
            let key = ObjectKey::new(
                reference
                    .namespace
                    .clone()
                    .unwrap_or_else(|| namespace.clone()),
                secret_name,
            );
            match view.secrets.get(&key) {
                Some(value) => Some(value.clone()),
                None => {
                    bad(
                        "spec.passwordSecret",
                        format!("Secret {key} with a \"password\" key is not available"),
                    );
                    None
                }
            }
        }
        (false, Some(_)) => {
            bad(
                "spec.password",
                "password and passwordSecret are mutually exclusive".into(),
            );
            None
        }
    };
    if md5_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.len() > MAX_MD5_KEY)
    {
        bad(
            "spec.password",
            format!("a TCP MD5 key must be 1..={MAX_MD5_KEY} bytes"),
        );
    }
    let bfd_profile = if spec.bfd_profile.is_empty() {
        None
    } else {
        let profile = view
            .config
            .bfd_profiles
            .iter()
            .find(|p| meta_name(&p.metadata) == spec.bfd_profile);
        if profile.is_none() {
            bad(
                "spec.bfdProfile",
                format!("{:?} is not a BFDProfile", spec.bfd_profile),
            );
        }
        profile.map(|p| (spec.bfd_profile.clone(), p.spec.clone()))
    };
    if !found.is_empty() {
        problems.extend(found);
        return None;
    }
    let (Some(peer_as), Some(address)) = (peer_as, address) else {
        // Both are `Some` when nothing was reported above.
        return None;
    };
    let mut session = session::Config::new(spec.my_asn, peer_as, router_id);
    session.hold_time = hold_time;
    session.keepalive = keepalive;
    if let Some(d) = connect_retry {
        session.connect_retry = d;
    }
    // As MetalLB's FRR mode: a session carries its transport's family
    // unless dualStackAddressFamily asks for both.
    session.families = if spec.dual_stack_address_family == Some(true) {
        Family::ALL.to_vec()
    } else if address.is_ipv4() {
        vec![Family::Ipv4Unicast]
    } else {
        vec![Family::Ipv6Unicast]
    };
    session.disable_mp = spec.disable_mp == Some(true);
    session.hostname = Some(view.node.clone());
    if spec.enable_graceful_restart == Some(true) {
        session.graceful_restart = Some(GracefulRestartConfig {
            restart_time: GRACEFUL_RESTART_TIME,
            // Every start of the speaker is a restart to the peer, which
            // may hold our routes as stale (after --preserve-bgp-on-exit):
            // R in the first OPEN of each session (RFC 4724 §3).
            restarting: true,
            forwarding_preserved: true,
        });
    }
    let ttl = if spec.ebgp_multi_hop {
        Some(MULTI_HOP_TTL)
    } else if ibgp {
        None
    } else {
        // A directly connected eBGP peer, as FRR's default.
        Some(1)
    };
    let connect = ConnectOptions {
        bind: source,
        device: (!spec.vrf.is_empty()).then(|| spec.vrf.clone()),
        ttl,
        min_ttl: None,
        md5_key,
        timeout: None,
    };
    let config = PeerConfig {
        session,
        address: SocketAddr::new(address, port),
        connect,
    };
    Some((
        name,
        PeerPlan {
            config,
            ibgp,
            bfd_profile,
            multihop: spec.ebgp_multi_hop,
            routes: BTreeMap::new(),
        },
    ))
}

/// The BGP Identifier when the peer sets none.
///
/// MetalLB's native mode uses the local IPv4 address of the connection,
/// known only once connected; the session needs it before. So: the IPv4
/// `sourceAddress`, else the node's first IPv4 address (InternalIP first),
/// else MetalLB's fallback for IPv6-only nodes, the CRC-32 of the node name.
fn default_router_id(view: &ClusterView, source: Option<IpAddr>) -> Ipv4Addr {
    if let Some(IpAddr::V4(a)) = source {
        return a;
    }
    let node_v4 = view.this_node().and_then(|n| {
        n.addresses.iter().find_map(|a| match a {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
    });
    node_v4.unwrap_or_else(|| hashed_router_id(&view.node))
}

/// MetalLB's `hashRouterID`: the IEEE CRC-32 of the node name, written
/// little-endian as the four octets.
fn hashed_router_id(node: &str) -> Ipv4Addr {
    Ipv4Addr::from(crc32(node.as_bytes()).to_le_bytes())
}

/// IEEE 802.3 CRC-32 (reflected, polynomial 0xEDB88320), bit by bit: it
/// runs once per peer, so no table.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn keys(services: &BTreeSet<ObjectKey>) -> String {
    let texts: Vec<String> = services.iter().map(ToString::to_string).collect();
    texts.join(", ")
}

const DEFAULT_PORT: u16 = 179;
/// TTL of multihop eBGP packets, as FRR's `ebgp-multihop` without a count.
const MULTI_HOP_TTL: u32 = 255;
/// FRR's default restart time, which MetalLB's FRR mode announces.
const GRACEFUL_RESTART_TIME: Duration = Duration::from_secs(120);

#[cfg(test)]
mod tests;
