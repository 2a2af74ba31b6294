//! Keyed desired state: each service is decided on its own, and only the
//! services that changed are decided again.
//!
//! [`bgp_plan`](super::bgp_plan) and [`l2_plan`](super::l2_plan) decide a
//! whole view at once, which is what a table test wants. The speaker keeps a
//! [`Keyed`] instead: per service, the routes it asks of each peer and its
//! layer 2 election; per (peer, prefix) and per IP, the services that give
//! it and the merged result. [`Keyed::update`] compares the new view with
//! the one it last decided: when anything but the services differs (the
//! configuration, this node, the Secrets), every service is decided again;
//! when other nodes alone differ (their Node objects or their memberlist
//! membership), only the layer 2 elections those nodes can move (one of
//! them won it, or ranks before its winner now: one candidacy per changed
//! node and service, where deciding again costs one per node); otherwise
//! only the services whose value changed, appeared or went. It returns the difference, as the drivers take it: per peer the
//! prefixes to announce or withdraw, per IP the interfaces to answer on or
//! nothing, and the (protocol, service, IP) announcements that started or
//! ended.
//!
//! The per-service decisions are the same functions the whole plans fold
//! over (`BgpContext::service_routes`, `L2Context::service`), so the two
//! cannot drift; `tests::keyed_matches_whole_plans` checks the merge.
//! Pure: no I/O, no clock.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use api::model::{Model, Secrets};
use bgp::session::{IpPrefix, RouteAttrs};

use super::bgp::{BgpContext, Pending};
use super::coexist::{Deferral, MetallbSpeakers};
use super::l2::{KEPT_CANDIDATES, L2Context, ServiceL2};
use super::sorted::{self, Interner, VecMap};
use super::status::{Announcements, ServiceAnnouncement};
use super::view::{ApiSpeakers, ClusterView, Exclusion, Node, ObjectKey, Service};
use super::{Interfaces, PeerPlan, Problem, pool_of};

/// How a service IP is announced from this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// To BGP peers.
    Bgp,
    /// By answering ARP/NDP.
    Layer2,
}

impl Via {
    /// The protocol's name as MetalLB writes it (metric labels, events).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bgp => super::status::BGP,
            Self::Layer2 => super::status::LAYER2,
        }
    }
}

/// A route change for one peer: `Some` announces (or changes) the prefix,
/// `None` withdraws it.
pub type RouteChange = (IpPrefix, Option<Arc<RouteAttrs>>);

/// What one [`Keyed::update`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Every service was decided again: something other than the services
    /// changed (or this is the first view).
    pub all: bool,
    /// How many services were decided (changed, new, or all of them).
    pub decided: usize,
    /// Per peer, the prefixes whose route changed, in prefix order. A peer
    /// that is new or reconfigured takes [`Keyed::routes`] whole instead.
    pub routes: BTreeMap<String, Vec<RouteChange>>,
    /// The IPs this node starts answering for, changes the interfaces of
    /// (`Some`), or stops answering for (`None`).
    pub l2: Vec<(IpAddr, Option<Interfaces>)>,
    /// (protocol, service, IP) announcements that started.
    pub announced: Vec<(Via, ObjectKey, IpAddr)>,
    /// (protocol, service, IP) announcements that ended.
    pub withdrawn: Vec<(Via, ObjectKey, IpAddr)>,
    /// The services whose [`ServiceAnnouncement`] changed.
    pub announcements: usize,
    /// Services this node newly leaves, while isolated, to the node the
    /// API shows answering for them.
    pub yielded: Vec<(ObjectKey, String)>,
    /// Services this node newly leaves to MetalLB's speakers
    /// ([`super::coexist`]), and why.
    pub deferred: Vec<(ObjectKey, Deferral)>,
}

/// The desired state of one node, kept per service.
#[derive(Debug, Default)]
pub struct Keyed {
    /// What the last view held besides its services.
    context: Option<Context>,
    /// The sessions (their `routes` empty: [`Keyed::routes`] has them).
    peers: BTreeMap<String, PeerPlan>,
    /// Problems that belong to no service (peers, advertisements, nodes).
    shared_problems: Vec<Problem>,
    excluded: Option<Exclusion>,
    api_candidates: usize,
    /// The services' entries, found by the key their service holds (a map
    /// kept a copy of it beside each entry: 32 of the 112 bytes of a slot,
    /// in a table of up to twice as many slots as services).
    services: HashSet<Entry>,
    /// The problems of the services that have some, by key: kept here,
    /// not in every service's entry (16 bytes of each slot, nearly always
    /// an empty slice), and listing problems does not walk the services.
    with_problems: BTreeMap<ObjectKey, Box<[Problem]>>,
    /// Per peer and prefix, what each service asks and the result.
    routes: BTreeMap<Arc<str>, BTreeMap<IpPrefix, Prefix>>,
    /// The prefixes withheld for a LOCAL_PREF conflict.
    conflicts: BTreeSet<(Arc<str>, IpPrefix)>,
    /// How many routes each peer is given.
    counts: BTreeMap<Arc<str>, usize>,
    /// One copy of each distinct thing services ask of a prefix.
    pendings: Interner<Pending>,
    /// One copy of each distinct route, shared by the prefixes and peers
    /// that have it (and by the peers' Adj-RIB-Out).
    attrs: Interner<RouteAttrs>,
    /// One copy of each distinct list of peers a service is announced to
    /// (its [`ServiceAnnouncement::bgp`]).
    peer_lists: Interner<[Arc<str>]>,
    /// Per IP answered from here, the services and their interfaces.
    l2: BTreeMap<IpAddr, Address>,
    /// Per service, what this node announces: one copy, shared with the
    /// status writer's report (changed, it is copied once while the
    /// report still holds the last one).
    announcements: Arc<Announcements>,
    /// The last update's changes to `announcements`, applied by
    /// [`Keyed::announcements`] (or the next update): the copy is made
    /// after the routes are handed to the peers, not on the way to them.
    unapplied: Vec<(ObjectKey, Option<ServiceAnnouncement>)>,
    yielded: BTreeMap<ObjectKey, String>,
    deferred: BTreeMap<ObjectKey, Deferral>,
    /// Incremented by every update; entries not seen in it are gone.
    /// Never 0 once an update began: the entries' marks are reset to 0
    /// when it wraps (`Keyed::next_generation`).
    generation: u32,
    /// The addresses of the last view's services, in its order, when each
    /// is the `Arc` its own entry holds (no two services had one key): a
    /// view whose list differs from it in some places only is decided in
    /// those places alone, without reading the others.
    last: Option<Vec<usize>>,
}

/// The view's parts that every service's decision reads.
#[derive(Debug, PartialEq)]
struct Context {
    node: String,
    nodes: Arc<BTreeMap<String, Node>>,
    model: Arc<Model>,
    secrets: Secrets,
    members: Option<BTreeSet<String>>,
    isolated: bool,
    api_speakers: Option<Arc<ApiSpeakers>>,
    load_balancer_class: Option<String>,
    ignore_exclude_lb: bool,
    l2: bool,
}

impl Context {
    fn of(view: &ClusterView, l2: bool) -> Self {
        Self {
            node: view.node.clone(),
            nodes: Arc::clone(&view.nodes),
            model: Arc::clone(&view.model),
            secrets: view.secrets.clone(),
            members: view.members.clone(),
            isolated: view.isolated,
            api_speakers: view.api_speakers.clone(),
            load_balancer_class: view.load_balancer_class.clone(),
            ignore_exclude_lb: view.ignore_exclude_lb,
            l2,
        }
    }

    /// When `view` differs from this context only in other nodes (their
    /// Node objects or their memberlist membership), the names of those
    /// nodes; `None` when anything else differs. This node's own Node and
    /// membership must be the same, and neither isolation nor MetalLB's
    /// speakers in play: then a service's BGP routes, its interfaces and
    /// this node's part in its election read nothing that changed, and its
    /// election can change only through the changed nodes' candidacies.
    fn others_changed(&self, view: &ClusterView, l2: bool) -> Option<BTreeSet<String>> {
        let same_rest = self.l2 == l2
            && !view.isolated
            && !self.isolated
            && self.ignore_exclude_lb == view.ignore_exclude_lb
            && self.node == view.node
            && self.load_balancer_class == view.load_balancer_class
            && (Arc::ptr_eq(&self.model, &view.model) || self.model == view.model)
            && same_api(&self.api_speakers, &view.api_speakers, view.isolated)
            && view
                .api_speakers
                .as_ref()
                .is_none_or(|a| a.metallb.is_none())
            && self.secrets == view.secrets;
        if !same_rest {
            return None;
        }
        let mut changed = BTreeSet::new();
        match (&self.members, &view.members) {
            (Some(old), Some(new)) => {
                changed.extend(old.symmetric_difference(new).cloned());
            }
            (None, None) => {}
            _ => return None,
        }
        if !Arc::ptr_eq(&self.nodes, &view.nodes) {
            let (old, new) = (&*self.nodes, &*view.nodes);
            changed.extend(
                old.iter()
                    .filter(|(name, node)| new.get(*name) != Some(*node))
                    .map(|(name, _)| name.clone()),
            );
            changed.extend(new.keys().filter(|name| !old.contains_key(*name)).cloned());
        }
        (!changed.contains(&view.node)).then_some(changed)
    }

    /// Whether `view` has the same context, without copying it.
    fn same(&self, view: &ClusterView, l2: bool) -> bool {
        self.l2 == l2
            && self.isolated == view.isolated
            && self.ignore_exclude_lb == view.ignore_exclude_lb
            && self.node == view.node
            && self.load_balancer_class == view.load_balancer_class
            && (Arc::ptr_eq(&self.model, &view.model) || self.model == view.model)
            && self.members == view.members
            && same_api(&self.api_speakers, &view.api_speakers, view.isolated)
            && self.secrets == view.secrets
            && (Arc::ptr_eq(&self.nodes, &view.nodes) || self.nodes == view.nodes)
    }
}

/// Whether two views' speakers as the API shows them decide the same, both
/// views isolated (`isolated`) or both not: while not isolated, the
/// decisions read MetalLB's speakers alone (the Ready speakers and the
/// ServiceL2Status claims count only while isolated), so that a rollout's
/// readiness changes of thousands of speaker Pods do not decide every
/// service again on every node.
fn same_api(
    old: &Option<Arc<ApiSpeakers>>,
    new: &Option<Arc<ApiSpeakers>>,
    isolated: bool,
) -> bool {
    if isolated {
        return old == new;
    }
    fn metallb(a: &Option<Arc<ApiSpeakers>>) -> Option<&MetallbSpeakers> {
        a.as_deref().and_then(|a| a.metallb.as_ref())
    }
    metallb(old) == metallb(new)
}

/// What every service's decision in one update reads.
struct Deciding<'a> {
    view: &'a ClusterView,
    bgp: &'a BgpContext<'a>,
    l2ctx: &'a L2Context<'a>,
    l2: bool,
}

/// What a service asks of one peer's prefix.
type RouteAsk = ((Arc<str>, IpPrefix), Arc<Pending>);

/// One service's layer 2 interfaces (`None`: not answered from here) and
/// BGP peers.
type Announced = (Option<Vec<String>>, Vec<Arc<str>>);

/// One service and what was decided for it.
/// Sized to its slot in the services' set (40 bytes, 64 before): slices
/// rather than vectors (exactly as long as they are), no key beside it,
/// its problems in `Keyed::with_problems` (nearly every service has
/// none), the update marks 32 bits each.
#[derive(Debug)]
struct Entry {
    svc: Arc<Service>,
    routes: Box<[RouteAsk]>,
    /// Boxed: most services are BGP's alone, and it would make every
    /// slot of the services' set larger.
    l2: Option<Box<ServiceL2>>,
    /// The update that last saw the service in its view: set through a
    /// shared reference, as the set gives its elements (an update that
    /// finds a service unchanged touches nothing else of it).
    seen: AtomicU32,
    /// The update that last decided it (set through a shared reference
    /// too, when the marks are reset).
    decided: AtomicU32,
}

impl Entry {
    fn seen(&self) -> u32 {
        self.seen.load(Ordering::Relaxed)
    }

    fn decided(&self) -> u32 {
        self.decided.load(Ordering::Relaxed)
    }
}

/// The set finds an entry by its service's key.
impl Borrow<ObjectKey> for Entry {
    fn borrow(&self) -> &ObjectKey {
        &self.svc.key
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.svc.key == other.svc.key
    }
}

impl Eq for Entry {}

/// As the key alone (what [`Borrow`] requires).
impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.svc.key.hash(state);
    }
}

/// One prefix towards one peer.
#[derive(Debug, Default)]
struct Prefix {
    by_service: VecMap<ObjectKey, Arc<Pending>>,
    /// What the peer is given: the route, or the LOCAL_PREF conflict that
    /// withholds it (boxed: rare, and three times the size of the route,
    /// in one slot per peer and prefix); `None` before the first merge.
    merged: Option<Result<Arc<RouteAttrs>, Box<Problem>>>,
}

/// One IP this node may answer for.
#[derive(Debug, Default)]
struct Address {
    by_service: BTreeMap<ObjectKey, Interfaces>,
    merged: Option<Interfaces>,
}

/// What an update has touched so far.
#[derive(Default)]
struct Touched {
    prefixes: BTreeSet<(Arc<str>, IpPrefix)>,
    ips: BTreeSet<IpAddr>,
    /// Services whose announcement may change, with what they announced
    /// before the update.
    services: BTreeMap<ObjectKey, BTreeSet<(Via, IpAddr)>>,
}

impl Keyed {
    /// An empty state: the first update decides every service.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides `view` and returns what changed since the last update.
    /// `l2` says whether layer 2 is decided at all (it waits at start for
    /// memberlist, and is off without L2Advertisements).
    pub fn update(&mut self, view: &ClusterView, l2: bool) -> Changes {
        self.apply_announcements();
        self.next_generation();
        let same = self.context.as_ref().is_some_and(|c| c.same(view, l2));
        // Other nodes changed and nothing else: only layer 2 elections can
        // move, and only those the changed nodes win, lose or could now
        // win are decided again.
        let others = match &self.context {
            Some(c) if !same => c.others_changed(view, l2),
            _ => None,
        };
        let all = !same && others.is_none();
        let mut shared = Vec::new();
        let bgp = BgpContext::new(view, &mut shared);
        let l2ctx = L2Context::keeping(view, KEPT_CANDIDATES);
        let mut changes = Changes {
            all,
            ..Changes::default()
        };
        let mut touched = Touched::default();
        if others.is_some() {
            self.context = Some(Context::of(view, l2));
        }
        if all {
            self.context = Some(Context::of(view, l2));
            self.excluded = bgp.excluded;
            self.api_candidates = if l2 { l2ctx.api_candidates } else { 0 };
        }
        self.shared_problems = shared;
        let deciding = Deciding {
            view,
            bgp: &bgp,
            l2ctx: &l2ctx,
            l2,
        };
        match self.changed_places(view, all) {
            Some(places) => {
                for i in places {
                    self.decide(&deciding, &view.services[i], &mut touched, &mut changes);
                }
                if let Some(nodes) = &others {
                    self.elections_moved_by(&deciding, nodes, &mut touched, &mut changes);
                }
            }
            None => {
                for svc in &view.services {
                    self.decide(&deciding, svc, &mut touched, &mut changes);
                }
                let gone: Vec<ObjectKey> = self
                    .services
                    .iter()
                    .filter(|e| e.seen() != self.generation)
                    .map(|e| e.svc.key.clone())
                    .collect();
                for key in gone {
                    self.replace(&key, None, &mut touched, &mut changes);
                }
                if let Some(nodes) = &others {
                    self.elections_moved_by(&deciding, nodes, &mut touched, &mut changes);
                }
            }
        }
        // Every service is now held by its entry (unless two had one key).
        self.last = (self.services.len() == view.services.len()).then(|| {
            view.services
                .iter()
                .map(|s| Arc::as_ptr(s).addr())
                .collect()
        });
        self.peers = bgp.peers;
        let prefixes = std::mem::take(&mut touched.prefixes);
        self.merge_routes(&prefixes, &mut touched, &mut changes);
        let ips = std::mem::take(&mut touched.ips);
        self.merge_l2(&ips, &mut touched, &mut changes);
        self.announce(touched.services, &mut changes);
        self.compact(&changes);
        changes
    }

    /// Starts the next update's generation. When the counter would wrap,
    /// every entry's marks go back to 0 first (once in 2^32 updates, a
    /// pass over the services), so that no mark left from an update long
    /// ago can equal a current generation.
    fn next_generation(&mut self) {
        if self.generation == u32::MAX {
            for e in &self.services {
                e.seen.store(0, Ordering::Relaxed);
                e.decided.store(0, Ordering::Relaxed);
            }
            self.generation = 0;
        }
        self.generation += 1;
    }

    /// Rebuilds, packed ([`sorted::repack`]), the peers' route tables
    /// after an update that decided at least half of the services (the
    /// first view, a new configuration): the services are decided in the
    /// view's order, and the addresses follow it.
    fn compact(&mut self, changes: &Changes) {
        for table in self.routes.values_mut() {
            sorted::repack(table, changes.decided, self.services.len());
        }
    }

    /// Applies the last update's announcement changes: the map is copied
    /// if the status writer's report still holds it, and, when they
    /// changed at least half of it, rebuilt packed (as
    /// [`Keyed::compact`]).
    fn apply_announcements(&mut self) {
        if self.unapplied.is_empty() {
            return;
        }
        let changed = self.unapplied.len();
        let map = Arc::make_mut(&mut self.announcements);
        // Taken, not drained: the first update's list (every service)
        // would otherwise keep its capacity for the process's life.
        for (key, now) in std::mem::take(&mut self.unapplied) {
            match now {
                Some(a) => map.insert(key, a),
                None => map.remove(&key),
            };
        }
        let len = map.len();
        sorted::repack(map, changed, len);
    }

    /// The places of `view`'s services that are not the objects of the
    /// last view's, when every other place holds the same object as then
    /// and each changed place a service of the same name; `None` when the
    /// whole list must be walked (`all` decided again, a service added,
    /// removed or moved).
    fn changed_places(&self, view: &ClusterView, all: bool) -> Option<Vec<usize>> {
        let last = self
            .last
            .as_ref()
            .filter(|l| !all && l.len() == view.services.len())?;
        let mut places = Vec::new();
        for (i, svc) in view.services.iter().enumerate() {
            if Arc::as_ptr(svc).addr() == last[i] {
                continue;
            }
            // The entry of this name held the object that was here.
            let e = self.services.get(&svc.key)?;
            if Arc::as_ptr(&e.svc).addr() != last[i] {
                return None;
            }
            places.push(i);
        }
        Some(places)
    }

    /// After a change of other nodes alone (`changed`), decides again the
    /// layer 2 services (every entry is in the view by now), not yet
    /// decided in this update, whose election
    /// those nodes can move: one of them won it, or one of them is now a
    /// candidate that ranks before the winner (or the only one). A changed
    /// node that is no candidate, or ranks after the winner, moves
    /// nothing: the speaker keeps the winner alone. Costs one candidacy
    /// (a hash) per changed node per layer 2 service, not one per node.
    fn elections_moved_by(
        &mut self,
        d: &Deciding<'_>,
        changed: &BTreeSet<String>,
        touched: &mut Touched,
        changes: &mut Changes,
    ) {
        if changed.is_empty() || !d.l2 {
            return;
        }
        let moved: Vec<Arc<Service>> = self
            .services
            .iter()
            .filter(|e| e.decided() != self.generation)
            .filter(|e| {
                e.l2.as_ref().is_some_and(|l2| {
                    let mut problems = Vec::new();
                    let Some(pool) = pool_of(d.view, &e.svc, &mut problems) else {
                        return true;
                    };
                    d.l2ctx.moved_by(&e.svc, pool, &l2.election, changed)
                })
            })
            .map(|e| Arc::clone(&e.svc))
            .collect();
        for svc in moved {
            self.decide_again(d, &svc, touched, changes);
        }
    }

    /// Decides one service of the view again, unless it is the one decided
    /// last (the same object, or an equal one, which its entry then holds).
    fn decide(
        &mut self,
        d: &Deciding<'_>,
        svc: &Arc<Service>,
        touched: &mut Touched,
        changes: &mut Changes,
    ) {
        // (A second service of one name in a view is decided, and replaces
        // the first.)
        if let Some(e) = self.services.get(&svc.key)
            && e.seen() != self.generation
            && !changes.all
        {
            if Arc::ptr_eq(&e.svc, svc) {
                e.seen.store(self.generation, Ordering::Relaxed);
                return;
            }
            if e.svc == *svc {
                // An equal object: the entry holds the view's from now on.
                if let Some(mut e) = self.services.take(&svc.key) {
                    e.seen = AtomicU32::new(self.generation);
                    e.svc = Arc::clone(svc);
                    self.services.insert(e);
                }
                return;
            }
        }
        self.decide_again(d, svc, touched, changes);
    }

    /// Decides one service of the view, whatever was decided before.
    fn decide_again(
        &mut self,
        d: &Deciding<'_>,
        svc: &Arc<Service>,
        touched: &mut Touched,
        changes: &mut Changes,
    ) {
        let mut problems = Vec::new();
        let pool = pool_of(d.view, svc, &mut problems);
        let routes = pool
            .map(|pool| d.bgp.service_routes(svc, pool, &mut problems))
            .unwrap_or_default();
        let l2 = pool
            .filter(|_| d.l2)
            .and_then(|pool| d.l2ctx.service(svc, pool, &mut problems))
            .map(Box::new);
        changes.decided += 1;
        self.replace(
            &svc.key,
            Some((
                Entry {
                    svc: Arc::clone(svc),
                    routes: routes.into_boxed_slice(),
                    l2,
                    seen: AtomicU32::new(self.generation),
                    decided: AtomicU32::new(self.generation),
                },
                problems,
            )),
            touched,
            changes,
        );
    }

    /// Puts a service's new decision and its problems in place of its old
    /// one (`None`: the service is gone), noting what that touches.
    fn replace(
        &mut self,
        key: &ObjectKey,
        new: Option<(Entry, Vec<Problem>)>,
        touched: &mut Touched,
        changes: &mut Changes,
    ) {
        self.touch_service(key, touched);
        if let Some(old) = self.services.take(key) {
            for ((peer, prefix), _) in old.routes.into_vec() {
                if let Some(p) = self.routes.get_mut(&*peer).and_then(|r| r.get_mut(&prefix)) {
                    p.by_service.remove(key);
                }
                touched.prefixes.insert((peer, prefix));
            }
            if old.l2.is_some_and(|l| l.interfaces.is_some()) {
                for &ip in &old.svc.ingress {
                    if let Some(a) = self.l2.get_mut(&ip) {
                        a.by_service.remove(key);
                    }
                    touched.ips.insert(ip);
                }
            }
        }
        self.with_problems.remove(key);
        let Some((mut e, problems)) = new else {
            self.yielded.remove(key);
            self.deferred.remove(key);
            return;
        };
        if e.l2.as_ref().is_none_or(|l| l.yielded.is_none()) {
            self.yielded.remove(key);
        }
        if e.l2.as_ref().is_none_or(|l| l.deferred.is_none()) {
            self.deferred.remove(key);
        }
        for ((peer, prefix), pending) in e.routes.iter_mut() {
            *pending = self.pendings.share(pending);
            self.routes
                .entry(Arc::clone(peer))
                .or_default()
                .entry(*prefix)
                .or_default()
                .by_service
                .insert(key.clone(), Arc::clone(pending));
            touched.prefixes.insert((Arc::clone(peer), *prefix));
        }
        if let Some(l2) = &e.l2 {
            if let Some(interfaces) = &l2.interfaces {
                for &ip in &e.svc.ingress {
                    self.l2
                        .entry(ip)
                        .or_default()
                        .by_service
                        .insert(key.clone(), interfaces.clone());
                    touched.ips.insert(ip);
                }
            }
            if let Some(node) = &l2.yielded
                && self.yielded.insert(key.clone(), node.clone()).as_ref() != Some(node)
            {
                changes.yielded.push((key.clone(), node.clone()));
            }
            if let Some(why) = &l2.deferred
                && self.deferred.insert(key.clone(), why.clone()).as_ref() != Some(why)
            {
                changes.deferred.push((key.clone(), why.clone()));
            }
        }
        if !problems.is_empty() {
            self.with_problems
                .insert(key.clone(), problems.into_boxed_slice());
        }
        self.services.insert(e);
    }

    /// Notes that a service's announcement may change, keeping what it
    /// announced before (once, before anything of it changed).
    fn touch_service(&self, key: &ObjectKey, touched: &mut Touched) {
        if !touched.services.contains_key(key) {
            touched.services.insert(key.clone(), self.before_of(key));
        }
    }

    /// Merges the touched prefixes and records the routes that changed.
    fn merge_routes(
        &mut self,
        prefixes: &BTreeSet<(Arc<str>, IpPrefix)>,
        touched: &mut Touched,
        changes: &mut Changes,
    ) {
        for (peer, prefix) in prefixes {
            let Some(table) = self.routes.get_mut(peer) else {
                continue;
            };
            let Some(p) = table.get_mut(prefix) else {
                continue;
            };
            let before = ok(p.merged.as_ref());
            let resolved = match p.by_service.only() {
                // Most prefixes are one service's: nothing to merge.
                Some(only) => Some(only.resolve(peer, *prefix, p.by_service.keys())),
                None if p.by_service.is_empty() => None,
                None => {
                    let mut all = Pending::default();
                    for pending in p.by_service.values() {
                        all.absorb(pending);
                    }
                    Some(all.resolve(peer, *prefix, p.by_service.keys()))
                }
            };
            let merged = resolved.map(|r| match r {
                Ok(attrs) => Ok(self.attrs.intern(attrs)),
                Err(problem) => Err(Box::new(problem)),
            });
            let now = ok(merged.as_ref());
            // Whether the prefix goes out decides its services' status.
            let affected: Vec<ObjectKey> = if before.is_some() == now.is_some() {
                Vec::new()
            } else {
                p.by_service.keys().cloned().collect()
            };
            if matches!(merged, Some(Err(_))) {
                self.conflicts.insert((Arc::clone(peer), *prefix));
            } else if !self.conflicts.is_empty() {
                self.conflicts.remove(&(Arc::clone(peer), *prefix));
            }
            if merged.is_some() {
                p.merged = merged;
            } else {
                table.remove(prefix);
                if table.is_empty() {
                    self.routes.remove(peer);
                }
            }
            match (before.is_some(), now.is_some()) {
                (false, true) => *self.counts.entry(Arc::clone(peer)).or_default() += 1,
                (true, false) => {
                    if let Some(n) = self.counts.get_mut(peer) {
                        *n -= 1;
                        if *n == 0 {
                            self.counts.remove(peer);
                        }
                    }
                }
                _ => {}
            }
            if now != before {
                match changes.routes.get_mut(&**peer) {
                    Some(list) => list.push((*prefix, now)),
                    None => {
                        changes
                            .routes
                            .insert(peer.to_string(), vec![(*prefix, now)]);
                    }
                }
            }
            for key in affected {
                self.touch_service(&key, touched);
            }
        }
    }

    /// What a service announces now, as (protocol, IP) pairs.
    fn before_of(&self, key: &ObjectKey) -> BTreeSet<(Via, IpAddr)> {
        self.before_of_with(key, self.announcements.get(key))
    }

    /// The (protocol, IP) pairs of announcement `a` of a service.
    fn before_of_with(
        &self,
        key: &ObjectKey,
        a: Option<&ServiceAnnouncement>,
    ) -> BTreeSet<(Via, IpAddr)> {
        match (self.services.get(key), a) {
            (Some(e), Some(a)) => vias(a)
                .flat_map(|via| e.svc.ingress.iter().map(move |ip| (via, *ip)))
                .collect(),
            _ => BTreeSet::new(),
        }
    }

    /// Merges the touched IPs and records the layer 2 changes.
    fn merge_l2(&mut self, ips: &BTreeSet<IpAddr>, touched: &mut Touched, changes: &mut Changes) {
        for ip in ips {
            let Some(a) = self.l2.get_mut(ip) else {
                continue;
            };
            let mut merged: Option<Interfaces> = None;
            for i in a.by_service.values() {
                match &mut merged {
                    Some(m) => m.union(i),
                    None => merged = Some(i.clone()),
                }
            }
            if merged == a.merged {
                continue;
            }
            changes.l2.push((*ip, merged.clone()));
            // The status of every service on the IP names the merged
            // interfaces.
            let affected: Vec<ObjectKey> = a.by_service.keys().cloned().collect();
            if merged.is_some() {
                a.merged = merged;
            } else {
                self.l2.remove(ip);
            }
            for key in affected {
                self.touch_service(&key, touched);
            }
        }
    }

    /// Recomputes the announcements of the touched services.
    fn announce(
        &mut self,
        services: BTreeMap<ObjectKey, BTreeSet<(Via, IpAddr)>>,
        changes: &mut Changes,
    ) {
        for (key, before) in services {
            let now = self
                .services
                .get(&key)
                .and_then(|e| self.announcement(e))
                .map(|(l2, bgp)| ServiceAnnouncement {
                    l2,
                    bgp: self.peer_lists.intern_slice(&bgp),
                });
            let after = match &now {
                Some(_) => self.before_of_with(&key, now.as_ref()),
                None => BTreeSet::new(),
            };
            for &(via, ip) in after.difference(&before) {
                changes.announced.push((via, key.clone(), ip));
            }
            for &(via, ip) in before.difference(&after) {
                changes.withdrawn.push((via, key.clone(), ip));
            }
            if self.announcements.get(&key) != now.as_ref() {
                changes.announcements += 1;
                self.unapplied.push((key, now));
            }
        }
    }

    /// One service's announcement from this node, as
    /// [`super::announcements`] derives it from whole plans: its layer 2
    /// interfaces and its BGP peers (the list not yet shared).
    fn announcement(&self, e: &Entry) -> Option<Announced> {
        let mut bgp: Vec<Arc<str>> = Vec::new();
        let mut l2 = None;
        if self.excluded.is_none() {
            for ((peer, prefix), _) in &e.routes {
                let sent = self
                    .routes
                    .get(&**peer)
                    .and_then(|t| t.get(prefix))
                    .is_some_and(|p| matches!(p.merged, Some(Ok(_))));
                // The routes are in peer order: each peer once, sorted.
                if sent && bgp.last().is_none_or(|last| **last != **peer) {
                    bgp.push(Arc::clone(peer));
                }
            }
        }
        if e.l2.as_ref().is_some_and(|l| l.interfaces.is_some()) {
            let mut names: Option<BTreeSet<String>> = Some(BTreeSet::new());
            for ip in &e.svc.ingress {
                match self.l2.get(ip).and_then(|a| a.merged.as_ref()) {
                    // "All" wins over any list: the status names none.
                    Some(Interfaces::All) => names = None,
                    Some(Interfaces::Only(only)) => {
                        if let Some(n) = &mut names {
                            n.extend(only.iter().cloned());
                        }
                    }
                    None => {}
                }
            }
            l2 = Some(names.map(|n| n.into_iter().collect()).unwrap_or_default());
        }
        (l2.is_some() || !bgp.is_empty()).then_some((l2, bgp))
    }

    /// The sessions this node runs (their `routes` empty).
    pub fn peers(&self) -> &BTreeMap<String, PeerPlan> {
        &self.peers
    }

    /// Every route of one peer: what a new or reconfigured session takes.
    pub fn routes(&self, peer: &str) -> BTreeMap<IpPrefix, Arc<RouteAttrs>> {
        self.routes
            .get(peer)
            .map(|t| {
                t.iter()
                    .filter_map(|(prefix, p)| match &p.merged {
                        Some(Ok(attrs)) => Some((*prefix, Arc::clone(attrs))),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many routes one peer is to have.
    pub fn route_count(&self, peer: &str) -> usize {
        self.counts.get(peer).copied().unwrap_or(0)
    }

    /// The IPs this node answers for, with their interfaces.
    pub fn l2(&self) -> BTreeMap<IpAddr, Interfaces> {
        self.l2
            .iter()
            .filter_map(|(ip, a)| Some((*ip, a.merged.clone()?)))
            .collect()
    }

    /// Per service, what this node announces (its status objects): the
    /// shared copy, which the status writer's report holds too. The last
    /// update's changes are applied first (the map copied if the report
    /// still holds it): the run loop asks once the routes are out.
    pub fn announcements(&mut self) -> &Arc<Announcements> {
        self.apply_announcements();
        &self.announcements
    }

    /// Every problem of the last view: shared ones first, then per
    /// service (by key), then LOCAL_PREF conflicts (by peer and prefix).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = self.shared_problems.clone();
        for problems in self.with_problems.values() {
            out.extend(problems.iter().cloned());
        }
        for (peer, prefix) in &self.conflicts {
            if let Some(Some(Err(problem))) = self
                .routes
                .get(peer)
                .and_then(|t| t.get(prefix))
                .map(|p| &p.merged)
            {
                out.push((**problem).clone());
            }
        }
        out
    }

    /// Why this node announces nothing, if it does not.
    pub fn excluded(&self) -> Option<Exclusion> {
        self.excluded
    }

    /// See [`super::L2Plan::api_candidates`].
    pub fn api_candidates(&self) -> usize {
        self.api_candidates
    }

    /// See [`super::L2Plan::yielded`].
    pub fn yielded(&self) -> &BTreeMap<ObjectKey, String> {
        &self.yielded
    }

    /// See [`super::L2Plan::deferred`].
    pub fn deferred(&self) -> &BTreeMap<ObjectKey, Deferral> {
        &self.deferred
    }

    /// Drops the plan's parts one at a time, calling `after` with each
    /// part's name once it is gone: the heap benchmark
    /// (`source::k8s::heap_at_scale`) reads the allocator between them.
    /// The announcements go first (what the status writer's report
    /// shares), then the merged routes by peer and prefix, then the
    /// services' entries (their routes and the shared asks), then the
    /// rest.
    #[cfg(test)]
    pub(crate) fn drop_parts(self, after: &mut dyn FnMut(&'static str)) {
        let Self {
            context,
            peers,
            shared_problems,
            excluded: _,
            api_candidates: _,
            services,
            with_problems,
            routes,
            conflicts,
            counts,
            pendings,
            attrs,
            peer_lists,
            l2,
            announcements,
            unapplied,
            yielded,
            deferred,
            generation: _,
            last,
        } = self;
        drop((announcements, unapplied, peer_lists));
        after("announcements");
        drop((routes, conflicts, counts, attrs));
        after("routes by peer and prefix");
        drop((services, with_problems, pendings, last));
        after("services' entries");
        drop((context, peers, shared_problems, l2, yielded, deferred));
        after("the rest");
    }
}

/// The route a merge gives, if it is not withheld.
fn ok(merged: Option<&Result<Arc<RouteAttrs>, Box<Problem>>>) -> Option<Arc<RouteAttrs>> {
    merged.and_then(|m| m.as_ref().ok()).cloned()
}

/// The protocols of an announcement.
fn vias(a: &ServiceAnnouncement) -> impl Iterator<Item = Via> {
    [
        (!a.bgp.is_empty()).then_some(Via::Bgp),
        a.l2.is_some().then_some(Via::Layer2),
    ]
    .into_iter()
    .flatten()
}

#[cfg(test)]
mod tests;
