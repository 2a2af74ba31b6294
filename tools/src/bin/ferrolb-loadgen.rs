//! `ferrolb-loadgen`: fills a Kubernetes apiserver (testenv's) with a large
//! cluster's objects and measures a controller against it (issue 18 §1).
//!
//! `fill` creates the IPAddressPools, Nodes, LoadBalancer Services and their
//! EndpointSlices with many requests in flight; `cold-start` runs a
//! controller command and times it until every filled Service has an
//! address (then restarts it and checks the addresses stay); `floor` writes
//! the same statuses itself (the apiserver's floor); `churn` creates and
//! deletes Services, moves endpoints and flips node conditions at given
//! rates and reports create-to-status latency. `--help` on each explains
//! its flags. BENCHMARKS.md's controller section has the figures.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{
    Namespace, Node, NodeAddress, NodeCondition, NodeStatus, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// The label on every object `fill` and `churn` make (value: which made it).
const LABEL: &str = "ferrolb-loadgen";
/// The pool annotation the controller writes (MetalLB's).
const POOL_ANNOTATION: &str = "metallb.io/ip-allocated-from-pool";

/// Fills an apiserver with a large cluster and measures a controller on it.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the CRDs, pools, nodes, services and endpoint slices; print
    /// the fill rate per kind as JSON.
    Fill(FillArgs),
    /// Start a controller (the command after `--`) and time it until every
    /// filled Service has `status.loadBalancer.ingress`; count the
    /// apiserver's requests meanwhile; optionally restart it and check that
    /// no address changes. Prints JSON.
    ColdStart(ColdStartArgs),
    /// The apiserver's floor: write every filled Service's pool annotation
    /// and ingress with one merge PATCH to `/status` each (addresses drawn
    /// in order from its pool, no allocator), and time it. Prints JSON.
    Floor(FloorArgs),
    /// Churn: create and delete Services, move endpoints and flip node
    /// conditions at the given rates while a controller runs; report
    /// create-to-status latency of the created Services. Prints JSON.
    Churn(ChurnArgs),
    /// The apiserver's cost of speakers' watches: start N clients that
    /// each make one speaker's list and watch calls (`--set`: ferrolb's or
    /// MetalLB v0.16.2's), wait until all have listed, then churn (the
    /// `churn` flags) and read the apiserver's CPU and RSS from /proc and
    /// the octets each client received. Prints JSON.
    Watchers(WatchersArgs),
}

#[derive(Debug, Clone, Args)]
struct Shape {
    /// IPAddressPools (`pool-0`..), each an IPv4 /16 and an IPv6 /112.
    #[arg(long, default_value_t = 20)]
    pools: u32,
    /// Namespace of the IPAddressPools.
    #[arg(long, default_value = "metallb-system")]
    pool_namespace: String,
    /// Namespaces the Services are spread over (`lg-0`..).
    #[arg(long, default_value_t = 50)]
    namespaces: u32,
    /// Nodes (`node-00000`..).
    #[arg(long, default_value_t = 5_000)]
    nodes: u32,
}

#[derive(Debug, Args)]
struct FillArgs {
    #[command(flatten)]
    shape: Shape,
    /// LoadBalancer Services (`svc-000000`..), each in pool i mod --pools.
    #[arg(long, default_value_t = 50_000)]
    services: u32,
    /// Percent of Services with externalTrafficPolicy Local (others Cluster).
    #[arg(long, default_value_t = 30)]
    local_percent: u32,
    /// At most this many ETP Local Services (the first ones; the rest are
    /// Cluster): each takes a health-check node port, and the apiserver's
    /// default --service-node-port-range, 30000-32767, has 2,768.
    #[arg(long, default_value_t = 2_700)]
    max_local: u32,
    /// Percent of Services that are dual-stack (RequireDualStack; the
    /// apiserver needs both families of service CIDRs:
    /// FERROLB_TESTENV_SERVICE_CIDRS=10.96.0.0/16,fd00:96::/112).
    #[arg(long, default_value_t = 10)]
    dual_stack_percent: u32,
    /// Percent of Services that share an address with their neighbour
    /// (pairs with one `metallb.io/allow-shared-ip` key, different ports).
    #[arg(long, default_value_t = 10)]
    shared_percent: u32,
    /// EndpointSlices per Service: 1 to this many (0: none).
    #[arg(long, default_value_t = 3)]
    max_slices: u32,
    /// Requests in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Seed of the random choices (node of each endpoint, slice count).
    #[arg(long, default_value_t = 18)]
    seed: u64,
    /// Create only Services (and their slices) from this index on: grows
    /// a cluster filled before with the same seed to --services.
    #[arg(long, default_value_t = 0)]
    from: u32,
    /// Create no Services, only the EndpointSlices (of --from..--services):
    /// finishes a fill that was stopped while it created Services.
    #[arg(long)]
    slices_only: bool,
}

#[derive(Debug, Args)]
struct ColdStartArgs {
    /// Services that must get an address (what `fill` made).
    #[arg(long)]
    services: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1_800)]
    timeout: u64,
    /// Once all are assigned, stop the controller (SIGTERM), start it
    /// again, and watch this many seconds for any address change.
    #[arg(long)]
    restart_settle: Option<u64>,
    /// Leave the controller running after the measurement (default: stop
    /// it with SIGTERM and wait for it).
    #[arg(long)]
    keep: bool,
    /// The controller command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct FloorArgs {
    #[command(flatten)]
    shape: Shape,
    /// Requests in flight (the controller's default --concurrency is 16).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Leave alone the Services that already have an address (a cluster
    /// grown after an earlier floor).
    #[arg(long)]
    skip_assigned: bool,
    /// Undo a floor instead: one merge PATCH per Service to `/status`
    /// removes its ingress and the pool annotation, so the Services are
    /// pending again as the fill made them and a controller's cold start
    /// can run on the same fill (at 50,000 a second fill takes over an
    /// hour). The same request count and shape as the floor, so its rate
    /// is a second floor figure.
    #[arg(long, conflicts_with = "skip_assigned")]
    clear: bool,
}

#[derive(Debug, Clone, Args)]
struct ChurnArgs {
    #[command(flatten)]
    shape: Shape,
    /// Services created per second (each deleted again --lifetime later).
    #[arg(long, default_value_t = 100.0)]
    services_per_second: f64,
    /// Percent of the created Services with externalTrafficPolicy Local
    /// (each takes a health-check node port while it lives).
    #[arg(long, default_value_t = 30)]
    local_percent: u32,
    /// Seconds a churned Service lives before it is deleted.
    #[arg(long, default_value_t = 10)]
    lifetime: u64,
    /// Endpoint moves per second (a random filled slice's endpoints to
    /// other random nodes).
    #[arg(long, default_value_t = 50.0)]
    endpoint_moves_per_second: f64,
    /// Node Ready condition flips per second.
    #[arg(long, default_value_t = 5.0)]
    node_flips_per_second: f64,
    /// Seconds of churn.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Services `fill` made (the population endpoint moves pick from).
    #[arg(long, default_value_t = 50_000)]
    services: u32,
    /// Seed of the random choices. A run with the seed of an earlier run
    /// writes the same endpoints again: no-op patches, no watch events.
    #[arg(long, default_value_t = 19)]
    seed: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferrolb-loadgen: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(report) => {
            println!("{report:#}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ferrolb-loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn run(cli: Cli) -> Result<serde_json::Value, Error> {
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer().await?,
    };
    let client = Client::try_from(config.clone())?;
    match cli.command {
        Command::Fill(a) => fill(client, a).await,
        Command::ColdStart(a) => cold_start(client, a).await,
        Command::Floor(a) => floor(client, a).await,
        Command::Churn(a) => churn(client, a).await,
        Command::Watchers(a) => watchers(client, config, a).await,
    }
}

// ---- fill -------------------------------------------------------------------

async fn fill(client: Client, a: FillArgs) -> Result<serde_json::Value, Error> {
    let started = Instant::now();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let apply = PatchParams::apply(LABEL).force();
    for crd in api::crd::crds() {
        crds.patch(&crd.name_any(), &apply, &Patch::Apply(&crd))
            .await?;
    }
    wait_established(&crds).await?;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut names: Vec<String> = (0..a.shape.namespaces).map(ns_name).collect();
    names.push(a.shape.pool_namespace.clone());
    for name in names {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(BTreeMap::from([(LABEL.into(), "fill".into())])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        create_or_exists(&namespaces, &ns).await?;
    }
    let pools =
        Api::<api::v1beta1::IPAddressPool>::namespaced(client.clone(), &a.shape.pool_namespace);
    for p in 0..a.shape.pools {
        let pool: api::v1beta1::IPAddressPool = serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "IPAddressPool",
            "metadata": {"name": pool_name(p), "namespace": a.shape.pool_namespace},
            "spec": {"addresses": pool_ranges(p), "autoAssign": false},
        }))?;
        create_or_exists(&pools, &pool).await?;
    }

    let mut report = serde_json::Map::new();
    let nodes: Api<Node> = Api::all(client.clone());
    let t = Instant::now();
    // Growing a filled cluster: its Nodes are there.
    let n = if a.from > 0 { 0 } else { a.shape.nodes };
    for_all(0..n, a.concurrency, |i| {
        let nodes = nodes.clone();
        async move { create_or_exists(&nodes, &node(i)).await }
    })
    .await?;
    report.insert("nodes".into(), rate(u64::from(n), t.elapsed()));

    let t = Instant::now();
    let shape = a.shape.clone();
    let (local, dual, shared) = (a.local_percent, a.dual_stack_percent, a.shared_percent);
    // Which Services are Local: the first --max-local of those drawn so.
    let mut locals = 0;
    let is_local: Vec<bool> = (0..a.services)
        .map(|i| {
            let l = etp_local(i, local, shared) && locals < a.max_local;
            locals += u32::from(l);
            l
        })
        .collect();
    report.insert("local_services".into(), json!(locals));
    let create_from = if a.slices_only { a.services } else { a.from };
    for_all(create_from..a.services, a.concurrency, |i| {
        let api: Api<Service> = Api::namespaced(client.clone(), &svc_namespace(&shape, i));
        let local = if is_local[i as usize] { local } else { 0 };
        let svc = service(&shape, i, local, dual, shared, "fill");
        async move { create_or_exists(&api, &svc).await }
    })
    .await?;
    report.insert(
        "services".into(),
        rate(
            u64::from(a.services.saturating_sub(create_from)),
            t.elapsed(),
        ),
    );

    let t = Instant::now();
    let slices = Arc::new(AtomicU64::new(0));
    if a.max_slices > 0 {
        let mut rng = SmallRng::seed_from_u64(a.seed);
        let plan: Vec<(u32, u32, u64)> = (0..a.services)
            .flat_map(|i| {
                let count = rng.random_range(1..=a.max_slices);
                (0..count)
                    .map(|k| (i, k, rng.random::<u64>()))
                    .collect::<Vec<_>>()
            })
            // The same draws as a fill from 0, so that a grown cluster is
            // the one a single fill would have made.
            .filter(|(i, ..)| *i >= a.from)
            .collect();
        let shape = a.shape.clone();
        let slices = slices.clone();
        for_all(plan, a.concurrency, move |(i, k, seed)| {
            let api: Api<EndpointSlice> =
                Api::namespaced(client.clone(), &svc_namespace(&shape, i));
            let slice = endpoint_slice(&shape, &svc_name(i), k, seed);
            let slices = slices.clone();
            async move {
                create_or_exists(&api, &slice).await?;
                slices.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        })
        .await?;
    }
    report.insert(
        "endpointslices".into(),
        rate(slices.load(Ordering::Relaxed), t.elapsed()),
    );
    report.insert(
        "total_seconds".into(),
        json!(started.elapsed().as_secs_f64()),
    );
    Ok(report.into())
}

async fn wait_established(crds: &Api<CustomResourceDefinition>) -> Result<(), Error> {
    for _ in 0..600 {
        let list = crds.list(&ListParams::default()).await?;
        let pending = list.items.iter().any(|c| {
            !c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                })
        });
        if !pending {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("CRDs not Established within 60 s".into())
}

/// Runs `f` over `items` with `concurrency` in flight; the first error
/// stops it.
async fn for_all<I, F, Fut>(items: I, concurrency: usize, f: F) -> Result<(), Error>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    stream::iter(items)
        .map(f)
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

async fn create_or_exists<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn rate(count: u64, took: Duration) -> serde_json::Value {
    let s = took.as_secs_f64();
    json!({
        "count": count,
        "seconds": s,
        "per_second": if s > 0.0 { count as f64 / s } else { 0.0 },
    })
}

fn ns_name(i: u32) -> String {
    format!("lg-{i}")
}

fn pool_name(p: u32) -> String {
    format!("pool-{p}")
}

fn svc_name(i: u32) -> String {
    format!("svc-{i:06}")
}

fn node_name(i: u32) -> String {
    format!("node-{i:05}")
}

/// Pool p: `10.(100+p).0.0/16` and `fd00:10:<p>::/112`, so 65,536 of each.
fn pool_ranges(p: u32) -> Vec<String> {
    vec![
        format!("10.{}.0.0/16", 100 + p),
        format!("fd00:10:{p:x}::/112"),
    ]
}

/// Pairs (2j, 2j+1) share a namespace, so shared pairs are neighbours in it.
fn svc_namespace(shape: &Shape, i: u32) -> String {
    ns_name((i / 2) % shape.namespaces.max(1))
}

fn node(i: u32) -> Node {
    let ip = Ipv4Addr::from(0xac10_0000_u32 + i + 1); // 172.16.0.0/12
    Node {
        metadata: ObjectMeta {
            name: Some(node_name(i)),
            labels: Some(BTreeMap::from([
                (LABEL.into(), "fill".into()),
                ("kubernetes.io/hostname".into(), node_name(i)),
                ("kubernetes.io/os".into(), "linux".into()),
                (
                    "topology.kubernetes.io/zone".into(),
                    format!("zone-{}", i % 3),
                ),
                ("node-role.kubernetes.io/worker".into(), String::new()),
            ])),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip.to_string(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: node_name(i),
                },
            ]),
            conditions: Some(
                [
                    ("Ready", "True", "KubeletReady"),
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    ("NetworkUnavailable", "False", "RouteCreated"),
                ]
                .into_iter()
                .map(|(t, s, r)| NodeCondition {
                    type_: t.into(),
                    status: s.into(),
                    reason: Some(r.into()),
                    ..NodeCondition::default()
                })
                .collect(),
            ),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

/// Service i: in pool i mod pools; ETP Local for `local` percent,
/// dual-stack for `dual` percent, and for `shared` percent a pair sharing
/// one address (same key, pool and selector, ports 80 and 443).
fn service(shape: &Shape, i: u32, local: u32, dual: u32, shared: u32, made_by: &str) -> Service {
    let pair = i / 2;
    let is_shared = (pair * 37) % 100 < shared;
    // Both halves of a shared pair agree on pool, policy and family.
    let key = if is_shared { pair * 2 } else { i };
    let pool = pool_name(key % shape.pools.max(1));
    let is_local = etp_local(i, local, shared);
    let is_dual = (key * 71) % 100 < dual;
    let mut annotations = BTreeMap::from([("metallb.io/address-pool".to_owned(), pool)]);
    if is_shared {
        annotations.insert("metallb.io/allow-shared-ip".into(), format!("share-{pair}"));
    }
    let port = if is_shared && i % 2 == 1 { 443 } else { 80 };
    let selector_name = if is_shared {
        format!("shared-{pair}")
    } else {
        svc_name(i)
    };
    Service {
        metadata: ObjectMeta {
            name: Some(svc_name(i)),
            labels: Some(BTreeMap::from([
                (LABEL.into(), made_by.into()),
                ("app.kubernetes.io/name".into(), selector_name.clone()),
            ])),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            // 50,000 node ports do not exist (30000-32767).
            allocate_load_balancer_node_ports: Some(false),
            external_traffic_policy: Some(if is_local { "Local" } else { "Cluster" }.into()),
            ip_family_policy: Some(
                if is_dual {
                    "RequireDualStack"
                } else {
                    "SingleStack"
                }
                .into(),
            ),
            ip_families: Some(if is_dual {
                vec!["IPv4".into(), "IPv6".into()]
            } else {
                vec!["IPv4".into()]
            }),
            selector: Some(BTreeMap::from([("app".into(), selector_name)])),
            ports: Some(vec![ServicePort {
                name: Some("web".into()),
                port,
                protocol: Some("TCP".into()),
                target_port: Some(
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080),
                ),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Whether Service i is ETP Local with `local` percent of them so (never
/// one of a shared pair).
fn etp_local(i: u32, local: u32, shared: u32) -> bool {
    let is_shared = ((i / 2) * 37) % 100 < shared;
    !is_shared && (i * 53) % 100 < local
}

/// Slice k of a service: 1 to 4 endpoints on random nodes.
fn endpoint_slice(shape: &Shape, service: &str, k: u32, seed: u64) -> EndpointSlice {
    let mut rng = SmallRng::seed_from_u64(seed);
    let count = rng.random_range(1..=4);
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{service}-{k}")),
            labels: Some(BTreeMap::from([
                (LABEL.into(), "fill".into()),
                ("kubernetes.io/service-name".into(), service.into()),
                (
                    "endpointslice.kubernetes.io/managed-by".into(),
                    "ferrolb-loadgen".into(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(endpoints(shape, &mut rng, count)),
        ports: Some(vec![EndpointPort {
            name: Some("web".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..EndpointPort::default()
        }]),
    }
}

fn endpoints(shape: &Shape, rng: &mut SmallRng, count: u32) -> Vec<Endpoint> {
    (0..count)
        .map(|_| {
            let node = rng.random_range(0..shape.nodes.max(1));
            let ip = Ipv4Addr::from(0x0af4_0000_u32 | (rng.random::<u32>() & 0xffff));
            Endpoint {
                addresses: vec![ip.to_string()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    serving: Some(true),
                    terminating: Some(false),
                }),
                node_name: Some(node_name(node)),
                ..Endpoint::default()
            }
        })
        .collect()
}

// ---- cold start -------------------------------------------------------------

/// What a watch on the filled Services has seen.
#[derive(Default)]
struct Seen {
    /// Ingress addresses per Service (`ns/name`), as last seen.
    ips: HashMap<String, Vec<String>>,
    /// Modifications seen per Service after its first address.
    rewrites: HashMap<String, u32>,
    /// Address changes of a Service that already had one.
    changed: u64,
}

impl Seen {
    fn apply(&mut self, svc: &Service) {
        let key = format!("{}/{}", svc.namespace().unwrap_or_default(), svc.name_any());
        let ips = ingress(svc);
        match self.ips.get(&key) {
            Some(old) if !old.is_empty() => {
                *self.rewrites.entry(key.clone()).or_default() += 1;
                if *old != ips {
                    self.changed += 1;
                }
            }
            _ => {}
        }
        self.ips.insert(key, ips);
    }

    fn assigned(&self) -> usize {
        self.ips.values().filter(|v| !v.is_empty()).count()
    }
}

fn ingress(svc: &Service) -> Vec<String> {
    let mut v: Vec<String> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect();
    v.sort();
    v
}

async fn cold_start(client: Client, a: ColdStartArgs) -> Result<serde_json::Value, Error> {
    let api: Api<Service> = Api::all(client.clone());
    let stream = watcher::watcher(
        api,
        watcher::Config::default().labels(&format!("{LABEL}=fill")),
    );
    let mut stream = std::pin::pin!(stream);
    let mut seen = Seen::default();
    // The initial list, before the controller starts.
    while let Some(ev) = stream.try_next().await? {
        match ev {
            Event::InitApply(s) | Event::Apply(s) => seen.apply(&s),
            Event::InitDone => break,
            _ => {}
        }
    }
    let before_start = seen.assigned();
    let requests_before = request_counts(&client).await?;
    let started = Instant::now();
    let mut child = spawn(&a.command)?;
    let deadline = started + Duration::from_secs(a.timeout);
    let mut first_at = None;
    seen.rewrites.clear();
    while seen.assigned() < a.services {
        let ev = tokio::select! {
            ev = stream.try_next() => ev?,
            st = child.wait() => return Err(format!("controller exited: {:?}", st?).into()),
            () = tokio::time::sleep_until(deadline.into()) => {
                return Err(format!("{} of {} assigned after {} s", seen.assigned(), a.services, a.timeout).into())
            }
        };
        if let Some(Event::Apply(s)) = ev {
            seen.apply(&s);
            if first_at.is_none() && !ingress(&s).is_empty() {
                first_at = Some(started.elapsed());
            }
        }
    }
    let all_at = started.elapsed();
    // Writes that arrive after the last first address (a second write of
    // some Service) are counted over a short grace period.
    let grace = Instant::now() + Duration::from_secs(2);
    while let Ok(ev) = tokio::time::timeout_at(grace.into(), stream.try_next()).await {
        if let Some(Event::Apply(s)) = ev? {
            seen.apply(&s);
        }
    }
    let requests = diff_counts(&request_counts(&client).await?, &requests_before);
    let controller = usage(&child)?;
    let rewritten = seen.rewrites.values().filter(|n| **n > 0).count();
    let mut report = json!({
        "services": a.services,
        "assigned_before_start": before_start,
        "first_assigned_seconds": first_at.map(|d| d.as_secs_f64()),
        "all_assigned_seconds": all_at.as_secs_f64(),
        "requests": requests,
        "services_modified_again_after_assignment": rewritten,
        "address_changes": seen.changed,
        "controller": controller,
    });
    if let Some(settle) = a.restart_settle {
        stop(&mut child).await?;
        let snapshot = seen.ips.clone();
        let changed_before = seen.changed;
        let before = request_counts(&client).await?;
        let restarted = Instant::now();
        child = spawn(&a.command)?;
        let until = restarted + Duration::from_secs(settle);
        loop {
            let ev = tokio::select! {
                ev = stream.try_next() => ev?,
                st = child.wait() => return Err(format!("controller exited after restart: {:?}", st?).into()),
                () = tokio::time::sleep_until(until.into()) => break,
            };
            if let Some(Event::Apply(s)) = ev {
                seen.apply(&s);
            }
        }
        let differ = snapshot
            .iter()
            .filter(|(k, v)| seen.ips.get(*k) != Some(*v))
            .count();
        report["restart"] = json!({
            "settle_seconds": settle,
            "services_with_other_addresses": differ,
            "address_changes_seen": seen.changed - changed_before,
            "requests": diff_counts(&request_counts(&client).await?, &before),
            "controller": usage(&child)?,
        });
    }
    if a.keep {
        report["controller_pid"] = json!(child.id());
    } else {
        stop(&mut child).await?;
    }
    Ok(report)
}

fn spawn(command: &[String]) -> Result<tokio::process::Child, Error> {
    let (prog, args) = command.split_first().ok_or("no controller command")?;
    Ok(tokio::process::Command::new(prog)
        .args(args)
        .kill_on_drop(true)
        .spawn()?)
}

/// The child's peak RSS (VmHWM, KiB) and CPU seconds (user + system) from
/// /proc, read while it still runs.
fn usage(child: &tokio::process::Child) -> Result<serde_json::Value, Error> {
    let pid = child.id().ok_or("controller already reaped")?;
    let (cpu_seconds, rss_kib, peak_rss_kib) = proc_usage(pid)?;
    Ok(json!({
        "peak_rss_kib": peak_rss_kib,
        "rss_kib": rss_kib,
        "cpu_seconds": cpu_seconds,
    }))
}

/// SIGTERM to the child (by its PID), then wait for it.
async fn stop(child: &mut tokio::process::Child) -> Result<(), Error> {
    if let Some(pid) = child.id() {
        let pid = i32::try_from(pid)?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )?;
    }
    match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(r) => {
            r?;
        }
        Err(_) => child.kill().await?,
    }
    Ok(())
}

/// The apiserver's `apiserver_request_total` for services and events, by
/// `verb resource/subresource code`.
async fn request_counts(client: &Client) -> Result<BTreeMap<String, f64>, Error> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(req).await?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let resource = label("resource");
        if resource != "services" && resource != "events" {
            continue;
        }
        let sub = label("subresource");
        let key = format!(
            "{} {}{}{} {}",
            label("verb"),
            resource,
            if sub.is_empty() { "" } else { "/" },
            sub,
            label("code")
        );
        *out.entry(key).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    Ok(out)
}

fn diff_counts(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (k, v) in after {
        let d = v - before.get(k).copied().unwrap_or(0.0);
        if d > 0.0 {
            out.insert(k.clone(), json!(d));
        }
    }
    out.into()
}

// ---- floor ------------------------------------------------------------------

async fn floor(client: Client, a: FloorArgs) -> Result<serde_json::Value, Error> {
    let started = Instant::now();
    let api: Api<Service> = Api::all(client.clone());
    let mut services = Vec::new();
    let mut lp = ListParams::default()
        .labels(&format!("{LABEL}=fill"))
        .limit(500);
    loop {
        let page = api.list(&lp).await?;
        for s in page.items {
            if a.skip_assigned && !ingress(&s).is_empty() {
                continue;
            }
            if a.clear && ingress(&s).is_empty() {
                continue;
            }
            let pool = s
                .annotations()
                .get("metallb.io/address-pool")
                .cloned()
                .unwrap_or_default();
            let dual = s
                .spec
                .as_ref()
                .and_then(|s| s.ip_families.as_ref())
                .is_some_and(|f| f.len() == 2);
            services.push((s.namespace().unwrap_or_default(), s.name_any(), pool, dual));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    let listed = started.elapsed();
    // Addresses by index (no allocator): Service i is host i / pools + 1
    // of its pool, so the two halves of a shared pair (2j, 2j+1: one
    // pool) share theirs, and a grown cluster's new Services take free
    // ones.
    let pools = a.shape.pools.max(1);
    let writes: Vec<(String, String, serde_json::Value)> = services
        .into_iter()
        .map(|(ns, name, pool, dual)| {
            if a.clear {
                // A null in a merge patch deletes the key.
                let patch = json!({
                    "metadata": {"annotations": {POOL_ANNOTATION: null}},
                    "status": {"loadBalancer": {"ingress": null}},
                });
                return (ns, name, patch);
            }
            let i: u32 = name
                .strip_prefix("svc-")
                .and_then(|i| i.parse().ok())
                .unwrap_or(0);
            let n = i / pools + 1;
            let p: u32 = pool
                .strip_prefix("pool-")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            let mut ingress = vec![
                json!({"ip": format!("10.{}.{}.{}", 100 + p, n >> 8, n & 0xff), "ipMode": "VIP"}),
            ];
            if dual {
                ingress.push(json!({"ip": format!("fd00:10:{p:x}::{n:x}"), "ipMode": "VIP"}));
            }
            let patch = json!({
                "metadata": {"annotations": {POOL_ANNOTATION: pool}},
                "status": {"loadBalancer": {"ingress": ingress}},
            });
            (ns, name, patch)
        })
        .collect();
    let count = writes.len();
    let t = Instant::now();
    let pp = PatchParams::default();
    for_all(writes, a.concurrency, |(ns, name, patch)| {
        let api: Api<Service> = Api::namespaced(client.clone(), &ns);
        let pp = pp.clone();
        async move {
            api.patch_status(&name, &pp, &Patch::Merge(&patch)).await?;
            Ok(())
        }
    })
    .await?;
    Ok(json!({
        "services": count,
        "list_seconds": listed.as_secs_f64(),
        "patch": rate(count as u64, t.elapsed()),
        "total_seconds": started.elapsed().as_secs_f64(),
        "concurrency": a.concurrency,
        "cleared": a.clear,
    }))
}

// ---- churn ------------------------------------------------------------------

async fn churn(client: Client, a: ChurnArgs) -> Result<serde_json::Value, Error> {
    let created: Arc<std::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<std::sync::Mutex<Vec<Duration>>> = Arc::default();
    // How long each create call took, and when it returned (per name).
    let create_calls: Arc<std::sync::Mutex<Vec<Duration>>> = Arc::default();
    let returned: Arc<std::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
    let after_return: Arc<std::sync::Mutex<Vec<Duration>>> = Arc::default();
    // The watch of churned Services: latency from create to first ingress.
    let watch = {
        let api: Api<Service> = Api::all(client.clone());
        let stream = watcher::watcher(
            api,
            watcher::Config::default().labels(&format!("{LABEL}=churn")),
        );
        let created = created.clone();
        let latencies = latencies.clone();
        let returned = returned.clone();
        let after_return = after_return.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut done: HashSet<String> = HashSet::new();
            let mut stream = std::pin::pin!(stream);
            while let Ok(Some(ev)) = stream.try_next().await {
                match ev {
                    Event::InitDone => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Event::Apply(s) if !ingress(&s).is_empty() => {
                        let now = Instant::now();
                        let name = s.name_any();
                        if done.insert(name.clone())
                            && let Some(t0) = lock(&created).get(&name)
                        {
                            lock(&latencies).push(now - *t0);
                            if let Some(t1) = lock(&returned).get(&name) {
                                lock(&after_return).push(now.saturating_duration_since(*t1));
                            }
                        }
                    }
                    _ => {}
                }
            }
        });
        ready_rx.await?;
        task
    };

    let started = Instant::now();
    let end = started + Duration::from_secs(a.duration);
    let errors = Arc::new(AtomicU64::new(0));
    let counts = Arc::new([
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    ]);
    let shape = a.shape.clone();

    // Service create (and delete after --lifetime).
    let creates = {
        let client = client.clone();
        let created = created.clone();
        let create_calls = create_calls.clone();
        let returned = returned.clone();
        let errors = errors.clone();
        let counts = counts.clone();
        let shape = shape.clone();
        let lifetime = Duration::from_secs(a.lifetime);
        let local_percent = a.local_percent;
        ticker(a.services_per_second, end, move |n| {
            let client = client.clone();
            let created = created.clone();
            let create_calls = create_calls.clone();
            let returned = returned.clone();
            let errors = errors.clone();
            let counts = counts.clone();
            let shape = shape.clone();
            async move {
                // Churned services use indices far above the filled ones.
                let i = 900_000 + u32::try_from(n).unwrap_or(0) % 99_999;
                let ns = svc_namespace(&shape, i);
                let api: Api<Service> = Api::namespaced(client, &ns);
                let mut svc = service(&shape, i, local_percent, 0, 0, "churn");
                let name = format!("churn-{n:07}");
                svc.metadata.name = Some(name.clone());
                let t0 = Instant::now();
                lock(&created).insert(name.clone(), t0);
                let r = api.create(&PostParams::default(), &svc).await;
                let t1 = Instant::now();
                lock(&returned).insert(name.clone(), t1);
                lock(&create_calls).push(t1 - t0);
                match r {
                    Ok(_) => {
                        counts[0].fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
                tokio::time::sleep(lifetime).await;
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        counts[1].fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    // Endpoint moves.
    let moves = {
        let client = client.clone();
        let errors = errors.clone();
        let counts = counts.clone();
        let shape = shape.clone();
        let mut rng = SmallRng::seed_from_u64(a.seed);
        let services = a.services.max(1);
        let seeds: Vec<(u32, u64)> =
            (0..(a.endpoint_moves_per_second * a.duration as f64) as usize + 1)
                .map(|_| (rng.random_range(0..services), rng.random()))
                .collect();
        ticker(a.endpoint_moves_per_second, end, move |n| {
            let (i, seed) = seeds[usize::try_from(n).unwrap_or(0) % seeds.len()];
            let api: Api<EndpointSlice> =
                Api::namespaced(client.clone(), &svc_namespace(&shape, i));
            let mut rng = SmallRng::seed_from_u64(seed);
            let count = rng.random_range(1..=4);
            let eps = endpoints(&shape, &mut rng, count);
            let errors = errors.clone();
            let counts = counts.clone();
            async move {
                let patch = json!({"endpoints": eps});
                let name = format!("{}-0", svc_name(i));
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => counts[2].fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    // Node condition flips.
    let flips = {
        let nodes: Api<Node> = Api::all(client.clone());
        let errors = errors.clone();
        let counts = counts.clone();
        let n_nodes = a.shape.nodes.max(1);
        ticker(a.node_flips_per_second, end, move |n| {
            let nodes = nodes.clone();
            let errors = errors.clone();
            let counts = counts.clone();
            async move {
                // Each node goes NotReady, and Ready on its next turn.
                let i = u32::try_from(n % u64::from(n_nodes)).unwrap_or(0);
                let ready = (n / u64::from(n_nodes)) % 2 == 1;
                // With the time of the flip, as a kubelet writes it: a
                // change even where an earlier churn left the same status.
                let now = k8s_openapi::jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string();
                let patch = json!({"status": {"conditions": [{
                    "type": "Ready",
                    "status": if ready { "True" } else { "False" },
                    "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }]}});
                match nodes
                    .patch_status(
                        &node_name(i),
                        &PatchParams::default(),
                        &Patch::Strategic(&patch),
                    )
                    .await
                {
                    Ok(_) => counts[3].fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    let (c, m, f) = tokio::join!(creates, moves, flips);
    let _ = (c?, m?, f?);
    // Let the last creates get their status.
    tokio::time::sleep(Duration::from_secs(3)).await;
    watch.abort();
    let lat = lock(&latencies).clone();
    let created_n = counts[0].load(Ordering::Relaxed);
    Ok(json!({
        "duration_seconds": a.duration,
        "services_created": created_n,
        "services_deleted": counts[1].load(Ordering::Relaxed),
        "endpoint_moves": counts[2].load(Ordering::Relaxed),
        "node_flips": counts[3].load(Ordering::Relaxed),
        "errors": errors.load(Ordering::Relaxed),
        "assigned": lat.len(),
        "create_to_status_ms": percentiles(lat),
        "create_call_ms": percentiles(lock(&create_calls).clone()),
        "create_return_to_status_ms": percentiles(lock(&after_return).clone()),
    }))
}

/// p50, p90, p99 and max of `v`, in milliseconds (nearest rank).
fn percentiles(mut v: Vec<Duration>) -> serde_json::Value {
    v.sort();
    let pct = |q: f64| -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        let idx = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        Some(v[idx].as_secs_f64() * 1e3)
    };
    json!({
        "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99),
        "max": v.last().map(|d| d.as_secs_f64() * 1e3),
    })
}

/// Calls `f(n)` `per_second` times a second until `end`, each call its own
/// task; returns when all have finished.
async fn ticker<F, Fut>(per_second: f64, end: Instant, mut f: F) -> Result<(), Error>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    if per_second <= 0.0 {
        return Ok(());
    }
    let period = Duration::from_secs_f64(1.0 / per_second);
    let start = Instant::now();
    let mut tasks = Vec::new();
    let mut n = 0u64;
    loop {
        let at = start + period.mul_f64(n as f64);
        if at >= end {
            break;
        }
        tokio::time::sleep_until(at.into()).await;
        tasks.push(tokio::spawn(f(n)));
        n += 1;
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---- watchers ---------------------------------------------------------------

#[derive(Debug, Args)]
struct WatchersArgs {
    /// Watch clients, each one speaker's calls.
    #[arg(long)]
    clients: usize,
    /// Whose calls: `ferrolb` (speaker/src/source/k8s.rs: paginated lists
    /// of 500, then watches from the list's resourceVersion, JSON) or
    /// `metallb` (MetalLB v0.16.2's speaker: controller-runtime informers,
    /// streaming lists, protobuf for built-in kinds).
    #[arg(long, value_enum)]
    set: WatchSet,
    /// The speakers' namespace (metallb.io objects, Secrets, Pods).
    #[arg(long, default_value = "metallb-system")]
    namespace: String,
    /// PID of the kube-apiserver: its CPU (utime + stime) and RSS are read
    /// from /proc.
    #[arg(long)]
    apiserver_pid: u32,
    /// Clients listing at the same time while they start.
    #[arg(long, default_value_t = 5)]
    start_concurrency: usize,
    /// Seconds between the last client's list and the churn.
    #[arg(long, default_value_t = 5)]
    settle: u64,
    #[command(flatten)]
    churn: ChurnArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum WatchSet {
    Ferrolb,
    Metallb,
}

/// One list-and-watch of a watch client.
#[derive(Debug, Clone)]
struct WatchCall {
    /// Collection path, e.g. `/api/v1/nodes`.
    path: String,
    /// Selector parameters, URL-encoded (may be empty).
    selector: String,
    /// Asks for protobuf (client-go does for built-in kinds).
    protobuf: bool,
}

/// The watches of one speaker of `set` in namespace `ns`.
fn watch_calls(set: WatchSet, ns: &str) -> Vec<WatchCall> {
    let call = |path: &str, selector: &str, protobuf: bool| WatchCall {
        path: path.to_owned(),
        selector: selector.to_owned(),
        protobuf,
    };
    let mlb = |version: &str, plural: &str| format!("/apis/metallb.io/{version}/{plural}");
    match set {
        // speaker/src/source/k8s.rs `start`: Nodes, Services and
        // EndpointSlices cluster-wide; in the namespace the metallb.io
        // kinds and Secrets; the speaker Pods by label (memberlist seeds,
        // the default --memberlist-labels).
        WatchSet::Ferrolb => {
            let nsd = |version: &str, plural: &str| {
                format!("/apis/metallb.io/{version}/namespaces/{ns}/{plural}")
            };
            vec![
                call("/api/v1/nodes", "", false),
                call("/api/v1/services", "", false),
                call("/apis/discovery.k8s.io/v1/endpointslices", "", false),
                call(&format!("/api/v1/namespaces/{ns}/secrets"), "", false),
                call(&nsd("v1beta1", "ipaddresspools"), "", false),
                call(&nsd("v1beta2", "bgppeers"), "", false),
                call(&nsd("v1beta1", "bgpadvertisements"), "", false),
                call(&nsd("v1beta1", "l2advertisements"), "", false),
                call(&nsd("v1beta1", "bfdprofiles"), "", false),
                call(&nsd("v1beta1", "communities"), "", false),
                call(
                    &format!("/api/v1/namespaces/{ns}/pods"),
                    "labelSelector=app%3Dmetallb%2Ccomponent%3Dspeaker",
                    false,
                ),
            ]
        }
        // MetalLB v0.16.2 internal/k8s/k8s.go `New`: the cache's ByObject
        // limits these to the namespace by field selector (cluster-wide
        // path); the controllers' For/Watches add Nodes, Services,
        // EndpointSlices, Namespaces, ConfigurationStates and
        // ServiceL2Statuses, cluster-wide.
        WatchSet::Metallb => {
            let field = format!("fieldSelector=metadata.namespace%3D{ns}");
            vec![
                call("/api/v1/nodes", "", true),
                call("/api/v1/services", "", true),
                call("/apis/discovery.k8s.io/v1/endpointslices", "", true),
                call("/api/v1/namespaces", "", true),
                call(&mlb("v1beta1", "configurationstates"), "", false),
                call(&mlb("v1beta1", "servicel2statuses"), "", false),
                call("/api/v1/secrets", &field, true),
                call("/api/v1/configmaps", &field, true),
                call(&mlb("v1beta1", "ipaddresspools"), &field, false),
                call(&mlb("v1beta2", "bgppeers"), &field, false),
                call(&mlb("v1beta1", "bgpadvertisements"), &field, false),
                call(&mlb("v1beta1", "l2advertisements"), &field, false),
                call(&mlb("v1beta1", "bfdprofiles"), &field, false),
                call(&mlb("v1beta1", "communities"), &field, false),
                call(&mlb("v1beta1", "servicebgpstatuses"), &field, false),
            ]
        }
    }
}

/// What one watch client received.
#[derive(Default)]
struct Received {
    /// Octets of list responses (and of streaming lists' initial events).
    list: AtomicU64,
    /// Octets of watch streams after the list.
    watch: AtomicU64,
    /// Watch events after the list (JSON: lines; protobuf: not counted).
    events: AtomicU64,
    /// Watches that ended and were started again.
    rewatches: AtomicU64,
}

/// The marker of a streaming list's end: the annotation of its bookmark.
const INITIAL_EVENTS_END: &[u8] = b"k8s.io/initial-events-end";

/// Runs one call forever: its list (counted), then its watch (counted),
/// watching again when a watch ends. Sends on `listed` once listed.
async fn run_watch(
    client: Client,
    set: WatchSet,
    call: WatchCall,
    got: Arc<Received>,
    listed: tokio::sync::mpsc::UnboundedSender<Result<(), String>>,
) -> Result<(), Error> {
    use futures::AsyncBufReadExt;
    let sel = if call.selector.is_empty() {
        String::new()
    } else {
        format!("&{}", call.selector)
    };
    let get = |query: String| -> Result<http::Request<Vec<u8>>, Error> {
        let accept = if call.protobuf {
            "application/vnd.kubernetes.protobuf, */*"
        } else {
            "application/json"
        };
        Ok(http::Request::get(format!("{}?{query}{sel}", call.path))
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())?)
    };
    let mut listed = Some(listed);
    let mut rv = String::new();
    loop {
        let mut in_list = false;
        let query = match set {
            WatchSet::Ferrolb if rv.is_empty() => {
                // kube-runtime's watcher: pages of 500, no resourceVersion
                // (a consistent read).
                let mut token = String::new();
                loop {
                    let mut q = "limit=500".to_owned();
                    if !token.is_empty() {
                        q.push_str(&format!("&continue={token}"));
                    }
                    let text = client.request_text(get(q)?).await?;
                    got.list.fetch_add(text.len() as u64, Ordering::Relaxed);
                    #[derive(serde::Deserialize)]
                    struct Meta {
                        #[serde(rename = "resourceVersion", default)]
                        rv: String,
                        #[serde(rename = "continue", default)]
                        token: String,
                    }
                    #[derive(serde::Deserialize)]
                    struct Page {
                        metadata: Meta,
                    }
                    let page: Page = serde_json::from_str(&text)?;
                    rv = page.metadata.rv;
                    token = page.metadata.token;
                    if token.is_empty() {
                        break;
                    }
                }
                if let Some(tx) = listed.take() {
                    let _ = tx.send(Ok(()));
                }
                format!(
                    "watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=290"
                )
            }
            WatchSet::Ferrolb => {
                format!(
                    "watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=290"
                )
            }
            // client-go's reflector with WatchListClient (on by default
            // since 1.35): a streaming list. Its timeouts are 5-10
            // minutes; a stream that ends lists again (no resourceVersion
            // is read from protobuf here).
            WatchSet::Metallb => {
                in_list = true;
                "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=600".to_owned()
            }
        };
        let mut body = client.request_stream(get(query)?).await?;
        let mut line: Vec<u8> = Vec::new();
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let chunk = body.fill_buf().await?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len();
            if in_list {
                got.list.fetch_add(n as u64, Ordering::Relaxed);
                tail.extend_from_slice(chunk);
                if tail
                    .windows(INITIAL_EVENTS_END.len())
                    .any(|w| w == INITIAL_EVENTS_END)
                {
                    in_list = false;
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(Ok(()));
                    }
                }
                let keep = tail.len().saturating_sub(INITIAL_EVENTS_END.len());
                tail.drain(..keep);
            } else {
                got.watch.fetch_add(n as u64, Ordering::Relaxed);
                if set == WatchSet::Ferrolb {
                    for &b in chunk {
                        if b == b'\n' {
                            got.events.fetch_add(1, Ordering::Relaxed);
                            if let Some(v) = event_rv(&line) {
                                rv = v;
                            }
                            line.clear();
                        } else {
                            line.push(b);
                        }
                    }
                }
            }
            body.consume_unpin(n);
        }
        got.rewatches.fetch_add(1, Ordering::Relaxed);
    }
}

/// The first `"resourceVersion":"..."` of a JSON watch event: the object's
/// (or the bookmark's).
fn event_rv(line: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"resourceVersion\":\"";
    let at = line.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let end = line[at..].iter().position(|&b| b == b'"')?;
    String::from_utf8(line[at..at + end].to_vec()).ok()
}

/// The apiserver's own count and octets of the watch events it sent, by
/// resource (`apiserver_watch_events_sizes`: one observation per event per
/// watch).
async fn watch_event_sizes(client: &Client) -> Result<BTreeMap<String, (f64, f64)>, Error> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(req).await?;
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in text.lines() {
        let (sum, rest) = if let Some(r) = line.strip_prefix("apiserver_watch_events_sizes_sum{") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("apiserver_watch_events_sizes_count{") {
            (false, r)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let resource = labels
            .split(',')
            .find_map(|kv| kv.strip_prefix("resource=\""))
            .map(|v| v.trim_end_matches('"').to_owned())
            .unwrap_or_default();
        let v = value.trim().parse::<f64>().unwrap_or(0.0);
        let e = out.entry(resource).or_default();
        if sum {
            e.1 += v;
        } else {
            e.0 += v;
        }
    }
    Ok(out)
}

/// CPU seconds (utime + stime) and VmRSS/VmHWM (KiB) of a process.
fn proc_usage(pid: u32) -> Result<(f64, u64, u64), Error> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |field: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces): utime is the
    // 14th field of the line, stime the 15th.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)?.unwrap_or(100) as f64;
    Ok((
        (ticks(11) + ticks(12)) as f64 / hz,
        kib("VmRSS:"),
        kib("VmHWM:"),
    ))
}

async fn watchers(
    client: Client,
    config: kube::Config,
    a: WatchersArgs,
) -> Result<serde_json::Value, Error> {
    let calls = watch_calls(a.set, &a.namespace);
    let apiserver = a.apiserver_pid;
    let me = std::process::id();
    let (cpu0, rss0, _) = proc_usage(apiserver)?;
    let (own0, ..) = proc_usage(me)?;
    let t0 = Instant::now();
    let mut received = Vec::new();
    let mut tasks = Vec::new();
    // Clients start a few at a time: at most --start-concurrency clients'
    // lists outstanding. A watch that fails ends the run.
    let (listed_tx, mut listed_rx) = tokio::sync::mpsc::unbounded_channel::<Result<(), String>>();
    let mut pending = 0usize;
    let window = calls.len() * a.start_concurrency.max(1);
    let mut wait_one = async |pending: &mut usize| -> Result<(), Error> {
        listed_rx.recv().await.ok_or("watch tasks ended")??;
        *pending -= 1;
        Ok(())
    };
    for _ in 0..a.clients {
        // Its own client: its own connections, as a speaker has.
        let kc = Client::try_from(config.clone())?;
        let got = Arc::new(Received::default());
        received.push(got.clone());
        for call in &calls {
            let (tx, kc, got, call) = (listed_tx.clone(), kc.clone(), got.clone(), call.clone());
            let set = a.set;
            tasks.push(tokio::spawn(async move {
                if let Err(e) = run_watch(kc, set, call.clone(), got, tx.clone()).await {
                    let e = format!("watch {}: {e}", call.path);
                    eprintln!("ferrolb-loadgen: {e}");
                    let _ = tx.send(Err(e));
                }
            }));
            pending += 1;
        }
        while pending >= window {
            wait_one(&mut pending).await?;
        }
    }
    while pending > 0 {
        wait_one(&mut pending).await?;
    }
    let listed_at = t0.elapsed();
    let (cpu1, rss1, _) = proc_usage(apiserver)?;
    let list_octets: Vec<u64> = received
        .iter()
        .map(|r| r.list.load(Ordering::Relaxed))
        .collect();
    tokio::time::sleep(Duration::from_secs(a.settle)).await;
    let snap = |r: &Received| {
        (
            r.watch.load(Ordering::Relaxed),
            r.events.load(Ordering::Relaxed),
        )
    };
    let before: Vec<(u64, u64)> = received.iter().map(|r| snap(r)).collect();
    let (cpu2, ..) = proc_usage(apiserver)?;
    let (own2, ..) = proc_usage(me)?;
    let sizes0 = watch_event_sizes(&client).await?;
    let t2 = Instant::now();
    let churned = churn(client.clone(), a.churn.clone()).await?;
    let took = t2.elapsed();
    let sizes3 = watch_event_sizes(&client).await?;
    let sent_by_kind: serde_json::Map<String, serde_json::Value> = sizes3
        .iter()
        .filter_map(|(kind, (n, octets))| {
            let (n0, o0) = sizes0.get(kind).copied().unwrap_or_default();
            (n - n0 > 0.0).then(|| {
                (
                    kind.clone(),
                    json!({"events": n - n0, "octets": octets - o0,
                           "octets_per_event": (octets - o0) / (n - n0)}),
                )
            })
        })
        .collect();
    let (cpu3, rss3, hwm3) = proc_usage(apiserver)?;
    let (own3, ..) = proc_usage(me)?;
    let after: Vec<(u64, u64)> = received.iter().map(|r| snap(r)).collect();
    for t in &tasks {
        t.abort();
    }
    let minutes = took.as_secs_f64() / 60.0;
    let per_client: Vec<(u64, u64)> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a.0 - b.0, a.1 - b.1))
        .collect();
    let n = per_client.len().max(1) as f64;
    let octets: u64 = per_client.iter().map(|p| p.0).sum();
    let events: u64 = per_client.iter().map(|p| p.1).sum();
    let rewatches: u64 = received
        .iter()
        .map(|r| r.rewatches.load(Ordering::Relaxed))
        .sum();
    let changes = [
        "services_created",
        "services_deleted",
        "endpoint_moves",
        "node_flips",
    ]
    .iter()
    .filter_map(|k| churned[*k].as_u64())
    .sum::<u64>();
    Ok(json!({
        "set": format!("{:?}", a.set).to_lowercase(),
        "clients": a.clients,
        "watches_per_client": calls.len(),
        "list": {
            "seconds": listed_at.as_secs_f64(),
            "apiserver_cpu_seconds": cpu1 - cpu0,
            "octets_per_client_mean": list_octets.iter().sum::<u64>() as f64 / n,
            "octets_per_client_max": list_octets.iter().max(),
        },
        "churn": {
            "seconds": took.as_secs_f64(),
            "changes": changes,
            "report": churned,
        },
        "apiserver": {
            "cpu_seconds_per_minute": (cpu3 - cpu2) / minutes,
            "cpu_seconds": cpu3 - cpu2,
            "rss_kib_before_clients": rss0,
            "rss_kib_after_lists": rss1,
            "rss_kib_after_churn": rss3,
            "peak_rss_kib": hwm3,
        },
        "per_client": {
            "octets_per_minute": octets as f64 / n / minutes,
            "events_per_minute": events as f64 / n / minutes,
            "octets_per_change": if changes > 0 { octets as f64 / n / changes as f64 } else { 0.0 },
        },
        "apiserver_watch_events_during_churn": sent_by_kind,
        "rewatches": rewatches,
        "loadgen_cpu_seconds": { "lists": own2 - own0, "churn": own3 - own2 },
    }))
}

#[cfg(test)]
mod tests {
    use super::proc_usage;

    /// The /proc reader on this test process: a resident set and a peak at
    /// least as large; a PID that cannot exist is an error, not zeros.
    #[test]
    fn proc_usage_reads_this_process() {
        let (_, rss, peak) = proc_usage(std::process::id()).unwrap();
        assert!(rss > 0, "VmRSS {rss} KiB");
        assert!(peak >= rss, "VmHWM {peak} < VmRSS {rss} KiB");
        assert!(proc_usage(u32::MAX).is_err(), "no such process");
    }
}
