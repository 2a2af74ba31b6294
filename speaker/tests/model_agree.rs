//! The controller and the speakers answer "which pool holds this IP" and
//! "which nodes may announce it" from the same functions of the api model
//! (`api::model::pool_for`, `api::model::Scope::selects`), so they agree.
//! Checked over seeded random configurations: pools of ranges and CIDRs,
//! labelled pools and nodes, BGP and L2 advertisements with pool, node and
//! service selectors, services with requested or automatic addresses.
//!
//! For every case the controller's allocator assigns the services; then
//! every node's speaker decides from the same model, and the test checks
//! that (1) the pool the allocator names is `pool_for` of the addresses,
//! and a request outside every pool is refused exactly when `pool_for`
//! finds none, and a speaker given the requested addresses finds no pool
//! exactly then (also for two addresses in two pools); (2) each speaker
//! finds that same pool (it reports a problem
//! when the controller's pool annotation names another); (3) the nodes
//! that announce a service over BGP are exactly those an advertisement
//! selects, and over layer 2 exactly one of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;

use api::model::Model;
use api::validate::Config;
use controller::alloc::{AllocError, Allocator, Family, Service as Wanted, ServiceKey};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use speaker::announce::{
    ClusterView, Endpoint, Node, ObjectKey, POOL_ANNOTATION, Service, TrafficPolicy, bgp_plan,
    l2_plan, stored,
};

const CASES: u64 = 300;

/// One random cluster: the configuration as YAML, node labels, services.
struct Case {
    yaml: String,
    nodes: BTreeMap<String, BTreeMap<String, String>>,
    services: Vec<(Wanted, BTreeMap<String, String>)>,
}

fn pick<'a>(rng: &mut SmallRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
}

/// A selector list in YAML flow style: none (everything) or one selector.
fn selectors(rng: &mut SmallRng, key: &str, values: &[&str]) -> String {
    if rng.random_bool(0.5) {
        "[]".into()
    } else {
        format!("[{{matchLabels: {{{key}: {}}}}}]", pick(rng, values))
    }
}

fn case(seed: u64) -> Case {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut yaml = String::new();
    let mut addresses: Vec<String> = Vec::new();
    let pools = rng.random_range(1..=4);
    for i in 0..pools {
        let mut entries = Vec::new();
        for j in 0..rng.random_range(1..=2) {
            let entry = if rng.random_bool(0.5) {
                format!("10.{i}.{j}.0/{}", rng.random_range(28..=30))
            } else {
                let a = rng.random_range(1..100);
                format!("10.{i}.{j}.{a}-10.{i}.{j}.{}", a + rng.random_range(0..5))
            };
            entries.push(entry);
        }
        if rng.random_bool(0.3) {
            entries.push(format!("2001:db8:{i}::/120"));
        }
        addresses.extend(entries.iter().cloned());
        let alloc = if rng.random_bool(0.2) {
            ", serviceAllocation: {namespaces: [ns-a]}"
        } else {
            ""
        };
        let _ = write!(
            yaml,
            "---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: pool-{i}, namespace: metallb-system, labels: {{zone: {}}}}}\nspec: {{addresses: [{}], autoAssign: {}{alloc}}}\n",
            pick(&mut rng, &["a", "b"]),
            entries.join(", "),
            rng.random_bool(0.85),
        );
    }
    yaml.push_str("---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: router, namespace: metallb-system}\nspec: {myASN: 64512, peerASN: 64500, peerAddress: 10.255.0.1, dualStackAddressFamily: true}\n");
    for (kind, n) in [("BGPAdvertisement", 0..=2), ("L2Advertisement", 0..=2)] {
        for a in 0..rng.random_range(n) {
            let pools_by = match rng.random_range(0..3) {
                0 => String::new(),
                1 => format!("ipAddressPools: [pool-{}], ", rng.random_range(0..pools)),
                _ => format!(
                    "ipAddressPoolSelectors: {}, ",
                    selectors(&mut rng, "zone", &["a", "b"])
                ),
            };
            let _ = write!(
                yaml,
                "---\napiVersion: metallb.io/v1beta1\nkind: {kind}\nmetadata: {{name: ad-{a}, namespace: metallb-system}}\nspec: {{{pools_by}nodeSelectors: {}, serviceSelectors: {}}}\n",
                selectors(&mut rng, "rack", &["r0", "r1"]),
                selectors(&mut rng, "app", &["web", "db"]),
            );
        }
    }
    let nodes = (0..rng.random_range(2..=5))
        .map(|i| {
            let rack = pick(&mut rng, &["r0", "r1"]);
            (format!("node-{i}"), labels(&[("rack", rack)]))
        })
        .collect();
    let services = (0..rng.random_range(1..=6))
        .map(|i| {
            let app = pick(&mut rng, &["web", "db"]);
            let requested: Vec<IpAddr> = match rng.random_range(0..5) {
                // An address of some pool entry, or next to one.
                0 => {
                    let entry = &addresses[rng.random_range(0..addresses.len())];
                    let base = entry.split(['/', '-']).next().unwrap();
                    let ip: IpAddr = base.parse().unwrap();
                    vec![bump(ip, rng.random_range(0..3))]
                }
                // An IPv4 and an IPv6 address of some pool entries (one
                // address per family): one pool holds both, or none does.
                1 => {
                    let base = |e: &String| -> IpAddr {
                        e.split(['/', '-']).next().unwrap().parse().unwrap()
                    };
                    let (v6, v4): (Vec<&String>, Vec<&String>) =
                        addresses.iter().partition(|a| a.contains(':'));
                    let mut ips = vec![base(v4[rng.random_range(0..v4.len())])];
                    if !v6.is_empty() {
                        ips.push(base(v6[rng.random_range(0..v6.len())]));
                    }
                    ips
                }
                // Most likely in no pool.
                2 => vec![
                    format!("10.{}.7.7", rng.random_range(0..5))
                        .parse()
                        .unwrap(),
                ],
                _ => Vec::new(),
            };
            let namespace = pick(&mut rng, &["ns-a", "ns-b"]).to_owned();
            let wanted = Wanted {
                key: ServiceKey {
                    namespace,
                    name: format!("svc-{i}"),
                },
                labels: labels(&[("app", app)]),
                families: if requested.is_empty() {
                    vec![Family::V4]
                } else {
                    requested
                        .iter()
                        .map(|ip| if ip.is_ipv6() { Family::V6 } else { Family::V4 })
                        .collect()
                },
                requested,
                ..Wanted::default()
            };
            (wanted, labels(&[("app", app)]))
        })
        .collect();
    Case {
        yaml,
        nodes,
        services,
    }
}

fn bump(ip: IpAddr, by: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(u32::from(a).wrapping_add(u32::from(by)).into()),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(u128::from(by)).into()),
    }
}

/// Every node's view of the same cluster: the assigned services with an
/// endpoint on every node.
fn view(model: &Arc<Model>, case: &Case, me: &str, services: &[Service]) -> ClusterView {
    ClusterView {
        node: me.to_owned(),
        nodes: Arc::new(
            case.nodes
                .iter()
                .map(|(name, labels)| {
                    let node = Node {
                        name: name.clone(),
                        labels: labels.clone().into(),
                        ..Node::default()
                    };
                    (name.clone(), node)
                })
                .collect(),
        ),
        model: Arc::clone(model),
        services: services.iter().cloned().map(Arc::new).collect(),
        ..ClusterView::default()
    }
}

#[test]
fn controller_and_speakers_agree_on_pools_and_announcing_nodes() {
    let mut checked = [0usize; 5];
    for seed in 0..CASES {
        let case = case(seed);
        let cfg = Config::from_yaml(&case.yaml).unwrap();
        let (model, problems) = api::validate::config(&cfg);
        assert!(
            problems.is_empty(),
            "seed {seed}: {problems:#?}\n{}",
            case.yaml
        );
        let model = Arc::new(model);
        let mut alloc = Allocator::new(model.pools.clone());
        let mut assigned = Vec::new();
        let mut requests = Vec::new();
        for (wanted, svc_labels) in &case.services {
            let result = alloc.assign(wanted);
            if !wanted.requested.is_empty() {
                let holder = model.pool_for(&wanted.requested).map(|p| p.name.clone());
                match &result {
                    Ok(a) => assert_eq!(Some(&a.pool), holder.as_ref(), "seed {seed}"),
                    // No pool holds them, or a .0/.255 of one that avoids them.
                    Err(AllocError::NotAllowed(ips)) => assert!(
                        holder.is_none()
                            || (model.pool_for(ips).is_some_and(|p| p.avoid_buggy_ips)
                                && ips.iter().any(|ip| matches!(
                                    ip,
                                    IpAddr::V4(v4) if matches!(v4.octets()[3], 0 | 255)
                                ))),
                        "seed {seed}"
                    ),
                    Err(_) => {}
                }
                requests.push((wanted, holder.is_some()));
                checked[0] += 1;
            }
            let Ok(a) = result else { continue };
            let holder = model.pool_for(&a.ips).map(|p| p.name.as_str());
            assert_eq!(holder, Some(a.pool.as_str()), "seed {seed}");
            let svc = Service {
                record: Arc::new(stored::Service {
                    key: ObjectKey::new(&wanted.key.namespace, &wanted.key.name),
                    labels: svc_labels.clone().into(),
                    annotations: labels(&[(POOL_ANNOTATION, a.pool.as_str())]).into(),
                    load_balancer: true,
                    external_traffic_policy: TrafficPolicy::Cluster,
                    ingress: a.ips.clone().into(),
                    ..stored::Service::default()
                }),
                endpoints: case
                    .nodes
                    .keys()
                    .map(|n| Endpoint {
                        node: Some(n.as_str().into()),
                        has_address: true,
                        ready: Some(true),
                        ..Endpoint::default()
                    })
                    .collect(),
            };
            assigned.push((svc, a.pool.clone()));
        }
        // The requested addresses set on a service as they are (whatever
        // the controller made of them): the speaker finds no pool for them
        // exactly when `pool_for` finds none.
        if let Some(me) = case.nodes.keys().next() {
            for (wanted, in_pool) in requests {
                let svc = Service {
                    record: Arc::new(stored::Service {
                        key: ObjectKey::new(&wanted.key.namespace, &wanted.key.name),
                        load_balancer: true,
                        ingress: wanted.requested.clone().into(),
                        ..stored::Service::default()
                    }),
                    ..Service::default()
                };
                let plan = bgp_plan(&view(&model, &case, me, &[svc]));
                let no_pool = plan
                    .problems
                    .iter()
                    .any(|p| p.field == "status.loadBalancer.ingress");
                assert_eq!(no_pool, !in_pool, "seed {seed}: {:?}", wanted.requested);
                checked[4] += usize::from(!in_pool && wanted.requested.len() == 2);
            }
        }
        let services: Vec<Service> = assigned.iter().map(|(s, _)| s.clone()).collect();
        let mut bgp_by: BTreeMap<ObjectKey, BTreeSet<String>> = BTreeMap::new();
        let mut l2_by: BTreeMap<ObjectKey, BTreeSet<String>> = BTreeMap::new();
        for me in case.nodes.keys() {
            let v = view(&model, &case, me, &services);
            let bgp = bgp_plan(&v);
            let l2 = l2_plan(&v);
            // A problem here would mean this speaker found another pool (or
            // none) for addresses the controller gave.
            assert!(bgp.problems.is_empty(), "seed {seed}: {:?}", bgp.problems);
            assert!(l2.problems.is_empty(), "seed {seed}: {:?}", l2.problems);
            for key in bgp.services.keys() {
                bgp_by.entry(key.clone()).or_default().insert(me.clone());
            }
            for a in l2.announce.values() {
                for key in &a.services {
                    l2_by.entry(key.clone()).or_default().insert(me.clone());
                }
            }
        }
        for (svc, pool_name) in &assigned {
            let pool = model.pool(pool_name).unwrap();
            let selected = |ads: Vec<&api::model::Scope>| -> BTreeSet<String> {
                case.nodes
                    .iter()
                    .filter(|(_, l)| ads.iter().any(|s| s.selects(pool, l, &svc.labels)))
                    .map(|(n, _)| n.clone())
                    .collect()
            };
            let bgp_nodes = selected(model.bgp_advertisements.iter().map(|a| &a.scope).collect());
            let l2_nodes = selected(model.l2_advertisements.iter().map(|a| &a.scope).collect());
            let announced = bgp_by.get(&svc.key).cloned().unwrap_or_default();
            assert_eq!(
                announced, bgp_nodes,
                "seed {seed}: BGP nodes of {}",
                svc.key
            );
            let l2 = l2_by.get(&svc.key).cloned().unwrap_or_default();
            if l2_nodes.is_empty() {
                assert!(
                    l2.is_empty(),
                    "seed {seed}: {} announced by {l2:?}",
                    svc.key
                );
            } else {
                assert_eq!(l2.len(), 1, "seed {seed}: one L2 announcer for {}", svc.key);
                assert!(
                    l2.is_subset(&l2_nodes),
                    "seed {seed}: {l2:?} of {l2_nodes:?}"
                );
                checked[3] += 1;
            }
            checked[1] += 1;
            checked[2] += usize::from(!bgp_nodes.is_empty());
        }
    }
    // The generator reaches every branch often enough to mean something.
    let [requested, assigned, bgp, l2, split] = checked;
    assert!(
        requested > 100 && assigned > 300 && bgp > 100 && l2 > 50 && split > 10,
        "too few cases exercised: {checked:?}"
    );
}
