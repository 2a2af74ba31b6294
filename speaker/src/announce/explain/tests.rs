//! Decision tables for [`explain`]: each row breaks one thing and checks
//! the reason given, and every answer agrees with the whole plans.

use std::collections::BTreeSet;
use std::sync::Arc;

use api::v1beta1::{BGPAdvertisementSpec, L2AdvertisementSpec};

use super::super::fixture::*;
use super::super::view::{Exclusion, TrafficPolicy};
use super::super::{bgp_plan, l2_plan};
use super::*;

const NODES: [&str; 3] = ["n1", "n2", "n3"];

/// n1..n3, live members; one pool; iBGP peer `spine` (10.0.0.254) and
/// eBGP peer `edge` (10.0.0.253); BGP advertisement `bgp` (localPref 200,
/// community 64512:100) and L2 advertisement `l2` of everything; service
/// `web` 192.0.2.10 with endpoints on every node.
fn base() -> Fixture {
    let mut v = view("n1", &NODES);
    v.members = Some(NODES.iter().map(|n| (*n).to_owned()).collect());
    v.config.pools = vec![pool("pool", &["192.0.2.0/24"], &[])];
    v.config.peers = vec![
        peer("spine", 64512, 64512, "10.0.0.254"),
        peer("edge", 64512, 65000, "10.0.0.253"),
    ];
    v.config.bgp_advertisements = vec![bgp_ad(
        "bgp",
        BGPAdvertisementSpec {
            local_pref: Some(200),
            communities: vec!["64512:100".into()],
            ..BGPAdvertisementSpec::default()
        },
    )];
    v.config.l2_advertisements = vec![l2_ad("l2", L2AdvertisementSpec::default())];
    v.services = vec![svc("web", &["192.0.2.10"], &NODES).into()];
    v
}

fn explain_on(f: &Fixture, node: &str) -> Explanation {
    let mut f = f.clone();
    f.view.node = node.into();
    let (view, problems) = f.build();
    assert!(problems.is_empty(), "{problems:?}");
    explain(&view, &key("web"))
}

/// What a row checks: the pool, the BGP reason and routes (peer, prefix,
/// sent), and this node's candidacy.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    pool: Result<String, Skipped>,
    excluded: Option<Exclusion>,
    withheld: Option<Withheld>,
    routes: Vec<(String, String, bool)>,
    l2_withheld: Option<L2Withheld>,
    candidacy: Option<Result<i64, NotCandidate>>,
}

fn summary(e: &Explanation) -> Summary {
    Summary {
        pool: e.pool.clone(),
        excluded: e.excluded,
        withheld: e.bgp.withheld.clone(),
        routes: e
            .bgp
            .routes
            .iter()
            .map(|r| (r.peer.clone(), r.prefix.clone(), r.sent))
            .collect(),
        l2_withheld: e.l2.withheld,
        candidacy: e.l2.candidacy,
    }
}

fn announced() -> Vec<(String, String, bool)> {
    vec![
        ("edge".into(), "192.0.2.10/32".into(), true),
        ("spine".into(), "192.0.2.10/32".into(), true),
    ]
}

fn ok(pool: &str) -> Result<String, Skipped> {
    Ok(pool.into())
}

#[test]
fn each_reason_as_the_decisions_give_it() {
    type Change = fn(&mut Fixture);
    let rows: Vec<(&str, Change, Summary)> = vec![
        (
            "announced",
            |_| {},
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: None,
                routes: announced(),
                l2_withheld: None,
                candidacy: Some(Ok(0)),
            },
        ),
        (
            "the exclusion label",
            |f| {
                Arc::make_mut(&mut f.nodes).get_mut("n1").unwrap().labels = labels(&[(
                    "node.kubernetes.io/exclude-from-external-load-balancers",
                    "",
                )])
                .into();
            },
            Summary {
                pool: ok("pool"),
                excluded: Some(Exclusion::ExcludeLabel),
                withheld: Some(Withheld::Excluded(Exclusion::ExcludeLabel)),
                routes: vec![],
                l2_withheld: None,
                candidacy: Some(Err(NotCandidate::Excluded(Exclusion::ExcludeLabel))),
            },
        ),
        (
            "NetworkUnavailable",
            |f| {
                let n = Arc::make_mut(&mut f.nodes).get_mut("n1").unwrap();
                n.conditions.insert("NetworkUnavailable", "True");
            },
            Summary {
                pool: ok("pool"),
                excluded: Some(Exclusion::NetworkUnavailable),
                withheld: Some(Withheld::Excluded(Exclusion::NetworkUnavailable)),
                routes: vec![],
                l2_withheld: None,
                candidacy: Some(Err(NotCandidate::Excluded(Exclusion::NetworkUnavailable))),
            },
        ),
        (
            "Local without an endpoint here",
            |f| {
                f.services = vec![svc("web", &["192.0.2.10"], &["n2"]).into()];
                Arc::make_mut(&mut f.services[0]).external_traffic_policy = TrafficPolicy::Local;
            },
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: Some(Withheld::NoLocalEndpoint),
                routes: vec![],
                l2_withheld: None,
                candidacy: Some(Err(NotCandidate::NoLocalEndpoint)),
            },
        ),
        (
            "no serving endpoint at all",
            |f| f.services = vec![svc("web", &["192.0.2.10"], &[]).into()],
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: Some(Withheld::NoServingEndpoint),
                routes: vec![],
                l2_withheld: None,
                candidacy: Some(Err(NotCandidate::NoServingEndpoint)),
            },
        ),
        (
            "advertisements select other nodes",
            |f| {
                let rack = vec![sel(&[("rack", "r2")])];
                f.config.bgp_advertisements[0].spec.node_selectors = rack.clone();
                f.config.l2_advertisements[0].spec.node_selectors = rack;
            },
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: Some(Withheld::NoAdvertisement),
                routes: vec![],
                l2_withheld: None,
                candidacy: Some(Err(NotCandidate::NodeSelectors)),
            },
        ),
        (
            "the peer selects other nodes",
            |f| f.config.peers[1].spec.node_selectors = vec![sel(&[("rack", "r2")])],
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: None,
                routes: vec![("spine".into(), "192.0.2.10/32".into(), true)],
                l2_withheld: None,
                candidacy: Some(Ok(0)),
            },
        ),
        (
            "no speaker on this node",
            |f| f.members = Some(["n2".to_owned(), "n3".to_owned()].into()),
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: None,
                routes: announced(),
                l2_withheld: None,
                candidacy: Some(Err(NotCandidate::NotMember)),
            },
        ),
        (
            "a shared IP with service selectors",
            |f| {
                Arc::make_mut(&mut f.services[0]).labels = labels(&[("app", "web")]).into();
                Arc::make_mut(&mut f.services[0])
                    .annotations
                    .insert("metallb.io/allow-shared-ip", "k");
                f.config.l2_advertisements[0].spec.service_selectors = vec![sel(&[("app", "web")])];
            },
            Summary {
                pool: ok("pool"),
                excluded: None,
                withheld: None,
                routes: announced(),
                l2_withheld: Some(L2Withheld::SharedIpWithServiceSelectors),
                candidacy: None,
            },
        ),
        (
            "no IP yet",
            |f| Arc::make_mut(&mut f.services[0]).ingress = Default::default(),
            Summary {
                pool: Err(Skipped::NoIngress),
                excluded: None,
                withheld: None,
                routes: vec![],
                l2_withheld: None,
                candidacy: None,
            },
        ),
        (
            "another class",
            |f| Arc::make_mut(&mut f.services[0]).load_balancer_class = Some("other".into()),
            Summary {
                pool: Err(Skipped::OtherClass(Some("other".into()))),
                excluded: None,
                withheld: None,
                routes: vec![],
                l2_withheld: None,
                candidacy: None,
            },
        ),
        (
            "an IP in no pool",
            |f| Arc::make_mut(&mut f.services[0]).ingress = [ip("198.51.100.1")].into(),
            Summary {
                pool: Err(Skipped::NoPool),
                excluded: None,
                withheld: None,
                routes: vec![],
                l2_withheld: None,
                candidacy: None,
            },
        ),
        (
            "no such service",
            |f| Arc::make_mut(&mut f.services[0]).key = key("other"),
            Summary {
                pool: Err(Skipped::Unknown),
                excluded: None,
                withheld: None,
                routes: vec![],
                l2_withheld: None,
                candidacy: None,
            },
        ),
    ];
    for (name, change, want) in rows {
        let mut f = base();
        change(&mut f);
        let got = explain_on(&f, "n1");
        assert_eq!(summary(&got), want, "{name}");
        agrees_with_plans(&f, name);
    }
}

/// On every node, what `explain` says is sent and answered is what the
/// whole plans do.
fn agrees_with_plans(f: &Fixture, row: &str) {
    for node in NODES {
        let mut mine = f.clone();
        mine.view.node = node.into();
        let (view, _) = mine.build();
        let e = explain(&view, &key("web"));
        let sent: BTreeSet<String> = e
            .bgp
            .routes
            .iter()
            .filter(|r| r.sent)
            .map(|r| r.peer.clone())
            .collect();
        let plan = bgp_plan(&view);
        let planned = plan.services.get(&key("web")).cloned().unwrap_or_default();
        assert_eq!(sent, planned, "{row}: BGP on {node}");
        let answers = l2_plan(&view)
            .announce
            .values()
            .any(|a| a.services.contains(&key("web")));
        assert_eq!(e.l2.interfaces.is_some(), answers, "{row}: L2 on {node}");
        if let Some(election) = &e.l2.election {
            let winner = election.winner().map(str::to_owned);
            let candidate = matches!(e.l2.candidacy, Some(Ok(_)));
            assert!(!answers || winner.as_deref() == Some(node), "{row}");
            assert_eq!(
                candidate,
                election.candidates.iter().any(|c| c == node),
                "{row}: candidacy on {node}"
            );
        }
    }
}

#[test]
fn routes_carry_the_merged_attributes() {
    let f = base();
    let e = explain_on(&f, "n2");
    let spine = e.bgp.routes.iter().find(|r| r.peer == "spine").unwrap();
    assert_eq!(spine.local_pref, Some(200));
    assert_eq!(spine.communities, ["64512:100"]);
    // LOCAL_PREF goes to iBGP peers only.
    let edge = e.bgp.routes.iter().find(|r| r.peer == "edge").unwrap();
    assert_eq!(edge.local_pref, None);
    assert_eq!(
        e.bgp.sessions,
        vec![
            Session {
                peer: "spine".into(),
                state: SessionState::Runs {
                    target: PeerTarget::Address("10.0.0.254:179".parse().unwrap()),
                    ibgp: true
                }
            },
            Session {
                peer: "edge".into(),
                state: SessionState::Runs {
                    target: PeerTarget::Address("10.0.0.253:179".parse().unwrap()),
                    ibgp: false
                }
            },
        ]
    );
    // Another service sharing the IP adds its community to the route.
    let mut f = base();
    Arc::make_mut(&mut f.services[0]).labels = labels(&[("app", "web")]).into();
    f.config.bgp_advertisements[0].spec.service_selectors = vec![sel(&[("app", "web")])];
    f.config.bgp_advertisements.push(bgp_ad(
        "db",
        BGPAdvertisementSpec {
            local_pref: Some(200),
            communities: vec!["64512:200".into()],
            service_selectors: vec![sel(&[("app", "db")])],
            ..BGPAdvertisementSpec::default()
        },
    ));
    let mut db = svc("db", &["192.0.2.10"], &NODES);
    db.labels = labels(&[("app", "db")]).into();
    f.services.push(db.into());
    let e = explain_on(&f, "n1");
    let spine = e.bgp.routes.iter().find(|r| r.peer == "spine").unwrap();
    assert_eq!(spine.prefix, "192.0.2.10/32");
    assert_eq!(spine.communities, ["64512:100", "64512:200"]);
    assert!(spine.sent);
    assert_eq!(
        e.bgp.advertisements,
        vec![
            Selection {
                name: "bgp".into(),
                pool: true,
                node: true,
                service: true
            },
            Selection {
                name: "db".into(),
                pool: true,
                node: true,
                service: false
            },
        ]
    );
    // Services that share the IP disagree on LOCAL_PREF: withheld,
    // and the problem says so.
    f.config.bgp_advertisements[1].spec.local_pref = Some(300);
    let e = explain_on(&f, "n1");
    let spine = e.bgp.routes.iter().find(|r| r.peer == "spine").unwrap();
    assert!(!spine.sent);
    assert!(
        e.problems
            .iter()
            .any(|p| p.name == "spine" && p.message.contains("different localPref")),
        "{:?}",
        e.problems
    );
}

#[test]
fn the_election_and_the_peer_selectors_read_as_written() {
    let mut f = base();
    f.config.peers[0].spec.node_selectors = vec![sel(&[("rack", "r2")])];
    let e = explain_on(&f, "n1");
    assert_eq!(
        e.bgp.sessions[0].state,
        SessionState::NotSelected("[rack=r2]".into())
    );
    let election = e.l2.election.unwrap();
    assert_eq!(election.candidates.len(), 3);
    let winner = election.winner().unwrap().to_owned();
    let on_winner = explain_on(&f, &winner);
    assert_eq!(on_winner.l2.interfaces, Some(Interfaces::All));
    assert_eq!(
        NotCandidate::NoLocalEndpoint.to_string(),
        "externalTrafficPolicy is Local and no serving endpoint is on this node"
    );
    assert_eq!(
        Withheld::Excluded(Exclusion::ExcludeLabel).to_string(),
        "the node is excluded: it has the label node.kubernetes.io/exclude-from-external-load-balancers"
    );
    // An advertisement that names nothing selects everything.
    let p = Pool::new("p", &[]).unwrap();
    let none = Labels::default();
    assert!(Selection::of("x", &Scope::default(), &p, &none, &none).applies());
}
