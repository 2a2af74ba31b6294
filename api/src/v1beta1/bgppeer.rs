use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec of a v1beta1 BGPPeer: served for old manifests, deprecated.
///
/// Every field here exists with the same name, type and meaning in the
/// v1beta2 spec, which is why the CRD converts between the two without a
/// webhook (see the `crd` module).
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "BGPPeer",
    namespaced,
    status = "BGPPeerStatus",
    derive = "PartialEq",
    derive = "Default",
    storage = false,
    deprecated = "v1beta1 is deprecated, please use v1beta2",
    doc = "BGPPeer is the Schema for the peers API.",
    printcolumn(name = "Address", type_ = "string", json_path = ".spec.peerAddress"),
    printcolumn(name = "ASN", type_ = "string", json_path = ".spec.peerASN"),
    printcolumn(name = "BFD Profile", type_ = "string", json_path = ".spec.bfdProfile"),
    printcolumn(
        name = "Multi Hops",
        type_ = "string",
        json_path = ".spec.ebgpMultiHop"
    )
)]
pub struct BGPPeerSpec {
    /// AS number to use for the local end of the session.
    #[serde(rename = "myASN")]
    #[schemars(range(min = 0, max = 4294967295_i64))]
    pub my_asn: u32,
    /// AS number to expect from the remote end of the session.
    #[serde(rename = "peerASN")]
    #[schemars(range(min = 0, max = 4294967295_i64))]
    pub peer_asn: u32,
    /// Address to dial when establishing the session.
    #[serde(rename = "peerAddress")]
    pub peer_address: String,
    /// Source address to use when establishing the session.
    #[serde(
        rename = "sourceAddress",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub source_address: String,
    /// Port to dial when establishing the session.
    #[serde(rename = "peerPort", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 16384))]
    pub peer_port: Option<u16>,
    /// Requested BGP hold time, per RFC4271.
    #[serde(rename = "holdTime", default, skip_serializing_if = "Option::is_none")]
    pub hold_time: Option<String>,
    /// Requested BGP keepalive time, per RFC4271.
    #[serde(
        rename = "keepaliveTime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub keepalive_time: Option<String>,
    /// BGP router ID to advertise to the peer.
    #[serde(rename = "routerID", default, skip_serializing_if = "String::is_empty")]
    pub router_id: String,
    /// Only connect to this peer on nodes that match one of these selectors.
    #[serde(
        rename = "nodeSelectors",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub node_selectors: Vec<NodeSelector>,
    /// Authentication password for routers enforcing TCP MD5 authenticated
    /// sessions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password: String,
    /// The name of the BFD Profile to be used for the BFD session associated
    /// to the BGP session.
    #[serde(
        rename = "bfdProfile",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub bfd_profile: String,
    /// EBGP peer is multi-hops away.
    #[serde(
        rename = "ebgpMultiHop",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub ebgp_multi_hop: bool,
}

/// v1beta1's own node selector; the same shape as a `LabelSelector`
/// except that `values` is required, so it converts without loss.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    /// Labels the node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements on the node's labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<MatchExpression>,
}

/// One requirement of a v1beta1 NodeSelector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatchExpression {
    /// The label key.
    pub key: String,
    /// In, NotIn, Exists or DoesNotExist.
    pub operator: String,
    /// The values to compare with.
    #[schemars(length(min = 1))]
    pub values: Vec<String>,
}

/// The observed state of a BGPPeer (none yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BGPPeerStatus {}

/// The conversion the apiserver performs under the `None` strategy, spelled
/// out: every v1beta1 field maps to the v1beta2 field of the same name.
impl From<BGPPeer> for crate::v1beta2::BGPPeer {
    fn from(old: BGPPeer) -> Self {
        let s = old.spec;
        let node_selectors = s
            .node_selectors
            .into_iter()
            .map(|sel| crate::meta::LabelSelector {
                match_labels: sel.match_labels,
                match_expressions: sel
                    .match_expressions
                    .into_iter()
                    .map(|e| crate::meta::LabelSelectorRequirement {
                        key: e.key,
                        operator: e.operator,
                        values: e.values,
                    })
                    .collect(),
            })
            .collect();
        Self {
            metadata: old.metadata,
            spec: crate::v1beta2::BGPPeerSpec {
                my_asn: s.my_asn,
                peer_asn: Some(s.peer_asn),
                peer_address: s.peer_address,
                source_address: s.source_address,
                peer_port: s.peer_port,
                hold_time: s.hold_time,
                keepalive_time: s.keepalive_time,
                router_id: s.router_id,
                node_selectors,
                password: s.password,
                bfd_profile: s.bfd_profile,
                ebgp_multi_hop: s.ebgp_multi_hop,
                ..Default::default()
            },
            status: old.status.map(|_| crate::v1beta2::BGPPeerStatus {}),
        }
    }
}
