use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The (empty) spec of a ServiceL2Status; everything is in the status.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "ServiceL2Status",
    plural = "servicel2statuses",
    namespaced,
    status = "ServiceL2StatusStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ServiceL2Status reveals the actual traffic status of loadbalancer services in layer2 mode.",
    printcolumn(name = "Allocated Node", type_ = "string", json_path = ".status.node"),
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
pub struct ServiceL2StatusSpec {}

/// Which node answers for a service in layer 2 mode
/// (MetalLB's `MetalLBServiceL2Status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceL2StatusStatus {
    /// Node indicates the node that receives the directed traffic.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// ServiceName indicates the service this status represents.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    /// ServiceNamespace indicates the namespace of the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_namespace: String,
    /// Interfaces indicates the interfaces that receive the directed traffic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceInfo>,
}

/// A network interface of a layer 2 announcement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InterfaceInfo {
    /// Name the name of network interface card.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}
