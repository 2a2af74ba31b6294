//! The shared environment against the real apiserver: CRDs, watches,
//! server-side apply, namespaces.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use testenv::TestEnv;

/// A sample namespaced custom resource, standing in for the metallb.io ones.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "testenv.ferrolb.io",
    version = "v1",
    kind = "Sample",
    namespaced
)]
struct SampleSpec {
    value: String,
}

/// The next event from a watcher, failing the test if none comes in time.
async fn next_event<S>(events: &mut S) -> watcher::Event<Sample>
where
    S: Stream<Item = Result<watcher::Event<Sample>, watcher::Error>> + Unpin,
{
    tokio::time::timeout(TIMEOUT, events.try_next())
        .await
        .expect("a watch event in time")
        .unwrap()
        .expect("the watch stream ended")
}

const TIMEOUT: Duration = Duration::from_secs(30);

async fn install_sample_crd(env: &TestEnv) {
    env.install_crds([Sample::crd()]).await.unwrap();
}

#[tokio::test]
async fn crds_reach_established() {
    let env = TestEnv::global();
    install_sample_crd(env).await;
    // Installing again is a no-op that still returns only once Established.
    install_sample_crd(env).await;

    let crds: Api<CustomResourceDefinition> = Api::all(env.client().unwrap());
    let crd = crds.get("samples.testenv.ferrolb.io").await.unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True"),
        "{conditions:?}"
    );

    // The resource is served at once.
    let ns = env.fresh_namespace("crd").await.unwrap();
    let samples: Api<Sample> = Api::namespaced(env.client().unwrap(), &ns);
    let sample = Sample::new("one", SampleSpec { value: "a".into() });
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();
    assert_eq!(
        samples.list(&Default::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn crds_install_from_yaml() {
    let env = TestEnv::global();
    let yaml = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.testenv.ferrolb.io
spec:
  group: testenv.ferrolb.io
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.testenv.ferrolb.io
spec:
  group: testenv.ferrolb.io
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;
    env.install_crds_yaml(yaml).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.client().unwrap());
    for name in ["widgets.testenv.ferrolb.io", "gadgets.testenv.ferrolb.io"] {
        let crd = crds.get(name).await.unwrap();
        let conditions = crd.status.unwrap().conditions.unwrap();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        );
    }
}

#[tokio::test]
async fn watcher_sees_create_update_delete() {
    let env = TestEnv::global();
    install_sample_crd(env).await;
    let ns = env.fresh_namespace("watch").await.unwrap();
    let samples: Api<Sample> = Api::namespaced(env.client().unwrap(), &ns);

    let mut events = watcher(samples.clone(), watcher::Config::default()).boxed();
    // The initial list of an empty namespace: Init, then InitDone.
    assert!(matches!(
        next_event(&mut events).await,
        watcher::Event::Init
    ));
    assert!(matches!(
        next_event(&mut events).await,
        watcher::Event::InitDone
    ));

    let sample = Sample::new("watched", SampleSpec { value: "1".into() });
    samples
        .create(&PostParams::default(), &sample)
        .await
        .unwrap();
    match next_event(&mut events).await {
        watcher::Event::Apply(s) => {
            assert_eq!((s.name_any(), s.spec.value), ("watched".into(), "1".into()))
        }
        other => panic!("expected Apply after create, got {other:?}"),
    }

    let patch = json!({"spec": {"value": "2"}});
    samples
        .patch("watched", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    match next_event(&mut events).await {
        watcher::Event::Apply(s) => assert_eq!(s.spec.value, "2"),
        other => panic!("expected Apply after update, got {other:?}"),
    }

    samples
        .delete("watched", &DeleteParams::default())
        .await
        .unwrap();
    match next_event(&mut events).await {
        watcher::Event::Delete(s) => assert_eq!(s.name_any(), "watched"),
        other => panic!("expected Delete, got {other:?}"),
    }
}

#[tokio::test]
async fn server_side_apply_of_service_status() {
    let env = TestEnv::global();
    let ns = env.fresh_namespace("ssa").await.unwrap();
    let services: Api<Service> = Api::namespaced(env.client().unwrap(), &ns);
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "lb"},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"port": 80, "protocol": "TCP"}],
        },
    }))
    .unwrap();
    let created = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    // The apiserver itself allocates cluster IPs; no controller-manager needed.
    assert!(created.spec.unwrap().cluster_ip.is_some());

    let status = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10", "ipMode": "VIP"}]}},
    });
    let params = PatchParams::apply("ferrolb-controller").force();
    services
        .patch_status("lb", &params, &Patch::Apply(&status))
        .await
        .unwrap();

    let got = services.get_status("lb").await.unwrap();
    let ingress = got.status.unwrap().load_balancer.unwrap().ingress.unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(ingress[0].ip.as_deref(), Some("192.0.2.10"));
    let managed = got.metadata.managed_fields.unwrap();
    assert!(
        managed
            .iter()
            .any(|m| m.manager.as_deref() == Some("ferrolb-controller")
                && m.operation.as_deref() == Some("Apply")
                && m.subresource.as_deref() == Some("status")),
        "{managed:?}"
    );

    // Applying an empty status as the same manager gives the field up.
    let release = json!({"apiVersion": "v1", "kind": "Service", "status": {}});
    services
        .patch_status("lb", &params, &Patch::Apply(&release))
        .await
        .unwrap();
    let got = services.get_status("lb").await.unwrap();
    let ingress = got
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress);
    assert!(ingress.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn fresh_namespaces_are_unique() {
    let env = TestEnv::global();
    let a = env.fresh_namespace("same").await.unwrap();
    let b = env.fresh_namespace("same").await.unwrap();
    assert_ne!(a, b);
    assert!(a.starts_with("same-") && b.starts_with("same-"));

    // Objects in one are not seen in the other.
    let client = env.client().unwrap();
    let in_a: Api<ConfigMap> = Api::namespaced(client.clone(), &a);
    let in_b: Api<ConfigMap> = Api::namespaced(client, &b);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    in_a.create(&PostParams::default(), &cm).await.unwrap();
    assert!(in_b.get_opt("x").await.unwrap().is_none());
}

#[test]
fn kubeconfig_is_written() {
    let env = TestEnv::global();
    let text = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    assert!(text.contains(env.server_url()));
    assert!(env.server_url().starts_with("https://127.0.0.1:"));
}
