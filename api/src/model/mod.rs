//! The configuration, parsed once: the typed model that the controller and
//! the speaker decide from.
//!
//! [`crate::validate::config`] turns the metallb.io objects into a [`Model`]
//! and the [`crate::validate::Problem`]s it found. Every value here is
//! parsed: ranges are [`AddressRange`]s, selectors have an [`Operator`]
//! enum, peers have socket addresses, AS numbers and [`Duration`]s,
//! advertisements have their communities resolved. Nothing downstream
//! re-parses a string, and the questions both programs ask have one answer
//! each: [`pool_for`] ("which pool holds these IPs", MetalLB's `poolFor`)
//! and [`Scope::selects`] ("does this advertisement make this node announce
//! this service of this pool").
//!
//! Types and pure functions only: no I/O, no clock.
//!
//! [`Duration`]: std::time::Duration

mod advert;
mod peer;
mod pool;
mod selector;

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

pub use self::advert::{BgpAdvertisement, L2Advertisement, Scope};
pub use self::peer::{
    BfdProfile, MAX_PASSWORD, Md5Key, PASSWORD_SECRET_KEY, PasswordError, PasswordSource, Peer,
    PeerAsn, PeerTarget, Secrets, Timers,
};
pub use self::pool::{Pool, ServiceAllocation, pool_for};
pub use self::selector::{
    LabelLookup, Operator, Requirement, Selector, Selectors, UnknownOperator,
};
pub use crate::addr::AddressRange;
pub use crate::community::Community;

/// The metallb.io configuration of one MetalLB namespace, parsed.
///
/// Objects that could not be parsed at all are left out (their problems
/// say why); the lists keep the order of the input, except the pools,
/// which are sorted by name so that [`Model::pool_for`] answers alike
/// whatever order the objects came in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// IPAddressPools, by name.
    pub pools: Vec<Pool>,
    /// BGPPeers.
    pub peers: Vec<Peer>,
    /// BGPAdvertisements.
    pub bgp_advertisements: Vec<BgpAdvertisement>,
    /// L2Advertisements.
    pub l2_advertisements: Vec<L2Advertisement>,
    /// BFDProfiles, by name.
    pub bfd_profiles: std::collections::BTreeMap<String, BfdProfile>,
}

impl Model {
    /// The pool that holds every one of `ips` ([`pool_for`] over the
    /// model's pools).
    pub fn pool_for(&self, ips: &[IpAddr]) -> Option<&Pool> {
        pool_for(&self.pools, ips)
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&Pool> {
        self.pools.iter().find(|p| p.name == name)
    }

    /// The Service label keys the advertisements' `serviceSelectors` read
    /// (BGPAdvertisements' and L2Advertisements', [`Selector::keys`]): the
    /// only Service labels the speaker's decisions read, and so the only
    /// ones it keeps. Empty when no advertisement selects Services by
    /// label (most installs). The pools' `serviceAllocation` selectors are
    /// the controller's, which reads whole Services: not counted here.
    pub fn service_label_keys(&self) -> BTreeSet<String> {
        let bgp = self.bgp_advertisements.iter().map(|a| &a.scope);
        let l2 = self.l2_advertisements.iter().map(|a| &a.scope);
        bgp.chain(l2)
            .flat_map(|scope| scope.services.keys())
            .map(str::to_owned)
            .collect()
    }
}

/// A namespaced object's identity.
///
/// The speaker keeps one per service and copies it into every table that
/// names the service (per peer and prefix, per IP, the status publisher's
/// state): the names are shared (`Arc<str>`), so a copy is a reference
/// count, not two more allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
}

impl ObjectKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        Self {
            namespace: namespace.as_ref().into(),
            name: name.as_ref().into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::validate::{Config, config};

    /// A configuration of one pool and these advertisements, parsed.
    fn keys_of(advertisements: &str) -> BTreeSet<String> {
        let yaml = format!(
            "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: p, namespace: m}}\nspec: {{addresses: [192.0.2.0/24]}}\n{advertisements}"
        );
        let cfg = Config::from_yaml(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        let (model, problems) = config(&cfg);
        assert!(problems.is_empty(), "{problems:?}");
        model.service_label_keys()
    }

    fn ad(kind: &str, name: &str, spec: &str) -> String {
        format!(
            "---\napiVersion: metallb.io/v1beta1\nkind: {kind}\nmetadata: {{name: {name}, namespace: m}}\nspec: {spec}\n"
        )
    }

    #[test]
    fn service_label_keys_are_what_the_advertisements_service_selectors_name() {
        let expr = |key: &str, op: &str, values: &str| {
            format!("{{matchExpressions: [{{key: {key}, operator: {op}, values: [{values}]}}]}}")
        };
        let cases: Vec<(&str, String, &[&str])> = vec![
            ("no advertisement", String::new(), &[]),
            (
                "advertisements without serviceSelectors",
                ad("BGPAdvertisement", "b", "{}") + &ad("L2Advertisement", "l", "{}"),
                &[],
            ),
            (
                "node and pool selectors are not Service labels",
                ad(
                    "L2Advertisement",
                    "l",
                    "{nodeSelectors: [{matchLabels: {zone: a}}], ipAddressPoolSelectors: [{matchLabels: {tier: x}}]}",
                ),
                &[],
            ),
            (
                "matchLabels, BGP",
                ad(
                    "BGPAdvertisement",
                    "b",
                    "{serviceSelectors: [{matchLabels: {app: web, tier: front}}]}",
                ),
                &["app", "tier"],
            ),
            (
                "matchLabels, layer 2",
                ad(
                    "L2Advertisement",
                    "l",
                    "{serviceSelectors: [{matchLabels: {app: web}}]}",
                ),
                &["app"],
            ),
            (
                "In",
                ad(
                    "BGPAdvertisement",
                    "b",
                    &format!("{{serviceSelectors: [{}]}}", expr("zone", "In", "a, b")),
                ),
                &["zone"],
            ),
            (
                "NotIn reads a key's absence too",
                ad(
                    "L2Advertisement",
                    "l",
                    &format!("{{serviceSelectors: [{}]}}", expr("legacy", "NotIn", "old")),
                ),
                &["legacy"],
            ),
            (
                "Exists",
                ad(
                    "BGPAdvertisement",
                    "b",
                    &format!("{{serviceSelectors: [{}]}}", expr("expose", "Exists", "")),
                ),
                &["expose"],
            ),
            (
                "DoesNotExist",
                ad(
                    "BGPAdvertisement",
                    "b",
                    &format!(
                        "{{serviceSelectors: [{}]}}",
                        expr("canary", "DoesNotExist", "")
                    ),
                ),
                &["canary"],
            ),
            (
                "both kinds, several selectors, one key named twice",
                ad(
                    "BGPAdvertisement",
                    "b",
                    &format!(
                        "{{serviceSelectors: [{{matchLabels: {{app: web}}}}, {}]}}",
                        expr("canary", "DoesNotExist", "")
                    ),
                ) + &ad(
                    "L2Advertisement",
                    "l",
                    "{serviceSelectors: [{matchLabels: {app: db, tier: back}}]}",
                ) + &ad("BGPAdvertisement", "all", "{}"),
                &["app", "canary", "tier"],
            ),
        ];
        for (what, ads, want) in cases {
            let want: BTreeSet<String> = want.iter().map(|k| (*k).to_owned()).collect();
            assert_eq!(keys_of(&ads), want, "{what}");
        }
    }
}
