//! The speaker's own cache of one watched kind, in place of kube-runtime's
//! reflector `Store` (issue 18 §1): the watch's events applied to records
//! that keep what the speaker reads ([`crate::announce::stored`]), keyed
//! by namespace and name ([`ObjectKey`], whose strings the records share),
//! as the sorted list a snapshot takes (shared with it) and the changes
//! since it was taken.
//!
//! kube's store keeps each whole object (for the watched kinds, a
//! k8s-openapi `ObjectMeta` each) and a second copy of its name,
//! namespace, uid and resource version in its key; at 50,000 Services
//! that was 64 % of the speaker's heap. This one keeps no index beside
//! the list: a lookup is a binary search of it (and of the changes).
//!
//! The events mean what they mean to kube's store: a (re)list
//! (`Init`, `InitApply`..., `InitDone`) is gathered on the side and swapped
//! in whole at `InitDone`, the old contents visible until then; `Apply`
//! inserts or replaces, `Delete` removes (a key it does not hold is no
//! change). A cache is ready after its first `InitDone`. An `Apply` equal
//! to what the cache holds changes nothing (a Node's heartbeat, a field the
//! record does not keep), so the snapshot and the view do not move either.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use super::Shared;
use crate::announce::ObjectKey;
use crate::announce::stored::{EndpointSlice, Held, Holds, Name, Node, Service};

/// What a cache needs of its records (held as [`Holds`] says: an
/// EndpointSlice is its own thin pointer, the others are in an `Arc`).
pub trait Record: Holds {
    /// Namespace (empty for a cluster-scoped object) and name, by which a
    /// snapshot's list is sorted.
    fn order(&self) -> (&str, Name<'_>);
    /// The same as a key of the cache (its strings shared with the record
    /// where it has them).
    fn key(&self) -> ObjectKey;
}

impl Record for Node {
    fn order(&self) -> (&str, Name<'_>) {
        ("", Name::whole(&self.name))
    }
    fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: Arc::clone(&CLUSTER),
            name: Arc::clone(&self.name),
        }
    }
}

impl Record for Service {
    fn order(&self) -> (&str, Name<'_>) {
        (&self.key.namespace, Name::whole(&self.key.name))
    }
    fn key(&self) -> ObjectKey {
        self.key.clone()
    }
}

/// A slice keeps its name in parts ([`EndpointSlice::name`]): its key's
/// name is a string of its own, made for the event (an `Apply` or a
/// `Delete` held until the next list).
impl Record for EndpointSlice {
    fn order(&self) -> (&str, Name<'_>) {
        (self.namespace(), self.name())
    }
    fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: Arc::clone(self.namespace()),
            name: self.name().to_string().into(),
        }
    }
}

/// Secrets are few (one namespace, trimmed as they arrive): kept whole.
impl Record for Secret {
    fn order(&self) -> (&str, Name<'_>) {
        (
            self.metadata.namespace.as_deref().unwrap_or_default(),
            Name::whole(self.metadata.name.as_deref().unwrap_or_default()),
        )
    }
    fn key(&self) -> ObjectKey {
        ObjectKey::new(
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

/// The namespace of cluster-scoped objects' keys: one string for all.
static CLUSTER: LazyLock<Arc<str>> = LazyLock::new(|| "".into());

/// The contents, shared by the [`Writer`] and the readers.
#[derive(Debug)]
struct State<T: Record> {
    /// Every record in key order as of the last [`Store::list`]: the list
    /// the snapshot task took, shared with it (the cache holds no other
    /// index of its records).
    list: Shared<T>,
    /// What changed since, by key: the record now, or `None` (deleted).
    pending: BTreeMap<ObjectKey, Option<T::Held>>,
}

impl<T: Record> State<T> {
    /// The record of `key` now.
    fn get(&self, key: &ObjectKey) -> Option<&T::Held> {
        if let Some(now) = self.pending.get(key) {
            return now.as_ref();
        }
        let at = (&*key.namespace, Name::whole(&key.name));
        let i = self.list.partition_point(|o| o.record().order() < at);
        self.list.get(i).filter(|o| o.record().order() == at)
    }
}

/// The reading side of a cache: the snapshot task's lists, the status
/// writer's lookups.
#[derive(Debug)]
pub struct Store<T: Record> {
    state: Arc<Mutex<State<T>>>,
    ready: watch::Receiver<bool>,
}

impl<T: Record> Clone for Store<T> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            ready: self.ready.clone(),
        }
    }
}

/// The writing side: the watch task applies its events here.
#[derive(Debug)]
pub struct Writer<T: Record> {
    state: Arc<Mutex<State<T>>>,
    ready: watch::Sender<bool>,
    /// A (re)list being read, swapped in at `InitDone`.
    relist: Option<Vec<T::Held>>,
}

/// An empty cache, not ready until its writer has seen a whole list.
pub fn store<T: Record>() -> (Store<T>, Writer<T>) {
    let state = Arc::new(Mutex::new(State {
        list: Arc::default(),
        pending: BTreeMap::new(),
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
fn lock<T: Record>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
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
                if state.get(&key).is_some_and(|held| *held.record() == o) {
                    return false;
                }
                state.pending.insert(key, Some(o.hold()));
                true
            }
            Event::Delete(o) => {
                let key = o.key();
                let mut state = lock(&self.state);
                if state.get(&key).is_none() {
                    return false;
                }
                state.pending.insert(key, None);
                true
            }
            Event::Init => {
                self.relist = Some(Vec::new());
                false
            }
            Event::InitApply(o) => {
                self.relist.get_or_insert_default().push(o.hold());
                false
            }
            Event::InitDone => {
                let listed = sorted::<T>(self.relist.take().unwrap_or_default());
                let old = {
                    let mut state = lock(&self.state);
                    state.pending.clear();
                    std::mem::replace(&mut state.list, listed)
                };
                // Freed outside the lock (unless a snapshot still holds it).
                drop(old);
                self.ready.send_replace(true);
                true
            }
        }
    }
}

/// A list as the watch sent it, in key order; of two records of one key,
/// the later.
fn sorted<T: Record>(mut list: Vec<T::Held>) -> Shared<T> {
    // Stable: of one key, the records stay in the order they came.
    list.sort_by(|a, b| a.record().order().cmp(&b.record().order()));
    let mut out: Vec<T::Held> = Vec::with_capacity(list.len());
    for o in list {
        match out.last_mut() {
            Some(last) if last.record().order() == o.record().order() => *last = o,
            _ => out.push(o),
        }
    }
    out.into()
}

impl<T: Record> Store<T> {
    /// Waits until the cache has seen its first whole list; false if its
    /// writer went away before.
    pub async fn wait_until_ready(&self) -> bool {
        let mut ready = self.ready.clone();
        // A separate statement: the borrow `wait_for` returns ends before
        // the receiver it borrows.
        ready.wait_for(|r| *r).await.is_ok()
    }
}

impl<T: Record> Store<T> {
    /// The record of `key`, if the cache holds one.
    pub fn get(&self, key: &ObjectKey) -> Option<T::Held> {
        lock(&self.state).get(key).cloned()
    }

    /// Every record, in key order, without taking the changes in (what
    /// [`Store::list`] would give).
    pub fn state(&self) -> Vec<T::Held> {
        let state = lock(&self.state);
        patched::<T>(&state.list, &state.pending)
    }

    /// Whether the cache holds no record.
    pub fn is_empty(&self) -> bool {
        self.state().is_empty()
    }

    /// The cache's records in key order, for a snapshot: the last list
    /// patched with the records that changed since it was taken, the same
    /// `Arc` when none did, the new list after a relist. A change costs
    /// its keys' binary searches and a copy of the list's pointers, not a
    /// sort of the cache.
    pub fn list(&self) -> Shared<T> {
        let mut state = lock(&self.state);
        if !state.pending.is_empty() {
            let pending = std::mem::take(&mut state.pending);
            state.list = patched::<T>(&state.list, &pending).into();
        }
        Arc::clone(&state.list)
    }
}

/// `last` (sorted by [`Record::order`]) with the records of `changes`
/// put in (`None`: taken out), in the same order: a binary search per key
/// and a copy of the pointers between them.
fn patched<T: Record>(
    last: &[T::Held],
    changes: &BTreeMap<ObjectKey, Option<T::Held>>,
) -> Vec<T::Held> {
    let mut out = Vec::with_capacity(last.len() + changes.len());
    let mut from = 0;
    for (key, now) in changes {
        let at = (&*key.namespace, Name::whole(&key.name));
        let here = from + last[from..].partition_point(|o| o.record().order() < at);
        out.extend_from_slice(&last[from..here]);
        from = here;
        if last.get(from).is_some_and(|o| o.record().order() == at) {
            from += 1;
        }
        out.extend(now.iter().cloned());
    }
    out.extend_from_slice(&last[from..]);
    out
}

#[cfg(test)]
mod tests;
