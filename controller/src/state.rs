//! The controller's decisions: pools, namespace labels and the allocator,
//! with Services in and [`Outcome`]s out.
//!
//! Pure and synchronous (no client, no clock): the reconciler holds one
//! [`State`] behind a mutex and writes what it decides; `controller plan`
//! drives one over objects read from files. Both therefore decide alike.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use api::v1beta1::{IPAddressPool, IPAddressPoolStatus};
use k8s_openapi::api::core::v1::{Namespace, Service as K8sService};
use kube::ResourceExt;

use crate::alloc::{AllocError, Allocator, Assignment, Considered, Pool, ServiceKey};
use crate::convert::{self, Capacity, Reading};
use crate::plan;
use crate::pools::{self, Keeper};
use crate::watched;

/// What to do with a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It holds these addresses; `changed` when they differ from its
    /// current `status.loadBalancer.ingress` (MetalLB's `IPAllocated`).
    Assigned {
        /// Pool and addresses.
        assignment: Assignment,
        /// Whether the status must change.
        changed: bool,
        /// The pool rules its kept addresses break (a pool edit, or a
        /// version of ferrolb that granted them, came after): they are
        /// kept for stability, and this says so ([`Allocator::breaks`]).
        breaks: Vec<String>,
    },
    /// No address could be given (MetalLB's `AllocationFailed`); any it
    /// held is released.
    Failed(AllocError),
    /// Its spec or annotations are invalid (MetalLB's `LoadBalancerFailed`).
    Invalid(String),
    /// Not `type: LoadBalancer`: any address it held is released.
    NotLoadBalancer,
    /// Another `loadBalancerClass`: left alone.
    OtherClass(Option<String>),
    /// It has addresses in its status that no pool in force holds, while
    /// some pool object has no valid version: they may be that pool's, so
    /// the service is left as it is (neither released nor moved) until the
    /// pool is fixed or deleted.
    Held,
}

impl Outcome {
    /// `svc` as the controller leaves it once it has acted on this outcome
    /// (the reconciler's writes): its addresses and pool annotation when
    /// assigned ([`convert::written`]), both cleared when it failed or is
    /// no LoadBalancer, untouched otherwise.
    pub fn applied_to(&self, svc: &K8sService) -> K8sService {
        match self {
            Self::Assigned { assignment, .. } => {
                convert::written(svc, Some(&assignment.pool), &assignment.ips)
            }
            Self::Failed(_) | Self::NotLoadBalancer => convert::written(svc, None, &[]),
            Self::Invalid(_) | Self::OtherClass(_) | Self::Held => svc.clone(),
        }
    }
}

/// Pools, namespace labels and the allocator.
#[derive(Debug, Clone, Default)]
pub struct State {
    lb_class: Option<String>,
    pools: Vec<Pool>,
    /// Who holds which address: the one record of every assignment (the
    /// pool counts and the keys to garbage-collect are read from it).
    alloc: Allocator,
    /// Services that wait for an address.
    pending: BTreeSet<ServiceKey>,
    namespace_labels: HashMap<String, BTreeMap<String, String>>,
    /// The last good version of each pool object.
    keeper: Keeper,
    /// Some pool object has no valid version (see [`Outcome::Held`]).
    unresolved: bool,
    /// The services left as they are ([`Outcome::Held`]), as last seen:
    /// offered to the allocator first whenever the pools change, so that
    /// they take back their addresses before anyone else can.
    frozen: BTreeMap<ServiceKey, K8sService>,
}

impl State {
    /// An empty state that serves `lb_class` (`None`: services without a
    /// class).
    pub fn new(lb_class: Option<String>) -> Self {
        Self {
            lb_class,
            ..Self::default()
        }
    }

    /// A controller's state when it starts leading: the IPAddressPool
    /// objects ([`State::set_pool_objects`]), the namespaces' labels, then
    /// every Service replayed in [`plan::replay_order`]. `controller run`
    /// starts so; `kubectl ferrolb` runs it over the objects it lists to
    /// give the controller's answer. Returns the state, each Service's
    /// outcome (in [`State::replay`]'s order) and the pool update (the
    /// refused objects).
    pub fn start<'a>(
        lb_class: Option<String>,
        pools: &[IPAddressPool],
        namespaces: &[Namespace],
        services: &'a [K8sService],
    ) -> (Self, Vec<(&'a K8sService, Outcome)>, pools::Update) {
        let mut st = Self::new(lb_class);
        let (_, _, update) = st.set_pool_objects(pools);
        for ns in namespaces {
            st.set_namespace_labels(&ns.name_any(), Some(ns.labels().clone()));
        }
        let outcomes = st.replay(&plan::replay_order(services));
        (st, outcomes, update)
    }

    /// [`State::start`] over Services kept packed, as the controller keeps
    /// them ([`watched::Service`]): the same order and the same decisions
    /// as over the objects they were read from, but each is unpacked for
    /// its own decision only, so no second copy of every Service is built
    /// (issue 18: at a cold start this replay is the controller's peak).
    /// Returns the state, how many Services hold addresses, and the pool
    /// update.
    pub fn start_packed(
        lb_class: Option<String>,
        pools: &[IPAddressPool],
        namespaces: &[Namespace],
        services: &[watched::Service],
    ) -> (Self, usize, pools::Update) {
        let mut st = Self::new(lb_class);
        let (_, _, update) = st.set_pool_objects(pools);
        for ns in namespaces {
            st.set_namespace_labels(&ns.name_any(), Some(ns.labels().clone()));
        }
        let order = plan::replay_order_by(services, |s| (&s.metadata, s.has_ingress()));
        let mut assigned = 0;
        st.replay_each(
            &order,
            |s| s.has_ingress(),
            |s| Cow::Owned(s.to_k8s()),
            |_, outcome| {
                if matches!(outcome, Outcome::Assigned { .. }) {
                    assigned += 1;
                }
            },
        );
        (st, assigned, update)
    }

    /// Every pool as the allocator weighs it for `svc` now
    /// ([`Allocator::consider`]), read the way [`State::sync`] reads it;
    /// `None` when it is not a LoadBalancer Service of our class with a
    /// valid request (its [`Outcome`] says why).
    pub fn consider(&self, svc: &K8sService) -> Option<Vec<Considered>> {
        let key = convert::key(svc);
        let labels = self
            .namespace_labels
            .get(&key.namespace)
            .cloned()
            .unwrap_or_default();
        match convert::service(svc, self.lb_class.as_deref(), &labels) {
            Reading::LoadBalancer(s) => Some(self.alloc.consider(&s)),
            _ => None,
        }
    }

    /// The pools, by name.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Replaces the pools if they differ. Returns whether they did and the
    /// services that lost their addresses (they must be synced again).
    pub fn set_pools(&mut self, mut pools: Vec<Pool>) -> (bool, Vec<ServiceKey>) {
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        if pools == self.pools {
            return (false, Vec::new());
        }
        self.pools = pools.clone();
        let lost = self.alloc.set_pools(pools);
        (true, lost)
    }

    /// Takes the current IPAddressPool objects: each pool's last good
    /// version stays in force while its object is refused (see
    /// [`crate::pools`]), so a refused edit never releases or moves an
    /// address. Returns what [`State::set_pools`] returns, and the update
    /// with the refused objects.
    pub fn set_pool_objects(
        &mut self,
        objects: &[IPAddressPool],
    ) -> (bool, Vec<ServiceKey>, pools::Update) {
        let update = self.keeper.update(objects);
        let was = std::mem::replace(&mut self.unresolved, update.unresolved());
        let (changed, lost) = self.set_pools(update.pools.clone());
        if changed || was != self.unresolved {
            let frozen: Vec<K8sService> = std::mem::take(&mut self.frozen).into_values().collect();
            self.replay(&plan::replay_order(&frozen));
        }
        (changed || was != self.unresolved, lost, update)
    }

    /// Decides for `services` in [`plan::replay_order`], as a starting
    /// controller does: those that hold addresses take them back first
    /// (no `PreferDualStack` service gains a family until all are back),
    /// then are decided again (now gaining), then the pending ones.
    /// Returns each service's outcome, in that order.
    pub fn replay<'a>(&mut self, services: &[&'a K8sService]) -> Vec<(&'a K8sService, Outcome)> {
        let mut out = Vec::with_capacity(services.len());
        self.replay_each(
            services,
            |s| !convert::ingress_ips(s).is_empty(),
            Cow::Borrowed,
            |s, outcome| out.push((s, outcome)),
        );
        out
    }

    /// [`State::replay`] of Services in any form: `held` says whether one
    /// has addresses in its status, `read` gives it as the object
    /// [`State::sync`] reads, and `each` takes every outcome in order.
    fn replay_each<'a, T>(
        &mut self,
        services: &[&'a T],
        held: impl Fn(&T) -> bool,
        read: impl Fn(&'a T) -> Cow<'a, K8sService>,
        mut each: impl FnMut(&'a T, Outcome),
    ) {
        let holding = services.iter().filter(|s| held(s));
        self.alloc.hold_gains(true);
        for svc in holding.clone() {
            self.sync(&read(svc));
        }
        self.alloc.hold_gains(false);
        for svc in holding.chain(services.iter().filter(|s| !held(s))) {
            let outcome = self.sync(&read(svc));
            each(svc, outcome);
        }
    }

    /// Sets the labels of a namespace (`None`: it is gone). Returns whether
    /// they changed: only then can a decision for one of its Services
    /// differ (pools select by namespace labels), so only then must its
    /// Services be decided again.
    pub fn set_namespace_labels(
        &mut self,
        name: &str,
        labels: Option<BTreeMap<String, String>>,
    ) -> bool {
        match labels {
            Some(l) => {
                if self.namespace_labels.get(name) == Some(&l) {
                    return false;
                }
                self.namespace_labels.insert(name.to_owned(), l);
                true
            }
            None => self.namespace_labels.remove(name).is_some(),
        }
    }

    /// Decides for one Service, updating the allocator. Idempotent.
    pub fn sync(&mut self, svc: &K8sService) -> Outcome {
        let key = convert::key(svc);
        self.frozen.remove(&key);
        let labels = self
            .namespace_labels
            .get(&key.namespace)
            .cloned()
            .unwrap_or_default();
        match convert::service(svc, self.lb_class.as_deref(), &labels) {
            Reading::NotLoadBalancer => {
                self.forget(&key);
                Outcome::NotLoadBalancer
            }
            Reading::OtherClass(c) => {
                self.forget(&key);
                Outcome::OtherClass(c)
            }
            Reading::Invalid(msg) => {
                // As MetalLB: a service that holds addresses keeps them
                // until its request is fixed.
                if self.alloc.assignment(&key).is_none() {
                    self.pending.insert(key);
                }
                Outcome::Invalid(msg)
            }
            Reading::LoadBalancer(s)
                if self.unresolved
                    && self.alloc.assignment(&key).is_none()
                    && !s.current.is_empty()
                    && !s.current.iter().all(|ip| {
                        self.pools
                            .iter()
                            .any(|p| p.ranges.iter().any(|r| r.contains(*ip)))
                    }) =>
            {
                self.pending.remove(&key);
                self.frozen.insert(key, svc.clone());
                Outcome::Held
            }
            Reading::LoadBalancer(s) => match self.alloc.assign(&s) {
                Ok(a) => {
                    let mut now: Vec<IpAddr> = s.current.clone();
                    let mut want = a.ips.clone();
                    now.sort();
                    want.sort();
                    let changed = now != want || now.len() != convert::ingress_ips(svc).len();
                    self.pending.remove(&key);
                    Outcome::Assigned {
                        assignment: a,
                        changed,
                        breaks: self.alloc.breaks(&s),
                    }
                }
                Err(e) => {
                    self.forget(&key);
                    self.pending.insert(key);
                    Outcome::Failed(e)
                }
            },
        }
    }

    /// Releases what a service holds (it was deleted, or stopped being
    /// ours). Returns whether it held addresses.
    pub fn forget(&mut self, key: &ServiceKey) -> bool {
        self.pending.remove(key);
        self.frozen.remove(key);
        let held = self.alloc.assignment(key).is_some();
        self.alloc.release(key);
        held
    }

    /// The services that hold addresses.
    pub fn holders(&self) -> impl Iterator<Item = &ServiceKey> {
        self.alloc.assignments().map(|(key, _)| key)
    }

    /// The services waiting for an address, in order.
    pub fn pending(&self) -> impl Iterator<Item = &ServiceKey> {
        self.pending.iter()
    }

    /// What a service holds.
    pub fn assignment(&self, key: &ServiceKey) -> Option<&Assignment> {
        self.alloc.assignment(key)
    }

    /// Address counts of every pool, by name: O(pools), read from the
    /// allocator's counters ([`Allocator::pool_use`]), which follow every
    /// assignment as it changes; nothing here walks the Services (the
    /// pool status writer and `/metrics` call this under the lock the
    /// reconciles take).
    pub fn pool_counts(&self) -> Vec<PoolCounts> {
        self.pools
            .iter()
            .map(|p| {
                let used = self.alloc.pool_use(&p.name).unwrap_or_default();
                PoolCounts {
                    name: p.name.clone(),
                    capacity: convert::capacity(p),
                    assigned: Capacity {
                        v4: used.v4,
                        v6: used.v6,
                    },
                    services: used.services,
                }
            })
            .collect()
    }
}

/// Address counts of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCounts {
    /// The pool.
    pub name: String,
    /// Usable addresses per family.
    pub capacity: Capacity,
    /// Addresses held per family (a shared address counts once).
    pub assigned: Capacity,
    /// Services holding addresses of the pool (services sharing an
    /// address count each), MetalLB's `metallb_allocator_services_allocated_total`.
    pub services: u64,
}

impl PoolCounts {
    /// As `IPAddressPool.status`: available is capacity less assigned,
    /// each saturated at `i64::MAX`.
    pub fn status(&self) -> IPAddressPoolStatus {
        let clamp = |n: u128| i64::try_from(n).unwrap_or(i64::MAX);
        IPAddressPoolStatus {
            assigned_ipv4: clamp(self.assigned.v4),
            assigned_ipv6: clamp(self.assigned.v6),
            available_ipv4: clamp(self.capacity.v4.saturating_sub(self.assigned.v4)),
            available_ipv6: clamp(self.capacity.v6.saturating_sub(self.assigned.v6)),
        }
    }

    /// Addresses in the pool, both families (`metallb_allocator_addresses_total`).
    pub fn total(&self) -> u128 {
        self.capacity.v4.saturating_add(self.capacity.v6)
    }

    /// Addresses in use, both families (`metallb_allocator_addresses_in_use_total`).
    pub fn in_use(&self) -> u128 {
        self.assigned.v4 + self.assigned.v6
    }
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

    fn service(name: &str, ingress: &[&str]) -> K8sService {
        let ingress: Vec<_> = ingress.iter().map(|ip| json!({"ip": ip})).collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": ingress}},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn ips(o: &Outcome) -> Vec<String> {
        match o {
            Outcome::Assigned { assignment, .. } => {
                assignment.ips.iter().map(ToString::to_string).collect()
            }
            other => panic!("not assigned: {other:?}"),
        }
    }

    /// Issue 14, finding 7: an edit that passes CEL but not the parser
    /// (a reversed range) or the cross-object check (an overlap) neither
    /// releases nor moves an address.
    #[test]
    fn a_refused_pool_edit_moves_no_address() {
        let mut st = State::new(None);
        st.set_pool_objects(&[pool("a", &["10.0.0.0/30"]), pool("b", &["10.0.1.0/30"])]);
        let s1 = service("s1", &[]);
        let s2 = service("s2", &[]);
        let first = [ips(&st.sync(&s1)), ips(&st.sync(&s2))];
        assert_eq!(first, [["10.0.0.0"], ["10.0.0.1"]]);
        let s1 = service("s1", &["10.0.0.0"]);
        let s2 = service("s2", &["10.0.0.1"]);

        for bad in [
            vec![
                pool("a", &["10.0.0.9-10.0.0.1"]),
                pool("b", &["10.0.1.0/30"]),
            ],
            vec![pool("a", &["fc00::9-fc00::1"]), pool("b", &["10.0.1.0/30"])],
            vec![pool("a", &["10.0.0.0/30"]), pool("b", &["10.0.0.0/29"])],
        ] {
            let (changed, lost, update) = st.set_pool_objects(&bad);
            assert!(!changed, "{bad:?}");
            assert!(lost.is_empty());
            assert_eq!(update.refused.len(), 1, "{:?}", update.refused);
            assert_eq!([ips(&st.sync(&s1)), ips(&st.sync(&s2))], first);
            // A newcomer gets an address of the versions in force.
            assert_eq!(ips(&st.sync(&service("new", &[]))), ["10.0.0.2"]);
            st.forget(&convert::key(&service("new", &[])));
        }
    }

    /// After a restart there is no last good version: a service whose
    /// addresses may be the refused pool's is left alone, not moved.
    #[test]
    fn after_a_restart_a_service_of_a_refused_pool_is_held() {
        let mut st = State::new(None);
        let (_, _, update) = st.set_pool_objects(&[
            pool("a", &["fc00::9-fc00::1", "10.0.0.0/30"]),
            pool("b", &["10.0.1.0/30"]),
        ]);
        assert!(update.unresolved());
        assert_eq!(st.sync(&service("s1", &["10.0.0.1"])), Outcome::Held);
        // One whose address is in a pool in force keeps it.
        assert_eq!(ips(&st.sync(&service("s2", &["10.0.1.1"]))), ["10.0.1.1"]);
        // Fixed: s1 keeps its address.
        let (changed, _, update) =
            st.set_pool_objects(&[pool("a", &["10.0.0.0/30"]), pool("b", &["10.0.1.0/30"])]);
        assert!(changed);
        assert!(update.refused.is_empty());
        assert_eq!(ips(&st.sync(&service("s1", &["10.0.0.1"]))), ["10.0.0.1"]);
    }

    /// A held service's address taken into a pool in force (here another
    /// pool moves onto it while the refused one has no version) goes back
    /// to that service before a newcomer can take it.
    #[test]
    fn a_held_address_goes_back_to_its_service_first() {
        let mut st = State::new(None);
        st.set_pool_objects(&[pool("a", &["fc00::9-fc00::1"]), pool("b", &["10.0.1.0/30"])]);
        let s1 = service("s1", &["10.0.0.0"]);
        assert_eq!(st.sync(&s1), Outcome::Held);
        let (changed, _, _) =
            st.set_pool_objects(&[pool("a", &["fc00::9-fc00::1"]), pool("b", &["10.0.0.0/30"])]);
        assert!(changed);
        assert_eq!(ips(&st.sync(&service("new", &[]))), ["10.0.0.1"]);
        assert_eq!(ips(&st.sync(&s1)), ["10.0.0.0"]);
    }

    /// The pool counts (`metallb_allocator_addresses_in_use_total` per
    /// pool) follow the allocator: after a pool is renamed (or split), a
    /// service that keeps its addresses is counted under the pool that
    /// now holds them, not under the old name, before it is synced again.
    #[test]
    fn pool_counts_follow_a_renamed_pool() {
        let mut st = State::new(None);
        st.set_pool_objects(&[pool("old", &["10.0.0.0/30"])]);
        assert_eq!(ips(&st.sync(&service("s", &[]))), ["10.0.0.0"]);
        let (changed, lost, _) = st.set_pool_objects(&[pool("new", &["10.0.0.0/30"])]);
        assert!(changed);
        assert!(lost.is_empty());
        let counts: Vec<(String, u128, u64)> = st
            .pool_counts()
            .into_iter()
            .map(|c| (c.name.clone(), c.in_use(), c.services))
            .collect();
        assert_eq!(counts, [("new".to_owned(), 1, 1)]);
        let held = st.assignment(&convert::key(&service("s", &[])));
        assert_eq!(held.map(|a| a.pool.as_str()), Some("new"));
    }

    /// The pool counts as they were computed before they were kept as
    /// assignments change: every assignment walked, each pool's distinct
    /// addresses per family, and its services.
    fn recount(st: &State) -> Vec<PoolCounts> {
        use crate::alloc::Family;
        let mut used: HashMap<&str, [BTreeSet<IpAddr>; 2]> = HashMap::new();
        let mut services: HashMap<&str, u64> = HashMap::new();
        for (_, a) in st.alloc.assignments() {
            *services.entry(a.pool.as_str()).or_default() += 1;
            let sets = used.entry(a.pool.as_str()).or_default();
            for ip in &a.ips {
                sets[usize::from(Family::of(*ip) == Family::V6)].insert(*ip);
            }
        }
        st.pools
            .iter()
            .map(|p| {
                let [v4, v6] = used
                    .get(p.name.as_str())
                    .map_or([0, 0], |s| [s[0].len() as u128, s[1].len() as u128]);
                PoolCounts {
                    name: p.name.clone(),
                    capacity: convert::capacity(p),
                    assigned: Capacity { v4, v6 },
                    services: services.get(p.name.as_str()).copied().unwrap_or(0),
                }
            })
            .collect()
    }

    /// A seeded xorshift64: the same histories on every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// A random Service of the histories below: single-stack of either
    /// family, dual-stack (required or preferred), sharing an address by
    /// key, requesting one, or pinned to a pool, some not LoadBalancers;
    /// its status holds what it was last given (as the reconciler writes
    /// it), or nothing.
    fn random_service(rng: &mut Rng, name: &str, ingress: &[IpAddr]) -> K8sService {
        let ingress: Vec<String> = ingress.iter().map(ToString::to_string).collect();
        let ingress: Vec<&str> = ingress.iter().map(String::as_str).collect();
        let mut svc = service(name, &ingress);
        let spec = svc.spec.as_mut().unwrap();
        let mut annotations = BTreeMap::new();
        match rng.below(9) {
            0 => spec.ip_families = Some(vec!["IPv6".into()]),
            1 => {
                spec.ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
                spec.ip_family_policy = Some("RequireDualStack".into());
            }
            2 => {
                spec.ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
                spec.ip_family_policy = Some("PreferDualStack".into());
            }
            3 => {
                // Shares by key with others on other ports.
                annotations.insert(convert::ANNOTATION_ALLOW_SHARED_IP.into(), "k".into());
                let port = 1000 + i32::try_from(rng.below(50)).unwrap();
                spec.ports = Some(vec![k8s_openapi::api::core::v1::ServicePort {
                    port,
                    ..Default::default()
                }]);
            }
            4 => {
                let ip = format!("10.0.{}.{}", rng.below(4), rng.below(8));
                annotations.insert(convert::ANNOTATION_LOAD_BALANCER_IPS.into(), ip);
            }
            5 => {
                let pool = ["a", "b", "c", "d"][rng.below(4)];
                annotations.insert(convert::ANNOTATION_ADDRESS_POOL.into(), pool.into());
            }
            6 => spec.type_ = Some("ClusterIP".into()),
            _ => {}
        }
        svc.metadata.annotations = Some(annotations);
        svc
    }

    /// Random pool objects over the same address space: renamed, split in
    /// two, merged, shrunk or gone, so that assignments follow a pool to
    /// its new name, or are lost.
    fn random_pools(rng: &mut Rng) -> Vec<IPAddressPool> {
        let names = ["a", "b", "c", "d", "e"];
        let mut out = Vec::new();
        for block in 0..4 {
            let name = names[(block + rng.below(2)) % names.len()];
            match rng.below(6) {
                0 => {}                                                      // gone
                1 => out.push(pool(name, &[&format!("10.0.{block}.0/29")])), // shrunk
                2 => {
                    // Split in two pools.
                    out.push(pool(
                        &format!("{name}-lo"),
                        &[
                            &format!("10.0.{block}.0/29"),
                            &format!("fc00::{block}:0/126"),
                        ],
                    ));
                    out.push(pool(
                        &format!("{name}-hi"),
                        &[
                            &format!("10.0.{block}.8/29"),
                            &format!("fc00::{block}:4/126"),
                        ],
                    ));
                }
                _ => out.push(pool(
                    name,
                    &[
                        &format!("10.0.{block}.0/28"),
                        &format!("fc00::{block}:0/125"),
                    ],
                )),
            }
        }
        // Two blocks under one name: a merge.
        out.sort_by_key(|a| a.name_any());
        out.dedup_by(|b, a| {
            if a.name_any() != b.name_any() {
                return false;
            }
            a.spec.addresses.append(&mut b.spec.addresses);
            true
        });
        out
    }

    /// The counts kept as assignments change ([`State::pool_counts`])
    /// equal a full recount over every assignment after each step of
    /// seeded random histories of assigns, re-syncs, releases and pool
    /// edits (renames, splits, merges, shrinks, removals).
    #[test]
    fn pool_counts_equal_a_full_recount_through_random_histories() {
        // What the histories went through: assignments kept under a pool
        // of another name, and addresses held by two services at once.
        let (mut moved, mut shared) = (0, 0);
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut st = State::new(None);
            st.set_pool_objects(&random_pools(&mut rng));
            // What each Service's status holds, as last written.
            let mut status: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
            for step in 0..300 {
                let name = format!("s{}", rng.below(60));
                match rng.below(10) {
                    0 => {
                        st.forget(&convert::key(&service(&name, &[])));
                        status.remove(&name);
                    }
                    1 => {
                        let before: BTreeMap<ServiceKey, String> = st
                            .alloc
                            .assignments()
                            .map(|(k, a)| (k.clone(), a.pool.clone()))
                            .collect();
                        let (_, lost, _) = st.set_pool_objects(&random_pools(&mut rng));
                        for key in lost {
                            status.remove(&key.name);
                        }
                        moved += st
                            .alloc
                            .assignments()
                            .filter(|(k, a)| before.get(*k).is_some_and(|p| *p != a.pool))
                            .count();
                    }
                    _ => {
                        let now = status.get(&name).cloned().unwrap_or_default();
                        let svc = random_service(&mut rng, &name, &now);
                        match st.sync(&svc) {
                            Outcome::Assigned { assignment, .. } => {
                                status.insert(name, assignment.ips);
                            }
                            Outcome::Failed(_) | Outcome::NotLoadBalancer => {
                                status.remove(&name);
                            }
                            _ => {}
                        }
                    }
                }
                assert_eq!(st.pool_counts(), recount(&st), "seed {seed}, step {step}");
                let held = st
                    .alloc
                    .assignments()
                    .map(|(_, a)| a.ips.len())
                    .sum::<usize>();
                let distinct: BTreeSet<IpAddr> = st
                    .alloc
                    .assignments()
                    .flat_map(|(_, a)| a.ips.iter().copied())
                    .collect();
                shared += usize::from(held > distinct.len());
            }
        }
        assert!(moved > 0 && shared > 0, "moved {moved}, shared {shared}");
    }

    fn dual_preferred(name: &str, ingress: &[&str]) -> K8sService {
        let mut s = service(name, ingress);
        let spec = s.spec.as_mut().unwrap();
        spec.ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
        spec.ip_family_policy = Some("PreferDualStack".into());
        s
    }

    /// A held `.0` of a pool that now avoids it is kept after a restart,
    /// unchanged, and the outcome says which rule it breaks.
    #[test]
    fn a_kept_address_says_what_it_breaks() {
        let mut st = State::new(None);
        let mut p = pool("p", &["10.0.0.0/30"]);
        p.spec.avoid_buggy_ips = Some(true);
        st.set_pool_objects(&[p]);
        match st.sync(&service("s", &["10.0.0.0"])) {
            Outcome::Assigned {
                assignment,
                changed,
                breaks,
            } => {
                assert_eq!(assignment.ips, ["10.0.0.0".parse::<IpAddr>().unwrap()]);
                assert!(!changed);
                assert_eq!(
                    breaks,
                    ["10.0.0.0 ends in .0 or .255 and pool p has avoidBuggyIPs"]
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ips(&st.sync(&service("new", &[]))), ["10.0.0.1"]);
    }

    /// A replay gives no family to a PreferDualStack service before every
    /// held address is back: the only IPv6 address stays with its holder,
    /// though the dual-stack service comes first.
    #[test]
    fn a_replay_gains_families_only_after_every_address_is_back() {
        let mut st = State::new(None);
        st.set_pool_objects(&[pool("d", &["10.0.0.0/30", "fc00::/128"])]);
        let dual = dual_preferred("a-dual", &["10.0.0.1"]);
        let mut v6 = service("b-v6", &["fc00::"]);
        v6.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into()]);
        let services = [dual, v6];
        let out = st.replay(&services.iter().collect::<Vec<_>>());
        let got: Vec<Vec<String>> = out.iter().map(|(_, o)| ips(o)).collect();
        assert_eq!(got, [vec!["10.0.0.1"], vec!["fc00::"]]);
        // Freed: the dual-stack service gains it.
        st.forget(&convert::key(&services[1]));
        assert_eq!(ips(&st.sync(&services[0])), ["10.0.0.1", "fc00::"]);
    }

    /// What `kubectl ferrolb diff` hands the speakers: the Service as the
    /// reconciler writes it for each outcome.
    #[test]
    fn an_outcome_is_applied_as_the_reconciler_writes_it() {
        let mut st = State::new(None);
        st.set_pool_objects(&[pool("a", &["10.0.0.0/30"])]);
        let mut svc = service("s", &["10.9.9.9"]);
        svc.metadata.annotations = Some(BTreeMap::from([(
            "metallb.universe.tf/ip-allocated-from-pool".to_owned(),
            "old".to_owned(),
        )]));
        let assigned = st.sync(&service("s", &[])).applied_to(&svc);
        assert_eq!(convert::ingress_ips(&assigned), ["10.0.0.0"]);
        assert_eq!(
            assigned.metadata.annotations,
            Some(BTreeMap::from([(
                convert::ANNOTATION_ALLOCATED_FROM_POOL.to_owned(),
                "a".to_owned()
            )]))
        );
        let failed = Outcome::Failed(AllocError::NoPool).applied_to(&assigned);
        assert!(convert::ingress_ips(&failed).is_empty());
        assert_eq!(failed.metadata.annotations, Some(BTreeMap::new()));
        assert_eq!(Outcome::Held.applied_to(&assigned), assigned);
    }
}
