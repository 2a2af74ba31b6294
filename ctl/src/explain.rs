//! `kubectl ferrolb explain svc/NAME`: the story of one Service, from the
//! controller's allocation to each node's announcement.
//!
//! Pure: built from a [`Snapshot`] and the Service's Events. The
//! controller's part is its state after the startup replay
//! ([`Snapshot::controller`]): the outcome as `controller plan` prints it,
//! and every pool as the allocator weighs it
//! ([`controller::state::State::consider`]). Each node's part is
//! [`speaker::announce::explain::explain`] on the view that node's speaker
//! decides from ([`Snapshot::view`]). Beside them, what the programs
//! wrote: the Service's status, ServiceL2Status, ServiceBGPStatus, Events.

use std::collections::{BTreeMap, BTreeSet};

use api::model::ObjectKey;
use controller::alloc::{Considered, Eligibility, Offer};
use controller::convert;
use controller::plan::{ServicePlan, service_plan};
use controller::state::Outcome;
use k8s_openapi::api::core::v1::Event;
use serde::Serialize;
use speaker::announce::Interfaces;
use speaker::announce::explain::{self as decide, Explanation, Selection, SessionState};

use crate::Settings;
use crate::cluster::Snapshot;
use crate::status::{EventView, speaker_state};
use crate::table::{cell, render};

/// The whole story.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explain {
    /// `namespace/name`.
    pub service: String,
    /// `spec.type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: String,
    /// The IPs of `status.loadBalancer.ingress`.
    pub ingress: Vec<String>,
    /// What the controller decides.
    pub controller: ControllerPart,
    /// Why the speakers leave the Service alone, when they do (the same
    /// on every node); then `nodes` is empty.
    pub skipped: Option<String>,
    /// What each node's speaker decides, by node name.
    pub nodes: Vec<NodePart>,
    /// The BGPAdvertisements for the Service's pool and the Service.
    pub bgp: BgpSummary,
    /// The layer 2 election and who answers.
    pub l2: L2Part,
    /// The peers each node's ServiceBGPStatus names, by node.
    pub bgp_status: BTreeMap<String, Vec<String>>,
    /// The Service's Events, oldest first (the last ten).
    pub events: Vec<EventView>,
    /// What the decisions found inconsistent.
    pub problems: Vec<String>,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// The controller's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerPart {
    /// The outcome, as `controller plan` prints it.
    pub outcome: ServicePlan,
    /// Every pool, in the order the allocator tries them, then the refused
    /// ones; empty when the Service is not the controller's.
    pub pools: Vec<PoolPart>,
}

/// One pool as the allocator weighs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolPart {
    /// The pool.
    pub pool: String,
    /// `requested`, `annotated`, `selected`, `general` or `refused`.
    pub verdict: &'static str,
    /// `serviceAllocation.priority`, for a pool that selects the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Why it is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Per address asked for, what the pool has.
    pub offers: Vec<String>,
}

/// The BGPAdvertisements as they select the Service (the same on every
/// node; each node's own are in [`BgpPart`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BgpSummary {
    /// Those that select the Service's pool and the Service.
    pub advertisements: Vec<String>,
    /// Those that do not, and what they do not select.
    pub not_selecting: Vec<String>,
}

/// One node's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePart {
    /// The Node.
    pub node: String,
    /// Its speaker Pod: `Ready`, `NotReady` or `None`.
    pub speaker: String,
    /// Why it announces nothing at all.
    pub excluded: Option<String>,
    /// BGP.
    pub bgp: BgpPart,
    /// Layer 2.
    pub l2: L2NodePart,
}

/// One node's BGP decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BgpPart {
    /// Why it sends none of the Service's routes.
    pub withheld: Option<String>,
    /// The BGPAdvertisements that apply (pool, node and Service).
    pub advertisements: Vec<String>,
    /// Those that select the pool and the Service but not this node
    /// (`nodeSelectors`).
    pub node_not_selected: Vec<String>,
    /// The BGPPeers it has no session with, and why.
    pub no_session: Vec<String>,
    /// The routes, by peer and prefix.
    pub routes: Vec<RoutePart>,
}

/// One route to one peer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutePart {
    /// The BGPPeer.
    pub peer: String,
    /// The prefix.
    pub prefix: String,
    /// LOCAL_PREF (iBGP only).
    pub local_pref: Option<u32>,
    /// Communities.
    pub communities: Vec<String>,
    /// Large communities.
    pub large_communities: Vec<String>,
    /// Sent (false: withheld, see the problems).
    pub sent: bool,
}

/// One node in the layer 2 election.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct L2NodePart {
    /// Its place among the candidates (1 wins).
    pub rank: Option<usize>,
    /// Why it is not a candidate.
    pub not_candidate: Option<String>,
    /// Where it answers: `["*"]` for every interface; empty when it does
    /// not answer.
    pub answers_on: Vec<String>,
    /// While isolated: the node it leaves the Service to.
    pub yields_to: Option<String>,
}

/// The layer 2 election.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct L2Part {
    /// Why there is none.
    pub withheld: Option<String>,
    /// The L2Advertisements that select the pool and the Service.
    pub advertisements: Vec<String>,
    /// Those that do not, and what they do not select.
    pub not_selecting: Vec<String>,
    /// The candidates, best first: the first wins.
    pub candidates: Vec<String>,
    /// The nodes whose ServiceL2Status says they answer.
    pub answering: Vec<String>,
}

/// Why no story can be told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotFound(pub String);

/// Tells the story of `key`, with its `events` (oldest first).
pub fn build(
    snap: &Snapshot,
    settings: &Settings,
    key: &ObjectKey,
    events: &[Event],
) -> Result<Explain, NotFound> {
    let Some(svc) = snap.services.iter().find(|s| {
        s.metadata.namespace.as_deref() == Some(&*key.namespace)
            && s.metadata.name.as_deref() == Some(&*key.name)
    }) else {
        return Err(NotFound(format!("service {key} not found")));
    };
    let spec = svc.spec.clone().unwrap_or_default();
    let (state, outcomes) = snap.controller(settings);
    let outcome = outcomes
        .into_iter()
        .find(|(s, _)| std::ptr::eq(*s, svc))
        .map_or(Outcome::NotLoadBalancer, |(_, o)| o);
    let controller = ControllerPart {
        outcome: service_plan(key.to_string(), outcome),
        pools: state
            .consider(svc)
            .unwrap_or_default()
            .iter()
            .map(pool_part)
            .collect(),
    };

    let (model, _) = snap.model();
    let speakers = snap.speakers();
    let with_pod = snap.speaker_nodes();
    let mut problems = BTreeSet::new();
    let mut explanations = Vec::new();
    for node in snap.nodes.iter().filter_map(|n| n.metadata.name.as_deref()) {
        let view = snap.view(node, model.clone(), settings, &speakers);
        let e = decide::explain(&view, key);
        problems.extend(e.problems.iter().map(ToString::to_string));
        explanations.push(e);
    }
    let skipped = explanations
        .first()
        .and_then(|e| e.pool.as_ref().err())
        .map(ToString::to_string);
    let mut l2 = L2Part {
        answering: snap
            .l2_announcers()
            .get(key)
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default(),
        ..L2Part::default()
    };
    let mut bgp = BgpSummary::default();
    if let Some(e) = explanations.first().filter(|e| e.pool.is_ok()) {
        (bgp.advertisements, bgp.not_selecting) = selecting(&e.bgp.advertisements);
        (l2.advertisements, l2.not_selecting) = selecting(&e.l2.advertisements);
        l2.withheld = e.l2.withheld.map(|w| w.to_string());
        l2.candidates =
            e.l2.election
                .as_ref()
                .map(|el| el.candidates.clone())
                .unwrap_or_default();
    }
    let nodes = if skipped.is_some() {
        Vec::new()
    } else {
        explanations
            .iter()
            .map(|e| node_part(e, speaker_state(&e.node, &speakers.ready, &with_pod)))
            .collect()
    };
    let mut bgp_status: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for st in snap.bgp_statuses.iter().filter_map(|s| s.status.as_ref()) {
        if *st.service_namespace == *key.namespace && *st.service_name == *key.name {
            let peers = bgp_status.entry(st.node.clone()).or_default();
            peers.extend(st.peers.iter().cloned());
            peers.sort();
            peers.dedup();
        }
    }
    let events = events
        .iter()
        .skip(events.len().saturating_sub(MAX_EVENTS))
        .map(EventView::of)
        .collect();
    Ok(Explain {
        service: key.to_string(),
        type_: spec.type_.unwrap_or_else(|| "ClusterIP".into()),
        external_traffic_policy: spec
            .external_traffic_policy
            .unwrap_or_else(|| "Cluster".into()),
        ingress: convert::ingress_ips(svc),
        controller,
        skipped,
        nodes,
        bgp,
        l2,
        bgp_status,
        events,
        problems: problems.into_iter().collect(),
        notes: snap.notes.clone(),
    })
}

/// The advertisements that select the pool and the Service, and what the
/// others do not select.
fn selecting(ads: &[Selection]) -> (Vec<String>, Vec<String>) {
    let (yes, no): (Vec<&Selection>, Vec<&Selection>) =
        ads.iter().partition(|s| s.pool && s.service);
    let no = no
        .iter()
        .map(|s| {
            let missing = match (s.pool, s.service) {
                (false, false) => "the pool or the service",
                (false, true) => "the pool",
                _ => "the service",
            };
            format!("{} does not select {missing}", s.name)
        })
        .collect();
    (yes.iter().map(|s| s.name.clone()).collect(), no)
}

fn pool_part(c: &Considered) -> PoolPart {
    let (verdict, priority, reason) = match &c.eligibility {
        Eligibility::Requested => ("requested", None, None),
        Eligibility::Annotated => ("annotated", None, None),
        Eligibility::Selected { priority } => ("selected", Some(*priority), None),
        Eligibility::General => ("general", None, None),
        Eligibility::Refused(r) => ("refused", None, Some(r.to_string())),
    };
    PoolPart {
        pool: c.pool.clone(),
        verdict,
        priority,
        reason,
        offers: c
            .offers
            .iter()
            .map(|o| match o {
                Offer::Address(ip) => ip.to_string(),
                Offer::NoRange(f) => format!("no {} range", family(*f)),
                Offer::Full(f) => format!("no free {} address", family(*f)),
                Offer::InUse(ip) => format!("{ip} in use"),
            })
            .collect(),
    }
}

fn family(f: controller::alloc::Family) -> &'static str {
    match f {
        controller::alloc::Family::V4 => "IPv4",
        controller::alloc::Family::V6 => "IPv6",
    }
}

fn node_part(e: &Explanation, speaker: String) -> NodePart {
    let bgp = BgpPart {
        withheld: e.bgp.withheld.as_ref().map(ToString::to_string),
        advertisements: e
            .bgp
            .advertisements
            .iter()
            .filter(|s| s.applies())
            .map(|s| s.name.clone())
            .collect(),
        node_not_selected: e
            .bgp
            .advertisements
            .iter()
            .filter(|s| s.pool && s.service && !s.node)
            .map(|s| s.name.clone())
            .collect(),
        no_session: e
            .bgp
            .sessions
            .iter()
            .filter_map(|s| match &s.state {
                SessionState::Runs { .. } => None,
                SessionState::NotSelected(sel) => Some(format!(
                    "{}: its nodeSelectors {sel} do not match this node",
                    s.peer
                )),
                SessionState::Unusable(why) => {
                    Some(format!("{}: unusable: {}", s.peer, why.join("; ")))
                }
            })
            .collect(),
        routes: e
            .bgp
            .routes
            .iter()
            .map(|r| RoutePart {
                peer: r.peer.clone(),
                prefix: r.prefix.clone(),
                local_pref: r.local_pref,
                communities: r.communities.clone(),
                large_communities: r.large_communities.clone(),
                sent: r.sent,
            })
            .collect(),
    };
    let election = e.l2.election.as_ref();
    let l2 = L2NodePart {
        rank: election.and_then(|el| {
            el.candidates
                .iter()
                .position(|c| *c == e.node)
                .map(|i| i + 1)
        }),
        not_candidate: match &e.l2.candidacy {
            Some(Err(why)) => Some(why.to_string()),
            _ => None,
        },
        answers_on: match &e.l2.interfaces {
            None => Vec::new(),
            Some(Interfaces::All) => vec!["*".into()],
            Some(Interfaces::Only(names)) => names.iter().cloned().collect(),
        },
        yields_to: e.l2.yielded.clone(),
    };
    NodePart {
        node: e.node.clone(),
        speaker,
        excluded: e.excluded.map(|x| x.to_string()),
        bgp,
        l2,
    }
}

impl Explain {
    /// The story as text, one screen for a few nodes.
    pub fn table(&self) -> String {
        let mut out = format!(
            "Service: {} ({}, externalTrafficPolicy {})\nStatus IPs: {}\n",
            self.service,
            self.type_,
            self.external_traffic_policy,
            cell(&self.ingress)
        );
        let o = &self.controller.outcome;
        out.push_str(&format!("\nController: {}", o.status));
        if !o.ips.is_empty() {
            out.push_str(&format!(
                " {} from pool {}",
                o.ips.join(", "),
                o.pool.as_deref().unwrap_or("-")
            ));
        }
        if let Some(r) = o.reason {
            out.push_str(&format!(" ({r})"));
        }
        out.push('\n');
        if let Some(m) = &o.message {
            out.push_str(&format!("  {m}\n"));
        }
        for b in &o.breaks {
            out.push_str(&format!("  kept although {b}\n"));
        }
        if o.status == "assigned" && !same_ips(&o.ips, &self.ingress) {
            out.push_str(
                "  the Service's status differs: the controller has not written its decision\n",
            );
        }
        if !self.controller.pools.is_empty() {
            out.push_str("Pools, in the order the controller tries them:\n");
            let rows: Vec<Vec<String>> = self
                .controller
                .pools
                .iter()
                .map(|p| {
                    let verdict = match (p.priority, &p.reason) {
                        (Some(n), _) => format!("{} (priority {n})", p.verdict),
                        (None, Some(r)) => format!("{}: {r}", p.verdict),
                        (None, None) => p.verdict.to_owned(),
                    };
                    vec![p.pool.clone(), verdict, cell(&p.offers)]
                })
                .collect();
            out.push_str(&indent(&render(&["POOL", "VERDICT", "OFFERS"], &rows)));
        }

        out.push_str("\nSpeakers:\n");
        if let Some(s) = &self.skipped {
            out.push_str(&format!("  leave it alone: {s}\n"));
        } else {
            let has_bgp = !self.bgp.advertisements.is_empty();
            let has_l2 = self.l2.withheld.is_none();
            out.push_str(&format!(
                "  BGPAdvertisements for it: {}\n",
                selected_line(&self.bgp.advertisements, &self.bgp.not_selecting)
            ));
            out.push_str(&format!(
                "  L2Advertisements for it: {}\n",
                selected_line(&self.l2.advertisements, &self.l2.not_selecting)
            ));
            for n in &self.nodes {
                out.push_str(&format!("  {} (speaker {}", n.node, n.speaker));
                if n.excluded.is_some() {
                    out.push_str(", excluded");
                }
                out.push_str(")\n");
                if has_bgp {
                    out.push_str(&format!("    BGP: {}\n", bgp_line(&n.bgp)));
                    for ad in &n.bgp.node_not_selected {
                        out.push_str(&format!(
                            "         {ad}: its nodeSelectors do not match this node\n"
                        ));
                    }
                    for why in &n.bgp.no_session {
                        out.push_str(&format!("         {why}\n"));
                    }
                }
                if has_l2 {
                    out.push_str(&format!("    L2:  {}\n", l2_line(&n.l2)));
                }
                if !has_bgp && !has_l2 {
                    out.push_str("    announces nothing: no advertisement selects it\n");
                }
            }
            out.push_str("\nLayer 2: ");
            match &self.l2.withheld {
                Some(w) => out.push_str(&format!("no election: {w}\n")),
                None if self.l2.candidates.is_empty() => out.push_str("no candidate\n"),
                None => out.push_str(&format!(
                    "candidates {} (winner {})\n",
                    self.l2.candidates.join(", "),
                    self.l2.candidates[0]
                )),
            }
            out.push_str(&format!(
                "  answering per ServiceL2Status: {}\n",
                cell(&self.l2.answering)
            ));
            out.push_str("BGP per ServiceBGPStatus: ");
            if self.bgp_status.is_empty() {
                out.push_str("-\n");
            } else {
                let parts: Vec<String> = self
                    .bgp_status
                    .iter()
                    .map(|(node, peers)| format!("{node} -> {}", cell(peers)))
                    .collect();
                out.push_str(&format!("{}\n", parts.join("; ")));
            }
        }
        if !self.problems.is_empty() {
            out.push_str("\nProblems:\n");
            for p in &self.problems {
                out.push_str(&format!("  {p}\n"));
            }
        }
        out.push_str("\nEvents:");
        if self.events.is_empty() {
            out.push_str(" none\n");
        } else {
            out.push('\n');
            let rows: Vec<Vec<String>> = self
                .events
                .iter()
                .map(|e| {
                    vec![
                        e.time.clone().unwrap_or_else(|| "-".into()),
                        e.type_.clone(),
                        e.reason.clone(),
                        e.from.clone(),
                        e.message.clone(),
                    ]
                })
                .collect();
            out.push_str(&indent(&render(
                &["LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"],
                &rows,
            )));
        }
        for note in &self.notes {
            out.push_str(&format!("\nNote: {note}\n"));
        }
        out
    }
}

/// `a, b` or `none`, then what the others do not select.
fn selected_line(names: &[String], not: &[String]) -> String {
    let mut s = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    if !not.is_empty() {
        s.push_str(&format!(" ({})", not.join("; ")));
    }
    s
}

fn bgp_line(b: &BgpPart) -> String {
    if let Some(w) = &b.withheld {
        return format!("withheld: {w}");
    }
    if b.routes.is_empty() {
        return "no route: no session carries the prefix's family".into();
    }
    let routes: Vec<String> = b
        .routes
        .iter()
        .map(|r| {
            let mut s = format!("{} {}", r.prefix, r.peer);
            if let Some(lp) = r.local_pref {
                s.push_str(&format!(" localPref {lp}"));
            }
            if !r.communities.is_empty() {
                s.push_str(&format!(" communities {}", r.communities.join(",")));
            }
            if !r.large_communities.is_empty() {
                s.push_str(&format!(" large {}", r.large_communities.join(",")));
            }
            if !r.sent {
                s.push_str(" (withheld)");
            }
            s
        })
        .collect();
    routes.join("; ")
}

fn l2_line(l: &L2NodePart) -> String {
    if let Some(why) = &l.not_candidate {
        return format!("not a candidate: {why}");
    }
    let Some(rank) = l.rank else {
        return "no election".into();
    };
    let mut s = format!("candidate {rank}");
    if let Some(other) = &l.yields_to {
        s.push_str(&format!(", wins but leaves it to {other}"));
    } else if l.answers_on.is_empty() {
        if rank == 1 {
            s.push_str(", wins but announces nothing");
        }
    } else if l.answers_on == ["*"] {
        s.push_str(", wins: answers on every interface");
    } else {
        s.push_str(&format!(", wins: answers on {}", l.answers_on.join(",")));
    }
    s
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

fn same_ips(a: &[String], b: &[String]) -> bool {
    let (a, b): (BTreeSet<&String>, BTreeSet<&String>) = (a.iter().collect(), b.iter().collect());
    a == b
}

/// How many of the Service's Events are shown.
const MAX_EVENTS: usize = 10;
