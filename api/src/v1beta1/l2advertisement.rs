use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::LabelSelector;

/// The spec of an L2Advertisement: which pools to answer ARP/NDP for,
/// from which nodes and interfaces.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "L2Advertisement",
    namespaced,
    status = "L2AdvertisementStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "L2Advertisement allows to advertise the LoadBalancer IPs provided by the selected pools via L2.",
    printcolumn(
        name = "IPAddressPools",
        type_ = "string",
        json_path = ".spec.ipAddressPools"
    ),
    printcolumn(
        name = "IPAddressPool Selectors",
        type_ = "string",
        json_path = ".spec.ipAddressPoolSelectors"
    ),
    printcolumn(name = "Interfaces", type_ = "string", json_path = ".spec.interfaces"),
    printcolumn(
        name = "Node Selectors",
        type_ = "string",
        json_path = ".spec.nodeSelectors",
        priority = 10
    )
)]
#[serde(rename_all = "camelCase")]
pub struct L2AdvertisementSpec {
    /// The list of IPAddressPools to advertise via this advertisement,
    /// selected by name.
    #[serde(
        rename = "ipAddressPools",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ip_address_pools: Vec<String>,
    /// A selector for the IPAddressPools which would get advertised via this
    /// advertisement. If no IPAddressPool is selected by this or by the list,
    /// the advertisement is applied to all the IPAddressPools.
    #[serde(
        rename = "ipAddressPoolSelectors",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ip_address_pool_selectors: Vec<LabelSelector>,
    /// NodeSelectors allows to limit the nodes to announce as next hops for
    /// the LoadBalancer IP. When empty, all the nodes are announced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_selectors: Vec<LabelSelector>,
    /// A list of interfaces to announce from. The LB IP will be announced only
    /// from these interfaces. If unset, from all the interfaces on the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<String>,
    /// ServiceSelectors limits the set of services that will be advertised
    /// via this advertisement. If empty, all services from the selected pools
    /// are advertised.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_selectors: Vec<LabelSelector>,
    /// PreferredNodeSelectors gives soft node preferences for L2 leader
    /// election; matching nodes are preferred as the announcing node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_selectors: Vec<PreferredNodeSelector>,
}

/// A weighted soft preference for nodes, like `PreferredSchedulingTerm`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PreferredNodeSelector {
    /// Weight associated with matching the corresponding preference, in the
    /// range 1-100. Weights from selectors that both match a node sum together.
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
    /// Preference selects the nodes that receive this weight. An empty
    /// selector matches every node.
    pub preference: LabelSelector,
}

/// The observed state of an L2Advertisement (none yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct L2AdvertisementStatus {}
