use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The (empty) spec of a ServiceBGPStatus; everything is in the status.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "ServiceBGPStatus",
    plural = "servicebgpstatuses",
    namespaced,
    status = "ServiceBGPStatusStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ServiceBGPStatus exposes the BGP peers a service is configured to be advertised to, per relevant node.",
    printcolumn(name = "Node", type_ = "string", json_path = ".status.node"),
    printcolumn(
        name = "Service Name",
        type_ = "string",
        json_path = ".status.serviceName"
    ),
    printcolumn(
        name = "Service Namespace",
        type_ = "string",
        json_path = ".status.serviceNamespace"
    )
)]
pub struct ServiceBGPStatusSpec {}

/// The peers a node announces a service to (MetalLB's
/// `MetalLBServiceBGPStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBGPStatusStatus {
    /// Node indicates the node announcing the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// ServiceName indicates the service this status represents.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    /// ServiceNamespace indicates the namespace of the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_namespace: String,
    /// Peers indicate the BGP peers for which the service is configured to be
    /// advertised to; whether it actually is depends on the session state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
}
