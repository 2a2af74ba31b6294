//! The controller against a real kube-apiserver (testenv).
//!
//! Each test runs the controller in-process: `reconcile::run` spawned as a
//! tokio task with the testenv client, stopped through its shutdown channel
//! (graceful) or by aborting the task (a crash). Tests share one apiserver,
//! so each uses its own namespace for pools and Lease, and its own
//! `loadBalancerClass` so that no controller touches another test's
//! services.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use api::v1beta1::{ConfigurationResult, ConfigurationState, IPAddressPool};
use controller::leader;
use controller::reconcile::{self, Options};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Service};
use k8s_openapi::jiff;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
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

    /// A crash: the task is aborted; its Lease stays until it expires.
    fn crash(self) {
        self.task.abort();
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

fn ingress(svc: &Service) -> Vec<String> {
    controller::convert::ingress_ips(svc)
}

/// Waits until every named service has an address; returns them by name.
async fn ips(client: &Client, ns: &str, names: &[&str]) -> BTreeMap<String, Vec<String>> {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    support::eventually(TIMEOUT, "ingress on every service", || async {
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
    support::eventually(TIMEOUT, "an IPAllocated event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("IPAllocated"))
            .then_some(())
    })
    .await;
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    support::eventually(TIMEOUT, "pool status counters", || async {
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
    let moved = support::eventually(TIMEOUT, "auto to move to b-second", || async {
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
    support::eventually(TIMEOUT, "both services to lose their addresses", || async {
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
    support::eventually(TIMEOUT, "an AllocationFailed event", || async {
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

/// Issue 14, finding 7: a pool edit that CEL lets through but the
/// controller refuses (a reversed IPv6 range; an overlap with another
/// pool) keeps the pool's last good version: no service loses or changes
/// its address, new services are still served, and the problem is
/// reported (ConfigurationState `controller`, an Event on the pool, the
/// stale gauge). A reversed IPv4 range is refused by CEL itself.
#[tokio::test]
async fn a_refused_pool_edit_moves_no_address() {
    let (client, ns) = setup("ctl-stale").await;
    create_pool(&client, &ns, "p", &["10.70.0.0/30", "fc00:70::/126"]).await;
    create_pool(&client, &ns, "q", &["10.70.1.0/30"]).await;
    let metrics_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let ctl = Ctl::start(&client, &ns, "one", Some(metrics_addr));
    create_service(&client, &ns, "s1", BTreeMap::new()).await;
    create_service(&client, &ns, "s2", BTreeMap::new()).await;
    create_service(
        &client,
        &ns,
        "pinned",
        BTreeMap::from([("metallb.io/address-pool", "q")]),
    )
    .await;
    let before = ips(&client, &ns, &["s1", "s2", "pinned"]).await;
    // s1 and s2 are reconciled concurrently: either may get the first.
    let mut first_two: Vec<String> = before["s1"].iter().chain(&before["s2"]).cloned().collect();
    first_two.sort();
    assert_eq!(first_two, ["10.70.0.0", "10.70.0.1"], "{before:?}");
    assert_eq!(before["pinned"], ["10.70.1.0"]);

    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    let edit = |addresses: Vec<&str>| json!({"spec": {"addresses": addresses}});
    // CEL refuses a reversed IPv4 range.
    let err = pools
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&edit(vec!["10.70.0.9-10.70.0.1"])),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("reversed range")),
        "{err}"
    );
    // A reversed IPv6 range passes CEL; the controller refuses it.
    pools
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&edit(vec!["10.70.0.0/30", "fc00:70::9-fc00:70::1"])),
        )
        .await
        .unwrap();
    // Nobody moved, and a newcomer is served from the version in force.
    create_service(&client, &ns, "s3", BTreeMap::new()).await;
    let after = ips(&client, &ns, &["s1", "s2", "pinned", "s3"]).await;
    assert_eq!(after["s3"], ["10.70.0.2"]);
    for n in ["s1", "s2", "pinned"] {
        assert_eq!(after[n], before[n], "{n} changed");
    }

    let states: Api<ConfigurationState> = Api::namespaced(client.clone(), &ns);
    let summary = support::eventually(
        TIMEOUT,
        "ConfigurationState controller to be Invalid",
        || async {
            let st = states.get_opt("controller").await.ok()??;
            let status = st.status?;
            (status.result == Some(ConfigurationResult::Invalid)).then(|| {
                assert_eq!(
                    st.metadata
                        .labels
                        .unwrap_or_default()
                        .get("metallb.io/component-type")
                        .map(String::as_str),
                    Some("controller")
                );
                status.error_summary
            })
        },
    )
    .await;
    assert!(
        summary.contains("IPAddressPool \"p\"") && summary.contains("spec.addresses[1]"),
        "{summary}"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    support::eventually(
        TIMEOUT,
        "an InvalidConfiguration event on the pool",
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("InvalidConfiguration")
                        && e.involved_object.name.as_deref() == Some("p")
                })
                .then_some(())
        },
    )
    .await;
    assert!(
        http_get(metrics_addr, "/metrics")
            .await
            .contains("metallb_k8s_client_config_stale_bool 1\n")
    );

    // q moves onto p's addresses: refused too, and pinned stays.
    pools
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(&edit(vec!["10.70.0.0/31"])),
        )
        .await
        .unwrap();
    support::eventually(TIMEOUT, "the overlap to be reported", || async {
        let st = states.get_opt("controller").await.ok()??;
        st.status?
            .error_summary
            .contains("IPAddressPool \"q\"")
            .then_some(())
    })
    .await;
    pools
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(&edit(vec!["10.70.1.0/30"])),
        )
        .await
        .unwrap();
    support::eventually(TIMEOUT, "only p to be reported", || async {
        let st = states.get_opt("controller").await.ok()??;
        let summary = st.status?.error_summary;
        (!summary.contains("IPAddressPool \"q\"") && summary.contains("IPAddressPool \"p\""))
            .then_some(())
    })
    .await;
    assert_eq!(
        ips(&client, &ns, &["s1", "s2", "pinned", "s3"]).await,
        after
    );

    // A controller that starts now has no last good version of p: it
    // leaves p's services alone instead of moving them, and serves the
    // other pools.
    ctl.stop().await;
    // (The first server keeps its port until the runtime ends.)
    let metrics_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let ctl = Ctl::start(&client, &ns, "two", Some(metrics_addr));
    create_service(&client, &ns, "s4", BTreeMap::new()).await;
    let restarted = ips(&client, &ns, &["s1", "s2", "pinned", "s3", "s4"]).await;
    for n in ["s1", "s2", "pinned", "s3"] {
        assert_eq!(restarted[n], after[n], "{n} changed across the restart");
    }
    assert_eq!(restarted["s4"], ["10.70.1.1"]);

    // Fixed: the new versions are in force and reported Valid.
    pools
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&edit(vec!["10.70.0.0/30", "fc00:70::1-fc00:70::9"])),
        )
        .await
        .unwrap();
    support::eventually(
        TIMEOUT,
        "ConfigurationState controller to be Valid",
        || async {
            let st = states.get_opt("controller").await.ok()??;
            (st.status?.result == Some(ConfigurationResult::Valid)).then_some(())
        },
    )
    .await;
    let fixed = ips(&client, &ns, &["s1", "s2", "pinned", "s3", "s4"]).await;
    assert_eq!(fixed, restarted);
    assert!(
        http_get(metrics_addr, "/metrics")
            .await
            .contains("metallb_k8s_client_config_stale_bool 0\n")
    );
    ctl.stop().await;
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over() {
    let (client, ns) = setup("ctl-leader").await;
    create_pool(&client, &ns, "pool", &["10.40.0.0/28"]).await;
    let a = Ctl::start(&client, &ns, "replica-a", None);
    let first = support::eventually(TIMEOUT, "a leader", || holder(&client, &ns)).await;
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
    support::eventually(TIMEOUT, "replica-b to read the Lease", || async {
        let ready = try_http_get(b_metrics, "/readyz").await?;
        let metrics = try_http_get(b_metrics, "/metrics").await?;
        (ready.starts_with("HTTP/1.1 200") && metrics.contains("ferrolb_controller_leader 0\n"))
            .then_some(())
    })
    .await;
    let (_, b_ready_renew, _, duration) = lease(&client, &ns).await.unwrap();
    support::eventually(
        TIMEOUT,
        "replica-a to renew for a lease duration",
        || async {
            let (h, renew, _, _) = lease(&client, &ns).await?;
            (h == "replica-a" && renew >= b_ready_renew + duration).then_some(())
        },
    )
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
    support::eventually(TIMEOUT, "replica-b to lead", || async {
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
    let (seen_at, acquired, duration) =
        support::eventually(TIMEOUT, "replica-c to lead", || async {
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

/// A TCP proxy to the apiserver whose client-to-server direction can be
/// held: what the client sends is read and kept, not forwarded, until
/// released (a one-way partition with TCP still up, as when packets are
/// retransmitted until a link comes back). The other direction always
/// flows, so a held client still sees its watches.
struct Proxy {
    addr: std::net::SocketAddr,
    hold: watch::Sender<bool>,
    /// Connections whose held bytes have not been answered yet.
    awaiting: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>,
    task: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        use std::sync::{Arc, Mutex};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (hold, hold_rx) = watch::channel(false);
        let awaiting = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        let waiting = awaiting.clone();
        let task = tokio::spawn(async move {
            let mut next = 0u64;
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let id = next;
                next += 1;
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                // 0: nothing held; 1: held bytes forwarded, not answered.
                let forwarded = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let mut hold = hold_rx.clone();
                let (w, f) = (waiting.clone(), forwarded.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if *hold.borrow() {
                            w.lock().unwrap().insert(id);
                            while *hold.borrow_and_update() {
                                if hold.changed().await.is_err() {
                                    return;
                                }
                            }
                            f.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown().await;
                });
                let w = waiting.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = sr.read(&mut buf).await.unwrap_or(0);
                        if forwarded.load(std::sync::atomic::Ordering::SeqCst) || n == 0 {
                            w.lock().unwrap().remove(&id);
                        }
                        if n == 0 {
                            break;
                        }
                        // A client that gave up still gets its answer
                        // read (and dropped): the server did answer.
                        let _ = cw.write_all(&buf[..n]).await;
                    }
                });
            }
        });
        Self {
            addr,
            hold,
            awaiting,
            task,
        }
    }

    fn hold(&self, on: bool) {
        self.hold.send_replace(on);
    }

    /// Waits until every held request was forwarded and answered.
    async fn wait_answered(&self) {
        support::eventually(TIMEOUT, "the held requests to be answered", || async {
            self.awaiting.lock().unwrap().is_empty().then_some(())
        })
        .await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches the namespace's services and records every moment at which a
/// service holds more than one address (the pool is IPv4 only) or two
/// services hold the same one (the violations), and every time a service
/// (by UID) holds an address other than the one it held before (the moves:
/// name, from, to). Every version of every service passes through the
/// watch, so a conflict that lasted one write is seen.
#[allow(clippy::type_complexity)]
fn watch_invariants(
    client: &Client,
    ns: &str,
) -> (
    JoinHandle<()>,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<String>, Vec<String>)>>>,
) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let violations = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = violations.clone();
    let moves = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let moved = moves.clone();
    let task = tokio::spawn(async move {
        let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut first: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => {
                    let ips = ingress(&s);
                    if !ips.is_empty() {
                        let was = first
                            .entry(s.uid().unwrap_or_default())
                            .or_insert_with(|| ips.clone());
                        if *was != ips {
                            moved
                                .lock()
                                .unwrap()
                                .push((s.name_any(), was.clone(), ips.clone()));
                            was.clone_from(&ips);
                        }
                    }
                    held.insert(s.name_any(), ips);
                }
                Ok(watcher::Event::Delete(s)) => {
                    held.remove(&s.name_any());
                }
                _ => continue,
            }
            let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
            for (name, ips) in &held {
                if ips.len() > 1 {
                    out.lock()
                        .unwrap()
                        .push(format!("{name} holds {ips:?}; all: {held:?}"));
                }
                for ip in ips {
                    if let Some(other) = owner.insert(ip, name) {
                        out.lock()
                            .unwrap()
                            .push(format!("{ip} held by {other} and {name}; all: {held:?}"));
                    }
                }
            }
        }
    });
    (task, violations, moves)
}

/// Issue 14, finding 8: the leader is cut off from the apiserver while
/// alive (its requests are held by a proxy, while the watches still bring
/// it events), the other replica takes over and assigns differently, then
/// the old leader's held writes reach the apiserver. They are refused
/// (the resourceVersion they were decided on is gone) and the old leader
/// sends nothing after its renew deadline: no service ever holds two
/// addresses or shares one.
#[tokio::test]
async fn a_cut_off_leader_cannot_overwrite_its_successor() {
    let (client, ns) = setup("ctl-fence").await;
    create_pool(&client, &ns, "pool", &["10.80.0.0/28"]).await;
    let env = TestEnv::global();
    let upstream: std::net::SocketAddr = env
        .server_url()
        .trim_start_matches("https://")
        .parse()
        .unwrap();
    let proxy = Proxy::start(upstream).await;
    let mut cfg = env.config().clone();
    cfg.cluster_url = format!("https://{}", proxy.addr).parse().unwrap();
    let a_client = Client::try_from(cfg).unwrap();
    let a_metrics = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let a = Ctl::start(&a_client, &ns, "replica-a", Some(a_metrics));
    support::eventually(TIMEOUT, "replica-a to lead", || async {
        (holder(&client, &ns).await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let b = Ctl::start(&client, &ns, "replica-b", None);
    let old = ["s0", "s1", "s2", "s3"];
    for n in old {
        create_service(&client, &ns, n, BTreeMap::new()).await;
    }
    let first = ips(&client, &ns, &old).await;
    let (watcher, violations, moves) = watch_invariants(&client, &ns);

    // Cut a off. The new services already name their pool, so a's first
    // write for each is the status; s0's address is freed after a has
    // chosen, so b, which starts from the API, chooses differently.
    proxy.hold(true);
    let new = ["n0", "n1", "n2", "n3"];
    for n in new {
        create_service(
            &client,
            &ns,
            n,
            BTreeMap::from([("metallb.io/ip-allocated-from-pool", "pool")]),
        )
        .await;
    }
    let cut = Instant::now();
    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    svcs.delete("s0", &DeleteParams::default()).await.unwrap();
    support::eventually(TIMEOUT, "replica-b to lead", || async {
        (holder(&client, &ns).await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    let takeover = cut.elapsed();
    let by_b = ips(&client, &ns, &new).await;
    assert_eq!(by_b["n0"], first["s0"], "b fills the freed address first");

    // The link comes back: a's held requests reach the apiserver.
    proxy.hold(false);
    let healed = Instant::now();
    proxy.wait_answered().await;
    let a_text = support::eventually(TIMEOUT, "replica-a to stand by", || async {
        let ready = try_http_get(a_metrics, "/readyz").await?;
        let metrics = try_http_get(a_metrics, "/metrics").await?;
        (ready.starts_with("HTTP/1.1 200") && metrics.contains("ferrolb_controller_leader 0\n"))
            .then_some(metrics)
    })
    .await;
    let standby = healed.elapsed();
    // The old leader's writes that the fence or the apiserver refused.
    let refused: f64 = a_text
        .lines()
        .filter(|l| l.starts_with("ferrolb_controller_writes_refused_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let all = ["s1", "s2", "s3", "n0", "n1", "n2", "n3"];
    let last = ips(&client, &ns, &all).await;
    for n in new {
        assert_eq!(last[n], by_b[n], "{n}: the old leader's write landed");
    }
    watcher.abort();
    let violations = violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:#?}");
    let moves = moves.lock().unwrap().clone();
    figure(&format!(
        "FIGURE fault=controller_leader_cut_off takeover_ms={} standby_after_heal_ms={} \
         old_leader_writes_refused={refused} violations={} moves={}",
        takeover.as_millis(),
        standby.as_millis(),
        violations.len(),
        moves.len()
    ));
    assert!(moves.is_empty(), "{moves:#?}");
    a.stop().await;
    b.stop().await;
}

/// Prints a fault suite's `FIGURE ...` line, and appends it to
/// `$FERROLB_FAULTS_FIGURES` when set (`scripts/faults`).
fn figure(line: &str) {
    eprintln!("{line}");
    if let Ok(path) = std::env::var("FERROLB_FAULTS_FIGURES") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// A small deterministic generator (splitmix64) for the churn below, so a
/// failing sequence can be replayed from the seed it prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Issue 14, section 3, the controller's fault case: two replicas race for
/// the Lease while Services are created and deleted and the pool is edited
/// (a range added, removed while it holds addresses, the ranges
/// reordered), and every few steps the leader crashes (its task aborted,
/// its Lease left to expire) and a new replica starts. The watch sees every
/// version of every Service: no address is ever held twice, no Service holds
/// two, and none moves, except those whose address the edit took out of the
/// pool (as MetalLB does; README, "Coming from MetalLB"). A crash, a
/// takeover or a reorder moves nothing. In the end every live Service has
/// an address. Bounded mode: 60 steps; `FERROLB_FAULTS_FULL=1`: 600.
#[tokio::test]
async fn churn_with_racing_replicas_crashes_and_pool_edits_moves_no_ip() {
    let (client, ns) = setup("ctl-churn").await;
    let base = ["10.90.0.0/27"];
    let extra = "10.90.1.0/28";
    create_pool(&client, &ns, "pool", &base).await;
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), &ns);
    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    let (watcher, violations, moves) = watch_invariants(&client, &ns);
    let full = std::env::var("FERROLB_FAULTS_FULL").is_ok_and(|v| v == "1");
    let steps = if full { 600 } else { 60 };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("churn seed {seed}");
    let mut rng = Rng(seed);
    let mut replicas: Vec<(String, Ctl)> = ["r0", "r1"]
        .into_iter()
        .map(|id| (id.to_owned(), Ctl::start(&client, &ns, id, None)))
        .collect();
    let mut next_replica = 2;
    let mut live: Vec<String> = Vec::new();
    let (mut created, mut deleted, mut edits, mut crashes) = (0, 0, 0, 0);
    let mut with_extra = false;
    for step in 0..steps {
        match rng.below(10) {
            // Create while there is room (32 addresses, 16 more with the
            // extra range; a Service beyond that would wait, legitimately).
            0..=4 if live.len() < 28 => {
                let name = format!("s{step}");
                create_service(&client, &ns, &name, BTreeMap::new()).await;
                live.push(name);
                created += 1;
            }
            0..=6 if !live.is_empty() => {
                let name = live.swap_remove(rng.below(live.len()));
                svcs.delete(&name, &DeleteParams::default()).await.unwrap();
                deleted += 1;
            }
            7 | 8 => {
                // Toggle the extra range (dropping it while Services hold
                // addresses there is the case that must move nothing), or
                // reorder the ranges.
                let mut addrs: Vec<&str> = base.to_vec();
                if rng.below(2) == 0 {
                    with_extra = !with_extra;
                }
                if with_extra {
                    addrs.push(extra);
                    if rng.below(2) == 0 {
                        addrs.reverse();
                    }
                }
                pools
                    .patch(
                        "pool",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"addresses": addrs}})),
                    )
                    .await
                    .unwrap();
                edits += 1;
            }
            _ => {
                // The leader crashes; a new replica joins the race.
                if let Some(h) = holder(&client, &ns).await
                    && let Some(i) = replicas.iter().position(|(id, _)| *id == h)
                {
                    let (_, ctl) = replicas.swap_remove(i);
                    ctl.crash();
                    crashes += 1;
                    let id = format!("r{next_replica}");
                    next_replica += 1;
                    replicas.push((id.clone(), Ctl::start(&client, &ns, &id, None)));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.below(150) as u64)).await;
    }
    // The pool ends with the extra range, so that every Service fits.
    pools
        .patch(
            "pool",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"addresses": [base[0], extra]}})),
        )
        .await
        .unwrap();
    let started = Instant::now();
    let names: Vec<&str> = live.iter().map(String::as_str).collect();
    let last = ips(&client, &ns, &names).await;
    let settle = started.elapsed();
    watcher.abort();
    let violations = violations.lock().unwrap().clone();
    // A Service moves only when its address leaves the pool: the extra
    // range was removed while it held an address there (MetalLB moves it
    // too; the README's compatibility section). Any other move is a fault.
    let in_extra = |ips: &[String]| {
        ips.iter().all(|ip| {
            ip.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|a| a.octets()[..3] == [10, 90, 1] && a.octets()[3] < 16)
        })
    };
    let moves = moves.lock().unwrap().clone();
    let (documented, faults): (Vec<_>, Vec<_>) =
        moves.iter().partition(|(_, from, _)| in_extra(from));
    let line = format!(
        "FIGURE fault=controller_churn seed={seed} steps={steps} created={created} deleted={deleted} \
         pool_edits={edits} leader_crashes={crashes} live={} violations={} \
         moves_range_removed={} moves_other={} settle_ms={}",
        last.len(),
        violations.len(),
        documented.len(),
        faults.len(),
        settle.as_millis()
    );
    figure(&line);
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    assert!(faults.is_empty(), "seed {seed}: moved: {faults:#?}");
    for (_, ctl) in replicas {
        ctl.stop().await;
    }
}

/// A requested IPv4-mapped IPv6 address: the controller refuses it with a
/// Warning Event naming the annotation (as written, either prefix) and
/// the address, assigns nothing, and grants the IPv4 form once the
/// annotation is fixed.
#[tokio::test]
async fn a_requested_ipv4_mapped_address_is_refused_on_the_service() {
    let (client, ns) = setup("ctl-mapped").await;
    create_pool(&client, &ns, "p", &["10.90.0.0/29", "fc00:90::/125"]).await;
    let ctl = Ctl::start(&client, &ns, "one", None);
    create_service(
        &client,
        &ns,
        "new-prefix",
        BTreeMap::from([("metallb.io/loadBalancerIPs", "::ffff:10.90.0.5")]),
    )
    .await;
    create_service(
        &client,
        &ns,
        "old-prefix",
        BTreeMap::from([("metallb.universe.tf/loadBalancerIPs", "::FFFF:a5a:6")]),
    )
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    for (name, note) in [
        (
            "new-prefix",
            r#"metallb.io/loadBalancerIPs: "::ffff:10.90.0.5" is an IPv4-mapped IPv6 address: request it as IPv4 (10.90.0.5)"#,
        ),
        (
            "old-prefix",
            r#"metallb.universe.tf/loadBalancerIPs: "::FFFF:a5a:6" is an IPv4-mapped IPv6 address: request it as IPv4 (10.90.0.6)"#,
        ),
    ] {
        let reason =
            support::eventually(TIMEOUT, "a Warning naming the mapped address", || async {
                let list = events.list(&ListParams::default()).await.ok()?;
                list.items.into_iter().find_map(|e| {
                    let about = e.involved_object.name.as_deref() == Some(name);
                    let says = e.message.as_deref().is_some_and(|m| m.contains(note));
                    (about && says && e.type_.as_deref() == Some("Warning")).then_some(e.reason)
                })
            })
            .await;
        // Never held an address: MetalLB's reason for a new Service.
        assert_eq!(reason.as_deref(), Some("AllocationFailed"), "{name}");
    }
    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    assert!(ingress(&svcs.get("new-prefix").await.unwrap()).is_empty());
    svcs.patch(
        "new-prefix",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"metallb.io/loadBalancerIPs": "10.90.0.5"}}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        ips(&client, &ns, &["new-prefix"]).await["new-prefix"],
        ["10.90.0.5"]
    );
    ctl.stop().await;
}
