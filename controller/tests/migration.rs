//! Coming from MetalLB (issue 17, section 5): a real apiserver (a private
//! testenv, since CRDs are cluster-wide) holding a MetalLB v0.16 install
//! and its objects, then the README's migration lines run with bash as
//! written there, then ferrolb's controller (the binary, in place of the
//! Pod of the Deployment the last line installs: no kubelet runs).
//!
//! Checked: every address Services held stays, and no Service is ever
//! written with another one (a watch sees every write); the BGPPeer, which
//! could not be read as v1beta1 under MetalLB's conversion webhook, reads
//! as v1beta2 and v1beta1 after the CRD swap; the `memberlist` Secret is
//! reused untouched; a new Service gets the next free address in MetalLB's
//! order (`spec.addresses` order, where ferrolb's old numeric order would
//! have given another).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::v1beta1::{ConfigurationResult, ConfigurationState, IPAddressPool};
use futures::{StreamExt, TryStreamExt};
use hostile::{Process, TempDir};
use k8s_openapi::api::core::v1::{Event, Secret, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testenv::TestEnv;

/// How long the controller has to act on the API's objects.
const T: Duration = Duration::from_secs(60);
const NS: &str = "metallb-system";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kubectl ARGS` from the repository root, with `stdin`; its output.
fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
    use std::io::Write as _;
    let mut cmd = env.kubectl();
    cmd.args(args)
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(text + &err)
    } else {
        Err(format!("kubectl {}: {text}{err}", args.join(" ")))
    }
}

/// The lines of the README's migration block.
fn readme_steps() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("### Migrating a running MetalLB install")
        .nth(1)
        .expect("README: no migration section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("README: no sh block in the migration section");
    let steps: Vec<String> = block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    assert!(
        steps.iter().all(|s| s.starts_with("kubectl ")),
        "README: migration lines other than kubectl: {steps:?}"
    );
    steps
}

/// Runs a README line with bash from the repository root, testenv's
/// kubectl first in `PATH`.
fn run_line(env: &TestEnv, line: &str) {
    let path = format!(
        "{}:{}",
        env.bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", line])
        .env("PATH", path)
        .env("KUBECONFIG", env.kubeconfig_path())
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README line failed: {line}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A user's MetalLB configuration: `main` lists its ranges out of numeric
/// order, `team` is reserved to one namespace, `dual` holds both families.
const CONFIG: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: main, namespace: metallb-system}
spec:
  addresses: [192.0.2.128/26, 192.0.2.0/26]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: team, namespace: metallb-system}
spec:
  addresses: [198.51.100.0/28]
  serviceAllocation: {priority: 10, namespaces: [team-a]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: dual, namespace: metallb-system}
spec:
  addresses: [192.0.2.64/27, '2001:db8::/120']
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
spec: {ipAddressPools: [main, dual]}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp, namespace: metallb-system}
spec: {ipAddressPools: [team], communities: ['65000:100']}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: 64500, peerASN: 64501, peerAddress: 10.0.0.1, holdTime: 90s}
";

/// Every write to a Service the watch saw: the Service and its addresses.
type Writes = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// A pool added after MetalLB's controller is gone.
const EXTRA_POOL: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: extra, namespace: metallb-system}
spec: {addresses: [203.0.113.0/28]}
";

/// Waits until every CRD is Established.
fn crds_established(env: &TestEnv) {
    kubectl(
        env,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ],
        None,
    )
    .unwrap();
}

/// A Service as MetalLB left it: spec, annotations, and the addresses it
/// assigned in `status.loadBalancer.ingress`.
struct Held {
    namespace: &'static str,
    name: &'static str,
    annotations: &'static [(&'static str, &'static str)],
    port: i32,
    dual_stack: bool,
    ips: &'static [&'static str],
}

const HELD: &[Held] = &[
    Held {
        namespace: "default",
        name: "first",
        annotations: &[("metallb.io/ip-allocated-from-pool", "main")],
        port: 80,
        dual_stack: false,
        ips: &["192.0.2.128"],
    },
    Held {
        namespace: "default",
        name: "web-http",
        annotations: &[
            ("metallb.io/allow-shared-ip", "web"),
            ("metallb.io/ip-allocated-from-pool", "main"),
        ],
        port: 80,
        dual_stack: false,
        ips: &["192.0.2.129"],
    },
    Held {
        namespace: "default",
        name: "web-https",
        annotations: &[
            ("metallb.io/allow-shared-ip", "web"),
            ("metallb.io/ip-allocated-from-pool", "main"),
        ],
        port: 443,
        dual_stack: false,
        ips: &["192.0.2.129"],
    },
    Held {
        namespace: "default",
        name: "fixed",
        annotations: &[
            ("metallb.io/loadBalancerIPs", "192.0.2.140"),
            ("metallb.io/ip-allocated-from-pool", "main"),
        ],
        port: 80,
        dual_stack: false,
        ips: &["192.0.2.140"],
    },
    Held {
        namespace: "default",
        name: "both",
        annotations: &[
            ("metallb.io/address-pool", "dual"),
            ("metallb.io/ip-allocated-from-pool", "dual"),
        ],
        port: 80,
        dual_stack: true,
        ips: &["192.0.2.66", "2001:db8::5"],
    },
    Held {
        namespace: "team-a",
        name: "api",
        annotations: &[("metallb.io/ip-allocated-from-pool", "team")],
        port: 8080,
        dual_stack: false,
        ips: &["198.51.100.3"],
    },
];

async fn create_held(client: &Client, h: &Held) {
    let api: Api<Service> = Api::namespaced(client.clone(), h.namespace);
    let annotations: BTreeMap<&str, &str> = h.annotations.iter().copied().collect();
    let mut spec = json!({
        "type": "LoadBalancer",
        // Sharing services select the same Pods, as MetalLB requires.
        "selector": {"app": h.name.trim_end_matches("-http").trim_end_matches("-https")},
        "ports": [{"port": h.port}],
    });
    if h.dual_stack {
        spec["ipFamilyPolicy"] = "RequireDualStack".into();
        spec["ipFamilies"] = json!(["IPv4", "IPv6"]);
    }
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": h.name, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &svc).await.unwrap();
    let ingress: Vec<_> = h.ips.iter().map(|ip| json!({"ip": ip})).collect();
    api.patch_status(
        h.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": ingress}}})),
    )
    .await
    .unwrap();
}

fn ingress(svc: &Service) -> Vec<String> {
    svc.status
        .iter()
        .filter_map(|s| s.load_balancer.as_ref())
        .filter_map(|lb| lb.ingress.as_ref())
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

fn key(svc: &Service) -> String {
    format!("{}/{}", svc.namespace().unwrap_or_default(), svc.name_any())
}

async fn eventually<T, F, Fut>(what: &str, log: &Process, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + T;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            log.dump_log();
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metallb_install_migrates_and_every_address_stays() {
    let env = TestEnv::start_with_service_cidrs("10.96.0.0/16,fd00:96::/112").unwrap();
    let client = env.client().unwrap();
    let dir = TempDir::new("controller-migration");

    // MetalLB v0.16 as its native manifest installs it, with `kubectl
    // apply` (client-side).
    for ns in [NS, "team-a"] {
        kubectl(&env, &["create", "namespace", ns], None).unwrap();
    }
    kubectl(
        &env,
        &["apply", "-f", "testdata/metallb-v0.16/crds.yaml"],
        None,
    )
    .unwrap();
    crds_established(&env);
    kubectl(
        &env,
        &["apply", "-f", "testdata/metallb-v0.16/native.yaml"],
        None,
    )
    .unwrap();
    // The user's configuration, applied while MetalLB's webhook answered,
    // and the Secret MetalLB's controller created.
    kubectl(&env, &["apply", "-f", "-"], Some(CONFIG)).unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let memberlist: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "memberlist"},
        "data": {"secretkey": "bWV0YWxsYi1rZXktZnJvbS1iZWZvcmUtdGhlLW1pZ3JhdGlvbg=="},
    }))
    .unwrap();
    let memberlist = secrets
        .create(&PostParams::default(), &memberlist)
        .await
        .unwrap();
    for h in HELD {
        create_held(&client, h).await;
    }
    kubectl(
        &env,
        &["apply", "-f", "testdata/metallb-v0.16/webhook.yaml"],
        None,
    )
    .unwrap();

    // Under MetalLB's CRDs, without its controller: edits are refused by
    // the webhook, and v1beta1 BGPPeers cannot be read (conversion).
    let refused = kubectl(&env, &["apply", "-f", "-"], Some(EXTRA_POOL)).unwrap_err();
    assert!(refused.contains("metallb-webhook-service"), "{refused}");
    let v1beta1_peers: Api<api::v1beta1::BGPPeer> = Api::namespaced(client.clone(), NS);
    let err = v1beta1_peers.get("router").await.unwrap_err();
    assert!(err.to_string().contains("conversion webhook"), "{err}");

    // Every write to a Service from here on.
    let services: Api<Service> = Api::all(client.clone());
    let before = services.list(&ListParams::default()).await.unwrap();
    let held: BTreeMap<String, Vec<String>> = before
        .items
        .iter()
        .filter(|s| !ingress(s).is_empty())
        .map(|s| (key(s), ingress(s)))
        .collect();
    assert_eq!(held.len(), HELD.len(), "{held:?}");
    let writes: Writes = Arc::default();
    let watch = {
        let writes = writes.clone();
        let rv = before.metadata.resource_version.clone().unwrap();
        let mut stream = services
            .watch(&WatchParams::default().timeout(290), &rv)
            .await
            .unwrap()
            .boxed();
        tokio::spawn(async move {
            while let Some(ev) = stream.try_next().await.unwrap() {
                match ev {
                    WatchEvent::Added(s) | WatchEvent::Modified(s) => {
                        writes.lock().unwrap().push((key(&s), ingress(&s)));
                    }
                    WatchEvent::Error(e) => panic!("watch: {e:?}"),
                    WatchEvent::Deleted(_) | WatchEvent::Bookmark(_) => {}
                }
            }
        })
    };

    // The README's lines, as written there.
    let steps = readme_steps();
    assert!(steps.len() >= 4, "{steps:?}");
    for line in &steps {
        run_line(&env, line);
    }
    crds_established(&env);

    // Edits go through again, checked by ferrolb's CRDs; the pool is gone
    // again before the controller starts.
    kubectl(&env, &["apply", "-f", "-"], Some(EXTRA_POOL)).unwrap();
    kubectl(&env, &["delete", "-f", "-"], Some(EXTRA_POOL)).unwrap();

    // MetalLB's objects are all there; the BGPPeer reads in both versions.
    let peers: Api<api::v1beta2::BGPPeer> = Api::namespaced(client.clone(), NS);
    let peer = peers.get("router").await.unwrap();
    assert_eq!((peer.spec.my_asn, peer.spec.peer_asn), (64500, Some(64501)));
    let old = v1beta1_peers.get("router").await.unwrap();
    assert_eq!(old.spec.peer_address, "10.0.0.1");

    // ferrolb's controller, with the args of config/default's Deployment
    // and the memberlist variables MetalLB's manifest sets.
    let p = Process::start(
        env!("CARGO_BIN_EXE_controller"),
        &[
            "run",
            "--kubeconfig",
            env.kubeconfig_path().to_str().unwrap(),
            "--namespace",
            NS,
            "--ml-secret-name",
            "memberlist",
            "--deployment",
            "controller",
            "--identity",
            "migration",
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-probe-port",
            "0",
            "--log-format",
            "json",
        ],
        dir.join("controller.log"),
    );

    // The controller has loaded the pools and replayed the held addresses
    // once it reports the configuration valid and counts them.
    let states: Api<ConfigurationState> = Api::namespaced(client.clone(), NS);
    eventually("the controller's ConfigurationState", &p, || async {
        let s = states.get_opt("controller").await.ok()??;
        (s.status?.result == Some(ConfigurationResult::Valid)).then_some(())
    })
    .await;
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), NS);
    let counts = |name: &'static str| {
        let pools = pools.clone();
        async move {
            let s = pools.get(name).await.ok()?.status?;
            Some((s.assigned_ipv4, s.assigned_ipv6))
        }
    };
    eventually("the held addresses counted", &p, || async {
        let all = (
            counts("main").await?,
            counts("team").await?,
            counts("dual").await?,
        );
        (all == ((3, 0), (1, 0), (1, 1))).then_some(())
    })
    .await;

    // A new Service: the next free address in `spec.addresses` order
    // (192.0.2.0 in numeric order, as ferrolb once gave).
    let default: Api<Service> = Api::namespaced(client.clone(), "default");
    let new: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "new"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "new"}, "ports": [{"port": 80}]},
    }))
    .unwrap();
    default.create(&PostParams::default(), &new).await.unwrap();
    let got = eventually("an address for the new Service", &p, || async {
        let s = default.get("new").await.ok()?;
        let ips = ingress(&s);
        (!ips.is_empty()).then_some(ips)
    })
    .await;
    assert_eq!(got, ["192.0.2.130"]);
    assert!(held.values().flatten().all(|ip| *ip != got[0]));
    eventually("the new address counted", &p, || async {
        (counts("main").await? == (4, 0)).then_some(())
    })
    .await;

    // Every Service still holds what MetalLB gave it, and no write ever
    // showed another address.
    let after = services.list(&ListParams::default()).await.unwrap();
    for s in &after.items {
        if let Some(ips) = held.get(&key(s)) {
            assert_eq!(&ingress(s), ips, "{}", key(s));
        }
    }
    watch.abort();
    let writes = writes.lock().unwrap().clone();
    for (k, ips) in &writes {
        if let Some(want) = held.get(k) {
            assert_eq!(ips, want, "{k} was written with another address");
        }
    }
    // Nothing to warn about on a Service: no address kept against a
    // pool's rules, no failed allocation. Only the controller's Events:
    // the apiserver warns about its own objects too (its cluster IP
    // repair loop, "ClusterIPNotAllocated ... repairing", when it runs
    // while Services are being created).
    let events: Api<Event> = Api::all(client.clone());
    let ours = |e: &Event| {
        let manager = Some(controller::reconcile::MANAGER);
        e.reporting_component.as_deref() == manager
            || e.source.as_ref().and_then(|s| s.component.as_deref()) == manager
    };
    // The filter is not vacuous: the controller's own Events are seen
    // (they are sent after the status writes).
    let all = eventually("an Event of the controller's", &p, || async {
        let all = events.list(&ListParams::default()).await.ok()?.items;
        all.iter().any(ours).then_some(all)
    })
    .await;
    let warnings: Vec<String> = all
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.involved_object.kind.as_deref() == Some("Service"))
        .filter(|e| ours(e))
        .map(|e| format!("{:?}: {:?}", e.reason, e.message))
        .collect();
    assert!(warnings.is_empty(), "{warnings:?}");
    // The memberlist Secret is MetalLB's, untouched.
    let now = secrets.get("memberlist").await.unwrap();
    assert_eq!(now.resource_version(), memberlist.resource_version());
    assert_eq!(now.data, memberlist.data);
    drop(p);
    env.stop().unwrap();
}
