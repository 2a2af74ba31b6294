//! Nodes, Services and EndpointSlices as the speaker keeps them: what the
//! view reads and the keys of the caches, no `ObjectMeta` (issue 18 §1).
//!
//! The watched kinds ([`watched`]) are what the watches and the file
//! source deserialise into: each carries a k8s-openapi `ObjectMeta` (about
//! 240 bytes inline, most of it fields the speaker never reads), which the
//! watch needs (the resource version) and which these records drop as each
//! object arrives. Names are `Arc<str>`, shared with the view's
//! [`ObjectKey`]s; namespaces, label sets, endpoints and Services' names
//! are shared between objects through an [`Interner`]
//! ([`Node::from_watched`]): the Kubernetes source gives the Services and
//! the EndpointSlices one, so a slice's Service name is its Service's
//! key's string. An EndpointSlice keeps of its name what is not its
//! Service's ([`EndpointSlice::name`]), its namespace behind a pointer
//! shared by the slices of the namespace, and its endpoints at the end of
//! its one allocation: it is a thin pointer of its own, which the caches,
//! the snapshots and the view hold as it is ([`Holds`]: the other records
//! are held in an `Arc`). The view's Service holds the record itself.
//!
//! A Service record is one 160-byte chunk (the record in its `Arc`), plus
//! its name's string (shared with its slices) and its labels' set; one or
//! no ingress IP is held inline ([`Ingress`]), its class and
//! annotations are shared between Services, and a Service that is not a
//! `LoadBalancer` keeps its key and uid alone (the view reads nothing else
//! of it). Pure data: no I/O here.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::net::IpAddr;
use std::num::NonZeroU8;
use std::ops::Deref;
use std::sync::Arc;

use api::watched::{Interner, Place};
use k8s_openapi::api::core::v1::Secret;
use triomphe::ThinArc;

use super::view::{Labels, ObjectKey, TrafficPolicy};
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
    /// `metadata.labels` (advertisements' service selectors read them).
    pub labels: Labels,
    /// MetalLB's annotations.
    pub annotations: Labels,
    /// `spec.type` is `LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass` (shared between the Services of a class).
    pub load_balancer_class: Option<Arc<str>>,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: TrafficPolicy,
    /// The IPs of `status.loadBalancer.ingress`, parsed once, in order (the
    /// first one seeds the layer 2 election): an entry with a host name
    /// only is left out, an IPv4-mapped address is kept as IPv4; and the
    /// first entry whose IP does not parse, if one does not
    /// ([`Service::bad_ingress`]).
    pub ingress: Ingress,
}

/// The IPs of a Service's `status.loadBalancer.ingress` (a slice, through
/// `Deref`), and the first entry whose IP did not parse, if one did not.
/// One IP (most Services) is held inline: 24 bytes in the record, where a
/// boxed slice took 16 and a 32-byte chunk. Two are equal when their IPs
/// and bad entries are, however held.
#[derive(Clone, Default)]
pub struct Ingress(Ips);

// Issue 18: a record, its `Arc`'s counts and glibc's chunk header fit a
// 160-byte chunk (on 64-bit targets), one ingress IP inline.
const _: () = assert!(size_of::<Ingress>() <= 24);
const _: () = assert!(size_of::<Service>() + 16 + 8 <= 160);

/// How [`Ingress`] holds its IPs.
#[derive(Clone, Default)]
enum Ips {
    /// No IP.
    #[default]
    None,
    /// One IP, inline.
    One(IpAddr),
    /// Two or more.
    Many(Box<[IpAddr]>),
    /// An entry that did not parse (MetalLB's `invalidIP`: the Service is
    /// not announced); boxed, as few Services have one.
    Bad(Box<BadIngress>),
}

/// The IPs before an ingress entry that did not parse, and that entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BadIngress {
    /// The IPs of the entries before it.
    ips: Box<[IpAddr]>,
    /// Its index in `status.loadBalancer.ingress`.
    at: usize,
    /// Its text.
    text: Box<str>,
}

impl Ingress {
    /// These IPs, and `bad`: the index and text of an entry that did not
    /// parse.
    fn new(ips: Vec<IpAddr>, bad: Option<(usize, &str)>) -> Self {
        if let Some((at, text)) = bad {
            return Self(Ips::Bad(Box::new(BadIngress {
                ips: ips.into(),
                at,
                text: text.into(),
            })));
        }
        Self(match *ips {
            [] => Ips::None,
            [ip] => Ips::One(ip),
            _ => Ips::Many(ips.into()),
        })
    }

    /// The IPs, in order.
    pub fn as_slice(&self) -> &[IpAddr] {
        match &self.0 {
            Ips::None => &[],
            Ips::One(ip) => std::slice::from_ref(ip),
            Ips::Many(ips) => ips,
            Ips::Bad(bad) => &bad.ips,
        }
    }

    /// The first entry whose IP does not parse, if one does not: its index
    /// and text.
    pub fn bad(&self) -> Option<(usize, &str)> {
        match &self.0 {
            Ips::Bad(bad) => Some((bad.at, &bad.text)),
            _ => None,
        }
    }
}

impl Deref for Ingress {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        self.as_slice()
    }
}

impl<'a> IntoIterator for &'a Ingress {
    type Item = &'a IpAddr;
    type IntoIter = std::slice::Iter<'a, IpAddr>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl FromIterator<IpAddr> for Ingress {
    /// These IPs, none bad.
    fn from_iter<I: IntoIterator<Item = IpAddr>>(ips: I) -> Self {
        Self::new(ips.into_iter().collect(), None)
    }
}

impl From<Vec<IpAddr>> for Ingress {
    fn from(ips: Vec<IpAddr>) -> Self {
        Self::new(ips, None)
    }
}

impl<const N: usize> From<[IpAddr; N]> for Ingress {
    fn from(ips: [IpAddr; N]) -> Self {
        ips.into_iter().collect()
    }
}

impl PartialEq for Ingress {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice() && self.bad() == other.bad()
    }
}

impl Eq for Ingress {}

impl fmt::Debug for Ingress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bad() {
            None => fmt::Debug::fmt(self.as_slice(), f),
            Some(bad) => f
                .debug_struct("Ingress")
                .field("ips", &self.as_slice())
                .field("bad", &bad)
                .finish(),
        }
    }
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

/// An EndpointSlice: where it is ([`Place`]: its namespace), the Service
/// it belongs to, its name and its endpoints, in one allocation behind one
/// thin pointer (8 bytes in the caches' lists and the view's groups; a
/// clone is a count). The allocation is a `triomphe` `ThinArc`: a count
/// (no weak count: 8 bytes), the header (32: the place, the Service's
/// name, the suffix), the endpoints' count (8) and the endpoints at its
/// end (8 each): 56 + 8 bytes an endpoint, a 64-byte chunk for one
/// endpoint, 80 for two or three, 96 for four, however many it has.
///
/// A slice named as the EndpointSlice controller names them
/// (`<service>-<suffix>`, a suffix of up to seven bytes) keeps its suffix
/// inline and shares its namespace's place with the other slices of the
/// namespace ([`Interner::place`]); any other has a place of its own with
/// its whole name.
///
/// 99,824 slices of one to four endpoints took 22.7 MiB (238 bytes each)
/// as a record of four pointers with the name and the endpoints (24 bytes
/// each) in allocations of their own (issue 18 §1), then 10.5 MiB (110
/// bytes each) as one 96-byte chunk, a `std::sync::Arc` (two counts) of a
/// 72-byte record with four endpoints inline.
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointSlice(ThinArc<Header, Endpoint>);

/// The fixed part of an [`EndpointSlice`]'s allocation.
#[derive(PartialEq, Eq)]
struct Header {
    /// Its namespace, and its whole name unless `suffix` has it.
    place: Arc<Place>,
    /// The `kubernetes.io/service-name` label.
    service: Option<Arc<str>>,
    /// Its name after `<service>-`, when the place holds no name.
    suffix: Option<Suffix>,
}

// Issue 18: the header is four pointers (on 64-bit targets).
const _: () = assert!(size_of::<Header>() <= 32);

/// Up to [`SUFFIX_MAX`] bytes of text, inline (the EndpointSlice
/// controller's suffixes are five): its length plus one (so that an
/// `Option` of it needs no tag of its own), then the bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Suffix {
    len: NonZeroU8,
    bytes: [u8; SUFFIX_MAX],
}

/// How long a [`Suffix`] can be.
const SUFFIX_MAX: usize = 7;

impl Suffix {
    /// The suffix of `name` after `service` and `-`, if it has them and
    /// it is short enough.
    fn of(name: &str, service: &str) -> Option<Self> {
        let suffix = name.strip_prefix(service)?.strip_prefix('-')?;
        let mut bytes = [0; SUFFIX_MAX];
        bytes
            .get_mut(..suffix.len())?
            .copy_from_slice(suffix.as_bytes());
        Some(Self {
            len: NonZeroU8::new(u8::try_from(suffix.len() + 1).ok()?)?,
            bytes,
        })
    }

    fn as_str(&self) -> &str {
        let len = usize::from(self.len.get() - 1);
        // Copied from a `str`, whole: always UTF-8.
        std::str::from_utf8(&self.bytes[..len]).unwrap_or_default()
    }
}

impl fmt::Debug for Suffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for EndpointSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointSlice")
            .field("namespace", self.namespace())
            .field("name", &self.name().to_string())
            .field("service", &self.service())
            .field("endpoints", &self.endpoints())
            .finish()
    }
}

/// How the caches, the snapshots and the view hold a record: shared (a
/// clone is a count) and told apart by address (the view finds what
/// changed by pointer).
pub trait Held: Clone {
    /// The record held.
    type Record;
    /// The record.
    fn record(&self) -> &Self::Record;
    /// The shared record's address.
    fn addr(&self) -> usize;
}

impl<T> Held for Arc<T> {
    type Record = T;
    fn record(&self) -> &T {
        self
    }
    fn addr(&self) -> usize {
        Self::as_ptr(self).addr()
    }
}

impl Held for EndpointSlice {
    type Record = Self;
    fn record(&self) -> &Self {
        self
    }
    fn addr(&self) -> usize {
        self.0.ptr().addr()
    }
}

/// A record and how it is held: in an `Arc`, or (an [`EndpointSlice`],
/// shared already) itself.
pub trait Holds: Sized {
    /// What holds it.
    type Held: Held<Record = Self> + Borrow<Self> + fmt::Debug + Send + Sync;
    /// Held, shared from now on.
    fn hold(self) -> Self::Held;
}

macro_rules! held_in_arc {
    ($($kind:ty),*) => {$(
        impl Holds for $kind {
            type Held = Arc<Self>;
            fn hold(self) -> Arc<Self> {
                Arc::new(self)
            }
        }
    )*};
}
held_in_arc!(Node, Service, Secret);

impl Holds for EndpointSlice {
    type Held = Self;
    fn hold(self) -> Self {
        self
    }
}

/// A list of held records, itself shared: a cache's contents, as a
/// snapshot and the view take them.
pub type List<T> = Arc<[<T as Holds>::Held]>;

/// An endpoint as the store keeps it: shared with the endpoints equal to
/// it (the Kubernetes source interns them, [`Interner::endpoint`]): one
/// pointer, 8 bytes. Read as the watched one (`Deref`): node, conditions,
/// [`watched::Endpoint::can_serve`].
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint(Arc<watched::Endpoint>);

impl Deref for Endpoint {
    type Target = watched::Endpoint;

    fn deref(&self) -> &watched::Endpoint {
        &self.0
    }
}

impl From<watched::Endpoint> for Endpoint {
    /// An endpoint shared with no other.
    fn from(e: watched::Endpoint) -> Self {
        Self(Arc::new(e))
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// An EndpointSlice's name, as [`EndpointSlice::name`] gives it: the
/// whole, or a Service's name, `-` and a suffix. Ordered and compared as
/// the whole name's text.
#[derive(Clone, Copy, Debug)]
pub struct Name<'a> {
    head: &'a str,
    suffix: Option<&'a str>,
}

impl<'a> Name<'a> {
    /// The name `whole`.
    pub fn whole(whole: &'a str) -> Self {
        Self {
            head: whole,
            suffix: None,
        }
    }

    /// The name's bytes.
    fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        let suffix = self.suffix.map(|s| std::iter::once(b'-').chain(s.bytes()));
        self.head.bytes().chain(suffix.into_iter().flatten())
    }
}

impl Ord for Name<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.suffix, other.suffix) {
            (None, None) => self.head.cmp(other.head),
            _ => self.bytes().cmp(other.bytes()),
        }
    }
}

impl PartialOrd for Name<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Name<'_> {}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.head)?;
        match self.suffix {
            Some(suffix) => write!(f, "-{suffix}"),
            None => Ok(()),
        }
    }
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
    ///
    /// A Service that is not a `LoadBalancer` is never announced, and the
    /// view reads nothing of it but its type: its record keeps its key,
    /// uid and type alone. The labels' set is not looked up in the
    /// interner's table of sets (most Services' sets are their own, such
    /// as a Helm chart's or the loadgen's `app.kubernetes.io/name`: the
    /// table's slot cost more than the few shared sets saved); its strings
    /// are shared.
    pub fn from_watched(s: watched::Service, interner: &mut Interner) -> Self {
        let meta = s.metadata;
        let key = ObjectKey {
            namespace: interner.string(meta.namespace.as_deref().unwrap_or_default()),
            name: interner.string(meta.name.as_deref().unwrap_or_default()),
        };
        let uid = meta.uid.as_deref().map(Uid::new);
        if !s.load_balancer {
            return Self {
                key,
                uid,
                ..Self::default()
            };
        }
        Self {
            key,
            uid,
            labels: interner.strings_of(&s.labels),
            annotations: interner.labels(&s.annotations),
            load_balancer: s.load_balancer,
            load_balancer_class: s.load_balancer_class.map(|c| interner.string(&c)),
            external_traffic_policy: s.external_traffic_policy,
            ingress: Ingress::default(),
        }
        .with_ingress(&s.ingress)
    }

    /// The record with these `status.loadBalancer.ingress[].ip` entries
    /// (`None`: a host name only), parsed.
    pub fn with_ingress<T: AsRef<str>>(mut self, entries: &[Option<T>]) -> Self {
        let mut ips = Vec::with_capacity(entries.len());
        let mut bad = None;
        for (i, entry) in entries.iter().enumerate() {
            let Some(text) = entry.as_ref().map(AsRef::as_ref) else {
                continue;
            };
            match text.parse() {
                Ok(ip) => ips.push(canonical(ip)),
                Err(_) => {
                    bad = Some((i, text));
                    break;
                }
            }
        }
        self.ingress = Ingress::new(ips, bad);
        self
    }

    /// The first `status.loadBalancer.ingress` entry whose IP does not
    /// parse, if one does not: its index and text. The Service is then not
    /// announced (MetalLB's `invalidIP`).
    pub fn bad_ingress(&self) -> Option<(usize, &str)> {
        self.ingress.bad()
    }
}

impl EndpointSlice {
    /// The record of a watched object, its strings, place and endpoints
    /// shared through `interner`.
    pub fn from_watched(e: watched::EndpointSlice, interner: &mut Interner) -> Self {
        let meta = e.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let service = e.service.as_deref().map(|s| interner.string(s));
        let suffix = service.as_deref().and_then(|s| Suffix::of(name, s));
        let place = match suffix {
            Some(_) => interner.place(namespace),
            None => Arc::new(Place {
                namespace: interner.string(namespace),
                name: Some(name.into()),
            }),
        };
        let endpoints = e.endpoints.iter().map(|ep| Endpoint(interner.endpoint(ep)));
        Self::of_parts(place, service, suffix, endpoints)
    }

    /// The slice `name` in `namespace`, of `service`, with these
    /// endpoints (its place its own).
    pub fn new(
        namespace: Arc<str>,
        name: &str,
        service: Option<Arc<str>>,
        endpoints: Vec<Endpoint>,
    ) -> Self {
        let suffix = service.as_deref().and_then(|s| Suffix::of(name, s));
        let place = Arc::new(Place {
            namespace,
            name: suffix.is_none().then(|| name.into()),
        });
        Self::of_parts(place, service, suffix, endpoints.into_iter())
    }

    /// One allocation of these parts (`suffix` only when `place` has no
    /// name).
    fn of_parts(
        place: Arc<Place>,
        service: Option<Arc<str>>,
        suffix: Option<Suffix>,
        endpoints: impl ExactSizeIterator<Item = Endpoint>,
    ) -> Self {
        let header = Header {
            place,
            service,
            suffix,
        };
        Self(ThinArc::from_header_and_iter(header, endpoints))
    }

    fn header(&self) -> &Header {
        &self.0.header.header
    }

    /// Its namespace.
    pub fn namespace(&self) -> &Arc<str> {
        &self.header().place.namespace
    }

    /// The `kubernetes.io/service-name` label.
    pub fn service(&self) -> Option<&Arc<str>> {
        self.header().service.as_ref()
    }

    /// Its name.
    pub fn name(&self) -> Name<'_> {
        let h = self.header();
        match (&h.place.name, h.service.as_deref(), &h.suffix) {
            (None, Some(service), Some(suffix)) => Name {
                head: service,
                suffix: Some(suffix.as_str()),
            },
            (whole, ..) => Name::whole(whole.as_deref().unwrap_or_default()),
        }
    }

    /// Its endpoints, in order.
    pub fn endpoints(&self) -> std::slice::Iter<'_, Endpoint> {
        self.0.slice.iter()
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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// A watched LoadBalancer Service `ns/web` with labels, MetalLB's
    /// annotation, a class and these ingress entries.
    fn watched(ingress: &[Option<&str>]) -> watched::Service {
        watched::Service {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("web".into()),
                uid: Some("10000000-0000-0000-0000-000000000001".into()),
                ..ObjectMeta::default()
            },
            labels: [("app", "web")].into_iter().collect(),
            annotations: [("metallb.io/ip-allocated-from-pool", "p")]
                .into_iter()
                .collect(),
            load_balancer: true,
            load_balancer_class: Some("ferrolb".into()),
            external_traffic_policy: TrafficPolicy::Local,
            ingress: ingress.iter().map(|e| e.map(Into::into)).collect(),
        }
    }

    /// However many IPs, the ingress reads as the slice of them; two are
    /// equal when their IPs and bad entries are.
    #[test]
    fn ingress_reads_as_its_ips() {
        for ips in [
            vec![],
            vec![ip("192.0.2.1")],
            vec![ip("192.0.2.1"), ip("2001:db8::1")],
        ] {
            let ingress: Ingress = ips.iter().copied().collect();
            assert_eq!(&*ingress, ips.as_slice());
            assert_eq!(ingress.iter().count(), ips.len());
            assert_eq!((&ingress).into_iter().copied().collect::<Vec<_>>(), ips);
            assert_eq!(ingress.bad(), None);
            assert_eq!(format!("{ingress:?}"), format!("{ips:?}"));
            let bad = Ingress::new(ips.clone(), Some((ips.len(), "x")));
            assert_eq!(&*bad, ips.as_slice());
            assert_eq!(bad.bad(), Some((ips.len(), "x")));
            assert_ne!(bad, ingress);
            assert_eq!(bad, Ingress::new(ips.clone(), Some((ips.len(), "x"))));
            assert_ne!(bad, Ingress::new(ips.clone(), Some((ips.len(), "y"))));
        }
        assert_eq!(
            Ingress::from([ip("192.0.2.1")]),
            [ip("192.0.2.1")].into_iter().collect::<Ingress>()
        );
        assert_ne!(Ingress::from([ip("192.0.2.1")]), Ingress::default());
    }

    /// Entries are parsed in order: a host name only is skipped, a mapped
    /// address is kept as IPv4, and the first that does not parse ends the
    /// list and is kept with its index.
    #[test]
    fn ingress_entries_parsed() {
        let s = Service::from(watched(&[
            None,
            Some("::ffff:192.0.2.1"),
            Some("2001:db8::1"),
        ]));
        assert_eq!(*s.ingress, [ip("192.0.2.1"), ip("2001:db8::1")]);
        assert_eq!(s.bad_ingress(), None);
        let s = Service::from(watched(&[
            Some("192.0.2.1"),
            Some("bad"),
            Some("192.0.2.2"),
        ]));
        assert_eq!(*s.ingress, [ip("192.0.2.1")]);
        assert_eq!(s.bad_ingress(), Some((1, "bad")));
        let s = s.with_ingress(&[Some("192.0.2.3")]);
        assert_eq!(*s.ingress, [ip("192.0.2.3")]);
        assert_eq!(s.bad_ingress(), None);
    }

    /// The class is one string for the Services of a class; a Service that
    /// is not a LoadBalancer keeps its key, uid and type alone.
    #[test]
    fn class_shared_and_other_types_kept_small() {
        let mut interner = Interner::default();
        let a = Service::from_watched(watched(&[Some("192.0.2.1")]), &mut interner);
        let b = Service::from_watched(watched(&[Some("192.0.2.2")]), &mut interner);
        let class = |s: &Service| s.load_balancer_class.as_ref().map(Arc::as_ptr);
        assert_eq!(class(&a), class(&b));
        assert_eq!(a.labels.get("app"), Some("web"));
        assert_eq!(
            a.annotations.get("metallb.io/ip-allocated-from-pool"),
            Some("p")
        );

        let cluster_ip = watched::Service {
            load_balancer: false,
            ..watched(&[Some("192.0.2.1")])
        };
        let s = Service::from_watched(cluster_ip, &mut interner);
        assert_eq!(
            s,
            Service {
                key: ObjectKey::new("ns", "web"),
                uid: Some(Uid::new("10000000-0000-0000-0000-000000000001")),
                ..Service::default()
            }
        );
    }

    fn endpoint(node: &str, ready: bool) -> Endpoint {
        watched::Endpoint {
            node: Some(node.into()),
            has_address: true,
            ready: Some(ready),
            serving: None,
            terminating: None,
        }
        .into()
    }

    fn slice(name: &str, service: Option<&str>, nodes: usize) -> EndpointSlice {
        let endpoints = (0..nodes).map(|i| endpoint(&format!("n{i}"), i % 2 == 0));
        EndpointSlice::new(
            "ns".into(),
            name,
            service.map(Into::into),
            endpoints.collect(),
        )
    }

    /// The sizes the heap figures of issue 18 rest on: a slice is one thin
    /// pointer to one allocation of a count (8 bytes), a 32-byte header,
    /// the endpoints' count (8) and 8 bytes an endpoint, whatever its name
    /// and however many endpoints it has.
    #[test]
    fn a_slice_is_one_thin_allocation() {
        assert_eq!(size_of::<Endpoint>(), 8);
        assert_eq!(size_of::<EndpointSlice>(), 8);
        assert_eq!(size_of::<Option<EndpointSlice>>(), 8);
        assert_eq!(size_of::<Header>(), 32);
        for n in 0..6 {
            for (name, service) in [("web-x2b9q", Some("web")), ("other", None)] {
                let s = slice(name, service, n);
                // What the allocation holds past its count.
                let size = std::alloc::Layout::for_value(&*s.0).size();
                assert_eq!(size, 32 + 8 + 8 * n, "{name} {n}");
            }
        }
    }

    /// The slices of a namespace named as the EndpointSlice controller
    /// names them share their namespace's place (one pointer, the
    /// interner's); a slice named otherwise has a place of its own with
    /// its whole name. Both give back their namespace, Service and name.
    #[test]
    fn a_namespace_place_is_shared() {
        let mut interner = Interner::default();
        let watched = |name: &str, service: Option<&str>| watched::EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            service: service.map(Into::into),
            endpoints: vec![watched::Endpoint::default()],
        };
        let a = EndpointSlice::from_watched(watched("web-a", Some("web")), &mut interner);
        let b = EndpointSlice::from_watched(watched("api-b", Some("api")), &mut interner);
        let c = EndpointSlice::from_watched(watched("by-hand", Some("web")), &mut interner);
        assert!(Arc::ptr_eq(&a.header().place, &b.header().place));
        assert!(!Arc::ptr_eq(&a.header().place, &c.header().place));
        assert!(Arc::ptr_eq(a.namespace(), c.namespace()));
        assert_eq!(c.header().place.name.as_deref(), Some("by-hand"));
        assert_eq!(a.header().place.name, None);
        for (s, name, service) in [
            (&a, "web-a", "web"),
            (&b, "api-b", "api"),
            (&c, "by-hand", "web"),
        ] {
            assert_eq!(&**s.namespace(), "ns");
            assert_eq!(s.service().map(|s| &**s), Some(service));
            assert_eq!(s.name(), Name::whole(name));
            assert_eq!(s.endpoints().len(), 1);
        }
        assert!(Arc::ptr_eq(a.service().unwrap(), c.service().unwrap()));
    }

    /// Every shape gives back the name and endpoints it was made of: a
    /// suffix of seven bytes or less after `<service>-` (the empty one
    /// too) kept inline, whatever the endpoints; a longer suffix, another
    /// Service's name, no Service, whole in a place of its own.
    #[test]
    fn names_and_endpoints_come_back_as_made() {
        let cases = [
            ("web-x2b9q", Some("web"), 4, true),
            ("web-", Some("web"), 0, true),
            ("web-1234567", Some("web"), 1, true),
            ("web-12345678", Some("web"), 1, false),
            ("web-x2b9q", Some("web"), 5, true),
            ("web-x2b9q", Some("web"), 0, true),
            ("web-x2b9q", Some("api"), 1, false),
            ("webx2b9q", Some("web"), 1, false),
            ("web-x2b9q", None, 2, false),
            ("wéb-é", Some("wéb"), 1, true),
        ];
        for (name, service, n, compact) in cases {
            let s = slice(name, service, n);
            assert_eq!(s.name().to_string(), name);
            assert_eq!(s.name(), Name::whole(name), "{name}");
            assert_eq!(s.header().suffix.is_some(), compact, "{name}");
            assert_eq!(s.header().place.name.is_none(), compact, "{name}");
            let nodes: Vec<_> = s.endpoints().map(|e| e.node.clone()).collect();
            let want: Vec<Option<Arc<str>>> =
                (0..n).map(|i| Some(format!("n{i}").into())).collect();
            assert_eq!(nodes, want, "{name}");
            assert_eq!(s, slice(name, service, n));
        }
        assert_ne!(
            slice("web-a", Some("web"), 1),
            slice("web-b", Some("web"), 1)
        );
        assert_ne!(
            slice("web-a", Some("web"), 1),
            slice("web-a", Some("web"), 2)
        );
    }

    /// Names in parts order as their text does (the caches' lists are
    /// sorted by it and searched with whole names).
    #[test]
    fn names_order_as_their_text() {
        let texts = [
            "", "a", "a-", "a-0", "a-00", "a-1", "a-b", "a0", "a.", "ab-0", "ab-", "b-a", "a-bc-d",
        ];
        let heads = ["", "a", "ab", "a-b"];
        let names: Vec<(String, Name<'_>)> = texts
            .iter()
            .map(|&t| (t.to_owned(), Name::whole(t)))
            .chain(heads.iter().flat_map(|&h| {
                texts.iter().filter_map(move |&t| {
                    let suffix = t.strip_prefix(h)?.strip_prefix('-')?;
                    Some((
                        t.to_owned(),
                        Name {
                            head: h,
                            suffix: Some(suffix),
                        },
                    ))
                })
            }))
            .collect();
        for (a, na) in &names {
            for (b, nb) in &names {
                assert_eq!(na.cmp(nb), a.cmp(b), "{a:?} {b:?}");
                assert_eq!(na == nb, a == b, "{a:?} {b:?}");
            }
        }
    }
}
