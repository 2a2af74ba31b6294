//! BGP decisions: the sessions this node runs and the routes each carries.
//! Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use api::community::Community as ApiCommunity;
use api::model::{
    BfdProfile, BgpAdvertisement, Md5Key, PasswordError, Peer, PeerAsn, PeerTarget, Pool,
};
use api::validate::Problem;
use bgp::session::{self, GracefulRestartConfig, IpPrefix, LocalAs, PeerAs, RouteAttrs};
use bgp::wire::nlri::{Ipv4Prefix, Ipv6Prefix};
use bgp::wire::{Community, Family, HoldTime, LargeCommunity};
use ipnetwork::IpNetwork;

use super::coexist::bgp_held;
use super::sorted::VecSet;
use super::view::{ClusterView, Exclusion, Labels, ObjectKey, Service, TrafficPolicy};
use super::{Assigned, assigned, service_problem};

/// One service's routes: per (peer, prefix), sorted, what it asks for.
/// The peer's name is shared by every route of one update, and the
/// keyed plan shares each distinct `Pending` among the services that ask
/// it (most ask the same: one advertisement's attributes).
pub(super) type ServiceRoutes = Vec<((Arc<str>, IpPrefix), Arc<Pending>)>;

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

/// One session of this node and the routes it should carry: plain data,
/// which the driver layer turns into its peer and socket configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPlan {
    /// The session (AS numbers, timers, capabilities).
    pub session: session::Config,
    /// Where the session goes: the peer's address and port, or, for
    /// unnumbered peering, the interface whose neighbor (learned from its
    /// Router Advertisements) the session is with.
    pub target: PeerTarget,
    /// The transport the session runs over.
    pub transport: Transport,
    /// Whether the peer is internal (same AS): LOCAL_PREF goes only there.
    pub ibgp: bool,
    /// The BFD profile the session should use, by name, carried for the
    /// BFD driver.
    pub bfd_profile: Option<(String, BfdProfile)>,
    /// `ebgpMultiHop`: the peer is not directly connected, so its BFD
    /// session is multihop (RFC 5883).
    pub multihop: bool,
    /// What [`crate::driver::bgp::BgpSpeaker::set_routes`] takes.
    pub routes: BTreeMap<IpPrefix, Arc<RouteAttrs>>,
}

/// How a peer's TCP connections are made, as decided from its BGPPeer.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Transport {
    /// Local address to bind (`sourceAddress`).
    pub bind: Option<IpAddr>,
    /// Interface (VRF) to bind to (`vrf`).
    pub device: Option<String>,
    /// IP TTL / hop limit of our packets; `None` leaves the system default.
    pub ttl: Option<u32>,
    /// TCP MD5 key shared with the peer (RFC 2385), resolved from the
    /// password or its Secret.
    pub md5_key: Option<Md5Key>,
}

impl fmt::Debug for Transport {
    /// The MD5 key is a secret: only whether there is one is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("bind", &self.bind)
            .field("device", &self.device)
            .field("ttl", &self.ttl)
            .field("md5_key", &self.md5_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Decides the BGP sessions of this node and their routes.
///
/// Sessions: every BGPPeer whose `nodeSelectors` match this node (none
/// given: every node); none while a MetalLB speaker Pod is on this node
/// (`--metallb-speaker-labels`, [`super::coexist::bgp_held`]). A peer that cannot be configured is reported and
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
    let mut problems = Vec::new();
    let ctx = BgpContext::new(view, &mut problems);
    let services = assigned(view, &mut problems);
    let mut plan = BgpPlan {
        excluded: ctx.excluded,
        ..BgpPlan::default()
    };
    // Per peer and prefix, what its services ask, merged, and the services.
    let mut pending: BTreeMap<Arc<str>, BTreeMap<IpPrefix, Merging>> = BTreeMap::new();
    for Assigned { svc, pool } in services {
        for ((name, prefix), p) in ctx.service_routes(svc, pool, &mut problems) {
            let (merged, keys) = pending.entry(name).or_default().entry(prefix).or_default();
            merged.absorb(&p);
            keys.insert(svc.key.clone());
        }
    }
    for (name, routes) in pending {
        let Some(peer) = ctx.peers.get(&*name) else {
            continue;
        };
        let mut peer = peer.clone();
        for (prefix, (p, keys)) in routes {
            match p.resolve(&name, prefix, keys.iter()) {
                Ok(attrs) => {
                    for svc in &keys {
                        plan.services
                            .entry(svc.clone())
                            .or_default()
                            .insert(name.to_string());
                    }
                    peer.routes.insert(prefix, Arc::new(attrs));
                }
                Err(problem) => problems.push(problem),
            }
        }
        plan.peers.insert(name.to_string(), peer);
    }
    for (name, peer) in ctx.peers {
        plan.peers.entry(name).or_insert(peer);
    }
    plan.problems = problems;
    plan
}

/// What a prefix's services ask of one peer, merged, and those services.
type Merging = (Pending, VecSet<ObjectKey>);

/// What every service's BGP decision on this node shares: the sessions
/// (without routes), the advertisements that select this node, and
/// whether the node is excluded.
pub(super) struct BgpContext<'a> {
    /// The sessions to run, by BGPPeer name; their `routes` are empty.
    pub(super) peers: BTreeMap<String, PeerPlan>,
    /// The peers' names, in `peers`' order: one copy for every route.
    names: Vec<Arc<str>>,
    ads: Vec<&'a BgpAdvertisement>,
    /// Set when this node announces nothing.
    pub(super) excluded: Option<Exclusion>,
    node: &'a str,
}

impl<'a> BgpContext<'a> {
    /// Decides the sessions of this node and what its services share;
    /// what is inconsistent (a bad peer, an unknown peer name in an
    /// advertisement) goes to `problems`.
    pub(super) fn new(view: &'a ClusterView, problems: &mut Vec<Problem>) -> Self {
        if view.this_node().is_none() {
            problems.push(Problem {
                kind: "Node",
                name: view.node.clone(),
                field: "metadata.name".into(),
                message: "this node is not in the view: its labels are taken as empty".into(),
            });
        }
        let empty = Labels::default();
        let labels = view.this_node().map_or(&empty, |n| &n.labels);
        let mut peers = BTreeMap::new();
        // While MetalLB's speaker is on this node, its sessions are the
        // node's: no session of ours (coexist::bgp_held).
        let held = view
            .api_speakers
            .as_ref()
            .and_then(|a| a.metallb.as_ref())
            .is_some_and(|m| bgp_held(m, &view.node));
        for peer in view.model.peers.iter().filter(|_| !held) {
            if !peer.nodes.matches(labels) {
                continue;
            }
            if let Some(p) = peer_plan(view, peer, problems) {
                peers.insert(peer.name.clone(), p);
            }
        }
        let ads: Vec<&BgpAdvertisement> = view
            .model
            .bgp_advertisements
            .iter()
            .filter(|ad| ad.scope.selects_node(labels))
            .collect();
        known_peer_names(view, &ads, problems);
        Self {
            names: peers.keys().map(|n| Arc::from(n.as_str())).collect(),
            peers,
            ads,
            excluded: view.exclusion(&view.node),
            node: &view.node,
        }
    }

    /// One service's routes from this node: per (peer, prefix), what it
    /// asks for, not yet merged with other services'. Empty when the
    /// service is withheld ([`BgpContext::advertisements`]); a LOCAL_PREF
    /// conflict between its advertisements goes to `problems`.
    pub(super) fn service_routes(
        &self,
        svc: &Service,
        pool: &Pool,
        problems: &mut Vec<Problem>,
    ) -> ServiceRoutes {
        let mut out: BTreeMap<(Arc<str>, IpPrefix), Pending> = BTreeMap::new();
        let for_service = match self.advertisements(svc, pool) {
            Ok(ads) => ads,
            Err(Withheld::LocalPrefConflict(message)) => {
                problems.push(service_problem(svc, "metadata.labels", message));
                return Vec::new();
            }
            Err(_) => return Vec::new(),
        };
        for &ip in &svc.ingress {
            for ad in &for_service {
                let prefix = ip_prefix(ad.prefix(ip));
                for ((name, peer), shared) in self.peers.iter().zip(&self.names) {
                    if !ad.selects_peer(name) || !peer.session.families.contains(&prefix.family()) {
                        continue;
                    }
                    out.entry((Arc::clone(shared), prefix))
                        .or_default()
                        .merge(ad, peer.ibgp);
                }
            }
        }
        // Exactly as long as it is: the keyed plan keeps one per service.
        out.into_iter().map(|(k, p)| (k, Arc::new(p))).collect()
    }

    /// The advertisements that make this node announce `svc` (of `pool`),
    /// or why it announces none of its routes: the node is excluded, no
    /// advertisement selects the pool, this node and the service, two of
    /// them conflict on LOCAL_PREF, or it has no serving endpoint (under
    /// `Local`, none on this node). Checked in that order.
    pub(super) fn advertisements(
        &self,
        svc: &Service,
        pool: &Pool,
    ) -> Result<Vec<&'a BgpAdvertisement>, Withheld> {
        if let Some(e) = self.excluded {
            return Err(Withheld::Excluded(e));
        }
        let for_service: Vec<&BgpAdvertisement> = self
            .ads
            .iter()
            .copied()
            .filter(|ad| ad.scope.selects_pool(pool) && ad.scope.selects_service(&svc.labels))
            .collect();
        if for_service.is_empty() {
            return Err(Withheld::NoAdvertisement);
        }
        if let Some(message) = local_pref_conflict(&for_service, pool) {
            return Err(Withheld::LocalPrefConflict(message));
        }
        match svc.external_traffic_policy {
            TrafficPolicy::Cluster if !svc.has_serving_endpoint() => {
                Err(Withheld::NoServingEndpoint)
            }
            TrafficPolicy::Local if !svc.has_serving_endpoint_on(self.node) => {
                Err(Withheld::NoLocalEndpoint)
            }
            _ => Ok(for_service),
        }
    }
}

/// Why a node announces none of a service's routes over BGP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Withheld {
    /// The node announces nothing.
    Excluded(Exclusion),
    /// No BGPAdvertisement selects the service's pool, this node and the
    /// service.
    NoAdvertisement,
    /// Two of its advertisements ask for different LOCAL_PREFs for the
    /// same prefixes (MetalLB skips the service then); the message names
    /// them.
    LocalPrefConflict(String),
    /// `externalTrafficPolicy: Cluster` and no endpoint anywhere can serve.
    NoServingEndpoint,
    /// `externalTrafficPolicy: Local` and no endpoint on this node can
    /// serve.
    NoLocalEndpoint,
}

impl fmt::Display for Withheld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Excluded(e) => write!(f, "the node is excluded: {e}"),
            Self::NoAdvertisement => {
                f.write_str("no BGPAdvertisement selects the pool, this node and the service")
            }
            Self::LocalPrefConflict(message) => f.write_str(message),
            Self::NoServingEndpoint => f.write_str("the service has no serving endpoint"),
            Self::NoLocalEndpoint => f.write_str(
                "externalTrafficPolicy is Local and no serving endpoint is on this node",
            ),
        }
    }
}

/// A prefix of the model as the session's NLRI.
fn ip_prefix(net: IpNetwork) -> IpPrefix {
    // The model's prefixes are networks of valid lengths; a host route is
    // the fallback all the same.
    let host = || IpPrefix::host(net.ip());
    match net {
        IpNetwork::V4(n) => {
            Ipv4Prefix::new(n.network(), n.prefix()).map_or_else(|_| host(), IpPrefix::V4)
        }
        IpNetwork::V6(n) => {
            Ipv6Prefix::new(n.network(), n.prefix()).map_or_else(|_| host(), IpPrefix::V6)
        }
    }
}

/// Reports advertisement `peers` entries that name no BGPPeer at all.
fn known_peer_names(view: &ClusterView, ads: &[&BgpAdvertisement], problems: &mut Vec<Problem>) {
    let known: BTreeSet<&str> = view.model.peers.iter().map(|p| p.name.as_str()).collect();
    for ad in ads {
        for (i, peer) in ad.peers.iter().enumerate() {
            if !known.contains(peer.as_str()) {
                problems.push(Problem {
                    kind: "BGPAdvertisement",
                    name: ad.name.clone(),
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
fn local_pref_conflict(ads: &[&BgpAdvertisement], pool: &Pool) -> Option<String> {
    let (has_v4, has_v6) = (pool.has_family(true), pool.has_family(false));
    for (i, a) in ads.iter().enumerate() {
        for b in &ads[i + 1..] {
            if a.local_pref == b.local_pref {
                continue;
            }
            let v4_differs = a.aggregation_v4 != b.aggregation_v4;
            let v6_differs = a.aggregation_v6 != b.aggregation_v6;
            let lengths_differ = match (has_v4, has_v6) {
                (false, false) => true,
                (true, false) => v4_differs,
                (false, true) => v6_differs,
                (true, true) => v4_differs && v6_differs,
            };
            if lengths_differ {
                continue;
            }
            let (pa, pb) = (&a.peers, &b.peers);
            if !pa.is_empty() && !pb.is_empty() && !pa.iter().any(|p| pb.contains(p)) {
                continue;
            }
            return Some(format!(
                "BGPAdvertisements {:?} and {:?} select this service with conflicting localPref ({} vs {}): not announced over BGP",
                a.name,
                b.name,
                a.local_pref.unwrap_or(0),
                b.local_pref.unwrap_or(0)
            ));
        }
    }
    None
}

/// The attributes of one prefix for one peer, merged across
/// advertisements (of one service, or of every service that gives it).
/// It names no service, so that services asking the same share one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Pending {
    local_prefs: VecSet<Option<u32>>,
    communities: VecSet<Community>,
    large: VecSet<LargeCommunity>,
}

impl Pending {
    fn merge(&mut self, ad: &BgpAdvertisement, ibgp: bool) {
        // LOCAL_PREF is an iBGP attribute (RFC 4271 §5.1.5): towards eBGP
        // peers it is not sent, so it cannot conflict either.
        self.local_prefs
            .insert(if ibgp { ad.local_pref } else { None });
        for c in &ad.communities {
            match *c {
                ApiCommunity::Standard(high, low) => {
                    self.communities
                        .insert(Community(u32::from(high) << 16 | u32::from(low)));
                }
                ApiCommunity::Large(a, b, c) => {
                    self.large.insert(LargeCommunity {
                        global_admin: a,
                        local_data1: b,
                        local_data2: c,
                    });
                }
            }
        }
    }

    /// Adds what another advertisement or service asks for this prefix.
    pub(super) fn absorb(&mut self, other: &Self) {
        self.local_prefs.extend(other.local_prefs.iter().copied());
        self.communities.extend(other.communities.iter().copied());
        self.large.extend(other.large.iter().copied());
    }

    /// The route to send `peer` for `prefix`, or the problem when its
    /// services (`services`, named in the problem) ask for different
    /// LOCAL_PREFs (it is withheld then).
    pub(super) fn resolve<'k>(
        &self,
        peer: &str,
        prefix: IpPrefix,
        services: impl Iterator<Item = &'k ObjectKey>,
    ) -> Result<RouteAttrs, Problem> {
        if self.local_prefs.len() > 1 {
            let prefs: Vec<u32> = self.local_prefs.iter().map(|lp| lp.unwrap_or(0)).collect();
            return Err(Problem {
                kind: "BGPPeer",
                name: peer.to_owned(),
                field: "routes".into(),
                message: format!(
                    "{prefix}: services {} ask for different localPref values {prefs:?}; not announced to this peer",
                    keys(services)
                ),
            });
        }
        Ok(self.attrs())
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

/// Builds one peer's session and transport, or reports why not.
///
/// The model has checked the peer; what is left are the limits of this
/// speaker (a local AS only for eBGP and other than myASN, as FRR allows;
/// no BFD for an unnumbered peer; a 4-octet BGP Identifier; a 16-bit hold
/// time) and what depends on other objects: the password's Secret and the
/// BFD profile.
fn peer_plan(view: &ClusterView, peer: &Peer, problems: &mut Vec<Problem>) -> Option<PeerPlan> {
    let mut found = Vec::new();
    let mut bad = |field: &str, message: String| {
        found.push(Problem {
            kind: "BGPPeer",
            name: peer.name.clone(),
            field: field.into(),
            message,
        });
    };
    if let Some(local) = peer.local_asn {
        // What FRR refuses for `neighbor X local-as N` (bgpd's "Cannot have
        // local-as same as BGP AS number" and "local-as allowed only for
        // EBGP peers"; frr-k8s refuses localASN for iBGP sessions too), so
        // MetalLB's FRR modes never run these sessions either.
        if local == peer.my_asn {
            bad(
                "spec.localASN",
                format!("{local} equals myASN: a local-as must differ from the real AS"),
            );
        }
        match peer.peer_asn {
            PeerAsn::Exact(asn) if asn == peer.my_asn => bad(
                "spec.localASN",
                format!(
                    "cannot be set for an iBGP peer (peerASN {asn} equal to myASN): local-as is for eBGP peers"
                ),
            ),
            PeerAsn::Internal => bad(
                "spec.localASN",
                "cannot be set with dynamicASN internal: local-as is for eBGP peers".into(),
            ),
            _ => {}
        }
    }
    let router_id = match peer.router_id {
        None => default_router_id(view, peer.source_address),
        Some(IpAddr::V4(id)) => id,
        Some(other) => {
            let why = "is not an IPv4 address (a BGP Identifier is 4 octets)";
            bad("spec.routerID", format!("\"{other}\" {why}"));
            Ipv4Addr::UNSPECIFIED
        }
    };
    let hold_time = match peer.timers {
        None => Some(HoldTime::DEFAULT),
        Some(t) => u16::try_from(t.hold.as_secs())
            .ok()
            .and_then(HoldTime::from_secs),
    };
    if hold_time.is_none() {
        let hold = peer.timers.map_or(Duration::ZERO, |t| t.hold);
        bad("spec.holdTime", format!("{hold:?} is not 0 or 3s..=65535s"));
    }
    if peer.disable_mp && peer.dual_stack_address_family {
        // MetalLB documents disableMP as "separating IPv4 and IPv6 route
        // exchanges into distinct sessions"; dualStackAddressFamily asks
        // for the opposite on this one session.
        let why = "contradicts dualStackAddressFamily: a session cannot both carry only its own family and both";
        bad("spec.disableMP", why.into());
    }
    let md5_key = md5_key(view, peer, &mut bad);
    let bfd_profile = bfd_profile(view, peer, &mut bad);
    if matches!(peer.target, PeerTarget::Interface { .. }) && bfd_profile.is_some() {
        // The BFD driver's sockets take a fixed peer address; the
        // unnumbered neighbor's is learned, and may change.
        let why = "BFD for an unnumbered (interface) peer is not supported yet: unset bfdProfile";
        bad("spec.bfdProfile", why.into());
    }
    if peer.vrf.is_some() && bfd_profile.is_some() {
        // The BFD driver's sockets are in the default VRF: the session
        // would never come up, and it holds BGP down.
        let why = "a BFD session in a VRF is not supported: unset bfdProfile or vrf";
        bad("spec.vrf", why.into());
    }
    if !found.is_empty() {
        problems.extend(found);
        return None;
    }
    let hold_time = hold_time?;
    Some(PeerPlan {
        session: session_config(view, peer, router_id, hold_time),
        target: peer.target.clone(),
        transport: Transport {
            bind: peer.source_address,
            device: peer.vrf.clone(),
            ttl: ttl(peer),
            md5_key,
        },
        ibgp: peer.is_ibgp(),
        bfd_profile,
        multihop: peer.ebgp_multi_hop,
        routes: BTreeMap::new(),
    })
}

/// The peer's TCP MD5 key, from its password or Secret; a missing Secret
/// or a bad key is reported through `bad`.
fn md5_key(view: &ClusterView, peer: &Peer, bad: &mut impl FnMut(&str, String)) -> Option<Md5Key> {
    match peer.password.as_ref()?.resolve(&view.secrets) {
        Ok(key) => Some(Md5Key::from(key)),
        Err(e @ PasswordError::Missing(_)) => {
            bad("spec.passwordSecret", e.to_string());
            None
        }
        Err(e) => {
            bad("spec.password", e.to_string());
            None
        }
    }
}

/// The peer's BFD profile by name; an unknown name is reported.
fn bfd_profile(
    view: &ClusterView,
    peer: &Peer,
    bad: &mut impl FnMut(&str, String),
) -> Option<(String, BfdProfile)> {
    let name = peer.bfd_profile.as_ref()?;
    let profile = view.model.bfd_profiles.get(name);
    match profile {
        None => bad("spec.bfdProfile", format!("{name:?} is not a BFDProfile")),
        // Taking the profile without its echo function would run a
        // session other than the one asked for (FRR ignores echo-mode on
        // a multihop session silently; we say so).
        Some(p) if p.echo_mode && peer.ebgp_multi_hop => bad(
            "spec.bfdProfile",
            format!(
                "BFDProfile {name:?} sets echoMode, which applies to single-hop sessions only \
                 (RFC 5883 §3), and the peer has ebgpMultiHop"
            ),
        ),
        Some(p) if p.echo_mode && !matches!(peer.target, PeerTarget::Address(a) if a.is_ipv4()) => {
            bad(
                "spec.bfdProfile",
                format!(
                    "BFDProfile {name:?} sets echoMode: BFD echo over IPv6 is not supported yet"
                ),
            );
        }
        Some(_) => {}
    }
    profile.map(|p| (name.clone(), *p))
}

/// The session part of a peer's configuration.
fn session_config(
    view: &ClusterView,
    peer: &Peer,
    router_id: Ipv4Addr,
    hold_time: HoldTime,
) -> session::Config {
    let peer_as = match peer.peer_asn {
        PeerAsn::Exact(asn) => PeerAs::Exact(asn),
        PeerAsn::Internal => PeerAs::Internal,
        PeerAsn::External => PeerAs::External,
    };
    let mut session = session::Config::new(peer.my_asn, peer_as, router_id);
    // MetalLB's FRR mode writes `neighbor X local-as N no-prepend
    // replace-as` for localASN: the peer sees N alone, in the OPEN and in
    // the AS_PATH of our routes.
    session.local_as_override = peer.local_asn.map(|asn| LocalAs {
        asn,
        replace_as: true,
    });
    session.hold_time = hold_time;
    session.keepalive = peer.timers.map(|t| t.keepalive);
    if let Some(d) = peer.connect_time {
        session.connect_retry = d;
    }
    // As MetalLB's FRR mode: a session carries its transport's family
    // unless dualStackAddressFamily asks for both.
    session.families = match &peer.target {
        _ if peer.dual_stack_address_family => Family::ALL.to_vec(),
        PeerTarget::Address(a) if a.is_ipv4() => vec![Family::Ipv4Unicast],
        PeerTarget::Address(_) => vec![Family::Ipv6Unicast],
        // As FRR's `neighbor IFACE interface`: both families over the
        // link-local session, IPv4 routes with our IPv6 next hop (RFC
        // 8950), which is the only address the link has.
        PeerTarget::Interface { .. } => {
            session.extended_next_hop = true;
            Family::ALL.to_vec()
        }
    };
    // disableMP: the session carries its own family only, which it does
    // already (dualStackAddressFamily, which contradicts it, is refused).
    // Over IPv4 the OPEN then has no multiprotocol capability (RFC 4760
    // §8: IPv4 unicast is implied); over IPv6 it must keep the one for
    // IPv6, or no route could go.
    session.disable_mp = peer.disable_mp && session.families == [Family::Ipv4Unicast];
    session.hostname = Some(view.node.clone());
    if peer.graceful_restart {
        session.graceful_restart = Some(GracefulRestartConfig {
            restart_time: GRACEFUL_RESTART_TIME,
            // Every start of the speaker is a restart to the peer, which
            // may hold our routes as stale (after --preserve-bgp-on-exit):
            // R in the first OPEN of each session (RFC 4724 §3).
            restarting: true,
            forwarding_preserved: true,
        });
    }
    session
}

/// The TTL of our packets: 255 for multihop eBGP, 1 for a directly
/// connected eBGP peer (FRR's default), the system's for iBGP.
fn ttl(peer: &Peer) -> Option<u32> {
    if peer.ebgp_multi_hop {
        Some(MULTI_HOP_TTL)
    } else if peer.is_ibgp() {
        None
    } else {
        Some(1)
    }
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

fn keys<'k>(services: impl Iterator<Item = &'k ObjectKey>) -> String {
    let texts: Vec<String> = services.map(ToString::to_string).collect();
    texts.join(", ")
}

/// TTL of multihop eBGP packets, as FRR's `ebgp-multihop` without a count.
const MULTI_HOP_TTL: u32 = 255;
/// FRR's default restart time, which MetalLB's FRR mode announces.
const GRACEFUL_RESTART_TIME: Duration = Duration::from_secs(120);

#[cfg(test)]
mod tests;
