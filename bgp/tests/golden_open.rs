//! Golden (bytes, value) pairs for OPEN (RFC 4271 §4.2): every capability
//! the codec decodes (RFC 2918, 4724, 4760, 5492, 6793, 7313, 7911, 8538,
//! 8654, 8950, draft-walton-bgp-hostname-capability), unknown ones kept as
//! bytes, and the three optional-parameter layouts (RFC 9072 included).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns; a panic is a test failure"
)]

mod common;

use std::net::Ipv4Addr;

use bgp::wire::open::{AddPath, ExtendedNextHop, GracefulRestart, GracefulRestartFamily};
use bgp::wire::{
    Afi, Capability, CapabilityCode, DecodeCtx, HoldTime, Message, Open, ParamLayout, Safi, json,
};
use bytes::Bytes;
use common::assert_golden;

/// One Capabilities parameter holding every capability the codec decodes,
/// from a 4-octet-AS speaker (My AS is AS_TRANS).
const OPEN_ALL_CAPABILITIES: [u8; 107] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x6b, // length: 107
    0x01, // type: OPEN
    0x04, // version: 4
    0x5b, 0xa0, // my autonomous system: 23456 (AS_TRANS)
    0x00, 0xb4, // hold time: 180 s
    0xc0, 0x00, 0x02, 0x01, // BGP identifier: 192.0.2.1
    0x4e, // optional parameters length: 78
    0x02, 0x4c, // parameter type 2 (capabilities), length 76
    0x01, 0x04, // capability 1 (multiprotocol), length 4
    0x00, 0x01, 0x00, 0x01, // AFI 1 (IPv4), reserved, SAFI 1 (unicast)
    0x01, 0x04, // capability 1 (multiprotocol), length 4
    0x00, 0x02, 0x00, 0x01, // AFI 2 (IPv6), reserved, SAFI 1 (unicast)
    0x02, 0x00, // capability 2 (route refresh), length 0
    0x46, 0x00, // capability 70 (enhanced route refresh), length 0
    0x41, 0x04, // capability 65 (4-octet AS), length 4
    0xfa, 0x56, 0xea, 0x00, // AS 4200000000
    0x40, 0x0a, // capability 64 (graceful restart), length 10
    0xc0, 0x78, // restart flags R=1 N=1, restart time 120 s
    0x00, 0x01, 0x01, 0x80, // AFI 1, SAFI 1, flags F=1 (forwarding preserved)
    0x00, 0x02, 0x01, 0x00, // AFI 2, SAFI 1, flags F=0
    0x06, 0x00, // capability 6 (extended message), length 0
    0x45, 0x08, // capability 69 (ADD-PATH), length 8
    0x00, 0x01, 0x01, 0x03, // AFI 1, SAFI 1, send/receive 3 (both)
    0x00, 0x02, 0x01, 0x01, // AFI 2, SAFI 1, send/receive 1 (receive)
    0x05, 0x06, // capability 5 (extended next hop), length 6
    0x00, 0x01, 0x00, 0x01, 0x00, 0x02, // NLRI AFI 1, NLRI SAFI 1, next hop AFI 2
    0x49, 0x10, // capability 73 (FQDN), length 16
    0x03, b'l', b'b', b'1', // hostname length 3, "lb1"
    0x0b, b'e', b'x', b'a', b'm', b'p', b'l', b'e', // domain length 11, "example
    b'.', b'n', b'e', b't', // .net"
    0xf0, 0x02, // capability 240 (experimental, unknown), length 2
    0xde, 0xad, // value, kept as bytes
];

/// One Capabilities parameter per capability (as GoBGP and BIRD send).
const OPEN_PER_CAPABILITY: [u8; 49] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x31, // length: 49
    0x01, // type: OPEN
    0x04, // version: 4
    0xfd, 0xe9, // my autonomous system: 65001
    0x00, 0x5a, // hold time: 90 s
    0xc0, 0x00, 0x02, 0x02, // BGP identifier: 192.0.2.2
    0x14, // optional parameters length: 20
    0x02, 0x06, // parameter type 2 (capabilities), length 6
    0x01, 0x04, 0x00, 0x01, 0x00, 0x01, // multiprotocol: AFI 1, reserved, SAFI 1
    0x02, 0x02, // parameter type 2 (capabilities), length 2
    0x02, 0x00, // route refresh, length 0
    0x02, 0x06, // parameter type 2 (capabilities), length 6
    0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9, // 4-octet AS: 65001
];

/// Capabilities split over parameters in groups of 2 and 1.
const OPEN_GROUPS: [u8; 47] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x2f, // length: 47
    0x01, // type: OPEN
    0x04, // version: 4
    0xfd, 0xe9, // my autonomous system: 65001
    0x00, 0x5a, // hold time: 90 s
    0xc0, 0x00, 0x02, 0x02, // BGP identifier: 192.0.2.2
    0x12, // optional parameters length: 18
    0x02, 0x08, // parameter type 2 (capabilities), length 8
    0x01, 0x04, 0x00, 0x02, 0x00, 0x01, // multiprotocol: AFI 2, reserved, SAFI 1
    0x02, 0x00, // route refresh, length 0
    0x02, 0x06, // parameter type 2 (capabilities), length 6
    0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9, // 4-octet AS: 65001
];

/// RFC 9072 extended optional parameters: 2-octet lengths.
const OPEN_EXTENDED_PARAMETERS: [u8; 47] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x2f, // length: 47
    0x01, // type: OPEN
    0x04, // version: 4
    0xfd, 0xe9, // my autonomous system: 65001
    0x00, 0x5a, // hold time: 90 s
    0xc0, 0x00, 0x02, 0x03, // BGP identifier: 192.0.2.3
    0xff, // non-ext optional parameters length: 255 (RFC 9072 §2)
    0xff, // non-ext optional parameter type: 255 (extended format follows)
    0x00, 0x0f, // extended optional parameters length: 15
    0x02, 0x00, 0x0c, // parameter type 2 (capabilities), 2-octet length 12
    0x01, 0x04, 0x00, 0x02, 0x00, 0x01, // multiprotocol: AFI 2, reserved, SAFI 1
    0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9, // 4-octet AS: 65001
];

/// No optional parameters at all, hold time 0 (keepalives disabled).
const OPEN_MINIMAL: [u8; 29] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x1d, // length: 29
    0x01, // type: OPEN
    0x04, // version: 4
    0x00, 0x01, // my autonomous system: 1
    0x00, 0x00, // hold time: 0 (no keepalives)
    0x0a, 0x00, 0x00, 0x01, // BGP identifier: 10.0.0.1
    0x00, // optional parameters length: 0
];

/// Capabilities the codec names but does not decode, or whose value is
/// malformed while only informational: both are kept as bytes.
const OPEN_UNDECODED_CAPABILITIES: [u8; 39] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x27, // length: 39
    0x01, // type: OPEN
    0x04, // version: 4
    0xfd, 0xe9, // my autonomous system: 65001
    0x00, 0x03, // hold time: 3 s (the smallest non-zero value)
    0xc0, 0x00, 0x02, 0x04, // BGP identifier: 192.0.2.4
    0x0a, // optional parameters length: 10
    0x02, 0x08, // parameter type 2 (capabilities), length 8
    0x09, 0x01, 0x00, // capability 9 (BGP role, RFC 9234), length 1, role 0
    0x49, 0x03, // capability 73 (FQDN), length 3
    0x05, b'a', b'b', // hostname length 5 overruns the value: kept raw
];

fn hold(secs: u16) -> HoldTime {
    HoldTime::from_secs(secs).expect("a valid hold time")
}

fn multiprotocol(afi: Afi, safi: Safi) -> Capability {
    Capability::Multiprotocol { afi, safi }
}

fn open_of(msg: &Message) -> &Open {
    match msg {
        Message::Open(o) => o,
        other => panic!("not an OPEN: {other:?}"),
    }
}

#[test]
fn one_parameter_with_every_capability() {
    let expected = Open {
        my_as: 23456,
        hold_time: hold(180),
        bgp_id: Ipv4Addr::new(192, 0, 2, 1),
        capabilities: vec![
            multiprotocol(Afi::Ipv4, Safi::Unicast),
            multiprotocol(Afi::Ipv6, Safi::Unicast),
            Capability::RouteRefresh,
            Capability::EnhancedRouteRefresh,
            Capability::FourOctetAs(4_200_000_000),
            Capability::GracefulRestart(GracefulRestart {
                flags: 0x8 | 0x4, // R and N, the top two of the four flag bits
                restart_time: 120,
                families: vec![
                    GracefulRestartFamily {
                        afi: Afi::Ipv4,
                        safi: Safi::Unicast,
                        flags: 0x80,
                    },
                    GracefulRestartFamily {
                        afi: Afi::Ipv6,
                        safi: Safi::Unicast,
                        flags: 0x00,
                    },
                ],
            }),
            Capability::ExtendedMessage,
            Capability::AddPath(vec![
                AddPath {
                    afi: Afi::Ipv4,
                    safi: Safi::Unicast,
                    send_receive: 3,
                },
                AddPath {
                    afi: Afi::Ipv6,
                    safi: Safi::Unicast,
                    send_receive: 1,
                },
            ]),
            Capability::ExtendedNextHop(vec![ExtendedNextHop {
                afi: Afi::Ipv4,
                safi: 1,
                next_hop_afi: Afi::Ipv6,
            }]),
            Capability::Fqdn {
                hostname: Bytes::from_static(b"lb1"),
                domain: Bytes::from_static(b"example.net"),
            },
            Capability::Unknown {
                code: 240,
                data: Bytes::from_static(&[0xde, 0xad]),
            },
        ],
        layout: ParamLayout::Single,
    };
    let msg = assert_golden(
        &OPEN_ALL_CAPABILITIES,
        &Message::Open(expected),
        &DecodeCtx::default(),
    );
    let open = open_of(&msg);

    // RFC 6793 §4.1: the real AS is in the capability, not in My AS.
    assert_eq!(open.asn(), 4_200_000_000);
    assert_eq!(open.four_octet_as(), Some(4_200_000_000));
    assert_eq!(open.hold_time.as_duration().as_secs(), 180);
    let codes: Vec<u8> = open.capabilities.iter().map(|c| c.code().into()).collect();
    assert_eq!(codes, [1, 1, 2, 70, 65, 64, 6, 69, 5, 73, 240]);
    match &open.capabilities[5] {
        Capability::GracefulRestart(gr) => {
            assert!(gr.restart_state());
            assert_eq!(gr.restart_time().as_secs(), 120);
        }
        other => panic!("not graceful restart: {other:?}"),
    }
    match &open.capabilities[7] {
        Capability::AddPath(entries) => {
            assert!(entries[0].can_send() && entries[0].can_receive());
            assert!(!entries[1].can_send() && entries[1].can_receive());
        }
        other => panic!("not ADD-PATH: {other:?}"),
    }

    let j = json::message(&msg);
    assert_eq!(j["type"], "OPEN");
    assert_eq!(j["version"], 4);
    assert_eq!(j["asn"], 4_200_000_000u32);
    assert_eq!(j["my_as"], 23456);
    assert_eq!(j["hold_time"], 180);
    assert_eq!(j["bgp_id"], "192.0.2.1");
    let caps = &j["capabilities"];
    let names: Vec<&str> = (0..10)
        .map(|i| caps[i]["name"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        names,
        [
            "multiprotocol",
            "multiprotocol",
            "route-refresh",
            "enhanced-route-refresh",
            "4-octet-as",
            "graceful-restart",
            "extended-message",
            "add-path",
            "extended-next-hop",
            "fqdn",
        ]
    );
    assert_eq!(caps[1]["afi"], "ipv6");
    assert_eq!(caps[1]["safi"], "unicast");
    assert_eq!(caps[4]["asn"], 4_200_000_000u32);
    assert_eq!(caps[5]["restart_state"], true);
    assert_eq!(caps[5]["notification"], true);
    assert_eq!(caps[5]["restart_time"], 120);
    assert_eq!(caps[5]["families"][0]["forwarding"], true);
    assert_eq!(caps[5]["families"][1]["forwarding"], false);
    assert_eq!(caps[7]["entries"][0]["send_receive"], "both");
    assert_eq!(caps[7]["entries"][1]["send_receive"], "receive");
    assert_eq!(caps[8]["entries"][0]["next_hop_afi"], "ipv6");
    assert_eq!(caps[9]["hostname"], "lb1");
    assert_eq!(caps[9]["domain"], "example.net");
    assert_eq!(caps[10]["code"], 240);
    assert_eq!(caps[10]["data"], "dead");
}

#[test]
fn one_parameter_per_capability() {
    let expected = Open {
        my_as: 65001,
        hold_time: hold(90),
        bgp_id: Ipv4Addr::new(192, 0, 2, 2),
        capabilities: vec![
            multiprotocol(Afi::Ipv4, Safi::Unicast),
            Capability::RouteRefresh,
            Capability::FourOctetAs(65001),
        ],
        layout: ParamLayout::PerCapability,
    };
    let msg = assert_golden(
        &OPEN_PER_CAPABILITY,
        &Message::Open(expected),
        &DecodeCtx::default(),
    );
    assert_eq!(open_of(&msg).asn(), 65001);
}

#[test]
fn capabilities_in_uneven_groups() {
    let expected = Open {
        my_as: 65001,
        hold_time: hold(90),
        bgp_id: Ipv4Addr::new(192, 0, 2, 2),
        capabilities: vec![
            multiprotocol(Afi::Ipv6, Safi::Unicast),
            Capability::RouteRefresh,
            Capability::FourOctetAs(65001),
        ],
        layout: ParamLayout::Groups(vec![2, 1]),
    };
    assert_golden(
        &OPEN_GROUPS,
        &Message::Open(expected),
        &DecodeCtx::default(),
    );
}

#[test]
fn rfc9072_extended_optional_parameters() {
    let expected = Open {
        my_as: 65001,
        hold_time: hold(90),
        bgp_id: Ipv4Addr::new(192, 0, 2, 3),
        capabilities: vec![
            multiprotocol(Afi::Ipv6, Safi::Unicast),
            Capability::FourOctetAs(65001),
        ],
        layout: ParamLayout::Extended,
    };
    assert_golden(
        &OPEN_EXTENDED_PARAMETERS,
        &Message::Open(expected),
        &DecodeCtx::default(),
    );
}

#[test]
fn no_optional_parameters_and_hold_time_zero() {
    let expected = Open {
        my_as: 1,
        hold_time: hold(0),
        bgp_id: Ipv4Addr::new(10, 0, 0, 1),
        capabilities: Vec::new(),
        layout: ParamLayout::Single,
    };
    let msg = assert_golden(
        &OPEN_MINIMAL,
        &Message::Open(expected),
        &DecodeCtx::default(),
    );
    let open = open_of(&msg);
    assert!(open.hold_time.is_zero());
    assert_eq!(open.four_octet_as(), None);
    assert_eq!(open.asn(), 1, "without the capability, My AS is the AS");
}

#[test]
fn undecoded_capabilities_are_kept_as_bytes() {
    let expected = Open {
        my_as: 65001,
        hold_time: hold(3),
        bgp_id: Ipv4Addr::new(192, 0, 2, 4),
        capabilities: vec![
            Capability::Unknown {
                code: 9,
                data: Bytes::from_static(&[0x00]),
            },
            Capability::Unknown {
                code: 73,
                data: Bytes::from_static(&[0x05, b'a', b'b']),
            },
        ],
        layout: ParamLayout::Single,
    };
    let msg = assert_golden(
        &OPEN_UNDECODED_CAPABILITIES,
        &Message::Open(expected),
        &DecodeCtx::default(),
    );
    let open = open_of(&msg);
    assert_eq!(open.capabilities[0].code(), CapabilityCode::Role);
    assert_eq!(open.capabilities[1].code(), CapabilityCode::Fqdn);
    let j = json::message(&msg);
    assert_eq!(j["capabilities"][0]["code"], 9);
    assert_eq!(j["capabilities"][0]["data"], "00");
    assert_eq!(j["capabilities"][1]["data"], "056162");
}

/// RFC 9072 §2: parameters longer than 255 octets force the extended
/// format even when the layout asks for the regular one.
#[test]
fn long_parameters_switch_to_the_extended_format() {
    let big = |code: u8| Capability::Unknown {
        code,
        data: Bytes::from(vec![code; 100]),
    };
    let open = Open {
        my_as: 65001,
        hold_time: hold(90),
        bgp_id: Ipv4Addr::new(192, 0, 2, 5),
        capabilities: vec![big(241), big(242), big(243)],
        layout: ParamLayout::Single,
    };
    let ctx = DecodeCtx::default();
    let bytes = Message::Open(open.clone()).to_bytes(&ctx).unwrap();
    // Three capabilities of 2 + 100 octets in one parameter (3 + 306).
    let params = 3 * (2 + 100);
    let ext_len = 3 + params;
    assert_eq!(bytes.len(), 19 + 10 + 3 + ext_len);
    assert_eq!(&bytes[16..18], &(bytes.len() as u16).to_be_bytes()[..]);
    assert_eq!(bytes[28], 0xff, "non-ext optional parameters length");
    assert_eq!(bytes[29], 0xff, "non-ext optional parameter type");
    assert_eq!(&bytes[30..32], &(ext_len as u16).to_be_bytes()[..]);
    assert_eq!(bytes[32], 2, "parameter type: capabilities");
    assert_eq!(&bytes[33..35], &(params as u16).to_be_bytes()[..]);
    assert_eq!(&bytes[35..37], &[241, 100][..], "first capability header");

    let parsed = Message::parse(&bytes, &ctx).unwrap();
    let expected = Open {
        layout: ParamLayout::Extended,
        ..open
    };
    assert_eq!(parsed, Message::Open(expected));
}

/// An empty Capabilities parameter (found by the bgp_message fuzz target)
/// is kept in the layout, so the OPEN re-emits to the same bytes.
#[test]
fn empty_capabilities_parameter_round_trips() {
    use bgp::wire::{DecodeCtx, Message};
    let msg: [u8; 35] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, // marker
        0x00, 0x23, // length 35
        0x01, // OPEN
        0x04, // version 4
        0xfd, 0xe8, // my AS 65000
        0x00, 0xb4, // hold time 180
        0xc0, 0x00, 0x02, 0x01, // BGP identifier 192.0.2.1
        0x06, // optional parameters length 6
        0x02, 0x00, // Capabilities parameter, empty
        0x02, 0x02, 0x02, 0x00, // Capabilities parameter: route refresh
    ];
    let ctx = DecodeCtx::default();
    let parsed = Message::parse(&msg, &ctx).unwrap();
    let Message::Open(open) = &parsed else {
        panic!("not an OPEN")
    };
    assert_eq!(open.layout, ParamLayout::Groups(vec![0, 1]));
    assert_eq!(&parsed.to_bytes(&ctx).unwrap()[..], &msg[..]);
}
