//! Nodes, Services and EndpointSlices as the speaker keeps them: what the
//! view reads and the keys of the caches, no `ObjectMeta` (issue 18 §1).
//!
//! The watched kinds ([`watched`]) are what the watches and the file
//! source deserialise into: each carries a k8s-openapi `ObjectMeta` (about
//! 240 bytes inline, most of it fields the speaker never reads), which the
//! watch needs (the resource version) and which these records drop as each
//! object arrives. Names are `Arc<str>`, shared with the view's
//! [`ObjectKey`]s; namespaces, label sets and endpoints' node names are
//! shared between objects through an [`Interner`]
//! ([`Node::from_watched`]).
//! Pure data: no I/O here.

use std::net::IpAddr;
use std::sync::Arc;

use api::watched::Interner;

use super::view::{Endpoint, Labels, ObjectKey, TrafficPolicy};
use super::watched;

/// A Node: its name, labels, condition statuses and IP addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// Name.
    pub name: Arc<str>,
    /// Labels (node selectors read them).
    pub labels: Labels,
    /// Condition statuses by type, such as `NetworkUnavailable -> "True"`
    /// (of two of one type, the later).
    pub conditions: Labels,
    /// `status.addresses` of type InternalIP, then ExternalIP, in the API's
    /// order within a type, parsed (an address that does not parse is
    /// left out).
    pub addresses: Box<[IpAddr]>,
}

/// A Service: what the view reads, and the uid an Event about it names
/// (kube's `object_ref` names no resource version; only the watch reads
/// it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Service {
    /// Namespace and name, shared with the view's Service.
    pub key: ObjectKey,
    /// `metadata.uid`.
    pub uid: Option<Box<str>>,
    /// `metadata.labels`.
    pub labels: Labels,
    /// MetalLB's annotations.
    pub annotations: Labels,
    /// `spec.type` is `LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`.
    pub load_balancer_class: Option<Box<str>>,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: TrafficPolicy,
    /// `status.loadBalancer.ingress[].ip`, one entry per ingress entry
    /// (`None`: a host name only).
    pub ingress: Box<[Option<Box<str>>]>,
}

/// An EndpointSlice: its name, the Service it belongs to and its
/// endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointSlice {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// The `kubernetes.io/service-name` label.
    pub service: Option<Arc<str>>,
    /// The endpoints.
    pub endpoints: Box<[Endpoint]>,
}

impl Node {
    /// The record of a watched object, its strings and sets shared
    /// through `interner`.
    pub fn from_watched(n: watched::Node, interner: &mut Interner) -> Self {
        let mut addresses: Vec<(u8, IpAddr)> = n
            .addresses
            .iter()
            .filter_map(|(kind, address)| {
                let rank = match kind.as_str() {
                    "InternalIP" => 0,
                    "ExternalIP" => 1,
                    _ => return None,
                };
                address.parse().ok().map(|ip| (rank, canonical(ip)))
            })
            .collect();
        // Stable: the API's order within a type is kept.
        addresses.sort_by_key(|&(rank, _)| rank);
        let labels: Labels = n.metadata.labels.unwrap_or_default().into();
        let conditions: Labels = n.conditions.into_iter().collect();
        Self {
            name: interner.string(n.metadata.name.as_deref().unwrap_or_default()),
            labels: interner.labels(&labels),
            conditions: interner.labels(&conditions),
            addresses: addresses.into_iter().map(|(_, ip)| ip).collect(),
        }
    }
}

impl Service {
    /// The record of a watched object, its strings and sets shared
    /// through `interner`.
    pub fn from_watched(s: watched::Service, interner: &mut Interner) -> Self {
        let meta = s.metadata;
        Self {
            key: ObjectKey {
                namespace: interner.string(meta.namespace.as_deref().unwrap_or_default()),
                name: meta.name.as_deref().unwrap_or_default().into(),
            },
            uid: meta.uid.map(Into::into),
            labels: interner.labels(&s.labels),
            annotations: interner.labels(&s.annotations),
            load_balancer: s.load_balancer,
            load_balancer_class: s.load_balancer_class.map(Into::into),
            external_traffic_policy: s.external_traffic_policy,
            ingress: s.ingress.into_iter().map(|i| i.map(Into::into)).collect(),
        }
    }
}

impl EndpointSlice {
    /// The record of a watched object, its strings and sets shared
    /// through `interner`.
    pub fn from_watched(e: watched::EndpointSlice, interner: &mut Interner) -> Self {
        let meta = e.metadata;
        Self {
            namespace: interner.string(meta.namespace.as_deref().unwrap_or_default()),
            name: meta.name.as_deref().unwrap_or_default().into(),
            service: e.service.as_deref().map(Into::into),
            endpoints: e
                .endpoints
                .into_iter()
                .map(|ep| Endpoint {
                    node: ep.node.as_deref().map(|n| interner.string(n)),
                    ..ep
                })
                .collect(),
        }
    }
}

/// A record of a watched object, its strings not shared with others': the
/// file source's, `kubectl ferrolb`'s and the tests'.
macro_rules! from_watched {
    ($($kind:ident),*) => {$(
        impl From<watched::$kind> for $kind {
            fn from(o: watched::$kind) -> Self {
                Self::from_watched(o, &mut Interner::default())
            }
        }

        impl From<&watched::$kind> for $kind {
            fn from(o: &watched::$kind) -> Self {
                o.clone().into()
            }
        }
    )*};
}
from_watched!(Node, Service, EndpointSlice);

/// Go's `net.IP` prints an IPv4-mapped IPv6 address as IPv4, and MetalLB's
/// election hashes that text; keep the IPv4 form so ours hashes the same.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}
