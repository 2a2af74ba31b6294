//! Nodes, Services and EndpointSlices as the speaker keeps them: what the
//! view reads and the keys of the caches, no `ObjectMeta` (issue 18 §1).
//!
//! The watched kinds ([`watched`]) are what the watches and the file
//! source deserialise into: each carries a k8s-openapi `ObjectMeta` (about
//! 240 bytes inline, most of it fields the speaker never reads), which the
//! watch needs (the resource version) and which these records drop as each
//! object arrives. Names are `Arc<str>`, shared with the view's
//! [`ObjectKey`]s; namespaces, label sets, endpoints' node names and
//! Services' names are shared between objects through an [`Interner`]
//! ([`Node::from_watched`]): the Kubernetes source gives the Services and
//! the EndpointSlices one, so a slice's Service name is its Service's
//! key's string. The view's Service holds the record itself.
//! Pure data: no I/O here.

use std::fmt;
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
    pub uid: Option<Uid>,
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
    /// The IPs of `status.loadBalancer.ingress`, parsed once, in order (the
    /// first one seeds the layer 2 election): an entry with a host name
    /// only is left out, an IPv4-mapped address is kept as IPv4.
    pub ingress: Box<[IpAddr]>,
    /// The first ingress entry whose IP does not parse, if one does not:
    /// its index and text. The Service is then not announced (MetalLB's
    /// `invalidIP`); boxed, as few Services have one.
    pub bad_ingress: Option<Box<(usize, Box<str>)>>,
}

/// A `metadata.uid`. The apiserver writes a UUID in its canonical text
/// (lowercase, hyphenated): such a uid is kept as its 16 bytes (the text,
/// 36, took a 48-byte chunk per Service), any other text as it is, so that
/// [`Uid`]'s `Display` gives back exactly the text read.
#[derive(Clone, PartialEq, Eq)]
pub enum Uid {
    /// A UUID's 16 bytes, from its canonical text.
    Uuid([u8; 16]),
    /// Any other text.
    Text(Box<str>),
}

impl Uid {
    /// The uid of this text.
    pub fn new(text: &str) -> Self {
        uuid_bytes(text).map_or_else(|| Self::Text(text.into()), Self::Uuid)
    }
}

/// The bytes of a UUID in canonical text (`8-4-4-4-12` lowercase hex
/// digits), `None` for any other text.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut bytes = [0; 16];
    let mut at = 0;
    let mut groups = text.split('-');
    for len in GROUPS {
        let group = groups.next()?;
        if group.len() != len
            || !group
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        for pair in group.as_bytes().chunks(2) {
            let pair = std::str::from_utf8(pair).ok()?;
            bytes[at] = u8::from_str_radix(pair, 16).ok()?;
            at += 1;
        }
    }
    groups.next().is_none().then_some(bytes)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uuid(bytes) => {
                for (i, b) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            Self::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
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
                name: interner.string(meta.name.as_deref().unwrap_or_default()),
            },
            uid: meta.uid.as_deref().map(Uid::new),
            labels: interner.labels(&s.labels),
            annotations: interner.labels(&s.annotations),
            load_balancer: s.load_balancer,
            load_balancer_class: s.load_balancer_class.map(Into::into),
            external_traffic_policy: s.external_traffic_policy,
            ingress: Box::default(),
            bad_ingress: None,
        }
        .with_ingress(&s.ingress)
    }

    /// The record with these `status.loadBalancer.ingress[].ip` entries
    /// (`None`: a host name only), parsed.
    pub fn with_ingress<T: AsRef<str>>(mut self, entries: &[Option<T>]) -> Self {
        let mut ips = Vec::with_capacity(entries.len());
        self.bad_ingress = None;
        for (i, entry) in entries.iter().enumerate() {
            let Some(text) = entry.as_ref().map(AsRef::as_ref) else {
                continue;
            };
            match text.parse() {
                Ok(ip) => ips.push(canonical(ip)),
                Err(_) => {
                    self.bad_ingress = Some(Box::new((i, text.into())));
                    break;
                }
            }
        }
        self.ingress = ips.into();
        self
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
            service: e.service.as_deref().map(|s| interner.string(s)),
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
