//! Sorted vectors for the small sets and maps of the keyed plan: one per
//! service and per peer and prefix, most holding one element. A
//! `BTreeSet` or `BTreeMap` allocates a node of eleven slots for its
//! first element (1.6 KiB for one service's `Pending` by key); these
//! allocate what they hold, growing from one slot, and iterate in the same
//! (sorted) order.

use std::slice;

/// A set as a sorted vector without duplicates.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// A map as a vector of pairs sorted by key, keys unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: Ord, V> VecMap<K, V> {
    /// Sets `key` to `value`, returning the value it replaces.
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.0.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                grow(&mut self.0);
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

    /// The keys, in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The values, in their keys' order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

/// Room for one more element: exactly one slot for the first, then
/// doubling (a `Vec`'s first push takes four slots for most types).
fn grow<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len().max(1));
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
        assert_eq!(m.0.capacity(), 0, "an emptied map keeps no storage");
    }
}
