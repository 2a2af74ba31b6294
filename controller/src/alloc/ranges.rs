//! Sets of addresses as disjoint intervals, so that pools of any size (an
//! IPv6 /64) are never enumerated. Addresses of both families are `u128`
//! ([`api::addr::to_u128`]: IPv4 in the low 32 bits); a set holds one
//! family. The allocator builds them from the model's ranges.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent closed intervals `[start, end]`, keyed by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct IntervalSet {
    map: BTreeMap<u128, u128>,
}

impl IntervalSet {
    /// The interval that contains `x`, if any.
    fn containing(&self, x: u128) -> Option<(u128, u128)> {
        let (&s, &e) = self.map.range(..=x).next_back()?;
        (x <= e).then_some((s, e))
    }

    /// Whether `x` is in the set. O(log n).
    pub(crate) fn contains(&self, x: u128) -> bool {
        self.containing(x).is_some()
    }

    /// Adds `[start, end]`, merging with neighbours.
    pub(crate) fn insert_range(&mut self, mut start: u128, mut end: u128) {
        if start > end {
            return;
        }
        // Merge an interval that contains or touches `start`.
        if let Some((&s, &e)) = self.map.range(..=start).next_back()
            && e.saturating_add(1) >= start
        {
            start = s;
            end = end.max(e);
            self.map.remove(&s);
        }
        // Swallow intervals starting inside or right after the new one.
        loop {
            let next = self.map.range(start..).next().map(|(&s, &e)| (s, e));
            match next {
                Some((s, e)) if s <= end.saturating_add(1) => {
                    end = end.max(e);
                    self.map.remove(&s);
                }
                _ => break,
            }
        }
        self.map.insert(start, end);
    }

    /// Adds one address.
    pub(crate) fn insert(&mut self, x: u128) {
        self.insert_range(x, x);
    }

    /// Removes one address, splitting its interval.
    pub(crate) fn remove(&mut self, x: u128) {
        let Some((s, e)) = self.containing(x) else {
            return;
        };
        self.map.remove(&s);
        if s < x {
            self.map.insert(s, x - 1);
        }
        if x < e {
            self.map.insert(x + 1, e);
        }
    }

    /// The smallest `y >= x` not in the set (`None` only at the top of the
    /// number space). O(log n): intervals are maximal, so the end of the
    /// one holding `x`, plus one, is free.
    pub(crate) fn next_free(&self, x: u128) -> Option<u128> {
        match self.containing(x) {
            None => Some(x),
            Some((_, e)) => e.checked_add(1),
        }
    }

    /// The intervals in order.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }

    /// How many addresses the set holds (saturating).
    pub(crate) fn len(&self) -> u128 {
        self.map.iter().fold(0u128, |acc, (&s, &e)| {
            acc.saturating_add(e - s).saturating_add(1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_remove_splits() {
        let mut s = IntervalSet::default();
        s.insert_range(10, 20);
        s.insert_range(22, 30);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(10, 20), (22, 30)]);
        s.insert(21);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(10, 30)]);
        s.insert_range(5, 12);
        s.insert_range(31, 40);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(5, 40)]);
        s.remove(7);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(5, 6), (8, 40)]);
        s.remove(5);
        s.remove(40);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(6, 6), (8, 39)]);
        assert_eq!(s.len(), 33);
        s.insert_range(0, 100);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(0, 100)]);
    }

    #[test]
    fn next_free() {
        let mut s = IntervalSet::default();
        assert_eq!(s.next_free(3), Some(3));
        s.insert_range(3, 9);
        assert_eq!(s.next_free(3), Some(10));
        assert_eq!(s.next_free(5), Some(10));
        assert_eq!(s.next_free(10), Some(10));
        s.insert_range(u128::MAX - 1, u128::MAX);
        assert_eq!(s.next_free(u128::MAX), None);
        assert!(s.contains(9) && !s.contains(10));
    }
}
