use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::Condition;

/// The (empty) top-level fields of a ConfigurationState: it is a
/// status-only kind with no `spec`, as in MetalLB.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "ConfigurationState",
    namespaced,
    no_spec,
    status = "ConfigurationStateStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ConfigurationState is a status-only CRD that reports configuration validation results from MetalLB components.",
    printcolumn(name = "Result", type_ = "string", json_path = ".status.result"),
    printcolumn(
        name = "ErrorSummary",
        type_ = "string",
        json_path = ".status.errorSummary"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct ConfigurationStateSpec {}

/// A component's verdict on the configuration it read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationStateStatus {
    /// Result indicates the configuration validation result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ConfigurationResult>,
    /// ErrorSummary contains the aggregated error messages from
    /// reconciliation failures. Empty when Result is "Valid".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_summary: String,
    /// Conditions contains the status conditions from the reconcilers running
    /// in this component.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The outcome of validating a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConfigurationResult {
    /// The configuration was successfully validated.
    Valid,
    /// The configuration has errors.
    Invalid,
    /// The component has not reported a state.
    Unknown,
}
