//! Sorted vectors for the small sets and maps of the keyed plan: one per
//! service and per peer and prefix, most holding one element. A
//! `BTreeSet` or `BTreeMap` allocates a node of eleven slots for its
//! first element (1.6 KiB for one service's `Pending` by key); these
//! allocate what they hold, growing from one slot, and iterate in the same
//! (sorted) order. And [`Interner`], one shared copy of each distinct
//! value that many entries hold.

use std::collections::HashSet;
use std::hash::Hash;
use std::slice;
use std::sync::Arc;

use smallvec::SmallVec;

/// A set as a sorted vector without duplicates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct VecSet<T>(Vec<T>);

impl<T> Default for VecSet<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: Ord> VecSet<T> {
    /// Adds `value`; false when it was there.
    pub(super) fn insert(&mut self, value: T) -> bool {
        match self.0.binary_search(&value) {
            Ok(_) => false,
            Err(at) => {
                grow(&mut self.0);
                self.0.insert(at, value);
                true
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The least element.
    pub(super) fn first(&self) -> Option<&T> {
        self.0.first()
    }

    /// In order.
    pub(super) fn iter(&self) -> slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<T: Ord> Extend<T> for VecSet<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for v in iter {
            self.insert(v);
        }
    }
}

impl<'a, T> IntoIterator for &'a VecSet<T> {
    type Item = &'a T;
    type IntoIter = slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A map as a vector of pairs sorted by key, keys unique. Its one pair,
/// when it holds one (a prefix asked by one service, nearly always), is
/// inline, not an allocation of its own: 40 of 48 bytes of a chunk per
/// peer and prefix (BENCHMARKS.md, "The heap's slack, and one pair
/// inline").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct VecMap<K, V>(SmallVec<[(K, V); 1]>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self(SmallVec::new())
    }
}

impl<K: Ord, V> VecMap<K, V> {
    /// Sets `key` to `value`, returning the value it replaces.
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.0.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                if self.0.len() == self.0.capacity() {
                    self.0.reserve_exact(self.0.len().max(1));
                }
                self.0.insert(at, (key, value));
                None
            }
        }
    }

    /// Takes `key` out, returning its value; the storage shrinks with it.
    pub(super) fn remove(&mut self, key: &K) -> Option<V> {
        let at = self.0.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        let (_, v) = self.0.remove(at);
        if self.0.len() <= self.0.capacity() / 4 {
            self.0.shrink_to_fit();
        }
        Some(v)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value, when the map holds exactly one.
    pub(super) fn only(&self) -> Option<&V> {
        match self.0.as_slice() {
            [(_, v)] => Some(v),
            _ => None,
        }
    }

    /// The keys, in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The values, in their keys' order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

/// One shared copy of each distinct value: the keyed plan's per-service
/// `Pending`s and per-prefix routes are mostly equal (one advertisement's
/// attributes), and each was an allocation of its own. Values no one else
/// holds any more are dropped once the set has doubled since the last
/// sweep, so the sweeps cost O(1) per value interned.
#[derive(Debug)]
pub(super) struct Interner<T: ?Sized> {
    set: HashSet<Arc<T>>,
    /// How many values the last sweep kept.
    kept: usize,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Self {
            set: HashSet::new(),
            kept: 0,
        }
    }
}

impl<T: Eq + Hash> Interner<T> {
    /// The shared copy of `value`.
    pub(super) fn intern(&mut self, value: T) -> Arc<T> {
        match self.set.get(&value) {
            Some(have) => Arc::clone(have),
            None => self.insert(Arc::new(value)),
        }
    }
}

impl<E: Clone + Eq + Hash> Interner<[E]> {
    /// The shared copy of the slice `value` (copied into a new `Arc` when
    /// it is the first of its kind).
    pub(super) fn intern_slice(&mut self, value: &[E]) -> Arc<[E]> {
        match self.set.get(value) {
            Some(have) => Arc::clone(have),
            None => self.insert(Arc::from(value)),
        }
    }
}

impl<T: ?Sized + Eq + Hash> Interner<T> {
    /// The shared copy of what `value` holds (`value` itself when it is
    /// the first of its kind).
    pub(super) fn share(&mut self, value: &Arc<T>) -> Arc<T> {
        match self.set.get(&**value) {
            Some(have) => Arc::clone(have),
            None => self.insert(Arc::clone(value)),
        }
    }

    fn insert(&mut self, value: Arc<T>) -> Arc<T> {
        if self.set.len() >= 2 * self.kept + 16 {
            self.set.retain(|v| Arc::strong_count(v) > 1);
            self.kept = self.set.len();
        }
        self.set.insert(Arc::clone(&value));
        value
    }

    /// How many distinct values it holds (some perhaps unused).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set.len()
    }
}

/// Room for one more element: exactly one slot for the first, then
/// doubling (a `Vec`'s first push takes four slots for most types).
fn grow<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len().max(1));
    }
}

/// Rebuilds `tree` (a `BTreeMap` or `BTreeSet` of `len` entries) from its
/// own sorted entries when `changed` of them (at least half) were just
/// written. A B-tree filled in key order keeps its nodes about half full:
/// each split of a full node leaves six of its eleven slots behind.
/// Rebuilt, the nodes are full; one more pass over what the caller has
/// just walked, so a single change costs what it did.
pub(crate) fn repack<T>(tree: &mut T, changed: usize, len: usize)
where
    T: Default + IntoIterator + FromIterator<<T as IntoIterator>::Item>,
{
    if changed * 2 >= len {
        *tree = std::mem::take(tree).into_iter().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_keeps_order_and_no_duplicates() {
        for (input, want) in [
            (vec![], vec![]),
            (vec![3], vec![3]),
            (vec![3, 1, 2], vec![1, 2, 3]),
            (vec![2, 2, 1, 2], vec![1, 2]),
        ] {
            let mut s = VecSet::default();
            s.extend(input.clone());
            assert_eq!(s.iter().copied().collect::<Vec<i32>>(), want, "{input:?}");
            assert_eq!(s.len(), want.len());
            assert_eq!(s.first(), want.first());
            assert_eq!(
                s.0.capacity().max(1),
                s.len().next_power_of_two(),
                "{input:?}"
            );
        }
        let mut s = VecSet::default();
        assert!(s.insert("a") && !s.insert("a"));
    }

    #[test]
    fn map_inserts_replaces_removes_in_order() {
        let mut m = VecMap::default();
        assert!(m.is_empty());
        assert_eq!(m.insert("b", 2), None);
        assert_eq!(m.insert("a", 1), None);
        assert_eq!(m.insert("c", 3), None);
        assert_eq!(m.insert("b", 20), Some(2));
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [1, 20, 3]);
        assert_eq!(m.remove(&"b"), Some(20));
        assert_eq!(m.remove(&"b"), None);
        assert_eq!(m.remove(&"a"), Some(1));
        assert_eq!(m.remove(&"c"), Some(3));
        assert!(m.is_empty());
        assert!(!m.0.spilled(), "an emptied map keeps no storage");
        assert_eq!(m.only(), None);
        m.insert("x", 9);
        assert_eq!(m.only(), Some(&9));
        assert!(!m.0.spilled(), "one pair is inline");
        m.insert("y", 8);
        assert_eq!(m.only(), None);
    }

    #[test]
    fn interner_shares_equal_values_and_drops_unused_ones() {
        let mut i = Interner::default();
        let a = i.intern(String::from("a"));
        let b = i.intern(String::from("a"));
        assert!(Arc::ptr_eq(&a, &b), "equal values share one copy");
        let fresh = Arc::new(String::from("a"));
        assert!(
            Arc::ptr_eq(&i.share(&fresh), &a),
            "an equal value is replaced"
        );
        let other = Arc::new(String::from("b"));
        assert!(Arc::ptr_eq(&i.share(&other), &other), "a new value is kept");
        assert_eq!(i.len(), 2);
        drop((b, other));
        // Values held by no one else go in a sweep, which comes once the
        // set has grown past twice what the last sweep kept (0, plus 16).
        let held: Vec<Arc<String>> = (0..40).map(|n| i.intern(n.to_string())).collect();
        assert!(i.len() <= 16 + held.len(), "{}", i.len());
        let again = i.intern(String::from("a"));
        assert!(Arc::ptr_eq(&again, &a), "a value still held is kept");
        drop(held);
        for n in 100..200 {
            i.intern(n.to_string());
        }
        assert!(i.len() < 100, "unused values are swept: {}", i.len());
    }
}
