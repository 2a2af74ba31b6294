//! Issue 18 §1: the live heap the speaker holds per Service at 10,000 and
//! 50,000 Services, in-process, no apiserver. The objects have the shapes
//! of `ferrolb-loadgen fill` (20 pools, 50 namespaces, 5,000 Nodes with
//! five labels, four conditions and two addresses; per Service one or two
//! ingress IPs, the loadgen's two labels, MetalLB's pool annotation and the
//! controller's, a sharing key for one in ten; one to three EndpointSlices
//! of one to four endpoints on random nodes), written as the apiserver
//! sends them (JSON, with fields the speaker skips), read into the watched
//! types, turned into records as each arrives and kept in the speaker's
//! caches ([`store`], as a first list); then the snapshot's lists,
//! the view ([`Converted::view`]) and the keyed decisions, as the
//! reconcile loop builds them (the keyed decisions without layer 2,
//! whose election at 5,000 nodes is a cost of time, not of what is kept),
//! split by part; and what the run loop builds from them: the desired
//! Adj-RIB-Out of one BGP session, the status writer's report.
//!
//! The configuration is the live benchmark's (`bench/src/lib.rs`): no
//! advertisement has `serviceSelectors`, so the Services' records keep no
//! label, as the Kubernetes source keeps them ([`selected::only`] with the
//! model's [`Model::service_label_keys`]).
//!
//! glibc's live heap (`mallinfo2`, the `ferrolb_heap_live_bytes` gauge) is
//! read after each step; the figures are the differences. Then what one
//! list of the Services again costs (a configuration that names a new
//! label key, `app.kubernetes.io/name`): the time to read the Services
//! into records and swap them in, and the view and decisions made again
//! over them; and the heap the new records take while the old list is
//! still held. One command:
//!
//! ```sh
//! cargo test -p speaker --lib heap_per_service -- --ignored --nocapture
//! ```

use std::sync::Arc;

use api::validate::{Config, config};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;
use crate::announce::Keyed;
use crate::announce::k8s::Converted;
use crate::announce::watched::SERVICE_NAME_LABEL;
use crate::net::heap::live_bytes;
use crate::source::Shared;

const NODES: u32 = 5_000;
const POOLS: u32 = 20;
const NAMESPACES: u32 = 50;

fn node(i: u32) -> Value {
    let name = format!("node-{i:05}");
    json!({"metadata": {"name": name, "uid": format!("00000000-0000-0000-0000-{i:012}"),
        "resourceVersion": "123456", "creationTimestamp": "2026-11-29T00:00:00Z",
        "labels": {"ferrolb-loadgen": "fill", "kubernetes.io/hostname": name,
                   "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
                   "node-role.kubernetes.io/worker": ""}},
        "status": {"addresses": [{"type": "InternalIP", "address": format!("172.16.{}.{}", i / 256, i % 256)},
                                 {"type": "Hostname", "address": name}],
                   "conditions": [
                       {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                       {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                       {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                       {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}]}})
}

fn namespace(i: u32) -> String {
    format!("lg-{}", (i / 2) % NAMESPACES)
}

fn service(i: u32) -> Value {
    let pair = i / 2;
    let shared = (pair * 37) % 100 < 10;
    let key = if shared { pair * 2 } else { i };
    let pool = format!("pool-{}", key % POOLS);
    let name = format!("svc-{i:06}");
    let mut annotations = json!({"metallb.io/address-pool": pool,
        "metallb.io/ip-allocated-from-pool": pool});
    if shared {
        annotations["metallb.io/allow-shared-ip"] = json!(format!("share-{pair}"));
    }
    let app = if shared {
        format!("shared-{pair}")
    } else {
        name.clone()
    };
    let mut ingress = vec![
        json!({"ip": format!("10.{}.{}.{}", 100 + key % POOLS, (i / 256) % 256, i % 256), "ipMode": "VIP"}),
    ];
    if (key * 71) % 100 < 10 {
        ingress.push(json!({"ip": format!("fd00:10:{:x}::{:x}", key % POOLS, i), "ipMode": "VIP"}));
    }
    let local = !shared && (i * 53) % 100 < 30;
    json!({"metadata": {"name": name, "namespace": namespace(i),
        "uid": format!("10000000-0000-0000-0000-{i:012}"), "resourceVersion": format!("{}", 200_000 + i),
        "labels": {"ferrolb-loadgen": "fill", "app.kubernetes.io/name": app},
        "annotations": annotations},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": if local { "Local" } else { "Cluster" },
                 "ports": [{"name": "web", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                 "selector": {"app": app}},
        "status": {"loadBalancer": {"ingress": ingress}}})
}

fn slice(i: u32, k: u32, rng: &mut SmallRng) -> Value {
    let service = format!("svc-{i:06}");
    let endpoints: Vec<Value> = (0..rng.random_range(1..=4))
        .map(|_| {
            json!({"addresses": [format!("10.244.{}.{}", rng.random_range(0..256), rng.random_range(0..256))],
                   "conditions": {"ready": true, "serving": true, "terminating": false},
                   "nodeName": format!("node-{:05}", rng.random_range(0..NODES))})
        })
        .collect();
    json!({"metadata": {"name": format!("{service}-{k}"), "namespace": namespace(i),
        "uid": format!("20000000-0000-0000-{k:04}-{i:012}"), "resourceVersion": format!("{}", 300_000 + i),
        "labels": {"ferrolb-loadgen": "fill", SERVICE_NAME_LABEL: service,
                   "endpointslice.kubernetes.io/managed-by": "ferrolb-loadgen"}},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": [{"name": "web", "port": 8080, "protocol": "TCP"}]})
}

/// The objects read from `values` one by one as a watch's first list
/// reads them, each turned into its record as it arrives, in a cache.
fn stored<W, T>(
    values: impl Iterator<Item = Value>,
    mut record: impl FnMut(W) -> T,
) -> store::Store<T>
where
    W: DeserializeOwned,
    T: Record + PartialEq,
{
    let (store, mut writer) = store::store();
    writer.apply(watcher::Event::Init);
    for v in values {
        let o: W = serde_json::from_value(v).unwrap();
        writer.apply(watcher::Event::InitApply(record(o)));
    }
    writer.apply(watcher::Event::InitDone);
    store
}

/// The fill's EndpointSlices of `services` Services (one to three each),
/// stored as the watch stores them, sharing the Services' `interner`.
fn stored_slices(
    services: u32,
    rng: &mut SmallRng,
    interner: &mut Interner,
) -> store::Store<stored::EndpointSlice> {
    stored(
        (0..services).flat_map(|i| {
            let count = rng.random_range(1..=3);
            (0..count).map(|k| slice(i, k, rng)).collect::<Vec<_>>()
        }),
        |e| stored::EndpointSlice::from_watched(e, interner),
    )
}

/// The live benchmark's configuration: no `serviceSelectors`.
fn model() -> Arc<Model> {
    model_with("")
}

/// The same, its BGPAdvertisement's spec `spec` (YAML flow mapping
/// entries, or empty).
fn model_with(spec: &str) -> Arc<Model> {
    let mut y = String::new();
    for p in 0..POOLS {
        y.push_str(&format!(
            "---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: pool-{p}, namespace: metallb-system}}\nspec: {{addresses: [10.{}.0.0/16, 'fd00:10:{p:x}::/112']}}\n",
            100 + p
        ));
    }
    y.push_str("---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: bgp, namespace: metallb-system}\n");
    if !spec.is_empty() {
        y.push_str(&format!("spec: {{{spec}}}\n"));
    }
    y.push_str("---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\n");
    y.push_str("---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: r1, namespace: metallb-system}\nspec: {myASN: 64512, peerASN: 64500, peerAddress: 192.168.0.1}\n");
    let (model, problems) = config(&Config::from_yaml(&y).unwrap());
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(model)
}

fn heap() -> i64 {
    i64::try_from(live_bytes().expect("glibc's mallinfo2")).unwrap()
}

/// The stages [`measure`] reports, in order; those after `keyed plans`
/// split it (`Keyed::drop_parts`), and `total` leaves them out.
const STAGES: [&str; 12] = [
    "store: Nodes",
    "store: Services",
    "store: EndpointSlices",
    "snapshot lists",
    "view",
    "keyed plans",
    "Adj-RIB-Out, desired (one peer)",
    "status report",
    "keyed: announcements",
    "keyed: routes by peer and prefix",
    "keyed: services' entries",
    "keyed: the rest",
];

/// How many of [`STAGES`] add up to the total.
const SUMMED: usize = 8;

/// Live heap in bytes after each step, as differences, in the order of
/// [`STAGES`]; and how many EndpointSlices and endpoints were kept.
#[allow(clippy::type_complexity)]
fn measure(services: u32) -> (Vec<i64>, (usize, usize), (i64, (usize, usize, usize))) {
    let model = model();
    let start = heap();
    let mut rng = SmallRng::seed_from_u64(18);
    let mut interner = Interner::default();
    let nodes = stored((0..NODES).map(node), |n| {
        stored::Node::from_watched(n, &mut interner)
    });
    let after_nodes = heap();
    let mut interner = Interner::default();
    let keys = model.service_label_keys();
    let svcs = stored((0..services).map(service), |mut s: Service| {
        s.labels = selected::only(&s.labels, &keys);
        stored::Service::from_watched(s, &mut interner)
    });
    let after_services = heap();
    // As the watches do: the slices share the Services' interner.
    let slices = stored_slices(services, &mut rng, &mut interner);
    let after_stores = heap();
    let nl = nodes.list();
    let sv = svcs.list();
    let sl = slices.list();
    let counts = (sl.len(), sl.iter().map(|e| e.endpoints().count()).sum());
    let secrets: Shared<Secret> = Arc::default();
    let after_lists = heap();
    let mut converted = Converted::default();
    let (view, problems) = converted.view("node-00000", model, &nl, &sv, &sl, &secrets);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(view.services.len(), usize::try_from(services).unwrap());
    let after_view = heap();
    let mut keyed = Keyed::new();
    // BGP only: the layer 2 election of each Service hashes every one of
    // the 5,000 nodes (what the live benchmark measures, not this one).
    let changes = keyed.update(&view, false);
    assert_eq!(changes.decided, usize::try_from(services).unwrap());
    drop(changes);
    // Its announcements as the run loop reads them (the update's changes
    // applied).
    assert!(!keyed.announcements().is_empty());
    let after_keyed = heap();
    // What the BGP driver's session keeps of one peer's routes: the
    // desired table the run loop gives a new session (`Keyed::routes`).
    // The sent table, as large once the routes are out, is filled by the
    // session's flush alone (the live benchmark has it).
    let mut rib = bgp::session::AdjRibOut::default();
    rib.set(keyed.routes("r1"));
    assert_eq!(rib.desired().len(), keyed.route_count("r1"));
    assert!(!rib.desired().is_empty());
    let after_rib = heap();
    // The status writer's report, as the run loop hands it over.
    let report = crate::publish::Report {
        announcements: Some(Arc::clone(keyed.announcements())),
        ..crate::publish::Report::default()
    };
    let after_report = heap();
    drop(report);
    let mut parts = Vec::new();
    let mut before = heap();
    keyed.drop_parts(&mut |_part| {
        let now = heap();
        parts.push(before - now);
        before = now;
    });
    // The Services' and slices' interner's tables alone (the strings,
    // sets and endpoints they point to are the records' too): what
    // dropping it frees while the records live.
    let tables = interner.len();
    let before_interner = heap();
    drop(interner);
    let interner_bytes = before_interner - heap();
    drop((rib, view, converted, nl, sv, sl, nodes, svcs, slices));
    let mut out = vec![
        after_nodes - start,
        after_services - after_nodes,
        after_stores - after_services,
        after_lists - after_stores,
        after_view - after_lists,
        after_keyed - after_view,
        after_rib - after_keyed,
        after_report - after_rib,
    ];
    out.extend(parts);
    assert_eq!(out.len(), STAGES.len());
    (out, counts, (interner_bytes, tables))
}

/// One list of the Services again at `services`, as a configuration that
/// names a new label key makes the Kubernetes source read it (the
/// BGPAdvertisement selects the Services with `app.kubernetes.io/name`,
/// `Exists`: every one still): the time to read the Services (JSON bytes
/// as the apiserver sends them) into records with the new keys and swap
/// them into the cache; the time to make the view and the keyed decisions
/// again over them (every Service is a new record); and the live heap the
/// new records take while the old list is still held by the view (the
/// peak of a list again, over the steady state).
fn relist(services: u32) -> (Duration, Duration, i64) {
    use std::time::Instant;
    let model = model();
    let mut rng = SmallRng::seed_from_u64(18);
    let mut interner = Interner::default();
    let nodes = stored((0..NODES).map(node), |n| {
        stored::Node::from_watched(n, &mut interner)
    });
    let values: Vec<Vec<u8>> = (0..services)
        .map(|i| serde_json::to_vec(&service(i)).unwrap())
        .collect();
    let read = |writer: &mut store::Writer<stored::Service>,
                keys: &BTreeSet<String>,
                interner: &mut Interner| {
        writer.apply(watcher::Event::Init);
        for v in &values {
            let mut s: Service = serde_json::from_slice(v).unwrap();
            s.labels = selected::only(&s.labels, keys);
            let record = stored::Service::from_watched(s, interner);
            writer.apply(watcher::Event::InitApply(record));
        }
        writer.apply(watcher::Event::InitDone);
    };
    let mut interner = Interner::default();
    let (svcs, mut writer) = store::store();
    read(&mut writer, &model.service_label_keys(), &mut interner);
    let slices = stored_slices(services, &mut rng, &mut interner);
    let (nl, sl, sv) = (nodes.list(), slices.list(), svcs.list());
    let secrets: Shared<Secret> = Arc::default();
    let mut converted = Converted::default();
    let (view, _) = converted.view("node-00000", model, &nl, &sv, &sl, &secrets);
    let mut keyed = Keyed::new();
    drop(keyed.update(&view, false));
    let named = model_with(
        "serviceSelectors: [{matchExpressions: [{key: app.kubernetes.io/name, operator: Exists}]}]",
    );
    let before = heap();
    let t = Instant::now();
    read(&mut writer, &named.service_label_keys(), &mut interner);
    let again = svcs.list();
    let listed = t.elapsed();
    let bytes = heap() - before;
    let t = Instant::now();
    let (view_again, problems) = converted.view("node-00000", named, &nl, &again, &sl, &secrets);
    assert!(problems.is_empty(), "{problems:?}");
    let changes = keyed.update(&view_again, false);
    let decided = t.elapsed();
    assert_eq!(changes.decided, usize::try_from(services).unwrap());
    assert!(again.iter().all(|s| s.labels.len() == 1));
    drop((changes, view, sv));
    (listed, decided, bytes)
}

/// The inline sizes behind the figures: each stored record is one
/// allocation of its type (in an `Arc`, 16 bytes more), but an
/// EndpointSlice, a thin pointer to one allocation of a count, its header,
/// and its endpoints at the end, each a pointer (stored Endpoint) to an
/// interned watched one, shared; the watched objects, with their
/// `ObjectMeta`, live only while each is turned into its record.
fn inline_sizes() -> String {
    use std::mem::size_of;
    format!(
        "inline bytes: ObjectMeta {}, stored Service {} (its ingress {}), EndpointSlice {}, Node {}, Endpoint {} (shared: {}); view Service {}, Node {}",
        size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(),
        size_of::<stored::Service>(),
        size_of::<stored::Ingress>(),
        size_of::<stored::EndpointSlice>(),
        size_of::<stored::Node>(),
        size_of::<stored::Endpoint>(),
        size_of::<crate::announce::Endpoint>(),
        size_of::<crate::announce::Service>(),
        size_of::<crate::announce::Node>(),
    )
}

#[test]
#[ignore = "a benchmark: cargo test -p speaker --lib heap_per_service -- --ignored --nocapture"]
fn heap_per_service() {
    println!(
        "| Services | {} | total | per Service |",
        STAGES.join(" | ")
    );
    println!("{}", inline_sizes());
    let sizes: Vec<u32> = std::env::var("HEAP_SERVICES")
        .unwrap_or_else(|_| "10000,50000".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("HEAP_SERVICES: numbers, comma-separated")
        })
        .collect();
    let mut slices = Vec::new();
    let sizes_again = sizes.clone();
    for services in sizes {
        let (parts, (count, endpoints), (tables, (sets, strings, shared))) = measure(services);
        slices.push(format!(
            "{services}: {count} EndpointSlices, {endpoints} endpoints, {:.0} bytes per slice; \
             the Services' and slices' interner's tables {tables} bytes ({:.1} per Service: \
             {strings} strings, {shared} endpoints, {sets} sets)",
            parts[2] as f64 / count as f64,
            tables as f64 / f64::from(services)
        ));
        let total: i64 = parts[..SUMMED].iter().sum();
        let mib = |b: &i64| format!("{:.1} MiB", *b as f64 / 1_048_576.0);
        println!(
            "| {services} | {} | {} | {:.2} KiB |",
            parts.iter().map(mib).collect::<Vec<_>>().join(" | "),
            mib(&total),
            total as f64 / 1024.0 / f64::from(services)
        );
    }
    println!("{}", slices.join("; "));
    for services in sizes_again {
        let (listed, decided, bytes) = relist(services);
        println!(
            "listing {services} Services again for a new label key: read and swapped in {listed:.2?}, view and decisions again {decided:.2?}, {:.1} MiB of new records while the old are held",
            bytes as f64 / 1_048_576.0
        );
    }
}

#[cfg(test)]
mod metrics_announced;
