use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec of a Community: named aliases for BGP communities.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "Community",
    plural = "communities",
    namespaced,
    status = "CommunityStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Community is a collection of aliases for communities. Users can define named aliases to be used in the BGPAdvertisement CRD."
)]
pub struct CommunitySpec {
    /// The aliases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communities: Vec<CommunityAlias>,
}

/// One named community value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommunityAlias {
    /// The name of the alias for the community.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The BGP community value corresponding to the given name. Can be a
    /// standard community of the form 1234:1234 or a large community of the
    /// form large:1234:1234:1234.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// The observed state of a Community (none yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommunityStatus {}
