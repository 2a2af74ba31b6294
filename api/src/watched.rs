//! The watched Kubernetes kinds as the speaker reads them: Nodes, Services
//! and `discovery.k8s.io/v1` EndpointSlices, each holding only the fields
//! the speaker turns into its view of the cluster (and what the watch and
//! the status publisher need: name, namespace, uid, resource version).
//!
//! They are deserialised straight from the API's JSON (or the file
//! source's YAML): serde skips every other field as it reads, so a whole
//! k8s-openapi object is never built, not for the initial list and not for
//! a watch event, and the caches hold these small values. Each kind is a
//! `kube::Resource` (through k8s-openapi's `Resource` and `Metadata`
//! traits), so kube-runtime's watcher and reflector store take it as they
//! take the k8s-openapi kinds. Pure data: no I/O here.
//!
//! They live in this crate, not the speaker, so that the fuzz target
//! `watched_objects` reads them without building the speaker's runtime
//! (kube-runtime, tokio): these deserialisers read every object the
//! apiserver sends.
//!
//! The `From` conversions from the k8s-openapi kinds keep exactly what
//! deserialising keeps; `kubectl ferrolb`, which lists whole objects, the
//! tests and the fuzz target use them.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::discovery::v1 as discoveryv1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, de};

use crate::model::LabelLookup;

/// The label naming the Service an EndpointSlice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A Node: name and labels (selectors read them), its conditions and its
/// IP addresses.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "wire::Node")]
pub struct Node {
    /// Name, labels and resource version (which the watch reads; the
    /// Kubernetes source drops it once read).
    pub metadata: ObjectMeta,
    /// `status.conditions`: (type, status).
    pub conditions: Vec<(String, String)>,
    /// `status.addresses` of type `InternalIP` or `ExternalIP`, in the
    /// API's order: (type, address). Host names are never read.
    pub addresses: Vec<(String, String)>,
}

/// A Service: what the view reads (type, class, traffic policy, ingress,
/// labels, MetalLB's annotations) and what Events name (uid, resource
/// version).
///
/// The labels and annotations are [`Labels`], outside `metadata`: the
/// view's Service shares them (the same `Arc`) instead of copying them,
/// and the Kubernetes source shares equal sets between Services
/// ([`Interner`]).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "wire::Service")]
pub struct Service {
    /// Name, namespace, uid and resource version; no labels or
    /// annotations (they are the next two fields).
    pub metadata: ObjectMeta,
    /// `metadata.labels`.
    pub labels: Labels,
    /// Of `metadata.annotations`, MetalLB's alone (`metallb.io/`,
    /// `metallb.universe.tf/`).
    pub annotations: Labels,
    /// `spec.type` is `LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`.
    pub load_balancer_class: Option<String>,
    /// `spec.externalTrafficPolicy` (`Cluster` unless `Local`).
    pub external_traffic_policy: TrafficPolicy,
    /// `status.loadBalancer.ingress[].ip`, one entry per ingress entry
    /// (`None`: a host name only), so a problem can name its index.
    pub ingress: Vec<Option<String>>,
}

/// An EndpointSlice: its name, the Service it belongs to, and its
/// endpoints as the view holds them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "wire::EndpointSlice")]
pub struct EndpointSlice {
    /// Name, namespace and resource version; no labels (the one read is
    /// `service`).
    pub metadata: ObjectMeta,
    /// The `kubernetes.io/service-name` label.
    pub service: Option<String>,
    /// The endpoints: node, conditions, whether it has an address.
    pub endpoints: Vec<Endpoint>,
}

/// `spec.externalTrafficPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrafficPolicy {
    /// Any node may take the traffic (the default).
    #[default]
    Cluster,
    /// Only nodes with a local endpoint may take it.
    Local,
}

/// One endpoint of an EndpointSlice (discovery.k8s.io/v1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The node it runs on: shared, so that the view's copy of the
    /// endpoint and the endpoints on one node (the Kubernetes source
    /// interns the names, [`Interner`]) do not each hold the name.
    pub node: Option<Arc<str>>,
    /// Whether it has any address (the API requires one).
    pub has_address: bool,
    /// `conditions.ready`; unset means ready, as the API documents.
    pub ready: Option<bool>,
    /// `conditions.serving`.
    pub serving: Option<bool>,
    /// `conditions.terminating`.
    pub terminating: Option<bool>,
}

/// Where a record is, behind one thin pointer: its namespace, and its
/// name when the record does not keep the name itself. An EndpointSlice
/// named as the EndpointSlice controller names them keeps a suffix of its
/// own and shares its namespace's place with the slices of that namespace
/// ([`Interner::place`]); one named otherwise has a place of its own, with
/// the whole name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Place {
    /// The namespace.
    pub namespace: Arc<str>,
    /// The whole name, when the record does not keep it.
    pub name: Option<Box<str>>,
}

impl Endpoint {
    /// Whether traffic may be sent to this endpoint: MetalLB's
    /// `EndpointCanServe`, ready (or unset) or serving.
    ///
    /// A terminating endpoint that still serves counts, as in MetalLB and as
    /// kube-proxy falls back to such endpoints: a node whose pods are
    /// draining keeps announcing until they stop serving, so established
    /// connections are not cut at the first SIGTERM.
    pub fn can_serve(&self) -> bool {
        self.has_address && (self.ready != Some(false) || self.serving == Some(true))
    }
}

/// Labels or annotations as the speaker keeps them: (key, value) pairs
/// sorted by key, immutable and shared, so that a copy is a pointer and
/// equal sets can be one ([`Interner`]). The empty set allocates nothing.
/// A `BTreeMap<String, String>` of two entries takes a 544-byte node and
/// four strings; this, 16 bytes of header and 32 per entry, its strings
/// shared.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Labels(Option<Arc<[Pair]>>);

/// A (key, value) pair of [`Labels`].
type Pair = (Arc<str>, Arc<str>);

impl Labels {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let pairs = self.0.as_deref()?;
        let at = pairs.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&pairs[at].1)
    }

    /// Whether the set has `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| (&**k, &**v))
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.0.as_deref().map_or(0, <[_]>::len)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets `key` to `value`: a new set (the shared one is not changed).
    pub fn insert(&mut self, key: &str, value: &str) {
        let mut pairs = self.0.as_deref().unwrap_or_default().to_vec();
        match pairs.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(at) => pairs[at].1 = value.into(),
            Err(at) => pairs.insert(at, (key.into(), value.into())),
        }
        *self = Self(Some(pairs.into()));
    }

    /// The pairs as a map (for the API's types).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// Whether `self` and `other` are the same shared set.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// How many holders share the set (0 when empty): the interner's own
    /// reference is one.
    fn holders(&self) -> usize {
        self.0.as_ref().map_or(0, Arc::strong_count)
    }
}

impl<K: Into<Arc<str>> + Ord, V: Into<Arc<str>>> FromIterator<(K, V)> for Labels {
    /// The pairs sorted by key; of two with one key, the later.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let sorted: BTreeMap<K, V> = pairs.into_iter().collect();
        if sorted.is_empty() {
            return Self::default();
        }
        Self(Some(
            sorted
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ))
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl LabelLookup for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// Makes equal label sets, equal strings (label keys and values, node
/// names of endpoints in [`Interner::slice`]) and equal endpoints one
/// shared value, as objects arrive: Services share the loadgen's or a Helm
/// chart's labels, most Services of a pool carry the same MetalLB
/// annotations, every endpoint on a node names it, and the endpoints on
/// one node are mostly alike (ready, serving, not terminating). Pure: the Kubernetes source owns one
/// per watched kind and runs each arriving object through it.
///
/// What no object holds any more is dropped once the tables have doubled
/// since the last sweep, so they stay within twice what is live.
#[derive(Debug, Default)]
pub struct Interner {
    sets: HashSet<Labels>,
    strings: HashSet<Arc<str>>,
    endpoints: HashSet<Arc<Endpoint>>,
    /// The namespaces' places (few: swept with the other tables).
    places: HashSet<Arc<Place>>,
    /// The tables' sizes after the last sweep.
    swept: (usize, usize, usize),
}

/// Tables smaller than this are never swept.
const SWEEP_FLOOR: usize = 1_024;

impl Interner {
    /// The shared set equal to `labels`.
    pub fn labels(&mut self, labels: &Labels) -> Labels {
        if labels.is_empty() {
            return Labels::default();
        }
        if let Some(found) = self.sets.get(labels) {
            return found.clone();
        }
        let pairs = labels
            .iter()
            .map(|(k, v)| (self.string(k), self.string(v)))
            .collect();
        let shared = Labels(Some(pairs));
        self.sets.insert(shared.clone());
        self.sweep_if_grown();
        shared
    }

    /// A set of its own equal to `labels`, its strings shared: for sets
    /// that are mostly their objects' own (a Service's labels), whose slot
    /// in the table of sets would cost more than the sharing saves.
    pub fn strings_of(&mut self, labels: &Labels) -> Labels {
        if labels.is_empty() {
            return Labels::default();
        }
        Labels(Some(
            labels
                .iter()
                .map(|(k, v)| (self.string(k), self.string(v)))
                .collect(),
        ))
    }

    /// The shared string equal to `text`.
    pub fn string(&mut self, text: &str) -> Arc<str> {
        if let Some(found) = self.strings.get(text) {
            return Arc::clone(found);
        }
        let shared: Arc<str> = text.into();
        self.strings.insert(Arc::clone(&shared));
        self.sweep_if_grown();
        shared
    }

    /// The shared endpoint equal to `endpoint`. Its node name is not put
    /// in the strings' table: the endpoints alike on a node are one
    /// already, and a node has few kinds.
    pub fn endpoint(&mut self, endpoint: &Endpoint) -> Arc<Endpoint> {
        if let Some(found) = self.endpoints.get(endpoint) {
            return Arc::clone(found);
        }
        let shared = Arc::new(endpoint.clone());
        self.endpoints.insert(Arc::clone(&shared));
        self.sweep_if_grown();
        shared
    }

    /// The shared place of `namespace` (no name of its own): the records
    /// of a namespace hold one pointer to it.
    pub fn place(&mut self, namespace: &str) -> Arc<Place> {
        let place = Place {
            namespace: self.string(namespace),
            name: None,
        };
        if let Some(found) = self.places.get(&place) {
            return Arc::clone(found);
        }
        let shared = Arc::new(place);
        self.places.insert(Arc::clone(&shared));
        shared
    }

    /// Once a table has doubled since the last sweep: drops the sets, the
    /// endpoints and the places only the interner holds, then the strings
    /// only it holds (those of the values just dropped among them).
    fn sweep_if_grown(&mut self) {
        if self.sets.len() < 2 * self.swept.0.max(SWEEP_FLOOR)
            && self.strings.len() < 2 * self.swept.1.max(SWEEP_FLOOR)
            && self.endpoints.len() < 2 * self.swept.2.max(SWEEP_FLOOR)
        {
            return;
        }
        self.sets.retain(|s| s.holders() > 1);
        self.endpoints.retain(|e| Arc::strong_count(e) > 1);
        self.places.retain(|p| Arc::strong_count(p) > 1);
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.swept = (self.sets.len(), self.strings.len(), self.endpoints.len());
    }

    /// A Service's labels and annotations, shared.
    pub fn service(&mut self, s: &mut Service) {
        s.labels = self.labels(&s.labels);
        s.annotations = self.labels(&s.annotations);
    }

    /// An EndpointSlice's endpoints' node names, shared.
    pub fn slice(&mut self, e: &mut EndpointSlice) {
        for ep in &mut e.endpoints {
            if let Some(node) = &ep.node {
                ep.node = Some(self.string(node));
            }
        }
    }

    /// How many sets, strings and endpoints the tables hold (live or not
    /// yet swept).
    pub fn len(&self) -> (usize, usize, usize) {
        (self.sets.len(), self.strings.len(), self.endpoints.len())
    }
}

/// Each own type is the same API resource as its k8s-openapi type (group,
/// version, kind, path and scope taken from it, so they cannot drift), with
/// metadata in the usual `metadata` field.
macro_rules! same_resource_as {
    ($($kind:ty => $whole:ty),*) => {$(
        impl Resource for $kind {
            const API_VERSION: &'static str = <$whole as Resource>::API_VERSION;
            const GROUP: &'static str = <$whole as Resource>::GROUP;
            const KIND: &'static str = <$whole as Resource>::KIND;
            const VERSION: &'static str = <$whole as Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <$whole as Resource>::URL_PATH_SEGMENT;
            type Scope = <$whole as Resource>::Scope;
        }

        impl Metadata for $kind {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    )*};
}
same_resource_as!(
    Node => corev1::Node,
    Service => corev1::Service,
    EndpointSlice => discoveryv1::EndpointSlice
);

/// Whether an annotation is one the speaker reads: MetalLB's (the pool,
/// the shared IP key). Real Services carry others (Helm's, tools').
pub fn metallb_annotation(key: &str) -> bool {
    key.starts_with("metallb.io/") || key.starts_with("metallb.universe.tf/")
}

/// The address types a Node's addresses are read from.
fn ip_address_type(t: &str) -> bool {
    matches!(t, "InternalIP" | "ExternalIP")
}

fn traffic_policy(p: Option<&str>) -> TrafficPolicy {
    match p {
        Some("Local") => TrafficPolicy::Local,
        _ => TrafficPolicy::Cluster,
    }
}

/// The JSON shapes, as far as the speaker reads them; serde skips the rest.
mod wire {
    use super::*;

    #[derive(Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        #[serde(deserialize_with = "keep_metallb_annotations")]
        annotations: Option<BTreeMap<String, String>>,
    }

    impl Meta {
        fn into_meta(self) -> ObjectMeta {
            ObjectMeta {
                name: self.name,
                namespace: self.namespace,
                uid: self.uid,
                resource_version: self.resource_version,
                labels: self.labels,
                annotations: self.annotations,
                ..ObjectMeta::default()
            }
        }
    }

    /// A field that is null reads as absent: its default. k8s-openapi reads
    /// every field so, required ones too (a missing or null `type` of a
    /// condition is `""`), and the own types read what it reads (the fuzz
    /// target `watched_objects` checks it).
    fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Default + Deserialize<'de>,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    /// MetalLB's annotations; the values of the others are skipped unread.
    fn keep_metallb_annotations<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<BTreeMap<String, String>>, D::Error> {
        struct Only;
        impl<'de> Visitor<'de> for Only {
            type Value = Option<BTreeMap<String, String>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings, or null")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                d.deserialize_map(self)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if metallb_annotation(&key) {
                        kept.insert(key, map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Some(kept))
            }
        }
        d.deserialize_option(Only)
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    pub(super) struct Node {
        #[serde(deserialize_with = "null_as_default")]
        metadata: Meta,
        status: Option<NodeStatus>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct NodeStatus {
        conditions: Option<Vec<Condition>>,
        addresses: Option<Vec<Address>>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct Condition {
        #[serde(rename = "type", deserialize_with = "null_as_default")]
        type_: String,
        #[serde(deserialize_with = "null_as_default")]
        status: String,
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct Address {
        #[serde(rename = "type", deserialize_with = "null_as_default")]
        type_: String,
        #[serde(deserialize_with = "null_as_default")]
        address: String,
    }

    impl From<Node> for super::Node {
        fn from(n: Node) -> Self {
            let mut meta = n.metadata;
            meta.uid = None;
            meta.annotations = None;
            meta.namespace = None;
            let status = n.status.unwrap_or_default();
            Self {
                metadata: meta.into_meta(),
                conditions: status
                    .conditions
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| (c.type_, c.status))
                    .collect(),
                addresses: status
                    .addresses
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| ip_address_type(&a.type_))
                    .map(|a| (a.type_, a.address))
                    .collect(),
            }
        }
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    pub(super) struct Service {
        #[serde(deserialize_with = "null_as_default")]
        metadata: Meta,
        spec: Option<ServiceSpec>,
        status: Option<ServiceStatus>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct ServiceSpec {
        #[serde(rename = "type")]
        type_: Option<String>,
        load_balancer_class: Option<String>,
        external_traffic_policy: Option<String>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct ServiceStatus {
        load_balancer: Option<LoadBalancerStatus>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct LoadBalancerStatus {
        ingress: Option<Vec<Ingress>>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct Ingress {
        ip: Option<String>,
    }

    impl From<Service> for super::Service {
        fn from(s: Service) -> Self {
            let spec = s.spec.unwrap_or_default();
            let mut meta = s.metadata;
            let labels = meta.labels.take().map(Labels::from).unwrap_or_default();
            let annotations = meta.annotations.take().map(Labels::from);
            Self {
                metadata: meta.into_meta(),
                labels,
                annotations: annotations.unwrap_or_default(),
                load_balancer: spec.type_.as_deref() == Some("LoadBalancer"),
                load_balancer_class: spec.load_balancer_class,
                external_traffic_policy: traffic_policy(spec.external_traffic_policy.as_deref()),
                ingress: s
                    .status
                    .and_then(|st| st.load_balancer?.ingress)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| i.ip)
                    .collect(),
            }
        }
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    pub(super) struct EndpointSlice {
        #[serde(deserialize_with = "null_as_default")]
        metadata: Meta,
        endpoints: Option<Vec<SliceEndpoint>>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct SliceEndpoint {
        /// Counted, not read: the view asks only whether there is one.
        #[serde(deserialize_with = "null_as_default")]
        addresses: Vec<IgnoredAny>,
        node_name: Option<String>,
        conditions: Option<Conditions>,
    }

    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct Conditions {
        ready: Option<bool>,
        serving: Option<bool>,
        terminating: Option<bool>,
    }

    impl From<EndpointSlice> for super::EndpointSlice {
        fn from(e: EndpointSlice) -> Self {
            let mut meta = e.metadata;
            let service = meta
                .labels
                .take()
                .and_then(|mut l| l.remove(SERVICE_NAME_LABEL));
            meta.uid = None;
            meta.annotations = None;
            Self {
                metadata: meta.into_meta(),
                service,
                endpoints: e
                    .endpoints
                    .unwrap_or_default()
                    .into_iter()
                    .map(|ep| {
                        let c = ep.conditions.unwrap_or_default();
                        Endpoint {
                            node: ep.node_name.map(Into::into),
                            has_address: !ep.addresses.is_empty(),
                            ready: c.ready,
                            serving: c.serving,
                            terminating: c.terminating,
                        }
                    })
                    .collect(),
            }
        }
    }
}

/// The metadata kept of a whole object's: what [`wire`] reads.
fn kept_meta(m: &ObjectMeta, uid: bool, labels: bool, annotations: bool) -> ObjectMeta {
    ObjectMeta {
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        uid: m.uid.clone().filter(|_| uid),
        resource_version: m.resource_version.clone(),
        labels: m.labels.clone().filter(|_| labels),
        annotations: m.annotations.as_ref().filter(|_| annotations).map(|a| {
            a.iter()
                .filter(|(k, _)| metallb_annotation(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }),
        ..ObjectMeta::default()
    }
}

impl From<&corev1::Node> for Node {
    fn from(n: &corev1::Node) -> Self {
        let status = n.status.as_ref();
        let mut metadata = kept_meta(&n.metadata, false, true, false);
        metadata.namespace = None;
        Self {
            metadata,
            conditions: status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect(),
            addresses: status
                .and_then(|s| s.addresses.as_ref())
                .into_iter()
                .flatten()
                .filter(|a| ip_address_type(&a.type_))
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect(),
        }
    }
}

impl From<&corev1::Service> for Service {
    fn from(s: &corev1::Service) -> Self {
        let spec = s.spec.as_ref();
        let mut metadata = kept_meta(&s.metadata, true, true, true);
        let labels = metadata.labels.take().map(Labels::from);
        let annotations = metadata.annotations.take().map(Labels::from);
        Self {
            metadata,
            labels: labels.unwrap_or_default(),
            annotations: annotations.unwrap_or_default(),
            load_balancer: spec.and_then(|sp| sp.type_.as_deref()) == Some("LoadBalancer"),
            load_balancer_class: spec.and_then(|sp| sp.load_balancer_class.clone()),
            external_traffic_policy: traffic_policy(
                spec.and_then(|sp| sp.external_traffic_policy.as_deref()),
            ),
            ingress: s
                .status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref()?.ingress.as_ref())
                .into_iter()
                .flatten()
                .map(|i| i.ip.clone())
                .collect(),
        }
    }
}

impl From<&discoveryv1::EndpointSlice> for EndpointSlice {
    fn from(e: &discoveryv1::EndpointSlice) -> Self {
        Self {
            metadata: kept_meta(&e.metadata, false, false, false),
            service: e
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .cloned(),
            endpoints: e
                .endpoints
                .iter()
                .flatten()
                .map(|ep| {
                    let c = ep.conditions.as_ref();
                    Endpoint {
                        node: ep.node_name.as_deref().map(Into::into),
                        has_address: !ep.addresses.is_empty(),
                        ready: c.and_then(|c| c.ready),
                        serving: c.and_then(|c| c.serving),
                        terminating: c.and_then(|c| c.terminating),
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;

    /// The object read straight from JSON, and read whole then converted.
    fn both<W, K>(v: &Value) -> (K, K)
    where
        W: DeserializeOwned,
        K: DeserializeOwned + for<'a> From<&'a W>,
    {
        let direct: K = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}"));
        let whole: W = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}"));
        (direct, K::from(&whole))
    }

    /// `kubectl ferrolb`, which lists whole objects, builds the view from
    /// what the speaker's caches would hold: the `From` conversions keep
    /// what deserialising keeps, no more.
    #[test]
    fn conversions_keep_what_deserialising_keeps() {
        let meta = json!({"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "3",
            "generation": 4, "labels": {"app": "web", SERVICE_NAME_LABEL: "web"},
            "annotations": {"metallb.io/address-pool": "p", "helm.sh/chart": "c"},
            "finalizers": ["f"]});
        let (direct, converted) = both::<corev1::Service, Service>(&json!({
            "metadata": meta, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                                       "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "h"}, {"ip": "192.0.2.1"}]}},
        }));
        assert_eq!(direct, converted);
        assert_eq!(direct.ingress, vec![None, Some("192.0.2.1".into())]);
        assert!(direct.load_balancer);
        let annotations: Vec<_> = direct.annotations.iter().map(|(k, _)| k).collect();
        assert_eq!(annotations, ["metallb.io/address-pool"]);
        assert_eq!(direct.labels.get("app"), Some("web"));
        assert_eq!(
            (direct.metadata.labels, direct.metadata.annotations),
            (None, None)
        );

        let (direct, converted) = both::<discoveryv1::EndpointSlice, EndpointSlice>(&json!({
            "metadata": meta, "addressType": "IPv6",
            "endpoints": [{"addresses": ["fd00::1"], "nodeName": "n",
                           "conditions": {"ready": false, "serving": true}}],
        }));
        assert_eq!(direct, converted);
        assert_eq!(direct.service.as_deref(), Some("web"));
        assert_eq!((direct.metadata.labels, direct.metadata.uid), (None, None));
        assert!(direct.endpoints[0].can_serve());

        let (direct, converted) = both::<corev1::Node, Node>(&json!({
            "metadata": {"name": "n", "uid": "u", "labels": {"zone": "a"},
                         "annotations": {"metallb.io/x": "y"}},
            "status": {"addresses": [{"type": "ExternalIP", "address": "203.0.113.1"},
                                     {"type": "Hostname", "address": "n"}],
                       "conditions": [{"type": "NetworkUnavailable", "status": "False"}]},
        }));
        assert_eq!(direct, converted);
        assert_eq!(direct.addresses.len(), 1);
        assert_eq!(
            (direct.metadata.annotations, direct.metadata.uid),
            (None, None)
        );
    }

    /// Input k8s-openapi reads, which the own types must read the same
    /// (found by the fuzz target `watched_objects`): k8s-openapi reads a
    /// missing or null field as its default, required fields too.
    #[test]
    fn reads_what_k8s_openapi_reads() {
        let nodes = [
            // A Node address without `address` (the first crash found).
            json!({"status": {"addresses": [{"type": "InternalIP"}]}}),
            json!({"status": {"addresses": [{"type": null, "address": null}]}}),
            json!({"status": {"conditions": [{"type": "Ready"}, {"status": "True"}]}}),
            json!({"status": {"conditions": [{"type": null, "status": null}]}}),
            json!({"metadata": null, "status": null}),
        ];
        for v in &nodes {
            let (direct, converted) = both::<corev1::Node, Node>(v);
            assert_eq!(direct, converted, "{v}");
        }
        let (direct, converted) = both::<corev1::Node, Node>(&nodes[0]);
        assert_eq!(direct.addresses, [("InternalIP".to_owned(), String::new())]);
        assert_eq!(direct, converted);

        let services = [
            json!({"metadata": null, "spec": null, "status": null}),
            json!({"metadata": {"annotations": null, "labels": null}}),
        ];
        for v in &services {
            let (direct, converted) = both::<corev1::Service, Service>(v);
            assert_eq!(direct, converted, "{v}");
        }

        let slices = [
            json!({"metadata": null, "endpoints": null}),
            json!({"endpoints": [{"addresses": null, "nodeName": "n"}, {}]}),
        ];
        for v in &slices {
            let (direct, converted) = both::<discoveryv1::EndpointSlice, EndpointSlice>(v);
            assert_eq!(direct, converted, "{v}");
        }
    }

    /// The captures from a real apiserver (`testdata/watched/`, made by its
    /// `capture.sh`; the fuzz target's seeds): each reads as its own type
    /// exactly as converted from the k8s-openapi type, and keeps what the
    /// speaker reads of it.
    #[test]
    fn captures_read_as_converted() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/watched");
        let read = |name: &str| -> Value {
            let text = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        files.sort();
        assert_eq!(files.len(), 8, "{files:?}");
        for name in &files {
            let v = read(name);
            let kind = v["kind"].as_str().unwrap_or_default();
            match kind {
                "Node" => {
                    let (direct, converted) = both::<corev1::Node, Node>(&v);
                    assert_eq!(direct, converted, "{name}");
                }
                "Service" => {
                    let (direct, converted) = both::<corev1::Service, Service>(&v);
                    assert_eq!(direct, converted, "{name}");
                }
                "EndpointSlice" => {
                    let (direct, converted) = both::<discoveryv1::EndpointSlice, EndpointSlice>(&v);
                    assert_eq!(direct, converted, "{name}");
                }
                _ => panic!("{name}: unexpected kind {kind:?}"),
            }
        }

        let web: Service = serde_json::from_value(read("service-web.json")).unwrap();
        assert!(web.load_balancer);
        let ingress: Vec<_> = web.ingress.iter().flatten().map(String::as_str).collect();
        assert_eq!(ingress, ["198.51.100.10", "2001:db8:100::10"]);
        let annotations: Vec<_> = web.annotations.iter().map(|(k, _)| k).collect();
        assert_eq!(
            annotations,
            [
                "metallb.io/address-pool",
                "metallb.io/allow-shared-ip",
                "metallb.universe.tf/loadBalancerIPs"
            ]
        );
        let local: Service = serde_json::from_value(read("service-local.json")).unwrap();
        assert_eq!(local.external_traffic_policy, TrafficPolicy::Local);
        assert_eq!(local.ingress, [None, Some("198.51.100.20".to_owned())]);
        assert_eq!(
            local.load_balancer_class.as_deref(),
            Some("metallb.io/metallb")
        );
        let internal: Service = serde_json::from_value(read("service-internal.json")).unwrap();
        assert!(!internal.load_balancer);

        let slice: EndpointSlice =
            serde_json::from_value(read("endpointslice-web-ipv4.json")).unwrap();
        assert_eq!(slice.service.as_deref(), Some("web"));
        let serving: Vec<_> = slice.endpoints.iter().map(Endpoint::can_serve).collect();
        assert_eq!(serving, [true, true, false]);

        let node1: Node = serde_json::from_value(read("node-node1.json")).unwrap();
        assert_eq!(node1.addresses.len(), 3, "the host name is not read");
        assert!(
            node1
                .conditions
                .contains(&("NetworkUnavailable".to_owned(), "False".to_owned()))
        );
        assert_eq!(node1.metadata.uid, None);
    }

    /// Labels: sorted by key whatever the input's order, read by key,
    /// changed by copy (the shared set stays), equal by content, and read
    /// by selectors as the API's maps are.
    #[test]
    fn labels_are_sorted_shared_and_selectable() {
        let a: Labels = [("zone", "a"), ("app", "web"), ("tier", "")]
            .into_iter()
            .collect();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            [("app", "web"), ("tier", ""), ("zone", "a")]
        );
        assert_eq!(
            (a.get("app"), a.get("tier"), a.get("x")),
            (Some("web"), Some(""), None)
        );
        assert_eq!(a.len(), 3);
        let mut b = a.clone();
        assert!(b.ptr_eq(&a));
        b.insert("app", "db");
        b.insert("rack", "r1");
        assert!(!b.ptr_eq(&a));
        assert_eq!(a.get("app"), Some("web"));
        assert_eq!(b.get("app"), Some("db"));
        assert_eq!(
            b.to_map().keys().collect::<Vec<_>>(),
            ["app", "rack", "tier", "zone"]
        );
        let map = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
        assert_eq!(
            Labels::from(map.clone()),
            [("app", "web")].into_iter().collect()
        );
        assert_eq!(
            format!("{:?}", Labels::from(map.clone())),
            format!("{map:?}")
        );
        let empty = Labels::default();
        assert!(empty.is_empty() && empty.ptr_eq(&Labels::from(BTreeMap::new())));

        let selector = crate::model::Selector {
            match_labels: BTreeMap::from([("app".to_owned(), "web".to_owned())]),
            requirements: vec![crate::model::Requirement {
                key: "zone".into(),
                operator: crate::model::Operator::In,
                values: vec!["a".into(), "b".into()],
            }],
        };
        assert!(selector.matches(&a));
        assert!(!selector.matches(&b));
        assert_eq!(selector.matches(&a.to_map()), selector.matches(&a));
        assert_eq!(selector.matches(&b.to_map()), selector.matches(&b));
    }

    /// The interner makes equal sets one `Arc` and equal strings one, keeps
    /// the content, and sweeps what no object holds once its tables have
    /// doubled.
    #[test]
    fn interner_shares_equal_sets_and_sweeps_the_dead() {
        let mut interner = Interner::default();
        let set = |app: &str| -> Labels {
            [("app", app.to_owned()), ("pool", "p".to_owned())]
                .into_iter()
                .collect()
        };
        let a = interner.labels(&set("web"));
        let b = interner.labels(&set("web"));
        let c = interner.labels(&set("db"));
        assert!(a.ptr_eq(&b));
        assert_eq!(a, set("web"));
        assert_eq!(c, set("db"));
        assert!(!a.ptr_eq(&c));
        // The key "app" of both sets is one string.
        let key = |l: &Labels| l.0.as_ref().map(|p| Arc::as_ptr(&p[0].0));
        assert_eq!(key(&a), key(&c));
        assert!(interner.labels(&Labels::default()).is_empty());
        // A set of its own: equal, not the table's, its strings shared.
        let own = interner.strings_of(&set("web"));
        assert_eq!(own, a);
        assert!(!own.ptr_eq(&a));
        assert_eq!(key(&own), key(&a));
        let value = |l: &Labels| l.0.as_ref().map(|p| Arc::as_ptr(&p[0].1));
        assert_eq!(value(&own), value(&a));
        assert!(interner.strings_of(&Labels::default()).is_empty());

        let mut slice = EndpointSlice {
            endpoints: vec![
                Endpoint {
                    node: Some("n1".into()),
                    ..Endpoint::default()
                },
                Endpoint {
                    node: Some("n1".into()),
                    ..Endpoint::default()
                },
                Endpoint::default(),
            ],
            ..EndpointSlice::default()
        };
        let before = slice.clone();
        interner.slice(&mut slice);
        assert_eq!(slice, before);
        let node = |i: usize| slice.endpoints[i].node.as_ref().map(Arc::as_ptr);
        assert_eq!(node(0), node(1));

        // Equal endpoints are one.
        let shared = interner.endpoint(&before.endpoints[0]);
        assert_eq!(*shared, before.endpoints[0]);
        assert!(Arc::ptr_eq(
            &shared,
            &interner.endpoint(&before.endpoints[1])
        ));
        let draining = Endpoint {
            ready: Some(false),
            ..before.endpoints[0].clone()
        };
        assert!(!Arc::ptr_eq(&shared, &interner.endpoint(&draining)));

        // A namespace's place is one, its namespace the table's string.
        let place = interner.place("ns");
        assert!(Arc::ptr_eq(&place, &interner.place("ns")));
        assert!(!Arc::ptr_eq(&place, &interner.place("other")));
        assert!(Arc::ptr_eq(&place.namespace, &interner.string("ns")));
        assert_eq!(place.name, None);
        let gone_place = Arc::downgrade(&interner.place("gone"));

        let mut service = Service {
            labels: set("web"),
            annotations: set("web"),
            ..Service::default()
        };
        interner.service(&mut service);
        assert!(service.labels.ptr_eq(&a) && service.annotations.ptr_eq(&a));

        // Sets no object holds any more are swept: the tables stay within
        // twice what is live.
        for i in 0..5 * SWEEP_FLOOR {
            drop(interner.labels(&set(&format!("gone-{i}"))));
            drop(interner.endpoint(&Endpoint {
                node: Some(format!("gone-{i}").into()),
                ..Endpoint::default()
            }));
        }
        let (sets, strings, endpoints) = interner.len();
        assert!(sets < 2 * SWEEP_FLOOR, "{sets}");
        assert!(strings < 2 * SWEEP_FLOOR, "{strings}");
        assert!(endpoints < 2 * SWEEP_FLOOR, "{endpoints}");
        assert!(
            interner.labels(&set("web")).ptr_eq(&a),
            "a live set is kept"
        );
        assert!(
            Arc::ptr_eq(&interner.endpoint(&before.endpoints[0]), &shared),
            "a live endpoint is kept"
        );
        assert!(
            Arc::ptr_eq(&interner.place("ns"), &place),
            "a live place is kept"
        );
        assert!(gone_place.upgrade().is_none(), "a dead place is swept");
    }
}
