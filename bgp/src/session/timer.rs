//! The fixed timers of a session (RFC 4271 §10), as `Option<Instant>`
//! slots. Pure: the caller passes `now`.

use std::time::Instant;

use super::ConnId;

/// A session timer. Per-connection timers carry the connection slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// ConnectRetryTimer: next outbound connection attempt.
    ConnectRetry,
    /// IdleHoldTimer: the backoff after an error before starting again
    /// (RFC 4271 §8.1.1 DampPeerOscillations).
    IdleHold,
    /// HoldTimer of a connection.
    Hold(ConnId),
    /// KeepaliveTimer of a connection.
    Keepalive(ConnId),
    /// DelayOpenTimer of a connection.
    DelayOpen(ConnId),
    /// SendHoldTimer of a connection (RFC 9687): armed while the transport
    /// holds bytes it cannot write, re-armed on every progress.
    SendHold(ConnId),
}

/// Deadlines for every [`Timer`].
#[derive(Debug, Default, Clone)]
pub(crate) struct TimerTable {
    slots: [Option<Instant>; 10],
}

impl TimerTable {
    fn index(timer: Timer) -> usize {
        match timer {
            Timer::ConnectRetry => 0,
            Timer::IdleHold => 1,
            Timer::Hold(c) => 2 + c.slot(),
            Timer::Keepalive(c) => 4 + c.slot(),
            Timer::DelayOpen(c) => 6 + c.slot(),
            Timer::SendHold(c) => 8 + c.slot(),
        }
    }

    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.slots[Self::index(timer)] = Some(at);
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.slots[Self::index(timer)] = None;
    }

    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.slots[Self::index(timer)]
    }

    /// Stops every timer of a connection slot.
    pub(crate) fn stop_conn(&mut self, conn: ConnId) {
        self.stop(Timer::Hold(conn));
        self.stop(Timer::Keepalive(conn));
        self.stop(Timer::DelayOpen(conn));
        self.stop(Timer::SendHold(conn));
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.slots.iter().flatten().min().copied()
    }

    /// Removes and returns one timer that expired at `now`, if any.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<Timer> {
        const ALL: [fn() -> Timer; 2] = [|| Timer::ConnectRetry, || Timer::IdleHold];
        for t in ALL {
            let t = t();
            if self.get(t).is_some_and(|at| at <= now) {
                self.stop(t);
                return Some(t);
            }
        }
        for slot in 0..2 {
            let c = ConnId::from_slot(slot);
            for t in [
                Timer::Hold(c),
                Timer::SendHold(c),
                Timer::DelayOpen(c),
                Timer::Keepalive(c),
            ] {
                if self.get(t).is_some_and(|at| at <= now) {
                    self.stop(t);
                    return Some(t);
                }
            }
        }
        None
    }
}
