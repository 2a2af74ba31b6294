//! Dynamic timers: what the core asks the driver to wake it for.
//!
//! The core emits [`Output::Arm`](crate::Output::Arm) with a [`Timer`]; the
//! driver hands it back through
//! [`Swim::handle_timer`](crate::Swim::handle_timer) at (or after) its
//! deadline. Each timer carries a generation token, and the core keeps the
//! live ones in a `TimerTable`: cancelling or re-arming only forgets the
//! token, and a stale timer handed back later is dropped (`foca:
//! src/runtime.rs` `Timer`). No clock is read here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Instant;

/// A timer the driver must hand back at its deadline. Opaque except for
/// its [`kind`](Timer::kind), which is for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timer {
    kind: TimerKind,
    generation: u64,
}

impl Timer {
    /// What the timer is for.
    #[must_use]
    pub fn kind(&self) -> TimerKind {
        self.kind
    }
}

impl fmt::Display for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}#{}", self.kind, self.generation)
    }
}

/// What a [`Timer`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// Start the next probe round.
    Probe,
    /// The direct ack is overdue: ask for indirect probes.
    ProbeTimeout,
    /// The probe is over: suspect the target if nothing answered.
    ProbeDeadline,
    /// As a relay, the target did not answer: nack the requester.
    RelayDeadline,
    /// A suspicion timed out: declare the member dead.
    Suspicion,
    /// Probe a suspect again: it answered, but its refutation has not
    /// arrived.
    Confirm,
    /// Send queued updates to a few members.
    Gossip,
    /// Exchange full state with a random member.
    PushPull,
    /// Forget dead and left members past their retention.
    Reap,
    /// Join the seeds that have no live member again (backoff).
    Rejoin,
}

/// The live timers of one core and the data each fires with.
#[derive(Debug)]
pub(crate) struct TimerTable<T> {
    next_generation: u64,
    live: BTreeMap<u64, (Instant, T)>,
    by_deadline: BTreeSet<(Instant, u64)>,
}

impl<T> TimerTable<T> {
    pub(crate) fn new() -> Self {
        Self {
            next_generation: 0,
            live: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
        }
    }

    /// Arms a new timer; the caller emits it.
    pub(crate) fn arm(&mut self, at: Instant, kind: TimerKind, data: T) -> Timer {
        let generation = self.next_generation;
        self.next_generation += 1;
        self.live.insert(generation, (at, data));
        self.by_deadline.insert((at, generation));
        Timer { kind, generation }
    }

    /// Forgets a timer; handing it back later does nothing.
    pub(crate) fn cancel(&mut self, timer: Timer) {
        if let Some((at, _)) = self.live.remove(&timer.generation) {
            self.by_deadline.remove(&(at, timer.generation));
        }
    }

    /// Takes a live timer that is due at `now`, with its deadline and
    /// data. `Err(true)` if it is live but not yet due (left armed),
    /// `Err(false)` if it is stale.
    pub(crate) fn take(&mut self, timer: Timer, now: Instant) -> Result<(Instant, T), bool> {
        match self.live.get(&timer.generation) {
            None => Err(false),
            Some((at, _)) if *at > now => Err(true),
            Some(_) => {
                let (at, data) = self.live.remove(&timer.generation).ok_or(false)?;
                self.by_deadline.remove(&(at, timer.generation));
                Ok((at, data))
            }
        }
    }

    /// The earliest live timer due at `now`, if any.
    pub(crate) fn next_due(
        &self,
        now: Instant,
        kind_of: impl Fn(&T) -> TimerKind,
    ) -> Option<Timer> {
        let &(at, generation) = self.by_deadline.first()?;
        if at > now {
            return None;
        }
        let (_, data) = self.live.get(&generation)?;
        Some(Timer {
            kind: kind_of(data),
            generation,
        })
    }

    /// The earliest live deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.by_deadline.first().map(|&(at, _)| at)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn generations() {
        let t0 = Instant::now();
        let mut t = TimerTable::new();
        let a = t.arm(t0 + Duration::from_millis(10), TimerKind::Probe, 'a');
        let b = t.arm(t0 + Duration::from_millis(5), TimerKind::Gossip, 'b');
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(5)));
        assert_eq!(t.take(a, t0), Err(true));
        t.cancel(b);
        assert_eq!(t.take(b, t0 + Duration::from_secs(1)), Err(false));
        assert_eq!(t.next_due(t0, |_| TimerKind::Probe), None);
        assert_eq!(
            t.next_due(t0 + Duration::from_millis(10), |_| TimerKind::Probe),
            Some(a)
        );
        assert_eq!(
            t.take(a, t0 + Duration::from_millis(10)),
            Ok((t0 + Duration::from_millis(10), 'a'))
        );
        assert_eq!(t.take(a, t0 + Duration::from_millis(10)), Err(false));
        assert_eq!(t.next_deadline(), None);
        assert_eq!(a.to_string(), "Probe#0");
    }
}
