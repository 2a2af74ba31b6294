//! Switching from a running MetalLB to ferrolb, node by node, while a
//! client sends HTTP requests to a layer 2 service and to a BGP service
//! (issue 20 §4; the procedure is README's "Coming from MetalLB").
//!
//! The MetalLB is MetalLB's own v0.16.2 speaker and controller
//! (`testenv/build-metallb`), with memberlist, against the testenv
//! apiserver; its speakers speak BGP in native mode in one test, and in
//! FRR mode with the BGPPeer's `enableGracefulRestart` in the other (each
//! node then runs FRR's bgpd and zebra, configured by MetalLB's speaker
//! through `frr-reload.py`, and stopped with it). The lab: three node
//! namespaces on one segment with an FRR router, which peers with every
//! node and has a second link to the client, and the client on the segment
//! too (for layer 2). The apiserver has no kubelet, so the test plays its
//! part: the speaker and controller Pods are objects it writes (Ready while
//! the process runs), and a Pod goes as the kubelet removes one: the
//! process gets SIGTERM and exits, the Pod is reported not Ready, then
//! deleted.
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
//! The sequence (docs/src/metallb.md, "Node by node, without an
//! outage"): ferrolb's speakers start on every node beside MetalLB's
//! (`--metallb-speaker-labels`, `--metallb-namespace`, their configuration
//! a copy in a namespace of their own, under ferrolb's own roles:
//! `config/rbac/speaker.yaml`, and a Role to read MetalLB's speaker Pods,
//! statuses and L2Advertisements), leaving layer 2 to MetalLB and holding
//! their BGP sessions; MetalLB's controller stops, ferrolb's starts and
//! adopts the IPs from the Services' status (and assigns a new Service
//! another one); MetalLB's L2Advertisement is deleted, so that every
//! MetalLB speaker withdraws at once without re-electing and ferrolb's
//! speaker on the same node (the same election) answers; then on each node
//! MetalLB's speaker goes and ferrolb's held session comes up, waiting for
//! the router to have that node's path again before the next node.
//! Counted:
//! requests sent and failed (any connect, write or read error, or a
//! response other than 200, within 1 s), the longest time between two
//! successful responses, the IPs before and after, and from a capture of
//! ARP on the client's segment (`arping` asking every 50 ms), every request
//! answered by two MACs (must be none), the longest run of unanswered ones
//! and how often the answering MAC changed (must be never: the address
//! stays on its node). The services' TCP (on the client's segment, and
//! where the router sends it to the nodes) and the router's route changes
//! are captured too: every failed request must be a connection that moved
//! to another node, which reset it; no layer 2 request may fail, and under
//! graceful restart no BGP request may fail and the router's next hops may
//! not change.
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
use sha2::{Digest, Sha256};
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

/// How MetalLB's speakers speak BGP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetallbBgp {
    /// MetalLB's own Go BGP (`METALLB_BGP_TYPE=native`): it refuses
    /// `enableGracefulRestart`, and its session ends when its process does.
    Native,
    /// `METALLB_BGP_TYPE=frr`: MetalLB's speaker writes an FRR
    /// configuration that FRR's bgpd in the same Pod (here: the node's
    /// namespace) applies through `frr-reload.py`, as MetalLB's reloader
    /// container does; the BGPPeer has `enableGracefulRestart: true`.
    FrrGracefulRestart,
}

/// FRR's `frr-reload.py` (Debian: frr-pythontools), which MetalLB's
/// reloader container runs.
const FRR_RELOAD: &str = "/usr/lib/frr/frr-reload.py";

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
    /// In [`MetallbBgp::FrrGracefulRestart`]: the FRR of MetalLB's Pod
    /// and the reloader that applies MetalLB's configuration to it.
    metallb_frr: Option<(Frr, Proc)>,
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
    bgp: MetallbBgp,
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
    /// ferrolb's own namespace: its copy of the configuration, its speaker
    /// Pods, status objects and the controller's Lease.
    ferrolb_ns: String,
    router: Netns,
    _bridge: Bridge,
}

/// A kubeconfig for ferrolb's speakers: the service account
/// `ferrolb-speaker` of ferrolb's namespace `system`, bound to the roles of
/// `config/rbac/speaker.yaml` (moved into that namespace) and, in
/// MetalLB's namespace, to [`metallb_reader`], with a token from the
/// TokenRequest API.
fn speaker_identity(cluster: &Cluster, system: &str, run: &RunDir) -> PathBuf {
    let sa = "ferrolb-speaker";
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
    for doc in metallb_reader(&cluster.system, sa, system) {
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

/// What ferrolb's speakers read in MetalLB's namespace `metallb` while
/// they coexist (`--metallb-namespace`): MetalLB's speaker Pods, its
/// ServiceL2Status objects (listed only: ferrolb's roles grant no watch on
/// them) and its L2Advertisements. The shipped Role and RoleBinding,
/// `config/migrate-from-metallb/metallb_reader.yaml` (and the chart's), are
/// these ([`metallb_reader_is_the_shipped_one`]).
fn metallb_reader(metallb: &str, sa: &str, sa_ns: &str) -> [Value; 2] {
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "ferrolb-metallb-reader", "namespace": metallb},
               "rules": [
                   {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                   {"apiGroups": ["metallb.io"], "resources": ["l2advertisements"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["metallb.io"], "resources": ["servicel2statuses"],
                    "verbs": ["list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "ferrolb-metallb-reader", "namespace": metallb},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "ferrolb-metallb-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]}),
    ]
}

/// The Role and RoleBinding this test applies are the ones shipped for
/// the procedure, but for their labels.
#[test]
fn metallb_reader_is_the_shipped_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config/migrate-from-metallb/metallb_reader.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let shipped: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap()
        .into_iter()
        .filter(|d: &Value| !d.is_null())
        .map(|mut d| {
            d["metadata"].as_object_mut().unwrap().remove("labels");
            d
        })
        .collect();
    assert_eq!(
        shipped,
        metallb_reader("metallb-system", "speaker", "ferrolb-system"),
        "{}",
        path.display()
    );
}

/// The metallb.io configuration of the lab, in namespace `ns`: a layer 2
/// pool and its L2Advertisement `l2`, a BGP pool and its advertisement,
/// and the router as BGPPeer (`peer` its spec).
fn config_objects(ns: &str, peer: &Value) -> [Value; 5] {
    [
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
               "metadata": {"name": "l2-pool", "namespace": ns},
               "spec": {"addresses": ["10.0.0.200-10.0.0.209"]}}),
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
               "metadata": {"name": "l2", "namespace": ns},
               "spec": {"ipAddressPools": ["l2-pool"]}}),
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
               "metadata": {"name": "bgp-pool", "namespace": ns},
               "spec": {"addresses": ["198.51.100.0/24"]}}),
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": "bgp", "namespace": ns},
               "spec": {"ipAddressPools": ["bgp-pool"]}}),
        json!({"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
               "metadata": {"name": "router", "namespace": ns},
               "spec": peer}),
    ]
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
    fn new(tag: &'static str, bgp: MetallbBgp) -> Self {
        let bin = metallb_bin();
        if bgp == MetallbBgp::FrrGracefulRestart {
            testnet::require_binary(FRR_RELOAD);
        }
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
                    metallb_frr: None,
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
        let ferrolb_ns = cluster.rt.block_on(async {
            testenv::TestEnv::global()
                .fresh_namespace("ferrolb")
                .await
                .unwrap()
        });
        let ferrolb_kubeconfig = speaker_identity(&cluster, &ferrolb_ns, &run);
        let mut lab = Self {
            bgp,
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
            ferrolb_ns,
            router,
            _bridge: bridge,
        };
        lab.apply_objects(bgp);
        lab.backends = lab
            .nodes
            .iter()
            .map(|n| Backend::start(&n.ns, n.name))
            .collect();
        lab
    }

    fn apply_objects(&self, bgp: MetallbBgp) {
        let mut peer = json!({"myASN": 64512, "peerASN": 64500, "peerAddress": "10.0.0.1"});
        if bgp == MetallbBgp::FrrGracefulRestart {
            peer["enableGracefulRestart"] = json!(true);
        }
        let c = &self.cluster;
        for (name, ip) in NODES {
            c.apply(c.node_object(name, ip, json!({})));
        }
        // MetalLB's configuration in its namespace, and ferrolb's copy in
        // its own.
        for ns in [&c.system, &self.ferrolb_ns] {
            for doc in config_objects(ns, &peer) {
                c.apply(doc);
            }
        }
        for (svc, pool) in [("web-l2", "l2-pool"), ("web-bgp", "bgp-pool")] {
            let mut s = c.service(svc, "Cluster");
            s["metadata"]["annotations"] = json!({"metallb.io/address-pool": pool});
            c.apply(s);
            c.apply(c.endpoints(svc, &["node1", "node2", "node3"]));
        }
    }

    /// A Pod object as the kubelet would show it, Ready, on `node`, in
    /// MetalLB's namespace.
    fn pod(&self, name: &str, labels: Value, node: Option<&LabNode>) -> Value {
        self.pod_in(&self.cluster.system, name, labels, node)
    }

    /// As [`Lab::pod`], in namespace `ns`.
    fn pod_in(&self, ns: &str, name: &str, labels: Value, node: Option<&LabNode>) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "test"}]});
        let mut status = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(self.cluster.node(n.name));
            spec["hostNetwork"] = json!(true);
            status["podIP"] = json!(n.ip);
            status["podIPs"] = json!([{"ip": n.ip}]);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns, "labels": labels},
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
            .env(
                "METALLB_BGP_TYPE",
                match self.bgp {
                    MetallbBgp::Native => "native",
                    MetallbBgp::FrrGracefulRestart => "frr",
                },
            )
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

    /// MetalLB's FRR container and its reloader on node `i`: bgpd (and
    /// zebra) with an empty configuration, and a reloader that applies the
    /// file MetalLB's speaker writes with `frr-reload.py --reload` on each
    /// SIGHUP (MetalLB's reloader also passes `--overwrite`, which saves the
    /// running configuration to FRR's config directory: left out, so that
    /// the test writes nothing outside its run directory). Returns the
    /// speaker's `FRR_CONFIG_FILE` and `FRR_RELOADER_PID_FILE`.
    fn start_metallb_frr(&mut self, i: usize) -> (PathBuf, PathBuf) {
        let n = &self.nodes[i];
        let frr = Frr::start(&n.ns, "");
        let dir = self.run.join(&format!("metallb-frr-{}", n.name));
        std::fs::create_dir_all(&dir).unwrap();
        let (conf, pid) = (dir.join("frr.conf"), dir.join("reloader.pid"));
        let script = format!(
            "printf %s $$ > {pid}\n\
             reload() {{ python3 {FRR_RELOAD} --reload --stdout --vty_socket {vty} \
             --confdir {dir} --rundir {dir} {conf} >> {dir}/reloads.log 2>&1; }}\n\
             trap reload HUP\n\
             while :; do sleep 0.2 & wait $!; done\n",
            pid = pid.display(),
            vty = frr.dir().display(),
            dir = dir.display(),
            conf = conf.display(),
        );
        // SIGHUP's default action restored first: a shell cannot trap a
        // signal ignored when it started, and one that the test's parent
        // ignores (a run under `nohup`) is inherited ignored, so MetalLB's
        // HUP would be dropped and FRR never configured (coreutils' env).
        let reloader = n.ns.spawn_command(n.ns.command("env").args([
            "--default-signal=HUP",
            "bash",
            "-c",
            &script,
        ]));
        let pid_file = pid.clone();
        self.wait("the reloader's pid file", || {
            std::fs::read_to_string(&pid_file)
                .ok()
                .filter(|p| !p.is_empty())
                .map(|_| ())
        });
        self.nodes[i].metallb_frr = Some((frr, reloader));
        (conf, pid)
    }

    fn start_metallb_speaker(&mut self, i: usize) {
        let frr_files =
            (self.bgp == MetallbBgp::FrrGracefulRestart).then(|| self.start_metallb_frr(i));
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
            .env("METALLB_ML_SECRET_KEY_PATH", &self.secret_dir);
        if let Some((conf, pid)) = &frr_files {
            cmd.env("FRR_CONFIG_FILE", conf)
                .env("FRR_RELOADER_PID_FILE", pid);
        }
        cmd.stdout(std::process::Stdio::null()).stderr(
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
        // The kubelet stops every container of the Pod at once.
        let mut frr = self.nodes[i].metallb_frr.take();
        proc.signal(Signal::SIGTERM);
        if let Some((frr, reloader)) = frr.as_mut() {
            reloader.signal(Signal::SIGTERM);
            frr.daemon("bgpd").unwrap().signal(Signal::SIGTERM);
            frr.daemon("zebra").unwrap().signal(Signal::SIGTERM);
        }
        let exited = testnet::wait_until(
            "MetalLB's speaker to exit",
            T,
            Duration::from_millis(10),
            || proc.try_status(),
        );
        assert!(exited.is_ok(), "MetalLB's speaker did not exit on SIGTERM");
        if let Some((mut frr, mut reloader)) = frr {
            for d in ["bgpd", "zebra"] {
                let p = frr.daemon(d).unwrap();
                let exited =
                    testnet::wait_until("FRR to exit", T, Duration::from_millis(10), || {
                        p.try_status()
                    });
                assert!(
                    exited.is_ok(),
                    "MetalLB's FRR ({d}) did not exit on SIGTERM"
                );
            }
            let _ = reloader.stop();
        }
        self.nodes[i].metallb_exit = Some(epoch_now());
        self.remove_pod(&format!("metallb-speaker-{}", self.nodes[i].name));
    }

    /// ferrolb's speaker on node `i`, coexisting with MetalLB's: its
    /// configuration from ferrolb's namespace, MetalLB's Pods, statuses
    /// and L2Advertisements from MetalLB's.
    fn start_ferrolb_speaker(&mut self, i: usize) {
        let forward = self.nodes[i].forward.take().unwrap();
        self.nodes[i].ferrolb_start = Some(epoch_now());
        let n = &self.nodes[i];
        self.cluster.apply(self.pod_in(
            &self.ferrolb_ns,
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
                "--namespace",
                &self.ferrolb_ns,
                "--metallb-namespace",
                &self.cluster.system,
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

    /// How many times the router's session with `peer` has been
    /// Established.
    fn sessions_established(&self, peer: &str) -> u64 {
        let v = self
            .frr
            .vtysh_json(&format!("show bgp neighbors {peer} json"));
        v[peer]["connectionsEstablished"].as_u64().unwrap_or(0)
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
    /// The answering node, or the failure.
    result: Result<String, Failure>,
}

/// A failed request: what failed, and the client's port when the
/// connection got one (so the packet capture can say what happened to it).
#[derive(Debug, Clone)]
struct Failure {
    port: Option<u16>,
    error: String,
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

fn request(addr: SocketAddr) -> Result<String, Failure> {
    let fail = |port: Option<u16>, error: String| Failure { port, error };
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut c = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)
        .map_err(|e| fail(None, format!("connect: {e}")))?;
    let port = c.local_addr().ok().map(|a| a.port());
    let left = deadline
        .checked_duration_since(Instant::now())
        .ok_or_else(|| fail(port, "connect took the whole timeout".into()))?;
    c.set_read_timeout(Some(left))
        .map_err(|e| fail(port, e.to_string()))?;
    c.write_all(b"GET / HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n")
        .map_err(|e| fail(port, format!("write: {e}")))?;
    let mut body = String::new();
    c.read_to_string(&mut body)
        .map_err(|e| fail(port, format!("read: {e}")))?;
    let (head, node) = body
        .split_once("\r\n\r\n")
        .ok_or_else(|| fail(port, "no header end".into()))?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(fail(port, format!("status: {head}")));
    }
    Ok(node.to_owned())
}

/// What the samples of one service say.
#[derive(Debug)]
struct Tally {
    sent: usize,
    failed: Vec<(Duration, Failure)>,
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

/// One TCP connection to a service, as a capture saw it: each packet
/// towards the service (time, destination MAC: the node it was sent to)
/// and each from it (time, source MAC, TCP flags).
#[derive(Debug, Default)]
struct Flow {
    to: Vec<(f64, String)>,
    from: Vec<(f64, String, String)>,
}

impl Flow {
    /// The first packet sent to another node than the connection's first
    /// packet was: (time, the first node's MAC, the other's). The sender
    /// picks a node per packet from its FIB (ECMP) or its ARP entry, both
    /// the same for every packet of a connection until they change: a
    /// split is a move.
    fn split(&self) -> Option<(f64, &str, &str)> {
        let (_, first) = self.to.first()?;
        self.to
            .iter()
            .find(|(_, m)| m != first)
            .map(|(t, m)| (*t, first.as_str(), m.as_str()))
    }

    /// The MAC of the node that reset the connection, if one did.
    fn reset_by(&self) -> Option<&str> {
        self.from
            .iter()
            .find(|(_, _, flags)| flags.contains('R'))
            .map(|(_, m, _)| m.as_str())
    }
}

/// Parses `tcpdump -n -e -tt` lines of TCP between clients and port 80 of
/// `ip` into connections by client port, oldest first: the client reuses a
/// port (the server closes first, so the client keeps no TIME_WAIT), and a
/// SYN after anything else on the port starts a new connection.
fn tcp_flows(text: &str, ip: &str) -> BTreeMap<u16, Vec<Flow>> {
    let to_svc = format!(" > {ip}.80: ");
    let from_svc = format!(": {ip}.80 > ");
    let port_of = |addr: &str| {
        addr.rsplit_once('.')
            .and_then(|(_, p)| p.parse::<u16>().ok())
    };
    let mut flows: BTreeMap<u16, Vec<Flow>> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(at), Some(src), Some(_), Some(dst)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Ok(at) = at.parse::<f64>() else { continue };
        let dst = dst.trim_end_matches(',');
        let flags = line
            .split_once("Flags [")
            .and_then(|(_, r)| r.split_once(']'))
            .map_or("", |(f, _)| f);
        if let Some((head, _)) = line.split_once(&to_svc)
            && let Some(port) = head.rsplit(' ').next().and_then(port_of)
        {
            let conns = flows.entry(port).or_default();
            let fresh = conns
                .last()
                .is_none_or(|c| flags == "S" && (!c.from.is_empty() || c.to.len() > 1));
            if fresh {
                conns.push(Flow::default());
            }
            if let Some(c) = conns.last_mut() {
                c.to.push((at, dst.to_owned()));
            }
        } else if let Some((_, rest)) = line.split_once(&from_svc)
            && let Some(port) = rest.split(':').next().and_then(port_of)
            && let Some(c) = flows.get_mut(&port).and_then(|c| c.last_mut())
        {
            c.from.push((at, src.to_owned(), flags.to_owned()));
        }
    }
    flows
}

/// The changes of the route to `ip` in `ip -ts monitor route` output (run
/// with `TZ=UTC`): (seconds since the epoch, the record on one line). The
/// lines carry the time of day only; the day is the one that puts it
/// nearest to `near`.
fn route_changes(text: &str, ip: &str, near: f64) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    let mine = |rest: &str| {
        let rest = rest.strip_prefix("Deleted ").unwrap_or(rest);
        rest.split_whitespace().next() == Some(ip)
    };
    let mut current: Option<(f64, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('[') {
            out.extend(current.take());
            let Some((stamp, rest)) = rest.split_once("] ") else {
                continue;
            };
            let Some((_, time)) = stamp.split_once('T') else {
                continue;
            };
            let secs: Vec<f64> = time.split(':').filter_map(|x| x.parse().ok()).collect();
            if secs.len() != 3 || !mine(rest) {
                continue;
            }
            let of_day = secs[0] * 3600.0 + secs[1] * 60.0 + secs[2];
            let day = (near / 86_400.0).floor() * 86_400.0;
            let at = [day - 86_400.0, day, day + 86_400.0]
                .into_iter()
                .map(|d| d + of_day)
                .min_by(|a, b| (a - near).abs().total_cmp(&(b - near).abs()))
                .unwrap_or(of_day);
            current = Some((at, rest.split_whitespace().collect::<Vec<_>>().join(" ")));
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(" | ");
            text.push_str(&line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out.extend(current);
    out
}

/// How many of the route `changes` changed its set of next hops, from
/// `before` (a record's next hops are the addresses after `via`; a deleted
/// route has none).
fn next_hop_changes(changes: &[(f64, String)], before: &[String]) -> u64 {
    let mut current: BTreeSet<&str> = before.iter().map(String::as_str).collect();
    let mut n = 0;
    for (_, record) in changes {
        let hops: BTreeSet<&str> = if record.starts_with("Deleted ") {
            BTreeSet::new()
        } else {
            let words: Vec<&str> = record.split_whitespace().collect();
            words
                .windows(2)
                .filter(|w| w[0] == "via")
                .map(|w| w[1])
                .collect()
        };
        if hops != current {
            n += 1;
            current = hops;
        }
    }
    n
}

/// Why a request failed, from the capture of its service's traffic: `Ok`
/// with the story when its connection was split between two nodes (the
/// service IP moved under it) and reset by the second, which has no
/// socket for it; `Err` when the capture shows no such thing.
fn explain(
    f: &Failure,
    flows: &BTreeMap<u16, Vec<Flow>>,
    names: &BTreeMap<String, &str>,
    changes: &[(f64, String)],
) -> Result<String, String> {
    let port = f.port.ok_or("no connection (no client port)")?;
    let conns = flows
        .get(&port)
        .ok_or(format!("port {port}: not captured"))?;
    // The client reuses ports: the failed connection is the one the
    // capture shows failing, if any.
    let mut why = Err(format!("port {port}: not captured"));
    for flow in conns {
        why = explain_one(port, flow, names, changes);
        if why.is_ok() {
            break;
        }
    }
    why
}

fn explain_one(
    port: u16,
    flow: &Flow,
    names: &BTreeMap<String, &str>,
    changes: &[(f64, String)],
) -> Result<String, String> {
    let name = |m: &str| names.get(m).copied().unwrap_or("?").to_owned();
    let (at, first, second) = flow
        .split()
        .ok_or(format!("port {port}: every packet went to one node"))?;
    let by = flow
        .reset_by()
        .ok_or(format!("port {port}: moved but not reset"))?;
    if by != second {
        return Err(format!(
            "port {port}: moved {} -> {}, reset by {}",
            name(first),
            name(second),
            name(by)
        ));
    }
    let change = changes
        .iter()
        .min_by(|a, b| (a.0 - at).abs().total_cmp(&(b.0 - at).abs()))
        .map_or(String::new(), |(t, r)| {
            format!("; nearest route change {:+.1} ms: {r}", (t - at) * 1e3)
        });
    Ok(format!(
        "port {port}: accepted by {}, a packet {:.1} ms later sent to {}, which reset it{change}",
        name(first),
        (at - flow.to[0].0) * 1e3,
        name(second)
    ))
}

#[test]
fn tcp_capture_and_route_changes_explain_a_reset() {
    let (cli, n1, n2) = (
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "02:00:00:00:00:03",
    );
    let pkt = |t: &str, src: &str, dst: &str, from: &str, to: &str, flags: &str| {
        format!(
            "{t} {src} > {dst}, ethertype IPv4 (0x0800), length 66: {from} > {to}: \
             Flags [{flags}], seq 1, ack 1, win 502, length 0\n"
        )
    };
    let (c, svc) = ("10.1.0.2.40312", "198.51.100.0.80");
    let text = [
        pkt("100.000", cli, n1, c, svc, "S"),
        pkt("100.001", n1, cli, svc, c, "S."),
        pkt("100.002", cli, n1, c, svc, "P."),
        pkt("100.004", cli, n2, c, svc, "."),
        pkt("100.005", n2, cli, svc, c, "R"),
        // Another connection, and one to another service.
        pkt("100.010", cli, n2, "10.1.0.2.40314", svc, "S"),
        pkt("100.011", cli, n1, c, "198.51.100.1.80", "S"),
        // The port again, later: a new connection (with a retransmitted
        // SYN), not a move.
        pkt("103.000", cli, n2, c, svc, "S"),
        pkt("103.200", cli, n2, c, svc, "S"),
        pkt("103.201", n2, cli, svc, c, "S."),
    ]
    .concat();
    let flows = tcp_flows(&text, "198.51.100.0");
    assert_eq!(flows.keys().copied().collect::<Vec<_>>(), [40312, 40314]);
    assert_eq!(flows[&40312].len(), 2);
    assert_eq!(flows[&40312][0].split(), Some((100.004, n1, n2)));
    assert_eq!(flows[&40312][0].reset_by(), Some(n2));
    assert_eq!(flows[&40312][1].to.len(), 2);
    assert_eq!(flows[&40312][1].split(), None);
    assert_eq!(flows[&40314][0].split(), None);

    let routes = "[2026-11-29T23:59:59.990000] 198.51.100.0 nhid 20 proto bgp metric 20 \n\
                  \tnexthop via 10.0.0.3 dev eth0 weight 1 \n\
                  [2026-11-29T23:59:59.995000] 10.9.0.0/24 via 10.0.0.3 dev eth0 \n\
                  [2026-11-30T00:00:00.500000] Deleted 198.51.100.0 nhid 20 proto bgp metric 20 \n";
    // Near midnight: the day is the one nearest the capture's start.
    let near = 1_795_996_800.0; // 2026-11-30T00:00:00Z
    let changes = route_changes(routes, "198.51.100.0", near - 0.5);
    assert_eq!(changes.len(), 2);
    assert!((changes[0].0 - (near - 0.01)).abs() < 1e-6, "{changes:?}");
    assert!((changes[1].0 - (near + 0.5)).abs() < 1e-6, "{changes:?}");
    assert_eq!(
        changes[0].1,
        "198.51.100.0 nhid 20 proto bgp metric 20 | nexthop via 10.0.0.3 dev eth0 weight 1"
    );

    let before = ["10.0.0.2".to_owned(), "10.0.0.3".to_owned()];
    // 2,3 -> 3 -> (same) -> none.
    let records = [
        changes[0].clone(),
        (
            1.0,
            "198.51.100.0 via 10.0.0.3 dev eth0 proto bgp metric 20".to_owned(),
        ),
        changes[1].clone(),
    ];
    assert_eq!(next_hop_changes(&records, &before), 2);
    assert_eq!(next_hop_changes(&[], &before), 0);

    let names = BTreeMap::from([(n1.to_owned(), "node1"), (n2.to_owned(), "node2")]);
    let reset = Failure {
        port: Some(40312),
        error: "read: Connection reset by peer".into(),
    };
    let story = explain(&reset, &flows, &names, &changes).unwrap();
    assert!(
        story.starts_with("port 40312: accepted by node1, a packet 4.0 ms later sent to node2"),
        "{story}"
    );
    for (port, why) in [
        (None, "no connection"),
        (Some(40314), "every packet went to one node"),
        (Some(40999), "not captured"),
    ] {
        let f = Failure {
            port,
            error: "x".into(),
        };
        let e = explain(&f, &flows, &names, &changes).unwrap_err();
        assert!(e.contains(why), "{e}");
    }
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
fn switch_once(round: usize, mode: MetallbBgp) -> String {
    let tags = match mode {
        MetallbBgp::Native => ["m1", "m2", "m3", "m4", "m5"],
        MetallbBgp::FrrGracefulRestart => ["g1", "g2", "g3", "g4", "g5"],
    };
    let mut lab = Lab::new(tags[round % 5], mode);
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
    if mode == MetallbBgp::FrrGracefulRestart {
        for (_, ip) in NODES {
            let v = lab.frr.vtysh_json(&format!("show bgp neighbors {ip} json"));
            let gr = &v[ip]["gracefulRestartInfo"];
            assert_eq!(
                gr["remoteGrMode"], "Restart",
                "MetalLB's FRR on {ip} did not negotiate graceful restart: {gr:#}"
            );
        }
    }
    // One MetalLB speaker answers ARP, and its status says so. Until
    // MetalLB's memberlist has all three speakers, each elects among those
    // it sees and the status may name another node for a moment: wait for
    // the one MetalLB's election picks among all three (sha256 of node and
    // IP, no preference weights here).
    let owner = NODES
        .iter()
        .map(|(n, _)| lab.cluster.node(n))
        .min_by_key(|n| Sha256::digest(format!("{n}#{l2_ip}")))
        .unwrap();
    lab.wait(
        "MetalLB's ServiceL2Status to name its election's winner",
        || {
            let s = lab.cluster.statuses::<api::v1beta1::ServiceL2Status>();
            (s.len() == 1 && s[0].0 == owner).then_some(())
        },
    );
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
    // The captures: ARP and the layer 2 service's TCP on the client's
    // segment, the BGP service's TCP where the router sends it to the
    // nodes, and the router's FIB changes for the BGP IP.
    let capture = |ns: &Netns, file: &str, filter: &str| {
        let path = lab.run.join(file);
        let proc = ns.spawn_command(
            ns.command("tcpdump")
                .args(["-l", "-n", "-e", "-tt", "-i", "eth0", filter])
                .stdout(std::fs::File::create(&path).unwrap())
                .stderr(std::process::Stdio::null()),
        );
        (path, proc)
    };
    let (arp_log, mut tcpdump) = capture(&lab.client, "arp.tcpdump", "arp");
    let (l2_log, mut l2_dump) = capture(
        &lab.client,
        "l2.tcpdump",
        &format!("tcp port 80 and host {l2_ip}"),
    );
    let (bgp_log, mut bgp_dump) = capture(
        &lab.router,
        "bgp.tcpdump",
        &format!("tcp port 80 and host {bgp_ip}"),
    );
    // BGP itself, decoded: the NOTIFICATIONs a leaving speaker sends.
    let bgp_wire_log = lab.run.join("bgp-wire.tcpdump");
    let mut bgp_wire = lab.router.spawn_command(
        lab.router
            .command("tcpdump")
            .args(["-l", "-n", "-v", "-tt", "-i", "eth0", "tcp port 179"])
            .stdout(std::fs::File::create(&bgp_wire_log).unwrap())
            .stderr(std::process::Stdio::null()),
    );
    let routes_log = lab.run.join("routes.log");
    let mut monitor = lab.router.spawn_command(
        lab.router
            .command("ip")
            .args(["-ts", "monitor", "route"])
            .env("TZ", "UTC")
            .stdout(std::fs::File::create(&routes_log).unwrap())
            .stderr(std::process::Stdio::null()),
    );
    let capture_start = epoch_now();
    let sockets = |ns: &Netns| ns.run(["cat", "/proc/net/packet"]).lines().count() - 1;
    lab.wait("tcpdump to capture", || {
        (sockets(&lab.client) >= 2 && sockets(&lab.router) >= 2).then_some(())
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

    // 1. ferrolb's speakers on every node beside MetalLB's: layer 2 left
    // to MetalLB (its L2Advertisement is there), BGP held (MetalLB's
    // speaker Pod is on each node). Once ferrolb's memberlist has every
    // node, its election puts MetalLB's owner first, as MetalLB's does: the
    // speaker there reports the service deferred, and no other does.
    let sessions_before: Vec<u64> = NODES
        .iter()
        .map(|(_, ip)| lab.sessions_established(ip))
        .collect();
    for i in 0..lab.nodes.len() {
        lab.start_ferrolb_speaker(i);
    }
    let metric = |n: &Node, name: &str| -> Option<u64> {
        n.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    lab.wait(
        "ferrolb's speakers to form and defer to MetalLB's owner",
        || {
            lab.ferrolb_nodes()
                .iter()
                .all(|n| {
                    let deferred = u64::from(n.node == owner);
                    metric(n, "ferrolb_memberlist_members") == Some(NODES.len() as u64)
                        && metric(n, "ferrolb_l2_metallb_deferred_services") == Some(deferred)
                        && !n.metrics().contains("protocol=\"layer2\"")
                })
                .then_some(())
        },
    );
    std::thread::sleep(settle);

    // 2. The controller: MetalLB's stops, then ferrolb's starts (pools
    // from its own namespace) and adopts the IPs from status.
    mctl.signal(Signal::SIGTERM);
    lab.wait("MetalLB's controller to exit", || mctl.try_status());
    lab.remove_pod("metallb-controller");
    drop((mctl_forward, mctl_ns));
    let controller = Controller::start_in(&lab.cluster, &lab.ferrolb_ns, "ferrolb-controller");
    // ferrolb's controller serves: a new Service gets an address, one the
    // two MetalLB assigned do not hold.
    let mut s = lab.cluster.service("web-new", "Cluster");
    s["metadata"]["annotations"] = json!({"metallb.io/address-pool": "l2-pool"});
    lab.cluster.apply(s);
    lab.cluster.apply(
        lab.cluster
            .endpoints("web-new", &["node1", "node2", "node3"]),
    );
    let new_ip = lab.wait("ferrolb's controller to assign a new Service", || {
        ingress(&lab.cluster, "web-new").first().cloned()
    });
    assert_ne!(new_ip, l2_ip, "a new Service got the address of a live one");
    std::thread::sleep(settle);

    // 3. Layer 2, every node at once: MetalLB's L2Advertisement deleted,
    // its speakers withdraw without re-electing (their member list is the
    // same), and ferrolb's speaker on the same node answers, with the same
    // MAC address.
    // MetalLB's owner of each layer 2 Service (the new one too), as its
    // ServiceL2Status objects say.
    let l2_services = ["web-l2", "web-new"];
    let metallb_owners: BTreeMap<String, String> =
        lab.wait("MetalLB to answer for both layer 2 Services", || {
            let s = lab.cluster.statuses::<api::v1beta1::ServiceL2Status>();
            (s.len() == l2_services.len()).then(|| {
                s.into_iter()
                    .map(|(node, svc, _)| (svc, node))
                    .collect::<BTreeMap<_, _>>()
            })
        });
    let t0 = Instant::now();
    let ads: Api<api::v1beta1::L2Advertisement> =
        Api::namespaced(lab.cluster.client.clone(), &lab.cluster.system);
    lab.cluster.rt.block_on(async {
        ads.delete("l2", &DeleteParams::default()).await.unwrap();
    });
    let taken = lab.wait(
        "ferrolb to answer for the L2 IP and MetalLB to withdraw",
        || {
            let a: Vec<String> = lab
                .ferrolb_nodes()
                .iter()
                .filter(|n| {
                    n.metrics()
                        .contains(&format!("metallb_speaker_announced{{ip=\"{l2_ip}\""))
                })
                .map(|n| n.node.clone())
                .collect();
            let metallb = lab.cluster.statuses::<api::v1beta1::ServiceL2Status>();
            (a.len() == 1 && metallb.is_empty()).then(|| a[0].clone())
        },
    );
    assert_eq!(taken, owner, "ferrolb took the L2 IP over on another node");
    // Every layer 2 Service stays on its node.
    let ferrolb_owners: BTreeMap<String, String> =
        lab.wait("ferrolb to answer for both layer 2 Services", || {
            let mut out = BTreeMap::new();
            for n in lab.ferrolb_nodes() {
                let m = n.metrics();
                for svc in l2_services {
                    let service = format!("service=\"{}/{svc}\"", lab.cluster.apps);
                    if m.lines().any(|l| {
                        l.starts_with("metallb_speaker_announced{")
                            && l.contains("protocol=\"layer2\"")
                            && l.contains(&service)
                    }) && out.insert(svc.to_owned(), n.node.clone()).is_some()
                    {
                        return None;
                    }
                }
            }
            (out.len() == l2_services.len()).then_some(out)
        });
    assert_eq!(
        ferrolb_owners, metallb_owners,
        "a layer 2 Service moved at the handover"
    );
    eprintln!(
        "layer 2: MetalLB -> ferrolb in {:?}, each Service on MetalLB's node: {ferrolb_owners:?}",
        t0.elapsed()
    );
    // No ferrolb session yet: each node's is MetalLB's.
    for (i, (_, ip)) in NODES.iter().enumerate() {
        assert_eq!(
            lab.sessions_established(ip),
            sessions_before[i],
            "a BGP session of {ip} was replaced while MetalLB's speaker ran there"
        );
    }
    std::thread::sleep(settle);

    // 4. BGP, node by node: MetalLB's speaker goes, and ferrolb's held
    // session comes up.
    for i in 0..lab.nodes.len() {
        let t0 = Instant::now();
        let hop = lab.nodes[i].ip.to_owned();
        // The router's sessions with this node so far: ferrolb's is the
        // next one (under graceful restart MetalLB's path stays, stale,
        // until ferrolb's speaker advertises it again).
        let sessions = lab.sessions_established(&hop);
        lab.stop_metallb_speaker(i);
        let mut stale = false;
        lab.wait("the router's path from ferrolb's speaker", || {
            let p = paths(&lab.frr, &bgp_prefix);
            let mine = |stale: bool| {
                p.iter().any(|p| {
                    p["nexthops"][0]["ip"] == hop.as_str() && (p["stale"] == true) == stale
                })
            };
            stale |= mine(true);
            let fresh = mine(false);
            (fresh
                && lab.sessions_established(&hop) > sessions
                && lab.frr.bgp_state(&hop).as_deref() == Some("Established"))
            .then_some(())
        });
        eprintln!(
            "{}: BGP MetalLB -> ferrolb in {:?} (path back at the router{})",
            lab.nodes[i].name,
            t0.elapsed(),
            if stale { ", seen stale meanwhile" } else { "" }
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
            .filter(|n| {
                n.metrics()
                    .contains(&format!("metallb_speaker_announced{{ip=\"{l2_ip}\""))
            })
            .map(|n| n.node.as_str())
            .collect();
        (a.len() == 1).then(|| a[0].to_owned())
    });
    assert_eq!(answering, owner, "the L2 IP moved to another node");
    std::thread::sleep(settle);
    stop.store(true, Ordering::Relaxed);
    let l2 = tally(&l2_load.join().unwrap(), start);
    let bgp = tally(&bgp_load.join().unwrap(), start);
    let _ = arping.stop();
    // Replies to the last requests, then tcpdump's buffered lines.
    std::thread::sleep(Duration::from_millis(100));
    for p in [&mut tcpdump, &mut l2_dump, &mut bgp_dump, &mut bgp_wire] {
        p.signal(Signal::SIGINT);
        let _ = p.stop();
    }
    let _ = monitor.stop();
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
    // Each failed request, as the captures tell it.
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let l2_flows = tcp_flows(&read(&l2_log), &l2_ip);
    let bgp_flows = tcp_flows(&read(&bgp_log), &bgp_ip);
    let route_log = route_changes(&read(&routes_log), &bgp_ip, capture_start);
    let stories = |t: &Tally, flows: &BTreeMap<u16, Vec<Flow>>, changes: &[(f64, String)]| {
        t.failed
            .iter()
            .map(|(_, f)| {
                explain(f, flows, &macs, changes).map_err(|e| format!("{}: {e}", f.error))
            })
            .collect::<Vec<_>>()
    };
    let (l2_why, bgp_why) = (
        stories(&l2, &l2_flows, &[]),
        stories(&bgp, &bgp_flows, &route_log),
    );
    let notifications = read(&bgp_wire_log)
        .lines()
        .filter(|l| l.contains("Notification Message"))
        .count();
    let splits = |flows: &BTreeMap<u16, Vec<Flow>>| {
        flows
            .values()
            .flatten()
            .filter(|f| f.split().is_some())
            .count()
    };
    let connections =
        |flows: &BTreeMap<u16, Vec<Flow>>| flows.values().map(Vec::len).sum::<usize>();
    let elapsed = start.elapsed();
    // ferrolb's memberlist declaring a member dead: no ferrolb speaker
    // stops before this point, so each is a false death (a speaker stalled
    // past the suspicion timeout on the loaded machine), after which the
    // others take its layer 2 addresses until it is back. Counted per
    // observer; the most any speaker saw.
    let false_deaths = lab
        .ferrolb_nodes()
        .iter()
        .map(|n| {
            std::fs::read_to_string(&n.log)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("member down member="))
                .count() as u64
        })
        .max()
        .unwrap_or(0);

    let (l2_after, bgp_after) = (
        ingress(&lab.cluster, "web-l2"),
        ingress(&lab.cluster, "web-bgp"),
    );
    let report = format!(
        "round {round}: {:.1} s; L2 {l2_ip}: sent {} failed {} {:?} max gap {:?} served by {:?}; \
         BGP {bgp_ip}: sent {} failed {} {:?} max gap {:?} served by {:?}; \
         ARP: {} requests, answered by two MACs: {} (MetalLB and ferrolb {}, MetalLB's own handover {metallb_only}, ferrolb's own {ferrolb_only}), {} unanswered (longest run {} x 50 ms), \
         the IP moved {} times ({}); \
         ferrolb answers L2 from {answering}; ferrolb memberlist false deaths {false_deaths}; \
         captured: L2 {} connections, {} moved ({l2_why:?}); \
         BGP {} connections, {} moved, {} route changes, {} of the next-hop set ({bgp_why:?}), \
         BGP NOTIFICATIONs on the router's link {notifications}",
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
        connections(&l2_flows),
        splits(&l2_flows),
        connections(&bgp_flows),
        splits(&bgp_flows),
        route_log.len(),
        next_hop_changes(&route_log, &all_hops),
    );
    eprintln!("{report}");
    for (t, r) in &route_log {
        eprintln!("  route {:.3}: {r}", t - capture_start);
    }
    // A move resets what is in flight: in native mode the router's
    // next-hop set for the BGP IP may change twice per node (MetalLB's
    // path gone, ferrolb's back) if its FIB sees the gap, and each change
    // re-hashes flows (Linux ECMP, hash-threshold); the layer 2 IP would
    // move if the two elections disagreed (asserted not to below). A
    // connection open at that instant
    // has its next packet sent to another node, which has no socket for
    // it and resets it, as kube-proxy's would. The client has one request
    // open at a time, so a move breaks at most one; and every failed
    // request must be such a connection in the capture (accepted by one
    // node, reset by the other after a move): anything else (a timeout, a
    // refusal, a reset with no move) is the migration's fault.
    let within = |t: &Tally, why: &[Result<String, String>], moves: u64| {
        t.failed.len() as u64 <= moves && why.iter().all(Result::is_ok)
    };
    // Without graceful restart a leaving MetalLB speaker's path goes with
    // its session; ferrolb's session on that node, already waiting, comes
    // up within milliseconds of MetalLB's Pod going, and the router may
    // install the path again before its FIB ever changed: route changes
    // are counted, not required.
    assert!(
        !l2_flows.is_empty() && !bgp_flows.is_empty(),
        "the captures saw nothing: {} L2 and {} BGP connections, {} route changes",
        l2_flows.len(),
        bgp_flows.len(),
        route_log.len()
    );
    let route_moves = next_hop_changes(&route_log, &all_hops);
    let (l2_ok, bgp_ok) = (
        within(&l2, &l2_why, arp.moves()),
        within(&bgp, &bgp_why, route_moves),
    );
    // Under graceful restart the router keeps each node's path (stale)
    // from MetalLB's exit until ferrolb's speaker there advertises it
    // again: its FIB never changes, so nothing moves and nothing fails.
    // Each node's session was replaced (the wait above saw a new one
    // Established), so an unchanged FIB is graceful restart at work: a
    // session that ends without it takes its path along.
    if mode == MetallbBgp::FrrGracefulRestart {
        assert_eq!(
            route_moves, 0,
            "the router's next hops changed under graceful restart"
        );
        assert!(bgp.failed.is_empty(), "BGP requests failed: {bgp_why:#?}");
    }
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
        "L2 failed requests beyond one reset per move of the IP ({}), or not moves: {l2_why:#?}",
        arp.moves(),
    );
    // The handover keeps each address on its node: the client's ARP entry
    // never changes, so no connection moves and none fails.
    // The only move allowed is ferrolb's own failover, away and back, when
    // its memberlist saw a stalled speaker dead: the procedure's handover
    // has none.
    assert!(
        arp.moves() <= 2 * false_deaths,
        "the L2 IP moved {} times ({answers:?}), {false_deaths} false deaths in ferrolb's memberlist",
        arp.moves()
    );
    assert!(l2.failed.is_empty(), "L2 requests failed: {l2_why:#?}");
    assert!(
        bgp_ok,
        "BGP failed requests beyond one reset per route change ({route_moves}), or not moves: {bgp_why:#?}",
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
    let reports: Vec<String> = (0..rounds)
        .map(|r| switch_once(r, MetallbBgp::Native))
        .collect();
    for r in &reports {
        eprintln!("{r}");
    }
}

/// The same switch with MetalLB's FRR mode and `enableGracefulRestart` on
/// the BGPPeer (README, "Node by node, without an outage"): no BGP request
/// fails and the router's next hops never change.
#[test]
fn switch_from_metallb_frr_mode_with_graceful_restart_under_load() {
    let rounds: usize = std::env::var("MIGRATE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let reports: Vec<String> = (0..rounds)
        .map(|r| switch_once(r, MetallbBgp::FrrGracefulRestart))
        .collect();
    for r in &reports {
        eprintln!("{r}");
    }
}
