//! The speaker's cost of one EndpointSlice change at 1,000, 10,000 and
//! 50,000 Services, from the source's cache to the keyed decisions, with no
//! apiserver (issue 18 §1): what `run.rs` logs as the snapshot's
//! `built_us`, then `view_us` and `keyed_us`.
//!
//! The cluster: 5,000 Nodes (labels, two conditions, an InternalIP), the
//! Services of type LoadBalancer in 50 namespaces (every other one ETP
//! Local), each with one IP of a 10.0.0.0/8 pool and one to three
//! EndpointSlices of one to three endpoints on random nodes (seeded), 4 BGP
//! peers, one BGPAdvertisement and one L2Advertisement; the speaker is
//! `node-0`, memberlist off. The EndpointSlices sit in the speaker's own
//! cache (`source::store`), as the Kubernetes source keeps them.
//!
//! Each iteration moves the only endpoint of one ETP Local Service's first
//! slice between `node-0` and `node-1` (so its routes change every time)
//! and runs the three steps the speaker runs after that event:
//! - `snapshot`: the event applied to the cache and the last list of
//!   slices patched with the changed key (`Store::list`, what the
//!   snapshot task does after an EndpointSlice event);
//! - `view`: `Converted::view` over the snapshot, as the reconcile builds
//!   its `ClusterView`;
//! - `keyed`: `Keyed::update` of that view.
//!
//! Each step is its own figure (`iter_custom` times that step alone while
//! every iteration runs all three), and `change` is their sum.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::validate::{Config, config};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use speaker::announce::k8s::Converted;
use speaker::announce::stored;
use speaker::announce::watched::{EndpointSlice, Labels, Node, Service};
use speaker::announce::{Endpoint, Keyed, TrafficPolicy};
use speaker::source::store::{self, Store, Writer};

const NODES: usize = 5_000;
const THIS_NODE: &str = "node-0";

fn meta(namespace: Option<String>, name: String) -> ObjectMeta {
    ObjectMeta {
        namespace,
        name: Some(name),
        ..ObjectMeta::default()
    }
}

fn node(i: usize) -> Node {
    Node {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_owned(), format!("node-{i}")),
                (
                    "topology.kubernetes.io/zone".to_owned(),
                    format!("z{}", i % 3),
                ),
                ("node-role.kubernetes.io/worker".to_owned(), String::new()),
            ])),
            ..meta(None, format!("node-{i}"))
        },
        conditions: vec![
            ("Ready".into(), "True".into()),
            ("NetworkUnavailable".into(), "False".into()),
        ],
        addresses: vec![(
            "InternalIP".into(),
            Ipv4Addr::from(0xac10_0000 + u32::try_from(i).unwrap()).to_string(),
        )],
    }
}

fn namespace(i: usize) -> String {
    format!("ns-{}", i % 50)
}

fn service(i: usize) -> Service {
    Service {
        metadata: meta(Some(namespace(i)), format!("svc-{i}")),
        labels: Labels::default(),
        annotations: [("metallb.io/ip-allocated-from-pool", "pool")]
            .into_iter()
            .collect(),
        load_balancer: true,
        load_balancer_class: None,
        external_traffic_policy: if i.is_multiple_of(2) {
            TrafficPolicy::Local
        } else {
            TrafficPolicy::Cluster
        },
        ingress: vec![Some(
            Ipv4Addr::from(0x0a00_0000 + u32::try_from(i).unwrap()).to_string(),
        )],
    }
}

fn endpoint(node: String) -> Endpoint {
    Endpoint {
        node: Some(node.into()),
        has_address: true,
        ready: Some(true),
        serving: Some(true),
        terminating: Some(false),
    }
}

fn slice(i: usize, k: usize, nodes: impl IntoIterator<Item = String>) -> EndpointSlice {
    EndpointSlice {
        metadata: meta(Some(namespace(i)), format!("svc-{i}-{k}")),
        service: Some(format!("svc-{i}")),
        endpoints: nodes.into_iter().map(endpoint).collect(),
    }
}

/// The speaker's state at one size.
struct World {
    writer: Writer<stored::EndpointSlice>,
    store: Store<stored::EndpointSlice>,
    model: Arc<api::model::Model>,
    nodes: Arc<[Arc<stored::Node>]>,
    services: Arc<[Arc<stored::Service>]>,
    slices: Arc<[stored::EndpointSlice]>,
    secrets: Arc<[Arc<Secret>]>,
    converted: Converted,
    keyed: Keyed,
    /// The ETP Local Service whose endpoint moves.
    moving: usize,
    on_this_node: bool,
}

impl World {
    fn new(services: usize) -> Self {
        let (model, problems) =
            config(&Config::from_yaml(&ferrolb_bench::speaker_config_yaml("10.0.0.0/8")).unwrap());
        assert!(problems.is_empty(), "{problems:?}");
        let mut rng = SmallRng::seed_from_u64(18);
        let (store, mut writer) = store::store();
        writer.apply(watcher::Event::Init);
        for i in 0..services {
            for k in 0..rng.random_range(1..=3) {
                let eps: Vec<String> = (0..rng.random_range(1..=3))
                    .map(|_| format!("node-{}", rng.random_range(0..NODES)))
                    .collect();
                writer.apply(watcher::Event::InitApply(slice(i, k, eps).into()));
            }
        }
        writer.apply(watcher::Event::InitDone);
        let mut world = Self {
            store,
            writer,
            model: Arc::new(model),
            nodes: (0..NODES).map(|i| Arc::new(node(i).into())).collect(),
            services: (0..services).map(|i| Arc::new(service(i).into())).collect(),
            slices: Arc::default(),
            secrets: Arc::default(),
            converted: Converted::default(),
            keyed: Keyed::new(),
            moving: services / 2 / 2 * 2,
            on_this_node: false,
        };
        world.slices = world.store.list();
        world.decide();
        world
    }

    /// The view and the keyed decisions, returning how many services were
    /// decided and the time of each step.
    fn decide(&mut self) -> (usize, [Duration; 2]) {
        let start = Instant::now();
        let (mut view, problems) = self.converted.view(
            THIS_NODE,
            Arc::clone(&self.model),
            &self.nodes,
            &self.services,
            &self.slices,
            &self.secrets,
        );
        assert!(problems.is_empty(), "{problems:?}");
        view.members = None;
        let viewed = Instant::now();
        let changes = self.keyed.update(&view, true);
        let decided = Instant::now();
        black_box(&changes);
        drop(view);
        (changes.decided, [viewed - start, decided - viewed])
    }

    /// One EndpointSlice change and what the speaker does after it: the
    /// time of the snapshot, the view and the keyed decisions.
    fn change(&mut self) -> [Duration; 3] {
        self.on_this_node = !self.on_this_node;
        let to = if self.on_this_node {
            "node-0"
        } else {
            "node-1"
        };
        let start = Instant::now();
        let moved = slice(self.moving, 0, [to.to_owned()]);
        self.writer.apply(watcher::Event::Apply(moved.into()));
        self.slices = self.store.list();
        let listed = start.elapsed();
        let (decided, [view, keyed]) = self.decide();
        assert_eq!(decided, 1);
        [listed, view, keyed]
    }
}

fn view_change(c: &mut Criterion) {
    let mut group = c.benchmark_group("one EndpointSlice changed");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for n in [1_000, 10_000, 50_000] {
        let mut world = World::new(n);
        for (step, name) in ["snapshot", "view", "keyed"].into_iter().enumerate() {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| world.change()[step]).sum());
            });
        }
        group.bench_function(BenchmarkId::new("change", n), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| world.change().into_iter().sum::<Duration>())
                    .sum()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, view_change);
criterion_main!(benches);
