//! The controller's decisions: pools, namespace labels and the allocator,
//! with Services in and [`Outcome`]s out.
//!
//! Pure and synchronous (no client, no clock): the reconciler holds one
//! [`State`] behind a mutex and writes what it decides; `controller plan`
//! drives one over objects read from files. Both therefore decide alike.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use api::v1beta1::IPAddressPoolStatus;
use k8s_openapi::api::core::v1::Service as K8sService;

use crate::alloc::{AllocError, Allocator, Assignment, Family, Pool, ServiceKey};
use crate::convert::{self, Capacity, Reading};

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
}

/// Pools, namespace labels and the allocator.
#[derive(Debug, Clone, Default)]
pub struct State {
    lb_class: Option<String>,
    pools: Vec<Pool>,
    alloc: Allocator,
    /// What each service holds (the allocator keeps the same; this copy
    /// gives per-family counts and the keys to garbage-collect).
    held: HashMap<ServiceKey, Assignment>,
    /// Services that wait for an address.
    pending: BTreeSet<ServiceKey>,
    namespace_labels: HashMap<String, BTreeMap<String, String>>,
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
        for key in &lost {
            self.held.remove(key);
        }
        (true, lost)
    }

    /// Sets the labels of a namespace (`None`: it is gone).
    pub fn set_namespace_labels(&mut self, name: &str, labels: Option<BTreeMap<String, String>>) {
        match labels {
            Some(l) => self.namespace_labels.insert(name.to_owned(), l),
            None => self.namespace_labels.remove(name),
        };
    }

    /// Decides for one Service, updating the allocator. Idempotent.
    pub fn sync(&mut self, svc: &K8sService) -> Outcome {
        let key = convert::key(svc);
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
                if !self.held.contains_key(&key) {
                    self.pending.insert(key);
                }
                Outcome::Invalid(msg)
            }
            Reading::LoadBalancer(s) => match self.alloc.assign(&s) {
                Ok(a) => {
                    let mut now: Vec<IpAddr> = s.current.clone();
                    let mut want = a.ips.clone();
                    now.sort();
                    want.sort();
                    let changed = now != want || now.len() != convert::ingress_ips(svc).len();
                    self.pending.remove(&key);
                    self.held.insert(key, a.clone());
                    Outcome::Assigned {
                        assignment: a,
                        changed,
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
        self.alloc.release(key);
        self.held.remove(key).is_some()
    }

    /// The services that hold addresses.
    pub fn holders(&self) -> impl Iterator<Item = &ServiceKey> {
        self.held.keys()
    }

    /// The services waiting for an address, in order.
    pub fn pending(&self) -> impl Iterator<Item = &ServiceKey> {
        self.pending.iter()
    }

    /// What a service holds.
    pub fn assignment(&self, key: &ServiceKey) -> Option<&Assignment> {
        self.held.get(key)
    }

    /// Address counts of every pool, by name.
    pub fn pool_counts(&self) -> Vec<PoolCounts> {
        let mut used: HashMap<&str, [BTreeSet<IpAddr>; 2]> = HashMap::new();
        for a in self.held.values() {
            let sets = used.entry(a.pool.as_str()).or_default();
            for ip in &a.ips {
                sets[usize::from(Family::of(*ip) == Family::V6)].insert(*ip);
            }
        }
        self.pools
            .iter()
            .map(|p| {
                let [v4, v6] = used
                    .get(p.name.as_str())
                    .map_or([0, 0], |s| [s[0].len() as u128, s[1].len() as u128]);
                PoolCounts {
                    name: p.name.clone(),
                    capacity: convert::capacity(p),
                    assigned: Capacity { v4, v6 },
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
