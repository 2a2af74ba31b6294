//! The fault suite's Kubernetes-mode case (issue 14, section 3; the
//! others are in `faults.rs`): the speaker loses the apiserver while the
//! cluster changes, then gets it back.
//!
//! The node namespace reaches the testenv apiserver through a relay on its
//! own loopback (`k8s::Node`). nftables in the node namespace answers
//! every packet to or from that port with a TCP reset, which is what the
//! speaker sees when the apiserver process dies (connections reset, new
//! ones refused); deleting the rule is the apiserver coming back. etcd and
//! the apiserver themselves keep running, so the test can change the
//! cluster during the outage: the speaker must keep announcing what it had
//! (no withdrawal because the API is gone), and after the outage converge
//! to what the API says (the new service announced, the deleted one
//! withdrawn). Bounded mode: 10 s outage; full mode: 60 s.
//!
//! The second case crashes the processes themselves: kube-apiserver and
//! then etcd get SIGKILL (`TestEnv::kill`) while the controller and the
//! speaker run, and are started again on the same port and data. Nothing
//! announced may be withdrawn while they are down, no IP may change, and
//! the churn made after each restart must reach the router.
//!
//! The third is the compressed soak: seeded random churn (Services created
//! and deleted, their endpoints moved, a node excluded and readmitted, a
//! pool's second range added and removed, the L2Advertisement's and the
//! BGPPeer's node selectors set and cleared) with
//! the real controller and two speakers, and after every step a checker
//! that compares what FRR has, and which MACs answer a layer 2 client's
//! ARP requests, with what the API says should be announced. Bounded mode:
//! 25 steps; full mode: 30 minutes of steps.
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub, dead_code)]

mod k8s;
#[path = "faults/lab.rs"]
mod lab;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use serde_json::json;
use testenv::{Component, TestEnv};
use testnet::{Bridge, Frr, Netns, RunDir, wait_until};

use crate::k8s::{Cluster, Controller, Node, eventually, next_hops, paths, pct};
use crate::lab::{figure, full, ms};

/// A failure bound for the speaker to see the API again and converge:
/// kube's watcher backs off up to about 30 s between retries after an
/// outage, so twice that plus the reconcile.
const CONVERGE_BOUND: Duration = Duration::from_secs(90);
const T: Duration = Duration::from_secs(30);

const FRR_CONF: &str = "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 bgp log-neighbor-changes
 neighbor 10.0.0.2 remote-as 64512
";

fn dropped(frr: &Frr) -> u64 {
    let v = frr.vtysh_json("show bgp neighbors 10.0.0.2 json");
    v["10.0.0.2"]["connectionsDropped"].as_u64().unwrap_or(0)
}

#[test]
fn apiserver_lost_during_churn_routes_stay_and_converge_after() {
    testnet::require_binary("nft");
    let _slot = lab::serial();
    let cluster = Cluster::new("fk");
    cluster.apply_fixture("bgp");
    let run = RunDir::new("faults-k8s");
    let bridge = Bridge::new("lan");
    let router = Netns::new("rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(&router, FRR_CONF);
    let nodes = vec![Node::start(
        &cluster,
        &bridge,
        "node1",
        "10.0.0.2",
        &[],
        &run,
    )];
    frr.wait_established("10.0.0.2", T);
    eventually("web at FRR", T, &nodes, || {
        (!paths(&frr, "198.51.100.10/32").is_empty()).then_some(())
    });
    let drops_before = dropped(&frr);
    let port: u16 = TestEnv::global()
        .server_url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ns = nodes[0].ns.clone();
    let outage = if full() {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(10)
    };

    // The apiserver "dies" for the speaker.
    ns.run([
        "nft",
        &format!(
            "add table inet api; add chain inet api out {{ type filter hook output priority 0; }}; \
             add rule inet api out tcp dport {port} reject with tcp reset; \
             add rule inet api out tcp sport {port} reject with tcp reset"
        ),
    ]);
    let cut = Instant::now();
    // Churn the speaker cannot see: a new service with an endpoint on
    // node1, and web deleted.
    cluster.serve(
        "fresh",
        "198.51.100.40",
        &cluster.node("node1"),
        "10.244.1.9",
    );
    cluster.delete(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": cluster.apps},
    }));
    // During the outage the route stays, and the speaker stays up.
    let mut samples = 0;
    let mut healthz_ok = 0;
    while cut.elapsed() < outage {
        assert!(
            !paths(&frr, "198.51.100.10/32").is_empty(),
            "web withdrawn {:?} into the API outage",
            cut.elapsed()
        );
        samples += 1;
        if lab::get(
            &ns,
            "127.0.0.1:7472".parse().unwrap(),
            "/healthz",
            Duration::from_secs(2),
        )
        .starts_with("HTTP/1.1 200")
        {
            healthz_ok += 1;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    ns.run(["nft", "delete table inet api"]);
    let back = Instant::now();
    let converged = wait_until(
        "fresh announced and web withdrawn after the outage",
        CONVERGE_BOUND,
        Duration::from_millis(100),
        || {
            let fresh = !paths(&frr, "198.51.100.40/32").is_empty();
            let web = !paths(&frr, "198.51.100.10/32").is_empty();
            (fresh && !web).then(Instant::now)
        },
    )
    .unwrap_or_else(|e| {
        nodes.iter().for_each(Node::dump_log);
        panic!("{e}")
    });
    let flaps = dropped(&frr) - drops_before;
    figure(
        "apiserver_lost",
        &[
            ("outage_ms", ms(outage)),
            ("route_samples_during", samples.to_string()),
            ("healthz_ok_during", format!("{healthz_ok}/{samples}")),
            ("converge_ms", ms(converged - back)),
            ("bgp_flaps", flaps.to_string()),
        ],
    );
    assert_eq!(flaps, 0, "the BGP session must not drop with the API");
    assert!(nodes[0].metrics().contains("metallb_bgp_session_up"));
}

/// Services of the crash case that exist from the start.
const BEFORE: [&str; 4] = ["s0", "s1", "s2", "s3"];

#[test]
fn apiserver_and_etcd_crash_during_churn_nothing_withdrawn_no_ip_moves() {
    // The apiserver is this binary's shared one: no other case may run
    // while it is down.
    let _slot = lab::serial();
    let env = TestEnv::global();
    let cluster = Cluster::with_class("fc");
    cluster.apply_fixture("bgp");
    // A layer 2 Service too, from a pool of its own on the segment.
    cluster.apply(cluster.localize(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": SOAK_L2_POOL, "namespace": "metallb-system"},
        "spec": {"addresses": ["10.0.0.200-10.0.0.209"], "autoAssign": false},
    })));
    cluster.apply(soak_l2_advertisement(&cluster, false));
    let run = RunDir::new("faults-k8s-crash");
    let bridge = Bridge::new("lan");
    let client = Netns::new("client");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let router = Netns::new("rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(&router, FRR_CONF);
    let nodes = vec![Node::start(
        &cluster,
        &bridge,
        "node1",
        "10.0.0.2",
        &["--memberlist-bind", "10.0.0.2:7946"],
        &run,
    )];
    let ctl = Controller::start(&cluster, "ctl-crash");
    frr.wait_established("10.0.0.2", T);
    cluster.apply(cluster.endpoints("l2web", &["node1"]));
    let mut l2web = cluster.service("l2web", "Cluster");
    l2web["metadata"]["annotations"] = json!({"metallb.io/address-pool": SOAK_L2_POOL});
    cluster.apply(l2web);
    let l2_ip = eventually("l2web assigned", T, &nodes, || {
        cluster.ingress("l2web").into_iter().next()
    });
    let watch = lab::L2Watch::arp(&client, &l2_ip);
    let node1_mac = nodes[0].mac();
    watch.wait_reply("node1 answers for l2web", Instant::now(), T, |r| {
        r.mac == node1_mac
    });
    for name in BEFORE {
        cluster.apply(cluster.endpoints(name, &["node1"]));
        cluster.apply(cluster.service(name, "Cluster"));
    }
    // Every Service's IP, as the controller assigned it (web's came with
    // the fixture); each announced at the router.
    let assigned = |names: &[&str]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| {
                let ips = cluster.ingress(n);
                assert!(ips.len() <= 1, "{n} has {ips:?}");
                ((*n).to_owned(), ips.into_iter().next().unwrap_or_default())
            })
            .collect()
    };
    let all: Vec<&str> = BEFORE.iter().copied().chain(["web"]).collect();
    let ips = eventually("every Service assigned", T, &nodes, || {
        let ips = assigned(&all);
        ips.iter().all(|(_, ip)| !ip.is_empty()).then_some(ips)
    });
    let announced = |ip: &str| !paths(&frr, &format!("{ip}/32")).is_empty();
    eventually("every Service at FRR", T, &nodes, || {
        ips.iter().all(|(_, ip)| announced(ip)).then_some(())
    });
    let drops_before = dropped(&frr);
    let outage = if full() {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(5)
    };
    let ns = nodes[0].ns.clone();

    let mut kept = ips.clone();
    for (round, which) in [Component::Apiserver, Component::Etcd]
        .into_iter()
        .enumerate()
    {
        env.kill(which).unwrap();
        let down = Instant::now();
        // While it is down: every route stays, the layer 2 address is
        // still answered (a reply after each sample; the bound only ends a
        // failure), the speaker stays healthy.
        let (mut samples, mut healthz_ok) = (0, 0);
        while down.elapsed() < outage {
            watch.wait_reply(
                &format!("an ARP reply for l2web while {which:?} is down"),
                Instant::now(),
                T,
                |_| true,
            );
            for (name, ip) in &kept {
                assert!(
                    announced(ip),
                    "{name} ({ip}) withdrawn {:?} after {which:?} was killed",
                    down.elapsed()
                );
            }
            samples += 1;
            if lab::get(
                &ns,
                "127.0.0.1:7472".parse().unwrap(),
                "/healthz",
                Duration::from_secs(2),
            )
            .starts_with("HTTP/1.1 200")
            {
                healthz_ok += 1;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        env.restart(which).unwrap();
        let back = Instant::now();
        let during = watch.between(down, back);
        assert!(
            during.iter().all(|r| r.mac == node1_mac),
            "another MAC answered for l2web while {which:?} was down: {during:?}"
        );
        // Churn after the restart: one Service deleted, one created; the
        // controller assigns the new one and the speaker follows both.
        let (gone, _) = kept.remove(0);
        let fresh = format!("new{round}");
        cluster.delete(&json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": gone, "namespace": cluster.apps},
        }));
        cluster.apply(cluster.endpoints(&fresh, &["node1"]));
        cluster.apply(cluster.service(&fresh, "Cluster"));
        let gone_ip = ips.iter().find(|(n, _)| *n == gone).unwrap().1.clone();
        // When the controller's write reached the API (the speaker's part
        // of the convergence is what follows).
        let mut assigned_after = None;
        let fresh_ip = wait_until(
            "the new Service assigned and announced, the deleted one withdrawn",
            CONVERGE_BOUND,
            Duration::from_millis(100),
            || {
                let ip = cluster.ingress(&fresh).into_iter().next()?;
                assigned_after.get_or_insert_with(|| back.elapsed());
                // The controller may hand the freed address to the new
                // Service at once; then it stays announced, for it.
                (announced(&ip) && (ip == gone_ip || !announced(&gone_ip))).then_some(ip)
            },
        )
        .unwrap_or_else(|e| {
            nodes.iter().for_each(Node::dump_log);
            panic!("after the {which:?} restart: {e}")
        });
        let converged = back.elapsed();
        assert_eq!(
            cluster.ingress("l2web"),
            std::slice::from_ref(&l2_ip),
            "l2web's IP changed across the {which:?} crash"
        );
        assert!(
            kept.iter().all(|(_, ip)| *ip != fresh_ip),
            "{fresh} got {fresh_ip}, which a live Service holds: {kept:?}"
        );
        // No IP moved across the crash.
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            assigned(&names),
            kept,
            "an IP changed across the {which:?} crash"
        );
        kept.push((fresh, fresh_ip));
        figure(
            match which {
                Component::Apiserver => "apiserver_killed",
                Component::Etcd => "etcd_killed",
            },
            &[
                ("outage_ms", ms(outage)),
                ("route_samples_during", samples.to_string()),
                ("healthz_ok_during", format!("{healthz_ok}/{samples}")),
                ("arp_replies_during", during.len().to_string()),
                ("assigned_ms", ms(assigned_after.unwrap_or(converged))),
                ("converge_ms", ms(converged)),
                ("services", kept.len().to_string()),
            ],
        );
    }
    let flaps = dropped(&frr) - drops_before;
    assert_eq!(flaps, 0, "the BGP session must not drop with the API");
    ctl.stop();
}

/// A Service of the soak: its traffic policy and the nodes its endpoints
/// are on.
struct Churned {
    local: bool,
    /// From the layer 2 pool (announced by ARP only), or the BGP one.
    l2: bool,
    endpoints: Vec<&'static str>,
}

/// The soak's speakers: (short name, address).
const SOAK_NODES: [(&str, &str); 2] = [("node1", "10.0.0.2"), ("node2", "10.0.0.3")];

/// The layer 2 pool of the soak: on the nodes' segment, given only to
/// Services that ask for it, announced by ARP only.
const SOAK_L2_POOL: &str = "soak-l2";

/// The BGP pool's second range, added and removed by the churn (removed
/// only while no Service holds an address in it: taking a held address
/// out of a pool moves it, which the soak would count as an IP change).
const SOAK_EXTRA_RANGE: &str = "203.0.113.0/28";

/// The L2Advertisement of the soak: every node, or (the churn toggles it)
/// only nodes labelled `ferrolb.test/node1`, which node1 is.
fn soak_l2_advertisement(cluster: &Cluster, node1_only: bool) -> serde_json::Value {
    let mut spec = json!({"ipAddressPools": [SOAK_L2_POOL]});
    if node1_only {
        spec["nodeSelectors"] = json!([{"matchLabels": {"ferrolb.test/node1": "true"}}]);
    }
    cluster.localize(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
        "metadata": {"name": SOAK_L2_POOL, "namespace": "metallb-system"},
        "spec": spec,
    }))
}

/// The fixture's BGPPeer, for every node or (the churn toggles it) only
/// nodes labelled `ferrolb.test/node1`, which node1 is.
fn soak_peer(cluster: &Cluster, node1_only: bool) -> serde_json::Value {
    let mut spec = json!({
        "myASN": 64512, "peerASN": 64500, "peerAddress": "10.0.0.1",
        "holdTime": "9s", "connectTime": "1s",
    });
    if node1_only {
        spec["nodeSelectors"] = json!([{"matchLabels": {"ferrolb.test/node1": "true"}}]);
    }
    cluster.localize(json!({
        "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
        "metadata": {"name": "router", "namespace": "metallb-system"},
        "spec": spec,
    }))
}

/// The fixture's BGP pool, with or without [`SOAK_EXTRA_RANGE`].
fn soak_bgp_pool(cluster: &Cluster, extra: bool) -> serde_json::Value {
    let mut addresses = vec!["198.51.100.0/24"];
    if extra {
        addresses.push(SOAK_EXTRA_RANGE);
    }
    cluster.localize(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "bgp-pool", "namespace": "metallb-system"},
        "spec": {"addresses": addresses},
    }))
}

/// The nodes that may announce `svc`, from the API's side, as MetalLB's
/// rules give them (the same for BGP and layer 2): `Cluster` with any
/// endpoint, every node that is not excluded; `Local`, the nodes with an
/// endpoint that are not excluded; no endpoint, none. Sorted addresses.
fn eligible(svc: &Churned, excluded: &BTreeSet<&str>) -> Vec<String> {
    let mut hops: Vec<String> = SOAK_NODES
        .iter()
        .filter(|(n, _)| !excluded.contains(n))
        .filter(|(n, _)| {
            if svc.local {
                svc.endpoints.contains(n)
            } else {
                !svc.endpoints.is_empty()
            }
        })
        .map(|(_, a)| (*a).to_owned())
        .collect();
    hops.sort();
    hops
}

/// What FRR should have: per BGP Service IP the next hops (the eligible
/// speakers' addresses; only node1's while the BGPPeer selects node1
/// alone).
fn expected(
    live: &BTreeMap<String, Churned>,
    ips: &BTreeMap<String, String>,
    excluded: &BTreeSet<&str>,
    peer_node1_only: bool,
) -> BTreeMap<String, Vec<String>> {
    live.iter()
        .filter(|(_, svc)| !svc.l2)
        .filter_map(|(name, svc)| {
            let mut hops = eligible(svc, excluded);
            hops.retain(|a| !peer_node1_only || a.as_str() == SOAK_NODES[0].1);
            Some((ips.get(name)?.clone(), hops))
        })
        .collect()
}

/// What the layer 2 client should see: per layer 2 Service IP the MACs
/// of the nodes allowed to answer (exactly one of them must).
fn expected_l2(
    live: &BTreeMap<String, Churned>,
    ips: &BTreeMap<String, String>,
    excluded: &BTreeSet<&str>,
    macs: &BTreeMap<String, String>,
    l2_node1_only: bool,
) -> BTreeMap<String, BTreeSet<String>> {
    live.iter()
        .filter(|(_, svc)| svc.l2)
        .filter_map(|(name, svc)| {
            let allowed = eligible(svc, excluded)
                .iter()
                .filter(|a| !l2_node1_only || a.as_str() == SOAK_NODES[0].1)
                .map(|a| macs[a].clone())
                .collect();
            Some((ips.get(name)?.clone(), allowed))
        })
        .collect()
}

/// Whether the replies `watch` got in the last three of its requests
/// (none before `since`: the step that may have changed the answer) are
/// what the API says: one MAC, one of `allowed`; or, when none is
/// allowed, no answer at all.
fn l2_matches(watch: &lab::L2Watch, since: Instant, allowed: &BTreeSet<String>) -> bool {
    let now = Instant::now();
    let window = watch.interval * 3;
    let from = since.max(now.checked_sub(window).unwrap_or(since));
    let seen: BTreeSet<String> = watch
        .between(from, now)
        .into_iter()
        .map(|r| r.mac)
        .collect();
    if allowed.is_empty() {
        now - since >= window && seen.is_empty()
    } else {
        seen.len() == 1 && seen.is_subset(allowed)
    }
}

/// The first ingress IP of every Service of the apps namespace that has one.
fn ingress_by_name(cluster: &Cluster) -> BTreeMap<String, String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(cluster.client.clone(), &cluster.apps);
    let list = cluster
        .rt
        .block_on(api.list(&kube::api::ListParams::default()))
        .unwrap();
    list.items
        .into_iter()
        .filter_map(|s| {
            let ip = s.status?.load_balancer?.ingress?.into_iter().next()?.ip?;
            Some((s.metadata.name?, ip))
        })
        .collect()
}

#[test]
fn churn_soak_the_router_follows_the_api() {
    let _slot = lab::serial();
    let cluster = Cluster::with_class("fs");
    cluster.apply_fixture("bgp");
    cluster.apply(cluster.localize(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": SOAK_L2_POOL, "namespace": "metallb-system"},
        "spec": {"addresses": ["10.0.0.200-10.0.0.219"], "autoAssign": false},
    })));
    cluster.apply(soak_l2_advertisement(&cluster, false));
    cluster.patch_node_labels("node1", json!({"ferrolb.test/node1": "true"}));
    // The speaker Pods: the memberlist seeds, Ready.
    for (name, ip) in SOAK_NODES {
        cluster.apply(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("speaker-{name}"), "namespace": cluster.system,
                         "labels": {"app": "metallb", "component": "speaker"}},
            "spec": {"nodeName": cluster.node(name), "hostNetwork": true,
                     "containers": [{"name": "speaker", "image": "ferrolb/speaker"}]},
            "status": {"podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }));
    }
    let run = RunDir::new("faults-k8s-soak");
    let bridge = Bridge::new("lan");
    let client = Netns::new("client");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let router = Netns::new("rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let mut conf = String::from(
        "router bgp 64500\n bgp router-id 10.0.0.1\n no bgp ebgp-requires-policy\n bgp log-neighbor-changes\n",
    );
    for (_, addr) in SOAK_NODES {
        conf.push_str(&format!(" neighbor {addr} remote-as 64512\n"));
    }
    conf.push_str(" address-family ipv4 unicast\n  maximum-paths 8\n");
    let frr = Frr::start(&router, &conf);
    let nodes: Vec<Node> = SOAK_NODES
        .iter()
        .map(|(name, addr)| {
            let bind = format!("{addr}:7946");
            Node::start(
                &cluster,
                &bridge,
                name,
                addr,
                &["--memberlist-bind", &bind],
                &run,
            )
        })
        .collect();
    // Node address -> its MAC, as the layer 2 client sees it.
    let macs: BTreeMap<String, String> = SOAK_NODES
        .iter()
        .zip(&nodes)
        .map(|((_, addr), node)| ((*addr).to_owned(), node.mac()))
        .collect();
    let ctl = Controller::start(&cluster, "ctl-soak");
    for (_, addr) in SOAK_NODES {
        frr.wait_established(addr, T);
    }
    let drops_before: u64 = SOAK_NODES
        .iter()
        .map(|(_, a)| {
            frr.vtysh_json(&format!("show bgp neighbors {a} json"))[a]["connectionsDropped"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();

    // Seed 4's 25 bounded steps take every kind of step at least once.
    let seed: u64 = std::env::var("FERROLB_SOAK_SEED").map_or(4, |v| v.parse().unwrap());
    let mut rng = SmallRng::seed_from_u64(seed);
    let soak = full().then(|| Duration::from_secs(30 * 60));
    let bounded_steps = 25;
    let mut live: BTreeMap<String, Churned> = BTreeMap::new();
    // Each live Service's address, as first assigned: it must never change.
    let mut ips: BTreeMap<String, String> = BTreeMap::new();
    // Every address a Service held: the router must drop those no live
    // Service holds.
    let mut ever: BTreeSet<String> = BTreeSet::new();
    // An ARP client (one request every 50 ms) for every layer 2 address a
    // Service held: it must go quiet when no live Service holds it.
    let mut watches: BTreeMap<String, lab::L2Watch> = BTreeMap::new();
    // What the layer 2 client should have seen when the last step
    // converged: an address whose expectation a step leaves alone is judged
    // on its last three requests, even those from before the step.
    let mut settled_l2: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut excluded: BTreeSet<&str> = BTreeSet::new();
    let mut l2_node1_only = false;
    let mut peer_node1_only = false;
    // node2's sessions closed by the churn (the BGPPeer no longer selects
    // it): FRR counts each as a dropped connection.
    let mut peer_closes = 0u64;
    let mut extra_range = false;
    // Configuration edits made (pool range, L2Advertisement node selector).
    let mut config_edits = 0u32;
    let mut converge = Vec::new();
    let mut divergent_samples = 0u64;
    let mut next = 0;
    let started = Instant::now();
    let mut step = 0;
    loop {
        match soak {
            Some(d) if started.elapsed() >= d => break,
            None if step >= bounded_steps => break,
            _ => {}
        }
        let pick = |rng: &mut SmallRng| -> Vec<&'static str> {
            SOAK_NODES
                .iter()
                .map(|(n, _)| *n)
                .filter(|_| rng.random_bool(0.5))
                .collect()
        };
        let roll = rng.random_range(0..100);
        let action = if live.len() < 3 || (roll < 30 && live.len() < 10) {
            let name = format!("c{next}");
            next += 1;
            let svc = Churned {
                local: rng.random_bool(0.5),
                l2: rng.random_bool(0.5),
                endpoints: pick(&mut rng),
            };
            cluster.apply(cluster.endpoints(&name, &svc.endpoints));
            let mut doc = cluster.service(&name, if svc.local { "Local" } else { "Cluster" });
            if svc.l2 {
                doc["metadata"]["annotations"] = json!({"metallb.io/address-pool": SOAK_L2_POOL});
            }
            cluster.apply(doc);
            let what = format!(
                "create {name} local={} l2={} endpoints={:?}",
                svc.local, svc.l2, svc.endpoints
            );
            live.insert(name, svc);
            what
        } else if roll < 45 {
            let name = live
                .keys()
                .nth(rng.random_range(0..live.len()))
                .unwrap()
                .clone();
            live.remove(&name);
            ips.remove(&name);
            cluster.delete(&json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": cluster.apps},
            }));
            cluster.delete(&json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("{name}-1"), "namespace": cluster.apps},
            }));
            format!("delete {name}")
        } else if roll < 80 {
            let name = live
                .keys()
                .nth(rng.random_range(0..live.len()))
                .unwrap()
                .clone();
            let endpoints = pick(&mut rng);
            cluster.apply(cluster.endpoints(&name, &endpoints));
            let what = format!("move {name} endpoints={endpoints:?}");
            live.get_mut(&name).unwrap().endpoints = endpoints;
            what
        } else if roll < 84 {
            // The BGPPeer: node1 only (node2 closes its session), or every
            // node again.
            peer_node1_only = !peer_node1_only;
            peer_closes += u64::from(peer_node1_only);
            config_edits += 1;
            cluster.apply(soak_peer(&cluster, peer_node1_only));
            format!("peer node1 only {peer_node1_only}")
        } else if roll < 88 {
            // The pool: the second range added, or removed while it holds
            // no address (else added again: a no-op edit).
            let held = ips.values().any(|ip| ip.starts_with("203.0.113."));
            extra_range = !extra_range || held;
            config_edits += 1;
            cluster.apply(soak_bgp_pool(&cluster, extra_range));
            format!("pool extra range {extra_range}")
        } else if roll < 92 {
            // The L2Advertisement: node1 only, or every node again.
            l2_node1_only = !l2_node1_only;
            config_edits += 1;
            cluster.apply(soak_l2_advertisement(&cluster, l2_node1_only));
            format!("l2 advertisement node1 only {l2_node1_only}")
        } else {
            let label = "node.kubernetes.io/exclude-from-external-load-balancers";
            if excluded.remove("node2") {
                cluster.patch_node_labels("node2", json!({ label: null }));
                "readmit node2".to_owned()
            } else {
                excluded.insert("node2");
                cluster.patch_node_labels("node2", json!({ label: "" }));
                "exclude node2".to_owned()
            }
        };
        if !full() {
            eprintln!("soak step {step}: {action}");
        }
        let t0 = Instant::now();
        let mut samples = 0u64;
        let converged = wait_until(
            &format!("step {step} ({action}): the router to match the API"),
            CONVERGE_BOUND,
            Duration::from_millis(100),
            || {
                samples += 1;
                // Every live Service has its address (the controller is
                // running and the pool has room), and keeps it. One list
                // and one FRR table per sample, so a sample is quick.
                let held = ingress_by_name(&cluster);
                for (name, svc) in &live {
                    let now = held.get(name)?.clone();
                    let first = ips.entry(name.clone()).or_insert_with(|| now.clone());
                    assert_eq!(*first, now, "{name}'s address changed at step {step}");
                    if svc.l2 && !watches.contains_key(&now) {
                        watches.insert(now.clone(), lab::L2Watch::arp(&client, &now));
                    }
                    ever.insert(now);
                }
                let want_l2 = expected_l2(&live, &ips, &excluded, &macs, l2_node1_only);
                let l2_ok = watches.iter().all(|(ip, watch)| {
                    let want = want_l2.get(ip).cloned().unwrap_or_default();
                    let since = if settled_l2.get(ip).cloned().unwrap_or_default() == want {
                        t0.checked_sub(watch.interval * 3).unwrap_or(t0)
                    } else {
                        t0
                    };
                    l2_matches(watch, since, &want)
                });
                if !l2_ok {
                    return None;
                }
                let want = expected(&live, &ips, &excluded, peer_node1_only);
                let table = frr.vtysh_json("show bgp ipv4 unicast json");
                let matches = ever.iter().all(|ip| {
                    let paths = table["routes"][format!("{ip}/32")]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    next_hops(&paths) == want.get(ip).cloned().unwrap_or_default()
                });
                matches.then(Instant::now)
            },
        )
        .unwrap_or_else(|e| {
            nodes.iter().for_each(Node::dump_log);
            for (ip, watch) in &watches {
                let last: Vec<_> = watch.replies().into_iter().rev().take(5).collect();
                eprintln!("{ip}: last ARP replies {last:?}");
            }
            eprintln!("node MACs: {macs:?}");
            panic!("{e}")
        });
        settled_l2 = expected_l2(&live, &ips, &excluded, &macs, l2_node1_only);
        divergent_samples += samples - 1;
        converge.push(converged - t0);
        step += 1;
    }
    let flaps: u64 = SOAK_NODES
        .iter()
        .map(|(_, a)| {
            frr.vtysh_json(&format!("show bgp neighbors {a} json"))[a]["connectionsDropped"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum::<u64>()
        - drops_before
        - peer_closes;
    for node in &nodes {
        let health = lab::get(
            &node.ns,
            "127.0.0.1:7472".parse().unwrap(),
            "/healthz",
            Duration::from_secs(5),
        );
        assert!(
            health.starts_with("HTTP/1.1 200"),
            "{}: {health}",
            node.node
        );
    }
    converge.sort();
    // Requests that two MACs answered, over the whole run: handovers where
    // the new owner answered before the old one stopped.
    let two_macs: usize = watches
        .values()
        .map(|w| lab::requests_with_two_macs(&w.replies(), w.interval))
        .sum();
    figure(
        "churn_soak",
        &[
            ("seed", seed.to_string()),
            ("steps", step.to_string()),
            (
                "minutes",
                format!("{:.1}", started.elapsed().as_secs_f64() / 60.0),
            ),
            ("addresses", ever.len().to_string()),
            ("l2_addresses", watches.len().to_string()),
            ("config_edits", config_edits.to_string()),
            ("peer_closes", peer_closes.to_string()),
            ("two_mac_requests", two_macs.to_string()),
            ("converge_p50_ms", ms(pct(&converge, 50.0))),
            ("converge_p99_ms", ms(pct(&converge, 99.0))),
            ("converge_max_ms", ms(converge[converge.len() - 1])),
            ("divergent_samples", divergent_samples.to_string()),
            ("ip_changes", "0".to_owned()),
            ("bgp_flaps", flaps.to_string()),
        ],
    );
    assert_eq!(flaps, 0, "a BGP session dropped during the churn");
    ctl.stop();
}
