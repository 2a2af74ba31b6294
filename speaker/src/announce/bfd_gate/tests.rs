//! Decision tables for [`BfdGate`]: what each BFD change does to the BGP
//! peers (RFC 9384, RFC 5882 §3.2).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use bfd::{DownCause, State};
use bgp::session::{self, PeerAs};

use super::super::Transport;
use super::*;

fn key(last: u8, multihop: bool) -> PeerKey {
    PeerKey {
        peer: IpAddr::from([10, 0, 0, last]),
        multihop,
    }
}

fn config(key: PeerKey) -> SessionConfig {
    SessionConfig {
        key,
        local: None,
        profile: Profile::default(),
    }
}

/// A table row: what it shows, `bgp_without_bfd_up`, and each input with
/// the actions it must give.
type Row = (&'static str, bool, Vec<(Input, Vec<Action>)>);

/// One input to the gate.
#[derive(Clone, Copy)]
enum Input {
    /// `set_peer(name, Some(session to key))`.
    Set(&'static str, PeerKey),
    /// `set_peer(name, None)`.
    Unset(&'static str),
    /// A state change of the session `key`, `secs` after t0.
    Change(PeerKey, u64, State, Option<DownCause>, Diag),
    /// `handle_timeout(t0 + millis)`.
    Timeout(u64),
}

fn t0() -> Instant {
    // One base instant per test run; only differences matter.
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *T0.get_or_init(Instant::now)
}

fn feed(gate: &mut BfdGate, input: Input) -> Vec<Action> {
    match input {
        Input::Set(name, key) => gate.set_peer(name, Some(config(key))),
        Input::Unset(name) => gate.set_peer(name, None),
        Input::Change(key, secs, to, cause, diag) => gate.handle_event(&Event {
            key,
            at: t0() + Duration::from_secs(secs),
            from: if to == State::Up {
                State::Init
            } else {
                State::Up
            },
            to,
            diag,
            cause,
        }),
        Input::Timeout(ms) => gate.handle_timeout(t0() + Duration::from_millis(ms)),
    }
}

fn add(peer: &str, key: PeerKey) -> Action {
    Action::AddSession {
        peer: peer.into(),
        config: config(key),
    }
}
fn hold(peer: &str) -> Action {
    Action::HoldDown(peer.into())
}
fn release(peer: &str) -> Action {
    Action::Release(peer.into())
}
fn tear(peer: &str, key: PeerKey, reason: TearDownReason) -> Action {
    Action::TearDown {
        peer: peer.into(),
        address: key.peer,
        reason,
    }
}

#[test]
fn gate_table() {
    let a = key(1, false);
    let b = key(2, true);
    let up = |k, s| Input::Change(k, s, State::Up, None, Diag::None);
    let expired = |k, s| {
        Input::Change(
            k,
            s,
            State::Down,
            Some(DownCause::DetectionTimeExpired),
            Diag::ControlDetectionTimeExpired,
        )
    };
    let failed = TearDownReason::Failed(Diag::ControlDetectionTimeExpired);
    let admin_down = |k, s| {
        Input::Change(
            k,
            s,
            State::Down,
            Some(DownCause::NeighborAdminDown),
            Diag::NeighborSignaledSessionDown,
        )
    };
    let restarted = |k, s| {
        Input::Change(
            k,
            s,
            State::Down,
            Some(DownCause::NeighborRestarted),
            Diag::NeighborSignaledSessionDown,
        )
    };
    let hold_off = |k: PeerKey, s| {
        let at = t0() + Duration::from_secs(s);
        Action::HoldOff {
            address: k.peer,
            at,
            until: at + bfd::client::RESTART_HOLD_OFF,
        }
    };
    let hold_off_ms = u64::try_from(bfd::client::RESTART_HOLD_OFF.as_millis()).unwrap();
    // (what, bgp_without_bfd_up, inputs, the actions of each input)
    let table: Vec<Row> = vec![
        (
            "a new peer starts held; the same session again does nothing",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (Input::Set("p", a), vec![]),
            ],
        ),
        (
            "--bgp-without-bfd-up: a new peer is not held",
            true,
            vec![(Input::Set("p", a), vec![add("p", a)])],
        ),
        (
            "Up releases every peer of the session, not others",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (Input::Set("q", a), vec![add("q", a), hold("q")]),
                (Input::Set("r", b), vec![add("r", b), hold("r")]),
                (up(a, 1), vec![release("p"), release("q")]),
                // A peer joining an Up session is not held.
                (Input::Set("s", a), vec![add("s", a)]),
            ],
        ),
        (
            "a failure after Up tears down at once (Cease / BFD Down)",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (up(a, 1), vec![release("p")]),
                (expired(a, 2), vec![tear("p", a, failed)]),
                // Not Up any more: a second failure is nothing new.
                (expired(a, 3), vec![]),
                (up(a, 4), vec![release("p")]),
            ],
        ),
        (
            "--bgp-without-bfd-up: a failure tears down, then releases",
            true,
            vec![
                (Input::Set("p", a), vec![add("p", a)]),
                (up(a, 1), vec![release("p")]),
                (expired(a, 2), vec![tear("p", a, failed), release("p")]),
            ],
        ),
        (
            "the peer's AdminDown is no failure (RFC 5882 §3.2)",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (up(a, 1), vec![release("p")]),
                (admin_down(a, 2), vec![]),
            ],
        ),
        (
            "a failure before Up does nothing: the peer is held already",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (expired(a, 1), vec![]),
            ],
        ),
        (
            "a restarted peer session holds off; Up in time keeps BGP",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (up(a, 1), vec![release("p")]),
                (restarted(a, 2), vec![hold_off(a, 2)]),
                (up(a, 3), vec![release("p")]),
                (Input::Timeout(2000 + hold_off_ms), vec![]),
            ],
        ),
        (
            "a restarted peer session not Up in time tears down",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (up(a, 1), vec![release("p")]),
                (restarted(a, 2), vec![hold_off(a, 2)]),
                (Input::Timeout(2000 + hold_off_ms - 1), vec![]),
                (
                    Input::Timeout(2000 + hold_off_ms),
                    vec![tear("p", a, TearDownReason::RestartNotUp)],
                ),
            ],
        ),
        (
            "a session goes with its last peer; a changed one replaces it",
            false,
            vec![
                (Input::Set("p", a), vec![add("p", a), hold("p")]),
                (Input::Set("q", a), vec![add("q", a), hold("q")]),
                (Input::Unset("p"), vec![release("p")]),
                (
                    Input::Unset("q"),
                    vec![release("q"), Action::RemoveSession(a)],
                ),
                (Input::Unset("q"), vec![]),
                (Input::Set("r", a), vec![add("r", a), hold("r")]),
                (
                    Input::Set("r", b),
                    vec![add("r", b), hold("r"), Action::RemoveSession(a)],
                ),
            ],
        ),
    ];
    for (what, without_up, steps) in table {
        let mut gate = BfdGate::new(without_up);
        for (i, (input, want)) in steps.into_iter().enumerate() {
            assert_eq!(feed(&mut gate, input), want, "{what}: step {i}");
        }
    }
}

#[test]
fn removed_session_forgets_up() {
    // A session removed and added again starts Down: its peer is held.
    let a = key(1, false);
    let mut gate = BfdGate::new(false);
    let _ = gate.set_peer("p", Some(config(a)));
    let _ = feed(&mut gate, Input::Change(a, 1, State::Up, None, Diag::None));
    let _ = gate.set_peer("p", None);
    assert_eq!(gate.sessions(), BTreeSet::new());
    assert_eq!(
        gate.set_peer("p", Some(config(a))),
        vec![add("p", a), hold("p")]
    );
    assert_eq!(gate.sessions(), BTreeSet::from([a]));
}

#[test]
fn session_of_a_peer_plan() {
    let mut plan = PeerPlan {
        session: session::Config::new(64512, PeerAs::Exact(65000), Ipv4Addr::new(10, 0, 0, 1)),
        target: PeerTarget::Address("10.0.0.2:179".parse().unwrap()),
        transport: Transport {
            bind: Some("10.0.0.1".parse().unwrap()),
            ..Transport::default()
        },
        ibgp: false,
        bfd_profile: None,
        multihop: true,
        routes: BTreeMap::new(),
    };
    assert_eq!(bfd_session(&plan), None);
    let profile = BfdProfile {
        receive_interval: Duration::from_millis(300),
        transmit_interval: Duration::from_millis(200),
        detect_multiplier: 5,
        echo_interval: Duration::from_millis(50),
        echo_mode: false,
        passive: true,
        minimum_ttl: 250,
    };
    plan.bfd_profile = Some(("fast".into(), profile));
    let s = bfd_session(&plan).unwrap();
    assert_eq!(s.key, key(2, true));
    assert_eq!(s.local, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(s.profile.receive_interval, Duration::from_millis(300));
    assert_eq!(s.profile.transmit_interval, Duration::from_millis(200));
    assert_eq!(s.profile.detect_multiplier.get(), 5);
    assert!(s.profile.passive);
    assert_eq!(s.profile.minimum_ttl, 250);
    // echoInterval counts only with echoMode.
    assert_eq!(s.profile.echo_interval, None);
    plan.bfd_profile = Some((
        "echo".into(),
        BfdProfile {
            echo_mode: true,
            ..profile
        },
    ));
    assert_eq!(
        bfd_session(&plan).unwrap().profile.echo_interval,
        Some(Duration::from_millis(50))
    );
    // A multiplier of 0 is the core's default.
    plan.bfd_profile = Some((
        "zero".into(),
        BfdProfile {
            detect_multiplier: 0,
            ..profile
        },
    ));
    assert_eq!(
        bfd_session(&plan).unwrap().profile.detect_multiplier,
        Profile::default().detect_multiplier
    );
}
