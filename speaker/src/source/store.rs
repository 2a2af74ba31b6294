//! The speaker's own cache of one watched kind, in place of kube-runtime's
//! reflector `Store` (issue 18 §1): the watch's events applied to records
//! that keep what the speaker reads ([`crate::announce::stored`]), keyed
//! by namespace and name ([`ObjectKey`], whose strings the records share),
//! with the keys that changed since the snapshot task last listed it.
//!
//! kube's store keeps each whole object (for the watched kinds, a
//! k8s-openapi `ObjectMeta` each) and a second copy of its name,
//! namespace, uid and resource version in its key; at 50,000 Services
//! that was 64 % of the speaker's heap.
//!
//! The events mean what they mean to kube's store: a (re)list
//! (`Init`, `InitApply`..., `InitDone`) is gathered on the side and swapped
//! in whole at `InitDone`, the old contents visible until then; `Apply`
//! inserts or replaces, `Delete` removes (a key it does not hold is no
//! change). A cache is ready after its first `InitDone`. An `Apply` equal
//! to what the cache holds changes nothing (a Node's heartbeat, a field the
//! record does not keep), so the snapshot and the view do not move either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use super::Shared;
use crate::announce::ObjectKey;
use crate::announce::stored::{EndpointSlice, Node, Service};

/// What a cache needs of its records.
pub trait Record {
    /// Namespace (empty for a cluster-scoped object) and name, by which a
    /// snapshot's list is sorted.
    fn order(&self) -> (&str, &str);
    /// The same as a key of the cache (its strings shared with the record
    /// where it has them).
    fn key(&self) -> ObjectKey;
}

impl Record for Node {
    fn order(&self) -> (&str, &str) {
        ("", &self.name)
    }
    fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: Arc::clone(&CLUSTER),
            name: Arc::clone(&self.name),
        }
    }
}

impl Record for Service {
    fn order(&self) -> (&str, &str) {
        (&self.key.namespace, &self.key.name)
    }
    fn key(&self) -> ObjectKey {
        self.key.clone()
    }
}

impl Record for EndpointSlice {
    fn order(&self) -> (&str, &str) {
        (&self.namespace, &self.name)
    }
    fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: Arc::clone(&self.namespace),
            name: Arc::clone(&self.name),
        }
    }
}

/// Secrets are few (one namespace, trimmed as they arrive): kept whole.
impl Record for Secret {
    fn order(&self) -> (&str, &str) {
        (
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
    fn key(&self) -> ObjectKey {
        let (namespace, name) = self.order();
        ObjectKey::new(namespace, name)
    }
}

/// The namespace of cluster-scoped objects' keys: one string for all.
static CLUSTER: LazyLock<Arc<str>> = LazyLock::new(|| "".into());

/// What changed in a cache since the snapshot task last listed it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// The cache was listed again (its first list, or a relist after its
    /// watch expired): every object may have changed.
    pub relisted: bool,
    /// Objects applied or deleted one by one since.
    pub keys: BTreeSet<ObjectKey>,
}

/// The contents, shared by the [`Writer`] and the readers.
#[derive(Debug)]
struct State<T> {
    objects: BTreeMap<ObjectKey, Arc<T>>,
    changed: Changed,
}

/// The reading side of a cache: the snapshot task's lists, the status
/// writer's lookups.
#[derive(Debug)]
pub struct Store<T> {
    state: Arc<Mutex<State<T>>>,
    ready: watch::Receiver<bool>,
}

impl<T> Clone for Store<T> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            ready: self.ready.clone(),
        }
    }
}

/// The writing side: the watch task applies its events here.
#[derive(Debug)]
pub struct Writer<T> {
    state: Arc<Mutex<State<T>>>,
    ready: watch::Sender<bool>,
    /// A (re)list being read, swapped in at `InitDone`.
    relist: Option<BTreeMap<ObjectKey, Arc<T>>>,
}

/// An empty cache, not ready until its writer has seen a whole list.
pub fn store<T>() -> (Store<T>, Writer<T>) {
    let state = Arc::new(Mutex::new(State {
        objects: BTreeMap::new(),
        changed: Changed::default(),
    }));
    let (ready_tx, ready) = watch::channel(false);
    (
        Store {
            state: Arc::clone(&state),
            ready,
        },
        Writer {
            state,
            ready: ready_tx,
            relist: None,
        },
    )
}

/// The lock of a cache; a panic while it was held (no code under it
/// panics) leaves contents that are still whole.
fn lock<T>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Record + PartialEq> Writer<T> {
    /// Applies one watch event (its objects already turned into records);
    /// true when what readers see changed: an `Apply` of a record unlike
    /// the one held, a `Delete` of one held, a swapped-in list.
    pub fn apply(&mut self, event: Event<T>) -> bool {
        match event {
            Event::Apply(o) => {
                let key = o.key();
                let mut state = lock(&self.state);
                if state.objects.get(&key).is_some_and(|held| **held == o) {
                    return false;
                }
                state.objects.insert(key.clone(), Arc::new(o));
                state.changed.keys.insert(key);
                true
            }
            Event::Delete(o) => {
                let key = o.key();
                let mut state = lock(&self.state);
                if state.objects.remove(&key).is_none() {
                    return false;
                }
                state.changed.keys.insert(key);
                true
            }
            Event::Init => {
                self.relist = Some(BTreeMap::new());
                false
            }
            Event::InitApply(o) => {
                self.relist
                    .get_or_insert_default()
                    .insert(o.key(), Arc::new(o));
                false
            }
            Event::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                let old = {
                    let mut state = lock(&self.state);
                    state.changed = Changed {
                        relisted: true,
                        keys: BTreeSet::new(),
                    };
                    std::mem::replace(&mut state.objects, listed)
                };
                // Freed outside the lock.
                drop(old);
                self.ready.send_replace(true);
                true
            }
        }
    }
}

impl<T> Store<T> {
    /// Waits until the cache has seen its first whole list; false if its
    /// writer went away before.
    pub async fn wait_until_ready(&self) -> bool {
        let mut ready = self.ready.clone();
        let listed = ready.wait_for(|r| *r).await.is_ok();
        listed
    }

    /// The record of `key`, if the cache holds one.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<T>> {
        lock(&self.state).objects.get(key).cloned()
    }

    /// How many records the cache holds.
    pub fn len(&self) -> usize {
        lock(&self.state).objects.len()
    }

    /// Whether the cache holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every record, in key order (namespace, name).
    pub fn state(&self) -> Vec<Arc<T>> {
        lock(&self.state).objects.values().cloned().collect()
    }
}

impl<T: Record> Store<T> {
    /// The cache's records in key order, for a snapshot: `last` (in that
    /// order) patched with the records that changed since it was taken,
    /// the same `Arc` when none did, every record listed again after a
    /// relist or with no `last`. A change costs its keys' lookups and a
    /// copy of the list's pointers, not a sort of the cache.
    pub fn list(&self, last: Option<&Shared<T>>) -> Shared<T> {
        let mut state = lock(&self.state);
        let changed = std::mem::take(&mut state.changed);
        match last {
            Some(last) if !changed.relisted && changed.keys.is_empty() => Arc::clone(last),
            Some(last) if !changed.relisted => {
                patched(last, &changed.keys, |key| state.objects.get(key).cloned()).into()
            }
            _ => state.objects.values().cloned().collect(),
        }
    }
}

/// `last` (sorted by [`Record::order`]) with the records of `keys`
/// replaced by what `now` gives for them (`None`: gone), in the same
/// order: a binary search per key and a copy of the pointers between
/// them.
pub fn patched<T: Record>(
    last: &[Arc<T>],
    keys: &BTreeSet<ObjectKey>,
    now: impl Fn(&ObjectKey) -> Option<Arc<T>>,
) -> Vec<Arc<T>> {
    let mut out = Vec::with_capacity(last.len() + keys.len());
    let mut from = 0;
    for key in keys {
        let at = (&*key.namespace, &*key.name);
        let here = from + last[from..].partition_point(|o| o.order() < at);
        out.extend_from_slice(&last[from..here]);
        from = here;
        if last.get(from).is_some_and(|o| o.order() == at) {
            from += 1;
        }
        out.extend(now(key));
    }
    out.extend_from_slice(&last[from..]);
    out
}

#[cfg(test)]
mod tests;
