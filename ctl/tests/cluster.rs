//! `kubectl-ferrolb` as a user runs it, against a real apiserver (testenv)
//! holding the scripted cluster of `tests/cluster.yaml`: `status`,
//! `explain` and `diff` (of the files in `tests/diff/`) print, as tables
//! and as JSON or YAML, exactly the reviewed outputs in `tests/golden/`;
//! `migrate-configmap` converts `tests/migrate/configmap.yaml` to
//! `tests/golden/migrate-configmap.yaml`, objects the apiserver and the
//! controller's plan take. After a deliberate change:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test -p kubectl-ferrolb --test cluster
//! ```
//!
//! and review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::{Read as _, Write as _};
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
    assert!(
        ok == 2 && err.contains("service demo/nope not found"),
        "{err}"
    );
    let (ok, _, err) = output(&["--kubeconfig", &path, "explain", "deploy/web"], None);
    assert!(ok == 2 && err.contains("not \"deploy\""), "{err}");
}

#[test]
fn diff_of_the_live_objects_moves_nothing() {
    let (code, out, err) = diff("noop.yaml", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("No change"), "{out}");
    golden("diff-noop.txt", &out);
}

#[test]
fn diff_a_pool_shrink_that_moves_a_service() {
    let (code, out, err) = diff("shrink-moves.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("demo/l2-other   moves    192.168.10.201 (l2-pool)   198.51.100.2 (bgp-pool)"),
        "{out}"
    );
    golden("diff-shrink-moves.txt", &out);
    let (code, json, _) = diff("shrink-moves.yaml", &["-o", "json"]);
    assert_eq!(code, 1);
    golden("diff-shrink-moves.json", &json);
}

#[test]
fn diff_reads_standard_input() {
    let env = cluster();
    let path = env.kubeconfig_path().to_str().unwrap().to_owned();
    let text =
        std::fs::read_to_string(manifest_dir().join("tests/diff/shrink-moves.yaml")).unwrap();
    let (code, out, err) = output_with(
        &["--kubeconfig", &path, "diff", "-f", "-"],
        None,
        Some(&text),
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, diff("shrink-moves.yaml", &[]).1);
}

#[test]
fn diff_a_pool_shrink_that_leaves_a_service_without_address() {
    let (code, out, err) = diff("shrink-loses.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains(
            "demo/l2-other   loses    192.168.10.201 (l2-pool)   pending: no available IPs"
        ),
        "{out}"
    );
    golden("diff-shrink-loses.txt", &out);
}

#[test]
fn diff_a_new_pool_with_a_namespace_selector() {
    let (code, out, err) = diff("namespace-pool.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("demo/api   gains    absent   10.10.0.0 (team-demo)"),
        "{out}"
    );
    golden("diff-namespace-pool.txt", &out);
    golden(
        "diff-namespace-pool.yaml",
        &diff("namespace-pool.yaml", &["-o", "yaml"]).1,
    );
}

#[test]
fn diff_keeps_the_addresses_a_narrower_pool_no_longer_selects() {
    let (code, out, err) = diff("namespace-kept.yaml", &[]);
    assert_eq!(code, 0, "kept addresses move nothing: {err}");
    assert!(
        out.contains("demo/l2-web     kept")
            && out.contains("pool l2-pool's serviceAllocation does not select this service"),
        "{out}"
    );
    golden("diff-namespace-kept.txt", &out);
}

#[test]
fn diff_a_pool_split_changes_the_pool_and_the_announcement() {
    let (code, out, err) = diff("split.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains(
            "demo/l2-other   pool     192.168.10.201 (l2-pool)   192.168.10.201 (l2-spare)"
        ) && out.contains("No node would announce demo/l2-other"),
        "{out}"
    );
    golden("diff-split.txt", &out);
}

#[test]
fn diff_an_l2_node_selector_that_moves_the_owner() {
    let (code, out, err) = diff("l2-node-selector.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("demo/l2-web     node2    node1"), "{out}");
    golden("diff-l2-node-selector.txt", &out);
}

#[test]
fn diff_names_the_field_of_an_invalid_object() {
    let (code, out, err) = diff("invalid.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("IPAddressPool \"l2-pool\": spec.addresses[0]")
            && out.contains("BGPPeer \"core\": spec.peerASN"),
        "{out}"
    );
    golden("diff-invalid.txt", &out);
    // A document that does not read as its kind is an error.
    let bad = temp_file(
        "bad-pool.yaml",
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: x}\nspec: {addresses: 5}\n",
    );
    let (code, _, err) = ctl_status(&["diff", "-f", bad.to_str().unwrap()]);
    std::fs::remove_file(&bad).unwrap();
    assert!(
        code == 2 && err.contains("document 0: IPAddressPool"),
        "{code} {err}"
    );
    let (code, _, err) = ctl_status(&["diff", "-f", "/nonexistent/pools.yaml"]);
    assert!(
        code == 2 && err.contains("/nonexistent/pools.yaml"),
        "{err}"
    );
}

#[test]
fn migrate_a_legacy_configmap() {
    let out = run(
        &["migrate-configmap", "-f", "tests/migrate/configmap.yaml"],
        None,
    );
    golden("migrate-configmap.yaml", &out);
    // The bare configuration (the ConfigMap's `config` key) converts alike.
    let manifest: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(manifest_dir().join("tests/migrate/configmap.yaml")).unwrap(),
    )
    .unwrap();
    let bare = temp_file("legacy.yaml", manifest["data"]["config"].as_str().unwrap());
    assert_eq!(
        run(&["migrate-configmap", "-f", bare.to_str().unwrap()], None),
        out
    );
    std::fs::remove_file(&bare).unwrap();
    // Every document reads as its kind and passes ferrolb's validation.
    let cfg = api::validate::Config::from_yaml(&out).unwrap();
    let counts = [
        cfg.peers.len(),
        cfg.pools.len(),
        cfg.bgp_advertisements.len(),
        cfg.l2_advertisements.len(),
        cfg.bfd_profiles.len(),
        cfg.communities.len(),
    ];
    assert_eq!(counts, [3, 3, 3, 1, 2, 1]);
    let (_, problems) = api::validate::config(&cfg);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn migrate_names_what_it_cannot_convert() {
    for (text, want) in [
        (
            "peers:\n- {peer-address: 10.0.0.1, peer-asn: 1, my-asn: 2, vrf: red}\n",
            "unknown field `vrf`",
        ),
        (
            "address-pools: []\nprotocol: bgp\n",
            "unknown field `protocol`",
        ),
        (
            "address-pools:\n- {name: a, protocol: ospf, addresses: [10.0.0.0/24]}\n",
            "unknown variant `ospf`",
        ),
        (
            "address-pools:\n- name: a\n  protocol: layer2\n  addresses: [10.0.0.0/24]\n  bgp-advertisements: [{localpref: 1}]\n",
            "address-pools[0] (a): bgp-advertisements: only a bgp pool has them",
        ),
        (
            "address-pools:\n- {name: a, protocol: bgp, addresses: [10.0.0.0/33]}\n",
            "IPAddressPool \"a\": spec.addresses[0]",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config}\ndata: {other: x}\n",
            "no data.config",
        ),
    ] {
        let file = temp_file("bad-legacy.yaml", text);
        let (code, out, err) = output(&["migrate-configmap", "-f", file.to_str().unwrap()], None);
        std::fs::remove_file(&file).unwrap();
        assert!(
            code == 2 && out.is_empty() && err.contains(want),
            "{text}: want {want:?}, got {code}: {err}"
        );
    }
}

#[test]
fn migrated_objects_are_accepted_and_allocate() {
    let env = cluster();
    let out = run(
        &[
            "migrate-configmap",
            "-f",
            "tests/migrate/configmap.yaml",
            "--metallb-namespace",
            "legacy",
        ],
        None,
    );
    // The apiserver takes them (the CRDs' schemas and CEL rules).
    let text = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: legacy}}\n{out}");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(create(env, &text))
        .unwrap();
    // The controller's state from the cluster: the three pools, no
    // problem; production has 254 IPv4 addresses (avoidBuggyIPs takes
    // .0 and .255) and 16 IPv6 ones.
    let status: Value = serde_json::from_str(&ctl(&[
        "status",
        "--metallb-namespace",
        "legacy",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(status["problems"], serde_json::json!([]), "{status}");
    let pools: Vec<(String, u64, u64)> = status["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["ipv4"]["total"].as_u64().unwrap(),
                p["ipv6"]["total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pools,
        [
            ("office".into(), 16, 0),
            ("production".into(), 254, 16),
            ("staging".into(), 10, 0),
        ]
    );
    // The controller's plan over them: a new Service gets an address of
    // an auto-assigned pool, one asking for staging gets staging's first.
    let services = "---\napiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: app}\n\
        spec: {type: LoadBalancer, ports: [{port: 80}]}\n\
        ---\napiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: app, annotations: {metallb.io/address-pool: staging}}\n\
        spec: {type: LoadBalancer, ports: [{port: 80}]}\n";
    let plan = controller::plan::plan(
        &[controller::plan::Source {
            name: "migrated".into(),
            text: format!("{out}{services}"),
        }],
        None,
    )
    .unwrap();
    let got: Vec<(String, Option<String>, Vec<String>)> = plan
        .services
        .iter()
        .map(|s| (s.service.clone(), s.pool.clone(), s.ips.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "app/a".into(),
                Some("office".into()),
                vec!["192.168.1.240".into()]
            ),
            (
                "app/b".into(),
                Some("staging".into()),
                vec!["203.0.113.10".into()]
            ),
        ]
    );
}

/// A file in the temporary directory, named for this process.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ferrolb-ctl-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

/// `kubectl ferrolb diff -f tests/diff/<file> <args>`.
fn diff(file: &str, args: &[&str]) -> (i32, String, String) {
    // Relative to the crate (the plugin runs there), as the output
    // names it.
    let path = format!("tests/diff/{file}");
    let mut all = vec!["diff", "-f", path.as_str()];
    all.extend_from_slice(args);
    ctl_status(&all)
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
    let (code, out, err) = output(args, kubeconfig_env);
    assert_eq!(code, 0, "kubectl-ferrolb {args:?} failed:\n{err}");
    out
}

/// Runs the plugin with the test cluster's kubeconfig; (exit status,
/// stdout, stderr).
fn ctl_status(args: &[&str]) -> (i32, String, String) {
    let env = cluster();
    let path = env.kubeconfig_path().to_str().unwrap().to_owned();
    let mut all = vec!["--kubeconfig", path.as_str()];
    all.extend_from_slice(args);
    output(&all, None)
}

/// Runs the plugin, killing it (by its PID, through its handle) if it has
/// not finished within a minute; (exit status, stdout, stderr).
fn output(args: &[&str], kubeconfig_env: Option<&Path>) -> (i32, String, String) {
    output_with(args, kubeconfig_env, None)
}

/// [`output`], with `stdin` as the plugin's standard input.
fn output_with(
    args: &[&str],
    kubeconfig_env: Option<&Path>,
    stdin: Option<&str>,
) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-ferrolb"));
    cmd.args(args)
        .current_dir(manifest_dir())
        .env_remove("KUBECONFIG")
        .env_remove("METALLB_NAMESPACE")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(k) = kubeconfig_env {
        cmd.env("KUBECONFIG", k);
    }
    let mut child = cmd.spawn().unwrap();
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let text = text.to_owned();
        std::thread::spawn(move || pipe.write_all(text.as_bytes()));
    }
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
        status.code().unwrap_or(-1),
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
    let text = std::fs::read_to_string(manifest_dir().join("tests/cluster.yaml"))
        .map_err(|e| e.to_string())?;
    create(env, &text).await
}

/// Creates the objects of `text` (multi-document YAML), with their status.
async fn create(env: &TestEnv, text: &str) -> Result<(), String> {
    let client = env.client().map_err(|e| e.to_string())?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
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
        "Community" => "communities".into(),
        other => format!("{}s", other.to_lowercase()),
    }
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `got` with `tests/golden/<name>`, or rewrites the file under
/// `UPDATE_GOLDEN=1`.
fn golden(name: &str, got: &str) {
    testenv::golden::check(
        &manifest_dir().join("tests/golden").join(name),
        got,
        "cargo test -p kubectl-ferrolb --test cluster",
    );
}
