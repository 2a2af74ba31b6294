//! Allocator table tests, modelled on MetalLB's e2e "IP Assignment"
//! scenarios, plus property tests over random operation sequences.

use std::net::IpAddr;

use api::model::{Selector, Selectors};

use super::*;

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A Service `ns/name` with port 80/TCP.
pub(super) fn svc(ns: &str, name: &str) -> Service {
    Service {
        key: ServiceKey {
            namespace: ns.into(),
            name: name.into(),
        },
        ports: vec![Port {
            port: 80,
            protocol: Protocol::Tcp,
        }],
        ..Service::default()
    }
}

pub(super) fn pool(name: &str, ranges: &[&str]) -> Pool {
    Pool::new(name, ranges).unwrap()
}

#[test]
fn ranges_from_pool_entries() {
    let r = api::addr::AddressRange::parse("10.0.0.0/30").unwrap();
    assert_eq!(
        (r.first(), r.last(), r.len()),
        (ip("10.0.0.0"), ip("10.0.0.3"), 4)
    );
    let p = Pool::new("p", &["10.0.0.5-10.0.0.9", "2001:db8::/64", "::/0"]).unwrap();
    assert_eq!(p.ranges[0].len(), 5);
    assert_eq!(p.ranges[1].len(), 1 << 64);
    assert_eq!(p.ranges[2].len(), u128::MAX);
    assert!(Pool::new("p", &["10.0.0.1/33"]).is_err());
    assert!(Pool::new("p", &["10.0.0.9-10.0.0.1"]).is_err());
}

#[test]
fn lowest_free_address_and_reuse_after_release() {
    let mut a = Allocator::new(vec![pool("p", &["10.0.0.0/30"])]);
    let s1 = a.assign(&svc("ns", "a")).unwrap();
    let s2 = a.assign(&svc("ns", "b")).unwrap();
    assert_eq!((s1.ips[0], s2.ips[0]), (ip("10.0.0.0"), ip("10.0.0.1")));
    assert_eq!(s1.pool, "p");
    // Idempotent.
    assert_eq!(a.assign(&svc("ns", "a")).unwrap(), s1);
    a.assign(&svc("ns", "c")).unwrap();
    a.assign(&svc("ns", "d")).unwrap();
    assert_eq!(
        a.assign(&svc("ns", "e")),
        Err(AllocError::Exhausted { pools: "p".into() })
    );
    // MetalLB e2e: a freed IP is handed to the pending service.
    a.release(&svc("ns", "b").key);
    assert_eq!(a.assign(&svc("ns", "e")).unwrap().ips, vec![ip("10.0.0.1")]);
    assert_eq!(
        a.pool_stats("p"),
        Some(PoolStats {
            total: 4,
            in_use: 4
        })
    );
}

#[test]
fn avoid_buggy_ips_skips_dot_zero_and_dot_255() {
    let mut p = pool("p", &["10.0.0.254-10.0.1.2"]);
    p.avoid_buggy_ips = true;
    let mut a = Allocator::new(vec![p]);
    let got: Vec<IpAddr> = (0..3)
        .map(|i| a.assign(&svc("ns", &format!("s{i}"))).unwrap().ips[0])
        .collect();
    assert_eq!(got, [ip("10.0.0.254"), ip("10.0.1.1"), ip("10.0.1.2")]);
    assert!(a.assign(&svc("ns", "s3")).is_err());
}

#[test]
fn requested_ips() {
    let mut a = Allocator::new(vec![
        pool("p", &["10.0.0.0/24"]),
        pool("q", &["10.0.1.0/24"]),
    ]);
    let mut s = svc("ns", "a");
    s.requested = vec![ip("10.0.1.7")];
    assert_eq!(
        a.assign(&s).unwrap(),
        Assignment {
            pool: "q".into(),
            ips: vec![ip("10.0.1.7")]
        }
    );
    // Not in any pool.
    let mut s2 = svc("ns", "b");
    s2.requested = vec![ip("192.0.2.1")];
    assert_eq!(
        a.assign(&s2),
        Err(AllocError::NotAllowed(vec![ip("192.0.2.1")]))
    );
    // In use, no sharing key.
    s2.requested = vec![ip("10.0.1.7")];
    assert_eq!(
        a.assign(&s2),
        Err(AllocError::InUse {
            ip: ip("10.0.1.7"),
            by: s.key.clone()
        })
    );
    // The annotated pool must hold it.
    s2.requested = vec![ip("10.0.1.8")];
    s2.pool = Some("p".into());
    assert_eq!(
        a.assign(&s2),
        Err(AllocError::WrongPool {
            ips: vec![ip("10.0.1.8")],
            pool: "p".into()
        })
    );
    // Two of one family is not a valid request.
    s2.pool = None;
    s2.requested = vec![ip("10.0.1.8"), ip("10.0.1.9")];
    assert!(matches!(a.assign(&s2), Err(AllocError::BadRequest(_))));
    // Auto-assignment never takes a requested address.
    let auto = a.assign(&svc("ns", "c")).unwrap();
    assert_eq!(auto.ips, vec![ip("10.0.0.0")]);
}

#[test]
fn auto_assign_off_and_pool_annotation() {
    let mut reserved = pool("reserved", &["10.0.9.0/24"]);
    reserved.auto_assign = false;
    let mut a = Allocator::new(vec![reserved.clone()]);
    assert_eq!(a.assign(&svc("ns", "a")), Err(AllocError::NoPool));
    let mut s = svc("ns", "b");
    s.pool = Some("reserved".into());
    assert_eq!(a.assign(&s).unwrap().ips, vec![ip("10.0.9.0")]);
    s.pool = Some("nope".into());
    assert_eq!(a.assign(&s), Err(AllocError::UnknownPool("nope".into())));
    let mut r = svc("ns", "c");
    r.requested = vec![ip("10.0.9.9")];
    assert_eq!(a.assign(&r).unwrap().pool, "reserved");
    // Changing the annotation moves the service.
    let mut a = Allocator::new(vec![reserved, pool("other", &["10.0.8.0/24"])]);
    let mut s = svc("ns", "d");
    s.pool = Some("reserved".into());
    a.assign(&s).unwrap();
    s.pool = Some("other".into());
    assert_eq!(a.assign(&s).unwrap().ips, vec![ip("10.0.8.0")]);
    assert_eq!(a.pool_stats("reserved").unwrap().in_use, 0);
}

#[test]
fn sharing_rules() {
    let mut a = Allocator::new(vec![pool("p", &["10.0.0.0/24"])]);
    let mut web = svc("ns", "web");
    web.sharing_key = Some("k".into());
    let mut dns = svc("ns", "dns");
    dns.sharing_key = Some("k".into());
    dns.ports = vec![Port {
        port: 53,
        protocol: Protocol::Udp,
    }];
    let w = a.assign(&web).unwrap();
    assert_eq!(
        a.assign(&dns).unwrap().ips,
        w.ips,
        "same key, different ports: shared"
    );
    // Same port: not shareable.
    let mut web2 = svc("ns", "web2");
    web2.sharing_key = Some("k".into());
    assert_ne!(a.assign(&web2).unwrap().ips, w.ips);
    // Other key: not shareable.
    let mut other = svc("ns", "other");
    other.sharing_key = Some("x".into());
    other.ports = vec![Port {
        port: 8080,
        protocol: Protocol::Tcp,
    }];
    assert_ne!(a.assign(&other).unwrap().ips, w.ips);
    // ETP Local with a different selector: not shareable; same selector: shared.
    let mut local = svc("ns", "local");
    local.sharing_key = Some("k".into());
    local.ports = vec![Port {
        port: 443,
        protocol: Protocol::Tcp,
    }];
    local.etp_local = true;
    local.selector.insert("app".into(), "other".into());
    assert_ne!(a.assign(&local).unwrap().ips, w.ips);
    let mut b = Allocator::new(vec![pool("p", &["10.0.0.0/24"])]);
    let mut l1 = svc("ns", "l1");
    l1.sharing_key = Some("k".into());
    l1.etp_local = true;
    l1.selector.insert("app".into(), "x".into());
    let mut l2 = l1.clone();
    l2.key.name = "l2".into();
    l2.ports = vec![Port {
        port: 81,
        protocol: Protocol::Tcp,
    }];
    let x = b.assign(&l1).unwrap();
    assert_eq!(b.assign(&l2).unwrap().ips, x.ips);
    // Releasing one sharer keeps the address held by the other.
    b.release(&l1.key);
    assert_eq!(b.pool_stats("p").unwrap().in_use, 1);
    b.release(&l2.key);
    assert_eq!(b.pool_stats("p").unwrap().in_use, 0);
    // A requested shared address.
    let mut r = svc("ns", "r");
    r.requested = w.ips.clone();
    r.sharing_key = Some("k".into());
    r.ports = vec![Port {
        port: 22,
        protocol: Protocol::Tcp,
    }];
    assert_eq!(a.assign(&r).unwrap().ips, w.ips);
}

#[test]
fn sharing_change_moves_the_service() {
    // MetalLB e2e: changing the sharing key of one of two sharers moves it.
    let mut a = Allocator::new(vec![pool("p", &["10.0.0.0/24"])]);
    let mut s1 = svc("ns", "s1");
    s1.sharing_key = Some("k".into());
    let mut s2 = svc("ns", "s2");
    s2.sharing_key = Some("k".into());
    s2.ports = vec![Port {
        port: 81,
        protocol: Protocol::Tcp,
    }];
    let ip1 = a.assign(&s1).unwrap().ips;
    assert_eq!(a.assign(&s2).unwrap().ips, ip1);
    s2.sharing_key = Some("other".into());
    assert_ne!(a.assign(&s2).unwrap().ips, ip1);
    // And a port change that now collides moves it too.
    let mut s3 = svc("ns", "s3");
    s3.sharing_key = Some("k".into());
    s3.ports = vec![Port {
        port: 82,
        protocol: Protocol::Tcp,
    }];
    assert_eq!(a.assign(&s3).unwrap().ips, ip1);
    s3.ports = vec![Port {
        port: 80,
        protocol: Protocol::Tcp,
    }];
    assert_ne!(a.assign(&s3).unwrap().ips, ip1);
}

#[test]
fn dual_stack_policies_and_order() {
    let dual = pool("dual", &["10.0.0.0/24", "2001:db8::/64"]);
    let v4only = pool("v4", &["10.1.0.0/24"]);
    let mut a = Allocator::new(vec![dual.clone()]);
    let mut s = svc("ns", "a");
    s.families = vec![Family::V6, Family::V4];
    s.policy = FamilyPolicy::RequireDualStack;
    // IPv4 first, whatever the families' order (as MetalLB writes them).
    assert_eq!(
        a.assign(&s).unwrap().ips,
        vec![ip("10.0.0.0"), ip("2001:db8::")]
    );
    let mut a = Allocator::new(vec![v4only.clone()]);
    assert!(matches!(a.assign(&s), Err(AllocError::Families(_))));
    s.policy = FamilyPolicy::PreferDualStack;
    assert_eq!(
        a.assign(&s).unwrap().ips,
        vec![ip("10.1.0.0")],
        "falls back to the family a pool has"
    );
    // Dual-stack addresses come from one pool.
    let mut a = Allocator::new(vec![
        pool("a-v4", &["10.2.0.0/24"]),
        pool("b-v6", &["2001:db8:1::/64"]),
        dual.clone(),
    ]);
    s.policy = FamilyPolicy::RequireDualStack;
    assert_eq!(a.assign(&s).unwrap().pool, "dual");
    // Single-stack IPv6.
    let mut v6 = svc("ns", "v6");
    v6.families = vec![Family::V6];
    assert_eq!(a.assign(&v6).unwrap().ips, vec![ip("2001:db8:1::")]);
    // A transition from single to dual stack adds the second family and
    // keeps the first (when its pool has both; dual-stack addresses always
    // come from one pool).
    let mut a = Allocator::new(vec![pool("dual", &["10.0.0.0/24", "2001:db8::/64"])]);
    a.assign(&svc("ns", "first")).unwrap();
    let mut t = svc("ns", "t");
    t.families = vec![Family::V4];
    let before = a.assign(&t).unwrap();
    t.families = vec![Family::V4, Family::V6];
    t.policy = FamilyPolicy::RequireDualStack;
    let after = a.assign(&t).unwrap();
    assert_eq!(after.ips.len(), 2);
    assert_eq!(
        after.ips[0], before.ips[0],
        "the IPv4 address stays through the transition"
    );
    assert_eq!(Family::of(after.ips[1]), Family::V6);
    // And back to single stack keeps it too.
    t.families = vec![Family::V4];
    t.policy = FamilyPolicy::SingleStack;
    assert_eq!(a.assign(&t).unwrap().ips, vec![before.ips[0]]);
}

#[test]
fn service_allocation_by_namespace_labels_and_priority() {
    let mut team_a = pool("team-a", &["10.0.1.0/24"]);
    team_a.allocation = Some(ServiceAllocation {
        priority: 20,
        namespaces: vec!["a".into()],
        ..Default::default()
    });
    let mut team_a_first = pool("team-a-first", &["10.0.2.0/24"]);
    team_a_first.allocation = Some(ServiceAllocation {
        priority: 10,
        namespaces: vec!["a".into()],
        ..Default::default()
    });
    let mut by_label = pool("labelled", &["10.0.3.0/24"]);
    by_label.allocation = Some(ServiceAllocation {
        priority: 5,
        service_selectors: Selectors(vec![Selector {
            match_labels: [("tier".to_owned(), "gold".to_owned())].into(),
            ..Selector::default()
        }]),
        ..Default::default()
    });
    let mut by_ns_label = pool("ns-labelled", &["10.0.4.0/24"]);
    by_ns_label.allocation = Some(ServiceAllocation {
        priority: 1,
        namespace_selectors: Selectors(vec![Selector {
            match_labels: [("env".to_owned(), "prod".to_owned())].into(),
            ..Selector::default()
        }]),
        ..Default::default()
    });
    let general = pool("general", &["10.0.0.0/24"]);
    let mut a = Allocator::new(vec![team_a, team_a_first, by_label, by_ns_label, general]);
    assert_eq!(
        a.assign(&svc("a", "x")).unwrap().pool,
        "team-a-first",
        "lower priority value first"
    );
    assert_eq!(
        a.assign(&svc("b", "x")).unwrap().pool,
        "general",
        "other namespaces skip team pools"
    );
    let mut gold = svc("b", "gold");
    gold.labels.insert("tier".into(), "gold".into());
    assert_eq!(a.assign(&gold).unwrap().pool, "labelled");
    let mut prod = svc("c", "p");
    prod.namespace_labels.insert("env".into(), "prod".into());
    assert_eq!(a.assign(&prod).unwrap().pool, "ns-labelled");
}

#[test]
fn restart_replays_current_addresses() {
    let pools = vec![pool("p", &["10.0.0.0/24"])];
    let mut a = Allocator::new(pools.clone());
    let names = ["a", "b", "c", "d"];
    let mut given = Vec::new();
    for n in names {
        given.push(a.assign(&svc("ns", n)).unwrap());
    }
    a.release(&svc("ns", "b").key);
    // A new controller: services with addresses first, in any order.
    let mut b = Allocator::new(pools);
    for (n, g) in names.iter().zip(&given).rev() {
        if *n == "b" {
            continue;
        }
        let mut s = svc("ns", n);
        s.current = g.ips.clone();
        assert_eq!(b.assign(&s).unwrap(), *g, "{n} keeps its address");
    }
    // The pending one gets the freed address, never another's.
    assert_eq!(b.assign(&svc("ns", "e")).unwrap().ips, given[1].ips);
}

#[test]
fn pool_shrink_and_delete_move_only_affected_services() {
    let mut a = Allocator::new(vec![
        pool("p", &["10.0.0.0/29"]),
        pool("q", &["10.0.1.0/29"]),
    ]);
    let mut keys = Vec::new();
    for i in 0..6 {
        let s = svc("ns", &format!("s{i}"));
        a.assign(&s).unwrap();
        keys.push(s);
    }
    let before: Vec<Assignment> = keys
        .iter()
        .map(|s| a.assignment(&s.key).unwrap().clone())
        .collect();
    // Shrink p to its first 4 addresses: s4 and s5 (10.0.0.4, .5) lose theirs.
    let lost = a.set_pools(vec![
        pool("p", &["10.0.0.0/30"]),
        pool("q", &["10.0.1.0/29"]),
    ]);
    assert_eq!(lost, vec![keys[4].key.clone(), keys[5].key.clone()]);
    for (s, b) in keys.iter().zip(&before).take(4) {
        assert_eq!(a.assignment(&s.key), Some(b), "untouched");
    }
    for s in &keys[4..] {
        assert_eq!(a.assign(s).unwrap().pool, "q");
    }
    // Delete q: those two move back... and p is full, so they wait.
    let lost = a.set_pools(vec![pool("p", &["10.0.0.0/30"])]);
    assert_eq!(lost.len(), 2);
    assert!(matches!(
        a.assign(&keys[4]),
        Err(AllocError::Exhausted { .. })
    ));
}

#[test]
fn huge_ipv6_pool_is_not_enumerated() {
    let mut a = Allocator::new(vec![pool("v6", &["2001:db8::/64"])]);
    for i in 0..2000 {
        let mut s = svc("ns", &format!("s{i}"));
        s.families = vec![Family::V6];
        a.assign(&s).unwrap();
    }
    let st = a.pool_stats("v6").unwrap();
    assert_eq!((st.total, st.in_use), (1 << 64, 2000));
    let mut s = svc("ns", "s1999");
    s.families = vec![Family::V6];
    assert_eq!(a.assign(&s).unwrap().ips, vec![ip("2001:db8::7cf")]);
}

/// A small deterministic generator for the property tests.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn random_service(rng: &mut Lcg, i: u64) -> Service {
    let mut s = svc("ns", &format!("s{i}"));
    if rng.next(3) == 0 {
        s.sharing_key = Some(format!("k{}", rng.next(2)));
    }
    s.ports = vec![Port {
        port: 80 + rng.next(3) as u16,
        protocol: Protocol::Tcp,
    }];
    s.etp_local = rng.next(4) == 0;
    s.selector.insert("app".into(), format!("a{}", rng.next(2)));
    if rng.next(4) == 0 {
        s.families = vec![Family::V4, Family::V6];
        s.policy = FamilyPolicy::PreferDualStack;
    }
    s
}

#[test]
fn property_no_conflicting_sharing_and_stable_replay() {
    for seed in 0..40 {
        let mut rng = Lcg(seed);
        let pools = vec![
            pool("p", &["10.0.0.0/28", "2001:db8::/124"]),
            pool("q", &["10.0.1.0/29"]),
        ];
        let mut a = Allocator::new(pools.clone());
        let mut live: BTreeMap<u64, Service> = BTreeMap::new();
        for step in 0..300 {
            let i = rng.next(30);
            match rng.next(5) {
                0 => {
                    a.release(&svc("ns", &format!("s{i}")).key);
                    live.remove(&i);
                }
                _ => {
                    let s = random_service(&mut rng, i);
                    if a.assign(&s).is_ok() {
                        live.insert(i, s);
                    } else {
                        live.remove(&i);
                    }
                }
            }
            // Invariant: every pair holding one address may share it.
            let holders: Vec<(&Service, &Assignment)> = live
                .values()
                .filter_map(|s| a.assignment(&s.key).map(|g| (s, g)))
                .collect();
            for (x, gx) in &holders {
                for (y, gy) in &holders {
                    if x.key < y.key && gx.ips.iter().any(|ip| gy.ips.contains(ip)) {
                        assert!(
                            Use::of(x).compatible(&Use::of(y)),
                            "seed {seed} step {step}: {} and {} share {:?} illegally",
                            x.key,
                            y.key,
                            gx.ips
                        );
                    }
                }
            }
        }
        // Replay on a fresh allocator, in reverse order: same addresses
        // (no family gained until all are back, as a restart does).
        let mut b = Allocator::new(pools);
        b.hold_gains(true);
        for s in live.values().rev() {
            let Some(g) = a.assignment(&s.key) else {
                continue;
            };
            let mut s = s.clone();
            s.current = g.ips.clone();
            assert_eq!(
                b.assign(&s).as_ref(),
                Ok(g),
                "seed {seed}: {} moved on replay",
                s.key
            );
        }
    }
}

/// `consider` gives every pool its reason, in the order `assign` tries
/// them, and the pool `assign` picks is the first one whose offers are all
/// addresses.
#[test]
fn consider_gives_each_pool_its_reason() {
    let mut team = pool("team", &["10.0.1.0/30"]);
    team.allocation = Some(ServiceAllocation {
        priority: 10,
        namespaces: vec!["a".into()],
        ..Default::default()
    });
    let mut gold = pool("gold", &["10.0.2.0/30"]);
    gold.allocation = Some(ServiceAllocation {
        priority: 5,
        service_selectors: Selectors(vec![Selector {
            match_labels: [("tier".to_owned(), "gold".to_owned())].into(),
            ..Selector::default()
        }]),
        ..Default::default()
    });
    let mut manual = pool("manual", &["10.0.3.0/30"]);
    manual.auto_assign = false;
    let mut buggy = pool("buggy", &["10.0.4.0/30"]);
    buggy.avoid_buggy_ips = true;
    let full = pool("full", &["10.0.5.0/32"]);
    let v6 = pool("v6", &["fc00::/126"]);
    let mut a = Allocator::new(vec![team, gold, manual, buggy, full, v6]);
    a.assign(&svc("z", "holder")).unwrap();
    assert_eq!(a.assignment(&svc("z", "holder").key).unwrap().pool, "buggy");

    use Eligibility::*;
    use Offer::*;
    let not_a = "namespace b is not in serviceAllocation.namespaces [a]";
    let not_gold = "the service's labels match no serviceAllocation.serviceSelectors [tier=gold]";
    let plain = svc("b", "x");
    let mut in_a = svc("a", "x");
    in_a.labels.insert("tier".into(), "gold".into());
    let mut annotated = svc("b", "x");
    annotated.pool = Some("manual".into());
    let mut requested = svc("b", "x");
    requested.requested = vec![ip("10.0.4.0")];
    let mut shared = svc("b", "x");
    shared.requested = vec![ip("10.0.4.1")];
    let mut dual = svc("b", "x");
    dual.families = vec![Family::V4, Family::V6];
    dual.policy = FamilyPolicy::PreferDualStack;
    type Row<'a> = (&'a str, Eligibility, Vec<Offer>);
    let rows: Vec<(&str, Service, Vec<Row<'_>>)> = vec![
        (
            "auto: selecting pools first, general ones by name, refusals last",
            plain,
            vec![
                ("buggy", General, vec![Address(ip("10.0.4.2"))]),
                ("full", General, vec![Address(ip("10.0.5.0"))]),
                ("v6", General, vec![NoRange(Family::V4)]),
                (
                    "gold",
                    Refused(Refusal::NotSelected(not_gold.into())),
                    vec![],
                ),
                ("manual", Refused(Refusal::AutoAssignOff), vec![]),
                ("team", Refused(Refusal::NotSelected(not_a.into())), vec![]),
            ],
        ),
        (
            "priority order inside the selecting tier",
            in_a,
            vec![
                (
                    "gold",
                    Selected { priority: 5 },
                    vec![Address(ip("10.0.2.0"))],
                ),
                (
                    "team",
                    Selected { priority: 10 },
                    vec![Address(ip("10.0.1.0"))],
                ),
                ("buggy", General, vec![Address(ip("10.0.4.2"))]),
                ("full", General, vec![Address(ip("10.0.5.0"))]),
                ("v6", General, vec![NoRange(Family::V4)]),
                ("manual", Refused(Refusal::AutoAssignOff), vec![]),
            ],
        ),
        (
            "the annotated pool only, even with autoAssign off",
            annotated,
            vec![
                ("manual", Annotated, vec![Address(ip("10.0.3.0"))]),
                (
                    "buggy",
                    Refused(Refusal::OtherAnnotated("manual".into())),
                    vec![],
                ),
                (
                    "full",
                    Refused(Refusal::OtherAnnotated("manual".into())),
                    vec![],
                ),
                (
                    "gold",
                    Refused(Refusal::OtherAnnotated("manual".into())),
                    vec![],
                ),
                (
                    "team",
                    Refused(Refusal::OtherAnnotated("manual".into())),
                    vec![],
                ),
                (
                    "v6",
                    Refused(Refusal::OtherAnnotated("manual".into())),
                    vec![],
                ),
            ],
        ),
        (
            "a requested .0 of a pool that avoids it",
            requested,
            vec![
                (
                    "buggy",
                    Refused(Refusal::BuggyRequest(vec![ip("10.0.4.0")])),
                    vec![],
                ),
                ("full", Refused(Refusal::NotRequested), vec![]),
                ("gold", Refused(Refusal::NotRequested), vec![]),
                ("manual", Refused(Refusal::NotRequested), vec![]),
                ("team", Refused(Refusal::NotRequested), vec![]),
                ("v6", Refused(Refusal::NotRequested), vec![]),
            ],
        ),
        (
            "a requested address another service holds",
            shared,
            vec![
                ("buggy", Requested, vec![InUse(ip("10.0.4.1"))]),
                ("full", Refused(Refusal::NotRequested), vec![]),
                ("gold", Refused(Refusal::NotRequested), vec![]),
                ("manual", Refused(Refusal::NotRequested), vec![]),
                ("team", Refused(Refusal::NotRequested), vec![]),
                ("v6", Refused(Refusal::NotRequested), vec![]),
            ],
        ),
        (
            "one offer per family",
            dual,
            vec![
                (
                    "buggy",
                    General,
                    vec![Address(ip("10.0.4.2")), NoRange(Family::V6)],
                ),
                (
                    "full",
                    General,
                    vec![Address(ip("10.0.5.0")), NoRange(Family::V6)],
                ),
                (
                    "v6",
                    General,
                    vec![NoRange(Family::V4), Address(ip("fc00::"))],
                ),
                (
                    "gold",
                    Refused(Refusal::NotSelected(not_gold.into())),
                    vec![],
                ),
                ("manual", Refused(Refusal::AutoAssignOff), vec![]),
                ("team", Refused(Refusal::NotSelected(not_a.into())), vec![]),
            ],
        ),
    ];
    for (name, s, want) in rows {
        let got = a.consider(&s);
        let got: Vec<Row<'_>> = got
            .iter()
            .map(|c| (c.pool.as_str(), c.eligibility.clone(), c.offers.clone()))
            .collect();
        assert_eq!(got, want, "{name}");
        // Read-only: the same answer twice, and `assign` agrees with it.
        assert_eq!(a.consider(&s).len(), want.len(), "{name}");
        let first_whole = want.iter().find(|(_, e, offers)| {
            e.is_candidate() && offers.iter().all(|o| matches!(o, Address(_)))
        });
        let mut b = a.clone();
        match (b.assign(&s), first_whole) {
            (Ok(got), Some((pool, _, _))) => assert_eq!(got.pool, *pool, "{name}"),
            (Err(_), None) => {}
            // PreferDualStack falls back to one family.
            (Ok(got), None) => assert_eq!(got.ips, [ip("10.0.4.2")], "{name}"),
            (Err(e), Some(_)) => panic!("{name}: {e}"),
        }
    }
    assert_eq!(
        Refusal::BuggyRequest(vec![ip("10.0.4.0")]).to_string(),
        r#"["10.0.4.0"] requested, and the pool has avoidBuggyIPs"#
    );
}
