//! The outer envelope of every packet and stream message: version, flags,
//! and AES-256-GCM authenticated encryption under the
//! [`Keyring`](crate::Keyring); plus the length framing of the stream
//! transport.
//!
//! Pure functions: the 96-bit nonce is drawn from the caller's `Rng`, and
//! nothing here does I/O. A message that fails any check is rejected with
//! an [`OpenError`] before its body is parsed, so a node without the key
//! can neither join nor inject state.
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |  version = 1  |     flags     |  key id (encrypted only)      |
//! +---------------+---------------+---------------+               +
//! |              nonce, 12 octets (encrypted only)                |
//! +                                               +---------------+
//! |                                               |               |
//! +---------------+---------------+---------------+               +
//! |        body (message.rs), AES-256-GCM ciphertext if encrypted |
//! +---------------------------------------------------------------+
//! |             GCM tag, 16 octets (encrypted only)               |
//! +---------------------------------------------------------------+
//!
//! flags: 0x01 encrypted, 0x02 stream transport; other bits zero.
//! associated data: the 15 header octets (version, flags, key id, nonce).
//! ```
//!
//! The stream flag is authenticated, so a captured UDP packet cannot be
//! replayed as a stream message or the reverse. On the stream transport
//! each envelope is preceded by its length (4 octets, big-endian; see
//! [`frame`]).
//!
//! Nonces are random (NIST SP 800-38D §8.2.2): with 96 random bits, one key
//! stays within the §8.3 limit of 2^32 messages for years at LAN rates. The
//! driver must hand the core a cryptographically secure `Rng`. Replays of
//! whole captured messages are not detected; incarnation numbers make old
//! statements harmless once a member has moved on.

use aes_gcm::aead::AeadInOut;
use aes_gcm::{Nonce, Tag};
use bytes::{BufMut, Bytes, BytesMut};
use rand_core::RngCore;

use crate::keyring::Security;

/// The envelope version this crate speaks.
pub const VERSION: u8 = 1;

/// Envelope octets around a plaintext body.
pub const PLAINTEXT_OVERHEAD: usize = 2;

/// Envelope octets around an encrypted body: header, nonce and tag.
pub const ENCRYPTED_OVERHEAD: usize = HEADER_LEN + TAG_LEN;

const HEADER_LEN: usize = 2 + 1 + NONCE_LEN;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// Which transport a message belongs to; authenticated in the envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Datagrams (UDP): probes and gossip.
    Packet,
    /// A reliable stream (TCP): full-state push-pull.
    Stream,
}

impl Transport {
    fn flag(self) -> u8 {
        match self {
            Self::Packet => 0,
            Self::Stream => flag::STREAM,
        }
    }
}

/// Octets the envelope adds around a body under `security`.
#[must_use]
pub fn overhead(security: &Security) -> usize {
    match security {
        Security::Plaintext => PLAINTEXT_OVERHEAD,
        Security::Encrypted(_) => ENCRYPTED_OVERHEAD,
    }
}

/// Wraps a body written by `write_body` into an envelope. On the stream
/// transport the result starts with the 4-octet frame length.
///
/// Returns `None` only if AES-GCM refuses the length (more than 2^36
/// octets), which no message built by this crate reaches.
pub fn seal<R: RngCore>(
    security: &Security,
    transport: Transport,
    rng: &mut R,
    body_len: usize,
    write_body: impl FnOnce(&mut BytesMut),
) -> Option<Bytes> {
    let prefix = match transport {
        Transport::Packet => 0,
        Transport::Stream => frame::PREFIX_LEN,
    };
    let mut out = BytesMut::with_capacity(prefix + ENCRYPTED_OVERHEAD + body_len);
    if transport == Transport::Stream {
        out.put_u32(0);
    }
    out.put_u8(VERSION);
    match security {
        Security::Plaintext => {
            out.put_u8(transport.flag());
            write_body(&mut out);
        }
        Security::Encrypted(ring) => {
            out.put_u8(transport.flag() | flag::ENCRYPTED);
            let (id, cipher) = ring.encryptor();
            out.put_u8(id);
            let mut nonce = [0; NONCE_LEN];
            rng.fill_bytes(&mut nonce);
            out.put_slice(&nonce);
            let body_start = out.len();
            write_body(&mut out);
            let (head, body) = out.split_at_mut(body_start);
            let tag = cipher
                .encrypt_inout_detached(&Nonce::from(nonce), &head[prefix..], body.into())
                .ok()?;
            out.put_slice(&tag);
        }
    }
    if transport == Transport::Stream {
        let len = u32::try_from(out.len() - prefix).ok()?;
        out[..prefix].copy_from_slice(&len.to_be_bytes());
    }
    Some(out.freeze())
}

/// Checks and decrypts one envelope (without a frame prefix) and returns
/// its body.
///
/// # Errors
/// [`OpenError`] when the version, flags, transport or security mode do
/// not match, the key id is unknown, or authentication fails.
pub fn open(security: &Security, transport: Transport, data: &[u8]) -> Result<Bytes, OpenError> {
    let [version, flags, ..] = *data else {
        return Err(OpenError::Truncated { len: data.len() });
    };
    if version != VERSION {
        return Err(OpenError::Version { version });
    }
    if flags & !(flag::ENCRYPTED | flag::STREAM) != 0 {
        return Err(OpenError::Flags { flags });
    }
    if flags & flag::STREAM != transport.flag() {
        return Err(OpenError::WrongTransport);
    }
    let encrypted = flags & flag::ENCRYPTED != 0;
    let ring = match (security, encrypted) {
        (Security::Plaintext, false) => return Ok(Bytes::copy_from_slice(&data[2..])),
        (Security::Plaintext, true) => return Err(OpenError::EncryptedRejected),
        (Security::Encrypted(_), false) => return Err(OpenError::PlaintextRejected),
        (Security::Encrypted(ring), true) => ring,
    };
    if data.len() < ENCRYPTED_OVERHEAD {
        return Err(OpenError::Truncated { len: data.len() });
    }
    let key_id = data[2];
    let nonce = Nonce::try_from(&data[3..HEADER_LEN])
        .map_err(|_| OpenError::Truncated { len: data.len() })?;
    let (ciphertext, tag) = data[HEADER_LEN..].split_at(data.len() - HEADER_LEN - TAG_LEN);
    let tag = Tag::try_from(tag).map_err(|_| OpenError::Truncated { len: data.len() })?;
    let mut tried = false;
    for cipher in ring.decryptors(key_id) {
        tried = true;
        let mut body = ciphertext.to_vec();
        if cipher
            .decrypt_inout_detached(
                &nonce,
                &data[..HEADER_LEN],
                body.as_mut_slice().into(),
                &tag,
            )
            .is_ok()
        {
            return Ok(Bytes::from(body));
        }
    }
    if tried {
        Err(OpenError::Authentication { key_id })
    } else {
        Err(OpenError::UnknownKey { key_id })
    }
}

/// Why an envelope was rejected. The message is dropped and counted;
/// nothing in it is applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Too short for its header, nonce and tag.
    #[error("envelope of {len} octets is truncated")]
    Truncated {
        /// Its length.
        len: usize,
    },
    /// A version this node does not speak.
    #[error("envelope version {version}")]
    Version {
        /// The version octet.
        version: u8,
    },
    /// Reserved flag bits set.
    #[error("envelope flags {flags:#04x}")]
    Flags {
        /// The flags octet.
        flags: u8,
    },
    /// A packet on the stream transport or the reverse.
    #[error("envelope for the other transport")]
    WrongTransport,
    /// Plaintext received by an encrypted node.
    #[error("plaintext message rejected: encryption is on")]
    PlaintextRejected,
    /// Encrypted message received by a plaintext node.
    #[error("encrypted message rejected: this node runs in plaintext")]
    EncryptedRejected,
    /// No key with this id is installed.
    #[error("no key with id {key_id:#04x}")]
    UnknownKey {
        /// The key id octet.
        key_id: u8,
    },
    /// Every key with this id failed to authenticate the message.
    #[error("authentication failed under key {key_id:#04x}")]
    Authentication {
        /// The key id octet.
        key_id: u8,
    },
}

/// Length framing of the stream transport: each envelope is preceded by
/// its length as 4 octets, big-endian.
pub mod frame {
    /// Octets of the length prefix.
    pub const PREFIX_LEN: usize = 4;

    /// The largest envelope accepted: 4 MiB, room for several thousand
    /// members with full metadata.
    pub const MAX_LEN: usize = 4 << 20;

    /// How many octets at the start of `buf` make one whole frame (prefix
    /// included), or `None` if more must be read first. A driver reads
    /// until this is `Some(n)`, hands `&buf[..n]` to
    /// [`Swim::handle_stream`](crate::Swim::handle_stream) and drops the
    /// connection on an error, before reserving anything.
    ///
    /// # Errors
    /// [`FrameError`] if the announced length is out of bounds.
    pub fn decode(buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(prefix) = buf.get(..PREFIX_LEN) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if !(super::PLAINTEXT_OVERHEAD..=MAX_LEN).contains(&len) {
            return Err(FrameError { len });
        }
        let total = PREFIX_LEN + len;
        Ok((buf.len() >= total).then_some(total))
    }

    /// A frame length outside 2..=[`MAX_LEN`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
    #[error("stream frame length {len} out of bounds")]
    pub struct FrameError {
        /// The announced length.
        pub len: usize,
    }
}

mod flag {
    pub(super) const ENCRYPTED: u8 = 0x01;
    pub(super) const STREAM: u8 = 0x02;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyring::{Key, Keyring};

    /// A counter, enough for nonces in tests.
    struct Counter(u64);

    impl RngCore for Counter {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0 += 1;
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            for b in dst {
                *b = self.next_u64() as u8;
            }
        }
    }

    fn enc(key: u8) -> Security {
        Security::Encrypted(Keyring::new(Key::new([key; 32])))
    }

    fn seal_body(s: &Security, t: Transport, body: &[u8]) -> Bytes {
        seal(s, t, &mut Counter(0), body.len(), |b| b.put_slice(body)).unwrap()
    }

    #[test]
    fn plaintext_layout() {
        let p = seal_body(&Security::Plaintext, Transport::Packet, b"hi");
        assert_eq!(&p[..], &[1, 0, b'h', b'i']);
        assert_eq!(
            open(&Security::Plaintext, Transport::Packet, &p).unwrap(),
            &b"hi"[..]
        );
        let s = seal_body(&Security::Plaintext, Transport::Stream, b"hi");
        assert_eq!(&s[..], &[0, 0, 0, 4, 1, 2, b'h', b'i']);
        assert_eq!(frame::decode(&s), Ok(Some(8)));
        assert_eq!(frame::decode(&s[..7]), Ok(None));
        assert_eq!(
            open(&Security::Plaintext, Transport::Stream, &s[4..]).unwrap(),
            &b"hi"[..]
        );
        assert_eq!(
            open(&Security::Plaintext, Transport::Packet, &s[4..]),
            Err(OpenError::WrongTransport)
        );
    }

    #[test]
    fn encrypted_layout_and_tamper() {
        let s = enc(1);
        let key_id = Key::new([1; 32]).id();
        let p = seal_body(&s, Transport::Packet, b"hello");
        assert_eq!(p.len(), 5 + ENCRYPTED_OVERHEAD);
        assert_eq!(&p[..3], &[1, 1, key_id]);
        assert_eq!(&p[3..15], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_ne!(&p[15..20], b"hello");
        assert_eq!(open(&s, Transport::Packet, &p).unwrap(), &b"hello"[..]);
        // Any flipped bit, header included, fails authentication or the
        // header checks.
        for i in 0..p.len() {
            let mut bad = p.to_vec();
            bad[i] ^= 0x10;
            assert!(open(&s, Transport::Packet, &bad).is_err(), "octet {i}");
        }
        assert_eq!(
            open(&s, Transport::Packet, &p[..20]),
            Err(OpenError::Truncated { len: 20 })
        );
    }

    #[test]
    fn modes_and_keys() {
        let p = seal_body(&enc(1), Transport::Packet, b"x");
        assert_eq!(
            open(&Security::Plaintext, Transport::Packet, &p),
            Err(OpenError::EncryptedRejected)
        );
        let plain = seal_body(&Security::Plaintext, Transport::Packet, b"x");
        assert_eq!(
            open(&enc(1), Transport::Packet, &plain),
            Err(OpenError::PlaintextRejected)
        );
        let other = Key::new([2; 32]).id();
        assert_eq!(
            open(&enc(2), Transport::Packet, &p),
            Err(OpenError::UnknownKey {
                key_id: Key::new([1; 32]).id()
            })
        );
        // A keyring holding both keys accepts messages under either.
        let mut ring = Keyring::new(Key::new([2; 32]));
        ring.install(Key::new([1; 32]));
        let both = Security::Encrypted(ring);
        assert_eq!(open(&both, Transport::Packet, &p).unwrap(), &b"x"[..]);
        let q = seal_body(&both, Transport::Packet, b"y");
        assert_eq!(q[2], other);
        assert_eq!(open(&enc(2), Transport::Packet, &q).unwrap(), &b"y"[..]);
    }

    #[test]
    fn header_checks() {
        assert_eq!(
            open(&enc(1), Transport::Packet, &[1]),
            Err(OpenError::Truncated { len: 1 })
        );
        assert_eq!(
            open(&enc(1), Transport::Packet, &[2, 1, 0]),
            Err(OpenError::Version { version: 2 })
        );
        assert_eq!(
            open(&enc(1), Transport::Packet, &[1, 0x81, 0]),
            Err(OpenError::Flags { flags: 0x81 })
        );
    }

    #[test]
    fn frame_bounds() {
        assert_eq!(frame::decode(&[0, 0, 0]), Ok(None));
        assert_eq!(
            frame::decode(&[0, 0, 0, 1]),
            Err(frame::FrameError { len: 1 })
        );
        assert_eq!(
            frame::decode(&[0xff, 0, 0, 0]),
            Err(frame::FrameError { len: 0xff00_0000 })
        );
    }
}
