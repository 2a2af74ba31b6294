//! The node-local view of the cluster that announcement decisions read:
//! plain data, built by [`super::k8s`] from Kubernetes objects or by the
//! file source from YAML. No I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

pub use api::model::ObjectKey;
use api::model::{Model, Secrets};
pub use api::watched::{Endpoint, Labels, TrafficPolicy};

pub use super::coexist::MetallbSpeakers;

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
    /// Labels, for node selectors.
    pub labels: BTreeMap<String, String>,
    /// Condition statuses by type, such as `NetworkUnavailable -> "True"`.
    pub conditions: BTreeMap<String, String>,
    /// Addresses from `status.addresses`, InternalIP ones first; the first
    /// IPv4 one is the default BGP router ID.
    pub addresses: Vec<IpAddr>,
}

impl Node {
    /// Whether the `NetworkUnavailable` condition is `True`.
    pub fn network_unavailable(&self) -> bool {
        self.conditions
            .get(NETWORK_UNAVAILABLE)
            .is_some_and(|s| s == "True")
    }
}

/// A Service, with what decisions read of it and its EndpointSlices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Service {
    /// Namespace and name.
    pub key: ObjectKey,
    /// Labels, for service selectors: the watched Service's, shared.
    pub labels: Labels,
    /// MetalLB's annotations (`metallb.io/ip-allocated-from-pool`,
    /// `metallb.io/allow-shared-ip`): the watched Service's, shared.
    pub annotations: Labels,
    /// `spec.type` is `LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`.
    pub load_balancer_class: Option<String>,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: TrafficPolicy,
    /// The IPs of `status.loadBalancer.ingress`, in order (the first one
    /// seeds the layer 2 election).
    pub ingress: Vec<IpAddr>,
    /// The endpoints of the service's EndpointSlices.
    pub endpoints: Vec<Endpoint>,
}

impl Service {
    /// Whether some endpoint, on any node, can serve.
    pub fn has_serving_endpoint(&self) -> bool {
        self.endpoints.iter().any(Endpoint::can_serve)
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
