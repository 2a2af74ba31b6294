//! The controller's metrics/health server under attack, against the real
//! binary (`controller run` on testenv's apiserver) with the open-file
//! limit of many container runtimes (1,024): slowloris connections must
//! not starve `/healthz`, and running out of descriptors must not make the
//! process spin (hardening issue, finding 6).
//!
//! `CONTROLLER_BIN` runs the cases against another build (to measure a
//! binary from before the fix).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;

use std::time::Duration;

use hostile::{Process, TempDir};
use testenv::TestEnv;

const T: Duration = Duration::from_secs(30);

async fn start(dir: &TempDir, prefix: &str) -> Process {
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let ns = env.fresh_namespace(prefix).await.unwrap();
    let bin =
        std::env::var("CONTROLLER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_controller").into());
    let class = format!("ferrolb.test/{ns}");
    Process::start(
        &bin,
        &[
            "run",
            "--kubeconfig",
            env.kubeconfig_path().to_str().unwrap(),
            "--namespace",
            &ns,
            "--lb-class",
            &class,
            "--identity",
            "hostile",
            "--metrics-addr",
            "127.0.0.1:0",
            // Only the server under test: no listener on MetalLB's probe port.
            "--health-probe-port",
            "0",
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ],
        dir.join("controller.log"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_does_not_starve_health_probes() {
    let dir = TempDir::new("controller-slowloris");
    let mut p = start(&dir, "ctl-slowloris").await;
    let s = hostile::server(&mut p, T);
    hostile::until_ok(s.addr, "/readyz", s.header_timeout, T).await;
    // The controller keeps its apiserver connections and may open new
    // ones: only the limit is a bound on its descriptors.
    hostile::slowloris_case(&mut p, &s, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_exhaustion_backs_off_and_recovers() {
    let dir = TempDir::new("controller-exhaustion");
    let mut p = start(&dir, "ctl-exhaustion").await;
    let s = hostile::server(&mut p, T);
    hostile::until_ok(s.addr, "/readyz", s.header_timeout, T).await;
    hostile::exhaustion_case(&mut p, &s).await;
}
