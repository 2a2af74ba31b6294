//! The Kubernetes source: watches over the objects the speaker reads, each
//! kept in a local cache, turned into one [`Snapshot`] after every change,
//! the same snapshot the file source builds from YAML.
//!
//! Watched: Nodes, Services and `discovery.k8s.io/v1` EndpointSlices in
//! every namespace; in the speaker's own namespace the metallb.io kinds
//! (IPAddressPool, BGPPeer as v1beta2, BGPAdvertisement, L2Advertisement,
//! BFDProfile, Community) and Secrets (BGP passwords); and, for memberlist
//! seeds, the speaker Pods matching a label selector. Nodes, Services and
//! EndpointSlices are read into the speaker's own small types
//! ([`crate::announce::watched`]), deserialised from the stream with every
//! field it never reads skipped, so a whole object is never built, and
//! kept as records without their `ObjectMeta` ([`crate::announce::stored`])
//! in the speaker's own caches ([`super::store`]); so are the Secrets,
//! trimmed. The metallb.io kinds, few and small, stay in kube-runtime's
//! reflector stores, the fields the speaker never reads (managed fields,
//! last-applied annotations) dropped as objects arrive.
//!
//! A change after a quiet spell is sent at once; a change that follows a
//! snapshot within [`COALESCE`] is part of a burst (a rollout, a relist):
//! the snapshot task gathers for [`COALESCE`] before the next one.
//! The metallb.io objects are validated together as the file source does,
//! and only when one of them changed: an inconsistent set is reported and
//! the last good snapshot stays in force.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use api::model::{Model, ObjectKey};
use api::v1beta1::{
    BFDProfile, BGPAdvertisement, Community, IPAddressPool, L2Advertisement, ServiceL2Status,
};
use api::v1beta2::BGPPeer;
use api::validate::{self, Config};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, Secret};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use shell::task::Spawner;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::selected::{self, Keys, Selected, Step};
use super::store::{self, Record};
use super::{Rejected, Reload, Snapshot, file, trim_meta, trim_secret};
use crate::announce::stored;
use crate::announce::watched::{EndpointSlice, Interner, Node, Service};
use crate::announce::{ApiSpeakers, MetallbSpeakers};

/// How long a burst is gathered: a change within this time of the last
/// snapshot waits this long, so a burst (a rollout, a relist) costs one
/// reconcile per window, while a lone change goes at once.
pub const COALESCE: Duration = Duration::from_millis(5);

/// Where and what to watch.
#[derive(Clone, Debug)]
pub struct Options {
    /// The namespace of the metallb.io objects, the Secrets and the
    /// speaker Pods.
    pub namespace: String,
    /// Label selector of the speaker Pods whose IPs are memberlist seeds;
    /// `None`: no Pod watch.
    pub memberlist_labels: Option<String>,
    /// Whether this node's memberlist is isolated, where the speaker Pods
    /// are listed rather than watched: every 5 s while it is, every 5
    /// minutes otherwise.
    pub isolated: Option<watch::Receiver<bool>>,
}

/// The caches other parts read (the status writer looks Services up).
#[derive(Clone)]
pub struct Stores {
    /// Services in every namespace.
    pub services: store::Store<stored::Service>,
}

/// Starts the watches. Snapshots (or the validation problems of the
/// metallb.io objects) go to `tx` after the first complete list and after
/// every change; the speaker Pods (their IPs and the nodes where they are
/// Ready) go to `seeds` whenever they change. Watch errors are logged and retried with backoff; the tasks
/// end when `tx` is closed. Every task is supervised by `tasks`: one that
/// ends while the speaker runs (a watch whose stream ended, the
/// snapshot task) is a failure.
pub fn start(
    client: &Client,
    opts: &Options,
    tx: mpsc::Sender<Reload>,
    seeds: Option<mpsc::UnboundedSender<SpeakerPods>>,
    tasks: &Spawner,
) -> Stores {
    let (changed_tx, changed) = watch::channel(Generations::default());
    let ch = &changed_tx;
    let c = client;
    let ns = opts.namespace.as_str();
    let mut interner = Interner::default();
    let nodes = keep::<Node, _>(tasks, Api::all(c.clone()), ch, Feed::Nodes, move |n| {
        stored::Node::from_watched(n, &mut interner)
    });
    // One interner for Services and EndpointSlices: a slice's Service name
    // is then the string of the Service's key (issue 18).
    let interner = Arc::new(Mutex::new(Interner::default()));
    let labels = Labelled::new();
    let services = keep_services(
        tasks,
        Api::all(c.clone()),
        ch,
        &labels,
        Arc::clone(&interner),
    );
    let slices = keep::<EndpointSlice, _>(tasks, Api::all(c.clone()), ch, Feed::Slices, move |e| {
        stored::EndpointSlice::from_watched(e, &mut lock(&interner))
    });
    let secrets = keep::<Secret, _>(
        tasks,
        Api::namespaced(c.clone(), ns),
        ch,
        Feed::Secrets,
        |mut s| {
            trim_secret(&mut s);
            s
        },
    );
    let pools = reflect::<IPAddressPool>(tasks, Api::namespaced(c.clone(), ns), ch);
    let peers = reflect::<BGPPeer>(tasks, Api::namespaced(c.clone(), ns), ch);
    let bgp_ads = reflect::<BGPAdvertisement>(tasks, Api::namespaced(c.clone(), ns), ch);
    let l2_ads = reflect::<L2Advertisement>(tasks, Api::namespaced(c.clone(), ns), ch);
    let profiles = reflect::<BFDProfile>(tasks, Api::namespaced(c.clone(), ns), ch);
    let communities = reflect::<Community>(tasks, Api::namespaced(c.clone(), ns), ch);
    let caches = Caches {
        nodes,
        services: services.clone(),
        slices,
        secrets,
        pools,
        peers,
        bgp_ads,
        l2_ads,
        profiles,
        communities,
    };
    tasks.spawn(
        "configuration source",
        snapshots(caches, labels, changed, tx),
    );
    if let (Some(labels), Some(seeds)) = (&opts.memberlist_labels, seeds) {
        tasks.spawn(
            "memberlist pod seeds",
            pod_seeds(
                Api::namespaced(client.clone(), ns),
                labels.clone(),
                seeds,
                opts.isolated.clone(),
            ),
        );
    }
    Stores { services }
}

/// Every cache a snapshot is built from: the speaker's own for the lists
/// of a snapshot, kube's for the metallb.io kinds.
struct Caches {
    nodes: store::Store<stored::Node>,
    services: store::Store<stored::Service>,
    slices: store::Store<stored::EndpointSlice>,
    secrets: store::Store<Secret>,
    pools: Store<IPAddressPool>,
    peers: Store<BGPPeer>,
    bgp_ads: Store<BGPAdvertisement>,
    l2_ads: Store<L2Advertisement>,
    profiles: Store<BFDProfile>,
    communities: Store<Community>,
}

impl Caches {
    /// Waits until the metallb.io kinds are listed.
    async fn configured(&self) -> bool {
        self.pools.wait_until_ready().await.is_ok()
            && self.peers.wait_until_ready().await.is_ok()
            && self.bgp_ads.wait_until_ready().await.is_ok()
            && self.l2_ads.wait_until_ready().await.is_ok()
            && self.profiles.wait_until_ready().await.is_ok()
            && self.communities.wait_until_ready().await.is_ok()
    }

    async fn ready(&self) -> bool {
        self.nodes.wait_until_ready().await
            && self.services.wait_until_ready().await
            && self.slices.wait_until_ready().await
            && self.secrets.wait_until_ready().await
            && self.pools.wait_until_ready().await.is_ok()
            && self.peers.wait_until_ready().await.is_ok()
            && self.bgp_ads.wait_until_ready().await.is_ok()
            && self.l2_ads.wait_until_ready().await.is_ok()
            && self.profiles.wait_until_ready().await.is_ok()
            && self.communities.wait_until_ready().await.is_ok()
    }

    /// The metallb.io objects, validated together.
    fn configuration(&self) -> Validated {
        let config = Config {
            pools: sorted(&self.pools),
            peers: sorted(&self.peers),
            bgp_advertisements: sorted(&self.bgp_ads),
            l2_advertisements: sorted(&self.l2_ads),
            bfd_profiles: sorted(&self.profiles),
            communities: sorted(&self.communities),
            // Watches read configuration kinds only.
            status_only: Vec::new(),
        };
        let (model, problems) = validate::config(&config);
        if problems.is_empty() {
            Ok(Arc::new(model))
        } else {
            Err(problems)
        }
    }

    /// The other objects, sorted by namespace and name so that the plans
    /// see a stable order, as a snapshot whose model is still empty: each
    /// cache's list, patched with what changed since the last one (the
    /// same `Arc` where nothing did, [`store::Store::list`]).
    fn cluster(&self) -> Snapshot {
        Snapshot {
            model: Arc::default(),
            nodes: self.nodes.list(),
            services: self.services.list(),
            slices: self.slices.list(),
            secrets: self.secrets.list(),
        }
    }
}

/// The configuration, or why it was refused.
type Validated = Result<Arc<Model>, Vec<validate::Problem>>;

/// What a watch feeds: the configuration (the metallb.io
/// kinds, validated together) or one list of the snapshot. Events are
/// counted per feed ([`Generations`]), so that a snapshot validates the
/// configuration again only when it moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feed {
    Configuration,
    Nodes,
    Services,
    Slices,
    Secrets,
}

/// Events seen per [`Feed`], indexed by it.
type Generations = [u64; 5];

/// A kube store's objects, copied (the metallb.io kinds, few and small,
/// which validation takes by value), sorted by namespace and name.
fn sorted<K>(store: &Store<K>) -> Vec<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let mut items = store.state();
    items.sort_by(|a, b| {
        (a.meta().namespace.as_deref(), a.meta().name.as_deref())
            .cmp(&(b.meta().namespace.as_deref(), b.meta().name.as_deref()))
    });
    items.iter().map(|o| (**o).clone()).collect()
}

/// Builds and sends a snapshot after the caches are complete and after
/// every change, at most one per [`COALESCE`] in a burst, and only when `tx` has
/// room for it (so it holds every change until the moment it is taken).
/// `changed` counts the events of each [`Feed`]: the configuration is
/// validated again only when its count moved. Each list of the snapshot is
/// the last one patched with the objects its cache saw change
/// ([`store::Store::list`]), the same `Arc` when none did (which tells
/// the reconcile loop, by pointer, that it did not change), and read
/// again from its cache only after a relist: a change costs its
/// keys' binary searches and a copy of the list's pointers, not a sort of
/// the cache.
async fn snapshots(
    caches: Caches,
    labels: Labelled,
    mut changed: watch::Receiver<Generations>,
    tx: mpsc::Sender<Reload>,
) {
    // The Services' watch starts once the configuration tells which label
    // keys their records keep.
    if !caches.configured().await {
        return;
    }
    let mut selected = Selected::default();
    labels.apply(&selected.step(caches.configuration().ok().as_ref(), None));
    if !caches.ready().await {
        return;
    }
    info!("kubernetes caches synced");
    let mut woken = Instant::now();
    let mut last: Option<(Generations, Validated)> = None;
    loop {
        // Built once the reconcile loop can take it: while it works on the
        // last one, changes keep gathering here.
        let Ok(permit) = tx.reserve().await else {
            return;
        };
        // Read before the caches: a later event moves it again.
        let now = *changed.borrow_and_update();
        let start = Instant::now();
        let before = last.as_ref().map(|(g, ..)| *g);
        let moved = |feed: Feed| before.is_none_or(|g| g[feed as usize] != now[feed as usize]);
        let revalidate = moved(Feed::Configuration);
        let configuration = match &last {
            Some((_, v)) if !revalidate => v.clone(),
            _ => caches.configuration(),
        };
        // Before the Services' list: one swapped in after this is newer.
        let listed = labels.listed();
        let step = selected.step(configuration.as_ref().ok(), listed);
        labels.apply(&step);
        let snap = caches.cluster();
        last = Some((now, configuration.clone()));
        let reload = match (configuration, step.model) {
            (Ok(_), Some(model)) => Ok(Snapshot { model, ..snap }),
            (Err(problems), _) => Err(Rejected {
                errors: problems.into_iter().map(file::Error::Invalid).collect(),
                cluster: Some(Box::new(snap)),
            }),
            // No configuration in force yet, the first valid one waiting
            // for its list: nothing to send.
            (Ok(_), None) => {
                drop(permit);
                if changed.changed().await.is_err() {
                    return;
                }
                woken = Instant::now();
                continue;
            }
        };
        let built = start.elapsed();
        permit.send(reload);
        debug!(
            waited_us = (start - woken).as_micros(),
            built_us = built.as_micros(),
            validated = revalidate,
            "snapshot sent"
        );
        if changed.changed().await.is_err() {
            return;
        }
        woken = Instant::now();
        // A lone change goes at once; one close behind the last snapshot is
        // part of a burst: gather the rest of it for a whole window.
        if woken.duration_since(start) < COALESCE {
            tokio::time::sleep(COALESCE).await;
        }
    }
}

/// Runs one watch of a kind the speaker keeps in its own cache: turns
/// each object into its record with `record` as it arrives (the watched
/// object, its `ObjectMeta` among it, is dropped there), applies the
/// events to the cache and counts, under `feed`, each event that changed
/// what the cache shows.
fn keep<K, T>(
    tasks: &Spawner,
    api: Api<K>,
    changed: &watch::Sender<Generations>,
    feed: Feed,
    mut record: impl FnMut(K) -> T + Send + 'static,
) -> store::Store<T>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    T: Record + PartialEq + Send + Sync + 'static,
{
    let (reader, mut writer) = store::store();
    watch_events(tasks, api, changed, feed, None, move |event| {
        writer.apply(match event {
            watcher::Event::Apply(o) => watcher::Event::Apply(record(o)),
            watcher::Event::Delete(o) => watcher::Event::Delete(record(o)),
            watcher::Event::InitApply(o) => watcher::Event::InitApply(record(o)),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
        })
    });
    reader
}

/// What the snapshot task and the Services' watch share of the label keys
/// a Service's record keeps ([`Selected`]).
#[derive(Clone)]
struct Labelled {
    state: Arc<Mutex<LabelState>>,
    /// The generation of keys the Services' watch lists with: it starts
    /// at the first, and lists again at each later one sent.
    restart: Arc<watch::Sender<u64>>,
}

#[derive(Default)]
struct LabelState {
    /// The keys records are made with now, and their generation.
    keep: (u64, Keys),
    /// The generation of keys of the last whole list, set once it is
    /// swapped into the cache.
    listed: Option<u64>,
}

impl Labelled {
    fn new() -> Self {
        Self {
            state: Arc::default(),
            restart: Arc::new(watch::channel(0).0),
        }
    }

    fn state(&self) -> MutexGuard<'_, LabelState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The generation of keys of the Services' last whole list.
    fn listed(&self) -> Option<u64> {
        self.state().listed
    }

    /// Makes the records with the step's keys from now on, and starts the
    /// Services' list again when it asks to.
    fn apply(&self, step: &Step) {
        let Some((generation, keys)) = &step.keep else {
            return;
        };
        self.state().keep = (*generation, Arc::clone(keys));
        if step.relist {
            if *generation > 1 {
                RELISTS.fetch_add(1, Ordering::Relaxed);
                info!(
                    keys = ?keys,
                    "the configuration reads a Service label key the Services' records lack: listing the Services again; the configuration in force stays until then"
                );
            }
            self.restart.send_replace(*generation);
        } else {
            debug!(keys = ?keys, "Service label keys kept");
        }
    }
}

/// Times the Services were listed again because the configuration named
/// a label key their records lack (`ferrolb_services_relists_total`).
static RELISTS: AtomicU64 = AtomicU64::new(0);

/// `ferrolb_services_relists_total`: what the metrics page shows of the
/// Services' lists for new label keys.
pub fn render_relists() -> String {
    format!(
        "# HELP ferrolb_services_relists_total Times the Services were listed again because the configuration's serviceSelectors named a label key the speaker did not keep\n\
         # TYPE ferrolb_services_relists_total counter\n\
         ferrolb_services_relists_total {}\n",
        RELISTS.load(Ordering::Relaxed)
    )
}

/// Runs the Services' watch into their cache through a [`ServicesFeed`];
/// the watch starts at the first generation of keys and lists again at
/// each later one.
fn keep_services(
    tasks: &Spawner,
    api: Api<Service>,
    changed: &watch::Sender<Generations>,
    labels: &Labelled,
    interner: Arc<Mutex<Interner>>,
) -> store::Store<stored::Service> {
    let (reader, writer) = store::store();
    let mut feed = ServicesFeed {
        writer,
        labels: labels.clone(),
        interner,
        listing: 0,
    };
    let restart = labels.restart.subscribe();
    watch_events(
        tasks,
        api,
        changed,
        Feed::Services,
        Some(restart),
        move |event| feed.apply(event),
    );
    reader
}

/// The Services' watch events into their cache ([`keep`]'s work, and
/// more): each record keeps only the labels whose keys the shared
/// [`Labelled`] names now ([`selected::only`]); a whole list, once swapped
/// in, reports the generation of keys it was made with.
struct ServicesFeed {
    writer: store::Writer<stored::Service>,
    labels: Labelled,
    interner: Arc<Mutex<Interner>>,
    /// The generation of keys the list being read is made with.
    listing: u64,
}

impl ServicesFeed {
    /// Applies one event; true when what the cache shows changed.
    fn apply(&mut self, event: watcher::Event<Service>) -> bool {
        let (generation, keys) = self.labels.state().keep.clone();
        let interner = &self.interner;
        let record = |mut s: Service| {
            s.labels = selected::only(&s.labels, &keys);
            stored::Service::from_watched(s, &mut lock(interner))
        };
        match event {
            watcher::Event::Apply(o) => self.writer.apply(watcher::Event::Apply(record(o))),
            watcher::Event::Delete(o) => self.writer.apply(watcher::Event::Delete(record(o))),
            watcher::Event::InitApply(o) => self.writer.apply(watcher::Event::InitApply(record(o))),
            watcher::Event::Init => {
                self.listing = generation;
                self.writer.apply(watcher::Event::Init)
            }
            watcher::Event::InitDone => {
                let swapped = self.writer.apply(watcher::Event::InitDone);
                // After the swap: the snapshot task reads this before the
                // list.
                self.labels.state().listed = Some(self.listing);
                swapped
            }
        }
    }
}

/// The interner the Services' and EndpointSlices' watches share (a panic
/// while one held it leaves its tables valid: each insertion is whole).
fn lock(interner: &Mutex<Interner>) -> MutexGuard<'_, Interner> {
    interner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one watch of a metallb.io kind into a kube reflector store, the
/// fields the speaker never reads dropped; its events count under
/// [`Feed::Configuration`].
fn reflect<K>(tasks: &Spawner, api: Api<K>, changed: &watch::Sender<Generations>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, mut writer) = reflector::store();
    watch_events(
        tasks,
        api,
        changed,
        Feed::Configuration,
        None,
        move |event| {
            let event = event.modify(|o| {
                let meta = o.meta_mut();
                meta.managed_fields = None;
                if let Some(a) = meta.annotations.as_mut() {
                    a.remove(LAST_APPLIED);
                }
            });
            writer.apply_watcher_event(&event);
            // The store swaps in a (re)list at InitDone, not before.
            !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_))
        },
    );
    reader
}

/// Runs one watch: hands each event to `apply`, and pings the snapshot
/// task under `feed` when `apply` says it changed what a cache shows.
/// With `restart`, the watch starts once its value is not 0, and starts
/// again (a whole list) whenever it changes.
fn watch_events<K>(
    tasks: &Spawner,
    api: Api<K>,
    changed: &watch::Sender<Generations>,
    feed: Feed,
    mut restart: Option<watch::Receiver<u64>>,
    mut apply: impl FnMut(watcher::Event<K>) -> bool + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let changed = changed.clone();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let start = move || watcher(api.clone(), watcher::Config::default()).default_backoff();
    tasks.spawn(format!("reflector {kind}"), async move {
        if let Some(rx) = restart.as_mut() {
            let started = rx.wait_for(|g| *g > 0).await.is_ok();
            if !started {
                return;
            }
        }
        let mut stream = std::pin::pin!(start());
        loop {
            let next = match restart.as_mut() {
                Some(rx) => tokio::select! {
                    next = stream.try_next() => Some(next),
                    r = rx.changed() => {
                        if r.is_err() {
                            return;
                        }
                        None
                    }
                },
                None => Some(stream.try_next().await),
            };
            let Some(next) = next else {
                // A new list, from a watch of its own.
                debug!(kind, "watch restarted");
                stream.set(start());
                continue;
            };
            match next {
                Ok(Some(ev)) => {
                    if apply(ev) {
                        debug!(kind, "watch event");
                        ping(&changed, feed);
                    }
                }
                Ok(None) => return,
                // 410 Gone: the watch's resource version was compacted
                // away; the watcher lists again. Routine, not a failure.
                Err(watcher::Error::WatchError(status)) if status.code == 410 => {
                    debug!(kind, "watch expired, listing again");
                }
                Err(e) => warn!(kind, error = %e, "watch failed, retrying"),
            }
            if changed.is_closed() {
                return;
            }
        }
    });
}

/// Tells the snapshot task that a cache of `feed` changed.
fn ping(changed: &watch::Sender<Generations>, feed: Feed) {
    changed.send_modify(|g| g[feed as usize] += 1);
}

/// Sends the running speaker Pods (their IPs, with `hostNetwork` the
/// nodes' addresses, and the nodes where they are Ready) whenever they
/// change. Watches them, each trimmed as it arrives ([`trim_pod`]); where
/// the role grants only `list` (MetalLB's does), lists them instead: every
/// [`POD_POLL`] while memberlist is isolated (the Ready speakers then
/// decide, and the seeds are how it rejoins), every [`POD_POLL_QUIET`]
/// otherwise, as MetalLB's speakers list them (with a speaker on each of
/// thousands of nodes, each listing every speaker Pod every few seconds
/// would be the apiserver's main load).
async fn pod_seeds(
    api: Api<Pod>,
    labels: String,
    seeds: mpsc::UnboundedSender<SpeakerPods>,
    mut isolated: Option<watch::Receiver<bool>>,
) {
    let (reader, writer) = reflector::store();
    let stream = watcher(api.clone(), watcher::Config::default().labels(&labels))
        .default_backoff()
        .modify(trim_pod)
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    let mut last = None;
    loop {
        match stream.next().await {
            // The store swaps in a (re)list at InitDone, not before.
            Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
            Some(Ok(_)) => {}
            Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(e)))) if e.code == 403 => {
                info!(
                    every_s = POD_POLL.as_secs(),
                    "watching the speaker Pods is forbidden (MetalLB's role grants list only): listing them periodically instead"
                );
                break;
            }
            Some(Err(e)) => {
                warn!(error = %e, "speaker pod watch failed, retrying");
                continue;
            }
            None => return,
        }
        if !send_seeds(&seeds, &mut last, speaker_pods(&reader.state())) {
            return;
        }
    }
    let params = ListParams::default().labels(&labels);
    loop {
        let listed = match api.list(&params).await {
            Ok(list) => {
                let pods: Vec<Arc<Pod>> = list.items.into_iter().map(Arc::new).collect();
                if !send_seeds(&seeds, &mut last, speaker_pods(&pods)) {
                    return;
                }
                true
            }
            Err(e) => {
                warn!(error = %e, "listing the speaker pods failed, retrying");
                false
            }
        };
        // Quiet only after a good list and while not isolated; an
        // isolation that starts meanwhile cuts the wait short.
        match isolated.as_mut().filter(|rx| listed && !*rx.borrow()) {
            Some(rx) => {
                let isolation = tokio::select! {
                    () = tokio::time::sleep(POD_POLL_QUIET) => true,
                    r = rx.wait_for(|i| *i) => r.is_ok(),
                };
                // Its sender gone (the speaker stops): no cut-short waits.
                if !isolation {
                    tokio::time::sleep(POD_POLL_QUIET).await;
                }
            }
            None => tokio::time::sleep(POD_POLL).await,
        }
    }
}

/// How often the speaker Pods are listed when they cannot be watched,
/// while memberlist is isolated or the last list failed.
const POD_POLL: Duration = Duration::from_secs(5);

/// How often they are listed otherwise: MetalLB's speakers list them every
/// five minutes (`speakerlist.updateSpeakerIPs`).
const POD_POLL_QUIET: Duration = Duration::from_secs(300);

/// Drops from a speaker Pod, as it arrives, what [`speaker_pods`] never
/// reads: its containers, volumes, managed fields, labels, annotations and
/// every status but the Pod IPs and the Ready condition. With a speaker on
/// each of thousands of nodes the cache holds thousands of them, each
/// several kilobytes whole.
pub fn trim_pod(pod: &mut Pod) {
    trim_meta(&mut pod.metadata);
    pod.spec = pod.spec.take().map(|s| PodSpec {
        node_name: s.node_name,
        ..PodSpec::default()
    });
    pod.status = pod.status.take().map(|s| PodStatus {
        pod_ips: s.pod_ips,
        conditions: s
            .conditions
            .map(|c| c.into_iter().filter(|c| c.type_ == "Ready").collect()),
        ..PodStatus::default()
    });
}

/// What the speaker Pods tell: where memberlist members are expected, and
/// which nodes have a speaker ready to serve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpeakerPods {
    /// The IPs of the Pods not being deleted (memberlist seeds).
    pub ips: BTreeSet<IpAddr>,
    /// The nodes of the Pods not being deleted whose `Ready` condition is
    /// `True`.
    pub ready: BTreeSet<String>,
}

/// What the speaker Pods (those of the `--memberlist-labels` selector) tell;
/// `kubectl ferrolb` reads them with this too.
pub fn speaker_pods(pods: &[Arc<Pod>]) -> SpeakerPods {
    let live = || {
        pods.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
    };
    SpeakerPods {
        ips: live()
            .filter_map(|p| p.status.as_ref())
            .flat_map(|s| s.pod_ips.iter().flatten())
            .filter_map(|ip| ip.ip.parse().ok())
            .collect(),
        ready: live()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect(),
    }
}

/// While this node's memberlist is isolated, lists the ServiceL2Status
/// objects every [`CLAIMS_POLL`] and keeps `speakers.l2_announcers`
/// current (empty otherwise): which node answers for which service, as
/// the other speakers published it. Not a watch: every speaker would then
/// receive every status change of the cluster for a case that is rare.
pub async fn l2_claims(
    api: Api<ServiceL2Status>,
    mut isolated: watch::Receiver<bool>,
    speakers: Arc<watch::Sender<Arc<ApiSpeakers>>>,
) {
    loop {
        if isolated.wait_for(|i| *i).await.is_err() {
            return;
        }
        info!(
            "memberlist isolated: reading the ServiceL2Status objects, to leave alone what other Ready speakers answer for"
        );
        while *isolated.borrow_and_update() {
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    let claims = l2_announcers(&list.items);
                    speakers.send_if_modified(|s| {
                        let changed = s.l2_announcers != claims;
                        if changed {
                            Arc::make_mut(s).l2_announcers = claims;
                        }
                        changed
                    });
                }
                Err(e) => warn!(error = %e, "listing the ServiceL2Status objects failed, retrying"),
            }
            tokio::select! {
                () = tokio::time::sleep(CLAIMS_POLL) => {}
                r = isolated.changed() => if r.is_err() {
                    return;
                },
            }
        }
        speakers.send_if_modified(|s| {
            let changed = !s.l2_announcers.is_empty();
            Arc::make_mut(s).l2_announcers.clear();
            changed
        });
    }
}

/// Keeps `speakers.metallb` current while ferrolb replaces MetalLB
/// (`--metallb-speaker-labels`): follows MetalLB's speaker Pods (the
/// `labels` selector) and the ServiceL2Status objects, and sends what they
/// tell ([`metallb_speakers`]) once both are listed and whenever it changes.
/// Each is watched; where the role grants only `list` (ferrolb's grants no
/// watch on ServiceL2Status, MetalLB's none on Pods), it is listed every
/// [`METALLB_POLL`] instead.
pub async fn metallb_feed(
    pods: Api<Pod>,
    statuses: Api<ServiceL2Status>,
    advertisements: Api<L2Advertisement>,
    labels: String,
    speakers: Arc<watch::Sender<Arc<ApiSpeakers>>>,
) {
    info!(selector = %labels, "coexisting with MetalLB: layer 2 services stay with MetalLB's speakers while one can answer");
    let (tx, mut rx) = mpsc::unbounded_channel::<Listed>();
    let follow_pods = follow(pods, Some(labels), "MetalLB's speaker Pods", {
        let tx = tx.clone();
        move |l| tx.send(Listed::Pods(l)).is_ok()
    });
    let follow_statuses = follow(statuses, None, "ServiceL2Status objects", {
        let tx = tx.clone();
        move |l| tx.send(Listed::Statuses(l)).is_ok()
    });
    let follow_ads = follow(
        advertisements,
        None,
        "MetalLB's L2Advertisements",
        move |l| tx.send(Listed::Advertisements(l.len())).is_ok(),
    );
    let apply = async move {
        let (mut pods, mut statuses, mut ads) = (None, None, None);
        while let Some(listed) = rx.recv().await {
            match listed {
                Listed::Pods(p) => pods = Some(p),
                Listed::Statuses(s) => statuses = Some(s),
                Listed::Advertisements(n) => ads = Some(n),
            }
            let (Some(p), Some(s), Some(a)) = (&pods, &statuses, ads) else {
                continue;
            };
            let now = metallb_speakers(p, s, a > 0);
            speakers.send_if_modified(|s| {
                let changed = s.metallb.as_ref() != Some(&now);
                if changed {
                    debug!(running = ?now.running, owners = ?now.l2_owners, "MetalLB's speakers changed");
                    Arc::make_mut(s).metallb = Some(now);
                }
                changed
            });
        }
    };
    futures::join!(follow_pods, follow_statuses, follow_ads, apply);
}

/// A whole list of one kind the MetalLB feed follows.
enum Listed {
    Pods(Vec<Arc<Pod>>),
    Statuses(Vec<Arc<ServiceL2Status>>),
    /// How many L2Advertisements MetalLB's namespace has.
    Advertisements(usize),
}

/// How often the MetalLB feed lists what it may not watch.
pub const METALLB_POLL: Duration = Duration::from_secs(1);

/// Hands every whole list of `api` (with the `labels` selector) to `send`,
/// after each change: watched, or listed every [`METALLB_POLL`] when a
/// watch is forbidden. Returns when `send` returns false.
async fn follow<K>(
    api: Api<K>,
    labels: Option<String>,
    what: &'static str,
    send: impl Fn(Vec<Arc<K>>) -> bool,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut config = watcher::Config::default();
    let mut params = ListParams::default();
    if let Some(l) = &labels {
        config = config.labels(l);
        params = params.labels(l);
    }
    let (reader, writer) = reflector::store();
    let stream = watcher(api.clone(), config)
        .default_backoff()
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    let mut listed = false;
    loop {
        match stream.next().await {
            Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
            Some(Ok(watcher::Event::InitDone)) => listed = true,
            Some(Ok(_)) => {}
            Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(e)))) if e.code == 403 => {
                info!(
                    what,
                    every_ms = METALLB_POLL.as_millis() as u64,
                    "watching is forbidden: listing periodically instead"
                );
                break;
            }
            Some(Err(e)) => {
                warn!(what, error = %e, "watch failed, retrying");
                continue;
            }
            None => return,
        }
        if listed && !send(reader.state()) {
            return;
        }
    }
    loop {
        match api.list(&params).await {
            Ok(list) => {
                if !send(list.items.into_iter().map(Arc::new).collect()) {
                    return;
                }
            }
            Err(e) => warn!(what, error = %e, "listing failed, retrying"),
        }
        tokio::time::sleep(METALLB_POLL).await;
    }
}

/// What MetalLB's speaker Pods and the ServiceL2Status objects tell: the
/// nodes where a MetalLB speaker runs (its Pod `Ready`, deleted or not: it
/// answers until its process exits), the nodes where its Pod is at all,
/// and per service the nodes named by the statuses a MetalLB speaker Pod
/// owns (ferrolb's own are not); `l2_advertised`: MetalLB's namespace has
/// an L2Advertisement.
pub fn metallb_speakers(
    pods: &[Arc<Pod>],
    statuses: &[Arc<ServiceL2Status>],
    l2_advertised: bool,
) -> MetallbSpeakers {
    let running = pods
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let present = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let names: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let mut l2_owners: BTreeMap<ObjectKey, BTreeSet<String>> = BTreeMap::new();
    for o in statuses {
        let owned = o
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.kind == "Pod" && names.contains(r.name.as_str()));
        let Some(s) = o.status.as_ref().filter(|_| owned) else {
            continue;
        };
        if s.node.is_empty() || s.service_name.is_empty() {
            continue;
        }
        l2_owners
            .entry(ObjectKey::new(&s.service_namespace, &s.service_name))
            .or_default()
            .insert(s.node.clone());
    }
    MetallbSpeakers {
        synced: true,
        running,
        l2_owners,
        present,
        l2_advertised,
    }
}

/// How often an isolated speaker lists the ServiceL2Status objects.
pub const CLAIMS_POLL: Duration = Duration::from_secs(2);

/// By service, the nodes the statuses name.
pub fn l2_announcers(statuses: &[ServiceL2Status]) -> BTreeMap<ObjectKey, BTreeSet<String>> {
    let mut out: BTreeMap<ObjectKey, BTreeSet<String>> = BTreeMap::new();
    for s in statuses.iter().filter_map(|o| o.status.as_ref()) {
        if s.node.is_empty() || s.service_name.is_empty() {
            continue;
        }
        out.entry(ObjectKey::new(&s.service_namespace, &s.service_name))
            .or_default()
            .insert(s.node.clone());
    }
    out
}

/// Sends `ips` when they differ from the `last` sent; false when the
/// receiver is gone.
fn send_seeds(
    seeds: &mpsc::UnboundedSender<SpeakerPods>,
    last: &mut Option<SpeakerPods>,
    pods: SpeakerPods,
) -> bool {
    if last.as_ref() == Some(&pods) {
        return true;
    }
    debug!(ips = ?pods.ips, ready = ?pods.ready, "speaker pods changed");
    *last = Some(pods.clone());
    seeds.send(pods).is_ok()
}

/// The seeds to join for a set of speaker Pod IPs: each on the memberlist
/// port, without this member's own address.
pub fn seed_addrs(ips: &BTreeSet<IpAddr>, port: u16, own: SocketAddr) -> Vec<SocketAddr> {
    ips.iter()
        .map(|ip| SocketAddr::new(*ip, port))
        .filter(|a| *a != own)
        .collect()
}

/// kubectl's copy of the last applied object: large, never read.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[cfg(test)]
mod heap_at_scale;

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;
    use serde_json::{Value, json};

    use super::*;
    use crate::announce::stored::Name;
    use crate::announce::watched::SERVICE_NAME_LABEL;
    use crate::announce::{Endpoint, TrafficPolicy};

    /// What the caches keep of a Node, an EndpointSlice and a Service as
    /// the apiserver sends them: what the view reads, their names (the
    /// cache's keys), a Service's uid (Events name it); not the fields it never reads (owner references, managed
    /// fields, ports, cluster IPs, node info, other annotations and labels,
    /// endpoint addresses beyond whether there is one, resource versions,
    /// which only the watch reads).
    #[test]
    fn caches_keep_what_the_view_reads() {
        let meta = json!({"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"a": "b", LAST_APPLIED: "{}"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "s"}]});
        let mut slice_meta = meta.clone();
        slice_meta["labels"] = json!({SERVICE_NAME_LABEL: "web",
            "endpointslice.kubernetes.io/managed-by": "c"});
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": slice_meta, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"], "nodeName": "n1",
                           "conditions": {"ready": true}, "zone": "z",
                           "targetRef": {"kind": "Pod", "name": "p"}},
                          {"addresses": [], "conditions": {"serving": false, "terminating": true}}],
            "ports": [{"port": 80}],
        }))
        .unwrap();
        // The watch reads the resource version; the record drops it.
        assert_eq!(slice.metadata.resource_version.as_deref(), Some("7"));
        let mut interner = Interner::default();
        let slice = stored::EndpointSlice::from_watched(slice, &mut interner);
        let want = stored::EndpointSlice::new(
            "ns".into(),
            "x",
            Some("web".into()),
            vec![
                Endpoint {
                    node: Some("n1".into()),
                    has_address: true,
                    ready: Some(true),
                    serving: None,
                    terminating: None,
                }
                .into(),
                Endpoint {
                    node: None,
                    has_address: false,
                    ready: None,
                    serving: Some(false),
                    terminating: Some(true),
                }
                .into(),
            ],
        );
        assert_eq!(slice, want);
        assert_eq!(slice.order(), ("ns", Name::whole("x")));

        let mut node_meta = meta.clone();
        node_meta["labels"] = json!({"zone": "a"});
        node_meta
            .as_object_mut()
            .unwrap_or_else(|| panic!())
            .remove("namespace");
        let node: Node = serde_json::from_value(json!({
            "metadata": node_meta, "spec": {"podCIDR": "10.244.0.0/24"},
            "status": {"addresses": [{"type": "Hostname", "address": "x"},
                                     {"type": "ExternalIP", "address": "203.0.113.1"},
                                     {"type": "InternalIP", "address": "10.0.0.2"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "r",
                                       "message": "m"}],
                       "images": [{"names": ["i"], "sizeBytes": 1}],
                       "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                                    "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "",
                                    "machineID": "", "operatingSystem": "linux", "osImage": "",
                                    "systemUUID": ""}},
        }))
        .unwrap();
        let node = stored::Node::from_watched(node, &mut interner);
        let want = stored::Node {
            name: "x".into(),
            labels: [("zone", "a")].into_iter().collect(),
            conditions: [("Ready", "True")].into_iter().collect(),
            // InternalIP first.
            addresses: [
                "10.0.0.2".parse().unwrap_or_else(|e| panic!("{e}")),
                "203.0.113.1".parse().unwrap_or_else(|e| panic!("{e}")),
            ]
            .into(),
        };
        assert_eq!(node, want);
        assert_eq!(node.order(), ("", Name::whole("x")));

        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                         "labels": {"app": "web"}, "finalizers": ["f"],
                         "annotations": {"metallb.io/ip-allocated-from-pool": "p",
                                         "metallb.universe.tf/allow-shared-ip": "k",
                                         "meta.helm.sh/release-name": "web",
                                         LAST_APPLIED: "{\"big\": true}"}},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], "clusterIP": "10.96.0.9",
                     "selector": {"app": "web"}, "externalTrafficPolicy": "Local",
                     "loadBalancerClass": "ferrolb"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1", "ipMode": "VIP"},
                                                    {"hostname": "lb.example"}]},
                       "conditions": [{"type": "t", "status": "True", "lastTransitionTime":
                                       "2026-01-01T00:00:00Z", "reason": "r", "message": "m"}]},
        }))
        .unwrap();
        let svc = stored::Service::from_watched(svc, &mut interner);
        let want = stored::Service {
            key: ObjectKey::new("ns", "web"),
            uid: Some(stored::Uid::new("u")),
            labels: [("app", "web")].into_iter().collect(),
            annotations: [
                ("metallb.io/ip-allocated-from-pool", "p"),
                ("metallb.universe.tf/allow-shared-ip", "k"),
            ]
            .into_iter()
            .collect(),
            load_balancer: true,
            load_balancer_class: Some("ferrolb".into()),
            external_traffic_policy: TrafficPolicy::Local,
            ingress: ["192.0.2.1".parse().unwrap()].into(),
        };
        assert_eq!(svc, want);
        // The namespace is one string for the slice and the Service.
        assert!(Arc::ptr_eq(&svc.key.namespace, slice.namespace()));
    }

    /// Caches fed by hand instead of by watches.
    struct Lab {
        services: ServicesFeed,
        pools: Writer<IPAddressPool>,
        l2_ads: Writer<L2Advertisement>,
        labels: Labelled,
        changed: watch::Sender<Generations>,
    }

    /// One of the speaker's own caches, its initial list complete (and
    /// empty), and its writer.
    fn listed<T: Record + PartialEq>() -> (store::Store<T>, store::Writer<T>) {
        let (store, mut writer) = store::store();
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitDone);
        (store, writer)
    }

    /// A kube cache (a metallb.io kind), its initial list complete.
    fn reflected<K>() -> (Store<K>, Writer<K>)
    where
        K: Resource + Clone + 'static,
        K::DynamicType: Default + Eq + Hash + Clone,
    {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        (store, writer)
    }

    impl Lab {
        /// The snapshot task over empty caches, and where it sends.
        fn start() -> (Self, mpsc::Receiver<Reload>) {
            let (services, services_w) = listed();
            let (pools, pools_w) = reflected();
            let (l2_ads, l2_ads_w) = reflected();
            let labels = Labelled::new();
            let caches = Caches {
                nodes: listed().0,
                services,
                slices: listed().0,
                secrets: listed().0,
                pools,
                peers: reflected().0,
                bgp_ads: reflected().0,
                l2_ads,
                profiles: reflected().0,
                communities: reflected().0,
            };
            let (changed, rx) = watch::channel(Generations::default());
            let (tx, reloads) = mpsc::channel(1);
            tokio::spawn(snapshots(caches, labels.clone(), rx, tx));
            let lab = Self {
                services: ServicesFeed {
                    writer: services_w,
                    labels: labels.clone(),
                    interner: Arc::default(),
                    listing: 0,
                },
                pools: pools_w,
                l2_ads: l2_ads_w,
                labels,
                changed,
            };
            (lab, reloads)
        }

        fn service(&mut self, name: &str) {
            self.labelled(name, &json!({}));
        }

        /// A LoadBalancer Service `apps/name` with these labels.
        fn watched(name: &str, labels: &Value) -> Service {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "apps", "labels": labels},
                "spec": {"type": "LoadBalancer"},
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        }

        fn labelled(&mut self, name: &str, labels: &Value) {
            let s = Self::watched(name, labels);
            assert!(self.services.apply(watcher::Event::Apply(s)));
            ping(&self.changed, Feed::Services);
        }

        /// The Services listed again, as the watch does when restarted.
        fn relist(&mut self, services: &[(&str, Value)]) {
            self.services.apply(watcher::Event::Init);
            for (name, labels) in services {
                let s = Self::watched(name, labels);
                self.services.apply(watcher::Event::InitApply(s));
            }
            assert!(self.services.apply(watcher::Event::InitDone));
            ping(&self.changed, Feed::Services);
        }

        /// The L2Advertisement `l2` with these `serviceSelectors`.
        fn l2_advertisement(&mut self, selectors: &Value) {
            let a: L2Advertisement = serde_json::from_value(json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
                "metadata": {"name": "l2", "namespace": "metallb-system"},
                "spec": {"serviceSelectors": selectors},
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            self.l2_ads.apply_watcher_event(&watcher::Event::Apply(a));
            ping(&self.changed, Feed::Configuration);
        }

        fn pool(&mut self, name: &str, addresses: &str) {
            let p: IPAddressPool = serde_json::from_value(json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                "metadata": {"name": name, "namespace": "metallb-system"},
                "spec": {"addresses": [addresses]},
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            self.pools.apply_watcher_event(&watcher::Event::Apply(p));
            ping(&self.changed, Feed::Configuration);
        }
    }

    async fn next(reloads: &mut mpsc::Receiver<Reload>) -> Reload {
        reloads
            .recv()
            .await
            .unwrap_or_else(|| panic!("the snapshot task ended"))
    }

    fn accepted(reload: Reload) -> Snapshot {
        match reload {
            Ok(s) => s,
            Err(e) => panic!("refused: {e:?}"),
        }
    }

    fn refused(reload: Reload) -> (Vec<String>, usize) {
        match reload {
            Ok(s) => panic!("accepted: {s:?}"),
            Err(r) => (
                r.errors.iter().map(ToString::to_string).collect(),
                r.cluster.map_or(0, |c| c.services.len()),
            ),
        }
    }

    /// Issue 18: a change after a quiet spell is sent at once (it used to
    /// wait [`COALESCE`] first); a burst of 1,000 changes, 10 µs apart, is
    /// at most one snapshot per [`COALESCE`], and the last holds them all.
    #[tokio::test(start_paused = true)]
    async fn a_lone_change_goes_at_once_and_a_burst_is_one_snapshot_per_window() {
        let (mut lab, mut reloads) = Lab::start();
        accepted(next(&mut reloads).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = Instant::now();
        lab.service("lone");
        assert_eq!(accepted(next(&mut reloads).await).services.len(), 1);
        assert_eq!(t.elapsed(), Duration::ZERO);

        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = Instant::now();
        let mut snapshots = 0;
        for i in 0..1000 {
            lab.service(&format!("s{i}"));
            tokio::time::advance(Duration::from_micros(10)).await;
            while reloads.try_recv().is_ok() {
                snapshots += 1;
            }
        }
        loop {
            snapshots += 1;
            if accepted(next(&mut reloads).await).services.len() == 1001 {
                break;
            }
        }
        let windows = t.elapsed().as_micros() / COALESCE.as_micros();
        assert!(
            snapshots <= windows + 1,
            "{snapshots} snapshots in {:?}",
            t.elapsed()
        );
    }

    /// Issue 18: a change to a Service, a Node or an EndpointSlice does not
    /// validate the configuration again; the snapshot carries the same
    /// `Arc<Model>` (the keyed state then sees, by pointer, that the
    /// configuration did not change), and the same list of each kind none
    /// of whose objects changed. A metallb.io change does; an invalid
    /// configuration is reported again, with the current objects.
    #[tokio::test(start_paused = true)]
    async fn only_what_changed_is_validated_or_listed_again() {
        let (mut lab, mut reloads) = Lab::start();
        lab.pool("pool", "198.51.100.0/24");
        let first = accepted(next(&mut reloads).await);
        lab.service("web");
        let second = accepted(next(&mut reloads).await);
        assert!(Arc::ptr_eq(&first.model, &second.model));
        assert_eq!(second.services.len(), 1);
        // The lists whose caches did not change are handed on as they were.
        assert!(Arc::ptr_eq(&first.slices, &second.slices));
        assert!(Arc::ptr_eq(&first.nodes, &second.nodes));
        assert!(!Arc::ptr_eq(&first.services, &second.services));
        lab.pool("pool", "198.51.101.0/24");
        let third = accepted(next(&mut reloads).await);
        assert_ne!(*third.model, *first.model);
        assert!(Arc::ptr_eq(&second.services, &third.services));
        lab.pool("bad", "not an address");
        let (errors, services) = refused(next(&mut reloads).await);
        assert_eq!(services, 1);
        assert!(errors.iter().any(|e| e.contains("bad")), "{errors:?}");
        lab.service("db");
        assert_eq!(refused(next(&mut reloads).await), (errors, 2));
    }

    /// Issue 18 §1: a configuration that names a Service label key the
    /// records were not made with is not sent until the Services are
    /// listed again with it (the watch is told to restart); snapshots
    /// meanwhile carry the configuration before, over records that keep
    /// the new key from then on. The label keys no selector names are not
    /// kept.
    #[tokio::test(start_paused = true)]
    async fn a_new_label_key_holds_the_configuration_until_the_services_are_listed_again() {
        let (mut lab, mut reloads) = Lab::start();
        lab.pool("pool", "198.51.100.0/24");
        lab.l2_advertisement(&json!([]));
        lab.labelled("web", &json!({"app": "web", "team": "a"}));
        let first = accepted(next(&mut reloads).await);
        assert_eq!(first.services.len(), 1);
        assert!(first.services[0].labels.is_empty(), "no selector: no label");
        assert_eq!(*lab.labels.restart.borrow(), 1);

        lab.l2_advertisement(&json!([{"matchLabels": {"app": "web"}}]));
        let held = accepted(next(&mut reloads).await);
        assert!(
            Arc::ptr_eq(&held.model, &first.model),
            "held: {:?}",
            held.model
        );
        assert_eq!(*lab.labels.restart.borrow(), 2, "the watch lists again");
        assert!(held.services[0].labels.is_empty());
        // A Service that changes meanwhile: its record keeps `app` now,
        // and the configuration before still decides.
        lab.labelled("db", &json!({"app": "db", "team": "b"}));
        let meanwhile = accepted(next(&mut reloads).await);
        assert!(Arc::ptr_eq(&meanwhile.model, &first.model));
        assert_eq!(meanwhile.services[0].labels.get("app"), Some("db"));
        assert_eq!(meanwhile.services[1].labels.get("app"), None);

        lab.relist(&[
            ("db", json!({"app": "db", "team": "b"})),
            ("web", json!({"app": "web", "team": "a"})),
        ]);
        let now = accepted(next(&mut reloads).await);
        assert_eq!(
            now.model.service_label_keys(),
            BTreeSet::from(["app".to_owned()])
        );
        let kept: Vec<Vec<(&str, &str)>> = now
            .services
            .iter()
            .map(|s| s.labels.iter().collect())
            .collect();
        assert_eq!(kept, [[("app", "db")], [("app", "web")]]);
        assert_eq!(*lab.labels.restart.borrow(), 2, "one list again");
        assert_eq!(RELISTS.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn seeds_skip_own_address() {
        let ips: BTreeSet<IpAddr> = ["10.0.0.1", "10.0.0.2", "fd00::3"]
            .iter()
            .map(|s| s.parse().unwrap_or_else(|e| panic!("{s}: {e}")))
            .collect();
        let own: SocketAddr = "10.0.0.2:7946".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            seed_addrs(&ips, 7946, own),
            vec![
                "10.0.0.1:7946".parse().unwrap_or_else(|e| panic!("{e}")),
                "[fd00::3]:7946".parse().unwrap_or_else(|e| panic!("{e}")),
            ]
        );
    }

    /// A speaker Pod as a DaemonSet makes it, trimmed: what
    /// `speaker_pods` reads is kept, the rest is gone.
    #[test]
    fn a_trimmed_speaker_pod_gives_the_same_seeds() {
        let whole = |name: &str, node: &str, ip: &str, ready: &str, deleting: bool| -> Pod {
            let mut v = json!({
                "metadata": {"name": name, "namespace": "metallb-system",
                    "labels": {"app": "metallb", "component": "speaker"},
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T00:00:00Z"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "name": "speaker", "uid": "u", "controller": true}],
                    "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                        "apiVersion": "v1", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}]},
                "spec": {"nodeName": node, "hostNetwork": true,
                    "containers": [{"name": "speaker", "image": "ferrolb/speaker:v0.1.0",
                        "args": ["--port=7472", "--log-level=info"],
                        "env": [{"name": "METALLB_NODE_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                        "ports": [{"name": "monitoring", "containerPort": 7472}]}]},
                "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                    "hostIP": ip,
                    "conditions": [{"type": "PodScheduled", "status": "True"},
                                   {"type": "Ready", "status": ready},
                                   {"type": "ContainersReady", "status": ready}],
                    "containerStatuses": [{"name": "speaker", "ready": true, "restartCount": 0,
                        "image": "ferrolb/speaker:v0.1.0", "imageID": "sha256:0",
                        "state": {"running": {"startedAt": "2026-11-30T00:00:00Z"}}}]},
            });
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-11-30T01:00:00Z");
            }
            serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
        };
        let pods = [
            whole("a", "n1", "10.0.0.1", "True", false),
            whole("b", "n2", "10.0.0.2", "False", false),
            whole("c", "n3", "fd00::3", "True", false),
            whole("d", "n4", "10.0.0.4", "True", true),
        ];
        let trimmed: Vec<Pod> = pods
            .iter()
            .cloned()
            .map(|mut p| {
                trim_pod(&mut p);
                p
            })
            .collect();
        let arcs = |p: &[Pod]| p.iter().cloned().map(Arc::new).collect::<Vec<_>>();
        let seeds = speaker_pods(&arcs(&trimmed));
        assert_eq!(seeds, speaker_pods(&arcs(&pods)));
        assert_eq!(
            seeds.ready,
            BTreeSet::from(["n1".to_owned(), "n3".to_owned()])
        );
        assert_eq!(seeds.ips.len(), 3);
        // The rest is gone: a fraction of the JSON it came as.
        let size = |p: &Pod| serde_json::to_vec(p).map(|v| v.len()).unwrap_or(0);
        let (w, t) = (size(&pods[0]), size(&trimmed[0]));
        assert!(t * 3 < w, "trimmed {t} bytes of {w}");
        let t0 = &trimmed[0];
        assert!(t0.metadata.managed_fields.is_none() && t0.metadata.labels.is_none());
        assert!(t0.spec.as_ref().is_some_and(|s| s.containers.is_empty()));
        assert!(
            t0.status
                .as_ref()
                .is_some_and(|s| s.container_statuses.is_none() && s.phase.is_none())
        );
    }

    /// Which MetalLB speakers run and which statuses are theirs.
    #[test]
    fn metallb_speakers_from_pods_and_statuses() {
        let pod = |name: &str, node: &str, ready: Option<&str>, deleting: bool| -> Arc<Pod> {
            let mut v = json!({
                "metadata": {"name": name, "namespace": "metallb-system"},
                "spec": {"nodeName": node, "containers": []},
                "status": {},
            });
            if let Some(r) = ready {
                v["status"]["conditions"] = json!([{"type": "Ready", "status": r}]);
            }
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-11-29T04:00:00Z");
            }
            Arc::new(serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}")))
        };
        let status = |owner: &str, node: &str, svc: &str| -> Arc<ServiceL2Status> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "metallb.io/v1beta1", "kind": "ServiceL2Status",
                    "metadata": {"name": format!("l2-{owner}-{svc}"), "namespace": "metallb-system",
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                                      "name": owner, "uid": "u"}]},
                    "spec": {},
                    "status": {"node": node, "serviceName": svc, "serviceNamespace": "demo"},
                }))
                .unwrap_or_else(|e| panic!("{e}")),
            )
        };
        let pods = [
            pod("metallb-speaker-a", "a", Some("True"), false),
            // Terminating but still Ready: its process may still answer.
            pod("metallb-speaker-b", "b", Some("True"), true),
            // Its process exited: the kubelet reported it not Ready.
            pod("metallb-speaker-c", "c", Some("False"), true),
            // Not started yet.
            pod("metallb-speaker-d", "d", None, false),
        ];
        let statuses = [
            status("metallb-speaker-b", "b", "web"),
            status("metallb-speaker-c", "c", "db"),
            // ferrolb's own status, owned by a Pod outside the selector.
            status("ferrolb-speaker-e", "e", "web"),
        ];
        let got = metallb_speakers(&pods, &statuses, true);
        let set = |n: &[&str]| {
            n.iter()
                .map(|s| (*s).to_owned())
                .collect::<BTreeSet<String>>()
        };
        assert!(got.synced);
        assert_eq!(got.running, set(&["a", "b"]));
        // Every node with a Pod, whatever its state: BGP waits there.
        assert_eq!(got.present, set(&["a", "b", "c", "d"]));
        assert!(got.l2_advertised);
        assert_eq!(
            got.l2_owners,
            BTreeMap::from([
                (ObjectKey::new("demo", "db"), set(&["c"])),
                (ObjectKey::new("demo", "web"), set(&["b"])),
            ])
        );
    }
}
