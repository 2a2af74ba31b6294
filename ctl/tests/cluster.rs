//! `kubectl-ferrolb` as a user runs it, against a real apiserver (testenv)
//! holding the scripted cluster of `tests/cluster.yaml`: `status` and
//! `explain` print, as tables and as JSON, exactly the reviewed outputs in
//! `tests/golden/`. After a deliberate change:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test -p kubectl-ferrolb --test cluster
//! ```
//!
//! and review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::Value;
use testenv::TestEnv;

#[test]
fn status_shows_pools_pending_services_and_nodes() {
    let table = ctl(&["status"]);
    assert!(
        table.contains("demo/starved")
            && table.contains("no available IPs in l2-pool")
            && table.contains("2026-01-02T03:14:05Z AllocationFailed"),
        "{table}"
    );
    golden("status.txt", &table);
    golden("status.json", &ctl(&["status", "-o", "json"]));
    // One namespace: no pending Service in shop.
    let shop = ctl(&["status", "-n", "shop"]);
    assert!(shop.contains("Pending Services: none"), "{shop}");
}

#[test]
fn explain_a_bgp_service() {
    let table = ctl(&["explain", "svc/web", "-n", "shop"]);
    assert!(
        table.contains("198.51.100.0/32 spine localPref 100 communities 64512:100"),
        "{table}"
    );
    golden("explain-web.txt", &table);
    golden(
        "explain-web.json",
        &ctl(&["explain", "svc/web", "-n", "shop", "-o", "json"]),
    );
}

#[test]
fn explain_a_local_service_without_endpoints() {
    let table = ctl(&["explain", "service/local", "--namespace", "shop"]);
    assert!(
        table.contains(
            "withheld: externalTrafficPolicy is Local and no serving endpoint is on this node"
        ),
        "{table}"
    );
    golden("explain-local.txt", &table);
    golden(
        "explain-local.json",
        &ctl(&["explain", "local", "-n", "shop", "-o", "json"]),
    );
}

#[test]
fn explain_a_pending_service() {
    let table = ctl(&["explain", "svc/starved", "-n", "demo"]);
    assert!(
        table.contains("no available IPs in l2-pool")
            && table.contains("refused: the service's address-pool annotation names pool l2-pool"),
        "{table}"
    );
    golden("explain-starved.txt", &table);
    golden(
        "explain-starved.json",
        &ctl(&["explain", "svc/starved", "-n", "demo", "-o", "json"]),
    );
}

#[test]
fn explain_a_layer2_service() {
    let table = ctl(&["explain", "svc/l2-web", "-n", "demo"]);
    assert!(
        table.contains("candidates node2, node1 (winner node2)")
            && table.contains("answering per ServiceL2Status: node2"),
        "{table}"
    );
    golden("explain-l2-web.txt", &table);
    golden(
        "explain-l2-web.json",
        &ctl(&["explain", "svc/l2-web", "-n", "demo", "-o", "json"]),
    );
}

#[test]
fn kubeconfig_from_the_environment_and_yaml() {
    let env = cluster();
    let out = run(&["status", "-o", "yaml"], Some(env.kubeconfig_path()));
    let from_yaml: Value = serde_saphyr::from_str(&out).unwrap();
    let from_json: Value = serde_json::from_str(&ctl(&["status", "-o", "json"])).unwrap();
    assert_eq!(from_yaml, from_json);
}

#[test]
fn errors_name_what_is_wrong() {
    let env = cluster();
    let path = env.kubeconfig_path().to_str().unwrap().to_owned();
    let (ok, _, err) = output(
        &["--kubeconfig", &path, "explain", "svc/nope", "-n", "demo"],
        None,
    );
    assert!(!ok && err.contains("service demo/nope not found"), "{err}");
    let (ok, _, err) = output(&["--kubeconfig", &path, "explain", "deploy/web"], None);
    assert!(!ok && err.contains("not \"deploy\""), "{err}");
}

/// Runs the plugin with the test cluster's kubeconfig and returns its
/// standard output; fails the test if it fails.
fn ctl(args: &[&str]) -> String {
    let env = cluster();
    let path = env.kubeconfig_path().to_str().unwrap().to_owned();
    let mut all = vec!["--kubeconfig", path.as_str()];
    all.extend_from_slice(args);
    run(&all, None)
}

/// Runs the plugin and returns its standard output; fails the test if it
/// fails.
fn run(args: &[&str], kubeconfig_env: Option<&Path>) -> String {
    let (ok, out, err) = output(args, kubeconfig_env);
    assert!(ok, "kubectl-ferrolb {args:?} failed:\n{err}");
    out
}

/// Runs the plugin, killing it (by its PID, through its handle) if it has
/// not finished within a minute; (success, stdout, stderr).
fn output(args: &[&str], kubeconfig_env: Option<&Path>) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-ferrolb"));
    cmd.args(args)
        .env_remove("KUBECONFIG")
        .env_remove("METALLB_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(k) = kubeconfig_env {
        cmd.env("KUBECONFIG", k);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).map(|_| s)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kubectl-ferrolb {args:?} took over a minute: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.success(),
        out.join().unwrap().unwrap(),
        err.join().unwrap().unwrap(),
    )
}

/// The shared apiserver, with the CRDs and `tests/cluster.yaml` applied
/// once for all tests of this binary. The apiserver and etcd stop when
/// this process exits, whatever the outcome (see `TestEnv::global`).
fn cluster() -> &'static TestEnv {
    static APPLIED: OnceLock<Result<(), String>> = OnceLock::new();
    let env = TestEnv::global();
    let applied = APPLIED.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(apply(env))
    });
    if let Err(e) = applied {
        panic!("applying tests/cluster.yaml: {e}");
    }
    env
}

async fn apply(env: &TestEnv) -> Result<(), String> {
    env.install_crds(api::crds())
        .await
        .map_err(|e| e.to_string())?;
    let client = env.client().map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(manifest_dir().join("tests/cluster.yaml"))
        .map_err(|e| e.to_string())?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| e.to_string())?;
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &plural(kind));
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject =
            serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
        api.create(&PostParams::default(), &object)
            .await
            .map_err(|e| format!("{kind} {name}: {e}"))?;
        // Events keep what they were created with; the rest take their
        // status through the subresource, as the programs write it.
        if let (Some(status), false) = (doc.get("status"), kind == "Event") {
            let patch = serde_json::json!({ "status": status });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| format!("{kind} {name} status: {e}"))?;
        }
    }
    Ok(())
}

fn plural(kind: &str) -> String {
    match kind {
        "EndpointSlice" => "endpointslices".into(),
        "ServiceL2Status" => "servicel2statuses".into(),
        "ServiceBGPStatus" => "servicebgpstatuses".into(),
        other => format!("{}s", other.to_lowercase()),
    }
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `got` with `tests/golden/<name>`, or rewrites the file under
/// `UPDATE_GOLDEN=1`.
fn golden(name: &str, got: &str) {
    let file = manifest_dir().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&file, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (UPDATE_GOLDEN=1 cargo test -p kubectl-ferrolb --test cluster writes it)",
            file.display()
        )
    });
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
        panic!(
            "output differs from {} from line {}:\n  want: {:?}\n  got:  {:?}\n\
             whole output:\n{got}\n\
             (after a deliberate change: UPDATE_GOLDEN=1 cargo test -p kubectl-ferrolb --test cluster, and review the diff)",
            file.display(),
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}
