//! Label selectors, parsed: the operator is an enum, so a selector that
//! exists can be evaluated. One definition for the whole workspace: the
//! controller's pool allocation and the speaker's advertisements both match
//! with [`Selector::matches`].

use std::collections::BTreeMap;
use std::fmt;

use crate::meta::LabelSelector;

/// A parsed `metav1.LabelSelector`. The default selector matches every
/// object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// Labels that must have exactly these values (`matchLabels`).
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements, all of which must hold (`matchExpressions`).
    pub requirements: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label relates to `values`.
    pub operator: Operator,
    /// The values of `In` and `NotIn`.
    pub values: Vec<String>,
}

/// A selector operator, as Kubernetes spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// The label is present and its value is one of the values.
    In,
    /// The label is absent, or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// A selector operator other than `In`, `NotIn`, `Exists`, `DoesNotExist`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not one of In, NotIn, Exists, DoesNotExist")]
pub struct UnknownOperator(pub String);

/// A set of labels a selector reads: the value of a key. The maps of the
/// API types are one; the speaker's compact, shared sets
/// ([`crate::watched::Labels`]) another.
pub trait LabelLookup {
    /// The value of `key`, if the set has it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl<T: LabelLookup + ?Sized> LabelLookup for &T {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// Selectors any one of which selects; an empty list selects everything
/// (how MetalLB reads `nodeSelectors`, `serviceSelectors` and the
/// namespace and service selectors of `serviceAllocation`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors(pub Vec<Selector>);

impl Selector {
    /// Parses a selector; only an unknown operator makes it unusable (the
    /// syntax of keys and values is checked by [`crate::validate`]).
    pub fn parse(selector: &LabelSelector) -> Result<Self, UnknownOperator> {
        let requirements = selector
            .match_expressions
            .iter()
            .map(|r| {
                Ok(Requirement {
                    key: r.key.clone(),
                    operator: r.operator.parse()?,
                    values: r.values.clone(),
                })
            })
            .collect::<Result<_, UnknownOperator>>()?;
        Ok(Self {
            match_labels: selector.match_labels.clone(),
            requirements,
        })
    }

    /// Whether `labels` satisfy the selector, as Kubernetes evaluates it:
    /// every `matchLabels` pair and every requirement.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.label(k) == Some(v.as_str()))
            && self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In => value.is_some_and(listed),
            Operator::NotIn => value.is_none_or(|v| !listed(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl std::str::FromStr for Operator {
    type Err = UnknownOperator;

    fn from_str(text: &str) -> Result<Self, UnknownOperator> {
        match text {
            "In" => Ok(Self::In),
            "NotIn" => Ok(Self::NotIn),
            "Exists" => Ok(Self::Exists),
            "DoesNotExist" => Ok(Self::DoesNotExist),
            other => Err(UnknownOperator(other.to_owned())),
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
        })
    }
}

impl Selectors {
    /// Parses a list of selectors; the first unknown operator fails it.
    pub fn parse(list: &[LabelSelector]) -> Result<Self, UnknownOperator> {
        list.iter()
            .map(Selector::parse)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether `labels` pass: any selector matches, or there is none.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.0.is_empty() || self.0.iter().any(|s| s.matches(labels))
    }

    /// Whether no selector is given (everything passes).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The label keys these selectors read ([`Selector::keys`]).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().flat_map(Selector::keys)
    }
}

impl Selector {
    /// The label keys the selector reads: its `matchLabels` keys and the
    /// key of each requirement, whatever its operator (`NotIn` and
    /// `DoesNotExist` read a key's absence: a set without the key is not
    /// the same answer as a set whose key was not kept).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.match_labels
            .keys()
            .chain(self.requirements.iter().map(|r| &r.key))
            .map(String::as_str)
    }
}

impl fmt::Display for Selector {
    /// As kubectl prints a selector: `app=web,zone in (a,b),!legacy`;
    /// the empty selector is `<all>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.requirements {
            parts.push(match r.operator {
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            });
        }
        if parts.is_empty() {
            f.write_str("<all>")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

impl fmt::Display for Selectors {
    /// Each selector in brackets, separated by ` or `; none is `<all>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("<all>");
        }
        let texts: Vec<String> = self.0.iter().map(|s| format!("[{s}]")).collect();
        f.write_str(&texts.join(" or "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::LabelSelectorRequirement;

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

    fn sel(reqs: Vec<LabelSelectorRequirement>, pairs: &[(&str, &str)]) -> Selector {
        Selector::parse(&LabelSelector {
            match_expressions: reqs,
            match_labels: labels(pairs),
        })
        .unwrap()
    }

    #[test]
    fn operators_and_labels() {
        let node = labels(&[("zone", "a"), ("role", "edge")]);
        assert!(Selector::default().matches(&node));
        let edge = [("role", "edge")];
        assert!(sel(vec![req("zone", "In", &["a", "b"])], &edge).matches(&node));
        assert!(!sel(vec![req("zone", "NotIn", &["a"])], &edge).matches(&node));
        assert!(sel(vec![req("rack", "NotIn", &["a"])], &edge).matches(&node));
        assert!(sel(vec![req("zone", "Exists", &[])], &edge).matches(&node));
        assert!(!sel(vec![req("zone", "DoesNotExist", &[])], &edge).matches(&node));
        assert!(!sel(vec![], &edge).matches(&labels(&[("role", "core")])));
        // An empty value is a value: Exists holds, DoesNotExist does not.
        let empty = labels(&[("x", "")]);
        assert!(sel(vec![req("x", "Exists", &[])], &[]).matches(&empty));
        assert!(!sel(vec![req("x", "DoesNotExist", &[])], &[]).matches(&empty));
    }

    #[test]
    fn unknown_operator_is_an_error() {
        let bad = LabelSelector {
            match_expressions: vec![req("zone", "Equals", &["a"])],
            ..LabelSelector::default()
        };
        assert_eq!(Selector::parse(&bad), Err(UnknownOperator("Equals".into())));
        assert_eq!(
            UnknownOperator("Equals".into()).to_string(),
            r#""Equals" is not one of In, NotIn, Exists, DoesNotExist"#
        );
        assert!(Selectors::parse(&[LabelSelector::default(), bad]).is_err());
    }

    #[test]
    fn selectors_print_as_kubectl_writes_them() {
        let s = sel(
            vec![
                req("zone", "In", &["a", "b"]),
                req("rack", "NotIn", &["r9"]),
                req("edge", "Exists", &[]),
                req("legacy", "DoesNotExist", &[]),
            ],
            &[("app", "web")],
        );
        assert_eq!(
            s.to_string(),
            "app=web,zone in (a,b),rack notin (r9),edge,!legacy"
        );
        assert_eq!(Selector::default().to_string(), "<all>");
        assert_eq!(Selectors::default().to_string(), "<all>");
        let two = Selectors(vec![sel(vec![], &[("a", "1")]), sel(vec![], &[("b", "2")])]);
        assert_eq!(two.to_string(), "[a=1] or [b=2]");
    }

    #[test]
    fn a_list_selects_with_any_or_with_none() {
        let node = labels(&[("rack", "r1")]);
        assert!(Selectors::default().matches(&node));
        let r2 = sel(vec![], &[("rack", "r2")]);
        let r1 = sel(vec![], &[("rack", "r1")]);
        assert!(!Selectors(vec![r2.clone()]).matches(&node));
        assert!(Selectors(vec![r2, r1]).matches(&node));
    }
}
