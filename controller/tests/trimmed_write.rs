//! The controller caches Services trimmed ([`controller::convert::trim`]:
//! no managedFields, only the spec fields it reads) and writes them back
//! with one PUT to `/status`. This checks, on testenv's real apiserver,
//! what that relies on: the pool annotation and the ingress are stored,
//! while the spec, the other metadata and the managed fields stay as they
//! were.

use std::collections::BTreeMap;

use controller::convert::{self, ANNOTATION_ALLOCATED_FROM_POOL};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::TestEnv;

#[tokio::test]
async fn a_trimmed_service_written_to_status_keeps_what_it_left_out() {
    let env = TestEnv::global();
    let ns = env.fresh_namespace("trimmed").await.unwrap();
    let client = env.client().unwrap();
    let api: Api<Service> = Api::namespaced(client, &ns);
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": "web",
            "labels": {"app": "web"},
            "annotations": {"metallb.io/address-pool": "main", "note": "kept"},
        },
        "spec": {
            "type": "LoadBalancer",
            "sessionAffinity": "ClientIP",
            "externalTrafficPolicy": "Local",
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
        },
    }))
    .unwrap();
    let before = api.create(&PostParams::default(), &svc).await.unwrap();
    assert!(before.metadata.managed_fields.is_some());

    let mut trimmed = before.clone();
    convert::trim(&mut trimmed);
    assert!(trimmed.spec.as_ref().unwrap().cluster_ip.is_none());
    let ip = "10.50.0.7".parse().unwrap();
    let write = convert::written(&trimmed, Some("main"), &[ip]);
    api.replace_status("web", &PostParams::default(), &write)
        .await
        .unwrap();

    let after = api.get("web").await.unwrap();
    assert_eq!(convert::ingress_ips(&after), ["10.50.0.7"]);
    let mut want: BTreeMap<String, String> = before.annotations().clone();
    want.insert(ANNOTATION_ALLOCATED_FROM_POOL.into(), "main".into());
    assert_eq!(after.metadata.annotations, Some(want));
    assert_eq!(after.metadata.labels, before.metadata.labels);
    // The spec is the stored one, node ports and cluster IP included.
    assert_eq!(after.spec, before.spec);
    let spec = after.spec.as_ref().unwrap();
    assert!(spec.cluster_ip.is_some());
    assert!(spec.ports.as_ref().unwrap()[0].node_port.is_some());
    // The creator's managed fields survive a write that carried none.
    let managers = |s: &Service| -> Vec<String> {
        s.metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect()
    };
    for m in managers(&before) {
        assert!(
            managers(&after).contains(&m),
            "{m} lost: {:?}",
            managers(&after)
        );
    }
}
