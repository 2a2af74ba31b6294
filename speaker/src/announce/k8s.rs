//! Kubernetes objects (the watched kinds as the speaker reads them,
//! [`watched`], and k8s-openapi's Secrets) to the plain [`ClusterView`] data.
//! Pure conversions: the Kubernetes source watches the objects and calls
//! these; the file source builds the view from YAML instead.

use std::borrow::Borrow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use api::model::{Md5Key, Model};
use api::validate::Problem;
use k8s_openapi::api::core::v1 as corev1;

use super::view::{ClusterView, Node, ObjectKey, Service};
use super::watched;

impl ClusterView {
    /// Builds the view of `this_node` from watched objects.
    ///
    /// Only `LoadBalancer` services are converted (the others are never
    /// announced). Services that cannot be read ([`service`]) are left out
    /// and reported, which withdraws them. `members` and the speaker's
    /// flags (`load_balancer_class`, `ignore_exclude_lb`) are the caller's
    /// to set.
    ///
    /// The objects may be owned or shared (`Arc`, as the Kubernetes
    /// source's caches hold them). EndpointSlices are grouped by service
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
        N: Borrow<watched::Node>,
        S: Borrow<watched::Service>,
        E: Borrow<watched::EndpointSlice>,
        X: Borrow<corev1::Secret>,
    {
        let objects = Objects {
            nodes,
            services,
            slices,
            secrets,
        };
        objects.view(this_node, model, |s, group| {
            service(s.borrow(), group.iter().map(|e| (*e).borrow())).map(Arc::new)
        })
    }
}

/// The services of the last view, by the objects they were converted
/// from. [`Converted::view`] converts again only a Service whose object or
/// EndpointSlices are not the same (`Arc`s) as last time, and hands on the
/// others' `Arc<Service>`: after one change, one conversion, and the keyed
/// state finds every other service unchanged by pointer.
///
/// When the EndpointSlices are the same list as last time (the same
/// `Arc`, as the Kubernetes source hands on a list none of whose objects
/// changed) and the Services as many, the lists are compared entry by entry
/// by pointer, and no other object is read: the common change (a Service's
/// status, labels or annotations) costs a walk over two arrays of
/// pointers.
#[derive(Debug, Default)]
pub struct Converted {
    /// By the address of the Service object, which the entry holds (so the
    /// address cannot be another object's while it is here).
    services: HashMap<usize, Conversion>,
    generation: u64,
    /// The lists of the last view, and what each Service gave.
    last: Option<Last>,
}

/// One Service object, its EndpointSlices and what they gave.
#[derive(Debug)]
struct Conversion {
    object: Arc<watched::Service>,
    slices: Vec<Arc<watched::EndpointSlice>>,
    result: Result<Arc<Service>, Problem>,
    /// The last view that had it.
    seen: u64,
}

/// The lists a view was converted from.
#[derive(Debug)]
struct Last {
    services: Arc<[Arc<watched::Service>]>,
    slices: Arc<[Arc<watched::EndpointSlice>]>,
    /// Per entry of `services`: what it gave.
    results: Vec<Converts>,
}

/// What a Service object gives: `None` when it is not a LoadBalancer.
type Converts = Option<Result<Arc<Service>, Problem>>;

impl Converted {
    /// The same view as [`ClusterView::from_k8s`] gives for these
    /// objects, converting only the Services (with their EndpointSlices)
    /// that changed since the last call.
    pub fn view(
        &mut self,
        this_node: &str,
        model: Arc<Model>,
        nodes: &[Arc<watched::Node>],
        services: &Arc<[Arc<watched::Service>]>,
        slices: &Arc<[Arc<watched::EndpointSlice>]>,
        secrets: &[Arc<corev1::Secret>],
    ) -> (ClusterView, Vec<Problem>) {
        self.generation += 1;
        let results = match self.aligned(services, slices) {
            Some(results) => results,
            None => self.all(services, slices),
        };
        let mut problems = Vec::new();
        let converted = results
            .iter()
            .flatten()
            .filter_map(|r| r.as_ref().map_err(|p| problems.push(p.clone())).ok())
            .cloned()
            .collect();
        self.last = Some(Last {
            services: Arc::clone(services),
            slices: Arc::clone(slices),
            results,
        });
        let view = assemble(this_node, model, nodes, secrets, converted);
        (view, problems)
    }

    /// The results when the EndpointSlices are the list of the last view
    /// and the Services as many: the entries that are the same objects
    /// keep their results; another object in the place of a Service of the
    /// same name is converted with that Service's EndpointSlices. `None`
    /// otherwise (lists of other lengths, another Service in a place).
    fn aligned(
        &mut self,
        services: &[Arc<watched::Service>],
        slices: &Arc<[Arc<watched::EndpointSlice>]>,
    ) -> Option<Vec<Converts>> {
        let last = self.last.as_ref()?;
        if !Arc::ptr_eq(&last.slices, slices) || last.services.len() != services.len() {
            return None;
        }
        let changed: Vec<usize> = (0..services.len())
            .filter(|&i| !Arc::ptr_eq(&services[i], &last.services[i]))
            .collect();
        let mut replaced = Vec::with_capacity(changed.len());
        for &i in &changed {
            let (old, new) = (&last.services[i], &services[i]);
            let (o, n) = (&old.metadata, &new.metadata);
            if (o.namespace.as_deref(), o.name.as_deref())
                != (n.namespace.as_deref(), n.name.as_deref())
            {
                return None;
            }
            let group = match self.services.get(&Arc::as_ptr(old).addr()) {
                Some(c) => c.slices.clone(),
                // Not a LoadBalancer last time: its slices are not kept.
                None => return None,
            };
            replaced.push((i, Arc::clone(new), group));
        }
        let last = self.last.take()?;
        let mut results = last.results;
        for (i, new, group) in replaced {
            self.services.remove(&Arc::as_ptr(&last.services[i]).addr());
            results[i] = is_load_balancer(&new).then(|| {
                let result = service(&new, group.iter().map(|e| &**e)).map(Arc::new);
                let c = Conversion {
                    object: Arc::clone(&new),
                    slices: group,
                    result: result.clone(),
                    seen: self.generation,
                };
                self.services.insert(Arc::as_ptr(&new).addr(), c);
                result
            });
        }
        // Entries not walked keep their mark of an older generation: the
        // next full walk sets them again before it drops the unmarked.
        Some(results)
    }

    /// The results of every Service: each one whose object and slices are
    /// the same `Arc`s as in a past view keeps its result.
    fn all(
        &mut self,
        services: &[Arc<watched::Service>],
        slices: &[Arc<watched::EndpointSlice>],
    ) -> Vec<Converts> {
        let generation = self.generation;
        let by_service = group_slices(slices);
        let memo = &mut self.services;
        let results = services
            .iter()
            .map(|s| {
                if !is_load_balancer(s) {
                    return None;
                }
                let meta = &s.metadata;
                let key = (
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default(),
                );
                let group = by_service.get(&key).map_or(&[][..], Vec::as_slice);
                let same = |c: &Conversion| {
                    Arc::ptr_eq(&c.object, s)
                        && c.slices.len() == group.len()
                        && c.slices.iter().zip(group).all(|(a, b)| Arc::ptr_eq(a, b))
                };
                let c = match memo.entry(Arc::as_ptr(s).addr()) {
                    Entry::Occupied(o) if same(o.get()) => o.into_mut(),
                    entry => {
                        let c = Conversion {
                            object: Arc::clone(s),
                            slices: group.iter().map(|e| Arc::clone(e)).collect(),
                            result: service(s, group.iter().map(|e| &***e)).map(Arc::new),
                            seen: generation,
                        };
                        entry.insert_entry(c).into_mut()
                    }
                };
                c.seen = generation;
                Some(c.result.clone())
            })
            .collect();
        memo.retain(|_, c| c.seen == generation);
        results
    }
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
    N: Borrow<watched::Node>,
    S: Borrow<watched::Service>,
    E: Borrow<watched::EndpointSlice>,
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
                let meta = &s.borrow().metadata;
                let key = (
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default(),
                );
                let group = by_service.get(&key).map_or(&[][..], Vec::as_slice);
                convert(s, group).map_err(|p| problems.push(p)).ok()
            })
            .collect();
        let view = assemble(this_node, model, self.nodes, self.secrets, services);
        (view, problems)
    }
}

/// The EndpointSlices by the service they name (namespace, name).
fn group_slices<E: Borrow<watched::EndpointSlice>>(slices: &[E]) -> HashMap<(&str, &str), Vec<&E>> {
    let mut by_service: HashMap<(&str, &str), Vec<&E>> = HashMap::with_capacity(slices.len());
    for e in slices {
        let slice = e.borrow();
        let ns = slice.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(name) = slice.service.as_deref() {
            by_service.entry((ns, name)).or_default().push(e);
        }
    }
    by_service
}

/// Only `LoadBalancer` services are announced, so only they are converted.
fn is_load_balancer(s: &watched::Service) -> bool {
    s.load_balancer
}

/// A view of `this_node` with these services, the nodes and the Secrets'
/// passwords.
fn assemble<N, X>(
    this_node: &str,
    model: Arc<Model>,
    nodes: &[N],
    secrets: &[X],
    services: Vec<Arc<Service>>,
) -> ClusterView
where
    N: Borrow<watched::Node>,
    X: Borrow<corev1::Secret>,
{
    ClusterView {
        node: this_node.to_owned(),
        nodes: nodes
            .iter()
            .map(|n| node(n.borrow()))
            .map(|n| (n.name.clone(), n))
            .collect(),
        model,
        secrets: secrets
            .iter()
            .filter_map(|s| secret_password(s.borrow()))
            .collect(),
        services,
        members: None,
        isolated: false,
        api_speakers: None,
        load_balancer_class: None,
        ignore_exclude_lb: false,
    }
}

/// A Node: name, labels, condition statuses, and addresses (InternalIP
/// first, then ExternalIP; host names are skipped).
pub fn node(n: &watched::Node) -> Node {
    let mut addresses: Vec<(u8, IpAddr)> = n
        .addresses
        .iter()
        .filter_map(|(kind, address)| {
            let rank = match kind.as_str() {
                "InternalIP" => 0,
                "ExternalIP" => 1,
                _ => return None,
            };
            address.parse().ok().map(|ip| (rank, canonical(ip)))
        })
        .collect();
    // Stable: the API's order within a type is kept.
    addresses.sort_by_key(|&(rank, _)| rank);
    Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        conditions: n.conditions.iter().cloned().collect(),
        addresses: addresses.into_iter().map(|(_, ip)| ip).collect(),
    }
}

/// A Service, with the endpoints of those `slices` that belong to it (by
/// namespace and the `kubernetes.io/service-name` label).
///
/// An ingress entry with a hostname and no IP is skipped; one whose IP does
/// not parse makes the whole service unreadable, as MetalLB then withdraws
/// it (`invalidIP`).
pub fn service<'a>(
    s: &watched::Service,
    slices: impl IntoIterator<Item = &'a watched::EndpointSlice>,
) -> Result<Service, Problem> {
    let key = ObjectKey::new(
        s.metadata.namespace.clone().unwrap_or_default(),
        s.metadata.name.clone().unwrap_or_default(),
    );
    let mut ingress = Vec::new();
    for (i, entry) in s.ingress.iter().enumerate() {
        let Some(text) = entry.as_deref() else {
            continue;
        };
        match text.parse::<IpAddr>() {
            Ok(ip) => ingress.push(canonical(ip)),
            Err(_) => {
                return Err(Problem {
                    kind: "Service",
                    name: key.to_string(),
                    field: format!("status.loadBalancer.ingress[{i}].ip"),
                    message: format!("{text:?} is not an IP address: not announced"),
                });
            }
        }
    }
    let endpoints = slices
        .into_iter()
        .filter(|slice| {
            slice.metadata.namespace.as_deref() == Some(&*key.namespace)
                && slice.service.as_deref() == Some(&*key.name)
        })
        .flat_map(|slice| slice.endpoints.iter().cloned())
        .collect();
    Ok(Service {
        key,
        labels: s.metadata.labels.clone().unwrap_or_default(),
        annotations: s.metadata.annotations.clone().unwrap_or_default(),
        load_balancer: s.load_balancer,
        load_balancer_class: s.load_balancer_class.clone(),
        external_traffic_policy: s.external_traffic_policy,
        ingress,
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

/// Go's `net.IP` prints an IPv4-mapped IPv6 address as IPv4, and MetalLB's
/// election hashes that text; keep the IPv4 form so ours hashes the same.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

const PASSWORD_KEY: &str = api::model::PASSWORD_SECRET_KEY;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::announce::view::{Endpoint, TrafficPolicy};
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
    fn k8s_service(ips: &[&str]) -> watched::Service {
        (&whole_service(ips)).into()
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

    fn slice(ns: &str, service: &str, eps: Vec<discoveryv1::Endpoint>) -> watched::EndpointSlice {
        (&discoveryv1::EndpointSlice {
            metadata: meta(
                Some(ns),
                &format!("{service}-abcde"),
                &[(SERVICE_NAME_LABEL, service)],
            ),
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
            &k8s_service(&["192.0.2.10", "::ffff:192.0.2.11", "2001:db8::10"]),
            &slices,
        )
        .unwrap();
        assert_eq!(svc.key, ObjectKey::new("web", "front"));
        assert!(svc.load_balancer);
        assert_eq!(svc.load_balancer_class.as_deref(), Some("ferrolb"));
        assert_eq!(svc.external_traffic_policy, TrafficPolicy::Local);
        assert_eq!(svc.labels["app"], "front");
        assert_eq!(svc.annotations["metallb.io/ip-allocated-from-pool"], "pool");
        // The hostname entry is skipped; the mapped address becomes IPv4.
        let ips: Vec<IpAddr> = ["192.0.2.10", "192.0.2.11", "2001:db8::10"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(svc.ingress, ips);
        assert_eq!(
            svc.endpoints,
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
        let svc = service(&(&k).into(), &[]).unwrap();
        assert!(!svc.load_balancer);
        assert_eq!(svc.external_traffic_policy, TrafficPolicy::Cluster);
        assert!(svc.ingress.is_empty() && svc.endpoints.is_empty());

        let p = service(&k8s_service(&["192.0.2.1", "not-an-ip"]), &[]).unwrap_err();
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
        let got = node(&(&n).into());
        assert_eq!(got.name, "n1");
        assert_eq!(got.labels["zone"], "a");
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
            &[watched::Node::from(&n)],
            &[k8s_service(&["192.0.2.1"]), k8s_service(&["bad"])],
            &[] as &[watched::EndpointSlice],
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
    fn random_service(rng: &mut SmallRng, name: &str) -> watched::Service {
        let ip = match rng.random_range(0..20) {
            0 => "bad".to_owned(),
            n => format!("192.0.2.{n}"),
        };
        let mut s = k8s_service(&[&ip]);
        s.metadata = meta(Some("apps"), name, &[]);
        if rng.random_bool(0.1) {
            s.load_balancer = false;
        }
        s
    }

    /// Issue 18: after every step of seeded random histories (Services
    /// and EndpointSlices added, changed, copied unchanged into a new
    /// object, moved between services, removed), the view converted
    /// incrementally is the view built from scratch, with the same
    /// problems; and a service whose objects were all left alone keeps its
    /// `Arc` (it was not converted again).
    #[test]
    fn converted_views_are_views_from_scratch() {
        const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
        let mut reused = 0;
        for seed in 0..30 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut services: BTreeMap<&str, Arc<watched::Service>> = BTreeMap::new();
            let mut slices: BTreeMap<String, Arc<watched::EndpointSlice>> = BTreeMap::new();
            let mut converted = Converted::default();
            let mut last: BTreeMap<ObjectKey, Arc<Service>> = BTreeMap::new();
            // As the Kubernetes source does, the list of EndpointSlices is
            // handed on as it was while none changed.
            let mut sl: Arc<[Arc<watched::EndpointSlice>]> = Arc::default();
            for step in 0..200 {
                let name = NAMES[rng.random_range(0..NAMES.len())];
                // The services whose objects this step touches.
                let mut touched = BTreeSet::from([name]);
                match rng.random_range(0..100) {
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
                        let mut new = slice("apps", name, eps);
                        new.metadata.name = Some(slice_name.clone());
                        if let Some(old) = slices.insert(slice_name, Arc::new(new)) {
                            touched.insert(service_of(&old));
                        }
                    }
                    _ => {
                        let slice_name = format!("sl{}", rng.random_range(0..8));
                        if let Some(old) = slices.remove(&slice_name) {
                            touched.insert(service_of(&old));
                        }
                    }
                }
                let svcs: Arc<[_]> = services.values().cloned().collect();
                if sl.len() != slices.len()
                    || sl
                        .iter()
                        .zip(slices.values())
                        .any(|(a, b)| !Arc::ptr_eq(a, b))
                {
                    sl = slices.values().cloned().collect();
                }
                let (view, problems) = converted.view("n1", Arc::default(), &[], &svcs, &sl, &[]);
                let (scratch, scratch_problems) = ClusterView::from_k8s(
                    "n1",
                    Arc::default(),
                    &[] as &[watched::Node],
                    &svcs[..],
                    &sl[..],
                    &[] as &[corev1::Secret],
                );
                let at = format!("seed {seed} step {step}");
                assert_eq!(view.services, scratch.services, "{at}");
                assert_eq!(problems, scratch_problems, "{at}");
                for svc in &view.services {
                    if let Some(before) = last.get(&svc.key)
                        && !touched.contains(&*svc.key.name)
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
            }
        }
        assert!(reused > 10_000, "{reused}");
    }

    /// The name of the service an EndpointSlice belongs to.
    fn service_of(slice: &watched::EndpointSlice) -> &'static str {
        let name = slice.service.as_deref().unwrap_or_default();
        ["a", "b", "c", "d", "e", "f"]
            .into_iter()
            .find(|n| *n == name)
            .unwrap_or("")
    }
}
