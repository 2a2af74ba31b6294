//! The interop matrix: each of FRR, BIRD 2 and GoBGP, over eBGP on IPv4
//! transport and iBGP on IPv6 transport, receives our IPv4 /32 and IPv6
//! /128 routes with MED, communities, large communities and (iBGP)
//! LOCAL_PREF, checked attribute by attribute with the router's own tools;
//! then an attribute change, a route refresh requested by the router, and
//! a withdrawal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Ferrolb, Lab, eventually};
use testnet::{Bird, Frr, Gobgp};

const T: Duration = Duration::from_secs(30);
const V4: &str = "198.51.100.10/32";
const V6: &str = "2001:db8::10/128";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// AS 64500 (router) and 64512 (us), over 10.0.0.1 <-> 10.0.0.2.
    EbgpV4,
    /// AS 64512 both, over fd00::1 <-> fd00::2.
    IbgpV6,
}

impl Mode {
    fn router_as(self) -> u32 {
        match self {
            Self::EbgpV4 => 64500,
            Self::IbgpV6 => 64512,
        }
    }
    fn router_addr(self) -> &'static str {
        match self {
            Self::EbgpV4 => "10.0.0.1",
            Self::IbgpV6 => "fd00::1",
        }
    }
    fn our_addr(self) -> &'static str {
        match self {
            Self::EbgpV4 => "10.0.0.2",
            Self::IbgpV6 => "fd00::2",
        }
    }
}

/// One router under test, behind a uniform face.
enum Router {
    Frr(Frr),
    Bird(Bird),
    Gobgp(Gobgp),
}

impl Router {
    fn start(kind: &str, lab: &Lab, mode: Mode) -> Self {
        let (ras, peer, las) = (mode.router_as(), mode.our_addr(), 64512);
        match kind {
            "frr" => Self::Frr(Frr::start(
                &lab.router,
                &format!(
                    "router bgp {ras}
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 neighbor {peer} remote-as {las}
 neighbor {peer} timers connect 2
 address-family ipv4 unicast
  neighbor {peer} activate
 exit-address-family
 address-family ipv6 unicast
  neighbor {peer} activate
 exit-address-family
"
                ),
            )),
            "bird" => {
                let local = mode.router_addr();
                let b = Bird::start(
                    &lab.router,
                    &format!(
                        "router id 10.0.0.1;
protocol device {{ }}
protocol direct {{ ipv4; ipv6; interface \"eth0\"; }}
protocol bgp node {{
  local {local} as {ras};
  neighbor {peer} as {las};
  passive on;
  # BIRD refuses a peer for 60 s after a session error by default.
  error wait time 1, 5;
  ipv4 {{ import all; export none; }};
  ipv6 {{ import all; export none; }};
}}
"
                    ),
                );
                lab.router.wait_listening(179, T);
                Self::Bird(b)
            }
            "gobgp" => {
                let g = Gobgp::start(
                    &lab.router,
                    &format!(
                        "[global.config]
  as = {ras}
  router-id = \"10.0.0.1\"
  port = 179
[[neighbors]]
  [neighbors.config]
    neighbor-address = \"{peer}\"
    peer-as = {las}
  [neighbors.transport.config]
    passive-mode = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = \"ipv4-unicast\"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = \"ipv6-unicast\"
"
                    ),
                );
                lab.router.wait_listening(179, T);
                Self::Gobgp(g)
            }
            other => panic!("unknown router {other}"),
        }
    }

    /// The router's view of `prefix` with its attributes, as text, if it
    /// holds it.
    fn route(&self, prefix: &str) -> Option<String> {
        let v6 = prefix.contains(':');
        match self {
            Self::Frr(f) => {
                let afi = if v6 { "ipv6" } else { "ipv4" };
                let v = f.vtysh_json(&format!("show bgp {afi} unicast {prefix} json"));
                v["paths"]
                    .as_array()
                    .and_then(|p| p.first())
                    .map(ToString::to_string)
            }
            Self::Bird(b) => {
                let out = b.birdc(&format!("show route {prefix} all"));
                out.contains(prefix.split('/').next().unwrap_or(prefix))
                    .then_some(out)
            }
            Self::Gobgp(g) => {
                let afi = if v6 { "ipv6" } else { "ipv4" };
                let out = g.gobgp(&["global", "rib", "-a", afi, prefix]);
                out.contains(prefix.split('/').next().unwrap_or(prefix))
                    .then_some(out)
            }
        }
    }

    /// What the route text must contain for each attribute.
    fn expect_med(&self, med: u32) -> String {
        match self {
            Self::Frr(_) => format!("\"metric\":{med}"),
            Self::Bird(_) => format!("BGP.med: {med}"),
            Self::Gobgp(_) => format!("{{Med: {med}}}"),
        }
    }
    fn expect_local_pref(&self, lp: u32) -> String {
        match self {
            Self::Frr(_) => format!("\"locPrf\":{lp}"),
            Self::Bird(_) => format!("BGP.local_pref: {lp}"),
            Self::Gobgp(_) => format!("{{LocalPref: {lp}}}"),
        }
    }
    fn expect_community(&self, a: u32, b: u32) -> String {
        match self {
            Self::Bird(_) => format!("({a},{b})"),
            _ => format!("{a}:{b}"),
        }
    }
    fn expect_large(&self, a: u32, b: u32, c: u32) -> String {
        match self {
            Self::Bird(_) => format!("({a}, {b}, {c})"),
            _ => format!("{a}:{b}:{c}"),
        }
    }

    /// Makes the router send us a ROUTE-REFRESH; false when it cannot.
    /// GoBGP keeps its Adj-RIB-In and answers `softresetin` from it, never
    /// asking the peer, and its CLI has no other way to send one.
    fn request_refresh(&self, peer: &str) -> bool {
        match self {
            Self::Frr(f) => {
                f.vtysh(&format!("clear bgp ipv4 unicast {peer} soft in"));
                true
            }
            Self::Bird(b) => {
                b.birdc("reload in node");
                true
            }
            Self::Gobgp(_) => false,
        }
    }
}

fn run(kind: &str, mode: Mode) {
    let lab = Lab::new();
    let router = Router::start(kind, &lab, mode);
    let peer_as = mode.router_as().to_string();
    let peer = if mode == Mode::IbgpV6 {
        "[fd00::1]:179".to_owned()
    } else {
        "10.0.0.1".to_owned()
    };
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--local-as",
            "64512",
            "--router-id",
            "10.0.0.2",
            "--peer",
            &peer,
            "--peer-as",
            &peer_as,
            "--mode",
            "active",
            "--connect-retry",
            "1",
            "--next-hop-v4",
            "10.0.0.2",
            "--next-hop-v6",
            "fd00::2",
            "--route",
            &format!("{V4},med=5,local-pref=200,community=64512:100,large-community=64512:1:2"),
            "--route",
            &format!("{V6},med=6,local-pref=300,community=64512:200,large-community=64512:3:4"),
        ],
    );
    ours.wait_established(1, T);
    let ibgp = mode == Mode::IbgpV6;

    let v4 = eventually(&format!("{kind} to hold {V4}"), T, || router.route(V4));
    let v6 = eventually(&format!("{kind} to hold {V6}"), T, || router.route(V6));
    for (text, med, lp, c, l) in [
        (&v4, 5, 200, (64512, 100), (64512, 1, 2)),
        (&v6, 6, 300, (64512, 200), (64512, 3, 4)),
    ] {
        assert!(
            text.contains(&router.expect_med(med)),
            "{kind} {mode:?}: MED {med} missing:\n{text}"
        );
        assert!(
            text.contains(&router.expect_community(c.0, c.1)),
            "{kind} {mode:?}: community missing:\n{text}"
        );
        assert!(
            text.contains(&router.expect_large(l.0, l.1, l.2)),
            "{kind} {mode:?}: large community missing:\n{text}"
        );
        if ibgp {
            assert!(
                text.contains(&router.expect_local_pref(lp)),
                "{kind} {mode:?}: LOCAL_PREF {lp} missing:\n{text}"
            );
        } else {
            assert!(
                !text.contains(&router.expect_local_pref(lp)),
                "{kind} {mode:?}: LOCAL_PREF sent over eBGP:\n{text}"
            );
        }
    }

    // Change of attributes.
    ours.send(&format!("announce {V4},med=7,community=64512:101"));
    let changed = eventually(&format!("{kind} to see MED 7"), T, || {
        router
            .route(V4)
            .filter(|t| t.contains(&router.expect_med(7)))
    });
    assert!(
        changed.contains(&router.expect_community(64512, 101)),
        "{kind} {mode:?}:\n{changed}"
    );
    assert!(
        !changed.contains(&router.expect_large(64512, 1, 2)),
        "{kind} {mode:?}: stale large community:\n{changed}"
    );

    // Route refresh requested by the router.
    let before = ours.stats()["route_refreshes_received"]
        .as_u64()
        .unwrap_or(0);
    if router.request_refresh(mode.our_addr()) {
        eventually(&format!("{kind}'s ROUTE-REFRESH to be answered"), T, || {
            (ours.stats()["route_refreshes_received"]
                .as_u64()
                .unwrap_or(0)
                > before)
                .then_some(())
        });
    }
    assert!(router.route(V4).is_some() && router.route(V6).is_some());

    // Withdrawal.
    ours.send(&format!("withdraw {V6}"));
    eventually(&format!("{kind} to drop {V6}"), T, || {
        router.route(V6).is_none().then_some(())
    });
    assert!(router.route(V4).is_some());
    assert_eq!(ours.stats()["state"], "Established");
}

#[test]
fn frr_ebgp_ipv4_transport() {
    run("frr", Mode::EbgpV4);
}

#[test]
fn frr_ibgp_ipv6_transport() {
    run("frr", Mode::IbgpV6);
}

#[test]
fn bird_ebgp_ipv4_transport() {
    run("bird", Mode::EbgpV4);
}

#[test]
fn bird_ibgp_ipv6_transport() {
    run("bird", Mode::IbgpV6);
}

#[test]
fn gobgp_ebgp_ipv4_transport() {
    run("gobgp", Mode::EbgpV4);
}

#[test]
fn gobgp_ibgp_ipv6_transport() {
    run("gobgp", Mode::IbgpV6);
}

/// The router restarts: we notice, reconnect and re-advertise everything.
fn restart(kind: &str) {
    let lab = Lab::new();
    let router = Router::start(kind, &lab, Mode::EbgpV4);
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--local-as",
            "64512",
            "--router-id",
            "10.0.0.2",
            "--peer",
            "10.0.0.1",
            "--peer-as",
            "64500",
            "--mode",
            "active",
            "--connect-retry",
            "1",
            "--next-hop-v6",
            "fd00::2",
            "--route",
            &format!("{V4},community=64512:100"),
            "--route",
            V6,
        ],
    );
    ours.wait_established(1, T);
    eventually(&format!("{kind} to hold {V4}"), T, || router.route(V4));
    drop(router);
    ours.wait_event("the session to go down", T, |v| v["event"] == "down");
    let router = Router::start(kind, &lab, Mode::EbgpV4);
    ours.wait_established(2, T);
    let v4 = eventually(&format!("the restarted {kind} to hold {V4}"), T, || {
        router.route(V4)
    });
    assert!(
        v4.contains(&router.expect_community(64512, 100)),
        "{kind}:\n{v4}"
    );
    eventually(&format!("the restarted {kind} to hold {V6}"), T, || {
        router.route(V6)
    });
}

#[test]
fn bird_restart() {
    restart("bird");
}

#[test]
fn gobgp_restart() {
    restart("gobgp");
}

/// The router freezes past the hold time: we send Hold Timer Expired,
/// then recover once it runs again.
fn frozen(kind: &str) {
    let lab = Lab::new();
    let mut router = Router::start(kind, &lab, Mode::EbgpV4);
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--local-as",
            "64512",
            "--router-id",
            "10.0.0.2",
            "--peer",
            "10.0.0.1",
            "--peer-as",
            "64500",
            "--mode",
            "active",
            "--connect-retry",
            "1",
            "--hold-time",
            "3",
            "--route",
            V4,
        ],
    );
    ours.wait_established(1, T);
    eventually(&format!("{kind} to hold {V4}"), T, || router.route(V4));
    // A down event after the freeze, not an earlier one.
    let from = ours.seen.len();
    router.process().signal(testnet::Signal::SIGSTOP);
    let down = ours.wait_event_from("hold timer expiry", from, T, |v| {
        v["event"] == "down"
            && v["reason"]
                .as_str()
                .is_some_and(|r| r.contains("NOTIFICATION 4/0"))
    });
    assert!(
        down["reason"].as_str().unwrap().starts_with("sent"),
        "{down}"
    );
    router.process().signal(testnet::Signal::SIGCONT);
    ours.wait_established(2, T);
    eventually(&format!("{V4} back at {kind}"), T, || router.route(V4));
}

impl Router {
    fn process(&mut self) -> &mut testnet::Proc {
        match self {
            Self::Frr(f) => f.daemon("bgpd").expect("bgpd"),
            Self::Bird(b) => b.process(),
            Self::Gobgp(g) => g.process(),
        }
    }
}

#[test]
fn bird_frozen_past_hold_time() {
    frozen("bird");
}

#[test]
fn gobgp_frozen_past_hold_time() {
    frozen("gobgp");
}
