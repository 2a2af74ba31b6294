//! ferrolb's BGP speaker against real routers (FRR, BIRD 2, GoBGP) in
//! network namespaces: what each router received, attribute by attribute,
//! checked with its own tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Ferrolb, Lab, eventually};
use serde_json::Value;
use testnet::{Bird, Frr, Gobgp, Signal};

const T: Duration = Duration::from_secs(30);

fn frr_conf(extra_neighbor: &str) -> String {
    format!(
        "router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 neighbor 10.0.0.2 remote-as 64512
 neighbor 10.0.0.2 timers connect 2
{extra_neighbor}
 address-family ipv6 unicast
  neighbor 10.0.0.2 activate
 exit-address-family
"
    )
}

/// The best path FRR holds for `prefix`, if any.
fn frr_path(frr: &Frr, afi: &str, prefix: &str) -> Option<Value> {
    let v = frr.vtysh_json(&format!("show bgp {afi} unicast {prefix} json"));
    v["paths"].as_array().and_then(|p| p.first()).cloned()
}

fn frr_has(frr: &Frr, afi: &str, prefix: &str) -> bool {
    frr_path(frr, afi, prefix).is_some()
}

#[test]
fn frr_ebgp_ipv4_transport_attributes_withdraw_change_refresh() {
    let lab = Lab::new();
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
            "--listen",
            "0.0.0.0:179",
            "--next-hop-v6",
            "fd00::2",
            "--route",
            "198.51.100.10/32,med=5,community=64512:100,community=no-export,large-community=64512:1:2",
            "--route",
            "2001:db8::10/128,community=64512:200,large-community=64512:3:4",
        ],
    );
    lab.node.wait_listening(179, T);
    let frr = Frr::start(&lab.router, &frr_conf(""));
    frr.wait_established("10.0.0.2", T);
    ours.wait_established(1, T);

    let v4 = eventually("FRR to hold 198.51.100.10/32", T, || {
        frr_path(&frr, "ipv4", "198.51.100.10/32")
    });
    assert_eq!(v4["aspath"]["string"], "64512", "{v4:#}");
    assert_eq!(v4["metric"], 5, "{v4:#}");
    assert_eq!(v4["community"]["string"], "64512:100 no-export", "{v4:#}");
    assert_eq!(v4["largeCommunity"]["string"], "64512:1:2", "{v4:#}");
    assert_eq!(v4["nexthops"][0]["ip"], "10.0.0.2", "{v4:#}");
    assert_eq!(v4["origin"], "IGP", "{v4:#}");
    let v6 = eventually("FRR to hold 2001:db8::10/128", T, || {
        frr_path(&frr, "ipv6", "2001:db8::10/128")
    });
    assert_eq!(v6["community"]["string"], "64512:200", "{v6:#}");
    assert_eq!(v6["largeCommunity"]["string"], "64512:3:4", "{v6:#}");
    assert_eq!(v6["nexthops"][0]["ip"], "fd00::2", "{v6:#}");

    // Change of attributes.
    ours.send("announce 198.51.100.10/32,med=7,community=64512:101");
    eventually("the new MED at FRR", T, || {
        frr_path(&frr, "ipv4", "198.51.100.10/32").filter(|p| p["metric"] == 7)
    });
    let p = frr_path(&frr, "ipv4", "198.51.100.10/32").unwrap();
    assert_eq!(p["community"]["string"], "64512:101");
    assert!(
        p.get("largeCommunity").is_none(),
        "large community removed: {p:#}"
    );

    // Withdraw.
    ours.send("withdraw 2001:db8::10/128");
    eventually("FRR to drop 2001:db8::10/128", T, || {
        (!frr_has(&frr, "ipv6", "2001:db8::10/128")).then_some(())
    });
    assert!(frr_has(&frr, "ipv4", "198.51.100.10/32"));

    // Route refresh requested by the router: we re-send the family.
    let before = ours.stats();
    frr.vtysh("clear bgp ipv4 unicast 10.0.0.2 soft in");
    eventually("the refresh to be answered", T, || {
        let s = ours.stats();
        (s["route_refreshes_received"].as_u64() > before["route_refreshes_received"].as_u64())
            .then_some(())
    });
    assert!(frr_has(&frr, "ipv4", "198.51.100.10/32"));
    let s = ours.stats();
    assert_eq!(s["state"], "Established");
    assert_eq!(s["advertised"], 1);
}

#[test]
fn frr_restart_and_hold_timer_expiry_recover() {
    let lab = Lab::new();
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
            "--hold-time",
            "3",
            "--connect-retry",
            "1",
            "--route",
            "198.51.100.20/32",
        ],
    );
    let frr = Frr::start(&lab.router, &frr_conf(" neighbor 10.0.0.2 timers 1 3"));
    frr.wait_established("10.0.0.2", T);
    ours.wait_established(1, T);
    eventually("the route at FRR", T, || {
        frr_has(&frr, "ipv4", "198.51.100.20/32").then_some(())
    });

    // Router restarted: we reconnect and re-advertise.
    drop(frr);
    ours.wait_event("session down", T, |v| v["event"] == "down");
    let mut frr = Frr::start(&lab.router, &frr_conf(" neighbor 10.0.0.2 timers 1 3"));
    ours.wait_established(2, T);
    eventually("the route at the restarted FRR", T, || {
        frr_has(&frr, "ipv4", "198.51.100.20/32").then_some(())
    });

    // Router frozen past the hold time: we send Hold Timer Expired (a
    // down event after the freeze, not an earlier one).
    let from = ours.seen.len();
    let bgpd = frr.daemon("bgpd").unwrap();
    bgpd.signal(Signal::SIGSTOP);
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
    frr.daemon("bgpd").unwrap().signal(Signal::SIGCONT);
    ours.wait_established(3, T);
    eventually("the route back at FRR", T, || {
        frr_has(&frr, "ipv4", "198.51.100.20/32").then_some(())
    });
}

#[test]
fn frr_md5_right_key_establishes_wrong_key_never() {
    let lab = Lab::new();
    let conf = frr_conf(" neighbor 10.0.0.2 password s3cret-key");
    let frr = Frr::start(&lab.router, &conf);
    let wrong = Ferrolb::start(
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
            "--md5-key",
            "not-the-key",
            "--connect-retry",
            "1",
            "--mode",
            "active",
        ],
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(!wrong.seen.iter().any(|v| v["event"] == "established"));
    assert_ne!(frr.bgp_state("10.0.0.2").as_deref(), Some("Established"));
    drop(wrong);
    let mut right = Ferrolb::start(
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
            "--md5-key",
            "s3cret-key",
            "--connect-retry",
            "1",
            "--mode",
            "active",
            "--route",
            "198.51.100.30/32",
        ],
    );
    right.wait_established(1, T);
    eventually("the route at FRR", T, || {
        frr_has(&frr, "ipv4", "198.51.100.30/32").then_some(())
    });
}

#[test]
fn bird_ibgp_ipv6_transport_local_pref() {
    let lab = Lab::new();
    let bird = Bird::start(
        &lab.router,
        r#"
router id 10.0.0.1;
protocol device { }
protocol bgp node {
  local fd00::1 as 64512;
  neighbor fd00::2 as 64512;
  passive on;
  ipv4 { import all; export none; extended next hop on; };
  ipv6 { import all; export none; };
}
"#,
    );
    lab.router.wait_listening(179, T);
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--local-as",
            "64512",
            "--router-id",
            "10.0.0.2",
            "--peer",
            "[fd00::1]:179",
            "--peer-as",
            "internal",
            "--mode",
            "active",
            "--extended-next-hop",
            "--route",
            "2001:db8::40/128,local-pref=250,community=64512:40",
            "--route",
            "198.51.100.40/32,local-pref=150",
        ],
    );
    ours.wait_established(1, T);
    bird.wait_established("node", T);
    let v6 = eventually("BIRD to hold 2001:db8::40/128", T, || {
        let out = bird.birdc("show route 2001:db8::40/128 all");
        out.contains("2001:db8::40/128").then_some(out)
    });
    assert!(v6.contains("BGP.local_pref: 250"), "{v6}");
    assert!(v6.contains("BGP.community: (64512,40)"), "{v6}");
    assert!(v6.contains("BGP.next_hop: fd00::2"), "{v6}");
    assert!(
        v6.contains("BGP.as_path: \n")
            || v6.contains("BGP.as_path:\n")
            || v6.contains("BGP.as_path: "),
        "{v6}"
    );
    let v4 = eventually(
        "BIRD to hold 198.51.100.40/32 (RFC 8950 next hop)",
        T,
        || {
            let out = bird.birdc("show route 198.51.100.40/32 all");
            out.contains("198.51.100.40/32").then_some(out)
        },
    );
    assert!(v4.contains("BGP.local_pref: 150"), "{v4}");
    assert!(v4.contains("BGP.next_hop: fd00::2"), "{v4}");
    ours.send("withdraw 2001:db8::40/128");
    eventually("BIRD to drop 2001:db8::40/128", T, || {
        (!bird
            .birdc("show route 2001:db8::40/128")
            .contains("2001:db8::40/128"))
        .then_some(())
    });
}

#[test]
fn gobgp_ebgp_routes_and_withdraw() {
    let lab = Lab::new();
    let gobgp = Gobgp::start(
        &lab.router,
        r#"
[global.config]
  as = 64500
  router-id = "10.0.0.1"
  port = 179
[[neighbors]]
  [neighbors.config]
    neighbor-address = "10.0.0.2"
    peer-as = 64512
  [neighbors.transport.config]
    passive-mode = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"#,
    );
    lab.router.wait_listening(179, T);
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
            "--next-hop-v6",
            "fd00::2",
            "--route",
            "198.51.100.50/32,community=64512:50,large-community=64512:5:5",
            "--route",
            "2001:db8::50/128",
        ],
    );
    ours.wait_established(1, T);
    gobgp.wait_established("10.0.0.2", T);
    let rib = eventually("GoBGP to hold both routes", T, || {
        let v4 = gobgp.gobgp(&["global", "rib", "-a", "ipv4"]);
        let v6 = gobgp.gobgp(&["global", "rib", "-a", "ipv6"]);
        (v4.contains("198.51.100.50/32") && v6.contains("2001:db8::50/128")).then_some((v4, v6))
    });
    assert!(rib.0.contains("64512:50"), "{}", rib.0);
    assert!(
        rib.0.contains("[64512:5:5]") || rib.0.contains("64512:5:5"),
        "{}",
        rib.0
    );
    assert!(rib.0.contains("10.0.0.2"), "{}", rib.0);
    assert!(rib.1.contains("fd00::2"), "{}", rib.1);
    ours.send("withdraw 198.51.100.50/32");
    eventually("GoBGP to drop 198.51.100.50/32", T, || {
        (!gobgp
            .gobgp(&["global", "rib", "-a", "ipv4"])
            .contains("198.51.100.50/32"))
        .then_some(())
    });
    ours.send("stop maintenance window");
    let st = eventually("GoBGP to see the session go down", T, || {
        gobgp
            .session_state("10.0.0.2")
            .filter(|s| !s.to_lowercase().contains("establ"))
    });
    assert!(!st.is_empty());
}

#[test]
fn frr_graceful_restart_keeps_routes_across_a_speaker_kill() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let lab = Lab::new();
    let frr = Frr::start(
        &lab.router,
        &frr_conf(" bgp graceful-restart\n bgp graceful-restart restart-time 120"),
    );
    let args = [
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
        "--graceful-restart",
        "120",
        "--route",
        "198.51.100.60/32,community=64512:60",
    ];
    let mut ours = Ferrolb::start(&lab.node, &args);
    ours.wait_established(1, T);
    eventually("the route at FRR", T, || {
        frr_has(&frr, "ipv4", "198.51.100.60/32").then_some(())
    });
    let n = frr.vtysh_json("show bgp neighbors 10.0.0.2 json");
    let gr = &n["10.0.0.2"]["gracefulRestartInfo"];
    assert!(gr.is_object(), "FRR negotiated GR: {n:#}");

    // Poll FRR's table throughout the restart.
    let stop = Arc::new(AtomicBool::new(false));
    let missing = Arc::new(AtomicUsize::new(0));
    let stale_seen = Arc::new(AtomicBool::new(false));
    // A poll that found the route fresh again after it was stale.
    let fresh_again = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let poller = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match frr_path(&frr, "ipv4", "198.51.100.60/32") {
                    None => {
                        missing.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(p) if p["stale"] == true => stale_seen.store(true, Ordering::Relaxed),
                    Some(_) => {
                        if stale_seen.load(Ordering::Relaxed) {
                            fresh_again.store(true, Ordering::Relaxed);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // kill -9 the speaker: no NOTIFICATION, the TCP connection just goes.
        ours.proc.signal(Signal::SIGKILL);
        let _ = ours.proc.stop();
        eventually("FRR to mark the route stale", T, || {
            stale_seen.load(Ordering::Relaxed).then_some(())
        });
        std::thread::sleep(Duration::from_secs(2));
        let mut args2 = args.to_vec();
        args2.push("--restarting");
        let mut back = Ferrolb::start(&lab.node, &args2);
        back.wait_established(1, T);
        // The poller itself saw the route stale, then fresh again (the
        // End-of-RIB): it polled throughout the restart.
        eventually(
            "the poller to see the route fresh again (End-of-RIB)",
            T,
            || fresh_again.load(Ordering::Relaxed).then_some(()),
        );
        // The poller ends before the restarted speaker does: its stop
        // withdraws the route, which is not a loss during the restart.
        stop.store(true, Ordering::Relaxed);
        poller.join().unwrap();
    });
    assert_eq!(
        missing.load(Ordering::Relaxed),
        0,
        "the prefix disappeared from FRR during the restart"
    );
    assert!(stale_seen.load(Ordering::Relaxed));
}

#[test]
fn frr_ebgp_multihop_through_a_router() {
    // node 10.0.1.2 -- 10.0.1.1 mid 10.0.2.1 -- 10.0.2.2 frr
    let node = testnet::Netns::new("mhnode");
    let mid = testnet::Netns::new("mhmid");
    let far = testnet::Netns::new("mhfrr");
    testnet::veth_pair(&node, "eth0", &mid, "eth0");
    testnet::veth_pair(&mid, "eth1", &far, "eth0");
    node.add_addr("eth0", "10.0.1.2/24");
    mid.add_addr("eth0", "10.0.1.1/24");
    mid.add_addr("eth1", "10.0.2.1/24");
    far.add_addr("eth0", "10.0.2.2/24");
    mid.sysctl("net.ipv4.ip_forward", "1");
    node.add_route("default", "10.0.1.1");
    far.add_route("10.0.1.0/24", "10.0.2.1");
    let frr = Frr::start(
        &far,
        "router bgp 64500
 bgp router-id 10.0.2.2
 no bgp ebgp-requires-policy
 neighbor 10.0.1.2 remote-as 64512
 neighbor 10.0.1.2 ebgp-multihop 2
 neighbor 10.0.1.2 timers connect 2
",
    );
    let base = [
        "--local-as",
        "64512",
        "--router-id",
        "10.0.1.2",
        "--peer",
        "10.0.2.2",
        "--peer-as",
        "64500",
        "--mode",
        "active",
        "--connect-retry",
        "1",
        "--route",
        "198.51.100.70/32",
    ];
    // TTL 1 (the directly connected default) dies at the router in between.
    let mut one_hop = base.to_vec();
    one_hop.extend(["--ttl", "1"]);
    let short = Ferrolb::start(&node, &one_hop);
    std::thread::sleep(Duration::from_secs(4));
    assert!(!short.seen.iter().any(|v| v["event"] == "established"));
    assert_ne!(frr.bgp_state("10.0.1.2").as_deref(), Some("Established"));
    drop(short);
    let mut two_hops = base.to_vec();
    two_hops.extend(["--ttl", "2"]);
    let mut ours = Ferrolb::start(&node, &two_hops);
    ours.wait_established(1, T);
    let p = eventually("the route at FRR", T, || {
        frr_path(&frr, "ipv4", "198.51.100.70/32")
    });
    assert_eq!(p["nexthops"][0]["ip"], "10.0.1.2", "{p:#}");
}
