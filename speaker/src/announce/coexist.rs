//! Coexistence with MetalLB's speakers while ferrolb replaces them node by
//! node (`--metallb-speaker-labels`; README, "Coming from MetalLB").
//!
//! MetalLB's speakers elect the layer 2 owner of a service among their own
//! memberlist members, which ferrolb's speakers are not. So that one node
//! answers for an IP, and only one, ferrolb's speakers leave every layer 2
//! service to MetalLB while a MetalLB speaker may answer for it, and take it
//! over (with the usual gratuitous ARP / unsolicited NA) once none can:
//!
//! - a MetalLB speaker whose ServiceL2Status names it for the service, and
//!   whose Pod is running (Ready), answers for it now: ferrolb defers;
//! - otherwise, while a running MetalLB speaker is on a node MetalLB's own
//!   election could pick for the service (the same candidacy rules as
//!   ferrolb's: advertisement node selectors, exclusions, and local
//!   endpoints under `externalTrafficPolicy: Local`), MetalLB elects one of
//!   them (its owner just left, or it has not written its status yet):
//!   ferrolb defers;
//! - otherwise no MetalLB speaker can answer: ferrolb's own election
//!   decides.
//!
//! All of this holds only while MetalLB's namespace has an L2Advertisement:
//! with none, MetalLB's speakers answer for no layer 2 service (MetalLB's
//! `ShouldAnnounce` finds no advertisement for the service on any node and
//! withdraws, without re-electing), and ferrolb's own election decides.
//! That is the handover without a move (docs, "Node by node, without an
//! outage"): ferrolb's speakers read a copy of the configuration in a
//! namespace of their own (`--metallb-namespace` names MetalLB's), run on
//! every node beside MetalLB's, and elect as MetalLB does (the same
//! candidates, the same order), so when MetalLB's L2Advertisements are
//! deleted each address is taken over on the node that answered for it,
//! with that node's MAC address.
//!
//! BGP sessions are held ([`bgp_held`]) while a MetalLB speaker Pod is on
//! this node: two sessions from one node address to one router collide.
//! Under graceful restart the router keeps the leaving speaker's paths,
//! stale, until ferrolb's session replaces them.
//!
//! A MetalLB speaker counts as running while its Pod's `Ready` condition is
//! `True`, even while the Pod is being deleted: it answers until its
//! process exits, after which the kubelet reports it not Ready and removes
//! the Pod. BGP needs none of this: both implementations' paths coexist at
//! the router, and a leaving speaker's session ends with its routes.
//!
//! Pure: plain data in, a decision out.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::view::ObjectKey;

/// MetalLB's speakers as the Kubernetes API shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetallbSpeakers {
    /// The Pods and ServiceL2Status objects have been listed: until then
    /// ferrolb answers for no layer 2 service, since it cannot tell which
    /// ones MetalLB answers for.
    pub synced: bool,
    /// Nodes whose MetalLB speaker Pod is Ready (being deleted or not).
    pub running: BTreeSet<String>,
    /// By service, the nodes that MetalLB's ServiceL2Status objects (those
    /// owned by a MetalLB speaker Pod) say answer for it.
    pub l2_owners: BTreeMap<ObjectKey, BTreeSet<String>>,
    /// Nodes where a MetalLB speaker Pod is (Ready or not, being deleted
    /// or not): its BGP sessions may still run.
    pub present: BTreeSet<String>,
    /// MetalLB's namespace has an L2Advertisement: without one MetalLB
    /// answers for no layer 2 service.
    pub l2_advertised: bool,
}

/// Whether this node's BGP sessions wait for MetalLB's speaker on `node`
/// to go: until MetalLB's Pods are listed, and while one is on the node.
pub fn bgp_held(metallb: &MetallbSpeakers, node: &str) -> bool {
    !metallb.synced || metallb.present.contains(node)
}

/// Why ferrolb leaves a layer 2 service to MetalLB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deferral {
    /// MetalLB's speakers and statuses are not listed yet.
    NotSynced,
    /// MetalLB's ServiceL2Status names this running speaker's node.
    Owner(String),
    /// No running owner, but MetalLB's election can pick these nodes'
    /// running speakers; the first is the one it picks when no
    /// `preferredNodeSelectors` weigh (sha256 of node and IP, as MetalLB).
    Candidates(Vec<String>),
}

impl Deferral {
    /// The node MetalLB answers from (or most likely will).
    pub fn node(&self) -> &str {
        match self {
            Self::NotSynced => "",
            Self::Owner(n) => n,
            Self::Candidates(c) => c.first().map_or("", String::as_str),
        }
    }
}

/// Whether ferrolb leaves `svc` (whose first IP is `seed`) to MetalLB's
/// speakers, and why; `None` when no MetalLB speaker can answer for it.
/// `eligible` says whether a node passes the service's candidacy rules
/// (ignoring who runs on it).
pub fn l2_deferral(
    metallb: &MetallbSpeakers,
    svc: &ObjectKey,
    seed: &str,
    eligible: impl Fn(&str) -> bool,
) -> Option<Deferral> {
    if !metallb.synced {
        return Some(Deferral::NotSynced);
    }
    if !metallb.l2_advertised {
        return None;
    }
    if let Some(owner) = metallb
        .l2_owners
        .get(svc)
        .and_then(|owners| owners.iter().find(|n| metallb.running.contains(*n)))
    {
        return Some(Deferral::Owner(owner.clone()));
    }
    let mut candidates: Vec<([u8; 32], &String)> = metallb
        .running
        .iter()
        .filter(|n| eligible(n))
        .map(|n| (Sha256::digest(format!("{n}#{seed}")).into(), n))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    candidates.sort();
    Some(Deferral::Candidates(
        candidates.into_iter().map(|(_, n)| n.clone()).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn speakers(running: &[&str], owners: &[(&str, &[&str])]) -> MetallbSpeakers {
        MetallbSpeakers {
            synced: true,
            running: set(running),
            present: set(running),
            l2_advertised: true,
            l2_owners: owners
                .iter()
                .map(|(svc, nodes)| (ObjectKey::new("demo", *svc), set(nodes)))
                .collect(),
        }
    }

    /// The decision table: what MetalLB shows, which nodes the service
    /// allows, and what ferrolb does.
    #[test]
    fn defers_while_a_metallb_speaker_can_answer() {
        // (case, running, owners of "web", eligible nodes, expected)
        type Case<'a> = (
            &'a str,
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            Option<Deferral>,
        );
        let owner = |n: &str| Some(Deferral::Owner(n.to_owned()));
        let cases: &[Case<'_>] = &[
            (
                "the owner runs",
                &["a", "b"],
                &["b"],
                &["a", "b", "c"],
                owner("b"),
            ),
            (
                "the owner runs though this view finds it ineligible (MetalLB re-elects)",
                &["b"],
                &["b"],
                &["c"],
                owner("b"),
            ),
            (
                "the owner left, another eligible MetalLB speaker runs",
                &["a"],
                &["b"],
                &["a", "c"],
                Some(Deferral::Candidates(vec!["a".into()])),
            ),
            (
                "no status yet, MetalLB speakers eligible",
                &["a", "b"],
                &[],
                &["a", "b", "c"],
                Some(Deferral::Candidates(
                    // sha256("a#10.0.0.200") = 5ba11d3e.. < fb6370c5.. ("b#...")
                    vec!["a".into(), "b".into()],
                )),
            ),
            (
                "the remaining MetalLB speaker is not eligible (node selectors, Local)",
                &["a"],
                &["b"],
                &["b", "c"],
                None,
            ),
            (
                "the last MetalLB speaker left",
                &[],
                &["b"],
                &["a", "b", "c"],
                None,
            ),
            ("never had MetalLB", &[], &[], &["a"], None),
        ];
        for (case, running, owners, eligible, want) in cases {
            let m = speakers(running, &[("web", owners)]);
            let got = l2_deferral(&m, &ObjectKey::new("demo", "web"), "10.0.0.200", |n| {
                eligible.contains(&n)
            });
            assert_eq!(&got, want, "{case}");
        }
    }

    /// Before the first list, nothing is taken over.
    #[test]
    fn defers_everything_until_listed() {
        let m = MetallbSpeakers::default();
        let got = l2_deferral(&m, &ObjectKey::new("demo", "web"), "10.0.0.200", |_| true);
        assert_eq!(got, Some(Deferral::NotSynced));
    }

    /// An owner of another service does not hold this one.
    #[test]
    fn owners_are_per_service() {
        let m = speakers(&["a"], &[("other", &["a"])]);
        let got = l2_deferral(&m, &ObjectKey::new("demo", "web"), "10.0.0.200", |_| false);
        assert_eq!(got, None);
    }

    /// With MetalLB's L2Advertisements deleted, its speakers answer for
    /// nothing, owner or not: ferrolb's election decides at once.
    #[test]
    fn no_metallb_l2_advertisement_no_deferral() {
        let mut m = speakers(&["a", "b"], &[("web", &["a"])]);
        m.l2_advertised = false;
        let got = l2_deferral(&m, &ObjectKey::new("demo", "web"), "10.0.0.200", |_| true);
        assert_eq!(got, None);
    }

    /// BGP waits while MetalLB's speaker Pod is on this node (Ready or
    /// not), and until MetalLB's Pods are listed.
    #[test]
    fn bgp_waits_for_metallbs_pod_on_this_node() {
        let mut m = speakers(&["a"], &[]);
        m.present = set(&["a", "b"]);
        // (node, held)
        for (node, want) in [("a", true), ("b", true), ("c", false)] {
            assert_eq!(bgp_held(&m, node), want, "{node}");
        }
        assert!(bgp_held(&MetallbSpeakers::default(), "c"));
    }

    #[test]
    fn the_candidate_order_is_metallbs() {
        let mut by_hash: Vec<(Vec<u8>, &str)> = ["a", "b", "c"]
            .iter()
            .map(|n| (Sha256::digest(format!("{n}#10.0.0.200")).to_vec(), *n))
            .collect();
        by_hash.sort();
        let want: Vec<String> = by_hash.iter().map(|(_, n)| (*n).to_owned()).collect();
        let m = speakers(&["a", "b", "c"], &[]);
        let got = l2_deferral(&m, &ObjectKey::new("demo", "web"), "10.0.0.200", |_| true);
        assert_eq!(got, Some(Deferral::Candidates(want)));
    }
}
