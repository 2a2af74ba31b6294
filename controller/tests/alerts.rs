//! MetalLB's alerts (`config/prometheus/alerts.yaml`) evaluated by
//! `promtool test rules` on what the real controller (`controller run` on
//! testenv's apiserver) exports: a full pool fires
//! MetalLBAddressPoolExhausted, the three usage alerts and ferrolb's IPv4
//! one, a pool with room fires none, a Service the full pool cannot serve
//! fires FerrolbServicesPending, and a controller that loaded its pools
//! fires neither configuration alert nor FerrolbNotReady; its scrape holds
//! every metric the Grafana dashboard's controller panels read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;

#[path = "../../shell/tests/support/promtool.rs"]
mod promtool;

#[path = "../../shell/tests/support/dashboard.rs"]
mod dashboard;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use api::v1beta1::IPAddressPool;
use hostile::{Process, TempDir};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::TestEnv;

const T: Duration = Duration::from_secs(60);

/// The value of the sample `line` (name and labels) in `text`.
fn value(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_alerts_follow_the_controllers_pools() {
    let promtool_bin = testnet::require_binary("promtool");
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let ns = env.fresh_namespace("ctl-alerts").await.unwrap();
    let client = env.client().unwrap();
    let class = format!("ferrolb.test/{ns}");
    let dir = TempDir::new("controller-alerts");
    let mut p = Process::start(
        env!("CARGO_BIN_EXE_controller"),
        &[
            "run",
            "--kubeconfig",
            env.kubeconfig_path().to_str().unwrap(),
            "--namespace",
            &ns,
            "--lb-class",
            &class,
            "--identity",
            "alerts",
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-probe-port",
            "0",
            "--log-format",
            "json",
        ],
        dir.join("controller.log"),
    );
    let addr = hostile::server(&mut p, T).addr;

    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    for (name, addresses) in [("small", "10.40.0.0/31"), ("big", "10.41.0.0/24")] {
        let pool: IPAddressPool = serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": name},
            "spec": {"addresses": [addresses], "autoAssign": name == "big"},
        }))
        .unwrap();
        pools.create(&PostParams::default(), &pool).await.unwrap();
    }
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    // `d` asks for the full pool: it stays pending.
    for (name, pool) in [("a", "small"), ("b", "small"), ("c", "big"), ("d", "small")] {
        let svc: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": name,
                "annotations": BTreeMap::from([("metallb.io/address-pool", pool)]),
            },
            "spec": {
                "type": "LoadBalancer",
                "loadBalancerClass": class,
                "selector": {"app": name},
                "ports": [{"port": 80}],
            },
        }))
        .unwrap();
        services.create(&PostParams::default(), &svc).await.unwrap();
    }

    // Until the leader has loaded the pools, holds the three addresses and
    // counts `d` pending.
    let t0 = Instant::now();
    let scraped = loop {
        let text = promtool::scrape(addr);
        if value(&text, "metallb_k8s_client_config_loaded_bool") == Some(1.0)
            && value(
                &text,
                "metallb_allocator_addresses_in_use_total{pool=\"small\"}",
            ) == Some(2.0)
            && value(
                &text,
                "metallb_allocator_services_allocated_total{pool=\"big\"}",
            ) == Some(1.0)
            && value(&text, "ferrolb_controller_services_pending") == Some(1.0)
        {
            break text;
        }
        if !p.alive() || t0.elapsed() > T {
            p.dump_log();
            panic!("the pools never filled as the test asks:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for line in [
        "metallb_allocator_addresses_total{pool=\"small\"} 2\n",
        "metallb_allocator_ipv4_addresses_total{pool=\"big\"} 256\n",
        "metallb_allocator_ipv4_addresses_in_use_total{pool=\"big\"} 1\n",
        "metallb_allocator_ipv6_addresses_total{pool=\"big\"} 0\n",
        "metallb_allocator_services_allocated_total{pool=\"small\"} 2\n",
        "metallb_k8s_client_config_stale_bool 0\n",
    ] {
        assert!(scraped.contains(line), "{line} missing from\n{scraped}");
    }
    assert!(
        value(&scraped, "metallb_k8s_client_updates_total").is_some_and(|n| n >= 3.0),
        "{scraped}"
    );
    assert!(scraped.contains("\nprocess_resident_memory_bytes "));

    let target = promtool::Target {
        job: "ferrolb-controller",
        pod: "controller-5d4f8",
        container: "controller",
    };
    // MetalLB's pool rules match `on(pool)`: their alerts carry the pool
    // only, and the job/pod/container of their annotations are empty, as
    // with MetalLB.
    let labels = |severity: &str| {
        vec![
            ("pool".to_owned(), "small".to_owned()),
            ("severity".into(), severity.into()),
        ]
    };
    let summary = (
        "summary".to_owned(),
        "Exhausted address pool on ".to_owned(),
    );
    let usage = |name: &str, percent: u32, severity: &str| promtool::Alert {
        name: name.into(),
        labels: labels(severity),
        annotations: vec![
            summary.clone(),
            (
                "message".into(),
                format!(
                    " - MetalLB  on  has address pool small past {percent}% usage for > 1 minute"
                ),
            ),
        ],
    };
    let case = promtool::Case {
        scraped: vec![(target, scraped.clone())],
        expect: vec![
            (
                "MetalLBAddressPoolExhausted",
                vec![promtool::Alert {
                    name: "MetalLBAddressPoolExhausted".into(),
                    labels: labels("critical"),
                    annotations: vec![
                        summary.clone(),
                        (
                            "description".into(),
                            " - MetalLB  on  has exhausted address pool small for > 1 minute"
                                .into(),
                        ),
                    ],
                }],
            ),
            (
                "MetalLBAddressPoolUsage75Percent",
                vec![usage("MetalLBAddressPoolUsage75Percent", 75, "warning")],
            ),
            (
                "MetalLBAddressPoolUsage85Percent",
                vec![usage("MetalLBAddressPoolUsage85Percent", 85, "warning")],
            ),
            (
                "MetalLBAddressPoolUsage95Percent",
                vec![usage("MetalLBAddressPoolUsage95Percent", 95, "critical")],
            ),
            (
                "FerrolbAddressPoolIPv4NearlyExhausted",
                vec![promtool::Alert {
                    name: "FerrolbAddressPoolIPv4NearlyExhausted".into(),
                    labels: labels("warning"),
                    annotations: vec![
                        (
                            "summary".into(),
                            "IPv4 addresses of pool small nearly exhausted".into(),
                        ),
                        (
                            "description".into(),
                            " - pool small has 100% of its IPv4 addresses in use for > 1 minute"
                                .into(),
                        ),
                    ],
                }],
            ),
            ("FerrolbAddressPoolIPv6NearlyExhausted", vec![]),
            (
                "FerrolbServicesPending",
                vec![promtool::Alert {
                    name: "FerrolbServicesPending".into(),
                    labels: vec![
                        ("container".into(), "controller".into()),
                        ("job".into(), "ferrolb-controller".into()),
                        ("pod".into(), "controller-5d4f8".into()),
                        ("severity".into(), "warning".into()),
                    ],
                    annotations: vec![
                        (
                            "summary".into(),
                            "LoadBalancer Services without an address".into(),
                        ),
                        (
                            "description".into(),
                            "ferrolb-controller - 1 LoadBalancer Services have had no address for > 2 minutes (no pool fits, or the request is invalid); `kubectl ferrolb status` lists them with the reason".into(),
                        ),
                    ],
                }],
            ),
            ("MetalLBStaleConfig", vec![]),
            ("MetalLBConfigNotLoaded", vec![]),
            ("FerrolbNotReady", vec![]),
        ],
    };
    if let Err(e) = promtool::test_rules(&promtool_bin, &dir.join("promtool"), &[case]) {
        p.dump_log();
        panic!("{e}");
    }
    // The dashboard's controller panels read what this controller exports.
    if let Err(e) = dashboard::check(
        &promtool_bin,
        &dir.join("promtool"),
        "Controller",
        &[&scraped],
    ) {
        panic!("{e}\nscrape:\n{scraped}");
    }
}
