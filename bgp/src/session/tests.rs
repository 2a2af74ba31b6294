//! FSM scenarios: inputs at `t0 + d`, assertions on the drained outputs.

use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;

use super::*;
use crate::frame;
use crate::wire::iana::{cease_subcode, open_subcode};
use crate::wire::open::{ExtendedNextHop, GracefulRestart};
use crate::wire::{
    Afi, AttrType, AttrValue, Capability, DecodeCtx, ErrorCode, HoldTime, MpReach, NextHop, Nlri,
    Open, RefreshSubtype, RouteRefresh, Safi, Update,
};

/// A deterministic generator (SplitMix64) for the timer jitter.
struct TestRng(u64);

impl RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

const LOCAL: &str = "192.0.2.1:40000";
const REMOTE: &str = "192.0.2.2:179";
const PEER_ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

fn config() -> Config {
    let mut c = Config::new(64512, PeerAs::Exact(64513), Ipv4Addr::new(192, 0, 2, 1));
    c.mode = ConnectMode::Active;
    c
}

struct Harness {
    s: Session<TestRng>,
    t0: Instant,
    now: Instant,
    /// Decoded messages sent, per connection, in order.
    sent: Vec<(ConnId, Message)>,
    outputs: Vec<Output>,
}

impl Harness {
    fn new(config: Config) -> Self {
        let now = Instant::now();
        Self {
            s: Session::new(config, TestRng(7)),
            t0: now,
            now,
            sent: Vec::new(),
            outputs: Vec::new(),
        }
    }

    fn at(&mut self, secs: f64) {
        self.now = self.t0 + Duration::from_secs_f64(secs);
    }

    /// Drains the outputs, decoding every message sent.
    fn drain(&mut self) -> Vec<Output> {
        let mut outs = Vec::new();
        while let Some(o) = self.s.poll_output() {
            if let Output::Send { conn, bytes } = &o {
                let ctx = DecodeCtx::default();
                let mut rest = &bytes[..];
                while let Some(len) = frame::decode(rest, &ctx).unwrap() {
                    self.sent
                        .push((*conn, Message::parse(&rest[..len], &ctx).unwrap()));
                    rest = &rest[len..];
                }
                assert!(rest.is_empty(), "partial message sent");
            }
            outs.push(o);
        }
        self.outputs.extend(outs.clone());
        outs
    }

    fn take_sent(&mut self) -> Vec<Message> {
        self.drain();
        self.sent.drain(..).map(|(_, m)| m).collect()
    }

    /// Runs an outbound connection up to OpenSent; returns its id.
    fn connect(&mut self) -> ConnId {
        self.s.start(self.now);
        let conn = match self
            .drain()
            .into_iter()
            .find(|o| matches!(o, Output::Connect(_)))
        {
            Some(Output::Connect(c)) => c,
            other => panic!("no connect: {other:?}"),
        };
        self.s.handle_connected(
            self.now,
            conn,
            LOCAL.parse().unwrap(),
            REMOTE.parse().unwrap(),
        );
        conn
    }

    fn establish(&mut self, peer: Open) -> ConnId {
        let conn = self.connect();
        self.s.handle_message(self.now, conn, Message::Open(peer));
        self.s.handle_message(self.now, conn, Message::Keepalive);
        assert_eq!(self.s.state(), State::Established);
        conn
    }

    fn fire(&mut self) {
        let at = self.s.poll_timeout().expect("a timer is armed");
        self.now = self.now.max(at);
        self.s.handle_timeout(self.now);
    }
}

fn peer_open(hold: u16, caps: Vec<Capability>) -> Open {
    Open::new(64513, HoldTime::from_secs(hold).unwrap(), PEER_ID, caps)
}

fn modern_caps() -> Vec<Capability> {
    caps_for(64513)
}

fn caps_for(asn: u32) -> Vec<Capability> {
    vec![
        Capability::Multiprotocol {
            afi: Afi::Ipv4,
            safi: Safi::Unicast,
        },
        Capability::Multiprotocol {
            afi: Afi::Ipv6,
            safi: Safi::Unicast,
        },
        Capability::RouteRefresh,
        Capability::EnhancedRouteRefresh,
        Capability::FourOctetAs(asn),
    ]
}

fn notification(msgs: &[Message]) -> Option<&Notification> {
    msgs.iter().find_map(|m| match m {
        Message::Notification(n) => Some(n),
        _ => None,
    })
}

#[test]
fn active_open_to_established_sends_routes_and_end_of_rib() {
    let mut h = Harness::new(config());
    h.s.announce(
        "198.51.100.10/32".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    h.s.announce(
        "2001:db8::10/128".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    let conn = h.connect();
    assert_eq!(h.s.state(), State::OpenSent);
    let sent = h.take_sent();
    let Message::Open(open) = &sent[0] else {
        panic!("{sent:?}")
    };
    assert_eq!(open.asn(), 64512);
    assert_eq!(open.hold_time.secs(), 90);
    assert!(open.capabilities.contains(&Capability::FourOctetAs(64512)));
    assert!(open.capabilities.contains(&Capability::Multiprotocol {
        afi: Afi::Ipv6,
        safi: Safi::Unicast
    }));

    h.s.handle_message(h.now, conn, Message::Open(peer_open(30, modern_caps())));
    assert_eq!(h.s.state(), State::OpenConfirm);
    let outs = h.drain();
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::Negotiated { decode, .. } if decode.as4))
    );
    assert_eq!(h.take_sent(), vec![Message::Keepalive]);

    h.s.handle_message(h.now, conn, Message::Keepalive);
    let outs = h.drain();
    let Some(Output::Established(n)) = outs.iter().find(|o| matches!(o, Output::Established(_)))
    else {
        panic!("{outs:?}")
    };
    assert_eq!(n.hold_time, Duration::from_secs(30));
    assert_eq!(n.keepalive, Some(Duration::from_secs(10)));
    assert_eq!(n.families, Family::ALL.to_vec());
    let updates: Vec<Update> = h
        .sent
        .drain(..)
        .filter_map(|(_, m)| match m {
            Message::Update(u) => Some(u),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 4, "v4 route, v6 route, two End-of-RIB");
    assert_eq!(
        updates[0].nlri,
        vec![Nlri::new("198.51.100.10/32".parse().unwrap())]
    );
    assert_eq!(
        updates[0].attribute(AttrType::NextHop),
        Some(&AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1))),
        "next hop self"
    );
    // IPv6 over IPv4 transport: the IPv4-mapped local address.
    assert!(matches!(
        updates[1].mp_reach(),
        Some(MpReach::Ipv6Unicast { next_hop: NextHop::V6 { global, .. }, .. })
            if *global == Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped()
    ));
    assert_eq!(updates[2].end_of_rib_family(), Some(Family::Ipv4Unicast));
    assert_eq!(updates[3].end_of_rib_family(), Some(Family::Ipv6Unicast));
    assert_eq!(h.s.stats().prefixes_announced, 2);

    // A later change goes out alone, without another End-of-RIB.
    h.s.withdraw(&"198.51.100.10/32".parse().unwrap());
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert!(matches!(&sent[0], Message::Update(u) if u.withdrawn.len() == 1));
}

#[test]
fn keepalives_are_jittered_and_hold_timer_expiry_resets() {
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(30, modern_caps()));
    h.take_sent();
    // Keepalive due within [0.75, 1.0] x 10 s.
    let at = h.s.poll_timeout().unwrap();
    let d = at - h.now;
    assert!(
        d >= Duration::from_millis(7500) && d <= Duration::from_secs(10),
        "{d:?}"
    );
    h.fire();
    assert_eq!(h.take_sent(), vec![Message::Keepalive]);
    // Peer keepalive at t=20 restarts the hold timer to t=50.
    h.at(20.0);
    h.s.handle_message(h.now, conn, Message::Keepalive);
    h.take_sent();
    h.at(49.9);
    h.s.handle_timeout(h.now);
    assert_eq!(h.s.state(), State::Established);
    h.at(50.0);
    h.s.handle_timeout(h.now);
    let sent = h.take_sent();
    let n = notification(&sent).expect("hold timer notification");
    assert_eq!((n.code, n.subcode), (ErrorCode::HoldTimerExpired, 0));
    assert!(
        h.outputs
            .iter()
            .any(|o| matches!(o, Output::Down(DownReason::NotificationSent(_))))
    );
    assert!(h.outputs.iter().any(|o| *o == Output::Disconnect(conn)));
    assert_eq!(h.s.state(), State::Idle, "backing off");
    // Reconnects after the backoff (1 s, jittered).
    h.fire();
    assert!(h.drain().iter().any(|o| matches!(o, Output::Connect(_))));
    assert!(h.now - h.t0 <= Duration::from_secs(51));
}

#[test]
fn hold_time_zero_means_no_keepalives() {
    let mut h = Harness::new(config());
    h.establish(peer_open(0, modern_caps()));
    h.take_sent();
    assert_eq!(h.s.negotiated().unwrap().keepalive, None);
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "no hold, keepalive or retry timer"
    );
}

#[test]
fn bad_peer_as_is_rejected() {
    let mut h = Harness::new(config());
    let conn = h.connect();
    h.take_sent();
    let open = Open::new(65000, HoldTime::DEFAULT, PEER_ID, caps_for(65000));
    h.s.handle_message(h.now, conn, Message::Open(open));
    let sent = h.take_sent();
    let n = notification(&sent).unwrap();
    assert_eq!(
        (n.code, n.subcode),
        (ErrorCode::OpenMessage, open_subcode::BAD_PEER_AS)
    );
}

#[test]
fn same_router_id_within_an_as_is_rejected() {
    let mut c = config();
    c.peer_as = PeerAs::Internal;
    let mut h = Harness::new(c);
    let conn = h.connect();
    h.take_sent();
    let open = Open::new(
        64512,
        HoldTime::DEFAULT,
        Ipv4Addr::new(192, 0, 2, 1),
        caps_for(64512),
    );
    h.s.handle_message(h.now, conn, Message::Open(open));
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!(
        (n.code, n.subcode),
        (ErrorCode::OpenMessage, open_subcode::BAD_BGP_IDENTIFIER)
    );
}

#[test]
fn unexpected_messages_are_fsm_errors_with_the_state_subcode() {
    // KEEPALIVE in OpenSent: 5/1.
    let mut h = Harness::new(config());
    let conn = h.connect();
    h.s.handle_message(h.now, conn, Message::Keepalive);
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Fsm, 1));

    // UPDATE in OpenConfirm: 5/2.
    let mut h = Harness::new(config());
    let conn = h.connect();
    h.s.handle_message(h.now, conn, Message::Open(peer_open(90, modern_caps())));
    h.s.handle_message(h.now, conn, Message::Update(Update::default()));
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Fsm, 2));

    // OPEN in Established: 5/3.
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(90, modern_caps()));
    h.s.handle_message(h.now, conn, Message::Open(peer_open(90, modern_caps())));
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Fsm, 3));
    assert!(h.outputs.iter().any(|o| matches!(o, Output::Down(_))));
}

#[test]
fn unexpected_messages_before_open_sent_are_unspecified_fsm_errors() {
    // KEEPALIVE while DelayOpen waits for the peer's OPEN: 5/0, no OPEN
    // of ours first.
    let mut c = config();
    c.delay_open = Some(Duration::from_secs(2));
    let mut h = Harness::new(c);
    let conn = h.connect();
    h.s.handle_message(h.now, conn, Message::Keepalive);
    let sent = h.take_sent();
    assert!(matches!(sent[..], [Message::Notification(_)]), "{sent:?}");
    let n = notification(&sent).cloned().unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Fsm, 0));
    assert!(h.outputs.iter().any(|o| *o == Output::Disconnect(conn)));

    // ROUTE-REFRESH in OpenSent: 5/1, as every other unexpected message.
    let mut h = Harness::new(config());
    let conn = h.connect();
    let rr = RouteRefresh {
        afi: Afi::Ipv4,
        subtype: RefreshSubtype::Request,
        safi: Safi::Unicast,
    };
    h.s.handle_message(h.now, conn, Message::RouteRefresh(rr));
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Fsm, 1));
}

#[test]
fn a_repeated_connected_report_changes_nothing() {
    let mut h = Harness::new(config());
    let conn = h.connect();
    h.take_sent();
    h.s.handle_connected(h.now, conn, LOCAL.parse().unwrap(), REMOTE.parse().unwrap());
    assert!(h.take_sent().is_empty());
    assert_eq!(h.s.state(), State::OpenSent);
    // The session still completes on that connection.
    h.s.handle_message(h.now, conn, Message::Open(peer_open(90, modern_caps())));
    h.s.handle_message(h.now, conn, Message::Keepalive);
    assert_eq!(h.s.state(), State::Established);
}

#[test]
fn decode_errors_send_their_notification() {
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    let err = DecodeError::Header(crate::wire::HeaderError::BadLength { length: 5000 });
    h.s.handle_decode_error(h.now, conn, &err);
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!(
        (n.code, n.subcode, &n.data[..]),
        (ErrorCode::MessageHeader, 2, &[0x13, 0x88][..])
    );
    assert!(h.outputs.iter().any(|o| *o == Output::Disconnect(conn)));
}

#[test]
fn collision_keeps_the_connection_of_the_higher_identifier() {
    // Peer 192.0.2.2 > us 192.0.2.1: the peer's (inbound) connection wins.
    let mut h = Harness::new(config());
    let out = h.connect();
    let inc = h.s.handle_incoming(
        h.now,
        "192.0.2.1:179".parse().unwrap(),
        "192.0.2.2:50000".parse().unwrap(),
    );
    let inc = inc.expect("accepted");
    h.take_sent();
    h.s.handle_message(h.now, inc, Message::Open(peer_open(90, modern_caps())));
    let sent: Vec<(ConnId, Message)> = {
        h.drain();
        h.sent.drain(..).collect()
    };
    let cease = sent
        .iter()
        .find(|(_, m)| matches!(m, Message::Notification(_)))
        .expect("cease");
    assert_eq!(cease.0, out, "our outbound connection is closed");
    let Message::Notification(n) = &cease.1 else {
        unreachable!()
    };
    assert_eq!(
        (n.code, n.subcode),
        (
            ErrorCode::Cease,
            cease_subcode::CONNECTION_COLLISION_RESOLUTION
        )
    );
    assert_eq!(h.s.state(), State::OpenConfirm);
    h.s.handle_message(h.now, inc, Message::Keepalive);
    assert_eq!(h.s.state(), State::Established);

    // With a lower peer identifier, our outbound connection wins.
    let mut h = Harness::new(config());
    let out = h.connect();
    let inc = h.s.handle_incoming(
        h.now,
        "192.0.2.1:179".parse().unwrap(),
        "192.0.2.2:50000".parse().unwrap(),
    );
    let inc = inc.unwrap();
    let low = Open::new(
        64513,
        HoldTime::DEFAULT,
        Ipv4Addr::new(192, 0, 2, 0),
        modern_caps(),
    );
    h.s.handle_message(h.now, inc, Message::Open(low.clone()));
    h.drain();
    let closed: Vec<ConnId> = h
        .sent
        .iter()
        .filter(|(_, m)| matches!(m, Message::Notification(_)))
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(closed, vec![inc]);
    h.s.handle_message(h.now, out, Message::Open(low));
    h.s.handle_message(h.now, out, Message::Keepalive);
    assert_eq!(h.s.state(), State::Established);
}

#[test]
fn incoming_connection_while_established_is_refused_by_collision() {
    let mut h = Harness::new(config());
    h.establish(peer_open(90, modern_caps()));
    let inc = h.s.handle_incoming(
        h.now,
        "192.0.2.1:179".parse().unwrap(),
        "192.0.2.2:50001".parse().unwrap(),
    );
    let inc = inc.unwrap();
    h.take_sent();
    h.s.handle_message(h.now, inc, Message::Open(peer_open(90, modern_caps())));
    h.drain();
    let (conn, msg) = h
        .sent
        .iter()
        .find(|(_, m)| matches!(m, Message::Notification(_)))
        .unwrap();
    assert_eq!(*conn, inc);
    assert!(
        matches!(msg, Message::Notification(n) if n.subcode == cease_subcode::CONNECTION_COLLISION_RESOLUTION)
    );
    assert_eq!(h.s.state(), State::Established);
}

#[test]
fn rejected_capability_is_not_offered_again() {
    let mut h = Harness::new(config());
    let conn = h.connect();
    h.take_sent();
    // 2/7 with the extended message capability (code 6, length 0).
    let n = Notification::new(
        ErrorCode::OpenMessage,
        open_subcode::UNSUPPORTED_CAPABILITY,
        Bytes::from_static(&[6, 0]),
    );
    h.s.handle_message(h.now, conn, Message::Notification(n));
    assert_eq!(h.s.state(), State::Idle);
    h.fire();
    let next = match h
        .drain()
        .into_iter()
        .find(|o| matches!(o, Output::Connect(_)))
    {
        Some(Output::Connect(c)) => c,
        other => panic!("{other:?}"),
    };
    h.s.handle_connected(h.now, next, LOCAL.parse().unwrap(), REMOTE.parse().unwrap());
    let sent = h.take_sent();
    let Message::Open(open) = &sent[0] else {
        panic!()
    };
    assert!(!open.capabilities.contains(&Capability::ExtendedMessage));
    assert!(open.capabilities.contains(&Capability::RouteRefresh));
}

#[test]
fn route_refresh_resends_the_family_framed_by_borr_eorr() {
    let mut h = Harness::new(config());
    h.s.announce(
        "198.51.100.10/32".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    h.s.announce(
        "2001:db8::10/128".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    h.s.handle_message(
        h.now,
        conn,
        Message::RouteRefresh(RouteRefresh::request(Afi::Ipv4, Safi::Unicast)),
    );
    let sent = h.take_sent();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(
        matches!(&sent[0], Message::RouteRefresh(r) if r.subtype == RefreshSubtype::BeginningOfRefresh)
    );
    assert!(matches!(&sent[1], Message::Update(u) if u.nlri.len() == 1));
    assert!(
        matches!(&sent[2], Message::RouteRefresh(r) if r.subtype == RefreshSubtype::EndOfRefresh)
    );
    assert_eq!(h.s.stats().route_refreshes_received, 1);
    // A family that was not negotiated is ignored.
    h.s.handle_message(
        h.now,
        conn,
        Message::RouteRefresh(RouteRefresh::request(Afi::L2vpn, Safi::Evpn)),
    );
    assert!(h.take_sent().is_empty());
}

#[test]
fn stop_with_shutdown_message_or_preserving_forwarding() {
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    h.s.stop(h.now, StopMode::Shutdown("maintenance".into()));
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!(n.shutdown_message(), Some(Ok("maintenance")));
    assert!(h.outputs.iter().any(|o| *o == Output::Disconnect(conn)));
    assert_eq!(h.s.state(), State::Idle);
    assert_eq!(h.s.poll_timeout(), None);

    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    h.s.stop(h.now, StopMode::PreserveForwarding);
    assert!(notification(&h.take_sent()).is_none());
    assert!(h.outputs.iter().any(|o| *o == Output::Disconnect(conn)));
    assert!(
        h.outputs
            .iter()
            .any(|o| *o == Output::Down(DownReason::Stopped))
    );
}

fn bfd_down() -> Notification {
    Notification::new(ErrorCode::Cease, cease_subcode::BFD_DOWN, Bytes::new())
}

#[test]
fn hold_down_sends_cease_bfd_down_and_stays_idle_until_release() {
    let mut h = Harness::new(config());
    h.s.announce(
        "198.51.100.10/32".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    let conn = h.establish(peer_open(30, modern_caps()));
    h.take_sent();
    h.outputs.clear();

    h.at(1.0);
    h.s.hold_down(h.now, bfd_down());
    let n = notification(&h.take_sent()).cloned().unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Cease, 10));
    assert!(h.outputs.contains(&Output::Disconnect(conn)));
    assert!(
        h.outputs
            .contains(&Output::Down(DownReason::NotificationSent(n)))
    );
    assert_eq!(h.s.state(), State::Idle);
    assert!(h.s.is_held());
    // Nothing armed: no ConnectRetry, no IdleHold, so no reconnection.
    assert_eq!(h.s.poll_timeout(), None);
    // Spurious timeouts and a peer's connection change nothing.
    h.at(600.0);
    h.s.handle_timeout(h.now);
    assert_eq!(
        h.s.handle_incoming(h.now, LOCAL.parse().unwrap(), REMOTE.parse().unwrap()),
        None
    );
    // Holding again sends nothing more.
    h.s.hold_down(h.now, bfd_down());
    h.outputs.clear();
    h.drain();
    assert!(
        !h.outputs
            .iter()
            .any(|o| matches!(o, Output::Connect(_) | Output::Send { .. })),
        "{:?}",
        h.outputs
    );

    // Released: connects at once, and the routes go out again.
    h.s.release(h.now);
    assert!(!h.s.is_held());
    let outs = h.drain();
    let Some(&Output::Connect(conn)) = outs.iter().find(|o| matches!(o, Output::Connect(_))) else {
        panic!("{outs:?}")
    };
    assert_eq!(h.s.state(), State::Connect);
    h.s.handle_connected(h.now, conn, LOCAL.parse().unwrap(), REMOTE.parse().unwrap());
    h.s.handle_message(h.now, conn, Message::Open(peer_open(30, modern_caps())));
    h.s.handle_message(h.now, conn, Message::Keepalive);
    assert_eq!(h.s.state(), State::Established);
    let sent = h.take_sent();
    assert!(
        sent.iter()
            .any(|m| matches!(m, Message::Update(u) if u.nlri.len() == 1)),
        "{sent:?}"
    );
}

#[test]
fn session_started_held_neither_connects_nor_accepts_until_released() {
    let mut h = Harness::new(config());
    h.s.hold_down(h.now, bfd_down());
    h.s.start(h.now);
    assert!(
        !h.drain().iter().any(|o| matches!(o, Output::Connect(_))),
        "{:?}",
        h.outputs
    );
    assert_eq!(h.s.state(), State::Idle);
    assert_eq!(h.s.poll_timeout(), None);
    assert_eq!(
        h.s.handle_incoming(h.now, LOCAL.parse().unwrap(), REMOTE.parse().unwrap()),
        None
    );
    h.s.release(h.now);
    assert!(h.drain().iter().any(|o| matches!(o, Output::Connect(_))));
    // Releasing again does nothing.
    h.s.release(h.now);
    assert!(h.drain().is_empty());
}

#[test]
fn hold_down_during_connect_sends_no_notification() {
    let mut h = Harness::new(config());
    h.s.start(h.now);
    let outs = h.drain();
    let Some(&Output::Connect(conn)) = outs.iter().find(|o| matches!(o, Output::Connect(_))) else {
        panic!("{outs:?}")
    };
    h.s.hold_down(h.now, bfd_down());
    assert!(notification(&h.take_sent()).is_none());
    assert!(h.outputs.contains(&Output::Disconnect(conn)));
    // A late result of the abandoned attempt is ignored.
    h.s.handle_connected(h.now, conn, LOCAL.parse().unwrap(), REMOTE.parse().unwrap());
    assert_eq!(h.s.state(), State::Idle);
    // A stopped, held session stays Idle when released.
    h.s.stop(h.now, StopMode::Shutdown(String::new()));
    h.s.release(h.now);
    assert!(!h.drain().iter().any(|o| matches!(o, Output::Connect(_))));
    assert_eq!(h.s.state(), State::Idle);
}

#[test]
fn transport_loss_reconnects_with_backoff_and_resends_everything() {
    let mut h = Harness::new(config());
    h.s.announce(
        "198.51.100.10/32".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    h.s.handle_closed(h.now, conn);
    assert!(
        h.drain()
            .iter()
            .any(|o| *o == Output::Down(DownReason::TransportClosed))
    );
    assert!(h.s.rib().sent().is_empty());
    // A late event for the dead connection is ignored.
    h.s.handle_message(h.now, conn, Message::Keepalive);
    assert!(h.take_sent().is_empty());
    h.fire();
    let conn2 = match h
        .drain()
        .into_iter()
        .find(|o| matches!(o, Output::Connect(_)))
    {
        Some(Output::Connect(c)) => c,
        other => panic!("{other:?}"),
    };
    assert_ne!(conn, conn2);
    h.s.handle_connected(
        h.now,
        conn2,
        LOCAL.parse().unwrap(),
        REMOTE.parse().unwrap(),
    );
    h.s.handle_message(h.now, conn2, Message::Open(peer_open(90, modern_caps())));
    h.s.handle_message(h.now, conn2, Message::Keepalive);
    let sent = h.take_sent();
    assert!(
        sent.iter()
            .any(|m| matches!(m, Message::Update(u) if u.nlri.len() == 1)),
        "route re-sent"
    );
}

#[test]
fn connect_failure_retries_after_connect_retry_time() {
    let mut h = Harness::new(config());
    h.s.start(h.now);
    let Some(Output::Connect(c)) = h
        .drain()
        .into_iter()
        .find(|o| matches!(o, Output::Connect(_)))
    else {
        panic!()
    };
    assert_eq!(h.s.state(), State::Connect);
    h.s.handle_connect_failed(h.now, c);
    assert_eq!(h.s.state(), State::Active);
    let d = h.s.poll_timeout().unwrap() - h.now;
    assert!(
        d >= Duration::from_millis(3750) && d <= Duration::from_secs(5),
        "{d:?}"
    );
    h.fire();
    assert!(h.drain().iter().any(|o| matches!(o, Output::Connect(_))));
}

/// A connect that neither succeeds nor fails (the peer's SYNs go
/// unanswered) is abandoned when ConnectRetry expires, and a new one is
/// made: attempts stay ConnectRetryTime apart (RFC 4271 §8.2.2, event 9).
#[test]
fn pending_connect_is_abandoned_when_connect_retry_expires() {
    let mut c = config();
    c.connect_retry = Duration::from_secs(2);
    let mut h = Harness::new(c);
    h.s.start(h.now);
    let connects = |outs: &[Output]| -> Vec<ConnId> {
        outs.iter()
            .filter_map(|o| match o {
                Output::Connect(c) => Some(*c),
                _ => None,
            })
            .collect()
    };
    let first = connects(&h.drain());
    assert_eq!(first.len(), 1);
    assert_eq!(h.s.state(), State::Connect);
    let at = h.s.poll_timeout().unwrap();
    let d = at - h.now;
    assert!(
        d >= Duration::from_millis(1500) && d <= Duration::from_secs(2),
        "{d:?}"
    );
    h.fire();
    let outs = h.drain();
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::Disconnect(c) if *c == first[0])),
        "{outs:?}"
    );
    let second = connects(&outs);
    assert_eq!(second.len(), 1, "{outs:?}");
    assert_ne!(second[0], first[0]);
    assert_eq!(h.s.state(), State::Connect);
    // The abandoned attempt's late result changes nothing.
    h.s.handle_connect_failed(h.now, first[0]);
    assert!(connects(&h.drain()).is_empty());
    assert_eq!(h.s.state(), State::Connect);
    // The new one completes as usual.
    h.s.handle_connected(
        h.now,
        second[0],
        LOCAL.parse().unwrap(),
        REMOTE.parse().unwrap(),
    );
    assert_eq!(h.s.state(), State::OpenSent);
}

#[test]
fn passive_waits_for_the_peer() {
    let mut c = config();
    c.mode = ConnectMode::Passive;
    let mut h = Harness::new(c);
    h.s.start(h.now);
    assert!(!h.drain().iter().any(|o| matches!(o, Output::Connect(_))));
    assert_eq!(h.s.state(), State::Active);
    let inc = h.s.handle_incoming(
        h.now,
        "192.0.2.1:179".parse().unwrap(),
        "192.0.2.2:50000".parse().unwrap(),
    );
    let inc = inc.unwrap();
    assert!(matches!(h.take_sent()[..], [Message::Open(_)]));
    h.s.handle_message(h.now, inc, Message::Open(peer_open(90, modern_caps())));
    h.s.handle_message(h.now, inc, Message::Keepalive);
    assert_eq!(h.s.state(), State::Established);
    // A second inbound connection while one exists is refused.
    assert!(
        h.s.handle_incoming(
            h.now,
            "192.0.2.1:179".parse().unwrap(),
            REMOTE.parse().unwrap()
        )
        .is_none()
    );
}

#[test]
fn delay_open_waits_for_the_peer_or_the_timer() {
    let mut c = config();
    c.delay_open = Some(Duration::from_secs(2));
    let mut h = Harness::new(c.clone());
    let conn = h.connect();
    assert!(h.take_sent().is_empty(), "OPEN delayed");
    h.s.handle_message(h.now, conn, Message::Open(peer_open(90, modern_caps())));
    let sent = h.take_sent();
    assert!(
        matches!(sent[..], [Message::Open(_), Message::Keepalive]),
        "{sent:?}"
    );

    let mut h = Harness::new(c);
    h.connect();
    h.at(2.0);
    h.s.handle_timeout(h.now);
    assert!(matches!(h.take_sent()[..], [Message::Open(_)]));
    assert_eq!(h.s.state(), State::OpenSent);
}

#[test]
fn graceful_restart_capability() {
    let mut c = config();
    c.graceful_restart = Some(GracefulRestartConfig {
        restart_time: Duration::from_secs(120),
        restarting: true,
        forwarding_preserved: true,
    });
    let mut h = Harness::new(c);
    h.connect();
    let sent = h.take_sent();
    let Message::Open(open) = &sent[0] else {
        panic!()
    };
    let gr = open
        .capabilities
        .iter()
        .find_map(|c| match c {
            Capability::GracefulRestart(gr) => Some(gr),
            _ => None,
        })
        .expect("GR capability");
    assert!(gr.restart_state());
    assert_eq!(gr.restart_time, 120);
    assert_eq!(gr.families.len(), 2);
    assert!(
        gr.families
            .iter()
            .all(|f| f.flags == GracefulRestart::FORWARDING)
    );
}

#[test]
fn restart_state_only_until_first_established() {
    let mut c = config();
    c.graceful_restart = Some(GracefulRestartConfig {
        restart_time: Duration::from_secs(120),
        restarting: true,
        forwarding_preserved: true,
    });
    let mut h = Harness::new(c);
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    // The peer goes away; the next OPEN is no restart of ours.
    h.s.handle_closed(h.now, conn);
    let again = (0..10)
        .find_map(|_| {
            h.fire();
            h.drain().into_iter().find_map(|o| match o {
                Output::Connect(c) => Some(c),
                _ => None,
            })
        })
        .expect("a reconnect");
    h.s.handle_connected(
        h.now,
        again,
        LOCAL.parse().unwrap(),
        REMOTE.parse().unwrap(),
    );
    let r_bits: Vec<bool> = h
        .take_sent()
        .iter()
        .filter_map(|m| match m {
            Message::Open(open) => open.capabilities.iter().find_map(|c| match c {
                Capability::GracefulRestart(gr) => Some(gr.restart_state()),
                _ => None,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(r_bits, vec![false], "second OPEN must clear R");
}

#[test]
fn received_routes_are_counted_and_dropped() {
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    let mut u = Update::default();
    u.nlri.push(Nlri::new("203.0.113.0/24".parse().unwrap()));
    u.withdrawn
        .push(Nlri::new("203.0.114.0/24".parse().unwrap()));
    h.s.handle_message(h.now, conn, Message::Update(u));
    assert!(h.take_sent().is_empty(), "nothing re-advertised");
    let st = h.s.stats();
    assert_eq!((st.updates_received, st.withdrawals_received), (1, 1));
    // Missing mandatory attributes: treat-as-withdraw, counted as such.
    assert_eq!(st.treat_as_withdraw, 0);
    assert_eq!(st.prefixes_received, 1);
    assert_eq!(h.s.state(), State::Established);
}

#[test]
fn peer_without_multiprotocol_gets_ipv4_only() {
    let mut h = Harness::new(config());
    h.s.announce(
        "2001:db8::10/128".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    h.establish(peer_open(90, vec![Capability::FourOctetAs(64513)]));
    assert_eq!(
        h.s.negotiated().unwrap().families,
        vec![Family::Ipv4Unicast]
    );
    let sent = h.take_sent();
    let updates: Vec<_> = sent
        .iter()
        .filter(|m| matches!(m, Message::Update(_)))
        .collect();
    assert_eq!(updates.len(), 1, "only the IPv4 End-of-RIB: {sent:?}");
    assert_eq!(h.s.stats().prefixes_skipped, 1);
}

#[test]
fn two_octet_peer_gets_as_trans_in_open() {
    let mut c = config();
    c.local_as = 4_200_000_000;
    let mut h = Harness::new(c);
    h.connect();
    let sent = h.take_sent();
    let Message::Open(open) = &sent[0] else {
        panic!()
    };
    assert_eq!(open.my_as, crate::wire::iana::AS_TRANS);
    assert_eq!(open.asn(), 4_200_000_000);
}

#[test]
fn ipv6_transport_uses_global_and_link_local_next_hop() {
    let mut c = config();
    c.link_local_v6 = Some("fe80::1".parse().unwrap());
    c.extended_next_hop = true;
    let mut h = Harness::new(c);
    h.s.announce(
        "2001:db8:1::10/128".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    h.s.announce(
        "198.51.100.10/32".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    h.s.start(h.now);
    let Some(Output::Connect(conn)) = h
        .drain()
        .into_iter()
        .find(|o| matches!(o, Output::Connect(_)))
    else {
        panic!()
    };
    let local: SocketAddr = "[2001:db8::1]:40000".parse().unwrap();
    h.s.handle_connected(h.now, conn, local, "[2001:db8::2]:179".parse().unwrap());
    let mut caps = modern_caps();
    caps.push(Capability::ExtendedNextHop(vec![ExtendedNextHop {
        afi: Afi::Ipv4,
        safi: 1,
        next_hop_afi: Afi::Ipv6,
    }]));
    h.s.handle_message(h.now, conn, Message::Open(peer_open(90, caps)));
    h.s.handle_message(h.now, conn, Message::Keepalive);
    let sent = h.take_sent();
    let reach: Vec<&MpReach> = sent
        .iter()
        .filter_map(|m| match m {
            Message::Update(u) => u.mp_reach(),
            _ => None,
        })
        .collect();
    let expected = NextHop::V6 {
        global: "2001:db8::1".parse().unwrap(),
        link_local: Some("fe80::1".parse().unwrap()),
    };
    assert!(
        reach
            .iter()
            .any(|r| matches!(r, MpReach::Ipv4Unicast { next_hop, .. } if *next_hop == expected))
    );
    assert!(
        reach
            .iter()
            .any(|r| matches!(r, MpReach::Ipv6Unicast { next_hop, .. } if *next_hop == expected))
    );
}

/// Sent NOTIFICATIONs' error codes.
fn notification_codes(sent: &[Message]) -> Vec<u8> {
    sent.iter()
        .filter_map(|m| match m {
            Message::Notification(n) => Some(n.code.into()),
            _ => None,
        })
        .collect()
}

#[test]
fn send_hold_timer_gives_up_a_peer_that_stops_reading() {
    // RFC 9687: hold time 90 s negotiated, so SendHoldTime is 8 minutes.
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    h.s.handle_send_blocked(h.now, conn);
    // Keepalives and their answers keep the hold timer happy meanwhile.
    let t0 = h.now;
    while h.now + Duration::from_secs(29) < t0 + Duration::from_secs(480) {
        h.now += Duration::from_secs(29);
        h.s.handle_message(h.now, conn, Message::Keepalive);
        h.s.handle_timeout(h.now);
        // Being blocked again changes nothing: the timer keeps its start.
        h.s.handle_send_blocked(h.now, conn);
    }
    assert_eq!(h.s.state(), State::Established);
    h.now = t0 + Duration::from_secs(480);
    h.s.handle_timeout(h.now);
    let sent = h.take_sent();
    assert_eq!(
        notification_codes(&sent),
        vec![8],
        "Send Hold Timer Expired"
    );
    assert_ne!(h.s.state(), State::Established);
    assert_eq!(h.s.stats().send_hold_expired, 1);
    assert!(h.outputs.iter().any(|o| matches!(
        o,
        Output::Down(DownReason::NotificationSent(n)) if n.code == ErrorCode::SendHoldTimerExpired
    )));
}

#[test]
fn send_hold_timer_restarts_on_progress_and_stops_when_drained() {
    let mut c = config();
    c.send_hold_time = Some(Duration::from_secs(3));
    let mut h = Harness::new(c);
    let conn = h.establish(peer_open(90, modern_caps()));
    h.take_sent();
    let t0 = h.now;
    h.s.handle_send_blocked(h.now, conn);
    // Slow progress every 2 s: never 3 s without a byte written.
    for i in 1..=5 {
        h.now = t0 + Duration::from_secs(2 * i);
        h.s.handle_timeout(h.now);
        h.s.handle_send_progress(h.now, conn, false);
    }
    assert_eq!(h.s.state(), State::Established);
    // Drained: no timer runs any more, however long it stays quiet.
    h.s.handle_send_progress(h.now, conn, true);
    h.now += Duration::from_secs(30);
    h.s.handle_message(h.now, conn, Message::Keepalive);
    h.s.handle_timeout(h.now);
    assert_eq!(h.s.state(), State::Established);
    assert!(notification_codes(&h.take_sent()).is_empty());
    // Blocked again and no progress: given up 3 s later.
    h.s.handle_send_blocked(h.now, conn);
    h.now += Duration::from_secs(3);
    h.s.handle_timeout(h.now);
    assert_eq!(notification_codes(&h.take_sent()), vec![8]);
}

#[test]
fn no_send_hold_timer_without_hold_time() {
    // RFC 9687 ties SendHoldTime to the hold time; a peer that negotiated
    // none (0) gets no send hold timer either.
    let mut h = Harness::new(config());
    let conn = h.establish(peer_open(0, modern_caps()));
    h.take_sent();
    h.s.handle_send_blocked(h.now, conn);
    h.now += Duration::from_secs(3600);
    h.s.handle_timeout(h.now);
    assert_eq!(h.s.state(), State::Established);
    assert_eq!(h.s.stats().send_hold_expired, 0);
}

#[test]
fn ipv6_routes_over_ipv4_use_the_interface_global_address() {
    let mut h = Harness::new(config());
    h.s.announce(
        "2001:db8::10/128".parse().unwrap(),
        Arc::new(RouteAttrs::default()),
    );
    let global: Ipv6Addr = "fd00::2".parse().unwrap();
    h.s.set_interface_v6(Some(global));
    h.establish(peer_open(90, modern_caps()));
    let next_hops: Vec<Ipv6Addr> = h
        .take_sent()
        .iter()
        .filter_map(|m| match m {
            Message::Update(u) => match u.mp_reach() {
                Some(MpReach::Ipv6Unicast {
                    next_hop: NextHop::V6 { global, .. },
                    nlri,
                }) if !nlri.is_empty() => Some(*global),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(next_hops, vec![global], "not the IPv4-mapped address");
}

/// The bytes of every message sent so far, one message each.
fn sent_frames(h: &mut Harness) -> Vec<Vec<u8>> {
    h.drain();
    let ctx = DecodeCtx::default();
    let mut frames = Vec::new();
    for o in &h.outputs {
        if let Output::Send { bytes, .. } = o {
            let mut rest = &bytes[..];
            while let Some(len) = frame::decode(rest, &ctx).unwrap() {
                frames.push(rest[..len].to_vec());
                rest = &rest[len..];
            }
        }
    }
    frames
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// MetalLB `localASN`, FRR's `neighbor X local-as N [no-prepend
/// replace-as]`: what the OPEN and the AS_PATH of our routes carry, byte
/// for byte, and that internal/external is decided against N. Our real AS
/// is 64512 (0xfc00) throughout.
#[test]
fn local_as_override_in_open_and_as_path() {
    struct Case {
        what: &'static str,
        local_as: Option<LocalAs>,
        peer: PeerAs,
        peer_as: u32,
        /// OPEN octets 19..=21: Version, My Autonomous System.
        open_my_as: [u8; 3],
        /// The 4-octet AS capability: code 65, length 4, the AS.
        as4_cap: [u8; 6],
        /// The AS_PATH attribute: flags 0x40, type 2, length, then
        /// AS_SEQUENCE (2), count, 4-octet ASes.
        as_path: &'static [u8],
        local_pref: bool,
    }
    let cases = [
        Case {
            what: "no override",
            local_as: None,
            peer: PeerAs::Exact(64500),
            peer_as: 64500,
            open_my_as: [4, 0xfc, 0x00],
            as4_cap: [65, 4, 0, 0, 0xfc, 0x00],
            as_path: &[0x40, 2, 6, 2, 1, 0, 0, 0xfc, 0x00],
            local_pref: false,
        },
        Case {
            what: "MetalLB's no-prepend replace-as: N alone",
            local_as: Some(LocalAs {
                asn: 65410,
                replace_as: true,
            }),
            peer: PeerAs::Exact(64500),
            peer_as: 64500,
            open_my_as: [4, 0xff, 0x82],
            as4_cap: [65, 4, 0, 0, 0xff, 0x82],
            as_path: &[0x40, 2, 6, 2, 1, 0, 0, 0xff, 0x82],
            local_pref: false,
        },
        Case {
            what: "FRR's default: N, then the real AS",
            local_as: Some(LocalAs {
                asn: 65410,
                replace_as: false,
            }),
            peer: PeerAs::Exact(64500),
            peer_as: 64500,
            open_my_as: [4, 0xff, 0x82],
            as4_cap: [65, 4, 0, 0, 0xff, 0x82],
            as_path: &[0x40, 2, 10, 2, 2, 0, 0, 0xff, 0x82, 0, 0, 0xfc, 0x00],
            local_pref: false,
        },
        Case {
            what: "a 4-octet N: AS_TRANS (23456 = 0x5ba0) in My AS",
            local_as: Some(LocalAs {
                asn: 4_200_000_001,
                replace_as: true,
            }),
            peer: PeerAs::Exact(64500),
            peer_as: 64500,
            open_my_as: [4, 0x5b, 0xa0],
            as4_cap: [65, 4, 0xfa, 0x56, 0xea, 0x01],
            as_path: &[0x40, 2, 6, 2, 1, 0xfa, 0x56, 0xea, 0x01],
            local_pref: false,
        },
        Case {
            what: "peer AS equal to N: internal, empty AS_PATH, LOCAL_PREF",
            local_as: Some(LocalAs {
                asn: 65410,
                replace_as: true,
            }),
            peer: PeerAs::Exact(65410),
            peer_as: 65410,
            open_my_as: [4, 0xff, 0x82],
            as4_cap: [65, 4, 0, 0, 0xff, 0x82],
            as_path: &[0x40, 2, 0],
            local_pref: true,
        },
        Case {
            what: "dynamicASN internal is checked against N",
            local_as: Some(LocalAs {
                asn: 65410,
                replace_as: true,
            }),
            peer: PeerAs::Internal,
            peer_as: 65410,
            open_my_as: [4, 0xff, 0x82],
            as4_cap: [65, 4, 0, 0, 0xff, 0x82],
            as_path: &[0x40, 2, 0],
            local_pref: true,
        },
        Case {
            what: "dynamicASN external accepts the real AS when it differs from N",
            local_as: Some(LocalAs {
                asn: 65410,
                replace_as: true,
            }),
            peer: PeerAs::External,
            peer_as: 64512,
            open_my_as: [4, 0xff, 0x82],
            as4_cap: [65, 4, 0, 0, 0xff, 0x82],
            as_path: &[0x40, 2, 6, 2, 1, 0, 0, 0xff, 0x82],
            local_pref: false,
        },
    ];
    for c in cases {
        let mut config = config();
        config.local_as_override = c.local_as;
        config.peer_as = c.peer;
        config.families = vec![Family::Ipv4Unicast];
        let mut h = Harness::new(config);
        h.s.announce(
            "198.51.100.10/32".parse().unwrap(),
            Arc::new(RouteAttrs::default()),
        );
        let peer = Open::new(c.peer_as, HoldTime::DEFAULT, PEER_ID, caps_for(c.peer_as));
        h.establish(peer);
        let frames = sent_frames(&mut h);
        let open = &frames[0];
        assert_eq!(open[18], 1, "{}: an OPEN first", c.what);
        assert_eq!(open[19..22], c.open_my_as, "{}: My AS", c.what);
        assert!(contains(open, &c.as4_cap), "{}: {open:02x?}", c.what);
        let update = frames
            .iter()
            .find(|f| f[18] == 2 && contains(f, &[198, 51, 100, 10]))
            .unwrap_or_else(|| panic!("{}: no UPDATE in {frames:02x?}", c.what));
        assert!(contains(update, c.as_path), "{}: {update:02x?}", c.what);
        // LOCAL_PREF: flags 0x40, type 5, length 4, 100.
        assert_eq!(
            contains(update, &[0x40, 5, 4, 0, 0, 0, 100]),
            c.local_pref,
            "{}: {update:02x?}",
            c.what
        );
    }
}

/// The peer must present the AS it is configured for against N: the real
/// AS is refused when N is expected, and dynamicASN external refuses N.
#[test]
fn local_as_override_checks_the_peer_against_n() {
    for (peer, peer_as) in [
        (PeerAs::Exact(65410), 64512),
        (PeerAs::Internal, 64512),
        (PeerAs::External, 65410),
    ] {
        let mut config = config();
        config.local_as_override = Some(LocalAs {
            asn: 65410,
            replace_as: true,
        });
        config.peer_as = peer;
        let mut h = Harness::new(config);
        let conn = h.connect();
        h.take_sent();
        let open = Open::new(peer_as, HoldTime::DEFAULT, PEER_ID, caps_for(peer_as));
        h.s.handle_message(h.now, conn, Message::Open(open));
        let n = notification(&h.take_sent()).cloned();
        assert_eq!(
            n.map(|n| (n.code, n.subcode)),
            Some((ErrorCode::OpenMessage, open_subcode::BAD_PEER_AS)),
            "{peer:?} with a peer in AS {peer_as}"
        );
    }
}
