//! Address pools: what `IPAddressPool` says, parsed.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::selector::Selectors;
use crate::addr::{AddressError, AddressRange};

/// An `IPAddressPool`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The object's name.
    pub name: String,
    /// The object's labels (advertisements select pools by them).
    pub labels: BTreeMap<String, String>,
    /// `spec.addresses`, in order, less the entries that hold no address
    /// (an IPv4-to-IPv6 range, see [`crate::addr::Entry::Empty`]).
    pub ranges: Vec<AddressRange>,
    /// `spec.autoAssign` (default true).
    pub auto_assign: bool,
    /// `spec.avoidBuggyIPs`: skip IPv4 addresses ending in .0 or .255.
    pub avoid_buggy_ips: bool,
    /// `spec.serviceAllocation`.
    pub allocation: Option<ServiceAllocation>,
}

/// `spec.serviceAllocation` of a pool: which services may take from it,
/// and how it ranks against other pools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceAllocation {
    /// Lower is preferred; an unset priority sorts after every set one.
    pub priority: i32,
    /// Namespaces whose services may use the pool (with
    /// `namespace_selectors`, either may admit; both empty admit all).
    pub namespaces: Vec<String>,
    /// Namespace label selectors.
    pub namespace_selectors: Selectors,
    /// Service label selectors (any may match; none: every service).
    pub service_selectors: Selectors,
}

impl Pool {
    /// A pool with auto-assign on and no service allocation, from address
    /// entries in MetalLB's syntax.
    pub fn new(name: &str, entries: &[&str]) -> Result<Self, AddressError> {
        Ok(Self {
            name: name.to_owned(),
            labels: BTreeMap::new(),
            ranges: entries
                .iter()
                .map(|e| AddressRange::parse(e))
                .collect::<Result<_, _>>()?,
            auto_assign: true,
            avoid_buggy_ips: false,
            allocation: None,
        })
    }

    /// Whether one of the pool's ranges holds `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(ip))
    }

    /// Whether the pool has IPv4 addresses (`v4`) or IPv6 ones (`!v4`).
    pub fn has_family(&self, v4: bool) -> bool {
        self.ranges.iter().any(|r| r.is_ipv4() == v4)
    }
}

impl ServiceAllocation {
    /// MetalLB's `serviceAllocation` match: the service's namespace is
    /// listed or selected (both lists empty: any namespace), and one of the
    /// service selectors, if any, matches the service's labels.
    pub fn selects(
        &self,
        namespace: &str,
        namespace_labels: &BTreeMap<String, String>,
        service_labels: &BTreeMap<String, String>,
    ) -> bool {
        self.refusal(namespace, namespace_labels, service_labels)
            .is_none()
    }

    /// Why [`ServiceAllocation::selects`] refuses a service, as a sentence
    /// naming the list that leaves it out; `None` when it selects it.
    pub fn refusal(
        &self,
        namespace: &str,
        namespace_labels: &BTreeMap<String, String>,
        service_labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        let any_namespace = self.namespaces.is_empty() && self.namespace_selectors.is_empty();
        let namespace_ok = any_namespace
            || self.namespaces.iter().any(|n| n == namespace)
            || (!self.namespace_selectors.is_empty()
                && self.namespace_selectors.matches(namespace_labels));
        if !namespace_ok {
            let names = format!("[{}]", self.namespaces.join(", "));
            let selectors = &self.namespace_selectors;
            return Some(match (self.namespaces.is_empty(), selectors.is_empty()) {
                (false, true) => {
                    format!("namespace {namespace} is not in serviceAllocation.namespaces {names}")
                }
                (true, _) => format!(
                    "namespace {namespace} is not selected by serviceAllocation.namespaceSelectors {selectors}"
                ),
                (false, false) => format!(
                    "namespace {namespace} is neither in serviceAllocation.namespaces {names} \
                     nor selected by its namespaceSelectors {selectors}"
                ),
            });
        }
        if !self.service_selectors.matches(service_labels) {
            return Some(format!(
                "the service's labels match no serviceAllocation.serviceSelectors {}",
                self.service_selectors
            ));
        }
        None
    }
}

/// MetalLB's `poolFor`: the first of `pools` that holds every one of `ips`
/// (none for no IPs). Valid pools do not overlap, so at most one does; the
/// controller, which also runs with pools the speakers would reject, takes
/// them in name order. The one answer to "which pool holds these IPs" for
/// the controller's allocator and the speaker's decisions.
pub fn pool_for<'a, I>(pools: I, ips: &[IpAddr]) -> Option<&'a Pool>
where
    I: IntoIterator<Item = &'a Pool>,
{
    if ips.is_empty() {
        return None;
    }
    pools
        .into_iter()
        .find(|p| ips.iter().all(|ip| p.contains(*ip)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::selector::Selector;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn pool_for_needs_every_ip_in_one_pool() {
        let a = Pool::new("a", &["10.0.0.0/24", "2001:db8::/64"]).unwrap();
        let b = Pool::new("b", &["10.0.1.0-10.0.1.9"]).unwrap();
        let pools = [a, b];
        let of = |ips: &[&str]| {
            let ips: Vec<IpAddr> = ips.iter().map(|s| ip(s)).collect();
            pool_for(&pools, &ips).map(|p| p.name.as_str())
        };
        assert_eq!(of(&["10.0.0.7"]), Some("a"));
        assert_eq!(of(&["10.0.0.7", "2001:db8::7"]), Some("a"));
        assert_eq!(of(&["10.0.1.9"]), Some("b"));
        assert_eq!(of(&["10.0.0.7", "10.0.1.1"]), None);
        assert_eq!(of(&["10.0.1.10"]), None);
        assert_eq!(of(&[]), None);
        assert!(pools[0].has_family(false) && !pools[1].has_family(false));
    }

    #[test]
    fn service_allocation_selects_namespace_and_service() {
        let team_a = Selector {
            match_labels: labels(&[("team", "a")]),
            ..Selector::default()
        };
        let web = Selector {
            match_labels: labels(&[("app", "web")]),
            ..Selector::default()
        };
        let mut a = ServiceAllocation::default();
        assert!(a.selects("x", &labels(&[]), &labels(&[])));
        a.namespaces = vec!["shop".into()];
        a.namespace_selectors = Selectors(vec![team_a]);
        assert!(a.selects("shop", &labels(&[]), &labels(&[])));
        assert!(a.selects("other", &labels(&[("team", "a")]), &labels(&[])));
        assert!(!a.selects("other", &labels(&[("team", "b")]), &labels(&[])));
        a.service_selectors = Selectors(vec![web]);
        assert!(!a.selects("shop", &labels(&[]), &labels(&[])));
        assert!(a.selects("shop", &labels(&[]), &labels(&[("app", "web")])));
    }

    #[test]
    fn a_refusal_names_the_list_that_leaves_the_service_out() {
        let team_a = Selector {
            match_labels: labels(&[("team", "a")]),
            ..Selector::default()
        };
        let mut a = ServiceAllocation {
            namespaces: vec!["shop".into(), "blog".into()],
            ..ServiceAllocation::default()
        };
        let none = labels(&[]);
        assert_eq!(
            a.refusal("x", &none, &none).as_deref(),
            Some("namespace x is not in serviceAllocation.namespaces [shop, blog]")
        );
        a.namespace_selectors = Selectors(vec![team_a]);
        assert_eq!(
            a.refusal("x", &none, &none).as_deref(),
            Some(
                "namespace x is neither in serviceAllocation.namespaces [shop, blog] \
                 nor selected by its namespaceSelectors [team=a]"
            )
        );
        a.namespaces.clear();
        assert_eq!(
            a.refusal("x", &none, &none).as_deref(),
            Some("namespace x is not selected by serviceAllocation.namespaceSelectors [team=a]")
        );
        a.service_selectors = Selectors(vec![Selector {
            match_labels: labels(&[("app", "web")]),
            ..Selector::default()
        }]);
        assert_eq!(
            a.refusal("x", &labels(&[("team", "a")]), &none).as_deref(),
            Some("the service's labels match no serviceAllocation.serviceSelectors [app=web]")
        );
        assert_eq!(
            a.refusal("x", &labels(&[("team", "a")]), &labels(&[("app", "web")])),
            None
        );
    }
}
