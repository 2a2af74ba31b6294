//! Kubernetes label selectors (matchLabels and matchExpressions), as
//! pure data for the allocator.

use std::collections::BTreeMap;

/// A label selector. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Labels that must have exactly these values.
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements, all of which must hold.
    pub expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: Operator,
    /// Values for `In` and `NotIn`.
    pub values: Vec<String>,
}

/// Selector operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl Selector {
    /// Whether `labels` satisfy the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.op {
                    Operator::In => value.is_some_and(|v| r.values.contains(v)),
                    Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn match_labels_and_expressions() {
        let any = Selector::default();
        assert!(any.matches(&labels(&[])));
        let s = Selector {
            match_labels: labels(&[("team", "a")]),
            expressions: vec![
                Requirement {
                    key: "tier".into(),
                    op: Operator::In,
                    values: vec!["web".into(), "api".into()],
                },
                Requirement {
                    key: "legacy".into(),
                    op: Operator::DoesNotExist,
                    values: vec![],
                },
                Requirement {
                    key: "env".into(),
                    op: Operator::NotIn,
                    values: vec!["dev".into()],
                },
            ],
        };
        assert!(s.matches(&labels(&[("team", "a"), ("tier", "web")])));
        assert!(s.matches(&labels(&[("team", "a"), ("tier", "api"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[("team", "b"), ("tier", "web")])));
        assert!(!s.matches(&labels(&[("team", "a"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("team", "a"), ("tier", "web"), ("legacy", "")])));
        assert!(!s.matches(&labels(&[("team", "a"), ("tier", "web"), ("env", "dev")])));
        let exists = Selector {
            expressions: vec![Requirement {
                key: "x".into(),
                op: Operator::Exists,
                values: vec![],
            }],
            ..Selector::default()
        };
        assert!(exists.matches(&labels(&[("x", "")])));
        assert!(!exists.matches(&labels(&[])));
    }
}
