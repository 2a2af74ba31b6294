//! Golden wire examples in `testdata/memberlist/`: one file per message
//! kind, as a bare body, a plaintext envelope and an AES-256-GCM envelope
//! under a published test key. They seed the fuzz corpora
//! (`scripts/fuzz-seed`). `UPDATE_GOLDEN=1` rewrites them.
// Tests report by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use memberlist::envelope::{self, Transport};
use memberlist::message::{Message, Packet, PushPull, Update};
use memberlist::{Key, Keyring, Member, Meta, Name, Security, State, frame};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The test key of the `.aes.*` files: 32 octets of 0x11.
const TEST_KEY: [u8; 32] = [0x11; 32];

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn updates() -> Vec<Update> {
    vec![
        Update::Alive {
            name: name("node-c"),
            incarnation: 3,
            addr: sa("192.0.2.3:7946"),
            meta: Meta::new(&b"node-c 192.0.2.3"[..]).unwrap(),
        },
        Update::Suspect {
            name: name("node-d"),
            incarnation: 1,
            from: name("node-a"),
        },
        Update::Dead {
            name: name("node-e"),
            incarnation: 7,
            from: name("node-b"),
        },
        Update::Left {
            name: name("node-f"),
            incarnation: 2,
        },
    ]
}

fn packets() -> Vec<(&'static str, Packet)> {
    let p = |message, updates| Packet {
        from: name("node-a"),
        message,
        updates,
    };
    vec![
        (
            "ping",
            p(
                Message::Ping {
                    seq: 1,
                    target: name("node-b"),
                },
                vec![],
            ),
        ),
        (
            "ping-buddy",
            p(
                Message::Ping {
                    seq: 2,
                    target: name("node-d"),
                },
                vec![updates()[1].clone()],
            ),
        ),
        ("ack", p(Message::Ack { seq: 1 }, updates())),
        (
            "ping-req",
            p(
                Message::PingReq {
                    seq: 3,
                    target: name("node-d"),
                    addr: sa("[2001:db8::d]:7946"),
                },
                vec![],
            ),
        ),
        ("nack", p(Message::Nack { seq: 3 }, vec![])),
        ("gossip", p(Message::Gossip, updates())),
    ]
}

fn push_pull() -> PushPull {
    PushPull {
        from: name("node-a"),
        addr: sa("192.0.2.1:7946"),
        join: true,
        reply: true,
        members: vec![
            Member {
                name: name("node-a"),
                addr: sa("192.0.2.1:7946"),
                incarnation: 0,
                meta: Meta::new(&b"node-a 192.0.2.1"[..]).unwrap(),
                state: State::Alive,
            },
            Member {
                name: name("node-d"),
                addr: sa("[2001:db8::d]:7946"),
                incarnation: 1,
                meta: Meta::default(),
                state: State::Suspect,
            },
            Member {
                name: name("node-e"),
                addr: sa("192.0.2.5:7946"),
                incarnation: 7,
                meta: Meta::default(),
                state: State::Dead,
            },
            Member {
                name: name("node-f"),
                addr: sa("192.0.2.6:7946"),
                incarnation: 2,
                meta: Meta::default(),
                state: State::Left,
            },
        ],
    }
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/memberlist")
}

/// Compares `bytes` with the file, or writes it under `UPDATE_GOLDEN=1`.
fn golden(file: &str, bytes: &[u8]) {
    let path = dir().join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(dir()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(want, bytes, "{file} differs; UPDATE_GOLDEN=1 rewrites it");
}

fn sealed(security: &Security, t: Transport, body: &[u8]) -> Bytes {
    // Seeded, so the nonces and the files are stable.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    envelope::seal(security, t, &mut rng, body.len(), |b| {
        b.extend_from_slice(body);
    })
    .unwrap()
}

#[test]
fn golden_packets() {
    let aes = Security::Encrypted(Keyring::new(Key::new(TEST_KEY)));
    for (file, packet) in packets() {
        let mut body = BytesMut::new();
        packet.emit(&mut body).unwrap();
        let body = body.freeze();
        assert_eq!(Packet::parse(&body).unwrap(), packet);
        golden(&format!("{file}.body"), &body);

        let plain = sealed(&Security::Plaintext, Transport::Packet, &body);
        assert_eq!(
            envelope::open(&Security::Plaintext, Transport::Packet, &plain).unwrap(),
            body
        );
        golden(&format!("{file}.plain.packet"), &plain);

        let enc = sealed(&aes, Transport::Packet, &body);
        assert_eq!(envelope::open(&aes, Transport::Packet, &enc).unwrap(), body);
        golden(&format!("{file}.aes.packet"), &enc);
    }
}

#[test]
fn golden_push_pull() {
    let aes = Security::Encrypted(Keyring::new(Key::new(TEST_KEY)));
    let state = push_pull();
    let mut body = BytesMut::new();
    state.emit(&mut body).unwrap();
    let body = body.freeze();
    assert_eq!(PushPull::parse(&body).unwrap(), state);
    golden("push-pull.body", &body);
    for (suffix, security) in [("plain", Security::Plaintext), ("aes", aes)] {
        let f = sealed(&security, Transport::Stream, &body);
        assert_eq!(frame::decode(&f), Ok(Some(f.len())));
        let opened = envelope::open(&security, Transport::Stream, &f[frame::PREFIX_LEN..]).unwrap();
        assert_eq!(opened, body);
        golden(&format!("push-pull.{suffix}.frame"), &f);
    }
}
