//! The Services as the controller keeps them: in the watch cache and in
//! the startup list, between the moment they are read and the moment one
//! is decided (issue 18: the controller's memory per Service).
//!
//! A [`Service`] holds exactly what [`crate::convert::trim`] keeps of a
//! Service (what the controller reads, and what its `PUT` to `/status`
//! carries back), but packed: labels, annotations and the selector as
//! boxed slices of pairs instead of `BTreeMap`s (whose first entry
//! allocates a node of eleven, 544 bytes: 16.3 MB of the 23.7 MB the
//! trimmed Services' fields took at 10,000), and the few spec fields read
//! in a small struct instead of a `ServiceSpec` of thirty options.
//! [`Service::to_k8s`] gives the trimmed object back, equal to
//! [`crate::convert::trim`] of the object read, so that every decision and
//! every write is the one the whole object would give; a reconcile builds
//! it for the one Service it decides.
//!
//! It is a `kube::Resource` (through k8s-openapi's `Resource` and
//! `Metadata` traits, as the k8s-openapi Service), so kube-runtime's
//! watcher, reflector store and controller take it. Its `metadata` has no
//! labels, annotations or managed fields: those live in their own fields.
//! Pure data: no I/O here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde::Deserialize;

use crate::convert;

/// Key-value pairs in key order (labels, annotations, a selector).
type Pairs = Box<[(Box<str>, Box<str>)]>;

/// A port: its number and protocol.
type Port = (i32, Option<Box<str>>);

/// A Service as the controller keeps it (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "corev1::Service")]
pub struct Service {
    /// The metadata but its labels, annotations and managed fields.
    pub metadata: ObjectMeta,
    labels: Option<Pairs>,
    annotations: Option<Pairs>,
    spec: Option<Spec>,
    status: Option<corev1::ServiceStatus>,
}

/// The `spec` fields [`crate::convert::trim`] keeps.
#[derive(Clone, Debug, Default, PartialEq)]
struct Spec {
    type_: Option<Box<str>>,
    load_balancer_class: Option<Box<str>>,
    load_balancer_ip: Option<Box<str>>,
    ip_families: Option<Box<[Box<str>]>>,
    ip_family_policy: Option<Box<str>>,
    /// Port and protocol of each port.
    ports: Option<Box<[Port]>>,
    external_traffic_policy: Option<Box<str>>,
    selector: Option<Pairs>,
}

impl Resource for Service {
    const API_VERSION: &'static str = <corev1::Service as Resource>::API_VERSION;
    const GROUP: &'static str = <corev1::Service as Resource>::GROUP;
    const KIND: &'static str = <corev1::Service as Resource>::KIND;
    const VERSION: &'static str = <corev1::Service as Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <corev1::Service as Resource>::URL_PATH_SEGMENT;
    type Scope = <corev1::Service as Resource>::Scope;
}

impl Metadata for Service {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn pairs(map: BTreeMap<String, String>) -> Pairs {
    map.into_iter().map(|(k, v)| (k.into(), v.into())).collect()
}

fn map(pairs: &Pairs) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn boxed(s: Option<String>) -> Option<Box<str>> {
    s.map(String::into_boxed_str)
}

fn owned(s: &Option<Box<str>>) -> Option<String> {
    s.as_deref().map(str::to_owned)
}

impl From<corev1::Service> for Service {
    fn from(mut svc: corev1::Service) -> Self {
        convert::trim(&mut svc);
        let mut metadata = svc.metadata;
        let labels = metadata.labels.take().map(pairs);
        let annotations = metadata.annotations.take().map(pairs);
        let spec = svc.spec.map(|s| Spec {
            type_: boxed(s.type_),
            load_balancer_class: boxed(s.load_balancer_class),
            load_balancer_ip: boxed(s.load_balancer_ip),
            ip_families: s
                .ip_families
                .map(|f| f.into_iter().map(String::into_boxed_str).collect()),
            ip_family_policy: boxed(s.ip_family_policy),
            ports: s
                .ports
                .map(|p| p.into_iter().map(|p| (p.port, boxed(p.protocol))).collect()),
            external_traffic_policy: boxed(s.external_traffic_policy),
            selector: s.selector.map(pairs),
        });
        Self {
            metadata,
            labels,
            annotations,
            spec,
            status: svc.status,
        }
    }
}

impl Service {
    /// The Service as [`crate::convert::trim`] leaves the object it was
    /// read from: what [`crate::state::State::sync`] reads and
    /// [`crate::convert::written`] writes back.
    pub fn to_k8s(&self) -> corev1::Service {
        let mut metadata = self.metadata.clone();
        metadata.labels = self.labels.as_ref().map(map);
        metadata.annotations = self.annotations.as_ref().map(map);
        corev1::Service {
            metadata,
            spec: self.spec.as_ref().map(|s| corev1::ServiceSpec {
                type_: owned(&s.type_),
                load_balancer_class: owned(&s.load_balancer_class),
                load_balancer_ip: owned(&s.load_balancer_ip),
                ip_families: s
                    .ip_families
                    .as_ref()
                    .map(|f| f.iter().map(ToString::to_string).collect()),
                ip_family_policy: owned(&s.ip_family_policy),
                ports: s.ports.as_ref().map(|p| {
                    p.iter()
                        .map(|(port, protocol)| corev1::ServicePort {
                            port: *port,
                            protocol: owned(protocol),
                            ..corev1::ServicePort::default()
                        })
                        .collect()
                }),
                external_traffic_policy: owned(&s.external_traffic_policy),
                selector: s.selector.as_ref().map(map),
                ..corev1::ServiceSpec::default()
            }),
            status: self.status.clone(),
        }
    }

    /// Whether `status.loadBalancer.ingress` has an address (the startup
    /// replay gives those Services their addresses back first).
    pub fn has_ingress(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .is_some_and(|i| i.iter().any(|i| i.ip.is_some()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> corev1::Service {
        serde_saphyr::from_str(convert::tests::FULL_SERVICE).unwrap()
    }

    /// What is kept gives back exactly the trimmed object, so decisions and
    /// writes are those of the object read; reading JSON gives the same.
    #[test]
    fn keeps_what_trim_keeps() {
        let full = full();
        let mut trimmed = full.clone();
        convert::trim(&mut trimmed);
        let kept = Service::from(full.clone());
        assert_eq!(kept.to_k8s(), trimmed);
        assert!(kept.metadata.labels.is_none() && kept.metadata.annotations.is_none());
        let json = serde_json::to_string(&full).unwrap();
        let read: Service = serde_json::from_str(&json).unwrap();
        assert_eq!(read, kept);
        assert!(kept.has_ingress());
        // Absent maps and fields stay absent; empty ones stay empty.
        let bare: corev1::Service = serde_json::from_str(
            r#"{"metadata": {"name": "b", "labels": {}}, "spec": {"selector": {}}}"#,
        )
        .unwrap();
        let mut trimmed = bare.clone();
        convert::trim(&mut trimmed);
        let kept = Service::from(bare);
        assert_eq!(kept.to_k8s(), trimmed);
        assert!(!kept.has_ingress());
        assert_eq!(Service::default().to_k8s(), corev1::Service::default());
    }
}
