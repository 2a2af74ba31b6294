//! The dissemination queue: updates waiting to be piggybacked, each sent a
//! bounded number of times (SWIM §4.1: λ log n).
//!
//! Pure bookkeeping. A newer update about a member replaces the queued one,
//! and the least-sent updates go first, newest first among equals, as in
//! hashicorp/memberlist's `TransmitLimitedQueue`.

use crate::member::Name;
use crate::message::Update;

#[derive(Debug, Default)]
pub(crate) struct Queue {
    items: Vec<Item>,
    next_id: u64,
}

#[derive(Debug)]
struct Item {
    update: Update,
    transmits: usize,
    id: u64,
}

impl Queue {
    /// Queues `update`, replacing anything queued about the same member.
    pub(crate) fn push(&mut self, update: Update) {
        self.items.retain(|i| i.update.name() != update.name());
        self.items.push(Item {
            update,
            transmits: 0,
            id: self.next_id,
        });
        self.next_id += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len()
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
        self.items
            .sort_by(|a, b| a.transmits.cmp(&b.transmits).then(b.id.cmp(&a.id)));
        let mut out = Vec::new();
        for item in &mut self.items {
            if out.len() == max_count {
                break;
            }
            if skip == Some(item.update.name()) {
                continue;
            }
            let len = item.update.buffer_len();
            if len > budget {
                continue;
            }
            budget -= len;
            item.transmits += 1;
            out.push(item.update.clone());
        }
        self.items.retain(|i| i.transmits < limit);
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
}
