//! The reconcile loop: one task that owns the drivers. On every
//! configuration change or memberlist event it rebuilds the
//! [`ClusterView`](crate::announce::ClusterView), hands it to the keyed
//! desired state ([`Keyed`]), which
//! decides again only the services that changed, and applies what changed
//! to the BGP speaker (per peer, the prefixes to announce or withdraw) and
//! the layer 2 announcer (per IP). It makes no announcement decisions of
//! its own, and keeps no copy of what the drivers were given.
//!
//! A BGPPeer with a `bfdProfile` gets a BFD session to its address (RFC
//! 9384): its BGP session is held down until BFD is Up (unless
//! [`Options::bgp_without_bfd_up`]), and torn down with Cease / BFD Down
//! when BFD leaves Up.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use api::model::PeerTarget;
use bgp::session::{State, StopMode};
use memberlist::Event;
use shell::task::Supervisor;
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

use crate::announce::bfd_gate::bfd_session;
use crate::announce::k8s::Converted;
use crate::announce::{ApiSpeakers, Changes, Exclusion, Interfaces, Keyed, Problem, Via};
use crate::driver::bfd as bfd_driver;
use crate::driver::bgp::{BgpSpeaker, PeerEvent, PeerStatus};
use crate::driver::l2::{L2Announcer, L2Config, L2Event, L2Stats};
use crate::driver::memberlist::{Events, MemberEvent, Memberlist};
use crate::driver::peers::{BfdPeers, peer_config};
use crate::driver::unnumbered::Unnumbered;
use crate::metrics::{self, MemberlistMetrics, PeerMetrics};
pub use crate::net::heap::map_large_allocations;
use crate::publish::{self, ConfigResult};
use crate::source::{Rejected, Reload, Snapshot, file};

/// How the speaker runs, from its flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// This node's name.
    pub node: String,
    /// The `loadBalancerClass` served (`None`: services without one).
    pub load_balancer_class: Option<String>,
    /// Announce from nodes labelled to be excluded anyway.
    pub ignore_exclude_lb: bool,
    /// Accept BGP connections here (passive peers); `None`: connect only.
    pub bgp_listen: Option<SocketAddr>,
    /// The layer 2 responders' settings.
    pub l2: L2Config,
    /// How BGP sessions end when the speaker exits.
    pub exit: StopMode,
    /// Where the BFD driver listens and sends (the RFC ports by default).
    pub bfd: bfd_driver::Options,
    /// Bring BGP up for a peer with a BFD profile even while its BFD
    /// session is not Up (BFD Down still tears an Established session
    /// down, then it reconnects at once). Off by default: BGP waits for
    /// BFD. MetalLB has no such option; FRR's default behaves this way.
    pub bgp_without_bfd_up: bool,
    /// After a reconcile, give the allocator's free pages back to the
    /// kernel this long later (`malloc_trim`, in `net::heap`), at most once
    /// per such period; `None`: never.
    pub heap_trim: Option<Duration>,
}

/// What the speaker exchanges with the Kubernetes API besides its
/// configuration (Kubernetes mode).
pub struct Kube {
    /// Where status objects are published.
    pub report: watch::Sender<publish::Report>,
    /// The other speakers as the API shows them.
    pub speakers: watch::Receiver<Arc<ApiSpeakers>>,
    /// Whether memberlist is isolated: the ServiceL2Status objects are
    /// read only then.
    pub isolated: watch::Sender<bool>,
}

/// Why [`run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The BGP listener could not be bound.
    #[error("--bgp-listen: {0}")]
    Listen(std::io::Error),
    /// A task the speaker needs ended (a supervised task, or a driver or
    /// the configuration source, whose stream closed): the speaker shut
    /// down as on SIGTERM, and must be restarted.
    #[error("{0}")]
    TaskEnded(String),
}

/// Runs until `shutdown` completes, then leaves memberlist at once, ends
/// the BGP sessions as `opts.exit` says and withdraws layer 2 addresses.
/// The same shutdown follows when a task the speaker needs ends: one of
/// `tasks`, the configuration source (`reloads` closed) or a driver (its
/// events closed). Once the loop ends, `tasks` is stopped: tasks that end
/// during the shutdown are not failures.
///
/// # Errors
/// The BGP listener could not be bound, or a task ended ([`Error`]).
pub async fn run(
    opts: Options,
    mut reloads: mpsc::Receiver<Reload>,
    memberlist: Option<(Memberlist, Events)>,
    metrics: metrics::Shared,
    kube: Option<Kube>,
    shutdown: impl Future<Output = ()>,
    tasks: &mut Supervisor,
) -> Result<(), Error> {
    let (mut bgp, mut bgp_events) = BgpSpeaker::new();
    if let Some(addr) = opts.bgp_listen {
        let local = bgp.listen(addr).map_err(Error::Listen)?;
        info!(addr = %local, "bgp listening");
    }
    let (ml, mut member_events) = match memberlist {
        Some((ml, events)) => (Some(ml), Some(events)),
        None => (None, None),
    };
    {
        let mut m = metrics.lock().unwrap_or_else(PoisonError::into_inner);
        m.node.clone_from(&opts.node);
    }
    let mut r = Reconciler {
        membership: Membership::new(ml.clone(), &opts.node),
        bfd: BfdPeers::new(opts.bfd, opts.bgp_without_bfd_up),
        opts,
        snapshot: None,
        converted: Converted::default(),
        keyed: Keyed::new(),
        bgp,
        unnumbered: Unnumbered::default(),
        l2: None,
        reported: Reported::default(),
        metrics,
        kube,
        peer_retry: None,
        trim_at: None,
        trimmed_at: std::time::Instant::now(),
    };
    let mut refresh = tokio::time::interval(METRICS_REFRESH);
    tokio::pin!(shutdown);
    // Why the loop ended, when not asked to.
    let mut ended: Option<String> = None;
    loop {
        let bfd_deadline = r.bfd.poll_timeout();
        tokio::select! {
            () = &mut shutdown => break,
            failure = tasks.failed() => {
                ended = Some(failure.to_string());
                break;
            }
            reload = reloads.recv() => {
                let Some(reload) = reload else {
                    ended = Some("the configuration source ended".into());
                    break;
                };
                r.reload(reload);
                r.reconcile().await;
            }
            // One reconcile per batch: a burst of joins (a join reply lists
            // every member) is one batch, not one reconcile per member.
            batch = recv_batch_opt(&mut member_events) => {
                let Some(batch) = batch else {
                    ended = Some("the memberlist task ended".into());
                    break;
                };
                let mut changed = false;
                for ev in &batch {
                    changed |= r.membership.event(&ev.event, &r.opts.node, r.kube.as_ref());
                }
                if changed {
                    r.reconcile().await;
                }
            }
            // Only an isolated node's decisions, and those of a node that
            // coexists with MetalLB, read the API's speakers.
            () = api_changed(r.kube.as_mut()) => if r.membership.isolated || r.coexists() {
                r.reconcile().await;
            },
            () = sleep_opt(r.peer_retry) => {
                r.peer_retry = None;
                r.reconcile().await;
            }
            () = sleep_opt(r.trim_at) => {
                r.trim_at = None;
                r.trimmed_at = std::time::Instant::now();
                crate::net::heap::trim();
            }
            () = sleep_opt(r.membership.l2_hold) => {
                r.membership.l2_hold = None;
                r.reconcile().await;
            }
            iface = r.unnumbered.recv() => match iface {
                // A neighbor learned, changed or gone: its peer's session
                // starts, moves or ends.
                Some(iface) => {
                    debug!(%iface, "unnumbered neighbor changed");
                    r.apply_bgp(&Changes::default()).await;
                }
                None => {
                    ended = Some("the unnumbered router discovery task ended".into());
                    break;
                }
            },
            Some(ev) = bgp_events.recv() => {
                if let PeerEvent::Established { .. } | PeerEvent::Down { .. } = ev {
                    r.refresh_metrics().await;
                }
            }
            ev = r.bfd.recv() => match ev {
                Some(ev) => r.bfd.handle_event(&mut r.bgp, &ev).await,
                None => {
                    ended = Some("the bfd task ended".into());
                    break;
                }
            },
            () = sleep_opt(bfd_deadline) => r.bfd.handle_timeout(&mut r.bgp).await,
            ev = recv_opt(r.l2.as_mut().map(|(_, events)| events)) => match ev {
                Some(L2Event::InterfaceError { interface, error }) => {
                    warn!(interface, error, "layer 2 interface failed");
                }
                Some(_) => {}
                None => {
                    ended = Some("the layer 2 task ended".into());
                    break;
                }
            },
            _ = refresh.tick() => {
                r.refresh_metrics().await;
                r.trim_grown();
            }
        }
    }
    tasks.stop();
    match &ended {
        Some(why) => error!(reason = %why, "a task the speaker needs ended: shutting down"),
        None => info!("shutting down"),
    }
    if let Some(ml) = ml {
        ml.leave().await;
    }
    r.bgp.shutdown(r.opts.exit.clone()).await;
    // AdminDown, so peers do not take it as a failure (RFC 5882 §3.2).
    r.bfd.shutdown().await;
    if let Some((l2, _)) = r.l2 {
        l2.shutdown().await;
    }
    match ended {
        Some(why) => Err(Error::TaskEnded(why)),
        None => Ok(()),
    }
}

/// The state behind the loop: the inputs of the decisions, the keyed
/// desired state, and the drivers that own what is live.
struct Reconciler {
    opts: Options,
    /// The last good configuration.
    snapshot: Option<Snapshot>,
    membership: Membership,
    /// The services of the last view, converted from the snapshot's.
    converted: Converted,
    /// The desired state, per service: what the drivers were given.
    keyed: Keyed,
    bgp: BgpSpeaker,
    /// The neighbors of the unnumbered peers' interfaces.
    unnumbered: Unnumbered,
    /// Started when a layer 2 announcement is first needed, with its
    /// events.
    l2: Option<(L2Announcer, mpsc::UnboundedReceiver<L2Event>)>,
    reported: Reported,
    metrics: metrics::Shared,
    /// The status objects and the other speakers (Kubernetes mode).
    kube: Option<Kube>,
    /// The BFD sessions of the BGP peers, and their gate.
    bfd: BfdPeers,
    /// When to try again to configure peers the BGP driver refused.
    peer_retry: Option<std::time::Instant>,
    /// When to trim the heap next ([`Options::heap_trim`]): set by the
    /// first reconcile after a trim.
    trim_at: Option<std::time::Instant>,
    /// When the heap was last trimmed (or the loop started).
    trimmed_at: std::time::Instant,
}

/// What memberlist says, as the decisions read it.
struct Membership {
    /// The memberlist handle, for its counters; `None` when off.
    ml: Option<Memberlist>,
    /// Live members, this node included; `None` when memberlist is off.
    members: Option<BTreeSet<String>>,
    /// memberlist reaches no member.
    isolated: bool,
    /// Until when layer 2 decisions wait for memberlist to converge at
    /// start (`None`: they don't).
    l2_hold: Option<std::time::Instant>,
}

impl Membership {
    fn new(ml: Option<Memberlist>, node: &str) -> Self {
        Self {
            members: ml.as_ref().map(|_| BTreeSet::from([node.to_owned()])),
            // With memberlist, layer 2 waits for the first members to be
            // known: deciding alone, every starting node would elect itself
            // for a moment and send gratuitous ARP for addresses it does
            // not keep.
            l2_hold: ml
                .as_ref()
                .map(|_| std::time::Instant::now() + L2_HOLD_ALONE),
            ml,
            isolated: false,
        }
    }

    /// Takes one memberlist event (`node` is this node); returns whether
    /// the member set or isolation changed.
    fn event(&mut self, event: &Event, node: &str, kube: Option<&Kube>) -> bool {
        let Some(members) = &mut self.members else {
            return false;
        };
        if let Event::Isolated | Event::Connected = event {
            let isolated = matches!(event, Event::Isolated);
            if let Some(k) = kube {
                k.isolated.send_replace(isolated);
            }
            return std::mem::replace(&mut self.isolated, isolated) != isolated;
        }
        let Some(member) = event.member() else {
            return false;
        };
        let name = member.name.as_str().to_owned();
        let changed = match event {
            Event::Up(_) | Event::Alive(_) | Event::Suspect(_) | Event::Updated(_) => {
                members.insert(name)
            }
            // This node counts as long as it runs.
            Event::Down(_) | Event::Left(_) => name != node && members.remove(&name),
            Event::Isolated | Event::Connected => false,
        };
        if changed && matches!(event, Event::Up(_)) {
            // A join brings the whole member list in one exchange: decide
            // shortly after the first member.
            let soon = std::time::Instant::now() + L2_HOLD_SETTLE;
            self.l2_hold = self.l2_hold.map(|h| h.min(soon));
        }
        changed
    }
}

/// What was logged, so that each problem and exclusion is logged once
/// while it lasts.
#[derive(Default)]
struct Reported {
    problems: BTreeSet<String>,
    excluded: Option<Exclusion>,
    /// BGP waits for MetalLB's speaker on this node.
    bgp_held: bool,
}

impl Reconciler {
    /// Whether the API's speakers include MetalLB's
    /// (`--metallb-speaker-labels`).
    fn coexists(&self) -> bool {
        self.kube
            .as_ref()
            .is_some_and(|k| k.speakers.borrow().metallb.is_some())
    }

    fn reload(&mut self, reload: Reload) {
        let mut m = self.metrics.lock().unwrap_or_else(PoisonError::into_inner);
        match reload {
            Ok(snapshot) => {
                info!(
                    services = snapshot.services.len(),
                    peers = snapshot.model.peers.len(),
                    pools = snapshot.model.pools.len(),
                    "configuration loaded"
                );
                m.last_reload_success = true;
                m.updates += 1;
                m.config_loaded = true;
                m.config_stale = false;
                self.snapshot = Some(snapshot);
                self.publish_config(ConfigResult::Valid);
            }
            Err(Rejected { errors, cluster }) => {
                for e in &errors {
                    match e {
                        file::Error::Invalid(p) => error!(
                            kind = p.kind,
                            name = %p.name,
                            field = %p.field,
                            message = %p.message,
                            "configuration rejected"
                        ),
                        other => error!(error = %other, "configuration rejected"),
                    }
                }
                m.config_errors += errors.len() as u64;
                m.last_reload_success = false;
                m.updates += 1;
                m.update_errors += 1;
                m.config_stale = true;
                let summary: Vec<String> = errors.iter().map(ToString::to_string).collect();
                self.publish_config(ConfigResult::Invalid(summary.join("; ")));
                match (&mut self.snapshot, cluster) {
                    (Some(last), Some(cluster)) => {
                        *last = last.with_cluster(*cluster);
                        warn!(
                            services = last.services.len(),
                            "keeping the last good configuration; nodes, services, endpoints and secrets are current"
                        );
                    }
                    (Some(_), None) => warn!("keeping the last good configuration"),
                    (None, _) => {}
                }
            }
        }
    }

    async fn reconcile(&mut self) {
        let Some(snap) = &self.snapshot else {
            return;
        };
        let start = std::time::Instant::now();
        debug!("reconcile start");
        let (mut view, mut problems) = self.converted.view(
            &self.opts.node,
            snap.model.clone(),
            &snap.nodes,
            &snap.services,
            &snap.slices,
            &snap.secrets,
        );
        view.members.clone_from(&self.membership.members);
        view.isolated = self.membership.isolated;
        view.api_speakers = self.kube.as_ref().map(|k| k.speakers.borrow().clone());
        view.load_balancer_class
            .clone_from(&self.opts.load_balancer_class);
        view.ignore_exclude_lb = self.opts.ignore_exclude_lb;

        let l2_on = !view.model.l2_advertisements.is_empty() && self.membership.l2_hold.is_none();
        let viewed = start.elapsed();
        let changes = self.keyed.update(&view, l2_on);
        debug!(
            decided = changes.decided,
            all = changes.all,
            view_us = viewed.as_micros(),
            keyed_us = (start.elapsed() - viewed).as_micros(),
            "reconcile decided"
        );
        problems.extend(self.keyed.problems());
        self.report(&problems);
        let excluded = self.keyed.excluded();
        if excluded != self.reported.excluded {
            info!(node = %self.opts.node, reason = ?excluded, "node exclusion changed");
            self.reported.excluded = excluded;
        }
        let held = view
            .api_speakers
            .as_ref()
            .and_then(|a| a.metallb.as_ref())
            .is_some_and(|m| crate::announce::coexist::bgp_held(m, &view.node));
        if held != self.reported.bgp_held {
            info!(
                held,
                "BGP: sessions wait while MetalLB's speaker Pod is on this node (or MetalLB's Pods are not listed yet)"
            );
            self.reported.bgp_held = held;
        }
        for (service, node) in &changes.yielded {
            warn!(%service, answering = %node, "memberlist isolated: leaving the service to the node the API shows answering for it");
        }
        for (service, why) in &changes.deferred {
            info!(%service, metallb_node = %why.node(), why = ?why, "layer 2: leaving the service to MetalLB's speaker (it answers or will); taking over when no MetalLB speaker can");
        }
        self.apply_bgp(&changes).await;
        self.apply_l2(&changes);
        // The status writer (publish.rs) shares this thread and builds every
        // status body when woken: let the peer tasks, then their writers,
        // put the routes on the wire first.
        tokio::task::yield_now().await;
        let announcements = Arc::clone(self.keyed.announcements());
        if let Some(tx) = self.kube.as_ref().map(|k| &k.report) {
            let announcements = Arc::clone(&announcements);
            tx.send_if_modified(|r| {
                let publish = r.announcements.is_none() || changes.announcements > 0;
                if publish {
                    r.announcements = Some(announcements);
                }
                publish
            });
        }
        for (via, service, ip) in &changes.announced {
            info!(protocol = via.as_str(), %service, %ip, "announce");
        }
        for (via, service, ip) in &changes.withdrawn {
            info!(protocol = via.as_str(), %service, %ip, "withdraw");
        }
        {
            // What the keyed plans just decided from, shared: the metrics
            // keep no set of their own (56 bytes an IP). The view's list
            // is kept rather than dropped (8 bytes a Service); its records
            // are the keyed plans' own.
            let mut services = std::mem::take(&mut view.services);
            services.shrink_to_fit();
            let announced = metrics::Announced {
                announcements,
                services: Arc::new(services),
            };
            // The last ones, dropped after the lock is released.
            let last = std::mem::replace(
                &mut self
                    .metrics
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .announced,
                announced,
            );
            drop(last);
            let mut m = self.metrics.lock().unwrap_or_else(PoisonError::into_inner);
            // An address shared by two services starts once.
            let l2_started: BTreeSet<IpAddr> = changes
                .announced
                .iter()
                .filter(|(via, _, _)| *via == Via::Layer2)
                .map(|(_, _, ip)| *ip)
                .collect();
            for ip in l2_started {
                *m.l2_starts.entry(ip).or_default() += 1;
            }
            m.l2_api_candidates = self.keyed.api_candidates() as u64;
            m.l2_yielded = self.keyed.yielded().len() as u64;
            m.l2_metallb_deferred = self.coexists().then(|| self.keyed.deferred().len() as u64);
            m.ready = true;
        }
        self.refresh_metrics().await;
        if self.trim_at.is_none() {
            self.trim_at = self.opts.heap_trim.map(|after| start + after);
        }
        debug!(took_us = start.elapsed().as_micros(), "reconcile done");
    }

    /// Trims the heap when a burst with no change behind it (the status
    /// writer's pass, a re-list) grew the resident memory
    /// (`net::heap::trim_if_grown`): checked each metrics refresh, with no
    /// trim scheduled, at most once per `--heap-trim-ms`.
    fn trim_grown(&mut self) {
        let Some(period) = self.opts.heap_trim else {
            return;
        };
        if self.trim_at.is_none()
            && self.trimmed_at.elapsed() >= period
            && crate::net::heap::trim_if_grown()
        {
            self.trimmed_at = std::time::Instant::now();
        }
    }

    /// Reports the configuration result (Kubernetes mode).
    fn publish_config(&self, result: ConfigResult) {
        if let Some(tx) = self.kube.as_ref().map(|k| &k.report) {
            tx.send_if_modified(|r| {
                let changed = r.config != result;
                r.config = result;
                changed
            });
        }
    }

    /// Logs problems not reported before, and counts them.
    fn report(&mut self, problems: &[Problem]) {
        let now: BTreeSet<String> = problems.iter().map(ToString::to_string).collect();
        let mut new = 0u64;
        for p in problems {
            if !self.reported.problems.contains(&p.to_string()) {
                warn!(
                    kind = p.kind,
                    name = %p.name,
                    field = %p.field,
                    message = %p.message,
                    "configuration problem"
                );
                new += 1;
            }
        }
        self.reported.problems = now;
        self.metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .config_errors += new;
    }

    /// Brings the BGP driver to the keyed state: peers removed, added or
    /// reconfigured (a new session takes its routes whole), and the route
    /// changes of the others.
    async fn apply_bgp(&mut self, changes: &Changes) {
        let plan = self.keyed.peers();
        let gone: Vec<String> = self
            .bgp
            .peers()
            .filter(|n| !plan.contains_key(*n))
            .map(str::to_owned)
            .collect();
        for name in gone {
            info!(peer = %name, "peer removed");
            self.bgp
                .remove_peer(&name, StopMode::Shutdown(PEER_REMOVED.into()))
                .await;
            self.bfd.set_peer(&mut self.bgp, &name, None).await;
        }
        let interfaces: BTreeSet<String> = plan
            .values()
            .filter_map(|p| match &p.target {
                PeerTarget::Interface { name, .. } => Some(name.clone()),
                PeerTarget::Address(_) => None,
            })
            .collect();
        if let Err(e) = self.unnumbered.set_interfaces(interfaces) {
            error!(error = %e, retry_in = ?PEER_RETRY, "cannot start unnumbered router discovery");
            self.peer_retry
                .get_or_insert_with(|| std::time::Instant::now() + PEER_RETRY);
        }
        for (name, peer) in plan {
            self.bfd
                .set_peer(&mut self.bgp, name, bfd_session(peer))
                .await;
            let neighbor = match &peer.target {
                PeerTarget::Interface { name, .. } => self.unnumbered.neighbor(name),
                PeerTarget::Address(_) => None,
            };
            let Some(config) = peer_config(peer, neighbor) else {
                // An unnumbered peer whose neighbor is not known (yet, or
                // any more: the link went down): no session.
                if self.bgp.address(name).is_some() {
                    info!(peer = %name, "unnumbered neighbor gone: session ended");
                    self.bgp
                        .remove_peer(name, StopMode::Shutdown(NEIGHBOR_GONE.into()))
                        .await;
                }
                continue;
            };
            let address = config.address;
            match self.bgp.set_peer(name, config).await {
                Ok(true) => {
                    info!(peer = %name, %address, "peer configured");
                    self.bgp.set_routes(name, self.keyed.routes(name));
                }
                Ok(false) => {
                    if let Some(routes) = changes.routes.get(name) {
                        self.bgp.update_routes(name, routes.clone());
                    }
                }
                Err(e) => {
                    // The driver changed nothing (a running session goes on
                    // as it was, and is given its routes whole); the next
                    // reconcile, at the latest after PEER_RETRY, tries
                    // again.
                    error!(peer = %name, error = %e, retry_in = ?PEER_RETRY, "cannot configure peer");
                    self.metrics
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .peer_config_errors += 1;
                    self.bgp.set_routes(name, self.keyed.routes(name));
                    self.peer_retry
                        .get_or_insert_with(|| std::time::Instant::now() + PEER_RETRY);
                }
            }
        }
    }

    /// Brings the layer 2 announcer to the keyed state; it is started, and
    /// given every IP, when the first is to be announced.
    fn apply_l2(&mut self, changes: &Changes) {
        let Some((l2, _)) = &self.l2 else {
            let all = self.keyed.l2();
            if all.is_empty() {
                return;
            }
            match L2Announcer::start(self.opts.l2.clone()) {
                Ok((l2, events)) => {
                    for (ip, interfaces) in all {
                        l2.announce(ip, only(&interfaces));
                    }
                    self.l2 = Some((l2, events));
                }
                // Tried again at the next reconcile.
                Err(e) => error!(error = %e, "cannot start the layer 2 announcer"),
            }
            return;
        };
        for (ip, interfaces) in &changes.l2 {
            match interfaces {
                Some(i) => l2.announce(*ip, only(i)),
                None => l2.withdraw(*ip),
            }
        }
    }

    /// Copies the drivers' counters into the metrics.
    async fn refresh_metrics(&mut self) {
        let peers: BTreeMap<String, PeerMetrics> = self
            .bgp
            .peers()
            .filter_map(|name| {
                let status = self.bgp.status(name).unwrap_or_default();
                Some((
                    self.bgp.address(name)?.to_string(),
                    peer_metrics(&status, self.keyed.route_count(name)),
                ))
            })
            .collect();
        let l2 = match &self.l2 {
            Some((l2, _)) => l2.stats().await,
            None => None,
        };
        let bfd = self.bfd.stats().await;
        let ml = match &self.membership.ml {
            Some(ml) => ml.stats().await.ok().map(|s| MemberlistMetrics {
                members: s.members_up as u64 + 1,
                auth_failures: s.core.auth_failures,
                unknown_key: s.core.unknown_key,
                mode_mismatch: s.core.mode_mismatch,
                packets_received: s.core.packets_received,
                isolated: s.isolated,
            }),
            None => None,
        };
        let mut m = self.metrics.lock().unwrap_or_else(PoisonError::into_inner);
        m.peers = peers;
        m.memberlist = ml;
        if let Some((stats, sessions)) = bfd {
            (m.bfd_sessions, m.bfd_dropped) = bfd_metrics(&stats, &sessions);
        }
        if let Some(s) = l2 {
            m.l2_dropped = l2_dropped(&s);
            m.l2 = s.per_ip;
        }
    }
}

/// The layer 2 driver's form of [`Interfaces`]: `None` answers on all.
fn only(interfaces: &Interfaces) -> Option<BTreeSet<String>> {
    match interfaces {
        Interfaces::All => None,
        Interfaces::Only(names) => Some(names.clone()),
    }
}

/// A session's counters under MetalLB's metric names; `pending` is how
/// many prefixes the plan gives the peer.
fn peer_metrics(status: &PeerStatus, pending: usize) -> PeerMetrics {
    let s = &status.stats;
    PeerMetrics {
        up: status.state == Some(State::Established),
        updates: s.updates_sent,
        announced_prefixes: status.advertised as u64,
        pending_prefixes: pending as u64,
        updates_received: s.updates_received,
        opens_sent: s.opens_sent,
        opens_received: s.opens_received,
        notifications_sent: s.notifications_sent,
        keepalives_sent: s.keepalives_sent,
        keepalives_received: s.keepalives_received,
        route_refresh_sent: 0,
        total_sent: s.opens_sent + s.keepalives_sent + s.updates_sent + s.notifications_sent,
        total_received: s.messages_received,
    }
}

/// The BFD part of the metrics: per session by peer address, and the drop
/// counters by reason (`metrics::BFD_DROP_REASONS`).
fn bfd_metrics(
    stats: &bfd_driver::DriverStats,
    sessions: &[bfd::SessionInfo],
) -> (
    BTreeMap<String, metrics::BfdSessionMetrics>,
    BTreeMap<&'static str, u64>,
) {
    let per_peer = sessions
        .iter()
        .map(|s| {
            (
                s.key.peer.to_string(),
                metrics::BfdSessionMetrics {
                    up: s.state == bfd::State::Up,
                    control_packet_input: s.received,
                    control_packet_output: s.sent,
                    echo_packet_input: s.echo_received,
                    echo_packet_output: s.echo_sent,
                    session_up_events: s.ups,
                    session_down_events: s.downs,
                },
            )
        })
        .collect();
    let c = stats.core;
    let dropped = BTreeMap::from([
        ("malformed", c.malformed),
        ("authenticated", c.authenticated),
        ("bad_ttl", c.bad_ttl),
        ("unknown_session", c.unknown_session),
        ("send_failed", stats.send_errors),
        ("kernel", stats.kernel_drops),
    ]);
    (per_peer, dropped)
}

/// The layer 2 drop counters by reason (see [`metrics::Snapshot::l2_dropped`]).
fn l2_dropped(s: &L2Stats) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    let arp = s.arp.drops().map(|(r, n)| (r.as_str(), n));
    let ndp = s.ndp.drops().map(|(r, n)| (r.as_str(), n));
    for (reason, n) in arp.chain(ndp).chain([
        ("rate_limited", s.arp.rate_limited + s.ndp.rate_limited),
        ("oversize", s.oversize),
        ("kernel", s.kernel_drops),
        ("send_failed", s.send_errors),
    ]) {
        *out.entry(reason).or_insert(0) += n;
    }
    out
}

/// Sleeps until a BFD restart hold-off ends; pending forever when none runs.
async fn sleep_opt(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// Returns when the API's view of the speakers changed; pending forever
/// without one (file mode, or its feed ended: the supervisor reports that).
async fn api_changed(kube: Option<&mut Kube>) {
    if let Some(k) = kube
        && k.speakers.changed().await.is_ok()
    {
        return;
    }
    std::future::pending::<()>().await;
}

/// The next batch of memberlist events; pending forever without memberlist.
async fn recv_batch_opt(rx: &mut Option<Events>) -> Option<Vec<MemberEvent>> {
    match rx {
        Some(rx) => rx.recv_batch().await,
        None => std::future::pending().await,
    }
}

/// Receives from an optional channel; pending forever when there is none.
async fn recv_opt<T>(rx: Option<&mut mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The RFC 9003 message sent to a peer removed from the configuration.
const PEER_REMOVED: &str = "peer removed from ferrolb configuration";
/// The Cease text for an unnumbered peer whose neighbor is gone (its link
/// went down; the NOTIFICATION reaches it only if the link is back).
const NEIGHBOR_GONE: &str = "unnumbered neighbor gone";
/// How long layer 2 waits at start for memberlist to find a first member;
/// a node alone (or whose seeds are all down) then decides by itself.
/// How soon a peer the BGP driver refused to configure is tried again.
const PEER_RETRY: Duration = Duration::from_secs(5);

const L2_HOLD_ALONE: Duration = Duration::from_secs(3);
/// After the first member is up, how long the rest of the list has to
/// arrive (a join's push-pull brings it at once).
const L2_HOLD_SETTLE: Duration = Duration::from_millis(100);
/// How often driver counters are copied into the metrics.
const METRICS_REFRESH: Duration = Duration::from_secs(1);
