//! What a starting controller reconciles, counted, on an apiserver of its
//! own (testenv started for this binary, so that every Service and
//! Namespace it holds is this test's): one reconcile per Service at
//! startup, and still one per Service of a namespace whose labels change
//! later (pools select by namespace labels, issue 18 §1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use api::v1beta1::IPAddressPool;
use controller::leader;
use controller::reconcile::{self, Options};
use k8s_openapi::api::core::v1::{Event, Namespace, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testenv::TestEnv;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const TIMEOUT: Duration = Duration::from_secs(90);
/// The controller's own namespace (pools, Lease).
const SYSTEM: &str = "ferrolb-system";
const CLASS: &str = "ferrolb.test/startup";
/// Namespaces of plain Services, and Services in each.
const PLAIN: usize = 4;
const PER_NAMESPACE: usize = 10;
/// Services of the namespace whose labels change.
const TIERED: usize = 3;
/// The longest retry wait of a Service that got no address.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

struct Ctl {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), reconcile::Error>>,
}

impl Ctl {
    fn start(client: &Client, identity: &str, metrics: Option<SocketAddr>) -> Self {
        let opts = Options {
            namespace: SYSTEM.into(),
            lb_class: Some(CLASS.into()),
            lease: leader::Config {
                namespace: SYSTEM.into(),
                name: "ferrolb-controller".into(),
                identity: identity.to_owned(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
            },
            metrics_addr: metrics,
            metallb: shell::compat::MetallbArgs::without_probes(),
            concurrency: 16,
            max_backoff: MAX_BACKOFF,
            pool_status_period: Duration::from_millis(200),
        };
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(reconcile::run(client.clone(), opts, rx));
        Self { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(TIMEOUT, self.task)
            .await
            .expect("controller did not stop")
            .unwrap()
            .unwrap();
    }
}

async fn namespace(client: &Client, name: &str, labels: serde_json::Value) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }))
    .unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

async fn label(client: &Client, name: &str, tier: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {"tier": tier}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A pool of `cidr`; with `tier`, only for namespaces labelled so.
async fn pool(client: &Client, name: &str, cidr: &str, tier: Option<&str>) {
    let api: Api<IPAddressPool> = Api::namespaced(client.clone(), SYSTEM);
    let mut spec = json!({"addresses": [cidr]});
    if let Some(t) = tier {
        spec["serviceAllocation"] =
            json!({"priority": 1, "namespaceSelectors": [{"matchLabels": {"tier": t}}]});
    }
    let pool: IPAddressPool = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &pool).await.unwrap();
}

async fn service(client: &Client, ns: &str, name: &str, annotations: serde_json::Value) {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": CLASS,
            "selector": {"app": name},
            "ports": [{"port": 80}],
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &svc).await.unwrap();
}

/// Every Service of the apiserver: name -> (its ingress, resourceVersion).
async fn services(client: &Client) -> BTreeMap<String, (Vec<String>, String)> {
    let api: Api<Service> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| s.namespace().as_deref() != Some("default"))
        .map(|s| {
            let ips = controller::convert::ingress_ips(&s)
                .iter()
                .map(ToString::to_string)
                .collect();
            (
                format!("{}/{}", s.namespace().unwrap(), s.name_any()),
                (ips, s.resource_version().unwrap()),
            )
        })
        .collect()
}

async fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    Some(out)
}

/// A counter or gauge of `/metrics` (`None`: not served yet).
async fn metric(addr: SocketAddr, name: &str) -> Option<u64> {
    let body = http_get(addr, "/metrics").await?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

const RECONCILES: &str = "controller_runtime_reconcile_time_seconds_count{controller=\"service\"}";
const FAILED: &str = "metallb_k8s_client_update_errors_total";

/// Warning Events of `reason` in `ns`, by the object they are about.
async fn warned(client: &Client, ns: &str, reason: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut about: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.involved_object.name)
        .collect();
    about.sort();
    about.dedup();
    about
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reconciles_each_service_once_and_namespace_labels_still_requeue() {
    let env = TestEnv::start().unwrap();
    let client = env.client().unwrap();
    env.install_crds(api::crds()).await.unwrap();
    namespace(&client, SYSTEM, json!({})).await;
    pool(&client, "plain", "10.70.0.0/24", None).await;
    pool(&client, "silver", "10.71.0.0/24", Some("silver")).await;
    pool(&client, "gold", "10.72.0.0/24", Some("gold")).await;
    for n in 0..PLAIN {
        let ns = format!("plain-{n}");
        namespace(&client, &ns, json!({})).await;
        for i in 0..PER_NAMESPACE {
            service(&client, &ns, &format!("s{i}"), json!({})).await;
        }
    }
    namespace(&client, "tiered", json!({"tier": "silver"})).await;
    for i in 0..TIERED {
        service(&client, "tiered", &format!("t{i}"), json!({})).await;
    }
    let total = PLAIN * PER_NAMESPACE + TIERED;

    // A first controller assigns every Service, then stops.
    let first = Ctl::start(&client, "first", None);
    let assigned = support::eventually(TIMEOUT, "every Service assigned", || async {
        let all = services(&client).await;
        (all.len() == total && all.values().all(|(ips, _)| ips.len() == 1)).then_some(all)
    })
    .await;
    for i in 0..TIERED {
        assert!(assigned[&format!("tiered/t{i}")].0[0].starts_with("10.71.0."));
    }
    first.stop().await;
    // The controller watches every Service, the apiserver's own
    // (`default/kubernetes`) too: each is one reconcile at startup.
    let every = Api::<Service>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(every, total + 1);

    // A second starts on the assigned cluster: its replay takes every
    // address back, and its first pass decides each Service once (and
    // writes none). Each Service's one reconcile is counted before the
    // Namespace watch's initial list could add a second.
    let metrics_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let second = Ctl::start(&client, "second", Some(metrics_addr));
    support::eventually(TIMEOUT, "the first pass", || async {
        (metric(metrics_addr, RECONCILES).await? >= every as u64).then_some(())
    })
    .await;

    // A later label change re-queues the namespace's Services: the pool
    // that gave them their addresses no longer selects them, which each
    // reconcile reports (the addresses are kept, for stability). The
    // Namespace watch delivers this change after its initial list, so once
    // these reconciles are done, any the initial list asked for were asked
    // for before.
    label(&client, "tiered", "gold").await;
    let kept: Vec<String> = (0..TIERED).map(|i| format!("t{i}")).collect();
    support::eventually(TIMEOUT, "AddressKept on each tiered Service", || async {
        (warned(&client, "tiered", reconcile::REASON_ADDRESS_KEPT).await == kept).then_some(())
    })
    .await;
    let reconciles = metric(metrics_addr, RECONCILES).await.unwrap();
    assert_eq!(
        reconciles,
        (every + TIERED) as u64,
        "{every} Services at startup, then the {TIERED} of the relabelled namespace"
    );
    // Nothing was written: every Service kept its address and version.
    assert_eq!(services(&client).await, assigned);

    // A Service that no pool selects waits; its namespace relabelled, the
    // pool that now selects it gives it an address.
    namespace(&client, "waiting", json!({"tier": "bronze"})).await;
    let pinned = json!({"metallb.io/address-pool": "gold"});
    service(&client, "waiting", "w", pinned).await;
    // Its retries back off 1, 2, 4, 8 s (the k-th failure waits 2^(k-1)
    // s): after the fourth the next is 8 s away, so an address given
    // sooner came from the label change. It is the only Service failing.
    let failed = support::eventually(TIMEOUT, "four failed reconciles of w", || async {
        let n = metric(metrics_addr, FAILED).await?;
        (n >= 4).then_some(n)
    })
    .await;
    let relabelled = Instant::now();
    label(&client, "waiting", "gold").await;
    let api: Api<Service> = Api::namespaced(client.clone(), "waiting");
    let ips = support::eventually(TIMEOUT, "w assigned from gold", || async {
        let ips = controller::convert::ingress_ips(&api.get("w").await.ok()?);
        (!ips.is_empty()).then_some(ips)
    })
    .await;
    assert_eq!(ips.len(), 1);
    assert!(ips[0].to_string().starts_with("10.72.0."), "{ips:?}");
    let next_retry = Duration::from_secs(1 << (failed - 1).min(20));
    assert!(
        relabelled.elapsed() < next_retry,
        "w was assigned {:?} after the label change: its backoff retry ({next_retry:?}) came first",
        relabelled.elapsed()
    );
    second.stop().await;
    drop(env);
}
