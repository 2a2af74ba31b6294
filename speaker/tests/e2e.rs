//! End-to-end scenarios in the style of MetalLB's e2e suite (issue 9 §3),
//! in Kubernetes mode: a real kube-apiserver (testenv), the controller
//! assigning the service IPs (in-process, `controller::reconcile::run`),
//! three node namespaces running the `speaker` binary on a bridge, FRR
//! routers and a client namespace.
//!
//! The tests never write Service status: the controller does, from the
//! pools. (The IPv6 tests are the exception: testenv's apiserver is
//! single-stack IPv4, so no Service can ask for an IPv6 address; they
//! stop the controller and write it.) Each test has its own namespaces, node-name prefix and
//! `loadBalancerClass` (given to its controller and speakers), so the
//! tests of this binary share its apiserver without seeing each other's
//! services. Assertions are made where a user would look: FRR's BGP table
//! and FIB, the client's neighbor table, and the API objects (Service
//! status, ServiceBGPStatus, ServiceL2Status).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod k8s;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use api::v1beta1::{ServiceBGPStatus, ServiceL2Status};
use serde_json::{Value, json};
use testnet::{Bridge, Frr, Netns, RunDir, veth_pair, wait_until};

use crate::k8s::{Cluster, Controller, Node, eventually, next_hops, paths, paths_af};

const T: Duration = Duration::from_secs(30);
/// Deadline for a change to reach the router or the API: it only bounds a
/// failure (BENCHMARKS.md has the figures).
const CHANGE: Duration = T;

const NODES: [(&str, &str); 3] = [
    ("node1", "10.0.0.2"),
    ("node2", "10.0.0.3"),
    ("node3", "10.0.0.4"),
];
const ALL_HOPS: [&str; 3] = ["10.0.0.2", "10.0.0.3", "10.0.0.4"];

/// One test's lab: its cluster view, the controller, the speakers on a
/// bridge (node N at 10.0.0.N/24 and fd00::N/64, N = 2, 3, 4). Routers and
/// clients are the test's own.
struct Lab {
    nodes: Vec<Node>,
    ctl: Option<Controller>,
    bridge: Bridge,
    cluster: Cluster,
    /// Logs; kept when a test fails.
    _run: RunDir,
}

impl Lab {
    /// Applies the three Nodes (with `labels[i]`) and the metallb.io
    /// objects `config` gives, starts a speaker per node (with `args`) and
    /// the controller.
    fn start(
        tag: &'static str,
        labels: [Value; 3],
        config: impl FnOnce(&Cluster) -> Vec<Value>,
        args: &[&str],
    ) -> Self {
        Self::start_inner(tag, labels, config, args, false)
    }

    /// As [`Lab::start`], with memberlist among the three speakers (the
    /// layer 2 election counts only live members, so other tests' Nodes in
    /// the shared apiserver never win).
    fn start_l2(
        tag: &'static str,
        labels: [Value; 3],
        config: impl FnOnce(&Cluster) -> Vec<Value>,
    ) -> Self {
        Self::start_inner(tag, labels, config, &[], true)
    }

    fn start_inner(
        tag: &'static str,
        labels: [Value; 3],
        config: impl FnOnce(&Cluster) -> Vec<Value>,
        args: &[&str],
        memberlist: bool,
    ) -> Self {
        let cluster = Cluster::with_class(tag);
        for ((name, addr), l) in NODES.iter().zip(labels) {
            cluster.apply(cluster.node_object(name, addr, l));
        }
        for doc in config(&cluster) {
            cluster.apply(doc);
        }
        let run = RunDir::new(&format!("e2e-{tag}"));
        let bridge = Bridge::new("lan");
        let joins: Vec<String> = NODES.iter().map(|(_, ip)| format!("{ip}:7946")).collect();
        let nodes = NODES
            .iter()
            .map(|(name, ip)| {
                let bind = format!("{ip}:7946");
                let mut all: Vec<&str> = args.to_vec();
                if memberlist {
                    all.extend(["--memberlist-bind", bind.as_str()]);
                    for j in joins.iter().filter(|j| **j != bind) {
                        all.extend(["--memberlist-join", j.as_str()]);
                    }
                }
                let last = ip.rsplit('.').next().unwrap();
                let addrs = [format!("{ip}/24"), format!("fd00::{last}/64")];
                let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
                Node::start_with_addrs(&cluster, &bridge, name, &addrs, &all, &run)
            })
            .collect();
        let ctl = Some(Controller::start(&cluster, "ctl-1"));
        Self {
            nodes,
            ctl,
            bridge,
            cluster,
            _run: run,
        }
    }

    /// A router namespace on the bridge at `addr`/24 running FRR with
    /// `conf`.
    fn router(&self, addr: &str, conf: &str) -> Frr {
        let ns = Netns::new("rtr");
        self.bridge.attach(&ns, "eth0");
        ns.add_addr("eth0", &format!("{addr}/24"));
        Frr::start(&ns, conf)
    }

    /// A client namespace on the bridge at `addr`/24.
    fn client(&self, addr: &str) -> Netns {
        let ns = Netns::new("client");
        self.bridge.attach(&ns, "eth0");
        ns.add_addr("eth0", &format!("{addr}/24"));
        ns
    }

    /// Creates Service `name` (with `patch` merged in: annotations,
    /// labels, ports) and an EndpointSlice with an endpoint on each of
    /// `endpoints`; returns the IP the controller gives it.
    fn service(&self, name: &str, etp: &str, endpoints: &[&str], patch: Value) -> String {
        self.cluster.apply(self.cluster.endpoints(name, endpoints));
        let mut svc = self.cluster.service(name, etp);
        merge(&mut svc, patch);
        self.cluster.apply(svc);
        self.ip(name)
    }

    /// The (single) IP the controller wrote to Service `name`'s status.
    fn ip(&self, name: &str) -> String {
        let what = format!("the controller to give {name} an IP");
        let ips = self.wait(&what, T, || {
            let ips = self.cluster.ingress(name);
            (!ips.is_empty()).then_some(ips)
        });
        assert_eq!(ips.len(), 1, "{name}: {ips:?}");
        ips[0].clone()
    }

    fn wait<R>(&self, what: &str, timeout: Duration, f: impl FnMut() -> Option<R>) -> R {
        eventually(what, timeout, &self.nodes, f)
    }

    /// The (node, service) keys of the ServiceBGPStatus objects, with the
    /// peers each names.
    fn bgp_statuses(&self) -> Vec<(String, String, Value)> {
        self.cluster
            .statuses::<ServiceBGPStatus>()
            .into_iter()
            .map(|(n, s, st)| (n, s, st["peers"].clone()))
            .collect()
    }
}

/// JSON merge of `patch` into `doc` (objects merged, the rest replaced).
fn merge(doc: &mut Value, patch: Value) {
    match (doc, patch) {
        (Value::Object(d), Value::Object(p)) => {
            for (k, v) in p {
                merge(d.entry(k).or_insert(Value::Null), v);
            }
        }
        (d, p) => *d = p,
    }
}

fn pool(c: &Cluster, name: &str, addresses: &[&str]) -> Value {
    json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": name, "namespace": c.system},
        "spec": {"addresses": addresses},
    })
}

fn peer(c: &Cluster, name: &str, peer_asn: u32, addr: &str, extra: Value) -> Value {
    let mut p = json!({
        "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
        "metadata": {"name": name, "namespace": c.system},
        "spec": {"myASN": 64512, "peerASN": peer_asn, "peerAddress": addr,
                 "holdTime": "9s", "connectTime": "1s"},
    });
    merge(&mut p["spec"], extra);
    p
}

fn bgp_adv(c: &Cluster, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
        "metadata": {"name": name, "namespace": c.system},
        "spec": spec,
    })
}

fn l2_adv(c: &Cluster, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
        "metadata": {"name": name, "namespace": c.system},
        "spec": spec,
    })
}

/// bgpd config of a router in `asn` peering with the three nodes (AS
/// 64512), ECMP over them; `extra` goes under `router bgp`.
fn frr_conf(asn: u32, router_id: &str, extra: &str) -> String {
    let mut c = format!(
        "router bgp {asn}\n bgp router-id {router_id}\n no bgp ebgp-requires-policy\n \
         bgp bestpath as-path multipath-relax\n bgp log-neighbor-changes\n{extra}"
    );
    for (_, addr) in NODES {
        c.push_str(&format!(" neighbor {addr} remote-as 64512\n"));
    }
    c.push_str(" address-family ipv4 unicast\n  maximum-paths 8\n  maximum-paths ibgp 8\n");
    c.push_str(" exit-address-family\n");
    c
}

fn hops(frr: &Frr, ip: &str) -> Vec<String> {
    next_hops(&paths(frr, &format!("{ip}/32")))
}

/// How many times each speaker has logged a decision to withdraw `ip`.
fn withdrawals(nodes: &[Node], ip: &str) -> Vec<usize> {
    let field = format!("ip={ip}");
    nodes
        .iter()
        .map(|n| {
            std::fs::read_to_string(&n.log)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(" withdraw ") && l.split_whitespace().any(|w| w == field))
                .count()
        })
        .collect()
}

/// The events about Service `svc` in the apps namespace: (reason, the
/// reporting instance: the controller's identity).
fn service_events(c: &Cluster, svc: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{Api, ListParams};
    let api: Api<Event> = Api::namespaced(c.client.clone(), &c.apps);
    let list = c.rt.block_on(api.list(&ListParams::default())).unwrap();
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(svc))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.reporting_instance.unwrap_or_default(),
            )
        })
        .collect()
}

fn in_range(ip: &str, first: &str, last: &str) -> bool {
    let ip: Ipv4Addr = ip.parse().unwrap();
    first.parse::<Ipv4Addr>().unwrap() <= ip && ip <= last.parse::<Ipv4Addr>().unwrap()
}

fn no_labels() -> [Value; 3] {
    [json!({}), json!({}), json!({})]
}

fn pool_annotation(pool: &str) -> Value {
    json!({"metadata": {"annotations": {"metallb.io/address-pool": pool}}})
}

/// ETP Cluster and Local, with IPs from a pool given by CIDR and one given
/// by range, written by the controller; Local follows its endpoint. Then
/// the controller is stopped, restarted, crashed and restarted: every IP
/// stays, services created meanwhile wait for it, and the speakers keep
/// announcing while it is away.
#[test]
fn etp_cluster_local_pools_and_controller_restart() {
    let mut lab = Lab::start(
        "a",
        no_labels(),
        |c| {
            vec![
                pool(c, "cidr", &["198.51.100.0/28"]),
                pool(c, "range", &["198.51.101.10-198.51.101.12"]),
                peer(c, "router", 64500, "10.0.0.1", json!({})),
                bgp_adv(c, "all", json!({})),
            ]
        },
        &[],
    );
    let frr = lab.router("10.0.0.1", &frr_conf(64500, "10.0.0.1", ""));
    let web = lab.service("web", "Cluster", &["node1"], pool_annotation("cidr"));
    let local = lab.service("local", "Local", &["node2"], pool_annotation("range"));
    assert!(in_range(&web, "198.51.100.0", "198.51.100.15"), "{web}");
    assert!(
        in_range(&local, "198.51.101.10", "198.51.101.12"),
        "{local}"
    );
    for (svc, pool) in [("web", "cidr"), ("local", "range")] {
        let s = lab.cluster.get_service(svc);
        assert_eq!(
            s.metadata.annotations.unwrap()["metallb.io/ip-allocated-from-pool"],
            pool
        );
    }

    // Cluster: every node; Local: only the endpoint's node.
    lab.wait("web from every node", T, || {
        (hops(&frr, &web) == ALL_HOPS).then_some(())
    });
    lab.wait("local from node2 only", T, || {
        (hops(&frr, &local) == ["10.0.0.3"]).then_some(())
    });
    let statuses = lab.wait("ServiceBGPStatus objects", T, || {
        let s = lab.bgp_statuses();
        (s.len() == 4 && s.iter().all(|x| x.2 == json!(["router"]))).then_some(s)
    });
    assert!(
        statuses.contains(&(lab.cluster.node("node2"), "local".into(), json!(["router"]))),
        "{statuses:#?}"
    );
    // The endpoint moves to node3, and so does the route.
    lab.cluster
        .apply(lab.cluster.endpoints("local", &["node3"]));
    lab.wait("local from node3 only", CHANGE, || {
        (hops(&frr, &local) == ["10.0.0.4"]).then_some(())
    });
    // Not ready anywhere: withdrawn.
    let mut slice = lab.cluster.endpoints("local", &["node3"]);
    slice["endpoints"][0]["conditions"]["ready"] = json!(false);
    lab.cluster.apply(slice);
    lab.wait("local withdrawn", CHANGE, || {
        hops(&frr, &local).is_empty().then_some(())
    });
    lab.cluster
        .apply(lab.cluster.endpoints("local", &["node3"]));
    lab.wait("local back on node3", CHANGE, || {
        (hops(&frr, &local) == ["10.0.0.4"]).then_some(())
    });

    // Graceful stop: the IPs stay, the routes stay, a new service waits.
    // The speakers' logs show they never decided to withdraw web or local
    // meanwhile; the events name the controller that gave late its IP: the
    // second one.
    let before = [("web", web.clone()), ("local", local.clone())];
    let withdrawn_before = [
        withdrawals(&lab.nodes, &web),
        withdrawals(&lab.nodes, &local),
    ];
    lab.ctl.take().unwrap().stop();
    lab.cluster.apply(lab.cluster.endpoints("late", &["node1"]));
    let mut late = lab.cluster.service("late", "Cluster");
    merge(&mut late, pool_annotation("range"));
    lab.cluster.apply(late);
    assert!(lab.cluster.ingress("late").is_empty(), "no controller");
    lab.ctl = Some(Controller::start(&lab.cluster, "ctl-2"));
    let late = lab.ip("late");
    let allocated = service_events(&lab.cluster, "late");
    assert!(
        allocated
            .iter()
            .all(|(reason, by)| reason != "IPAllocated" || by == "ctl-2"),
        "late got its IP from ctl-2 only: {allocated:?}"
    );
    assert_eq!(hops(&frr, &web), ALL_HOPS, "speakers keep announcing");
    assert_eq!(hops(&frr, &local), ["10.0.0.4"]);

    assert!(in_range(&late, "198.51.101.10", "198.51.101.12"), "{late}");
    assert_ne!(late, local);
    for (svc, ip) in &before {
        assert_eq!(
            lab.cluster.ingress(svc),
            std::slice::from_ref(ip),
            "{svc} kept its IP"
        );
    }
    lab.wait("late from every node", T, || {
        (hops(&frr, &late) == ALL_HOPS).then_some(())
    });
    // Every speaker has processed late (created while the controller was
    // away), and none decided to withdraw web or local since the stop.
    assert_eq!(
        [
            withdrawals(&lab.nodes, &web),
            withdrawals(&lab.nodes, &local)
        ],
        withdrawn_before,
        "a speaker withdrew web or local while the controller was away"
    );

    // A crash: the new controller takes over once the Lease expires.
    lab.ctl.take().unwrap().crash();
    lab.ctl = Some(Controller::start(&lab.cluster, "ctl-3"));
    let later = lab.service("later", "Cluster", &["node2"], pool_annotation("range"));
    assert!(in_range(&later, "198.51.101.10", "198.51.101.12"));
    let ips: BTreeSet<&String> = [&web, &local, &late, &later].into_iter().collect();
    assert_eq!(ips.len(), 4, "distinct IPs: {ips:?}");
    for (svc, ip) in before.iter().chain([("late", late.clone())].iter()) {
        assert_eq!(
            lab.cluster.ingress(svc),
            std::slice::from_ref(ip),
            "{svc} kept its IP"
        );
    }
    assert_eq!(hops(&frr, &web), ALL_HOPS);
    // The range pool is full now: one more service gets nothing.
    lab.cluster.apply(lab.cluster.endpoints("full", &["node1"]));
    let mut full = lab.cluster.service("full", "Cluster");
    merge(&mut full, pool_annotation("range"));
    lab.cluster.apply(full);
    lab.wait(
        "the controller to report full's AllocationFailed",
        T,
        || {
            service_events(&lab.cluster, "full")
                .iter()
                .any(|(reason, _)| reason == "AllocationFailed")
                .then_some(())
        },
    );
    assert!(lab.cluster.ingress("full").is_empty());
}

/// A node with the NetworkUnavailable condition, then one with the
/// `node.kubernetes.io/exclude-from-external-load-balancers` label, stops
/// announcing: its path is withdrawn at FRR (its session stays up) and its
/// ServiceBGPStatus goes; clearing either brings both back.
#[test]
fn bgp_network_unavailable_and_exclusion_label_withdraw() {
    let lab = Lab::start(
        "b",
        no_labels(),
        |c| {
            vec![
                pool(c, "pool", &["198.51.100.0/28"]),
                peer(c, "router", 64500, "10.0.0.1", json!({})),
                bgp_adv(c, "all", json!({})),
            ]
        },
        &[],
    );
    let frr = lab.router("10.0.0.1", &frr_conf(64500, "10.0.0.1", ""));
    let web = lab.service("web", "Cluster", &["node1"], json!({}));
    lab.wait("web from every node", T, || {
        (hops(&frr, &web) == ALL_HOPS).then_some(())
    });
    let status_nodes =
        || -> Vec<String> { lab.bgp_statuses().into_iter().map(|(n, _, _)| n).collect() };
    let all_nodes: Vec<String> = NODES.iter().map(|(n, _)| lab.cluster.node(n)).collect();
    lab.wait("a ServiceBGPStatus per node", T, || {
        (status_nodes() == all_nodes).then_some(())
    });

    lab.cluster.patch_node_status(
        "node2",
        json!({"conditions": [{"type": "NetworkUnavailable", "status": "True",
                               "reason": "NoRouteCreated", "message": "e2e"}]}),
    );
    lab.wait("node2's path withdrawn", CHANGE, || {
        (hops(&frr, &web) == ["10.0.0.2", "10.0.0.4"]).then_some(())
    });
    assert_eq!(frr.bgp_state("10.0.0.3").as_deref(), Some("Established"));
    lab.wait("node2's ServiceBGPStatus removed", CHANGE, || {
        (!status_nodes().contains(&lab.cluster.node("node2"))).then_some(())
    });
    lab.cluster.patch_node_status(
        "node2",
        json!({"conditions": [{"type": "NetworkUnavailable", "status": "False",
                               "reason": "RouteCreated", "message": "e2e"}]}),
    );
    lab.wait("node2 announces again", CHANGE, || {
        (hops(&frr, &web) == ALL_HOPS).then_some(())
    });

    lab.cluster.patch_node_labels(
        "node3",
        json!({"node.kubernetes.io/exclude-from-external-load-balancers": ""}),
    );
    lab.wait("node3's path withdrawn", CHANGE, || {
        (hops(&frr, &web) == ["10.0.0.2", "10.0.0.3"]).then_some(())
    });
    lab.wait("node3's ServiceBGPStatus removed", CHANGE, || {
        (!status_nodes().contains(&lab.cluster.node("node3"))).then_some(())
    });
    assert_eq!(frr.bgp_state("10.0.0.4").as_deref(), Some("Established"));
    lab.cluster.patch_node_labels(
        "node3",
        json!({"node.kubernetes.io/exclude-from-external-load-balancers": null}),
    );
    lab.wait("node3 announces again", CHANGE, || {
        (hops(&frr, &web) == ALL_HOPS).then_some(())
    });
    lab.wait("a ServiceBGPStatus per node again", CHANGE, || {
        (status_nodes() == all_nodes).then_some(())
    });
}

/// Layer 2: the elected node gets NetworkUnavailable, then another the
/// exclusion label: each time the IP moves to a node still eligible, the
/// client's neighbor entry follows (gratuitous ARP) and so does the
/// ServiceL2Status; cleared, the first choice wins again. An ETP Local
/// service is answered by its endpoint's node and follows the endpoint.
/// Then L2Advertisement.nodeSelectors confine the IP to the selected node,
/// and two services sharing an IP are both announced from it.
#[test]
fn l2_exclusion_etp_local_and_node_selectors() {
    testnet::require_binary("ping");
    let lab = Lab::start_l2("l", [json!({}), json!({}), json!({"l2": "yes"})], |c| {
        vec![
            pool(c, "l2-pool", &["10.0.0.100-10.0.0.110"]),
            l2_adv(c, "l2-adv", json!({"ipAddressPools": ["l2-pool"]})),
        ]
    });
    let client = lab.client("10.0.0.10");
    let vip = lab.service("web", "Cluster", &["node1"], json!({}));
    assert!(in_range(&vip, "10.0.0.100", "10.0.0.110"), "{vip}");
    let macs: Vec<String> = lab.nodes.iter().map(Node::mac).collect();
    let names: Vec<String> = NODES.iter().map(|(n, _)| lab.cluster.node(n)).collect();
    let lladdr = |ip: &str| -> Option<String> {
        let out = client.ip(["-j", "neigh", "show", "to", ip, "dev", "eth0"]);
        let v: Value = serde_json::from_str(&out).ok()?;
        v[0]["lladdr"].as_str().map(str::to_owned)
    };
    // The service's one ServiceL2Status names the winner.
    let winner = |lab: &Lab, svc: &str| -> Option<usize> {
        let s: Vec<(String, String, Value)> = lab
            .cluster
            .statuses::<ServiceL2Status>()
            .into_iter()
            .filter(|x| x.1 == svc)
            .collect();
        (s.len() == 1 && s[0].2["node"] == json!(s[0].0))
            .then(|| names.iter().position(|n| *n == s[0].0))
            .flatten()
    };
    // The client resolves the VIP to the winner's MAC.
    let resolves = |lab: &Lab, ip: &str, to: usize| {
        lab.wait("the client to resolve the VIP to the winner", T, || {
            let _ = client.exec(["ping", "-c", "1", "-W", "1", ip]);
            (lladdr(ip)? == macs[to]).then_some(())
        });
    };
    // The election is final once every speaker counts the three members
    // (memberlist converged) and exactly one announces; then the client
    // resolves afresh.
    let members = |n: &Node| {
        n.metrics().lines().find_map(|l| {
            l.strip_prefix("ferrolb_memberlist_members ")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    lab.wait("memberlist to converge", T, || {
        lab.nodes
            .iter()
            .all(|n| members(n) == Some(3))
            .then_some(())
    });
    let first = lab.wait("one ServiceL2Status and one announcer", T, || {
        let w = winner(&lab, "web")?;
        let announcing: Vec<usize> = (0..lab.nodes.len())
            .filter(|i| lab.nodes[*i].metrics().contains("protocol=\"layer2\""))
            .collect();
        (announcing == [w]).then_some(w)
    });
    client.ip(["neigh", "flush", "to", &vip]);
    resolves(&lab, &vip, first);
    let follow = |lab: &Lab, from: usize, what: &str| -> usize {
        let to = lab.wait(what, CHANGE, || winner(lab, "web").filter(|w| *w != from));
        // Gratuitous ARP moves the client's entry without it asking.
        lab.wait("the client's neighbor entry to follow", CHANGE, || {
            (lladdr(&vip)? == macs[to]).then_some(())
        });
        let _ = client.exec(["ping", "-c", "1", "-W", "1", &vip]);
        assert_eq!(lladdr(&vip).as_deref(), Some(macs[to].as_str()));
        to
    };

    let short = |i: usize| NODES[i].0;
    lab.cluster.patch_node_status(
        short(first),
        json!({"conditions": [{"type": "NetworkUnavailable", "status": "True",
                               "reason": "NoRouteCreated", "message": "e2e"}]}),
    );
    let second = follow(&lab, first, "the IP to leave the unavailable node");
    // The other node stays excluded while this one is labelled: only the
    // third one is left.
    lab.cluster.patch_node_labels(
        short(second),
        json!({"node.kubernetes.io/exclude-from-external-load-balancers": ""}),
    );
    let third = follow(&lab, second, "the IP to leave the labelled node");
    assert!(third != first && third != second);
    lab.cluster.patch_node_status(
        short(first),
        json!({"conditions": [{"type": "NetworkUnavailable", "status": "False",
                               "reason": "RouteCreated", "message": "e2e"}]}),
    );
    lab.cluster.patch_node_labels(
        short(second),
        json!({"node.kubernetes.io/exclude-from-external-load-balancers": null}),
    );
    // Both cleared: the election's first choice wins again.
    let back = follow(&lab, third, "the IP to return to the first winner");
    assert_eq!(back, first);

    // ETP Local: the endpoint's node answers, whatever the hash says, and
    // the IP follows the endpoint.
    let local = lab.service("local", "Local", &["node2"], json!({}));
    lab.wait("local elected on node2", T, || {
        (winner(&lab, "local")? == 1).then_some(())
    });
    resolves(&lab, &local, 1);
    lab.cluster
        .apply(lab.cluster.endpoints("local", &["node1"]));
    lab.wait("local elected on node1", CHANGE, || {
        (winner(&lab, "local")? == 0).then_some(())
    });
    lab.wait("the client's entry for local to follow", CHANGE, || {
        (lladdr(&local)? == macs[0]).then_some(())
    });

    // nodeSelectors: only node3 (l2=yes) may announce web.
    lab.cluster.apply(l2_adv(
        &lab.cluster,
        "l2-adv",
        json!({"ipAddressPools": ["l2-pool"],
               "nodeSelectors": [{"matchLabels": {"l2": "yes"}}]}),
    ));
    if back == 2 {
        // Already there: it stays (nothing to follow). node1's speaker has
        // applied the new advertisement once local's status is gone (its
        // endpoint's node is no longer selected).
        lab.wait("local's ServiceL2Status gone", CHANGE, || {
            lab.cluster
                .statuses::<ServiceL2Status>()
                .iter()
                .all(|x| x.1 != "local")
                .then_some(())
        });
        assert_eq!(winner(&lab, "web"), Some(2));
    } else {
        let to = follow(&lab, back, "the IP to move to the selected node");
        assert_eq!(to, 2);
    }
    // Unselected nodes never answer for the VIP: a fresh resolution gets
    // node3.
    client.ip(["neigh", "flush", "to", &vip]);
    let fresh = lab.wait("the client to resolve the VIP afresh", T, || {
        let _ = client.exec(["ping", "-c", "1", "-W", "1", &vip]);
        lladdr(&vip)
    });
    assert_eq!(fresh, macs[2]);
    // local's endpoint is on node1, which no advertisement selects now:
    // nobody announces it.
    lab.wait("local's ServiceL2Status gone", CHANGE, || {
        lab.cluster
            .statuses::<ServiceL2Status>()
            .iter()
            .all(|x| x.1 != "local")
            .then_some(())
    });

    // A shared IP: both services elect the same node (the only one
    // selected), each has its ServiceL2Status.
    let shared = |port: u16| {
        json!({"metadata": {"annotations": {"metallb.io/allow-shared-ip": "key"}},
               "spec": {"ports": [{"port": port, "protocol": "TCP"}]}})
    };
    let sa = lab.service("sa", "Cluster", &["node1"], shared(80));
    let sb = lab.service("sb", "Cluster", &["node2"], shared(443));
    assert_eq!(sa, sb, "the shared IP");
    for svc in ["sa", "sb"] {
        lab.wait("the shared IP's ServiceL2Status", T, || {
            (winner(&lab, svc)? == 2).then_some(())
        });
    }
    resolves(&lab, &sa, 2);
}

/// BGPAdvertisement selectors: `peers` (two routers, each advertisement
/// names one), `serviceSelectors` (a service's labels choose the
/// advertisement, and so the router) and `nodeSelectors` (only the
/// selected nodes are next hops); relabelling a service or a node moves
/// its routes. ServiceBGPStatus names the peers each service went to.
#[test]
fn node_service_and_peer_selectors() {
    let lab = Lab::start(
        "s",
        [
            json!({"zone": "a"}),
            json!({"zone": "b"}),
            json!({"zone": "b"}),
        ],
        |c| {
            vec![
                pool(c, "pool", &["198.51.100.0/28"]),
                peer(c, "r1", 64500, "10.0.0.1", json!({})),
                peer(c, "r2", 64501, "10.0.0.5", json!({})),
                bgp_adv(
                    c,
                    "to-r1",
                    json!({"peers": ["r1"],
                           "serviceSelectors": [{"matchLabels": {"expose": "r1"}}]}),
                ),
                bgp_adv(
                    c,
                    "to-r2-from-zone-b",
                    json!({"peers": ["r2"],
                           "serviceSelectors": [{"matchLabels": {"expose": "r2"}}],
                           "nodeSelectors": [{"matchLabels": {"zone": "b"}}]}),
                ),
            ]
        },
        &[],
    );
    let r1 = lab.router("10.0.0.1", &frr_conf(64500, "10.0.0.1", ""));
    let r2 = lab.router("10.0.0.5", &frr_conf(64501, "10.0.0.5", ""));
    let labels = |v: &str| json!({"metadata": {"labels": {"expose": v}}});
    // s3 (no advertisement) first: a speaker that has decided on s1 and s2
    // has seen it.
    let s3 = lab.service("s3", "Cluster", &["node1"], labels("none"));
    let s1 = lab.service("s1", "Cluster", &["node1"], labels("r1"));
    let s2 = lab.service("s2", "Cluster", &["node1"], labels("r2"));
    lab.wait("s1 at r1 from every node", T, || {
        (hops(&r1, &s1) == ALL_HOPS).then_some(())
    });
    lab.wait("s2 at r2 from zone b", T, || {
        (hops(&r2, &s2) == ["10.0.0.3", "10.0.0.4"]).then_some(())
    });
    // Both sessions up on every node, and every speaker's decisions
    // published (ServiceBGPStatus: which peers each service goes to).
    for (_, addr) in NODES {
        r1.wait_established(addr, T);
        r2.wait_established(addr, T);
    }
    let statuses = lab.wait("ServiceBGPStatus objects", T, || {
        let s = lab.bgp_statuses();
        (s.len() == 5).then_some(s)
    });
    for (node, svc, peers) in &statuses {
        let want = if svc == "s1" { "r1" } else { "r2" };
        assert_eq!(*peers, json!([want]), "{node} {svc}");
        assert!(svc != "s2" || *node != lab.cluster.node("node1"));
    }
    assert!(hops(&r2, &s1).is_empty(), "s1 goes to r1 only");
    assert!(hops(&r1, &s2).is_empty(), "s2 goes to r2 only");
    assert!(hops(&r1, &s3).is_empty() && hops(&r2, &s3).is_empty());

    // s3 relabelled: now it goes to r1.
    let mut svc = lab.cluster.service("s3", "Cluster");
    merge(&mut svc, labels("r1"));
    lab.cluster.apply(svc);
    lab.wait("s3 at r1", CHANGE, || {
        (hops(&r1, &s3) == ALL_HOPS).then_some(())
    });
    assert!(hops(&r2, &s3).is_empty());
    // node1 moves to zone b: it becomes a next hop of s2 at r2; node3
    // leaves it.
    lab.cluster.patch_node_labels("node1", json!({"zone": "b"}));
    lab.cluster.patch_node_labels("node3", json!({"zone": "c"}));
    lab.wait("s2 at r2 from node1 and node2", CHANGE, || {
        (hops(&r2, &s2) == ["10.0.0.2", "10.0.0.3"]).then_some(())
    });
    assert!(hops(&r1, &s2).is_empty());
    assert_eq!(hops(&r1, &s1), ALL_HOPS, "no node selector on to-r1");
}

/// Two services share one IP (`metallb.io/allow-shared-ip`, different
/// ports): the controller gives both the same IP, FRR has one route per
/// node for it, both services have their status objects; the IP stays
/// announced until the last of them is gone.
#[test]
fn shared_ip_announced_once() {
    let lab = Lab::start(
        "h",
        no_labels(),
        |c| {
            vec![
                pool(c, "pool", &["198.51.100.48/29"]),
                peer(c, "router", 64500, "10.0.0.1", json!({})),
                bgp_adv(c, "all", json!({})),
            ]
        },
        &[],
    );
    let frr = lab.router("10.0.0.1", &frr_conf(64500, "10.0.0.1", ""));
    let shared = |port: u16| {
        json!({"metadata": {"annotations": {"metallb.io/allow-shared-ip": "key"}},
               "spec": {"ports": [{"port": port, "protocol": "TCP"}]}})
    };
    let a = lab.service("a", "Cluster", &["node1"], shared(80));
    let b = lab.service("b", "Cluster", &["node2"], shared(443));
    let other = lab.service("other", "Cluster", &["node2"], json!({}));
    assert_eq!(a, b, "the shared IP");
    assert_ne!(a, other, "not shared without the annotation");
    assert!(in_range(&a, "198.51.100.48", "198.51.100.55"), "{a}");
    lab.wait("the shared IP from every node", T, || {
        (hops(&frr, &a) == ALL_HOPS).then_some(())
    });
    let statuses = lab.wait("status objects for both services", T, || {
        let s = lab.bgp_statuses();
        (s.len() == 9).then_some(s)
    });
    // Every speaker has decided on both services: still one path per
    // node, not one per service.
    assert_eq!(hops(&frr, &a), ALL_HOPS);
    for (n, _) in NODES {
        for svc in ["a", "b"] {
            assert!(
                statuses
                    .iter()
                    .any(|(node, s, _)| *node == lab.cluster.node(n) && s == svc),
                "{n} {svc}: {statuses:#?}"
            );
        }
    }
    // One of them goes: the IP stays, for the other.
    lab.cluster.delete(&lab.cluster.service("a", "Cluster"));
    lab.wait("a's status objects removed", CHANGE, || {
        (lab.bgp_statuses().len() == 6).then_some(())
    });
    assert_eq!(hops(&frr, &b), ALL_HOPS);
    lab.cluster.delete(&lab.cluster.service("b", "Cluster"));
    lab.wait("the IP withdrawn with the last service", CHANGE, || {
        hops(&frr, &b).is_empty().then_some(())
    });
    assert_eq!(hops(&frr, &other), ALL_HOPS);
}

/// BGP attributes: communities given by a Community alias and literally,
/// a large community and localPref (sent to the iBGP peer only, as
/// MetalLB), and aggregationLength (a /24 of the pool at the router
/// instead of /32s).
#[test]
fn communities_local_pref_and_aggregation() {
    let lab = Lab::start(
        "c",
        no_labels(),
        |c| {
            vec![
                pool(c, "p1", &["198.51.100.0/28"]),
                pool(c, "p2", &["198.51.102.0/24"]),
                peer(c, "ebgp", 64500, "10.0.0.1", json!({})),
                peer(c, "ibgp", 64512, "10.0.0.5", json!({})),
                json!({
                    "apiVersion": "metallb.io/v1beta1", "kind": "Community",
                    "metadata": {"name": "aliases", "namespace": c.system},
                    "spec": {"communities": [{"name": "gold", "value": "64512:300"}]},
                }),
                bgp_adv(
                    c,
                    "attrs",
                    json!({"ipAddressPools": ["p1"], "localPref": 150,
                           "communities": ["gold", "64512:200", "large:64512:1:2"]}),
                ),
                bgp_adv(
                    c,
                    "aggregate",
                    json!({"ipAddressPools": ["p2"], "aggregationLength": 24}),
                ),
            ]
        },
        &[],
    );
    let ebgp = lab.router("10.0.0.1", &frr_conf(64500, "10.0.0.1", ""));
    let ibgp = lab.router("10.0.0.5", &frr_conf(64512, "10.0.0.5", ""));
    let s1 = lab.service("s1", "Cluster", &["node1"], pool_annotation("p1"));
    let s2 = lab.service("s2", "Cluster", &["node1"], pool_annotation("p2"));
    assert!(in_range(&s2, "198.51.102.0", "198.51.102.255"), "{s2}");

    for frr in [&ebgp, &ibgp] {
        let p = lab.wait("s1 from every node", T, || {
            let p = paths(frr, &format!("{s1}/32"));
            (p.len() == 3).then_some(p)
        });
        for path in &p {
            assert_eq!(
                path["community"]["string"], "64512:200 64512:300",
                "{path:#}"
            );
            assert_eq!(path["largeCommunity"]["string"], "64512:1:2", "{path:#}");
        }
    }
    for path in paths(&ibgp, &format!("{s1}/32")) {
        assert_eq!(path["locPrf"], 150, "iBGP: {path:#}");
    }
    for path in paths(&ebgp, &format!("{s1}/32")) {
        // No LOCAL_PREF on eBGP (RFC 4271 §5.1.5): FRR shows none.
        assert!(path["locPrf"].is_null(), "eBGP: {path:#}");
    }

    for frr in [&ebgp, &ibgp] {
        lab.wait("the /24 aggregate from every node", T, || {
            (next_hops(&paths(frr, "198.51.102.0/24")) == ALL_HOPS).then_some(())
        });
        assert!(hops(frr, &s2).is_empty(), "no /32 for an aggregated pool");
    }
    // The aggregate carries no attributes of the other advertisement.
    for path in paths(&ibgp, "198.51.102.0/24") {
        assert!(path["community"].is_null(), "{path:#}");
        assert_eq!(path["locPrf"], 100, "FRR's default: {path:#}");
    }
}

/// The gateways of the router's FIB entry for `ip`/32, sorted.
fn fib_hops(ns: &Netns, ip: &str) -> Vec<String> {
    let out = ns.ip(["-j", "route", "show", &format!("{ip}/32")]);
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let Some(route) = v.get(0) else {
        return Vec::new();
    };
    let mut hops: Vec<String> = match route["nexthops"].as_array() {
        Some(list) => list
            .iter()
            .filter_map(|h| h["gateway"].as_str().map(str::to_owned))
            .collect(),
        None => route["gateway"]
            .as_str()
            .map(str::to_owned)
            .into_iter()
            .collect(),
    };
    hops.sort();
    hops
}

/// A tiny HTTP responder on port 80 of a namespace (every address), for
/// traffic checks; stopped and joined on drop.
struct Http {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Http {
    fn start(ns: &Netns) -> Self {
        let listener = ns.run_in(|| TcpListener::bind("0.0.0.0:80")).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                        let mut buf = [0u8; 1024];
                        let _ = conn.read(&mut buf);
                        let _ = conn.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One HTTP/1.0 GET of `ip`:80 (from the calling thread's namespace):
/// whether a 200 came back.
fn http_get(ip: &str) -> bool {
    http_request(ip).is_ok()
}

/// One HTTP/1.0 GET of `ip`:80: `Err` names what failed: a refused,
/// unreachable or reset connection, a wrong answer, or a hang (10 s
/// timeouts, which only bound a hang: a slow answer on a busy machine is
/// an answer).
fn http_request(ip: &str) -> Result<(), String> {
    let addr = std::net::SocketAddr::new(ip.parse().unwrap(), 80);
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    c.write_all(b"GET / HTTP/1.0\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut body = String::new();
    c.read_to_string(&mut body)
        .map_err(|e| format!("read: {e}"))?;
    if body.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(format!("answer: {body:?}"))
    }
}

/// BGP graceful restart during a speaker restart: with
/// `enableGracefulRestart` on the BGPPeer and `--preserve-bgp-on-exit`,
/// the SIGTERM'd and restarted speaker of the only node announcing a
/// service (ETP Local, its endpoint there), down for 1.5 s, leaves the
/// route at FRR, stale, then refreshed. Every 50 ms meanwhile: FRR's table and FIB still route
/// the VIP to that node, and HTTP requests from a client behind FRR to
/// the VIP (a responder on the node, the VIP on its loopback) all succeed.
#[test]
fn graceful_restart_keeps_routes_and_traffic_through_speaker_restart() {
    let mut lab = Lab::start(
        "g",
        no_labels(),
        |c| {
            vec![
                pool(c, "pool", &["198.51.100.0/28"]),
                peer(
                    c,
                    "router",
                    64500,
                    "10.0.0.1",
                    json!({"enableGracefulRestart": true}),
                ),
                bgp_adv(c, "all", json!({})),
            ]
        },
        &["--preserve-bgp-on-exit"],
    );
    let frr = lab.router(
        "10.0.0.1",
        &frr_conf(64500, "10.0.0.1", " bgp graceful-restart\n"),
    );
    // The client sits behind FRR, on a link of its own.
    let router = frr.netns();
    router.sysctl("net.ipv4.ip_forward", "1");
    let client = Netns::new("client");
    veth_pair(router, "eth1", &client, "eth0");
    router.add_addr("eth1", "192.0.2.1/24");
    client.add_addr("eth0", "192.0.2.2/24");
    client.add_route("default", "192.0.2.1");

    let vip = lab.service("web", "Local", &["node1"], json!({}));
    let node1 = &lab.nodes[0].ns;
    node1.add_route("192.0.2.0/24", "10.0.0.1");
    node1.ip(["addr", "add", &format!("{vip}/32"), "dev", "lo"]);
    let _http = Http::start(node1);
    let only_node1 = ["10.0.0.2"];
    lab.wait("web from node1, in FRR's FIB", T, || {
        (hops(&frr, &vip) == only_node1 && fib_hops(router, &vip) == only_node1).then_some(())
    });
    lab.wait("HTTP through FRR to the VIP", T, || {
        client.run_in(|| http_get(&vip)).then_some(())
    });
    let neighbor = frr.vtysh_json("show bgp neighbors 10.0.0.2 json");
    let gr = &neighbor["10.0.0.2"]["gracefulRestartInfo"];
    assert!(
        !gr.is_null() && gr["remoteGrMode"] != "Disable",
        "GR negotiated: {neighbor:#}"
    );

    let stop = AtomicBool::new(false);
    // The poller's view: FRR's session with node1 is not Established.
    let session_down = AtomicBool::new(false);
    let (polls, requests) = std::thread::scope(|s| {
        let poller = s.spawn(|| {
            let (mut stale, mut down, mut polls) = (false, false, 0u32);
            while !stop.load(Ordering::Relaxed) {
                let p = paths(&frr, &format!("{vip}/32"));
                assert_eq!(next_hops(&p), only_node1, "FRR lost the route: {p:#?}");
                let fib = fib_hops(router, &vip);
                assert_eq!(fib, only_node1, "the FIB lost the route");
                stale |= p.iter().any(|x| x["stale"] == true);
                let now_down = frr.bgp_state("10.0.0.2").as_deref() != Some("Established");
                session_down.store(now_down, Ordering::Relaxed);
                down |= now_down;
                polls += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(down, "the session did restart");
            assert!(stale, "FRR kept node1's route as stale meanwhile");
            polls
        });
        let traffic = s.spawn(|| {
            client.run_in(|| {
                // Answers, and those that came while the session was down.
                let (mut ok, mut ok_down, mut failed) = (0u32, 0u32, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let down = session_down.load(Ordering::Relaxed);
                    match http_request(&vip) {
                        Ok(()) => {
                            ok += 1;
                            if down && session_down.load(Ordering::Relaxed) {
                                ok_down += 1;
                            }
                        }
                        Err(e) => failed.push(e),
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                (ok, ok_down, failed)
            })
        });
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        lab.nodes[0].proc.stop();
        // Down for a while, as a restarting Pod would be.
        std::thread::sleep(Duration::from_millis(1500));
        lab.nodes[0].restart();
        // Back: the session is up again and the stale mark is gone.
        let back = wait_until(
            "node1 back, its route refreshed",
            T,
            Duration::from_millis(50),
            || {
                let fresh = paths(&frr, &format!("{vip}/32"))
                    .iter()
                    .all(|x| x["stale"] != true);
                (frr.bgp_state("10.0.0.2").as_deref() == Some("Established") && fresh)
                    .then(|| t0.elapsed())
            },
        );
        // One more second of polling after the refresh.
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        let polled = poller.join();
        let requests = traffic.join().unwrap();
        if back.is_err() || polled.is_err() {
            lab.nodes[0].dump_log();
        }
        eprintln!("graceful restart: refreshed after {back:?}");
        back.unwrap();
        (
            polled.unwrap_or_else(|p| std::panic::resume_unwind(p)),
            requests,
        )
    });
    let (ok, ok_down, failed) = requests;
    eprintln!(
        "graceful restart: {polls} polls, HTTP {ok} ok ({ok_down} while the session was down), \
         {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "HTTP requests failed during the restart: {failed:?}"
    );
    assert!(
        ok_down > 0,
        "no request went through while the session was down"
    );
}

/// IPv6: a BGP session over IPv6 carries an IPv6 service's /128 to FRR
/// (ECMP from the three nodes), and an IPv6 layer 2 service is answered
/// by NDP from the elected node.
///
/// testenv's apiserver is single-stack IPv4 (`--service-cluster-ip-range`
/// 10.96.0.0/16), so a Service cannot have `ipFamilies: [IPv6]` and the
/// controller cannot give it an IPv6 address: here, and only here, the
/// test writes the Service status itself, with the controller stopped.
#[test]
fn ipv6_over_bgp_and_ndp() {
    testnet::require_binary("ping");
    let mut lab = Lab::start_l2("v", no_labels(), |c| {
        vec![
            pool(c, "v6-bgp", &["fd00:100::/120"]),
            pool(c, "v6-l2", &["fd00::100-fd00::1ff"]),
            peer(c, "v6", 64500, "fd00::1", json!({})),
            bgp_adv(c, "bgp", json!({"ipAddressPools": ["v6-bgp"]})),
            l2_adv(c, "l2", json!({"ipAddressPools": ["v6-l2"]})),
        ]
    });
    lab.ctl.take().unwrap().stop();
    let mut conf = String::from(
        "router bgp 64500\n bgp router-id 10.0.0.1\n no bgp ebgp-requires-policy\n \
         bgp bestpath as-path multipath-relax\n",
    );
    let v6 = ["fd00::2", "fd00::3", "fd00::4"];
    for a in v6 {
        conf.push_str(&format!(" neighbor {a} remote-as 64512\n"));
    }
    conf.push_str(" address-family ipv6 unicast\n  maximum-paths 8\n");
    for a in v6 {
        conf.push_str(&format!("  neighbor {a} activate\n"));
    }
    conf.push_str(" exit-address-family\n");
    let ns = Netns::new("rtr");
    lab.bridge.attach(&ns, "eth0");
    ns.add_addr("eth0", "10.0.0.1/24");
    ns.add_addr("eth0", "fd00::1/64");
    let frr = Frr::start(&ns, &conf);
    let client = lab.client("10.0.0.10");
    client.add_addr("eth0", "fd00::10/64");

    for (name, node, ip) in [
        ("bgp6", "node1", "fd00:100::5"),
        ("l26", "node1", "fd00::150"),
    ] {
        lab.cluster.apply(lab.cluster.endpoints(name, &[node]));
        let mut svc = lab.cluster.service(name, "Cluster");
        svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        lab.cluster.apply(svc);
    }
    let p = lab.wait("the /128 from every node", T, || {
        let p = paths_af(&frr, "ipv6", "fd00:100::5/128");
        (p.len() == 3).then_some(p)
    });
    assert_eq!(next_hops(&p), v6, "{p:#?}");
    let statuses = lab.wait("ServiceBGPStatus objects", T, || {
        let s = lab.bgp_statuses();
        (s.len() == 3).then_some(s)
    });
    assert!(
        statuses
            .iter()
            .all(|(_, svc, peers)| svc == "bgp6" && *peers == json!(["v6"]))
    );

    let names: Vec<String> = NODES.iter().map(|(n, _)| lab.cluster.node(n)).collect();
    let winner = lab.wait("one ServiceL2Status", T, || {
        let s = lab.cluster.statuses::<ServiceL2Status>();
        (s.len() == 1 && s[0].1 == "l26")
            .then(|| names.iter().position(|n| *n == s[0].0))
            .flatten()
    });
    let mac = lab.nodes[winner].mac();
    lab.wait("the client to resolve the IPv6 VIP by NDP", T, || {
        let _ = client.exec(["ping", "-6", "-c", "1", "-W", "1", "fd00::150"]);
        let out = client.ip([
            "-6",
            "-j",
            "neigh",
            "show",
            "to",
            "fd00::150",
            "dev",
            "eth0",
        ]);
        let v: Value = serde_json::from_str(&out).ok()?;
        (v[0]["lladdr"].as_str()? == mac).then_some(())
    });
}

/// Multiprotocol BGP: a BGPPeer over IPv4 with `dualStackAddressFamily`
/// carries an IPv6 service's /128 too (`show bgp ipv6 unicast`), with a
/// next hop FRR can use: the node's global IPv6 address on the link, as
/// MetalLB's FRR mode sends (FRR picks the interface's global address).
///
/// As in [`ipv6_over_bgp_and_ndp`], the test writes the IPv6 Service's
/// status itself (single-stack testenv), with the controller stopped.
#[test]
fn ipv6_over_ipv4_session_dual_stack_address_family() {
    let mut lab = Lab::start(
        "m",
        no_labels(),
        |c| {
            vec![
                pool(c, "v4", &["198.51.100.0/28"]),
                pool(c, "v6", &["fd00:100::/120"]),
                peer(
                    c,
                    "router",
                    64500,
                    "10.0.0.1",
                    json!({"dualStackAddressFamily": true}),
                ),
                bgp_adv(c, "all", json!({})),
            ]
        },
        &[],
    );
    lab.ctl.take().unwrap().stop();
    let mut conf = frr_conf(64500, "10.0.0.1", "");
    conf.push_str(" address-family ipv6 unicast\n  maximum-paths 8\n");
    for (_, a) in NODES {
        conf.push_str(&format!("  neighbor {a} activate\n"));
    }
    conf.push_str(" exit-address-family\n");
    let ns = Netns::new("rtr");
    lab.bridge.attach(&ns, "eth0");
    ns.add_addr("eth0", "10.0.0.1/24");
    ns.add_addr("eth0", "fd00::1/64");
    let frr = Frr::start(&ns, &conf);
    for (name, ip) in [("web4", "198.51.100.5"), ("web6", "fd00:100::5")] {
        lab.cluster.apply(lab.cluster.endpoints(name, &["node1"]));
        let mut svc = lab.cluster.service(name, "Cluster");
        svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        lab.cluster.apply(svc);
    }
    lab.wait("the IPv4 /32 from every node", T, || {
        (hops(&frr, "198.51.100.5") == ALL_HOPS).then_some(())
    });
    let p = lab.wait("the IPv6 /128 from every node", T, || {
        let p = paths_af(&frr, "ipv6", "fd00:100::5/128");
        (p.len() == 3).then_some(p)
    });
    assert_eq!(
        next_hops(&p),
        ["fd00::2", "fd00::3", "fd00::4"],
        "the nodes' global IPv6 addresses: {p:#?}"
    );
    assert!(p.iter().all(|x| x["valid"] == true), "{p:#?}");
    // And zebra can install it: the router forwards to the VIP.
    lab.wait("the /128 in the router's FIB", CHANGE, || {
        let out = ns.ip(["-6", "route", "show", "fd00:100::5"]);
        (!out.trim().is_empty()).then_some(())
    });
}
