//! The `speaker` binary in Kubernetes mode against a real kube-apiserver
//! (testenv) and real peers in network namespaces: the scenarios of
//! `speaker_file.rs`, with the configuration in the API instead of files,
//! plus what only Kubernetes mode does: ServiceBGPStatus/ServiceL2Status
//! objects, nodeAssigned events, ConfigurationState, memberlist seeds from
//! the speaker Pods.
//!
//! The fixtures are `testdata/speaker/{bgp,l2}`, the same YAML the file-mode
//! test reads, applied to the apiserver with their namespaces replaced by
//! fresh ones and node names prefixed per test (the two tests share one
//! apiserver). Each node namespace reaches the apiserver on its own
//! loopback through a [`Forward`] of the apiserver's port.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod k8s;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use api::v1beta1::{ServiceBGPStatus, ServiceL2Status};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use testnet::{Bridge, Frr, Netns, RunDir, Signal, wait_until};

use crate::k8s::{
    Cluster, Node, eventually, log_field, log_sequence, log_time, next_hops, paths, summary,
};

const T: Duration = Duration::from_secs(30);
/// Deadline for a change to reach the router or the API: it only bounds a
/// failure (BENCHMARKS.md has the figures).
const CHANGE: Duration = T;

const FRR_CONF: &str = "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 bgp bestpath as-path multipath-relax
 neighbor 10.0.0.2 remote-as 64512
 neighbor 10.0.0.3 remote-as 64512
 neighbor 10.0.0.4 remote-as 64512
 address-family ipv4 unicast
  maximum-paths 8
 exit-address-family
";

#[test]
fn bgp_ecmp_status_objects_events_and_local_policy() {
    let cluster = Cluster::new("b");
    cluster.apply_fixture("bgp");
    let run = RunDir::new("speaker-k8s-bgp");
    let bridge = Bridge::new("lan");
    let router = Netns::new("rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(&router, FRR_CONF);
    let nodes: Vec<Node> = [
        ("node1", "10.0.0.2"),
        ("node2", "10.0.0.3"),
        ("node3", "10.0.0.4"),
    ]
    .iter()
    .map(|(name, addr)| Node::start(&cluster, &bridge, name, addr, &[], &run))
    .collect();
    for peer in ["10.0.0.2", "10.0.0.3", "10.0.0.4"] {
        frr.wait_established(peer, T);
    }

    // ECMP from the three nodes, with the community, as in file mode.
    let web = eventually("three paths for web", T, &nodes, || {
        let p = paths(&frr, "198.51.100.10/32");
        (p.len() == 3).then_some(p)
    });
    assert_eq!(next_hops(&web), ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
    assert!(
        web.iter().all(|p| p["community"]["string"] == "64512:100"),
        "{web:#?}"
    );
    // ETP Local: only node2, which has the endpoint.
    eventually("local from node2", T, &nodes, || {
        (next_hops(&paths(&frr, "198.51.100.20/32")) == ["10.0.0.3"]).then_some(())
    });

    // One ServiceBGPStatus per (node, service), naming the peer.
    let want = |local_on: &str| {
        let mut v: Vec<(String, String)> = ["node1", "node2", "node3"]
            .iter()
            .map(|n| (cluster.node(n), "web".to_owned()))
            .collect();
        v.push((cluster.node(local_on), "local".to_owned()));
        v.sort();
        v
    };
    let statuses = eventually("ServiceBGPStatus objects", T, &nodes, || {
        let s = cluster.statuses::<ServiceBGPStatus>();
        let keys: Vec<(String, String)> = s
            .iter()
            .map(|(n, svc, _)| (n.clone(), svc.clone()))
            .collect();
        // Created first, then the status subresource written.
        let written = s.iter().all(|(_, _, st)| !st["peers"].is_null());
        (keys == want("node2") && written).then_some(s)
    });
    for (node, svc, status) in &statuses {
        assert_eq!(status["node"], json!(node));
        assert_eq!(status["serviceName"], json!(svc));
        assert_eq!(status["serviceNamespace"], json!(cluster.apps));
        assert_eq!(status["peers"], json!(["router"]), "{status:#}");
    }
    assert!(cluster.statuses::<ServiceL2Status>().is_empty());

    // nodeAssigned once per node and service, naming node and protocol.
    let events = eventually("nodeAssigned events", T, &nodes, || {
        let e = cluster.node_assigned();
        (e.len() == 4).then_some(e)
    });
    assert!(
        events.contains(&(
            "local".to_owned(),
            format!(
                "announcing from node \"{}\" with protocol \"bgp\"",
                cluster.node("node2")
            )
        )),
        "{events:#?}"
    );
    let state = cluster.config_state(&cluster.node("node1")).unwrap();
    assert_eq!(state["result"], "Valid", "{state:#}");

    // The endpoint moves to node3: node2 withdraws, node3 announces, the
    // status object follows; no new event for web.
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "local-1", "namespace": cluster.apps,
                     "labels": {"kubernetes.io/service-name": "local"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.3.7"], "nodeName": cluster.node("node3"),
                       "conditions": {"ready": true}}],
    });
    cluster.apply(slice);
    eventually("local moves to node3", CHANGE, &nodes, || {
        (next_hops(&paths(&frr, "198.51.100.20/32")) == ["10.0.0.4"]).then_some(())
    });
    eventually("ServiceBGPStatus follows", CHANGE, &nodes, || {
        let keys: Vec<(String, String)> = cluster
            .statuses::<ServiceBGPStatus>()
            .into_iter()
            .map(|(n, s, _)| (n, s))
            .collect();
        (keys == want("node3")).then_some(())
    });
    // One new event, local on node3 (written after the status object, in
    // a call of its own), and no more.
    eventually(
        "the nodeAssigned event of local on node3",
        T,
        &nodes,
        || (cluster.node_assigned().len() >= 5).then_some(()),
    );
    let events = cluster.node_assigned();
    assert_eq!(
        events.len(),
        5,
        "one new event: local on node3: {events:#?}"
    );
    assert!(
        events.contains(&(
            "local".to_owned(),
            format!(
                "announcing from node \"{}\" with protocol \"bgp\"",
                cluster.node("node3")
            )
        )),
        "{events:#?}"
    );

    // An overlapping pool is inconsistent: every speaker reports it in its
    // ConfigurationState and keeps the last good configuration.
    let overlap = json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "overlap", "namespace": cluster.system},
        "spec": {"addresses": ["198.51.100.128/25"]},
    });
    cluster.apply(overlap.clone());
    let state = eventually("ConfigurationState Invalid", CHANGE, &nodes, || {
        let s = cluster.config_state(&cluster.node("node3"))?;
        (s["result"] == "Invalid").then_some(s)
    });
    assert!(
        state["errorSummary"].as_str().unwrap().contains("overlap"),
        "{state:#}"
    );
    assert_eq!(paths(&frr, "198.51.100.10/32").len(), 3);

    // The cluster objects stay current all the same (issue 14, finding
    // 2): the Local endpoint moves back to node2, and the route follows.
    cluster.apply(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "local-1", "namespace": cluster.apps,
                     "labels": {"kubernetes.io/service-name": "local"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.2.7"], "nodeName": cluster.node("node2"),
                       "conditions": {"ready": true}}],
    }));
    eventually(
        "local moves back to node2 with the overlap",
        CHANGE,
        &nodes,
        || (next_hops(&paths(&frr, "198.51.100.20/32")) == ["10.0.0.3"]).then_some(()),
    );

    // Status written -> route at FRR, with the overlap still there: a new
    // service (with an endpoint) gets its IP.
    cluster.apply(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "late-1", "namespace": cluster.apps,
                     "labels": {"kubernetes.io/service-name": "late"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.1.9"], "nodeName": cluster.node("node1"),
                       "conditions": {"ready": true}}],
    }));
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "late", "namespace": cluster.apps},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.30"}]}},
    });
    let start = Instant::now();
    cluster.apply(svc);
    eventually("late announced", CHANGE, &nodes, || {
        (paths(&frr, "198.51.100.30/32").len() == 3).then_some(())
    });
    eprintln!(
        "status-to-route: {:?} (upper bound: vtysh polls)",
        start.elapsed()
    );

    // And a node excluded from load balancers, still with the overlap:
    // node1 withdraws web and late (ETP Cluster: the others keep them);
    // readmitted, node1 announces them again.
    let label = "node.kubernetes.io/exclude-from-external-load-balancers";
    cluster.patch_node_labels("node1", json!({ label: "" }));
    eventually("node1 excluded with the overlap", CHANGE, &nodes, || {
        ["198.51.100.10/32", "198.51.100.30/32"]
            .iter()
            .all(|p| next_hops(&paths(&frr, p)) == ["10.0.0.3", "10.0.0.4"])
            .then_some(())
    });
    cluster.patch_node_labels("node1", json!({ label: null }));
    eventually("node1 readmitted with the overlap", CHANGE, &nodes, || {
        (paths(&frr, "198.51.100.10/32").len() == 3 && paths(&frr, "198.51.100.30/32").len() == 3)
            .then_some(())
    });
    cluster.delete(&overlap);
    eventually("ConfigurationState Valid again", CHANGE, &nodes, || {
        let s = cluster.config_state(&cluster.node("node3"))?;
        (s["result"] == "Valid").then_some(())
    });

    // A restarted speaker finds its status objects as they should be and
    // writes none of them again (each was PATCHed after every list, its
    // status's keys in another order than the API's; the apiserver made
    // no-op writes of them, so only the speaker's count shows it). Its
    // first pass goes through the services in key order; `zz-after`
    // sorts last, so once node1's object for it exists, that pass is over.
    let node1 = cluster.node("node1");
    let statuses_of = |node: &str| -> Vec<String> {
        cluster
            .statuses::<ServiceBGPStatus>()
            .into_iter()
            .filter(|(n, _, _)| n == node)
            .map(|(_, svc, _)| svc)
            .collect()
    };
    assert_eq!(statuses_of(&node1), ["late", "web"]);
    let mut nodes = nodes;
    nodes[0].proc.signal(Signal::SIGKILL);
    let _ = nodes[0].proc.try_status();
    // (Its objects follow its plans, not its sessions: no wait for FRR.)
    nodes[0].restart();
    cluster.serve("zz-after", "198.51.100.31", &node1, "10.244.1.10");
    eventually("node1's status object for zz-after", T, &nodes, || {
        let s = statuses_of(&node1);
        (s == ["late", "web", "zz-after"]).then_some(())
    });
    let writes = |op: &str| {
        let text = nodes[0].metrics();
        let line =
            format!("ferrolb_status_object_writes_total{{kind=\"ServiceBGPStatus\",op=\"{op}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(line.as_str())?.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {line} in node1's metrics:\n{text}"))
    };
    assert_eq!(
        (writes("create"), writes("patch"), writes("delete")),
        (1, 1, 0),
        "after its restart node1 wrote zz-after's object alone (create, patch, delete)"
    );
}

#[test]
fn layer2_memberlist_from_pods_failover_and_status() {
    testnet::require_binary("ping");
    let cluster = Cluster::new("l");
    cluster.apply_fixture("l2");
    let (_run, _bridge, client, mut nodes) = l2_lab(&cluster, "speaker-k8s-l2", false);
    let addrs = L2_NODES;

    // The memberlist formed from the Pods (no --memberlist-join given):
    // every speaker counts all three members. Only then is the election
    // final: exactly one speaker announces, and one ServiceL2Status names
    // it.
    let members = |n: &Node| {
        n.metrics().lines().find_map(|l| {
            l.strip_prefix("ferrolb_memberlist_members ")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    eventually("memberlist joined from Pods", T, &nodes, || {
        nodes.iter().all(|n| members(n) == Some(3)).then_some(())
    });
    let announcers = |nodes: &[Node]| -> Vec<usize> {
        (0..nodes.len())
            .filter(|i| nodes[*i].metrics().contains("protocol=\"layer2\""))
            .collect()
    };
    let winner = eventually("one announcer and one ServiceL2Status", T, &nodes, || {
        let s = cluster.statuses::<ServiceL2Status>();
        let a = announcers(&nodes);
        (a.len() == 1
            && s.len() == 1
            && s[0].2["node"] == json!(s[0].0)
            && s[0].0 == cluster.node(addrs[a[0]].0))
        .then(|| s[0].0.clone())
    });
    let w = addrs
        .iter()
        .position(|(n, _)| cluster.node(n) == winner)
        .unwrap();
    let status = &cluster.statuses::<ServiceL2Status>()[0].2;
    assert_eq!(status["serviceName"], "web");
    assert_eq!(status["serviceNamespace"], json!(cluster.apps));
    assert!(
        status.get("interfaces").is_none(),
        "every interface: {status:#}"
    );

    let neigh = || {
        let _ = client.exec(["ping", "-c", "1", "-W", "1", "10.0.0.100"]);
        let out = client.ip(["-j", "neigh", "show", "to", "10.0.0.100", "dev", "eth0"]);
        let v: Value = serde_json::from_str(&out).ok()?;
        v[0]["lladdr"].as_str().map(str::to_owned)
    };
    // A fresh resolution, answered by the elected speaker alone.
    client.ip(["neigh", "flush", "to", "10.0.0.100"]);
    let mac = eventually("the client to resolve the VIP", T, &nodes, neigh);
    assert_eq!(
        mac,
        nodes[w].mac(),
        "the VIP must resolve to the elected node"
    );

    // kill -9 the winner: memberlist declares it dead, another node wins,
    // sends gratuitous ARP and the client's entry flips to its MAC.
    let killed_at = Instant::now();
    nodes[w].proc.signal(Signal::SIGKILL);
    let others: Vec<String> = (0..3).filter(|i| *i != w).map(|i| nodes[i].mac()).collect();
    let new_mac = wait_until(
        "the neighbor entry to flip",
        T,
        Duration::from_millis(20),
        || {
            let out = client.ip(["-j", "neigh", "show", "to", "10.0.0.100", "dev", "eth0"]);
            let v: Value = serde_json::from_str(&out).ok()?;
            let mac = v[0]["lladdr"].as_str()?.to_owned();
            others.contains(&mac).then_some(mac)
        },
    )
    .unwrap_or_else(|e| {
        nodes.iter().for_each(Node::dump_log);
        panic!("{e}")
    });
    eprintln!(
        "l2-failover: kill -9 -> client neighbor flipped in {:?}",
        killed_at.elapsed()
    );
    let new_winner = addrs[(0..3).find(|i| nodes[*i].mac() == new_mac).unwrap()].0;
    // The new winner publishes its status (the dead node's stays until its
    // Pod goes: it owns it, and testenv runs no garbage collector).
    eventually("the new winner's ServiceL2Status", T, &nodes, || {
        cluster
            .statuses::<ServiceL2Status>()
            .iter()
            .any(|(n, _, _)| *n == cluster.node(new_winner))
            .then_some(())
    });
    assert_eq!(neigh().as_deref(), Some(new_mac.as_str()));
    nodes.remove(w);
}

/// Benchmark (BENCHMARKS.md): L2 failover, kill -9 of the announcing
/// speaker -> the client's neighbor entry holds another node's MAC.
/// `L2_KILLS` rounds (default 20); the killed speaker is restarted and the
/// election settles before the next round.
#[test]
#[ignore = "benchmark: run by hand, see BENCHMARKS.md"]
fn bench_l2_failover() {
    let rounds: usize = std::env::var("L2_KILLS").map_or(20, |v| v.parse().unwrap());
    let cluster = Cluster::new("f");
    cluster.apply_fixture("l2");
    cluster.apply(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": cluster.node("node3")},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.4"}]},
    }));
    let addrs = [
        ("node1", "10.0.0.2"),
        ("node2", "10.0.0.3"),
        ("node3", "10.0.0.4"),
    ];
    let run = RunDir::new("speaker-k8s-l2-bench");
    let bridge = Bridge::new("lan");
    let client = Netns::new("client");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let joins: Vec<String> = addrs.iter().map(|(_, ip)| format!("{ip}:7946")).collect();
    let mut nodes: Vec<Node> = addrs
        .iter()
        .map(|(name, ip)| {
            let bind = format!("{ip}:7946");
            let mut args = vec!["--memberlist-bind", bind.as_str()];
            for j in joins.iter().filter(|j| **j != bind) {
                args.extend(["--memberlist-join", j.as_str()]);
            }
            Node::start(&cluster, &bridge, name, ip, &args, &run)
        })
        .collect();
    let macs: Vec<String> = nodes.iter().map(Node::mac).collect();
    let lladdr = || {
        let out = client.ip(["-j", "neigh", "show", "to", "10.0.0.100", "dev", "eth0"]);
        let v: Value = serde_json::from_str(&out).ok()?;
        v[0]["lladdr"].as_str().map(str::to_owned)
    };
    let announcing = |nodes: &[Node]| -> Vec<usize> {
        (0..nodes.len())
            .filter(|i| nodes[*i].metrics().contains("protocol=\"layer2\""))
            .collect()
    };
    let mut times = Vec::new();
    for round in 0..rounds {
        // Settle: one announcer, the client resolved to it.
        // One announcer, and the client resolved to it afresh (the
        // restarted node may win back within the client's ARP locktime of
        // the failover, so that its gratuitous ARP is ignored: a client
        // effect, not the round under test).
        let w = eventually("a single announcer, resolved", T, &nodes, || {
            let a = announcing(&nodes);
            if a.len() != 1 {
                return None;
            }
            client.ip(["neigh", "flush", "to", "10.0.0.100"]);
            let _ = client.exec(["ping", "-c", "1", "-W", "1", "10.0.0.100"]);
            (lladdr()? == macs[a[0]]).then(|| a[0])
        });
        std::thread::sleep(Duration::from_millis(1500));
        let t0 = Instant::now();
        nodes[w].proc.signal(Signal::SIGKILL);
        let flipped = wait_until("flip", T, Duration::from_millis(5), || {
            let mac = lladdr()?;
            (mac != macs[w] && macs.contains(&mac)).then(|| t0.elapsed())
        })
        .unwrap_or_else(|e| {
            nodes.iter().for_each(Node::dump_log);
            panic!("round {round}: {e}")
        });
        eprintln!("l2-failover round {round}: {flipped:?}");
        times.push(flipped);
        let _ = nodes[w].proc.try_status();
        nodes[w].restart();
    }
    summary("l2-failover kill -9 -> neighbor flip", times);
}

/// Benchmark (BENCHMARKS.md): Service status written -> the UPDATE at the
/// router, and the speaker's memory with `BENCH_SERVICES` services
/// (default 1,000) and 4 BGP peers (one BIRD, four local addresses).
#[test]
#[ignore = "benchmark: run by hand, see BENCHMARKS.md"]
fn bench_status_to_route_and_rss() {
    testnet::require_binary("tcpdump");
    let services: usize = std::env::var("BENCH_SERVICES").map_or(1000, |v| v.parse().unwrap());
    let lab = BgpLab::start("r", "speaker-k8s-rss", services);
    let (cluster, node, birds, run) = (&lab.cluster, &lab.node, &lab.birds, &lab.run);
    let routers = LAB_ROUTERS;
    let svc = |i: usize, with_status: bool| lab_service(cluster, i, with_status);
    let slice = |i: usize| lab_slice(cluster, i, "node1");
    std::thread::sleep(Duration::from_secs(5));
    let status = std::fs::read_to_string(format!("/proc/{}/status", node.proc.pid())).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_default()
            .to_owned()
    };
    eprintln!(
        "rss with {services} services, 4 peers: {} | {}",
        field("VmRSS"),
        field("VmHWM")
    );
    let cpu = || cpu_ticks(node.proc.pid());
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(30));
    let ticks = cpu() - c0;
    eprintln!(
        "idle cpu over {:?}: {} ticks = {:.3} % of a core",
        t0.elapsed(),
        ticks,
        ticks as f64 / 100.0 / t0.elapsed().as_secs_f64() * 100.0
    );

    // Status -> UPDATE at the router: tcpdump in the router namespace
    // timestamps each segment from the speaker longer than a KEEPALIVE.
    let dump_path = run.join("updates.txt");
    let mut dump = capture_from_speaker(birds[0].netns(), "greater 110", &dump_path);
    std::thread::sleep(Duration::from_secs(2));
    let rounds: usize = std::env::var("BENCH_ROUNDS").map_or(20, |v| v.parse().unwrap());
    let mut lat = Vec::new();
    let mut stages: Vec<Vec<Duration>> = vec![Vec::new(); STAGES.len()];
    for k in 0..rounds {
        let i = services + k;
        cluster.apply(slice(i));
        cluster.apply(svc(i, false).0);
        std::thread::sleep(Duration::from_millis(300));
        let before = std::fs::read_to_string(&dump_path)
            .unwrap_or_default()
            .lines()
            .count();
        let log_from = std::fs::metadata(&node.log).unwrap().len();
        let (s, _) = svc(i, true);
        let api: Api<k8s_openapi::api::core::v1::Service> =
            Api::namespaced(cluster.client.clone(), &cluster.apps);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        cluster
            .rt
            .block_on(api.patch_status(
                &format!("s{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": s["status"]})),
            ))
            .unwrap();
        let at = eventually(
            "the UPDATE at the router",
            CHANGE,
            std::slice::from_ref(node),
            || {
                let text = std::fs::read_to_string(&dump_path).ok()?;
                // One line per segment from each of the 4 sessions; the first
                // after the write is the first peer's.
                let line = text.lines().nth(before)?;
                line.split_whitespace().next()?.parse::<f64>().ok()
            },
        );
        let d = Duration::from_secs_f64((at - wall).max(0.0));
        std::thread::sleep(Duration::from_millis(200));
        let trace = stage_times(&node.log, log_from, routers[0]);
        let breakdown = trace.as_ref().map_or_else(String::new, |(times, notes)| {
            let mut marks = vec![wall];
            marks.extend(times);
            marks.push(at);
            let mut out = String::new();
            for (s, w) in marks.windows(2).enumerate() {
                let d = Duration::from_secs_f64((w[1] - w[0]).max(0.0));
                stages[s].push(d);
                out.push_str(&format!(" | {} {:.2}", STAGES[s], d.as_secs_f64() * 1e3));
            }
            format!("{out} | {notes}")
        });
        eprintln!("status-to-update round {k}: {d:?}{breakdown}");
        lat.push(d);
    }
    dump.stop();
    summary("status written -> first UPDATE at the router", lat);
    if stages[0].is_empty() {
        eprintln!("no per-stage breakdown: the speaker's log has no stage events");
    }
    for (name, v) in STAGES.iter().zip(stages) {
        if !v.is_empty() {
            summary(&format!("  stage {name}"), v);
        }
    }

    // A burst: every Service labelled at once (32 requests in flight). A
    // label, not an annotation: advertisements select Services by label, so
    // the Service cache keeps labels and the change reaches the decisions;
    // it keeps only MetalLB's annotations, and an annotation of ours would
    // stop at the cache.
    // How many snapshots and reconciles the speaker makes of it (its log
    // counts them; without the stage events, the build is not told).
    let total = services + rounds;
    let log_from = std::fs::metadata(&node.log).unwrap().len();
    let api: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(cluster.client.clone(), &cluster.apps);
    let t = Instant::now();
    cluster.rt.block_on(async {
        futures::stream::iter(0..total)
            .map(|i| {
                let api = api.clone();
                let patch = json!({"metadata": {"labels": {"bench.ferrolb/burst": "1"}}});
                async move {
                    api.patch(
                        &format!("s{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                    .unwrap()
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await
    });
    let written = t.elapsed();
    let tail = || {
        let text = std::fs::read(&node.log).unwrap();
        String::from_utf8_lossy(&text[usize::try_from(log_from).unwrap()..]).into_owned()
    };
    let count = |text: &str, what: &str| text.lines().filter(|l| l.contains(what)).count();
    let events = |text: &str| {
        text.lines()
            .filter(|l| l.contains("watch event") && l.contains("reflector Service}"))
            .count()
    };
    // Every event in, then a quiet second for the last reconcile.
    let seen = wait_until(
        "the burst's watch events",
        CHANGE,
        Duration::from_millis(200),
        || (events(&tail()) >= total).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(1));
    let text = tail();
    let first = text
        .lines()
        .find(|l| l.contains("watch event"))
        .and_then(log_time);
    let last = text
        .lines()
        .rfind(|l| l.contains("reconcile done"))
        .and_then(log_time);
    let decided: usize = text
        .lines()
        .filter(|l| l.contains("reconcile decided"))
        .filter_map(|l| log_field(l, "decided")?.parse::<usize>().ok())
        .sum();
    eprintln!(
        "burst: {total} Service changes written in {written:?}; speaker: {} watch events{}, \
         {} snapshots, {} reconciles deciding {decided} services, first event to last \
         reconcile {:.1} ms",
        events(&text),
        if seen.is_err() { " (not all seen)" } else { "" },
        count(&text, "snapshot sent"),
        count(&text, "reconcile start"),
        last.zip(first).map_or(0.0, |(b, a)| (b - a) * 1e3),
    );
    drop(lab);
}

/// The stages of [`bench_status_to_route_and_rss`], each ending at an
/// event of the speaker's debug log (the first after the previous one),
/// the first starting when the test writes the status, the last ending at
/// the router's tcpdump.
const STAGES: [&str; 8] = [
    "write->watch",
    "watch->snapshot",
    "snapshot->reconcile",
    "reconcile->decided",
    "decided->handed",
    "handed->peer task",
    "peer task->socket",
    "socket->router",
];

/// From the speaker's log after `from` (octets), the times of the stage
/// events of one change towards the peer at `router` (the ends of
/// [`STAGES`] but the last), and the timing fields the events carry.
/// `None` when the log lacks one (a build without these events).
fn stage_times(log: &std::path::Path, from: u64, router: &str) -> Option<(Vec<f64>, String)> {
    let text = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(text.get(usize::try_from(from).ok()?..)?);
    let peer = format!("peer={router}:179");
    // The router is the first peer, `r0`; KEEPALIVEs are 19 octets.
    let name = |line: &str| log_field(line, "peer") == Some("r0");
    let update = |line: &str| log_field(line, "octets").is_some_and(|n| n != "19");
    let steps: [&dyn Fn(&str) -> bool; 7] = [
        &|l| l.contains("watch event") && l.contains("reflector Service}"),
        &|l| l.contains("snapshot sent"),
        &|l| l.contains("reconcile start"),
        &|l| l.contains("reconcile decided"),
        &|l| l.contains("handed to peer task") && name(l),
        &|l| l.contains("route changes received") && l.contains(&peer),
        &|l| l.contains("written to the socket") && l.contains(&peer) && update(l),
    ];
    let seq = log_sequence(&text, &steps)?;
    let notes: Vec<String> = [
        (1, "waited_us"),
        (1, "built_us"),
        (3, "decided"),
        (3, "view_us"),
        (3, "keyed_us"),
    ]
    .iter()
    .filter_map(|&(i, f)| Some(format!("{f}={}", log_field(seq[i].1, f)?)))
    .collect();
    Some((seq.iter().map(|(t, _)| *t).collect(), notes.join(" ")))
}

/// Issue 14 finding 3: a node whose memberlist reaches nobody (blocked by
/// nftables here; a wrong key or a firewall in production) cannot tell the
/// others dead from unheard. It elects among the speakers the API shows
/// Ready, so it takes over nothing they can serve, and it leaves what it
/// wins to the Ready speaker whose ServiceL2Status says it answers. Before,
/// after a few seconds alone it answered ARP for every service it was
/// eligible for while the real winner kept answering too.
/// The routers of [`BgpLab`]: four BIRDs, one namespace each.
const LAB_ROUTERS: [&str; 4] = ["10.0.0.1", "10.0.0.5", "10.0.0.6", "10.0.0.7"];

/// The lab of the speaker benchmarks: `services` LoadBalancer Services
/// (externalTrafficPolicy Cluster, status written, one EndpointSlice each)
/// announced by one speaker (node1, 10.0.0.2) to four BIRD routers, every
/// route at every router when [`BgpLab::start`] returns. Fields drop in
/// order: the speaker first, the cluster's namespaces last.
struct BgpLab {
    node: Node,
    birds: Vec<testnet::Bird>,
    _bridge: Bridge,
    run: RunDir,
    cluster: Cluster,
}

impl BgpLab {
    fn start(tag: &'static str, run: &str, services: usize) -> Self {
        // A class of its own: the other tests' speakers, on the same
        // apiserver, leave these Services alone, and this one theirs.
        let cluster = Cluster::with_class(tag);
        let mut metallb = vec![
            json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                "metadata": {"name": "pool", "namespace": cluster.system},
                "spec": {"addresses": ["198.51.0.0/16"]},
            }),
            json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
                "metadata": {"name": "adv", "namespace": cluster.system},
                "spec": {"ipAddressPools": ["pool"], "communities": ["64512:100"]},
            }),
        ];
        for (i, r) in LAB_ROUTERS.iter().enumerate() {
            metallb.push(json!({
                "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
                "metadata": {"name": format!("r{i}"), "namespace": cluster.system},
                "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": r, "connectTime": "1s"},
            }));
        }
        metallb.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": cluster.node("node1")},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]},
        }));
        for doc in metallb {
            cluster.apply(doc);
        }
        let t = Instant::now();
        for i in 0..services {
            cluster.apply(lab_slice(&cluster, i, "node1"));
            cluster.apply(lab_service(&cluster, i, true).0);
        }
        eprintln!("created {services} services in {:?}", t.elapsed());

        let run = RunDir::new(run);
        let bridge = Bridge::new("lan");
        let birds: Vec<testnet::Bird> = LAB_ROUTERS
            .iter()
            .map(|r| {
                let ns = Netns::new("rtr");
                bridge.attach(&ns, "eth0");
                ns.add_addr("eth0", &format!("{r}/24"));
                testnet::Bird::start(
                    &ns,
                    &format!(
                        "router id {r};\nprotocol device {{}}\nprotocol bgp node {{ local {r} as 64500; \
                         neighbor 10.0.0.2 as 64512; ipv4 {{ import all; export none; }}; }}\n"
                    ),
                )
            })
            .collect();
        let node = Node::start(&cluster, &bridge, "node1", "10.0.0.2", &[], &run);
        let lab = Self {
            node,
            birds,
            _bridge: bridge,
            run,
            cluster,
        };
        let t = Instant::now();
        lab.wait_routes("every route at every peer", services);
        eprintln!(
            "all {} routes at the 4 peers {:?} after start",
            services * LAB_ROUTERS.len(),
            t.elapsed()
        );
        lab
    }

    /// Routes at the routers, summed.
    fn routes(&self) -> usize {
        self.birds
            .iter()
            .map(|b| {
                // "1000 of 1000 routes for 1000 networks in table master4"
                b.birdc("show route count")
                    .lines()
                    .find_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
                    .unwrap_or(0)
            })
            .sum()
    }

    /// Waits until each router holds `per_router` routes.
    fn wait_routes(&self, what: &str, per_router: usize) {
        eventually(
            what,
            Duration::from_secs(120),
            std::slice::from_ref(&self.node),
            || (self.routes() == per_router * LAB_ROUTERS.len()).then_some(()),
        );
    }

    /// The speaker's resident set (`VmRSS`), KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.node.proc.pid()))
            .expect("the speaker's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// The speaker's live heap in KiB (`ferrolb_heap_live_bytes`, read by
    /// a scrape of its metrics); `None` when it exports none (not glibc).
    fn heap_kib(&self) -> Option<u64> {
        let text = self.node.metrics();
        text.lines()
            .find_map(|l| l.strip_prefix("ferrolb_heap_live_bytes "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|b| b / 1024)
    }

    /// The size of the speaker's `[heap]` mapping (glibc's main arena,
    /// grown by `brk`) in KiB, from `/proc/PID/smaps`: the bound of what the
    /// heap can hold resident. RSS that rises while this stays put is pages
    /// of the same extent being touched, not the heap growing.
    fn heap_extent_kib(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string(format!("/proc/{}/smaps", self.node.proc.pid()))
            .expect("the speaker's /proc smaps");
        let mut lines = smaps.lines().skip_while(|l| !l.ends_with("[heap]"));
        lines.next()?;
        lines
            .find_map(|l| l.strip_prefix("Size:"))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
    }
}

/// Service `s{i}` of [`BgpLab`] (ETP Cluster) and its address; with its
/// status when `with_status` (what the controller writes).
fn lab_service(cluster: &Cluster, i: usize, with_status: bool) -> (Value, String) {
    let ip = format!("198.51.{}.{}", i / 250, i % 250 + 1);
    let mut s = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("s{i}"), "namespace": cluster.apps},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                 "allocateLoadBalancerNodePorts": false},
    });
    if let Some(class) = &cluster.class {
        s["spec"]["loadBalancerClass"] = json!(class);
    }
    if with_status {
        s["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
    }
    (s, ip)
}

/// The EndpointSlice of `s{i}`: one ready endpoint on `node` (short name).
fn lab_slice(cluster: &Cluster, i: usize, node: &str) -> Value {
    lab_slice_named(cluster, &format!("s{i}"), node)
}

fn lab_slice_named(cluster: &Cluster, svc: &str, node: &str) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{svc}-1"), "namespace": cluster.apps,
                     "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.1.5"], "nodeName": cluster.node(node),
                       "conditions": {"ready": true}}],
    })
}

/// The churn of [`churn_run`]: how long, how fast, how often RSS and the
/// live heap are read.
struct Churn {
    services: usize,
    duration: Duration,
    /// Changes per second.
    rate: f64,
    sample: Duration,
}

/// Live churn Services at most (the oldest is deleted past it).
const CHURN_LIVE: usize = 50;

/// One speaker and four BIRD routers ([`BgpLab`]) under continuous churn at
/// a fixed rate, in a cycle of four changes: a new Service (ETP Local, its
/// EndpointSlice on this node, its status: a route more), an endpoint of a
/// churn Service moved between this node and another (a route withdrawn
/// or announced again), the oldest churn Service deleted with its slice
/// once more than [`CHURN_LIVE`] are live (else an endpoint of a base
/// Service moved), and an endpoint of a base Service (ETP Cluster: no
/// route change) moved. `VmRSS` is read every `sample`. At the end, once
/// the churn stops, every router must hold exactly the routes of the
/// Services that exist with an endpoint here (checked). Returns the
/// samples of `VmRSS` and of the live heap (`ferrolb_heap_live_bytes`, read
/// by a scrape right after) and the changes made.
fn churn_run(tag: &'static str, c: &Churn) -> ChurnSamples {
    let lab = BgpLab::start(tag, "speaker-k8s-churn", c.services);
    let cluster = &lab.cluster;
    let apps = cluster.apps.clone();
    let churn_service = |n: usize| {
        let ip = format!("198.51.{}.{}", 100 + (n / 250) % 100, n % 250 + 1);
        let mut s = cluster.service(&format!("c{n}"), "Local");
        s["spec"]["allocateLoadBalancerNodePorts"] = json!(false);
        s["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        s
    };
    // Live churn Services, oldest first: (number, endpoint on node1).
    let mut live: std::collections::VecDeque<(usize, bool)> = Default::default();
    let mut base_on_node1 = vec![true; c.services];
    let (mut next, mut moved_churn, mut moved_base, mut changes) = (0usize, 0usize, 0usize, 0u64);
    let (mut samples, mut heap, mut extent) = (Vec::new(), Vec::new(), Vec::new());
    let period = Duration::from_secs_f64(1.0 / c.rate);
    let cpu0 = cpu_ticks(lab.node.proc.pid());
    let start = Instant::now();
    let mut due = start;
    let mut sample_due = start;
    while start.elapsed() < c.duration {
        if Instant::now() >= sample_due {
            let kib = lab.rss_kib();
            let t = start.elapsed().as_secs_f64();
            let live = lab.heap_kib();
            let brk = lab.heap_extent_kib();
            let show = |v: Option<u64>| v.map_or_else(|| "-".into(), |h| h.to_string());
            eprintln!(
                "churn-rss t={t:.0}s rss={kib}KiB heap={}KiB extent={}KiB changes={changes}",
                show(live),
                show(brk)
            );
            samples.push((t, kib));
            heap.extend(live.map(|h| (t, h)));
            extent.extend(brk.map(|h| (t, h)));
            sample_due += c.sample;
        }
        let mut move_base = |moved_base: &mut usize| {
            let i = *moved_base % c.services;
            *moved_base += 1;
            base_on_node1[i] = !base_on_node1[i];
            let to = if base_on_node1[i] { "node1" } else { "node2" };
            cluster.apply(lab_slice(cluster, i, to));
        };
        match changes % 4 {
            0 => {
                cluster.apply(lab_slice_named(cluster, &format!("c{next}"), "node1"));
                cluster.apply(churn_service(next));
                live.push_back((next, true));
                next += 1;
            }
            1 => {
                let k = moved_churn % live.len();
                moved_churn += 1;
                let (n, here) = &mut live[k];
                *here = !*here;
                let to = if *here { "node1" } else { "node2" };
                cluster.apply(lab_slice_named(cluster, &format!("c{n}"), to));
            }
            2 if live.len() > CHURN_LIVE => {
                let (n, _) = live.pop_front().expect("more than CHURN_LIVE are live");
                let name = format!("c{n}");
                cluster.delete(&json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": apps}}));
                cluster.delete(&json!({"apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {"name": format!("{name}-1"), "namespace": apps}}));
            }
            _ => move_base(&mut moved_base),
        }
        changes += 1;
        due += period;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let took = start.elapsed();
    eprintln!(
        "churn: {changes} changes in {took:?} ({:.2}/s asked {:.2}/s), {next} services \
         created, {} deleted",
        changes as f64 / took.as_secs_f64(),
        c.rate,
        next - live.len(),
    );
    let ticks = cpu_ticks(lab.node.proc.pid()) - cpu0;
    eprintln!(
        "speaker cpu during the churn: {:.2} s ({:.1} % of a core), {:.2} s per 1,000 changes",
        ticks as f64 / 100.0,
        ticks as f64 / took.as_secs_f64(),
        ticks as f64 / 100.0 * 1000.0 / changes as f64
    );
    // Base Services are ETP Cluster: announced wherever their endpoints are.
    let expected = c.services + live.iter().filter(|(_, here)| *here).count();
    lab.wait_routes("the routes of the Services left after the churn", expected);
    eprintln!(
        "after the churn: {expected} routes at each router, rss {} KiB",
        lab.rss_kib()
    );
    // What the heap trims (--heap-trim-ms) cost the reconcile loop.
    let metrics = lab.node.metrics();
    let counter = |name: &str| -> Option<f64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    if let (Some(n), Some(released), Some(secs)) = (
        counter("ferrolb_heap_trims_total"),
        counter("ferrolb_heap_trims_released_total"),
        counter("ferrolb_heap_trim_seconds_total"),
    ) {
        eprintln!(
            "heap trims: {n} ({released} gave memory back), {:.1} ms in all, {:.3} ms each, \
             {:.4} % of the run",
            secs * 1e3,
            if n > 0.0 { secs * 1e3 / n } else { 0.0 },
            secs * 100.0 / took.as_secs_f64()
        );
    }
    ChurnSamples {
        rss: samples,
        heap,
        extent,
        changes,
        secs: took.as_secs_f64(),
    }
}

/// What [`churn_run`] measured: (seconds since the churn started, KiB).
struct ChurnSamples {
    rss: Vec<(f64, u64)>,
    /// Empty when the speaker exports no live heap.
    heap: Vec<(f64, u64)>,
    /// The `[heap]` mapping's size; empty when it has none.
    extent: Vec<(f64, u64)>,
    changes: u64,
    secs: f64,
}

impl ChurnSamples {
    /// The bytes per change a line of `slope` KiB/h stands for, at the
    /// rate the run made its changes.
    fn bytes_per_change(&self, slope: f64) -> f64 {
        slope * 1024.0 / (self.changes as f64 / self.secs * 3600.0)
    }

    /// Prints the line of `samples` (named `what`) over the whole run and
    /// over its second half, the bytes per change that second half's slope
    /// implies, and the [`Trend::flat`] verdict; returns the second half's
    /// trend.
    fn report(&self, what: &str, samples: &[(f64, u64)]) -> Trend {
        let all = Trend::fit(samples);
        let late = Trend::fit(second_half(samples));
        eprintln!(
            "churn {what}, whole run: n={} slope {:.0} KiB/h ({:.1} bytes/change), min {} max {} KiB",
            samples.len(),
            all.slope,
            self.bytes_per_change(all.slope),
            all.min,
            all.max
        );
        eprintln!(
            "churn {what}, second half: n={} slope {:.0} KiB/h ({:.1} bytes/change), rise {:.0} KiB \
             against a scatter of {:.0} KiB, min {} max {} KiB: {}",
            second_half(samples).len(),
            late.slope,
            self.bytes_per_change(late.slope),
            late.rise,
            late.spread,
            late.min,
            late.max,
            if late.flat() { "flat" } else { "GROWING" }
        );
        late
    }

    /// One line per 10-minute window up to the last sample: min-max of
    /// `VmRSS` and of the live heap (BENCHMARKS.md's table).
    fn windows(&self) {
        let range = |s: &[(f64, u64)], from: f64| {
            let w: Vec<u64> = s
                .iter()
                .filter(|(t, _)| *t >= from && *t < from + 600.0)
                .map(|x| x.1)
                .collect();
            match (w.iter().min(), w.iter().max()) {
                (Some(lo), Some(hi)) => format!("{lo}-{hi} KiB"),
                _ => "-".into(),
            }
        };
        let end = self.rss.last().map_or(0.0, |s| s.0);
        let mut from = 0.0;
        while from <= end {
            eprintln!(
                "churn window {:.0}-{:.0} min: rss {}, heap {}",
                from / 60.0,
                (from + 600.0) / 60.0,
                range(&self.rss, from),
                range(&self.heap, from)
            );
            from += 600.0;
        }
    }
}

/// The CPU time process `pid` has used, user and system, in clock ticks
/// (`/proc/PID/stat`: utime and stime, fields 14 and 15, i.e. 12 and 13
/// after the command's closing parenthesis). 100 ticks a second here.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A least-squares line through RSS samples and the scatter around it.
#[derive(Debug, PartialEq)]
struct Trend {
    /// KiB per hour.
    slope: f64,
    /// What the line rises over the samples' span, KiB.
    rise: f64,
    /// Peak-to-peak of the residuals (sample minus line), KiB: the noise.
    spread: f64,
    min: u64,
    max: u64,
}

impl Trend {
    /// The line through `samples` (seconds, KiB); at least two, at two
    /// different times.
    fn fit(samples: &[(f64, u64)]) -> Self {
        let n = samples.len() as f64;
        let mx = samples.iter().map(|s| s.0).sum::<f64>() / n;
        let my = samples.iter().map(|s| s.1 as f64).sum::<f64>() / n;
        let sxy: f64 = samples.iter().map(|s| (s.0 - mx) * (s.1 as f64 - my)).sum();
        let sxx: f64 = samples.iter().map(|s| (s.0 - mx).powi(2)).sum();
        let per_sec = sxy / sxx;
        let residual = |s: &(f64, u64)| s.1 as f64 - (my + per_sec * (s.0 - mx));
        let (lo, hi) = samples
            .iter()
            .map(residual)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r), hi.max(r))
            });
        let span = samples.last().map_or(0.0, |s| s.0) - samples.first().map_or(0.0, |s| s.0);
        Self {
            slope: per_sec * 3600.0,
            rise: per_sec * span,
            spread: hi - lo,
            min: samples.iter().map(|s| s.1).min().unwrap_or(0),
            max: samples.iter().map(|s| s.1).max().unwrap_or(0),
        }
    }

    /// Flat: the line rises over the span by no more than the samples
    /// scatter around it (a trend smaller than the noise measured with it).
    /// A steady leak, even a slow one, rises by more than its scatter over
    /// a long enough run; allocator noise does not.
    fn flat(&self) -> bool {
        self.rise <= self.spread
    }
}

/// The second half of `samples` (by count, the later one when odd).
fn second_half(samples: &[(f64, u64)]) -> &[(f64, u64)] {
    &samples[samples.len() / 2..]
}

#[test]
fn trend_fits_lines_and_tells_growth_from_noise() {
    let hour = |f: fn(f64) -> u64| -> Vec<(f64, u64)> {
        (0..=360)
            .map(|k| (f64::from(k) * 10.0, f(f64::from(k) * 10.0)))
            .collect()
    };
    // Constant: no slope, no scatter: flat.
    let t = Trend::fit(&hour(|_| 20_000));
    assert_eq!(
        (t.slope, t.rise, t.spread, t.min, t.max),
        (0.0, 0.0, 0.0, 20_000, 20_000)
    );
    assert!(t.flat());
    // A steady leak of 360 KiB/h on a constant: the line is the leak.
    let t = Trend::fit(&hour(|s| 20_000 + (s / 10.0) as u64));
    assert!((t.slope - 360.0).abs() < 1e-6, "{t:?}");
    assert!((t.rise - 360.0).abs() < 1e-6 && t.spread < 1e-6, "{t:?}");
    assert!(!t.flat());
    // Noise of +-64 KiB (a sawtooth of period 70 s) with no trend: flat.
    let t = Trend::fit(&hour(|s| 20_000 - 64 + (s as u64 % 70) * 128 / 60));
    assert!(t.flat(), "{t:?}");
    assert_eq!((t.min, t.max), (19_936, 20_064));
    // The same noise on a leak of 1 MiB/h: the rise is larger than it.
    let t = Trend::fit(&hour(|s| {
        20_000 - 64 + (s as u64 % 70) * 128 / 60 + (s * 1024.0 / 3600.0) as u64
    }));
    assert!(!t.flat(), "{t:?}");
    assert!((t.slope - 1024.0).abs() < 16.0, "{t:?}");
    // One step up halfway: growth, not noise.
    let t = Trend::fit(&hour(|s| if s < 1800.0 { 20_000 } else { 20_512 }));
    assert!(!t.flat(), "{t:?}");
    // The second half of 5 samples is the last 3.
    let s = [(0.0, 1), (1.0, 2), (2.0, 3), (3.0, 4), (4.0, 5)];
    assert_eq!(second_half(&s), &s[2..]);
}

/// Churn in bounded form (what `scripts/test` runs): 100 Services, 10
/// changes/s for 40 s, then every router must hold exactly the routes of
/// the Services left. The RSS line is printed, not judged: 40 s is not a
/// steady state (`bench_churn_rss` is).
#[test]
fn churn_routes_follow_changes() {
    let run = churn_run(
        "c",
        &Churn {
            services: 100,
            duration: Duration::from_secs(40),
            rate: 10.0,
            sample: Duration::from_secs(2),
        },
    );
    assert!(run.rss.len() >= 10, "{:?}", run.rss);
    eprintln!("rss over the churn: {:?}", Trend::fit(&run.rss));
    if !run.heap.is_empty() {
        eprintln!("live heap over the churn: {:?}", Trend::fit(&run.heap));
    }
}

/// Benchmark (BENCHMARKS.md, "Memory and idle CPU"): the speaker's RSS
/// under continuous churn for `CHURN_SECS` (default 3600) at
/// `CHURN_RATE` changes/s (default 10) with `BENCH_SERVICES` Services
/// (default 1,000) and 4 BGP peers, sampled every `CHURN_SAMPLE_SECS`
/// (default 10), beside its live heap (`ferrolb_heap_live_bytes`), each
/// line reported with the bytes per change its slope implies. Passes when
/// the second half of the RSS line is flat ([`Trend::flat`]); the verdicts
/// of the live heap and of the `[heap]` mapping's size (its extent) are
/// printed, not judged.
#[test]
#[ignore = "benchmark: run by hand, see BENCHMARKS.md"]
fn bench_churn_rss() {
    let var = |k: &str, d: f64| std::env::var(k).map_or(d, |v| v.parse().unwrap());
    let c = Churn {
        services: var("BENCH_SERVICES", 1000.0) as usize,
        duration: Duration::from_secs_f64(var("CHURN_SECS", 3600.0)),
        rate: var("CHURN_RATE", 10.0),
        sample: Duration::from_secs_f64(var("CHURN_SAMPLE_SECS", 10.0)),
    };
    let run = churn_run("h", &c);
    run.windows();
    let late = run.report("rss", &run.rss);
    assert!(
        !run.heap.is_empty(),
        "the speaker exports no ferrolb_heap_live_bytes (not built for glibc?)"
    );
    // The goal is RSS; the heap line tells a leak (both grow) from malloc
    // settling (RSS grows, the live heap does not).
    run.report("live heap", &run.heap);
    if !run.extent.is_empty() {
        run.report("heap extent", &run.extent);
    }
    assert!(late.flat(), "RSS grows over the second half: {late:?}");
}

#[test]
fn layer2_isolated_node_takes_over_nothing_a_ready_speaker_serves() {
    testnet::require_binary("nft");
    testnet::require_binary("arping");
    // A class of its own: the other layer 2 test's speakers, on the same
    // apiserver, must not see this test's service (same fixture, same IP).
    let cluster = Cluster::with_class("i");
    cluster.apply_fixture("l2");
    let (_run, _bridge, client, nodes) = l2_lab(&cluster, "speaker-k8s-isolated", true);
    let addrs = L2_NODES;
    let gauge = |n: &Node, name: &str| -> Option<u64> {
        n.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    let announces = |n: &Node| n.metrics().contains("protocol=\"layer2\"");
    let settled = |nodes: &[Node]| -> Option<usize> {
        let all = nodes
            .iter()
            .all(|n| gauge(n, "ferrolb_memberlist_members") == Some(3));
        let a: Vec<usize> = (0..nodes.len()).filter(|i| announces(&nodes[*i])).collect();
        (all && a.len() == 1).then(|| a[0])
    };
    // Which MACs answer six ARP replies for the VIP.
    let answering = || -> BTreeSet<String> {
        let out = client.exec([
            "arping",
            "-C",
            "6",
            "-w",
            "10",
            "-W",
            "0.2",
            "-i",
            "eth0",
            "10.0.0.100",
        ]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("bytes from"))
            .filter_map(|l| l.split_whitespace().nth(3).map(str::to_lowercase))
            .collect()
    };
    let mac = |i: usize| nodes[i].mac().to_lowercase();
    // Cuts node `i` off from the other nodes (memberlist and everything
    // else IP); the API and the client stay reachable.
    let cut = |i: usize| {
        let others: Vec<&str> = (0..3).filter(|j| *j != i).map(|j| addrs[j].1).collect();
        nodes[i].ns.cut_off(&others);
    };
    let heal = |i: usize| nodes[i].ns.reconnect();

    let w = eventually("three members and one announcer", T, &nodes, || {
        settled(&nodes)
    });
    assert_eq!(answering(), BTreeSet::from([mac(w)]));

    // A node that does not answer is cut off: alone, it would win the
    // election. It counts the two Ready speakers the API shows and leaves
    // the service to the winner they elect (one scrape: the gauges and the
    // announcements are written by the same reconcile).
    let x = (w + 1) % 3;
    cut(x);
    let m = eventually(
        "the cut-off node to elect among the Ready speakers",
        T,
        &nodes,
        || {
            let m = nodes[x].metrics();
            let isolated = m.contains("\nferrolb_memberlist_isolated 1\n");
            let counted = m.contains("\nferrolb_l2_isolated_api_candidates 2\n");
            (isolated && counted).then_some(m)
        },
    );
    assert!(
        !m.contains("protocol=\"layer2\""),
        "the isolated node announces:\n{m}"
    );
    assert_eq!(answering(), BTreeSet::from([mac(w)]));
    heal(x);
    let again = eventually("the cut-off node to rejoin", T, &nodes, || settled(&nodes));
    assert_eq!(again, w);

    // The answering node is cut off: the other two lose sight of it and
    // elect one of them, which publishes its ServiceL2Status. The cut-off
    // node reads it and leaves the service to it: one MAC answers.
    cut(w);
    let y = eventually("the others to elect a new winner", T, &nodes, || {
        (0..3).find(|i| *i != w && announces(&nodes[*i]))
    });
    eventually(
        "the cut-off node to leave the service to the new winner",
        T,
        &nodes,
        || {
            let m = nodes[w].metrics();
            (m.contains("\nferrolb_memberlist_isolated 1\n")
                && m.contains("\nferrolb_l2_isolated_yielded_services 1\n")
                && !m.contains("protocol=\"layer2\""))
            .then_some(())
        },
    );
    let status_of = |i: usize| {
        cluster
            .statuses::<ServiceL2Status>()
            .iter()
            .any(|(n, _, _)| *n == nodes[i].node)
    };
    eventually("only the new winner's ServiceL2Status", T, &nodes, || {
        (status_of(y) && !status_of(w)).then_some(())
    });
    assert_eq!(answering(), BTreeSet::from([mac(y)]));
    heal(w);
    eventually("one announcer after the heal", T, &nodes, || {
        settled(&nodes)
    });
}

/// The layer 2 tests' nodes: their names and addresses on the segment.
const L2_NODES: [(&str, &str); 3] = [
    ("node1", "10.0.0.2"),
    ("node2", "10.0.0.3"),
    ("node3", "10.0.0.4"),
];

/// The layer 2 lab on `cluster` (its fixture applied): a third Node, the
/// speaker Pods (memberlist seeds; `ready` gives them a `Ready` condition),
/// a client at 10.0.0.10 and the three speakers with memberlist on one
/// segment. Bind the result in this order so the speakers go first.
fn l2_lab(cluster: &Cluster, tag: &str, ready: bool) -> (RunDir, Bridge, Netns, Vec<Node>) {
    cluster.apply(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": cluster.node("node3")},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.4"}]},
    }));
    for (name, ip) in L2_NODES {
        let mut status = json!({"podIP": ip, "podIPs": [{"ip": ip}]});
        if ready {
            status["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        }
        cluster.apply(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("speaker-{name}"), "namespace": cluster.system,
                         "labels": {"app": "metallb", "component": "speaker"}},
            "spec": {"nodeName": cluster.node(name), "hostNetwork": true,
                     "containers": [{"name": "speaker", "image": "ferrolb/speaker"}]},
            "status": status,
        }));
    }
    let run = RunDir::new(tag);
    let bridge = Bridge::new("lan");
    let client = Netns::new("client");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let nodes = L2_NODES
        .iter()
        .map(|(name, ip)| {
            let bind = format!("{ip}:7946");
            Node::start(
                cluster,
                &bridge,
                name,
                ip,
                &["--memberlist-bind", &bind],
                &run,
            )
        })
        .collect();
    (run, bridge, client, nodes)
}

#[test]
fn log_time_reads_tracing_timestamps() {
    let t = log_time("2026-11-22T21:39:51.123456Z DEBUG x: y").unwrap();
    // date -u -d 2026-11-22T21:39:51Z +%s
    assert!((t - 1_795_383_591.123_456).abs() < 1e-6, "{t}");
    assert_eq!(log_time("1970-01-01T00:00:00.000000Z"), Some(0.0));
    assert_eq!(log_time("2000-03-01T00:00:00.5Z"), Some(951_868_800.5));
    assert_eq!(
        log_field(
            "t DEBUG bgp{peer=10.0.0.1:179 name=\"r0\"}: m decided=1 all=false",
            "name"
        ),
        Some("r0")
    );
    assert_eq!(log_field("t m decided=1 all=false", "decided"), Some("1"));
}

/// Benchmark (BENCHMARKS.md, issue 18 §1): one speaker as one Node of a
/// cluster that `ferrolb-loadgen fill` and `floor` made (5,000 Nodes,
/// `SCALE_SERVICES` LoadBalancer Services over 20 pools with their
/// addresses, their EndpointSlices), BGP to one FRR. Run by
/// `bench/speaker-scale`, which fills the apiserver first; on its own:
///
/// ```text
/// SCALE_KUBECONFIG=/path/kubeconfig SCALE_SERVICES=50000 SPEAKER_BIN=target/release/speaker \
///   LOADGEN_BIN=target/release/ferrolb-loadgen \
///   cargo test --release -p speaker --test speaker_k8s bench_speaker_at_scale -- --ignored --nocapture
/// ```
///
/// Other variables: `SCALE_NAMESPACE` (the pools' namespace, default
/// metallb-system), `SCALE_NODE` (the speaker's Node, default node-04999:
/// the churn flips Nodes from node-00000 up), `SCALE_CHURN_SECS` (60),
/// `SCALE_MOVES` (endpoint moves per second, 10), `SCALE_CREATES`
/// (Services created and deleted per second, 1), `SCALE_FLIPS` (Node
/// Ready flips per second, 1), `SCALE_ROUNDS` (20).
///
/// Prints: the time until every route is at FRR and how many; RSS (VmRSS
/// and VmHWM) once they are; idle CPU and octets from the apiserver (at
/// the namespace's loopback relay: TLS included); under the churn, CPU
/// per 1,000 changes and octets per minute and per change; and, during
/// the churn, the time from an EndpointSlice write (an ETP Local
/// Service's endpoint moved onto this node, then off it) to the first
/// UPDATE from the speaker at FRR (tcpdump in FRR's namespace).
#[test]
#[ignore = "benchmark: run by bench/speaker-scale, see BENCHMARKS.md"]
fn bench_speaker_at_scale() {
    testnet::require_root();
    testnet::require_binary("tcpdump");
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
    let kubeconfig = std::env::var("SCALE_KUBECONFIG")
        .expect("SCALE_KUBECONFIG: the kubeconfig of an apiserver filled by bench/speaker-scale");
    let services: u32 = var("SCALE_SERVICES", "50000").parse().unwrap();
    let ns = var("SCALE_NAMESPACE", "metallb-system");
    let me = var("SCALE_NODE", "node-04999");
    let churn_secs: u64 = var("SCALE_CHURN_SECS", "60").parse().unwrap();
    let rounds: usize = var("SCALE_ROUNDS", "20").parse().unwrap();
    let loadgen = var(
        "LOADGEN_BIN",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/release/ferrolb-loadgen"
        ),
    );
    assert!(
        std::path::Path::new(&loadgen).exists(),
        "LOADGEN_BIN: {loadgen} is missing (cargo build --release -p ferrolb-tools --bin ferrolb-loadgen)"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (client, server) = rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let server = config.cluster_url.to_string();
        (kube::Client::try_from(config).unwrap(), server)
    });
    let port: u16 = server
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // The peer and the advertisement of every pool (server-side apply).
    let apply = |doc: Value| {
        let ar = if doc["kind"] == "BGPPeer" {
            kube::api::ApiResource::erase::<api::v1beta2::BGPPeer>(&())
        } else {
            kube::api::ApiResource::erase::<api::v1beta1::BGPAdvertisement>(&())
        };
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        rt.block_on(api.patch(
            &name,
            &PatchParams::apply("speaker-scale").force(),
            &Patch::Apply(&doc),
        ))
        .unwrap();
    };
    apply(json!({
        "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
        "metadata": {"name": "scale-frr", "namespace": ns},
        "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": "10.0.0.1", "connectTime": "1s",
                 "nodeSelectors": [{"matchLabels": {"kubernetes.io/hostname": me}}]},
    }));
    apply(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
        "metadata": {"name": "scale-all", "namespace": ns},
        "spec": {},
    }));

    let run = RunDir::new("speaker-scale");
    let bridge = Bridge::new("lan");
    let router = Netns::new("rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(
        &router,
        "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 neighbor 10.0.0.2 remote-as 64512
",
    );
    let node_ns = Netns::new("scale");
    bridge.attach(&node_ns, "eth0");
    node_ns.add_addr("eth0", "10.0.0.2/24");
    let relay = testnet::Forward::loopback_port(&node_ns, port);
    let log = run.join("speaker.log");
    let bin = std::env::var("SPEAKER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_speaker").into());
    let mut cmd = node_ns.command(&bin);
    cmd.env("NODE_NAME", &me)
        .args(["--kubeconfig", &kubeconfig, "--namespace", &ns])
        .args(["--metrics-addr", "127.0.0.1:7472"])
        .args([
            "--log-level",
            "debug,kube=info,hyper=info,tower=info,hyper_util=info",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap(),
        );
    let started = Instant::now();
    let speaker = node_ns.spawn_command(&mut cmd);
    let pid = speaker.pid();
    let dump = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        eprintln!(
            "--- speaker log (tail) ---\n{}",
            lines[lines.len().saturating_sub(40)..].join("\n")
        );
    };
    let prefixes = || {
        frr.vtysh_json("show bgp ipv4 unicast summary json")["peers"]["10.0.0.2"]["pfxRcd"]
            .as_u64()
            .unwrap_or(0)
    };
    // Every route: the count at FRR unchanged over 10 s (five reads).
    let mut last = (0, 0usize);
    let routes = wait_until(
        "every route at FRR",
        Duration::from_secs(1800),
        Duration::from_secs(2),
        || {
            let n = prefixes();
            if n > 0 && n == last.0 {
                last.1 += 1;
            } else {
                last = (n, 0);
            }
            (last.1 >= 5).then_some(n)
        },
    )
    .unwrap_or_else(|e| {
        dump();
        panic!("{e}")
    });
    let to_routes = started.elapsed().saturating_sub(Duration::from_secs(10));
    let octets_start = relay.octets_in();
    eprintln!(
        "scale: {services} services: {routes} routes at FRR {to_routes:?} after the speaker started; \
         {:.1} MB received from the apiserver by then",
        octets_start as f64 / 1e6
    );
    let proc_status = || std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |status: &str, k: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
            .unwrap()
    };
    // VmRSS and VmHWM beside the live heap and the trims' counters (a
    // scrape of the speaker's metrics in its namespace); the heap's
    // series are absent where the speaker is not built for glibc.
    let memory = |when: &str| {
        let s = proc_status();
        let text = k8s::metrics_in(&node_ns);
        let sample = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .map_or_else(|| "-".to_owned(), |v| v.trim().to_owned())
        };
        let live = sample("ferrolb_heap_live_bytes")
            .parse::<f64>()
            .map_or_else(|_| "-".to_owned(), |b| format!("{:.1}", b / 1048576.0));
        eprintln!(
            "scale: memory {when}: VmRSS {:.1} MiB ({:.2} KiB per Service), VmHWM {:.1} MiB, \
             live heap {live} MiB; trims {}, released {}, {} s",
            kib(&s, "VmRSS:") as f64 / 1024.0,
            kib(&s, "VmRSS:") as f64 / f64::from(services),
            kib(&s, "VmHWM:") as f64 / 1024.0,
            sample("ferrolb_heap_trims_total"),
            sample("ferrolb_heap_trims_released_total"),
            sample("ferrolb_heap_trim_seconds_total"),
        );
    };
    memory("at the routes");
    let cpu = || cpu_ticks(pid);
    // Then the speaker writes a ServiceBGPStatus object and a nodeAssigned
    // Event per announced Service (and reads the apiserver's answers
    // through the same relay): steady once under 100 kB arrive in 15 s.
    // (The first read only starts the first window.)
    let mut quiet_from = None;
    let settled = wait_until(
        "the status objects and events written (under 100 kB from the apiserver in 15 s)",
        Duration::from_secs(1800),
        Duration::from_secs(15),
        || {
            let now = relay.octets_in();
            let quiet = quiet_from.is_some_and(|from| now - from < 100_000);
            quiet_from = Some(now);
            quiet.then_some(())
        },
    );
    if let Err(e) = settled {
        dump();
        panic!("{e}");
    }
    eprintln!(
        "scale: status objects and events written {:?} after the speaker started; {:.1} MB received by then",
        started.elapsed(),
        relay.octets_in() as f64 / 1e6
    );
    std::thread::sleep(Duration::from_secs(10));
    memory("after the start's writes");
    let s = proc_status();
    eprintln!(
        "scale: steady state: VmRSS {} KiB ({:.1} MiB), VmHWM {} KiB ({:.1} MiB)",
        kib(&s, "VmRSS:"),
        kib(&s, "VmRSS:") as f64 / 1024.0,
        kib(&s, "VmHWM:"),
        kib(&s, "VmHWM:") as f64 / 1024.0
    );
    let (c0, b0, t0) = (cpu(), relay.octets_in(), Instant::now());
    std::thread::sleep(Duration::from_secs(30));
    eprintln!(
        "scale: idle over {:?}: {} CPU ticks, {} octets from the apiserver",
        t0.elapsed(),
        cpu() - c0,
        relay.octets_in() - b0
    );

    // The churn (another process), and latency rounds meanwhile.
    let out = run.join("churn.json");
    // Killed (by its PID) if the test fails before it ends.
    struct Churn(std::process::Child);
    impl Drop for Churn {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut churn = Churn(
        std::process::Command::new(&loadgen)
            .args(["--kubeconfig", &kubeconfig, "churn"])
            .args(["--services", &services.to_string()])
            .args(["--pool-namespace", &ns])
            .args(["--duration", &churn_secs.to_string()])
            .args(["--services-per-second", &var("SCALE_CREATES", "1")])
            .args(["--endpoint-moves-per-second", &var("SCALE_MOVES", "10")])
            .args(["--node-flips-per-second", &var("SCALE_FLIPS", "1")])
            // ETP Cluster: the fill's Local Services hold nearly every
            // health-check node port of the default range.
            .args(["--local-percent", "0"])
            // A seed of its own (the same seed twice writes the same
            // endpoints: no-op patches).
            .args([
                "--seed",
                &std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
                    .to_string(),
            ])
            .stdout(std::fs::File::create(&out).unwrap())
            .spawn()
            .unwrap(),
    );
    let (c0, b0, t0) = (cpu(), relay.octets_in(), Instant::now());
    let dump_path = run.join("updates.txt");
    // Segments from the speaker with more than a KEEPALIVE (19 octets) of
    // BGP: UPDATEs, announcements and withdrawals alike.
    let mut tcpdump = capture_from_speaker(
        &router,
        "(ip[2:2] - ((ip[0] & 0xf) << 2) - ((tcp[12] & 0xf0) >> 2)) > 19",
        &dump_path,
    );
    std::thread::sleep(Duration::from_secs(2));
    let lines = || {
        std::fs::read_to_string(&dump_path)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let first_after = |before: usize| {
        wait_until(
            "the UPDATE at FRR",
            CHANGE,
            Duration::from_millis(20),
            || {
                let text = std::fs::read_to_string(&dump_path).ok()?;
                text.lines()
                    .nth(before)?
                    .split_whitespace()
                    .next()?
                    .parse::<f64>()
                    .ok()
            },
        )
        .unwrap_or_else(|e| {
            dump();
            panic!("{e}")
        })
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let slices_api = |namespace: &str| -> Api<k8s_openapi::api::discovery::v1::EndpointSlice> {
        Api::namespaced(client.clone(), namespace)
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let mut i = 1000u32;
    while on.len() < rounds && i < services {
        i += 1;
        // The loadgen's ETP Local Services: not in a shared pair, and
        // (i * 53) mod 100 below 30 (its default --local-percent).
        let pair = i / 2;
        if (pair * 37) % 100 < 10 || (i * 53) % 100 >= 30 {
            continue;
        }
        let namespace = format!("lg-{}", (i / 2) % 50);
        let name = format!("svc-{i:06}");
        let api = slices_api(&namespace);
        let lp =
            kube::api::ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
        let list = rt.block_on(api.list(&lp)).unwrap();
        let here = list.items.iter().any(|s| {
            s.endpoints
                .iter()
                .flatten()
                .any(|e| e.node_name.as_deref() == Some(me.as_str()))
        });
        if here || list.items.is_empty() {
            continue;
        }
        let svc: k8s_openapi::api::core::v1::Service = rt
            .block_on(Api::namespaced(client.clone(), &namespace).get(&name))
            .unwrap();
        let local = svc
            .spec
            .as_ref()
            .and_then(|s| s.external_traffic_policy.as_deref());
        if local != Some("Local") {
            continue;
        }
        let Some(ip) = svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .and_then(|i| i.first()?.ip.clone())
        else {
            continue;
        };
        let prefix = format!("{ip}/32");
        let original = serde_json::to_value(
            &list
                .items
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(&format!("{name}-0")))
                .unwrap()
                .endpoints,
        )
        .unwrap();
        let patch = |endpoints: Value| {
            rt.block_on(api.patch(
                &format!("{name}-0"),
                &PatchParams::default(),
                &Patch::Merge(json!({ "endpoints": endpoints })),
            ))
            .unwrap();
        };
        // Onto this node: announced.
        let before = lines();
        let wall = now();
        patch(json!([{"addresses": ["10.245.0.1"], "nodeName": me,
                      "conditions": {"ready": true, "serving": true, "terminating": false}}]));
        let at = first_after(before);
        on.push(Duration::from_secs_f64((at - wall).max(0.0)));
        wait_until(
            "the route at FRR",
            CHANGE,
            Duration::from_millis(50),
            || (!paths(&frr, &prefix).is_empty()).then_some(()),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // Off it again: withdrawn.
        let before = lines();
        let wall = now();
        patch(original);
        let at = first_after(before);
        off.push(Duration::from_secs_f64((at - wall).max(0.0)));
        wait_until(
            "the route gone from FRR",
            CHANGE,
            Duration::from_millis(50),
            || paths(&frr, &prefix).is_empty().then_some(()),
        )
        .unwrap();
        eprintln!(
            "scale: round {}: {name} ({ip}) on {:?}, off {:?}",
            on.len(),
            on[on.len() - 1],
            off[off.len() - 1]
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    tcpdump.stop();
    let status = churn.0.wait().unwrap();
    let took = t0.elapsed();
    let (ticks, octets) = (cpu() - c0, relay.octets_in() - b0);
    assert!(status.success(), "ferrolb-loadgen churn failed: {status}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let changes = [
        "services_created",
        "services_deleted",
        "endpoint_moves",
        "node_flips",
    ]
    .iter()
    .filter_map(|k| report[*k].as_u64())
    .sum::<u64>()
        + 2 * on.len() as u64;
    let minutes = took.as_secs_f64() / 60.0;
    eprintln!(
        "scale: churn {took:?}: {changes} changes ({} created, {} deleted, {} endpoint moves, \
         {} node flips, {} round writes); speaker CPU {ticks} ticks = {:.2} CPU-s per 1,000 \
         changes; from the apiserver {:.2} MB/min, {:.0} octets per change",
        report["services_created"],
        report["services_deleted"],
        report["endpoint_moves"],
        report["node_flips"],
        2 * on.len(),
        ticks as f64 / 100.0 / changes as f64 * 1000.0,
        octets as f64 / 1e6 / minutes,
        octets as f64 / changes as f64,
    );
    memory("after the churn");
    // One trim period (--heap-trim-ms, 10 s by default) and a little more.
    std::thread::sleep(Duration::from_secs(12));
    memory("12 s after the churn");
    let s = proc_status();
    eprintln!(
        "scale: after the churn: VmRSS {} KiB, VmHWM {} KiB",
        kib(&s, "VmRSS:"),
        kib(&s, "VmHWM:")
    );
    assert!(!on.is_empty(), "no ETP Local Service found for the rounds");
    summary("scale: endpoint onto this node -> UPDATE at FRR", on);
    summary("scale: endpoint off this node -> UPDATE at FRR", off);
    drop(speaker);
}

/// tcpdump in a router's namespace, one line per segment the speaker
/// (10.0.0.2) sends to its BGP port that also matches `filter`, each with
/// its arrival time (`-tt`), written to `path` as it comes.
fn capture_from_speaker(ns: &Netns, filter: &str, path: &std::path::Path) -> testnet::Proc {
    ns.spawn(
        [
            "tcpdump",
            "-i",
            "eth0",
            "-n",
            "-l",
            "-tt",
            "-Q",
            "in",
            "--immediate-mode",
            &format!("src host 10.0.0.2 and tcp dst port 179 and {filter}"),
        ],
        path,
    )
}

/// How many times the speaker's log says it started and stopped
/// announcing `service` (`namespace/name`): its `announce` and `withdraw`
/// lines, one per (protocol, service, IP) that started or ended.
fn announce_record(log: &std::path::Path, service: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap();
    let count = |what: &str| {
        text.lines()
            .filter(|l| l.contains(&format!(": {what} ")))
            .filter(|l| log_field(l, "service") == Some(service))
            .count()
    };
    (count("announce"), count("withdraw"))
}

/// Issue 18 §1: a stored Service keeps only the labels whose keys the
/// advertisements' `serviceSelectors` name (none here at first). A
/// configuration that names a new key makes the speaker list the Services
/// again, and it keeps deciding with the configuration before until that
/// list is whole: a Service the new selectors select is never withdrawn
/// in between, one they do not select is never announced for a label the
/// records lacked (`NotIn` and `DoesNotExist` would read it as absent),
/// and one they no longer select is withdrawn. What the speaker did is
/// its announce record (its log's `announce` and `withdraw` lines); what
/// the router has, FRR's table.
#[test]
fn a_new_service_selector_key_lists_the_services_again_and_withdraws_nothing_still_selected() {
    let cluster = Cluster::with_class("sel");
    let run = RunDir::new("speaker-k8s-selectors");
    let bridge = Bridge::new("lan");
    let router = Netns::new("rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(
        &router,
        "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 neighbor 10.0.0.2 remote-as 64512
",
    );
    let system = cluster.system.clone();
    cluster.apply(cluster.node_object("node1", "10.0.0.2", json!({})));
    let pool = |name: &str, range: &str| {
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
               "metadata": {"name": name, "namespace": system},
               "spec": {"addresses": [range]}})
    };
    cluster.apply(pool("sel-a", "198.51.100.0/25"));
    cluster.apply(pool("sel-b", "198.51.100.128/25"));
    cluster.apply(
        json!({"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
        "metadata": {"name": "router", "namespace": system},
        "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": "10.0.0.1",
                 "holdTime": "9s", "connectTime": "1s"}}),
    );
    let advertisement = |name: &str, pool: &str, selectors: Value| {
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": name, "namespace": system},
               "spec": {"ipAddressPools": [pool], "serviceSelectors": selectors}})
    };
    // Pool a: every Service announced; pool b: none (no advertisement).
    cluster.apply(advertisement("all", "sel-a", json!([])));
    let services = [
        (
            "front",
            "198.51.100.10",
            json!({"tier": "front", "app": "web"}),
        ),
        ("back", "198.51.100.11", json!({"tier": "back"})),
        ("b-front", "198.51.100.130", json!({"tier": "front"})),
        ("b-back", "198.51.100.131", json!({"tier": "back"})),
        (
            "b-canary",
            "198.51.100.132",
            json!({"tier": "front", "canary": "yes"}),
        ),
    ];
    for (name, ip, labels) in &services {
        cluster.apply(cluster.endpoints(name, &["node1"]));
        let mut svc = cluster.service(name, "Cluster");
        svc["metadata"]["labels"] = labels.clone();
        svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        cluster.apply(svc);
    }
    let nodes = vec![Node::start(
        &cluster,
        &bridge,
        "node1",
        "10.0.0.2",
        &[],
        &run,
    )];
    frr.wait_established("10.0.0.2", T);
    let at_frr = |ip: &str| !paths(&frr, &format!("{ip}/32")).is_empty();
    eventually("front and back announced", T, &nodes, || {
        (at_frr("198.51.100.10") && at_frr("198.51.100.11")).then_some(())
    });
    let relists = || {
        let text = nodes[0].metrics();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("ferrolb_services_relists_total ")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no ferrolb_services_relists_total in:\n{text}"))
    };
    assert_eq!(
        relists(),
        0,
        "no selector names a key: one list, at the start"
    );

    // Pool b gains an advertisement for the Services that are not `back`
    // and not canaries: `tier` and `canary` are new keys. b-front goes up
    // once the Services are listed again; b-back and b-canary, which the
    // records as they were (no labels) would have let through, never.
    cluster.apply(advertisement(
        "b",
        "sel-b",
        json!([{"matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["back"]},
            {"key": "canary", "operator": "DoesNotExist"}]}]),
    ));
    eventually("b-front announced", CHANGE, &nodes, || {
        at_frr("198.51.100.130").then_some(())
    });
    eventually("one list again", CHANGE, &nodes, || {
        (relists() == 1).then_some(())
    });

    // Pool a's advertisement now selects `app: web` alone, a new key:
    // `back` is withdrawn (after the list), `front` never is.
    cluster.apply(advertisement(
        "all",
        "sel-a",
        json!([{"matchLabels": {"app": "web"}}]),
    ));
    eventually("back withdrawn", CHANGE, &nodes, || {
        (!at_frr("198.51.100.11")).then_some(())
    });
    eventually("two lists again", CHANGE, &nodes, || {
        (relists() == 2).then_some(())
    });
    assert!(at_frr("198.51.100.10") && at_frr("198.51.100.130"));
    assert!(!at_frr("198.51.100.131") && !at_frr("198.51.100.132"));

    let record = |name: &str| announce_record(&nodes[0].log, &format!("{}/{name}", cluster.apps));
    let got: Vec<(&str, (usize, usize))> = services
        .iter()
        .map(|(name, ..)| (*name, record(name)))
        .collect();
    assert_eq!(
        got,
        [
            ("front", (1, 0)),
            ("back", (1, 1)),
            ("b-front", (1, 0)),
            ("b-back", (0, 0)),
            ("b-canary", (0, 0)),
        ],
        "(announce, withdraw) lines per Service"
    );
}
