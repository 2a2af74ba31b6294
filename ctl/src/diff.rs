//! `kubectl ferrolb diff -f FILE...`: what would change in IP assignments
//! and announcements if these objects were applied to the live cluster.
//!
//! Pure: built from a [`Snapshot`] and the objects read from the files
//! ([`controller::plan::read`]). Nothing is decided here. The controller's
//! side runs its own state: [`Snapshot::controller`] (the leader's startup
//! replay, [`controller::state::State::start`]) for the cluster as it is;
//! then, on a copy of that state, what the running controller does with
//! the change: the new IPAddressPool objects
//! ([`controller::state::State::set_pool_objects`], which keeps a refused
//! pool's last good version), the new Namespace labels, and every Service
//! decided again ([`controller::state::State::replay`]), so an address a
//! Service holds is kept wherever the controller keeps it, even against a
//! rule the change breaks. The speakers' side runs each node's
//! [`speaker::announce::bgp_plan`] and [`speaker::announce::l2_plan`] over
//! the Services as the controller would have written them (before and
//! after), and compares the [`speaker::announce::announcements`]. A
//! configuration the speakers would refuse ([`api::validate::config`]
//! finds a problem) leaves them on the last good one, as they do.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::model::{Model, ObjectKey};
use api::validate;
use controller::convert;
use controller::plan::{Inputs, replay_order, service_plan};
use controller::state::Outcome;
use k8s_openapi::api::core::v1::Service;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use speaker::announce::explain::explain;
use speaker::announce::{ServiceAnnouncement, announcements, bgp_plan, l2_plan};

use crate::Settings;
use crate::cluster::Snapshot;
use crate::table::{cell, render};

/// What would change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Services whose address or pool would change, or that would keep
    /// their address although it breaks a rule of the new configuration;
    /// by namespace and name.
    pub services: Vec<ServiceChange>,
    /// Nodes that would start or stop sending a Service's routes to a BGP
    /// peer; by Service, then node.
    pub bgp: Vec<BgpChange>,
    /// Services whose layer 2 owner would change; by Service.
    pub l2: Vec<L2Change>,
    /// Services that would gain, move or change pool and that no node
    /// would announce, with the speakers' reasons.
    pub unannounced: Vec<Unannounced>,
    /// Problems the new objects would bring, each naming the object and
    /// field (and the file and document, when it is one of the new ones).
    pub problems: Vec<String>,
    /// Problems of the live configuration that the new objects would fix.
    pub resolved: Vec<String>,
    /// What was left out, and what could not be read.
    pub notes: Vec<String>,
}

/// One Service's address change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceChange {
    /// `namespace/name`.
    pub service: String,
    /// `moves` (other addresses), `loses` (none any more), `gains` (one
    /// now), `pool` (same addresses, another pool), `kept` (same
    /// addresses, now against a rule: see `breaks`).
    pub change: &'static str,
    /// The controller's decision on the live cluster.
    pub before: Side,
    /// Its decision with the new objects.
    pub after: Side,
    /// For `kept`: the rules its addresses would break.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<String>,
}

/// One decision of the controller for a Service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// `assigned`, `pending`, `ignored`, `held`, or `absent` (no such
    /// Service).
    pub status: String,
    /// The pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The addresses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// Why it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One node's BGP change for one Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BgpChange {
    /// `namespace/name`.
    pub service: String,
    /// The node.
    pub node: String,
    /// The BGPPeers it sends the Service's routes to now.
    pub before: Vec<String>,
    /// Those it would send them to.
    pub after: Vec<String>,
}

/// One Service's layer 2 change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct L2Change {
    /// `namespace/name`.
    pub service: String,
    /// The nodes that answer for it now.
    pub before: Vec<String>,
    /// Those that would.
    pub after: Vec<String>,
}

/// A Service no node would announce.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unannounced {
    /// `namespace/name`.
    pub service: String,
    /// Why, as the nodes' speakers say (each reason once).
    pub reasons: Vec<String>,
}

impl Diff {
    /// Whether something moves: a Service gains, loses or moves an address
    /// or changes pool, a node starts or stops announcing one, or the new
    /// objects bring a problem. (A Service that only keeps its address
    /// against a new rule moves nothing.) `kubectl ferrolb diff` exits 1
    /// then.
    pub fn moves(&self) -> bool {
        self.services.iter().any(|s| s.change != "kept")
            || !self.bgp.is_empty()
            || !self.l2.is_empty()
            || !self.problems.is_empty()
    }

    /// The changes as text.
    pub fn table(&self) -> String {
        let mut out = String::new();
        if !self.services.is_empty() {
            out.push_str("Services:\n");
            let rows: Vec<Vec<String>> = self
                .services
                .iter()
                .map(|s| {
                    vec![
                        s.service.clone(),
                        s.change.to_owned(),
                        side_cell(&s.before),
                        side_cell(&s.after),
                    ]
                })
                .collect();
            out.push_str(&indent(&render(
                &["SERVICE", "CHANGE", "BEFORE", "AFTER"],
                &rows,
            )));
            for s in self.services.iter().filter(|s| !s.breaks.is_empty()) {
                out.push_str(&format!(
                    "  {} keeps {} although {}\n",
                    s.service,
                    s.after.ips.join(", "),
                    s.breaks.join("; ")
                ));
            }
        }
        if !self.bgp.is_empty() {
            out.push_str("BGP (the peers each node sends the Service's routes to):\n");
            let rows: Vec<Vec<String>> = self
                .bgp
                .iter()
                .map(|b| {
                    vec![
                        b.service.clone(),
                        b.node.clone(),
                        cell(&b.before),
                        cell(&b.after),
                    ]
                })
                .collect();
            out.push_str(&indent(&render(
                &["SERVICE", "NODE", "BEFORE", "AFTER"],
                &rows,
            )));
        }
        if !self.l2.is_empty() {
            out.push_str("Layer 2 (the nodes that answer for the Service):\n");
            let rows: Vec<Vec<String>> = self
                .l2
                .iter()
                .map(|l| vec![l.service.clone(), cell(&l.before), cell(&l.after)])
                .collect();
            out.push_str(&indent(&render(&["SERVICE", "BEFORE", "AFTER"], &rows)));
        }
        for u in &self.unannounced {
            out.push_str(&format!(
                "No node would announce {}: {}\n",
                u.service,
                u.reasons.join("; ")
            ));
        }
        if !self.problems.is_empty() {
            out.push_str("Problems the new objects bring (the programs refuse them):\n");
            for p in &self.problems {
                out.push_str(&format!("  {p}\n"));
            }
        }
        if !self.resolved.is_empty() {
            out.push_str("Problems they fix:\n");
            for p in &self.resolved {
                out.push_str(&format!("  {p}\n"));
            }
        }
        if out.is_empty() {
            out.push_str(
                "No change: no Service gains, loses or moves an address, and no node starts or stops announcing one.\n",
            );
        }
        for n in &self.notes {
            out.push_str(&format!("Note: {n}\n"));
        }
        out
    }
}

/// Computes what applying `inputs` to the cluster of `snap` would change.
/// Services in the files without a namespace are in `default_namespace`;
/// metallb.io objects without one in the MetalLB namespace.
pub fn build(
    snap: &Snapshot,
    settings: &Settings,
    inputs: &Inputs,
    default_namespace: &str,
) -> Diff {
    let mut notes = snap.notes.clone();
    let ns = settings.metallb_namespace.as_str();

    // The objects after the change.
    let mut config = snap.config.clone();
    let mut ignored = BTreeSet::new();
    {
        let new = &inputs.config;
        replace(&mut config.pools, &new.pools, ns, &mut ignored);
        replace(&mut config.peers, &new.peers, ns, &mut ignored);
        replace(
            &mut config.bgp_advertisements,
            &new.bgp_advertisements,
            ns,
            &mut ignored,
        );
        replace(
            &mut config.l2_advertisements,
            &new.l2_advertisements,
            ns,
            &mut ignored,
        );
        replace(
            &mut config.bfd_profiles,
            &new.bfd_profiles,
            ns,
            &mut ignored,
        );
        replace(&mut config.communities, &new.communities, ns, &mut ignored);
    }
    for i in ignored {
        notes.push(format!(
            "{i} is left out: the programs read metallb.io objects in {ns} only"
        ));
    }
    // The controller: as it is, then with the change.
    let (state, outcomes) = snap.controller(settings);
    let before: BTreeMap<String, (Service, Outcome)> = outcomes
        .into_iter()
        .map(|(svc, o)| (convert::key(svc).to_string(), (o.applied_to(svc), o)))
        .collect();
    let mut after_state = state.clone();
    let (_, _, update) = after_state.set_pool_objects(&config.pools);
    for r in &update.refused {
        notes.push(format!("the controller refuses {r}"));
    }
    for n in &inputs.namespaces {
        after_state.set_namespace_labels(&n.name_any(), Some(n.labels().clone()));
    }
    // The Services as the controller left them, the new ones in their
    // place; `kubectl apply` leaves a Service's status alone.
    let mut services: Vec<Service> = before.values().map(|(s, _)| s.clone()).collect();
    for s in &inputs.services {
        let mut s = s.clone();
        if s.metadata.namespace.is_none() {
            s.metadata.namespace = Some(default_namespace.to_owned());
        }
        let key = convert::key(&s).to_string();
        s.status = before.get(&key).and_then(|(live, _)| live.status.clone());
        match services
            .iter_mut()
            .find(|l| convert::key(l).to_string() == key)
        {
            Some(live) => *live = s,
            None => services.push(s),
        }
    }
    let after: BTreeMap<String, (Service, Outcome)> = after_state
        .replay(&replay_order(&services))
        .into_iter()
        .map(|(svc, o)| (convert::key(svc).to_string(), (o.applied_to(svc), o)))
        .collect();

    let mut diff = Diff {
        services: service_changes(&before, &after),
        ..Diff::default()
    };

    // The configuration problems, old and new.
    let (before_model, before_problems) = validate::config(&snap.config);
    let (after_model, after_problems) = validate::config(&config);
    let old: BTreeSet<String> = before_problems.iter().map(ToString::to_string).collect();
    let mut new_problems: Vec<String> = inputs
        .duplicates
        .iter()
        .map(|(at, p)| located(at.as_ref(), p))
        .collect();
    for p in &after_problems {
        if !old.contains(&p.to_string()) {
            new_problems.push(located(inputs.locate(p).as_ref(), p));
        }
    }
    let now: BTreeSet<String> = after_problems.iter().map(ToString::to_string).collect();
    diff.resolved = old.difference(&now).cloned().collect();
    diff.problems = new_problems;
    // The speakers refuse a configuration with a problem and keep the
    // last good one.
    let after_model = if after_problems.is_empty() {
        Arc::new(after_model)
    } else {
        if !diff.problems.is_empty() {
            notes.push(
                "the speakers refuse the new configuration and keep announcing from the last good one"
                    .into(),
            );
        }
        Arc::new(before_model.clone())
    };

    // The speakers, per node, before and after.
    let mut before_snap = snap.clone();
    before_snap.services = before.values().map(|(s, _)| s.clone()).collect();
    let was = announced(&before_snap, settings, Arc::new(before_model));
    let mut after_snap = snap.clone();
    after_snap.services = after.values().map(|(s, _)| s.clone()).collect();
    let will = announced(&after_snap, settings, after_model.clone());
    (diff.bgp, diff.l2) = announcement_changes(&was, &will);
    for change in diff
        .services
        .iter()
        .filter(|c| c.after.status == "assigned")
    {
        let key = match change.service.split_once('/') {
            Some((ns, name)) => ObjectKey::new(ns, name),
            None => continue,
        };
        if will.get(&key).is_none_or(BTreeMap::is_empty) {
            diff.unannounced.push(Unannounced {
                service: change.service.clone(),
                reasons: silence(&after_snap, settings, after_model.clone(), &key),
            });
        }
    }
    diff.notes = notes;
    diff
}

/// Per Service, per node, what the node announces.
type ByService = BTreeMap<ObjectKey, BTreeMap<String, ServiceAnnouncement>>;

/// What every node's speaker announces with `model`.
fn announced(snap: &Snapshot, settings: &Settings, model: Arc<Model>) -> ByService {
    let speakers = snap.speakers();
    let mut out = ByService::new();
    for node in snap.nodes.iter().filter_map(|n| n.metadata.name.as_deref()) {
        let view = snap.view(node, model.clone(), settings, &speakers);
        let l2 = l2_plan(&view);
        for (key, a) in announcements(&bgp_plan(&view), Some(&l2)) {
            out.entry(key).or_default().insert(node.to_owned(), a);
        }
    }
    out
}

/// Why no node announces `key`: each node's speaker's reasons
/// ([`speaker::announce::explain::explain`]), each said once; excluded
/// nodes are left out.
fn silence(
    snap: &Snapshot,
    settings: &Settings,
    model: Arc<Model>,
    key: &ObjectKey,
) -> Vec<String> {
    let speakers = snap.speakers();
    let mut reasons = Vec::new();
    let mut say = |r: String| {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    };
    for node in snap.nodes.iter().filter_map(|n| n.metadata.name.as_deref()) {
        let view = snap.view(node, model.clone(), settings, &speakers);
        let e = explain(&view, key);
        if let Err(why) = &e.pool {
            say(why.to_string());
            continue;
        }
        if e.excluded.is_some() {
            // It announces nothing at all, which is no news.
            continue;
        }
        if let Some(w) = &e.bgp.withheld {
            say(format!("BGP: {w}"));
        }
        match (&e.l2.withheld, &e.l2.candidacy) {
            (Some(w), _) => say(format!("layer 2: {w}")),
            (None, Some(Err(nc))) => say(format!("layer 2: {nc}")),
            _ => {}
        }
    }
    reasons
}

fn announcement_changes(was: &ByService, will: &ByService) -> (Vec<BgpChange>, Vec<L2Change>) {
    let empty = BTreeMap::new();
    let keys: BTreeSet<&ObjectKey> = was.keys().chain(will.keys()).collect();
    let (mut bgp, mut l2) = (Vec::new(), Vec::new());
    for key in keys {
        let (a, b) = (
            was.get(key).unwrap_or(&empty),
            will.get(key).unwrap_or(&empty),
        );
        let nodes: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for node in nodes {
            let peers = |m: &BTreeMap<String, ServiceAnnouncement>| -> Vec<String> {
                m.get(node)
                    .map(|x| x.bgp.iter().map(|p| p.to_string()).collect())
                    .unwrap_or_default()
            };
            let (before, after) = (peers(a), peers(b));
            if before != after {
                bgp.push(BgpChange {
                    service: key.to_string(),
                    node: node.clone(),
                    before,
                    after,
                });
            }
        }
        let owners = |m: &BTreeMap<String, ServiceAnnouncement>| -> Vec<String> {
            m.iter()
                .filter(|(_, x)| x.l2.is_some())
                .map(|(n, _)| n.clone())
                .collect()
        };
        let (before, after) = (owners(a), owners(b));
        if before != after {
            l2.push(L2Change {
                service: key.to_string(),
                before,
                after,
            });
        }
    }
    (bgp, l2)
}

fn service_changes(
    before: &BTreeMap<String, (Service, Outcome)>,
    after: &BTreeMap<String, (Service, Outcome)>,
) -> Vec<ServiceChange> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        let side = |m: &BTreeMap<String, (Service, Outcome)>| match m.get(key) {
            Some((_, o)) => {
                let p = service_plan(key.clone(), o.clone());
                Side {
                    status: p.status.to_owned(),
                    pool: p.pool,
                    ips: p.ips,
                    message: p.message,
                }
            }
            None => Side {
                status: "absent".into(),
                ..Side::default()
            },
        };
        let (b, a) = (side(before), side(after));
        let breaks = match after.get(key) {
            Some((_, Outcome::Assigned { breaks, .. })) => breaks.clone(),
            _ => Vec::new(),
        };
        let broke = match before.get(key) {
            Some((_, Outcome::Assigned { breaks, .. })) => breaks.clone(),
            _ => Vec::new(),
        };
        let (mut bi, mut ai) = (b.ips.clone(), a.ips.clone());
        bi.sort();
        ai.sort();
        let change = match (bi.is_empty(), ai.is_empty()) {
            (true, true) => continue,
            (false, true) => "loses",
            (true, false) => "gains",
            _ if bi != ai => "moves",
            _ if b.pool != a.pool => "pool",
            _ if breaks != broke && !breaks.is_empty() => "kept",
            _ => continue,
        };
        out.push(ServiceChange {
            service: key.clone(),
            change,
            before: b,
            after: a,
            breaks: if change == "kept" { breaks } else { Vec::new() },
        });
    }
    out
}

/// Puts each of `new` in `live` in place of the object of the same name,
/// or adds it; those of another namespace than `ns` are left out (their
/// `kind/namespace/name` goes to `ignored`).
fn replace<K>(live: &mut Vec<K>, new: &[K], ns: &str, ignored: &mut BTreeSet<String>)
where
    K: Resource<DynamicType = ()> + Clone,
{
    for obj in new {
        let mut obj = obj.clone();
        match obj.namespace() {
            Some(n) if n != ns => {
                ignored.insert(format!("{} {n}/{}", K::kind(&()), obj.name_any()));
                continue;
            }
            Some(_) => {}
            None => obj.meta_mut().namespace = Some(ns.to_owned()),
        }
        match live.iter_mut().find(|l| l.name_any() == obj.name_any()) {
            Some(l) => *l = obj,
            None => live.push(obj),
        }
    }
    live.sort_by_key(ResourceExt::name_any);
}

fn located(at: Option<&controller::plan::Location>, p: &validate::Problem) -> String {
    match at {
        Some(at) => format!("{at}: {p}"),
        None => p.to_string(),
    }
}

fn side_cell(s: &Side) -> String {
    match (s.ips.is_empty(), &s.pool, &s.message) {
        (false, Some(pool), _) => format!("{} ({pool})", s.ips.join(",")),
        (false, None, _) => s.ips.join(","),
        (true, _, Some(m)) => format!("{}: {m}", s.status),
        (true, _, None) => s.status.clone(),
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use api::v1beta1::IPAddressPool;
    use serde_json::json;

    use super::*;

    fn pool(name: &str, ns: Option<&str>, addresses: &[&str]) -> IPAddressPool {
        serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"addresses": addresses},
        }))
        .unwrap()
    }

    #[test]
    fn a_new_object_replaces_the_live_one_of_its_name_in_the_metallb_namespace() {
        let mut live = vec![
            pool("b", Some("metallb-system"), &["10.0.1.0/24"]),
            pool("a", Some("metallb-system"), &["10.0.0.0/24"]),
        ];
        let new = [
            pool("b", None, &["10.0.2.0/24"]),
            pool("c", Some("metallb-system"), &["10.0.3.0/24"]),
            pool("a", Some("elsewhere"), &["10.0.4.0/24"]),
        ];
        let mut ignored = BTreeSet::new();
        replace(&mut live, &new, "metallb-system", &mut ignored);
        let got: Vec<(String, Option<String>, Vec<String>)> = live
            .iter()
            .map(|p| (p.name_any(), p.namespace(), p.spec.addresses.clone()))
            .collect();
        let ns = Some("metallb-system".to_owned());
        assert_eq!(
            got,
            [
                ("a".into(), ns.clone(), vec!["10.0.0.0/24".into()]),
                ("b".into(), ns.clone(), vec!["10.0.2.0/24".into()]),
                ("c".into(), ns, vec!["10.0.3.0/24".into()]),
            ]
        );
        assert_eq!(
            ignored.into_iter().collect::<Vec<_>>(),
            ["IPAddressPool elsewhere/a"]
        );
    }

    #[test]
    fn only_a_kept_address_moves_nothing() {
        let change = |change| ServiceChange {
            service: "ns/s".into(),
            change,
            before: Side::default(),
            after: Side::default(),
            breaks: Vec::new(),
        };
        let mut d = Diff::default();
        assert!(!d.moves());
        d.services.push(change("kept"));
        assert!(!d.moves());
        for c in ["moves", "loses", "gains", "pool"] {
            d.services = vec![change(c)];
            assert!(d.moves(), "{c}");
        }
        d.services.clear();
        d.problems
            .push("IPAddressPool \"a\": spec.addresses[0]: bad".into());
        assert!(d.moves());
    }
}
