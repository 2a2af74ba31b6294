//! Announcement decisions: from the node-local view of the cluster, what
//! this node announces over BGP ([`bgp_plan`]) and layer 2 ([`l2_plan`]).
//!
//! Pure functions: no I/O, no clock, no randomness, no logging. The input is
//! a [`ClusterView`], plain data that [`k8s`] builds from Kubernetes objects
//! and the file source from YAML, so both sources share these decisions.
//! Each plan is the whole desired state, not a diff: the drivers compare it
//! with what they run. Inconsistencies (an unknown pool, alias, secret or
//! profile, a bad peer, conflicting advertisements) come back as
//! [`Problem`]s naming the object and field; whatever is consistent is
//! still decided.
//!
//! The rules follow MetalLB's speaker (`speaker/bgp_controller.go`,
//! `speaker/layer2_controller.go`, `speaker/main.go`); each function says
//! where it differs.

mod bgp;
pub mod interfaces;
pub mod k8s;
mod l2;
pub mod status;
mod view;

use std::collections::BTreeMap;
use std::net::IpAddr;

use api::addr::AddressRange;
use api::meta::LabelSelector;
use api::v1beta1::IPAddressPool;
pub use api::validate::Problem;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use self::bgp::{BgpPlan, PeerPlan, bgp_plan};
pub use self::l2::{Election, Interfaces, L2Announcement, L2Plan, l2_plan};
pub use self::status::{Announcements, ServiceAnnouncement, announcements};
pub use self::view::{
    ClusterView, EXCLUDE_LABEL, Endpoint, Exclusion, Node, ObjectKey, POOL_ANNOTATION, Service,
    TrafficPolicy,
};

/// A service this speaker is responsible for, with the pool its IPs are in.
struct Assigned<'a> {
    svc: &'a Service,
    pool: &'a IPAddressPool,
}

/// The services of the view that this speaker handles and that have IPs
/// from a known pool, as MetalLB's `SetBalancer` selects them.
///
/// Skipped silently: services that are not `LoadBalancer`, of another
/// `loadBalancerClass`, or without IPs (nothing to announce). Skipped with a
/// problem: services whose IPs are not all in one pool.
fn assigned<'a>(view: &'a ClusterView, problems: &mut Vec<Problem>) -> Vec<Assigned<'a>> {
    let pools: Vec<(&IPAddressPool, Vec<AddressRange>)> = view
        .config
        .pools
        .iter()
        .map(|p| {
            let ranges = p
                .spec
                .addresses
                .iter()
                .filter_map(|a| AddressRange::parse(a).ok())
                .collect();
            (p, ranges)
        })
        .collect();
    let mut out = Vec::new();
    for svc in &view.services {
        if !svc.load_balancer
            || svc.load_balancer_class != view.load_balancer_class
            || svc.ingress.is_empty()
        {
            continue;
        }
        // MetalLB's `poolFor`: the pool that holds every IP of the service.
        // Pools may not overlap (validation), so at most one does.
        let pool = pools.iter().find(|(_, ranges)| {
            svc.ingress
                .iter()
                .all(|ip| ranges.iter().any(|r| contains(r, *ip)))
        });
        let Some((pool, _)) = pool else {
            problems.push(service_problem(
                svc,
                "status.loadBalancer.ingress",
                format!(
                    "{} not within a single IPAddressPool: not announced",
                    list(&svc.ingress)
                ),
            ));
            continue;
        };
        // The speaker trusts the addresses, as MetalLB's does; a differing
        // annotation means the controller and this view disagree.
        if let Some(named) = svc.annotations.get(POOL_ANNOTATION)
            && named != meta_name(&pool.metadata)
        {
            problems.push(service_problem(
                svc,
                &format!("metadata.annotations[{POOL_ANNOTATION}]"),
                format!(
                    "names pool {named:?} but the IPs are in pool {:?}; using {:?}",
                    meta_name(&pool.metadata),
                    meta_name(&pool.metadata)
                ),
            ));
        }
        out.push(Assigned { svc, pool });
    }
    out
}

/// Whether an advertisement selects a pool: by name, by label, or every
/// pool when it does neither.
fn selects_pool(names: &[String], selectors: &[LabelSelector], pool: &IPAddressPool) -> bool {
    if names.is_empty() && selectors.is_empty() {
        return true;
    }
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    let labels = pool.metadata.labels.as_ref().unwrap_or(&NONE);
    names.iter().any(|n| n == meta_name(&pool.metadata))
        || selectors.iter().any(|s| s.matches(labels))
}

/// An object's name, empty when unset.
fn meta_name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// Whether labels pass a list of selectors: any of them, or none given.
fn selected(selectors: &[LabelSelector], labels: &BTreeMap<String, String>) -> bool {
    selectors.is_empty() || selectors.iter().any(|s| s.matches(labels))
}

fn contains(range: &AddressRange, ip: IpAddr) -> bool {
    range.is_ipv4() == ip.is_ipv4() && range.first() <= ip && ip <= range.last()
}

fn service_problem(svc: &Service, field: &str, message: impl Into<String>) -> Problem {
    Problem {
        kind: "Service",
        name: svc.key.to_string(),
        field: field.into(),
        message: message.into(),
    }
}

fn list(ips: &[IpAddr]) -> String {
    let texts: Vec<String> = ips.iter().map(ToString::to_string).collect();
    texts.join(", ")
}

#[cfg(test)]
mod fixture;
