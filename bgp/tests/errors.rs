//! One test per error case of RFC 4271 §6.1-§6.3, RFC 7606 and RFC 7313
//! §5: the exact NOTIFICATION (code, subcode, data) a malformed message is
//! answered with, or the exact RFC 7606 action recorded beside an UPDATE.
//! Also the framing edge cases of `bgp::frame::decode`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns; a panic is a test failure"
)]

use std::net::Ipv4Addr;

use bgp::frame;
use bgp::wire::{
    Action, Afi, AttrType, AttrValue, DecodeCtx, DecodeError, EncodeError, ErrorCode, HeaderError,
    Message, MpReach, Notification, Origin, RawMp, RefreshSubtype, RouteRefresh, Safi, Update,
    UpdateError, json,
};
use bytes::Bytes;

/// A whole KEEPALIVE.
const KEEPALIVE: [u8; 19] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x13, // length: 19
    0x04, // type: KEEPALIVE
];

/// ORIGIN IGP.
const ORIGIN_IGP: [u8; 4] = [
    0x40, 0x01, 0x01, // flags T, type 1 (ORIGIN), length 1
    0x00, // IGP
];

/// AS_PATH of one AS_SEQUENCE holding 65001 (4-octet session).
const AS_PATH_65001: [u8; 9] = [
    0x40, 0x02, 0x06, // flags T, type 2 (AS_PATH), length 6
    0x02, 0x01, // AS_SEQUENCE of 1
    0x00, 0x00, 0xfd, 0xe9, // 65001
];

/// NEXT_HOP 192.0.2.1.
const NEXT_HOP: [u8; 7] = [
    0x40, 0x03, 0x04, // flags T, type 3 (NEXT_HOP), length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
];

/// MP_REACH_NLRI announcing 2001:db8::/32 via 2001:db8::1.
const MP_REACH_IPV6: [u8; 29] = [
    0x80, 0x0e, 0x1a, // flags O, type 14 (MP_REACH_NLRI), length 26
    0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1 (unicast)
    0x10, // next hop length: 16
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // next hop 2001:db8::1 (1-8)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // next hop (9-16)
    0x00, // reserved
    0x20, 0x20, 0x01, 0x0d, 0xb8, // 2001:db8::/32
];

/// NLRI field: 198.51.100.0/24.
const NLRI: [u8; 4] = [0x18, 0xc6, 0x33, 0x64];

fn ctx() -> DecodeCtx {
    DecodeCtx::default()
}

fn extended() -> DecodeCtx {
    DecodeCtx {
        extended_message: true,
        ..DecodeCtx::default()
    }
}

/// A message of type `kind` with `body`, its length field saying `length`.
fn msg_with_length(length: u16, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&length.to_be_bytes());
    m.push(kind);
    m.extend_from_slice(body);
    m
}

/// A message of type `kind` with `body` and a correct length field.
fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
    let length = u16::try_from(19 + body.len()).unwrap();
    msg_with_length(length, kind, body)
}

/// `bytes` parsed both ways: from a slice (values copy their octets) and
/// from shared `Bytes` (values are slices of the message). The decisions,
/// errors and values must be the same.
fn parse(bytes: &[u8], ctx: &DecodeCtx) -> Result<Message, DecodeError> {
    let copied = Message::parse(bytes, ctx);
    let shared = Message::parse_bytes(&Bytes::copy_from_slice(bytes), ctx);
    assert_eq!(copied, shared, "parse and parse_bytes differ");
    copied
}

/// The NOTIFICATION that `bytes` must be answered with.
fn rejected(bytes: &[u8], ctx: &DecodeCtx) -> (u8, u8, Vec<u8>) {
    let err = parse(bytes, ctx).expect_err("must be rejected");
    let n = Notification::from(&err);
    (u8::from(n.code), n.subcode, n.data.to_vec())
}

/// An UPDATE with no withdrawn routes, the attributes `attrs` and `nlri`.
fn update_msg(attrs: &[&[u8]], nlri: &[u8]) -> Vec<u8> {
    let attrs = attrs.concat();
    let mut body = vec![0x00, 0x00]; // withdrawn routes length: 0
    body.extend_from_slice(&u16::try_from(attrs.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&attrs);
    body.extend_from_slice(nlri);
    msg(2, &body)
}

fn parsed_update(bytes: &[u8], ctx: &DecodeCtx) -> Update {
    match parse(bytes, ctx) {
        Ok(Message::Update(u)) => u,
        other => panic!("not an UPDATE: {other:?}"),
    }
}

/// The UPDATE error that resets the session.
fn update_reset(bytes: &[u8], ctx: &DecodeCtx) -> UpdateError {
    match parse(bytes, ctx) {
        Err(DecodeError::Update(e)) => e,
        other => panic!("not an UPDATE error: {other:?}"),
    }
}

/// (type code, action, subcode) of each RFC 7606 error of an UPDATE.
fn actions(u: &Update) -> Vec<(u8, Action, u8)> {
    u.errors
        .iter()
        .map(|e| (e.type_code, e.action, e.error.subcode))
        .collect()
}

/// Parses an UPDATE announcing 198.51.100.0/24 with `attrs` and checks
/// that it carries exactly the `expected` error, whose NOTIFICATION data
/// (were it sent) is `data`.
fn one_error(attrs: &[&[u8]], ctx: &DecodeCtx, expected: (u8, Action, u8), data: &[u8]) -> Update {
    let u = parsed_update(&update_msg(attrs, &NLRI), ctx);
    assert_eq!(actions(&u), [expected]);
    assert_eq!(u.errors[0].error.data, data);
    let n = Notification::from(&u.errors[0].error);
    assert_eq!(n.code, ErrorCode::UpdateMessage);
    assert_eq!(n.subcode, expected.2);
    assert_eq!(u.nlri.len(), 1, "the NLRI is still reported");
    assert_eq!(u.treat_as_withdraw(), expected.1 == Action::TreatAsWithdraw);
    u
}

/// An OPEN body with the given fixed fields and optional parameters.
fn open_body(
    version: u8,
    my_as: u16,
    hold: u16,
    id: [u8; 4],
    opt_len: u8,
    params: &[u8],
) -> Vec<u8> {
    let mut b = vec![version];
    b.extend_from_slice(&my_as.to_be_bytes());
    b.extend_from_slice(&hold.to_be_bytes());
    b.extend_from_slice(&id);
    b.push(opt_len);
    b.extend_from_slice(params);
    b
}

/// A well-formed OPEN but for `hold`.
fn open_with_hold(hold: u16) -> Vec<u8> {
    msg(1, &open_body(4, 65001, hold, [192, 0, 2, 1], 0, &[]))
}

// ---------------------------------------------------------------------
// Message header errors (RFC 4271 §6.1).

#[test]
fn bad_marker_is_connection_not_synchronized() {
    let mut m = KEEPALIVE;
    m[5] = 0xfe;
    assert_eq!(rejected(&m, &ctx()), (1, 1, vec![]));
    assert_eq!(frame::decode(&m, &ctx()), Err(HeaderError::NotSynchronized));
    // Framing sees it as soon as the bad octet arrives.
    assert_eq!(
        frame::decode(&m[..6], &ctx()),
        Err(HeaderError::NotSynchronized)
    );
}

#[test]
fn length_below_19() {
    let m = msg_with_length(18, 4, &[]);
    assert_eq!(rejected(&m, &ctx()), (1, 2, vec![0x00, 0x12]));
    assert_eq!(
        frame::decode(&m, &ctx()),
        Err(HeaderError::BadLength { length: 18 })
    );
}

#[test]
fn length_above_4096_without_extended_message() {
    // NOTIFICATION Cease with 4076 octets of data: 19 + 2 + 4076 = 4097.
    let mut body = vec![0x06, 0x00];
    body.resize(2 + 4076, 0x61);
    let m = msg(3, &body);
    assert_eq!(m.len(), 4097);
    assert_eq!(rejected(&m, &ctx()), (1, 2, vec![0x10, 0x01]));
    assert_eq!(
        frame::decode(&m, &ctx()),
        Err(HeaderError::BadLength { length: 4097 })
    );

    // RFC 8654: accepted once extended messages are negotiated.
    assert_eq!(frame::decode(&m, &extended()), Ok(Some(4097)));
    match Message::parse(&m, &extended()) {
        Ok(Message::Notification(n)) => {
            assert_eq!(n.code, ErrorCode::Cease);
            assert_eq!(n.data.len(), 4076);
        }
        other => panic!("{other:?}"),
    }
    // Up to 65535: a header alone is enough to know more is coming.
    let head = msg_with_length(65535, 2, &[]);
    assert_eq!(frame::decode(&head, &extended()), Ok(None));

    // And the encoder refuses to build what the peer would reject.
    let n = Message::parse(&m, &extended()).unwrap();
    assert_eq!(
        n.to_bytes(&ctx()),
        Err(EncodeError::TooLong {
            len: 4097,
            max: 4096
        })
    );
    assert_eq!(n.to_bytes(&extended()).unwrap().len(), 4097);
}

#[test]
fn open_and_keepalive_never_exceed_4096() {
    // RFC 8654 §3: not even with extended messages.
    let open = msg(1, &[0u8; 4078]);
    assert_eq!(open.len(), 4097);
    assert_eq!(rejected(&open, &extended()), (1, 2, vec![0x10, 0x01]));
    assert_eq!(
        frame::decode(&open, &extended()),
        Err(HeaderError::BadLength { length: 4097 })
    );
    let keepalive = msg(4, &[0u8; 4078]);
    assert_eq!(rejected(&keepalive, &extended()), (1, 2, vec![0x10, 0x01]));
    assert_eq!(
        frame::decode(&keepalive, &extended()),
        Err(HeaderError::BadLength { length: 4097 })
    );
}

#[test]
fn length_field_not_matching_the_buffer() {
    // Length 19, but 20 octets given.
    let mut long = KEEPALIVE.to_vec();
    long.push(0x00);
    assert_eq!(rejected(&long, &ctx()), (1, 2, vec![0x00, 0x13]));
    // Length 23, but only 19 octets given.
    let short = msg_with_length(23, 5, &[]);
    assert_eq!(rejected(&short, &ctx()), (1, 2, vec![0x00, 0x17]));
    assert_eq!(frame::decode(&short, &ctx()), Ok(None));
    // Fewer octets than a header.
    assert_eq!(rejected(&KEEPALIVE[..10], &ctx()), (1, 2, vec![0x00, 0x0a]));
}

#[test]
fn open_shorter_than_29() {
    // Version, My AS, Hold Time, BGP Identifier; no Opt Parm Len.
    let m = msg(1, &[0x04, 0xfd, 0xe9, 0x00, 0x5a, 0xc0, 0x00, 0x02, 0x01]);
    assert_eq!(m.len(), 28);
    assert_eq!(rejected(&m, &ctx()), (1, 2, vec![0x00, 0x1c]));
}

#[test]
fn update_shorter_than_23() {
    let m = msg(2, &[0x00, 0x00, 0x00]);
    assert_eq!(rejected(&m, &ctx()), (1, 2, vec![0x00, 0x16]));
}

#[test]
fn keepalive_not_19() {
    let m = msg(4, &[0x00]);
    assert_eq!(rejected(&m, &ctx()), (1, 2, vec![0x00, 0x14]));
}

#[test]
fn notification_shorter_than_21() {
    let m = msg(3, &[0x06]);
    assert_eq!(rejected(&m, &ctx()), (1, 2, vec![0x00, 0x14]));
}

#[test]
fn unknown_message_type() {
    assert_eq!(rejected(&msg(6, &[]), &ctx()), (1, 3, vec![0x06]));
    assert_eq!(rejected(&msg(0, &[0x00]), &ctx()), (1, 3, vec![0x00]));
}

// ---------------------------------------------------------------------
// OPEN message errors (RFC 4271 §6.2, RFC 5492, RFC 6286, RFC 7607).

#[test]
fn open_version_3() {
    let m = msg(1, &open_body(3, 65001, 90, [192, 0, 2, 1], 0, &[]));
    // Data: the largest version we support, on 2 octets.
    assert_eq!(rejected(&m, &ctx()), (2, 1, vec![0x00, 0x04]));
}

#[test]
fn open_my_as_0() {
    let m = msg(1, &open_body(4, 0, 90, [192, 0, 2, 1], 0, &[]));
    assert_eq!(rejected(&m, &ctx()), (2, 2, vec![]));
}

#[test]
fn open_four_octet_as_capability_0() {
    let params = [
        0x02, 0x06, // parameter: capabilities, length 6
        0x41, 0x04, // capability 65 (4-octet AS), length 4
        0x00, 0x00, 0x00, 0x00, // AS 0
    ];
    let m = msg(1, &open_body(4, 23456, 90, [192, 0, 2, 1], 8, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 2, vec![]));
}

#[test]
fn open_bgp_identifier_0() {
    let m = msg(1, &open_body(4, 65001, 90, [0, 0, 0, 0], 0, &[]));
    assert_eq!(rejected(&m, &ctx()), (2, 3, vec![]));
}

#[test]
fn open_unsupported_optional_parameter() {
    let params = [
        0x01, 0x02, // parameter type 1 (deprecated authentication), length 2
        0x00, 0x00, // value
    ];
    let m = msg(1, &open_body(4, 65001, 90, [192, 0, 2, 1], 4, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 4, vec![]));
}

#[test]
fn open_hold_time_1_and_2() {
    assert_eq!(rejected(&open_with_hold(1), &ctx()), (2, 6, vec![]));
    assert_eq!(rejected(&open_with_hold(2), &ctx()), (2, 6, vec![]));
    // 0 and 3 are the neighbours that are fine.
    for hold in [0, 3] {
        match Message::parse(&open_with_hold(hold), &ctx()) {
            Ok(Message::Open(o)) => assert_eq!(o.hold_time.secs(), hold),
            other => panic!("hold {hold}: {other:?}"),
        }
    }
}

#[test]
fn open_malformed_capability_lengths() {
    let cases: [(&str, &[u8]); 8] = [
        ("multiprotocol of 3", &[0x01, 0x03, 0x00, 0x01, 0x01]),
        ("4-octet AS of 2", &[0x41, 0x02, 0xfd, 0xe9]),
        ("route refresh of 1", &[0x02, 0x01, 0x00]),
        ("extended message of 1", &[0x06, 0x01, 0x00]),
        ("graceful restart of 3", &[0x40, 0x03, 0x00, 0x78, 0x00]),
        ("ADD-PATH of 5", &[0x45, 0x05, 0x00, 0x01, 0x01, 0x03, 0x00]),
        (
            "extended next hop of 4",
            &[0x05, 0x04, 0x00, 0x01, 0x00, 0x01],
        ),
        ("capability header cut", &[0x41]),
    ];
    for (what, cap) in cases {
        let mut params = vec![0x02, u8::try_from(cap.len()).unwrap()];
        params.extend_from_slice(cap);
        let opt_len = u8::try_from(params.len()).unwrap();
        let m = msg(
            1,
            &open_body(4, 65001, 90, [192, 0, 2, 1], opt_len, &params),
        );
        assert_eq!(rejected(&m, &ctx()), (2, 0, vec![]), "{what}");
    }
}

#[test]
fn open_capability_overruns_its_parameter() {
    let params = [
        0x02, 0x04, // parameter: capabilities, length 4
        0x41, 0x04, // capability 65, length 4: only 2 octets left
        0xfd, 0xe9,
    ];
    let m = msg(1, &open_body(4, 65001, 90, [192, 0, 2, 1], 6, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 0, vec![]));
}

#[test]
fn open_optional_parameter_overruns() {
    // A parameter longer than the optional parameters.
    let params = [
        0x02, 0x08, // parameter: capabilities, length 8: only 4 follow
        0x02, 0x00, 0x46, 0x00,
    ];
    let m = msg(1, &open_body(4, 65001, 90, [192, 0, 2, 1], 6, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 0, vec![]));

    // Optional parameters longer than the message.
    let params = [0x02, 0x02, 0x02, 0x00];
    let m = msg(1, &open_body(4, 65001, 90, [192, 0, 2, 1], 20, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 0, vec![]));

    // Optional parameters shorter than what follows them.
    let m = msg(1, &open_body(4, 65001, 90, [192, 0, 2, 1], 0, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 0, vec![]));

    // RFC 9072: the 2-octet extended length overruns the message.
    let params = [
        0xff, // non-ext type 255: extended format
        0x00, 0x40, // extended length 64: only 4 follow
        0x02, 0x00, 0x01, 0x02,
    ];
    let m = msg(1, &open_body(4, 65001, 90, [192, 0, 2, 1], 255, &params));
    assert_eq!(rejected(&m, &ctx()), (2, 0, vec![]));
}

// ---------------------------------------------------------------------
// UPDATE errors that reset the session (RFC 4271 §6.3, RFC 7606 §3, §5.3).

#[test]
fn update_withdrawn_length_overrun() {
    let body = [
        0x00, 0x05, // withdrawn routes length 5: only 4 octets left in all
        0x08, 0x0a, // 10.0.0.0/8
        0x00, 0x00, // (would be) total path attribute length
    ];
    let m = msg(2, &body);
    assert_eq!(rejected(&m, &ctx()), (3, 1, vec![]));
    assert_eq!(update_reset(&m, &ctx()).offset, 19);
}

#[test]
fn update_attribute_length_overrun() {
    let body = [
        0x00, 0x00, // withdrawn routes length 0
        0x00, 0x0a, // total path attribute length 10: only 4 follow
        0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
    ];
    let m = msg(2, &body);
    assert_eq!(rejected(&m, &ctx()), (3, 1, vec![]));
    assert_eq!(update_reset(&m, &ctx()).offset, 21);
}

#[test]
fn update_duplicate_attribute_is_discarded() {
    let origin_egp = [
        0x40, 0x01, 0x01, // ORIGIN again
        0x01, // EGP
    ];
    let m = update_msg(
        &[&ORIGIN_IGP, &AS_PATH_65001, &origin_egp, &NEXT_HOP],
        &NLRI,
    );
    let u = parsed_update(&m, &ctx());
    // RFC 7606 §3 (g): all but the first are discarded.
    assert_eq!(actions(&u), [(1, Action::Discard, 1)]);
    assert!(!u.treat_as_withdraw());
    assert_eq!(
        u.attribute(AttrType::Origin),
        Some(&AttrValue::Origin(Origin::Igp))
    );
    assert_eq!(u.attributes.len(), 3);
    assert_eq!(u.errors[0].error.offset, 19 + 4 + 4 + 9);
}

#[test]
fn update_duplicate_mp_reach_resets() {
    let m = update_msg(
        &[&MP_REACH_IPV6, &MP_REACH_IPV6, &ORIGIN_IGP, &AS_PATH_65001],
        &[],
    );
    assert_eq!(rejected(&m, &ctx()), (3, 1, vec![]));
    let unreach = [
        0x80, 0x0f, 0x03, // MP_UNREACH_NLRI, length 3
        0x00, 0x02, 0x01, // AFI 2, SAFI 1, nothing withdrawn
    ];
    let m = update_msg(&[&unreach, &unreach], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 1, vec![]));
}

#[test]
fn update_unrecognized_well_known_attribute() {
    let unknown = [
        0x40, 0x63, 0x01, // flags T (well-known), type 99, length 1
        0x00,
    ];
    let m = update_msg(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &unknown], &NLRI);
    // Data: the whole unrecognized attribute.
    assert_eq!(rejected(&m, &ctx()), (3, 2, unknown.to_vec()));
}

#[test]
fn update_mp_reach_truncated() {
    let mp = [
        0x80, 0x0e, 0x08, // MP_REACH_NLRI, length 8
        0x00, 0x02, 0x01, // AFI 2, SAFI 1
        0x10, // next hop length 16: only 4 follow
        0x20, 0x01, 0x0d, 0xb8,
    ];
    let m = update_msg(&[&mp, &ORIGIN_IGP, &AS_PATH_65001], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 9, mp.to_vec()));
}

#[test]
fn update_mp_reach_prefix_length_33() {
    let mp = [
        0x80, 0x0e, 0x0f, // MP_REACH_NLRI, length 15
        0x00, 0x01, 0x01, // AFI 1, SAFI 1
        0x04, // next hop length 4
        0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
        0x00, // reserved
        0x21, 0xc6, 0x33, 0x64, 0x07, 0x00, // prefix length 33
    ];
    let m = update_msg(&[&mp, &ORIGIN_IGP, &AS_PATH_65001], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 9, mp.to_vec()));

    let mp6 = [
        0x80, 0x0e, 0x16, // MP_REACH_NLRI, length 22
        0x00, 0x02, 0x01, // AFI 2, SAFI 1
        0x10, // next hop length 16
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // 2001:db8::1 (1-8)
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // (9-16)
        0x00, // reserved
        0x81, // prefix length 129
    ];
    let m = update_msg(&[&mp6, &ORIGIN_IGP, &AS_PATH_65001], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 9, mp6.to_vec()));
}

#[test]
fn update_mp_unreach_truncated() {
    let mp = [
        0x80, 0x0f, 0x02, // MP_UNREACH_NLRI, length 2: no SAFI
        0x00, 0x02,
    ];
    let m = update_msg(&[&mp], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 9, mp.to_vec()));
    let mp = [
        0x80, 0x0f, 0x05, // MP_UNREACH_NLRI, length 5
        0x00, 0x02, 0x01, // AFI 2, SAFI 1
        0x40, 0x20, // a /64 with one octet of its eight
    ];
    let m = update_msg(&[&mp], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 9, mp.to_vec()));
}

#[test]
fn update_mp_reach_with_transitive_flag_resets() {
    let mut mp = MP_REACH_IPV6;
    mp[0] = 0xc0; // optional transitive: MP_REACH_NLRI is non-transitive
    let m = update_msg(&[&mp, &ORIGIN_IGP, &AS_PATH_65001], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 4, mp.to_vec()));
}

#[test]
fn update_nlri_prefix_length_33() {
    let nlri = [0x21, 0xc6, 0x33, 0x64, 0x07, 0x00]; // /33
    let m = update_msg(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP], &nlri);
    assert_eq!(rejected(&m, &ctx()), (3, 10, vec![]));
}

#[test]
fn update_nlri_truncated() {
    let nlri = [0x18, 0xc6, 0x33]; // a /24 with two of its three octets
    let m = update_msg(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP], &nlri);
    assert_eq!(rejected(&m, &ctx()), (3, 10, vec![]));
    // ADD-PATH: a path identifier cut short.
    let add_path = DecodeCtx {
        add_path: bgp::wire::AddPathSet::of(&[bgp::wire::Family::Ipv4Unicast]),
        ..ctx()
    };
    let nlri = [0x00, 0x00, 0x01];
    let m = update_msg(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP], &nlri);
    assert_eq!(rejected(&m, &add_path), (3, 10, vec![]));
}

#[test]
fn update_withdrawn_prefix_length_33() {
    let body = [
        0x00, 0x05, // withdrawn routes length 5
        0x21, 0x0a, 0x00, 0x00, 0x00, // prefix length 33
        0x00, 0x00, // total path attribute length 0
    ];
    assert_eq!(rejected(&msg(2, &body), &ctx()), (3, 10, vec![]));
}

/// RFC 7606 §4 and the documented policy of `attr::parse_all`: when an
/// attribute overruns the attribute area, treat-as-withdraw is only safe
/// once the MP attributes were found; otherwise the session is reset.
#[test]
fn update_attribute_header_overrun_without_mp_resets() {
    let overrun = [
        0x40, 0x02, 0x0a, // AS_PATH, length 10: only 6 octets left
        0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9,
    ];
    let m = update_msg(&[&ORIGIN_IGP, &overrun], &[]);
    assert_eq!(rejected(&m, &ctx()), (3, 1, vec![]));
    assert_eq!(update_reset(&m, &ctx()).offset, 23 + 4);
}

#[test]
fn update_attribute_header_overrun_after_mp_is_treat_as_withdraw() {
    let overrun = [
        0x40, 0x02, 0x0a, // AS_PATH, length 10: only 6 octets left
        0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9,
    ];
    let m = update_msg(&[&MP_REACH_IPV6, &ORIGIN_IGP, &overrun], &[]);
    let u = parsed_update(&m, &ctx());
    let first = &u.errors[0];
    assert_eq!(
        (first.type_code, first.action, first.error.subcode),
        (0, Action::TreatAsWithdraw, 1)
    );
    assert_eq!(first.error.offset, 23 + MP_REACH_IPV6.len() + 4);
    assert!(u.treat_as_withdraw());
    assert!(
        u.errors.iter().all(|e| e.action == Action::TreatAsWithdraw),
        "{:?}",
        u.errors
    );
    // The NLRI to withdraw were found.
    match u.mp_reach() {
        Some(MpReach::Ipv6Unicast { nlri, .. }) => assert_eq!(nlri.len(), 1),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------
// UPDATE errors handled without a reset (RFC 7606 §3 (d), §7).

#[test]
fn missing_origin() {
    one_error(
        &[&AS_PATH_65001, &NEXT_HOP],
        &ctx(),
        (1, Action::TreatAsWithdraw, 3),
        &[0x01],
    );
}

#[test]
fn missing_as_path() {
    one_error(
        &[&ORIGIN_IGP, &NEXT_HOP],
        &ctx(),
        (2, Action::TreatAsWithdraw, 3),
        &[0x02],
    );
}

#[test]
fn missing_next_hop() {
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001],
        &ctx(),
        (3, Action::TreatAsWithdraw, 3),
        &[0x03],
    );
}

#[test]
fn missing_attributes_depend_on_what_is_announced() {
    // All three missing.
    let u = parsed_update(&update_msg(&[], &NLRI), &ctx());
    let taw = Action::TreatAsWithdraw;
    assert_eq!(actions(&u), [(1, taw, 3), (2, taw, 3), (3, taw, 3)]);
    // MP_REACH_NLRI only: NEXT_HOP is not needed (RFC 4760 §3).
    let u = parsed_update(&update_msg(&[&MP_REACH_IPV6, &AS_PATH_65001], &[]), &ctx());
    assert_eq!(actions(&u), [(1, taw, 3)]);
    // Withdrawals need nothing.
    let u = parsed_update(&msg(2, &[0x00, 0x02, 0x08, 0x0a, 0x00, 0x00]), &ctx());
    assert_eq!(actions(&u), []);
    let unreach = [0x80, 0x0f, 0x07, 0x00, 0x01, 0x01, 0x18, 0xc6, 0x33, 0x64];
    let u = parsed_update(&update_msg(&[&unreach], &[]), &ctx());
    assert_eq!(actions(&u), []);
}

#[test]
fn origin_flags_error() {
    let origin = [
        0xc0, 0x01, 0x01, // flags O T: ORIGIN is well-known
        0x00,
    ];
    one_error(
        &[&origin, &AS_PATH_65001, &NEXT_HOP],
        &ctx(),
        (1, Action::TreatAsWithdraw, 4),
        &origin,
    );
}

#[test]
fn aggregator_flags_error_is_discarded() {
    let aggregator = [
        0x40, 0x07, 0x08, // flags T: AGGREGATOR is optional transitive
        0x00, 0x00, 0xfd, 0xe9, 0xc0, 0x00, 0x02, 0x09,
    ];
    let u = one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &aggregator],
        &ctx(),
        (7, Action::Discard, 4),
        &aggregator,
    );
    assert_eq!(u.attribute(AttrType::Aggregator), None);
}

#[test]
fn origin_length_2() {
    let origin = [0x40, 0x01, 0x02, 0x00, 0x00]; // ORIGIN, length 2
    let u = one_error(
        &[&origin, &AS_PATH_65001, &NEXT_HOP],
        &ctx(),
        (1, Action::TreatAsWithdraw, 5),
        &origin,
    );
    assert_eq!(u.errors[0].error.offset, 23);
}

#[test]
fn origin_value_3() {
    let origin = [0x40, 0x01, 0x01, 0x03]; // ORIGIN 3: undefined
    one_error(
        &[&origin, &AS_PATH_65001, &NEXT_HOP],
        &ctx(),
        (1, Action::TreatAsWithdraw, 6),
        &origin,
    );
}

#[test]
fn next_hop_not_a_host_address() {
    for addr in [
        [0, 0, 0, 0],
        [224, 0, 0, 1],
        [255, 255, 255, 255],
        [240, 0, 0, 1],
    ] {
        let next_hop = [0x40, 0x03, 0x04, addr[0], addr[1], addr[2], addr[3]];
        let u = one_error(
            &[&ORIGIN_IGP, &AS_PATH_65001, &next_hop],
            &ctx(),
            (3, Action::TreatAsWithdraw, 8),
            &next_hop,
        );
        assert_eq!(u.errors[0].error.offset, 23 + 4 + 9, "{addr:?}");
    }
}

#[test]
fn next_hop_length_5() {
    let next_hop = [0x40, 0x03, 0x05, 0xc0, 0x00, 0x02, 0x01, 0x00];
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &next_hop],
        &ctx(),
        (3, Action::TreatAsWithdraw, 5),
        &next_hop,
    );
}

#[test]
fn as_path_malformed_segments() {
    let cases: [(&str, &[u8]); 4] = [
        (
            "segment type 5",
            &[0x40, 0x02, 0x06, 0x05, 0x01, 0x00, 0x00, 0xfd, 0xe9],
        ),
        (
            "segment type 0",
            &[0x40, 0x02, 0x06, 0x00, 0x01, 0x00, 0x00, 0xfd, 0xe9],
        ),
        ("zero-length segment", &[0x40, 0x02, 0x02, 0x02, 0x00]),
        (
            "segment of 2 ASes with room for 1",
            &[0x40, 0x02, 0x06, 0x02, 0x02, 0x00, 0x00, 0xfd, 0xe9],
        ),
    ];
    for (what, as_path) in cases {
        let u = parsed_update(
            &update_msg(&[&ORIGIN_IGP, as_path, &NEXT_HOP], &NLRI),
            &ctx(),
        );
        assert_eq!(actions(&u), [(2, Action::TreatAsWithdraw, 11)], "{what}");
        assert_eq!(u.errors[0].error.data, as_path, "{what}");
    }
}

#[test]
fn as_path_two_octet_encoding_on_a_four_octet_session() {
    // 65001 65002 in 2 octets each: a 4-octet reader runs out.
    let as_path = [0x40, 0x02, 0x06, 0x02, 0x02, 0xfd, 0xe9, 0xfd, 0xea];
    one_error(
        &[&ORIGIN_IGP, &as_path, &NEXT_HOP],
        &ctx(),
        (2, Action::TreatAsWithdraw, 11),
        &as_path,
    );
}

#[test]
fn med_bad_length() {
    let med = [0x80, 0x04, 0x03, 0x00, 0x00, 0x64]; // MULTI_EXIT_DISC, length 3
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &med],
        &ctx(),
        (4, Action::TreatAsWithdraw, 5),
        &med,
    );
}

#[test]
fn local_pref_bad_length() {
    let local_pref = [0x40, 0x05, 0x05, 0x00, 0x00, 0x00, 0x00, 0x64]; // length 5
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &local_pref],
        &ctx(),
        (5, Action::TreatAsWithdraw, 5),
        &local_pref,
    );
}

#[test]
fn atomic_aggregate_length_1() {
    let atomic = [0x40, 0x06, 0x01, 0x00]; // ATOMIC_AGGREGATE, length 1
    let u = one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &atomic],
        &ctx(),
        (6, Action::Discard, 5),
        &atomic,
    );
    assert_eq!(u.attribute(AttrType::AtomicAggregate), None);
    assert_eq!(u.attributes.len(), 3, "the rest of the UPDATE stands");
}

#[test]
fn aggregator_bad_length() {
    let two_octet = DecodeCtx {
        as4: false,
        ..ctx()
    };
    let as_path_2 = [0x40, 0x02, 0x04, 0x02, 0x01, 0xfd, 0xe9];
    let cases: [(&str, DecodeCtx, &[u8], &[u8]); 3] = [
        (
            "7 octets, 4-octet session",
            ctx(),
            &AS_PATH_65001,
            &[0xc0, 0x07, 0x07, 0x00, 0x00, 0xfd, 0xe9, 0xc0, 0x00, 0x02],
        ),
        (
            "6 octets, 4-octet session",
            ctx(),
            &AS_PATH_65001,
            &[0xc0, 0x07, 0x06, 0xfd, 0xe9, 0xc0, 0x00, 0x02, 0x09],
        ),
        (
            "8 octets, 2-octet session",
            two_octet,
            &as_path_2,
            &[
                0xc0, 0x07, 0x08, 0x00, 0x00, 0xfd, 0xe9, 0xc0, 0x00, 0x02, 0x09,
            ],
        ),
    ];
    for (what, ctx, as_path, aggregator) in cases {
        let u = parsed_update(
            &update_msg(&[&ORIGIN_IGP, as_path, &NEXT_HOP, aggregator], &NLRI),
            &ctx,
        );
        assert_eq!(actions(&u), [(7, Action::Discard, 5)], "{what}");
        assert_eq!(u.errors[0].error.data, aggregator, "{what}");
        assert_eq!(u.attribute(AttrType::Aggregator), None, "{what}");
    }
}

#[test]
fn as4_path_malformed() {
    let as4_path = [0xc0, 0x11, 0x02, 0x02, 0x00]; // AS4_PATH, zero-length segment
    let u = one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &as4_path],
        &ctx(),
        (17, Action::Discard, 9),
        &as4_path,
    );
    assert_eq!(u.attribute(AttrType::As4Path), None);
}

#[test]
fn as4_aggregator_bad_length() {
    let as4_aggregator = [0xc0, 0x12, 0x06, 0xfd, 0xe9, 0xc0, 0x00, 0x02, 0x09];
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &as4_aggregator],
        &ctx(),
        (18, Action::Discard, 5),
        &as4_aggregator,
    );
}

#[test]
fn communities_length_0_and_5() {
    let empty = [0xc0, 0x08, 0x00]; // COMMUNITIES, length 0
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &empty],
        &ctx(),
        (8, Action::TreatAsWithdraw, 5),
        &empty,
    );
    let five = [0xc0, 0x08, 0x05, 0xfd, 0xe9, 0x00, 0x64, 0x00]; // length 5
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &five],
        &ctx(),
        (8, Action::TreatAsWithdraw, 5),
        &five,
    );
}

#[test]
fn extended_communities_length_7() {
    let ext = [0xc0, 0x10, 0x07, 0x00, 0x02, 0xfd, 0xe9, 0x00, 0x00, 0x00];
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &ext],
        &ctx(),
        (16, Action::TreatAsWithdraw, 5),
        &ext,
    );
}

#[test]
fn ipv6_extended_communities_length_19() {
    let mut ext = vec![0xc0, 0x19, 0x13]; // IPv6 ext. communities, length 19
    ext.extend_from_slice(&[0x00; 19]);
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &ext],
        &ctx(),
        (25, Action::TreatAsWithdraw, 5),
        &ext,
    );
}

#[test]
fn large_communities_length_13() {
    let mut large = vec![0xc0, 0x20, 0x0d]; // LARGE_COMMUNITY, length 13
    large.extend_from_slice(&[0x00; 13]);
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &large],
        &ctx(),
        (32, Action::TreatAsWithdraw, 5),
        &large,
    );
}

#[test]
fn originator_id_and_cluster_list_bad_length() {
    let originator = [0x80, 0x09, 0x03, 0xc0, 0x00, 0x02]; // ORIGINATOR_ID, length 3
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &originator],
        &ctx(),
        (9, Action::TreatAsWithdraw, 5),
        &originator,
    );
    let cluster = [0x80, 0x0a, 0x06, 0xc0, 0x00, 0x02, 0x0b, 0xc0, 0x00]; // length 6
    one_error(
        &[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP, &cluster],
        &ctx(),
        (10, Action::TreatAsWithdraw, 5),
        &cluster,
    );
}

/// RFC 7606 §7.11: a next hop of the wrong length still lets the NLRI be
/// located, so the UPDATE is treated as withdrawn; the attribute is kept
/// raw.
#[test]
fn mp_reach_ipv6_with_next_hop_length_4() {
    let mp = [
        0x80, 0x0e, 0x0e, // MP_REACH_NLRI, length 14
        0x00, 0x02, 0x01, // AFI 2 (IPv6), SAFI 1
        0x04, // next hop length 4: invalid for IPv6
        0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
        0x00, // reserved
        0x20, 0x20, 0x01, 0x0d, 0xb8, // 2001:db8::/32
    ];
    let m = update_msg(&[&mp, &ORIGIN_IGP, &AS_PATH_65001], &[]);
    let u = parsed_update(&m, &ctx());
    assert_eq!(actions(&u), [(14, Action::TreatAsWithdraw, 9)]);
    assert_eq!(u.errors[0].error.data, &mp[..]);
    assert!(u.treat_as_withdraw());
    assert_eq!(
        u.mp_reach(),
        Some(&MpReach::Other(RawMp {
            afi: Afi::Ipv6,
            safi: Safi::Unicast,
            next_hop: Bytes::from_static(&[0xc0, 0x00, 0x02, 0x01]),
            nlri: Bytes::from_static(&[0x20, 0x20, 0x01, 0x0d, 0xb8]),
        }))
    );
    let j = json::message(&Message::Update(u));
    assert_eq!(j["errors"][0]["action"], "treat-as-withdraw");
    assert_eq!(j["errors"][0]["type_code"], 14);
    assert_eq!(j["errors"][0]["subcode"], 9);
    assert_eq!(j["attributes"]["mp_reach"]["next_hop_raw"], "c0000201");
}

#[test]
fn mp_reach_ipv4_with_next_hop_length_5() {
    let mp = [
        0x80, 0x0e, 0x0e, // MP_REACH_NLRI, length 14
        0x00, 0x01, 0x01, // AFI 1 (IPv4), SAFI 1
        0x05, // next hop length 5: neither 4, 16 nor 32
        0xc0, 0x00, 0x02, 0x01, 0x00, // 192.0.2.1 and one octet too many
        0x00, // reserved
        0x18, 0xc6, 0x33, 0x64, // 198.51.100.0/24
    ];
    let m = update_msg(&[&mp, &ORIGIN_IGP, &AS_PATH_65001], &[]);
    let u = parsed_update(&m, &ctx());
    assert_eq!(actions(&u), [(14, Action::TreatAsWithdraw, 9)]);
    assert_eq!(u.errors[0].error.offset, 23);
    match u.mp_reach() {
        Some(MpReach::Other(raw)) => {
            assert_eq!((raw.afi, raw.safi), (Afi::Ipv4, Safi::Unicast));
            assert_eq!(raw.nlri, &[0x18, 0xc6, 0x33, 0x64][..]);
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------
// ROUTE-REFRESH (RFC 7313 §5).

#[test]
fn route_refresh_length_not_23() {
    let long = msg(5, &[0x00, 0x01, 0x00, 0x01, 0x00]);
    assert_eq!(long.len(), 24);
    // Data: the complete offending message.
    assert_eq!(rejected(&long, &ctx()), (7, 1, long.clone()));
    let short = msg(5, &[0x00, 0x01, 0x00]);
    assert_eq!(rejected(&short, &ctx()), (7, 1, short.clone()));
}

#[test]
fn route_refresh_unknown_subtype_is_parsed() {
    let m = msg(5, &[0x00, 0x01, 0x07, 0x01]); // AFI 1, subtype 7, SAFI 1
    assert_eq!(
        Message::parse(&m, &ctx()),
        Ok(Message::RouteRefresh(RouteRefresh {
            afi: Afi::Ipv4,
            subtype: RefreshSubtype::Unknown(7),
            safi: Safi::Unicast,
        }))
    );
}

// ---------------------------------------------------------------------
// Framing and the JSON form of errors.

#[test]
fn garbage_after_a_message() {
    let mut buf = KEEPALIVE.to_vec();
    buf.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(frame::decode(&buf, &ctx()), Ok(Some(19)));
    assert_eq!(Message::parse(&buf[..19], &ctx()), Ok(Message::Keepalive));
    assert_eq!(
        frame::decode(&buf[19..], &ctx()),
        Err(HeaderError::NotSynchronized)
    );
    // The whole buffer is not one message.
    assert_eq!(rejected(&buf, &ctx()), (1, 2, vec![0x00, 0x13]));
}

#[test]
fn truncated_message_needs_more() {
    let m = update_msg(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP], &NLRI);
    for n in 0..m.len() {
        assert_eq!(frame::decode(&m[..n], &ctx()), Ok(None), "{n} octets");
        assert!(frame::needed(&m[..n]) >= 1, "{n} octets");
    }
    assert_eq!(frame::needed(&m[..5]), 14, "the rest of the header");
    assert_eq!(frame::needed(&m[..20]), m.len() - 20);
    assert_eq!(frame::decode(&m, &ctx()), Ok(Some(m.len())));
    // Followed by part of the next message: still only the first.
    let mut two = m.clone();
    two.extend_from_slice(&KEEPALIVE[..7]);
    assert_eq!(frame::decode(&two, &ctx()), Ok(Some(m.len())));
}

#[test]
fn error_json() {
    let m = msg(1, &open_body(3, 65001, 90, [192, 0, 2, 1], 0, &[]));
    let err = Message::parse(&m, &ctx()).unwrap_err();
    let j = json::error(&err);
    assert_eq!(j["error"]["code"], 2);
    assert_eq!(j["error"]["subcode"], 1);
    assert_eq!(
        j["error"]["name"],
        "OPEN Message Error / Unsupported Version Number"
    );
    assert_eq!(j["error"]["data"], "0004");
}

#[test]
fn next_hop_is_kept_when_valid() {
    // The positive twin of the NEXT_HOP cases: a plain host address.
    let u = parsed_update(
        &update_msg(&[&ORIGIN_IGP, &AS_PATH_65001, &NEXT_HOP], &NLRI),
        &ctx(),
    );
    assert_eq!(actions(&u), []);
    assert_eq!(
        u.attribute(AttrType::NextHop),
        Some(&AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)))
    );
}

/// RFC 4271 §4.3: Partial is 0 on well-known attributes; a sender that sets
/// it anyway is not in error (RFC 7606 only checks Optional/Transitive), and
/// we keep the canonical flags so that re-emitting is idempotent.
#[test]
fn partial_bit_on_well_known_attribute_is_ignored() {
    use bgp::wire::{AttrType, AttrValue, DecodeCtx, Message, Origin};
    let msg: [u8; 52] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, // marker
        0x00, 0x34, // length 52
        0x02, // UPDATE
        0x00, 0x00, // withdrawn routes length 0
        0x00, 0x14, // total path attribute length 20
        0x60, 0x01, 0x01,
        0x00, // ORIGIN IGP, flags T|P (Partial set on a well-known attribute)
        0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfb, 0xf5, // AS_PATH sequence [64501]
        0x40, 0x03, 0x04, 0xc0, 0x00, 0x02, 0x01, // NEXT_HOP 192.0.2.1
        0x18, 0xc6, 0x33, 0x64, // NLRI 198.51.100.0/24
        0x20, 0xc6, 0x33, 0x64, 0x01, // NLRI 198.51.100.1/32
    ];
    let ctx = DecodeCtx::default();
    let Message::Update(u) = Message::parse(&msg, &ctx).unwrap() else {
        panic!("not an UPDATE")
    };
    assert!(u.errors.is_empty(), "{:?}", u.errors);
    assert_eq!(
        u.attribute(AttrType::Origin),
        Some(&AttrValue::Origin(Origin::Igp))
    );
    assert_eq!(
        u.attributes[0].flags.0, 0x40,
        "Partial dropped from the kept flags"
    );
    let again = Message::Update(u.clone()).to_bytes(&ctx).unwrap();
    assert_eq!(again[23], 0x40);
    assert_eq!(Message::parse(&again, &ctx).unwrap(), Message::Update(u));
}
