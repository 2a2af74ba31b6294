//! The node-local view of the cluster that announcement decisions read:
//! plain data, built by [`super::k8s`] from Kubernetes objects or by the
//! file source from YAML. No I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

pub use api::model::ObjectKey;
use api::model::{Model, Secrets};
pub use api::watched::{Endpoint, Labels, TrafficPolicy};

pub use super::coexist::MetallbSpeakers;
use super::stored;

/// Everything this node knows when it decides what to announce.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    /// The name of this node (the speaker's `NODE_NAME`).
    pub node: String,
    /// The cluster's nodes, by name. Shared: the reconcile hands on the
    /// last map while no Node changed, which the keyed state compares by
    /// pointer first.
    pub nodes: Arc<BTreeMap<String, Node>>,
    /// The configuration (pools, peers, advertisements, BFD profiles),
    /// parsed.
    pub model: Arc<Model>,
    /// Values of the Secrets that BGPPeers name in `passwordSecret` (the
    /// `password` key), by namespace and name.
    pub secrets: Secrets,
    /// The services, with their endpoints. Shared: a service that did not
    /// change keeps its `Arc` from one view to the next
    /// ([`super::k8s::Converted`]), which the keyed state compares first.
    pub services: Vec<Arc<Service>>,
    /// The live memberlist members, by node name; `None` when memberlist is
    /// disabled, in which case every node is assumed to run a speaker (as
    /// MetalLB does).
    pub members: Option<BTreeSet<String>>,
    /// This node's memberlist has seeds but reaches no member: it cannot
    /// tell a dead node from one it cannot hear.
    pub isolated: bool,
    /// What the Kubernetes API shows of the other speakers, which an
    /// isolated node trusts over its own empty member list; `None` in file
    /// mode.
    pub api_speakers: Option<Arc<ApiSpeakers>>,
    /// The `loadBalancerClass` this speaker serves; `None` serves services
    /// that have no class (MetalLB's `--lb-class`).
    pub load_balancer_class: Option<String>,
    /// Announce from nodes labelled
    /// `node.kubernetes.io/exclude-from-external-load-balancers` anyway
    /// (MetalLB's `--ignore-exclude-lb`).
    pub ignore_exclude_lb: bool,
}

impl ClusterView {
    /// This node, if the view has it.
    pub fn this_node(&self) -> Option<&Node> {
        self.nodes.get(&self.node)
    }

    /// Why `node` must announce nothing, if it must not: a NetworkUnavailable
    /// condition, or the exclusion label (unless ignored). A node missing from
    /// the view has neither, as in MetalLB.
    pub fn exclusion(&self, node: &str) -> Option<Exclusion> {
        let node = self.nodes.get(node)?;
        if node.network_unavailable() {
            Some(Exclusion::NetworkUnavailable)
        } else if !self.ignore_exclude_lb && node.labels.contains_key(EXCLUDE_LABEL) {
            Some(Exclusion::ExcludeLabel)
        } else {
            None
        }
    }
}

/// The other speakers as the Kubernetes API shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiSpeakers {
    /// Nodes whose speaker Pod is Ready and not being deleted.
    pub ready: BTreeSet<String>,
    /// By service, the nodes whose ServiceL2Status says they answer for
    /// it. Read only while this node is isolated.
    pub l2_announcers: BTreeMap<ObjectKey, BTreeSet<String>>,
    /// MetalLB's speakers, while ferrolb replaces them
    /// (`--metallb-speaker-labels`); `None` when not asked to look.
    pub metallb: Option<MetallbSpeakers>,
}

/// Why a node announces nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exclusion {
    /// The node's `NetworkUnavailable` condition is `True`.
    NetworkUnavailable,
    /// The node has the label
    /// `node.kubernetes.io/exclude-from-external-load-balancers`.
    ExcludeLabel,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NetworkUnavailable => f.write_str("its NetworkUnavailable condition is True"),
            Self::ExcludeLabel => write!(f, "it has the label {EXCLUDE_LABEL}"),
        }
    }
}

/// A cluster node, as far as announcements care.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Labels, for node selectors: the record's, shared.
    pub labels: Labels,
    /// Condition statuses by type, such as `NetworkUnavailable -> "True"`:
    /// the record's, shared.
    pub conditions: Labels,
    /// Addresses from `status.addresses`, InternalIP ones first; the first
    /// IPv4 one is the default BGP router ID.
    pub addresses: Vec<IpAddr>,
}

impl Node {
    /// Whether the `NetworkUnavailable` condition is `True`.
    pub fn network_unavailable(&self) -> bool {
        self.conditions.get(NETWORK_UNAVAILABLE) == Some("True")
    }
}

/// A Service, with what decisions read of it and its EndpointSlices: one
/// copy of each. The record ([`stored::Service`]: key, labels,
/// annotations, type, class, traffic policy, ingress IPs) is the store's,
/// shared, and read through `Deref`; the view adds the EndpointSlices, the
/// store's, shared (their endpoints are not copied out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Service {
    /// The Service as the speaker keeps it, shared with the store.
    pub record: Arc<stored::Service>,
    /// The endpoints of the service's EndpointSlices.
    pub endpoints: Endpoints,
}

impl Deref for Service {
    type Target = stored::Service;

    fn deref(&self) -> &stored::Service {
        &self.record
    }
}

impl DerefMut for Service {
    /// The record to change: copied first if shared (`Arc::make_mut`), so
    /// the store's is never changed through a view.
    fn deref_mut(&mut self) -> &mut stored::Service {
        Arc::make_mut(&mut self.record)
    }
}

/// A Service's endpoints: the lists of its EndpointSlices, shared with the
/// store, in the order of the slices' names. Two are equal when their
/// endpoints are, in order, whatever slices hold them.
#[derive(Clone, Default)]
pub struct Endpoints(Option<Arc<[stored::EndpointSlice]>>);

impl Endpoints {
    /// The endpoints of these slices, in this order.
    pub fn of_slices(slices: Arc<[stored::EndpointSlice]>) -> Self {
        Self((!slices.is_empty()).then_some(slices))
    }

    /// The endpoints, slice by slice: the store's, read as
    /// [`Endpoint`]s (`Deref`).
    pub fn iter(&self) -> impl Iterator<Item = &stored::Endpoint> {
        self.0
            .as_deref()
            .unwrap_or_default()
            .iter()
            .flat_map(|slice| slice.endpoints())
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl FromIterator<Endpoint> for Endpoints {
    /// Endpoints held by no EndpointSlice of the store (tests, the
    /// benchmarks): one slice of no name holds them.
    fn from_iter<I: IntoIterator<Item = Endpoint>>(endpoints: I) -> Self {
        let endpoints = endpoints.into_iter().map(stored::Endpoint::from);
        let slice = stored::EndpointSlice::new("".into(), "", None, endpoints.collect());
        Self::of_slices(Arc::new([slice]))
    }
}

impl PartialEq for Endpoints {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Endpoints {}

impl fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Service {
    /// Whether some endpoint, on any node, can serve.
    pub fn has_serving_endpoint(&self) -> bool {
        self.endpoints.iter().any(|e| e.can_serve())
    }

    /// Whether an endpoint on `node` can serve.
    pub fn has_serving_endpoint_on(&self, node: &str) -> bool {
        self.endpoints
            .iter()
            .any(|e| e.can_serve() && e.node.as_deref() == Some(node))
    }

    /// The nodes that have an endpoint that can serve.
    pub fn nodes_with_serving_endpoints(&self) -> BTreeSet<&str> {
        self.endpoints
            .iter()
            .filter(|e| e.can_serve())
            .filter_map(|e| e.node.as_deref())
            .collect()
    }

    /// The `metallb.io/allow-shared-ip` key, if the service shares its IP.
    pub fn shared_ip_key(&self) -> Option<&str> {
        SHARED_IP_ANNOTATIONS
            .iter()
            .find_map(|a| self.annotations.get(a))
    }
}

/// The label that keeps a node from announcing.
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// The annotation the controller sets to the pool an IP came from.
pub const POOL_ANNOTATION: &str = "metallb.io/ip-allocated-from-pool";
/// The node condition that keeps a node from announcing.
const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// The sharing annotation, current and deprecated spelling.
const SHARED_IP_ANNOTATIONS: [&str; 2] = [
    "metallb.io/allow-shared-ip",
    "metallb.universe.tf/allow-shared-ip",
];
