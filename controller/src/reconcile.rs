//! The Kubernetes glue: a kube-runtime `Controller` over Services that
//! asks [`State`] what each should hold and writes it, plus watchers of
//! IPAddressPools and Namespaces, the pool status writer and Events.
//!
//! No allocation decision is made here. Startup follows the allocator's
//! restart rule: pools and namespaces are listed, then every Service, and
//! [`State::start_packed`] offers them to the allocator in
//! [`crate::plan::replay_order`] (those with `status.loadBalancer.ingress`
//! first) before the controller starts. Services are kept packed
//! ([`crate::watched`]), in the startup list and in the watch cache, and
//! unpacked one at a time for a decision.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use api::v1beta1::{ConfigurationResult, ConfigurationState, IPAddressPool, IPAddressPoolStatus};
use futures::channel::mpsc;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service as K8sService};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch as signal;
use tracing::{debug, info, warn};

use crate::alloc::ServiceKey;
use crate::convert::{self, ANNOTATION_ALLOCATED_FROM_POOL};
use crate::leader;
use crate::metrics;
use crate::pools;
use crate::state::{Outcome, PoolCounts, State};
use crate::watched;

/// The field manager and Event reporter name.
pub const MANAGER: &str = "ferrolb-controller";

/// Settings of [`run`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Namespace of the IPAddressPools (MetalLB's own namespace).
    pub namespace: String,
    /// The `loadBalancerClass` we serve (`None`: services without one).
    pub lb_class: Option<String>,
    /// Lease election.
    pub lease: leader::Config,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` (none: not served).
    pub metrics_addr: Option<SocketAddr>,
    /// MetalLB's flags: the health-probe listener (served with the
    /// metrics), and those that are only reported.
    pub metallb: shell::compat::MetallbArgs,
    /// Reconciles running at once.
    pub concurrency: u16,
    /// Longest wait before retrying a service that got no address.
    pub max_backoff: Duration,
    /// How often pool status counters are written when they changed.
    pub pool_status_period: Duration,
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// The metrics address could not be bound.
    #[error("metrics server: {0}")]
    Metrics(#[from] std::io::Error),
}

/// Why one reconcile failed (the service is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// No address could be given.
    #[error("allocation failed: {0}")]
    Allocation(String),
    /// The object changed since the decision was made (HTTP 409 on the
    /// `resourceVersion` precondition): decided again from the fresh one.
    #[error("the service changed since it was read; deciding again")]
    Conflict,
    /// Leadership may be lost: the write was not sent, or not completed
    /// in time.
    #[error(transparent)]
    Fenced(#[from] leader::Fenced),
    /// A write failed.
    #[error("kubernetes: {0}")]
    Kube(kube::Error),
}

impl From<kube::Error> for ReconcileError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) if s.code == 409 => Self::Conflict,
            e => Self::Kube(e),
        }
    }
}

/// State shared by the leader's tasks and the metrics server.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    lease: Arc<leader::Status>,
    synced: AtomicBool,
    /// Some pool object is not the version in force.
    stale: AtomicBool,
    /// Writes refused by the `resourceVersion` precondition.
    conflicts: AtomicU64,
    /// Writes not sent or cut short because leadership may be lost.
    fenced: AtomicU64,
    /// Object updates processed: Service reconciles and pool changes
    /// (`metallb_k8s_client_updates_total`).
    updates: AtomicU64,
    /// Of those, the ones that failed: a reconcile that is retried with
    /// backoff, or a pool change refused
    /// (`metallb_k8s_client_update_errors_total`).
    update_errors: AtomicU64,
    /// Where Services' time goes: queue, reconcile, status write.
    stages: metrics::Stages,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug; the state is still the
        // allocator's last consistent one, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl metrics::Source for Shared {
    fn pool_counts(&self) -> Vec<PoolCounts> {
        if self.is_leader() {
            self.state().pool_counts()
        } else {
            Vec::new()
        }
    }

    fn is_leader(&self) -> bool {
        self.lease.leader.load(Ordering::Relaxed)
    }

    fn is_ready(&self) -> bool {
        self.lease.lease_ok.load(Ordering::Relaxed)
            && (!self.is_leader() || self.synced.load(Ordering::Relaxed))
    }

    fn config(&self) -> metrics::ConfigGauges {
        let loaded = self.is_leader() && self.synced.load(Ordering::Relaxed);
        metrics::ConfigGauges {
            loaded,
            stale: loaded && self.stale.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            fenced: self.fenced.load(Ordering::Relaxed),
            updates: self.updates.load(Ordering::Relaxed),
            update_errors: self.update_errors.load(Ordering::Relaxed),
            pending: if loaded {
                self.state().pending().count()
            } else {
                0
            },
        }
    }

    fn stages(&self) -> &metrics::Stages {
        &self.stages
    }
}

/// Runs the controller until `shutdown` turns true: elects a leader, and
/// while leading reconciles every Service against the pools.
pub async fn run(
    client: Client,
    opts: Options,
    shutdown: signal::Receiver<bool>,
) -> Result<(), Error> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::new(opts.lb_class.clone())),
        lease: Arc::new(leader::Status::default()),
        synced: AtomicBool::new(false),
        stale: AtomicBool::new(false),
        conflicts: AtomicU64::new(0),
        fenced: AtomicU64::new(0),
        updates: AtomicU64::new(0),
        update_errors: AtomicU64::new(0),
        stages: metrics::Stages::default(),
    });
    if let Some(addr) = opts.metrics_addr {
        metrics::spawn(addr, shared.clone(), &opts.metallb, client.clone()).await?;
    }
    let lease = opts.lease.clone();
    leader::run(
        client.clone(),
        lease,
        shared.lease.clone(),
        shutdown,
        |fence| lead(client.clone(), opts.clone(), shared.clone(), fence),
    )
    .await
}

struct Ctx {
    client: Client,
    shared: Arc<Shared>,
    fence: leader::Fence,
    recorder: Recorder,
    /// The `events.k8s.io` API was forbidden: Events go to core/v1.
    core_events: AtomicBool,
    /// Our identity, the events' reporting instance.
    identity: String,
    retry_pending: mpsc::UnboundedSender<ObjectRef<watched::Service>>,
    /// Events for [`send_events`].
    events: mpsc::UnboundedSender<Note>,
    failures: Mutex<HashMap<ServiceKey, u32>>,
    max_backoff: Duration,
    /// When each Service waiting for its reconcile first reached us by the
    /// watch (the queue stage of [`metrics::Stages`]).
    arrived: Mutex<HashMap<ServiceKey, Instant>>,
}

impl Ctx {
    /// Sends `write` through the fence and counts what is refused.
    async fn write<T>(
        &self,
        write: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ReconcileError> {
        let r = match self.fence.guard(write).await {
            Ok(r) => r.map_err(ReconcileError::from),
            Err(f) => Err(f.into()),
        };
        match &r {
            Err(ReconcileError::Conflict) => {
                self.shared.conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Err(ReconcileError::Fenced(_)) => {
                self.shared.fenced.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        r
    }
}

/// Everything the leader does; returns only on a fatal error.
async fn lead(
    client: Client,
    opts: Options,
    shared: Arc<Shared>,
    fence: leader::Fence,
) -> Result<(), Error> {
    shared.synced.store(false, Ordering::Relaxed);
    *shared.state() = State::new(opts.lb_class.clone());
    let pools_api: Api<IPAddressPool> = Api::namespaced(client.clone(), &opts.namespace);
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let svc_api: Api<watched::Service> = Api::all(client.clone());

    // Startup replay: pools, namespaces, then services with ingress first.
    let pools = pools_api.list(&ListParams::default()).await?;
    let namespaces = ns_api.list(&ListParams::default()).await?;
    let services = list_packed(&svc_api).await?;
    let reporter = Reporter {
        controller: MANAGER.into(),
        instance: Some(opts.lease.identity.clone()),
    };
    let mut config_report = ConfigReport::new(
        client.clone(),
        &opts.namespace,
        Recorder::new(client.clone(), reporter.clone()),
        fence.clone(),
    );
    let update = {
        let (st, assigned, update) = State::start_packed(
            opts.lb_class.clone(),
            &pools.items,
            &namespaces.items,
            &services,
        );
        *shared.state() = st;
        info!(
            pools = pools.items.len(),
            services = services.len(),
            assigned,
            "startup replay done"
        );
        update
    };
    // The replay processed the pools and every Service.
    shared
        .updates
        .fetch_add(1 + services.len() as u64, Ordering::Relaxed);
    // The watch below keeps its own (packed) copy; this one would live as
    // long as the leader does.
    drop(services);
    if !update.refused.is_empty() {
        shared.update_errors.fetch_add(1, Ordering::Relaxed);
    }
    shared
        .stale
        .store(!update.refused.is_empty(), Ordering::Relaxed);
    config_report.report(&pools.items, &update).await;
    shared.synced.store(true, Ordering::Relaxed);

    let (retry_tx, retry_rx) = mpsc::unbounded::<ObjectRef<watched::Service>>();
    let (all_tx, all_rx) = mpsc::unbounded::<()>();
    let (events_tx, events_rx) = mpsc::unbounded::<Note>();

    // Services: our own reflector, so that deletions release addresses.
    let (svc_reader, svc_writer) = reflector::store();
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        shared: shared.clone(),
        fence: fence.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        core_events: AtomicBool::new(false),
        identity: opts.lease.identity.clone(),
        retry_pending: retry_tx,
        events: events_tx,
        failures: Mutex::new(HashMap::new()),
        max_backoff: opts.max_backoff,
        arrived: Mutex::new(HashMap::new()),
    });
    let on_svc = {
        let ctx = ctx.clone();
        let reader = svc_reader.clone();
        move |ev: &WatchEvent<watched::Service>| match ev {
            WatchEvent::Apply(svc) | WatchEvent::InitApply(svc) => {
                // The first arrival counts: later ones join the same wait.
                lock(&ctx.arrived)
                    .entry(convert::key_of(svc))
                    .or_insert_with(Instant::now);
            }
            WatchEvent::Delete(svc) => {
                let key = convert::key_of(svc);
                lock(&ctx.arrived).remove(&key);
                if ctx.shared.state().forget(&key) {
                    info!(service = %key, "service deleted, addresses released");
                    retry_pending(&ctx);
                }
            }
            WatchEvent::InitDone => gc(&ctx, &reader),
            _ => {}
        }
    };
    // Each Service is packed as it is read (watched::Service: what
    // convert::trim keeps, without BTreeMaps): the cache holds these.
    let svc_stream = watch::watcher(svc_api, watcher::Config::default())
        .default_backoff()
        .reflect(svc_writer)
        .inspect_ok(on_svc)
        .applied_objects();

    // Namespaces: labels into the state, then the namespace's services,
    // but only when its labels changed. The watch's initial list brings
    // every namespace again with the labels the replay already has: those
    // re-queued every Service a second time at startup (21,202 reconciles
    // for 10,600 Services), while the Service watch's own first pass
    // decides each of them anyway.
    let ns_stream = {
        let shared = shared.clone();
        watch::watcher(ns_api, watcher::Config::default())
            .default_backoff()
            .try_filter_map(move |ev| {
                let changed = match ev {
                    WatchEvent::Apply(ns) | WatchEvent::InitApply(ns) => {
                        let labels = Some(ns.labels().clone());
                        shared
                            .state()
                            .set_namespace_labels(&ns.name_any(), labels)
                            .then_some(ns)
                    }
                    WatchEvent::Delete(ns) => {
                        shared.state().set_namespace_labels(&ns.name_any(), None);
                        None
                    }
                    _ => None,
                };
                futures::future::ready(Ok(changed))
            })
    };
    let ns_reader = svc_reader.clone();
    let ns_mapper = move |ns: Namespace| {
        let name = ns.name_any();
        ns_reader
            .state()
            .into_iter()
            .filter(|s| s.namespace().as_deref() == Some(name.as_str()))
            .map(|s| ObjectRef::from_obj(&*s))
            .collect::<Vec<_>>()
    };

    // Pools: on any change, the allocator's pools, then every service.
    let pool_task = {
        let shared = shared.clone();
        let (pool_reader, pool_writer) = reflector::store();
        let stream = watch::watcher(pools_api.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(pool_writer);
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(WatchEvent::Init | WatchEvent::InitApply(_)) => continue,
                    Ok(_) => {}
                    Err(e) => {
                        warn!(error = %e, "ipaddresspool watch failed");
                        continue;
                    }
                }
                let pools: Vec<IPAddressPool> =
                    pool_reader.state().iter().map(|p| (**p).clone()).collect();
                let (changed, lost, update) = shared.state().set_pool_objects(&pools);
                shared.updates.fetch_add(1, Ordering::Relaxed);
                if !update.refused.is_empty() {
                    shared.update_errors.fetch_add(1, Ordering::Relaxed);
                }
                shared
                    .stale
                    .store(!update.refused.is_empty(), Ordering::Relaxed);
                if changed {
                    info!(pools = pools.len(), lost = lost.len(), "pools changed");
                    let _ = all_tx.unbounded_send(());
                }
                config_report.report(&pools, &update).await;
            }
        }
    };

    let status_task = pool_status_writer(
        pools_api,
        shared.clone(),
        fence.clone(),
        opts.pool_status_period,
    );

    let events_task = send_events(ctx.clone(), events_rx);
    let controller = Controller::for_stream(svc_stream, svc_reader)
        .with_config(ControllerConfig::default().concurrency(opts.concurrency))
        .watches_stream(ns_stream, ns_mapper)
        .reconcile_all_on(all_rx)
        .reconcile_on(retry_rx)
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            match r {
                Ok((obj, _)) => debug!(service = %obj, "reconciled"),
                Err(kube::runtime::controller::Error::ReconcilerFailed(e, obj)) => {
                    debug!(service = %obj, error = %e, "reconcile failed")
                }
                Err(e) => warn!(error = %e, "controller"),
            }
        });
    tokio::join!(controller, pool_task, status_task, events_task);
    Ok(())
}

/// Every Service, a page at a time, each packed as it is read
/// ([`watched::Service`]: what [`convert::trim`] keeps): the startup
/// replay's input (one unpaginated list of 50,000 Services is a response
/// of hundreds of MB held whole while it is decoded).
async fn list_packed(api: &Api<watched::Service>) -> Result<Vec<watched::Service>, kube::Error> {
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(LIST_PAGE);
    loop {
        let page = api.list(&lp).await?;
        // Room for exactly what the apiserver says is left: growing by
        // doubling would leave up to half the vector unused.
        let left = page.metadata.remaining_item_count.unwrap_or(0);
        out.reserve_exact(page.items.len() + usize::try_from(left).unwrap_or(0));
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => return Ok(out),
        }
    }
}

/// Services per page of the startup list (the watcher's own page size).
const LIST_PAGE: u32 = 500;

/// Releases services that vanished while the watch was down.
fn gc(ctx: &Ctx, reader: &Store<watched::Service>) {
    let present: std::collections::HashSet<ServiceKey> = reader
        .state()
        .iter()
        .map(|s| convert::key_of(&**s))
        .collect();
    let mut st = ctx.shared.state();
    let gone: Vec<ServiceKey> = st
        .holders()
        .filter(|k| !present.contains(*k))
        .cloned()
        .collect();
    for key in &gone {
        st.forget(key);
    }
    drop(st);
    if !gone.is_empty() {
        info!(
            released = gone.len(),
            "released addresses of vanished services"
        );
        retry_pending(ctx);
    }
}

/// Asks the controller to try every pending service again (an address
/// was freed).
fn retry_pending(ctx: &Ctx) {
    let pending: Vec<ServiceKey> = ctx.shared.state().pending().cloned().collect();
    for key in pending {
        let r = ObjectRef::<watched::Service>::new(&key.name).within(&key.namespace);
        let _ = ctx.retry_pending.unbounded_send(r);
    }
}

/// One Service's reconcile ([`decide`]), timed stage by stage into
/// [`metrics::Stages`]; a Service whose status was written is logged at
/// debug level under the target `ferrolb::stages` with the three times.
async fn reconcile(packed: Arc<watched::Service>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let start = Instant::now();
    let key = convert::key_of(&*packed);
    let queued = lock(&ctx.arrived)
        .remove(&key)
        .map(|t| start.saturating_duration_since(t));
    let stages = &ctx.shared.stages;
    if let Some(q) = queued {
        stages.queue.observe(q);
    }
    let mut write = None;
    let r = decide(packed, &ctx, &mut write).await;
    let took = start.elapsed();
    stages.reconcile.observe(took);
    if let Some(w) = write {
        stages.write.observe(w);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        debug!(
            target: "ferrolb::stages",
            service = %key,
            queue_ms = queued.map(ms),
            reconcile_ms = ms(took),
            write_ms = ms(w),
            "status written"
        );
    }
    r
}

/// Decides for one Service and writes what changed; `write` gets the
/// status write's round trip, if one was sent.
async fn decide(
    packed: Arc<watched::Service>,
    ctx: &Arc<Ctx>,
    write: &mut Option<Duration>,
) -> Result<Action, ReconcileError> {
    // Unpacked for this decision only: the cache keeps the packed form.
    let svc = packed.to_k8s();
    drop(packed);
    let key = convert::key(&svc);
    ctx.shared.updates.fetch_add(1, Ordering::Relaxed);
    let (outcome, held_before) = {
        let mut st = ctx.shared.state();
        let held = st.assignment(&key).is_some();
        (st.sync(&svc), held)
    };
    let api: Api<K8sService> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let pool_annotation = svc
        .annotations()
        .get(ANNOTATION_ALLOCATED_FROM_POOL)
        .cloned();
    let deprecated_annotation = svc
        .annotations()
        .contains_key("metallb.universe.tf/ip-allocated-from-pool");
    let has_ingress = !convert::ingress_ips(&svc).is_empty();
    // Every write carries the resourceVersion the decision was made on
    // (`write_back`): if anyone wrote the service since (another replica
    // that took over, or we ourselves), the apiserver answers 409 and we
    // decide again.
    match outcome {
        Outcome::Assigned {
            assignment,
            changed,
            breaks,
        } => {
            let annotated = pool_annotation.as_deref() == Some(assignment.pool.as_str())
                && !deprecated_annotation;
            if changed || !annotated {
                timed(
                    ctx,
                    write,
                    write_back(&api, &svc, Some(&assignment.pool), &assignment.ips),
                )
                .await?;
            }
            if changed {
                let ips: Vec<String> = assignment
                    .ips
                    .iter()
                    .map(|ip| format!("{:?}", ip.to_string()))
                    .collect();
                info!(service = %key, pool = %assignment.pool, ips = ?assignment.ips, "ip allocated");
                publish(
                    ctx,
                    &svc,
                    EventType::Normal,
                    "IPAllocated",
                    format!("Assigned IP [{}]", ips.join(" ")),
                );
            }
            if !breaks.is_empty() {
                // Kept for stability (see crate::alloc): said, not moved.
                warn!(service = %key, ips = ?assignment.ips, breaks = ?breaks, "kept addresses that break pool rules");
                publish(
                    ctx,
                    &svc,
                    EventType::Warning,
                    REASON_ADDRESS_KEPT,
                    format!(
                        "kept {} because the service holds it, although {}",
                        assignment
                            .ips
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(" "),
                        breaks.join("; ")
                    ),
                );
            }
            lock(&ctx.failures).remove(&key);
            Ok(Action::await_change())
        }
        Outcome::Failed(e) => {
            if has_ingress || pool_annotation.is_some() {
                timed(ctx, write, write_back(&api, &svc, None, &[])).await?;
            }
            if held_before {
                retry_pending(ctx);
            }
            warn!(service = %key, error = %e, "ip allocation failed");
            publish(
                ctx,
                &svc,
                EventType::Warning,
                "AllocationFailed",
                format!("Failed to allocate IP for {:?}: {e}", key.to_string()),
            );
            Err(ReconcileError::Allocation(e.to_string()))
        }
        Outcome::Invalid(msg) => {
            let (reason, note) = if held_before {
                (
                    "LoadBalancerFailed",
                    format!("invalid requested loadbalancer IPs: {msg}"),
                )
            } else {
                (
                    "AllocationFailed",
                    format!("Failed to allocate IP for {:?}: {msg}", key.to_string()),
                )
            };
            warn!(service = %key, error = %msg, "invalid service");
            publish(ctx, &svc, EventType::Warning, reason, note);
            Ok(Action::await_change())
        }
        Outcome::NotLoadBalancer => {
            if has_ingress || pool_annotation.is_some() {
                timed(ctx, write, write_back(&api, &svc, None, &[])).await?;
            }
            if held_before {
                info!(service = %key, "no longer a load balancer, addresses released");
                retry_pending(ctx);
            }
            Ok(Action::await_change())
        }
        Outcome::Held => {
            warn!(
                service = %key,
                "left as it is: its addresses are in no pool in force, and a pool object is invalid"
            );
            Ok(Action::await_change())
        }
        Outcome::OtherClass(_) => {
            if held_before {
                retry_pending(ctx);
            }
            Ok(Action::await_change())
        }
    }
}

/// `w` (a Service's status write) through [`Ctx::write`], its round trip
/// put in `took`.
async fn timed<T>(
    ctx: &Ctx,
    took: &mut Option<Duration>,
    w: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ReconcileError> {
    let t = Instant::now();
    let r = ctx.write(w).await;
    *took = Some(t.elapsed());
    r
}

/// MetalLB's rate-limited requeue: 1 s doubling per consecutive failure,
/// up to `max_backoff`; reset on success.
fn error_policy(svc: Arc<watched::Service>, err: &ReconcileError, ctx: Arc<Ctx>) -> Action {
    let key = convert::key_of(&*svc);
    if matches!(err, ReconcileError::Conflict) {
        // Not a failure: the watch brings the newer object, and a retry
        // soon decides from it.
        debug!(service = %key, "conflict, deciding again");
        return Action::requeue(CONFLICT_RETRY);
    }
    ctx.shared.update_errors.fetch_add(1, Ordering::Relaxed);
    let mut failures = lock(&ctx.failures);
    let n = failures.entry(key.clone()).or_insert(0);
    let delay = Duration::from_secs(1u64 << (*n).min(20)).min(ctx.max_backoff);
    *n += 1;
    debug!(service = %key, error = %err, ?delay, "requeue");
    Action::requeue(delay)
}

/// How soon a service whose write met a newer version is decided again.
const CONFLICT_RETRY: Duration = Duration::from_millis(100);

/// Writes `svc` back with MetalLB's pool annotation set to `pool` (the
/// deprecated one removed) and `ips` as its ingress (none: both cleared),
/// in one `PUT` to the status subresource carrying the `resourceVersion`
/// the decision was made on, as MetalLB's controller does (its role grants
/// `update` on `services/status` only; the Service status strategy keeps
/// annotation changes). A Service changed since is refused with 409 and
/// reconciled again from its new version.
async fn write_back(
    api: &Api<K8sService>,
    svc: &K8sService,
    pool: Option<&str>,
    ips: &[std::net::IpAddr],
) -> Result<(), kube::Error> {
    let obj = convert::written(svc, pool, ips);
    let name = obj.name_any();
    api.replace_status(&name, &PostParams::default(), &obj)
        .await?;
    Ok(())
}

/// An Event about a Service, queued for [`send_events`].
///
/// During a cold start thousands wait here while the statuses go first
/// (10,000 at a cold start of 10,000), so each holds only what the Event
/// needs: the Service's name, namespace, uid and resource version, and
/// not a whole `ObjectReference` (seven strings and options, `v1` and
/// `Service` among them, built again when it is sent).
#[derive(Debug)]
struct Note {
    subject: Subject,
    type_: EventType,
    reason: &'static str,
    note: Box<str>,
}

/// The Service an Event is about.
#[derive(Debug)]
struct Subject {
    name: Option<Box<str>>,
    namespace: Option<Box<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
}

impl Subject {
    fn of(svc: &K8sService) -> Self {
        let meta = &svc.metadata;
        let boxed = |s: &Option<String>| s.as_deref().map(Box::from);
        Self {
            name: boxed(&meta.name),
            namespace: boxed(&meta.namespace),
            uid: boxed(&meta.uid),
            resource_version: boxed(&meta.resource_version),
        }
    }

    /// The reference an Event carries, as `Resource::object_ref` gives it.
    fn reference(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        let owned = |s: &Option<Box<str>>| s.as_deref().map(str::to_owned);
        k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(K8sService::api_version(&()).into_owned()),
            kind: Some(K8sService::kind(&()).into_owned()),
            name: owned(&self.name),
            namespace: owned(&self.namespace),
            uid: owned(&self.uid),
            resource_version: owned(&self.resource_version),
            field_path: None,
        }
    }
}

/// Queues an Event about `svc`: the reconcile does not wait for it, so a
/// Service's status is written without an Event's round trip in its way.
fn publish(ctx: &Ctx, svc: &K8sService, type_: EventType, reason: &'static str, note: String) {
    let _ = ctx.events.unbounded_send(Note {
        subject: Subject::of(svc),
        type_,
        reason,
        note: note.into(),
    });
}

/// Sends the queued Events, [`EVENTS_IN_FLIGHT`] at a time, so that they
/// take a small share of the apiserver while many statuses are written.
async fn send_events(ctx: Arc<Ctx>, queue: mpsc::UnboundedReceiver<Note>) {
    queue
        .for_each_concurrent(EVENTS_IN_FLIGHT, |n| {
            let ctx = ctx.clone();
            async move { send_event(&ctx, n).await }
        })
        .await;
}

/// Events sent at once (status writes: `--concurrency`, 16 by default).
const EVENTS_IN_FLIGHT: usize = 2;

/// One Event: `events.k8s.io/v1`, else (forbidden, as by MetalLB's role)
/// core/v1. A Normal one (`IPAllocated`, one per change of a Service's
/// addresses) is created as it is: kube-runtime's `Recorder` would keep it
/// six minutes to count repeats, and scan all it keeps on every publish
/// (50,000 at a cold start of 50,000 Services). Warnings, which repeat
/// with each retry, go through the `Recorder`, which counts them.
async fn send_event(ctx: &Ctx, n: Note) {
    let Note {
        subject,
        type_,
        reason,
        note,
    } = n;
    let reference = subject.reference();
    let note = String::from(note);
    let namespace = reference.namespace.clone().unwrap_or_default();
    let api_note = |message: String| api::event::Note {
        type_: match type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
        .into(),
        reason: reason.into(),
        action: "Allocate".into(),
        message,
        component: MANAGER.into(),
        instance: ctx.identity.clone(),
    };
    if !ctx.core_events.load(Ordering::Relaxed) {
        let sent = match type_ {
            EventType::Normal => {
                let ev = api::event::events_v1(
                    reference.clone(),
                    api_note(note.clone()),
                    k8s_openapi::jiff::Timestamp::now(),
                );
                let events: Api<k8s_openapi::api::events::v1::Event> =
                    Api::namespaced(ctx.client.clone(), &namespace);
                ctx.fence
                    .guard(events.create(&PostParams::default(), &ev))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            EventType::Warning => {
                let ev = Event {
                    type_,
                    reason: reason.into(),
                    note: Some(note.clone()),
                    action: "Allocate".into(),
                    secondary: None,
                };
                ctx.fence.guard(ctx.recorder.publish(&ev, &reference)).await
            }
        };
        match sent {
            Ok(Ok(())) => return,
            Err(e) => {
                debug!(error = %e, "event not recorded");
                return;
            }
            Ok(Err(kube::Error::Api(e))) if e.code == 403 => {
                info!(
                    "events.k8s.io is forbidden (MetalLB's role grants core events only): writing core/v1 Events"
                );
                ctx.core_events.store(true, Ordering::Relaxed);
            }
            Ok(Err(e)) => {
                debug!(error = %e, "event not recorded");
                return;
            }
        }
    }
    let ev = api::event::core_v1(
        reference,
        api_note(note),
        k8s_openapi::jiff::Timestamp::now(),
    );
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(ctx.client.clone(), &namespace);
    if let Err(e) = ctx.write(events.create(&PostParams::default(), &ev)).await {
        debug!(error = %e, "event not recorded");
    }
}

/// Writes `IPAddressPool.status` counters every `period` when they changed.
async fn pool_status_writer(
    api: Api<IPAddressPool>,
    shared: Arc<Shared>,
    fence: leader::Fence,
    period: Duration,
) {
    let mut written: BTreeMap<String, IPAddressPoolStatus> = BTreeMap::new();
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let counts = shared.state().pool_counts();
        written.retain(|name, _| counts.iter().any(|c| &c.name == name));
        for c in counts {
            let status = c.status();
            if written.get(&c.name) == Some(&status) {
                continue;
            }
            let patch = json!({"status": status});
            match fence
                .guard(api.patch_status(&c.name, &PatchParams::default(), &Patch::Merge(&patch)))
                .await
            {
                Ok(Ok(_)) => {
                    written.insert(c.name, status);
                }
                Ok(Err(e)) => debug!(pool = %c.name, error = %e, "pool status not written"),
                Err(e) => debug!(pool = %c.name, error = %e, "pool status not written"),
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The name of the controller's `ConfigurationState` (MetalLB's).
pub const CONFIGURATION_STATE: &str = "controller";
/// The label MetalLB puts on `ConfigurationState` objects.
pub const LABEL_COMPONENT_TYPE: &str = "metallb.io/component-type";
/// The reason of the Warning recorded on a Service whose held addresses
/// break a pool rule made after they were given (kept, not moved).
pub const REASON_ADDRESS_KEPT: &str = "AddressKept";
/// The reason of the Warning recorded on a pool that is not in force as
/// written.
pub const REASON_INVALID_POOL: &str = "InvalidConfiguration";

/// Reports refused pool objects: a Warning Event on each (when its problem
/// changes) and the `ConfigurationState` named `controller` (when the
/// summary changes). Writes go through the fence; what failed is written
/// at the next report.
struct ConfigReport {
    states: Api<ConfigurationState>,
    recorder: Recorder,
    fence: leader::Fence,
    /// The problem last reported per pool.
    events: BTreeMap<String, String>,
    /// The summary last written.
    written: Option<(ConfigurationResult, String)>,
}

impl ConfigReport {
    fn new(client: Client, namespace: &str, recorder: Recorder, fence: leader::Fence) -> Self {
        Self {
            states: Api::namespaced(client, namespace),
            recorder,
            fence,
            events: BTreeMap::new(),
            written: None,
        }
    }

    async fn report(&mut self, objects: &[IPAddressPool], update: &pools::Update) {
        self.events
            .retain(|name, _| update.refused.iter().any(|r| &r.pool == name));
        for r in &update.refused {
            let note = r.to_string();
            if self.events.get(&r.pool) == Some(&note) {
                continue;
            }
            warn!(pool = %r.pool, problem = %note, "ipaddresspool not in force as written");
            let Some(obj) = objects.iter().find(|o| o.name_any() == r.pool) else {
                continue;
            };
            let ev = Event {
                type_: EventType::Warning,
                reason: REASON_INVALID_POOL.into(),
                note: Some(note.clone()),
                action: "Validate".into(),
                secondary: None,
            };
            match self
                .fence
                .guard(self.recorder.publish(&ev, &obj.object_ref(&())))
                .await
            {
                Ok(Ok(())) => {
                    self.events.insert(r.pool.clone(), note);
                }
                Ok(Err(e)) => debug!(error = %e, "event not recorded"),
                Err(e) => debug!(error = %e, "event not recorded"),
            }
        }
        let want = if update.refused.is_empty() {
            (ConfigurationResult::Valid, String::new())
        } else {
            let summary: Vec<String> = update.refused.iter().map(ToString::to_string).collect();
            (ConfigurationResult::Invalid, summary.join("\n"))
        };
        if self.written.as_ref() == Some(&want) {
            return;
        }
        match self.write_state(&want).await {
            Ok(()) => self.written = Some(want),
            Err(e) => warn!(error = %e, "configurationstate not written"),
        }
    }

    async fn write_state(
        &self,
        (result, summary): &(ConfigurationResult, String),
    ) -> Result<(), String> {
        let pp = PatchParams::apply(MANAGER).force();
        let object = json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "ConfigurationState",
            "metadata": {
                "name": CONFIGURATION_STATE,
                "labels": {LABEL_COMPONENT_TYPE: "controller"},
            },
        });
        let status = json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "ConfigurationState",
            "status": {"result": result, "errorSummary": summary},
        });
        self.fence
            .guard(
                self.states
                    .patch(CONFIGURATION_STATE, &pp, &Patch::Apply(&object)),
            )
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        self.fence
            .guard(
                self.states
                    .patch_status(CONFIGURATION_STATE, &pp, &Patch::Apply(&status)),
            )
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}
