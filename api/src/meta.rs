//! The Kubernetes meta/core types that MetalLB's CRDs embed.
//!
//! These mirror `metav1.LabelSelector`, `corev1.SecretReference` and
//! `metav1.Condition` field for field, with the same schema markers
//! (`x-kubernetes-map-type: atomic` and so on), so that objects written for
//! MetalLB read and apply unchanged. They are our own types rather than
//! `k8s-openapi`'s because those carry no `JsonSchema` without an extra
//! feature; [`From`] impls convert both ways.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A label query over a set of resources (`metav1.LabelSelector`).
///
/// The result of `matchLabels` and `matchExpressions` are ANDed. An empty
/// label selector matches all objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct LabelSelector {
    /// matchExpressions is a list of label selector requirements. The
    /// requirements are ANDed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// matchLabels is a map of {key,value} pairs. A single {key,value} in the
    /// matchLabels map is equivalent to an element of matchExpressions, whose
    /// key field is "key", the operator is "In", and the values array contains
    /// only "value".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// One requirement of a LabelSelector (`metav1.LabelSelectorRequirement`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// key is the label key that the selector applies to.
    pub key: String,
    /// operator represents a key's relationship to a set of values. Valid
    /// operators are In, NotIn, Exists and DoesNotExist.
    pub operator: String,
    /// values is an array of string values. If the operator is In or NotIn,
    /// the values array must be non-empty. If the operator is Exists or
    /// DoesNotExist, the values array must be empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Vec<String>,
}

/// A reference to a Secret by name and namespace (`corev1.SecretReference`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct SecretReference {
    /// name is unique within a namespace to reference a secret resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// namespace defines the space within which the secret name must be unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// One aspect of an object's current state (`metav1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// lastTransitionTime is the last time the condition changed from one
    /// status to another (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    /// message is a human readable message indicating details about the
    /// transition. This may be an empty string.
    #[schemars(length(max = 32768))]
    pub message: String,
    /// observedGeneration represents the .metadata.generation that the
    /// condition was set based upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// reason contains a programmatic identifier indicating the reason for the
    /// condition's last transition, in CamelCase.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// status of the condition, one of True, False, Unknown.
    pub status: ConditionStatus,
    /// type of condition in CamelCase or in foo.example.com/CamelCase.
    #[serde(rename = "type")]
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
}

/// The status of a Condition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    #[default]
    Unknown,
}

impl From<LabelSelector> for metav1::LabelSelector {
    fn from(s: LabelSelector) -> Self {
        let requirements = s
            .match_expressions
            .into_iter()
            .map(|r| metav1::LabelSelectorRequirement {
                key: r.key,
                operator: r.operator,
                values: (!r.values.is_empty()).then_some(r.values),
            })
            .collect::<Vec<_>>();
        Self {
            match_expressions: (!requirements.is_empty()).then_some(requirements),
            match_labels: (!s.match_labels.is_empty()).then_some(s.match_labels),
        }
    }
}

impl From<metav1::LabelSelector> for LabelSelector {
    fn from(s: metav1::LabelSelector) -> Self {
        Self {
            match_expressions: s
                .match_expressions
                .unwrap_or_default()
                .into_iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key,
                    operator: r.operator,
                    values: r.values.unwrap_or_default(),
                })
                .collect(),
            match_labels: s.match_labels.unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.iter().map(|v| (*v).into()).collect(),
        }
    }

    #[test]
    fn converts_to_and_from_k8s_openapi() {
        let ours = LabelSelector {
            match_expressions: vec![req("zone", "In", &["a"]), req("x", "Exists", &[])],
            match_labels: labels(&[("role", "edge")]),
        };
        let theirs = metav1::LabelSelector::from(ours.clone());
        assert_eq!(theirs.match_expressions.as_ref().unwrap()[1].values, None);
        assert_eq!(LabelSelector::from(theirs), ours);
    }
}
