//! The CRDs against a real kube-apiserver (testenv): they install, MetalLB
//! samples apply unchanged, CEL rejects bad objects with a clear message,
//! and BGPPeer converts between v1beta1 and v1beta2 without a webhook.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use testenv::TestEnv;

const MANAGER: &str = "ferrolb-api-test";

async fn install(env: &TestEnv) {
    env.install_crds(api::crds()).await.unwrap();
}

/// The API resource for a document's apiVersion and kind.
fn resource(doc: &Value) -> ApiResource {
    let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (
            String::new(),
            doc["apiVersion"].as_str().unwrap().to_owned(),
        ),
    };
    let kind = doc["kind"].as_str().unwrap();
    let plural = api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .map_or_else(
            || format!("{}s", kind.to_lowercase()),
            |c| c.spec.names.plural,
        );
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &version, kind), &plural)
}

/// Server-side applies one document into `ns` (its own namespace replaced).
async fn apply(
    client: &kube::Client,
    ns: &str,
    mut doc: Value,
) -> Result<DynamicObject, kube::Error> {
    doc["metadata"]["namespace"] = json!(ns);
    let ar = resource(&doc);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&doc),
    )
    .await
}

/// Applies `doc`, expecting the apiserver to refuse it; returns the message.
async fn rejection(client: &kube::Client, ns: &str, doc: Value) -> String {
    match apply(client, ns, doc.clone()).await {
        Ok(_) => panic!("the apiserver accepted {doc}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            status.message
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn samples() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/config");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "samples in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn crds_install_and_are_established() {
    let env = TestEnv::global();
    install(env).await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client().unwrap());
    for crd in api::crds() {
        let got = crds.get(&crd.name_any()).await.unwrap();
        let conditions = got.status.unwrap().conditions.unwrap();
        for wanted in ["Established", "NamesAccepted"] {
            assert!(
                conditions
                    .iter()
                    .any(|c| c.type_ == wanted && c.status == "True"),
                "{}: {conditions:?}",
                crd.name_any()
            );
        }
    }
}

#[tokio::test]
async fn every_sample_applies_unchanged() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    for (file, text) in samples() {
        let ns = env.fresh_namespace("sample").await.unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for doc in docs {
            let applied = apply(&client, &ns, doc.clone()).await.unwrap_or_else(|e| {
                panic!("{file}: {} {}: {e}", doc["kind"], doc["metadata"]["name"])
            });
            // What was sent comes back, field for field (defaults may add more).
            if let Some(spec) = doc.get("spec") {
                assert_contains(
                    &applied.data["spec"],
                    spec,
                    &format!("{file} {}", applied.name_any()),
                );
            }
        }
    }
}

/// Every field of `want` is in `got` with the same value.
fn assert_contains(got: &Value, want: &Value, what: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, v) in w {
                assert_contains(g.get(k).unwrap_or(&Value::Null), v, &format!("{what}.{k}"));
            }
        }
        _ => assert_eq!(got, want, "{what}"),
    }
}

#[tokio::test]
async fn defaults_match_metallb() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("defaults").await.unwrap();
    let pool = apply(
        &client,
        &ns,
        json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": "p"}, "spec": {"addresses": ["10.0.0.0/24"]},
        }),
    )
    .await
    .unwrap();
    assert_eq!(pool.data["spec"]["autoAssign"], json!(true));
    assert_eq!(pool.data["spec"]["avoidBuggyIPs"], json!(false));
    let adv = apply(
        &client,
        &ns,
        json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
            "metadata": {"name": "a"}, "spec": {},
        }),
    )
    .await
    .unwrap();
    assert_eq!(adv.data["spec"]["aggregationLength"], json!(32));
    assert_eq!(adv.data["spec"]["aggregationLengthV6"], json!(128));
    let peer = apply(&client, &ns, json!({
        "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
        "metadata": {"name": "b"}, "spec": {"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1"},
    })).await.unwrap();
    assert_eq!(peer.data["spec"]["peerPort"], json!(179));

    // Typed reads work on what the apiserver returns.
    let pools: Api<api::v1beta1::IPAddressPool> = Api::namespaced(client.clone(), &ns);
    assert_eq!(pools.get("p").await.unwrap().spec.auto_assign, Some(true));
}

fn peer(spec: Value) -> Value {
    json!({"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer", "metadata": {"name": "bad"}, "spec": spec})
}

/// Each bad object is refused, and the message names the field and the rule.
#[tokio::test]
async fn cel_rejects_invalid_objects() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("cel").await.unwrap();
    let cases: Vec<(Value, &[&str])> = vec![
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "bad"},
                   "spec": {"addresses": ["10.0.0.0/24", "10.0.0.0/33"]}}),
            &["spec.addresses[1]", "\"10.0.0.0/33\" is neither a CIDR"],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "bad"},
                   "spec": {"addresses": ["fc00::1-10.0.0.1"]}}),
            &[
                "spec.addresses[0]",
                "\"fc00::1-10.0.0.1\" is a reversed range",
            ],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "bad"},
                   "spec": {"addresses": ["10.0.0.0/24", "::ffff:10.1.0.0/120"]}}),
            &["spec.addresses[1]", "holds an IPv4-mapped IPv6 address"],
        ),
        (
            peer(json!({"myASN": 1, "peerASN": 2, "peerAddress": "::ffff:10.0.0.1"})),
            &["spec.peerAddress", "is an IPv4-mapped IPv6 address"],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "bad"},
                   "spec": {"addresses": ["10.0.0.0/30", "10.0.0.9 - 10.0.0.1"]}}),
            &[
                "spec.addresses[1]",
                "\"10.0.0.9 - 10.0.0.1\" is a reversed range",
            ],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "bad"},
                   "spec": {"addresses": []}}),
            &["spec.addresses", "at least one address range is required"],
        ),
        (
            peer(json!({"myASN": 0, "peerASN": 1, "peerAddress": "10.0.0.1"})),
            &["spec.myASN", "between 1 and 4294967295"],
        ),
        (
            peer(json!({"myASN": 4294967296u64, "peerASN": 1, "peerAddress": "10.0.0.1"})),
            &["spec.myASN", "less than or equal to 4294967295"],
        ),
        (
            peer(json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "holdTime": "2s"})),
            &[
                "spec.holdTime",
                "holdTime must be 0 or at least 3s once rounded down",
            ],
        ),
        (
            peer(json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "holdTime": "1s"})),
            &["spec.holdTime", "at least 3s once rounded down"],
        ),
        (
            peer(
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "holdTime": "30s", "keepaliveTime": "30001ms"}),
            ),
            &[
                "spec.keepaliveTime",
                "keepaliveTime must not be greater than holdTime",
            ],
        ),
        (
            peer(
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "keepaliveTime": "333333334ns"}),
            ),
            &[
                "spec.keepaliveTime",
                "implies a holdTime of 3 × keepaliveTime",
            ],
        ),
        (
            peer(
                json!({"myASN": 1, "peerASN": 2, "dynamicASN": "external", "peerAddress": "10.0.0.1"}),
            ),
            &[
                "spec.peerASN",
                "exactly one of peerASN and dynamicASN must be set",
            ],
        ),
        (
            peer(json!({"myASN": 1, "peerAddress": "10.0.0.1"})),
            &[
                "spec.peerASN",
                "exactly one of peerASN and dynamicASN must be set",
            ],
        ),
        (
            peer(json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "interface": "eth0"})),
            &[
                "spec.peerAddress",
                "exactly one of peerAddress and interface",
            ],
        ),
        (
            peer(json!({"myASN": 1, "peerASN": 2, "peerAddress": "not-an-ip"})),
            &["spec.peerAddress", "\"not-an-ip\" is not an IP address"],
        ),
        (
            peer(
                json!({"myASN": 1, "peerASN": 1, "peerAddress": "10.0.0.1", "ebgpMultiHop": true}),
            ),
            &["spec.ebgpMultiHop", "iBGP"],
        ),
        (
            peer(
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "connectTime": "1500ms"}),
            ),
            &["spec.connectTime", "whole number of seconds"],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "Community", "metadata": {"name": "bad"},
                   "spec": {"communities": [{"name": "x", "value": "65536:1"}]}}),
            &[
                "spec.communities[0].value",
                "\"65536:1\" is not a community",
            ],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement", "metadata": {"name": "bad"},
                   "spec": {"communities": ["65000:1", "big:1:2:3"]}}),
            &["spec.communities[1]", "\"big:1:2:3\" is not a community"],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement", "metadata": {"name": "bad"},
                   "spec": {"aggregationLength": 24, "serviceSelectors": [{"matchLabels": {"a": "b"}}]}}),
            &["spec.serviceSelectors", "mutually exclusive"],
        ),
        (
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement", "metadata": {"name": "bad"},
                   "spec": {"nodeSelectors": [{"matchExpressions": [{"key": "zone", "operator": "Equals", "values": ["a"]}]}]}}),
            &[
                "spec.nodeSelectors[0].matchExpressions[0].operator",
                "Unsupported value: \"Equals\"",
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (doc, wanted) in cases {
        let message = rejection(&client, &ns, doc).await;
        if !wanted.iter().all(|w| message.contains(w)) {
            failures.push(format!("wanted {wanted:?} in: {message}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The range-order rule compares IPv4 addresses as numbers, not strings,
/// and leaves IPv6 ranges to the controller (see `api::crd::RULES`).
#[tokio::test]
async fn cel_orders_ipv4_ranges_by_number() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("cel-order").await.unwrap();
    for (i, range) in [
        "10.0.0.9-10.0.0.10",
        "9.255.255.255-10.0.0.0",
        "10.0.0.1-10.0.0.1",
        "fc00::9-fc00::1",
    ]
    .into_iter()
    .enumerate()
    {
        let doc = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                         "metadata": {"name": format!("p{i}")}, "spec": {"addresses": [range]}});
        if let Err(e) = apply(&client, &ns, doc).await {
            panic!("{range}: {e}");
        }
    }
    let message = rejection(
        &client,
        &ns,
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "bad"},
               "spec": {"addresses": ["10.0.1.0-9.0.1.0"]}}),
    )
    .await;
    assert!(message.contains("is a reversed range"), "{message}");
}

#[tokio::test]
async fn graceful_restart_is_immutable() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("immutable").await.unwrap();
    let spec =
        json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "enableGracefulRestart": true});
    let mut doc = peer(spec);
    doc["metadata"]["name"] = json!("gr");
    apply(&client, &ns, doc.clone()).await.unwrap();
    doc["spec"]["enableGracefulRestart"] = json!(false);
    let message = rejection(&client, &ns, doc).await;
    assert!(
        message.contains("EnableGracefulRestart cannot be changed after creation"),
        "{message}"
    );
}

#[tokio::test]
async fn bgppeer_v1beta1_reads_back_as_v1beta2() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("convert").await.unwrap();
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/config/bgppeer-v1beta1.yaml"),
    )
    .unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    apply(&client, &ns, doc).await.unwrap();

    let v2: Api<api::v1beta2::BGPPeer> = Api::namespaced(client.clone(), &ns);
    let got = v2.get("legacy").await.unwrap();
    assert_eq!(got.spec.my_asn, 64500);
    assert_eq!(got.spec.peer_asn, Some(64501));
    assert_eq!(got.spec.hold_time.as_deref(), Some("120s"));
    assert_eq!(
        got.spec.node_selectors[0].match_expressions[0].values,
        ["r1", "r2"]
    );

    // The same object through v1beta1, and the local conversion agrees.
    let v1: Api<api::v1beta1::BGPPeer> = Api::namespaced(client.clone(), &ns);
    let old = v1.get("legacy").await.unwrap();
    assert_eq!(old.spec.peer_address, "10.0.0.1");
    let mut converted = api::v1beta2::BGPPeer::from(old);
    converted.metadata = got.metadata.clone();
    // The apiserver applies v1beta2's schema defaults on read; the local
    // conversion, like MetalLB's webhook, does not.
    converted.spec.disable_mp = Some(false);
    converted.spec.dual_stack_address_family = Some(false);
    assert_eq!(converted.spec, got.spec);

    // A v1beta2-only field survives in storage, and v1beta1 readers do not
    // see it (the documented loss, as with MetalLB's webhook).
    let mut new = api::v1beta2::BGPPeer::new(
        "modern",
        api::v1beta2::BGPPeerSpec {
            my_asn: 64500,
            dynamic_asn: Some(api::v1beta2::DynamicASNMode::Internal),
            peer_address: "10.0.0.2".into(),
            vrf: "red".into(),
            ..Default::default()
        },
    );
    new.metadata.namespace = Some(ns.clone());
    v2.create(&PostParams::default(), &new).await.unwrap();
    let as_v1: DynamicObject = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &resource(&json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPPeer"})),
    )
    .get("modern")
    .await
    .unwrap();
    assert_eq!(as_v1.types.unwrap().api_version, "metallb.io/v1beta1");
    assert!(as_v1.data["spec"].get("vrf").is_none(), "{}", as_v1.data);
    assert_eq!(v2.get("modern").await.unwrap().spec.vrf, "red");
}

/// What the api crate's parser says about one document: the problems'
/// fields, empty when it takes it.
fn parser_problem_fields(doc: &Value) -> Vec<String> {
    let text = serde_json::to_string(doc).unwrap();
    let cfg = api::validate::Config::from_yaml(&text).unwrap();
    api::validate::config(&cfg)
        .1
        .into_iter()
        .map(|p| p.field)
        .collect()
}

/// The edge cases MetalLB accepts: the apiserver (CRD schema and CEL) and
/// the parser the controller and the speaker share take them both; and
/// their neighbours just over the line are refused by both, on the same
/// field.
#[tokio::test]
async fn crd_and_parser_agree_on_metallb_edge_cases() {
    let env = TestEnv::global();
    install(env).await;
    let client = env.client().unwrap();
    let ns = env.fresh_namespace("edges").await.unwrap();
    let with = |extra: Value| {
        let mut spec = json!({"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1"});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    };
    let pool = |addresses: &[&str]| {
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
               "metadata": {"name": "p"}, "spec": {"addresses": addresses}})
    };
    let accepted: Vec<Value> = vec![
        pool(&["10.0.0.1-fc00::1"]),
        pool(&["10.0.1.0/24", "::1 - 10.0.0.1", "255.255.255.255-1::"]),
        peer(with(json!({"holdTime": "30s", "keepaliveTime": "30s"}))),
        peer(with(json!({"holdTime": "500ms"}))),
        peer(with(json!({"holdTime": "999ms", "keepaliveTime": "999ms"}))),
        peer(with(json!({"holdTime": "3.7s"}))),
        peer(with(json!({"keepaliveTime": "333333333ns"}))),
        peer(with(json!({"keepaliveTime": "1s"}))),
        peer(with(
            json!({"myASN": 4294967295u32, "peerASN": 4294967295u32, "localASN": 4294967295u32}),
        )),
    ];
    let mut failures = Vec::new();
    for (i, mut doc) in accepted.into_iter().enumerate() {
        doc["metadata"]["name"] = json!(format!("ok{i}"));
        if let Err(e) = apply(&client, &ns, doc.clone()).await {
            failures.push(format!("apiserver refused {doc}: {e}"));
        }
        let fields = parser_problem_fields(&doc);
        if !fields.is_empty() {
            failures.push(format!("parser refused {doc}: {fields:?}"));
        }
    }
    let refused: Vec<(Value, &str)> = vec![
        (peer(with(json!({"holdTime": "1s"}))), "spec.holdTime"),
        (peer(with(json!({"holdTime": "2.9s"}))), "spec.holdTime"),
        (
            peer(with(json!({"holdTime": "30s", "keepaliveTime": "31s"}))),
            "spec.keepaliveTime",
        ),
        (
            peer(with(json!({"keepaliveTime": "333333334ns"}))),
            "spec.keepaliveTime",
        ),
        (peer(with(json!({"myASN": 0}))), "spec.myASN"),
        (pool(&["fc00::1-10.0.0.1"]), "spec.addresses[0]"),
        (pool(&["10.0.2.0/24", "10.0.0.1-::1"]), "spec.addresses[1]"),
        (pool(&["1::-0.0.0.0"]), "spec.addresses[0]"),
        (pool(&["::ffff:10.0.0.0/120"]), "spec.addresses[0]"),
        (pool(&["::FFFF:a00:0/120"]), "spec.addresses[0]"),
        (pool(&["10.0.0.1-::ffff:10.0.0.9"]), "spec.addresses[0]"),
        (
            peer(with(json!({"peerAddress": "::ffff:10.0.0.1"}))),
            "spec.peerAddress",
        ),
        (
            peer(with(json!({"sourceAddress": "::ffff:10.0.0.2"}))),
            "spec.sourceAddress",
        ),
        (
            peer(with(json!({"routerID": "::ffff:10.0.0.3"}))),
            "spec.routerID",
        ),
        (peer(with(json!({"localASN": 0}))), "spec.localASN"),
    ];
    for (doc, field) in refused {
        let message = rejection(&client, &ns, doc.clone()).await;
        if !message.contains(field) {
            failures.push(format!("apiserver: wanted {field} in: {message}"));
        }
        let fields = parser_problem_fields(&doc);
        if !fields.iter().any(|f| f == field) {
            failures.push(format!("parser: wanted {field} for {doc}: {fields:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
