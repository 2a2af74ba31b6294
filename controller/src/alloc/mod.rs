//! The pure IP allocator: MetalLB's assignment semantics, deterministic
//! and restart-stable.
//!
//! No I/O, no clock, no Kubernetes types: pools are the model's
//! ([`api::model::Pool`], from [`api::validate`]); the reconciler turns
//! `Service`s into [`Service`]s, calls [`Allocator::assign`] /
//! [`Allocator::release`], and writes the result. Which pool holds
//! requested addresses is [`api::model::pool_for`], the function the
//! speakers use too; which pools a service may take from is
//! [`api::model::ServiceAllocation::selects`].
//!
//! Rules (MetalLB's, with its randomness removed):
//! - requested IPs (`metallb.io/loadBalancerIPs`, `spec.loadBalancerIP`)
//!   must all lie in one pool, which must be the annotated pool if any;
//! - otherwise the `address-pool` annotation names the pool (even one with
//!   `autoAssign: false`); otherwise the candidates are the auto-assign
//!   pools whose `serviceAllocation` selects the service, by priority
//!   (lower first), then the auto-assign pools without `serviceAllocation`,
//!   by name;
//! - the lowest free address of a pool is chosen (skipping `.0` and
//!   `.255` with `avoidBuggyIPs`); a service with a sharing key first
//!   reuses an address of its key it can share;
//! - an address is shared only by services with the same sharing key, no
//!   common port/protocol, and either both `externalTrafficPolicy:
//!   Cluster` or identical pod selectors;
//! - dual-stack takes one address per family from one pool;
//! - a service keeps its addresses while they stay valid: re-assigning is
//!   idempotent, and after a restart the addresses in the Service's status
//!   are taken back first (replay services that have addresses before the
//!   pending ones, and no pending service can take them).
//!
//! Pools are sets of intervals: a /64 is never enumerated; allocation and
//! release are O(log n) in the number of allocated intervals.

mod ranges;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use api::addr::{from_u128, to_u128};
pub use api::model::{Pool, ServiceAllocation};

use self::ranges::IntervalSet;

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(ip: IpAddr) -> Self {
        if ip.is_ipv4() { Self::V4 } else { Self::V6 }
    }

    /// The address of this family numbered `n` ([`api::addr::to_u128`]).
    fn addr(self, n: u128) -> IpAddr {
        match self {
            Self::V4 => from_u128(IpAddr::V4(Ipv4Addr::UNSPECIFIED), n),
            Self::V6 => from_u128(IpAddr::V6(Ipv6Addr::UNSPECIFIED), n),
        }
    }
}

/// `spec.ipFamilyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FamilyPolicy {
    /// One address, of the first family.
    #[default]
    SingleStack,
    /// Both families if a pool has both, else one.
    PreferDualStack,
    /// Both families or nothing.
    RequireDualStack,
}

/// A transport protocol of a service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

/// A service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port {
    /// Port number.
    pub port: u16,
    /// Protocol.
    pub protocol: Protocol,
}

/// Namespace and name of a service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ServiceKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A LoadBalancer service, as the allocator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Service {
    /// Namespace and name.
    pub key: ServiceKey,
    /// The service's labels.
    pub labels: BTreeMap<String, String>,
    /// Its namespace's labels.
    pub namespace_labels: BTreeMap<String, String>,
    /// `spec.ipFamilies` in order (empty means IPv4).
    pub families: Vec<Family>,
    /// `spec.ipFamilyPolicy`.
    pub policy: FamilyPolicy,
    /// Requested addresses (`metallb.io/loadBalancerIPs` or
    /// `spec.loadBalancerIP`).
    pub requested: Vec<IpAddr>,
    /// The `address-pool` annotation.
    pub pool: Option<String>,
    /// The `allow-shared-ip` annotation.
    pub sharing_key: Option<String>,
    /// Ports.
    pub ports: Vec<Port>,
    /// `externalTrafficPolicy: Local`.
    pub etp_local: bool,
    /// The pod selector.
    pub selector: BTreeMap<String, String>,
    /// Addresses in `status.loadBalancer.ingress` (taken back on replay).
    pub current: Vec<IpAddr>,
}

/// The addresses given to a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The pool they came from.
    pub pool: String,
    /// The addresses, in the service's family order.
    pub ips: Vec<IpAddr>,
}

/// Why a service got no address; the message names the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The annotated pool does not exist.
    #[error("pool {0:?} does not exist")]
    UnknownPool(String),
    /// No pool may serve the service.
    #[error("no available pool for this service (check autoAssign and serviceAllocation)")]
    NoPool,
    /// The pools were tried and none had a free address for every family.
    #[error("no available IPs in {pools}")]
    Exhausted {
        /// The pools tried.
        pools: String,
    },
    /// More than one address per family, or more than two, requested.
    #[error("invalid requested IPs {0:?}: at most one per address family")]
    BadRequest(Vec<IpAddr>),
    /// Requested addresses that no single pool holds.
    #[error("requested IPs {0:?} are not all in one pool")]
    NotInPool(Vec<IpAddr>),
    /// A requested address in another pool than the annotated one.
    #[error("requested IP {ip} is not in pool {pool:?}")]
    WrongPool {
        /// The address.
        ip: IpAddr,
        /// The annotated pool.
        pool: String,
    },
    /// A requested address held by a service it cannot be shared with.
    #[error("requested IP {ip} is in use by {by} and cannot be shared")]
    InUse {
        /// The address.
        ip: IpAddr,
        /// A service holding it.
        by: ServiceKey,
    },
    /// The requested families cannot be met (RequireDualStack without a
    /// dual-stack pool, or requested IPs not matching ipFamilies).
    #[error("cannot allocate the address families the service asks for: {0}")]
    Families(String),
}

/// How a service uses an address, for sharing decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    key: ServiceKey,
    sharing_key: Option<String>,
    ports: Vec<Port>,
    etp_local: bool,
    selector: BTreeMap<String, String>,
}

impl Use {
    fn of(svc: &Service) -> Self {
        Self {
            key: svc.key.clone(),
            sharing_key: svc.sharing_key.clone(),
            ports: svc.ports.clone(),
            etp_local: svc.etp_local,
            selector: svc.selector.clone(),
        }
    }

    /// MetalLB's sharing rule.
    fn compatible(&self, other: &Self) -> bool {
        let same_key =
            matches!((&self.sharing_key, &other.sharing_key), (Some(a), Some(b)) if a == b);
        let disjoint_ports = self.ports.iter().all(|p| !other.ports.contains(p));
        let same_pods = (!self.etp_local && !other.etp_local) || self.selector == other.selector;
        same_key && disjoint_ports && same_pods
    }
}

/// Allocation state of one pool.
#[derive(Debug, Clone)]
struct PoolState {
    pool: Pool,
    /// Addresses of the pool, per family.
    space: [IntervalSet; 2],
    /// Addresses in use, per family.
    used: [IntervalSet; 2],
}

fn fam_index(f: Family) -> usize {
    match f {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

impl PoolState {
    fn new(pool: Pool) -> Self {
        let mut space = [IntervalSet::default(), IntervalSet::default()];
        for r in &pool.ranges {
            space[fam_index(Family::of(r.first()))]
                .insert_range(to_u128(r.first()), to_u128(r.last()));
        }
        Self {
            pool,
            space,
            used: [IntervalSet::default(), IntervalSet::default()],
        }
    }

    fn contains(&self, ip: IpAddr) -> bool {
        self.pool.contains(ip)
    }

    fn has_family(&self, f: Family) -> bool {
        self.pool.has_family(f == Family::V4)
    }

    fn buggy(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.pool.avoid_buggy_ips && matches!(a.octets()[3], 0 | 255),
            IpAddr::V6(_) => false,
        }
    }

    /// The lowest free, usable address of `family`.
    fn first_free(&self, family: Family) -> Option<IpAddr> {
        let i = fam_index(family);
        for (start, end) in self.space[i].iter() {
            let mut c = start;
            while c <= end {
                let free = self.used[i].next_free(c)?;
                if free > end {
                    break;
                }
                let ip = family.addr(free);
                if !self.buggy(ip) {
                    return Some(ip);
                }
                c = free + 1;
            }
        }
        None
    }
}

/// The allocator: pools, and who holds which address.
#[derive(Debug, Clone, Default)]
pub struct Allocator {
    pools: BTreeMap<String, PoolState>,
    assignments: HashMap<ServiceKey, Assignment>,
    users: HashMap<IpAddr, Vec<Use>>,
}

/// Per-pool counters (for `metallb_allocator_addresses_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Addresses in the pool (saturating).
    pub total: u128,
    /// Addresses held by at least one service.
    pub in_use: u128,
}

impl Allocator {
    /// An allocator over `pools`.
    pub fn new(pools: Vec<Pool>) -> Self {
        let mut a = Self::default();
        a.set_pools(pools);
        a
    }

    /// Replaces the pools. Services whose addresses are no longer in their
    /// pool lose them and are returned, to be assigned again; the others
    /// keep theirs.
    pub fn set_pools(&mut self, pools: Vec<Pool>) -> Vec<ServiceKey> {
        self.pools = pools
            .into_iter()
            .map(|p| (p.name.clone(), PoolState::new(p)))
            .collect();
        let mut lost = Vec::new();
        let assignments = std::mem::take(&mut self.assignments);
        let users = std::mem::take(&mut self.users);
        for (key, asg) in assignments {
            let still = self
                .pools
                .get(&asg.pool)
                .is_some_and(|p| asg.ips.iter().all(|ip| p.contains(*ip)));
            if still {
                for ip in &asg.ips {
                    if let Some(u) = users
                        .get(ip)
                        .and_then(|us| us.iter().find(|u| u.key == key))
                    {
                        self.hold(&asg.pool, *ip, u.clone());
                    }
                }
                self.assignments.insert(key, asg);
            } else {
                lost.push(key);
            }
        }
        lost.sort();
        lost
    }

    /// The current assignment of a service.
    pub fn assignment(&self, key: &ServiceKey) -> Option<&Assignment> {
        self.assignments.get(key)
    }

    /// Counters of a pool.
    pub fn pool_stats(&self, name: &str) -> Option<PoolStats> {
        let p = self.pools.get(name)?;
        let total = p.space.iter().fold(0u128, |a, s| a.saturating_add(s.len()));
        let in_use = p.used.iter().fold(0u128, |a, s| a.saturating_add(s.len()));
        Some(PoolStats { total, in_use })
    }

    /// Assigns addresses to `svc`, keeping valid existing ones (so calling
    /// it again is a no-op, and after a restart the addresses of
    /// `svc.current` are taken back when still allowed).
    pub fn assign(&mut self, svc: &Service) -> Result<Assignment, AllocError> {
        // Addresses the service holds now, kept where still possible (a
        // single- to dual-stack change keeps the first family's address).
        let mut prefer = svc.current.clone();
        if let Some(existing) = self.assignments.get(&svc.key).cloned() {
            if self.still_valid(svc, &existing) {
                self.update_use(svc, &existing);
                return Ok(existing);
            }
            prefer = existing.ips.clone();
            self.release(&svc.key);
        }
        if svc.requested.is_empty() && !svc.current.is_empty() {
            let mut replay = svc.clone();
            replay.requested = svc.current.clone();
            if let Ok(a) = self.assign_requested(&replay) {
                return Ok(a);
            }
        }
        if svc.requested.is_empty() {
            self.assign_auto(svc, &prefer)
        } else {
            self.assign_requested(svc)
        }
    }

    /// Frees the addresses of a service.
    pub fn release(&mut self, key: &ServiceKey) {
        let Some(asg) = self.assignments.remove(key) else {
            return;
        };
        for ip in asg.ips {
            let Some(list) = self.users.get_mut(&ip) else {
                continue;
            };
            list.retain(|u| &u.key != key);
            if list.is_empty() {
                self.users.remove(&ip);
                if let Some(p) = self.pools.get_mut(&asg.pool) {
                    p.used[fam_index(Family::of(ip))].remove(to_u128(ip));
                }
            }
        }
    }

    // --- internals -----------------------------------------------------

    /// The families the service wants, in order, and whether the second
    /// one may be dropped.
    fn wanted(svc: &Service) -> (Vec<Family>, bool) {
        let mut fams = if svc.families.is_empty() {
            vec![Family::V4]
        } else {
            svc.families.clone()
        };
        fams.dedup();
        match svc.policy {
            FamilyPolicy::SingleStack => (fams[..1].to_vec(), false),
            FamilyPolicy::PreferDualStack => (fams, true),
            FamilyPolicy::RequireDualStack => (fams, false),
        }
    }

    fn still_valid(&self, svc: &Service, a: &Assignment) -> bool {
        let Some(pool) = self.pools.get(&a.pool) else {
            return false;
        };
        if !a.ips.iter().all(|ip| pool.contains(*ip)) {
            return false;
        }
        if svc.pool.as_ref().is_some_and(|p| *p != a.pool) {
            return false;
        }
        if !svc.requested.is_empty() {
            let mut want = svc.requested.clone();
            let mut have = a.ips.clone();
            want.sort();
            have.sort();
            if want != have {
                return false;
            }
        } else {
            // An auto-assigned service keeps its addresses while they stay
            // in a pool: pool and allocation edits never move a service
            // whose addresses are still valid (restart and upgrade
            // stability); only shrinking or deleting the pool does.
            let (fams, optional) = Self::wanted(svc);
            let have: Vec<Family> = a.ips.iter().map(|ip| Family::of(*ip)).collect();
            let full = have == fams;
            let degraded = optional && have.len() == 1 && fams.first() == have.first();
            let degraded_other = optional && have.len() == 1 && !pool.has_family(fams[0]);
            if !(full || degraded || degraded_other) {
                return false;
            }
        }
        let me = Use::of(svc);
        a.ips.iter().all(|ip| {
            self.users
                .get(ip)
                .is_none_or(|us| us.iter().all(|u| u.key == svc.key || u.compatible(&me)))
        })
    }

    /// Candidate pools for auto-assignment, in preference order.
    fn candidates(&self, svc: &Service) -> Result<Vec<String>, AllocError> {
        if let Some(name) = &svc.pool {
            return match self.pools.contains_key(name) {
                true => Ok(vec![name.clone()]),
                false => Err(AllocError::UnknownPool(name.clone())),
            };
        }
        let mut selected: Vec<(i32, &String)> = Vec::new();
        let mut plain: Vec<&String> = Vec::new();
        for (name, p) in &self.pools {
            if !p.pool.auto_assign {
                continue;
            }
            match &p.pool.allocation {
                Some(a) if a.selects(&svc.key.namespace, &svc.namespace_labels, &svc.labels) => {
                    selected.push((a.priority, name));
                }
                Some(_) => {}
                None => plain.push(name),
            }
        }
        selected.sort();
        let out: Vec<String> = selected
            .into_iter()
            .map(|(_, n)| n.clone())
            .chain(plain.into_iter().cloned())
            .collect();
        if out.is_empty() {
            Err(AllocError::NoPool)
        } else {
            Ok(out)
        }
    }

    fn assign_auto(&mut self, svc: &Service, prefer: &[IpAddr]) -> Result<Assignment, AllocError> {
        let pools = self.candidates(svc)?;
        let (fams, optional) = Self::wanted(svc);
        let me = Use::of(svc);
        let mut attempts: Vec<Vec<Family>> = vec![fams.clone()];
        if optional && fams.len() == 2 {
            attempts.push(vec![fams[0]]);
            attempts.push(vec![fams[1]]);
        }
        for want in &attempts {
            for name in &pools {
                if let Some(ips) = self.pick(name, want, &me, prefer) {
                    return Ok(self.commit(svc, name, ips));
                }
            }
        }
        if svc.policy == FamilyPolicy::RequireDualStack
            && !pools.iter().any(|n| {
                self.pools[n].has_family(Family::V4) && self.pools[n].has_family(Family::V6)
            })
        {
            return Err(AllocError::Families(
                "RequireDualStack, but no candidate pool has both families".into(),
            ));
        }
        Err(AllocError::Exhausted {
            pools: pools.join(", "),
        })
    }

    /// One address per family from pool `name`, or `None`. A preferred
    /// address of the family that the pool holds and that is free (or
    /// shareable) comes first.
    fn pick(
        &self,
        name: &str,
        want: &[Family],
        me: &Use,
        prefer: &[IpAddr],
    ) -> Option<Vec<IpAddr>> {
        let p = self.pools.get(name)?;
        let mut ips = Vec::with_capacity(want.len());
        for f in want {
            if !p.has_family(*f) {
                return None;
            }
            let kept = prefer.iter().copied().find(|ip| {
                Family::of(*ip) == *f
                    && p.contains(*ip)
                    && !p.buggy(*ip)
                    && self
                        .users
                        .get(ip)
                        .is_none_or(|us| us.iter().all(|u| u.compatible(me)))
            });
            if let Some(ip) = kept {
                ips.push(ip);
                continue;
            }
            // A sharing key reuses an address of its key that it can share.
            let shared = me.sharing_key.as_ref().and_then(|_| {
                let mut c: Vec<IpAddr> = self
                    .users
                    .iter()
                    .filter(|(ip, us)| {
                        Family::of(**ip) == *f
                            && p.contains(**ip)
                            && us.iter().all(|u| u.compatible(me))
                    })
                    .map(|(ip, _)| *ip)
                    .collect();
                c.sort();
                c.first().copied()
            });
            ips.push(shared.or_else(|| p.first_free(*f))?);
        }
        Some(ips)
    }

    fn assign_requested(&mut self, svc: &Service) -> Result<Assignment, AllocError> {
        let req = &svc.requested;
        let families: Vec<Family> = req.iter().map(|ip| Family::of(*ip)).collect();
        if req.len() > 2 || (req.len() == 2 && families[0] == families[1]) {
            return Err(AllocError::BadRequest(req.clone()));
        }
        let (fams, _) = Self::wanted(svc);
        if req.len() == 1 && svc.policy == FamilyPolicy::RequireDualStack {
            return Err(AllocError::Families(
                "RequireDualStack needs one requested IP per family".into(),
            ));
        }
        if !families.iter().all(|f| fams.contains(f)) && !svc.families.is_empty() {
            return Err(AllocError::Families(format!(
                "requested IPs {req:?} do not match ipFamilies"
            )));
        }
        let pool = match &svc.pool {
            Some(name) => {
                let p = self
                    .pools
                    .get(name)
                    .ok_or_else(|| AllocError::UnknownPool(name.clone()))?;
                if let Some(ip) = req.iter().find(|ip| !p.contains(**ip)) {
                    return Err(AllocError::WrongPool {
                        ip: *ip,
                        pool: name.clone(),
                    });
                }
                name.clone()
            }
            None => api::model::pool_for(self.pools.values().map(|p| &p.pool), req)
                .map(|p| p.name.clone())
                .ok_or_else(|| AllocError::NotInPool(req.clone()))?,
        };
        let me = Use::of(svc);
        for ip in req {
            if let Some(u) = self
                .users
                .get(ip)
                .and_then(|us| us.iter().find(|u| u.key != svc.key && !u.compatible(&me)))
            {
                return Err(AllocError::InUse {
                    ip: *ip,
                    by: u.key.clone(),
                });
            }
        }
        // Keep the service's family order.
        let mut ips = req.clone();
        ips.sort_by_key(|ip| {
            fams.iter()
                .position(|f| *f == Family::of(*ip))
                .unwrap_or(usize::MAX)
        });
        Ok(self.commit(svc, &pool, ips))
    }

    fn hold(&mut self, pool: &str, ip: IpAddr, u: Use) {
        if let Some(p) = self.pools.get_mut(pool) {
            p.used[fam_index(Family::of(ip))].insert(to_u128(ip));
        }
        let list = self.users.entry(ip).or_default();
        list.retain(|x| x.key != u.key);
        list.push(u);
    }

    fn commit(&mut self, svc: &Service, pool: &str, ips: Vec<IpAddr>) -> Assignment {
        let me = Use::of(svc);
        for ip in &ips {
            self.hold(pool, *ip, me.clone());
        }
        let a = Assignment {
            pool: pool.to_owned(),
            ips,
        };
        self.assignments.insert(svc.key.clone(), a.clone());
        a
    }

    /// Refreshes how a service uses its addresses (ports may change).
    fn update_use(&mut self, svc: &Service, a: &Assignment) {
        for ip in &a.ips {
            self.hold(&a.pool, *ip, Use::of(svc));
        }
    }
}

#[cfg(test)]
mod tests;
