//! The connection table: who holds a slot, since when, and whom a newcomer
//! displaces when the caps are reached. Pure: no I/O, the clock is passed
//! in.
//!
//! A connection's `since` is the start of what it is doing now: reading a
//! request head (from its accept or its previous response) or answering
//! one. The server closes a connection whose `since` is older than its
//! timeouts, and at a cap it makes room by closing the connection with the
//! oldest `since` among those of the source that holds the most slots: a
//! slow or idle connection (a slowloris, an idle keep-alive) goes before
//! one that is being served, and a flood reconnecting from a few addresses
//! displaces its own connections, not a health probe's.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Instant;

/// The table. `T` is what the server needs to close a connection (its
/// wake-up handle).
#[derive(Debug)]
pub(crate) struct Slots<T> {
    max: usize,
    per_source: usize,
    next_id: u64,
    live: BTreeMap<u64, Slot<T>>,
}

#[derive(Debug)]
struct Slot<T> {
    source: IpAddr,
    since: Instant,
    handle: T,
}

impl<T> Slots<T> {
    /// A table for at most `max` connections, at most `per_source` from one
    /// address (each at least 1).
    pub(crate) fn new(max: usize, per_source: usize) -> Self {
        Self {
            max: max.max(1),
            per_source: per_source.max(1),
            next_id: 0,
            live: BTreeMap::new(),
        }
    }

    /// Admits a connection from `source` at `now`. Returns its id and, if a
    /// cap was reached, the handle of the connection that leaves to make
    /// room (removed from the table already): the oldest of the same
    /// source when the source is at its cap, else the oldest of the
    /// sources that hold the most slots.
    pub(crate) fn admit(&mut self, source: IpAddr, now: Instant, handle: T) -> (u64, Option<T>) {
        let same_source = self.live.values().filter(|s| s.source == source).count();
        let victim = if same_source >= self.per_source {
            self.oldest(|s| s.source == source)
        } else if self.live.len() >= self.max {
            // Fair by source: the source holding the most slots (the
            // newcomer counted) gives one up. A prober with one connection
            // keeps it while any other source holds more, so a flood from
            // fewer sources than slots cannot displace it, however fast it
            // reconnects.
            let mut held: BTreeMap<IpAddr, usize> = BTreeMap::new();
            for s in self.live.values() {
                *held.entry(s.source).or_default() += 1;
            }
            *held.entry(source).or_default() += 1;
            let most = held.values().copied().max().unwrap_or(0);
            self.oldest(|s| held.get(&s.source) == Some(&most))
        } else {
            None
        };
        let evicted = victim
            .and_then(|id| self.live.remove(&id))
            .map(|s| s.handle);
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(
            id,
            Slot {
                source,
                since: now,
                handle,
            },
        );
        (id, evicted)
    }

    /// The connection `id` starts something new (a request, or waiting for
    /// the next one) at `now`. No-op for a connection that was evicted.
    pub(crate) fn touch(&mut self, id: u64, now: Instant) {
        if let Some(s) = self.live.get_mut(&id) {
            s.since = now;
        }
    }

    /// When connection `id` started what it is doing now; `None` once it
    /// was evicted or released.
    pub(crate) fn since(&self, id: u64) -> Option<Instant> {
        self.live.get(&id).map(|s| s.since)
    }

    /// The connection `id` is gone.
    pub(crate) fn release(&mut self, id: u64) {
        self.live.remove(&id);
    }

    /// Connections in the table.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    fn oldest(&self, pick: impl Fn(&Slot<T>) -> bool) -> Option<u64> {
        // Ties go to the lowest id: the first admitted.
        self.live
            .iter()
            .filter(|(_, s)| pick(s))
            .min_by_key(|(id, s)| (s.since, **id))
            .map(|(id, _)| *id)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn admits_up_to_the_cap_then_evicts_the_oldest() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut slots = Slots::new(3, 3);
        assert_eq!(slots.admit(ip(1), at(0), "a"), (0, None));
        assert_eq!(slots.admit(ip(2), at(1), "b"), (1, None));
        assert_eq!(slots.admit(ip(3), at(2), "c"), (2, None));
        // "a" is being served: its phase is the newest.
        slots.touch(0, at(3));
        assert_eq!(slots.admit(ip(4), at(4), "d"), (3, Some("b")));
        assert_eq!(slots.len(), 3);
        assert_eq!(slots.since(1), None);
        // An evicted connection's late touch and release change nothing.
        slots.touch(1, at(5));
        slots.release(1);
        assert_eq!(slots.len(), 3);
        assert_eq!(slots.admit(ip(5), at(6), "e"), (4, Some("c")));
    }

    #[test]
    fn a_source_at_its_cap_displaces_its_own_oldest() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut slots = Slots::new(10, 2);
        slots.admit(ip(9), at(0), "other");
        slots.admit(ip(1), at(1), "x1");
        slots.admit(ip(1), at(2), "x2");
        // The other source's older connection is not touched.
        assert_eq!(slots.admit(ip(1), at(3), "x3").1, Some("x1"));
        assert_eq!(slots.admit(ip(1), at(4), "x4").1, Some("x2"));
        assert_eq!(slots.since(0), Some(at(0)));
        slots.release(0);
        assert_eq!(slots.len(), 2);
        assert_eq!(slots.since(1), None);
        assert_eq!(slots.since(2), None);
    }

    #[test]
    fn at_the_cap_the_source_holding_most_gives_way() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut slots = Slots::new(4, 8);
        // The probe is the oldest connection in the table.
        slots.admit(ip(9), at(0), "probe");
        slots.admit(ip(1), at(1), "a1");
        slots.admit(ip(2), at(2), "b1");
        slots.admit(ip(1), at(3), "a2");
        // Newcomers from other sources: source 1 holds most, its oldest
        // goes, then (all at one) the oldest of all.
        assert_eq!(slots.admit(ip(3), at(4), "c1").1, Some("a1"));
        assert_eq!(slots.admit(ip(2), at(5), "b2").1, Some("b1"));
        // A source adding to its own lead displaces its own oldest.
        assert_eq!(slots.admit(ip(3), at(6), "c2").1, Some("c1"));
        assert_eq!(slots.since(0), Some(at(0)));
        // Every source at one: the oldest of all, the probe at last.
        let mut slots = Slots::new(2, 8);
        slots.admit(ip(9), at(0), "probe");
        slots.admit(ip(1), at(1), "a1");
        assert_eq!(slots.admit(ip(2), at(2), "b1").1, Some("probe"));
    }

    #[test]
    fn caps_of_zero_mean_one() {
        let mut slots = Slots::new(0, 0);
        let now = Instant::now();
        assert_eq!(slots.admit(ip(1), now, 1).1, None);
        assert_eq!(slots.admit(ip(2), now, 2).1, Some(1));
    }
}
