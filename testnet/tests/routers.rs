//! The router runners against each other: FRR <-> BIRD and FRR <-> GoBGP
//! sessions reach Established and carry routes both ways; two FRR bfdd
//! bring a BFD session up.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::{Duration, Instant};

use serde_json::Value;
use testnet::{Bird, Frr, Gobgp, Netns, veth_pair, wait_until};

/// eBGP over IPv4: FRR (AS 64501, active) and BIRD (AS 64502, passive).
#[test]
fn frr_bird_ebgp_ipv4() {
    let frr_ns = Netns::new("frr");
    let bird_ns = Netns::new("bird");
    veth_pair(&frr_ns, "eth0", &bird_ns, "eth0");
    frr_ns.add_addr("eth0", "10.0.1.1/24");
    bird_ns.add_addr("eth0", "10.0.1.2/24");

    let bird = Bird::start(
        &bird_ns,
        r#"
router id 10.0.1.2;
protocol device { }
protocol static st4 {
  ipv4;
  route 10.2.0.0/16 blackhole;
}
protocol bgp frr {
  local 10.0.1.2 as 64502;
  neighbor 10.0.1.1 as 64501;
  passive on;
  ipv4 { import all; export where source = RTS_STATIC; };
}
"#,
    );
    bird_ns.wait_listening(179, Duration::from_secs(10));

    let start = Instant::now();
    let frr = Frr::start(
        &frr_ns,
        "
router bgp 64501
 bgp router-id 10.0.1.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.1.2 remote-as 64502
 neighbor 10.0.1.2 timers connect 2
 address-family ipv4 unicast
  network 10.1.0.0/16
 exit-address-family
",
    );
    let started = start.elapsed();
    frr.wait_established("10.0.1.2", Duration::from_secs(30));
    bird.wait_established("frr", Duration::from_secs(10));
    let established = start.elapsed();

    let route = wait_until(
        "BIRD to learn 10.1.0.0/16 from FRR",
        Duration::from_secs(15),
        Duration::from_millis(100),
        || {
            let out = bird.birdc("show route 10.1.0.0/16 protocol frr all");
            out.contains("10.1.0.0/16").then_some(out)
        },
    )
    .unwrap();
    assert!(route.contains("BGP.as_path: 64501"), "{route}");
    let to_bird = start.elapsed();

    let paths = wait_until(
        "FRR to learn 10.2.0.0/16 from BIRD",
        Duration::from_secs(15),
        Duration::from_millis(100),
        || {
            let rib = frr.vtysh_json("show bgp ipv4 unicast json");
            rib["routes"].get("10.2.0.0/16").cloned()
        },
    )
    .unwrap();
    let to_frr = start.elapsed();
    let path = &paths[0];
    assert_eq!(path["valid"], Value::Bool(true), "{paths}");
    assert_eq!(path["path"], "64502", "{paths}");
    assert_eq!(path["nexthops"][0]["ip"], "10.0.1.2", "{paths}");
    // zebra installed it into FRR's namespace.
    let fib = frr_ns.ip(["route", "show", "10.2.0.0/16"]);
    assert!(fib.contains("via 10.0.1.2"), "{fib}");

    eprintln!(
        "timing: frr up {started:?}, established {established:?}, \
         route at BIRD {to_bird:?}, route at FRR {to_frr:?}"
    );
}

/// eBGP over IPv6 transport: FRR (AS 64501, active) and GoBGP (AS 64503,
/// passive); GoBGP sees FRR's IPv4 and IPv6 routes.
#[test]
fn frr_gobgp_passive_ipv6_transport() {
    let frr_ns = Netns::new("frr");
    let gobgp_ns = Netns::new("gobgp");
    veth_pair(&frr_ns, "eth0", &gobgp_ns, "eth0");
    frr_ns.add_addr("eth0", "fd00:2::1/64");
    frr_ns.add_addr("eth0", "10.0.2.1/24");
    gobgp_ns.add_addr("eth0", "fd00:2::2/64");
    gobgp_ns.add_addr("eth0", "10.0.2.2/24");

    let gobgp = Gobgp::start(
        &gobgp_ns,
        r#"
[global.config]
  as = 64503
  router-id = "10.0.2.2"

[[neighbors]]
  [neighbors.config]
    neighbor-address = "fd00:2::1"
    peer-as = 64501
  [neighbors.transport.config]
    passive-mode = true
    local-address = "fd00:2::2"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"#,
    );
    gobgp_ns.wait_listening(179, Duration::from_secs(10));

    let start = Instant::now();
    let frr = Frr::start(
        &frr_ns,
        "
router bgp 64501
 bgp router-id 10.0.2.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor fd00:2::2 remote-as 64503
 neighbor fd00:2::2 timers connect 2
 address-family ipv4 unicast
  network 10.1.4.0/24
  neighbor fd00:2::2 activate
 exit-address-family
 address-family ipv6 unicast
  network fd00:a:4::/64
  neighbor fd00:2::2 activate
 exit-address-family
",
    );
    let started = start.elapsed();
    gobgp.wait_established("fd00:2::1", Duration::from_secs(30));
    frr.wait_established("fd00:2::2", Duration::from_secs(10));
    let established = start.elapsed();

    for (family, prefix) in [("ipv4", "10.1.4.0/24"), ("ipv6", "fd00:a:4::/64")] {
        let rib = wait_until(
            &format!("GoBGP to learn {prefix} from FRR"),
            Duration::from_secs(15),
            Duration::from_millis(100),
            || {
                let rib = gobgp.gobgp_json(&["global", "rib", "-a", family]);
                rib.get(prefix).is_some().then_some(rib)
            },
        )
        .unwrap();
        let text = rib[prefix].to_string();
        assert!(text.contains("64501"), "{family}: {rib:#}");
    }
    let routes = start.elapsed();

    eprintln!("timing: frr up {started:?}, established {established:?}, routes {routes:?}");
}

/// Two FRRs running zebra + bfdd only: the single-hop BFD session comes up
/// (the runner's `--bfdctl` keeps parallel bfdds apart).
#[test]
fn frr_bfdd_session_up() {
    let a = Netns::new("bfd-a");
    let b = Netns::new("bfd-b");
    veth_pair(&a, "eth0", &b, "eth0");
    a.add_addr("eth0", "10.0.3.1/24");
    b.add_addr("eth0", "10.0.3.2/24");
    let conf = |local: &str, peer: &str| {
        format!(
            "bfd\n peer {peer} local-address {local} interface eth0\n  \
             receive-interval 100\n  transmit-interval 100\n !\n!\n"
        )
    };
    let start = Instant::now();
    let mut frr_a = Frr::start_daemons(&a, &[("bfdd", &conf("10.0.3.1", "10.0.3.2"))]);
    let frr_b = Frr::start_daemons(&b, &[("bfdd", &conf("10.0.3.2", "10.0.3.1"))]);
    for frr in [&frr_a, &frr_b] {
        wait_until(
            "the BFD session to come up",
            Duration::from_secs(15),
            Duration::from_millis(100),
            || {
                let peers = frr.vtysh_json("show bfd peers json");
                (peers[0]["status"] == "up").then_some(())
            },
        )
        .unwrap();
    }
    eprintln!("timing: bfd up {:?}", start.elapsed());

    // Freezing one bfdd takes the session down at the other end.
    frr_a
        .daemon("bfdd")
        .unwrap()
        .signal(testnet::Signal::SIGSTOP);
    wait_until(
        "the BFD session to go down",
        Duration::from_secs(5),
        Duration::from_millis(50),
        || (frr_b.vtysh_json("show bfd peers json")[0]["status"] == "down").then_some(()),
    )
    .unwrap();
}
