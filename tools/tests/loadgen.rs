//! `ferrolb-loadgen` against testenv's apiserver, at a small size: `fill`
//! makes what its flags say (dual-stack Services included), `floor` gives
//! every Service an address, and both report the counts they did.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::process::Command;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use testenv::TestEnv;

fn loadgen(env: &TestEnv, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrolb-loadgen"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ferrolb-loadgen {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn fill_then_floor_assigns_every_service() {
    let env = TestEnv::start_with_service_cidrs("10.96.0.0/16,fd00:96::/112").unwrap();
    let fill = loadgen(
        &env,
        &[
            "fill",
            "--services",
            "40",
            "--nodes",
            "10",
            "--namespaces",
            "4",
        ],
    );
    assert_eq!(fill["nodes"]["count"], 10);
    assert_eq!(fill["services"]["count"], 40);
    let client = env.client().unwrap();
    let lp = ListParams::default().labels("ferrolb-loadgen=fill");
    let nodes = Api::<Node>::all(client.clone()).list(&lp).await.unwrap();
    assert_eq!(nodes.items.len(), 10);
    let slices = Api::<EndpointSlice>::all(client.clone())
        .list(&lp)
        .await
        .unwrap();
    assert_eq!(
        Some(slices.items.len() as u64),
        fill["endpointslices"]["count"].as_u64()
    );
    assert!(
        (40..=120).contains(&slices.items.len()),
        "{}",
        slices.items.len()
    );
    let services = Api::<Service>::all(client.clone()).list(&lp).await.unwrap();
    assert_eq!(services.items.len(), 40);
    // 10 % dual-stack by default: some Services have both families.
    assert!(services.items.iter().any(|s| {
        s.spec
            .as_ref()
            .and_then(|s| s.ip_families.as_ref())
            .is_some_and(|f| f.len() == 2)
    }));

    let floor = loadgen(&env, &["floor", "--concurrency", "4"]);
    assert_eq!(floor["patch"]["count"], 40);
    let services = Api::<Service>::all(client).list(&lp).await.unwrap();
    for s in &services.items {
        let ingress = s
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.as_ref());
        assert!(
            ingress.is_some_and(|i| !i.is_empty()),
            "{:?}",
            s.metadata.name
        );
    }
    env.stop().unwrap();
}
