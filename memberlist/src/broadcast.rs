//! The dissemination queue: updates waiting to be piggybacked, each sent a
//! bounded number of times (SWIM §4.1: λ log n).
//!
//! Pure bookkeeping. A newer update about a member replaces the queued one,
//! and the least-sent updates go first, newest first among equals, as in
//! hashicorp/memberlist's `TransmitLimitedQueue`.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::member::Name;
use crate::message::Update;

/// Where an update stands in line: transmissions so far, then newest
/// first (a larger id is newer).
type Key = (usize, Reverse<u64>);

/// The smallest update on the wire: a leave with a one-octet name (kind,
/// name length, name, incarnation). A budget below it fits nothing.
const MIN_UPDATE_LEN: usize = 1 + 1 + 1 + 4;

/// Kept in sending order, with an index by member, so that a push and
/// each update taken cost O(log q): a member joining a cluster of
/// thousands queues an update about every one of them, and a linear
/// replace plus a sort per datagram made that O(n²) per member.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    order: BTreeMap<Key, Update>,
    by_name: BTreeMap<Name, Key>,
    next_id: u64,
}

impl Queue {
    /// Queues `update`, replacing anything queued about the same member.
    pub(crate) fn push(&mut self, update: Update) {
        if let Some(old) = self.by_name.remove(update.name()) {
            self.order.remove(&old);
        }
        let key = (0, Reverse(self.next_id));
        self.next_id += 1;
        self.by_name.insert(update.name().clone(), key);
        self.order.insert(key, update);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Takes updates to piggyback into at most `budget` octets and at most
    /// `max_count` updates, counting a transmission for each; updates sent
    /// `limit` times leave the queue. `skip` names a member whose update
    /// the caller already added.
    pub(crate) fn fill(
        &mut self,
        mut budget: usize,
        max_count: usize,
        limit: usize,
        skip: Option<&Name>,
    ) -> Vec<Update> {
        // Least transmitted first, then newest: fresh news travels fastest.
        let mut taken = Vec::new();
        for (key, update) in &self.order {
            if taken.len() == max_count || budget < MIN_UPDATE_LEN {
                break;
            }
            if skip == Some(update.name()) {
                continue;
            }
            let len = update.buffer_len();
            if len > budget {
                continue;
            }
            budget -= len;
            taken.push(*key);
        }
        let mut out = Vec::with_capacity(taken.len());
        for key in taken {
            let Some(update) = self.order.remove(&key) else {
                continue;
            };
            let (transmits, id) = key;
            let next = (transmits + 1, id);
            if next.0 < limit {
                self.by_name.insert(update.name().clone(), next);
                self.order.insert(next, update.clone());
            } else {
                self.by_name.remove(update.name());
            }
            out.push(update);
        }
        // The limit follows the cluster size, which may have shrunk.
        while let Some(entry) = self.order.last_entry() {
            if entry.key().0 < limit {
                break;
            }
            let update = entry.remove();
            self.by_name.remove(update.name());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left(n: &str, inc: u32) -> Update {
        Update::Left {
            name: Name::new(n).unwrap(),
            incarnation: inc,
        }
    }

    #[test]
    fn replace_order_and_limit() {
        let mut q = Queue::default();
        q.push(left("a", 1));
        q.push(left("b", 1));
        q.push(left("a", 2));
        assert_eq!(q.len(), 2);
        // Newest first among the never-sent.
        assert_eq!(q.fill(1000, 10, 2, None), vec![left("a", 2), left("b", 1)]);
        q.push(left("c", 1));
        // Budget for one update (each is 1 + 2 + 4 = 7 octets).
        assert_eq!(q.fill(7, 10, 2, None), vec![left("c", 1)]);
        assert_eq!(
            q.fill(1000, 10, 2, None),
            vec![left("c", 1), left("a", 2), left("b", 1)]
        );
        assert!(q.is_empty());
        q.push(left("d", 1));
        assert!(
            q.fill(1000, 10, 2, Some(&Name::new("d").unwrap()))
                .is_empty()
        );
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn smallest_update() {
        assert_eq!(left("a", 0).buffer_len(), MIN_UPDATE_LEN);
    }

    /// The limit shrinks with the cluster: updates sent that often leave
    /// at the next fill, sent or not, and the index follows.
    #[test]
    fn shrunk_limit_drops_and_reindexes() {
        let mut q = Queue::default();
        q.push(left("a", 1));
        q.push(left("b", 1));
        assert_eq!(q.fill(1000, 10, 4, None).len(), 2);
        assert_eq!(q.fill(1000, 10, 4, None).len(), 2);
        // Budget for none of them: both leave at limit 2 anyway.
        assert!(q.fill(3, 10, 2, None).is_empty());
        assert!(q.is_empty() && q.by_name.is_empty());
        // A replaced update starts over at 0 transmissions.
        q.push(left("a", 1));
        q.fill(1000, 10, 4, None);
        q.push(left("a", 2));
        q.push(left("c", 1));
        assert_eq!(q.fill(1000, 1, 4, None), vec![left("c", 1)]);
        assert_eq!(q.fill(1000, 1, 4, None), vec![left("a", 2)]);
        assert_eq!(q.len(), 2);
        assert_eq!(q.by_name.len(), 2);
    }
}
