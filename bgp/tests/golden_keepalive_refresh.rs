//! Golden (bytes, value) pairs for KEEPALIVE (RFC 4271 §4.4) and
//! ROUTE-REFRESH (RFC 2918 §3) with the RFC 7313 subtypes.

mod common;

use bgp::wire::{Afi, DecodeCtx, Message, RefreshSubtype, RouteRefresh, Safi, json};
use common::assert_golden;

/// KEEPALIVE: the header alone.
const KEEPALIVE: [u8; 19] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x13, // length: 19
    0x04, // type: KEEPALIVE
];

/// A normal route refresh request for IPv4 unicast.
const REFRESH_REQUEST: [u8; 23] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x17, // length: 23
    0x05, // type: ROUTE-REFRESH
    0x00, 0x01, // AFI 1 (IPv4)
    0x00, // subtype 0: normal request
    0x01, // SAFI 1 (unicast)
];

/// Beginning of Route Refresh for IPv6 unicast (RFC 7313 §3).
const REFRESH_BORR: [u8; 23] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x17, // length: 23
    0x05, // type: ROUTE-REFRESH
    0x00, 0x02, // AFI 2 (IPv6)
    0x01, // subtype 1: BoRR
    0x01, // SAFI 1 (unicast)
];

/// End of Route Refresh for IPv4 unicast (RFC 7313 §3).
const REFRESH_EORR: [u8; 23] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x17, // length: 23
    0x05, // type: ROUTE-REFRESH
    0x00, 0x01, // AFI 1 (IPv4)
    0x02, // subtype 2: EoRR
    0x01, // SAFI 1 (unicast)
];

/// A subtype RFC 7313 does not define, for a family we do not decode:
/// parsed (the session ignores it) and round-tripped.
const REFRESH_UNKNOWN_SUBTYPE: [u8; 23] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x17, // length: 23
    0x05, // type: ROUTE-REFRESH
    0x00, 0x19, // AFI 25 (L2VPN)
    0x03, // subtype 3: not defined
    0x46, // SAFI 70 (EVPN)
];

fn refresh(afi: Afi, subtype: RefreshSubtype, safi: Safi) -> Message {
    Message::RouteRefresh(RouteRefresh { afi, subtype, safi })
}

#[test]
fn keepalive() {
    let msg = assert_golden(&KEEPALIVE, &Message::Keepalive, &DecodeCtx::default());
    assert_eq!(msg.to_string(), "KEEPALIVE");
    assert_eq!(
        json::message(&msg),
        serde_json::json!({ "type": "KEEPALIVE" })
    );
}

#[test]
fn route_refresh_request() {
    let expected = refresh(Afi::Ipv4, RefreshSubtype::Request, Safi::Unicast);
    assert_eq!(
        expected,
        Message::RouteRefresh(RouteRefresh::request(Afi::Ipv4, Safi::Unicast))
    );
    let msg = assert_golden(&REFRESH_REQUEST, &expected, &DecodeCtx::default());
    let j = json::message(&msg);
    assert_eq!(j["type"], "ROUTE-REFRESH");
    assert_eq!(j["afi"], "ipv4");
    assert_eq!(j["safi"], "unicast");
    assert_eq!(j["subtype"], "request");
}

#[test]
fn route_refresh_beginning_of_refresh() {
    let expected = refresh(Afi::Ipv6, RefreshSubtype::BeginningOfRefresh, Safi::Unicast);
    let msg = assert_golden(&REFRESH_BORR, &expected, &DecodeCtx::default());
    let j = json::message(&msg);
    assert_eq!(j["afi"], "ipv6");
    assert_eq!(j["subtype"], "BoRR");
}

#[test]
fn route_refresh_end_of_refresh() {
    let expected = refresh(Afi::Ipv4, RefreshSubtype::EndOfRefresh, Safi::Unicast);
    let msg = assert_golden(&REFRESH_EORR, &expected, &DecodeCtx::default());
    assert_eq!(json::message(&msg)["subtype"], "EoRR");
}

#[test]
fn route_refresh_unknown_subtype() {
    let expected = refresh(Afi::L2vpn, RefreshSubtype::Unknown(3), Safi::Evpn);
    let msg = assert_golden(&REFRESH_UNKNOWN_SUBTYPE, &expected, &DecodeCtx::default());
    let j = json::message(&msg);
    assert_eq!(j["afi"], "l2vpn");
    assert_eq!(j["safi"], "evpn");
    assert_eq!(j["subtype"], 3);
}
