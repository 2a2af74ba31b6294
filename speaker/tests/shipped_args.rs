//! The speaker's arguments as the shipped manifests write them parse with
//! this binary: each kustomization's speaker DaemonSet (`config/default`,
//! and `config/migrate-from-metallb`, ferrolb's speakers beside a running
//! MetalLB) rendered by testenv's kubectl, `$(VAR)` references expanded as
//! the kubelet does, then given to `speaker ... --help`. clap parses every
//! argument and its value (addresses, ports, names) before it acts on
//! `--help`, so an unknown flag or a value that does not parse fails the
//! run. The Helm chart renders the same objects
//! (`testenv/tests/helm.rs`), so its arguments are these.
//!
//! What `--help` skips, the checks `Args::resolve` makes at start, is
//! asserted here on the arguments themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The speaker DaemonSet's container arguments of kustomization `dir`.
fn speaker_args(dir: &str) -> Vec<String> {
    let env = testenv::TestEnv::global();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let out = env
        .kubectl()
        .args(["kustomize", dir.to_str().unwrap()])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}/kubectl ({e}); testenv/build builds it",
                env.bin_dir().display()
            )
        });
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap())
        .expect("kustomize output is YAML");
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet" && d["metadata"]["name"] == "speaker")
        .unwrap_or_else(|| panic!("no speaker DaemonSet in {}", dir.display()));
    let container = &ds["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "speaker");
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| expand(a.as_str().unwrap()))
        .collect()
}

/// `$(VAR)` of the downward-API variables, as the kubelet expands them
/// (a value of the right shape: the Pod's IP is an address).
fn expand(arg: &str) -> String {
    let vars = [
        ("$(POD_IP)", "192.0.2.10"),
        ("$(NODE_NAME)", "node-a"),
        ("$(POD_NAME)", "speaker-abcde"),
        ("$(METALLB_NAMESPACE)", "metallb-system"),
    ];
    let mut out = arg.to_owned();
    for (var, value) in vars {
        out = out.replace(var, value);
    }
    assert!(!out.contains("$("), "an unexpanded reference in {arg:?}");
    out
}

/// `speaker <args> --help`: (success, stderr).
fn help(args: &[String]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_speaker"))
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--flag=value` arguments by flag.
fn flags(args: &[String]) -> BTreeMap<&str, &str> {
    args.iter()
        .filter_map(|a| a.split_once('='))
        .collect::<BTreeMap<_, _>>()
}

#[test]
fn shipped_speaker_arguments_parse() {
    for dir in ["config/default", "config/migrate-from-metallb"] {
        let args = speaker_args(dir);
        assert!(args.len() >= 5, "{dir}: {args:?}");
        let (ok, stderr) = help(&args);
        assert!(ok, "{dir}: speaker {args:?} --help: {stderr}");
        // The check tells: a flag the binary does not have fails it, and
        // so does a value that does not parse.
        let mut bad = args.clone();
        bad.push("--no-such-flag".into());
        let (ok, stderr) = help(&bad);
        assert!(!ok && stderr.contains("--no-such-flag"), "{dir}: {stderr}");
        let mut bad = args.clone();
        bad.push("--metrics-addr=not-an-address".into());
        assert!(!help(&bad).0, "{dir}: a bad --metrics-addr parsed");
    }
}

/// What `Args::resolve` refuses, and the ports beside MetalLB's speaker.
#[test]
fn migrate_from_metallb_arguments_coexist_with_metallb() {
    let args = speaker_args("config/migrate-from-metallb");
    let f = flags(&args);
    let metallb = f["--metallb-speaker-labels"];
    assert_eq!(metallb, "app=metallb,component=speaker");
    assert_ne!(
        f.get("--memberlist-labels").copied(),
        Some(metallb),
        "its own member list"
    );
    assert_eq!(f["--memberlist-labels"], "app=ferrolb,component=speaker");
    assert_eq!(f["--metallb-namespace"], "metallb-system");
    // Host ports other than those of MetalLB's speaker on the same node:
    // memberlist 7946, metrics 7472, HTTPS metrics 9120, probes 17472.
    let port = |flag: &str| -> u16 { f[flag].rsplit(':').next().unwrap().parse().unwrap() };
    for (flag, metallb) in [
        ("--memberlist-bind", 7946),
        ("--metrics-addr", 7472),
        ("--port", 9120),
    ] {
        assert_ne!(port(flag), metallb, "{flag}");
    }
    assert_eq!(
        f["--health-probe-port"], "0",
        "MetalLB's probe port is left alone"
    );
    // config/default's are MetalLB's, with no coexistence flag.
    let default = speaker_args("config/default");
    let d = flags(&default);
    assert!(!d.contains_key("--metallb-speaker-labels"), "{default:?}");
    assert_eq!(d["--memberlist-bind"], "0.0.0.0:7946");
}
