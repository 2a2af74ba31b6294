//! Golden (bytes, value) pairs for UPDATE (RFC 4271 §4.3): every path
//! attribute the codec decodes (RFC 1997, 4360, 4456, 4760, 5065, 5701,
//! 6793, 8092, 8950), unknown attributes with their flags, ADD-PATH
//! (RFC 7911) and End-of-RIB markers (RFC 4724 §2). Each UPDATE is also
//! rendered with `bgp::wire::json::message`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns; a panic is a test failure"
)]

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use bgp::wire::{
    AddPathSet, Afi, Aggregator, AsPath, AttrFlags, AttrType, AttrValue, Community, DecodeCtx,
    ExtendedCommunity, Family, Ipv4Prefix, Ipv6ExtendedCommunity, Ipv6Prefix, LargeCommunity,
    Message, MpReach, MpUnreach, NextHop, Nlri, Origin, PathAttribute, RawMp, Safi, SegmentType,
    UnknownAttr, Update, json,
};
use bytes::Bytes;
use common::assert_golden;
use serde_json::{Value, json};

// Attribute flag octets, RFC 4271 §4.3.
/// Well-known (transitive, not optional).
const WK: u8 = 0x40;
/// Optional non-transitive.
const OPT: u8 = 0x80;
/// Optional transitive.
const OPT_TRANS: u8 = 0xc0;
/// Partial bit.
const PARTIAL: u8 = 0x20;
/// Extended Length bit.
const EXT_LEN: u8 = 0x10;

/// IPv4 NLRI and withdrawn routes, 4-octet session: ORIGIN, AS_PATH,
/// NEXT_HOP, MULTI_EXIT_DISC, LOCAL_PREF.
const UPDATE_IPV4: [u8; 72] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x48, // length: 72
    0x02, // type: UPDATE
    0x00, 0x02, // withdrawn routes length: 2
    0x08, 0x0a, // withdrawn: 10.0.0.0/8
    0x00, 0x26, // total path attribute length: 38
    0x40, 0x01, 0x01, // ORIGIN: flags T, type 1, length 1
    0x00, // IGP
    0x40, 0x02, 0x0a, // AS_PATH: flags T, type 2, length 10
    0x02, 0x02, // AS_SEQUENCE of 2
    0x00, 0x00, 0xfd, 0xe9, // 65001
    0xfa, 0x56, 0xea, 0x00, // 4200000000
    0x40, 0x03, 0x04, // NEXT_HOP: flags T, type 3, length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0x80, 0x04, 0x04, // MULTI_EXIT_DISC: flags O, type 4, length 4
    0x00, 0x00, 0x00, 0x64, // 100
    0x40, 0x05, 0x04, // LOCAL_PREF: flags T, type 5, length 4
    0x00, 0x00, 0x00, 0xc8, // 200
    0x18, 0xc6, 0x33, 0x64, // NLRI: 198.51.100.0/24
    0x20, 0xcb, 0x00, 0x71, 0x07, // NLRI: 203.0.113.7/32
];

/// A 2-octet session: every AS_PATH segment type, AGGREGATOR of 6 octets,
/// AS4_PATH and AS4_AGGREGATOR (RFC 6793 §4.2.2), ATOMIC_AGGREGATE.
const UPDATE_TWO_OCTET_AS: [u8; 99] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x63, // length: 99
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x48, // total path attribute length: 72
    0x40, 0x01, 0x01, // ORIGIN: flags T, type 1, length 1
    0x02, // INCOMPLETE
    0x40, 0x02, 0x16, // AS_PATH: flags T, type 2, length 22
    0x03, 0x01, 0xfd, 0xf2, // AS_CONFED_SEQUENCE of 1: 65010
    0x04, 0x02, 0xfd, 0xf3, 0xfd, 0xf4, // AS_CONFED_SET of 2: 65011 65012
    0x02, 0x02, 0xfd, 0xe9, 0x5b, 0xa0, // AS_SEQUENCE of 2: 65001 23456 (AS_TRANS)
    0x01, 0x02, 0xfc, 0x00, 0xfc, 0x01, // AS_SET of 2: 64512 64513
    0x40, 0x03, 0x04, // NEXT_HOP: flags T, type 3, length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0x40, 0x06, 0x00, // ATOMIC_AGGREGATE: flags T, type 6, length 0
    0xc0, 0x07, 0x06, // AGGREGATOR: flags O T, type 7, length 6
    0x5b, 0xa0, // AS 23456 (AS_TRANS)
    0xc0, 0x00, 0x02, 0x09, // 192.0.2.9
    0xc0, 0x11, 0x0a, // AS4_PATH: flags O T, type 17, length 10
    0x02, 0x02, // AS_SEQUENCE of 2
    0x00, 0x00, 0xfd, 0xe9, // 65001
    0xfa, 0x56, 0xea, 0x00, // 4200000000
    0xc0, 0x12, 0x08, // AS4_AGGREGATOR: flags O T, type 18, length 8
    0xfa, 0x56, 0xea, 0x00, // AS 4200000000
    0xc0, 0x00, 0x02, 0x09, // 192.0.2.9
    0x18, 0xc6, 0x33, 0x64, // NLRI: 198.51.100.0/24
];

/// A 4-octet session: confederation segments and AGGREGATOR of 8 octets.
const UPDATE_FOUR_OCTET_CONFED: [u8; 87] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x57, // length: 87
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x3c, // total path attribute length: 60
    0x40, 0x01, 0x01, // ORIGIN: flags T, type 1, length 1
    0x01, // EGP
    0x40, 0x02, 0x1c, // AS_PATH: flags T, type 2, length 28
    0x03, 0x01, 0x00, 0x00, 0xfd, 0xf2, // AS_CONFED_SEQUENCE of 1: 65010
    0x04, 0x01, 0x00, 0x00, 0xfd, 0xf3, // AS_CONFED_SET of 1: 65011
    0x02, 0x01, 0x00, 0x00, 0xfc, 0x00, // AS_SEQUENCE of 1: 64512
    0x01, 0x02, // AS_SET of 2
    0x00, 0x00, 0xfc, 0x01, // 64513
    0x00, 0x00, 0xfc, 0x02, // 64514
    0x40, 0x03, 0x04, // NEXT_HOP: flags T, type 3, length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0x40, 0x05, 0x04, // LOCAL_PREF: flags T, type 5, length 4
    0x00, 0x00, 0x00, 0x64, // 100
    0xc0, 0x07, 0x08, // AGGREGATOR: flags O T, type 7, length 8
    0x00, 0x00, 0xfd, 0xe9, // AS 65001
    0xc0, 0x00, 0x02, 0x09, // 192.0.2.9
    0x18, 0xc6, 0x33, 0x64, // NLRI: 198.51.100.0/24
];

/// Communities of every kind, route reflection attributes and an unknown
/// optional transitive attribute with the Partial bit (iBGP: empty path).
const UPDATE_COMMUNITIES: [u8; 137] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x89, // length: 137
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x6e, // total path attribute length: 110
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x00, // AS_PATH: flags T, type 2, length 0 (empty)
    0x40, 0x03, 0x04, // NEXT_HOP: flags T, type 3, length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0xc0, 0x08, 0x14, // COMMUNITIES: flags O T, type 8, length 20
    0xfd, 0xe9, 0x00, 0x64, // 65001:100
    0xff, 0xff, 0xff, 0x01, // NO_EXPORT
    0xff, 0xff, 0xff, 0x02, // NO_ADVERTISE
    0xff, 0xff, 0xff, 0x03, // NO_EXPORT_SUBCONFED
    0xff, 0xff, 0x02, 0x9a, // BLACKHOLE (RFC 7999)
    0x80, 0x09, 0x04, // ORIGINATOR_ID: flags O, type 9, length 4
    0xc0, 0x00, 0x02, 0x0a, // 192.0.2.10
    0x80, 0x0a, 0x08, // CLUSTER_LIST: flags O, type 10, length 8
    0xc0, 0x00, 0x02, 0x0b, // 192.0.2.11
    0xc0, 0x00, 0x02, 0x0c, // 192.0.2.12
    0xc0, 0x10, 0x08, // EXTENDED COMMUNITIES: flags O T, type 16, length 8
    0x00, 0x02, // type 0x00 (transitive two-octet AS), subtype 0x02 (route target)
    0xfd, 0xe9, 0x00, 0x00, 0x00, 0x64, // global admin 65001, local admin 100
    0xc0, 0x19, 0x14, // IPv6 ADDRESS SPECIFIC EXT. COMMUNITY: flags O T, type 25, length 20
    0x00, 0x02, // type 0x00 (transitive), subtype 0x02 (route target)
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // global admin 2001:db8::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // global admin (9-16)
    0x00, 0x64, // local admin 100
    0xc0, 0x20, 0x0c, // LARGE_COMMUNITY: flags O T, type 32, length 12
    0x00, 0x00, 0xfd, 0xe9, // global admin 65001
    0x00, 0x00, 0x00, 0x01, // local data 1
    0x00, 0x00, 0x00, 0x02, // local data 2
    0xe0, 0x63, 0x03, // unknown: flags O T P, type 99, length 3
    0x01, 0x02, 0x03, // value, kept as bytes
    0x18, 0xc6, 0x33, 0x64, // NLRI: 198.51.100.0/24
];

/// MP_REACH_NLRI for IPv6 with a global next hop; AS_PATH sent with the
/// Extended Length bit although it is short.
const UPDATE_MP_IPV6_GLOBAL: [u8; 75] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x4b, // length: 75
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x34, // total path attribute length: 52
    0x80, 0x0e, 0x23, // MP_REACH_NLRI: flags O, type 14, length 35
    0x00, 0x02, // AFI 2 (IPv6)
    0x01, // SAFI 1 (unicast)
    0x10, // next hop length: 16
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // next hop 2001:db8::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // next hop (9-16)
    0x00, // reserved
    0x20, 0x20, 0x01, 0x0d, 0xb8, // 2001:db8::/32
    0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x02, // 2001:db8:1:2::/64
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x50, 0x02, 0x00, 0x06, // AS_PATH: flags T + Extended Length, type 2, length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
];

/// MP_REACH_NLRI for IPv6 with global and link-local next hops (RFC 2545
/// §3), sent with the Extended Length bit as most speakers do.
const UPDATE_MP_IPV6_LINK_LOCAL: [u8; 94] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x5e, // length: 94
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x47, // total path attribute length: 71
    0x90, 0x0e, 0x00, 0x36, // MP_REACH_NLRI: flags O + Extended Length, type 14, length 54
    0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1 (unicast)
    0x20, // next hop length: 32
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // global 2001:db8::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // global (9-16)
    0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // link-local fe80::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // link-local (9-16)
    0x00, // reserved
    0x80, // prefix length 128
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // 2001:db8::cafe (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xca, 0xfe, // (9-16)
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x06, // AS_PATH: flags T, type 2, length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
];

/// RFC 8950: IPv4 NLRI with an IPv6 next hop in MP_REACH_NLRI.
const UPDATE_MP_IPV4_VIA_IPV6: [u8; 64] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x40, // length: 64
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x29, // total path attribute length: 41
    0x80, 0x0e, 0x19, // MP_REACH_NLRI: flags O, type 14, length 25
    0x00, 0x01, 0x01, // AFI 1 (IPv4), SAFI 1 (unicast)
    0x10, // next hop length: 16
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // next hop 2001:db8::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // next hop (9-16)
    0x00, // reserved
    0x18, 0xc6, 0x33, 0x64, // 198.51.100.0/24
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x06, // AS_PATH: flags T, type 2, length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
];

/// MP_REACH_NLRI for IPv4 with an IPv4 next hop.
const UPDATE_MP_IPV4: [u8; 52] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x34, // length: 52
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x1d, // total path attribute length: 29
    0x80, 0x0e, 0x0d, // MP_REACH_NLRI: flags O, type 14, length 13
    0x00, 0x01, 0x01, // AFI 1 (IPv4), SAFI 1 (unicast)
    0x04, // next hop length: 4
    0xc0, 0x00, 0x02, 0x01, // next hop 192.0.2.1
    0x00, // reserved
    0x18, 0xc6, 0x33, 0x64, // 198.51.100.0/24
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x06, // AS_PATH: flags T, type 2, length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
];

/// MP_UNREACH_NLRI for IPv6.
const UPDATE_MP_UNREACH_IPV6: [u8; 38] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x26, // length: 38
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x0f, // total path attribute length: 15
    0x80, 0x0f, 0x0c, // MP_UNREACH_NLRI: flags O, type 15, length 12
    0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1 (unicast)
    0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x02, // 2001:db8:1:2::/64
];

/// MP_UNREACH_NLRI for IPv4.
const UPDATE_MP_UNREACH_IPV4: [u8; 33] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x21, // length: 33
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x0a, // total path attribute length: 10
    0x80, 0x0f, 0x07, // MP_UNREACH_NLRI: flags O, type 15, length 7
    0x00, 0x01, 0x01, // AFI 1 (IPv4), SAFI 1 (unicast)
    0x18, 0xc6, 0x33, 0x64, // 198.51.100.0/24
];

/// A family the codec does not decode (AFI 1, SAFI 128: VPN-IPv4) is kept
/// raw.
const UPDATE_MP_RAW_VPN: [u8; 71] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x47, // length: 71
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x30, // total path attribute length: 48
    0x80, 0x0e, 0x20, // MP_REACH_NLRI: flags O, type 14, length 32
    0x00, 0x01, 0x80, // AFI 1 (IPv4), SAFI 128 (MPLS VPN)
    0x0c, // next hop length: 12
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // next hop: RD 0:0
    0xc0, 0x00, 0x02, 0x01, // next hop: 192.0.2.1
    0x00, // reserved
    0x70, // NLRI: length 112 bits (label 24 + RD 64 + prefix 24)
    0x00, 0x01, 0x01, // label 16, bottom of stack
    0x00, 0x00, 0xfd, 0xe9, 0x00, 0x00, 0x00, 0x64, // RD type 0, 65001:100
    0xc6, 0x33, 0x64, // 198.51.100.0/24
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x06, // AS_PATH: flags T, type 2, length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
];

/// ADD-PATH (RFC 7911 §3) for IPv4 and IPv6: path identifiers in the
/// withdrawn routes, MP_REACH_NLRI, MP_UNREACH_NLRI and the NLRI field.
const UPDATE_ADD_PATH: [u8; 115] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x73, // length: 115
    0x02, // type: UPDATE
    0x00, 0x06, // withdrawn routes length: 6
    0x00, 0x00, 0x00, 0x01, // path identifier 1
    0x08, 0x0a, // 10.0.0.0/8
    0x00, 0x46, // total path attribute length: 70
    0x80, 0x0e, 0x1e, // MP_REACH_NLRI: flags O, type 14, length 30
    0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1 (unicast)
    0x10, // next hop length: 16
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // next hop 2001:db8::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // next hop (9-16)
    0x00, // reserved
    0x00, 0x00, 0x00, 0x07, // path identifier 7
    0x20, 0x20, 0x01, 0x0d, 0xb8, // 2001:db8::/32
    0x80, 0x0f, 0x0e, // MP_UNREACH_NLRI: flags O, type 15, length 14
    0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1 (unicast)
    0x00, 0x00, 0x00, 0x08, // path identifier 8
    0x30, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02, // 2001:db8:2::/48
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x06, // AS_PATH: flags T, type 2, length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
    0x40, 0x03, 0x04, // NEXT_HOP: flags T, type 3, length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0x00, 0x00, 0x00, 0x02, // path identifier 2
    0x18, 0xc6, 0x33, 0x64, // 198.51.100.0/24
    0x00, 0x00, 0x00, 0x03, // path identifier 3
    0x18, 0xc6, 0x33, 0x64, // 198.51.100.0/24 again, another path
];

/// End-of-RIB for IPv4 unicast: an empty UPDATE.
const UPDATE_EOR_IPV4: [u8; 23] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x17, // length: 23
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x00, // total path attribute length: 0
];

/// End-of-RIB for IPv6 unicast: an empty MP_UNREACH_NLRI only.
const UPDATE_EOR_IPV6: [u8; 29] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x1d, // length: 29
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x06, // total path attribute length: 6
    0x80, 0x0f, 0x03, // MP_UNREACH_NLRI: flags O, type 15, length 3
    0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1 (unicast)
];

/// RFC 6793 §4.2.2: on a 2-octet session an AS above 65535 is sent as
/// AS_TRANS (a one-way golden: it parses back as 23456).
const UPDATE_AS_TRANS_OUT: [u8; 43] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x2b, // length: 43
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x14, // total path attribute length: 20
    0x40, 0x01, 0x01, 0x00, // ORIGIN: flags T, type 1, length 1, IGP
    0x40, 0x02, 0x04, // AS_PATH: flags T, type 2, length 4
    0x02, 0x01, 0x5b, 0xa0, // AS_SEQUENCE of 1: 23456 (AS_TRANS for 4200000000)
    0xc0, 0x07, 0x06, // AGGREGATOR: flags O T, type 7, length 6
    0x5b, 0xa0, // AS 23456 (AS_TRANS for 4200000000)
    0xc0, 0x00, 0x02, 0x09, // 192.0.2.9
];

fn pa(flags: u8, value: AttrValue) -> PathAttribute {
    PathAttribute {
        flags: AttrFlags(flags),
        value,
    }
}

fn seg(kind: SegmentType, asns: &[u32]) -> (SegmentType, Vec<u32>) {
    (kind, asns.to_vec())
}

fn path(segments: Vec<(SegmentType, Vec<u32>)>) -> AsPath {
    AsPath::from_segments(segments)
}

fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Nlri<Ipv4Prefix> {
    Nlri::new(Ipv4Prefix::new(Ipv4Addr::new(a, b, c, d), len).unwrap())
}

fn v6(addr: &str, len: u8) -> Nlri<Ipv6Prefix> {
    Nlri::new(Ipv6Prefix::new(ip6(addr), len).unwrap())
}

fn ip6(addr: &str) -> Ipv6Addr {
    addr.parse().unwrap()
}

fn with_id<P>(path_id: u32, mut n: Nlri<P>) -> Nlri<P> {
    n.path_id = Some(path_id);
    n
}

fn origin_igp() -> PathAttribute {
    pa(WK, AttrValue::Origin(Origin::Igp))
}

fn as_path_65001() -> PathAttribute {
    pa(
        WK,
        AttrValue::AsPath(path(vec![seg(SegmentType::Sequence, &[65001])])),
    )
}

fn next_hop_192_0_2_1() -> PathAttribute {
    pa(WK, AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)))
}

fn update(
    withdrawn: Vec<Nlri<Ipv4Prefix>>,
    attributes: Vec<PathAttribute>,
    nlri: Vec<Nlri<Ipv4Prefix>>,
) -> Message {
    Message::Update(Update {
        withdrawn,
        attributes,
        nlri,
        errors: Vec::new(),
    })
}

fn update_of(msg: &Message) -> &Update {
    match msg {
        Message::Update(u) => u,
        other => panic!("not an UPDATE: {other:?}"),
    }
}

fn two_octet() -> DecodeCtx {
    DecodeCtx {
        as4: false,
        ..DecodeCtx::default()
    }
}

#[test]
fn ipv4_nlri_and_withdrawn() {
    let expected = update(
        vec![v4(10, 0, 0, 0, 8)],
        vec![
            origin_igp(),
            pa(
                WK,
                AttrValue::AsPath(path(vec![seg(
                    SegmentType::Sequence,
                    &[65001, 4_200_000_000],
                )])),
            ),
            next_hop_192_0_2_1(),
            pa(OPT, AttrValue::MultiExitDisc(100)),
            pa(WK, AttrValue::LocalPref(200)),
        ],
        vec![v4(198, 51, 100, 0, 24), v4(203, 0, 113, 7, 32)],
    );
    let msg = assert_golden(&UPDATE_IPV4, &expected, &DecodeCtx::default());
    let u = update_of(&msg);
    assert!(!u.treat_as_withdraw());
    assert_eq!(u.end_of_rib_family(), None);
    assert_eq!(
        u.attribute(AttrType::LocalPref),
        Some(&AttrValue::LocalPref(200))
    );

    let j = json::message(&msg);
    assert_eq!(j["type"], "UPDATE");
    assert_eq!(j["withdrawn"], json!(["10.0.0.0/8"]));
    assert_eq!(j["nlri"], json!(["198.51.100.0/24", "203.0.113.7/32"]));
    let a = &j["attributes"];
    assert_eq!(a["origin"], "IGP");
    assert_eq!(
        a["as_path"],
        json!([{ "type": "AS_SEQUENCE", "asns": [65001, 4_200_000_000u32] }])
    );
    assert_eq!(a["next_hop"], "192.0.2.1");
    assert_eq!(a["med"], 100);
    assert_eq!(a["local_pref"], 200);
    assert_eq!(j.get("errors"), None);
    assert_eq!(j.get("end_of_rib"), None);
}

#[test]
fn two_octet_session_every_segment_type_and_as4_attributes() {
    let expected = update(
        Vec::new(),
        vec![
            pa(WK, AttrValue::Origin(Origin::Incomplete)),
            pa(
                WK,
                AttrValue::AsPath(path(vec![
                    seg(SegmentType::ConfedSequence, &[65010]),
                    seg(SegmentType::ConfedSet, &[65011, 65012]),
                    seg(SegmentType::Sequence, &[65001, 23456]),
                    seg(SegmentType::Set, &[64512, 64513]),
                ])),
            ),
            next_hop_192_0_2_1(),
            pa(WK, AttrValue::AtomicAggregate),
            pa(
                OPT_TRANS,
                AttrValue::Aggregator(Aggregator {
                    asn: 23456,
                    addr: Ipv4Addr::new(192, 0, 2, 9),
                }),
            ),
            pa(
                OPT_TRANS,
                AttrValue::As4Path(path(vec![seg(
                    SegmentType::Sequence,
                    &[65001, 4_200_000_000],
                )])),
            ),
            pa(
                OPT_TRANS,
                AttrValue::As4Aggregator(Aggregator {
                    asn: 4_200_000_000,
                    addr: Ipv4Addr::new(192, 0, 2, 9),
                }),
            ),
        ],
        vec![v4(198, 51, 100, 0, 24)],
    );
    let msg = assert_golden(&UPDATE_TWO_OCTET_AS, &expected, &two_octet());
    match update_of(&msg).attribute(AttrType::AsPath) {
        // RFC 4271 §9.1.2.2: sets count 1, confederation segments 0.
        Some(AttrValue::AsPath(p)) => {
            assert_eq!(p.path_len(), 3);
            assert_eq!(p.first_as(), None, "starts with a confed segment");
        }
        other => panic!("{other:?}"),
    }

    let a = &json::message(&msg)["attributes"];
    assert_eq!(a["origin"], "INCOMPLETE");
    assert_eq!(
        a["as_path"],
        json!([
            { "type": "AS_CONFED_SEQUENCE", "asns": [65010] },
            { "type": "AS_CONFED_SET", "asns": [65011, 65012] },
            { "type": "AS_SEQUENCE", "asns": [65001, 23456] },
            { "type": "AS_SET", "asns": [64512, 64513] },
        ])
    );
    assert_eq!(a["atomic_aggregate"], true);
    assert_eq!(
        a["aggregator"],
        json!({ "asn": 23456, "address": "192.0.2.9" })
    );
    assert_eq!(
        a["as4_path"],
        json!([{ "type": "AS_SEQUENCE", "asns": [65001, 4_200_000_000u32] }])
    );
    assert_eq!(
        a["as4_aggregator"],
        json!({ "asn": 4_200_000_000u32, "address": "192.0.2.9" })
    );
}

#[test]
fn four_octet_session_confederation_and_aggregator() {
    let expected = update(
        Vec::new(),
        vec![
            pa(WK, AttrValue::Origin(Origin::Egp)),
            pa(
                WK,
                AttrValue::AsPath(path(vec![
                    seg(SegmentType::ConfedSequence, &[65010]),
                    seg(SegmentType::ConfedSet, &[65011]),
                    seg(SegmentType::Sequence, &[64512]),
                    seg(SegmentType::Set, &[64513, 64514]),
                ])),
            ),
            next_hop_192_0_2_1(),
            pa(WK, AttrValue::LocalPref(100)),
            pa(
                OPT_TRANS,
                AttrValue::Aggregator(Aggregator {
                    asn: 65001,
                    addr: Ipv4Addr::new(192, 0, 2, 9),
                }),
            ),
        ],
        vec![v4(198, 51, 100, 0, 24)],
    );
    let msg = assert_golden(&UPDATE_FOUR_OCTET_CONFED, &expected, &DecodeCtx::default());
    let a = &json::message(&msg)["attributes"];
    assert_eq!(a["origin"], "EGP");
    assert_eq!(a["as_path"][0]["type"], "AS_CONFED_SEQUENCE");
    assert_eq!(a["as_path"][1]["type"], "AS_CONFED_SET");
    assert_eq!(
        a["as_path"][3],
        json!({ "type": "AS_SET", "asns": [64513, 64514] })
    );
    assert_eq!(
        a["aggregator"],
        json!({ "asn": 65001, "address": "192.0.2.9" })
    );
}

#[test]
fn communities_route_reflection_and_unknown_partial() {
    let mut ipv6_rt = [0u8; 20];
    ipv6_rt[1] = 0x02; // type 0x00, subtype route target
    ipv6_rt[2..18].copy_from_slice(&ip6("2001:db8::1").octets());
    ipv6_rt[18..].copy_from_slice(&100u16.to_be_bytes());
    let expected = update(
        Vec::new(),
        vec![
            origin_igp(),
            pa(WK, AttrValue::AsPath(AsPath::default())),
            next_hop_192_0_2_1(),
            pa(
                OPT_TRANS,
                AttrValue::Communities(
                    vec![
                        Community((65001 << 16) | 100),
                        Community(0xffff_ff01),
                        Community(0xffff_ff02),
                        Community(0xffff_ff03),
                        Community(0xffff_029a),
                    ]
                    .into(),
                ),
            ),
            pa(OPT, AttrValue::OriginatorId(Ipv4Addr::new(192, 0, 2, 10))),
            pa(
                OPT,
                AttrValue::ClusterList(
                    vec![Ipv4Addr::new(192, 0, 2, 11), Ipv4Addr::new(192, 0, 2, 12)].into(),
                ),
            ),
            pa(
                OPT_TRANS,
                AttrValue::ExtendedCommunities(
                    vec![ExtendedCommunity([
                        0x00, 0x02, 0xfd, 0xe9, 0x00, 0x00, 0x00, 0x64,
                    ])]
                    .into(),
                ),
            ),
            pa(
                OPT_TRANS,
                AttrValue::Ipv6ExtendedCommunities(vec![Ipv6ExtendedCommunity(ipv6_rt)].into()),
            ),
            pa(
                OPT_TRANS,
                AttrValue::LargeCommunities(
                    vec![LargeCommunity {
                        global_admin: 65001,
                        local_data1: 1,
                        local_data2: 2,
                    }]
                    .into(),
                ),
            ),
            pa(
                OPT_TRANS | PARTIAL,
                AttrValue::Unknown(UnknownAttr {
                    type_code: 99,
                    data: Bytes::from_static(&[1, 2, 3]),
                }),
            ),
        ],
        vec![v4(198, 51, 100, 0, 24)],
    );
    let msg = assert_golden(&UPDATE_COMMUNITIES, &expected, &DecodeCtx::default());
    let u = update_of(&msg);
    match u.attribute(AttrType::ExtendedCommunities) {
        Some(AttrValue::ExtendedCommunities(v)) => {
            assert_eq!(v.get(0), Some(ExtendedCommunity::route_target(65001, 100)));
        }
        other => panic!("{other:?}"),
    }
    match u.attribute(AttrType::Ipv6ExtendedCommunities) {
        Some(AttrValue::Ipv6ExtendedCommunities(v)) => {
            assert_eq!(v.get(0).unwrap().global_admin(), ip6("2001:db8::1"));
            assert_eq!(v.get(0).unwrap().local_admin(), 100);
        }
        other => panic!("{other:?}"),
    }
    let unknown = u.attributes.last().unwrap();
    assert!(unknown.flags.has(AttrFlags::PARTIAL));
    assert_eq!(unknown.value.type_code(), AttrType::Unknown(99));

    // `parse_bytes` keeps the list values as slices of the message, where
    // `parse` copies them out.
    let shared = Bytes::copy_from_slice(&UPDATE_COMMUNITIES);
    let inside = |p: *const u8| shared.as_ptr_range().contains(&p);
    let lists = |m: &Message| -> Vec<(AttrType, *const u8)> {
        update_of(m)
            .attributes
            .iter()
            .filter_map(|a| {
                let octets = match &a.value {
                    AttrValue::Communities(v) => v.as_bytes(),
                    AttrValue::ClusterList(v) => v.as_bytes(),
                    AttrValue::ExtendedCommunities(v) => v.as_bytes(),
                    AttrValue::Ipv6ExtendedCommunities(v) => v.as_bytes(),
                    AttrValue::LargeCommunities(v) => v.as_bytes(),
                    AttrValue::Unknown(u) => &u.data[..],
                    _ => return None,
                };
                Some((a.value.type_code(), octets.as_ptr()))
            })
            .collect()
    };
    let views = lists(&Message::parse_bytes(&shared, &DecodeCtx::default()).unwrap());
    assert_eq!(views.len(), 6);
    for (t, p) in views {
        assert!(inside(p), "{t:?} was copied");
    }
    let copies = lists(&Message::parse(&shared, &DecodeCtx::default()).unwrap());
    assert_eq!(copies.len(), 6);
    for (t, p) in copies {
        assert!(!inside(p), "{t:?} points into the message");
    }

    let a = &json::message(&msg)["attributes"];
    assert_eq!(a["as_path"], json!([]));
    assert_eq!(
        a["communities"],
        json!([
            "65001:100",
            "no-export",
            "no-advertise",
            "no-export-subconfed",
            "blackhole"
        ])
    );
    assert_eq!(a["originator_id"], "192.0.2.10");
    assert_eq!(a["cluster_list"], json!(["192.0.2.11", "192.0.2.12"]));
    let ext = &a["extended_communities"][0];
    assert_eq!(ext["type"], 0);
    assert_eq!(ext["subtype"], 2);
    assert_eq!(ext["value"], "0002fde900000064");
    assert_eq!(ext["text"], "rt 65001:100");
    let ext6 = &a["ipv6_extended_communities"][0];
    assert_eq!(ext6["subtype"], 2);
    assert_eq!(ext6["global_admin"], "2001:db8::1");
    assert_eq!(ext6["local_admin"], 100);
    assert_eq!(a["large_communities"], json!(["65001:1:2"]));
    assert_eq!(
        a["unknown"],
        json!([{ "type_code": 99, "flags": 0xe0, "partial": true, "data": "010203" }])
    );
}

#[test]
fn well_known_community_names() {
    // RFC 1997, 3765, 7611, 7999, 8326, 9494 values, written out.
    let cases = [
        (0xffff_ff01, "no-export"),
        (0xffff_ff02, "no-advertise"),
        (0xffff_ff03, "no-export-subconfed"),
        (0xffff_ff04, "nopeer"),
        (0xffff_0000, "graceful-shutdown"),
        (0xffff_0001, "accept-own"),
        (0xffff_0006, "llgr-stale"),
        (0xffff_0007, "no-llgr"),
        (0xffff_029a, "blackhole"),
        (0xfde9_0064, "65001:100"),
    ];
    for (value, text) in cases {
        assert_eq!(Community(value).to_string(), text);
    }
    assert_eq!(Community::new(65001, 100), Community(0xfde9_0064));
}

#[test]
fn mp_reach_ipv6_global_next_hop() {
    let expected = update(
        Vec::new(),
        vec![
            pa(
                OPT,
                AttrValue::MpReach(MpReach::Ipv6Unicast {
                    next_hop: NextHop::V6 {
                        global: ip6("2001:db8::1"),
                        link_local: None,
                    },
                    nlri: vec![v6("2001:db8::", 32), v6("2001:db8:1:2::", 64)],
                }),
            ),
            origin_igp(),
            pa(
                WK | EXT_LEN,
                AttrValue::AsPath(path(vec![seg(SegmentType::Sequence, &[65001])])),
            ),
        ],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_IPV6_GLOBAL, &expected, &DecodeCtx::default());
    let j = json::message(&msg);
    let mp = &j["attributes"]["mp_reach"];
    assert_eq!(mp["afi"], "ipv6");
    assert_eq!(mp["safi"], "unicast");
    assert_eq!(mp["next_hop"], "2001:db8::1");
    assert_eq!(mp["nlri"], json!(["2001:db8::/32", "2001:db8:1:2::/64"]));
    assert_eq!(j["nlri"], json!([]));
}

#[test]
fn mp_reach_ipv6_global_and_link_local_with_extended_length() {
    let next_hop = NextHop::V6 {
        global: ip6("2001:db8::1"),
        link_local: Some(ip6("fe80::1")),
    };
    let expected = update(
        Vec::new(),
        vec![
            pa(
                OPT | EXT_LEN,
                AttrValue::MpReach(MpReach::Ipv6Unicast {
                    next_hop,
                    nlri: vec![v6("2001:db8::cafe", 128)],
                }),
            ),
            origin_igp(),
            as_path_65001(),
        ],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_IPV6_LINK_LOCAL, &expected, &DecodeCtx::default());
    assert!(
        update_of(&msg).attributes[0]
            .flags
            .has(AttrFlags::EXTENDED_LENGTH)
    );
    let mp = &json::message(&msg)["attributes"]["mp_reach"];
    assert_eq!(mp["next_hop"], json!(["2001:db8::1", "fe80::1"]));
    assert_eq!(mp["nlri"], json!(["2001:db8::cafe/128"]));
}

#[test]
fn mp_reach_ipv4_nlri_with_ipv6_next_hop() {
    let expected = update(
        Vec::new(),
        vec![
            pa(
                OPT,
                AttrValue::MpReach(MpReach::Ipv4Unicast {
                    next_hop: NextHop::V6 {
                        global: ip6("2001:db8::1"),
                        link_local: None,
                    },
                    nlri: vec![v4(198, 51, 100, 0, 24)],
                }),
            ),
            origin_igp(),
            as_path_65001(),
        ],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_IPV4_VIA_IPV6, &expected, &DecodeCtx::default());
    assert!(!update_of(&msg).treat_as_withdraw(), "no NEXT_HOP needed");
    let mp = &json::message(&msg)["attributes"]["mp_reach"];
    assert_eq!(mp["afi"], "ipv4");
    assert_eq!(mp["next_hop"], "2001:db8::1");
    assert_eq!(mp["nlri"], json!(["198.51.100.0/24"]));
}

#[test]
fn mp_reach_ipv4_with_ipv4_next_hop() {
    let expected = update(
        Vec::new(),
        vec![
            pa(
                OPT,
                AttrValue::MpReach(MpReach::Ipv4Unicast {
                    next_hop: NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
                    nlri: vec![v4(198, 51, 100, 0, 24)],
                }),
            ),
            origin_igp(),
            as_path_65001(),
        ],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_IPV4, &expected, &DecodeCtx::default());
    let mp = &json::message(&msg)["attributes"]["mp_reach"];
    assert_eq!(mp["next_hop"], "192.0.2.1");
}

#[test]
fn mp_unreach_ipv6_and_ipv4() {
    let expected = update(
        Vec::new(),
        vec![pa(
            OPT,
            AttrValue::MpUnreach(MpUnreach::Ipv6Unicast(vec![v6("2001:db8:1:2::", 64)])),
        )],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_UNREACH_IPV6, &expected, &DecodeCtx::default());
    assert_eq!(update_of(&msg).end_of_rib_family(), None);
    let j = json::message(&msg);
    let mp = &j["attributes"]["mp_unreach"];
    assert_eq!(mp["afi"], "ipv6");
    assert_eq!(mp["withdrawn"], json!(["2001:db8:1:2::/64"]));
    assert_eq!(j.get("errors"), None, "withdrawals need no ORIGIN");

    let expected = update(
        Vec::new(),
        vec![pa(
            OPT,
            AttrValue::MpUnreach(MpUnreach::Ipv4Unicast(vec![v4(198, 51, 100, 0, 24)])),
        )],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_UNREACH_IPV4, &expected, &DecodeCtx::default());
    let mp = &json::message(&msg)["attributes"]["mp_unreach"];
    assert_eq!(mp["afi"], "ipv4");
    assert_eq!(mp["withdrawn"], json!(["198.51.100.0/24"]));
}

#[test]
fn mp_reach_of_an_undecoded_family_is_kept_raw() {
    let next_hop = [0, 0, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1];
    let nlri = [
        0x70, 0x00, 0x01, 0x01, 0x00, 0x00, 0xfd, 0xe9, 0x00, 0x00, 0x00, 0x64, 0xc6, 0x33, 0x64,
    ];
    let expected = update(
        Vec::new(),
        vec![
            pa(
                OPT,
                AttrValue::MpReach(MpReach::Other(RawMp {
                    afi: Afi::Ipv4,
                    safi: Safi::MplsVpn,
                    next_hop: Bytes::copy_from_slice(&next_hop),
                    nlri: Bytes::copy_from_slice(&nlri),
                })),
            ),
            origin_igp(),
            as_path_65001(),
        ],
        Vec::new(),
    );
    let msg = assert_golden(&UPDATE_MP_RAW_VPN, &expected, &DecodeCtx::default());
    assert!(update_of(&msg).errors.is_empty());
    let mp = &json::message(&msg)["attributes"]["mp_reach"];
    assert_eq!(mp["afi"], "ipv4");
    assert_eq!(mp["safi"], "mpls-vpn");
    assert_eq!(mp["next_hop_raw"], "0000000000000000c0000201");
    assert_eq!(mp["nlri_raw"], "700001010000fde900000064c63364");
}

#[test]
fn add_path_identifiers_everywhere() {
    let ctx = DecodeCtx {
        add_path: AddPathSet::of(&[Family::Ipv4Unicast, Family::Ipv6Unicast]),
        ..DecodeCtx::default()
    };
    let expected = update(
        vec![with_id(1, v4(10, 0, 0, 0, 8))],
        vec![
            pa(
                OPT,
                AttrValue::MpReach(MpReach::Ipv6Unicast {
                    next_hop: NextHop::V6 {
                        global: ip6("2001:db8::1"),
                        link_local: None,
                    },
                    nlri: vec![with_id(7, v6("2001:db8::", 32))],
                }),
            ),
            pa(
                OPT,
                AttrValue::MpUnreach(MpUnreach::Ipv6Unicast(vec![with_id(
                    8,
                    v6("2001:db8:2::", 48),
                )])),
            ),
            origin_igp(),
            as_path_65001(),
            next_hop_192_0_2_1(),
        ],
        vec![
            with_id(2, v4(198, 51, 100, 0, 24)),
            with_id(3, v4(198, 51, 100, 0, 24)),
        ],
    );
    let msg = assert_golden(&UPDATE_ADD_PATH, &expected, &ctx);
    let j = json::message(&msg);
    assert_eq!(
        j["withdrawn"],
        json!([{ "path_id": 1, "prefix": "10.0.0.0/8" }])
    );
    assert_eq!(
        j["nlri"],
        json!([
            { "path_id": 2, "prefix": "198.51.100.0/24" },
            { "path_id": 3, "prefix": "198.51.100.0/24" },
        ])
    );
    assert_eq!(
        j["attributes"]["mp_reach"]["nlri"],
        json!([{ "path_id": 7, "prefix": "2001:db8::/32" }])
    );
    assert_eq!(
        j["attributes"]["mp_unreach"]["withdrawn"],
        json!([{ "path_id": 8, "prefix": "2001:db8:2::/48" }])
    );
}

#[test]
fn end_of_rib_ipv4() {
    let expected = update(Vec::new(), Vec::new(), Vec::new());
    assert_eq!(
        expected,
        Message::Update(Update::end_of_rib(Family::Ipv4Unicast))
    );
    let msg = assert_golden(&UPDATE_EOR_IPV4, &expected, &DecodeCtx::default());
    assert_eq!(
        update_of(&msg).end_of_rib_family(),
        Some(Family::Ipv4Unicast)
    );
    let j = json::message(&msg);
    assert_eq!(j["end_of_rib"], "ipv4-unicast");
    assert_eq!(j["attributes"], json!({}));
}

#[test]
fn end_of_rib_ipv6() {
    let expected = update(
        Vec::new(),
        vec![pa(
            OPT,
            AttrValue::MpUnreach(MpUnreach::Ipv6Unicast(Vec::new())),
        )],
        Vec::new(),
    );
    assert_eq!(
        expected,
        Message::Update(Update::end_of_rib(Family::Ipv6Unicast))
    );
    let msg = assert_golden(&UPDATE_EOR_IPV6, &expected, &DecodeCtx::default());
    assert_eq!(
        update_of(&msg).end_of_rib_family(),
        Some(Family::Ipv6Unicast)
    );
    let j = json::message(&msg);
    assert_eq!(j["end_of_rib"], "ipv6-unicast");
    assert_eq!(j["attributes"]["mp_unreach"]["withdrawn"], json!([]));
}

#[test]
fn two_octet_session_sends_as_trans() {
    let msg = update(
        Vec::new(),
        vec![
            origin_igp(),
            pa(
                WK,
                AttrValue::AsPath(path(vec![seg(SegmentType::Sequence, &[4_200_000_000])])),
            ),
            pa(
                OPT_TRANS,
                AttrValue::Aggregator(Aggregator {
                    asn: 4_200_000_000,
                    addr: Ipv4Addr::new(192, 0, 2, 9),
                }),
            ),
        ],
        Vec::new(),
    );
    let bytes = msg.to_bytes(&two_octet()).unwrap();
    assert_eq!(hex::encode(&bytes), hex::encode(UPDATE_AS_TRANS_OUT));
}

/// An attribute longer than 255 octets gets the Extended Length bit even
/// when the value was built without it (RFC 4271 §4.3).
#[test]
fn long_attribute_gets_extended_length() {
    let communities: Vec<Community> = (0..64u32).map(|i| Community((65001 << 16) | i)).collect();
    let msg = update(
        Vec::new(),
        vec![pa(
            OPT_TRANS,
            AttrValue::Communities(communities.as_slice().into()),
        )],
        Vec::new(),
    );
    let ctx = DecodeCtx::default();
    let bytes = msg.to_bytes(&ctx).unwrap();
    // Header, withdrawn routes length 0, attribute length 4 + 256.
    assert_eq!(bytes.len(), 19 + 2 + 2 + 4 + 256);
    assert_eq!(
        &bytes[21..23],
        &[0x01, 0x04][..],
        "total path attribute length 260"
    );
    assert_eq!(
        &bytes[23..27],
        &[0xd0, 0x08, 0x01, 0x00][..],
        "flags O T + Extended Length, type 8, length 256"
    );
    assert_eq!(&bytes[27..31], &[0xfd, 0xe9, 0x00, 0x00][..], "65001:0");
    let expected = update(
        Vec::new(),
        vec![pa(
            OPT_TRANS | EXT_LEN,
            AttrValue::Communities(communities.into()),
        )],
        Vec::new(),
    );
    assert_eq!(Message::parse(&bytes, &ctx).unwrap(), expected);
}

/// `PathAttribute::new` uses the Optional/Transitive bits RFC 4271 §5 and
/// the attribute RFCs give each type.
#[test]
fn canonical_flags_per_type() {
    let aggregator = Aggregator {
        asn: 1,
        addr: Ipv4Addr::new(192, 0, 2, 9),
    };
    let cases = [
        (AttrValue::Origin(Origin::Igp), WK),
        (AttrValue::AsPath(AsPath::default()), WK),
        (AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)), WK),
        (AttrValue::MultiExitDisc(0), OPT),
        (AttrValue::LocalPref(0), WK),
        (AttrValue::AtomicAggregate, WK),
        (AttrValue::Aggregator(aggregator), OPT_TRANS),
        (AttrValue::Communities(vec![Community(1)].into()), OPT_TRANS),
        (AttrValue::OriginatorId(Ipv4Addr::new(192, 0, 2, 1)), OPT),
        (
            AttrValue::ClusterList(vec![Ipv4Addr::new(192, 0, 2, 1)].into()),
            OPT,
        ),
        (
            AttrValue::MpUnreach(MpUnreach::Ipv6Unicast(Vec::new())),
            OPT,
        ),
        (
            AttrValue::ExtendedCommunities(vec![ExtendedCommunity([0; 8])].into()),
            OPT_TRANS,
        ),
        (AttrValue::As4Path(AsPath::default()), OPT_TRANS),
        (AttrValue::As4Aggregator(aggregator), OPT_TRANS),
        (
            AttrValue::Ipv6ExtendedCommunities(vec![Ipv6ExtendedCommunity([0; 20])].into()),
            OPT_TRANS,
        ),
        (
            AttrValue::LargeCommunities(
                vec![LargeCommunity {
                    global_admin: 1,
                    local_data1: 2,
                    local_data2: 3,
                }]
                .into(),
            ),
            OPT_TRANS,
        ),
    ];
    for (value, flags) in cases {
        let t = value.type_code();
        assert_eq!(PathAttribute::new(value).flags, AttrFlags(flags), "{t:?}");
    }
}

/// Sanity check on the JSON of a whole golden UPDATE: it is an object with
/// exactly the documented top-level keys.
#[test]
fn json_top_level_shape() {
    let msg = Message::parse(&UPDATE_IPV4, &DecodeCtx::default()).unwrap();
    let j = json::message(&msg);
    let keys: Vec<&str> = match &j {
        Value::Object(map) => map.keys().map(String::as_str).collect(),
        other => panic!("{other}"),
    };
    assert_eq!(keys, ["type", "withdrawn", "attributes", "nlri"]);
}
