//! Decision tables for [`l2_plan`], after MetalLB's layer 2 e2e scenarios.

use std::collections::BTreeSet;
use std::sync::Arc;

use api::v1beta1::{L2AdvertisementSpec, PreferredNodeSelector};

use super::super::coexist::{Deferral, MetallbSpeakers};
use super::super::fixture::*;
use super::super::view::{ApiSpeakers, Exclusion, TrafficPolicy};
use super::*;

const NODES: [&str; 4] = ["n1", "n2", "n3", "n4"];
/// `sha256(node + "#" + ip)` ascending for 192.0.2.10, computed apart
/// (Python's hashlib), as MetalLB orders it.
const ORDER_10: [&str; 4] = ["n2", "n3", "n4", "n1"];
/// The same for 192.0.2.11.
const ORDER_11: [&str; 4] = ["n1", "n4", "n3", "n2"];

/// n1..n4, all live members, one pool, one advertisement of everything,
/// one service with an endpoint on n3; seen from `this`.
fn base(this: &str) -> Fixture {
    let mut v = view(this, &NODES);
    v.members = Some(NODES.iter().map(|n| (*n).to_owned()).collect());
    v.config.pools = vec![pool("pool", &["192.0.2.0/24", "2001:db8::/64"], &[])];
    v.config.l2_advertisements = vec![l2_ad("all", L2AdvertisementSpec::default())];
    v.services = services([svc("web", &["192.0.2.10"], &["n3"])]);
    v
}

fn ad(v: &mut Fixture) -> &mut L2AdvertisementSpec {
    &mut v.config.l2_advertisements[0].spec
}

fn candidates<'a>(plan: &'a L2Plan, service: &str) -> Vec<&'a str> {
    plan.elections[&key(service)]
        .candidates
        .iter()
        .map(String::as_str)
        .collect()
}

/// Which nodes announce `ip` when each runs the plan on the same view.
fn announcers(v: &Fixture, ip_text: &str) -> Vec<&'static str> {
    NODES
        .iter()
        .filter(|n| {
            let mut mine = v.clone();
            mine.node = (**n).into();
            l2(&mine).announce.contains_key(&ip(ip_text))
        })
        .copied()
        .collect()
}

#[test]
fn hash_order_is_metallbs() {
    let v = base("n1");
    let plan = l2(&v);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert_eq!(candidates(&plan, "web"), ORDER_10);
    assert_eq!(plan.elections[&key("web")].winner(), Some("n2"));
    assert!(plan.announce.is_empty());
    let mut v = base("n1");
    v.services = services([svc("web", &["192.0.2.11"], &["n3"])]);
    assert_eq!(candidates(&l2(&v), "web"), ORDER_11);
}

#[test]
fn exactly_one_node_announces() {
    let v = base("n1");
    assert_eq!(announcers(&v, "192.0.2.10"), ["n2"]);
    let won = {
        let mut mine = v.clone();
        mine.node = "n2".into();
        l2(&mine)
    };
    let a = &won.announce[&ip("192.0.2.10")];
    assert_eq!(a.interfaces, Interfaces::All);
    assert_eq!(a.services, BTreeSet::from([key("web")]));
}

#[test]
fn stable_given_the_same_inputs() {
    let v = base("n2");
    let first = l2(&v);
    for _ in 0..3 {
        assert_eq!(l2(&v), first);
    }
    // Input order does not matter.
    let mut shuffled = v.clone();
    shuffled
        .services
        .insert(0, svc("other", &["192.0.2.11"], &["n1"]).into());
    shuffled.services.reverse();
    let plan = l2(&shuffled);
    assert_eq!(plan.elections[&key("web")], first.elections[&key("web")]);
    assert_eq!(
        plan.announce[&ip("192.0.2.10")],
        first.announce[&ip("192.0.2.10")]
    );
}

#[test]
fn dead_member_hands_over_to_the_next() {
    let mut v = base("n3");
    v.members.as_mut().unwrap().remove("n2");
    let plan = l2(&v);
    assert_eq!(candidates(&plan, "web"), ["n3", "n4", "n1"]);
    assert!(plan.announce.contains_key(&ip("192.0.2.10")));
    assert_eq!(announcers(&v, "192.0.2.10"), ["n3"]);
    // Only the dead node's services move: .11 stays on n1.
    let mut v = base("n1");
    v.services = services([svc("web", &["192.0.2.11"], &["n3"])]);
    v.members.as_mut().unwrap().remove("n2");
    assert_eq!(candidates(&l2(&v), "web")[0], "n1");
}

#[test]
fn membership_sources() {
    // Memberlist off: every node in the view.
    let mut v = base("n1");
    v.members = None;
    assert_eq!(candidates(&l2(&v), "web"), ORDER_10);
    // A member that is not a known node is no candidate.
    let mut v = base("n1");
    v.members.as_mut().unwrap().insert("ghost".into());
    v.members.as_mut().unwrap().remove("n3");
    assert_eq!(candidates(&l2(&v), "web"), ["n2", "n4", "n1"]);
}

#[test]
fn traffic_policy_local_needs_an_endpoint() {
    // (policy, endpoint nodes, candidates)
    let table: [(TrafficPolicy, &[&str], &[&str]); 5] = [
        (TrafficPolicy::Cluster, &["n1"], &ORDER_10),
        (TrafficPolicy::Local, &["n1", "n4"], &["n4", "n1"]),
        (TrafficPolicy::Local, &["n1"], &["n1"]),
        (TrafficPolicy::Local, &[], &[]),
        (TrafficPolicy::Cluster, &[], &[]),
    ];
    for (policy, nodes, want) in table {
        let mut v = base("n1");
        let mut s = svc("web", &["192.0.2.10"], nodes);
        s.external_traffic_policy = policy;
        v.services = services([s]);
        let plan = l2(&v);
        assert_eq!(candidates(&plan, "web"), want, "{policy:?} {nodes:?}");
        assert_eq!(
            plan.announce.contains_key(&ip("192.0.2.10")),
            want.first() == Some(&"n1")
        );
    }
}

#[test]
fn terminating_endpoints() {
    // Local: a node whose only endpoint is draining but serving stays a
    // candidate; one that stopped serving does not.
    let mut v = base("n1");
    let mut s = svc("web", &["192.0.2.10"], &[]);
    s.external_traffic_policy = TrafficPolicy::Local;
    let (mut n3, mut n4) = (ready("n3"), ready("n4"));
    n3.ready = Some(false);
    n3.terminating = Some(true);
    n4.ready = Some(false);
    n4.serving = Some(false);
    n4.terminating = Some(true);
    s.endpoints = [n3, n4].into_iter().collect();
    v.services = services([s]);
    assert_eq!(candidates(&l2(&v), "web"), ["n3"]);
}

#[test]
fn preferred_weights_override_the_hash() {
    let pref = |weight, pairs: &[(&str, &str)]| PreferredNodeSelector {
        weight,
        preference: sel(pairs),
    };
    let mut v = base("n1");
    Arc::make_mut(&mut v.nodes).get_mut("n1").unwrap().labels = labels(&[("tier", "edge")]).into();
    Arc::make_mut(&mut v.nodes).get_mut("n4").unwrap().labels =
        labels(&[("tier", "edge"), ("fast", "yes")]).into();
    ad(&mut v).preferred_node_selectors = vec![pref(10, &[("tier", "edge")])];
    // n1 and n4 tie on 10 and keep their hash order; then the rest.
    assert_eq!(candidates(&l2(&v), "web"), ["n4", "n1", "n2", "n3"]);
    // Weights of matching selectors sum, within and across advertisements.
    ad(&mut v)
        .preferred_node_selectors
        .push(pref(1, &[("fast", "yes")]));
    assert_eq!(candidates(&l2(&v), "web")[0], "n4");
    let mut extra = l2_ad(
        "extra",
        L2AdvertisementSpec {
            preferred_node_selectors: vec![pref(5, &[("tier", "edge")])],
            ..L2AdvertisementSpec::default()
        },
    );
    extra.spec.node_selectors = vec![sel(&[("tier", "edge")])];
    v.config.l2_advertisements.push(extra);
    let mut v1 = v.clone();
    Arc::make_mut(&mut v1.nodes)
        .get_mut("n1")
        .unwrap()
        .labels
        .insert("fast", "no");
    ad(&mut v1).preferred_node_selectors[1] = pref(7, &[("tier", "edge")]);
    // n1: 10 + 7 + 5 = 22; n4: 10 + 7 + 5 = 22: tie again, hash order.
    assert_eq!(candidates(&l2(&v1), "web"), ["n4", "n1", "n2", "n3"]);
    // An advertisement's preferences count only for the nodes it selects.
    let mut v2 = base("n1");
    Arc::make_mut(&mut v2.nodes).get_mut("n1").unwrap().labels = labels(&[("tier", "edge")]).into();
    let mut only_n3 = l2_ad(
        "only-n3",
        L2AdvertisementSpec {
            preferred_node_selectors: vec![pref(50, &[("tier", "edge")])],
            ..L2AdvertisementSpec::default()
        },
    );
    only_n3.spec.node_selectors = vec![sel(&[("kubernetes.io/hostname", "n3")])];
    v2.config.l2_advertisements.push(only_n3);
    Arc::make_mut(&mut v2.nodes)
        .get_mut("n3")
        .unwrap()
        .labels
        .insert("kubernetes.io/hostname", "n3");
    assert_eq!(candidates(&l2(&v2), "web"), ORDER_10);
}

/// MetalLB v0.16.2's own vectors for its election order
/// (`speaker/layer2_controller_test.go`, `TestSortL2Candidates`: highest
/// preference score first, then `sha256(node + "#" + ip)`), run through
/// ferrolb's election: each node's score is the weight of a preferred
/// node selector on a label of its own. The migration without a move
/// depends on both implementations putting the same node first.
#[test]
fn the_election_order_matches_metallbs_own_vectors() {
    // (candidates, ip, scores, MetalLB's order)
    type Case<'a> = (&'a [&'a str], &'a str, &'a [(&'a str, i32)], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (&["node-a"], "10.0.0.1", &[], &["node-a"]),
        (
            &["node-a", "node-b", "node-c"],
            "10.0.0.1",
            &[],
            &["node-b", "node-a", "node-c"],
        ),
        (
            &["node-a", "node-b", "node-c"],
            "10.0.0.2",
            &[],
            &["node-b", "node-c", "node-a"],
        ),
        (
            &["edge-a", "edge-b", "worker-a", "worker-b"],
            "10.20.30.1",
            &[("edge-a", 100)],
            &["edge-a", "edge-b", "worker-a", "worker-b"],
        ),
        (
            &["node-a", "node-b"],
            "10.20.30.1",
            &[("node-a", 100), ("node-b", 100)],
            &["node-b", "node-a"],
        ),
        (
            &["edge-a", "edge-b", "worker-a"],
            "10.20.30.1",
            &[("edge-a", 100), ("edge-b", 100)],
            &["edge-b", "edge-a", "worker-a"],
        ),
    ];
    for &(nodes, ip_text, scores, want) in cases {
        let mut v = view(nodes[0], nodes);
        v.members = Some(nodes.iter().map(|n| (*n).to_owned()).collect());
        v.config.pools = vec![pool("pool", &["10.0.0.0/8"], &[])];
        let mut ad = L2AdvertisementSpec::default();
        for &(node, weight) in scores {
            Arc::make_mut(&mut v.nodes).get_mut(node).unwrap().labels =
                labels(&[("name", node)]).into();
            ad.preferred_node_selectors.push(PreferredNodeSelector {
                weight,
                preference: sel(&[("name", node)]),
            });
        }
        v.config.l2_advertisements = vec![l2_ad("all", ad)];
        v.services = services([svc("web", &[ip_text], nodes)]);
        let plan = l2(&v);
        assert!(plan.problems.is_empty(), "{:?}", plan.problems);
        assert_eq!(
            candidates(&plan, "web"),
            want,
            "{nodes:?} {ip_text} {scores:?}"
        );
    }
}

#[test]
fn node_selectors() {
    let mut v = base("n3");
    for n in ["n3", "n4"] {
        Arc::make_mut(&mut v.nodes).get_mut(n).unwrap().labels = labels(&[("l2", "yes")]).into();
    }
    ad(&mut v).node_selectors = vec![sel(&[("l2", "yes")])];
    let plan = l2(&v);
    assert_eq!(candidates(&plan, "web"), ["n3", "n4"]);
    assert!(plan.announce.contains_key(&ip("192.0.2.10")));
    // A second advertisement for n1 widens the candidates.
    let mut v2 = v.clone();
    Arc::make_mut(&mut v2.nodes).get_mut("n1").unwrap().labels = labels(&[("l2", "also")]).into();
    let mut wider = l2_ad("wider", L2AdvertisementSpec::default());
    wider.spec.node_selectors = vec![sel(&[("l2", "also")])];
    v2.config.l2_advertisements.push(wider);
    assert_eq!(candidates(&l2(&v2), "web"), ["n3", "n4", "n1"]);
}

#[test]
fn excluded_nodes() {
    // (node, condition, label, candidates)
    let table: [(&str, bool, bool, &[&str]); 3] = [
        ("n2", true, false, &["n3", "n4", "n1"]),
        ("n2", false, true, &["n3", "n4", "n1"]),
        ("n3", true, true, &["n2", "n4", "n1"]),
    ];
    for (name, condition, label, want) in table {
        let mut v = base("n1");
        let n = Arc::make_mut(&mut v.nodes).get_mut(name).unwrap();
        if condition {
            n.conditions.insert("NetworkUnavailable", "True");
        }
        if label {
            n.labels.insert(
                "node.kubernetes.io/exclude-from-external-load-balancers",
                "true",
            );
        }
        assert_eq!(candidates(&l2(&v), "web"), want, "{name}");
    }
    // The label can be ignored; the condition cannot.
    let mut v = base("n2");
    v.ignore_exclude_lb = true;
    Arc::make_mut(&mut v.nodes)
        .get_mut("n2")
        .unwrap()
        .labels
        .insert(
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "",
        );
    let plan = l2(&v);
    assert_eq!(plan.excluded, None);
    assert!(plan.announce.contains_key(&ip("192.0.2.10")));
    Arc::make_mut(&mut v.nodes)
        .get_mut("n2")
        .unwrap()
        .conditions
        .insert("NetworkUnavailable", "True");
    let plan = l2(&v);
    assert_eq!(plan.excluded, Some(Exclusion::NetworkUnavailable));
    assert!(plan.announce.is_empty());
}

#[test]
fn interfaces() {
    // (interfaces of the three advertisements; whether the third selects n2)
    let mut v = base("n2");
    Arc::make_mut(&mut v.nodes).get_mut("n2").unwrap().labels = labels(&[("nic", "many")]).into();
    ad(&mut v).interfaces = vec!["eth0".into()];
    v.config.l2_advertisements.push(l2_ad(
        "more",
        L2AdvertisementSpec {
            interfaces: vec!["eth1".into(), "eth0".into()],
            ..L2AdvertisementSpec::default()
        },
    ));
    let mut elsewhere = l2_ad(
        "elsewhere",
        L2AdvertisementSpec {
            interfaces: vec!["bond0".into()],
            ..L2AdvertisementSpec::default()
        },
    );
    elsewhere.spec.node_selectors = vec![sel(&[("nic", "other")])];
    v.config.l2_advertisements.push(elsewhere);
    let plan = l2(&v);
    assert_eq!(
        plan.announce[&ip("192.0.2.10")].interfaces,
        Interfaces::Only(BTreeSet::from(["eth0".into(), "eth1".into()]))
    );
    // One advertisement without interfaces: all of them.
    v.config
        .l2_advertisements
        .push(l2_ad("any", L2AdvertisementSpec::default()));
    assert_eq!(
        l2(&v).announce[&ip("192.0.2.10")].interfaces,
        Interfaces::All
    );
}

#[test]
fn service_and_pool_selectors() {
    let mut v = base("n2");
    v.config.pools = vec![
        pool("red", &["192.0.2.0/25"], &[("color", "red")]),
        pool("blue", &["192.0.2.128/25"], &[("color", "blue")]),
    ];
    ad(&mut v).ip_address_pool_selectors = vec![sel(&[("color", "red")])];
    ad(&mut v).service_selectors = vec![sel(&[("l2", "yes")])];
    let mut picked = svc("picked", &["192.0.2.10"], &["n1"]);
    picked.labels = labels(&[("l2", "yes")]).into();
    let mut blue = svc("blue", &["192.0.2.200"], &["n1"]);
    blue.labels = labels(&[("l2", "yes")]).into();
    v.services = services([picked, svc("unlabelled", &["192.0.2.11"], &["n1"]), blue]);
    let plan = l2(&v);
    assert_eq!(plan.elections.keys().collect::<Vec<_>>(), [&key("picked")]);
    // By name too.
    ad(&mut v).ip_address_pool_selectors.clear();
    ad(&mut v).ip_address_pools = vec!["blue".into()];
    let plan = l2(&v);
    assert_eq!(plan.elections.keys().collect::<Vec<_>>(), [&key("blue")]);
}

#[test]
fn shared_ip() {
    let shared = |name: &str| {
        let mut s = svc(name, &["192.0.2.10"], &["n1"]);
        s.annotations.insert("metallb.io/allow-shared-ip", "key");
        s
    };
    // Sharing services elect the same node, which announces the IP once.
    let mut v = base("n2");
    v.services = services([shared("a"), shared("b")]);
    let plan = l2(&v);
    assert_eq!(
        plan.announce[&ip("192.0.2.10")].services,
        BTreeSet::from([key("a"), key("b")])
    );
    // With service selectors it is refused, as MetalLB does.
    ad(&mut v).service_selectors = vec![sel(&[])];
    let plan = l2(&v);
    assert!(plan.announce.is_empty());
    assert_eq!(plan.problems.len(), 2);
    assert_eq!(
        plan.problems[0].field,
        "metadata.annotations[metallb.io/allow-shared-ip]"
    );
}

#[test]
fn dual_stack_goes_to_one_node() {
    let mut v = base("n2");
    // The first IP seeds the order: n2 for .10, though n4 leads for the
    // IPv6 address alone.
    v.services = services([svc("web", &["192.0.2.10", "2001:db8::10"], &["n1"])]);
    let plan = l2(&v);
    assert_eq!(
        plan.announce.keys().copied().collect::<Vec<_>>(),
        [ip("192.0.2.10"), ip("2001:db8::10")]
    );
    assert_eq!(
        plan.elections[&key("web")].ips,
        [ip("192.0.2.10"), ip("2001:db8::10")]
    );
}

#[test]
fn no_advertisement_no_election() {
    let mut v = base("n2");
    v.config.l2_advertisements.clear();
    let plan = l2(&v);
    assert!(plan.elections.is_empty() && plan.announce.is_empty());
}

/// `base` seen from `this`, isolated: memberlist reaches nobody, and the
/// API shows every node's speaker Ready; `answering` are the nodes whose
/// ServiceL2Status says they answer for `web`.
fn isolated(this: &str, answering: &[&str]) -> Fixture {
    let mut v = base(this);
    v.members = Some(BTreeSet::from([this.to_owned()]));
    v.isolated = true;
    v.api_speakers = Some(Arc::new(ApiSpeakers {
        ready: NODES.iter().map(|n| (*n).to_owned()).collect(),
        l2_announcers: [(
            key("web"),
            answering.iter().map(|n| (*n).to_owned()).collect(),
        )]
        .into(),
        metallb: None,
    }));
    v
}

/// `base`, during a migration: ferrolb's speakers run on `ferrolb` (its
/// memberlist members), MetalLB's on `metallb` (Ready Pods), and MetalLB's
/// ServiceL2Status says `owner` answers for `web`.
fn migrating(this: &str, ferrolb: &[&str], metallb: &[&str], owner: Option<&str>) -> Fixture {
    let mut v = base(this);
    let set = |n: &[&str]| {
        n.iter()
            .map(|n| (*n).to_owned())
            .collect::<BTreeSet<String>>()
    };
    v.members = Some(set(ferrolb));
    v.api_speakers = Some(Arc::new(ApiSpeakers {
        metallb: Some(MetallbSpeakers {
            synced: true,
            running: set(metallb),
            present: set(metallb),
            l2_advertised: true,
            l2_owners: owner
                .map(|o| [(key("web"), set(&[o]))].into())
                .unwrap_or_default(),
        }),
        ..ApiSpeakers::default()
    }));
    v
}

/// Which of ferrolb's nodes answer for 192.0.2.10 during a migration.
fn ferrolb_announcers(
    ferrolb: &[&str],
    metallb: &[&str],
    owner: Option<&str>,
) -> Vec<&'static str> {
    NODES
        .iter()
        .filter(|n| ferrolb.contains(*n))
        .filter(|n| {
            l2(&migrating(n, ferrolb, metallb, owner))
                .announce
                .contains_key(&ip("192.0.2.10"))
        })
        .copied()
        .collect()
}

/// The node-by-node hand-over (README, "Coming from MetalLB"): ferrolb's
/// speakers answer for `web` only once no MetalLB speaker can, and then
/// exactly one of them does. MetalLB's election order for 192.0.2.10 is
/// ORDER_10 (n2, n3, n4, n1), as ferrolb's.
#[test]
fn during_a_migration_ferrolb_answers_only_when_no_metallb_speaker_can() {
    // (ferrolb nodes, MetalLB nodes, MetalLB's status owner, who of
    // ferrolb answers)
    type Step<'a> = (&'a [&'a str], &'a [&'a str], Option<&'a str>, &'a [&'a str]);
    let steps: &[Step<'_>] = &[
        // n1 replaced: n2 (MetalLB) still answers.
        (&["n1"], &["n2", "n3", "n4"], Some("n2"), &[]),
        // n2, the owner, replaced: MetalLB's n3 takes over and has not
        // written its status yet; ferrolb's n2 would win its own election
        // but defers.
        (&["n1", "n2"], &["n3", "n4"], None, &[]),
        (&["n1", "n2"], &["n3", "n4"], Some("n3"), &[]),
        // n3 replaced, its status left behind (no garbage collector yet).
        (&["n1", "n2", "n3"], &["n4"], Some("n3"), &[]),
        // The last MetalLB speaker gone: ferrolb's winner, n2, answers.
        (&["n1", "n2", "n3", "n4"], &[], Some("n3"), &["n2"]),
    ];
    for (ferrolb, metallb, owner, want) in steps {
        assert_eq!(
            ferrolb_announcers(ferrolb, metallb, *owner),
            *want,
            "ferrolb on {ferrolb:?}, MetalLB on {metallb:?}, owner {owner:?}"
        );
    }
    // The deferral is reported, naming MetalLB's node.
    let plan = l2(&migrating("n2", &["n1", "n2"], &["n3", "n4"], Some("n3")));
    assert_eq!(
        plan.deferred.get(&key("web")),
        Some(&Deferral::Owner("n3".into()))
    );
    // A MetalLB speaker that cannot serve the service (externalTrafficPolicy
    // Local, no endpoint on its node) holds nothing: ferrolb's n3, with the
    // endpoint, answers.
    let mut v = migrating("n3", &["n1", "n2", "n3"], &["n4"], None);
    v.services = services([svc("web", &["192.0.2.10"], &["n3"])]);
    for s in &mut v.services {
        Arc::make_mut(s).external_traffic_policy = TrafficPolicy::Local;
    }
    assert!(l2(&v).announce.contains_key(&ip("192.0.2.10")));
    // Before MetalLB's Pods and statuses are listed, nothing is answered.
    let mut v = migrating("n2", &["n1", "n2", "n3", "n4"], &[], None);
    Arc::make_mut(v.api_speakers.as_mut().unwrap()).metallb = Some(MetallbSpeakers::default());
    let plan = l2(&v);
    assert!(plan.announce.is_empty());
    assert_eq!(plan.deferred.get(&key("web")), Some(&Deferral::NotSynced));
}

/// The handover without a move (docs, "Node by node, without an
/// outage"): ferrolb's speakers run on every node beside MetalLB's, and
/// MetalLB's L2Advertisements are deleted. MetalLB's owner of `web` was
/// its election's winner, n2 (ORDER_10): ferrolb's n2 takes it over, and
/// no other node answers, whichever MetalLB speakers still run.
#[test]
fn with_metallbs_l2_advertisements_deleted_the_same_node_takes_over() {
    let all = ["n1", "n2", "n3", "n4"];
    // While MetalLB's advertisement is there, nobody of ferrolb answers.
    assert_eq!(ferrolb_announcers(&all, &all, Some("n2")), [] as [&str; 0]);
    let answering: Vec<&str> = NODES
        .iter()
        .filter(|n| {
            let mut v = migrating(n, &all, &all, Some("n2"));
            let api = Arc::make_mut(v.api_speakers.as_mut().unwrap());
            api.metallb.as_mut().unwrap().l2_advertised = false;
            l2(&v).announce.contains_key(&ip("192.0.2.10"))
        })
        .copied()
        .collect();
    assert_eq!(answering, ["n2"]);
    assert_eq!(ORDER_10[0], "n2");
}

#[test]
fn an_isolated_node_takes_over_nothing_a_ready_speaker_can_serve() {
    // n3 alone in its member list: before, it won the election alone.
    let mut alone = base("n3");
    alone.members = Some(BTreeSet::from(["n3".to_owned()]));
    assert!(l2(&alone).announce.contains_key(&ip("192.0.2.10")));
    // Isolated, it elects among the speakers the API shows Ready: n2 wins,
    // as everywhere else.
    let plan = l2(&isolated("n3", &[]));
    assert_eq!(plan.api_candidates, 3);
    assert_eq!(candidates(&plan, "web"), ORDER_10);
    assert!(plan.announce.is_empty(), "{:?}", plan.announce);
    assert!(plan.yielded.is_empty());
}

#[test]
fn an_isolated_winner_yields_to_the_ready_speaker_the_api_shows_answering() {
    // n2 wins in the full order; the others, who lost sight of it, elected
    // n3, whose ServiceL2Status is in the API.
    let plan = l2(&isolated("n2", &["n3"]));
    assert!(plan.announce.is_empty(), "{:?}", plan.announce);
    assert_eq!(
        plan.yielded.get(&key("web")).map(String::as_str),
        Some("n3")
    );
    // Its own status, or one of a speaker that is not Ready (a dead node's
    // Pod keeps its status until it goes), does not make it yield.
    for answering in [&["n2"][..], &[]] {
        let plan = l2(&isolated("n2", answering));
        assert!(plan.yielded.is_empty());
        assert!(plan.announce.contains_key(&ip("192.0.2.10")));
    }
    let mut v = isolated("n2", &["n3"]);
    Arc::make_mut(v.api_speakers.as_mut().unwrap())
        .ready
        .remove("n3");
    assert!(l2(&v).announce.contains_key(&ip("192.0.2.10")));
}

#[test]
fn when_every_node_is_isolated_each_service_is_answered_once() {
    // memberlist broken everywhere (a wrong key on every node, a firewall):
    // each node elects among the Ready speakers, so exactly the winner
    // answers, where before every node answered.
    let answering: Vec<&str> = NODES
        .iter()
        .filter(|n| {
            l2(&isolated(n, &[]))
                .announce
                .contains_key(&ip("192.0.2.10"))
        })
        .copied()
        .collect();
    assert_eq!(answering, [ORDER_10[0]]);
}

#[test]
fn file_mode_isolation_keeps_the_member_list_election() {
    // No API to ask: an isolated node takes what it wins among the members
    // it reaches (availability first; documented in RELIABILITY.md).
    let mut v = isolated("n3", &[]);
    v.api_speakers = None;
    let plan = l2(&v);
    assert_eq!(plan.api_candidates, 0);
    assert!(plan.announce.contains_key(&ip("192.0.2.10")));
}

/// Issue 18: an election starts from the speakers in the view and not
/// excluded (found once per context), and under `externalTrafficPolicy:
/// Local` from the nodes with a serving endpoint, instead of walking every
/// speaker per service. On seeded random views (labels, exclusions,
/// members with and without Nodes, selectors and preferences, endpoints
/// on nodes with and without speakers) every election is the one
/// [`L2Context::candidacy`] gives when asked of every speaker, in the same
/// order.
#[test]
fn indexed_elections_are_those_of_every_speaker() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::super::view::EXCLUDE_LABEL;

    const NAMES: [&str; 8] = ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"];
    let mut elected = 0;
    for seed in 0..200 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let in_view: Vec<&str> = NAMES
            .into_iter()
            .filter(|_| rng.random_bool(0.85))
            .collect();
        let mut v = view("n1", &in_view);
        for n in Arc::make_mut(&mut v.nodes).values_mut() {
            for (k, value) in [("l2", "yes"), ("tier", "edge"), (EXCLUDE_LABEL, "")] {
                if rng.random_bool(if k == EXCLUDE_LABEL { 0.15 } else { 0.5 }) {
                    n.labels.insert(k, value);
                }
            }
            if rng.random_bool(0.15) {
                n.conditions.insert("NetworkUnavailable", "True");
            }
        }
        v.members = rng.random_bool(0.7).then(|| {
            NAMES
                .iter()
                .chain(&["ghost"])
                .filter(|_| rng.random_bool(0.7))
                .map(|n| (*n).to_owned())
                .collect()
        });
        v.config.pools = vec![pool("pool", &["192.0.2.0/24"], &[])];
        v.config.l2_advertisements = (0..rng.random_range(1..=2))
            .map(|i| {
                let mut spec = L2AdvertisementSpec::default();
                if rng.random_bool(0.5) {
                    spec.node_selectors = vec![sel(&[("l2", "yes")])];
                }
                if rng.random_bool(0.5) {
                    spec.preferred_node_selectors = vec![PreferredNodeSelector {
                        weight: rng.random_range(1..20),
                        preference: sel(&[("tier", "edge")]),
                    }];
                }
                l2_ad(&format!("ad{i}"), spec)
            })
            .collect();
        v.services = services((0..6).map(|i| {
            let on: Vec<&str> = NAMES
                .iter()
                .chain(&["ghost"])
                .copied()
                .filter(|_| rng.random_bool(0.3))
                .collect();
            let mut s = svc(&format!("s{i}"), &[&format!("192.0.2.{}", 10 + i)], &on);
            if rng.random_bool(0.5) {
                s.external_traffic_policy = TrafficPolicy::Local;
            }
            s
        }));
        let (view, problems) = v.build();
        assert!(problems.is_empty(), "{problems:?}");
        let plan = l2_plan(&view);
        let ctx = L2Context::new(&view);
        for a in assigned(&view, &mut Vec::new()) {
            let ads = ctx
                .advertisements(a.svc, a.pool)
                .unwrap_or_else(|e| panic!("{e}"));
            let with_endpoints = a.svc.nodes_with_serving_endpoints();
            let seed_ip = a.svc.ingress[0].to_string();
            let mut want: Vec<(i64, [u8; 32], &str)> = ctx
                .speakers
                .iter()
                .filter(|_| a.svc.has_serving_endpoint())
                .filter_map(|&name| {
                    let score = ctx.candidacy(a.svc, &ads, &with_endpoints, name).ok()?;
                    let hash: [u8; 32] = Sha256::digest(format!("{name}#{seed_ip}")).into();
                    Some((score, hash, name))
                })
                .collect();
            want.sort_by_key(|&(score, hash, _)| (Reverse(score), hash));
            let want: Vec<&str> = want.iter().map(|c| c.2).collect();
            let got = &plan.elections[&a.svc.key].candidates;
            assert_eq!(*got, want, "seed {seed} {}", a.svc.key);
            elected += usize::from(!want.is_empty());
        }
    }
    assert!(elected > 300, "{elected}");
}

/// Issue 18 at 5,000 nodes: the layer 2 decisions of every service as the
/// speaker keeps them ([`crate::announce::Keyed`]) when every node runs a
/// speaker, memberlist off (every node in the view is a candidate), one
/// L2Advertisement of everything, `externalTrafficPolicy: Cluster`
/// Services with an endpoint on one node each. Reports the time of the
/// first decision of every service and of the updates after another
/// Node's condition flips and flips back (which decide again only the
/// elections that node can move), and what the elections hold in names
/// (each `String` and its bytes) when they keep the whole order, as the
/// speaker's did, and the winner alone, as it does. (The live heap, read
/// in an earlier version of this test, is in BENCHMARKS.md; the decisions'
/// module reads nothing of the allocator, `scripts/check-purity`.) One
/// command:
///
/// ```sh
/// L2_NODES=5000 L2_SERVICES=2000 cargo test --release -p speaker --lib l2_at_scale -- --ignored --nocapture
/// ```
#[test]
#[ignore = "a benchmark: cargo test --release -p speaker --lib l2_at_scale -- --ignored --nocapture"]
fn l2_at_scale() {
    use std::time::Instant;

    use crate::announce::Keyed;

    let var = |k: &str, d: u32| std::env::var(k).map_or(d, |v| v.parse().unwrap());
    let (nodes, count) = (var("L2_NODES", 5_000), var("L2_SERVICES", 2_000));
    let names: Vec<String> = (0..nodes).map(|i| format!("node-{i:05}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut v = view(&names[nodes as usize - 1], &refs);
    v.config.pools = vec![pool("pool", &["10.0.0.0/8"], &[])];
    v.config.l2_advertisements = vec![l2_ad("all", L2AdvertisementSpec::default())];
    v.services = services((0..count).map(|i| {
        let ip = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xff, i & 0xff);
        svc(
            &format!("svc-{i:06}"),
            &[&ip],
            &[&names[(i * 7919 % nodes) as usize]],
        )
    }));
    let (view, problems) = v.build();
    assert!(problems.is_empty(), "{problems:?}");
    let mut keyed = Keyed::default();
    let t = Instant::now();
    let changes = keyed.update(&view, true);
    let first = t.elapsed();
    assert_eq!(changes.decided, count as usize);
    // The names an election holds: each String (24 bytes) and its bytes.
    let held = |ctx: &L2Context<'_>| -> usize {
        let pool = &view.model.pools[0];
        view.services
            .iter()
            .filter_map(|svc| ctx.service(svc, pool, &mut Vec::new()))
            .flat_map(|d| d.election.candidates)
            .map(|c| 24 + c.capacity())
            .sum()
    };
    let whole = held(&L2Context::new(&view));
    let kept = held(&L2Context::keeping(&view, KEPT_CANDIDATES));
    // A condition flip on another node: only the elections it can move
    // (those it won) are decided again.
    let mut flipped = view.clone();
    let nodes_map = Arc::make_mut(&mut flipped.nodes);
    let n = nodes_map.get_mut(&names[0]).unwrap();
    n.conditions.insert("NetworkUnavailable", "True");
    let t = Instant::now();
    let again = keyed.update(&flipped, true);
    let flip = t.elapsed();
    assert!(!again.all);
    // And back: the services it won come back to it.
    let t = Instant::now();
    let back = keyed.update(&view, true);
    let unflip = t.elapsed();
    assert!(!back.all);
    assert_eq!(back.decided, again.decided);
    eprintln!(
        "l2_at_scale: {nodes} nodes, {count} services: first decision {first:?} \
         ({:.1} us per service); a node's NetworkUnavailable flip {flip:?} ({} decided again), \
         and back {unflip:?}; names held by the elections: whole order {:.1} MiB \
         ({:.0} B per service), winner alone {:.1} KiB ({:.0} B per service)",
        first.as_secs_f64() * 1e6 / f64::from(count),
        again.decided,
        whole as f64 / 1048576.0,
        whole as f64 / f64::from(count),
        kept as f64 / 1024.0,
        kept as f64 / f64::from(count),
    );
}

/// An election that keeps the best `keep` candidates (the speaker keeps
/// the winner) has the whole election's first `keep`.
#[test]
fn kept_candidates_are_the_best_of_the_whole_order() {
    let names: Vec<String> = (0..40).map(|i| format!("node-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut v = view("node-00", &refs);
    v.config.pools = vec![pool("pool", &["192.0.2.0/24"], &[])];
    // Preferences put some nodes ahead whatever their hash.
    let spec = L2AdvertisementSpec {
        preferred_node_selectors: vec![PreferredNodeSelector {
            weight: 50,
            preference: sel(&[("fast", "yes")]),
        }],
        ..L2AdvertisementSpec::default()
    };
    v.config.l2_advertisements = vec![l2_ad("all", spec)];
    for name in ["node-07", "node-31"] {
        Arc::make_mut(&mut v.view.nodes).insert(name.into(), node(name, &[("fast", "yes")]));
    }
    v.services = services((0..30).map(|i| {
        let ip = format!("192.0.2.{}", i + 1);
        let mut s = svc(&format!("s{i}"), &[&ip], &[&names[i * 13 % 40]]);
        if i % 3 == 0 {
            s.external_traffic_policy = TrafficPolicy::Local;
            let more = [ready(&names[i * 7 % 40]), ready(&names[(i * 11 + 5) % 40])];
            s.endpoints = s
                .endpoints
                .iter()
                .map(|e| (**e).clone())
                .chain(more)
                .collect();
        }
        s
    }));
    let (view, problems) = v.build();
    assert!(problems.is_empty(), "{problems:?}");
    let whole = l2_plan(&view);
    for keep in [1, 2, 3, 39, 40, 41] {
        let ctx = L2Context::keeping(&view, keep);
        for svc in &view.services {
            let pool = view.model.pools.iter().find(|p| p.name == "pool").unwrap();
            let kept = ctx.service(svc, pool, &mut Vec::new()).unwrap().election;
            let all = &whole.elections[&svc.key];
            let n = keep.min(all.candidates.len());
            assert_eq!(kept.candidates, all.candidates[..n], "{keep} {}", svc.key);
            assert_eq!(kept.winner(), all.winner());
        }
    }
    // The preferred nodes lead every Cluster election.
    let cluster = &whole.elections[&key("s1")];
    assert_eq!(cluster.candidates.len(), 40);
    let mut first_two = cluster.candidates[..2].to_vec();
    first_two.sort();
    assert_eq!(first_two, ["node-07", "node-31"]);
}
