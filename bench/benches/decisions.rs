//! The speaker's decisions after one service changes, at 1,000, 10,000 and
//! 50,000 services: the whole plans (`bgp_plan` + `l2_plan`, what every
//! change cost before the keyed state) against `Keyed::update`, which
//! decides again only the changed service. Both take the same
//! `ClusterView`: 3 nodes (all memberlist members), 4 BGP peers, one
//! BGPAdvertisement and one L2Advertisement over a /16 pool, every service
//! with an endpoint on each node; each iteration moves one service's only
//! endpoint between two nodes, so there is always a change to apply.
//! Building the view from the Kubernetes objects is not in either figure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use api::validate::{Config, config};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use speaker::announce::{
    ClusterView, Endpoint, Keyed, Node, ObjectKey, Service, TrafficPolicy, bgp_plan, l2_plan,
    stored,
};

const NODES: [&str; 3] = ["n1", "n2", "n3"];

fn endpoint(node: &str) -> Endpoint {
    Endpoint {
        node: Some(node.into()),
        has_address: true,
        ready: Some(true),
        serving: Some(true),
        terminating: Some(false),
    }
}

fn view(services: u32) -> ClusterView {
    let (model, problems) =
        config(&Config::from_yaml(&ferrolb_bench::speaker_config_yaml("10.0.0.0/16")).unwrap());
    assert!(problems.is_empty(), "{problems:?}");
    ClusterView {
        node: "n1".into(),
        nodes: Arc::new(
            NODES
                .iter()
                .map(|n| {
                    let node = Node {
                        name: (*n).into(),
                        addresses: vec![IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1))],
                        ..Node::default()
                    };
                    ((*n).to_owned(), node)
                })
                .collect(),
        ),
        model: Arc::new(model),
        services: (0..services)
            .map(|i| {
                Arc::new(Service {
                    record: Arc::new(stored::Service {
                        key: ObjectKey::new("default", format!("svc-{i}")),
                        load_balancer: true,
                        external_traffic_policy: TrafficPolicy::Local,
                        ingress: [IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))].into(),
                        ..stored::Service::default()
                    }),
                    endpoints: NODES.iter().map(|n| endpoint(n)).collect(),
                })
            })
            .collect(),
        members: Some(NODES.iter().map(|n| (*n).to_owned()).collect()),
        ..ClusterView::default()
    }
}

/// Moves service 0's only endpoint to the other of n1 and n2.
fn flip(view: &mut ClusterView) {
    let svc = Arc::make_mut(&mut view.services[0]);
    let nodes: Vec<_> = svc.endpoints.iter().map(|e| e.node.as_deref()).collect();
    let on_n1 = nodes == [Some("n1")];
    svc.endpoints = [endpoint(if on_n1 { "n2" } else { "n1" })]
        .into_iter()
        .collect();
}

fn decisions(c: &mut Criterion) {
    let mut group = c.benchmark_group("one service changed");
    group.sample_size(10);
    for n in [1_000, 10_000, 50_000] {
        let mut v = view(n);
        group.bench_function(BenchmarkId::new("whole plans", n), |b| {
            b.iter(|| {
                flip(&mut v);
                black_box((bgp_plan(&v), l2_plan(&v)))
            });
        });
        let mut keyed = Keyed::new();
        keyed.update(&v, true);
        group.bench_function(BenchmarkId::new("keyed", n), |b| {
            b.iter(|| {
                flip(&mut v);
                let changes = keyed.update(&v, true);
                assert_eq!(changes.decided, 1);
                black_box(changes)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
