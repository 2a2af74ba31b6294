//! Latency from Service create to `status.loadBalancer.ingress` written,
//! on testenv, with the controller in-process. Ignored by default (it is a
//! benchmark); run with
//! `cargo test --release -p controller --test latency -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::HashMap;
use std::time::{Duration, Instant};

use api::v1beta1::IPAddressPool;
use controller::leader;
use controller::reconcile::{self, Options};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use testenv::TestEnv;

const N: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn create_to_status_latency() {
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let ns = env.fresh_namespace("ctl-latency").await.unwrap();
    let client = env.client().unwrap();
    let class = format!("ferrolb.test/{ns}");
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    let pool: IPAddressPool = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "pool"}, "spec": {"addresses": ["10.50.0.0/22"]},
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let (stop, rx) = tokio::sync::watch::channel(false);
    let opts = Options {
        namespace: ns.clone(),
        lb_class: Some(class.clone()),
        lease: leader::Config {
            namespace: ns.clone(),
            name: "ferrolb-controller".into(),
            identity: "bench".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        },
        metrics_addr: None,
        metallb: shell::compat::MetallbArgs::without_probes(),
        concurrency: 16,
        max_backoff: Duration::from_secs(5),
        pool_status_period: Duration::from_secs(1),
    };
    let ctl = tokio::spawn(reconcile::run(client.clone(), opts, rx));

    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    // Observe status writes with a watch of our own.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(HashMap::<String, Instant>::new()));
    let watch = {
        let seen = seen.clone();
        let stream = watcher(svcs.clone(), watcher::Config::default()).applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Ok(Some(s)) = stream.try_next().await {
                if !controller::convert::ingress_ips(&s).is_empty() {
                    let name = kube::ResourceExt::name_any(&s);
                    seen.lock()
                        .unwrap()
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };
    // Let the controller lead and sync before timing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut created = HashMap::new();
    let t0 = Instant::now();
    for i in 0..N {
        let name = format!("s{i:03}");
        let svc: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "loadBalancerClass": class, "ports": [{"port": 80}]},
        }))
        .unwrap();
        let t = Instant::now();
        svcs.create(&PostParams::default(), &svc).await.unwrap();
        created.insert(name, t);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < N {
        assert!(Instant::now() < deadline, "not all services got an address");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let total = t0.elapsed();
    let seen = seen.lock().unwrap().clone();
    let mut lat: Vec<Duration> = created.iter().map(|(n, t)| seen[n] - *t).collect();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    println!(
        "services {N}: create->status p50 {:?}, p90 {:?}, p99 {:?}, max {:?}; all {N} created and assigned in {total:?}",
        pct(0.50),
        pct(0.90),
        pct(0.99),
        lat[lat.len() - 1]
    );
    let _ = stop.send(true);
    ctl.await.unwrap().unwrap();
    watch.abort();
}
