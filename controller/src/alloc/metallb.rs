//! What MetalLB v0.16 does where a user can see the allocator, one table
//! row per behaviour: the scenario, and whether ferrolb matches it or
//! differs (each difference, and why, is in the README's "Coming from
//! MetalLB" section). Written from MetalLB's allocator and controller
//! tests and its documentation; none of its code.

use std::net::IpAddr;

use api::model::{Selector, Selectors};

use super::tests::{ip, pool, svc};
use super::*;

/// Whether ferrolb does what MetalLB does in a row.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    /// Same result.
    Matches,
    /// A documented difference: a phrase of its paragraph in the README
    /// ("Allocation compared with MetalLB").
    Differs(&'static str),
}

/// One step of a scenario.
enum Step {
    /// Assign a service; expect these addresses (in this order) or an
    /// error whose message is this.
    Assign(Service, Expect),
    /// Release a service.
    Release(Service),
    /// Replace the pools; the services expected to lose their addresses.
    SetPools(Vec<Pool>, &'static [&'static str]),
    /// A new allocator over the current pools (a controller restart): the
    /// services that follow are replayed with their `current` addresses.
    Restart,
    /// What the addresses a service holds break (see `Allocator::breaks`):
    /// substrings, one per rule broken.
    Breaks(Service, &'static [&'static str]),
    /// A Service (namespace and name of this one) requesting addresses as
    /// written in a Kubernetes object, read by `convert::service` as the
    /// controller and `controller plan` read it, then assigned; an error
    /// is the message of the refusal (its `LoadBalancerFailed` Event).
    Request(Service, Via, &'static str, Expect),
}

/// Where a Service writes the addresses it requests.
enum Via {
    /// This annotation (`metallb.io/loadBalancerIPs` or its deprecated
    /// `metallb.universe.tf/` form).
    Annotation(&'static str),
    /// `spec.loadBalancerIP`.
    SpecIp,
}

enum Expect {
    Ips(&'static [&'static str]),
    Err(&'static str),
}

struct Case {
    name: &'static str,
    verdict: Verdict,
    pools: Vec<Pool>,
    steps: Vec<Step>,
}

fn buggy(mut p: Pool) -> Pool {
    p.avoid_buggy_ips = true;
    p
}

fn for_namespaces(mut p: Pool, namespaces: &[&str], priority: i32) -> Pool {
    p.allocation = Some(ServiceAllocation {
        priority,
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
        ..Default::default()
    });
    p
}

fn for_label(mut p: Pool, k: &str, v: &str) -> Pool {
    p.allocation = Some(ServiceAllocation {
        priority: i32::MAX,
        service_selectors: Selectors(vec![Selector {
            match_labels: [(k.to_owned(), v.to_owned())].into(),
            ..Selector::default()
        }]),
        ..Default::default()
    });
    p
}

fn requesting(mut s: Service, ips: &[&str]) -> Service {
    s.requested = ips.iter().map(|i| ip(i)).collect();
    s
}

fn holding(mut s: Service, ips: &[&str]) -> Service {
    s.current = ips.iter().map(|i| ip(i)).collect();
    s
}

fn shared(mut s: Service, key: &str, port: u16) -> Service {
    s.sharing_key = Some(key.into());
    s.ports = vec![Port {
        port,
        protocol: Protocol::Tcp,
    }];
    s
}

fn local(mut s: Service, app: &str) -> Service {
    s.etp_local = true;
    s.selector.insert("app".into(), app.into());
    s
}

fn cluster(mut s: Service, app: &str) -> Service {
    s.selector.insert("app".into(), app.into());
    s
}

fn families(mut s: Service, f: &[Family], policy: FamilyPolicy) -> Service {
    s.families = f.to_vec();
    s.policy = policy;
    s
}

fn in_pool(mut s: Service, p: &str) -> Service {
    s.pool = Some(p.into());
    s
}

fn labelled(mut s: Service, k: &str, v: &str) -> Service {
    s.labels.insert(k.into(), v.into());
    s
}

use Expect::{Err as Fails, Ips};
use Family::{V4, V6};
use Step::{Assign, Breaks, Release, Request, Restart, SetPools};
use Verdict::{Differs, Matches};

fn cases() -> Vec<Case> {
    let dual = [V4, V6];
    vec![
        Case {
            name: "addresses come in the order spec.addresses lists them",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.10-10.0.0.11", "10.0.0.0/31"])],
            steps: vec![
                Assign(svc("ns", "a"), Ips(&["10.0.0.10"])),
                Assign(svc("ns", "b"), Ips(&["10.0.0.11"])),
                Assign(svc("ns", "c"), Ips(&["10.0.0.0"])),
                Release(svc("ns", "a")),
                Assign(svc("ns", "d"), Ips(&["10.0.0.10"])),
            ],
        },
        Case {
            name: "a requested .0 or .255 of a pool with avoidBuggyIPs is refused",
            verdict: Matches,
            pools: vec![buggy(pool("p", &["10.0.0.0/24"]))],
            steps: vec![
                Assign(
                    requesting(svc("ns", "a"), &["10.0.0.0"]),
                    Fails("[\"10.0.0.0\"] is not allowed in config"),
                ),
                Assign(
                    requesting(svc("ns", "a"), &["10.0.0.255"]),
                    Fails("[\"10.0.0.255\"] is not allowed in config"),
                ),
                Assign(
                    requesting(svc("ns", "a"), &["10.0.0.1"]),
                    Ips(&["10.0.0.1"]),
                ),
                Assign(svc("ns", "b"), Ips(&["10.0.0.2"])),
            ],
        },
        Case {
            name: "an address no pool owns is not allowed in config",
            verdict: Matches,
            pools: vec![
                pool("p", &["10.0.0.0/24"]),
                pool("q", &["10.0.1.0/24", "fc00::/120"]),
            ],
            steps: vec![
                Assign(
                    requesting(svc("ns", "a"), &["192.0.2.1"]),
                    Fails("[\"192.0.2.1\"] is not allowed in config"),
                ),
                Assign(
                    families(
                        requesting(svc("ns", "a"), &["10.0.0.1", "fc00::1"]),
                        &dual,
                        FamilyPolicy::RequireDualStack,
                    ),
                    Fails("[\"10.0.0.1\" \"fc00::1\"] is not allowed in config"),
                ),
            ],
        },
        Case {
            name: "a requested address must be in the annotated pool",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/24"]), pool("q", &["10.0.1.0/24"])],
            steps: vec![Assign(
                in_pool(requesting(svc("ns", "a"), &["10.0.1.5"]), "p"),
                Fails(
                    "requested loadBalancer IP(s) [\"10.0.1.5\"] is not compatible with \
                     requested address pool p",
                ),
            )],
        },
        Case {
            name: "serviceAllocation namespaces bind requests and the pool annotation",
            verdict: Matches,
            pools: vec![
                for_namespaces(pool("team", &["10.0.5.0/24"]), &["a"], i32::MAX),
                pool("general", &["10.0.0.0/24"]),
            ],
            steps: vec![
                Assign(
                    requesting(svc("b", "x"), &["10.0.5.10"]),
                    Fails("pool team not compatible for ip assignment"),
                ),
                Assign(
                    in_pool(svc("b", "x"), "team"),
                    Fails("pool team not compatible for ip assignment"),
                ),
                Assign(svc("b", "x"), Ips(&["10.0.0.0"])),
                Assign(
                    requesting(svc("a", "y"), &["10.0.5.10"]),
                    Ips(&["10.0.5.10"]),
                ),
                Assign(svc("a", "z"), Ips(&["10.0.5.0"])),
            ],
        },
        Case {
            name: "serviceAllocation service selectors bind requests",
            verdict: Matches,
            pools: vec![for_label(pool("gold", &["10.0.6.0/24"]), "team", "metallb")],
            steps: vec![
                Assign(
                    requesting(labelled(svc("ns", "x"), "team", "red"), &["10.0.6.10"]),
                    Fails("pool gold not compatible for ip assignment"),
                ),
                Assign(
                    requesting(labelled(svc("ns", "y"), "team", "metallb"), &["10.0.6.10"]),
                    Ips(&["10.0.6.10"]),
                ),
            ],
        },
        Case {
            name: "pools that select the service come first, by priority, 0 last",
            verdict: Matches,
            pools: vec![
                for_namespaces(pool("p0", &["10.0.7.0/24"]), &["a"], 0),
                for_namespaces(pool("p5", &["10.0.8.0/31"]), &["a"], 5),
                for_namespaces(pool("p9", &["10.0.9.0/31"]), &["a"], 9),
                pool("general", &["10.0.0.0/24"]),
            ],
            steps: vec![
                Assign(svc("a", "1"), Ips(&["10.0.8.0"])),
                Assign(svc("a", "2"), Ips(&["10.0.8.1"])),
                Assign(svc("a", "3"), Ips(&["10.0.9.0"])),
                Assign(svc("a", "4"), Ips(&["10.0.9.1"])),
                Assign(svc("a", "5"), Ips(&["10.0.7.0"])),
                Assign(svc("b", "1"), Ips(&["10.0.0.0"])),
            ],
        },
        Case {
            name: "a Cluster and a Local service never share an address",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/24"])],
            steps: vec![
                Assign(
                    shared(cluster(svc("ns", "c"), "x"), "k", 80),
                    Ips(&["10.0.0.0"]),
                ),
                Assign(
                    requesting(shared(local(svc("ns", "l"), "x"), "k", 81), &["10.0.0.0"]),
                    Fails("requested IP 10.0.0.0 is in use by ns/c and cannot be shared"),
                ),
                Assign(
                    shared(local(svc("ns", "l"), "x"), "k", 81),
                    Ips(&["10.0.0.1"]),
                ),
                // Local services with one selector share; so do a Cluster
                // service and a Local one without selector.
                Assign(
                    shared(local(svc("ns", "l2"), "x"), "k", 82),
                    Ips(&["10.0.0.1"]),
                ),
                Assign(shared(svc("ns", "c2"), "k", 83), Ips(&["10.0.0.0"])),
                Assign(
                    {
                        let mut s = shared(svc("ns", "l3"), "k", 84);
                        s.etp_local = true;
                        s
                    },
                    Ips(&["10.0.0.0"]),
                ),
            ],
        },
        Case {
            name: "an empty sharing key shares nothing",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/24"])],
            steps: vec![
                Assign(shared(svc("ns", "a"), "", 80), Ips(&["10.0.0.0"])),
                Assign(shared(svc("ns", "b"), "", 81), Ips(&["10.0.0.1"])),
            ],
        },
        Case {
            name: "a sharing service takes the first free or shareable address",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/24"])],
            steps: vec![
                Assign(svc("ns", "x"), Ips(&["10.0.0.0"])),
                Assign(shared(svc("ns", "a"), "k", 80), Ips(&["10.0.0.1"])),
                Release(svc("ns", "x")),
                Assign(shared(svc("ns", "b"), "k", 81), Ips(&["10.0.0.0"])),
                Assign(shared(svc("ns", "c"), "k", 82), Ips(&["10.0.0.0"])),
            ],
        },
        Case {
            name: "dual-stack addresses are listed IPv4 first",
            verdict: Matches,
            pools: vec![pool("d", &["10.0.0.0/24", "fc00::/120"])],
            steps: vec![
                Assign(
                    families(svc("ns", "a"), &[V6, V4], FamilyPolicy::RequireDualStack),
                    Ips(&["10.0.0.0", "fc00::"]),
                ),
                Assign(
                    families(
                        requesting(svc("ns", "b"), &["fc00::9", "10.0.0.9"]),
                        &[V6, V4],
                        FamilyPolicy::RequireDualStack,
                    ),
                    Ips(&["fc00::9", "10.0.0.9"]),
                ),
            ],
        },
        Case {
            name: "PreferDualStack takes from the service's own pools before the general ones",
            verdict: Matches,
            pools: vec![
                for_namespaces(pool("v4-for-a", &["10.0.9.0/32"]), &["a"], 1),
                pool("dual", &["10.0.0.0/24", "fc00::/120"]),
            ],
            steps: vec![
                Assign(
                    families(svc("a", "1"), &dual, FamilyPolicy::PreferDualStack),
                    Ips(&["10.0.9.0"]),
                ),
                Assign(
                    families(svc("a", "2"), &dual, FamilyPolicy::PreferDualStack),
                    Ips(&["10.0.0.0", "fc00::"]),
                ),
            ],
        },
        Case {
            name: "a PreferDualStack service gains the missing family from its pool",
            verdict: Matches,
            pools: vec![pool("d", &["10.0.0.0/31", "fc00::/128"])],
            steps: vec![
                Assign(
                    families(svc("ns", "x"), &[V6], FamilyPolicy::SingleStack),
                    Ips(&["fc00::"]),
                ),
                Assign(
                    families(svc("ns", "p"), &dual, FamilyPolicy::PreferDualStack),
                    Ips(&["10.0.0.0"]),
                ),
                Release(svc("ns", "x")),
                Assign(
                    families(svc("ns", "p"), &dual, FamilyPolicy::PreferDualStack),
                    Ips(&["10.0.0.0", "fc00::"]),
                ),
                // After a restart, too, with the held address first.
                Restart,
                Assign(
                    holding(
                        families(svc("ns", "q"), &[V6, V4], FamilyPolicy::PreferDualStack),
                        &["10.0.0.1"],
                    ),
                    Ips(&["10.0.0.1", "fc00::"]),
                ),
            ],
        },
        Case {
            name: "a renamed or split pool keeps its services' addresses",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/30"])],
            steps: vec![
                Assign(svc("ns", "a"), Ips(&["10.0.0.0"])),
                Assign(svc("ns", "b"), Ips(&["10.0.0.1"])),
                Assign(svc("ns", "c"), Ips(&["10.0.0.2"])),
                SetPools(
                    vec![pool("p2", &["10.0.0.0/31"]), pool("p3", &["10.0.0.2/31"])],
                    &[],
                ),
                Assign(svc("ns", "a"), Ips(&["10.0.0.0"])),
                Assign(svc("ns", "b"), Ips(&["10.0.0.1"])),
                Assign(svc("ns", "c"), Ips(&["10.0.0.2"])),
                Assign(svc("ns", "d"), Ips(&["10.0.0.3"])),
            ],
        },
        Case {
            name: "turning autoAssign off keeps the addresses given",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/30"])],
            steps: vec![
                Assign(svc("ns", "a"), Ips(&["10.0.0.0"])),
                SetPools(
                    vec![Pool {
                        auto_assign: false,
                        ..pool("p", &["10.0.0.0/30"])
                    }],
                    &[],
                ),
                Assign(svc("ns", "a"), Ips(&["10.0.0.0"])),
                Breaks(svc("ns", "a"), &[]),
                Assign(
                    svc("ns", "b"),
                    Fails(
                        "no available pool for this service (check autoAssign and serviceAllocation)",
                    ),
                ),
            ],
        },
        Case {
            name: "a held .0 is kept when the pool turns avoidBuggyIPs on, and said",
            verdict: Differs("makes it break `avoidBuggyIPs` or `serviceAllocation`"),
            pools: vec![pool("p", &["10.0.0.0/30"])],
            steps: vec![
                Assign(svc("ns", "a"), Ips(&["10.0.0.0"])),
                SetPools(vec![buggy(pool("p", &["10.0.0.0/30"]))], &[]),
                Assign(svc("ns", "a"), Ips(&["10.0.0.0"])),
                Breaks(
                    svc("ns", "a"),
                    &["10.0.0.0 ends in .0 or .255 and pool p has avoidBuggyIPs"],
                ),
                Restart,
                Assign(holding(svc("ns", "a"), &["10.0.0.0"]), Ips(&["10.0.0.0"])),
                Breaks(svc("ns", "a"), &["avoidBuggyIPs"]),
                // A new request for it is refused as MetalLB refuses it.
                Release(svc("ns", "a")),
                Assign(
                    requesting(svc("ns", "b"), &["10.0.0.0"]),
                    Fails("[\"10.0.0.0\"] is not allowed in config"),
                ),
            ],
        },
        Case {
            name: "a held address is kept when serviceAllocation stops selecting the service",
            verdict: Differs("makes it break `avoidBuggyIPs` or `serviceAllocation`"),
            pools: vec![pool("p", &["10.0.0.0/30"])],
            steps: vec![
                Assign(svc("b", "x"), Ips(&["10.0.0.0"])),
                SetPools(
                    vec![for_namespaces(pool("p", &["10.0.0.0/30"]), &["a"], 1)],
                    &[],
                ),
                Assign(svc("b", "x"), Ips(&["10.0.0.0"])),
                Breaks(
                    svc("b", "x"),
                    &["pool p's serviceAllocation does not select this service"],
                ),
                Restart,
                Assign(holding(svc("b", "x"), &["10.0.0.0"]), Ips(&["10.0.0.0"])),
                Breaks(svc("b", "x"), &["serviceAllocation"]),
                Assign(
                    svc("b", "y"),
                    Fails(
                        "no available pool for this service (check autoAssign and serviceAllocation)",
                    ),
                ),
            ],
        },
        Case {
            name: "Cluster and Local sharers from an earlier ferrolb keep their address",
            verdict: Differs("an earlier ferrolb let share an address keep sharing it"),
            pools: vec![pool("p", &["10.0.0.0/24"])],
            steps: vec![
                Restart,
                Assign(
                    holding(shared(cluster(svc("ns", "c"), "x"), "k", 80), &["10.0.0.0"]),
                    Ips(&["10.0.0.0"]),
                ),
                Assign(
                    holding(shared(local(svc("ns", "l"), "x"), "k", 81), &["10.0.0.0"]),
                    Ips(&["10.0.0.0"]),
                ),
                Breaks(
                    shared(local(svc("ns", "l"), "x"), "k", 81),
                    &["shared with ns/c"],
                ),
                // Until one of them changes: then MetalLB's rule decides.
                Assign(
                    shared(local(svc("ns", "l"), "x"), "k", 82),
                    Ips(&["10.0.0.1"]),
                ),
                Breaks(shared(local(svc("ns", "l"), "x"), "k", 82), &[]),
            ],
        },
        Case {
            name: "a dual-stack PreferDualStack service may request one address",
            verdict: Differs("Service may request a single"),
            pools: vec![pool("d", &["10.0.0.0/24", "fc00::/120"])],
            steps: vec![Assign(
                families(
                    requesting(svc("ns", "a"), &["10.0.0.7"]),
                    &dual,
                    FamilyPolicy::PreferDualStack,
                ),
                Ips(&["10.0.0.7"]),
            )],
        },
        Case {
            name: "namespaceSelectors that select no namespace admit no request",
            verdict: Differs("pool accepts requests from no namespace"),
            pools: vec![{
                let mut p = pool("prod", &["10.0.3.0/24"]);
                p.allocation = Some(ServiceAllocation {
                    priority: i32::MAX,
                    namespace_selectors: Selectors(vec![Selector {
                        match_labels: [("env".to_owned(), "prod".to_owned())].into(),
                        ..Selector::default()
                    }]),
                    ..Default::default()
                });
                p
            }],
            steps: vec![
                Assign(
                    requesting(svc("dev", "x"), &["10.0.3.1"]),
                    Fails("pool prod not compatible for ip assignment"),
                ),
                Assign(
                    {
                        let mut s = requesting(svc("live", "y"), &["10.0.3.1"]);
                        s.namespace_labels.insert("env".into(), "prod".into());
                        s
                    },
                    Ips(&["10.0.3.1"]),
                ),
            ],
        },
        Case {
            name: "single- to RequireDualStack keeps the first family's address",
            verdict: Differs("changed to `RequireDualStack` keeps its"),
            pools: vec![pool("d", &["10.0.0.0/24", "fc00::/120"])],
            steps: vec![
                Assign(svc("ns", "first"), Ips(&["10.0.0.0"])),
                Assign(svc("ns", "t"), Ips(&["10.0.0.1"])),
                Release(svc("ns", "first")),
                Assign(
                    families(svc("ns", "t"), &dual, FamilyPolicy::RequireDualStack),
                    Ips(&["10.0.0.1", "fc00::"]),
                ),
            ],
        },
        Case {
            name: "a requested IPv4-mapped IPv6 address is refused, naming where it is written",
            verdict: Differs("requested as an IPv4-mapped IPv6 address"),
            pools: vec![pool("p", &["10.0.0.0/24", "fc00::/120"])],
            steps: vec![
                Request(
                    svc("ns", "a"),
                    Via::Annotation("metallb.io/loadBalancerIPs"),
                    "::ffff:10.0.0.5",
                    Fails(
                        r#"metallb.io/loadBalancerIPs: "::ffff:10.0.0.5" is an IPv4-mapped IPv6 address: request it as IPv4 (10.0.0.5)"#,
                    ),
                ),
                Request(
                    svc("ns", "a"),
                    Via::Annotation("metallb.universe.tf/loadBalancerIPs"),
                    "fc00::5, ::FFFF:a00:7",
                    Fails(
                        r#"metallb.universe.tf/loadBalancerIPs: "::FFFF:a00:7" is an IPv4-mapped IPv6 address: request it as IPv4 (10.0.0.7)"#,
                    ),
                ),
                Request(
                    svc("ns", "a"),
                    Via::SpecIp,
                    "0:0:0:0:0:ffff:10.0.0.5",
                    Fails(
                        r#"spec.loadBalancerIP: "0:0:0:0:0:ffff:10.0.0.5" is an IPv4-mapped IPv6 address: request it as IPv4 (10.0.0.5)"#,
                    ),
                ),
                // Written as IPv4, the same address is granted.
                Request(
                    svc("ns", "a"),
                    Via::Annotation("metallb.io/loadBalancerIPs"),
                    "10.0.0.5",
                    Ips(&["10.0.0.5"]),
                ),
                Request(svc("ns", "b"), Via::SpecIp, "10.0.0.7", Ips(&["10.0.0.7"])),
            ],
        },
        Case {
            name: "a requested address that only looks like a mapped one is not refused as one",
            verdict: Matches,
            pools: vec![pool("p", &["10.0.0.0/24"])],
            steps: vec![
                // ::ffff:0:a00:5 (RFC 6052's ::ffff:0:0/96) is IPv6, in no
                // pool: MetalLB's answer.
                Request(
                    svc("ns", "a"),
                    Via::Annotation("metallb.io/loadBalancerIPs"),
                    "::ffff:0:a00:5",
                    Fails(r#"["::ffff:0:a00:5"] is not allowed in config"#),
                ),
            ],
        },
    ]
}

/// A Service of `base`'s namespace and name requesting `ips` through `via`,
/// as the API server would hand it to the controller.
fn k8s_requesting(base: &Service, via: &Via, ips: &str) -> k8s_openapi::api::core::v1::Service {
    let mut v = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": base.key.name, "namespace": base.key.namespace},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    });
    match via {
        Via::Annotation(key) => v["metadata"]["annotations"] = serde_json::json!({ *key: ips }),
        Via::SpecIp => v["spec"]["loadBalancerIP"] = ips.into(),
    }
    serde_json::from_value(v).unwrap()
}

fn check(at: &str, want: Expect, got: Result<Assignment, String>) {
    match (want, got) {
        (Ips(ips), Ok(g)) => {
            let want: Vec<IpAddr> = ips.iter().map(|i| ip(i)).collect();
            assert_eq!(g.ips, want, "{at}");
        }
        (Fails(msg), Err(e)) => assert_eq!(e, msg, "{at}"),
        (Ips(ips), Err(e)) => panic!("{at}: wanted {ips:?}, got error {e}"),
        (Fails(msg), Ok(g)) => panic!("{at}: wanted {msg:?}, got {:?}", g.ips),
    }
}

#[test]
fn allocation_agrees_with_metallb_or_differs_on_purpose() {
    for case in cases() {
        let mut pools = case.pools.clone();
        let mut a = Allocator::new(pools.clone());
        for (i, step) in case.steps.into_iter().enumerate() {
            let at = format!("{:?} step {i}", case.name);
            match step {
                Assign(s, want) => check(&at, want, a.assign(&s).map_err(|e| e.to_string())),
                Request(base, via, ips, want) => {
                    let k8s = k8s_requesting(&base, &via, ips);
                    let got = match crate::convert::service(&k8s, None, &Default::default()) {
                        crate::convert::Reading::LoadBalancer(s) => {
                            a.assign(&s).map_err(|e| e.to_string())
                        }
                        crate::convert::Reading::Invalid(msg) => Err(msg),
                        other => panic!("{at}: read as {other:?}"),
                    };
                    check(&at, want, got);
                }
                Release(s) => a.release(&s.key),
                SetPools(new, lost) => {
                    pools = new.clone();
                    let got = a.set_pools(new);
                    let got: Vec<&str> = got.iter().map(|k| k.name.as_str()).collect();
                    assert_eq!(got, lost, "{at}");
                }
                Restart => a = Allocator::new(pools.clone()),
                Breaks(s, want) => {
                    assert!(a.assignment(&s.key).is_some(), "{at}: holds nothing");
                    let got = a.breaks(&s);
                    assert_eq!(got.len(), want.len(), "{at}: {got:?}");
                    for (g, w) in got.iter().zip(want) {
                        assert!(g.contains(w), "{at}: {g:?} lacks {w:?}");
                    }
                }
            }
        }
        if let Differs(phrase) = case.verdict {
            assert!(
                README.contains(phrase),
                "{:?}: the README does not explain it ({phrase:?})",
                case.name
            );
        }
    }
}

/// Where the differences are explained.
const README: &str = include_str!("../../../README.md");
