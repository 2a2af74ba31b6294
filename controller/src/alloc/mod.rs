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
//! Rules for a new address (MetalLB's, with its randomness removed):
//! - requested IPs (`metallb.io/loadBalancerIPs`, `spec.loadBalancerIP`)
//!   must all lie in one pool (else "is not allowed in config"), not be a
//!   `.0`/`.255` of a pool with `avoidBuggyIPs`, be in a pool whose
//!   `serviceAllocation` (if any) selects the service, and be in the
//!   annotated pool if there is one;
//! - otherwise the `address-pool` annotation names the pool (even one with
//!   `autoAssign: false`, but it must select the service); otherwise the
//!   auto-assign pools whose `serviceAllocation` selects the service are
//!   tried first, by priority (a priority of 0 or none last, then by
//!   name), and only if none of them can serve it the auto-assign pools
//!   without `serviceAllocation`, by name;
//! - in a pool, the first address in the order `spec.addresses` lists
//!   them (ascending inside one entry) that is free or that the service
//!   may share, skipping `.0` and `.255` with `avoidBuggyIPs`;
//! - an address is shared only by services with the same non-empty
//!   sharing key, no common port/protocol, and the same backends
//!   (MetalLB's backend key: both `externalTrafficPolicy: Cluster`, or
//!   both `Local` with the same pod selector);
//! - dual-stack takes one address per family from one pool, IPv4 first
//!   in the result; `PreferDualStack` falls back to the service's first
//!   family, then its second, and a service that got one family gains the
//!   other from its pool as soon as the pool has one free.
//!
//! Rules for an address a service already holds (ferrolb's, for
//! restart stability): it is kept while its pool (any pool, after a rename
//! or a split) contains it, the request and pool annotation still name it,
//! and the service's families allow it, even when a later pool edit makes
//! it break `avoidBuggyIPs` or `serviceAllocation`; [`Allocator::breaks`]
//! says what it breaks, for the reconciler to report. Sharing is judged by
//! the rule above when the service's ports, key or backends change, and
//! otherwise by the rule of earlier ferrolb versions (which let `Cluster`
//! and `Local` services with one selector share), so that an upgrade moves
//! nothing. After a restart the addresses in the Service's status are
//! taken back by the same rules (replay services that have addresses
//! before the pending ones, and no pending service can take them).
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

/// Why a service got no address; the message names the cause (MetalLB's
/// wording where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The annotated pool does not exist.
    #[error("unknown pool {0:?}")]
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
    #[error("invalid requested IPs {}: at most one per address family", quoted(.0))]
    BadRequest(Vec<IpAddr>),
    /// Requested addresses that no single pool holds, or a `.0`/`.255` of
    /// a pool with `avoidBuggyIPs` (MetalLB's message).
    #[error("{} is not allowed in config", quoted(.0))]
    NotAllowed(Vec<IpAddr>),
    /// Requested addresses in another pool than the annotated one.
    #[error(
        "requested loadBalancer IP(s) {} is not compatible with requested address pool {pool}",
        quoted(ips)
    )]
    WrongPool {
        /// The addresses.
        ips: Vec<IpAddr>,
        /// The annotated pool.
        pool: String,
    },
    /// The pool's `serviceAllocation` does not select the service.
    #[error("pool {0} not compatible for ip assignment")]
    NotCompatible(String),
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

/// Addresses as Go's `%q` prints a slice of them: `["10.0.0.1" "fc00::1"]`.
fn quoted(ips: &[IpAddr]) -> String {
    let v: Vec<String> = ips.iter().map(|ip| format!("\"{ip}\"")).collect();
    format!("[{}]", v.join(" "))
}

/// One pool as the allocator weighs it for a service
/// ([`Allocator::consider`]): whether the service may take from it, and
/// what it would get there. Plain data, to explain a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Considered {
    /// The pool.
    pub pool: String,
    /// Whether the service may take from it, and in which tier.
    pub eligibility: Eligibility,
    /// For a pool the service may take from, per address it asks for (one
    /// per family it wants, or each requested address), what the pool has;
    /// empty for a refused pool.
    pub offers: Vec<Offer>,
}

/// Whether a service may take addresses from a pool: the rule
/// [`Allocator::assign`] applies to each pool, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eligibility {
    /// It holds every requested address and its rules allow them.
    Requested,
    /// The `address-pool` annotation names it and it selects the service.
    Annotated,
    /// Its `serviceAllocation` selects the service: tried first, with the
    /// other such pools, by priority (0 or none last), then by name.
    Selected {
        /// `serviceAllocation.priority`.
        priority: i32,
    },
    /// No `serviceAllocation`: tried by name only when no pool that
    /// selects the service could serve it.
    General,
    /// The service may not take from it.
    Refused(Refusal),
}

impl Eligibility {
    /// Whether the service may take from the pool.
    pub fn is_candidate(&self) -> bool {
        !matches!(self, Self::Refused(_))
    }
}

/// Why a service may not take addresses from a pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The service requests addresses, and this pool does not hold them
    /// all (or another pool, first by name, does too).
    #[error("does not hold the requested addresses")]
    NotRequested,
    /// A requested address ends in .0 or .255 and the pool has
    /// `avoidBuggyIPs`.
    #[error("{} requested, and the pool has avoidBuggyIPs", quoted(.0))]
    BuggyRequest(Vec<IpAddr>),
    /// The `address-pool` annotation names another pool.
    #[error("the service's address-pool annotation names pool {0}")]
    OtherAnnotated(String),
    /// `autoAssign: false`, and the service neither names the pool nor
    /// requests its addresses.
    #[error("autoAssign is false")]
    AutoAssignOff,
    /// Its `serviceAllocation` does not select the service; the sentence
    /// says which list leaves it out.
    #[error("{0}")]
    NotSelected(String),
}

/// What a pool has for one address a service asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// This address: free, already the service's, or shareable with the
    /// services holding it.
    Address(IpAddr),
    /// The pool has no range of the family.
    NoRange(Family),
    /// Every usable address of the family is taken, and none can be shared.
    Full(Family),
    /// A requested address is held by a service it cannot be shared with.
    InUse(IpAddr),
}

/// How a service uses an address, for sharing decisions.
///
/// One is kept per address a service holds, so it is kept small (issue 18:
/// the controller's memory per Service): the selector as a sorted slice,
/// not a `BTreeMap` (whose first entry allocates a node of eleven), and
/// the strings and ports as boxed slices.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    key: ServiceKey,
    /// The sharing key; an empty annotation is no key, as in MetalLB.
    sharing_key: Option<Box<str>>,
    ports: Box<[Port]>,
    etp_local: bool,
    /// The pod selector's entries, in key order.
    selector: Box<[(Box<str>, Box<str>)]>,
}

impl Use {
    fn of(svc: &Service) -> Self {
        Self {
            key: svc.key.clone(),
            sharing_key: svc
                .sharing_key
                .as_deref()
                .filter(|k| !k.is_empty())
                .map(Into::into),
            ports: svc.ports.as_slice().into(),
            etp_local: svc.etp_local,
            selector: svc
                .selector
                .iter()
                .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
                .collect(),
        }
    }

    /// Same sharing parameters (everything but the key).
    fn same_terms(&self, other: &Self) -> bool {
        self.sharing_key == other.sharing_key
            && self.ports == other.ports
            && self.etp_local == other.etp_local
            && self.selector == other.selector
    }

    /// MetalLB's backend key: the pod selector for `Local`, nothing for
    /// `Cluster` (so a `Local` service without selector is `Cluster`'s).
    fn backend(&self) -> Option<&[(Box<str>, Box<str>)]> {
        (self.etp_local && !self.selector.is_empty()).then_some(&*self.selector)
    }

    fn key_and_ports(&self, other: &Self) -> bool {
        let same_key =
            matches!((&self.sharing_key, &other.sharing_key), (Some(a), Some(b)) if a == b);
        same_key && self.ports.iter().all(|p| !other.ports.contains(p))
    }

    /// MetalLB's sharing rule: same key, disjoint ports, same backend key.
    fn compatible(&self, other: &Self) -> bool {
        self.key_and_ports(other) && self.backend() == other.backend()
    }

    /// The rule of ferrolb before it matched MetalLB's backend key (both
    /// `Cluster`, or identical selectors): addresses shared under it are
    /// kept while neither sharer changes.
    fn tolerated(&self, other: &Self) -> bool {
        self.key_and_ports(other)
            && ((!self.etp_local && !other.etp_local) || self.selector == other.selector)
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
    /// How many addresses `used` holds, per family: kept as addresses are
    /// held and freed, so that the pool counts are read without walking
    /// the sets or the assignments (issue 18: every second, under the
    /// reconciles' lock).
    in_use: [u128; 2],
    /// Services whose assignment is in this pool.
    services: u64,
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
            in_use: [0, 0],
            services: 0,
        }
    }

    /// Marks `ip` in use (it may be already: a shared address).
    fn take(&mut self, ip: IpAddr) {
        let (i, n) = (fam_index(Family::of(ip)), to_u128(ip));
        if !self.used[i].contains(n) {
            self.used[i].insert(n);
            self.in_use[i] += 1;
        }
    }

    /// Marks `ip` free.
    fn free(&mut self, ip: IpAddr) {
        let (i, n) = (fam_index(Family::of(ip)), to_u128(ip));
        if self.used[i].contains(n) {
            self.used[i].remove(n);
            self.in_use[i] -= 1;
        }
    }

    fn contains(&self, ip: IpAddr) -> bool {
        self.pool.contains(ip)
    }

    fn has_family(&self, f: Family) -> bool {
        self.pool.has_family(f == Family::V4)
    }

    fn buggy(&self, ip: IpAddr) -> bool {
        self.pool.avoid_buggy_ips && is_buggy(ip)
    }

    /// Whether the pool's `serviceAllocation`, if any, selects `svc`.
    fn selects(&self, svc: &Service) -> bool {
        self.refusal(svc).is_none()
    }

    /// Why the pool's `serviceAllocation` does not select `svc`, if it
    /// does not.
    fn refusal(&self, svc: &Service) -> Option<String> {
        self.pool
            .allocation
            .as_ref()
            .and_then(|a| a.refusal(&svc.key.namespace, &svc.namespace_labels, &svc.labels))
    }

    /// The first usable address of `family` in `spec.addresses` order that
    /// is free or in `shareable` (sorted).
    fn first_usable(&self, family: Family, shareable: &[IpAddr]) -> Option<IpAddr> {
        let i = fam_index(family);
        for r in self
            .pool
            .ranges
            .iter()
            .filter(|r| Family::of(r.first()) == family)
        {
            let (start, end) = (to_u128(r.first()), to_u128(r.last()));
            let free = self.first_free_in(i, family, start, end);
            let shared = shareable
                .iter()
                .map(|ip| to_u128(*ip))
                .find(|n| (start..=end).contains(n) && !self.buggy(family.addr(*n)));
            let best = match (free, shared) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(n) = best {
                return Some(family.addr(n));
            }
        }
        None
    }

    /// The lowest free, usable address in `[start, end]`.
    fn first_free_in(&self, i: usize, family: Family, start: u128, end: u128) -> Option<u128> {
        let mut c = start;
        while c <= end {
            let free = self.used[i].next_free(c)?;
            if free > end {
                return None;
            }
            if !self.buggy(family.addr(free)) {
                return Some(free);
            }
            c = free.checked_add(1)?;
        }
        None
    }
}

/// An IPv4 address ending in `.0` or `.255`.
fn is_buggy(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(a) if matches!(a.octets()[3], 0 | 255))
}

/// MetalLB's pool order by `serviceAllocation.priority`: lower first, and
/// 0 (MetalLB's "unset") or none last.
fn priority_rank(p: &Pool) -> i64 {
    match p.allocation.as_ref().map(|a| a.priority) {
        Some(n) if n > 0 && n != i32::MAX => i64::from(n),
        _ => i64::MAX,
    }
}

/// The allocator: pools, and who holds which address.
#[derive(Debug, Clone, Default)]
pub struct Allocator {
    pools: BTreeMap<String, PoolState>,
    assignments: HashMap<ServiceKey, Assignment>,
    users: HashMap<IpAddr, Vec<Use>>,
    /// No `PreferDualStack` service gains a family (see
    /// [`Allocator::hold_gains`]).
    no_gains: bool,
}

/// Per-pool counters (for `metallb_allocator_addresses_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Addresses in the pool (saturating).
    pub total: u128,
    /// Addresses held by at least one service.
    pub in_use: u128,
}

/// What a pool holds now ([`Allocator::pool_use`]): kept up to date as
/// addresses are held and freed, so reading it costs nothing per Service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolUse {
    /// IPv4 addresses held by at least one service (a shared one counts
    /// once).
    pub v4: u128,
    /// IPv6 addresses held by at least one service.
    pub v6: u128,
    /// Services whose assignment is in the pool (services sharing an
    /// address count each).
    pub services: u64,
}

impl Allocator {
    /// An allocator over `pools`.
    pub fn new(pools: Vec<Pool>) -> Self {
        let mut a = Self::default();
        a.set_pools(pools);
        a
    }

    /// Replaces the pools. A service keeps its addresses while one pool
    /// holds them all (the pool it is recorded in follows a rename or a
    /// split, as in MetalLB); the others lose them and are returned, to be
    /// assigned again.
    pub fn set_pools(&mut self, pools: Vec<Pool>) -> Vec<ServiceKey> {
        self.pools = pools
            .into_iter()
            .map(|p| (p.name.clone(), PoolState::new(p)))
            .collect();
        let mut lost = Vec::new();
        let assignments = std::mem::take(&mut self.assignments);
        let users = std::mem::take(&mut self.users);
        for (key, mut asg) in assignments {
            let home = self.pool_holding(&asg.ips);
            let Some(home) = home else {
                lost.push(key);
                continue;
            };
            asg.pool = home;
            for ip in &asg.ips {
                if let Some(u) = users
                    .get(ip)
                    .and_then(|us| us.iter().find(|u| u.key == key))
                {
                    self.hold(&asg.pool, *ip, u.clone());
                }
            }
            self.record(key, asg);
        }
        lost.sort();
        lost
    }

    /// The current assignment of a service.
    pub fn assignment(&self, key: &ServiceKey) -> Option<&Assignment> {
        self.assignments.get(key)
    }

    /// Every service that holds addresses, with what it holds, in no
    /// particular order.
    pub fn assignments(&self) -> impl Iterator<Item = (&ServiceKey, &Assignment)> {
        self.assignments.iter()
    }

    /// Counters of a pool.
    pub fn pool_stats(&self, name: &str) -> Option<PoolStats> {
        let p = self.pools.get(name)?;
        let total = p.space.iter().fold(0u128, |a, s| a.saturating_add(s.len()));
        let in_use = p.in_use[0].saturating_add(p.in_use[1]);
        Some(PoolStats { total, in_use })
    }

    /// What a pool holds now, per family, and how many services hold it;
    /// O(1): counted as assignments change, not from them.
    pub fn pool_use(&self, name: &str) -> Option<PoolUse> {
        let p = self.pools.get(name)?;
        Some(PoolUse {
            v4: p.in_use[0],
            v6: p.in_use[1],
            services: p.services,
        })
    }

    /// Assigns addresses to `svc`, keeping the ones it holds while they
    /// stay valid (so calling it again is a no-op, and after a restart the
    /// addresses of `svc.current` are taken back), and adding the missing
    /// family of a `PreferDualStack` service when its pool has one.
    pub fn assign(&mut self, svc: &Service) -> Result<Assignment, AllocError> {
        // Addresses the service holds now, kept where still possible (a
        // single- to dual-stack change keeps the first family's address).
        let mut prefer = svc.current.clone();
        if let Some(existing) = self.assignments.get(&svc.key).cloned() {
            if self.keepable(svc, &existing) {
                self.update_use(svc, &existing);
                return Ok(self.gain_family(svc, existing));
            }
            prefer = existing.ips.clone();
            self.release(&svc.key);
        } else if !svc.current.is_empty()
            && (svc.requested.is_empty() || same_set(&svc.requested, &svc.current))
        {
            // After a restart: take back what the status says it holds.
            let mut ips = svc.current.clone();
            ips.dedup();
            if let Some(pool) = self.pool_holding(&ips) {
                let a = Assignment { pool, ips };
                if self.keepable(svc, &a) {
                    let a = self.commit(svc, &a.pool, a.ips);
                    return Ok(self.gain_family(svc, a));
                }
            }
        }
        if svc.requested.is_empty() {
            self.assign_auto(svc, &prefer)
        } else {
            self.assign_requested(svc)
        }
    }

    /// While `on`, no `PreferDualStack` service gains its missing family.
    /// A replay after a restart sets it until every service that holds
    /// addresses has taken them back: a gained address could otherwise be
    /// one that a service replayed later holds.
    pub fn hold_gains(&mut self, on: bool) {
        self.no_gains = on;
    }

    /// Frees the addresses of a service.
    pub fn release(&mut self, key: &ServiceKey) {
        let Some(asg) = self.assignments.remove(key) else {
            return;
        };
        let mut pool = self.pools.get_mut(&asg.pool);
        if let Some(p) = pool.as_deref_mut() {
            p.services = p.services.saturating_sub(1);
        }
        for ip in asg.ips {
            let Some(list) = self.users.get_mut(&ip) else {
                continue;
            };
            list.retain(|u| &u.key != key);
            if list.is_empty() {
                self.users.remove(&ip);
                if let Some(p) = pool.as_deref_mut() {
                    p.free(ip);
                }
            }
        }
    }

    /// The pool rules that the addresses `svc` holds break (they were
    /// kept: see the module docs), each as a sentence; empty when none.
    /// New addresses never break them.
    pub fn breaks(&self, svc: &Service) -> Vec<String> {
        let Some(a) = self.assignments.get(&svc.key) else {
            return Vec::new();
        };
        let Some(p) = self.pools.get(&a.pool) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for ip in a.ips.iter().filter(|ip| p.buggy(**ip)) {
            out.push(format!(
                "{ip} ends in .0 or .255 and pool {} has avoidBuggyIPs",
                a.pool
            ));
        }
        if !p.selects(svc) {
            out.push(format!(
                "pool {}'s serviceAllocation does not select this service",
                a.pool
            ));
        }
        let me = Use::of(svc);
        for ip in &a.ips {
            for u in self.users.get(ip).into_iter().flatten() {
                if u.key != svc.key && !u.compatible(&me) {
                    out.push(format!(
                        "{ip} is shared with {} although their externalTrafficPolicy or selectors differ",
                        u.key
                    ));
                }
            }
        }
        out
    }

    /// Every pool as the allocator weighs it for `svc`, without changing
    /// anything: the pools it may take from in the order [`Allocator::assign`]
    /// tries them (requested or annotated; then the tier that selects it by
    /// priority; then the general tier), then the refused ones by name, each
    /// with its reason. Offers count what `svc` holds as its own, so for a
    /// service that holds addresses they show what it keeps. An unknown
    /// annotated pool is in no entry ([`AllocError::UnknownPool`]).
    pub fn consider(&self, svc: &Service) -> Vec<Considered> {
        let (fams, _) = Self::wanted(svc);
        let me = Use::of(svc);
        let prefer = self
            .assignments
            .get(&svc.key)
            .map_or_else(|| svc.current.clone(), |a| a.ips.clone());
        let mut out: Vec<(i64, Considered)> = self
            .pools
            .iter()
            .map(|(name, p)| {
                let eligibility = self.eligibility(svc, p);
                let rank = match &eligibility {
                    Eligibility::Requested | Eligibility::Annotated => 0,
                    Eligibility::Selected { .. } => priority_rank(&p.pool).min(i64::MAX - 2),
                    Eligibility::General => i64::MAX - 1,
                    Eligibility::Refused(_) => i64::MAX,
                };
                let offers = match eligibility {
                    Eligibility::Refused(_) => Vec::new(),
                    Eligibility::Requested => svc
                        .requested
                        .iter()
                        .map(|ip| match self.incompatible_user(*ip, &me) {
                            Some(_) => Offer::InUse(*ip),
                            None => Offer::Address(*ip),
                        })
                        .collect(),
                    _ => fams
                        .iter()
                        .map(|f| {
                            if !p.has_family(*f) {
                                Offer::NoRange(*f)
                            } else {
                                self.usable(name, *f, &me, &prefer)
                                    .map_or(Offer::Full(*f), Offer::Address)
                            }
                        })
                        .collect(),
                };
                let considered = Considered {
                    pool: name.clone(),
                    eligibility,
                    offers,
                };
                (rank, considered)
            })
            .collect();
        // Stable: names break ties, as in `candidates`.
        out.sort_by_key(|(rank, _)| *rank);
        out.into_iter().map(|(_, c)| c).collect()
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

    /// The pool that holds every one of `ips` (containment only: a kept
    /// address may break the pool's rules).
    fn pool_holding(&self, ips: &[IpAddr]) -> Option<String> {
        api::model::pool_for(self.pools.values().map(|p| &p.pool), ips).map(|p| p.name.clone())
    }

    /// Whether `svc` may keep `a` (the rules for held addresses).
    fn keepable(&self, svc: &Service, a: &Assignment) -> bool {
        let Some(pool) = self.pools.get(&a.pool) else {
            return false;
        };
        if a.ips.is_empty() || !a.ips.iter().all(|ip| pool.contains(*ip)) {
            return false;
        }
        let have: Vec<Family> = a.ips.iter().map(|ip| Family::of(*ip)).collect();
        if have.len() > 2 || (have.len() == 2 && have[0] == have[1]) {
            return false;
        }
        if svc.pool.as_ref().is_some_and(|p| *p != a.pool) {
            return false;
        }
        let (fams, optional) = Self::wanted(svc);
        if !svc.requested.is_empty() {
            if !same_set(&svc.requested, &a.ips) {
                return false;
            }
        } else {
            // Every family it holds is one it wants; all of them, unless
            // the second is optional (PreferDualStack: it may gain it).
            let wanted_all = have.iter().all(|f| fams.contains(f));
            let enough = have.len() == fams.len() || (optional && have.len() == 1);
            if !(wanted_all && enough) {
                return false;
            }
        }
        // Sharing: by MetalLB's rule if the service's terms changed, else
        // by the rule it was given the address under.
        let me = Use::of(svc);
        let stored = self
            .users
            .get(&a.ips[0])
            .and_then(|us| us.iter().find(|u| u.key == svc.key));
        // Nothing stored: taken back after a restart.
        let tolerant = stored.is_none_or(|u| u.same_terms(&me));
        a.ips.iter().all(|ip| {
            self.users.get(ip).is_none_or(|us| {
                us.iter().all(|u| {
                    u.key == svc.key
                        || if tolerant {
                            u.tolerated(&me)
                        } else {
                            u.compatible(&me)
                        }
                })
            })
        })
    }

    /// Adds the missing family to a `PreferDualStack` service that holds
    /// one, from its pool, when one is free (MetalLB does this on every
    /// sync). The held address stays first.
    fn gain_family(&mut self, svc: &Service, a: Assignment) -> Assignment {
        let (fams, optional) = Self::wanted(svc);
        if self.no_gains
            || !optional
            || fams.len() != 2
            || a.ips.len() != 1
            || !svc.requested.is_empty()
        {
            return a;
        }
        let have = Family::of(a.ips[0]);
        let Some(missing) = fams.iter().copied().find(|f| *f != have) else {
            return a;
        };
        let me = Use::of(svc);
        let Some(ip) = self.usable(&a.pool, missing, &me, &[]) else {
            return a;
        };
        self.hold(&a.pool, ip, me);
        let mut ips = a.ips;
        ips.push(ip);
        let a = Assignment { pool: a.pool, ips };
        self.record(svc.key.clone(), a.clone());
        a
    }

    /// The one per-pool rule: whether `svc` may take from `p`, and why
    /// not. A service that requests addresses may take them only from the
    /// pool that holds them all ([`api::model::pool_for`]), if they avoid
    /// its buggy addresses, it is the annotated pool (if any) and it
    /// selects the service; one with an `address-pool` annotation only from
    /// that pool, if it selects it; the others from auto-assign pools that
    /// select them (first) or have no `serviceAllocation`.
    fn eligibility(&self, svc: &Service, p: &PoolState) -> Eligibility {
        let name = &p.pool.name;
        let refused = Eligibility::Refused;
        let other_annotated = svc.pool.as_ref().filter(|a| *a != name);
        if !svc.requested.is_empty() {
            if self.pool_holding(&svc.requested).as_ref() != Some(name) {
                return refused(Refusal::NotRequested);
            }
            let buggy: Vec<IpAddr> = svc
                .requested
                .iter()
                .copied()
                .filter(|ip| p.buggy(*ip))
                .collect();
            if !buggy.is_empty() {
                return refused(Refusal::BuggyRequest(buggy));
            }
            if let Some(a) = other_annotated {
                return refused(Refusal::OtherAnnotated(a.clone()));
            }
            return match p.refusal(svc) {
                Some(why) => refused(Refusal::NotSelected(why)),
                None => Eligibility::Requested,
            };
        }
        if let Some(a) = other_annotated {
            return refused(Refusal::OtherAnnotated(a.clone()));
        }
        if svc.pool.is_some() {
            // Named, even with autoAssign off; it must select the service.
            return match p.refusal(svc) {
                Some(why) => refused(Refusal::NotSelected(why)),
                None => Eligibility::Annotated,
            };
        }
        if !p.pool.auto_assign {
            return refused(Refusal::AutoAssignOff);
        }
        match (&p.pool.allocation, p.refusal(svc)) {
            (None, _) => Eligibility::General,
            (Some(_), Some(why)) => refused(Refusal::NotSelected(why)),
            (Some(a), None) => Eligibility::Selected {
                priority: a.priority,
            },
        }
    }

    /// A service holding `ip` that `me` may not share it with.
    fn incompatible_user(&self, ip: IpAddr, me: &Use) -> Option<&Use> {
        self.users
            .get(&ip)
            .and_then(|us| us.iter().find(|u| u.key != me.key && !u.compatible(me)))
    }

    /// Candidate pools for auto-assignment: tiers tried in turn (the pools
    /// that select the service, then the general ones), each in preference
    /// order.
    fn candidates(&self, svc: &Service) -> Result<Vec<Vec<String>>, AllocError> {
        if let Some(name) = &svc.pool {
            let p = self
                .pools
                .get(name)
                .ok_or_else(|| AllocError::UnknownPool(name.clone()))?;
            return match self.eligibility(svc, p) {
                Eligibility::Annotated => Ok(vec![vec![name.clone()]]),
                _ => Err(AllocError::NotCompatible(name.clone())),
            };
        }
        let mut selected: Vec<(i64, &String)> = Vec::new();
        let mut plain: Vec<String> = Vec::new();
        for (name, p) in &self.pools {
            match self.eligibility(svc, p) {
                Eligibility::Selected { .. } => selected.push((priority_rank(&p.pool), name)),
                Eligibility::General => plain.push(name.clone()),
                _ => {}
            }
        }
        selected.sort();
        let selected: Vec<String> = selected.into_iter().map(|(_, n)| n.clone()).collect();
        let tiers: Vec<Vec<String>> = [selected, plain]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        if tiers.is_empty() {
            Err(AllocError::NoPool)
        } else {
            Ok(tiers)
        }
    }

    fn assign_auto(&mut self, svc: &Service, prefer: &[IpAddr]) -> Result<Assignment, AllocError> {
        let tiers = self.candidates(svc)?;
        let (fams, optional) = Self::wanted(svc);
        let me = Use::of(svc);
        for pools in &tiers {
            // MetalLB's findBestPoolForService: the first pool with every
            // family; else, for PreferDualStack, the first with the
            // service's first family, else the first with its second.
            let mut fallback: [Option<(String, IpAddr)>; 2] = [None, None];
            for name in pools {
                let got: Vec<Option<IpAddr>> = fams
                    .iter()
                    .map(|f| self.usable(name, *f, &me, prefer))
                    .collect();
                if got.iter().all(Option::is_some) {
                    let mut ips: Vec<IpAddr> = got.into_iter().flatten().collect();
                    // MetalLB lists IPv4 first.
                    ips.sort_by_key(|ip| Family::of(*ip));
                    return Ok(self.commit(svc, name, ips));
                }
                if optional {
                    for (slot, ip) in fallback.iter_mut().zip(&got) {
                        if let (None, Some(ip)) = (&slot, ip) {
                            *slot = Some((name.clone(), *ip));
                        }
                    }
                }
            }
            if let Some((name, ip)) = fallback.into_iter().flatten().next() {
                return Ok(self.commit(svc, &name, vec![ip]));
            }
        }
        let all: Vec<String> = tiers.concat();
        if svc.policy == FamilyPolicy::RequireDualStack
            && !all.iter().any(|n| {
                self.pools[n].has_family(Family::V4) && self.pools[n].has_family(Family::V6)
            })
        {
            return Err(AllocError::Families(
                "RequireDualStack, but no candidate pool has both families".into(),
            ));
        }
        Err(AllocError::Exhausted {
            pools: all.join(", "),
        })
    }

    /// The address of `family` that pool `name` would give `me`: a
    /// preferred one (an address it held) that the pool holds and it may
    /// use, else the first free or shareable in the pool's order.
    fn usable(&self, name: &str, family: Family, me: &Use, prefer: &[IpAddr]) -> Option<IpAddr> {
        let p = self.pools.get(name)?;
        if !p.has_family(family) {
            return None;
        }
        let ok = |ip: &IpAddr| {
            self.users
                .get(ip)
                .is_none_or(|us| us.iter().all(|u| u.key == me.key || u.compatible(me)))
        };
        if let Some(ip) = prefer
            .iter()
            .copied()
            .find(|ip| Family::of(*ip) == family && p.contains(*ip) && !p.buggy(*ip) && ok(ip))
        {
            return Some(ip);
        }
        let mut shareable: Vec<IpAddr> = Vec::new();
        if me.sharing_key.is_some() {
            shareable = self
                .users
                .iter()
                .filter(|(ip, us)| {
                    Family::of(**ip) == family
                        && p.contains(**ip)
                        && us.iter().all(|u| u.compatible(me))
                })
                .map(|(ip, _)| *ip)
                .collect();
            shareable.sort();
        }
        p.first_usable(family, &shareable)
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
                "requested IPs {} do not match ipFamilies",
                quoted(req)
            )));
        }
        // MetalLB's Assign: the pool that holds them all (not counting
        // a .0/.255 of a pool that avoids them), the annotated pool, then
        // its serviceAllocation; `eligibility` checks them in that order.
        let pool = self
            .pool_holding(req)
            .ok_or_else(|| AllocError::NotAllowed(req.clone()))?;
        match self.eligibility(svc, &self.pools[&pool]) {
            Eligibility::Requested => {}
            Eligibility::Refused(Refusal::OtherAnnotated(annotated)) => {
                return Err(AllocError::WrongPool {
                    ips: req.clone(),
                    pool: annotated,
                });
            }
            Eligibility::Refused(Refusal::NotSelected(_)) => {
                return Err(AllocError::NotCompatible(pool));
            }
            // BuggyRequest; the pool holds them, so nothing else.
            _ => return Err(AllocError::NotAllowed(req.clone())),
        }
        let me = Use::of(svc);
        for ip in req {
            if let Some(u) = self.incompatible_user(*ip, &me) {
                return Err(AllocError::InUse {
                    ip: *ip,
                    by: u.key.clone(),
                });
            }
        }
        // In the order requested, as MetalLB writes them.
        Ok(self.commit(svc, &pool, req.clone()))
    }

    fn hold(&mut self, pool: &str, ip: IpAddr, u: Use) {
        if let Some(p) = self.pools.get_mut(pool) {
            p.take(ip);
        }
        let list = self.users.entry(ip).or_default();
        list.retain(|x| x.key != u.key);
        // Most addresses have one user: room for exactly that many, not
        // the four a first push reserves (issue 18: 5.3 MB of the
        // allocator's 15 MB at 10,000 Services).
        list.reserve_exact(1);
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
        self.record(svc.key.clone(), a.clone());
        a
    }

    /// Records `a` as what `key` holds, in place of what it held, and
    /// counts it in its pool ([`Allocator::pool_use`]). Every change of
    /// `assignments` but a release goes through here.
    fn record(&mut self, key: ServiceKey, a: Assignment) {
        if let Some(p) = self.pools.get_mut(&a.pool) {
            p.services += 1;
        }
        if let Some(old) = self.assignments.insert(key, a)
            && let Some(p) = self.pools.get_mut(&old.pool)
        {
            p.services = p.services.saturating_sub(1);
        }
    }

    /// Refreshes how a service uses its addresses (ports may change).
    fn update_use(&mut self, svc: &Service, a: &Assignment) {
        for ip in &a.ips {
            self.hold(&a.pool, *ip, Use::of(svc));
        }
    }
}

/// Whether two address lists hold the same addresses.
fn same_set(a: &[IpAddr], b: &[IpAddr]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    a.dedup();
    b.dedup();
    a == b
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod metallb;
