//! The speaker's metrics/health server under attack, against the real
//! binary in file mode with the open-file limit of many container
//! runtimes (1,024): slowloris connections must not starve `/healthz`,
//! and running out of descriptors must not make the process spin
//! (hardening issue, finding 6).
//!
//! `SPEAKER_BIN` runs the cases against another build (to measure a
//! binary from before the fix).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;

use std::time::Duration;

use hostile::{Process, TempDir};

const T: Duration = Duration::from_secs(30);

/// One node, one pool and one service, nothing announced: the speaker
/// only reads its configuration (ready) and serves metrics.
const CONFIG: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  addresses: [{type: InternalIP, address: 192.0.2.1}]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec:
  addresses: [198.51.100.0/24]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec: {type: LoadBalancer}
status:
  loadBalancer:
    ingress: [{ip: 198.51.100.10}]
";

fn start(dir: &TempDir) -> Process {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.yaml"), CONFIG).unwrap();
    let bin = std::env::var("SPEAKER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_speaker").into());
    Process::start(
        &bin,
        &[
            "--node-name",
            "n1",
            "--config-dir",
            config.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
            // Only the server under test: no listener on MetalLB's probe port.
            "--health-probe-port",
            "0",
            "--log-format",
            "json",
            "--log-level",
            "debug",
            // No re-reads during the test: the only descriptors the
            // process opens are the server's.
            "--reload-interval-ms",
            "3600000",
        ],
        dir.join("speaker.log"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_does_not_starve_health_probes() {
    let dir = TempDir::new("speaker-slowloris");
    let mut p = start(&dir);
    let s = hostile::server(&mut p, T);
    hostile::until_ok(s.addr, "/readyz", s.header_timeout, T).await;
    hostile::slowloris_case(&mut p, &s, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_exhaustion_backs_off_and_recovers() {
    let dir = TempDir::new("speaker-exhaustion");
    let mut p = start(&dir);
    let s = hostile::server(&mut p, T);
    hostile::until_ok(s.addr, "/readyz", s.header_timeout, T).await;
    hostile::exhaustion_case(&mut p, &s).await;
}
