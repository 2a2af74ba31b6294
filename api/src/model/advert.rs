//! Advertisements: what `BGPAdvertisement` and `L2Advertisement` say,
//! parsed, and the one answer to "does this advertisement select this
//! pool, node and service".

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::pool::Pool;
use super::selector::{LabelLookup, Selector, Selectors};
use crate::community::Community;

/// Which pools, nodes and services an advertisement applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// `spec.ipAddressPools`: pools by name.
    pub pool_names: Vec<String>,
    /// `spec.ipAddressPoolSelectors`: pools by label.
    pub pool_selectors: Vec<Selector>,
    /// `spec.nodeSelectors`: the nodes that announce.
    pub nodes: Selectors,
    /// `spec.serviceSelectors`: the services announced.
    pub services: Selectors,
}

/// A `BGPAdvertisement`, parsed, its communities resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BgpAdvertisement {
    /// The object's name.
    pub name: String,
    /// What it applies to.
    pub scope: Scope,
    /// `spec.aggregationLength` (1..=32, default 32).
    pub aggregation_v4: u8,
    /// `spec.aggregationLengthV6` (0..=128, default 128).
    pub aggregation_v6: u8,
    /// `spec.localPref`; 0 and unset both mean "not set", as in MetalLB.
    pub local_pref: Option<u32>,
    /// `spec.communities`: literal values, well-known names and the aliases
    /// of `Community` objects, resolved.
    pub communities: BTreeSet<Community>,
    /// `spec.peers`: BGPPeer names; empty means every peer.
    pub peers: Vec<String>,
}

/// An `L2Advertisement`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2Advertisement {
    /// The object's name.
    pub name: String,
    /// What it applies to.
    pub scope: Scope,
    /// `spec.interfaces`: where to answer; empty means every interface.
    pub interfaces: BTreeSet<String>,
    /// `spec.preferredNodeSelectors`: (weight 1..=100, selector).
    pub preferred_nodes: Vec<(u32, Selector)>,
}

impl Scope {
    /// Whether the advertisement applies to `pool`: named, selected by
    /// label, or every pool when it names and selects none.
    pub fn selects_pool(&self, pool: &Pool) -> bool {
        (self.pool_names.is_empty() && self.pool_selectors.is_empty())
            || self.pool_names.contains(&pool.name)
            || self.pool_selectors.iter().any(|s| s.matches(&pool.labels))
    }

    /// Whether a node with these labels announces for it.
    pub fn selects_node<L: LabelLookup + ?Sized>(&self, node_labels: &L) -> bool {
        self.nodes.matches(node_labels)
    }

    /// Whether a service with these labels is announced by it.
    pub fn selects_service<L: LabelLookup + ?Sized>(&self, service_labels: &L) -> bool {
        self.services.matches(service_labels)
    }

    /// All three: the advertisement makes this node announce this service
    /// of this pool.
    pub fn selects<N, S>(&self, pool: &Pool, node_labels: &N, service_labels: &S) -> bool
    where
        N: LabelLookup + ?Sized,
        S: LabelLookup + ?Sized,
    {
        self.selects_pool(pool)
            && self.selects_node(node_labels)
            && self.selects_service(service_labels)
    }
}

impl BgpAdvertisement {
    /// Whether the advertisement's routes go to the BGPPeer `name`.
    pub fn selects_peer(&self, name: &str) -> bool {
        self.peers.is_empty() || self.peers.iter().any(|p| p == name)
    }

    /// The prefix `ip` is announced as: the network of the aggregation
    /// length of its family.
    pub fn prefix(&self, ip: IpAddr) -> IpNetwork {
        let len = if ip.is_ipv4() {
            self.aggregation_v4
        } else {
            self.aggregation_v6
        };
        // Lengths are within their family's bits by construction; the host
        // route is the fallback all the same.
        IpNetwork::new(ip, len)
            .and_then(|n| IpNetwork::new(n.network(), len))
            .unwrap_or_else(|_| IpNetwork::from(ip))
    }
}

impl L2Advertisement {
    /// The preference score of a node: the weights of the preferred-node
    /// selectors it matches.
    pub fn preference<L: LabelLookup + ?Sized>(&self, node_labels: &L) -> i64 {
        self.preferred_nodes
            .iter()
            .filter(|(_, s)| s.matches(node_labels))
            .map(|&(weight, _)| i64::from(weight))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    fn sel(pairs: &[(&str, &str)]) -> Selector {
        Selector {
            match_labels: labels(pairs),
            ..Selector::default()
        }
    }

    #[test]
    fn scope_selects_pools_nodes_services() {
        let mut east = Pool::new("east", &["10.0.0.0/24"]).unwrap();
        east.labels = labels(&[("zone", "east")]);
        let west = Pool::new("west", &["10.0.1.0/24"]).unwrap();
        let mut scope = Scope::default();
        assert!(scope.selects(&east, &labels(&[]), &labels(&[])));
        scope.pool_names = vec!["west".into()];
        assert!(!scope.selects_pool(&east) && scope.selects_pool(&west));
        scope.pool_selectors = vec![sel(&[("zone", "east")])];
        assert!(scope.selects_pool(&east) && scope.selects_pool(&west));
        scope.nodes = Selectors(vec![sel(&[("rack", "r1")])]);
        scope.services = Selectors(vec![sel(&[("app", "web")])]);
        let (r1, web) = (labels(&[("rack", "r1")]), labels(&[("app", "web")]));
        assert!(scope.selects(&east, &r1, &web));
        assert!(!scope.selects(&east, &labels(&[]), &web));
        assert!(!scope.selects(&east, &r1, &labels(&[])));
    }

    #[test]
    fn bgp_prefixes_and_peers() {
        let ad = BgpAdvertisement {
            name: "a".into(),
            scope: Scope::default(),
            aggregation_v4: 24,
            aggregation_v6: 128,
            local_pref: None,
            communities: BTreeSet::new(),
            peers: vec!["spine1".into()],
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(ad.prefix(ip("10.0.0.77")).to_string(), "10.0.0.0/24");
        assert_eq!(ad.prefix(ip("2001:db8::7")).to_string(), "2001:db8::7/128");
        assert!(ad.selects_peer("spine1") && !ad.selects_peer("spine2"));
        let all = BgpAdvertisement {
            peers: vec![],
            ..ad
        };
        assert!(all.selects_peer("spine2"));
    }

    #[test]
    fn l2_preference_sums_matching_weights() {
        let ad = L2Advertisement {
            name: "l2".into(),
            scope: Scope::default(),
            interfaces: BTreeSet::new(),
            preferred_nodes: vec![(10, sel(&[("a", "1")])), (5, sel(&[("b", "1")]))],
        };
        assert_eq!(ad.preference(&labels(&[("a", "1"), ("b", "1")])), 15);
        assert_eq!(ad.preference(&labels(&[("b", "1")])), 5);
        assert_eq!(ad.preference(&labels(&[])), 0);
    }
}
