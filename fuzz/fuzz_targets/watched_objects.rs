//! Reads any bytes as each watched kind the speaker deserialises straight
//! from the apiserver's JSON (`api::watched`: Node, Service, EndpointSlice),
//! and checks what it read, not only that nothing panics:
//!
//! - when k8s-openapi's whole type reads the same bytes, the own type reads
//!   them too, and exactly what converting the whole object gives (the
//!   `From` conversions `kubectl ferrolb` uses), if no object in them has
//!   a key twice (see [`unique_keys`]);
//! - the same through a `serde_json::Value` (the file source's path: YAML
//!   to a value, then the kinds from it);
//! - what the own type read, written back as a whole object and read
//!   again, comes back equal: reading keeps exactly the fields it holds.
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::fmt::{self, Debug};

use api::watched::{self, SERVICE_NAME_LABEL, TrafficPolicy};
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::discovery::v1 as discoveryv1;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let value: Option<Value> = serde_json::from_slice(data).ok();
    let unique = unique_keys(data);
    check::<corev1::Node, watched::Node>(data, unique, value.as_ref(), whole_node);
    check::<corev1::Service, watched::Service>(data, unique, value.as_ref(), whole_service);
    check::<discoveryv1::EndpointSlice, watched::EndpointSlice>(
        data,
        unique,
        value.as_ref(),
        whole_slice,
    );
});

/// The properties above for one kind: `W` is k8s-openapi's type, `K` the
/// own one, `whole` writes what `K` holds as a `W`; `unique`: no object in
/// `data` has a key twice.
fn check<W, K>(data: &[u8], unique: bool, value: Option<&Value>, whole: fn(&K) -> W)
where
    W: DeserializeOwned + Serialize + Debug,
    K: DeserializeOwned + PartialEq + Debug + for<'a> From<&'a W>,
{
    let own = serde_json::from_slice::<K>(data);
    if let (true, Ok(w)) = (unique, serde_json::from_slice::<W>(data)) {
        let own = own
            .as_ref()
            .unwrap_or_else(|e| panic!("k8s-openapi reads it ({w:?}), the own type does not: {e}"));
        assert_eq!(*own, K::from(&w), "read directly vs converted from {w:?}");
    }
    if let Some(v) = value {
        let own_v = serde_json::from_value::<K>(v.clone());
        if let Ok(w) = serde_json::from_value::<W>(v.clone()) {
            let own_v = own_v.as_ref().unwrap_or_else(|e| {
                panic!("k8s-openapi reads the value ({w:?}), the own type does not: {e}")
            });
            assert_eq!(*own_v, K::from(&w), "value read directly vs converted");
        }
        // Without duplicate keys (a value has none) both paths agree.
        let text = serde_json::to_vec(v).unwrap();
        let own_text = serde_json::from_slice::<K>(&text);
        assert_eq!(own_v.ok(), own_text.ok(), "from a value vs from its text");
    }
    if let Ok(own) = own {
        let w = whole(&own);
        assert_eq!(K::from(&w), own, "written back as {w:?}");
        let text = serde_json::to_vec(&w).unwrap();
        let again: K = serde_json::from_slice(&text)
            .unwrap_or_else(|e| panic!("cannot read back {}: {e}", String::from_utf8_lossy(&text)));
        assert_eq!(
            again,
            own,
            "read back from {}",
            String::from_utf8_lossy(&text)
        );
    }
}

/// Whether `data` is JSON in which no object has a key twice. JSON leaves
/// the meaning of repeated keys open (RFC 8259 §4): k8s-openapi keeps the
/// last value of a field, serde's derived structs (the own types) refuse a
/// field they read twice. The apiserver never repeats one; a
/// `serde_json::Value` keeps the last, so the check through a value covers
/// such input too.
fn unique_keys(data: &[u8]) -> bool {
    struct Unique;
    impl<'de> DeserializeSeed<'de> for Unique {
        type Value = ();
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Unique {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Self)?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key) {
                    return Err(de::Error::custom("a key twice"));
                }
                map.next_value_seed(Self)?;
            }
            Ok(())
        }
    }
    let mut d = serde_json::Deserializer::from_slice(data);
    Unique.deserialize(&mut d).and_then(|()| d.end()).is_ok()
}

fn whole_node(n: &watched::Node) -> corev1::Node {
    corev1::Node {
        metadata: n.metadata.clone(),
        status: Some(corev1::NodeStatus {
            conditions: Some(
                n.conditions
                    .iter()
                    .map(|(type_, status)| corev1::NodeCondition {
                        type_: type_.clone(),
                        status: status.clone(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            addresses: Some(
                n.addresses
                    .iter()
                    .map(|(type_, address)| corev1::NodeAddress {
                        type_: type_.clone(),
                        address: address.clone(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn whole_service(s: &watched::Service) -> corev1::Service {
    let mut metadata = s.metadata.clone();
    metadata.labels = Some(s.labels.to_map());
    metadata.annotations = Some(s.annotations.to_map());
    corev1::Service {
        metadata,
        spec: Some(corev1::ServiceSpec {
            type_: s.load_balancer.then(|| "LoadBalancer".to_owned()),
            load_balancer_class: s.load_balancer_class.clone(),
            external_traffic_policy: Some(
                match s.external_traffic_policy {
                    TrafficPolicy::Cluster => "Cluster",
                    TrafficPolicy::Local => "Local",
                }
                .to_owned(),
            ),
            ..Default::default()
        }),
        status: Some(corev1::ServiceStatus {
            load_balancer: Some(corev1::LoadBalancerStatus {
                ingress: Some(
                    s.ingress
                        .iter()
                        .map(|ip| corev1::LoadBalancerIngress {
                            ip: ip.clone(),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
            ..Default::default()
        }),
    }
}

fn whole_slice(e: &watched::EndpointSlice) -> discoveryv1::EndpointSlice {
    let mut metadata = e.metadata.clone();
    if let Some(service) = &e.service {
        metadata.labels = Some(BTreeMap::from([(
            SERVICE_NAME_LABEL.to_owned(),
            service.clone(),
        )]));
    }
    discoveryv1::EndpointSlice {
        metadata,
        address_type: "IPv4".to_owned(),
        endpoints: Some(
            e.endpoints
                .iter()
                .map(|ep| discoveryv1::Endpoint {
                    addresses: if ep.has_address {
                        vec!["192.0.2.1".to_owned()]
                    } else {
                        Vec::new()
                    },
                    node_name: ep.node.as_deref().map(str::to_owned),
                    conditions: Some(discoveryv1::EndpointConditions {
                        ready: ep.ready,
                        serving: ep.serving,
                        terminating: ep.terminating,
                    }),
                    ..Default::default()
                })
                .collect(),
        ),
        ports: None,
    }
}
