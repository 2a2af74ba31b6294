use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::LabelSelector;

/// The spec of a BGPAdvertisement: how the selected pools are announced
/// over BGP.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "BGPAdvertisement",
    namespaced,
    status = "BGPAdvertisementStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "BGPAdvertisement allows to advertise the IPs coming from the selected IPAddressPools via BGP, setting the parameters of the BGP Advertisement.",
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
    printcolumn(name = "Peers", type_ = "string", json_path = ".spec.peers"),
    printcolumn(
        name = "Node Selectors",
        type_ = "string",
        json_path = ".spec.nodeSelectors",
        priority = 10
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BGPAdvertisementSpec {
    /// The aggregation-length advertisement option lets you "roll up" the
    /// /32s into a larger prefix. Defaults to 32. Works for IPv4 addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32), extend("default" = 32))]
    pub aggregation_length: Option<i32>,
    /// The aggregation-length advertisement option lets you "roll up" the
    /// /128s into a larger prefix. Defaults to 128. Works for IPv6 addresses.
    #[serde(
        rename = "aggregationLengthV6",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 128), extend("default" = 128))]
    pub aggregation_length_v6: Option<i32>,
    /// The BGP LOCAL_PREF attribute which is used by BGP best path algorithm;
    /// a path with higher localpref is preferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_pref: Option<u32>,
    /// The BGP communities to be associated with the announcement. Each item
    /// can be a standard community of the form 1234:1234, a large community
    /// of the form large:1234:1234:1234 or the name of an alias defined in
    /// the Community CRD.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communities: Vec<String>,
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
    /// Peers limits the bgppeer to advertise the ips of the selected pools
    /// to. When empty, the loadbalancer IP is announced to all the BGPPeers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    /// ServiceSelectors limits the set of services that will be advertised
    /// via this advertisement. Mutually exclusive with a non-default
    /// aggregationLength or aggregationLengthV6.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_selectors: Vec<LabelSelector>,
}

/// The observed state of a BGPAdvertisement (none yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BGPAdvertisementStatus {}
