//! Decision tables for [`bgp_plan`], after MetalLB's BGP e2e scenarios.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use api::meta::{LabelSelector, SecretReference};
use api::v1beta1::{BGPAdvertisement, BGPAdvertisementSpec};
use api::v1beta2::{BGPPeerSpec, DynamicASNMode};
use bgp::session::{ConnectMode, LocalAs, PeerAs, RouteAttrs};
use bgp::wire::{Community, Family, HoldTime, LargeCommunity};

use super::super::fixture::*;
use super::super::view::{Endpoint, Exclusion, TrafficPolicy};
use super::*;

const ME: &str = "n1";

/// Breaks one field of a peer, for a table row.
type Breaker = fn(&mut BGPPeerSpec);
/// Label pairs, for a table row.
type Labels<'a> = &'a [(&'a str, &'a str)];

/// n1..n3; one dual-stack pool; iBGP peer `ibgp` (AS 64512) and eBGP peer
/// `ebgp` (AS 65000), both IPv4; one advertisement of everything.
fn base() -> Fixture {
    let mut v = view(ME, &["n1", "n2", "n3"]);
    v.config.pools = vec![pool("pool", &["192.0.2.0/24", "2001:db8::/64"], &[])];
    v.config.peers = vec![
        peer("ibgp", 64512, 64512, "10.0.0.254"),
        peer("ebgp", 64512, 65000, "10.0.0.253"),
    ];
    v.config.bgp_advertisements = vec![bgp_ad("all", BGPAdvertisementSpec::default())];
    v
}

fn ad(v: &mut Fixture) -> &mut BGPAdvertisementSpec {
    &mut v.config.bgp_advertisements[0].spec
}

/// The prefixes a peer carries, as text.
fn prefixes(plan: &BgpPlan, peer: &str) -> Vec<String> {
    plan.peers[peer]
        .routes
        .keys()
        .map(ToString::to_string)
        .collect()
}

fn attrs<'a>(plan: &'a BgpPlan, peer: &str, prefix: &str) -> &'a RouteAttrs {
    &plan.peers[peer].routes[&prefix.parse().unwrap()]
}

fn fields(plan: &BgpPlan) -> Vec<(&'static str, &str, &str)> {
    plan.problems
        .iter()
        .map(|p| (p.kind, p.name.as_str(), p.field.as_str()))
        .collect()
}

#[test]
fn announces_service_ip_to_every_peer() {
    let mut v = base();
    v.services = services([svc("web", &["192.0.2.10"], &["n2"])]);
    let plan = bgp(&v);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert_eq!(plan.excluded, None);
    assert_eq!(prefixes(&plan, "ibgp"), ["192.0.2.10/32"]);
    assert_eq!(prefixes(&plan, "ebgp"), ["192.0.2.10/32"]);
    assert_eq!(
        *attrs(&plan, "ibgp", "192.0.2.10/32"),
        RouteAttrs::default()
    );
    assert_eq!(
        plan.services[&key("web")],
        BTreeSet::from(["ebgp".to_owned(), "ibgp".to_owned()])
    );
}

#[test]
fn peer_node_selectors() {
    let mut v = base();
    Arc::make_mut(&mut v.nodes).get_mut(ME).unwrap().labels = labels(&[("rack", "r1")]).into();
    v.config.peers[0].spec.node_selectors = vec![sel(&[("rack", "r1")])];
    v.config.peers[1].spec.node_selectors = vec![sel(&[("rack", "r2")]), sel(&[("x", "y")])];
    let mut p3 = peer("two-selectors", 64512, 65001, "10.0.0.252");
    p3.spec.node_selectors = vec![sel(&[("rack", "r2")]), sel(&[("rack", "r1")])];
    v.config.peers.push(p3);
    let plan = bgp(&v);
    let names: Vec<&str> = plan.peers.keys().map(String::as_str).collect();
    // No selector matching: no session; any one of several: a session.
    assert_eq!(names, ["ibgp", "two-selectors"]);
}

#[test]
fn peer_session_config() {
    let mut v = base();
    let spec = &mut v.config.peers[1].spec;
    spec.peer_port = Some(1179);
    spec.source_address = "10.0.0.1".into();
    spec.router_id = "10.255.0.1".into();
    spec.hold_time = Some("30s".into());
    spec.keepalive_time = Some("10s".into());
    spec.connect_time = Some("7s".into());
    spec.password = "s3cret".into();
    spec.enable_graceful_restart = Some(true);
    spec.vrf = "red".into();
    let plan = bgp(&v);
    let c = &plan.peers["ebgp"];
    assert_eq!(
        c.target,
        PeerTarget::Address("10.0.0.253:1179".parse().unwrap())
    );
    assert_eq!(c.session.local_as, 64512);
    assert_eq!(c.session.peer_as, PeerAs::Exact(65000));
    assert_eq!(c.session.router_id, Ipv4Addr::new(10, 255, 0, 1));
    assert_eq!(c.session.hold_time, HoldTime::from_secs(30).unwrap());
    assert_eq!(c.session.keepalive, Some(Duration::from_secs(10)));
    assert_eq!(c.session.connect_retry, Duration::from_secs(7));
    assert_eq!(c.session.mode, ConnectMode::Both);
    assert_eq!(c.session.families, [Family::Ipv4Unicast]);
    assert!(!c.session.disable_mp);
    assert_eq!(c.session.hostname.as_deref(), Some(ME));
    let gr = c.session.graceful_restart.unwrap();
    assert_eq!(gr.restart_time, Duration::from_secs(120));
    assert!(gr.restarting && gr.forwarding_preserved);
    assert_eq!(c.transport.bind, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(c.transport.device.as_deref(), Some("red"));
    assert_eq!(c.transport.md5_key.as_deref(), Some(&b"s3cret"[..]));
    assert!(!plan.peers["ebgp"].ibgp);
    // The key never shows in logs.
    let shown = format!("{c:?}");
    assert!(
        shown.contains("<redacted>") && !shown.contains("s3cret"),
        "{shown}"
    );

    // Defaults: port 179, RFC hold time, keepalive a third of it, no GR.
    let c = &plan.peers["ibgp"];
    assert_eq!(
        c.target,
        PeerTarget::Address("10.0.0.254:179".parse().unwrap())
    );
    assert_eq!(c.session.hold_time, HoldTime::DEFAULT);
    assert_eq!(c.session.keepalive, None);
    assert_eq!(c.session.graceful_restart, None);
    assert_eq!(c.transport.md5_key, None);
    assert!(plan.peers["ibgp"].ibgp);
}

#[test]
fn hold_time_alone_gives_a_third_as_keepalive() {
    let mut v = base();
    v.config.peers[0].spec.hold_time = Some("9s".into());
    v.config.peers[1].spec.hold_time = Some("0s".into());
    let plan = bgp(&v);
    let s = &plan.peers["ibgp"].session;
    assert_eq!(
        (s.hold_time.secs(), s.keepalive),
        (9, Some(Duration::from_secs(3)))
    );
    let s = &plan.peers["ebgp"].session;
    assert_eq!((s.hold_time.secs(), s.keepalive), (0, Some(Duration::ZERO)));
}

#[test]
fn ttl_by_session_kind() {
    // (peerASN, ebgpMultiHop, TTL)
    let table = [
        (65000, false, Some(1)),
        (65000, true, Some(255)),
        (64512, false, None),
    ];
    for (asn, multi_hop, ttl) in table {
        let mut v = base();
        v.config.peers = vec![peer("p", 64512, asn, "10.0.0.254")];
        v.config.peers[0].spec.ebgp_multi_hop = multi_hop;
        let plan = bgp(&v);
        assert_eq!(plan.peers["p"].transport.ttl, ttl, "{asn} {multi_hop}");
    }
}

#[test]
fn dynamic_asn() {
    for (mode, peer_as, ibgp, ttl) in [
        (DynamicASNMode::Internal, PeerAs::Internal, true, None),
        (DynamicASNMode::External, PeerAs::External, false, Some(1)),
    ] {
        let mut v = base();
        v.config.peers[0].spec.peer_asn = None;
        v.config.peers[0].spec.dynamic_asn = Some(mode);
        let plan = bgp(&v);
        let p = &plan.peers["ibgp"];
        assert_eq!(p.session.peer_as, peer_as);
        assert_eq!(p.ibgp, ibgp);
        assert_eq!(p.transport.ttl, ttl);
    }
}

#[test]
fn router_id_defaults() {
    // The IPv4 source address wins over the node's addresses.
    let mut v = base();
    Arc::make_mut(&mut v.nodes).get_mut(ME).unwrap().addresses =
        vec![ip("fd00::1"), ip("10.0.0.1")];
    v.config.peers[0].spec.source_address = "10.0.0.9".into();
    let plan = bgp(&v);
    assert_eq!(
        plan.peers["ibgp"].session.router_id,
        Ipv4Addr::new(10, 0, 0, 9)
    );
    // Then the node's first IPv4 address, even behind an IPv6 one.
    assert_eq!(
        plan.peers["ebgp"].session.router_id,
        Ipv4Addr::new(10, 0, 0, 1)
    );
    // IPv6-only node: MetalLB's CRC-32 of the node name.
    let mut v = base();
    v.node = "node-1".into();
    Arc::make_mut(&mut v.nodes).insert("node-1".into(), node("node-1", &[]));
    Arc::make_mut(&mut v.nodes)
        .get_mut("node-1")
        .unwrap()
        .addresses = vec![ip("fd00::1")];
    let plan = bgp(&v);
    assert_eq!(
        plan.peers["ibgp"].session.router_id,
        Ipv4Addr::new(95, 28, 242, 19)
    );
}

#[test]
fn crc32_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn password_secret() {
    let mut v = base();
    v.config.peers[0].spec.password_secret = Some(SecretReference {
        name: Some("bgp-auth".into()),
        namespace: None,
    });
    v.config.peers[1].spec.password_secret = Some(SecretReference {
        name: Some("missing".into()),
        namespace: Some("elsewhere".into()),
    });
    v.secrets.insert(
        ObjectKey::new(NS, "bgp-auth"),
        b"from-secret".to_vec().into(),
    );
    let plan = bgp(&v);
    assert_eq!(
        plan.peers["ibgp"].transport.md5_key.as_deref(),
        Some(&b"from-secret"[..])
    );
    // Issue 14 finding 10: the key is in the view and the peer's
    // configuration, and in neither's Debug output.
    let shown = format!("{:?} {:#?} {:?}", v.view, plan.peers, plan);
    assert!(!shown.contains("from-secret"), "{shown}");
    assert!(!shown.contains(&format!("{:?}", b"from-secret")), "{shown}");
    assert!(shown.contains("<redacted"), "{shown}");
    assert!(!plan.peers.contains_key("ebgp"));
    assert_eq!(fields(&plan), [("BGPPeer", "ebgp", "spec.passwordSecret")]);
}

#[test]
fn bad_peers_are_reported_and_others_run() {
    let table: [(Breaker, &str); 11] = [
        (|s| s.peer_address = "not-an-ip".into(), "spec.peerAddress"),
        (|s| s.peer_asn = None, "spec.peerASN"),
        (
            |s| s.dynamic_asn = Some(DynamicASNMode::External),
            "spec.peerASN",
        ),
        (|s| s.router_id = "2001:db8::1".into(), "spec.routerID"),
        (|s| s.hold_time = Some("2s".into()), "spec.holdTime"),
        (|s| s.hold_time = Some("ninety".into()), "spec.holdTime"),
        (|s| s.bfd_profile = "nope".into(), "spec.bfdProfile"),
        // Unnumbered: this speaker's BFD needs a fixed peer address.
        (
            |s| {
                s.peer_address = String::new();
                s.interface = "eth0".into();
                s.bfd_profile = "fast".into();
            },
            "spec.bfdProfile",
        ),
        (|s| s.password = "x".repeat(81), "spec.password"),
        (
            |s| {
                s.disable_mp = Some(true);
                s.dual_stack_address_family = Some(true);
            },
            "spec.disableMP",
        ),
        // Valid in the API; this speaker's BFD has no VRF sockets.
        (
            |s| {
                s.vrf = "red".into();
                s.bfd_profile = "fast".into();
            },
            "spec.vrf",
        ),
    ];
    for (breaks, field) in table {
        let mut v = base();
        v.config.bfd_profiles = vec![bfd("fast")];
        breaks(&mut v.config.peers[1].spec);
        v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
        let plan = bgp(&v);
        assert_eq!(fields(&plan), [("BGPPeer", "ebgp", field)], "{field}");
        assert!(!plan.peers.contains_key("ebgp"), "{field}");
        assert_eq!(prefixes(&plan, "ibgp"), ["192.0.2.10/32"], "{field}");
    }
}

/// `interface` (unnumbered, issue 20 §1): the session targets the
/// interface, carries both families with RFC 8950 extended next hops as
/// FRR's `neighbor IFACE interface` does, and gets the IPv4 and IPv6
/// routes; a peer beside it with an address is unchanged.
#[test]
fn unnumbered_peer_carries_both_families() {
    let mut v = base();
    let spec = &mut v.config.peers[1].spec;
    spec.peer_address = String::new();
    spec.interface = "eth1".into();
    v.services = services([svc("web", &["192.0.2.10", "2001:db8::10"], &["n1"])]);
    let plan = bgp(&v);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let p = &plan.peers["ebgp"];
    assert_eq!(
        p.target,
        PeerTarget::Interface {
            name: "eth1".into(),
            port: 179
        }
    );
    assert_eq!(p.session.families, Family::ALL);
    assert!(p.session.extended_next_hop);
    assert!(!p.session.disable_mp);
    assert_eq!(p.transport.ttl, Some(1));
    assert_eq!(
        prefixes(&plan, "ebgp"),
        ["192.0.2.10/32", "2001:db8::10/128"]
    );
    let other = &plan.peers["ibgp"];
    assert_eq!(other.session.families, [Family::Ipv4Unicast]);
    assert!(!other.session.extended_next_hop);
}

/// `localASN` as MetalLB's FRR mode writes it (`local-as N no-prepend
/// replace-as`), and the combinations FRR refuses.
#[test]
fn local_asn_session_and_refusals() {
    let mut v = base();
    v.config.peers[1].spec.local_asn = Some(65410);
    let mut same = peer("same-as-local", 64512, 65410, "10.0.0.252");
    same.spec.local_asn = Some(65410);
    v.config.peers.push(same);
    v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
    let plan = bgp(&v);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let ebgp = &plan.peers["ebgp"];
    assert_eq!(ebgp.session.local_as, 64512);
    assert_eq!(
        ebgp.session.local_as_override,
        Some(LocalAs {
            asn: 65410,
            replace_as: true
        })
    );
    assert_eq!(ebgp.session.session_as(), 65410);
    assert!(!ebgp.ibgp);
    assert_eq!(ebgp.transport.ttl, Some(1));
    // The peer in AS N: internal, decided against N as FRR does.
    assert!(plan.peers["same-as-local"].ibgp);
    assert_eq!(plan.peers["same-as-local"].transport.ttl, None);

    let table: [(Breaker, &str); 3] = [
        (|s| s.local_asn = Some(s.my_asn), "equals myASN"),
        (
            |s| {
                s.peer_asn = Some(s.my_asn);
                s.local_asn = Some(65410);
            },
            "iBGP peer",
        ),
        (
            |s| {
                s.peer_asn = None;
                s.dynamic_asn = Some(DynamicASNMode::Internal);
                s.local_asn = Some(65410);
            },
            "dynamicASN internal",
        ),
    ];
    for (breaks, why) in table {
        let mut v = base();
        breaks(&mut v.config.peers[1].spec);
        let plan = bgp(&v);
        assert_eq!(
            fields(&plan),
            [("BGPPeer", "ebgp", "spec.localASN")],
            "{why}"
        );
        assert!(
            plan.problems[0].message.contains(why),
            "{:?}",
            plan.problems
        );
        assert!(!plan.peers.contains_key("ebgp"), "{why}");
    }
}

/// BFDProfile `echoMode`: ferrolb's BFD has no echo function, so a peer
/// whose profile asks for it is refused, not run without it.
/// Echo mode runs on single-hop IPv4 sessions; on a multihop session
/// (RFC 5883 §3) or over IPv6 (not implemented) the peer is refused
/// rather than run without it.
#[test]
fn bfd_echo_mode_needs_a_single_hop_ipv4_peer() {
    let mut v = base();
    let mut echo = bfd("echo");
    echo.spec.echo_mode = Some(true);
    echo.spec.echo_interval = Some(20);
    v.config.bfd_profiles = vec![bfd("fast"), echo];
    v.config.peers[0].spec.bfd_profile = "fast".into();
    v.config.peers[1].spec.bfd_profile = "echo".into();
    let plan = bgp(&v);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let (_, spec) = plan.peers["ebgp"].bfd_profile.as_ref().unwrap();
    assert!(spec.echo_mode);
    assert_eq!(spec.echo_interval, Duration::from_millis(20));

    for (address, multihop, words) in [
        ("10.0.0.253", true, "single-hop sessions only"),
        ("fd00::253", false, "over IPv6 is not supported"),
    ] {
        let mut v = v.clone();
        v.config.peers[1].spec.peer_address = address.into();
        v.config.peers[1].spec.ebgp_multi_hop = multihop;
        let plan = bgp(&v);
        assert_eq!(fields(&plan), [("BGPPeer", "ebgp", "spec.bfdProfile")]);
        assert!(
            plan.problems[0].message.contains(words),
            "{:?}",
            plan.problems
        );
        assert!(!plan.peers.contains_key("ebgp"));
        assert!(plan.peers["ibgp"].bfd_profile.is_some());
    }
}

#[test]
fn bfd_profile_carried() {
    let mut v = base();
    v.config.bfd_profiles = vec![bfd("fast")];
    v.config.peers[0].spec.bfd_profile = "fast".into();
    let plan = bgp(&v);
    let (name, spec) = plan.peers["ibgp"].bfd_profile.as_ref().unwrap();
    assert_eq!((name.as_str(), spec.detect_multiplier), ("fast", 3));
    assert_eq!(plan.peers["ebgp"].bfd_profile, None);
}

#[test]
fn advertisement_node_selectors() {
    // (this node's labels, advertisement node selectors, announced)
    let table: [(Labels<'_>, Vec<LabelSelector>, bool); 4] = [
        (&[], vec![], true),
        (&[("edge", "true")], vec![sel(&[("edge", "true")])], true),
        (&[], vec![sel(&[("edge", "true")])], false),
        (
            &[("edge", "true")],
            vec![sel(&[("zone", "b")]), sel(&[("edge", "true")])],
            true,
        ),
    ];
    for (node_labels, selectors, announced) in table {
        let mut v = base();
        Arc::make_mut(&mut v.nodes).get_mut(ME).unwrap().labels = labels(node_labels).into();
        ad(&mut v).node_selectors = selectors.clone();
        v.services = services([svc("web", &["192.0.2.10"], &["n2"])]);
        let plan = bgp(&v);
        assert_eq!(
            !plan.peers["ibgp"].routes.is_empty(),
            announced,
            "{node_labels:?} {selectors:?}"
        );
    }
}

#[test]
fn service_selectors() {
    let mut v = base();
    ad(&mut v).service_selectors = vec![sel(&[("bgp", "yes")])];
    let mut picked = svc("picked", &["192.0.2.10"], &["n1"]);
    picked.labels = labels(&[("bgp", "yes")]).into();
    v.services = services([picked, svc("other", &["192.0.2.11"], &["n1"])]);
    let plan = bgp(&v);
    assert_eq!(prefixes(&plan, "ibgp"), ["192.0.2.10/32"]);
    assert_eq!(plan.services.keys().collect::<Vec<_>>(), [&key("picked")]);
}

#[test]
fn pool_selection() {
    let pools = || {
        vec![
            pool("red", &["192.0.2.0/25"], &[("color", "red")]),
            pool("blue", &["192.0.2.128/25"], &[("color", "blue")]),
        ]
    };
    // (pool names, pool selectors, expected prefixes)
    let table: [(&[&str], Vec<LabelSelector>, &[&str]); 4] = [
        (&[], vec![], &["192.0.2.10/32", "192.0.2.200/32"]),
        (&["red"], vec![], &["192.0.2.10/32"]),
        (&[], vec![sel(&[("color", "blue")])], &["192.0.2.200/32"]),
        (
            &["red"],
            vec![sel(&[("color", "blue")])],
            &["192.0.2.10/32", "192.0.2.200/32"],
        ),
    ];
    for (names, selectors, want) in table {
        let mut v = base();
        v.config.pools = pools();
        ad(&mut v).ip_address_pools = names.iter().map(|n| (*n).into()).collect();
        ad(&mut v).ip_address_pool_selectors = selectors;
        v.services = services([
            svc("a", &["192.0.2.10"], &["n1"]),
            svc("b", &["192.0.2.200"], &["n1"]),
        ]);
        let plan = bgp(&v);
        assert_eq!(prefixes(&plan, "ebgp"), want, "{names:?}");
    }
}

#[test]
fn peer_selection() {
    let mut v = base();
    ad(&mut v).peers = vec!["ebgp".into(), "ghost".into()];
    v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
    let plan = bgp(&v);
    assert!(plan.peers["ibgp"].routes.is_empty());
    assert_eq!(prefixes(&plan, "ebgp"), ["192.0.2.10/32"]);
    assert_eq!(
        plan.services[&key("web")],
        BTreeSet::from(["ebgp".to_owned()])
    );
    // A name that is no BGPPeer is reported; the rest still applies.
    assert_eq!(
        fields(&plan),
        [("BGPAdvertisement", "all", "spec.peers[1]")]
    );
}

#[test]
fn external_traffic_policy() {
    // (policy, endpoint nodes, announced by n1)
    let table: [(TrafficPolicy, &[&str], bool); 6] = [
        (TrafficPolicy::Cluster, &["n2"], true),
        (TrafficPolicy::Cluster, &["n1"], true),
        (TrafficPolicy::Cluster, &[], false),
        (TrafficPolicy::Local, &["n1", "n2"], true),
        (TrafficPolicy::Local, &["n2", "n3"], false),
        (TrafficPolicy::Local, &[], false),
    ];
    for (policy, nodes, announced) in table {
        let mut v = base();
        let mut s = svc("web", &["192.0.2.10"], nodes);
        s.external_traffic_policy = policy;
        v.services = services([s]);
        let plan = bgp(&v);
        assert_eq!(
            !plan.peers["ibgp"].routes.is_empty(),
            announced,
            "{policy:?} {nodes:?}"
        );
        assert_eq!(plan.services.contains_key(&key("web")), announced);
    }
}

#[test]
fn endpoint_conditions() {
    // (ready, serving, terminating, has an address, counts)
    let table = [
        (Some(true), Some(true), Some(false), true, true),
        (None, None, None, true, true),
        (Some(false), Some(true), Some(false), true, true),
        // Draining: still serving while terminating, as MetalLB.
        (Some(false), Some(true), Some(true), true, true),
        (Some(false), Some(false), Some(true), true, false),
        (Some(false), None, None, true, false),
        (Some(true), Some(true), Some(false), false, false),
    ];
    for (ready, serving, terminating, has_address, counts) in table {
        let e = Endpoint {
            node: Some(ME.into()),
            has_address,
            ready,
            serving,
            terminating,
        };
        assert_eq!(e.can_serve(), counts, "{e:?}");
        let mut v = base();
        let mut s = svc("web", &["192.0.2.10"], &[]);
        s.external_traffic_policy = TrafficPolicy::Local;
        s.endpoints = [e].into_iter().collect();
        v.services = services([s]);
        let plan = bgp(&v);
        assert_eq!(!plan.peers["ebgp"].routes.is_empty(), counts);
    }
}

#[test]
fn excluded_nodes_announce_nothing_but_keep_sessions() {
    // (condition NetworkUnavailable, exclusion label, ignore the label, outcome)
    let table = [
        (
            Some("True"),
            false,
            false,
            Some(Exclusion::NetworkUnavailable),
        ),
        (Some("False"), false, false, None),
        (None, true, false, Some(Exclusion::ExcludeLabel)),
        (None, true, true, None),
        (
            Some("True"),
            true,
            true,
            Some(Exclusion::NetworkUnavailable),
        ),
    ];
    for (condition, label, ignore, outcome) in table {
        let mut v = base();
        let me = Arc::make_mut(&mut v.nodes).get_mut(ME).unwrap();
        if let Some(status) = condition {
            me.conditions.insert("NetworkUnavailable", status);
        }
        if label {
            me.labels.insert(EXCLUDE, "");
        }
        v.ignore_exclude_lb = ignore;
        v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
        let plan = bgp(&v);
        assert_eq!(plan.excluded, outcome);
        assert_eq!(plan.peers.len(), 2);
        assert_eq!(plan.peers["ibgp"].routes.is_empty(), outcome.is_some());
    }
}

const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

#[test]
fn shared_ip_merges_communities() {
    let mut v = base();
    v.config.bgp_advertisements = vec![
        bgp_ad(
            "for-a",
            BGPAdvertisementSpec {
                communities: vec!["65000:1".into()],
                service_selectors: vec![sel(&[("app", "a")])],
                ..BGPAdvertisementSpec::default()
            },
        ),
        bgp_ad(
            "for-b",
            BGPAdvertisementSpec {
                communities: vec!["65000:2".into(), "65000:1".into()],
                service_selectors: vec![sel(&[("app", "b")])],
                ..BGPAdvertisementSpec::default()
            },
        ),
    ];
    let mut a = svc("a", &["192.0.2.10"], &["n1"]);
    a.labels = labels(&[("app", "a")]).into();
    let mut b = svc("b", &["192.0.2.10"], &["n2"]);
    b.labels = labels(&[("app", "b")]).into();
    v.services = services([a, b]);
    let plan = bgp(&v);
    assert_eq!(prefixes(&plan, "ebgp"), ["192.0.2.10/32"]);
    assert_eq!(
        attrs(&plan, "ebgp", "192.0.2.10/32").communities,
        [Community(65000 << 16 | 1), Community(65000 << 16 | 2)]
    );
    assert_eq!(plan.services.len(), 2);
}

#[test]
fn aggregation() {
    let mut v = base();
    ad(&mut v).aggregation_length = Some(24);
    ad(&mut v).aggregation_length_v6 = Some(64);
    v.config.peers[1].spec.dual_stack_address_family = Some(true);
    v.services = services([
        svc("a", &["192.0.2.10"], &["n1"]),
        svc("b", &["192.0.2.11", "2001:db8::b"], &["n1"]),
        svc("c", &["192.0.2.200", "2001:db8::c"], &["n1"]),
    ]);
    let plan = bgp(&v);
    assert_eq!(prefixes(&plan, "ebgp"), ["192.0.2.0/24", "2001:db8::/64"]);
    assert_eq!(plan.services.len(), 3);
}

#[test]
fn communities_aliases_large_and_well_known() {
    let mut v = base();
    v.config.communities = vec![community(
        "aliases",
        &[("transit", "65000:300"), ("big", "large:65000:1:2")],
    )];
    ad(&mut v).communities = vec![
        "transit".into(),
        "big".into(),
        "no-export".into(),
        "65000:7".into(),
        "large:1:2:3".into(),
    ];
    v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
    let plan = bgp(&v);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let a = attrs(&plan, "ibgp", "192.0.2.10/32");
    assert_eq!(
        a.communities,
        [
            Community(65000 << 16 | 7),
            Community(65000 << 16 | 300),
            Community(0xFFFF_FF01)
        ]
    );
    let large = |a, b, c| LargeCommunity {
        global_admin: a,
        local_data1: b,
        local_data2: c,
    };
    assert_eq!(a.large_communities, [large(1, 2, 3), large(65000, 1, 2)]);
}

#[test]
fn unknown_alias_skips_the_advertisement_only() {
    let mut v = base();
    ad(&mut v).communities = vec!["nowhere".into()];
    v.config.bgp_advertisements.push(bgp_ad(
        "also",
        BGPAdvertisementSpec {
            communities: vec!["65000:9".into()],
            ..BGPAdvertisementSpec::default()
        },
    ));
    v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
    let plan = bgp(&v);
    assert_eq!(
        fields(&plan),
        [("BGPAdvertisement", "all", "spec.communities[0]")]
    );
    assert_eq!(
        attrs(&plan, "ibgp", "192.0.2.10/32").communities,
        [Community(65000 << 16 | 9)]
    );
}

#[test]
fn local_pref_for_ibgp_only() {
    let mut v = base();
    ad(&mut v).local_pref = Some(200);
    v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
    let plan = bgp(&v);
    assert_eq!(attrs(&plan, "ibgp", "192.0.2.10/32").local_pref, Some(200));
    assert_eq!(attrs(&plan, "ebgp", "192.0.2.10/32").local_pref, None);
    // 0 is MetalLB's "unset".
    ad(&mut v).local_pref = Some(0);
    let plan = bgp(&v);
    assert_eq!(attrs(&plan, "ibgp", "192.0.2.10/32").local_pref, None);
}

fn with_pref(name: &str, pref: u32, spec: BGPAdvertisementSpec) -> BGPAdvertisement {
    bgp_ad(
        name,
        BGPAdvertisementSpec {
            local_pref: Some(pref),
            ..spec
        },
    )
}

#[test]
fn conflicting_local_prefs_within_a_service() {
    // (second advertisement, conflict)
    let table = [
        (BGPAdvertisementSpec::default(), true),
        // Another aggregation length for both families: other prefixes.
        (
            BGPAdvertisementSpec {
                aggregation_length: Some(24),
                aggregation_length_v6: Some(64),
                ..BGPAdvertisementSpec::default()
            },
            false,
        ),
        // Only the IPv4 one differs, but the pool has IPv6 too.
        (
            BGPAdvertisementSpec {
                aggregation_length: Some(24),
                ..BGPAdvertisementSpec::default()
            },
            true,
        ),
        // Disjoint peers.
        (
            BGPAdvertisementSpec {
                peers: vec!["ibgp".into()],
                ..BGPAdvertisementSpec::default()
            },
            false,
        ),
    ];
    for (i, (second, conflict)) in table.into_iter().enumerate() {
        let mut v = base();
        v.config.bgp_advertisements = vec![
            with_pref(
                "first",
                100,
                BGPAdvertisementSpec {
                    peers: vec!["ebgp".into()],
                    ..BGPAdvertisementSpec::default()
                },
            ),
            with_pref("second", 200, second),
        ];
        v.services = services([svc("web", &["192.0.2.10"], &["n1"])]);
        let plan = bgp(&v);
        let reported = fields(&plan) == [("Service", "default/web", "metadata.labels")];
        assert_eq!(reported, conflict, "case {i}: {:?}", plan.problems);
        assert_eq!(plan.services.is_empty(), conflict, "case {i}");
    }
}

#[test]
fn conflicting_local_prefs_across_services() {
    let mut v = base();
    v.config.bgp_advertisements = vec![
        with_pref(
            "a",
            100,
            BGPAdvertisementSpec {
                service_selectors: vec![sel(&[("app", "a")])],
                ..BGPAdvertisementSpec::default()
            },
        ),
        with_pref(
            "b",
            200,
            BGPAdvertisementSpec {
                service_selectors: vec![sel(&[("app", "b")])],
                ..BGPAdvertisementSpec::default()
            },
        ),
    ];
    let mut a = svc("a", &["192.0.2.10"], &["n1"]);
    a.labels = labels(&[("app", "a")]).into();
    let mut b = svc("b", &["192.0.2.10"], &["n1"]);
    b.labels = labels(&[("app", "b")]).into();
    v.services = services([a, b]);
    let plan = bgp(&v);
    // Withheld from the iBGP peer, where LOCAL_PREF is sent ...
    assert!(plan.peers["ibgp"].routes.is_empty());
    assert_eq!(fields(&plan), [("BGPPeer", "ibgp", "routes")]);
    // ... but not from the eBGP peer, where it is not.
    assert_eq!(prefixes(&plan, "ebgp"), ["192.0.2.10/32"]);
}

#[test]
fn dual_stack() {
    let mut v = base();
    v.config
        .peers
        .push(peer("v6", 64512, 65000, "2001:db8:ffff::1"));
    let mut both = peer("both", 64512, 65000, "10.0.0.252");
    both.spec.dual_stack_address_family = Some(true);
    v.config.peers.push(both);
    let mut mp_off = peer("mp-off", 64512, 65000, "10.0.0.251");
    mp_off.spec.disable_mp = Some(true);
    v.config.peers.push(mp_off);
    let mut mp_off_v6 = peer("mp-off-v6", 64512, 65000, "2001:db8:ffff::2");
    mp_off_v6.spec.disable_mp = Some(true);
    v.config.peers.push(mp_off_v6);
    v.services = services([svc("web", &["192.0.2.10", "2001:db8::10"], &["n1"])]);
    let plan = bgp(&v);
    assert_eq!(prefixes(&plan, "ebgp"), ["192.0.2.10/32"]);
    assert_eq!(prefixes(&plan, "v6"), ["2001:db8::10/128"]);
    assert_eq!(plan.peers["v6"].session.families, [Family::Ipv6Unicast]);
    assert_eq!(
        prefixes(&plan, "both"),
        ["192.0.2.10/32", "2001:db8::10/128"]
    );
    assert!(plan.peers["mp-off"].session.disable_mp);
    assert_eq!(prefixes(&plan, "mp-off"), ["192.0.2.10/32"]);
    // Over IPv6 the multiprotocol capability for IPv6 stays, or the
    // session could carry nothing.
    assert!(!plan.peers["mp-off-v6"].session.disable_mp);
    assert_eq!(prefixes(&plan, "mp-off-v6"), ["2001:db8::10/128"]);
}

#[test]
fn which_services() {
    let mut v = base();
    v.load_balancer_class = Some("ferrolb".into());
    let mut ours = svc("ours", &["192.0.2.1"], &["n1"]);
    ours.load_balancer_class = Some("ferrolb".into());
    let mut classless = svc("classless", &["192.0.2.2"], &["n1"]);
    classless.load_balancer_class = None;
    let mut theirs = svc("theirs", &["192.0.2.3"], &["n1"]);
    theirs.load_balancer_class = Some("other".into());
    let mut cluster_ip = svc("cluster-ip", &["192.0.2.4"], &["n1"]);
    cluster_ip.load_balancer = false;
    cluster_ip.load_balancer_class = Some("ferrolb".into());
    let mut pending = svc("pending", &[], &["n1"]);
    pending.load_balancer_class = Some("ferrolb".into());
    let mut stray = svc("stray", &["198.51.100.1"], &["n1"]);
    stray.load_balancer_class = Some("ferrolb".into());
    let mut split = svc("split", &["192.0.2.5", "198.51.100.2"], &["n1"]);
    split.load_balancer_class = Some("ferrolb".into());
    let mut mislabelled = svc("mislabelled", &["192.0.2.6"], &["n1"]);
    mislabelled.load_balancer_class = Some("ferrolb".into());
    mislabelled
        .annotations
        .insert("metallb.io/ip-allocated-from-pool", "other");
    v.services = services([
        ours,
        classless,
        theirs,
        cluster_ip,
        pending,
        stray,
        split,
        mislabelled,
    ]);
    let plan = bgp(&v);
    assert_eq!(prefixes(&plan, "ibgp"), ["192.0.2.1/32", "192.0.2.6/32"]);
    assert_eq!(
        fields(&plan),
        [
            ("Service", "default/stray", "status.loadBalancer.ingress"),
            ("Service", "default/split", "status.loadBalancer.ingress"),
            (
                "Service",
                "default/mislabelled",
                "metadata.annotations[metallb.io/ip-allocated-from-pool]"
            ),
        ]
    );
}

#[test]
fn classless_speaker_takes_classless_services() {
    let mut v = base();
    let mut theirs = svc("theirs", &["192.0.2.3"], &["n1"]);
    theirs.load_balancer_class = Some("other".into());
    v.services = services([svc("plain", &["192.0.2.2"], &["n1"]), theirs]);
    assert_eq!(prefixes(&bgp(&v), "ibgp"), ["192.0.2.2/32"]);
}

#[test]
fn node_missing_from_view() {
    let mut v = base();
    Arc::make_mut(&mut v.nodes).remove(ME);
    v.services = services([svc("web", &["192.0.2.10"], &["n2"])]);
    let plan = bgp(&v);
    assert_eq!(fields(&plan), [("Node", ME, "metadata.name")]);
    // No labels, no exclusion: peers and advertisements without selectors
    // still apply; the router ID falls back to the name's hash.
    assert_eq!(prefixes(&plan, "ibgp"), ["192.0.2.10/32"]);
}

/// While ferrolb replaces MetalLB (`--metallb-speaker-labels`), this
/// node's sessions wait for MetalLB's speaker Pod on it to go: two
/// sessions from one node address to one router collide.
#[test]
fn sessions_wait_for_metallbs_speaker_on_this_node() {
    use super::super::coexist::MetallbSpeakers;
    use super::super::view::ApiSpeakers;
    // (MetalLB Pods listed, nodes with one, sessions run)
    let cases: &[(bool, &[&str], bool)] = &[
        (false, &[], false),
        (true, &[ME, "n2"], false),
        (true, &["n2", "n3"], true),
        (true, &[], true),
    ];
    for &(synced, present, run) in cases {
        let mut v = base();
        v.api_speakers = Some(Arc::new(ApiSpeakers {
            metallb: Some(MetallbSpeakers {
                synced,
                present: present.iter().map(|n| (*n).to_owned()).collect(),
                ..MetallbSpeakers::default()
            }),
            ..ApiSpeakers::default()
        }));
        let plan = bgp(&v);
        let want: BTreeSet<&str> = if run {
            ["ebgp", "ibgp"].into()
        } else {
            BTreeSet::new()
        };
        let got: BTreeSet<&str> = plan.peers.keys().map(String::as_str).collect();
        assert_eq!(got, want, "synced {synced}, MetalLB on {present:?}");
    }
}
