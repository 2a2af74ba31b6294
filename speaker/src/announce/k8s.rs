//! Kubernetes objects (the watched kinds as the speaker keeps them,
//! [`stored`], and k8s-openapi's Secrets) to the plain [`ClusterView`] data.
//! Pure conversions: the Kubernetes source watches the objects and calls
//! these; the file source builds the view from YAML instead.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use api::model::{Md5Key, Model, Secrets};
use api::validate::Problem;
use k8s_openapi::api::core::v1 as corev1;

use super::stored::{self, Held, List};
use super::view::{ClusterView, Endpoints, Node, ObjectKey, Service};

impl ClusterView {
    /// Builds the view of `this_node` from the objects as the speaker
    /// keeps them ([`stored`]).
    ///
    /// Only `LoadBalancer` services are converted (the others are never
    /// announced). Services that cannot be read ([`service`]) are left out
    /// and reported, which withdraws them. `members` and the speaker's
    /// flags (`load_balancer_class`, `ignore_exclude_lb`) are the caller's
    /// to set.
    ///
    /// The objects may be owned or shared (`Arc`, as the sources'
    /// snapshots hold them). EndpointSlices are grouped by service
    /// first, so the cost is linear in the number of objects. The reconcile
    /// loop uses [`Converted::view`] instead, which converts only the
    /// services that changed since the last view.
    pub fn from_k8s<N, S, E, X>(
        this_node: &str,
        model: Arc<Model>,
        nodes: &[N],
        services: &[S],
        slices: &[E],
        secrets: &[X],
    ) -> (Self, Vec<Problem>)
    where
        N: Borrow<stored::Node>,
        S: Borrow<stored::Service>,
        E: Borrow<stored::EndpointSlice>,
        X: Borrow<corev1::Secret>,
    {
        let objects = Objects {
            nodes,
            services,
            slices,
            secrets,
        };
        // Owned objects: the view's Service holds copies in `Arc`s.
        objects.view(this_node, model, |s, group| {
            let slices: Arc<[_]> = group.iter().map(|e| (*e).borrow().clone()).collect();
            parse(Arc::new(s.borrow().clone()), Endpoints::of_slices(slices)).map(Arc::new)
        })
    }
}

/// The view of the last call, kept indexed so that the next one converts
/// only what changed: [`Converted::view`] compares each list of objects with
/// the last one by pointer (the Kubernetes source hands on the same `Arc`
/// for an object that did not change, and the same list for a kind none of
/// whose objects did), finds the span where they differ, and converts again
/// only the Services of that span and the Services whose EndpointSlices are
/// in the span of the slices; the other Services keep their
/// `Arc<Service>`, so the keyed state finds them unchanged by pointer. The
/// Nodes' map is changed in place for the Nodes of their span, and handed
/// on (the same `Arc`) while no Node changed.
///
/// The span is the part between the longest common prefix and the longest
/// common suffix of the two lists (by pointer). Whatever the lists' order,
/// everything outside it is the same objects, so the result does not depend
/// on the order; it is small when the lists are sorted (as the source sends
/// them) and a few objects changed. Past the span, a change costs a walk
/// over the arrays of pointers (the Services' results, the new view's
/// list), no conversion, hashing or copying of objects.
///
/// The index keeps no map of the Services: their list, in key order as the
/// source's caches give it, is searched for a Service's place (at 50,000
/// Services a map by key took 2.6 MiB). While the list is not in strict key
/// order (two Services of one name, or an order of its own), the span is the
/// whole list: each Service is found by pointer in the last one, and keeps
/// its result unless its slices changed. The EndpointSlices' groups are a
/// list in the order of their Service's key, searched the same way.
#[derive(Debug, Default)]
pub struct Converted {
    last: Option<Index>,
}

/// A Service's namespace and name; for an EndpointSlice, those of the
/// Service it belongs to (the records' strings, shared).
type Key = ObjectKey;

/// The lists the last view was converted from, and what they gave.
#[derive(Debug)]
struct Index {
    nodes: List<stored::Node>,
    services: List<stored::Service>,
    slices: List<stored::EndpointSlice>,
    secrets: List<corev1::Secret>,
    /// The view's Nodes; `None` when two Nodes of the list have one name
    /// (the map is then built whole each time their list changes).
    node_map: Option<Arc<BTreeMap<String, Node>>>,
    secret_map: Secrets,
    /// Per entry of `services`: what it gave.
    results: Vec<Converts>,
    /// The EndpointSlices of each Service that has some (by slice name:
    /// the list its view's Service shares), in the order of the Services'
    /// keys ([`group_order`]); none is empty.
    groups: Vec<Group>,
    /// Whether `services` is in strict key order, so that a Service's place
    /// can be searched for.
    ordered: bool,
}

/// The EndpointSlices of one Service, by name.
type Group = Arc<[stored::EndpointSlice]>;

/// What a Service object gives: `None` when it is not a LoadBalancer. A
/// problem is boxed: one result is kept per Service, and a `Problem` (four
/// strings, 88 bytes) is rare.
type Converts = Option<Result<Arc<Service>, Box<Problem>>>;

impl Converted {
    /// The same view as [`ClusterView::from_k8s`] gives for these
    /// objects, converting only the objects that changed since the last
    /// call (see [`Converted`]).
    pub fn view(
        &mut self,
        this_node: &str,
        model: Arc<Model>,
        nodes: &List<stored::Node>,
        services: &List<stored::Service>,
        slices: &List<stored::EndpointSlice>,
        secrets: &List<corev1::Secret>,
    ) -> (ClusterView, Vec<Problem>) {
        let index = match self.last.take() {
            Some(mut index) => {
                index.update(nodes, services, slices, secrets);
                index
            }
            None => Index::build(nodes, services, slices, secrets),
        };
        let mut problems = Vec::new();
        // Counted first: the view's list is allocated once, to its length.
        let mut converted = Vec::with_capacity(
            index
                .results
                .iter()
                .filter(|r| matches!(r, Some(Ok(_))))
                .count(),
        );
        converted.extend(
            index
                .results
                .iter()
                .flatten()
                .filter_map(|r| r.as_ref().map_err(|p| problems.push((**p).clone())).ok())
                .cloned(),
        );
        let node_map = match &index.node_map {
            Some(map) => Arc::clone(map),
            None => Arc::new(node_map(nodes)),
        };
        let view = ClusterView {
            nodes: node_map,
            secrets: index.secret_map.clone(),
            ..assemble(this_node, model, converted)
        };
        self.last = Some(index);
        (view, problems)
    }
}

impl Index {
    /// The index of these lists, from scratch.
    fn build(
        nodes: &List<stored::Node>,
        services: &List<stored::Service>,
        slices: &List<stored::EndpointSlice>,
        secrets: &List<corev1::Secret>,
    ) -> Self {
        let mut groups: Vec<Group> = group_slices(slices)
            .into_values()
            .map(|group| group.into_iter().cloned().collect())
            .collect();
        groups.sort_unstable_by(|a, b| group_order(a).cmp(&group_order(b)));
        let results = services
            .iter()
            .map(|s| convert(s, find_group(&groups, &s.key)))
            .collect();
        let node_map = node_map(nodes);
        Self {
            nodes: Arc::clone(nodes),
            services: Arc::clone(services),
            slices: Arc::clone(slices),
            secrets: Arc::clone(secrets),
            node_map: (node_map.len() == nodes.len()).then(|| Arc::new(node_map)),
            secret_map: secret_map(secrets),
            results,
            groups,
            ordered: in_key_order(services),
        }
    }

    /// Brings the index to these lists, converting what changed.
    fn update(
        &mut self,
        nodes: &List<stored::Node>,
        services: &List<stored::Service>,
        slices: &List<stored::EndpointSlice>,
        secrets: &List<corev1::Secret>,
    ) {
        if !Arc::ptr_eq(&self.nodes, nodes) {
            if let Some(map) = &mut self.node_map {
                let (gone, new) = changed(span(&self.nodes, nodes));
                let map = Arc::make_mut(map);
                for n in gone {
                    map.remove(&*n.name);
                }
                for n in new {
                    let n = node(n);
                    map.insert(n.name.clone(), n);
                }
                // Two Nodes of one name: build the map whole from now on.
                if map.len() != nodes.len() {
                    self.node_map = None;
                }
            }
            self.nodes = Arc::clone(nodes);
        }
        if !Arc::ptr_eq(&self.secrets, secrets) {
            self.secret_map = secret_map(secrets);
            self.secrets = Arc::clone(secrets);
        }
        // The Services whose EndpointSlices changed.
        let mut touched = BTreeSet::new();
        if !Arc::ptr_eq(&self.slices, slices) {
            let (gone, new) = changed(span(&self.slices, slices));
            // Per Service whose slices changed: its group's place (or where
            // it would be) and its slices now. Every search is made before
            // the list changes, as a group left empty has no key.
            type Place = Result<usize, usize>;
            let mut now: BTreeMap<Key, (Place, Vec<stored::EndpointSlice>)> = BTreeMap::new();
            for (e, added) in gone
                .iter()
                .map(|e| (e, false))
                .chain(new.iter().map(|e| (e, true)))
            {
                let Some(key) = slice_key(e) else { continue };
                let groups = &self.groups;
                let (_, list) = now.entry(key).or_insert_with_key(|key| {
                    let at = search_group(groups, key);
                    let list = at.map_or_else(|_| Vec::new(), |at| groups[at].to_vec());
                    (at, list)
                });
                if added {
                    list.push((*e).clone());
                } else {
                    list.retain(|g| g.addr() != e.addr());
                }
            }
            let mut emptied = false;
            let mut fresh = Vec::new();
            for (key, (at, mut list)) in now {
                list.sort_by(|a, b| a.name().cmp(&b.name()));
                match at {
                    // A group left empty is dropped below.
                    Ok(at) => {
                        emptied |= list.is_empty();
                        self.groups[at] = list.into();
                    }
                    Err(_) if list.is_empty() => {}
                    Err(_) => fresh.push(Group::from(list)),
                }
                touched.insert(key);
            }
            if emptied {
                self.groups.retain(|g| !g.is_empty());
            }
            if !fresh.is_empty() {
                // Both in key order: one merge.
                self.groups.extend(fresh);
                self.groups
                    .sort_by(|a, b| group_order(a).cmp(&group_order(b)));
            }
            self.slices = Arc::clone(slices);
        }
        // The Services of the span are converted with their current
        // slices; the results after it move with the list (`splice`).
        let converted = if self.ordered && Arc::ptr_eq(&self.services, services) {
            0..0
        } else {
            let (mut old, mut new) = span_at(&self.services, services);
            // Outside the span the list is the last one: in strict key
            // order if that one was, and then the whole is if the span is
            // and where it meets them. Otherwise a Service's place cannot be
            // searched for, and the span is the whole list.
            let around = new.start.saturating_sub(1)..(new.end + 1).min(services.len());
            if !self.ordered || !in_key_order(&services[around]) {
                old = 0..self.services.len();
                new = 0..services.len();
                self.ordered = in_key_order(services);
            }
            let (gone, added) = (&self.services[old.clone()], &services[new.clone()]);
            // An object of the span that was there before (moved by an
            // insertion or a removal before it) keeps its result, unless its
            // slices changed.
            let before: HashMap<usize, &Converts> = gone
                .iter()
                .zip(&self.results[old.clone()])
                .map(|(s, r)| (Arc::as_ptr(s).addr(), r))
                .collect();
            let groups = &self.groups;
            let results: Vec<Converts> = added
                .iter()
                .map(|s| match before.get(&Arc::as_ptr(s).addr()) {
                    Some(&r) if !touched.contains(&s.key) => r.clone(),
                    _ => convert(s, find_group(groups, &s.key)),
                })
                .collect();
            drop(before);
            self.results.splice(old, results);
            self.services = Arc::clone(services);
            new
        };
        for key in touched {
            let Ok(i) = services.binary_search_by(|s| order(&s.key).cmp(&order(&key))) else {
                continue;
            };
            if converted.contains(&i) {
                continue;
            }
            self.results[i] = convert(&services[i], find_group(&self.groups, &key));
        }
    }
}

/// The parts of `old` and `new` between their longest common prefix and
/// their longest common suffix (objects compared by pointer): `new` is
/// `old` with the first part replaced by the second.
fn span<'a, P: Held>(old: &'a [P], new: &'a [P]) -> (&'a [P], &'a [P]) {
    let (o, n) = span_at(old, new);
    (&old[o], &new[n])
}

/// The objects of a [`span`] that are not in both of its halves (by
/// pointer): what was removed or replaced, and what is new. Between two
/// changes far apart in a list the span holds every object in between,
/// unchanged; at 16,745 Services a churn step that moved two slices so made
/// every Service between them "touched", converted again (27 of 134
/// reconciles, 0.3-0.5 s each), and held twice until the old view went.
fn changed<'a, P: Held>((old, new): (&'a [P], &'a [P])) -> (Vec<&'a P>, Vec<&'a P>) {
    let addrs = |list: &[P]| -> HashSet<usize> { list.iter().map(Held::addr).collect() };
    let (in_old, in_new) = (addrs(old), addrs(new));
    (
        old.iter().filter(|o| !in_new.contains(&o.addr())).collect(),
        new.iter().filter(|o| !in_old.contains(&o.addr())).collect(),
    )
}

/// [`span`], as the ranges of `old` and `new`.
fn span_at<P: Held>(old: &[P], new: &[P]) -> (Range<usize>, Range<usize>) {
    let prefix = old
        .iter()
        .zip(new)
        .take_while(|(a, b)| a.addr() == b.addr())
        .count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a.addr() == b.addr())
        .count();
    (prefix..old.len() - suffix, prefix..new.len() - suffix)
}

/// What one Service object and its EndpointSlices give: the view's
/// Service shares both.
fn convert(s: &Arc<stored::Service>, group: Option<&Group>) -> Converts {
    is_load_balancer(s).then(|| {
        let endpoints =
            group.map_or_else(Endpoints::default, |g| Endpoints::of_slices(Arc::clone(g)));
        parse(Arc::clone(s), endpoints)
            .map(Arc::new)
            .map_err(Box::new)
    })
}

/// A key's place in the order of the Services' list (the caches'):
/// namespace, then name.
fn order(key: &Key) -> (&str, &str) {
    (&key.namespace, &key.name)
}

/// Whether the Services are in strict key order (no two of one key).
fn in_key_order(services: &[Arc<stored::Service>]) -> bool {
    services
        .windows(2)
        .all(|w| order(&w[0].key) < order(&w[1].key))
}

/// The key of a group's Service, its place in [`Index::groups`]: the
/// namespace and the Service name of its first slice (a group holds only
/// slices that name their Service, and is never empty).
fn group_order(group: &Group) -> (&str, &str) {
    group.first().map_or(("", ""), |e| {
        (&**e.namespace(), e.service().map_or("", |s| &**s))
    })
}

/// Where the group of `key` is in `groups`, or would be.
fn search_group(groups: &[Group], key: &Key) -> Result<usize, usize> {
    groups.binary_search_by(|g| group_order(g).cmp(&order(key)))
}

/// The group of `key`, if it has one.
fn find_group<'a>(groups: &'a [Group], key: &Key) -> Option<&'a Group> {
    search_group(groups, key).ok().map(|at| &groups[at])
}

/// The namespace and name of the Service an EndpointSlice belongs to.
fn slice_key(e: &stored::EndpointSlice) -> Option<Key> {
    Some(ObjectKey {
        namespace: Arc::clone(e.namespace()),
        name: Arc::clone(e.service()?),
    })
}

/// The Kubernetes objects a view is built from.
struct Objects<'a, N, S, E, X> {
    nodes: &'a [N],
    services: &'a [S],
    slices: &'a [E],
    secrets: &'a [X],
}

impl<N, S, E, X> Objects<'_, N, S, E, X>
where
    N: Borrow<stored::Node>,
    S: Borrow<stored::Service>,
    E: Borrow<stored::EndpointSlice>,
    X: Borrow<corev1::Secret>,
{
    /// The view, with `convert` turning each `LoadBalancer` Service and
    /// its EndpointSlices into the view's.
    fn view(
        &self,
        this_node: &str,
        model: Arc<Model>,
        mut convert: impl FnMut(&S, &[&E]) -> Result<Arc<Service>, Problem>,
    ) -> (ClusterView, Vec<Problem>) {
        let by_service = group_slices(self.slices);
        let mut problems = Vec::new();
        let services = self
            .services
            .iter()
            .filter(|s| is_load_balancer((*s).borrow()))
            .filter_map(|s| {
                let key = &s.borrow().key;
                let key = (&*key.namespace, &*key.name);
                let group = by_service.get(&key).map_or(&[][..], Vec::as_slice);
                convert(s, group).map_err(|p| problems.push(p)).ok()
            })
            .collect();
        let view = ClusterView {
            nodes: Arc::new(node_map(self.nodes)),
            secrets: secret_map(self.secrets),
            ..assemble(this_node, model, services)
        };
        (view, problems)
    }
}

/// The EndpointSlices by the service they name (namespace, name), each
/// service's by slice name (so a service's endpoints are in the same order
/// whatever the order of the list).
fn group_slices<E: Borrow<stored::EndpointSlice>>(slices: &[E]) -> HashMap<(&str, &str), Vec<&E>> {
    let mut by_service: HashMap<(&str, &str), Vec<&E>> = HashMap::with_capacity(slices.len());
    for e in slices {
        let slice = e.borrow();
        let ns = &**slice.namespace();
        if let Some(name) = slice.service().map(|s| &**s) {
            by_service.entry((ns, name)).or_default().push(e);
        }
    }
    for group in by_service.values_mut() {
        group.sort_by(|a, b| slice_name(*a).cmp(&slice_name(*b)));
    }
    by_service
}

/// An EndpointSlice's name.
fn slice_name<E: Borrow<stored::EndpointSlice>>(e: &E) -> stored::Name<'_> {
    e.borrow().name()
}

/// Only `LoadBalancer` services are announced, so only they are converted.
fn is_load_balancer(s: &stored::Service) -> bool {
    s.load_balancer
}

/// A view of `this_node` with these services, and no nodes or Secrets.
fn assemble(this_node: &str, model: Arc<Model>, services: Vec<Arc<Service>>) -> ClusterView {
    ClusterView {
        node: this_node.to_owned(),
        nodes: Arc::default(),
        model,
        secrets: Secrets::new(),
        services,
        members: None,
        isolated: false,
        api_speakers: None,
        load_balancer_class: None,
        ignore_exclude_lb: false,
    }
}

/// The Nodes by name (of two of one name, the later).
fn node_map<N: Borrow<stored::Node>>(nodes: &[N]) -> BTreeMap<String, Node> {
    nodes
        .iter()
        .map(|n| node(n.borrow()))
        .map(|n| (n.name.clone(), n))
        .collect()
}

/// The passwords of the Secrets that have one.
fn secret_map<X: Borrow<corev1::Secret>>(secrets: &[X]) -> Secrets {
    secrets
        .iter()
        .filter_map(|s| secret_password(s.borrow()))
        .collect()
}

/// A Node: name, labels, condition statuses (the record's sets, shared),
/// and addresses (InternalIP first, then ExternalIP, as the record holds
/// them).
pub fn node(n: &stored::Node) -> Node {
    Node {
        name: n.name.to_string(),
        labels: n.labels.clone(),
        conditions: n.conditions.clone(),
        addresses: n.addresses.to_vec(),
    }
}

/// A Service, with the endpoints of those `slices` that belong to it (by
/// namespace and the `kubernetes.io/service-name` label), in this order;
/// the view's Service shares the record and the slices.
///
/// An ingress entry with a hostname and no IP is skipped; one whose IP does
/// not parse makes the whole service unreadable, as MetalLB then withdraws
/// it (`invalidIP`).
pub fn service<'a>(
    s: &Arc<stored::Service>,
    slices: impl IntoIterator<Item = &'a stored::EndpointSlice>,
) -> Result<Service, Problem> {
    let key = &s.key;
    let slices: Group = slices
        .into_iter()
        .filter(|slice| **slice.namespace() == *key.namespace && slice.service() == Some(&key.name))
        .cloned()
        .collect();
    parse(Arc::clone(s), Endpoints::of_slices(slices))
}

/// The view's Service of a record and its endpoints, unless an ingress IP
/// did not parse (see [`service`]).
fn parse(s: Arc<stored::Service>, endpoints: Endpoints) -> Result<Service, Problem> {
    if let Some((i, text)) = s.bad_ingress() {
        return Err(Problem {
            kind: "Service",
            name: s.key.to_string(),
            field: format!("status.loadBalancer.ingress[{i}].ip"),
            message: format!("{text:?} is not an IP address: not announced"),
        });
    }
    Ok(Service {
        record: s,
        endpoints,
    })
}

/// The `password` of a Secret (as a BGPPeer `passwordSecret` names it),
/// from `data` or, for objects not yet through the apiserver, `stringData`.
pub fn secret_password(s: &corev1::Secret) -> Option<(ObjectKey, Md5Key)> {
    let key = ObjectKey::new(
        s.metadata.namespace.clone().unwrap_or_default(),
        s.metadata.name.clone()?,
    );
    let value = s
        .data
        .as_ref()
        .and_then(|d| d.get(PASSWORD_KEY))
        .map(|b| b.0.clone())
        .or_else(|| {
            s.string_data
                .as_ref()
                .and_then(|d| d.get(PASSWORD_KEY))
                .map(|t| t.as_bytes().to_vec())
        })?;
    Some((key, Md5Key::from(value)))
}

/// The names of the nodes in a memberlist member list, for
/// [`ClusterView::members`].
pub fn members<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    names.into_iter().map(str::to_owned).collect()
}

const PASSWORD_KEY: &str = api::model::PASSWORD_SECRET_KEY;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::IpAddr;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::announce::view::{Endpoint, TrafficPolicy};
    use crate::announce::watched;
    use crate::announce::watched::SERVICE_NAME_LABEL;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, NodeAddress, NodeCondition, NodeStatus,
        ServiceSpec, ServiceStatus,
    };
    use k8s_openapi::api::discovery::v1 as discoveryv1;
    use k8s_openapi::api::discovery::v1::EndpointConditions;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn meta(ns: Option<&str>, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            namespace: ns.map(Into::into),
            name: Some(name.into()),
            labels: (!labels.is_empty())
                .then(|| labels.iter().map(|&(k, v)| (k.into(), v.into())).collect()),
            ..ObjectMeta::default()
        }
    }

    /// The Service `web/front`, as the speaker reads it.
    fn k8s_service(ips: &[&str]) -> stored::Service {
        record(&whole_service(ips))
    }

    /// A whole Service as the speaker keeps it.
    fn record(s: &corev1::Service) -> stored::Service {
        watched::Service::from(s).into()
    }

    /// A whole Node as the speaker keeps it.
    fn node_record(n: &corev1::Node) -> stored::Node {
        watched::Node::from(n).into()
    }

    fn whole_service(ips: &[&str]) -> corev1::Service {
        corev1::Service {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([(
                    "metallb.io/ip-allocated-from-pool".into(),
                    "pool".into(),
                )])),
                ..meta(Some("web"), "front", &[("app", "front")])
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                external_traffic_policy: Some("Local".into()),
                load_balancer_class: Some("ferrolb".into()),
                ..ServiceSpec::default()
            }),
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(
                        ips.iter()
                            .map(|ip| LoadBalancerIngress {
                                ip: Some((*ip).into()),
                                ..LoadBalancerIngress::default()
                            })
                            .chain([LoadBalancerIngress {
                                hostname: Some("lb.example".into()),
                                ..LoadBalancerIngress::default()
                            }])
                            .collect(),
                    ),
                }),
                ..ServiceStatus::default()
            }),
        }
    }

    fn slice(ns: &str, service: &str, eps: Vec<discoveryv1::Endpoint>) -> stored::EndpointSlice {
        slice_named(ns, service, &format!("{service}-abcde"), eps)
    }

    /// The slice `name` of `service`.
    fn slice_named(
        ns: &str,
        service: &str,
        name: &str,
        eps: Vec<discoveryv1::Endpoint>,
    ) -> stored::EndpointSlice {
        watched::EndpointSlice::from(&discoveryv1::EndpointSlice {
            metadata: meta(Some(ns), name, &[(SERVICE_NAME_LABEL, service)]),
            address_type: "IPv4".into(),
            endpoints: Some(eps),
            ports: None,
        })
        .into()
    }

    fn ep(
        node: &str,
        ready: Option<bool>,
        serving: Option<bool>,
        terminating: Option<bool>,
    ) -> discoveryv1::Endpoint {
        discoveryv1::Endpoint {
            addresses: vec!["10.244.0.5".into()],
            node_name: Some(node.into()),
            conditions: Some(EndpointConditions {
                ready,
                serving,
                terminating,
            }),
            ..discoveryv1::Endpoint::default()
        }
    }

    #[test]
    fn service_with_its_slices_only() {
        let slices = [
            slice(
                "web",
                "front",
                vec![ep("n1", Some(true), Some(true), Some(false))],
            ),
            slice(
                "web",
                "front",
                vec![ep("n2", Some(false), Some(true), Some(true))],
            ),
            // Another service, and the same name in another namespace.
            slice("web", "back", vec![ep("n3", None, None, None)]),
            slice("other", "front", vec![ep("n4", None, None, None)]),
        ];
        let svc = service(
            &Arc::new(k8s_service(&[
                "192.0.2.10",
                "::ffff:192.0.2.11",
                "2001:db8::10",
            ])),
            &slices,
        )
        .unwrap();
        assert_eq!(svc.key, ObjectKey::new("web", "front"));
        assert!(svc.load_balancer);
        assert_eq!(svc.load_balancer_class.as_deref(), Some("ferrolb"));
        assert_eq!(svc.external_traffic_policy, TrafficPolicy::Local);
        assert_eq!(svc.labels.get("app"), Some("front"));
        assert_eq!(
            svc.annotations.get("metallb.io/ip-allocated-from-pool"),
            Some("pool")
        );
        // The hostname entry is skipped; the mapped address becomes IPv4.
        let ips: Vec<IpAddr> = ["192.0.2.10", "192.0.2.11", "2001:db8::10"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(svc.ingress.to_vec(), ips);
        assert_eq!(
            svc.endpoints
                .iter()
                .map(|e| (**e).clone())
                .collect::<Vec<_>>(),
            vec![
                Endpoint {
                    node: Some("n1".into()),
                    has_address: true,
                    ready: Some(true),
                    serving: Some(true),
                    terminating: Some(false),
                },
                Endpoint {
                    node: Some("n2".into()),
                    has_address: true,
                    ready: Some(false),
                    serving: Some(true),
                    terminating: Some(true),
                },
            ]
        );
    }

    #[test]
    fn service_defaults_and_bad_ip() {
        let mut k = whole_service(&[]);
        k.spec = Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            ..ServiceSpec::default()
        });
        let svc = service(&Arc::new(record(&k)), &[]).unwrap();
        assert!(!svc.load_balancer);
        assert_eq!(svc.external_traffic_policy, TrafficPolicy::Cluster);
        assert!(svc.ingress.is_empty() && svc.endpoints.is_empty());

        let p = service(&Arc::new(k8s_service(&["192.0.2.1", "not-an-ip"])), &[]).unwrap_err();
        assert_eq!(p.kind, "Service");
        assert_eq!(p.name, "web/front");
        assert_eq!(p.field, "status.loadBalancer.ingress[1].ip");
    }

    #[test]
    fn node_conditions_and_addresses() {
        let n = corev1::Node {
            metadata: meta(None, "n1", &[("zone", "a")]),
            spec: None,
            status: Some(NodeStatus {
                addresses: Some(vec![
                    NodeAddress {
                        type_: "Hostname".into(),
                        address: "n1.example".into(),
                    },
                    NodeAddress {
                        type_: "ExternalIP".into(),
                        address: "203.0.113.1".into(),
                    },
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: "fd00::1".into(),
                    },
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: "10.0.0.1".into(),
                    },
                ]),
                conditions: Some(vec![NodeCondition {
                    type_: "NetworkUnavailable".into(),
                    status: "True".into(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        };
        let got = node(&node_record(&n));
        assert_eq!(got.name, "n1");
        assert_eq!(got.labels.get("zone"), Some("a"));
        assert!(got.network_unavailable());
        let want: Vec<IpAddr> = ["fd00::1", "10.0.0.1", "203.0.113.1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(got.addresses, want);
    }

    #[test]
    fn secrets_and_whole_view() {
        let secret = corev1::Secret {
            metadata: meta(Some("metallb-system"), "bgp-auth", &[]),
            data: Some(BTreeMap::from([(
                "password".into(),
                ByteString(b"s3cret".to_vec()),
            )])),
            ..corev1::Secret::default()
        };
        let from_string = corev1::Secret {
            metadata: meta(Some("metallb-system"), "other", &[]),
            string_data: Some(BTreeMap::from([("password".into(), "plain".into())])),
            ..corev1::Secret::default()
        };
        let no_password = corev1::Secret {
            metadata: meta(Some("metallb-system"), "none", &[]),
            ..corev1::Secret::default()
        };
        assert_eq!(
            secret_password(&secret),
            Some((
                ObjectKey::new("metallb-system", "bgp-auth"),
                b"s3cret".to_vec().into()
            ))
        );
        assert_eq!(secret_password(&from_string).unwrap().1.expose(), b"plain");
        assert_eq!(secret_password(&no_password), None);

        let n = corev1::Node {
            metadata: meta(None, "n1", &[]),
            ..corev1::Node::default()
        };
        let (view, problems) = ClusterView::from_k8s(
            "n1",
            Arc::default(),
            &[node_record(&n)],
            &[k8s_service(&["192.0.2.1"]), k8s_service(&["bad"])],
            &[] as &[stored::EndpointSlice],
            &[secret, no_password],
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(view.node, "n1");
        assert!(view.this_node().is_some());
        assert_eq!(view.services.len(), 1);
        assert_eq!(view.secrets.len(), 1);
        assert_eq!(view.members, None);
        assert_eq!(members(["a", "b"]).len(), 2);
    }

    /// A Service `apps/name`: LoadBalancer or not, with one ingress IP
    /// (sometimes one that does not parse).
    fn random_service(rng: &mut SmallRng, name: &str) -> stored::Service {
        let ip = match rng.random_range(0..20) {
            0 => "bad".to_owned(),
            n => format!("192.0.2.{n}"),
        };
        let mut s = k8s_service(&[&ip]);
        s.key = ObjectKey::new("apps", name);
        if rng.random_bool(0.1) {
            s.load_balancer = false;
        }
        s
    }

    /// A Node `name` with one random label and condition.
    fn random_node(rng: &mut SmallRng, name: &str) -> stored::Node {
        let n = corev1::Node {
            metadata: meta(
                None,
                name,
                &[("rack", ["r1", "r2"][rng.random_range(0..2)])],
            ),
            spec: None,
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "NetworkUnavailable".into(),
                    status: ["True", "False"][rng.random_range(0..2)].into(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        };
        node_record(&n)
    }

    /// `list` again when `objects` are not its objects in its order.
    fn relist<P: Held>(list: &mut Arc<[P]>, objects: Vec<P>) {
        if list.len() != objects.len()
            || list.iter().zip(&objects).any(|(a, b)| a.addr() != b.addr())
        {
            *list = objects.into();
        }
    }

    /// Issue 18: after every step of seeded random histories (Services,
    /// EndpointSlices and Nodes added, changed, copied unchanged into a new
    /// object, moved between services, removed; Secrets replaced; a list
    /// handed on in another order), the view converted incrementally is
    /// the view built from scratch, with the same problems; and, but after
    /// a list came in another order, a service whose objects were all left
    /// alone keeps its `Arc` (it was not converted again), and so does the
    /// map of Nodes while no Node changed.
    #[test]
    fn converted_views_are_views_from_scratch() {
        const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
        let mut reused = 0;
        for seed in 0..30 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut services: BTreeMap<&str, Arc<stored::Service>> = BTreeMap::new();
            let mut slices: BTreeMap<String, stored::EndpointSlice> = BTreeMap::new();
            let mut nodes: BTreeMap<&str, Arc<stored::Node>> = BTreeMap::new();
            let mut converted = Converted::default();
            let mut last: BTreeMap<ObjectKey, Arc<Service>> = BTreeMap::new();
            let mut last_nodes = None;
            // As the Kubernetes source does, each list is handed on as it
            // was while none of its objects changed.
            let mut sv: Arc<[Arc<stored::Service>]> = Arc::default();
            let mut sl: Arc<[stored::EndpointSlice]> = Arc::default();
            let mut nl: Arc<[Arc<stored::Node>]> = Arc::default();
            let mut secrets: Arc<[Arc<corev1::Secret>]> = Arc::default();
            let mut was_shuffled = false;
            for step in 0..200 {
                let name = NAMES[rng.random_range(0..NAMES.len())];
                // The services whose objects this step touches.
                let mut touched = BTreeSet::from([name]);
                // Every Service is converted again after its slices' list
                // came in another order, and when that list is sorted again.
                let mut shuffled = false;
                match rng.random_range(0..120) {
                    0..30 => {
                        services.insert(name, Arc::new(random_service(&mut rng, name)));
                    }
                    30..40 => {
                        if let Some(s) = services.get(name) {
                            let copy = Arc::new((**s).clone());
                            services.insert(name, copy);
                        }
                    }
                    40..50 => {
                        services.remove(name);
                    }
                    50..85 => {
                        let slice_name = format!("sl{}", rng.random_range(0..8));
                        let nodes = ["n1", "n2", "n3"];
                        let eps = (0..rng.random_range(0..3))
                            .map(|_| {
                                let node = nodes[rng.random_range(0..nodes.len())];
                                ep(node, Some(rng.random_bool(0.7)), None, None)
                            })
                            .collect();
                        let new = slice_named("apps", name, &slice_name, eps);
                        if let Some(old) = slices.insert(slice_name, new) {
                            touched.insert(service_of(&old));
                        }
                    }
                    85..100 => {
                        let slice_name = format!("sl{}", rng.random_range(0..8));
                        if let Some(old) = slices.remove(&slice_name) {
                            touched.insert(service_of(&old));
                        }
                    }
                    100..108 => {
                        let n = ["n1", "n2", "n3", "n4"][rng.random_range(0..4)];
                        if rng.random_bool(0.3) {
                            nodes.remove(n);
                        } else {
                            nodes.insert(n, Arc::new(random_node(&mut rng, n)));
                        }
                    }
                    108..110 => {
                        let secret = corev1::Secret {
                            metadata: meta(Some("metallb-system"), name, &[]),
                            string_data: Some(BTreeMap::from([("password".into(), name.into())])),
                            ..corev1::Secret::default()
                        };
                        let mut list = secrets.to_vec();
                        list.push(Arc::new(secret));
                        secrets = list.into();
                    }
                    _ => {
                        // The same objects, in another order.
                        shuffled = true;
                        let mut list = sv.to_vec();
                        let by = rng.random_range(0..list.len().max(1));
                        list.rotate_left(by);
                        sv = list.into();
                        let mut list = sl.to_vec();
                        list.reverse();
                        sl = list.into();
                        let mut list = nl.to_vec();
                        list.reverse();
                        nl = list.into();
                    }
                }
                if !shuffled {
                    relist(&mut sv, services.values().cloned().collect());
                    relist(&mut sl, slices.values().cloned().collect());
                    relist(&mut nl, nodes.values().cloned().collect());
                }
                let (view, problems) =
                    converted.view("n1", Arc::default(), &nl, &sv, &sl, &secrets);
                let (scratch, scratch_problems) = ClusterView::from_k8s(
                    "n1",
                    Arc::default(),
                    &nl[..],
                    &sv[..],
                    &sl[..],
                    &secrets[..],
                );
                let at = format!("seed {seed} step {step}");
                assert_eq!(view.services, scratch.services, "{at}");
                assert_eq!(problems, scratch_problems, "{at}");
                assert_eq!(view.nodes, scratch.nodes, "{at}");
                assert_eq!(view.secrets, scratch.secrets, "{at}");
                if let Some((list, map)) = &last_nodes
                    && Arc::ptr_eq(list, &nl)
                {
                    assert!(Arc::ptr_eq(map, &view.nodes), "{at}: nodes mapped again");
                }
                last_nodes = Some((Arc::clone(&nl), Arc::clone(&view.nodes)));
                for svc in &view.services {
                    if let Some(before) = last.get(&svc.key)
                        && !touched.contains(&*svc.key.name)
                        && !shuffled
                        && !was_shuffled
                    {
                        assert!(
                            Arc::ptr_eq(before, svc),
                            "{at}: {} converted again",
                            svc.key
                        );
                        reused += 1;
                    }
                }
                last = view
                    .services
                    .iter()
                    .map(|s| (s.key.clone(), Arc::clone(s)))
                    .collect();
                was_shuffled = shuffled;
            }
        }
        assert!(reused > 8_000, "{reused}");
    }

    /// Issue 18: two changes far apart in a list (a slice of the first
    /// Service and one of the last, a Node at each end) convert those
    /// alone: the Services and Nodes in between, unchanged objects inside
    /// the span, keep their `Arc` and their converted value; the view is
    /// the view from scratch.
    #[test]
    fn changes_far_apart_convert_only_what_changed() {
        let names: Vec<String> = (0..50).map(|i| format!("s{i:02}")).collect();
        let service = |name: &str| {
            let mut s = k8s_service(&["192.0.2.1"]);
            s.key = ObjectKey::new("apps", name);
            Arc::new(s)
        };
        let slice_of =
            |name: &str, node: &str| slice("apps", name, vec![ep(node, Some(true), None, None)]);
        let node_named = |name: &str, status: &str| {
            let n = corev1::Node {
                metadata: meta(None, name, &[]),
                spec: None,
                status: Some(NodeStatus {
                    conditions: Some(vec![NodeCondition {
                        type_: "NetworkUnavailable".into(),
                        status: status.into(),
                        ..NodeCondition::default()
                    }]),
                    ..NodeStatus::default()
                }),
            };
            Arc::new(node_record(&n))
        };
        let sv: Arc<[Arc<stored::Service>]> = names.iter().map(|n| service(n)).collect();
        let mut sl: Vec<_> = names.iter().map(|n| slice_of(n, "n1")).collect();
        let mut nl: Vec<_> = names.iter().map(|n| node_named(n, "False")).collect();
        let secrets: Arc<[Arc<corev1::Secret>]> = Arc::default();
        let mut converted = Converted::default();
        let lists = |sl: &[stored::EndpointSlice], nl: &[Arc<stored::Node>]| {
            (Arc::<[_]>::from(sl.to_vec()), Arc::<[_]>::from(nl.to_vec()))
        };
        let (sl0, nl0) = lists(&sl, &nl);
        let (before, _) = converted.view("n1", Arc::default(), &nl0, &sv, &sl0, &secrets);
        sl[0] = slice_of(&names[0], "n2");
        sl[49] = slice_of(&names[49], "n2");
        nl[0] = node_named(&names[0], "True");
        nl[49] = node_named(&names[49], "True");
        let (sl1, nl1) = lists(&sl, &nl);
        let (after, problems) = converted.view("n1", Arc::default(), &nl1, &sv, &sl1, &secrets);
        let (scratch, scratch_problems) = ClusterView::from_k8s(
            "n1",
            Arc::default(),
            &nl1[..],
            &sv[..],
            &sl1[..],
            &secrets[..],
        );
        assert_eq!(after.services, scratch.services);
        assert_eq!(problems, scratch_problems);
        assert_eq!(after.nodes, scratch.nodes);
        assert_eq!(after.services.len(), 50);
        for (i, (b, a)) in before.services.iter().zip(&after.services).enumerate() {
            let kept = Arc::ptr_eq(b, a);
            assert_eq!(kept, i != 0 && i != 49, "{}: kept {kept}", a.key);
        }
        assert!(after.nodes["s00"].network_unavailable());
        assert!(!after.nodes["s25"].network_unavailable());
    }

    /// The name of the service an EndpointSlice belongs to.
    fn service_of(slice: &stored::EndpointSlice) -> &'static str {
        let name = slice.service().map_or("", |s| &**s);
        ["a", "b", "c", "d", "e", "f"]
            .into_iter()
            .find(|n| *n == name)
            .unwrap_or("")
    }
}
