//! memberlist's wire layer. The first octet picks a mode:
//! 0 packet body, 1 stream body, 2 plaintext envelope, 3 encrypted
//! envelope (test key 0x11 × 32) and stream framing: parse only, never
//! panic, and whatever parses emits the very same octets (the format is
//! canonical). 4 and up: an arbitrary packet or full-state value emits,
//! parses back equal.
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use arbitrary::{Arbitrary, Unstructured};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use memberlist::envelope::{self, Transport};
use memberlist::message::{MAX_UPDATES, Packet, PushPull};
use memberlist::{Key, Keyring, Security, frame};

fn packet_round_trip(body: &Bytes) {
    let Ok(p) = Packet::parse(body) else {
        return;
    };
    let _ = p.to_string();
    let mut out = BytesMut::new();
    p.emit(&mut out).expect("parsed packet must emit");
    assert_eq!(out.len(), p.buffer_len());
    assert_eq!(&out[..], &body[..], "packet emit is not canonical");
}

fn push_pull_round_trip(body: &Bytes) {
    let Ok(s) = PushPull::parse(body) else {
        return;
    };
    let _ = s.to_string();
    let mut out = BytesMut::new();
    s.emit(&mut out).expect("parsed state must emit");
    assert_eq!(out.len(), s.buffer_len());
    assert_eq!(&out[..], &body[..], "push-pull emit is not canonical");
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = Bytes::copy_from_slice(rest);
    match mode {
        0 => packet_round_trip(&bytes),
        1 => push_pull_round_trip(&bytes),
        2 => {
            for t in [Transport::Packet, Transport::Stream] {
                if let Ok(body) = envelope::open(&Security::Plaintext, t, rest) {
                    packet_round_trip(&body);
                    push_pull_round_trip(&body);
                }
            }
        }
        3 => {
            let aes = Security::Encrypted(Keyring::new(Key::new([0x11; 32])));
            let _ = frame::decode(rest);
            let stream = rest.get(frame::PREFIX_LEN..).unwrap_or_default();
            for (t, d) in [(Transport::Packet, rest), (Transport::Stream, stream)] {
                if let Ok(body) = envelope::open(&aes, t, d) {
                    packet_round_trip(&body);
                    push_pull_round_trip(&body);
                }
            }
        }
        m => {
            let mut u = Unstructured::new(rest);
            let mut buf = BytesMut::new();
            if m % 2 == 0 {
                let Ok(p) = Packet::arbitrary(&mut u) else {
                    return;
                };
                if p.updates.len() > MAX_UPDATES {
                    assert!(p.emit(&mut buf).is_err());
                    return;
                }
                p.emit(&mut buf).unwrap();
                assert_eq!(buf.len(), p.buffer_len());
                assert_eq!(
                    Packet::parse(&buf.freeze()).expect("emitted packet must parse"),
                    p
                );
            } else {
                let Ok(s) = PushPull::arbitrary(&mut u) else {
                    return;
                };
                s.emit(&mut buf).unwrap();
                assert_eq!(buf.len(), s.buffer_len());
                assert_eq!(
                    PushPull::parse(&buf.freeze()).expect("emitted state must parse"),
                    s
                );
            }
        }
    }
});
