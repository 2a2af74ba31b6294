//! The deploy manifests under `config/` against the real apiserver: every
//! kustomization builds, `config/default` passes a server-side dry run and
//! then applies for real (twice, without conflicts), the workloads are as
//! locked down as the manifests claim, and the service accounts may do what
//! the binaries call and nothing more.
//!
//! RBAC is checked three ways. SubjectAccessReviews ask the apiserver's
//! authorizer (`--authorization-mode=RBAC`, as `kubectl auth can-i` does)
//! about every call and about calls that must be refused. The controller
//! itself runs in-process with a token of its service account and must
//! allocate an address, write the pool status, record an Event and hold
//! and release its Lease. The speaker's Kubernetes glue (its watches,
//! `speaker::source::k8s`, and its status writer, `speaker::publish`) runs
//! the same way and must deliver a snapshot, write and delete the status
//! objects, the ConfigurationState and a nodeAssigned Event. (The speaker's
//! network side needs root and peers: `speaker/tests/speaker_k8s.rs`.)
//!
//! `config/migrate-from-metallb` (ferrolb's speakers beside a running
//! MetalLB) applies beside `config/default` the same way, and its speaker
//! may read in MetalLB's namespace what `speaker::source::k8s::metallb_feed`
//! calls and nothing more, checked both ways (reviews, and the feed run with
//! its token).
//!
//! All tests share this binary's apiserver and the one install of
//! `config/default` ([`installed`]); tests of other binaries have their own.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use controller::reconcile::{self, Options};
use controller::{leader, mlsecret};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Secret, Service, ServiceAccount};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use speaker::announce::{
    Announcements, ApiSpeakers, MetallbSpeakers, ObjectKey, ServiceAnnouncement,
};
use speaker::publish;
use speaker::source::k8s;
use testenv::TestEnv;
use tokio::sync::{mpsc, watch};

#[test]
fn every_kustomization_builds_and_default_holds_them_all() {
    let env = TestEnv::global();
    let default = objects(&kustomize(env, "config/default"));
    let default_ids: BTreeSet<_> = default.iter().map(id).collect();
    let mut from_bases = BTreeSet::new();
    for base in [
        "config/crd",
        "config/rbac",
        "config/controller",
        "config/speaker",
    ] {
        let docs = objects(&kustomize(env, base));
        assert!(!docs.is_empty(), "{base} renders nothing");
        for doc in &docs {
            assert!(
                default_ids.contains(&id(doc)),
                "{:?} of {base} is missing from config/default",
                id(doc)
            );
            from_bases.insert(id(doc));
        }
    }
    let extra: Vec<_> = default_ids.difference(&from_bases).collect();
    assert_eq!(
        extra,
        [&("Namespace".to_owned(), NAMESPACE.to_owned())],
        "config/default adds only the namespace"
    );
    for doc in default.iter().filter(|d| is_namespaced(d)) {
        assert_eq!(doc["metadata"]["namespace"], NAMESPACE, "{:?}", id(doc));
    }

    // config/crd/kustomization.yml lists every generated CRD file.
    let crd_dir = repo().join("config/crd");
    let mut files: BTreeSet<String> = BTreeSet::new();
    for entry in std::fs::read_dir(&crd_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            files.insert(doc["metadata"]["name"].as_str().unwrap().to_owned());
        }
    }
    let rendered: BTreeSet<String> = default
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(files.len() >= 9, "CRD files in {}", crd_dir.display());
    assert_eq!(
        rendered, files,
        "config/crd/kustomization.yml must list every CRD file"
    );
}

#[test]
fn default_passes_a_server_side_dry_run_then_applies_for_real() {
    let install = installed();
    let want: BTreeSet<(String, String)> = install
        .ids
        .iter()
        .map(|(kind, name)| (kind.to_lowercase(), name.clone()))
        .collect();
    assert_eq!(
        applied(&install.dry_run, "serverside-applied (server dry run)"),
        want,
        "the dry run:\n{}",
        install.dry_run
    );
    assert!(
        install.after_dry_run.trim().is_empty(),
        "the dry run created objects:\n{}",
        install.after_dry_run
    );
    assert_eq!(
        install.created.lines().count(),
        install.ids.len(),
        "after the real apply:\n{}",
        install.created
    );
    // Applying again conflicts with nothing.
    assert_eq!(
        applied(&install.reapplied, "serverside-applied"),
        want,
        "{}",
        install.reapplied
    );
}

#[tokio::test]
async fn workloads_run_locked_down() {
    installed();
    let client = TestEnv::global().client().unwrap();

    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get("controller")
        .await
        .unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2), "a standby for leader election");
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("controller"));
    let pod_sc = pod.security_context.clone().unwrap();
    assert_eq!(pod_sc.run_as_non_root, Some(true));
    assert_ne!(pod_sc.run_as_user, Some(0));
    let c = only_container(&pod);
    assert!(c.args.as_ref().unwrap().contains(&"run".to_owned()));
    assert!(
        c.args
            .as_ref()
            .unwrap()
            .contains(&"--namespace=$(POD_NAMESPACE)".to_owned())
    );
    assert_eq!(
        env_field(c, "POD_NAME"),
        "metadata.name",
        "the Lease identity"
    );
    assert_eq!(env_field(c, "POD_NAMESPACE"), "metadata.namespace");
    assert_locked_down(c, &[]);
    assert_probes(c);

    let daemonset = Api::<DaemonSet>::namespaced(client, NAMESPACE)
        .get("speaker")
        .await
        .unwrap();
    let pod = daemonset.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("speaker"));
    assert_eq!(pod.host_network, Some(true));
    let c = only_container(&pod);
    assert_eq!(env_field(c, "NODE_NAME"), "spec.nodeName");
    assert_eq!(env_field(c, "METALLB_NAMESPACE"), "metadata.namespace");
    assert_eq!(env_field(c, "POD_NAME"), "metadata.name");
    assert_eq!(env_field(c, "POD_UID"), "metadata.uid");
    assert_locked_down(c, &["NET_RAW"]);
    assert_probes(c);
    // The memberlist key comes from the Secret the controller creates.
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "memberlist")
        .unwrap();
    let secret = volume.secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("memberlist"));
    assert_ne!(
        secret.optional,
        Some(true),
        "speakers must not run without a key"
    );
    let mount = c
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.name == "memberlist")
        .unwrap();
    let key_arg = format!("--memberlist-key-file={}/secretkey", mount.mount_path);
    assert!(c.args.as_ref().unwrap().contains(&key_arg), "{:?}", c.args);
}

#[tokio::test]
async fn controller_may_do_what_it_calls_and_nothing_more() {
    installed();
    let client = TestEnv::global().client().unwrap();
    let user = "controller";
    for (verb, resource, ns) in [
        // reconcile.rs: startup list, then watchers.
        ("list", "services", ""),
        ("watch", "services", ""),
        ("list", "namespaces", ""),
        ("watch", "namespaces", ""),
        ("list", "ipaddresspools.metallb.io", NAMESPACE),
        ("watch", "ipaddresspools.metallb.io", NAMESPACE),
        // The pool annotation and the ingress (one PUT), the pool counters.
        ("update", "services/status", "app"),
        ("patch", "ipaddresspools.metallb.io/status", NAMESPACE),
        // Events on Services, and on refused pools.
        ("create", "events.events.k8s.io", "app"),
        ("patch", "events.events.k8s.io", "app"),
        ("create", "events.events.k8s.io", NAMESPACE),
        // ConfigurationState `controller`.
        ("create", "configurationstates.metallb.io", NAMESPACE),
        ("patch", "configurationstates.metallb.io", NAMESPACE),
        ("patch", "configurationstates.metallb.io/status", NAMESPACE),
        // leader.rs.
        ("create", "leases.coordination.k8s.io", NAMESPACE),
        ("get", LEASE, NAMESPACE),
        ("update", LEASE, NAMESPACE),
        // mlsecret.rs: the memberlist Secret, owned by the Deployment.
        ("get", "secrets/memberlist", NAMESPACE),
        ("create", "secrets", NAMESPACE),
        ("get", "deployments.apps/controller", NAMESPACE),
        // The HTTPS metrics (--port): shell::http::review.
        ("create", "tokenreviews.authentication.k8s.io", ""),
        ("create", "subjectaccessreviews.authorization.k8s.io", ""),
    ] {
        assert_may(&client, user, verb, resource, ns, true).await;
    }
    for (verb, resource, ns) in [
        // No other Secret (BGP passwords live there too).
        ("get", "secrets", NAMESPACE),
        ("get", "secrets/bgp-password", NAMESPACE),
        ("list", "secrets", NAMESPACE),
        ("watch", "secrets", NAMESPACE),
        ("update", "secrets/memberlist", NAMESPACE),
        ("list", "secrets", ""),
        ("create", "secrets", "app"),
        ("get", "deployments.apps/speaker", NAMESPACE),
        ("create", "services", "app"),
        ("update", "services", "app"),
        ("delete", "services", "app"),
        ("patch", "services", "app"),
        ("patch", "services/status", "app"),
        ("list", "pods", ""),
        ("list", "nodes", ""),
        ("patch", "namespaces", ""),
        ("list", "ipaddresspools.metallb.io", "app"),
        ("patch", "ipaddresspools.metallb.io", NAMESPACE),
        ("delete", "ipaddresspools.metallb.io", NAMESPACE),
        ("create", "bgppeers.metallb.io", NAMESPACE),
        ("update", "leases.coordination.k8s.io/other", NAMESPACE),
        ("delete", LEASE, NAMESPACE),
        ("create", "leases.coordination.k8s.io", "app"),
        ("create", "events", "app"),
        ("delete", "configurationstates.metallb.io", NAMESPACE),
        ("patch", "configurationstates.metallb.io", "app"),
        ("create", BINDINGS, ""),
    ] {
        assert_may(&client, user, verb, resource, ns, false).await;
    }
}

#[tokio::test]
async fn speaker_may_do_what_it_calls_and_nothing_more() {
    installed();
    let client = TestEnv::global().client().unwrap();
    let user = "speaker";
    let mut allowed = Vec::new();
    for verb in ["list", "watch"] {
        // source/k8s.rs: reflectors.
        for resource in ["nodes", "services", "endpointslices.discovery.k8s.io"] {
            allowed.push((verb, resource, ""));
        }
        for resource in SPEAKER_READS_IN_NAMESPACE {
            allowed.push((verb, resource, NAMESPACE));
        }
    }
    allowed.extend([
        // publish.rs.
        ("list", "servicel2statuses.metallb.io", NAMESPACE),
        ("create", "servicel2statuses.metallb.io", NAMESPACE),
        ("delete", "servicel2statuses.metallb.io", NAMESPACE),
        ("patch", "servicel2statuses.metallb.io/status", NAMESPACE),
        ("list", "servicebgpstatuses.metallb.io", NAMESPACE),
        ("create", "servicebgpstatuses.metallb.io", NAMESPACE),
        ("delete", "servicebgpstatuses.metallb.io", NAMESPACE),
        ("patch", "servicebgpstatuses.metallb.io/status", NAMESPACE),
        ("create", "configurationstates.metallb.io", NAMESPACE),
        ("patch", "configurationstates.metallb.io", NAMESPACE),
        ("patch", "configurationstates.metallb.io/status", NAMESPACE),
        ("create", "events.events.k8s.io", "app"),
        ("patch", "events.events.k8s.io", "app"),
        // The HTTPS metrics (--port): shell::http::review.
        ("create", "tokenreviews.authentication.k8s.io", ""),
        ("create", "subjectaccessreviews.authorization.k8s.io", ""),
    ]);
    for (verb, resource, ns) in allowed {
        assert_may(&client, user, verb, resource, ns, true).await;
    }
    for (verb, resource, ns) in [
        ("update", "services", "app"),
        ("patch", "services", "app"),
        ("patch", "services/status", "app"),
        ("delete", "nodes", ""),
        ("patch", "nodes", ""),
        ("patch", "nodes/status", ""),
        ("get", "secrets", "app"),
        ("list", "secrets", "app"),
        ("list", "secrets", ""),
        ("list", "pods", ""),
        ("create", "pods", NAMESPACE),
        ("delete", "pods", NAMESPACE),
        ("create", "ipaddresspools.metallb.io", NAMESPACE),
        ("patch", "ipaddresspools.metallb.io", NAMESPACE),
        ("patch", "ipaddresspools.metallb.io/status", NAMESPACE),
        ("delete", "bgppeers.metallb.io", NAMESPACE),
        ("list", "bgppeers.metallb.io", "app"),
        ("create", "servicel2statuses.metallb.io", "app"),
        ("delete", "configurationstates.metallb.io", NAMESPACE),
        ("get", LEASE, NAMESPACE),
        ("create", BINDINGS, ""),
    ] {
        assert_may(&client, user, verb, resource, ns, false).await;
    }
}

#[tokio::test]
async fn controller_runs_as_its_service_account() {
    installed();
    let env = TestEnv::global();
    let admin = env.client().unwrap();
    let pool: Value = json!({
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": {"name": "manifests-test", "namespace": NAMESPACE},
        "spec": {"addresses": ["192.0.2.8/30"]},
    });
    let pools = metallb(&admin, "IPAddressPool", "ipaddresspools", "v1beta1");
    pools
        .patch(
            "manifests-test",
            &PatchParams::apply("manifests-test"),
            &Patch::Apply(&pool),
        )
        .await
        .unwrap();
    let ns = env.fresh_namespace("controller-sa").await.unwrap();
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();

    // The memberlist Secret, as `controller run --ml-secret-name memberlist
    // --deployment controller` (config/controller) makes it with its role:
    // created owned by the Deployment, then found and left alone.
    let sa = service_account_client(env, "controller").await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let _ = secrets.delete("memberlist", &Default::default()).await;
    let ensure = || mlsecret::ensure(&sa, NAMESPACE, "memberlist", Some("controller"));
    assert_eq!(ensure().await.unwrap(), mlsecret::Outcome::Created);
    let secret = secrets.get("memberlist").await.unwrap();
    let key = &secret.data.as_ref().unwrap()[mlsecret::KEY];
    let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "controller")
    );
    assert_eq!(ensure().await.unwrap(), mlsecret::Outcome::Exists);
    let again = secrets.get("memberlist").await.unwrap();
    assert_eq!(
        &again.data.unwrap()[mlsecret::KEY],
        key,
        "an existing key is kept"
    );

    let identity = "controller-manifests-test";
    let opts = Options {
        namespace: NAMESPACE.to_owned(),
        lb_class: None,
        lease: leader::Config {
            namespace: NAMESPACE.to_owned(),
            name: "ferrolb-controller".into(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
        },
        metrics_addr: None,
        metallb: shell::compat::MetallbArgs::without_probes(),
        concurrency: 4,
        max_backoff: Duration::from_secs(2),
        pool_status_period: Duration::from_millis(200),
    };
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(reconcile::run(
        service_account_client(env, "controller").await,
        opts,
        stopped,
    ));

    // The address and the annotation (services, services/status: patch).
    let services = &services;
    let svc = eventually("an ingress IP on the Service", || async move {
        let svc = services.get("web").await.unwrap();
        let ingress = svc
            .status
            .as_ref()?
            .load_balancer
            .as_ref()?
            .ingress
            .as_ref()?;
        ingress.first()?.ip.as_ref()?;
        Some(svc)
    })
    .await;
    let ip = &svc.status.unwrap().load_balancer.unwrap().ingress.unwrap()[0];
    assert!(
        ["192.0.2.8", "192.0.2.9", "192.0.2.10", "192.0.2.11"].contains(&ip.ip.as_deref().unwrap()),
        "{ip:?}"
    );
    assert_eq!(
        svc.metadata.annotations.unwrap()["metallb.io/ip-allocated-from-pool"],
        "manifests-test"
    );
    // ipaddresspools/status: patch.
    let pools = &pools;
    eventually("assignedIPv4 1 in the pool status", || async move {
        let pool = pools.get("manifests-test").await.unwrap();
        (pool.data["status"]["assignedIPv4"] == 1).then_some(())
    })
    .await;
    // events.k8s.io: create (the Recorder drops its errors, so only the
    // Event itself proves it was allowed).
    let events: &Api<K8sEvent> = &Api::namespaced(admin.clone(), &ns);
    eventually("an IPAllocated Event", || async move {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("IPAllocated"))
            .then_some(())
    })
    .await;
    // leases: create or get + update.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NAMESPACE);
    let holder = |lease: Lease| lease.spec.and_then(|s| s.holder_identity);
    let lease = leases.get("ferrolb-controller").await.unwrap();
    assert_eq!(holder(lease).as_deref(), Some(identity));

    // A graceful stop releases the Lease (get + update).
    stop.send(true).unwrap();
    tokio::time::timeout(TIMEOUT, task)
        .await
        .expect("the controller did not stop")
        .unwrap()
        .unwrap();
    let lease = leases.get("ferrolb-controller").await.unwrap();
    assert_eq!(holder(lease), None, "the Lease was not released");
}

/// ferrolb's speakers beside a running MetalLB (`config/migrate-from-metallb`;
/// docs/src/metallb.md, "Node by node, without an outage"): the overlay
/// passes a server-side dry run and applies, twice, beside
/// `config/default` (which stands for MetalLB's install: the same names),
/// leaving its objects alone; its speaker service account may do in its
/// own namespace what the speaker does in MetalLB's (the calls of
/// `speaker_may_do_what_it_calls_and_nothing_more`) and, in MetalLB's
/// namespace, exactly what `speaker::source::k8s::metallb_feed` calls, as
/// the feed itself shows by running with its token.
#[tokio::test]
async fn migrate_from_metallb_applies_beside_metallb_and_reads_only_what_it_calls() {
    installed();
    let env = TestEnv::global();
    let yaml = kustomize(env, "config/migrate-from-metallb");
    let docs = objects(&yaml);
    let kinds: BTreeSet<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    for kind in ["CustomResourceDefinition", "Deployment"] {
        assert!(
            !kinds.contains(kind),
            "no CRDs, no controller before step 3: {kinds:?}"
        );
    }
    for doc in docs.iter().filter(|d| is_namespaced(d)) {
        let ns = if id(doc).1 == "ferrolb-metallb-reader" {
            NAMESPACE
        } else {
            FERROLB_NAMESPACE
        };
        assert_eq!(doc["metadata"]["namespace"], ns, "{:?}", id(doc));
    }
    let want: BTreeSet<(String, String)> = docs
        .iter()
        .map(|d| (id(d).0.to_lowercase(), id(d).1))
        .collect();
    let namespace: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] == "Namespace")
        .cloned()
        .collect();
    assert_eq!(namespace.len(), 1, "the overlay has one Namespace");
    kubectl(
        env,
        &["apply", "--server-side", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": namespace}).to_string(),
    );
    let dry_run = kubectl(
        env,
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        &yaml,
    );
    assert_eq!(
        applied(&dry_run, "serverside-applied (server dry run)"),
        want,
        "{dry_run}"
    );
    kubectl(env, &["apply", "--server-side", "-f", "-"], &yaml);
    let reapplied = kubectl(env, &["apply", "--server-side", "-f", "-"], &yaml);
    assert_eq!(
        applied(&reapplied, "serverside-applied"),
        want,
        "{reapplied}"
    );
    // MetalLB's cluster-wide speaker binding is still MetalLB's.
    let binding = kubectl(
        env,
        &[
            "get",
            "clusterrolebinding",
            "metallb-system:speaker",
            "-o",
            "json",
        ],
        "",
    );
    let binding: Value = serde_json::from_str(&binding).unwrap();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "speaker", "namespace": NAMESPACE}])
    );

    let client = env.client().unwrap();
    let ours = FERROLB_NAMESPACE;
    let mut allowed = Vec::new();
    for verb in ["list", "watch"] {
        for resource in ["nodes", "services", "endpointslices.discovery.k8s.io"] {
            allowed.push((verb, resource, ""));
        }
        for resource in SPEAKER_READS_IN_NAMESPACE {
            allowed.push((verb, resource, ours));
        }
    }
    allowed.extend([
        ("list", "servicel2statuses.metallb.io", ours),
        ("create", "servicel2statuses.metallb.io", ours),
        ("delete", "servicel2statuses.metallb.io", ours),
        ("patch", "servicel2statuses.metallb.io/status", ours),
        ("list", "servicebgpstatuses.metallb.io", ours),
        ("create", "servicebgpstatuses.metallb.io", ours),
        ("delete", "servicebgpstatuses.metallb.io", ours),
        ("patch", "servicebgpstatuses.metallb.io/status", ours),
        ("create", "configurationstates.metallb.io", ours),
        ("patch", "configurationstates.metallb.io", ours),
        ("patch", "configurationstates.metallb.io/status", ours),
        ("create", "events.events.k8s.io", "app"),
        ("patch", "events.events.k8s.io", "app"),
        ("create", "tokenreviews.authentication.k8s.io", ""),
        ("create", "subjectaccessreviews.authorization.k8s.io", ""),
        // metallb_feed in MetalLB's namespace.
        ("list", "pods", NAMESPACE),
        ("watch", "pods", NAMESPACE),
        ("list", "l2advertisements.metallb.io", NAMESPACE),
        ("watch", "l2advertisements.metallb.io", NAMESPACE),
        ("list", "servicel2statuses.metallb.io", NAMESPACE),
    ]);
    for (verb, resource, ns) in allowed {
        assert_may_in(&client, ours, "speaker", verb, resource, ns, true).await;
    }
    for (verb, resource, ns) in [
        // Refused on purpose: the feed lists it every second instead.
        ("watch", "servicel2statuses.metallb.io", NAMESPACE),
        // Nothing of MetalLB's configuration, Secrets or status is read or
        // written from ferrolb's speakers: they read their own copy.
        ("get", "secrets", NAMESPACE),
        ("list", "secrets", NAMESPACE),
        ("get", "secrets/memberlist", NAMESPACE),
        ("get", "pods", NAMESPACE),
        ("delete", "pods", NAMESPACE),
        ("patch", "pods", NAMESPACE),
        ("delete", "l2advertisements.metallb.io", NAMESPACE),
        ("patch", "l2advertisements.metallb.io", NAMESPACE),
        ("list", "ipaddresspools.metallb.io", NAMESPACE),
        ("list", "bgppeers.metallb.io", NAMESPACE),
        ("list", "bgpadvertisements.metallb.io", NAMESPACE),
        ("create", "servicel2statuses.metallb.io", NAMESPACE),
        ("delete", "servicel2statuses.metallb.io", NAMESPACE),
        ("patch", "servicel2statuses.metallb.io/status", NAMESPACE),
        ("list", "servicebgpstatuses.metallb.io", NAMESPACE),
        ("create", "configurationstates.metallb.io", NAMESPACE),
        ("list", "pods", ""),
        ("list", "secrets", ""),
        ("patch", "services/status", "app"),
        ("create", BINDINGS, ""),
    ] {
        assert_may_in(&client, ours, "speaker", verb, resource, ns, false).await;
    }

    // The feed, with the speaker's token: the three lists (the first
    // report), then a MetalLB speaker Pod made now arrives (watched).
    let sa = service_account_client_in(env, ours, "speaker").await;
    let (tx, mut rx) = watch::channel(Arc::new(ApiSpeakers {
        metallb: Some(MetallbSpeakers::default()),
        ..Default::default()
    }));
    let labels = "manifests-test=metallb-speaker";
    let feed = tokio::spawn(k8s::metallb_feed(
        Api::namespaced(sa.clone(), NAMESPACE),
        Api::namespaced(sa.clone(), NAMESPACE),
        Api::namespaced(sa, NAMESPACE),
        labels.to_owned(),
        Arc::new(tx),
    ));
    let synced = |s: &Arc<ApiSpeakers>| s.metallb.as_ref().is_some_and(|m| m.synced);
    tokio::time::timeout(TIMEOUT, rx.wait_for(synced))
        .await
        .expect("MetalLB's Pods, L2Advertisements or ServiceL2Status objects were never listed")
        .unwrap();
    let node = "migrate-probe-node";
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "migrate-probe", "labels": {"manifests-test": "metallb-speaker"}},
        "spec": {"nodeName": node, "containers": [{"name": "speaker", "image": "metallb/speaker"}]},
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let arrived = tokio::time::timeout(
        TIMEOUT,
        rx.wait_for(|s| s.metallb.as_ref().is_some_and(|m| m.present.contains(node))),
    )
    .await;
    feed.abort();
    let _ = pods.delete("migrate-probe", &Default::default()).await;
    arrived
        .expect("a MetalLB speaker Pod made after the first list never reached the feed")
        .unwrap();
}

#[tokio::test]
async fn speaker_runs_as_its_service_account() {
    installed();
    let env = TestEnv::global();
    let admin = env.client().unwrap();
    let sa = service_account_client(env, "speaker").await;
    let app = env.fresh_namespace("speaker-sa").await.unwrap();
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .unwrap();
    Api::<Service>::namespaced(admin.clone(), &app)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();

    // The source: the first snapshot (or its validation problems) comes once
    // every reflector has listed; the first seeds once the speaker Pods have.
    let (reloads_tx, mut reloads) = mpsc::channel(1);
    let (seeds_tx, mut seeds) = mpsc::unbounded_channel();
    let source = k8s::Options {
        namespace: NAMESPACE.to_owned(),
        memberlist_labels: Some("app=metallb,component=speaker".into()),
        isolated: None,
    };
    // Supervised as in the speaker: the reflectors and the snapshot task
    // must not end.
    let tasks = shell::task::Supervisor::new(shell::Health::new());
    let stores = k8s::start(&sa, &source, reloads_tx, Some(seeds_tx), &tasks.spawner());
    let first = tokio::time::timeout(TIMEOUT, reloads.recv())
        .await
        .expect("no snapshot: a watch of the speaker's is refused")
        .unwrap();
    assert!(first.is_ok(), "{:?}", first.err());
    tokio::time::timeout(TIMEOUT, seeds.recv())
        .await
        .expect("no memberlist seeds: the speaker Pods cannot be watched")
        .unwrap();
    // Then every watch delivers: an object of each kind made now reaches a
    // snapshot (a list alone would have given the first one).
    let probe = "watch-probe";
    for doc in watch_probes(&app) {
        kubectl(
            env,
            &["apply", "--server-side", "-f", "-"],
            &doc.to_string(),
        );
    }
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let reload = tokio::time::timeout_at(deadline.into(), reloads.recv())
            .await
            .expect("the objects made after the first snapshot never all arrived")
            .unwrap();
        // Until the Community arrives, the advertisement names an unknown
        // alias and the configuration is refused: wait for the next one.
        let Ok(snapshot) = reload else { continue };
        let named = |meta: &ObjectMeta| meta.name.as_deref() == Some(probe);
        let m = &snapshot.model;
        // The model holds parsed values: the Community shows as the value
        // its alias resolved to in the advertisement.
        let ad = m.bgp_advertisements.iter().find(|a| a.name == probe);
        let arrived = [
            snapshot.nodes.iter().any(|o| *o.name == *probe),
            snapshot.services.iter().any(|o| *o.key.name == *probe),
            snapshot
                .slices
                .iter()
                .any(|o| o.name().to_string() == *probe),
            snapshot.secrets.iter().any(|o| named(&o.metadata)),
            m.pools.iter().any(|p| p.name == probe),
            m.peers.iter().any(|p| p.name == probe),
            ad.is_some(),
            m.l2_advertisements.iter().any(|a| a.name == probe),
            m.bfd_profiles.contains_key(probe),
            ad.is_some_and(|a| a.communities.iter().any(|c| c.to_string() == "64512:777")),
        ];
        if arrived.iter().all(|a| *a) {
            break;
        }
    }
    // A speaker Pod with an address becomes a memberlist seed; a Ready one
    // counts its node among the Ready speakers (an isolated node's view).
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": probe, "labels": {"app": "metallb", "component": "speaker"}},
        "spec": {"nodeName": probe, "containers": [{"name": "speaker", "image": "speaker"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"podIP": "192.0.2.77", "podIPs": [{"ip": "192.0.2.77"}],
                                   "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(probe, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let seed: IpAddr = "192.0.2.77".parse().unwrap();
    loop {
        let pods = tokio::time::timeout_at(deadline.into(), seeds.recv())
            .await
            .expect("the speaker Pod never became a seed")
            .unwrap();
        if pods.ips.contains(&seed) && pods.ready.contains(probe) {
            break;
        }
    }
    let services = stores.services.clone();
    eventually("the Service in the speaker's cache", || {
        let found = services.get(&ObjectKey::new(&app, "web")).map(drop);
        async move { found }
    })
    .await;

    // The status writer: a layer 2 and a BGP announcement of the Service.
    let node = "node-sa-test";
    let (report_tx, reports) = watch::channel(publish::Report::default());
    let opts = publish::Options {
        node: node.to_owned(),
        namespace: NAMESPACE.to_owned(),
        pod: None,
    };
    let writer = tokio::spawn(publish::run(sa.clone(), opts, stores.services, reports));
    let announcing = ServiceAnnouncement {
        l2: Some(vec!["eth0".into()]),
        bgp: vec![Arc::from("router")].into(),
    };
    report_tx.send_replace(publish::Report {
        announcements: Some(
            Announcements::from([(ObjectKey::new(app.as_str(), "web"), announcing)]).into(),
        ),
        config: publish::ConfigResult::Valid,
    });
    let by_node = ListParams::default().labels(&format!("metallb.io/node={node}"));
    let status_kinds = [
        ("ServiceL2Status", "servicel2statuses", "interfaces"),
        ("ServiceBGPStatus", "servicebgpstatuses", "peers"),
    ];
    for (kind, plural, field) in status_kinds {
        let api = &metallb(&admin, kind, plural, "v1beta1");
        let by_node = &by_node;
        eventually(&format!("a {kind} with its status"), || async move {
            let list = api.list(by_node).await.unwrap();
            let status = &list.items.first()?.data["status"];
            (status["serviceName"] == "web" && status[field].is_array()).then_some(())
        })
        .await;
    }
    let states = &metallb(
        &admin,
        "ConfigurationState",
        "configurationstates",
        "v1beta1",
    );
    eventually("ConfigurationState Valid", || async move {
        let state = states.get_opt(&format!("speaker-{node}")).await.unwrap()?;
        (state.data["status"]["result"] == "Valid").then_some(())
    })
    .await;
    let events = &Api::<K8sEvent>::namespaced(admin.clone(), &app);
    eventually("a nodeAssigned Event", || async move {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("nodeAssigned"))
            .then_some(())
    })
    .await;

    // Nothing announced any more: the status objects are deleted.
    report_tx.send_modify(|r| r.announcements = Some(Announcements::new().into()));
    for (kind, plural, _) in status_kinds {
        let api = &metallb(&admin, kind, plural, "v1beta1");
        let by_node = &by_node;
        eventually(&format!("no {kind} left"), || async move {
            api.list(by_node)
                .await
                .unwrap()
                .items
                .is_empty()
                .then_some(())
        })
        .await;
    }
    drop(report_tx);
    tokio::time::timeout(TIMEOUT, writer)
        .await
        .expect("the status writer did not stop")
        .unwrap();

    // And, for real, what it must not do.
    let forbidden = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        Ok(()) => panic!("allowed"),
        Err(e) => panic!("{e}"),
    };
    forbidden(
        Api::<Secret>::namespaced(sa.clone(), &app)
            .list(&ListParams::default())
            .await
            .map(drop),
    );
    forbidden(
        Api::<Service>::namespaced(sa, &app)
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await
            .map(drop),
    );
}

/// One object of each kind the speaker watches, named `watch-probe`; the
/// Service and its EndpointSlice in `app`, the rest in `metallb-system`. The
/// pool is not auto-assigned, so the controller test never allocates from it.
fn watch_probes(app: &str) -> Vec<Value> {
    let meta = |ns: &str| json!({"name": "watch-probe", "namespace": ns});
    let metallb = |kind: &str, version: &str, spec: Value| {
        json!({"apiVersion": format!("metallb.io/{version}"), "kind": kind,
               "metadata": meta(NAMESPACE), "spec": spec})
    };
    let pool = json!({"ipAddressPools": ["watch-probe"]});
    let bgp_ad = json!({"ipAddressPools": ["watch-probe"], "communities": ["watch-probe"]});
    vec![
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "watch-probe"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(app),
               "spec": {"ports": [{"port": 80}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "watch-probe", "namespace": app,
                            "labels": {"kubernetes.io/service-name": "watch-probe"}},
               "addressType": "IPv4", "endpoints": []}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(NAMESPACE),
               "stringData": {"password": "probe"}}),
        metallb(
            "IPAddressPool",
            "v1beta1",
            json!({"addresses": ["198.51.100.0/30"], "autoAssign": false}),
        ),
        metallb("L2Advertisement", "v1beta1", pool),
        metallb("BGPAdvertisement", "v1beta1", bgp_ad),
        metallb(
            "BGPPeer",
            "v1beta2",
            json!({"myASN": 64512, "peerASN": 64513, "peerAddress": "198.51.100.9"}),
        ),
        metallb("BFDProfile", "v1beta1", json!({})),
        metallb(
            "Community",
            "v1beta1",
            json!({"communities": [{"name": "watch-probe", "value": "64512:777"}]}),
        ),
    ]
}

/// What [`installed`] saw.
struct Installed {
    /// (kind, name) of every object in `config/default`.
    ids: Vec<(String, String)>,
    /// kubectl's output of the server-side dry run.
    dry_run: String,
    /// `kubectl get` of the objects right after the dry run (must be empty).
    after_dry_run: String,
    /// `kubectl get -o name` of the objects after the real apply.
    created: String,
    /// kubectl's output of the second real apply.
    reapplied: String,
}

/// Installs `config/default` once for this test binary: the Namespace first
/// (namespaced objects cannot be dry-run into a missing namespace), then a
/// server-side dry run of everything, then the real thing, twice. Panics
/// (in every test that calls it) if any step fails.
fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Result<Installed, String>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        std::panic::catch_unwind(install).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        })
    });
    match result {
        Ok(installed) => installed,
        Err(msg) => panic!("installing config/default failed: {msg}"),
    }
}

fn install() -> Installed {
    let env = TestEnv::global();
    let yaml = kustomize(env, "config/default");
    let docs = objects(&yaml);
    let ids: Vec<_> = docs.iter().map(id).collect();
    let (namespace, rest): (Vec<Value>, Vec<Value>) =
        docs.into_iter().partition(|d| d["kind"] == "Namespace");
    assert_eq!(namespace.len(), 1, "config/default has one Namespace");
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    let rest = list(rest).to_string();

    kubectl(
        env,
        &["apply", "--server-side", "-f", "-"],
        &list(namespace).to_string(),
    );
    let dry_run = kubectl(
        env,
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        &yaml,
    );
    let after_dry_run = kubectl(
        env,
        &["get", "--ignore-not-found", "-o", "name", "-f", "-"],
        &rest,
    );
    kubectl(env, &["apply", "--server-side", "-f", "-"], &yaml);
    let created = kubectl(env, &["get", "-o", "name", "-f", "-"], &yaml);
    let reapplied = kubectl(env, &["apply", "--server-side", "-f", "-"], &yaml);
    Installed {
        ids,
        dry_run,
        after_dry_run,
        created,
        reapplied,
    }
}

/// `kubectl kustomize <dir>` (relative to the repository root).
fn kustomize(env: &TestEnv, dir: &str) -> String {
    let dir = repo().join(dir);
    kubectl(env, &["kustomize", dir.to_str().unwrap()], "")
}

/// Runs the environment's kubectl with `stdin`, returns its standard output,
/// and fails the test with kubectl's error output if it fails.
fn kubectl(env: &TestEnv, args: &[&str], stdin: &str) -> String {
    let mut child = env
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}/kubectl ({e}); testenv/build builds it",
                env.bin_dir().display()
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(stdout).unwrap();
    assert!(
        status.success(),
        "kubectl {} failed ({status}):\n{}",
        args.join(" "),
        String::from_utf8_lossy(&stderr)
    );
    stdout
}

/// The (lower-case kind, name) of each line `<kind>[.<group>]/<name> <outcome>`
/// of `kubectl apply`; panics on any other line.
fn applied(output: &str, outcome: &str) -> BTreeSet<(String, String)> {
    output
        .lines()
        .map(|line| {
            let parsed = line
                .strip_suffix(outcome)
                .and_then(|l| l.trim_end().split_once('/'))
                .map(|(resource, name)| {
                    let kind = resource.split('.').next().unwrap_or_default();
                    (kind.to_owned(), name.to_owned())
                });
            parsed.unwrap_or_else(|| panic!("unexpected kubectl output line {line:?}"))
        })
        .collect()
}

/// The documents of a multi-document YAML stream.
fn objects(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn id(doc: &Value) -> (String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (s(&doc["kind"]), s(&doc["metadata"]["name"]))
}

fn is_namespaced(doc: &Value) -> bool {
    let cluster_scoped = [
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    !cluster_scoped.contains(&doc["kind"].as_str().unwrap_or_default())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Asks the authorizer whether service account `user` of `metallb-system`
/// may `verb` `resource` (`plural[.group][/subresource]`, or
/// `plural.group/name` with a name for leases) in namespace `ns` (empty:
/// cluster-scoped, or every namespace), and asserts the answer.
async fn assert_may(client: &Client, user: &str, verb: &str, resource: &str, ns: &str, want: bool) {
    assert_may_in(client, NAMESPACE, user, verb, resource, ns, want).await;
}

/// [`assert_may`] for service account `user` of namespace `sa_ns`.
async fn assert_may_in(
    client: &Client,
    sa_ns: &str,
    user: &str,
    verb: &str,
    resource: &str,
    ns: &str,
    want: bool,
) {
    let (plural_group, rest) = resource.split_once('/').unwrap_or((resource, ""));
    let (plural, group) = plural_group.split_once('.').unwrap_or((plural_group, ""));
    // A `/` after leases, secrets or deployments names an object; after
    // another resource it is a subresource.
    let (name, subresource) = if ["leases", "secrets", "deployments"].contains(&plural) {
        (rest, "")
    } else {
        ("", rest)
    };
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{sa_ns}:{user}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{sa_ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(plural.to_owned()),
                subresource: opt(subresource),
                name: opt(name),
                namespace: opt(ns),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    let where_ = if ns.is_empty() { "cluster-wide" } else { ns };
    assert_eq!(
        answer.allowed,
        want,
        "{sa_ns}/{user} {} {verb} {resource} ({where_}): {answer:?}",
        if want {
            "must be allowed to"
        } else {
            "must not"
        }
    );
}

/// A client authenticated with a fresh token of service account `name` in
/// `metallb-system` (the TokenRequest API, as the kubelet mounts one).
async fn service_account_client(env: &TestEnv, name: &str) -> Client {
    service_account_client_in(env, NAMESPACE, name).await
}

/// [`service_account_client`] for service account `name` of `ns`.
async fn service_account_client_in(env: &TestEnv, ns: &str, name: &str) -> Client {
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client().unwrap(), ns);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let mut config = env.config().clone();
    config.auth_info = serde_json::from_value(json!({ "token": token })).unwrap();
    Client::try_from(config).unwrap()
}

/// A metallb.io kind in `metallb-system`.
fn metallb(client: &Client, kind: &str, plural: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

fn only_container(pod: &PodSpec) -> &Container {
    assert_eq!(pod.containers.len(), 1);
    &pod.containers[0]
}

/// The downward-API field of env var `name`.
fn env_field(c: &Container, name: &str) -> String {
    let var = c
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no env {name}"));
    let source = var.value_from.as_ref().unwrap();
    source.field_ref.as_ref().unwrap().field_path.clone()
}

/// Not privileged, no escalation, read-only root, every capability
/// dropped and exactly `add` added.
fn assert_locked_down(c: &Container, add: &[&str]) {
    let sc = c.security_context.as_ref().unwrap();
    assert_ne!(sc.privileged, Some(true), "{}", c.name);
    assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
    assert_eq!(sc.read_only_root_filesystem, Some(true), "{}", c.name);
    let caps = sc.capabilities.as_ref().unwrap();
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
    let added: BTreeSet<&str> = caps.add.iter().flatten().map(String::as_str).collect();
    assert_eq!(added, add.iter().copied().collect(), "{}", c.name);
    // Requests for CPU and memory, a memory limit (a leak ends in a
    // restart, not in the node's OOM killer choosing), and no CPU limit:
    // throttling would delay ARP replies, BFD and Lease renewals.
    let res = c.resources.as_ref().unwrap();
    let requests = res.requests.as_ref().unwrap();
    let limits = res.limits.as_ref().unwrap();
    assert!(
        requests.contains_key("cpu") && requests.contains_key("memory"),
        "{}: {res:?}",
        c.name
    );
    assert!(limits.contains_key("memory"), "{}: {res:?}", c.name);
    assert!(
        !limits.contains_key("cpu"),
        "{}: no CPU limit: {res:?}",
        c.name
    );
}

/// Liveness on /healthz and readiness on /readyz, on the metrics port.
fn assert_probes(c: &Container) {
    let ports: BTreeMap<&str, i32> = c
        .ports
        .iter()
        .flatten()
        .filter_map(|p| Some((p.name.as_deref()?, p.container_port)))
        .collect();
    assert_eq!(ports.get("monitoring"), Some(&METRICS_PORT), "{}", c.name);
    // MetalLB's HTTPS metrics port, under MetalLB's port name.
    assert_eq!(
        ports.get("metricshttps"),
        Some(&SECURE_METRICS_PORT),
        "{}",
        c.name
    );
    assert!(
        c.args
            .as_ref()
            .unwrap()
            .contains(&format!("--port={SECURE_METRICS_PORT}")),
        "{}",
        c.name
    );
    for (probe, path) in [
        (c.liveness_probe.as_ref(), "/healthz"),
        (c.readiness_probe.as_ref(), "/readyz"),
    ] {
        let get = probe.unwrap().http_get.as_ref().unwrap();
        assert_eq!(get.path.as_deref(), Some(path), "{}", c.name);
        assert_eq!(
            serde_json::to_value(&get.port).unwrap(),
            "monitoring",
            "{}",
            c.name
        );
    }
    let metrics_arg = format!("--metrics-addr=0.0.0.0:{METRICS_PORT}");
    assert!(
        c.args.as_ref().unwrap().contains(&metrics_arg),
        "{}",
        c.name
    );
}

/// Polls `check` until it returns `Some`, failing after [`TIMEOUT`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "timed out after {TIMEOUT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The speaker's namespaced reads (source/k8s.rs), as `plural.group`.
const SPEAKER_READS_IN_NAMESPACE: [&str; 8] = [
    "pods",
    "secrets",
    "ipaddresspools.metallb.io",
    "bgppeers.metallb.io",
    "bgpadvertisements.metallb.io",
    "l2advertisements.metallb.io",
    "bfdprofiles.metallb.io",
    "communities.metallb.io",
];

/// The controller's Lease, as `assert_may` names it.
const LEASE: &str = "leases.coordination.k8s.io/ferrolb-controller";

/// Cluster-wide privilege escalation, which neither account may do.
const BINDINGS: &str = "clusterrolebindings.rbac.authorization.k8s.io";

/// MetalLB's namespace, which the manifests use.
const NAMESPACE: &str = "metallb-system";

/// ferrolb's namespace beside a running MetalLB (`config/migrate-from-metallb`).
const FERROLB_NAMESPACE: &str = "ferrolb-system";

/// Both binaries' default metrics port.
const METRICS_PORT: i32 = 7472;

/// MetalLB's HTTPS metrics port (`--port`), which its monitors scrape.
const SECURE_METRICS_PORT: i32 = 9120;

const TIMEOUT: Duration = Duration::from_secs(20);
