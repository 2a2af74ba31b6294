//! The keyed state agrees with the whole plans after every step of seeded
//! random histories, and its changes, applied in order, rebuild it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::v1beta1::{BGPAdvertisementSpec, L2AdvertisementSpec};
use api::validate::{self, Config};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::super::coexist::MetallbSpeakers;
use super::super::fixture::*;
use super::super::view::{ClusterView, TrafficPolicy};
use super::super::{announcements, bgp_plan, l2_plan};
use super::*;

const NODES: [&str; 4] = ["n1", "n2", "n3", "n4"];
const STEPS: usize = 40;
const CASES: u64 = 60;

/// A configuration among a few that exercise aggregation, LOCAL_PREF
/// conflicts across services, communities, pool, node, service and peer
/// selectors, and interfaces.
fn config(rng: &mut SmallRng) -> Config {
    let mut c = Config {
        pools: vec![
            pool("a", &["192.0.2.0/24", "2001:db8::/64"], &[("tier", "web")]),
            pool("b", &["198.51.100.0/24"], &[]),
        ],
        peers: vec![
            peer("ibgp", 64512, 64512, "10.0.0.254"),
            peer("ebgp", 64512, 65000, "10.0.0.253"),
        ],
        ..Config::default()
    };
    if rng.random_bool(0.3) {
        c.peers[1].spec.node_selectors = vec![sel(&[("rack", "r1")])];
    }
    let mut ads = vec![bgp_ad("all", BGPAdvertisementSpec::default())];
    if rng.random_bool(0.5) {
        ads.push(bgp_ad(
            "agg",
            BGPAdvertisementSpec {
                aggregation_length: Some(rng.random_range(24..=32)),
                aggregation_length_v6: Some(64),
                communities: vec!["64512:100".into()],
                ip_address_pool_selectors: vec![sel(&[("tier", "web")])],
                peers: vec!["ebgp".into()],
                ..BGPAdvertisementSpec::default()
            },
        ));
    }
    if rng.random_bool(0.5) {
        // LOCAL_PREF differs by service label: services sharing an IP
        // conflict towards the iBGP peer.
        for (name, pref, app) in [("pa", 100, "a"), ("pb", 200, "b")] {
            ads.push(bgp_ad(
                name,
                BGPAdvertisementSpec {
                    local_pref: Some(pref),
                    service_selectors: vec![sel(&[("app", app)])],
                    ..BGPAdvertisementSpec::default()
                },
            ));
        }
    }
    if rng.random_bool(0.3) {
        ads[0].spec.node_selectors = vec![sel(&[("rack", "r1")])];
    }
    c.bgp_advertisements = ads;
    let mut l2 = vec![l2_ad("l2", L2AdvertisementSpec::default())];
    if rng.random_bool(0.5) {
        l2.push(l2_ad(
            "eth",
            L2AdvertisementSpec {
                interfaces: vec!["eth1".into()],
                node_selectors: vec![sel(&[("rack", "r1")])],
                ..L2AdvertisementSpec::default()
            },
        ));
        l2[0].spec.interfaces = vec!["eth0".into()];
        // Services sharing an IP may answer on different interfaces.
        l2.push(l2_ad(
            "app-b",
            L2AdvertisementSpec {
                interfaces: vec!["eth2".into()],
                service_selectors: vec![sel(&[("app", "b")])],
                ..L2AdvertisementSpec::default()
            },
        ));
    }
    c.l2_advertisements = l2;
    c
}

fn random_service(rng: &mut SmallRng, name: &str) -> Service {
    let v4 = ["192.0.2.10", "192.0.2.11", "192.0.2.200", "198.51.100.7"];
    let mut ips = vec![v4[rng.random_range(0..v4.len())]];
    if ips[0].starts_with("192.0.2") && rng.random_bool(0.3) {
        ips.push("2001:db8::10");
    }
    let endpoints: Vec<&str> = NODES
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.4))
        .collect();
    let mut s = svc(name, &ips, &endpoints);
    if rng.random_bool(0.2) {
        s.ingress = Default::default();
    }
    if rng.random_bool(0.1) {
        // Outside every pool: a problem, nothing announced.
        s.ingress = [ip("203.0.113.1")].into();
    }
    if rng.random_bool(0.5) {
        s.external_traffic_policy = TrafficPolicy::Local;
    }
    let app = ["a", "b", "c"][rng.random_range(0..3)];
    s.labels = labels(&[("app", app)]).into();
    if rng.random_bool(0.2) {
        s.annotations.insert("metallb.io/allow-shared-ip", "k");
    }
    s
}

fn random_nodes(rng: &mut SmallRng) -> BTreeMap<String, Node> {
    NODES
        .iter()
        .map(|n| {
            let mut node = node(n, &[]);
            if rng.random_bool(0.5) {
                node.labels.insert("rack", "r1");
            }
            if rng.random_bool(0.1) {
                node.labels.insert(super::super::view::EXCLUDE_LABEL, "");
            }
            ((*n).to_owned(), node)
        })
        .collect()
}

/// What the drivers would hold after applying every change in order.
#[derive(Default)]
struct Applied {
    routes: BTreeMap<String, BTreeMap<IpPrefix, Arc<RouteAttrs>>>,
    l2: BTreeMap<IpAddr, Interfaces>,
    announced: BTreeSet<(Via, ObjectKey, IpAddr)>,
}

impl Applied {
    fn apply(&mut self, keyed: &Keyed, changes: &Changes) {
        // Peers that are new take their table whole, as after set_peer.
        self.routes.retain(|p, _| keyed.peers().contains_key(p));
        for peer in keyed.peers().keys() {
            if !self.routes.contains_key(peer) {
                self.routes.insert(peer.clone(), keyed.routes(peer));
                continue;
            }
            let table = self.routes.get_mut(peer).unwrap();
            for (prefix, attrs) in changes.routes.get(peer).into_iter().flatten() {
                match attrs {
                    Some(a) => table.insert(*prefix, Arc::clone(a)),
                    None => table.remove(prefix),
                };
            }
        }
        for (ip, interfaces) in &changes.l2 {
            match interfaces {
                Some(i) => self.l2.insert(*ip, i.clone()),
                None => self.l2.remove(ip),
            };
        }
        for a in &changes.withdrawn {
            assert!(
                self.announced.remove(a),
                "withdrawn but not announced: {a:?}"
            );
        }
        for a in &changes.announced {
            assert!(self.announced.insert(a.clone()), "announced twice: {a:?}");
        }
    }
}

/// Checks the keyed state against the whole plans of `view`; the
/// announcements only when `report` is given: they are then read (the
/// last update's changes applied, as the run loop does once the routes
/// are out) and kept in it, as the status writer's report holds them.
fn check(
    step: &str,
    view: &ClusterView,
    l2_on: bool,
    keyed: &mut Keyed,
    applied: &Applied,
    report: Option<&mut Option<Arc<Announcements>>>,
) {
    let bgp = bgp_plan(view);
    let l2 = l2_on.then(|| l2_plan(view));
    // Sessions and routes.
    let sessions: BTreeMap<String, PeerPlan> = bgp
        .peers
        .iter()
        .map(|(n, p)| {
            let mut p = p.clone();
            p.routes.clear();
            (n.clone(), p)
        })
        .collect();
    assert_eq!(*keyed.peers(), sessions, "{step}: peers");
    for (name, p) in &bgp.peers {
        assert_eq!(keyed.routes(name), p.routes, "{step}: routes of {name}");
        assert_eq!(keyed.route_count(name), p.routes.len(), "{step}");
        assert_eq!(
            applied.routes[name], p.routes,
            "{step}: applied routes of {name}"
        );
    }
    // Layer 2.
    let want_l2: BTreeMap<IpAddr, Interfaces> = l2
        .iter()
        .flat_map(|p| p.announce.iter())
        .map(|(ip, a)| (*ip, a.interfaces.clone()))
        .collect();
    assert_eq!(keyed.l2(), want_l2, "{step}: layer 2");
    assert_eq!(applied.l2, want_l2, "{step}: applied layer 2");
    assert_eq!(
        *keyed.yielded(),
        l2.as_ref().map(|p| p.yielded.clone()).unwrap_or_default(),
        "{step}"
    );
    assert_eq!(
        *keyed.deferred(),
        l2.as_ref().map(|p| p.deferred.clone()).unwrap_or_default(),
        "{step}: deferred to MetalLB"
    );
    // Status, and the (protocol, service, IP) log.
    let want = announcements(&bgp, l2.as_ref());
    let mut report = report;
    if let Some(report) = report.as_deref_mut() {
        let read = keyed.announcements();
        assert_eq!(**read, want, "{step}: announcements");
        *report = Some(Arc::clone(read));
    }
    let ingress: BTreeMap<&ObjectKey, &[IpAddr]> = view
        .services
        .iter()
        .map(|s| (&s.key, &*s.ingress))
        .collect();
    let mut triples = BTreeSet::new();
    for (key, a) in &want {
        for via in vias(a) {
            for ip in ingress[key].iter() {
                triples.insert((via, key.clone(), *ip));
            }
        }
    }
    assert_eq!(applied.announced, triples, "{step}: announced");
    // The metrics' lines, read from the announcements and the view.
    if let Some(Some(read)) = report.as_deref() {
        let metrics = crate::metrics::Announced {
            announcements: Arc::clone(read),
            services: Arc::new(view.services.clone()),
        };
        let lines: Vec<_> = applied.announced.iter().cloned().collect();
        assert_eq!(
            metrics.triples(),
            lines,
            "{step}: the metrics' announced lines"
        );
    }
    // Problems, as the speaker reports them (a set of messages).
    let text =
        |ps: &[Problem]| -> BTreeSet<String> { ps.iter().map(ToString::to_string).collect() };
    let mut whole = text(&bgp.problems);
    whole.extend(text(l2.as_ref().map_or(&[][..], |p| &p.problems)));
    assert_eq!(text(&keyed.problems()), whole, "{step}: problems");
    assert_eq!(keyed.excluded(), bgp.excluded, "{step}");
}

#[test]
fn keyed_matches_whole_plans() {
    let mut decided_alone = 0;
    let mut others_alone = 0;
    let mut ready_steps = 0;
    let mut deferred_steps = 0;
    for seed in 0..CASES {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (model, problems) = validate::config(&config(&mut rng));
        assert!(problems.is_empty(), "seed {seed}: {problems:?}");
        let mut view = ClusterView {
            node: "n1".into(),
            nodes: Arc::new(random_nodes(&mut rng)),
            model: Arc::new(model),
            services: (0..8)
                .map(|i| random_service(&mut rng, &format!("s{i}")).into())
                .collect(),
            members: Some(NODES.iter().map(|n| (*n).to_owned()).collect()),
            ..ClusterView::default()
        };
        let mut l2_on = true;
        let mut ready_alone = false;
        let mut keyed = Keyed::new();
        // Every other history crosses the update counter's wrap halfway
        // (its marks are 32 bits): it must decide as the others do.
        let wraps = seed % 2 == 1;
        if wraps {
            keyed.generation = u32::MAX - STEPS as u32 / 2;
        }
        let mut applied = Applied::default();
        let mut report = None;
        for step in 0..STEPS {
            let what = rng.random_range(0..106);
            match what {
                // Most steps change services only, as in a cluster.
                0..50 => {
                    let i = rng.random_range(0..view.services.len());
                    let name = view.services[i].key.name.clone();
                    view.services[i] = random_service(&mut rng, &name).into();
                }
                50..60 => {
                    let name = format!("s{}", rng.random_range(8..16));
                    view.services.retain(|s| *s.key.name != *name);
                    view.services.push(random_service(&mut rng, &name).into());
                }
                60..70 if view.services.len() > 1 => {
                    let i = rng.random_range(0..view.services.len());
                    view.services.remove(i);
                }
                70..78 => view.nodes = Arc::new(random_nodes(&mut rng)),
                78..86 => {
                    let n = NODES[rng.random_range(1..NODES.len())];
                    let m = view.members.get_or_insert_with(BTreeSet::new);
                    if !m.remove(n) {
                        m.insert(n.to_owned());
                    }
                }
                86..92 => l2_on = !l2_on,
                92..96 => {
                    let (model, _) = validate::config(&config(&mut rng));
                    view.model = Arc::new(model);
                }
                // A migration from MetalLB: one of its speakers comes or
                // goes, and its status may name it for a service.
                96..99 => {
                    let api = Arc::make_mut(view.api_speakers.get_or_insert_with(Default::default));
                    let m = api.metallb.get_or_insert_with(|| MetallbSpeakers {
                        synced: true,
                        l2_advertised: true,
                        ..MetallbSpeakers::default()
                    });
                    let n = NODES[rng.random_range(0..NODES.len())].to_owned();
                    if !m.running.remove(&n) {
                        m.running.insert(n.clone());
                    }
                    // Its Pod, on the node while it runs (BGP waits there);
                    // now and then its L2Advertisements deleted.
                    m.present.clone_from(&m.running);
                    if rng.random_bool(0.1) {
                        m.l2_advertised = !m.l2_advertised;
                    }
                    let svc = format!("s{}", rng.random_range(0..16));
                    m.l2_owners.clear();
                    if rng.random_bool(0.5) {
                        m.l2_owners.insert(key(&svc), BTreeSet::from([n]));
                    }
                }
                // The speakers the API shows Ready (read only while
                // isolated), and now and then isolation itself.
                99..106 => {
                    let api = Arc::make_mut(view.api_speakers.get_or_insert_with(Default::default));
                    api.ready = NODES
                        .iter()
                        .filter(|_| rng.random_bool(0.5))
                        .map(|n| (*n).to_owned())
                        .collect();
                    if rng.random_bool(0.3) {
                        view.isolated = !view.isolated;
                    } else if !view.isolated {
                        ready_alone = true;
                    }
                }
                _ => {}
            }
            let changes = keyed.update(&view, l2_on);
            // (The first update decides everything.)
            if std::mem::take(&mut ready_alone) && step > 0 {
                // Not isolated, the Ready speakers are not read: nothing
                // to decide.
                assert!(
                    !changes.all && changes.decided == 0,
                    "seed {seed} step {step}: {changes:?}"
                );
                ready_steps += 1;
            }
            if !changes.all {
                decided_alone += 1;
                if what < 70 {
                    // A service step decides that service (and the one it
                    // replaced) alone.
                    assert!(changes.decided <= 2, "seed {seed} step {step}: {changes:?}");
                } else {
                    // Other nodes or members alone: only elections they
                    // can move are decided again.
                    others_alone += 1;
                    assert!(
                        changes.decided <= view.services.len(),
                        "seed {seed} step {step}: {changes:?}"
                    );
                }
            }
            applied.apply(&keyed, &changes);
            if !keyed.deferred().is_empty() {
                deferred_steps += 1;
            }
            check(
                &format!("seed {seed} step {step}"),
                &view,
                l2_on,
                &mut keyed,
                &applied,
                // Two steps in three read the announcements; the third's
                // are applied by the next update.
                (step % 3 != 1).then_some(&mut report),
            );
        }
        if wraps {
            assert!(
                keyed.generation < STEPS as u32,
                "seed {seed}: the counter did not wrap ({})",
                keyed.generation
            );
        }
    }
    // Some steps left services to MetalLB's speakers.
    assert!(deferred_steps > 0, "no step deferred to MetalLB");
    // The histories exercised the incremental path, not only full ones.
    assert!(
        decided_alone > CASES as usize * STEPS / 2,
        "{decided_alone}"
    );
    // And changes of other nodes or members alone, not decided whole.
    assert!(others_alone > CASES as usize, "{others_alone}");
    assert!(ready_steps > 0, "no step changed the Ready speakers alone");
}

#[test]
fn an_unchanged_view_changes_nothing() {
    let mut rng = SmallRng::seed_from_u64(7);
    let (model, _) = validate::config(&config(&mut rng));
    let view = ClusterView {
        node: "n1".into(),
        nodes: Arc::new(random_nodes(&mut rng)),
        model: Arc::new(model),
        services: (0..8)
            .map(|i| random_service(&mut rng, &format!("s{i}")).into())
            .collect(),
        ..ClusterView::default()
    };
    let mut keyed = Keyed::new();
    let first = keyed.update(&view, true);
    assert!(first.all);
    assert_eq!(first.decided, 8);
    let again = keyed.update(&view, true);
    assert_eq!(again, Changes::default());
}
