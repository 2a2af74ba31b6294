//! Drop-in for MetalLB: the controller and two speakers run with exactly
//! the pod specs of MetalLB v0.16's native manifest, images swapped
//! (`testdata/metallb-v0.16/native.yaml`), against a real apiserver, under
//! MetalLB's own RBAC, and must start, elect, announce and report healthy.
//!
//! What a kubelet would do for those pod specs is done here by hand:
//! - args as written; env with the downward-API fields resolved (Pod name,
//!   node name, host and Pod IP); nothing else in the environment, so the
//!   API is found as in a Pod (KUBERNETES_SERVICE_HOST/PORT and the service
//!   account token, CA and namespace under
//!   /var/run/secrets/kubernetes.io/serviceaccount, a token of the pod's
//!   service account from the TokenRequest API);
//! - the volumes at their mount paths (the memberlist Secret, the
//!   excludel2 ConfigMap, the webhook certificate Secret), in a private
//!   mount namespace whose /etc, /run and /tmp are overlays, then the root
//!   filesystem and those overlays remounted read-only
//!   (readOnlyRootFilesystem);
//! - the security contexts: the controller as uid/gid 65534 with no
//!   capabilities, the speaker as root with NET_RAW alone, both with
//!   no_new_privs (allowPrivilegeEscalation: false);
//! - the probes: GET /healthz and /readyz on port 17472 (the speaker's on
//!   127.0.0.1, hostNetwork: the node namespace).
//!
//! Every process runs in a network namespace of its own (the speakers' on
//! a shared bridge with a client), reaching the apiserver through a
//! [`Forward`] of its port.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/https.rs"]
mod https;
mod k8s;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use api::v1beta1::ServiceL2Status;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};
use testenv::TestEnv;
use testnet::{Bridge, Forward, Netns, Proc, RunDir, wait_until};

use crate::k8s::Cluster;

/// Bounds a failure only: each step is driven by what the programs report.
const T: Duration = Duration::from_secs(60);

/// The two documents of the fixture this test runs, and the RBAC and
/// ConfigMap it applies.
fn fixture() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/metallb-v0.16/native.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// Moves a fixture document into the test's namespace; cluster-scoped
/// RBAC names get the namespace as a suffix (one apiserver per test
/// binary, but the names must not meet another run's).
fn localize(mut doc: Value, system: &str) -> Value {
    if doc["metadata"]["namespace"] == "metallb-system" {
        doc["metadata"]["namespace"] = json!(system);
    }
    let kind = doc["kind"].as_str().unwrap().to_owned();
    if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
        let name = format!("{}-{system}", doc["metadata"]["name"].as_str().unwrap());
        doc["metadata"]["name"] = json!(name);
    }
    if kind == "ClusterRoleBinding" {
        let role = format!("{}-{system}", doc["roleRef"]["name"].as_str().unwrap());
        doc["roleRef"]["name"] = json!(role);
    }
    if let Some(subjects) = doc.get_mut("subjects").and_then(Value::as_array_mut) {
        for s in subjects {
            s["namespace"] = json!(system);
        }
    }
    doc
}

/// The container of a Deployment or DaemonSet document, with its pod
/// spec.
fn pod_spec<'a>(docs: &'a [Value], kind: &str) -> (&'a Value, &'a Value) {
    let doc = docs.iter().find(|d| d["kind"] == kind).unwrap();
    let spec = &doc["spec"]["template"]["spec"];
    (spec, &spec["containers"][0])
}

/// What the downward API gives one Pod.
struct Downward {
    pod_name: String,
    node_name: String,
    host_ip: String,
    pod_ip: String,
}

/// The container's env with the `fieldRef`s resolved.
fn env_of(container: &Value, d: &Downward) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = match e["value"].as_str() {
                Some(v) => v.to_owned(),
                None => match e["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap() {
                    "metadata.name" => d.pod_name.clone(),
                    "spec.nodeName" => d.node_name.clone(),
                    "status.hostIP" => d.host_ip.clone(),
                    "status.podIP" => d.pod_ip.clone(),
                    other => panic!("fieldRef {other} not handled"),
                },
            };
            (name, value)
        })
        .collect()
}

/// The files of a Pod's volumes, each at its mount path: `(path, files)`.
type Mounts = Vec<(String, BTreeMap<String, Vec<u8>>)>;

/// Resolves the container's volume mounts from `secrets` and
/// `config_maps` (name -> data); optional ones that are missing are
/// skipped, as the kubelet does; a missing required one fails the test,
/// as it would keep the Pod from starting.
fn mounts_of(
    spec: &Value,
    container: &Value,
    secrets: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    config_maps: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
) -> Mounts {
    let volumes = spec["volumes"].as_array().unwrap();
    let mut out = Vec::new();
    for m in container["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let v = volumes.iter().find(|v| v["name"] == name).unwrap();
        let (source, optional, from) = if v["secret"].is_object() {
            (
                v["secret"]["secretName"].as_str().unwrap(),
                v["secret"]["optional"] == true,
                secrets,
            )
        } else {
            (
                v["configMap"]["name"].as_str().unwrap(),
                v["configMap"]["optional"] == true,
                config_maps,
            )
        };
        match from.get(source) {
            Some(files) => out.push((m["mountPath"].as_str().unwrap().to_owned(), files.clone())),
            None if optional => {}
            None => panic!("volume {name}: {source} is missing: the Pod would not start"),
        }
    }
    out
}

/// Runs a command in a private mount namespace laid out as the kubelet
/// lays out a container's: the service account files and `mounts` in
/// overlays of /etc, /run and /tmp, everything read-only. Arguments:
/// the scratch dir, then the command (setpriv and the program).
const POD_SHELL: &str = r#"set -eu
s=$1; shift
mount -t tmpfs -o mode=0755 tmpfs "$s/t"
for d in etc run tmp; do
  mkdir -p "$s/t/$d-u" "$s/t/$d-w"
  if [ -d "$s/root/$d" ]; then cp -a "$s/root/$d/." "$s/t/$d-u/"; fi
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$s/t/$d-u,workdir=$s/t/$d-w" "/$d"
done
mount -o remount,bind,ro /
for d in etc run tmp; do mount -o remount,ro "/$d"; done
exec "$@"
"#;

/// One Pod run by hand: its process and its log.
struct PodProc {
    proc: Proc,
    log: PathBuf,
    ns: Netns,
}

impl PodProc {
    /// Starts `bin` for the pod spec's container in `ns` (which reaches
    /// the apiserver on its loopback), with `token` as its service
    /// account.
    #[allow(clippy::too_many_arguments)]
    fn start(
        run: &RunDir,
        tag: &str,
        ns: &Netns,
        bin: &str,
        spec: &Value,
        container: &Value,
        env: Vec<(String, String)>,
        mounts: Mounts,
        token: &str,
        system: &str,
    ) -> Self {
        let test = TestEnv::global();
        let scratch = run.join(tag);
        let root = scratch.join("root");
        std::fs::create_dir_all(scratch.join("t")).unwrap();
        let sa = root.join("run/secrets/kubernetes.io/serviceaccount");
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::write(sa.join("token"), token).unwrap();
        std::fs::copy(test.run_dir().join("pki/ca.crt"), sa.join("ca.crt")).unwrap();
        std::fs::write(sa.join("namespace"), system).unwrap();
        for (path, files) in &mounts {
            let dir = root.join(path.trim_start_matches('/'));
            assert!(
                ["etc/", "run/", "tmp/"]
                    .iter()
                    .any(|p| path.trim_start_matches('/').starts_with(p)),
                "mount path {path} is outside /etc, /run and /tmp"
            );
            std::fs::create_dir_all(&dir).unwrap();
            for (name, data) in files {
                std::fs::write(dir.join(name), data).unwrap();
            }
        }
        // Readable by the container's user, as fsGroup/defaultMode make
        // them.
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&root)
            .status()
            .unwrap();
        let shell = scratch.join("pod.sh");
        std::fs::write(&shell, POD_SHELL).unwrap();

        let port = test.server_url().rsplit(':').next().unwrap().to_owned();
        let mut cmd = ns.command("unshare");
        cmd.env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", &port)
            .envs(env)
            .args(["--mount", "--propagation", "private", "--", "sh"])
            .arg(&shell)
            .arg(&scratch)
            .arg(testnet::require_binary("setpriv"))
            .arg("--no-new-privs");
        let security = &container["securityContext"];
        let added: Vec<String> = security["capabilities"]["add"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| format!("+{}", c.as_str().unwrap().to_lowercase()))
                    .collect()
            })
            .unwrap_or_default();
        let caps = std::iter::once("-all".to_owned())
            .chain(added)
            .collect::<Vec<_>>()
            .join(",");
        cmd.arg(format!("--bounding-set={caps}"))
            .arg(format!("--inh-caps={caps}"));
        if let Some(uid) = spec["securityContext"]["runAsUser"].as_u64() {
            cmd.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups");
        }
        cmd.arg("--").arg(bin);
        for a in container["args"].as_array().unwrap() {
            cmd.arg(a.as_str().unwrap());
        }
        let log = run.join(&format!("{tag}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        cmd.stdout(std::process::Stdio::null()).stderr(stderr);
        let proc = ns.spawn_command(&mut cmd);
        Self {
            proc,
            log,
            ns: ns.clone(),
        }
    }

    /// `GET path` on `addr` inside the Pod's network namespace: the status
    /// code, or 0 when nothing answers.
    fn get(&self, addr: &str, path: &str) -> (u16, String) {
        let addr = addr.to_owned();
        let path = path.to_owned();
        self.ns.run_in(move || {
            let Ok(mut c) = std::net::TcpStream::connect(&addr) else {
                return (0, String::new());
            };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut s = String::new();
            if c.write_all(req.as_bytes()).is_ok() {
                let _ = c.read_to_string(&mut s);
            }
            let code = s
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            (code, s)
        })
    }

    /// The kubelet's probe of the pod spec: `probe` is `livenessProbe` or
    /// `readinessProbe`.
    fn probe(&self, container: &Value, probe: &str) -> u16 {
        let g = &container[probe]["httpGet"];
        let host = g["host"].as_str().unwrap_or("127.0.0.1");
        let addr = format!("{host}:{}", g["port"].as_u64().unwrap());
        self.get(&addr, g["path"].as_str().unwrap()).0
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET /metrics` over HTTPS on `addr` inside the Pod's network
    /// namespace, as MetalLB's ServiceMonitor scrapes (any certificate),
    /// without a token: the status code, or 0 when nothing answers.
    fn get_https_without_token(&self, addr: &str) -> u16 {
        let addr = addr.to_owned();
        self.ns.run_in(move || {
            let Ok(tcp) = std::net::TcpStream::connect(&addr) else {
                return 0;
            };
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
            let config = https::client(https::Trust::Any, false);
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let conn = rustls::ClientConnection::new(config, name).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
            let mut s = String::new();
            if tls.write_all(req.as_bytes()).is_ok() {
                let _ = tls.read_to_string(&mut s);
            }
            s.split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0)
        })
    }
}

/// The controller binary of this build, beside the test's own binaries
/// (`cargo test --workspace` builds it).
fn controller_bin() -> String {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("controller");
    assert!(
        path.exists(),
        "{} is not built: run `cargo build -p controller` (scripts/test builds the whole workspace)",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// A token of the service account `sa`, from the TokenRequest API.
fn token(system: &str, sa: &str) -> String {
    let out = TestEnv::global()
        .kubectl()
        .args(["create", "token", sa, "-n", system, "--duration=2h"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A network namespace reaching the apiserver on its loopback.
fn api_netns(tag: &str) -> (Netns, Forward) {
    let ns = Netns::new(tag);
    let port = TestEnv::global()
        .server_url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let fwd = Forward::loopback_port(&ns, port);
    (ns, fwd)
}

#[test]
fn metallb_v016_native_pod_specs_start_elect_announce_and_report_healthy() {
    for bin in ["unshare", "setpriv", "ping", "chmod"] {
        testnet::require_binary(bin);
    }
    let cluster = Cluster::new("m");
    let system = cluster.system.clone();
    let docs = fixture();
    // MetalLB's RBAC, its ConfigMap, its (empty) webhook certificate
    // Secret, and the controller Deployment (the owner of the memberlist
    // Secret; no kube-controller-manager runs it here).
    for doc in &docs {
        if doc["kind"] != "DaemonSet" {
            cluster.apply(localize(doc.clone(), &system));
        }
    }
    let run = RunDir::new("metallb-podspec");
    let (ctl_spec, ctl_container) = pod_spec(&docs, "Deployment");
    let (spk_spec, spk_container) = pod_spec(&docs, "DaemonSet");
    let config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>> = docs
        .iter()
        .filter(|d| d["kind"] == "ConfigMap")
        .map(|d| {
            let data = d["data"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().as_bytes().to_vec()))
                .collect();
            (d["metadata"]["name"].as_str().unwrap().to_owned(), data)
        })
        .collect();
    let mut secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    secrets.insert("metallb-webhook-cert".into(), BTreeMap::new());

    // The nodes, the speaker and controller Pods (as the API holds them:
    // the speakers find their UIDs and each other there), a pool, an L2
    // advertisement and a Service.
    let nodes = [("n1", "10.0.0.2"), ("n2", "10.0.0.3")];
    for (n, ip) in nodes {
        cluster.apply(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": cluster.node(n)},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
        }));
        cluster.apply(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("speaker-{n}"), "namespace": system,
                         "labels": {"app": "metallb", "component": "speaker"}},
            "spec": {"nodeName": cluster.node(n), "hostNetwork": true,
                     "serviceAccountName": "speaker",
                     "containers": [{"name": "speaker", "image": spk_container["image"]}]},
            "status": {"hostIP": ip, "podIP": ip, "podIPs": [{"ip": ip}]},
        }));
    }
    cluster.apply(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "controller-7d9f8b", "namespace": system,
                     "labels": {"app": "metallb", "component": "controller"}},
        "spec": {"serviceAccountName": "controller",
                 "containers": [{"name": "controller", "image": ctl_container["image"]}]},
    }));
    cluster.apply(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "lan", "namespace": system},
        "spec": {"addresses": ["10.0.0.100-10.0.0.110"]},
    }));
    cluster.apply(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
        "metadata": {"name": "lan", "namespace": system},
        "spec": {"ipAddressPools": ["lan"]},
    }));
    cluster.apply(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": cluster.apps},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }));
    cluster.apply(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": cluster.apps,
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.1.5"], "nodeName": cluster.node("n1"),
                       "conditions": {"ready": true}}],
    }));

    // The controller.
    let (ctl_ns, _ctl_fwd) = api_netns("mlbctl");
    let ctl_env = env_of(
        ctl_container,
        &Downward {
            pod_name: "controller-7d9f8b".into(),
            node_name: cluster.node("n1"),
            host_ip: "10.0.0.2".into(),
            pod_ip: "10.244.0.5".into(),
        },
    );
    let ctl = PodProc::start(
        &run,
        "controller",
        &ctl_ns,
        &controller_bin(),
        ctl_spec,
        ctl_container,
        ctl_env,
        mounts_of(ctl_spec, ctl_container, &secrets, &config_maps),
        &token(&system, "controller"),
        &system,
    );
    let fail = |what: &str, procs: &[&PodProc]| -> ! {
        run.dump_logs(what);
        for p in procs {
            eprintln!("--- {}\n{}", p.log.display(), p.text());
        }
        panic!("{what}");
    };
    let step = |what: &str, procs: &[&PodProc], f: &mut dyn FnMut() -> bool| {
        if wait_until(what, T, Duration::from_millis(100), || f().then_some(())).is_err() {
            fail(what, procs);
        }
    };
    step("the controller's probes to pass", &[&ctl], &mut || {
        ctl.probe(ctl_container, "livenessProbe") == 200
            && ctl.probe(ctl_container, "readinessProbe") == 200
    });
    // The memberlist Secret, created as MetalLB's controller creates it.
    let secret_api: Api<Secret> = Api::namespaced(cluster.client.clone(), &system);
    let mut ml_secret = None;
    step("the memberlist Secret", &[&ctl], &mut || {
        ml_secret = cluster
            .rt
            .block_on(secret_api.get_opt("memberlist"))
            .unwrap();
        ml_secret.is_some()
    });
    let ml_secret = ml_secret.unwrap();
    let owner = &ml_secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "controller")
    );
    let key = ml_secret.data.as_ref().unwrap()["secretkey"].0.clone();
    assert_eq!(key.len(), 22, "16 octets, base64 without padding");
    secrets.insert(
        "memberlist".into(),
        [("secretkey".to_owned(), key)].into_iter().collect(),
    );
    // The Service's address and MetalLB's annotation.
    let mut ip = String::new();
    step("the Service's address", &[&ctl], &mut || {
        let svc = cluster.get_service("web");
        let ingress = svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .unwrap_or_default();
        let pool = svc
            .metadata
            .annotations
            .unwrap_or_default()
            .get("metallb.io/ip-allocated-from-pool")
            .cloned();
        match (ingress.first().and_then(|i| i.ip.clone()), pool) {
            (Some(a), Some(p)) if p == "lan" => {
                ip = a;
                true
            }
            _ => false,
        }
    });
    assert!(ip.starts_with("10.0.0.1"), "{ip}");

    // Two speakers on one LAN, and a client.
    let bridge = Bridge::new("mlb");
    let client = Netns::new("mlbcli");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let mut speakers = Vec::new();
    let mut forwards = Vec::new();
    for (n, node_ip) in nodes {
        let (ns, fwd) = api_netns(&format!("mlb{n}"));
        bridge.attach(&ns, "eth0");
        ns.add_addr("eth0", &format!("{node_ip}/24"));
        let env = env_of(
            spk_container,
            &Downward {
                pod_name: format!("speaker-{n}"),
                node_name: cluster.node(n),
                host_ip: node_ip.into(),
                pod_ip: node_ip.into(),
            },
        );
        speakers.push(PodProc::start(
            &run,
            &format!("speaker-{n}"),
            &ns,
            env!("CARGO_BIN_EXE_speaker"),
            spk_spec,
            spk_container,
            env,
            mounts_of(spk_spec, spk_container, &secrets, &config_maps),
            &token(&system, "speaker"),
            &system,
        ));
        forwards.push(fwd);
    }
    let all: Vec<&PodProc> = std::iter::once(&ctl).chain(&speakers).collect();
    step("the speakers' probes to pass", &all, &mut || {
        speakers.iter().all(|s| {
            s.probe(spk_container, "livenessProbe") == 200
                && s.probe(spk_container, "readinessProbe") == 200
        })
    });
    // Memberlist formed from the speaker Pods, listed (MetalLB's role
    // grants no watch on Pods), encrypted with the Secret's key.
    step("memberlist to count both speakers", &all, &mut || {
        speakers.iter().all(|s| {
            s.get("127.0.0.1:7472", "/metrics")
                .1
                .lines()
                .any(|l| l == "ferrolb_memberlist_members 2")
        })
    });
    // One speaker announces; the client resolves the address to its MAC;
    // its ServiceL2Status names it.
    let mac_of = |ns: &Netns| -> String {
        let v: Value = serde_json::from_str(&ns.ip(["-j", "link", "show", "eth0"])).unwrap();
        v[0]["address"].as_str().unwrap().to_owned()
    };
    let mut resolved = String::new();
    step(
        "the client to resolve the service address",
        &all,
        &mut || {
            let _ = client.exec(["ping", "-c", "1", "-W", "1", &ip]);
            let out = client.ip(["-j", "neigh", "show", "to", &ip, "dev", "eth0"]);
            let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
            match v[0]["lladdr"].as_str() {
                Some(m) => {
                    resolved = m.to_owned();
                    true
                }
                None => false,
            }
        },
    );
    let winner = speakers
        .iter()
        .position(|s| mac_of(&s.ns) == resolved)
        .unwrap_or_else(|| fail("the address resolved to no speaker's MAC", &all));
    step("one ServiceL2Status, naming the winner", &all, &mut || {
        let s = cluster.statuses::<ServiceL2Status>();
        s.len() == 1 && s[0].0 == cluster.node(nodes[winner].0)
    });
    // Events reach the API under MetalLB's roles (core/v1 only): the
    // controller's IPAllocated and the winner's nodeAssigned.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cluster.client.clone(), &cluster.apps);
    step("IPAllocated and nodeAssigned events", &all, &mut || {
        let list = cluster
            .rt
            .block_on(events.list(&Default::default()))
            .unwrap();
        let reasons: Vec<&str> = list
            .items
            .iter()
            .filter_map(|e| e.reason.as_deref())
            .collect();
        reasons.contains(&"IPAllocated") && reasons.contains(&"nodeAssigned")
    });
    // MetalLB's HTTPS metrics port (--port=9120, metricshttps) answers
    // over TLS, and a scrape without a token is refused (MetalLB's native
    // manifest grants no TokenReviews; its -prometheus variant does).
    let https_port = ctl_container["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(ctl_container["ports"][0]["name"], "metricshttps");
    for p in &all {
        let addr = format!("127.0.0.1:{https_port}");
        step(
            "the HTTPS metrics port to refuse a scrape without a token",
            &all,
            &mut || p.get_https_without_token(&addr) == 401,
        );
    }
    // Nothing else these programs did was refused by MetalLB's roles (the
    // three refusals they expect and work around are the Lease, the watch
    // of Pods and the events.k8s.io API), no MetalLB flag or variable was
    // rejected, nothing failed, the HTTPS metrics listener started, and
    // the flags without effect were said to be so.
    let expected = [
        "may not use Leases",
        "cannot watch resource \\\"pods\\\"",
        "events.k8s.io is forbidden",
        "watching the speaker Pods is forbidden",
    ];
    for p in &all {
        let text = p.text();
        for line in text.lines() {
            let refused = line.contains("orbidden") && !expected.iter().any(|e| line.contains(e));
            if refused || line.contains("unexpected argument") || line.contains(" ERROR ") {
                fail(&format!("{}: {line}", p.log.display()), &all);
            }
        }
        assert!(
            text.contains("secure metrics server listening"),
            "{}",
            p.log.display()
        );
    }
    // The speakers' METALLB_HOST is said to have no effect.
    for s in &speakers {
        assert!(s.text().contains("has no effect"), "{}", s.log.display());
    }
    // And all three still run.
    let mut ctl = ctl;
    assert!(ctl.proc.is_running(), "the controller exited");
    for s in &mut speakers {
        assert!(s.proc.is_running(), "{} exited", s.log.display());
    }
    drop(speakers);
    drop(forwards);
}
