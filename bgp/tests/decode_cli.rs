//! The `bgp-decode` binary end to end: raw or hex messages on standard
//! input, one JSON object per message on standard output.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns; a panic is a test failure"
)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// KEEPALIVE.
const KEEPALIVE: [u8; 19] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x13, // length: 19
    0x04, // type: KEEPALIVE
];

/// OPEN from AS 65001 with the 4-octet AS capability.
const OPEN: [u8; 37] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x25, // length: 37
    0x01, // type: OPEN
    0x04, // version: 4
    0xfd, 0xe9, // my autonomous system: 65001
    0x00, 0x5a, // hold time: 90 s
    0xc0, 0x00, 0x02, 0x01, // BGP identifier: 192.0.2.1
    0x08, // optional parameters length: 8
    0x02, 0x06, // parameter type 2 (capabilities), length 6
    0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9, // 4-octet AS: 65001
];

/// The same OPEN with version 3: well framed, but malformed.
const OPEN_VERSION_3: [u8; 37] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x25, // length: 37
    0x01, // type: OPEN
    0x03, // version: 3
    0xfd, 0xe9, // my autonomous system: 65001
    0x00, 0x5a, // hold time: 90 s
    0xc0, 0x00, 0x02, 0x01, // BGP identifier: 192.0.2.1
    0x08, // optional parameters length: 8
    0x02, 0x06, // parameter type 2 (capabilities), length 6
    0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9, // 4-octet AS: 65001
];

/// UPDATE announcing 198.51.100.0/24 with a 4-octet AS_PATH.
const UPDATE: [u8; 47] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x2f, // length: 47
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x14, // total path attribute length: 20
    0x40, 0x01, 0x01, 0x00, // ORIGIN: IGP
    0x40, 0x02, 0x06, // AS_PATH: length 6
    0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE of 1: 65001
    0x40, 0x03, 0x04, // NEXT_HOP: length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0x18, 0xc6, 0x33, 0x64, // NLRI: 198.51.100.0/24
];

/// UPDATE with a 2-octet AS_PATH (as sent on a session without RFC 6793).
const UPDATE_TWO_OCTET: [u8; 47] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x2f, // length: 47
    0x02, // type: UPDATE
    0x00, 0x00, // withdrawn routes length: 0
    0x00, 0x14, // total path attribute length: 20
    0x40, 0x01, 0x01, 0x00, // ORIGIN: IGP
    0x40, 0x02, 0x06, // AS_PATH: length 6
    0x02, 0x02, 0xfd, 0xe9, 0xfd, 0xea, // AS_SEQUENCE of 2: 65001 65002 (2 octets each)
    0x40, 0x03, 0x04, // NEXT_HOP: length 4
    0xc0, 0x00, 0x02, 0x01, // 192.0.2.1
    0x18, 0xc6, 0x33, 0x64, // NLRI: 198.51.100.0/24
];

/// UPDATE withdrawing 10.0.0.0/8 with ADD-PATH path identifier 5.
const UPDATE_ADD_PATH: [u8; 29] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 1-8)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // marker (octets 9-16)
    0x00, 0x1d, // length: 29
    0x02, // type: UPDATE
    0x00, 0x06, // withdrawn routes length: 6
    0x00, 0x00, 0x00, 0x05, // path identifier 5
    0x08, 0x0a, // 10.0.0.0/8
    0x00, 0x00, // total path attribute length: 0
];

/// Runs `bgp-decode` with `args`, feeding it `input`.
fn run(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bgp-decode"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bgp-decode starts");
    // The tool reads all of its input before writing: no deadlock.
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(input).expect("input written");
    drop(stdin);
    child.wait_with_output().expect("bgp-decode finishes")
}

/// Hex text of `messages`, one per line, every other one with "0x".
fn hex_input(messages: &[&[u8]]) -> Vec<u8> {
    let mut text = String::new();
    for (i, m) in messages.iter().enumerate() {
        if i % 2 == 1 {
            text.push_str("0x");
        }
        text.push_str(&hex::encode(m));
        text.push('\n');
    }
    text.into_bytes()
}

/// Each stdout line as JSON.
fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .expect("UTF-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn valid_messages_become_json_lines() {
    let out = run(&["--hex"], &hex_input(&[&KEEPALIVE, &OPEN, &UPDATE]));
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 3);
    assert_eq!(v[0], json!({ "type": "KEEPALIVE" }));
    assert_eq!(v[1]["type"], "OPEN");
    assert_eq!(v[1]["asn"], 65001);
    assert_eq!(v[1]["capabilities"][0]["name"], "4-octet-as");
    assert_eq!(v[2]["type"], "UPDATE");
    assert_eq!(v[2]["nlri"], json!(["198.51.100.0/24"]));
    assert_eq!(
        v[2]["attributes"]["as_path"],
        json!([{ "type": "AS_SEQUENCE", "asns": [65001] }])
    );
}

#[test]
fn raw_binary_input() {
    let input = [&KEEPALIVE[..], &UPDATE[..]].concat();
    let out = run(&[], &input);
    assert!(out.status.success(), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 2);
    assert_eq!(v[1]["attributes"]["next_hop"], "192.0.2.1");
    // "-" also means standard input.
    let out = run(&["-"], &input);
    assert_eq!(lines(&out), v);
}

#[test]
fn malformed_message_in_the_middle_is_reported_and_skipped() {
    let out = run(
        &["--hex"],
        &hex_input(&[&KEEPALIVE, &OPEN_VERSION_3, &KEEPALIVE]),
    );
    assert!(out.status.success(), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["type"], "KEEPALIVE");
    let e = &v[1]["error"];
    assert_eq!(e["code"], 2);
    assert_eq!(e["subcode"], 1);
    assert_eq!(e["name"], "OPEN Message Error / Unsupported Version Number");
    assert_eq!(e["data"], "0004");
    assert_eq!(v[2]["type"], "KEEPALIVE");
}

#[test]
fn truncated_last_message_fails() {
    let out = run(&["--hex"], &hex_input(&[&KEEPALIVE, &UPDATE[..30]]));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 2);
    assert_eq!(v[0]["type"], "KEEPALIVE");
    let e = &v[1]["error"];
    assert_eq!(e["code"], 1);
    assert_eq!(e["subcode"], 2);
    assert_eq!(e["fatal"], true);
    let reason = e["reason"].as_str().unwrap();
    assert!(reason.contains("offset 19"), "{reason}");
    assert!(reason.contains("17 more octets"), "{reason}");
}

#[test]
fn broken_marker_stops_decoding() {
    let mut bad = KEEPALIVE;
    bad[0] = 0x00;
    let out = run(&["--hex"], &hex_input(&[&KEEPALIVE, &bad, &KEEPALIVE]));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 2, "nothing after a lost frame");
    assert_eq!(v[1]["error"]["code"], 1);
    assert_eq!(v[1]["error"]["subcode"], 1);
    assert_eq!(v[1]["error"]["fatal"], true);
}

#[test]
fn help_mentions_every_flag() {
    let out = run(&["--help"], b"");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--hex",
        "--as4",
        "--add-path",
        "--extended-message",
        "--pretty",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn add_path_decodes_path_ids() {
    let input = hex_input(&[&UPDATE_ADD_PATH]);
    let expected = json!([{ "path_id": 5, "prefix": "10.0.0.0/8" }]);
    for args in [
        &["--hex", "--add-path=ipv4-unicast"][..],
        &["--hex", "--add-path", "ipv6-unicast,ipv4-unicast"],
        &["--hex", "--add-path"],
    ] {
        let out = run(args, &input);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert_eq!(lines(&out)[0]["withdrawn"], expected, "{args:?}");
    }
    // Without path ids the same octets are an invalid withdrawn field.
    let out = run(&["--hex"], &input);
    let v = lines(&out);
    assert_eq!(v[0]["error"]["code"], 3);
    assert_eq!(v[0]["error"]["subcode"], 10);
    // Only IPv6 with path ids: IPv4 is read without them.
    let out = run(&["--hex", "--add-path=ipv6-unicast"], &input);
    assert_eq!(lines(&out)[0]["error"]["subcode"], 10);
}

#[test]
fn add_path_rejects_an_unknown_family() {
    let out = run(&["--hex", "--add-path=l2vpn"], b"");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("l2vpn"), "{err}");
}

#[test]
fn as4_false_decodes_two_octet_as_path() {
    let input = hex_input(&[&UPDATE_TWO_OCTET]);
    let out = run(&["--hex", "--as4=false"], &input);
    assert!(out.status.success(), "{out:?}");
    let v = lines(&out);
    assert_eq!(
        v[0]["attributes"]["as_path"],
        json!([{ "type": "AS_SEQUENCE", "asns": [65001, 65002] }])
    );
    assert_eq!(v[0].get("errors"), None);
    // Read with 4-octet ASes the segment overruns: treat-as-withdraw.
    let out = run(&["--hex"], &input);
    let v = lines(&out);
    assert_eq!(v[0]["errors"][0]["type_code"], 2);
    assert_eq!(v[0]["errors"][0]["subcode"], 11);
    assert_eq!(v[0]["errors"][0]["action"], "treat-as-withdraw");
}

#[test]
fn extended_message_accepts_long_messages() {
    // NOTIFICATION Cease with 4076 octets of data: 4097 octets in all.
    let mut long = vec![0xff; 16];
    long.extend_from_slice(&4097u16.to_be_bytes());
    long.push(3);
    long.extend_from_slice(&[6, 0]);
    long.resize(4097, b'x');
    let input = hex_input(&[&long, &KEEPALIVE]);

    let out = run(&["--hex", "--extended-message"], &input);
    assert!(out.status.success(), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 2);
    assert_eq!(v[0]["type"], "NOTIFICATION");
    assert_eq!(v[0]["code"], 6);
    assert_eq!(v[0]["data"].as_str().unwrap().len(), 2 * 4076);

    let out = run(&["--hex"], &input);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = lines(&out);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["error"]["subcode"], 2);
    assert_eq!(v[0]["error"]["fatal"], true);
}

#[test]
fn pretty_prints_over_several_lines() {
    let out = run(&["--hex", "--pretty"], &hex_input(&[&KEEPALIVE, &UPDATE]));
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().count() > 2, "{text}");
    let values: Vec<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(values[0]["type"], "KEEPALIVE");
    assert_eq!(values[1]["nlri"], json!(["198.51.100.0/24"]));
}

#[test]
fn bad_hex_is_a_usage_error() {
    let out = run(&["--hex"], b"ffz");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
}
