//! Announcement decisions: from the node-local view of the cluster, what
//! this node announces over BGP ([`bgp_plan`]) and layer 2 ([`l2_plan`]).
//!
//! Pure functions: no I/O, no clock, no randomness, no logging. The input is
//! a [`ClusterView`], plain data that [`k8s`] builds from Kubernetes objects
//! and the file source from YAML, so both sources share these decisions;
//! the configuration in it is the parsed [`api::model::Model`], whose
//! `pool_for` and `Scope::selects` are the controller's answers too.
//! Each plan is the whole desired state, not a diff: the drivers compare it
//! with what they run. Inconsistencies (an unknown pool, alias, secret or
//! profile, a bad peer, conflicting advertisements) come back as
//! [`Problem`]s naming the object and field; whatever is consistent is
//! still decided.
//!
//! The rules follow MetalLB's speaker (`speaker/bgp_controller.go`,
//! `speaker/layer2_controller.go`, `speaker/main.go`); each function says
//! where it differs.

pub mod bfd_gate;
mod bgp;
pub mod coexist;
pub mod explain;
pub mod interfaces;
pub mod k8s;
mod keyed;
mod l2;
pub(crate) mod sorted;
pub mod status;
pub mod stored;
mod view;

use std::net::IpAddr;

use api::model::Pool;
pub use api::validate::Problem;
/// The watched kinds as the speaker reads them; they live in `api`, where
/// the fuzz target `watched_objects` reads them without the speaker.
pub use api::watched;

pub use self::bgp::{BgpPlan, PeerPlan, Transport, bgp_plan};
use self::explain::Skipped;
pub use self::keyed::{Changes, Keyed, RouteChange, Via};
pub use self::l2::{Election, Interfaces, L2Announcement, L2Plan, l2_plan};
pub use self::status::{Announcements, ServiceAnnouncement, announcements};
pub use self::view::{
    ApiSpeakers, ClusterView, EXCLUDE_LABEL, Endpoint, Endpoints, Exclusion, Labels,
    MetallbSpeakers, Node, ObjectKey, POOL_ANNOTATION, Service, TrafficPolicy,
};

/// A service this speaker is responsible for, with the pool its IPs are in.
struct Assigned<'a> {
    svc: &'a Service,
    pool: &'a Pool,
}

/// The services of the view that this speaker handles and that have IPs
/// from a known pool, as MetalLB's `SetBalancer` selects them.
///
/// Skipped silently: services that are not `LoadBalancer`, of another
/// `loadBalancerClass`, or without IPs (nothing to announce). Skipped with a
/// problem: services whose IPs are not all in one pool.
fn assigned<'a>(view: &'a ClusterView, problems: &mut Vec<Problem>) -> Vec<Assigned<'a>> {
    view.services
        .iter()
        .filter_map(|svc| {
            Some(Assigned {
                svc,
                pool: pool_of(view, svc, problems)?,
            })
        })
        .collect()
}

/// The pool of one service's IPs if this speaker handles it (see
/// [`assigned`]); `None` for a service it skips.
fn pool_of<'a>(
    view: &'a ClusterView,
    svc: &Service,
    problems: &mut Vec<Problem>,
) -> Option<&'a Pool> {
    handled(view, svc, problems).ok()
}

/// [`pool_of`], with the reason when the speaker skips the service.
fn handled<'a>(
    view: &'a ClusterView,
    svc: &Service,
    problems: &mut Vec<Problem>,
) -> Result<&'a Pool, Skipped> {
    if !svc.load_balancer {
        return Err(Skipped::NotLoadBalancer);
    }
    if svc.load_balancer_class.as_deref() != view.load_balancer_class.as_deref() {
        return Err(Skipped::OtherClass(
            svc.load_balancer_class.as_deref().map(Into::into),
        ));
    }
    if svc.ingress.is_empty() {
        return Err(Skipped::NoIngress);
    }
    // MetalLB's `poolFor`, the controller's answer too.
    let Some(pool) = view.model.pool_for(&svc.ingress) else {
        problems.push(service_problem(
            svc,
            "status.loadBalancer.ingress",
            format!(
                "{} not within a single IPAddressPool: not announced",
                list(&svc.ingress)
            ),
        ));
        return Err(Skipped::NoPool);
    };
    // The speaker trusts the addresses, as MetalLB's does; a differing
    // annotation means the controller and this view disagree.
    if let Some(named) = svc.annotations.get(POOL_ANNOTATION)
        && named != pool.name
    {
        problems.push(service_problem(
            svc,
            &format!("metadata.annotations[{POOL_ANNOTATION}]"),
            format!(
                "names pool {named:?} but the IPs are in pool {:?}; using {:?}",
                pool.name, pool.name
            ),
        ));
    }
    Ok(pool)
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
