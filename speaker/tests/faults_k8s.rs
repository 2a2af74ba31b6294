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
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub, dead_code)]

mod k8s;
#[path = "faults/lab.rs"]
mod lab;

use std::time::{Duration, Instant};

use serde_json::json;
use testenv::TestEnv;
use testnet::{Bridge, Frr, Netns, RunDir, wait_until};

use crate::k8s::{Cluster, Node, eventually, paths};
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
    cluster.apply(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "fresh-1", "namespace": cluster.apps,
                     "labels": {"kubernetes.io/service-name": "fresh"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.1.9"], "nodeName": cluster.node("node1"),
                       "conditions": {"ready": true}}],
    }));
    cluster.apply(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "fresh", "namespace": cluster.apps},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.40"}]}},
    }));
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
