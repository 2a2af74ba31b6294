//! Prometheus metrics with MetalLB's names where the concept exists, and
//! `/healthz` and `/readyz`, served by the shared server
//! ([`shell::http`]: timeouts, connection caps, accept backoff).
//!
//! [`Snapshot::render`] is pure (values in, exposition text out); the
//! reconcile loop refreshes the [`Snapshot`] behind [`Shared`], and
//! [`serve`] only moves bytes.
//!
//! `metallb_speaker_announced` has a line per announced IP (51,746 lines,
//! 5.5 MB, at 50,000 Services). Its lines are read from what the keyed
//! plans hold anyway ([`Announced`]: their announcements' map and the
//! last view's services, shared), not from a set of their own (56 bytes
//! an IP), and written as the response is sent, a chunk at a time
//! ([`Snapshot::exposition`], [`shell::http::Text`]), not into one
//! `String` under the lock.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::ops::Bound;
use std::sync::{Arc, Mutex, PoisonError};

use shell::health::{Health, State};
use shell::http::{Chunks, Config, Handle, Routes, Server, Text};
use shell::metrics::escape;

use crate::announce::{Announcements, ObjectKey, Service, ServiceAnnouncement, Via};

/// The values the metrics report, refreshed by the reconcile loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// This node's name (the `node` label).
    pub node: String,
    /// Per BGP peer address.
    pub peers: BTreeMap<String, PeerMetrics>,
    /// What this node announces, per (protocol, service, IP): the keyed
    /// plans' own tables, shared.
    pub announced: Announced,
    /// MetalLB's `metallb_layer2_requests_received`,
    /// `metallb_layer2_responses_sent` and `metallb_layer2_gratuitous_sent`,
    /// per address this node ever announced (label `ip`).
    pub l2: BTreeMap<IpAddr, l2::IpCounters>,
    /// Times this node started answering for each address in layer 2 (it
    /// won the address's election), per address it ever answered for:
    /// summed over the nodes, the owner changes (an alert on flapping).
    pub l2_starts: BTreeMap<IpAddr, u64>,
    /// Configuration errors seen: rejected reloads' errors and new problems
    /// found while planning.
    pub config_errors: u64,
    /// BGP peers the driver could not configure (their MD5 key refused
    /// by the listening sockets), counted at every attempt.
    pub peer_config_errors: u64,
    /// Whether the last reload was accepted.
    pub last_reload_success: bool,
    /// Whether a configuration has been applied (`/readyz`).
    pub ready: bool,
    /// A configuration was accepted at least once
    /// (`metallb_k8s_client_config_loaded_bool`).
    pub config_loaded: bool,
    /// The last configuration was refused and the last good one (or none)
    /// is in force (`metallb_k8s_client_config_stale_bool`).
    pub config_stale: bool,
    /// Configuration updates processed: each reload, accepted or not
    /// (`metallb_k8s_client_updates_total`).
    pub updates: u64,
    /// Configuration updates refused (`metallb_k8s_client_update_errors_total`).
    pub update_errors: u64,
    /// memberlist, when it runs.
    pub memberlist: Option<MemberlistMetrics>,
    /// See [`crate::announce::L2Plan::api_candidates`].
    pub l2_api_candidates: u64,
    /// See [`crate::announce::L2Plan::yielded`].
    pub l2_yielded: u64,
    /// While coexisting with MetalLB (`--metallb-speaker-labels`): the
    /// layer 2 services this node wins but leaves to MetalLB's speakers
    /// ([`crate::announce::L2Plan::deferred`]); `None` otherwise.
    pub l2_metallb_deferred: Option<u64>,
    /// Per BFD peer address: MetalLB's FRR-mode `metallb_bfd_*`.
    pub bfd_sessions: BTreeMap<String, BfdSessionMetrics>,
    /// BFD Control packets dropped, by reason (see [`BFD_DROP_REASONS`]).
    pub bfd_dropped: BTreeMap<&'static str, u64>,
    /// Layer 2 frames not answered, by reason: the ARP and NDP
    /// responders' reasons (summed where both have one), `rate_limited`
    /// (a sender over its budget), `oversize`, `kernel` (the socket queue
    /// was full) and `send_failed` (replies the kernel refused). Empty:
    /// layer 2 does not run.
    pub l2_dropped: BTreeMap<&'static str, u64>,
}

/// What this node announces, as `metallb_speaker_announced` reports it:
/// a line per (protocol, service, IP), for each service in
/// `announcements` by each of its protocols (BGP when it has peers,
/// layer 2 when it has interfaces), for each IP of its record in
/// `services`. Both are the reconcile loop's, shared: the keyed plans'
/// map (which the status writer's report shares too) and the services of
/// the view it last decided (whose records the keyed plans hold), so the
/// metrics copy nothing per service or IP. A scrape clones the two `Arc`s
/// under the lock and renders from them after it; the reconcile loop
/// swaps in new ones after each update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announced {
    /// Per service, what this node announces.
    pub announcements: Arc<Announcements>,
    /// The services the announcements were decided from (their IPs), in
    /// the view's order: by key, as the caches list them.
    pub services: Arc<Vec<Arc<Service>>>,
}

impl Announced {
    /// The state that reports these (protocol, service, IP) triples, as
    /// the keyed plans would hold it (tests, the docs' sample): each
    /// service announced by its protocols, with its IPs.
    pub fn of(triples: impl IntoIterator<Item = (Via, ObjectKey, IpAddr)>) -> Self {
        let mut by_key: BTreeMap<ObjectKey, (ServiceAnnouncement, Vec<String>)> = BTreeMap::new();
        for (via, key, ip) in triples {
            let (a, ips) = by_key.entry(key).or_default();
            match via {
                Via::Bgp => a.bgp = Arc::from([Arc::from("peer")]),
                Via::Layer2 => a.l2 = Some(Vec::new()),
            }
            if !ips.contains(&ip.to_string()) {
                ips.push(ip.to_string());
            }
        }
        let services = by_key
            .iter()
            .map(|(key, (_, ips))| {
                let ips: Vec<Option<&str>> = ips.iter().map(|ip| Some(ip.as_str())).collect();
                let record = crate::announce::stored::Service {
                    key: key.clone(),
                    load_balancer: true,
                    ..Default::default()
                }
                .with_ingress(&ips);
                Arc::new(Service {
                    record: Arc::new(record),
                    endpoints: crate::announce::Endpoints::default(),
                })
            })
            .collect();
        Self {
            announcements: Arc::new(by_key.into_iter().map(|(k, (a, _))| (k, a)).collect()),
            services: Arc::new(services),
        }
    }

    /// The (protocol, service, IP) triples of its lines, in their order.
    #[cfg(test)]
    pub(crate) fn triples(&self) -> Vec<(Via, ObjectKey, IpAddr)> {
        let mut lines = AnnouncedLines::new(self.clone(), "");
        let mut out = Vec::new();
        for via in VIAS {
            for (key, a) in self.announcements.iter() {
                if announces(a, via) {
                    let mut ips = Vec::new();
                    lines.ips_into(key, &mut ips);
                    out.extend(ips.into_iter().map(|ip| (via, key.clone(), ip)));
                }
            }
        }
        out
    }
}

/// The protocols in the order of the lines (a set of (protocol, service,
/// IP) was before: BGP's lines first).
const VIAS: [Via; 2] = [Via::Bgp, Via::Layer2];

/// Whether announcement `a` is by `via`.
fn announces(a: &ServiceAnnouncement, via: Via) -> bool {
    match via {
        Via::Bgp => !a.bgp.is_empty(),
        Via::Layer2 => a.l2.is_some(),
    }
}

/// The lines of `metallb_speaker_announced`, written a chunk at a time
/// from an [`Announced`] (a scrape's: immutable while it is sent).
struct AnnouncedLines {
    announced: Announced,
    /// The `node` label, escaped.
    node: String,
    /// Where the next line comes from: its protocol's place in [`VIAS`],
    /// and the service to go on from (`None`: the first).
    via: usize,
    next: Option<ObjectKey>,
    /// Where each service of `announced.services` is in key order, when
    /// that list is not in strict key order (duplicate keys: the later
    /// one, as the keyed plans keep); built at the first line.
    order: Option<Option<Vec<u32>>>,
    /// The IPs of the service being written (reused).
    ips: Vec<IpAddr>,
}

impl AnnouncedLines {
    fn new(announced: Announced, node: &str) -> Self {
        Self {
            announced,
            node: escape(node),
            via: 0,
            next: None,
            order: None,
            ips: Vec::new(),
        }
    }

    /// The IPs of the service of `key`, sorted, each once, into `out`
    /// (cleared first).
    fn ips_into(&mut self, key: &ObjectKey, out: &mut Vec<IpAddr>) {
        let services = &self.announced.services;
        let order = self.order.get_or_insert_with(|| {
            if services.windows(2).all(|w| w[0].key < w[1].key) {
                return None;
            }
            let mut at: Vec<u32> = (0..services.len())
                .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
                .collect();
            // Stable: of one key, the later last; keep it.
            at.sort_by(|a, b| services[*a as usize].key.cmp(&services[*b as usize].key));
            let mut kept: Vec<u32> = Vec::with_capacity(at.len());
            for i in at {
                match kept.last_mut() {
                    Some(last) if services[*last as usize].key == services[i as usize].key => {
                        *last = i;
                    }
                    _ => kept.push(i),
                }
            }
            Some(kept)
        });
        let found = match order {
            None => services
                .binary_search_by(|s| s.key.cmp(key))
                .ok()
                .map(|i| &services[i]),
            Some(at) => at
                .binary_search_by(|i| services[*i as usize].key.cmp(key))
                .ok()
                .map(|i| &services[at[i] as usize]),
        };
        out.clear();
        out.extend(found.iter().flat_map(|s| s.ingress.iter()));
        out.sort_unstable();
        out.dedup();
    }
}

impl Chunks for AnnouncedLines {
    fn fill(&mut self, out: &mut String, min: usize) -> bool {
        let start = out.len();
        let map = Arc::clone(&self.announced.announcements);
        while let Some(&via) = VIAS.get(self.via) {
            let from = match &self.next {
                Some(key) => Bound::Included(key),
                None => Bound::Unbounded,
            };
            for (key, a) in map.range::<ObjectKey, _>((from, Bound::Unbounded)) {
                if out.len() - start >= min {
                    self.next = Some(key.clone());
                    return true;
                }
                if !announces(a, via) {
                    continue;
                }
                let mut ips = std::mem::take(&mut self.ips);
                self.ips_into(key, &mut ips);
                for ip in &ips {
                    let _ = writeln!(
                        out,
                        "metallb_speaker_announced{{ip=\"{ip}\",node=\"{}\",protocol=\"{}\",service=\"{}\"}} 1",
                        self.node,
                        via.as_str(),
                        escape(&key.to_string())
                    );
                }
                self.ips = ips;
            }
            self.via += 1;
            self.next = None;
        }
        false
    }

    fn rewind(&mut self) {
        self.via = 0;
        self.next = None;
    }
}

/// One BFD session's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BfdSessionMetrics {
    /// The session is Up.
    pub up: bool,
    /// Control packets received.
    pub control_packet_input: u64,
    /// Control packets sent.
    pub control_packet_output: u64,
    /// Our echo packets that came back (FRR's `echo-packet-input`).
    pub echo_packet_input: u64,
    /// Echo packets sent (FRR's `echo-packet-output`).
    pub echo_packet_output: u64,
    /// Times the session went Up.
    pub session_up_events: u64,
    /// Times the session left Up.
    pub session_down_events: u64,
}

/// The `reason` labels of `metallb_bfd_control_packet_dropped`: received
/// packets that failed the RFC 5880 §6.8.6 checks, carried authentication
/// (not implemented), had a wrong TTL (GTSM, RFC 5881 §5 / RFC 5883 §2) or
/// matched no session; packets to send that the socket refused; and
/// datagrams the kernel dropped before we saw them (`kernel`: not from a
/// configured peer, TTL below the minimum, or a full receive queue; as
/// last reported by the kernel, so it lags a flood).
pub const BFD_DROP_REASONS: [&str; 6] = [
    "malformed",
    "authenticated",
    "bad_ttl",
    "unknown_session",
    "send_failed",
    "kernel",
];

/// memberlist's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberlistMetrics {
    /// Members alive or suspect, this one included.
    pub members: u64,
    /// Messages under a known key id that failed to authenticate.
    pub auth_failures: u64,
    /// Messages under a key id no key of ours has (a key mismatch).
    pub unknown_key: u64,
    /// Plaintext messages to an encrypted member, or the reverse.
    pub mode_mismatch: u64,
    /// Datagrams received, whatever became of them (the rejected ones
    /// included).
    pub packets_received: u64,
    /// Seeds but no live member (`ferrolb_memberlist_isolated`).
    pub isolated: bool,
}

/// One BGP session's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerMetrics {
    /// The session is Established.
    pub up: bool,
    /// UPDATE messages sent.
    pub updates: u64,
    /// Prefixes the peer has from us.
    pub announced_prefixes: u64,
    /// Prefixes the peer should have from us: what the plan gives it,
    /// sent or not yet.
    pub pending_prefixes: u64,
    /// UPDATE messages received.
    pub updates_received: u64,
    /// OPEN messages sent.
    pub opens_sent: u64,
    /// OPEN messages received.
    pub opens_received: u64,
    /// NOTIFICATION messages sent.
    pub notifications_sent: u64,
    /// KEEPALIVE messages sent.
    pub keepalives_sent: u64,
    /// KEEPALIVE messages received.
    pub keepalives_received: u64,
    /// ROUTE-REFRESH messages sent (the speaker never asks for one).
    pub route_refresh_sent: u64,
    /// Messages sent, any type.
    pub total_sent: u64,
    /// Messages received, any type.
    pub total_received: u64,
}

/// The snapshot the server reads and the reconcile loop writes.
pub type Shared = Arc<Mutex<Snapshot>>;

impl Snapshot {
    /// The exposition text, in one `String` (tests, the docs' sample);
    /// the server sends [`Snapshot::exposition`] instead.
    pub fn render(&self) -> String {
        self.exposition().into_string()
    }

    /// The exposition: the text before and after
    /// `metallb_speaker_announced`'s lines, and those lines as
    /// [`Chunks`], written from this snapshot's [`Announced`] (its `Arc`s
    /// cloned) as they are sent.
    pub fn exposition(&self) -> Text {
        let mut text = Text::default();
        let mut out = String::new();
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        // The first three as MetalLB's native mode; the rest as its FRR mode
        // (the same names, the same meaning).
        let per_peer: [Family<PeerMetrics>; 13] = [
            (
                "metallb_bgp_session_up",
                "gauge",
                "BGP session state (1 is up, 0 is down)",
                |p| u64::from(p.up),
            ),
            (
                "metallb_bgp_updates_total",
                "counter",
                "Number of BGP UPDATE messages sent",
                |p| p.updates,
            ),
            (
                "metallb_bgp_announced_prefixes_total",
                "gauge",
                "Number of prefixes currently being advertised on the BGP session",
                |p| p.announced_prefixes,
            ),
            (
                "metallb_bgp_pending_prefixes_total",
                "gauge",
                "Number of prefixes that should be advertised on the BGP session",
                |p| p.pending_prefixes,
            ),
            (
                "metallb_bgp_updates_total_received",
                "counter",
                "Number of BGP UPDATE messages received",
                |p| p.updates_received,
            ),
            (
                "metallb_bgp_opens_sent",
                "counter",
                "Number of BGP open messages sent",
                |p| p.opens_sent,
            ),
            (
                "metallb_bgp_opens_received",
                "counter",
                "Number of BGP open messages received",
                |p| p.opens_received,
            ),
            (
                "metallb_bgp_notifications_sent",
                "counter",
                "Number of BGP notification messages sent",
                |p| p.notifications_sent,
            ),
            (
                "metallb_bgp_keepalives_sent",
                "counter",
                "Number of BGP keepalive messages sent",
                |p| p.keepalives_sent,
            ),
            (
                "metallb_bgp_keepalives_received",
                "counter",
                "Number of BGP keepalive messages received",
                |p| p.keepalives_received,
            ),
            (
                "metallb_bgp_route_refresh_sent",
                "counter",
                "Number of BGP route refresh messages sent",
                |p| p.route_refresh_sent,
            ),
            (
                "metallb_bgp_total_sent",
                "counter",
                "Number of total BGP messages sent",
                |p| p.total_sent,
            ),
            (
                "metallb_bgp_total_received",
                "counter",
                "Number of total BGP messages received",
                |p| p.total_received,
            ),
        ];
        for (name, kind, help, value) in per_peer {
            head(&mut out, name, kind, help);
            for (peer, m) in &self.peers {
                let _ = writeln!(out, "{name}{{peer=\"{}\"}} {}", escape(peer), value(m));
            }
        }
        head(
            &mut out,
            "metallb_speaker_announced",
            "gauge",
            "Services being announced from this node",
        );
        text.push_str(std::mem::take(&mut out));
        text.push_chunks(AnnouncedLines::new(self.announced.clone(), &self.node));
        // MetalLB's names, help and `ip` label.
        let per_ip: [Family<l2::IpCounters>; 3] = [
            (
                "metallb_layer2_requests_received",
                "counter",
                "Number of layer2 requests received for owned IPs",
                |c| c.requests_received,
            ),
            (
                "metallb_layer2_responses_sent",
                "counter",
                "Number of layer2 responses sent for owned IPs in response to requests",
                |c| c.responses_sent,
            ),
            (
                "metallb_layer2_gratuitous_sent",
                "counter",
                "Number of gratuitous layer2 packets sent for owned IPs as a result of failovers",
                |c| c.gratuitous_sent,
            ),
        ];
        for (name, kind, help, value) in per_ip {
            head(&mut out, name, kind, help);
            for (ip, c) in &self.l2 {
                let _ = writeln!(out, "{name}{{ip=\"{ip}\"}} {}", value(c));
            }
        }
        if !self.l2_dropped.is_empty() {
            let name = "ferrolb_layer2_dropped_total";
            head(
                &mut out,
                name,
                "counter",
                "Layer 2 requests not answered and replies not sent, by reason",
            );
            for (reason, n) in &self.l2_dropped {
                let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {n}");
            }
        }
        head(
            &mut out,
            "ferrolb_layer2_owner_starts_total",
            "counter",
            "Times this node started answering for the address in layer 2 (won its election)",
        );
        for (ip, n) in &self.l2_starts {
            let _ = writeln!(out, "ferrolb_layer2_owner_starts_total{{ip=\"{ip}\"}} {n}");
        }
        let mut scalars = vec![
            (
                "metallb_k8s_client_config_loaded_bool",
                "gauge",
                "1 if the configuration was successfully loaded at least once",
                u64::from(self.config_loaded),
            ),
            (
                "metallb_k8s_client_config_stale_bool",
                "gauge",
                "1 if running on a stale configuration, because the latest config failed to load",
                u64::from(self.config_stale),
            ),
            (
                "metallb_k8s_client_updates_total",
                "counter",
                "Number of configuration updates that have been processed",
                self.updates,
            ),
            (
                "metallb_k8s_client_update_errors_total",
                "counter",
                "Number of configuration updates that failed to load",
                self.update_errors,
            ),
            (
                "ferrolb_config_errors_total",
                "counter",
                "Configuration errors found (rejected reloads and planning problems)",
                self.config_errors,
            ),
            (
                "ferrolb_bgp_peer_config_errors_total",
                "counter",
                "Attempts to configure a BGP peer that failed (retried every 5 s)",
                self.peer_config_errors,
            ),
            (
                "ferrolb_config_last_reload_success",
                "gauge",
                "1 if the last configuration reload was accepted",
                u64::from(self.last_reload_success),
            ),
        ];
        if let Some(n) = self.l2_metallb_deferred {
            scalars.push((
                "ferrolb_l2_metallb_deferred_services",
                "gauge",
                "While coexisting with MetalLB: layer 2 services this node wins but leaves to MetalLB's speakers, one of which can answer for them",
                n,
            ));
        }
        if let Some(m) = self.memberlist {
            scalars.push((
                "ferrolb_memberlist_members",
                "gauge",
                "memberlist members alive or suspect, this one included",
                m.members,
            ));
            scalars.push((
                "ferrolb_memberlist_packets_received_total",
                "counter",
                "memberlist datagrams received, rejected ones included",
                m.packets_received,
            ));
            scalars.push((
                "ferrolb_memberlist_isolated",
                "gauge",
                "1 while memberlist has seeds but reaches no member (this node cannot tell the others dead from unheard)",
                u64::from(m.isolated),
            ));
            scalars.push((
                "ferrolb_l2_isolated_api_candidates",
                "gauge",
                "While isolated: speakers the Kubernetes API shows Ready that layer 2 elections count although memberlist cannot reach them",
                self.l2_api_candidates,
            ));
            scalars.push((
                "ferrolb_l2_isolated_yielded_services",
                "gauge",
                "While isolated: layer 2 services this node wins but leaves to the Ready speaker the API shows answering for them",
                self.l2_yielded,
            ));
        }
        for (name, kind, help, value) in scalars {
            head(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
        if let Some(m) = self.memberlist {
            let name = "ferrolb_memberlist_rejected_total";
            head(
                &mut out,
                name,
                "counter",
                "memberlist messages dropped for their keys, by reason",
            );
            for (reason, value) in [
                ("authentication", m.auth_failures),
                ("unknown_key", m.unknown_key),
                ("mode_mismatch", m.mode_mismatch),
            ] {
                let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {value}");
            }
        }
        self.render_bfd(&mut out);
        text.push_str(out);
        text
    }

    /// The BFD part, with the names MetalLB's FRR mode exports (peer label:
    /// the peer's address), when any BFD session exists.
    fn render_bfd(&self, out: &mut String) {
        if self.bfd_sessions.is_empty() && self.bfd_dropped.values().all(|n| *n == 0) {
            return;
        }
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        let per_peer: [Family<BfdSessionMetrics>; 7] = [
            (
                "metallb_bfd_session_up",
                "gauge",
                "BFD session state (1 is up, 0 is down)",
                |s| u64::from(s.up),
            ),
            (
                "metallb_bfd_control_packet_input",
                "counter",
                "Number of received BFD control packets",
                |s| s.control_packet_input,
            ),
            (
                "metallb_bfd_control_packet_output",
                "counter",
                "Number of sent BFD control packets",
                |s| s.control_packet_output,
            ),
            // As FRR counts them: our own echoes, sent and come back (the
            // peer's echoes that the node forwards are not seen by BFD).
            (
                "metallb_bfd_echo_packet_input",
                "counter",
                "Number of received BFD echo packets",
                |s| s.echo_packet_input,
            ),
            (
                "metallb_bfd_echo_packet_output",
                "counter",
                "Number of sent BFD echo packets",
                |s| s.echo_packet_output,
            ),
            (
                "metallb_bfd_session_down_events",
                "counter",
                "Number of BFD session down events",
                |s| s.session_down_events,
            ),
            (
                "metallb_bfd_session_up_events",
                "counter",
                "Number of BFD session up events",
                |s| s.session_up_events,
            ),
        ];
        for (name, kind, help, value) in per_peer {
            head(out, name, kind, help);
            for (peer, s) in &self.bfd_sessions {
                let _ = writeln!(out, "{name}{{peer=\"{}\"}} {}", escape(peer), value(s));
            }
        }
        let name = "metallb_bfd_control_packet_dropped";
        head(
            out,
            name,
            "counter",
            "Number of BFD control packets dropped, by reason",
        );
        for reason in BFD_DROP_REASONS {
            let n = self.bfd_dropped.get(reason).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {n}");
        }
    }
}

/// Binds `addr` and serves, in background tasks, `/metrics` (the
/// snapshot's text), and `/healthz` and `/readyz` from `health`, to which
/// it adds the component `configuration`: ready once a configuration has
/// been applied ([`Snapshot::ready`]).
pub async fn serve(addr: SocketAddr, shared: Shared, health: Health) -> std::io::Result<Handle> {
    Server::bind(addr, Config::default())
        .await?
        .spawn(routes(shared, health))
}

/// What the metrics server answers, for another listener too (MetalLB's
/// health-probe port): the metrics, and `health` with the check
/// `configuration` registered (ready once a configuration is applied).
pub fn routes(shared: Shared, health: Health) -> Routes {
    let ready = Arc::clone(&shared);
    health.check("configuration", move || {
        if lock(&ready).ready {
            State::Ready
        } else {
            State::Starting("no configuration applied yet".into())
        }
    });
    Routes::streamed(health, move || {
        // The process's own figures first, so that they do not count the
        // text around the announced lines (built here), then printed
        // after the rest as before.
        let own = [
            render_heap(crate::net::heap::live_bytes()),
            render_trims(crate::net::heap::trims()),
            crate::publish::render_writes(),
            crate::source::k8s::render_relists(),
            shell::procfs::render(),
            shell::http::review::render(),
        ];
        // Under the lock, the text around the announced lines and the
        // `Arc`s those are written from: the lines are written as they
        // are sent, a chunk at a time, the lock released.
        let mut text = lock(&shared).exposition();
        for part in own {
            text.push_str(part);
        }
        text
    })
}

/// `ferrolb_heap_live_bytes`: the allocator's bytes in use (see
/// `net::heap`), read at scrape time; nothing where it cannot be read
/// (an allocator other than glibc's).
pub fn render_heap(live: Option<u64>) -> String {
    let Some(bytes) = live else {
        return String::new();
    };
    format!(
        "# HELP ferrolb_heap_live_bytes Bytes the memory allocator has handed out and not had back (glibc mallinfo2: uordblks + hblkhd), read at scrape time\n\
         # TYPE ferrolb_heap_live_bytes gauge\n\
         ferrolb_heap_live_bytes {bytes}\n"
    )
}

/// What the heap trims did so far (`net::heap::trim`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapTrims {
    /// Trims asked for.
    pub count: u64,
    /// Of those, the ones that gave memory back.
    pub released: u64,
    /// Time spent in them, in microseconds (the reconcile loop's thread
    /// waits for it).
    pub micros: u64,
}

/// `ferrolb_heap_trims_total`, `ferrolb_heap_trims_released_total` and
/// `ferrolb_heap_trim_seconds_total` (see `net::heap::trim`); nothing
/// where the allocator is not glibc's.
pub fn render_trims(trims: Option<HeapTrims>) -> String {
    let Some(t) = trims else {
        return String::new();
    };
    let micros = t.micros;
    format!(
        "# HELP ferrolb_heap_trims_total Times the memory allocator was asked to give its free pages back to the kernel (glibc malloc_trim, --heap-trim-ms after a change, or when free pages built up)\n\
         # TYPE ferrolb_heap_trims_total counter\n\
         ferrolb_heap_trims_total {}\n\
         # HELP ferrolb_heap_trims_released_total Trims that gave memory back\n\
         # TYPE ferrolb_heap_trims_released_total counter\n\
         ferrolb_heap_trims_released_total {}\n\
         # HELP ferrolb_heap_trim_seconds_total Time spent in trims, during which the reconcile loop waits\n\
         # TYPE ferrolb_heap_trim_seconds_total counter\n\
         ferrolb_heap_trim_seconds_total {}.{:06}\n",
        t.count,
        t.released,
        micros / 1_000_000,
        micros % 1_000_000
    )
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Snapshot> {
    // The reconcile loop replaces whole fields: a panic while it holds the
    // lock leaves a snapshot that is still worth reporting.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A metric family: name, type, help, and how to read a value.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> u64);

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use shell::http::CHUNK;

    use super::*;

    /// (protocol, service, IP) triples of `services` services in
    /// `namespaces` namespaces (one of which needs escaping), one to three
    /// IPs each (IPv4 and IPv6, some shared between services), by BGP,
    /// layer 2 or both.
    fn triples(services: u32, namespaces: u32) -> BTreeSet<(Via, ObjectKey, IpAddr)> {
        let mut out = BTreeSet::new();
        for i in 0..services {
            let ns = match i % namespaces {
                0 => "we\"ird\\ns".to_owned(),
                n => format!("ns-{n:02}"),
            };
            let key = ObjectKey::new(ns, format!("svc-{i:05}"));
            let v4: IpAddr = std::net::Ipv4Addr::from(0xC633_6400 + (i % 9_000)).into();
            let v6: IpAddr = format!("2001:db8::{:x}", i % 7_000).parse().unwrap();
            let ips: &[IpAddr] = match i % 3 {
                0 => &[v4],
                1 => &[v6, v4],
                _ => &[v4, v6, v4],
            };
            let vias: &[Via] = match i % 4 {
                0 | 1 => &[Via::Bgp],
                2 => &[Via::Layer2],
                _ => &[Via::Bgp, Via::Layer2],
            };
            for via in vias {
                for ip in ips {
                    out.insert((*via, key.clone(), *ip));
                }
            }
        }
        out
    }

    /// `metallb_speaker_announced`'s lines as a set of (protocol,
    /// service, IP) gave them before: the set's order, a line each.
    fn announced_as_a_set_did(node: &str, set: &BTreeSet<(Via, ObjectKey, IpAddr)>) -> String {
        let mut out = String::new();
        for (protocol, service, ip) in set {
            let _ = writeln!(
                out,
                "metallb_speaker_announced{{ip=\"{ip}\",node=\"{}\",protocol=\"{}\",service=\"{}\"}} 1",
                escape(node),
                protocol.as_str(),
                escape(&service.to_string())
            );
        }
        out
    }

    #[tokio::test]
    async fn announced_lines_are_a_sets_lines_streamed_or_whole() {
        let set = triples(3_000, 7);
        let snap = Snapshot {
            node: "node\"1".into(),
            announced: Announced::of(set.clone()),
            ..Snapshot::default()
        };
        assert_eq!(
            snap.announced.triples(),
            set.iter().cloned().collect::<Vec<_>>()
        );
        let whole = snap.render();
        let lines = announced_as_a_set_did("node\"1", &set);
        assert!(
            lines.len() > 4 * CHUNK,
            "{} bytes: a few chunks",
            lines.len()
        );
        let head = "# TYPE metallb_speaker_announced gauge\n";
        let next = "# HELP metallb_layer2_requests_received ";
        assert!(
            whole.contains(&format!("{head}{lines}{next}")),
            "the lines differ from a set's"
        );
        // As the server sends it: measured, then piece by piece.
        let mut text = snap.exposition();
        assert_eq!(text.measure().await, whole.len() as u64);
        assert_eq!(text.into_string(), whole);
        // No announcement, no line.
        assert!(
            Snapshot::default()
                .render()
                .contains(&format!("{head}# HELP metallb_layer2_requests_received "))
        );
    }

    #[tokio::test]
    async fn a_scrape_lets_other_tasks_run_between_chunks() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let shared = Shared::default();
        shared.lock().unwrap().announced = Announced::of(triples(20_000, 50));
        let want = shared.lock().unwrap().render();
        let server = serve(
            "127.0.0.1:0".parse().unwrap(),
            shared.clone(),
            Health::new(),
        )
        .await
        .unwrap();
        // A task that counts its turns on this (one) thread meanwhile.
        let turns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counting = {
            let turns = Arc::clone(&turns);
            tokio::spawn(async move {
                loop {
                    turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        };
        let turns_now = || turns.load(std::sync::atomic::Ordering::Relaxed);
        let mut c = tokio::net::TcpStream::connect(server.local_addr())
            .await
            .unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let asked = turns_now();
        let mut first = [0u8; 1];
        c.read_exact(&mut first).await.unwrap();
        // Before the head is sent, the lines are measured a chunk at a
        // time, the counting task running between chunks (a render in one
        // piece gives it no turn until it ends).
        let measuring = turns_now() - asked;
        let mut s = String::from_utf8(first.to_vec()).unwrap();
        c.read_to_string(&mut s).await.unwrap();
        counting.abort();
        let (head, body) = s.split_once("\r\n\r\n").unwrap();
        // The same bytes, with their length (not chunked).
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap_or_else(|| panic!("no content-length in {head}"))
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
        assert!(!head.contains("transfer-encoding"), "{head}");
        assert!(
            head.contains("content-type: text/plain; version=0.0.4"),
            "{head}"
        );
        assert!(body.starts_with(&want), "the snapshot's text first");
        // Each chunk but the last holds at least CHUNK bytes and a line
        // more at most (a line here is under 256 bytes).
        let lines = announced_as_a_set_did("", &triples(20_000, 50)).len();
        let chunks = lines / (CHUNK + 256);
        assert!(chunks >= 8, "{lines} bytes");
        assert!(
            measuring + 1 >= chunks,
            "{measuring} turns while {chunks} chunks or more were measured"
        );
        server.shutdown().await;
    }

    #[test]
    fn renders_metallb_names() {
        let snap = Snapshot {
            node: "n1".into(),
            peers: BTreeMap::from([(
                "10.0.0.1:179".into(),
                PeerMetrics {
                    up: true,
                    updates: 3,
                    announced_prefixes: 2,
                    pending_prefixes: 3,
                    keepalives_received: 5,
                    total_sent: 9,
                    ..PeerMetrics::default()
                },
            )]),
            announced: Announced::of([(
                Via::Bgp,
                ObjectKey::new("default", "web"),
                "192.0.2.10".parse().unwrap(),
            )]),
            config_errors: 4,
            last_reload_success: true,
            config_loaded: true,
            config_stale: true,
            updates: 6,
            update_errors: 2,
            memberlist: Some(MemberlistMetrics {
                members: 3,
                auth_failures: 7,
                unknown_key: 1,
                mode_mismatch: 0,
                packets_received: 40,
                isolated: true,
            }),
            l2_api_candidates: 2,
            l2_yielded: 1,
            l2_metallb_deferred: Some(3),
            l2: BTreeMap::from([
                (
                    "192.0.2.20".parse().unwrap(),
                    l2::IpCounters {
                        requests_received: 4,
                        responses_sent: 4,
                        gratuitous_sent: 10,
                    },
                ),
                (
                    "2001:db8::20".parse().unwrap(),
                    l2::IpCounters {
                        requests_received: 1,
                        responses_sent: 1,
                        gratuitous_sent: 5,
                    },
                ),
            ]),
            l2_dropped: BTreeMap::from([("not_ours", 12), ("rate_limited", 99_000)]),
            ..Snapshot::default()
        };
        let text = snap.render();
        assert!(
            !Snapshot::default()
                .render()
                .contains("ferrolb_layer2_dropped_total"),
            "no layer 2, no drop family"
        );
        for line in [
            "# TYPE ferrolb_layer2_dropped_total counter\n",
            "ferrolb_layer2_dropped_total{reason=\"not_ours\"} 12\n",
            "ferrolb_layer2_dropped_total{reason=\"rate_limited\"} 99000\n",
            "metallb_bgp_session_up{peer=\"10.0.0.1:179\"} 1\n",
            "metallb_bgp_updates_total{peer=\"10.0.0.1:179\"} 3\n",
            "metallb_bgp_announced_prefixes_total{peer=\"10.0.0.1:179\"} 2\n",
            "# TYPE metallb_bgp_pending_prefixes_total gauge\n",
            "metallb_bgp_pending_prefixes_total{peer=\"10.0.0.1:179\"} 3\n",
            "metallb_k8s_client_config_loaded_bool 1\n",
            "metallb_k8s_client_config_stale_bool 1\n",
            "# TYPE metallb_k8s_client_updates_total counter\n",
            "metallb_k8s_client_updates_total 6\n",
            "metallb_k8s_client_update_errors_total 2\n",
            "metallb_bgp_keepalives_received{peer=\"10.0.0.1:179\"} 5\n",
            "metallb_bgp_total_sent{peer=\"10.0.0.1:179\"} 9\n",
            "metallb_bgp_route_refresh_sent{peer=\"10.0.0.1:179\"} 0\n",
            "metallb_speaker_announced{ip=\"192.0.2.10\",node=\"n1\",protocol=\"bgp\",service=\"default/web\"} 1\n",
            "# TYPE metallb_layer2_requests_received counter\n",
            "metallb_layer2_requests_received{ip=\"192.0.2.20\"} 4\n",
            "metallb_layer2_requests_received{ip=\"2001:db8::20\"} 1\n",
            "# TYPE metallb_layer2_responses_sent counter\n",
            "metallb_layer2_responses_sent{ip=\"192.0.2.20\"} 4\n",
            "metallb_layer2_responses_sent{ip=\"2001:db8::20\"} 1\n",
            "# TYPE metallb_layer2_gratuitous_sent counter\n",
            "metallb_layer2_gratuitous_sent{ip=\"192.0.2.20\"} 10\n",
            "metallb_layer2_gratuitous_sent{ip=\"2001:db8::20\"} 5\n",
            "ferrolb_config_errors_total 4\n",
            "ferrolb_config_last_reload_success 1\n",
            "ferrolb_memberlist_members 3\n",
            "ferrolb_memberlist_packets_received_total 40\n",
            "ferrolb_memberlist_isolated 1\n",
            "ferrolb_l2_isolated_api_candidates 2\n",
            "ferrolb_l2_isolated_yielded_services 1\n",
            "ferrolb_l2_metallb_deferred_services 3\n",
            "ferrolb_memberlist_rejected_total{reason=\"authentication\"} 7\n",
            "ferrolb_memberlist_rejected_total{reason=\"unknown_key\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn renders_bfd_with_metallb_frr_names() {
        assert!(
            !Snapshot::default().render().contains("metallb_bfd_"),
            "no BFD, no BFD families"
        );
        let snap = Snapshot {
            bfd_sessions: BTreeMap::from([
                (
                    "10.0.0.1".into(),
                    BfdSessionMetrics {
                        up: true,
                        control_packet_input: 120,
                        control_packet_output: 64,
                        echo_packet_input: 998,
                        echo_packet_output: 1000,
                        session_up_events: 2,
                        session_down_events: 1,
                    },
                ),
                ("fd00::1".into(), BfdSessionMetrics::default()),
            ]),
            bfd_dropped: BTreeMap::from([("bad_ttl", 3), ("unknown_session", 1)]),
            ..Snapshot::default()
        };
        let text = snap.render();
        for line in [
            "# TYPE metallb_bfd_session_up gauge\n",
            "metallb_bfd_session_up{peer=\"10.0.0.1\"} 1\n",
            "metallb_bfd_session_up{peer=\"fd00::1\"} 0\n",
            "# TYPE metallb_bfd_control_packet_input counter\n",
            "metallb_bfd_control_packet_input{peer=\"10.0.0.1\"} 120\n",
            "metallb_bfd_control_packet_output{peer=\"10.0.0.1\"} 64\n",
            "# TYPE metallb_bfd_echo_packet_input counter\n",
            "metallb_bfd_echo_packet_input{peer=\"10.0.0.1\"} 998\n",
            "metallb_bfd_echo_packet_output{peer=\"10.0.0.1\"} 1000\n",
            "metallb_bfd_echo_packet_output{peer=\"fd00::1\"} 0\n",
            "metallb_bfd_session_up_events{peer=\"10.0.0.1\"} 2\n",
            "metallb_bfd_session_down_events{peer=\"10.0.0.1\"} 1\n",
            "metallb_bfd_session_down_events{peer=\"fd00::1\"} 0\n",
            "# TYPE metallb_bfd_control_packet_dropped counter\n",
            "metallb_bfd_control_packet_dropped{reason=\"bad_ttl\"} 3\n",
            "metallb_bfd_control_packet_dropped{reason=\"unknown_session\"} 1\n",
            "metallb_bfd_control_packet_dropped{reason=\"malformed\"} 0\n",
            "metallb_bfd_control_packet_dropped{reason=\"send_failed\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // Every sample line has its family's HELP and TYPE before it.
        for name in text
            .lines()
            .filter(|l| l.starts_with("metallb_bfd_"))
            .map(|l| l.split('{').next().unwrap())
        {
            let at = text.find(&format!("{name}{{")).unwrap();
            assert!(text[..at].contains(&format!("# TYPE {name} ")), "{name}");
        }
    }

    #[test]
    fn renders_the_live_heap_when_read() {
        assert_eq!(render_heap(None), "");
        assert_eq!(
            render_heap(Some(8_388_608)),
            "# HELP ferrolb_heap_live_bytes Bytes the memory allocator has handed out and not \
             had back (glibc mallinfo2: uordblks + hblkhd), read at scrape time\n\
             # TYPE ferrolb_heap_live_bytes gauge\n\
             ferrolb_heap_live_bytes 8388608\n"
        );
    }

    #[test]
    fn renders_the_trims_when_counted() {
        assert_eq!(render_trims(None), "");
        let text = render_trims(Some(HeapTrims {
            count: 7,
            released: 5,
            micros: 2_003_004,
        }));
        for line in [
            "# TYPE ferrolb_heap_trims_total counter\n",
            "ferrolb_heap_trims_total 7\n",
            "ferrolb_heap_trims_released_total 5\n",
            "# TYPE ferrolb_heap_trim_seconds_total counter\n",
            "ferrolb_heap_trim_seconds_total 2.003004\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[tokio::test]
    async fn serves_metrics_and_readiness() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let shared = Shared::default();
        let server = serve(
            "127.0.0.1:0".parse().unwrap(),
            shared.clone(),
            Health::new(),
        )
        .await
        .unwrap();
        let addr = server.local_addr();
        let get = |path: &'static str| async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).await.unwrap();
            s
        };
        let not_ready = get("/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(
            not_ready.ends_with("not ready: configuration: no configuration applied yet\n"),
            "{not_ready}"
        );
        shared.lock().unwrap().ready = true;
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        let metrics = get("/metrics").await;
        assert!(
            metrics.contains(&format!("\r\n\r\n{}# HELP ", Snapshot::default().render())),
            "{metrics}"
        );
        assert!(
            metrics.contains("\n# HELP process_cpu_seconds_total "),
            "{metrics}"
        );
        // The live heap, read at this scrape (glibc only): at least the
        // snapshot's text around the announced lines, built before the
        // reading.
        if cfg!(target_env = "gnu") {
            let live: u64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix("ferrolb_heap_live_bytes "))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no ferrolb_heap_live_bytes in {metrics}"));
            let snapshot = Snapshot::default().render().len() as u64;
            assert!(live >= snapshot, "{live} < {snapshot}");
        }
        assert!(get("/nope").await.starts_with("HTTP/1.1 404"));
        server.shutdown().await;
    }
}
