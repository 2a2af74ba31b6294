//! The Helm chart `charts/ferrolb` with the pinned Helm CLI
//! (`testenv/build-helm` builds it; this test only uses it, as the apiserver
//! tests use `testenv/build`'s binaries, and fails naming what is missing):
//!
//! - `helm lint` passes, with the chart's values, with a MetalLB values
//!   file (`testdata/helm/metallb-values.yaml`) and with the values of
//!   ferrolb's speakers beside a running MetalLB
//!   (`testdata/helm/migrate-from-metallb-values.yaml`);
//! - `helm template` of the three equals the golden files in `testdata/helm/`;
//! - the migration values render exactly `config/migrate-from-metallb`;
//! - the default values render exactly `config/default` (every object but the
//!   Namespace, which a Helm release does not own), CRDs included, and the
//!   chart's `crds/` are the files of `config/crd`;
//! - `helm package` keeps them: the packaged chart renders the same;
//! - MetalLB values ferrolb cannot honour fail with the chart's message;
//! - `helm install --server-side` of the three values files into the real
//!   apiserver creates every rendered object (field manager `helm`,
//!   operation Apply), and a second `helm upgrade` of the same succeeds.
//!
//! After a deliberate change to the chart or to `config/`, regenerate the
//! golden files and the chart's copy of the CRDs with
//!
//! ```text
//! UPDATE_GOLDEN=1 cargo test -p testenv --test helm
//! ```
//!
//! and review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use testenv::TestEnv;

/// The release name every render and install uses.
const RELEASE: &str = "ferrolb";

#[test]
fn lint_passes_with_default_metallb_and_migrate_values() {
    let chart = chart();
    let out = helm(&["lint", "--strict", path(&chart)]);
    assert!(
        out.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{out}"
    );
    for values in [metallb_values(), migrate_values()] {
        let out = helm(&["lint", "--strict", path(&chart), "-f", path(&values)]);
        assert!(
            out.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{}: {out}",
            values.display()
        );
    }
}

#[test]
fn packaged_chart_renders_the_same_with_its_crds() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("helm-package");
    let _ = std::fs::remove_dir_all(&dir);
    let out = helm(&["package", path(&chart()), "-d", path(&dir)]);
    let tgz = dir.join("ferrolb-0.1.0.tgz");
    assert!(tgz.is_file(), "{out}");
    let render = |chart: &Path| {
        helm(&[
            "template",
            RELEASE,
            path(chart),
            "--namespace",
            "metallb-system",
            "--include-crds",
        ])
    };
    let packaged = render(&tgz);
    assert_eq!(packaged, render(&chart()));
    let crds = objects(&packaged)
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .count();
    assert_eq!(crds, 9, "the package holds the nine metallb.io CRDs");
}

#[test]
fn template_matches_golden_files() {
    let default = template(&[]);
    golden("default.golden.yaml", &default);
    let values = metallb_values();
    let metallb = template(&["-f", path(&values)]);
    golden("metallb-values.golden.yaml", &metallb);
    let migrate = migrate_values();
    golden(
        "migrate-from-metallb-values.golden.yaml",
        &helm(&[
            "template",
            RELEASE,
            path(&chart()),
            "--namespace",
            "ferrolb-system",
            "-f",
            path(&migrate),
        ]),
    );
    // The MetalLB file's user overrides reach the objects.
    let docs = objects(&metallb);
    let speaker = find(&docs, "DaemonSet", "speaker");
    let pod = &speaker["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.com/ferrolb/speaker:v0.1.0"
    );
    let args = strings(&pod["containers"][0]["args"]);
    assert!(args.contains(&"--memberlist-key-file=/etc/ml_secret_key/secretkey".to_owned()));
    assert!(args.contains(&"--health-probe-port=17472".to_owned()));
    assert_eq!(
        pod["containers"][0]["startupProbe"]["httpGet"]["port"],
        17472
    );
    let controller = find(&docs, "Deployment", "controller");
    let pod = &controller["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], 65534);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["nodeSelector"]["node-role.kubernetes.io/infra"], "");
    assert!(strings(&pod["containers"][0]["args"]).contains(&"--log-level=debug".to_owned()));
    // MetalLB's HTTPS metrics: --port=metricsPort with its TLS values, the
    // port named metricshttps, scraped over HTTPS with Prometheus' token,
    // which may get /metrics.
    let args = strings(&pod["containers"][0]["args"]);
    for arg in ["--port=9120", "--tls-min-version=VersionTLS12"] {
        assert!(args.contains(&arg.to_owned()), "{arg}: {args:?}");
    }
    assert_eq!(pod["containers"][0]["ports"][1]["name"], "metricshttps");
    let monitor = find(&docs, "ServiceMonitor", "speaker-monitor");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "metricshttps");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert_eq!(endpoint["tlsConfig"]["insecureSkipVerify"], true);
    let reader = find(&docs, "ClusterRole", "metallb-system:prometheus-metrics");
    assert_eq!(reader["rules"][0]["nonResourceURLs"][0], "/metrics");
    for (kind, name) in [
        ("ServiceMonitor", "controller-monitor"),
        ("ServiceMonitor", "speaker-monitor"),
        ("PrometheusRule", "ferrolb-rules"),
        ("Role", "prometheus-k8s"),
    ] {
        find(&docs, kind, name);
    }
}

#[test]
fn default_values_render_config_default() {
    let env = TestEnv::global();
    // config/default pins the `latest` tag; the chart's default is its
    // appVersion.
    let chart = objects(&template(&[
        "--include-crds",
        "--set",
        "controller.image.tag=latest,speaker.image.tag=latest",
    ]));
    let kustomize = env
        .kubectl()
        .args(["kustomize", path(&repo().join("config/default"))])
        .output()
        .unwrap();
    let kustomized = ok("kubectl kustomize config/default", &kustomize);
    let want: BTreeMap<_, _> = objects(&kustomized)
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .map(|d| (id(&d), d))
        .collect();
    // Helm re-serializes the CRDs it includes: 255 comes back as 255.0.
    let got: BTreeMap<_, _> = chart.into_iter().map(|d| (id(&d), integral(d))).collect();
    assert_eq!(
        got.keys().collect::<BTreeSet<_>>(),
        want.keys().collect::<BTreeSet<_>>(),
        "the chart's objects are not config/default's"
    );
    for (key, want) in &want {
        assert_eq!(&got[key], want, "{key:?} differs from config/default's");
    }
}

/// ferrolb's speakers beside a running MetalLB (docs/src/metallb.md, "Node
/// by node, without an outage"): the chart with
/// `testdata/helm/migrate-from-metallb-values.yaml`, released in
/// ferrolb-system, renders exactly `config/migrate-from-metallb` (but its
/// Namespace); the coexistence settings are off by default (the default
/// render is `config/default`, above).
#[test]
fn migrate_values_render_config_migrate_from_metallb() {
    let env = TestEnv::global();
    let values = migrate_values();
    let chart = objects(&helm(&[
        "template",
        RELEASE,
        path(&chart()),
        "--namespace",
        "ferrolb-system",
        "-f",
        path(&values),
        "--set",
        "speaker.image.tag=latest",
    ]));
    let kustomize = env
        .kubectl()
        .args([
            "kustomize",
            path(&repo().join("config/migrate-from-metallb")),
        ])
        .output()
        .unwrap();
    let kustomized = ok("kubectl kustomize config/migrate-from-metallb", &kustomize);
    let key = |d: &Value| {
        (
            id(d),
            d["metadata"]["namespace"].as_str().map(str::to_owned),
        )
    };
    let want: BTreeMap<_, _> = objects(&kustomized)
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .map(|d| (key(&d), d))
        .collect();
    let got: BTreeMap<_, _> = chart.into_iter().map(|d| (key(&d), d)).collect();
    assert_eq!(
        got.keys().collect::<BTreeSet<_>>(),
        want.keys().collect::<BTreeSet<_>>(),
        "the chart's objects are not config/migrate-from-metallb's"
    );
    for (key, want) in &want {
        assert_eq!(
            &got[key], want,
            "{key:?} differs from config/migrate-from-metallb's"
        );
    }
    // The Role is in MetalLB's namespace, not the release's.
    let reader = find(&objects(&kustomized), "Role", "ferrolb-metallb-reader").clone();
    assert_eq!(reader["metadata"]["namespace"], "metallb-system");
}

#[test]
fn prometheus_rule_with_default_values_is_config_alerts() {
    let docs = objects(&template(&[
        "--set",
        "prometheus.prometheusRule.enabled=true",
    ]));
    let rule = find(&docs, "PrometheusRule", "ferrolb-rules");
    let alerts = std::fs::read_to_string(repo().join("config/prometheus/alerts.yaml")).unwrap();
    let alerts: Value = serde_saphyr::from_str(&alerts).unwrap();
    assert_eq!(rule["spec"], alerts, "config/prometheus/alerts.yaml");
}

#[test]
fn chart_crds_are_config_crd() {
    let from = repo().join("config/crd");
    let to = chart().join("crds");
    let crds = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".yaml"))
            .collect()
    };
    if update() {
        for name in crds(&to) {
            std::fs::remove_file(to.join(name)).unwrap();
        }
        for name in crds(&from) {
            std::fs::copy(from.join(&name), to.join(&name)).unwrap();
        }
    }
    let names = crds(&from);
    assert_eq!(names.len(), 9, "config/crd has MetalLB's nine kinds");
    assert_eq!(
        crds(&to),
        names,
        "charts/ferrolb/crds/ and config/crd list different CRDs (UPDATE_GOLDEN=1 copies them)"
    );
    for name in names {
        assert!(
            std::fs::read(from.join(&name)).unwrap() == std::fs::read(to.join(&name)).unwrap(),
            "charts/ferrolb/crds/{name} differs from config/crd/{name} (UPDATE_GOLDEN=1 copies it)"
        );
    }
}

#[test]
fn values_ferrolb_cannot_honour_fail_with_a_reason() {
    for (set, message) in [
        ("speaker.frr.enabled=true", "ferrolb has no FRR mode"),
        ("networkpolicies.enabled=true", "ships no NetworkPolicies"),
        (
            "speaker.memberlist.mlBindAddrOverride=status.podIPs",
            "mlBindAddrOverride: not supported",
        ),
        (
            "speaker.memberlist.enabled=false,speaker.nodeSelector.a=b",
            "speaker.nodeSelector must be empty",
        ),
        (
            "prometheus.serviceMonitor.enabled=true",
            "prometheus.serviceAccount is required",
        ),
        (
            "controller.livenessProbe.port=17472,controller.readinessProbe.port=17473",
            "the probes of one component must use the same port",
        ),
    ] {
        let out = helm_output(&["template", RELEASE, path(&chart()), "--set", set]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} rendered");
        assert!(stderr.contains(message), "--set {set}: {stderr}");
    }
    // What MetalLB's default values carry and ferrolb accepts.
    for set in [
        "speaker.frr.enabled=false",
        "frrk8s.enabled=true",
        "controller.webhookMode=enabled",
        "crds.enabled=true",
    ] {
        let out = helm_output(&["template", RELEASE, path(&chart()), "--set", set]);
        ok(&format!("helm template --set {set}"), &out);
    }
}

#[test]
fn install_creates_every_object_with_default_metallb_and_migrate_values() {
    let env = TestEnv::global();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The Prometheus operator's kinds, schemaless: enough for the apiserver
    // to store the ServiceMonitors and the PrometheusRule.
    rt.block_on(env.install_crds_yaml(&monitoring_crds()))
        .unwrap();
    let kubeconfig = path(env.kubeconfig_path()).to_owned();
    let chart = chart();
    let values = metallb_values();
    // Beside a MetalLB: its namespace holds the reader Role.
    let migrate = migrate_values();
    let metallb_ns = rt.block_on(env.fresh_namespace("helm-metallb")).unwrap();
    let coexist = format!("speaker.metallbCoexistence.namespace={metallb_ns}");
    for (extra, least) in [
        (vec![], 14),
        (vec!["-f", path(&values)], 14),
        (vec!["-f", path(&migrate), "--set", &coexist], 9),
    ] {
        let ns = rt.block_on(env.fresh_namespace("helm")).unwrap();
        let mut args = vec![
            "upgrade",
            "--install",
            RELEASE,
            path(&chart),
            "--namespace",
            &ns,
            "--kubeconfig",
            &kubeconfig,
            "--server-side=true",
        ];
        args.extend(&extra);
        // Twice: the second is an upgrade of an unchanged release.
        for round in ["install", "upgrade"] {
            let out = helm_output(&args);
            ok(&format!("helm {round} {extra:?}"), &out);
        }
        let status = helm(&["status", RELEASE, "-n", &ns, "--kubeconfig", &kubeconfig]);
        assert!(status.contains("STATUS: deployed"), "{status}");
        // Every object the release renders exists, as rendered.
        let mut tmpl = vec!["template", RELEASE, path(&chart), "--namespace", &ns];
        tmpl.extend(&extra);
        let rendered = helm(&tmpl);
        let mut get = env
            .kubectl()
            .args(["get", "-f", "-", "-o", "json", "--show-managed-fields"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        get.stdin
            .take()
            .unwrap()
            .write_all(rendered.as_bytes())
            .unwrap();
        let out = get.wait_with_output().unwrap();
        let live: Value = serde_json::from_str(&ok("kubectl get -f -", &out)).unwrap();
        let live: BTreeMap<_, _> = live["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (id(d), d.clone()))
            .collect();
        let rendered = objects(&rendered);
        assert!(
            rendered.len() >= least,
            "{} objects rendered, {least} expected",
            rendered.len()
        );
        for want in &rendered {
            let got = live
                .get(&id(want))
                .unwrap_or_else(|| panic!("{:?} was not created", id(want)));
            assert_eq!(
                got["metadata"]["annotations"]["meta.helm.sh/release-namespace"],
                *ns,
                "{:?} is not owned by the release",
                id(want)
            );
            // Written by server-side apply, field manager helm.
            let managers: Vec<_> = got["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["manager"].clone(), m["operation"].clone()))
                .collect();
            assert!(
                managers.contains(&("helm".into(), "Apply".into())),
                "{:?} was not server-side applied by helm: {managers:?}",
                id(want)
            );
            for field in ["rules", "roleRef", "subjects", "data"] {
                assert_eq!(got[field], want[field], "{:?}: {field}", id(want));
            }
            if want["kind"] == "DaemonSet" || want["kind"] == "Deployment" {
                let pod = |d: &Value| d["spec"]["template"]["spec"]["containers"][0].clone();
                let (got, want) = (pod(got), pod(want));
                for field in ["image", "args", "securityContext", "ports"] {
                    assert_eq!(got[field], want[field], "{field}");
                }
            }
        }
        // The metallb.io CRDs came from the chart's crds/ directory.
        let crds = env
            .kubectl()
            .args(["get", "crd", "-o", "name"])
            .output()
            .unwrap();
        let crds = ok("kubectl get crd", &crds);
        assert_eq!(
            crds.lines().filter(|l| l.ends_with(".metallb.io")).count(),
            9,
            "{crds}"
        );
    }
}

/// `helm template` of the chart as release [`RELEASE`] in metallb-system,
/// with `args` added.
fn template(args: &[&str]) -> String {
    let chart = chart();
    let mut all = vec![
        "template",
        RELEASE,
        path(&chart),
        "--namespace",
        "metallb-system",
    ];
    all.extend(args);
    helm(&all)
}

/// Compares `got` with `testdata/helm/<name>`, or rewrites the file under
/// `UPDATE_GOLDEN=1`.
fn golden(name: &str, got: &str) {
    testenv::golden::check(
        &repo().join("testdata/helm").join(name),
        got,
        "cargo test -p testenv --test helm",
    );
}

fn update() -> bool {
    testenv::golden::update()
}

/// The pinned Helm binary, from `$FERROLB_HELM` or `testenv/build-helm`'s
/// cache. Panics naming what is missing when it is not built.
fn helm_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("FERROLB_HELM") {
            return PathBuf::from(bin);
        }
        let script = repo().join("testenv/build-helm");
        let out = Command::new(&script)
            .arg("--check")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "the helm binary is missing: {} (scripts/test builds it)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// Runs helm with `args` in a private Helm home (no user configuration,
/// nothing written outside the target directory).
fn helm_output(args: &[&str]) -> Output {
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("helm-home");
    Command::new(helm_bin())
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", helm_bin().display()))
}

/// Runs helm with `args` and returns its standard output; fails the test
/// with helm's error output if it fails.
fn helm(args: &[&str]) -> String {
    let out = helm_output(args);
    ok(&format!("helm {}", args.join(" ")), &out)
}

fn ok(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The Prometheus operator's ServiceMonitor, PodMonitor and PrometheusRule
/// kinds, with no schema.
fn monitoring_crds() -> String {
    [
        ("ServiceMonitor", "servicemonitors"),
        ("PodMonitor", "podmonitors"),
        ("PrometheusRule", "prometheusrules"),
    ]
    .iter()
    .map(|(kind, plural)| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {{kind: {kind}, plural: {plural}}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
---
"
        )
    })
    .collect()
}

fn objects(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `v` with every integral float (255.0) as an integer (255).
fn integral(v: Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            #[allow(clippy::cast_possible_truncation, clippy::float_cmp)] // checked equal
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 2f64.powi(53) => {
                Value::from(f as i64)
            }
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(integral).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, integral(v))).collect()),
        other => other,
    }
}

fn id(doc: &Value) -> (String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (s(&doc["kind"]), s(&doc["metadata"]["name"]))
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| id(d) == (kind.to_owned(), name.to_owned()))
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> PathBuf {
    repo().join("charts/ferrolb")
}

fn metallb_values() -> PathBuf {
    repo().join("testdata/helm/metallb-values.yaml")
}

/// The chart's equivalent of `config/migrate-from-metallb`.
fn migrate_values() -> PathBuf {
    repo().join("testdata/helm/migrate-from-metallb-values.yaml")
}
