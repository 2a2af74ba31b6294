//! Shared pieces of the Kubernetes-mode tests (`speaker_k8s.rs`, `e2e.rs`):
//! a view of the test's share of the testenv apiserver ([`Cluster`]), the
//! controller run in-process ([`Controller`]), node namespaces running the
//! `speaker` binary ([`Node`]), and FRR queries.
//!
//! Every test binary has one apiserver (`TestEnv::global`), shared by its
//! tests: each test takes fresh namespaces and prefixes its node names
//! with a tag. Tests that run the controller also give their Services a
//! `loadBalancerClass` of their own, passed to the controller and to the
//! speakers, so that no controller or speaker touches another test's
//! services.
// Each test file uses a different subset of these helpers.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use api::v1beta1::ConfigurationState;
use controller::leader;
use controller::reconcile::{self, Options};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::TestEnv;
use testnet::{Bridge, Forward, Frr, Netns, Proc, RunDir, wait_until};

/// One testenv cluster view for a test: its client and namespaces.
pub struct Cluster {
    pub rt: tokio::runtime::Runtime,
    pub client: Client,
    /// The speaker's namespace (metallb.io objects, status objects, the
    /// controller's Lease).
    pub system: String,
    /// The services' namespace.
    pub apps: String,
    /// Prefix of this test's node names.
    pub tag: &'static str,
    /// The `loadBalancerClass` of this test's services, speakers and
    /// controller (`None`: services without a class).
    pub class: Option<String>,
}

impl Cluster {
    /// A cluster view whose services have no `loadBalancerClass`: for a
    /// test binary where only one test's speakers see each service (the
    /// tests write the Service status themselves).
    pub fn new(tag: &'static str) -> Self {
        Self::build(tag)
    }

    /// A cluster view with a `loadBalancerClass` of its own,
    /// `ferrolb.test/<system namespace>`: for tests that run the controller
    /// while other tests run theirs against the same apiserver.
    pub fn with_class(tag: &'static str) -> Self {
        let mut c = Self::build(tag);
        c.class = Some(format!("ferrolb.test/{}", c.system));
        c
    }

    fn build(tag: &'static str) -> Self {
        testnet::require_root();
        let env = TestEnv::global();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (client, system, apps) = rt.block_on(async {
            env.install_crds(api::crds()).await.unwrap();
            let system = env.fresh_namespace("metallb").await.unwrap();
            let apps = env.fresh_namespace("demo").await.unwrap();
            (env.client().unwrap(), system, apps)
        });
        Self {
            rt,
            client,
            system,
            apps,
            tag,
            class: None,
        }
    }

    pub fn node(&self, n: &str) -> String {
        format!("{}-{n}", self.tag)
    }

    /// Applies every document of `testdata/speaker/<fixture>`, moved into
    /// this test's namespaces and node names; status subresources (Node
    /// addresses, Service ingress) are applied as status.
    pub fn apply_fixture(&self, fixture: &str) {
        self.apply_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../testdata/speaker")
                .join(fixture),
        );
    }

    /// Applies every `*.yaml` document of `dir`, in file name order, as
    /// [`Cluster::apply_fixture`] does.
    pub fn apply_dir(&self, dir: &Path) {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
            for doc in docs.into_iter().filter(|d| !d.is_null()) {
                self.apply(self.localize(doc));
            }
        }
    }

    /// Moves a fixture document into this test's namespaces and names, and
    /// gives Services this test's class.
    pub fn localize(&self, mut doc: Value) -> Value {
        let meta = &mut doc["metadata"];
        match meta["namespace"].as_str() {
            Some("metallb-system") => meta["namespace"] = json!(self.system),
            Some("demo") => meta["namespace"] = json!(self.apps),
            _ => {}
        }
        match doc["kind"].as_str() {
            Some("Node") => {
                let name = self.node(doc["metadata"]["name"].as_str().unwrap());
                doc["metadata"]["name"] = json!(name);
            }
            Some("EndpointSlice") => {
                for ep in doc["endpoints"].as_array_mut().unwrap() {
                    if let Some(n) = ep["nodeName"].as_str() {
                        ep["nodeName"] = json!(self.node(n));
                    }
                }
            }
            Some("Service") => {
                if doc["spec"]["ports"].is_null() {
                    // The API requires a port; the file source does not.
                    doc["spec"]["ports"] = json!([{"port": 80}]);
                }
                if let Some(class) = &self.class {
                    doc["spec"]["loadBalancerClass"] = json!(class);
                }
            }
            _ => {}
        }
        doc
    }

    fn api(&self, doc: &Value) -> Api<DynamicObject> {
        let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (
                String::new(),
                doc["apiVersion"].as_str().unwrap().to_owned(),
            ),
        };
        let kind = doc["kind"].as_str().unwrap();
        let plural = match kind {
            "Node" => "nodes".to_owned(),
            "Service" => "services".to_owned(),
            "EndpointSlice" => "endpointslices".to_owned(),
            "Pod" => "pods".to_owned(),
            k if k.ends_with("ss") => format!("{}es", k.to_lowercase()),
            k if k.ends_with('y') => format!("{}ies", k[..k.len() - 1].to_lowercase()),
            k => format!("{}s", k.to_lowercase()),
        };
        let ar = ApiResource {
            group: group.clone(),
            version: version.clone(),
            api_version: doc["apiVersion"].as_str().unwrap().to_owned(),
            kind: kind.to_owned(),
            plural,
        };
        match doc["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// Server-side apply of `doc`, then of its status if it has one.
    pub fn apply(&self, doc: Value) {
        let api = self.api(&doc);
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        let pp = PatchParams::apply("speaker-k8s-test").force();
        self.rt.block_on(async {
            let mut body = doc.clone();
            body.as_object_mut().unwrap().remove("status");
            api.patch(&name, &pp, &Patch::Apply(&body))
                .await
                .unwrap_or_else(|e| panic!("apply {name}: {e}"));
            if !doc["status"].is_null() {
                let status = json!({
                    "apiVersion": doc["apiVersion"], "kind": doc["kind"],
                    "status": doc["status"],
                });
                api.patch_status(&name, &pp, &Patch::Apply(&status))
                    .await
                    .unwrap_or_else(|e| panic!("apply status of {name}: {e}"));
            }
        });
    }

    /// A LoadBalancer Service `name` with `ip` in its status and one
    /// ready endpoint, `endpoint` on `node` (a Node's name), in the apps
    /// namespace: its EndpointSlice `<name>-1` first, then the Service.
    pub fn serve(&self, name: &str, ip: &str, node: &str, endpoint: &str) {
        self.apply(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-1"), "namespace": self.apps,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [endpoint], "nodeName": node,
                           "conditions": {"ready": true}}],
        }));
        self.apply(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": self.apps},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": ip}]}},
        }));
    }

    pub fn delete(&self, doc: &Value) {
        let api = self.api(doc);
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        self.rt.block_on(async {
            api.delete(&name, &Default::default()).await.unwrap();
        });
    }

    /// (node, service name, status) of the status objects of `K`.
    pub fn statuses<K>(&self) -> Vec<(String, String, Value)>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.system);
        let list = self.rt.block_on(api.list(&ListParams::default())).unwrap();
        let mut out: Vec<(String, String, Value)> = list
            .items
            .iter()
            .map(|o| {
                let v = serde_json::to_value(o).unwrap();
                let labels = o.labels();
                (
                    labels["metallb.io/node"].clone(),
                    labels["metallb.io/service-name"].clone(),
                    v["status"].clone(),
                )
            })
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    /// The nodeAssigned events of the services' namespace:
    /// (service, note).
    pub fn node_assigned(&self) -> Vec<(String, String)> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.apps);
        let list = self.rt.block_on(api.list(&ListParams::default())).unwrap();
        let mut out: Vec<(String, String)> = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("nodeAssigned"))
            .map(|e| {
                (
                    e.regarding.and_then(|r| r.name).unwrap_or_default(),
                    e.note.unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out
    }

    pub fn config_state(&self, node: &str) -> Option<Value> {
        let api: Api<ConfigurationState> = Api::namespaced(self.client.clone(), &self.system);
        let o = self
            .rt
            .block_on(api.get_opt(&format!("speaker-{node}")))
            .unwrap()?;
        Some(serde_json::to_value(o.status?).unwrap())
    }

    /// A Service of this test (ports 80, this test's class), as JSON to
    /// change before [`Cluster::apply`].
    pub fn service(&self, name: &str, traffic_policy: &str) -> Value {
        let mut s = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": self.apps},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": traffic_policy,
                     "ports": [{"port": 80, "protocol": "TCP"}]},
        });
        if let Some(class) = &self.class {
            s["spec"]["loadBalancerClass"] = json!(class);
        }
        s
    }

    /// An EndpointSlice for service `svc` with one ready endpoint on each
    /// of `nodes` (short names).
    pub fn endpoints(&self, svc: &str, nodes: &[&str]) -> Value {
        let eps: Vec<Value> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                json!({"addresses": [format!("10.244.{}.{}", i + 1, 10)],
                       "nodeName": self.node(n), "conditions": {"ready": true}})
            })
            .collect();
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{svc}-1"), "namespace": self.apps,
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "endpoints": eps,
        })
    }

    /// A Node with an InternalIP and labels.
    pub fn node_object(&self, name: &str, addr: &str, labels: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.node(name), "labels": labels},
            "status": {"addresses": [{"type": "InternalIP", "address": addr}]},
        })
    }

    /// The Service `name` of the apps namespace.
    pub fn get_service(&self, name: &str) -> Service {
        let api: Api<Service> = Api::namespaced(self.client.clone(), &self.apps);
        self.rt.block_on(api.get(name)).unwrap()
    }

    /// The `status.loadBalancer.ingress` IPs of Service `name`.
    pub fn ingress(&self, name: &str) -> Vec<String> {
        self.get_service(name)
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| i.ip)
            .collect()
    }

    /// A merge patch of a Node's status (conditions).
    pub fn patch_node_status(&self, name: &str, status: Value) {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        self.rt
            .block_on(api.patch_status(
                &self.node(name),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            ))
            .unwrap();
    }

    /// A merge patch of a Node's labels (`null` removes one).
    pub fn patch_node_labels(&self, name: &str, labels: Value) {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        self.rt
            .block_on(api.patch(
                &self.node(name),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            ))
            .unwrap();
    }
}

/// The controller (`controller::reconcile::run`) in this process, on a
/// runtime of its own so that it runs while the test thread blocks.
pub struct Controller {
    rt: tokio::runtime::Runtime,
    stop: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<Result<(), reconcile::Error>>>,
}

impl Controller {
    /// Starts a controller for `cluster`'s class, pools in its system
    /// namespace, electing itself through a Lease there as `identity`.
    pub fn start(cluster: &Cluster, identity: &str) -> Self {
        Self::start_in(cluster, &cluster.system, identity)
    }

    /// As [`Controller::start`], with pools and Lease in `namespace`.
    pub fn start_in(cluster: &Cluster, namespace: &str, identity: &str) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let opts = Options {
            namespace: namespace.to_owned(),
            lb_class: cluster.class.clone(),
            lease: leader::Config {
                namespace: namespace.to_owned(),
                name: "ferrolb-controller".into(),
                identity: identity.to_owned(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
            },
            metrics_addr: None,
            metallb: shell::compat::MetallbArgs::without_probes(),
            concurrency: 4,
            max_backoff: Duration::from_secs(2),
            pool_status_period: Duration::from_secs(1),
        };
        let (stop, rx) = tokio::sync::watch::channel(false);
        // The client's background task lives on the runtime it is made on.
        let task = {
            let _enter = rt.enter();
            let client = TestEnv::global().client().unwrap();
            rt.spawn(reconcile::run(client, opts, rx))
        };
        Self {
            rt,
            stop,
            task: Some(task),
        }
    }

    /// Graceful stop: the controller releases its Lease and returns.
    pub fn stop(mut self) {
        let _ = self.stop.send(true);
        let task = self.task.take().unwrap();
        self.rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), task).await })
            .expect("the controller did not stop")
            .unwrap()
            .unwrap();
    }

    /// A crash: the task is aborted, the Lease stays until it expires.
    pub fn crash(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// One node namespace running `speaker` in Kubernetes mode.
pub struct Node {
    pub ns: Netns,
    pub proc: Proc,
    pub log: PathBuf,
    args: Vec<String>,
    pub node: String,
    system: String,
    _forward: Forward,
}

/// The answer to `GET /metrics` from the speaker's port 7472 inside `ns`,
/// empty when nothing answers.
pub fn metrics_in(ns: &Netns) -> String {
    use std::io::{Read, Write};
    ns.run_in(|| {
        let Ok(mut c) = std::net::TcpStream::connect("127.0.0.1:7472") else {
            return String::new();
        };
        let mut s = String::new();
        if c.write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .is_ok()
        {
            let _ = c.read_to_string(&mut s);
        }
        s
    })
}

fn spawn_speaker(ns: &Netns, node: &str, system: &str, extra: &[String], log: &Path) -> Proc {
    let env = TestEnv::global();
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    // SPEAKER_BIN: benchmark another build (a release one) of the binary.
    let bin = std::env::var("SPEAKER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_speaker").into());
    let mut cmd = ns.command(bin);
    cmd.env("NODE_NAME", node);
    // The apiserver's admin, unless the test gives the speaker an identity
    // of its own.
    if !extra.iter().any(|a| a == "--kubeconfig") {
        cmd.arg("--kubeconfig").arg(env.kubeconfig_path());
    }
    // The test's system namespace, unless the test names another.
    if !extra.iter().any(|a| a == "--namespace") {
        cmd.args(["--namespace", system]);
    }
    cmd.args([
        "--metrics-addr",
        "127.0.0.1:7472",
        "--log-level",
        "debug,kube=info,hyper=info,tower=info,hyper_util=info",
    ])
    .args(extra)
    .stdout(std::process::Stdio::null())
    .stderr(stderr);
    ns.spawn_command(&mut cmd)
}

impl Node {
    /// A node namespace on `bridge` with `addr`/24 on eth0 (and any
    /// `addr`/64 IPv6 address among `extra_addrs`), running the speaker
    /// for `cluster`'s node `name`, with `--lb-class` when the cluster has
    /// a class.
    pub fn start(
        cluster: &Cluster,
        bridge: &Bridge,
        name: &str,
        addr: &str,
        extra: &[&str],
        logs: &RunDir,
    ) -> Self {
        Self::start_with_addrs(cluster, bridge, name, &[&format!("{addr}/24")], extra, logs)
    }

    /// As [`Node::start`], with every address of eth0 given in CIDR form.
    pub fn start_with_addrs(
        cluster: &Cluster,
        bridge: &Bridge,
        name: &str,
        addrs: &[&str],
        extra: &[&str],
        logs: &RunDir,
    ) -> Self {
        let env = TestEnv::global();
        let ns = Netns::new(name);
        bridge.attach(&ns, "eth0");
        for a in addrs {
            ns.add_addr("eth0", a);
        }
        let port: u16 = env
            .server_url()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let forward = Forward::loopback_port(&ns, port);
        let log = logs.join(&format!("{name}.log"));
        let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        if let Some(class) = &cluster.class {
            args.extend(["--lb-class".to_owned(), class.clone()]);
        }
        let proc = spawn_speaker(&ns, &cluster.node(name), &cluster.system, &args, &log);
        Self {
            ns,
            proc,
            log,
            args,
            node: cluster.node(name),
            system: cluster.system.clone(),
            _forward: forward,
        }
    }

    /// The speaker for `cluster`'s node `name` in an existing namespace that
    /// reaches the apiserver through `forward` (one a test set up for
    /// another program first: the migration test's MetalLB speaker).
    pub fn start_in(
        cluster: &Cluster,
        ns: Netns,
        forward: Forward,
        name: &str,
        extra: &[&str],
        logs: &RunDir,
    ) -> Self {
        let log = logs.join(&format!("{name}.log"));
        let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        if let Some(class) = &cluster.class {
            args.extend(["--lb-class".to_owned(), class.clone()]);
        }
        let proc = spawn_speaker(&ns, &cluster.node(name), &cluster.system, &args, &log);
        Self {
            ns,
            proc,
            log,
            args,
            node: cluster.node(name),
            system: cluster.system.clone(),
            _forward: forward,
        }
    }

    /// Starts the speaker again after a kill, appending to its log.
    pub fn restart(&mut self) {
        self.proc = spawn_speaker(&self.ns, &self.node, &self.system, &self.args, &self.log);
    }

    pub fn dump_log(&self) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        eprintln!("--- {} ---\n{}", self.log.display(), tail.join("\n"));
    }

    /// The body of `GET /metrics`, empty when the speaker does not answer.
    pub fn metrics(&self) -> String {
        metrics_in(&self.ns)
    }

    pub fn mac(&self) -> String {
        let v: Value = serde_json::from_str(&self.ns.ip(["-j", "link", "show", "eth0"])).unwrap();
        v[0]["address"].as_str().unwrap().to_owned()
    }
}

/// FRR's IPv4 unicast paths for `prefix` (`198.51.100.10/32`).
pub fn paths(frr: &Frr, prefix: &str) -> Vec<Value> {
    paths_af(frr, "ipv4", prefix)
}

/// FRR's paths for `prefix` in `afi` (`ipv4`, `ipv6`) unicast.
pub fn paths_af(frr: &Frr, afi: &str, prefix: &str) -> Vec<Value> {
    let v = frr.vtysh_json(&format!("show bgp {afi} unicast {prefix} json"));
    v["paths"].as_array().cloned().unwrap_or_default()
}

/// The (first) next hop of each path, sorted.
pub fn next_hops(paths: &[Value]) -> Vec<String> {
    let mut hops: Vec<String> = paths
        .iter()
        .map(|p| {
            p["nexthops"][0]["ip"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    hops.sort();
    hops
}

/// Waits for `f`; on timeout prints the nodes' logs and panics.
pub fn eventually<T>(
    what: &str,
    timeout: Duration,
    nodes: &[Node],
    f: impl FnMut() -> Option<T>,
) -> T {
    wait_until(what, timeout, Duration::from_millis(100), f).unwrap_or_else(|e| {
        nodes.iter().for_each(Node::dump_log);
        panic!("{e}")
    })
}

/// Percentile of sorted durations (nearest rank).
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Prints n, p50, p90, p99, min and max of `v`.
pub fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    eprintln!(
        "{name}: n={} p50={:?} p90={:?} p99={:?} min={:?} max={:?}",
        v.len(),
        pct(&v, 50.0),
        pct(&v, 90.0),
        pct(&v, 99.0),
        v[0],
        v[v.len() - 1]
    );
}

/// The wall-clock time of a speaker log line, in seconds since the epoch:
/// its first word, the RFC 3339 UTC timestamp `tracing`'s text format
/// writes (`2026-11-22T21:39:51.123456Z`). The same host's clock as
/// tcpdump's `-tt` and `SystemTime::now()`.
pub fn log_time(line: &str) -> Option<f64> {
    let ts = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.splitn(3, '-').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let s: f64 = t.next()?.parse().ok()?;
    // Days from 1970-01-01 to y-m-day (proleptic Gregorian calendar).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3_600 + min * 60) as f64 + s)
}

/// The lines of `log` that match `steps` in order: for each step, the
/// first line after the previous match that it accepts, with its time.
/// `None` when a step finds no line.
pub fn log_sequence<'a>(
    log: &'a str,
    steps: &[&dyn Fn(&str) -> bool],
) -> Option<Vec<(f64, &'a str)>> {
    let mut lines = log.lines();
    steps
        .iter()
        .map(|step| {
            let line = lines.by_ref().find(|l| step(l))?;
            Some((log_time(line)?, line))
        })
        .collect()
}

/// The value of the `name=` field of a log line.
pub fn log_field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    line[at..]
        .split([' ', '}'])
        .next()
        .map(|v| v.trim_matches('"'))
}
