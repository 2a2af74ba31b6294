//! The controller against a real kube-apiserver (testenv).
//!
//! Each test runs the controller in-process: `reconcile::run` spawned as a
//! tokio task with the testenv client, stopped through its shutdown channel
//! (graceful) or by aborting the task (a crash). Tests share one apiserver,
//! so each uses its own namespace for pools and Lease, and its own
//! `loadBalancerClass` so that no controller touches another test's
//! services.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use api::v1beta1::IPAddressPool;
use controller::leader;
use controller::reconcile::{self, Options};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Service};
use k8s_openapi::jiff;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testenv::TestEnv;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const TIMEOUT: Duration = Duration::from_secs(20);

struct Ctl {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), reconcile::Error>>,
}

impl Ctl {
    fn start(
        client: &Client,
        ns: &str,
        identity: &str,
        metrics: Option<std::net::SocketAddr>,
    ) -> Self {
        let opts = Options {
            namespace: ns.to_owned(),
            lb_class: Some(class(ns)),
            lease: leader::Config {
                namespace: ns.to_owned(),
                name: "ferrolb-controller".into(),
                identity: identity.to_owned(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
            },
            metrics_addr: metrics,
            metallb: shell::compat::MetallbArgs::without_probes(),
            concurrency: 16,
            max_backoff: Duration::from_secs(2),
            pool_status_period: Duration::from_millis(200),
        };
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(reconcile::run(client.clone(), opts, rx));
        Self { stop, task }
    }

    /// Graceful stop: the Lease is released.
    async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(TIMEOUT, self.task)
            .await
            .expect("controller did not stop")
            .unwrap()
            .unwrap();
    }
}

fn class(ns: &str) -> String {
    format!("ferrolb.test/{ns}")
}

async fn setup(prefix: &str) -> (Client, String) {
    let env = TestEnv::global();
    env.install_crds(api::crds()).await.unwrap();
    let ns = env.fresh_namespace(prefix).await.unwrap();
    (env.client().unwrap(), ns)
}

async fn create_pool(client: &Client, ns: &str, name: &str, addresses: &[&str]) {
    let api: Api<IPAddressPool> = Api::namespaced(client.clone(), ns);
    let pool: IPAddressPool = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": name},
        "spec": {"addresses": addresses},
    }))
    .unwrap();
    api.create(&PostParams::default(), &pool).await.unwrap();
}

async fn create_service(client: &Client, ns: &str, name: &str, annotations: BTreeMap<&str, &str>) {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": class(ns),
            "selector": {"app": name},
            "ports": [{"port": 80}],
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &svc).await.unwrap();
}

async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ingress(svc: &Service) -> Vec<String> {
    controller::convert::ingress_ips(svc)
}

/// Waits until every named service has an address; returns them by name.
async fn ips(client: &Client, ns: &str, names: &[&str]) -> BTreeMap<String, Vec<String>> {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    eventually("ingress on every service", || async {
        let mut out = BTreeMap::new();
        for n in names {
            let s = api.get(n).await.ok()?;
            let ips = ingress(&s);
            if ips.is_empty() {
                return None;
            }
            out.insert((*n).to_owned(), ips);
        }
        Some(out)
    })
    .await
}

/// The Lease's holder, and its renew and acquire times in microseconds
/// since the epoch, and its duration in microseconds.
async fn lease(client: &Client, ns: &str) -> Option<(String, i64, i64, i64)> {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let spec = api.get_opt("ferrolb-controller").await.unwrap()?.spec?;
    Some((
        spec.holder_identity.unwrap_or_default(),
        spec.renew_time?.0.as_microsecond(),
        spec.acquire_time?.0.as_microsecond(),
        i64::from(spec.lease_duration_seconds?) * 1_000_000,
    ))
}

async fn holder(client: &Client, ns: &str) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    api.get_opt("ferrolb-controller")
        .await
        .unwrap()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn assigns_writes_status_and_keeps_ips_across_restart() {
    let (client, ns) = setup("ctl-restart").await;
    create_pool(&client, &ns, "pool-a", &["10.10.0.0/29"]).await;
    let metrics_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let ctl = Ctl::start(&client, &ns, "one", Some(metrics_addr));
    let names = ["s1", "s2", "s3", "s4"];
    for n in names {
        create_service(&client, &ns, n, BTreeMap::new()).await;
    }
    let first = ips(&client, &ns, &names).await;
    let mut all: Vec<&String> = first.values().flatten().collect();
    all.sort();
    assert_eq!(all, ["10.10.0.0", "10.10.0.1", "10.10.0.2", "10.10.0.3"]);
    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    let s1 = svcs.get("s1").await.unwrap();
    assert_eq!(
        s1.annotations()
            .get("metallb.io/ip-allocated-from-pool")
            .map(String::as_str),
        Some("pool-a")
    );
    // MetalLB's Event and pool counters.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually("an IPAllocated event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("IPAllocated"))
            .then_some(())
    })
    .await;
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    eventually("pool status counters", || async {
        let st = pools.get("pool-a").await.ok()?.status?;
        (st.assigned_ipv4 == 4 && st.available_ipv4 == 4).then_some(())
    })
    .await;
    // Metrics and health.
    let body = http_get(metrics_addr, "/metrics").await;
    assert!(
        body.contains("metallb_allocator_addresses_in_use_total{pool=\"pool-a\"} 4"),
        "{body}"
    );
    assert!(
        body.contains("metallb_allocator_addresses_total{pool=\"pool-a\"} 8"),
        "{body}"
    );
    assert!(
        http_get(metrics_addr, "/readyz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert!(
        http_get(metrics_addr, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );

    // Restart: free s2's address while down, then a newcomer takes it and
    // nobody else moves.
    ctl.stop().await;
    svcs.delete("s2", &DeleteParams::default()).await.unwrap();
    let ctl = Ctl::start(&client, &ns, "two", None);
    create_service(&client, &ns, "s5", BTreeMap::new()).await;
    let after = ips(&client, &ns, &["s1", "s3", "s4", "s5"]).await;
    for n in ["s1", "s3", "s4"] {
        assert_eq!(after[n], first[n], "{n} moved across the restart");
    }
    assert_eq!(after["s5"], first["s2"]);
    ctl.stop().await;
}

#[tokio::test]
async fn deleting_a_pool_moves_its_services_and_leaves_others() {
    let (client, ns) = setup("ctl-pool").await;
    create_pool(&client, &ns, "a-first", &["10.20.0.0/30"]).await;
    create_pool(&client, &ns, "b-second", &["10.20.1.0/30"]).await;
    let ctl = Ctl::start(&client, &ns, "one", None);
    create_service(&client, &ns, "auto", BTreeMap::new()).await;
    create_service(
        &client,
        &ns,
        "pinned",
        BTreeMap::from([("metallb.io/address-pool", "b-second")]),
    )
    .await;
    let before = ips(&client, &ns, &["auto", "pinned"]).await;
    assert_eq!(before["auto"], ["10.20.0.0"]);
    assert_eq!(before["pinned"], ["10.20.1.0"]);

    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    pools
        .delete("a-first", &DeleteParams::default())
        .await
        .unwrap();
    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    let moved = eventually("auto to move to b-second", || async {
        let s = svcs.get("auto").await.ok()?;
        let ips = ingress(&s);
        (ips.first().is_some_and(|ip| ip.starts_with("10.20.1."))).then_some(s)
    })
    .await;
    assert_eq!(ingress(&moved), ["10.20.1.1"]);
    assert_eq!(
        moved
            .annotations()
            .get("metallb.io/ip-allocated-from-pool")
            .map(String::as_str),
        Some("b-second")
    );
    assert_eq!(
        ingress(&svcs.get("pinned").await.unwrap()),
        before["pinned"]
    );

    // No pool left: both go pending, with MetalLB's AllocationFailed.
    pools
        .delete("b-second", &DeleteParams::default())
        .await
        .unwrap();
    eventually("both services to lose their addresses", || async {
        let a = svcs.get("auto").await.ok()?;
        let p = svcs.get("pinned").await.ok()?;
        (ingress(&a).is_empty()
            && ingress(&p).is_empty()
            && !a
                .annotations()
                .contains_key("metallb.io/ip-allocated-from-pool"))
        .then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually("an AllocationFailed event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("AllocationFailed"))
            .then_some(())
    })
    .await;
    // A new pool: pending services are assigned again.
    create_pool(&client, &ns, "c-third", &["10.20.2.0/30"]).await;
    let again = ips(&client, &ns, &["auto"]).await;
    assert_eq!(again["auto"], ["10.20.2.0"]);
    // `pinned` names a pool that is gone: it stays pending.
    assert!(ingress(&svcs.get("pinned").await.unwrap()).is_empty());
    ctl.stop().await;
}

#[tokio::test]
async fn invalid_pool_is_rejected_and_the_controller_carries_on() {
    let (client, ns) = setup("ctl-cel").await;
    let ctl = Ctl::start(&client, &ns, "one", None);
    let api: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    let bad: IPAddressPool = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "bad"},
        "spec": {"addresses": ["10.30.0.0/33"]},
    }))
    .unwrap();
    let err = api.create(&PostParams::default(), &bad).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}");
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.addresses"),
        "{}",
        status.message
    );
    create_pool(&client, &ns, "good", &["10.30.0.0/30"]).await;
    create_service(&client, &ns, "s", BTreeMap::new()).await;
    assert_eq!(ips(&client, &ns, &["s"]).await["s"], ["10.30.0.0"]);
    ctl.stop().await;
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over() {
    let (client, ns) = setup("ctl-leader").await;
    create_pool(&client, &ns, "pool", &["10.40.0.0/28"]).await;
    let a = Ctl::start(&client, &ns, "replica-a", None);
    let first = eventually("a leader", || holder(&client, &ns)).await;
    let b_metrics = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let b = Ctl::start(&client, &ns, "replica-b", Some(b_metrics));
    create_service(&client, &ns, "s1", BTreeMap::new()).await;
    ips(&client, &ns, &["s1"]).await;
    // Stays put while both run: b has read the Lease (ready, not leader),
    // and a has renewed it for longer than its duration since, so b had
    // every chance to take a stale one.
    eventually("replica-b to read the Lease", || async {
        let ready = try_http_get(b_metrics, "/readyz").await?;
        let metrics = try_http_get(b_metrics, "/metrics").await?;
        (ready.starts_with("HTTP/1.1 200") && metrics.contains("ferrolb_controller_leader 0\n"))
            .then_some(())
    })
    .await;
    let (_, b_ready_renew, _, duration) = lease(&client, &ns).await.unwrap();
    eventually("replica-a to renew for a lease duration", || async {
        let (h, renew, _, _) = lease(&client, &ns).await?;
        (h == "replica-a" && renew >= b_ready_renew + duration).then_some(())
    })
    .await;
    assert_eq!(holder(&client, &ns).await.as_deref(), Some(first.as_str()));
    assert_eq!(first, "replica-a");
    assert!(
        http_get(b_metrics, "/metrics")
            .await
            .contains("ferrolb_controller_leader 0\n")
    );

    // Graceful stop releases the Lease: b takes over and serves.
    let t = Instant::now();
    a.stop().await;
    eventually("replica-b to lead", || async {
        (holder(&client, &ns).await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    let graceful = t.elapsed();
    create_service(&client, &ns, "s2", BTreeMap::new()).await;
    let got = ips(&client, &ns, &["s1", "s2"]).await;
    assert_eq!(got["s1"], ["10.40.0.0"]);
    assert_eq!(got["s2"], ["10.40.0.1"]);

    // A crash (no release): a standby waits out the lease duration from
    // b's last renewal (its renewTime, the last record of b's anyone could
    // read). Our own reading that first shows c as the holder comes after
    // c's takeover, so it is at least a lease duration after that renewal.
    let c = Ctl::start(&client, &ns, "replica-c", None);
    b.task.abort();
    let t = Instant::now();
    let last_b = std::cell::Cell::new(None);
    let (seen_at, acquired, duration) = eventually("replica-c to lead", || async {
        let (h, renew, acquire, duration) = lease(&client, &ns).await?;
        let seen_at = jiff::Timestamp::now().as_microsecond();
        if h == "replica-b" {
            last_b.set(Some(renew));
        }
        (h == "replica-c").then_some((seen_at, acquire, duration))
    })
    .await;
    let crash = t.elapsed();
    let last_b = last_b
        .get()
        .expect("the Lease held by replica-b after the crash");
    let waited_us = seen_at - last_b;
    assert!(
        waited_us >= duration,
        "replica-c held the Lease {waited_us} us after b's last renewal, the lease lasts \
         {duration} us"
    );
    create_service(&client, &ns, "s3", BTreeMap::new()).await;
    assert_eq!(ips(&client, &ns, &["s3"]).await["s3"], ["10.40.0.2"]);
    eprintln!(
        "failover: graceful {graceful:?}, crash {crash:?} (c acquired {:.3} s after b's last \
         renewal; lease 3 s)",
        (acquired - last_b) as f64 / 1e6
    );
    c.stop().await;
}

/// `GET path`, or `None` while nothing answers.
async fn try_http_get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    Some(out)
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
