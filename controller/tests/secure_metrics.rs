//! The controller's HTTPS metrics (MetalLB's `--port`) against testenv's
//! real apiserver, scraped as MetalLB's ServiceMonitor scrapes them: a
//! service account allowed to `get` /metrics reads them (200, and they
//! parse), one that is not gets 403, no token or a bad one 401, and
//! repeated scrapes are answered from the cache; a certificate directory
//! without a certificate stops the controller with an error naming the
//! flag.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;
#[path = "../../shell/tests/support/https.rs"]
mod https;
#[path = "../../shell/tests/support/secure_scrape.rs"]
mod secure_scrape;

use std::time::Duration;

use hostile::{Process, TempDir};
use secure_scrape::Readers;
use testenv::TestEnv;

/// Bounds a failure only.
const T: Duration = Duration::from_secs(60);

fn args<'a>(env: &'a TestEnv, ns: &'a str, class: &'a str, port: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--kubeconfig",
        env.kubeconfig_path().to_str().unwrap(),
        "--namespace",
        ns,
        "--lb-class",
        class,
        "--identity",
        "secure",
        "--metrics-addr",
        "127.0.0.1:0",
        "--health-probe-port",
        "0",
        "--port",
        port,
        "--log-format",
        "json",
        "--log-level",
        "debug,kube=info,hyper=info,tower=info,hyper_util=info",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_serves_metrics_over_https_to_allowed_tokens() {
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let readers = tokio::task::spawn_blocking(move || Readers::new(env, "ctl-scrape"))
        .await
        .unwrap();
    let dir = TempDir::new("controller-secure");
    let class = format!("ferrolb.test/{}", readers.ns);
    let port = secure_scrape::free_port().to_string();
    let mut p = Process::start(
        env!("CARGO_BIN_EXE_controller"),
        &args(env, &readers.ns, &class, &port),
        dir.join("controller.log"),
    );
    let listener = secure_scrape::secure_listener(&mut p, T);
    let figures = secure_scrape::scrape_as_metallb(
        listener,
        &readers,
        "metallb_allocator_addresses_in_use_total",
    )
    .await;
    eprintln!("controller secure metrics: {figures:?}");
    assert!(p.alive(), "the controller exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_certificate_dir_names_the_flag() {
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let ns = env.fresh_namespace("ctl-certs").await.unwrap();
    let dir = TempDir::new("controller-certs");
    let missing = dir.join("no-such-dir");
    let class = format!("ferrolb.test/{ns}");
    let port = secure_scrape::free_port().to_string();
    let (code, stderr) = tokio::task::spawn_blocking(move || {
        let mut a = args(env, &ns, &class, &port);
        a.extend(["--metrics-cert-dir", missing.to_str().unwrap()]);
        let r = secure_scrape::run_to_exit(env!("CARGO_BIN_EXE_controller"), &a, T);
        let _ = env
            .kubectl()
            .args(["delete", "namespace", &ns, "--wait=false"])
            .output();
        r
    })
    .await
    .unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--metrics-cert-dir") && stderr.contains("no-such-dir"),
        "{stderr}"
    );
}
