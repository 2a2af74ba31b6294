//! The pools in force: each pool's last good version.
//!
//! An `IPAddressPool` can pass the CRD's CEL rules and still be refused
//! here: a reversed IPv6 range (CEL checks the order of IPv4 ranges only),
//! or addresses that overlap another pool's (no CEL rule sees two
//! objects). Dropping such a pool would release every address it gave, and
//! the allocator would move those services. Instead [`Keeper`] keeps, per
//! pool, the last version that was accepted, and reports the refused one;
//! only deleting the object takes a pool away.
//!
//! Pure: objects in, the pools in force and the problems out.

use std::collections::BTreeMap;

use api::v1beta1::IPAddressPool;
use kube::ResourceExt;

use crate::alloc::Pool;

/// Why a pool object is not the version in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The pool.
    pub pool: String,
    /// What is wrong with it, each problem with its field.
    pub message: String,
    /// Whether an earlier version stays in force (else the pool has none).
    pub kept: bool,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.kept {
            "keeping its last good version"
        } else {
            "not in use: it never had a valid version"
        };
        write!(f, "IPAddressPool {:?}: {}; {what}", self.pool, self.message)
    }
}

/// The result of [`Keeper::update`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// The pools in force, by name.
    pub pools: Vec<Pool>,
    /// The pool objects that are not in force as written, by name.
    pub refused: Vec<Refused>,
}

impl Update {
    /// Whether some pool has no version in force at all: the addresses a
    /// service holds may belong to it.
    pub fn unresolved(&self) -> bool {
        self.refused.iter().any(|r| !r.kept)
    }
}

/// The last good version of every pool.
#[derive(Debug, Clone, Default)]
pub struct Keeper {
    good: BTreeMap<String, Pool>,
}

impl Keeper {
    /// Takes the current pool objects: a pool that parses and overlaps no
    /// pool in force becomes the version in force; one that does not
    /// keeps its last good version (or stays out, if it never had one). A
    /// deleted object's pool is gone.
    ///
    /// When the new versions together overlap nothing, they are all taken
    /// (so two pools can trade addresses); otherwise each changed pool is
    /// checked, by name, against the versions in force so far.
    pub fn update(&mut self, objects: &[IPAddressPool]) -> Update {
        let mut refused = Vec::new();
        // Parsed new versions, by name; `None`: it does not parse.
        let mut parsed: BTreeMap<String, Option<Pool>> = BTreeMap::new();
        for o in objects {
            let name = o.name_any();
            match api::validate::ip_address_pool(o) {
                (Some(p), _) => {
                    parsed.insert(name, Some(p));
                }
                (None, problems) => {
                    let message = problems
                        .iter()
                        .map(|p| format!("{}: {}", p.field, p.message))
                        .collect::<Vec<_>>()
                        .join("; ");
                    refused.push(Refused {
                        kept: self.good.contains_key(&name),
                        pool: name.clone(),
                        message,
                    });
                    parsed.insert(name, None);
                }
            }
        }
        // Deleted objects take their pools with them.
        self.good.retain(|name, _| parsed.contains_key(name));

        // Every new version at once, if they overlap nothing.
        let mut all: BTreeMap<String, Pool> = self.good.clone();
        for (name, p) in &parsed {
            if let Some(p) = p {
                all.insert(name.clone(), p.clone());
            }
        }
        if first_overlap(&all).is_none() {
            self.good = all;
        } else {
            // One by one: a changed pool that overlaps what is in force
            // keeps its last good version.
            for (name, p) in &parsed {
                let Some(p) = p else { continue };
                if self.good.get(name) == Some(p) {
                    continue;
                }
                let clash = self
                    .good
                    .iter()
                    .filter(|(other, _)| *other != name)
                    .find_map(|(other, q)| overlap(p, q).map(|(a, b)| (other, a, b)))
                    .or_else(|| self_overlap(p).map(|(a, b)| (name, a, b)));
                match clash {
                    None => {
                        self.good.insert(name.clone(), p.clone());
                    }
                    Some((other, a, b)) => {
                        let message = if other == name {
                            format!("spec.addresses[{b}] overlaps spec.addresses[{a}]")
                        } else {
                            format!(
                                "spec.addresses[{a}] overlaps IPAddressPool {other:?} \
                                 (version in force) spec.addresses[{b}]"
                            )
                        };
                        refused.push(Refused {
                            kept: self.good.contains_key(name),
                            pool: name.clone(),
                            message,
                        });
                    }
                }
            }
        }
        refused.sort_by(|a, b| a.pool.cmp(&b.pool));
        Update {
            pools: self.good.values().cloned().collect(),
            refused,
        }
    }
}

/// The first pair of overlapping ranges between two pools: indices in
/// `a` and in `b`.
fn overlap(a: &Pool, b: &Pool) -> Option<(usize, usize)> {
    a.ranges
        .iter()
        .enumerate()
        .find_map(|(i, r)| b.ranges.iter().position(|s| r.overlaps(s)).map(|j| (i, j)))
}

/// Two overlapping ranges within one pool.
fn self_overlap(p: &Pool) -> Option<(usize, usize)> {
    p.ranges.iter().enumerate().find_map(|(i, r)| {
        p.ranges[i + 1..]
            .iter()
            .position(|s| r.overlaps(s))
            .map(|j| (i, i + 1 + j))
    })
}

fn first_overlap(pools: &BTreeMap<String, Pool>) -> Option<(String, String)> {
    let v: Vec<(&String, &Pool)> = pools.iter().collect();
    for (i, (a, p)) in v.iter().enumerate() {
        if self_overlap(p).is_some() {
            return Some(((*a).clone(), (*a).clone()));
        }
        for (b, q) in &v[i + 1..] {
            if overlap(p, q).is_some() {
                return Some(((*a).clone(), (*b).clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(name: &str, addresses: &[&str]) -> IPAddressPool {
        serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": name},
            "spec": {"addresses": addresses},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn ranges(u: &Update) -> Vec<(String, Vec<String>)> {
        u.pools
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.ranges
                        .iter()
                        .map(|r| format!("{}-{}", r.first(), r.last()))
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn a_reversed_range_keeps_the_last_good_version() {
        let mut k = Keeper::default();
        let u = k.update(&[pool("a", &["10.0.0.0/30"])]);
        assert!(u.refused.is_empty());
        let u = k.update(&[pool("a", &["10.0.0.9-10.0.0.1"])]);
        assert_eq!(ranges(&u), [("a".into(), vec!["10.0.0.0-10.0.0.3".into()])]);
        assert_eq!(u.refused.len(), 1);
        assert!(u.refused[0].kept);
        assert!(!u.unresolved());
        assert!(
            u.refused[0].to_string().contains("spec.addresses[0]"),
            "{}",
            u.refused[0]
        );
        // Fixed: the new version is taken.
        let u = k.update(&[pool("a", &["10.0.0.0/29"])]);
        assert_eq!(ranges(&u), [("a".into(), vec!["10.0.0.0-10.0.0.7".into()])]);
        assert!(u.refused.is_empty());
        // Deleted: gone.
        assert!(k.update(&[]).pools.is_empty());
    }

    #[test]
    fn a_pool_that_never_parsed_is_unresolved() {
        let mut k = Keeper::default();
        let u = k.update(&[pool("a", &["fc00::9-fc00::1"]), pool("b", &["10.0.1.0/30"])]);
        assert_eq!(ranges(&u), [("b".into(), vec!["10.0.1.0-10.0.1.3".into()])]);
        assert!(u.unresolved());
        assert!(!u.refused[0].kept);
    }

    #[test]
    fn an_edit_that_overlaps_another_pool_is_refused() {
        let mut k = Keeper::default();
        k.update(&[pool("a", &["10.0.0.0/30"]), pool("b", &["10.0.1.0/30"])]);
        // b moves onto a's addresses: b keeps its last good version, and a
        // (unchanged) keeps its own, whatever the names' order.
        let u = k.update(&[pool("a", &["10.0.0.0/30"]), pool("b", &["10.0.0.2/31"])]);
        assert_eq!(
            ranges(&u),
            [
                ("a".into(), vec!["10.0.0.0-10.0.0.3".into()]),
                ("b".into(), vec!["10.0.1.0-10.0.1.3".into()]),
            ]
        );
        assert_eq!(u.refused.len(), 1);
        assert_eq!(u.refused[0].pool, "b");
        assert!(u.refused[0].kept);
        // A new pool that overlaps one in force stays out.
        let u = k.update(&[
            pool("a", &["10.0.0.0/30"]),
            pool("b", &["10.0.1.0/30"]),
            pool("0-new", &["10.0.0.1/32"]),
        ]);
        assert_eq!(u.pools.len(), 2);
        assert_eq!(u.refused[0].pool, "0-new");
        assert!(u.unresolved());
    }

    #[test]
    fn two_pools_can_trade_addresses() {
        let mut k = Keeper::default();
        k.update(&[pool("a", &["10.0.0.0/30"]), pool("b", &["10.0.1.0/30"])]);
        let u = k.update(&[pool("a", &["10.0.1.0/30"]), pool("b", &["10.0.0.0/30"])]);
        assert!(u.refused.is_empty());
        assert_eq!(
            ranges(&u),
            [
                ("a".into(), vec!["10.0.1.0-10.0.1.3".into()]),
                ("b".into(), vec!["10.0.0.0-10.0.0.3".into()]),
            ]
        );
    }

    #[test]
    fn overlap_within_one_pool_is_refused() {
        let mut k = Keeper::default();
        k.update(&[pool("a", &["10.0.0.0/30"])]);
        let u = k.update(&[pool("a", &["10.0.0.0/30", "10.0.0.2-10.0.0.5"])]);
        assert_eq!(ranges(&u), [("a".into(), vec!["10.0.0.0-10.0.0.3".into()])]);
        assert_eq!(
            u.refused[0].message,
            "spec.addresses[1] overlaps spec.addresses[0]"
        );
    }
}
