//! What a client of BFD does when a session changes state (RFC 5882 §3):
//! here the client is a BGP session (RFC 9384), but nothing below is
//! BGP-specific.
//!
//! [`Reaction::of`] classifies one [`Event`]; [`Gate`] keeps, per session,
//! whether its clients may run, and the hold-off of a peer that restarted
//! its session. Pure: the caller passes `now` (the events carry theirs),
//! arms a timer for [`Gate::poll_timeout`] and acts on the [`Verdict`]s.
//!
//! Why a hold-off: FRR 8.4's bgpd registers its BFD session without a
//! source address and, right after BGP is Established, replaces it with one
//! that has. bfdd's old session sends a last Down (diag 3, same
//! discriminators) as it is deleted, and the new one (a new discriminator,
//! a new source port) answers our Down with Init one slow-rate interval
//! later. RFC 5880 §6.8.6 takes our Up session Down on that last packet
//! (the core reports [`DownCause::NeighborRestarted`]), and it is Up again
//! about a second later. Packets kept arriving throughout, so the path
//! never failed, and tearing BGP down for it would withdraw routes for
//! nothing. Failures (our detection time expired, or the peer says Down
//! with a diagnostic of a failure it detected) still act at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::session::{DownCause, Event, PeerKey};
use crate::wire::State;

/// What an event means to a client, before the client's own state is
/// considered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// The session came Up: its clients may run.
    Up,
    /// The path failed: take the clients down now (RFC 5882 §3.2).
    Down,
    /// The peer replaced its session while the path works: wait for the
    /// new one, up to [`RESTART_HOLD_OFF`].
    Restart,
    /// Nothing for the clients: a step of the handshake, or an
    /// administrative Down, which RFC 5882 §3.2 says is no path failure.
    Ignore,
}

impl Reaction {
    /// Classifies one state change.
    pub fn of(event: &Event) -> Self {
        if event.to == State::Up {
            return Self::Up;
        }
        match event.cause {
            Some(
                DownCause::DetectionTimeExpired
                | DownCause::EchoFunctionFailed
                | DownCause::NeighborDown,
            ) => Self::Down,
            Some(DownCause::NeighborRestarted) => Self::Restart,
            // RFC 5882 §3.2: a session that goes Down because the peer
            // signalled AdminDown must not be taken as a path failure. Our
            // own AdminDown is an operator's choice, not a failure either.
            Some(DownCause::NeighborAdminDown | DownCause::AdminDown) | None => Self::Ignore,
        }
    }
}

/// What a client should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// BFD is Up: release the clients.
    Up,
    /// BFD failed: take the clients down (BGP: Cease / BFD Down) and hold
    /// them until it is Up again.
    Down,
    /// The peer restarted its session: leave the clients running. If the
    /// session is not Up by `until`, [`Gate::handle_timeout`] reports it.
    HoldOff {
        /// The end of the hold-off.
        until: Instant,
    },
    /// Nothing to do.
    Ignore,
}

/// Per BFD session: whether its clients may run ("up" for the client),
/// and the running restart hold-offs.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    /// Sessions whose clients may run: Up, within a restart hold-off, or
    /// Down only because of an AdminDown.
    up: BTreeSet<PeerKey>,
    /// Restart hold-offs and when they end.
    hold_off: BTreeMap<PeerKey, Instant>,
}

impl Gate {
    /// No session is up.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles a state change of a session: call for every [`Event`], then
    /// re-read [`poll_timeout`](Self::poll_timeout).
    pub fn handle_event(&mut self, event: &Event) -> Verdict {
        let key = event.key;
        match Reaction::of(event) {
            Reaction::Up => {
                self.hold_off.remove(&key);
                self.up.insert(key);
                Verdict::Up
            }
            // A failure matters to clients that were running; one during
            // a hold-off (the new session's handshake timed out) ends it.
            Reaction::Down if self.up.remove(&key) => {
                self.hold_off.remove(&key);
                Verdict::Down
            }
            Reaction::Restart if self.up.contains(&key) => {
                let until = event.at + RESTART_HOLD_OFF;
                self.hold_off.insert(key, until);
                Verdict::HoldOff { until }
            }
            Reaction::Down | Reaction::Restart | Reaction::Ignore => Verdict::Ignore,
        }
    }

    /// Ends the hold-offs due by `now`: call when
    /// [`poll_timeout`](Self::poll_timeout) has passed. Returns the
    /// sessions whose clients must go down now ([`Verdict::Down`]): their
    /// peer did not come back Up in time.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<PeerKey> {
        let due: Vec<PeerKey> = self
            .hold_off
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in &due {
            self.hold_off.remove(key);
            self.up.remove(key);
        }
        due
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.hold_off.values().min().copied()
    }

    /// Whether the clients of a session may run: it is Up, or in a restart
    /// hold-off, or Down only by an AdminDown.
    pub fn is_up(&self, key: PeerKey) -> bool {
        self.up.contains(&key)
    }

    /// Forgets a session (it was removed).
    pub fn remove(&mut self, key: PeerKey) {
        self.up.remove(&key);
        self.hold_off.remove(&key);
    }
}

/// How long the clients of a restarted peer session keep running before
/// the new session must be Up: three of the RFC 5880 §6.8.3 slow-rate
/// intervals (1 s, at most 100 % with the §6.8.7 jitter). We answer the
/// new session's Down at once, so the handshake needs one packet from it
/// (Init) at its slow rate; three intervals tolerate two of them lost. The
/// time is bounded: after it, a session still not Up is a failure.
pub const RESTART_HOLD_OFF: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::wire::Diag;

    const PEER: PeerKey = PeerKey {
        peer: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        multihop: false,
    };

    fn event(at: Instant, from: State, to: State, cause: Option<DownCause>) -> Event {
        let diag = match cause {
            None => Diag::None,
            Some(DownCause::DetectionTimeExpired) => Diag::ControlDetectionTimeExpired,
            Some(DownCause::AdminDown) => Diag::AdministrativelyDown,
            Some(_) => Diag::NeighborSignaledSessionDown,
        };
        Event {
            key: PEER,
            at,
            from,
            to,
            diag,
            cause,
        }
    }

    #[test]
    fn reactions() {
        use DownCause::*;
        use State::{AdminDown as A, Down as D, Init as I, Up as U};
        let t = Instant::now();
        let table = [
            // The handshake.
            (D, I, None, Reaction::Ignore),
            (D, U, None, Reaction::Up),
            (I, U, None, Reaction::Up),
            (A, D, None, Reaction::Ignore),
            // Failures act at once.
            (U, D, Some(DetectionTimeExpired), Reaction::Down),
            (I, D, Some(DetectionTimeExpired), Reaction::Down),
            (U, D, Some(NeighborDown), Reaction::Down),
            // RFC 5882 §3.2: AdminDown is no path failure, theirs or ours.
            (U, D, Some(NeighborAdminDown), Reaction::Ignore),
            (I, D, Some(NeighborAdminDown), Reaction::Ignore),
            (U, A, Some(AdminDown), Reaction::Ignore),
            // A new peer session while the path works.
            (U, D, Some(NeighborRestarted), Reaction::Restart),
        ];
        for (from, to, cause, want) in table {
            assert_eq!(
                Reaction::of(&event(t, from, to, cause)),
                want,
                "{from} -> {to} {cause:?}"
            );
        }
    }

    #[test]
    fn verdicts() {
        use DownCause::*;
        use State::{Down as D, Init as I, Up as U};
        let t = Instant::now();
        let hold = Verdict::HoldOff {
            until: t + RESTART_HOLD_OFF,
        };
        // (events before; the event; its verdict; whether the gate is up
        // after).
        type Step = (State, State, Option<DownCause>);
        let up: &[Step] = &[(I, U, None)];
        let restarting: &[Step] = &[(I, U, None), (U, D, Some(NeighborRestarted))];
        let handshaking: &[Step] = &[(I, U, None), (U, D, Some(NeighborRestarted)), (D, I, None)];
        let table: [(&[Step], Step, Verdict, bool); 8] = [
            // Failure of a session that was Up.
            (up, (U, D, Some(NeighborDown)), Verdict::Down, false),
            // One that never was Up: the clients were held anyway.
            (
                &[],
                (I, D, Some(DetectionTimeExpired)),
                Verdict::Ignore,
                false,
            ),
            // AdminDown leaves the clients running.
            (up, (U, D, Some(NeighborAdminDown)), Verdict::Ignore, true),
            // A restart holds off; the new session's handshake is ignored.
            (up, (U, D, Some(NeighborRestarted)), hold, true),
            (restarting, (D, I, None), Verdict::Ignore, true),
            // ... and its Up ends the hold-off.
            (handshaking, (I, U, None), Verdict::Up, true),
            // A failure during the hold-off acts at once.
            (
                handshaking,
                (I, D, Some(DetectionTimeExpired)),
                Verdict::Down,
                false,
            ),
            // A restart of a session that was not up is nothing.
            (&[], (U, D, Some(NeighborRestarted)), Verdict::Ignore, false),
        ];
        for (before, (from, to, cause), want, up) in table {
            let mut g = Gate::new();
            for &(f, t2, c) in before {
                let _ = g.handle_event(&event(t, f, t2, c));
            }
            assert_eq!(
                g.handle_event(&event(t, from, to, cause)),
                want,
                "{before:?} then {from} -> {to} {cause:?}"
            );
            assert_eq!(g.is_up(PEER), up, "{before:?} then {from} -> {to}");
            if want == Verdict::Up || want == Verdict::Down {
                assert_eq!(g.poll_timeout(), None, "hold-off ended");
            }
        }
    }

    #[test]
    fn a_restart_not_up_in_time_is_a_failure() {
        let t0 = Instant::now();
        let mut g = Gate::new();
        let up = event(t0, State::Init, State::Up, None);
        let restart = |at| {
            event(
                at,
                State::Up,
                State::Down,
                Some(DownCause::NeighborRestarted),
            )
        };
        assert_eq!(g.handle_event(&up), Verdict::Up);
        let at = t0 + Duration::from_secs(10);
        let until = at + RESTART_HOLD_OFF;
        assert_eq!(g.handle_event(&restart(at)), Verdict::HoldOff { until });
        assert_eq!(g.poll_timeout(), Some(until));
        // Spurious and early calls do nothing.
        assert!(
            g.handle_timeout(until - Duration::from_millis(1))
                .is_empty()
        );
        assert!(g.is_up(PEER));
        assert_eq!(g.handle_timeout(until), vec![PEER]);
        assert!(!g.is_up(PEER));
        assert_eq!(g.poll_timeout(), None);
        assert!(g.handle_timeout(until).is_empty());

        // Back Up in time: no failure, and the timer is gone.
        assert_eq!(g.handle_event(&up), Verdict::Up);
        let _ = g.handle_event(&restart(at));
        let _ = g.handle_event(&event(at, State::Down, State::Init, None));
        assert_eq!(
            g.handle_event(&event(
                at + Duration::from_secs(1),
                State::Init,
                State::Up,
                None
            )),
            Verdict::Up
        );
        assert_eq!(g.poll_timeout(), None);
        assert!(g.handle_timeout(until).is_empty());
        assert!(g.is_up(PEER));

        g.remove(PEER);
        assert!(!g.is_up(PEER));
    }
}
