//! `controller plan` on every MetalLB sample under `testdata/config/`, with
//! the Services of `testdata/config/services/`, against golden outputs in
//! `tests/plan/`. `UPDATE_GOLDEN=1` rewrites them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn plan(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_controller"));
    cmd.arg("plan").args(args).current_dir(root());
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/plan")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{name} differs from its golden output");
}

fn samples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("testdata/config"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    assert!(v.len() >= 9, "samples missing: {v:?}");
    v
}

#[test]
fn every_sample_assigns_the_basic_services() {
    for sample in samples() {
        let out = plan(
            &[
                "-f",
                &format!("testdata/config/{sample}"),
                "-f",
                "testdata/config/services/basic.yaml",
            ],
            None,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sample}: {stderr}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        // Every sample with a pool open to the default namespace serves a
        // plain service (service-allocation's pools are reserved for other
        // namespaces or not auto-assigned; some samples have no pool).
        let text = std::fs::read_to_string(root().join("testdata/config").join(&sample)).unwrap();
        if text.contains("kind: IPAddressPool") && sample != "service-allocation.yaml" {
            assert!(stdout.contains("status: assigned"), "{sample}:\n{stdout}");
        }
        check_golden(&sample.replace(".yaml", ".basic.yaml"), &stdout);
    }
}

#[test]
fn scenario_files() {
    for (sample, services) in [
        ("l2-basic", "sharing"),
        ("service-allocation", "allocation"),
        ("ipv6-dual-stack", "dual-stack"),
    ] {
        let out = plan(
            &[
                "-f",
                &format!("testdata/config/{sample}.yaml"),
                "-f",
                &format!("testdata/config/services/{services}.yaml"),
            ],
            None,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        check_golden(
            &format!("{sample}.{services}.yaml"),
            &String::from_utf8(out.stdout).unwrap(),
        );
    }
}

#[test]
fn json_output_and_stdin() {
    let text = std::fs::read_to_string(root().join("testdata/config/services/basic.yaml")).unwrap();
    let out = plan(
        &[
            "-f",
            "testdata/config/l2-basic.yaml",
            "-f",
            "-",
            "-o",
            "json",
        ],
        Some(&text),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Listed by name; addresses in file order (api is the third listed).
    assert_eq!(v["services"][0]["service"], "default/api");
    assert_eq!(v["services"][0]["ips"][0], "192.168.1.242");
    assert_eq!(v["pools"][0]["assignedIPv4"], 3);
}

/// A file as MetalLB's ConfigMap-to-CRD converter writes it (`status` on
/// every object) with the edge cases MetalLB takes: the plan runs and the
/// pool's one real range is handed out.
#[test]
fn metallb_converter_output_and_edge_cases_plan() {
    let config = "\
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec:
  addresses: [10.0.0.1-fc00::1, 192.0.2.10-192.0.2.11]
status: {assignedIPv4: 0, assignedIPv6: 0, availableIPv4: 0, availableIPv6: 0}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: partial, namespace: metallb-system}
spec: {addresses: [198.51.100.0/30], autoAssign: false}
status: {assignedIPv4: 1}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: peer, namespace: metallb-system}
spec: {myASN: 4294967295, peerASN: 64500, peerAddress: 10.0.0.1, holdTime: 500ms}
status: {}
---
apiVersion: metallb.io/v1beta1
kind: BGPPeer
metadata: {name: old, namespace: metallb-system}
spec: {myASN: 64500, peerASN: 4294967295, peerAddress: 10.0.0.2, holdTime: 90s, keepaliveTime: 90s}
status: {}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp, namespace: metallb-system}
spec: {ipAddressPools: [pool]}
status: {}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
spec: {ipAddressPools: [pool]}
status: {}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: bfd, namespace: metallb-system}
spec: {}
status: {}
---
apiVersion: metallb.io/v1beta1
kind: Community
metadata: {name: communities, namespace: metallb-system}
spec: {communities: [{name: a, value: '65000:1'}]}
status: {}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80}]}
";
    let out = plan(&["-f", "-", "-o", "json"], Some(config));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["services"][0]["service"], "default/web");
    assert_eq!(v["services"][0]["ips"][0], "192.0.2.10");
    let pool = v["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "pool")
        .unwrap();
    // The IPv4-to-IPv6 range holds nothing, as in MetalLB.
    assert_eq!(
        (&pool["availableIPv4"], &pool["availableIPv6"]),
        (&serde_json::json!(1), &serde_json::json!(0))
    );
}

/// A backup of a MetalLB cluster (`kubectl get -o yaml` of every metallb.io
/// kind, here as a `List`) holds status-only objects: the plan runs past
/// them, naming each in a debug log.
#[test]
fn status_only_objects_in_a_backup_are_ignored() {
    let backup = "\
apiVersion: v1
kind: List
items:
- apiVersion: metallb.io/v1beta1
  kind: IPAddressPool
  metadata: {name: pool, namespace: metallb-system}
  spec: {addresses: [192.0.2.0/30]}
  status: {assignedIPv4: 1, assignedIPv6: 0, availableIPv4: 3, availableIPv6: 0}
- apiVersion: metallb.io/v1beta1
  kind: ServiceL2Status
  metadata:
    name: l2-x7k2p
    namespace: metallb-system
    labels: {metallb.io/node: node-1, metallb.io/service-name: web, metallb.io/service-namespace: default}
  spec: {}
  status: {node: node-1, serviceName: web, serviceNamespace: default, interfaces: [{name: eth0}]}
- apiVersion: metallb.io/v1beta1
  kind: ServiceBGPStatus
  metadata: {name: bgp-q9w8e, namespace: metallb-system}
  spec: {}
  status: {node: node-1, serviceName: web, serviceNamespace: default, peers: [peer-a]}
- apiVersion: metallb.io/v1beta1
  kind: ConfigurationState
  metadata:
    name: controller
    namespace: metallb-system
    labels: {metallb.io/component-type: controller}
  status: {result: Valid, conditions: []}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.2}]}}
---
apiVersion: v1
kind: Service
metadata: {name: new, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80}]}
";
    let out = plan(
        &["-f", "-", "-o", "json", "--log-level", "debug"],
        Some(backup),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ips: Vec<(&str, &str)> = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["service"].as_str().unwrap(),
                s["ips"][0].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ips,
        [("default/new", "192.0.2.0"), ("default/web", "192.0.2.2")]
    );
    for (document, kind, name) in [
        (2, "ServiceL2Status", "l2-x7k2p"),
        (3, "ServiceBGPStatus", "bgp-q9w8e"),
        (4, "ConfigurationState", "controller"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains("status-only object ignored") && l.contains(kind))
            .unwrap_or_else(|| panic!("no debug line for {kind}:\n{stderr}"));
        assert!(line.contains(&format!("-: document {document}")), "{line}");
        assert!(line.contains(&format!("name={name}")), "{line}");
    }
    // At the default level the plan logs nothing.
    let quiet = plan(&["-f", "-"], Some(backup));
    assert!(quiet.status.success());
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
}

/// An IPv4-mapped IPv6 address requested by annotation (either prefix) or
/// `spec.loadBalancerIP` is refused with the controller's
/// `LoadBalancerFailed` message, naming where it is written; the IPv4 form
/// is granted.
#[test]
fn requested_ipv4_mapped_addresses_are_refused() {
    let mut input = String::from(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\nspec: {addresses: [192.0.2.0/28, 'fc00::/124']}\n",
    );
    let rows = [
        (
            "a",
            "annotations: {metallb.io/loadBalancerIPs: '::ffff:192.0.2.5'}",
            "",
        ),
        (
            "b",
            "annotations: {metallb.universe.tf/loadBalancerIPs: 'fc00::1,::ffff:c000:206'}",
            "",
        ),
        ("c", "", ", loadBalancerIP: '::ffff:192.0.2.7'"),
        (
            "d",
            "annotations: {metallb.io/loadBalancerIPs: 192.0.2.5}",
            "",
        ),
    ];
    for (name, meta, spec) in rows {
        let meta = if meta.is_empty() {
            String::new()
        } else {
            format!(", {meta}")
        };
        input += &format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: ns{meta}}}\nspec: {{type: LoadBalancer, ports: [{{port: 80}}]{spec}}}\n"
        );
    }
    let out = plan(&["-f", "-", "-o", "json"], Some(&input));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: Vec<(String, String)> = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let what = s["message"]
                .as_str()
                .map_or_else(|| s["ips"].to_string(), str::to_owned);
            (format!("{} {}", s["status"], s["reason"]), what)
        })
        .collect();
    let refused = r#""pending" "LoadBalancerFailed""#;
    assert_eq!(
        got,
        [
            (
                refused.into(),
                r#"metallb.io/loadBalancerIPs: "::ffff:192.0.2.5" is an IPv4-mapped IPv6 address: request it as IPv4 (192.0.2.5)"#.into()
            ),
            (
                refused.into(),
                r#"metallb.universe.tf/loadBalancerIPs: "::ffff:c000:206" is an IPv4-mapped IPv6 address: request it as IPv4 (192.0.2.6)"#.into()
            ),
            (
                refused.into(),
                r#"spec.loadBalancerIP: "::ffff:192.0.2.7" is an IPv4-mapped IPv6 address: request it as IPv4 (192.0.2.7)"#.into()
            ),
            (
                r#""assigned" "IPAllocated""#.into(),
                r#"["192.0.2.5"]"#.into()
            ),
        ]
    );
}

#[test]
fn invalid_documents_fail_naming_document_and_field() {
    let bad = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: ok}\nspec: {addresses: [10.0.0.0/24]}\n---\n\
               apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: broken}\nspec: {addresses: [10.0.1.0/33]}\n";
    let out = plan(&["-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-: document 1: IPAddressPool \"broken\": spec.addresses[0]"),
        "{err}"
    );
    let wrong_type = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: x}\nspec: {addresses: 7}\n";
    let out = plan(&["-f", "-"], Some(wrong_type));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-: document 0: IPAddressPool"), "{err}");
    // Two samples whose pools overlap cannot be one cluster's configuration.
    let out = plan(
        &[
            "-f",
            "testdata/config/service-allocation.yaml",
            "-f",
            "testdata/config/l2-interfaces-node-selectors.yaml",
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("overlaps"));
    // One name twice is one object written twice.
    let out = plan(
        &[
            "-f",
            "testdata/config/l2-basic.yaml",
            "-f",
            "testdata/config/l2-basic.yaml",
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("defined twice"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Pending Services get addresses in creation order, then in file order,
/// never by name: the first of a file of new Services gets the first free
/// address, as from a running controller.
#[test]
fn pending_services_in_creation_then_file_order() {
    let pool = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\nspec: {addresses: [10.0.0.0/29]}\n";
    let service = |name: &str, created: Option<&str>| {
        let ts = created
            .map(|t| format!(", creationTimestamp: \"{t}\""))
            .unwrap_or_default();
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: ns{ts}}}\nspec: {{type: LoadBalancer, ports: [{{port: 80}}]}}\n"
        )
    };
    let input = [
        pool.to_owned(),
        service("zeta", None),
        service("alpha", None),
        service("late", Some("2026-01-02T00:00:00Z")),
        service("early", Some("2026-01-01T00:00:00Z")),
        service("same-b", Some("2026-01-03T00:00:00Z")),
        service("same-a", Some("2026-01-03T00:00:00Z")),
    ]
    .concat();
    let out = plan(&["-f", "-", "-o", "json"], Some(&input));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ip_of = |name: &str| {
        v["services"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["service"] == format!("ns/{name}"))
            .map(|s| s["ips"][0].as_str().unwrap().to_owned())
            .unwrap()
    };
    // Timestamped first, by time, then by file order for equal times;
    // then those without, in file order.
    let got: Vec<String> = ["early", "late", "same-b", "same-a", "zeta", "alpha"]
        .iter()
        .map(|n| ip_of(n))
        .collect();
    assert_eq!(
        got,
        [
            "10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"
        ]
    );
}
