use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::{LabelSelector, SecretReference};

/// The spec of a BGPPeer: one BGP session per selected node.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta2",
    kind = "BGPPeer",
    namespaced,
    status = "BGPPeerStatus",
    derive = "PartialEq",
    derive = "Default",
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
    /// AS number to expect from the remote end of the session. ASN and
    /// DynamicASN are mutually exclusive and one of them must be specified;
    /// 0 means unset, as in MetalLB.
    #[serde(rename = "peerASN", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 4294967295_i64))]
    pub peer_asn: Option<u32>,
    /// LocalASN advertises a different AS number to the peer (BGP local-as),
    /// overriding myASN for this session. Not supported in native BGP mode.
    #[serde(rename = "localASN", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4294967295_i64))]
    pub local_asn: Option<u32>,
    /// DynamicASN detects the AS number to use for the remote end of the
    /// session: internal (must equal myASN) or external (must differ).
    #[serde(
        rename = "dynamicASN",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub dynamic_asn: Option<DynamicASNMode>,
    /// Address to dial when establishing the session. Address and Interface
    /// are mutually exclusive and one of them must be specified.
    #[serde(
        rename = "peerAddress",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub peer_address: String,
    /// Interface is the node interface over which the unnumbered BGP peering
    /// will be established.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interface: String,
    /// Source address to use when establishing the session.
    #[serde(
        rename = "sourceAddress",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub source_address: String,
    /// Port to dial when establishing the session.
    #[serde(rename = "peerPort", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16384), extend("default" = 179))]
    pub peer_port: Option<u16>,
    /// Requested BGP hold time, per RFC4271 (a Go duration such as "90s").
    #[serde(rename = "holdTime", default, skip_serializing_if = "Option::is_none")]
    pub hold_time: Option<String>,
    /// Requested BGP keepalive time, per RFC4271 (a Go duration).
    #[serde(
        rename = "keepaliveTime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub keepalive_time: Option<String>,
    /// Requested BGP connect time: how long BGP waits between connection
    /// attempts to a neighbor (a Go duration).
    #[serde(
        rename = "connectTime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub connect_time: Option<String>,
    /// BGP router ID to advertise to the peer.
    #[serde(rename = "routerID", default, skip_serializing_if = "String::is_empty")]
    pub router_id: String,
    /// Only connect to this peer on nodes that match one of these selectors.
    #[serde(
        rename = "nodeSelectors",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub node_selectors: Vec<LabelSelector>,
    /// Authentication password for routers enforcing TCP MD5 authenticated
    /// sessions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password: String,
    /// passwordSecret is name of the authentication secret for BGP Peer. The
    /// secret must be of type "kubernetes.io/basic-auth", and created in the
    /// same namespace as the MetalLB deployment, with the key "password".
    #[serde(
        rename = "passwordSecret",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub password_secret: Option<SecretReference>,
    /// The name of the BFD Profile to be used for the BFD session associated
    /// to the BGP session. If not set, the BFD session won't be set up.
    #[serde(
        rename = "bfdProfile",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub bfd_profile: String,
    /// EnableGracefulRestart allows BGP peer to continue to forward data
    /// packets along known routes while the routing protocol information is
    /// being restored. Immutable.
    #[serde(
        rename = "enableGracefulRestart",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_graceful_restart: Option<bool>,
    /// To set if the BGPPeer is multi-hops away.
    #[serde(
        rename = "ebgpMultiHop",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub ebgp_multi_hop: bool,
    /// To set if we want to peer with the BGPPeer using an interface
    /// belonging to a host vrf.
    #[serde(rename = "vrf", default, skip_serializing_if = "String::is_empty")]
    pub vrf: String,
    /// Disable MP BGP, separating IPv4 and IPv6 route exchanges into distinct
    /// sessions. Deprecated in favor of dualStackAddressFamily.
    #[serde(rename = "disableMP", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub disable_mp: Option<bool>,
    /// Enable the neighbor for both IP families, advertising IPv4 prefixes
    /// over IPv6 sessions and vice versa.
    #[serde(
        rename = "dualStackAddressFamily",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("default" = false))]
    pub dual_stack_address_family: Option<bool>,
}

/// How the remote AS number is found when `peerASN` is not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DynamicASNMode {
    /// The neighbor's ASN must equal myASN (iBGP).
    Internal,
    /// The neighbor's ASN must differ from myASN (eBGP).
    External,
}

/// The observed state of a BGPPeer (none yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BGPPeerStatus {}
