//! Builders for the decision tables: a small cluster in a few lines.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use api::meta::LabelSelector;
use api::v1beta1::{
    BFDProfile, BFDProfileSpec, BGPAdvertisement, BGPAdvertisementSpec, Community, CommunityAlias,
    CommunitySpec, IPAddressPool, IPAddressPoolSpec, L2Advertisement, L2AdvertisementSpec,
};
use api::v1beta2::{BGPPeer, BGPPeerSpec};
use api::validate::{self, Config};

use super::stored;
use super::view::{ClusterView, Endpoint, Node, ObjectKey, Service, TrafficPolicy};
use super::{BgpPlan, L2Plan};

pub(super) const NS: &str = "metallb-system";

pub(super) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
}

pub(super) fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: labels(pairs),
        ..LabelSelector::default()
    }
}

pub(super) fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A view and the metallb.io objects its model is built from, so that a
/// table row can change one field of one object.
#[derive(Clone, Default)]
pub(super) struct Fixture {
    pub(super) config: Config,
    pub(super) view: ClusterView,
}

impl Fixture {
    /// The view with the model of `config`, and the validation problems.
    pub(super) fn build(&self) -> (ClusterView, Vec<super::Problem>) {
        let (model, problems) = validate::config(&self.config);
        let view = ClusterView {
            model: Arc::new(model),
            ..self.view.clone()
        };
        (view, problems)
    }
}

impl Deref for Fixture {
    type Target = ClusterView;

    fn deref(&self) -> &ClusterView {
        &self.view
    }
}

impl DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut ClusterView {
        &mut self.view
    }
}

/// The BGP plan of the fixture; validation problems come first in its
/// problems (objects with problems are left out of the model).
pub(super) fn bgp(f: &Fixture) -> BgpPlan {
    let (view, problems) = f.build();
    let mut plan = super::bgp_plan(&view);
    plan.problems.splice(0..0, problems);
    plan
}

/// The layer 2 plan of the fixture, as [`bgp`].
pub(super) fn l2(f: &Fixture) -> L2Plan {
    let (view, problems) = f.build();
    let mut plan = super::l2_plan(&view);
    plan.problems.splice(0..0, problems);
    plan
}

/// A view of `this` with nodes `names` (no labels) and nothing else.
pub(super) fn view(this: &str, names: &[&str]) -> Fixture {
    let mut v = Fixture::default();
    v.view.node = this.into();
    for name in names {
        Arc::make_mut(&mut v.view.nodes).insert((*name).into(), node(name, &[]));
    }
    v
}

pub(super) fn node(name: &str, pairs: &[(&str, &str)]) -> Node {
    Node {
        name: name.into(),
        labels: labels(pairs).into(),
        ..Node::default()
    }
}

/// Puts a metallb.io object in the MetalLB namespace, with labels.
macro_rules! meta {
    ($obj:expr, $pairs:expr $(,)?) => {{
        let mut obj = $obj;
        let pairs: &[(&str, &str)] = $pairs;
        obj.metadata.namespace = Some(NS.into());
        if !pairs.is_empty() {
            obj.metadata.labels = Some(labels(pairs));
        }
        obj
    }};
}

pub(super) fn pool(name: &str, addresses: &[&str], pairs: &[(&str, &str)]) -> IPAddressPool {
    meta!(
        IPAddressPool::new(
            name,
            IPAddressPoolSpec {
                addresses: addresses.iter().map(|a| (*a).into()).collect(),
                ..IPAddressPoolSpec::default()
            },
        ),
        pairs,
    )
}

pub(super) fn bgp_ad(name: &str, spec: BGPAdvertisementSpec) -> BGPAdvertisement {
    meta!(BGPAdvertisement::new(name, spec), &[])
}

pub(super) fn l2_ad(name: &str, spec: L2AdvertisementSpec) -> L2Advertisement {
    meta!(L2Advertisement::new(name, spec), &[])
}

pub(super) fn peer(name: &str, my_asn: u32, peer_asn: u32, address: &str) -> BGPPeer {
    meta!(
        BGPPeer::new(
            name,
            BGPPeerSpec {
                my_asn,
                peer_asn: Some(peer_asn),
                peer_address: address.into(),
                ..BGPPeerSpec::default()
            },
        ),
        &[],
    )
}

pub(super) fn community(name: &str, aliases: &[(&str, &str)]) -> Community {
    meta!(
        Community::new(
            name,
            CommunitySpec {
                communities: aliases
                    .iter()
                    .map(|&(n, v)| CommunityAlias {
                        name: n.into(),
                        value: v.into(),
                    })
                    .collect(),
            },
        ),
        &[],
    )
}

pub(super) fn bfd(name: &str) -> BFDProfile {
    meta!(
        BFDProfile::new(
            name,
            BFDProfileSpec {
                detect_multiplier: Some(3),
                ..BFDProfileSpec::default()
            },
        ),
        &[],
    )
}

/// A ready endpoint on `node`.
pub(super) fn ready(node: &str) -> Endpoint {
    Endpoint {
        node: Some(node.into()),
        has_address: true,
        ready: Some(true),
        serving: Some(true),
        terminating: Some(false),
    }
}

/// A view's services, shared as the view holds them.
pub(super) fn services(list: impl IntoIterator<Item = Service>) -> Vec<Arc<Service>> {
    list.into_iter().map(Arc::new).collect()
}

/// A LoadBalancer service `default/name` with `ips` and a ready endpoint
/// on each of `endpoint_nodes`.
pub(super) fn svc(name: &str, ips: &[&str], endpoint_nodes: &[&str]) -> Service {
    Service {
        record: Arc::new(stored::Service {
            key: key(name),
            load_balancer: true,
            external_traffic_policy: TrafficPolicy::Cluster,
            ingress: ips.iter().map(|s| ip(s)).collect(),
            ..stored::Service::default()
        }),
        endpoints: endpoint_nodes.iter().map(|n| ready(n)).collect(),
    }
}

pub(super) fn key(name: &str) -> ObjectKey {
    ObjectKey::new("default", name)
}
