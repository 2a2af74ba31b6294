//! Layer 2 decisions: which node answers ARP/NDP for each service IP, and
//! whether that is this node. Pure: no I/O, no clock.

use std::cell::OnceCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use api::model::{L2Advertisement, Pool};
use api::validate::Problem;
use sha2::{Digest, Sha256};

use super::coexist::{Deferral, l2_deferral};
use super::view::{ApiSpeakers, ClusterView, Exclusion, Node, ObjectKey, Service, TrafficPolicy};
use super::{Assigned, assigned, service_problem};

/// What this node does in layer 2 mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct L2Plan {
    /// The IPs this node answers for, with the interfaces to answer on.
    pub announce: BTreeMap<IpAddr, L2Announcement>,
    /// The election of every layer 2 service, won here or elsewhere
    /// (ServiceL2Status, logs).
    pub elections: BTreeMap<ObjectKey, Election>,
    /// Set when this node announces nothing, whatever the elections say.
    pub excluded: Option<Exclusion>,
    /// While isolated: how many speakers the API shows Ready that memberlist
    /// cannot reach, counted as candidates anyway.
    pub api_candidates: usize,
    /// While isolated: services this node wins but leaves to the node the
    /// API shows answering for them (a Ready speaker).
    pub yielded: BTreeMap<ObjectKey, String>,
    /// While MetalLB speakers remain (`--metallb-speaker-labels`): services
    /// this node wins but leaves to MetalLB ([`super::coexist`]).
    pub deferred: BTreeMap<ObjectKey, Deferral>,
    /// What was inconsistent, and skipped.
    pub problems: Vec<Problem>,
}

/// One IP this node answers for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2Announcement {
    /// Where to answer.
    pub interfaces: Interfaces,
    /// The services that have this IP (more than one when shared).
    pub services: BTreeSet<ObjectKey>,
}

/// The interfaces to answer on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interfaces {
    /// Every interface (an advertisement without `interfaces`).
    All,
    /// Only these.
    Only(BTreeSet<String>),
}

impl Interfaces {
    pub(super) fn union(&mut self, other: &Self) {
        match (&mut *self, other) {
            (Self::All, _) => {}
            (Self::Only(_), Self::All) => *self = Self::All,
            (Self::Only(mine), Self::Only(theirs)) => mine.extend(theirs.iter().cloned()),
        }
    }
}

/// The outcome of one service's election.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Election {
    /// The service's IPs; all of them go to the winner.
    pub ips: Vec<IpAddr>,
    /// The eligible nodes, best first: the first one wins. All of them in
    /// [`l2_plan`] and explanations; the speaker's kept decisions
    /// ([`super::Keyed`]) hold the winner alone, since
    /// with a speaker on each of thousands of nodes every candidate of every
    /// service would be thousands of names per service.
    pub candidates: Vec<String>,
}

/// How many candidates, best first, the speaker keeps per election: the
/// winner. (`kubectl ferrolb explain` computes the whole order itself.)
pub(super) const KEPT_CANDIDATES: usize = 1;

impl Election {
    /// The node that announces the service, if any is eligible.
    pub fn winner(&self) -> Option<&str> {
        self.candidates.first().map(String::as_str)
    }
}

/// Elects the announcing node of every layer 2 service and returns what
/// this node announces.
///
/// As MetalLB's `layer2Controller.ShouldAnnounce`: the L2Advertisements of
/// a service are those selecting its pool and the service. A service with
/// no serving endpoint anywhere has no candidates. Candidates are the live
/// memberlist members (every node in the view when memberlist is off) that
/// are in the view, are not excluded ([`ClusterView::exclusion`]), match
/// the `nodeSelectors` of one of the service's advertisements, and, under
/// `externalTrafficPolicy: Local`, have a serving endpoint. They are
/// ordered by preference score (for each advertisement that selects the
/// node, the weights of its matching `preferredNodeSelectors`, summed over
/// advertisements), higher first, then by `sha256(node + "#" + ip)`
/// ascending, `ip` being the service's first ingress IP: every speaker
/// computes the same order, and a node's loss moves only its own services.
/// The winner announces every IP of the service on the interfaces of the
/// service's advertisements that select it (all when one lists none).
///
/// A shared IP (`metallb.io/allow-shared-ip`) with service selectors on
/// its advertisements is reported and not announced, as MetalLB refuses
/// it: the sharing services could elect different nodes.
pub fn l2_plan(view: &ClusterView) -> L2Plan {
    let ctx = L2Context::new(view);
    let mut plan = L2Plan {
        excluded: ctx.excluded,
        api_candidates: ctx.api_candidates,
        ..L2Plan::default()
    };
    for Assigned { svc, pool } in assigned(view, &mut plan.problems) {
        let Some(d) = ctx.service(svc, pool, &mut plan.problems) else {
            continue;
        };
        plan.elections.insert(svc.key.clone(), d.election);
        if let Some(node) = d.yielded {
            plan.yielded.insert(svc.key.clone(), node);
        }
        if let Some(why) = d.deferred {
            plan.deferred.insert(svc.key.clone(), why);
        }
        let Some(interfaces) = d.interfaces else {
            continue;
        };
        for &ip in &svc.ingress {
            match plan.announce.get_mut(&ip) {
                Some(a) => {
                    a.interfaces.union(&interfaces);
                    a.services.insert(svc.key.clone());
                }
                None => {
                    plan.announce.insert(
                        ip,
                        L2Announcement {
                            interfaces: interfaces.clone(),
                            services: BTreeSet::from([svc.key.clone()]),
                        },
                    );
                }
            }
        }
    }
    plan
}

/// One service's layer 2 decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ServiceL2 {
    /// Its election, won here or elsewhere.
    pub(super) election: Election,
    /// Where this node answers for every IP of the service; `None` when
    /// it does not (lost, excluded, or yielded).
    pub(super) interfaces: Option<Interfaces>,
    /// While isolated: the Ready node this node leaves the service to.
    pub(super) yielded: Option<String>,
    /// While MetalLB speakers remain: why this node leaves the service to
    /// them.
    pub(super) deferred: Option<Deferral>,
}

/// What every service's layer 2 decision on this node shares.
pub(super) struct L2Context<'a> {
    view: &'a ClusterView,
    /// The candidates of every election, before a service's own filters.
    speakers: BTreeSet<&'a str>,
    /// Of `speakers`, in their order, those in the view and not excluded,
    /// with their Node: what a service's own filters start from. Built at
    /// the first election that walks them (one with
    /// `externalTrafficPolicy: Cluster`), once per context, instead of a
    /// map lookup and an exclusion check per speaker per service.
    eligible: OnceCell<Vec<(&'a str, &'a Node)>>,
    /// The API's speakers, used while isolated only.
    api: Option<&'a ApiSpeakers>,
    /// See [`L2Plan::api_candidates`].
    pub(super) api_candidates: usize,
    /// Set when this node announces nothing.
    pub(super) excluded: Option<Exclusion>,
    /// How many candidates, best first, an election keeps.
    keep: usize,
}

impl<'a> L2Context<'a> {
    /// Elections that keep every candidate (whole plans, explanations).
    pub(super) fn new(view: &'a ClusterView) -> Self {
        Self::keeping(view, usize::MAX)
    }

    /// Elections that keep the best `keep` candidates (at least the
    /// winner): the speaker's kept decisions.
    pub(super) fn keeping(view: &'a ClusterView, keep: usize) -> Self {
        let mut speakers: BTreeSet<&str> = match &view.members {
            Some(members) => members.iter().map(String::as_str).collect(),
            None => view.nodes.keys().map(String::as_str).collect(),
        };
        // An isolated node cannot tell the others dead from unheard. It
        // elects among the speakers the API shows Ready, so it takes over
        // nothing they can serve, and it leaves what it wins to a Ready
        // speaker the API shows answering for it (the others, who see it
        // gone, took it over).
        let api = view
            .api_speakers
            .as_deref()
            .filter(|_| view.isolated && view.members.is_some());
        let mut api_candidates = 0;
        if let Some(api) = api {
            let before = speakers.len();
            speakers.extend(api.ready.iter().map(String::as_str));
            api_candidates = speakers.len() - before;
        }
        Self {
            view,
            speakers,
            eligible: OnceCell::new(),
            api,
            api_candidates,
            excluded: view.exclusion(&view.node),
            keep: keep.max(1),
        }
    }

    /// One service's election and what this node does for it; `None`
    /// when no L2Advertisement selects it, or (reported in `problems`)
    /// when its shared IP cannot be announced.
    pub(super) fn service(
        &self,
        svc: &Service,
        pool: &Pool,
        problems: &mut Vec<Problem>,
    ) -> Option<ServiceL2> {
        let view = self.view;
        let ads = match self.advertisements(svc, pool) {
            Ok(ads) => ads,
            Err(L2Withheld::SharedIpWithServiceSelectors) => {
                problems.push(service_problem(
                    svc,
                    "metadata.annotations[metallb.io/allow-shared-ip]",
                    "a shared IP cannot be announced by L2Advertisements with serviceSelectors",
                ));
                return None;
            }
            Err(L2Withheld::NoAdvertisement) => return None,
        };
        let mut candidates: Vec<(Reverse<i64>, [u8; 32], &str)> = Vec::new();
        if svc.has_serving_endpoint() {
            let with_endpoints = svc.nodes_with_serving_endpoints();
            // The first IP seeds the order, so that both IPs of a
            // dual-stack service go to one node, as in MetalLB.
            let seed = svc.ingress[0].to_string();
            let mut push = |score: i64, name: &'a str| {
                candidates.push((Reverse(score), order(name, &seed), name));
            };
            // The same candidates as [`Self::candidacy`] of every speaker,
            // in the same order (by name), without walking every speaker
            // for a service: under `externalTrafficPolicy: Local` only the
            // nodes with a serving endpoint can be, and otherwise the
            // speakers in the view and not excluded are known once for all
            // services.
            if svc.external_traffic_policy == TrafficPolicy::Local {
                for &name in &with_endpoints {
                    let Some(&name) = self.speakers.get(name) else {
                        continue;
                    };
                    if let Ok(score) = self.candidacy(svc, &ads, &with_endpoints, name) {
                        push(score, name);
                    }
                }
            } else {
                for &(name, node) in self.eligible() {
                    if let Some(score) = preference(&ads, node) {
                        push(score, name);
                    }
                }
            }
        }
        // Best first: the best `keep` found in linear time, then sorted
        // (names are distinct, so no two candidates are equal).
        if candidates.len() > self.keep {
            candidates.select_nth_unstable(self.keep - 1);
            candidates.truncate(self.keep);
        }
        candidates.sort_unstable();
        let mut out = ServiceL2 {
            election: Election {
                ips: svc.ingress.to_vec(),
                candidates: candidates.iter().map(|c| c.2.to_owned()).collect(),
            },
            ..ServiceL2::default()
        };
        let won = out.election.winner() == Some(view.node.as_str());
        if !won || self.excluded.is_some() {
            return Some(out);
        }
        if let Some(metallb) = view.api_speakers.as_ref().and_then(|a| a.metallb.as_ref()) {
            let with_endpoints = svc.nodes_with_serving_endpoints();
            let seed = svc.ingress[0].to_string();
            out.deferred = l2_deferral(metallb, &svc.key, &seed, |n| {
                svc.has_serving_endpoint()
                    && self.eligibility(svc, &ads, &with_endpoints, n).is_ok()
            });
            if out.deferred.is_some() {
                return Some(out);
            }
        }
        if let Some(other) = self.api.and_then(|api| {
            api.l2_announcers
                .get(&svc.key)?
                .iter()
                .find(|n| **n != view.node && api.ready.contains(*n))
        }) {
            out.yielded = Some(other.clone());
            return Some(out);
        }
        let Some(me) = view.this_node() else {
            return Some(out);
        };
        for ad in ads.iter().filter(|ad| ad.scope.selects_node(&me.labels)) {
            let these = if ad.interfaces.is_empty() {
                Interfaces::All
            } else {
                Interfaces::Only(ad.interfaces.clone())
            };
            match &mut out.interfaces {
                Some(i) => i.union(&these),
                None => out.interfaces = Some(these),
            }
        }
        // The winner matched some advertisement's node selectors, so
        // `interfaces` is set.
        Some(out)
    }
}

impl<'a> L2Context<'a> {
    /// The L2Advertisements that select `svc` (of `pool`), or why it has
    /// no election.
    pub(super) fn advertisements(
        &self,
        svc: &Service,
        pool: &Pool,
    ) -> Result<Vec<&'a L2Advertisement>, L2Withheld> {
        let ads: Vec<&L2Advertisement> = self
            .view
            .model
            .l2_advertisements
            .iter()
            .filter(|ad| ad.scope.selects_pool(pool) && ad.scope.selects_service(&svc.labels))
            .collect();
        if ads.is_empty() {
            return Err(L2Withheld::NoAdvertisement);
        }
        if svc.shared_ip_key().is_some() && ads.iter().any(|ad| !ad.scope.services.is_empty()) {
            return Err(L2Withheld::SharedIpWithServiceSelectors);
        }
        Ok(ads)
    }

    /// Whether node `name` is a candidate in the election of `svc`, whose
    /// advertisements are `ads` and whose serving endpoints are on
    /// `with_endpoints`: its preference score, or why not. The caller
    /// checks first that the service has a serving endpoint at all.
    pub(super) fn candidacy(
        &self,
        svc: &Service,
        ads: &[&L2Advertisement],
        with_endpoints: &BTreeSet<&str>,
        name: &str,
    ) -> Result<i64, NotCandidate> {
        if !self.speakers.contains(name) {
            return Err(NotCandidate::NotMember);
        }
        self.eligibility(svc, ads, with_endpoints, name)
    }

    /// [`Self::candidacy`] without the question of who runs on the node:
    /// whether the service's rules allow it.
    pub(super) fn eligibility(
        &self,
        svc: &Service,
        ads: &[&L2Advertisement],
        with_endpoints: &BTreeSet<&str>,
        name: &str,
    ) -> Result<i64, NotCandidate> {
        let view = self.view;
        let Some(node) = view.nodes.get(name) else {
            return Err(NotCandidate::NotInView);
        };
        if let Some(e) = view.exclusion(name) {
            return Err(NotCandidate::Excluded(e));
        }
        let Some(score) = preference(ads, node) else {
            return Err(NotCandidate::NodeSelectors);
        };
        if svc.external_traffic_policy == TrafficPolicy::Local && !with_endpoints.contains(name) {
            return Err(NotCandidate::NoLocalEndpoint);
        }
        Ok(score)
    }

    /// Whether a change of the nodes `changed` alone (their Node objects
    /// or memberlist membership; the rest of the view as it was) can move
    /// `election`, this context's service `svc` of `pool` as decided
    /// before: its winner is one of them or no longer a candidate, or one
    /// of them is now a candidate ranking before the winner (or the only
    /// one). What ranks after the winner does not count: the speaker keeps
    /// the winner alone ([`KEPT_CANDIDATES`]).
    pub(super) fn moved_by(
        &self,
        svc: &Service,
        pool: &Pool,
        election: &Election,
        changed: &BTreeSet<String>,
    ) -> bool {
        let winner = election.winner();
        if winner.is_some_and(|w| changed.contains(w)) {
            return true;
        }
        let Ok(ads) = self.advertisements(svc, pool) else {
            // It has an election, so it had advertisements; the model is
            // the same. Decide it again rather than reason about it.
            return true;
        };
        if !svc.has_serving_endpoint() {
            // No candidate at all, whatever the nodes.
            return winner.is_some();
        }
        let with_endpoints = svc.nodes_with_serving_endpoints();
        let seed = svc.ingress[0].to_string();
        let rank = |name: &str| {
            self.candidacy(svc, &ads, &with_endpoints, name)
                .ok()
                .map(|score| (Reverse(score), order(name, &seed)))
        };
        let best = match winner {
            Some(w) => match rank(w) {
                Some(r) => Some(r),
                None => return true,
            },
            None => None,
        };
        changed
            .iter()
            .filter_map(|n| rank(n))
            .any(|r| best.is_none_or(|b| r < b))
    }

    /// The speakers in the view and not excluded, with their Node, in
    /// name order (found at the first call, kept in the field of this
    /// name).
    fn eligible(&self) -> &[(&'a str, &'a Node)] {
        self.eligible.get_or_init(|| {
            let view = self.view;
            self.speakers
                .iter()
                .filter_map(|&name| Some((name, view.nodes.get_key_value(name)?)))
                .filter(|(_, (name, _))| view.exclusion(name).is_none())
                .map(|(name, (_, node))| (name, node))
                .collect()
        })
    }
}

/// A candidate's place among equal scores: `sha256(node + "#" + seed)`,
/// MetalLB's order, hashed without building the text.
fn order(node: &str, seed: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(node.as_bytes());
    h.update(b"#");
    h.update(seed.as_bytes());
    h.finalize().into()
}

/// The preference score of `node` in an election of advertisements `ads`
/// (the weights of the matching `preferredNodeSelectors` of each one whose
/// `nodeSelectors` select it, summed), or `None` when none selects it.
fn preference(ads: &[&L2Advertisement], node: &Node) -> Option<i64> {
    let mut selected = false;
    let mut score = 0;
    for ad in ads.iter().filter(|ad| ad.scope.selects_node(&node.labels)) {
        selected = true;
        score += ad.preference(&node.labels);
    }
    selected.then_some(score)
}

/// Why a service has no layer 2 election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L2Withheld {
    /// No L2Advertisement selects its pool and the service.
    NoAdvertisement,
    /// Its IP is shared (`allow-shared-ip`) and one of its advertisements
    /// has `serviceSelectors`: the sharing services could elect different
    /// nodes, so MetalLB announces it nowhere.
    SharedIpWithServiceSelectors,
}

impl fmt::Display for L2Withheld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoAdvertisement => "no L2Advertisement selects the pool and the service",
            Self::SharedIpWithServiceSelectors => {
                "a shared IP cannot be announced by L2Advertisements with serviceSelectors"
            }
        })
    }
}

/// Why a node is not a candidate in a service's layer 2 election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCandidate {
    /// Not a live memberlist member (while isolated: nor a speaker the API
    /// shows Ready).
    NotMember,
    /// No Node object of that name.
    NotInView,
    /// The node announces nothing.
    Excluded(Exclusion),
    /// None of the service's advertisements selects the node
    /// (`nodeSelectors`).
    NodeSelectors,
    /// `externalTrafficPolicy: Local` and no serving endpoint on the node.
    NoLocalEndpoint,
    /// The service has no serving endpoint anywhere: no node is.
    NoServingEndpoint,
}

impl fmt::Display for NotCandidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotMember => f.write_str("no live speaker on the node"),
            Self::NotInView => f.write_str("no such Node"),
            Self::Excluded(e) => write!(f, "the node is excluded: {e}"),
            Self::NodeSelectors => {
                f.write_str("the nodeSelectors of the service's L2Advertisements do not match it")
            }
            Self::NoLocalEndpoint => f.write_str(
                "externalTrafficPolicy is Local and no serving endpoint is on this node",
            ),
            Self::NoServingEndpoint => f.write_str("the service has no serving endpoint"),
        }
    }
}

#[cfg(test)]
mod tests;
