//! `kubectl ferrolb status`: every pool's addresses, the Services that wait
//! for one and why, and what each node's speaker does.
//!
//! Pure: built from a [`Snapshot`]. The counts and the reasons are the
//! controller's own answers ([`Snapshot::controller`]); what the nodes do
//! is what the speakers wrote (ServiceL2Status, ServiceBGPStatus,
//! ConfigurationState) and what their Pods show.

use std::collections::{BTreeMap, BTreeSet};

use api::model::ObjectKey;
use controller::convert;
use controller::plan::service_plan;
use controller::state::Outcome;
use k8s_openapi::api::core::v1::Event;
use serde::Serialize;

use crate::Settings;
use crate::cluster::{Snapshot, event_time};
use crate::table::{cell, render};

/// The whole report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// What the programs refuse in the configuration, each naming the
    /// object and field.
    pub problems: Vec<String>,
    /// The controller's ConfigurationState, when it wrote one.
    pub controller: Option<Configuration>,
    /// Every pool in force, by name.
    pub pools: Vec<Pool>,
    /// The LoadBalancer Services without an address, by namespace and name.
    pub pending: Vec<Pending>,
    /// Every node, by name.
    pub nodes: Vec<NodeStatus>,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// One pool's addresses, as the controller counts them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// The IPAddressPool.
    pub name: String,
    /// IPv4 addresses.
    pub ipv4: Usage,
    /// IPv6 addresses.
    pub ipv6: Usage,
    /// Services holding its addresses.
    pub services: u64,
    /// `spec.autoAssign`.
    pub auto_assign: bool,
}

/// Addresses of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Held by a Service (a shared one counts once).
    pub used: u128,
    /// Usable.
    pub total: u128,
}

/// A LoadBalancer Service without an address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// `namespace/name`.
    pub service: String,
    /// The Event reason the controller records for it (MetalLB's).
    pub reason: Option<String>,
    /// Why, in the controller's words.
    pub message: Option<String>,
    /// The latest Event the controller recorded on it.
    pub last_event: Option<EventView>,
}

/// One Event, as a report shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// When it last happened (RFC 3339).
    pub time: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its reason.
    pub reason: String,
    /// The component that recorded it.
    pub from: String,
    /// Its message.
    pub message: String,
    /// How many times it happened.
    pub count: i32,
}

impl EventView {
    /// The view of a core/v1 Event.
    pub fn of(e: &Event) -> Self {
        Self {
            time: event_time(e).map(|t| t.to_string()),
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            from: event_source(e),
            message: e.message.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
        }
    }
}

/// A program's ConfigurationState.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Configuration {
    /// `Valid`, `Invalid` or `Unknown`.
    pub result: String,
    /// The problems, when invalid.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error_summary: String,
}

/// One node's speaker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The Node.
    pub node: String,
    /// Its speaker Pod: `Ready`, `NotReady` or `None`.
    pub speaker: String,
    /// Its speaker's ConfigurationState.
    pub configuration: Option<Configuration>,
    /// The Services it answers for in layer 2 mode, with their IPs
    /// (its ServiceL2Status objects).
    pub l2: Vec<Owned>,
    /// The BGP peers it announces to (its ServiceBGPStatus objects).
    pub bgp_peers: Vec<String>,
}

/// A Service a node answers for, and its IPs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Owned {
    /// `namespace/name`.
    pub service: String,
    /// The IPs of its status.
    pub ips: Vec<String>,
}

/// Builds the report; `namespace` limits the pending Services to one. The
/// pending Services' `last_event` is left empty: see [`Status::attach`].
pub fn build(snap: &Snapshot, settings: &Settings, namespace: Option<&str>) -> Status {
    let (_, problems) = snap.model();
    let (state, outcomes) = snap.controller(settings);
    let pools = state
        .pool_counts()
        .into_iter()
        .map(|c| Pool {
            auto_assign: state
                .pools()
                .iter()
                .find(|p| p.name == c.name)
                .is_none_or(|p| p.auto_assign),
            ipv4: Usage {
                used: c.assigned.v4,
                total: c.capacity.v4,
            },
            ipv6: Usage {
                used: c.assigned.v6,
                total: c.capacity.v6,
            },
            services: c.services,
            name: c.name,
        })
        .collect();
    let mut pending: Vec<Pending> = outcomes
        .into_iter()
        .filter(|(svc, outcome)| {
            !matches!(outcome, Outcome::NotLoadBalancer | Outcome::OtherClass(_))
                && convert::ingress_ips(svc).is_empty()
                && namespace.is_none_or(|ns| convert::key(svc).namespace == ns)
        })
        .map(|(svc, outcome)| {
            let key = convert::key(svc).to_string();
            let plan = service_plan(key.clone(), outcome);
            let message = match plan.status {
                // The controller's state gives it addresses: it has not
                // written them.
                "assigned" => Some(format!(
                    "the controller would assign {} from pool {}: is it running and leading?",
                    plan.ips.join(", "),
                    plan.pool.unwrap_or_default()
                )),
                _ => plan.message,
            };
            Pending {
                service: key,
                reason: plan.reason.map(str::to_owned),
                message,
                last_event: None,
            }
        })
        .collect();
    pending.sort_by(|a, b| a.service.cmp(&b.service));

    let ready = snap.speakers().ready;
    let with_pod = snap.speaker_nodes();
    let l2_by_node = by_node(snap.l2_statuses.iter().filter_map(|s| {
        let st = s.status.as_ref()?;
        Some((
            st.node.clone(),
            (st.service_namespace.clone(), st.service_name.clone()),
        ))
    }));
    let mut peers_by_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for st in snap.bgp_statuses.iter().filter_map(|s| s.status.as_ref()) {
        peers_by_node
            .entry(st.node.clone())
            .or_default()
            .extend(st.peers.iter().cloned());
    }
    let nodes = snap
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .map(|node| NodeStatus {
            speaker: speaker_state(&node, &ready, &with_pod),
            configuration: configuration(snap, &format!("speaker-{node}")),
            l2: l2_by_node
                .get(&node)
                .into_iter()
                .flatten()
                .map(|(ns, name)| Owned {
                    service: ObjectKey::new(ns, name).to_string(),
                    ips: snap
                        .services
                        .iter()
                        .find(|s| {
                            s.metadata.namespace.as_deref() == Some(ns)
                                && s.metadata.name.as_deref() == Some(name)
                        })
                        .map(convert::ingress_ips)
                        .unwrap_or_default(),
                })
                .collect(),
            bgp_peers: peers_by_node
                .get(&node)
                .map(|p| p.iter().cloned().collect())
                .unwrap_or_default(),
            node,
        })
        .collect();
    Status {
        problems: problems.iter().map(ToString::to_string).collect(),
        controller: configuration(snap, controller::reconcile::CONFIGURATION_STATE),
        pools,
        pending,
        nodes,
        notes: snap.notes.clone(),
    }
}

impl Status {
    /// The pending Services, as (namespace, name), for their Events.
    pub fn pending_keys(&self) -> Vec<(String, String)> {
        self.pending
            .iter()
            .filter_map(|p| p.service.split_once('/'))
            .map(|(ns, name)| (ns.to_owned(), name.to_owned()))
            .collect()
    }

    /// Sets the last Event the controller recorded on `service`
    /// (`namespace/name`) from its Events, oldest first.
    pub fn attach(&mut self, service: &str, events: &[Event]) {
        let last = events
            .iter()
            .rev()
            .find(|e| event_source(e) == controller::reconcile::MANAGER);
        if let Some(p) = self.pending.iter_mut().find(|p| p.service == service) {
            p.last_event = last.map(EventView::of);
        }
    }

    /// The report as columns.
    pub fn table(&self) -> String {
        let mut out = String::from(if self.problems.is_empty() {
            "Configuration: valid"
        } else {
            "Configuration: partly refused"
        });
        if let Some(c) = &self.controller {
            out.push_str(&format!(" (controller's ConfigurationState: {})", c.result));
        }
        out.push('\n');
        for p in &self.problems {
            out.push_str(&format!("  {p}\n"));
        }
        out.push_str("\nPools:\n");
        let rows: Vec<Vec<String>> = self
            .pools
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    format!("{}/{}", p.ipv4.used, p.ipv4.total),
                    format!("{}/{}", p.ipv6.used, p.ipv6.total),
                    p.services.to_string(),
                    p.auto_assign.to_string(),
                ]
            })
            .collect();
        out.push_str(&render(
            &[
                "POOL",
                "IPV4 USED/TOTAL",
                "IPV6 USED/TOTAL",
                "SERVICES",
                "AUTO-ASSIGN",
            ],
            &rows,
        ));
        if self.pending.is_empty() {
            out.push_str("\nPending Services: none\n");
        } else {
            out.push_str("\nPending Services:\n");
            let rows: Vec<Vec<String>> = self
                .pending
                .iter()
                .map(|p| {
                    vec![
                        p.service.clone(),
                        p.reason.clone().unwrap_or_else(|| "-".into()),
                        p.message.clone().unwrap_or_else(|| "-".into()),
                        p.last_event.as_ref().map_or_else(
                            || "-".into(),
                            |e| format!("{} {}", e.time.as_deref().unwrap_or("-"), e.reason),
                        ),
                    ]
                })
                .collect();
            out.push_str(&render(
                &["SERVICE", "REASON", "MESSAGE", "LAST CONTROLLER EVENT"],
                &rows,
            ));
        }
        out.push_str("\nNodes:\n");
        let rows: Vec<Vec<String>> = self
            .nodes
            .iter()
            .map(|n| {
                let mut ips: Vec<&String> = n.l2.iter().flat_map(|o| &o.ips).collect();
                ips.sort_by_key(|ip| ip.parse::<std::net::IpAddr>().ok());
                vec![
                    n.node.clone(),
                    n.speaker.clone(),
                    n.configuration
                        .as_ref()
                        .map_or_else(|| "-".into(), |c| c.result.clone()),
                    cell(&ips),
                    cell(&n.bgp_peers),
                ]
            })
            .collect();
        out.push_str(&render(
            &["NODE", "SPEAKER", "CONFIGURATION", "L2 IPS", "BGP PEERS"],
            &rows,
        ));
        for n in self.nodes.iter().filter_map(|n| {
            let c = n.configuration.as_ref()?;
            (!c.error_summary.is_empty()).then_some((n, c))
        }) {
            let (node, c) = n;
            out.push_str(&format!(
                "  {}: {}\n",
                node.node,
                c.error_summary.replace('\n', "; ")
            ));
        }
        for note in &self.notes {
            out.push_str(&format!("\nNote: {note}\n"));
        }
        out
    }
}

/// `Ready`, `NotReady` or `None`: the node's speaker Pod.
pub fn speaker_state(node: &str, ready: &BTreeSet<String>, with_pod: &BTreeSet<String>) -> String {
    if ready.contains(node) {
        "Ready".into()
    } else if with_pod.contains(node) {
        "NotReady".into()
    } else {
        "None".into()
    }
}

/// The ConfigurationState named `name`.
fn configuration(snap: &Snapshot, name: &str) -> Option<Configuration> {
    let state = snap
        .states
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))?;
    let status = state.status.clone().unwrap_or_default();
    Some(Configuration {
        result: status
            .result
            .map_or_else(|| "Unknown".into(), |r| format!("{r:?}")),
        error_summary: status.error_summary,
    })
}

/// Who recorded an Event: its reporting component, else its source.
pub fn event_source(e: &Event) -> String {
    e.reporting_component
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
        .unwrap_or_default()
}

fn by_node<T: Ord>(items: impl Iterator<Item = (String, T)>) -> BTreeMap<String, BTreeSet<T>> {
    let mut out: BTreeMap<String, BTreeSet<T>> = BTreeMap::new();
    for (node, item) in items {
        out.entry(node).or_default().insert(item);
    }
    out
}

#[cfg(test)]
mod tests {
    use api::v1beta1::{IPAddressPool, IPAddressPoolSpec};

    use super::*;

    /// A /64 counts 2^64 addresses, in the table and in JSON, without a
    /// cluster: the report is a function of the snapshot.
    #[test]
    fn huge_pools_count_without_enumerating() {
        let mut pool = IPAddressPool::new(
            "v6",
            IPAddressPoolSpec {
                addresses: vec!["2001:db8::/64".into(), "10.0.0.0/24".into()],
                ..IPAddressPoolSpec::default()
            },
        );
        pool.metadata.namespace = Some("metallb-system".into());
        let mut snap = Snapshot::default();
        snap.config.pools = vec![pool];
        let status = build(&snap, &Settings::default(), None);
        assert_eq!(
            status.pools[0].ipv6,
            Usage {
                used: 0,
                total: 1 << 64
            }
        );
        assert!(
            status
                .table()
                .contains("0/256             0/18446744073709551616")
        );
        let json = serde_json::to_string(&status).unwrap();
        assert!(
            json.contains(r#""ipv6":{"used":0,"total":18446744073709551616}"#),
            "{json}"
        );
        assert!(status.pending.is_empty() && status.nodes.is_empty());
    }
}
