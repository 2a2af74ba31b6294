use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec of a BFDProfile: BFD session settings a BGPPeer can use.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "BFDProfile",
    namespaced,
    status = "BFDProfileStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "BFDProfile represents the settings of the bfd session that can be optionally associated with a BGP session.",
    printcolumn(
        name = "Passive Mode",
        type_ = "boolean",
        json_path = ".spec.passiveMode"
    ),
    printcolumn(
        name = "Transmit Interval",
        type_ = "integer",
        json_path = ".spec.transmitInterval"
    ),
    printcolumn(
        name = "Receive Interval",
        type_ = "integer",
        json_path = ".spec.receiveInterval"
    ),
    printcolumn(
        name = "Multiplier",
        type_ = "integer",
        json_path = ".spec.detectMultiplier"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BFDProfileSpec {
    /// The minimum interval that this system is capable of receiving control
    /// packets in milliseconds. Defaults to 300ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub receive_interval: Option<u32>,
    /// The minimum transmission interval (less jitter) that this system wants
    /// to use to send BFD control packets in milliseconds. Defaults to 300ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub transmit_interval: Option<u32>,
    /// Configures the detection multiplier to determine packet loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 255))]
    pub detect_multiplier: Option<u32>,
    /// Configures the minimal echo receive transmission interval that this
    /// system is capable of handling in milliseconds. Defaults to 50ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub echo_interval: Option<u32>,
    /// Enables or disables the echo transmission mode. Disabled by default,
    /// and not supported on multi hops setups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo_mode: Option<bool>,
    /// Mark session as passive: a passive session will not attempt to start
    /// the connection and will wait for control packets from peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive_mode: Option<bool>,
    /// For multi hop sessions only: configure the minimum expected TTL for an
    /// incoming BFD control packet.
    #[serde(
        rename = "minimumTtl",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 254))]
    pub minimum_ttl: Option<u32>,
}

/// The observed state of a BFDProfile (none yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BFDProfileStatus {}
