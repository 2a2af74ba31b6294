//! Why a node does or does not announce a service, with the reasons: the
//! speaker's own per-service decisions (the pool check of
//! [`super::bgp_plan`] and [`super::l2_plan`], `BgpContext::advertisements`
//! and `service_routes`, `L2Context::service` and its candidacy rule),
//! returned as plain data for `kubectl ferrolb explain`.
//!
//! Nothing here decides anew: each answer is what the function the speaker
//! runs returned, or the reason it returned nothing. Pure: no I/O, no
//! clock.

use std::collections::BTreeSet;
use std::fmt;

use api::model::{PeerTarget, Pool, Scope};
use api::validate::Problem;

use super::bgp::BgpContext;
use super::l2::L2Context;
use super::view::{ClusterView, Exclusion, Labels, ObjectKey};
use super::{Election, Interfaces, bgp_plan, handled};

pub use super::bgp::Withheld;
pub use super::l2::{L2Withheld, NotCandidate};

/// What one node decides for one service, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The node whose view this is ([`ClusterView::node`]).
    pub node: String,
    /// Why the node announces nothing at all, if it does not.
    pub excluded: Option<Exclusion>,
    /// The pool of the service's IPs, or why the speaker skips the service
    /// (then `bgp` and `l2` are empty).
    pub pool: Result<String, Skipped>,
    /// What the node does over BGP.
    pub bgp: Bgp,
    /// What the node does in layer 2 mode.
    pub l2: L2,
    /// What the decisions found inconsistent about this service or the
    /// node's sessions, as the speaker reports it.
    pub problems: Vec<Problem>,
}

/// Why the speaker leaves a service alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The view has no such service (the speaker's view holds only
    /// `LoadBalancer` Services).
    Unknown,
    /// Not `type: LoadBalancer`.
    NotLoadBalancer,
    /// Another `loadBalancerClass` than the speaker's (its class, if any).
    OtherClass(Option<String>),
    /// No IP in `status.loadBalancer.ingress` yet.
    NoIngress,
    /// Its IPs are not all in one pool.
    NoPool,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("no such LoadBalancer Service"),
            Self::NotLoadBalancer => f.write_str("not type LoadBalancer"),
            Self::OtherClass(Some(c)) => write!(f, "loadBalancerClass {c:?} is not the speaker's"),
            Self::OtherClass(None) => f.write_str("no loadBalancerClass, and the speaker has one"),
            Self::NoIngress => f.write_str("no IP in status.loadBalancer.ingress yet"),
            Self::NoPool => f.write_str("its IPs are not within a single IPAddressPool"),
        }
    }
}

/// One node's BGP decision for a service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bgp {
    /// Every BGPPeer, and whether this node runs a session with it.
    pub sessions: Vec<Session>,
    /// Every BGPAdvertisement, and what of it selects.
    pub advertisements: Vec<Selection>,
    /// Why the node sends none of the service's routes, if so.
    pub withheld: Option<Withheld>,
    /// The routes the service asks of each peer, by peer then prefix.
    pub routes: Vec<Route>,
}

/// A BGPPeer as one node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The BGPPeer's name.
    pub peer: String,
    /// Whether the node runs the session, and why not.
    pub state: SessionState,
}

/// Whether a node runs a session with a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// It does.
    Runs {
        /// The peer's address and port, or the interface of an
        /// unnumbered peer.
        target: PeerTarget,
        /// Same AS: LOCAL_PREF goes there.
        ibgp: bool,
    },
    /// The peer's `nodeSelectors` (as written) do not match the node.
    NotSelected(String),
    /// The peer's configuration cannot be used on this node: the problems.
    Unusable(Vec<String>),
}

/// What an advertisement selects of a service's pool, a node and the
/// service ([`Scope`]); it applies when all three hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The advertisement's name.
    pub name: String,
    /// It selects the pool of the service's IPs.
    pub pool: bool,
    /// It selects the node (`nodeSelectors`).
    pub node: bool,
    /// It selects the service (`serviceSelectors`).
    pub service: bool,
}

impl Selection {
    fn of(
        name: &str,
        scope: &Scope,
        pool: &Pool,
        node_labels: &Labels,
        service_labels: &Labels,
    ) -> Self {
        Self {
            name: name.to_owned(),
            pool: scope.selects_pool(pool),
            node: scope.selects_node(node_labels),
            service: scope.selects_service(service_labels),
        }
    }

    /// Whether the advertisement applies.
    pub fn applies(&self) -> bool {
        self.pool && self.node && self.service
    }
}

/// One route a service asks of one peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The BGPPeer's name.
    pub peer: String,
    /// The prefix, as the session carries it.
    pub prefix: String,
    /// LOCAL_PREF (iBGP peers only).
    pub local_pref: Option<u32>,
    /// COMMUNITIES, as `high:low`.
    pub communities: Vec<String>,
    /// LARGE_COMMUNITY, as `a:b:c`.
    pub large_communities: Vec<String>,
    /// Whether the node sends it: a route is withheld from a peer when the
    /// services that share the prefix ask for different LOCAL_PREFs (the
    /// problem says so). The attributes of a sent route are the merged
    /// ones, other services' communities included.
    pub sent: bool,
}

/// One node's layer 2 decision for a service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct L2 {
    /// Every L2Advertisement, and what of it selects.
    pub advertisements: Vec<Selection>,
    /// Why the service has no election, if so.
    pub withheld: Option<L2Withheld>,
    /// This node in the election: its preference score, or why it is no
    /// candidate; `None` when there is no election.
    pub candidacy: Option<Result<i64, NotCandidate>>,
    /// The election as this node computes it: candidates best first.
    pub election: Option<Election>,
    /// Where this node answers for the service's IPs; `None` when it does
    /// not (lost, excluded, no election, or yielded).
    pub interfaces: Option<Interfaces>,
    /// While isolated: the Ready node this node leaves the service to.
    pub yielded: Option<String>,
}

/// Why `view.node` does or does not announce `service`, from the same
/// functions the speaker decides with.
pub fn explain(view: &ClusterView, service: &ObjectKey) -> Explanation {
    let mut problems = Vec::new();
    let excluded = view.exclusion(&view.node);
    let Some(svc) = view.services.iter().find(|s| s.key == *service) else {
        return Explanation {
            node: view.node.clone(),
            excluded,
            pool: Err(Skipped::Unknown),
            bgp: Bgp::default(),
            l2: L2::default(),
            problems,
        };
    };
    let pool = handled(view, svc, &mut problems);
    let Ok(pool) = pool else {
        return Explanation {
            node: view.node.clone(),
            excluded,
            pool: pool.map(|p| p.name.clone()),
            bgp: Bgp::default(),
            l2: L2::default(),
            problems,
        };
    };
    // BGP: the sessions and what this service asks of them.
    let mut session_problems = Vec::new();
    let ctx = BgpContext::new(view, &mut session_problems);
    let node_labels = view
        .this_node()
        .map(|n| n.labels.clone())
        .unwrap_or_default();
    let sessions = view
        .model
        .peers
        .iter()
        .map(|peer| {
            let state = if !peer.nodes.matches(&node_labels) {
                SessionState::NotSelected(peer.nodes.to_string())
            } else if let Some(p) = ctx.peers.get(&peer.name) {
                SessionState::Runs {
                    target: p.target.clone(),
                    ibgp: p.ibgp,
                }
            } else {
                SessionState::Unusable(
                    session_problems
                        .iter()
                        .filter(|p| p.kind == "BGPPeer" && p.name == peer.name)
                        .map(ToString::to_string)
                        .collect(),
                )
            };
            Session {
                peer: peer.name.clone(),
                state,
            }
        })
        .collect();
    let bgp_ads = view
        .model
        .bgp_advertisements
        .iter()
        .map(|ad| Selection::of(&ad.name, &ad.scope, pool, &node_labels, &svc.labels))
        .collect();
    let withheld = ctx.advertisements(svc, pool).err();
    // Its one problem, a LOCAL_PREF conflict, is `withheld` already.
    let asked = ctx.service_routes(svc, pool, &mut Vec::new());
    // What the node sends after merging every service's routes.
    let plan = bgp_plan(view);
    let key_text = service.to_string();
    problems.extend(
        plan.problems
            .iter()
            .filter(|p| p.kind == "BGPPeer" && p.field == "routes" && p.message.contains(&key_text))
            .cloned(),
    );
    let routes = asked
        .iter()
        .map(|((peer, prefix), pending)| {
            let merged = plan.peers.get(&**peer).and_then(|p| p.routes.get(prefix));
            let own = pending.resolve(peer, *prefix, [service].into_iter()).ok();
            let attrs = merged.map(|a| &**a).or(own.as_ref());
            Route {
                peer: peer.to_string(),
                prefix: prefix.to_string(),
                local_pref: attrs.and_then(|a| a.local_pref),
                communities: attrs
                    .map(|a| a.communities.iter().map(ToString::to_string).collect())
                    .unwrap_or_default(),
                large_communities: attrs
                    .map(|a| {
                        a.large_communities
                            .iter()
                            .map(ToString::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                sent: merged.is_some(),
            }
        })
        .collect();
    problems.extend(
        session_problems
            .into_iter()
            .filter(|p| p.kind != "BGPPeer" || view.model.peers.iter().all(|x| x.name != p.name)),
    );

    // Layer 2: the election and this node's place in it.
    let l2_ctx = L2Context::new(view);
    let l2_ads = view
        .model
        .l2_advertisements
        .iter()
        .map(|ad| Selection::of(&ad.name, &ad.scope, pool, &node_labels, &svc.labels))
        .collect();
    let mut l2 = L2 {
        advertisements: l2_ads,
        ..L2::default()
    };
    match l2_ctx.advertisements(svc, pool) {
        Err(why) => l2.withheld = Some(why),
        Ok(ads) => {
            l2.candidacy = Some(if svc.has_serving_endpoint() {
                let with_endpoints: BTreeSet<&str> = svc.nodes_with_serving_endpoints();
                l2_ctx.candidacy(svc, &ads, &with_endpoints, &view.node)
            } else {
                Err(NotCandidate::NoServingEndpoint)
            });
        }
    }
    if let Some(d) = l2_ctx.service(svc, pool, &mut problems) {
        l2.election = Some(d.election);
        l2.interfaces = d.interfaces;
        l2.yielded = d.yielded;
    }

    Explanation {
        node: view.node.clone(),
        excluded,
        pool: Ok(pool.name.clone()),
        bgp: Bgp {
            sessions,
            advertisements: bgp_ads,
            withheld,
            routes,
        },
        l2,
        problems,
    }
}

#[cfg(test)]
mod tests;
