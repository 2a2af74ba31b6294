//! Switching from a running MetalLB to ferrolb, node by node, while a
//! client sends HTTP requests to a layer 2 service and to a BGP service
//! (issue 20 §4; the procedure is README's "Coming from MetalLB").
//!
//! The MetalLB is MetalLB's own v0.16.2 speaker and controller
//! (`testenv/build-metallb`), in native BGP mode with memberlist, against
//! the testenv apiserver. The lab: three node namespaces on one segment
//! with an FRR router, which peers with every node and has a second link
//! to the client, and the client on the segment too (for layer 2). The
//! apiserver has no kubelet, so the test plays its part: the speaker and
//! controller Pods are objects it writes (Ready while the process runs),
//! and a Pod goes as the kubelet removes one: the process gets SIGTERM and
//! exits, the Pod is reported not Ready, then deleted.
//!
//! kube-proxy's part (IPVS mode) is played by each node: the service IPs
//! are on `lo` (IPVS puts them on the dummy `kube-ipvs0`; this kernel has
//! no dummy module) with `arp_ignore=1`/`arp_announce=2` on eth0,
//! so the kernel never answers ARP for them (only a speaker does), and a
//! small HTTP server on port 80 of each node answers for every service IP
//! with its node's name: the node-local backend a Cluster-policy service
//! reaches. The backends run from start to end, as pods do while their
//! load balancer is replaced.
//!
//! The sequence: MetalLB's controller stops, ferrolb's starts and adopts
//! the IPs from the Services' status (and assigns a new Service another
//! one); then on each node MetalLB's speaker
//! goes and ferrolb's (`--metallb-speaker-labels`, under ferrolb's own
//! roles: `config/rbac/speaker.yaml`) starts, waiting for the router to
//! have that node's path again before the next node. Counted:
//! requests sent and failed (any connect, write or read error, or a
//! response other than 200, within 1 s), the longest time between two
//! successful responses, the IPs before and after, and from a capture of
//! ARP on the client's segment (`arping` asking every 50 ms), every request
//! answered by two MACs (must be none), the longest run of unanswered ones
//! and how often the answering MAC changed.
//!
//! `MIGRATE_ROUNDS=<n>` repeats the whole switch n times in one run
//! (default 1), each round from a fresh MetalLB.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod k8s;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use testnet::{Bridge, Forward, Frr, Netns, Proc, RunDir, Signal, veth_pair};

use crate::k8s::{Cluster, Controller, Node, eventually, next_hops, paths};

const T: Duration = Duration::from_secs(60);
/// The client's interval between requests, per service.
const EVERY: Duration = Duration::from_millis(15);
/// A request not answered within this is failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

const NODES: [(&str, &str); 3] = [
    ("node1", "10.0.0.2"),
    ("node2", "10.0.0.3"),
    ("node3", "10.0.0.4"),
];

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

const METALLB_LABELS: &str = "app=metallb,component=speaker";
const FERROLB_LABELS: &str = "app=ferrolb,component=speaker";

/// MetalLB's binaries: built by `testenv/build-metallb`; a test fails,
/// naming the command, when they are missing.
fn metallb_bin() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testenv/build-metallb");
    let out = std::process::Command::new(&script)
        .arg("--check")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "MetalLB's speaker and controller are not built: run testenv/build-metallb \
         (tests never skip, CI={}): {}",
        std::env::var("CI").unwrap_or_default(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A node namespace: its MetalLB speaker first, ferrolb's after.
struct LabNode {
    name: &'static str,
    ip: &'static str,
    ns: Netns,
    forward: Option<Forward>,
    metallb: Option<Proc>,
    ferrolb: Option<Node>,
    /// When MetalLB's speaker had exited, and when ferrolb's was started
    /// (seconds since the epoch, the clock of tcpdump's `-tt`).
    metallb_exit: Option<f64>,
    ferrolb_start: Option<f64>,
}

impl LabNode {
    /// Which implementations may answer from this node at `t`.
    fn running_at(&self, t: f64) -> BTreeSet<&'static str> {
        let mut out = BTreeSet::new();
        if self.metallb_exit.is_none_or(|x| t <= x) {
            out.insert("MetalLB");
        }
        if self.ferrolb_start.is_some_and(|x| t >= x) {
            out.insert("ferrolb");
        }
        out
    }
}

fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The whole lab, torn down in reverse order of construction.
struct Lab {
    cluster: Cluster,
    run: RunDir,
    bin: PathBuf,
    secret_dir: PathBuf,
    port: u16,
    frr: Frr,
    client: Netns,
    nodes: Vec<LabNode>,
    backends: Vec<Backend>,
    /// ferrolb's speakers' kubeconfig: a token of a service account bound
    /// to ferrolb's own roles (`config/rbac/speaker.yaml`), which may list
    /// but not watch ServiceL2Status objects.
    ferrolb_kubeconfig: PathBuf,
    _router: Netns,
    _bridge: Bridge,
}

/// A kubeconfig for ferrolb's speakers: the service account
/// `ferrolb-speaker` of `cluster`'s system namespace, bound to the roles of
/// `config/rbac/speaker.yaml` (moved into that namespace), with a token
/// from the TokenRequest API.
fn speaker_identity(cluster: &Cluster, run: &RunDir) -> PathBuf {
    let sa = "ferrolb-speaker";
    let system = &cluster.system;
    cluster.apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": sa, "namespace": system}}));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/rbac/speaker.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
        if doc["metadata"]["namespace"] == "metallb-system" {
            doc["metadata"]["namespace"] = json!(system);
        }
        if doc["kind"] == "ClusterRoleBinding" {
            doc["metadata"]["name"] = json!(format!("ferrolb-speaker-{system}"));
        }
        if let Some(subjects) = doc.get_mut("subjects").and_then(Value::as_array_mut) {
            for s in subjects {
                s["name"] = json!(sa);
                s["namespace"] = json!(system);
            }
        }
        cluster.apply(doc);
    }
    let env = testenv::TestEnv::global();
    let out = env
        .kubectl()
        .args(["create", "token", sa, "-n", system, "--duration=2h"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let admin = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    let text: String = admin
        .lines()
        .map(|l| match l.split_once("token: ") {
            Some((indent, _)) => format!("{indent}token: {token}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    assert!(
        text.contains(&token),
        "no token line in testenv's kubeconfig"
    );
    let out = run.join("ferrolb-speaker.kubeconfig");
    std::fs::write(&out, text).unwrap();
    out
}

fn apiserver_port() -> u16 {
    testenv::TestEnv::global()
        .server_url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

impl Lab {
    fn new(tag: &'static str) -> Self {
        let bin = metallb_bin();
        testnet::require_binary("arping");
        testnet::require_binary("tcpdump");
        // A class of its own: a round's MetalLB never sees another round's
        // Services.
        let cluster = Cluster::with_class(tag);
        let run = RunDir::new("migrate-metallb");
        let bridge = Bridge::new("lan");
        let router = Netns::new("rtr");
        bridge.attach(&router, "eth0");
        router.add_addr("eth0", "10.0.0.1/24");
        let client = Netns::new("cli");
        bridge.attach(&client, "eth0");
        client.add_addr("eth0", "10.0.0.10/24");
        veth_pair(&router, "eth1", &client, "eth1");
        router.add_addr("eth1", "10.1.0.1/24");
        client.add_addr("eth1", "10.1.0.2/24");
        router.sysctl("net.ipv4.ip_forward", "1");
        client.add_route("198.51.100.0/24", "10.1.0.1");
        let frr = Frr::start(&router, FRR_CONF);
        let port = apiserver_port();
        let nodes = NODES
            .iter()
            .map(|(name, ip)| {
                let ns = Netns::new(name);
                bridge.attach(&ns, "eth0");
                ns.add_addr("eth0", &format!("{ip}/24"));
                ns.add_route("default", "10.0.0.1");
                // kube-proxy's IPVS mode: service IPs on a device other
                // than eth0 (lo here: this kernel has no dummy module),
                // never answered by the kernel's ARP.
                ns.link_up("lo");
                for key in ["all", "eth0"] {
                    ns.sysctl(&format!("net.ipv4.conf.{key}.arp_ignore"), "1");
                    ns.sysctl(&format!("net.ipv4.conf.{key}.arp_announce"), "2");
                }
                let forward = Forward::loopback_port(&ns, port);
                LabNode {
                    name,
                    ip,
                    ns,
                    forward: Some(forward),
                    metallb: None,
                    ferrolb: None,
                    metallb_exit: None,
                    ferrolb_start: None,
                }
            })
            .collect();
        let secret_dir = run.join("memberlist");
        std::fs::create_dir_all(&secret_dir).unwrap();
        std::fs::write(secret_dir.join("secretkey"), "migrate-test-key").unwrap();
        let backends = Vec::new();
        let ferrolb_kubeconfig = speaker_identity(&cluster, &run);
        let mut lab = Self {
            cluster,
            run,
            bin,
            secret_dir,
            port,
            frr,
            client,
            nodes,
            backends,
            ferrolb_kubeconfig,
            _router: router,
            _bridge: bridge,
        };
        lab.apply_objects();
        lab.backends = lab
            .nodes
            .iter()
            .map(|n| Backend::start(&n.ns, n.name))
            .collect();
        lab
    }

    fn apply_objects(&self) {
        let c = &self.cluster;
        for (name, ip) in NODES {
            c.apply(c.node_object(name, ip, json!({})));
        }
        for doc in [
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                   "metadata": {"name": "l2-pool", "namespace": c.system},
                   "spec": {"addresses": ["10.0.0.200-10.0.0.209"]}}),
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
                   "metadata": {"name": "l2", "namespace": c.system},
                   "spec": {"ipAddressPools": ["l2-pool"]}}),
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                   "metadata": {"name": "bgp-pool", "namespace": c.system},
                   "spec": {"addresses": ["198.51.100.0/24"]}}),
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
                   "metadata": {"name": "bgp", "namespace": c.system},
                   "spec": {"ipAddressPools": ["bgp-pool"]}}),
            json!({"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
                   "metadata": {"name": "router", "namespace": c.system},
                   "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": "10.0.0.1"}}),
        ] {
            c.apply(doc);
        }
        for (svc, pool) in [("web-l2", "l2-pool"), ("web-bgp", "bgp-pool")] {
            let mut s = c.service(svc, "Cluster");
            s["metadata"]["annotations"] = json!({"metallb.io/address-pool": pool});
            c.apply(s);
            c.apply(c.endpoints(svc, &["node1", "node2", "node3"]));
        }
    }

    /// A Pod object as the kubelet would show it, Ready, on `node`.
    fn pod(&self, name: &str, labels: Value, node: Option<&LabNode>) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "test"}]});
        let mut status = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(self.cluster.node(n.name));
            spec["hostNetwork"] = json!(true);
            status["podIP"] = json!(n.ip);
            status["podIPs"] = json!([{"ip": n.ip}]);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.cluster.system, "labels": labels},
               "spec": spec, "status": status})
    }

    /// The kubelet's part when a Pod goes: its process has exited; the
    /// Pod is reported not Ready, then removed.
    fn remove_pod(&self, name: &str) {
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.cluster.client.clone(), &self.cluster.system);
        self.cluster.rt.block_on(async {
            api.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [
                    {"type": "Ready", "status": "False"}]}})),
            )
            .await
            .unwrap();
            api.delete(name, &DeleteParams::default().grace_period(0))
                .await
                .unwrap();
        });
    }

    fn metallb_env(&self, cmd: &mut std::process::Command) {
        let env = testenv::TestEnv::global();
        cmd.env("KUBECONFIG", env.kubeconfig_path())
            .env("METALLB_NAMESPACE", &self.cluster.system)
            .env("METALLB_BGP_TYPE", "native")
            .args(["--port", "0", "--log-level", "info"])
            .args(["--lb-class", self.cluster.class.as_deref().unwrap()]);
    }

    fn start_metallb_controller(&self) -> (Netns, Forward, Proc) {
        self.cluster.apply(self.pod(
            "metallb-controller",
            json!({"app": "metallb", "component": "controller"}),
            None,
        ));
        let ns = Netns::new("mctl");
        let forward = Forward::loopback_port(&ns, self.port);
        let log = self.run.join("metallb-controller.log");
        let mut cmd = ns.command(self.bin.join("controller"));
        self.metallb_env(&mut cmd);
        cmd.env("METALLB_POD_NAME", "metallb-controller")
            .args(["--webhook-mode", "disabled", "--disable-cert-rotation"])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let proc = ns.spawn_command(&mut cmd);
        (ns, forward, proc)
    }

    fn start_metallb_speaker(&mut self, i: usize) {
        let pod = format!("metallb-speaker-{}", self.nodes[i].name);
        self.cluster.apply(self.pod(
            &pod,
            json!({"app": "metallb", "component": "speaker"}),
            Some(&self.nodes[i]),
        ));
        let n = &self.nodes[i];
        let log = self.run.join(&format!("metallb-{}.log", n.name));
        let mut cmd = n.ns.command(self.bin.join("speaker"));
        self.metallb_env(&mut cmd);
        cmd.env("METALLB_NODE_NAME", self.cluster.node(n.name))
            .env("METALLB_POD_NAME", &pod)
            .env("METALLB_ML_BIND_ADDR", n.ip)
            .env("METALLB_ML_LABELS", METALLB_LABELS)
            .env("METALLB_ML_SECRET_KEY_PATH", &self.secret_dir)
            .stdout(std::process::Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap(),
            );
        let proc = n.ns.spawn_command(&mut cmd);
        self.nodes[i].metallb = Some(proc);
    }

    /// MetalLB's speaker on node `i` goes, as its Pod would.
    fn stop_metallb_speaker(&mut self, i: usize) {
        let mut proc = self.nodes[i].metallb.take().unwrap();
        proc.signal(Signal::SIGTERM);
        let exited = testnet::wait_until(
            "MetalLB's speaker to exit",
            T,
            Duration::from_millis(10),
            || proc.try_status(),
        );
        assert!(exited.is_ok(), "MetalLB's speaker did not exit on SIGTERM");
        self.nodes[i].metallb_exit = Some(epoch_now());
        self.remove_pod(&format!("metallb-speaker-{}", self.nodes[i].name));
    }

    /// ferrolb's speaker on node `i`, coexisting with MetalLB's.
    fn start_ferrolb_speaker(&mut self, i: usize) {
        let forward = self.nodes[i].forward.take().unwrap();
        self.nodes[i].ferrolb_start = Some(epoch_now());
        let n = &self.nodes[i];
        self.cluster.apply(self.pod(
            &format!("ferrolb-speaker-{}", n.name),
            json!({"app": "ferrolb", "component": "speaker"}),
            Some(n),
        ));
        let bind = format!("{}:7947", n.ip);
        let pod = format!("ferrolb-speaker-{}", n.name);
        let kubeconfig = self.ferrolb_kubeconfig.to_str().unwrap();
        let node = Node::start_in(
            &self.cluster,
            n.ns.clone(),
            forward,
            n.name,
            &[
                "--metallb-speaker-labels",
                METALLB_LABELS,
                "--memberlist-labels",
                FERROLB_LABELS,
                "--memberlist-bind",
                &bind,
                "--pod-name",
                &pod,
                "--kubeconfig",
                kubeconfig,
            ],
            &self.run,
        );
        self.nodes[i].ferrolb = Some(node);
    }

    fn ferrolb_nodes(&self) -> Vec<&Node> {
        self.nodes
            .iter()
            .filter_map(|n| n.ferrolb.as_ref())
            .collect()
    }

    fn dump_logs(&self) {
        self.run.dump_logs("migrate-metallb");
        self.frr.dump_logs();
    }

    /// The router's next hops for `prefix`.
    fn hops(&self, prefix: &str) -> Vec<String> {
        next_hops(&paths(&self.frr, prefix))
    }

    fn wait<V>(&self, what: &str, f: impl FnMut() -> Option<V>) -> V {
        testnet::wait_until(what, T, Duration::from_millis(50), f).unwrap_or_else(|e| {
            self.dump_logs();
            panic!("{e}")
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for b in &self.backends {
            b.stop.store(true, Ordering::Relaxed);
        }
        for n in &mut self.nodes {
            if let Some(p) = n.metallb.as_mut() {
                p.stop();
            }
        }
    }
}

/// A node's HTTP backend on port 80, answering with the node's name.
struct Backend {
    stop: Arc<AtomicBool>,
    _thread: JoinHandle<()>,
}

impl Backend {
    fn start(ns: &Netns, name: &'static str) -> Self {
        let listener = ns.run_in(|| TcpListener::bind("0.0.0.0:80").unwrap());
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        conn.set_nonblocking(false).unwrap();
                        conn.set_read_timeout(Some(REQUEST_TIMEOUT)).unwrap();
                        let mut buf = [0u8; 1024];
                        let mut got = Vec::new();
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
                            name.len()
                        );
                        let _ = conn.write_all(reply.as_bytes());
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Self {
            stop,
            _thread: thread,
        }
    }
}

/// One request's outcome.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    /// The answering node, or the error.
    result: Result<String, String>,
}

/// Sends a request to `addr` every [`EVERY`] from the client namespace
/// until stopped; returns every outcome.
fn load(client: &Netns, addr: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<Vec<Sample>> {
    let client = client.clone();
    std::thread::spawn(move || {
        client.run_in(move || {
            let mut out = Vec::new();
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let at = Instant::now();
                out.push(Sample {
                    at,
                    result: request(addr),
                });
                next += EVERY;
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                } else {
                    next = Instant::now();
                }
            }
            out
        })
    })
}

fn request(addr: SocketAddr) -> Result<String, String> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut c =
        TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    let left = deadline
        .checked_duration_since(Instant::now())
        .ok_or("connect took the whole timeout")?;
    c.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
    c.write_all(b"GET / HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut body = String::new();
    c.read_to_string(&mut body)
        .map_err(|e| format!("read: {e}"))?;
    let (head, node) = body.split_once("\r\n\r\n").ok_or("no header end")?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("status: {head}"));
    }
    Ok(node.to_owned())
}

/// What the samples of one service say.
#[derive(Debug)]
struct Tally {
    sent: usize,
    failed: Vec<(Duration, String)>,
    max_gap: Duration,
    served_by: BTreeMap<String, usize>,
}

fn tally(samples: &[Sample], start: Instant) -> Tally {
    let mut failed = Vec::new();
    let mut served_by = BTreeMap::new();
    let mut last_ok: Option<Instant> = None;
    let mut max_gap = Duration::ZERO;
    for s in samples {
        match &s.result {
            Ok(node) => {
                *served_by.entry(node.clone()).or_insert(0) += 1;
                if let Some(prev) = last_ok {
                    max_gap = max_gap.max(s.at - prev);
                }
                last_ok = Some(s.at);
            }
            Err(e) => failed.push((s.at - start, e.clone())),
        }
    }
    Tally {
        sent: samples.len(),
        failed,
        max_gap,
        served_by,
    }
}

/// What the client's segment carried for the layer 2 IP (a `tcpdump` of
/// ARP on the client's eth0): per request from the client (`arping` every
/// 50 ms, and the kernel's own), the MACs that answered it before the next
/// request.
#[derive(Debug, Default)]
struct ArpTally {
    requests: u64,
    /// Requests answered by two or more MACs: (time, MACs).
    doubled: Vec<(f64, BTreeSet<String>)>,
    unanswered: u64,
    /// The longest run of consecutive unanswered requests.
    longest_silence: u64,
    /// The answering MAC, run-length encoded: (MAC, requests in a row).
    answers: Vec<(String, u64)>,
}

impl ArpTally {
    /// How often the answering MAC changed (the IP moved to another node).
    fn moves(&self) -> u64 {
        self.answers.len().saturating_sub(1) as u64
    }
}

/// Parses `tcpdump -n -e -tt` lines of ARP for `ip` on a client whose
/// address is `client`: a request is `Request who-has <ip> tell <client>`,
/// an answer `Reply <ip> is-at <mac>` sent to the client (not broadcast).
fn arp_tally(text: &str, ip: &str, client: &str) -> ArpTally {
    let mut t = ArpTally::default();
    let request = format!("Request who-has {ip} tell {client},");
    let reply = format!("Reply {ip} is-at ");
    let mut current: Option<(f64, BTreeSet<String>)> = None;
    let mut run = 0;
    let mut close = |t: &mut ArpTally, c: Option<(f64, BTreeSet<String>)>| {
        let Some((at, macs)) = c else { return };
        t.requests += 1;
        if macs.is_empty() {
            t.unanswered += 1;
            run += 1;
            t.longest_silence = t.longest_silence.max(run);
            return;
        }
        run = 0;
        if macs.len() > 1 {
            t.doubled.push((at, macs.clone()));
        }
        let mac = macs.into_iter().collect::<Vec<_>>().join("+");
        match t.answers.last_mut() {
            Some((last, n)) if *last == mac => *n += 1,
            _ => t.answers.push((mac, 1)),
        }
    };
    for line in text.lines() {
        let at: f64 = line
            .split_whitespace()
            .next()
            .and_then(|w| w.parse().ok())
            .unwrap_or_default();
        if line.contains(&request) {
            close(&mut t, current.take());
            current = Some((at, BTreeSet::new()));
        } else if let Some(rest) = line.split_once(&reply).map(|x| x.1)
            && !line.contains("> ff:ff:ff:ff:ff:ff")
        {
            let mac = rest.split([',', ' ']).next().unwrap_or_default().to_owned();
            if let Some((_, macs)) = current.as_mut() {
                macs.insert(mac);
            }
        }
    }
    close(&mut t, current.take());
    t
}

#[test]
fn arp_capture_is_read_per_request() {
    let req = |t: &str| {
        format!(
            "{t} 02:00:00:00:00:10 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: \
             Request who-has 10.0.0.200 tell 10.0.0.10, length 28\n"
        )
    };
    let rep = |t: &str, mac: &str| {
        format!(
            "{t} {mac} > 02:00:00:00:00:10, ethertype ARP (0x0806), length 42: \
             Reply 10.0.0.200 is-at {mac}, length 28\n"
        )
    };
    let garp = "1.31 02:00:00:00:00:03 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), \
                length 42: Reply 10.0.0.200 is-at 02:00:00:00:00:03, length 28\n";
    let text = [
        req("1.00"),
        rep("1.01", "02:00:00:00:00:01"),
        req("1.05"),
        req("1.10"),
        req("1.15"),
        rep("1.16", "02:00:00:00:00:02"),
        req("1.20"),
        rep("1.21", "02:00:00:00:00:01"),
        rep("1.21", "02:00:00:00:00:02"),
        req("1.30"),
        garp.to_owned(),
        rep("1.31", "02:00:00:00:00:02"),
    ]
    .concat();
    let t = arp_tally(&text, "10.0.0.200", "10.0.0.10");
    assert_eq!(t.requests, 6);
    assert_eq!(t.unanswered, 2);
    assert_eq!(t.longest_silence, 2);
    assert_eq!(t.doubled.len(), 1);
    assert_eq!(t.doubled[0].0, 1.20);
    // 01 -> 02 -> 01+02 -> 02; the gratuitous reply is not an answer.
    assert_eq!(t.moves(), 3);
}

fn node_mac(ns: &Netns) -> String {
    let v: Value = serde_json::from_str(&ns.ip(["-j", "link", "show", "eth0"])).unwrap();
    v[0]["address"].as_str().unwrap().to_owned()
}

fn ingress(cluster: &Cluster, svc: &str) -> Vec<String> {
    cluster.ingress(svc)
}

/// One whole switch from MetalLB to ferrolb under load; returns the
/// report line.
fn switch_once(round: usize) -> String {
    let mut lab = Lab::new(["m1", "m2", "m3", "m4", "m5"][round % 5]);
    let (mctl_ns, mctl_forward, mut mctl) = lab.start_metallb_controller();
    for i in 0..lab.nodes.len() {
        lab.start_metallb_speaker(i);
    }
    let c = &lab.cluster;
    let (l2_ip, bgp_ip) = lab.wait("MetalLB's controller to assign both IPs", || {
        let l2 = ingress(c, "web-l2");
        let bgp = ingress(c, "web-bgp");
        (l2.len() == 1 && bgp.len() == 1).then(|| (l2[0].clone(), bgp[0].clone()))
    });
    for n in &lab.nodes {
        for ip in [&l2_ip, &bgp_ip] {
            n.ns.ip(["addr", "add", &format!("{ip}/32"), "dev", "lo"]);
        }
    }
    let bgp_prefix = format!("{bgp_ip}/32");
    let all_hops: Vec<String> = NODES.iter().map(|(_, ip)| (*ip).to_owned()).collect();
    lab.wait("the router's three paths from MetalLB", || {
        (lab.hops(&bgp_prefix) == all_hops).then_some(())
    });
    // One MetalLB speaker answers ARP, and its status says so.
    let owner = lab.wait("MetalLB's ServiceL2Status", || {
        let s = lab.cluster.statuses::<api::v1beta1::ServiceL2Status>();
        (s.len() == 1).then(|| s[0].0.clone())
    });
    eprintln!("MetalLB answers for {l2_ip} from {owner}; {bgp_ip} has ECMP paths {all_hops:?}");

    // The load, and the ARP watch.
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let l2_load = load(
        &lab.client,
        SocketAddr::new(l2_ip.parse().unwrap(), 80),
        Arc::clone(&stop),
    );
    let bgp_load = load(
        &lab.client,
        SocketAddr::new(bgp_ip.parse().unwrap(), 80),
        Arc::clone(&stop),
    );
    let arp_log = lab.run.join("arp.tcpdump");
    let mut tcpdump = lab.client.spawn_command(
        lab.client
            .command("tcpdump")
            .args(["-l", "-n", "-e", "-tt", "-i", "eth0", "arp"])
            .stdout(std::fs::File::create(&arp_log).unwrap())
            .stderr(std::process::Stdio::null()),
    );
    lab.wait("tcpdump to capture", || {
        std::fs::metadata(&arp_log).ok()?;
        lab.client
            .run(["cat", "/proc/net/packet"])
            .lines()
            .nth(1)
            .map(|_| ())
    });
    let mut arping = lab.client.spawn_command(
        lab.client
            .command("arping")
            .args(["-q", "-i", "eth0", "-W", "0.05", &l2_ip])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    let settle = Duration::from_secs(2);
    std::thread::sleep(settle);

    // 1. The controller: MetalLB's stops, then ferrolb's starts and
    // adopts the IPs from status.
    mctl.signal(Signal::SIGTERM);
    lab.wait("MetalLB's controller to exit", || mctl.try_status());
    lab.remove_pod("metallb-controller");
    drop((mctl_forward, mctl_ns));
    let controller = Controller::start(&lab.cluster, "ferrolb-controller");
    // ferrolb's controller serves: a new Service gets an address, one the
    // two MetalLB assigned do not hold.
    let mut s = lab.cluster.service("web-new", "Cluster");
    s["metadata"]["annotations"] = json!({"metallb.io/address-pool": "l2-pool"});
    lab.cluster.apply(s);
    let new_ip = lab.wait("ferrolb's controller to assign a new Service", || {
        ingress(&lab.cluster, "web-new").first().cloned()
    });
    assert_ne!(new_ip, l2_ip, "a new Service got the address of a live one");
    std::thread::sleep(settle);

    // 2. Each speaker, node by node.
    for i in 0..lab.nodes.len() {
        let t0 = Instant::now();
        lab.stop_metallb_speaker(i);
        lab.start_ferrolb_speaker(i);
        let hop = lab.nodes[i].ip.to_owned();
        lab.wait("the router's path from ferrolb's new speaker", || {
            lab.hops(&bgp_prefix).contains(&hop).then_some(())
        });
        eprintln!(
            "{}: MetalLB -> ferrolb in {:?} (path back at the router)",
            lab.nodes[i].name,
            t0.elapsed()
        );
        std::thread::sleep(settle);
    }
    // Under ferrolb's own roles the ServiceL2Status objects could not be
    // watched: the feed listed them instead.
    for n in lab.ferrolb_nodes() {
        let log = std::fs::read_to_string(&n.log).unwrap();
        assert!(
            log.lines()
                .any(|l| l.contains("watching is forbidden") && l.contains("ServiceL2Status")),
            "{}: the MetalLB feed did not fall back to listing",
            n.node
        );
    }
    // ferrolb answers for the layer 2 IP now, from exactly one node.
    let nodes = lab.ferrolb_nodes();
    let answering = eventually("one ferrolb speaker answers for the L2 IP", T, &[], || {
        let a: Vec<&str> = nodes
            .iter()
            .filter(|n| n.metrics().contains("protocol=\"layer2\""))
            .map(|n| n.node.as_str())
            .collect();
        (a.len() == 1).then(|| a[0].to_owned())
    });
    std::thread::sleep(settle);
    stop.store(true, Ordering::Relaxed);
    let l2 = tally(&l2_load.join().unwrap(), start);
    let bgp = tally(&bgp_load.join().unwrap(), start);
    let _ = arping.stop();
    // Replies to the last requests, then tcpdump's buffered lines.
    std::thread::sleep(Duration::from_millis(100));
    tcpdump.signal(Signal::SIGINT);
    let _ = tcpdump.stop();
    let arp = arp_tally(
        &std::fs::read_to_string(&arp_log).unwrap(),
        &l2_ip,
        "10.0.0.10",
    );
    let macs: BTreeMap<String, &str> = lab
        .nodes
        .iter()
        .map(|n| (node_mac(&n.ns), n.name))
        .collect();
    // A request answered twice: by which implementations? MetalLB's own
    // handover overlaps (its leaving speaker answers until it exits, after
    // its memberlist has left and another MetalLB speaker took over) are
    // counted apart; MetalLB and ferrolb answering together must never be.
    let by_mac: BTreeMap<String, &LabNode> =
        lab.nodes.iter().map(|n| (node_mac(&n.ns), n)).collect();
    let (mut mixed, mut metallb_only, mut ferrolb_only) = (Vec::new(), 0, 0);
    for (at, doubled) in &arp.doubled {
        let kinds: BTreeSet<&str> = doubled
            .iter()
            .filter_map(|m| by_mac.get(m))
            .flat_map(|n| n.running_at(*at))
            .collect();
        match (kinds.contains("MetalLB"), kinds.contains("ferrolb")) {
            (true, false) => metallb_only += 1,
            (false, true) => ferrolb_only += 1,
            _ => mixed.push((*at, doubled.clone(), kinds)),
        }
    }
    let answers: Vec<String> = arp
        .answers
        .iter()
        .map(|(mac, n)| {
            let who: Vec<&str> = mac
                .split('+')
                .map(|m| macs.get(m).copied().unwrap_or(m))
                .collect();
            format!("{} x{n}", who.join("+"))
        })
        .collect();
    let elapsed = start.elapsed();

    let (l2_after, bgp_after) = (
        ingress(&lab.cluster, "web-l2"),
        ingress(&lab.cluster, "web-bgp"),
    );
    let report = format!(
        "round {round}: {:.1} s; L2 {l2_ip}: sent {} failed {} {:?} max gap {:?} served by {:?}; \
         BGP {bgp_ip}: sent {} failed {} {:?} max gap {:?} served by {:?}; \
         ARP: {} requests, answered by two MACs: {} (MetalLB and ferrolb {}, MetalLB's own handover {metallb_only}, ferrolb's own {ferrolb_only}), {} unanswered (longest run {} x 50 ms), \
         the IP moved {} times ({}); \
         ferrolb answers L2 from {answering}",
        elapsed.as_secs_f64(),
        l2.sent,
        l2.failed.len(),
        l2.failed,
        l2.max_gap,
        l2.served_by,
        bgp.sent,
        bgp.failed.len(),
        bgp.failed,
        bgp.max_gap,
        bgp.served_by,
        arp.requests,
        arp.doubled.len(),
        mixed.len(),
        arp.unanswered,
        arp.longest_silence,
        arp.moves(),
        answers.join(", "),
    );
    eprintln!("{report}");
    // A move resets what is in flight: the router's next-hop set for the
    // BGP IP changes twice per node (MetalLB's path gone, ferrolb's back),
    // and each change re-hashes flows (Linux ECMP, hash-threshold); the
    // layer 2 IP moves when its owner leaves (MetalLB re-elects, or
    // ferrolb takes over elsewhere). A connection open at that instant
    // lands on another node, whose kernel resets it, as kube-proxy's would.
    // The client has one request open at a time, so a move breaks at most
    // one, and only by a reset: any other failure (a timeout, a refusal)
    // is the migration's fault.
    let bgp_changes = 2 * lab.nodes.len() as u64;
    let within = |t: &Tally, moves: u64| {
        t.failed.len() as u64 <= moves && t.failed.iter().all(|(_, e)| e.contains("reset"))
    };
    let (l2_ok, bgp_ok) = (within(&l2, arp.moves()), within(&bgp, bgp_changes));
    let ok = l2_ok
        && bgp_ok
        && mixed.is_empty()
        && ferrolb_only == 0
        && l2_after == [l2_ip.clone()]
        && bgp_after == [bgp_ip.clone()];
    if !ok {
        lab.dump_logs();
    }
    assert!(
        l2_ok,
        "L2 failed requests beyond one reset per move of the IP ({}): {:?}",
        arp.moves(),
        l2.failed
    );
    assert!(
        bgp_ok,
        "BGP failed requests beyond one reset per next-hop change ({bgp_changes}): {:?}",
        bgp.failed
    );
    assert!(
        mixed.is_empty(),
        "ARP requests answered by MetalLB and ferrolb together: {mixed:?}"
    );
    assert_eq!(
        ferrolb_only, 0,
        "ARP requests answered by two ferrolb speakers"
    );
    assert_eq!(l2_after, [l2_ip], "the L2 IP changed");
    assert_eq!(bgp_after, [bgp_ip], "the BGP IP changed");
    // Every request went to some backend; the L2 ones all to one node at a
    // time: they were served by at most the two nodes MetalLB's and
    // ferrolb's winners are.
    assert!(l2.sent > 0 && bgp.sent > 0);
    controller.stop();
    report
}

#[test]
fn switch_from_metallb_node_by_node_under_load() {
    let rounds: usize = std::env::var("MIGRATE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let reports: Vec<String> = (0..rounds).map(switch_once).collect();
    for r in &reports {
        eprintln!("{r}");
    }
}
