//! Golden (bytes, value) pairs for NOTIFICATION (RFC 4271 §4.5), with the
//! Cease subcodes of RFC 4486 and the Shutdown Communication of RFC 9003.

mod common;

use bgp::wire::{DecodeCtx, ErrorCode, Message, Notification, json};
use bytes::Bytes;
use common::assert_golden;

/// Cease / Administrative Shutdown with a Shutdown Communication.
const CEASE_SHUTDOWN: [u8; 33] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x21, // length: 33
    0x03, // type: NOTIFICATION
    0x06, // error code 6: Cease
    0x02, // subcode 2: Administrative Shutdown
    0x0b, // shutdown communication length: 11
    b'm', b'a', b'i', b'n', b't', b'e', b'n', b'a', b'n', b'c', b'e', // "maintenance"
];

/// Cease / Administrative Reset with a UTF-8 (non-ASCII) communication.
const CEASE_RESET_UTF8: [u8; 27] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x1b, // length: 27
    0x03, // type: NOTIFICATION
    0x06, // error code 6: Cease
    0x04, // subcode 4: Administrative Reset
    0x05, // shutdown communication length: 5
    b'c', b'a', b'f', 0xc3, 0xa9, // "café" (é is 0xc3 0xa9 in UTF-8)
];

/// Cease / Administrative Shutdown whose communication length overruns
/// the data: still a valid NOTIFICATION (RFC 9003 §4).
const CEASE_SHUTDOWN_BAD_LENGTH: [u8; 27] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x1b, // length: 27
    0x03, // type: NOTIFICATION
    0x06, // error code 6: Cease
    0x02, // subcode 2: Administrative Shutdown
    0x10, // shutdown communication length: 16, but only 5 follow
    b's', b'h', b'o', b'r', b't', // "short"
];

/// Hold Timer Expired, no data.
const HOLD_TIMER_EXPIRED: [u8; 21] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x15, // length: 21
    0x03, // type: NOTIFICATION
    0x04, // error code 4: Hold Timer Expired
    0x00, // subcode 0
];

/// UPDATE Message Error / Missing Well-known Attribute, data = type code.
const UPDATE_MISSING_ORIGIN: [u8; 22] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x16, // length: 22
    0x03, // type: NOTIFICATION
    0x03, // error code 3: UPDATE Message Error
    0x03, // subcode 3: Missing Well-known Attribute
    0x01, // data: type code 1 (ORIGIN)
];

/// OPEN Message Error / Unsupported Version Number, data = version 4.
const OPEN_BAD_VERSION: [u8; 23] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x17, // length: 23
    0x03, // type: NOTIFICATION
    0x02, // error code 2: OPEN Message Error
    0x01, // subcode 1: Unsupported Version Number
    0x00, 0x04, // data: largest supported version, 4
];

/// Finite State Machine Error / unexpected message in OpenSent (RFC 6608).
const FSM_ERROR: [u8; 21] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x15, // length: 21
    0x03, // type: NOTIFICATION
    0x05, // error code 5: Finite State Machine Error
    0x01, // subcode 1: Receive Unexpected Message in OpenSent State
];

/// ROUTE-REFRESH Message Error / Invalid Message Length, data = the whole
/// offending ROUTE-REFRESH (RFC 7313 §5).
const ROUTE_REFRESH_ERROR: [u8; 43] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x2b, // length: 43
    0x03, // type: NOTIFICATION
    0x07, // error code 7: ROUTE-REFRESH Message Error
    0x01, // subcode 1: Invalid Message Length
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // data: marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // data: marker (octets 9-16)
    0x00, 0x16, // data: length 22
    0x05, // data: type ROUTE-REFRESH
    0x00, 0x01, 0x00, // data: AFI 1, subtype 0 (SAFI missing)
];

/// An error code without a name in the registry still round-trips.
const UNKNOWN_CODE: [u8; 22] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x16, // length: 22
    0x03, // type: NOTIFICATION
    0x09, // error code 9: not assigned
    0x01, // subcode 1
    0xff, // data
];

fn notification(code: ErrorCode, subcode: u8, data: &'static [u8]) -> Message {
    Message::Notification(Notification {
        code,
        subcode,
        data: Bytes::from_static(data),
    })
}

fn notification_of(msg: &Message) -> &Notification {
    match msg {
        Message::Notification(n) => n,
        other => panic!("not a NOTIFICATION: {other:?}"),
    }
}

#[test]
fn cease_administrative_shutdown_with_message() {
    let expected = notification(ErrorCode::Cease, 2, b"\x0bmaintenance");
    let msg = assert_golden(&CEASE_SHUTDOWN, &expected, &DecodeCtx::default());
    let n = notification_of(&msg);
    assert_eq!(n, &Notification::administrative_shutdown("maintenance"));
    assert_eq!(n.shutdown_message(), Some(Ok("maintenance")));
    assert_eq!(n.code_name(), "Cease");
    assert_eq!(n.subcode_name(), "Administrative Shutdown");

    let j = json::message(&msg);
    assert_eq!(j["type"], "NOTIFICATION");
    assert_eq!(j["code"], 6);
    assert_eq!(j["subcode"], 2);
    assert_eq!(j["code_name"], "Cease");
    assert_eq!(j["subcode_name"], "Administrative Shutdown");
    assert_eq!(j["data"], "0b6d61696e74656e616e6365");
    assert_eq!(j["message"], "maintenance");
}

#[test]
fn cease_administrative_reset_with_utf8_message() {
    let expected = notification(ErrorCode::Cease, 4, b"\x05caf\xc3\xa9");
    let msg = assert_golden(&CEASE_RESET_UTF8, &expected, &DecodeCtx::default());
    let n = notification_of(&msg);
    assert_eq!(n, &Notification::administrative_reset("café"));
    assert_eq!(n.shutdown_message(), Some(Ok("café")));
    assert_eq!(json::message(&msg)["message"], "café");
}

#[test]
fn cease_with_overlong_communication_is_kept() {
    let expected = notification(ErrorCode::Cease, 2, b"\x10short");
    let msg = assert_golden(&CEASE_SHUTDOWN_BAD_LENGTH, &expected, &DecodeCtx::default());
    assert_eq!(notification_of(&msg).shutdown_message(), Some(Err(())));
    let j = json::message(&msg);
    assert_eq!(j.get("message"), None);
    assert_eq!(j["data"], "1073686f7274");
}

#[test]
fn hold_timer_expired() {
    let expected = notification(ErrorCode::HoldTimerExpired, 0, b"");
    let msg = assert_golden(&HOLD_TIMER_EXPIRED, &expected, &DecodeCtx::default());
    let n = notification_of(&msg);
    assert_eq!(n.shutdown_message(), None);
    assert_eq!(n.code_name(), "Hold Timer Expired");
    let j = json::message(&msg);
    assert_eq!(j["code"], 4);
    assert_eq!(j["data"], "");
}

#[test]
fn update_error_missing_well_known_attribute() {
    let expected = notification(ErrorCode::UpdateMessage, 3, &[0x01]);
    let msg = assert_golden(&UPDATE_MISSING_ORIGIN, &expected, &DecodeCtx::default());
    let n = notification_of(&msg);
    assert_eq!(n.code_name(), "UPDATE Message Error");
    assert_eq!(n.subcode_name(), "Missing Well-known Attribute");
    assert_eq!(json::message(&msg)["data"], "01");
}

#[test]
fn open_error_unsupported_version() {
    let expected = notification(ErrorCode::OpenMessage, 1, &[0x00, 0x04]);
    let msg = assert_golden(&OPEN_BAD_VERSION, &expected, &DecodeCtx::default());
    assert_eq!(
        notification_of(&msg).subcode_name(),
        "Unsupported Version Number"
    );
}

#[test]
fn fsm_error() {
    let expected = notification(ErrorCode::Fsm, 1, b"");
    let msg = assert_golden(&FSM_ERROR, &expected, &DecodeCtx::default());
    assert_eq!(
        notification_of(&msg).subcode_name(),
        "Receive Unexpected Message in OpenSent State"
    );
}

#[test]
fn route_refresh_error_carries_the_message() {
    let expected = Message::Notification(Notification {
        code: ErrorCode::RouteRefresh,
        subcode: 1,
        data: Bytes::copy_from_slice(&ROUTE_REFRESH_ERROR[21..]),
    });
    let msg = assert_golden(&ROUTE_REFRESH_ERROR, &expected, &DecodeCtx::default());
    let n = notification_of(&msg);
    assert_eq!(n.data.len(), 22);
    assert_eq!(n.code_name(), "ROUTE-REFRESH Message Error");
    assert_eq!(n.subcode_name(), "Invalid Message Length");
}

#[test]
fn unknown_error_code_round_trips() {
    let expected = notification(ErrorCode::Unknown(9), 1, &[0xff]);
    let msg = assert_golden(&UNKNOWN_CODE, &expected, &DecodeCtx::default());
    let j = json::message(&msg);
    assert_eq!(j["code"], 9);
    assert_eq!(j["code_name"], "Unknown");
    assert_eq!(j["data"], "ff");
}
