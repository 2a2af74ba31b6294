//! The plaintext message bodies: probes, piggybacked updates and full-state
//! (push-pull) messages, with `parse`, `buffer_len` and `emit`.
//!
//! This is the wire layer inside the envelope (see [`crate::envelope`] for
//! versioning and AES-256-GCM). It never panics on peer input: every length
//! becomes a bounded sub-slice before it is read, leftover octets are an
//! error, and [`DecodeError`] names the offset. Parsing is zero-copy for
//! metadata (a [`Bytes`] slice of the decrypted buffer). It does no I/O and
//! keeps no state.
//!
//! All integers are big-endian. Common fields:
//!
//! ```text
//! name:  | len (1) | len octets of UTF-8, 1..=255       |
//! addr:  | family (1): 4 or 6 | 4 or 16 octets | port (2) |
//! meta:  | len (2), 0..=512   | len octets                 |
//! ```
//!
//! A packet body (one UDP datagram):
//!
//! ```text
//!  0               1               2
//! +---------------+---------------+------------------------------+
//! |     type      |   from: name (sender) ...                    |
//! +---------------+----------------------------------------------+
//! |   type-specific fields (below)                               |
//! +---------------+----------------------------------------------+
//! | update count  |   updates ... (piggybacked dissemination)    |
//! +---------------+----------------------------------------------+
//!
//! type 1 ping:      seq (4) | target: name
//! type 2 ack:       seq (4)
//! type 3 ping-req:  seq (4) | target: name | target: addr
//! type 4 nack:      seq (4)
//! type 5 gossip:    (nothing; updates only)
//! ```
//!
//! An update:
//!
//! ```text
//! +---------------+--------------+-------------------+----------------+
//! |     kind      |  name        |  incarnation (4)  |  kind-specific |
//! +---------------+--------------+-------------------+----------------+
//! kind 1 alive:    addr | meta
//! kind 2 suspect:  from: name (the suspecting member)
//! kind 3 dead:     from: name (the member that declared it)
//! kind 4 left:     (nothing)
//! ```
//!
//! A stream body (type 16, push-pull full state, SWIM's anti-entropy as in
//! hashicorp/memberlist):
//!
//! ```text
//! | 16 | from: name | from: addr | flags (1) | count (2) | members ... |
//! flags: 0x01 join, 0x02 reply wanted; other bits must be zero
//! member: state (1): 0 alive 1 suspect 2 dead 3 left | name
//!         | incarnation (4) | addr | meta
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};

use crate::member::{Incarnation, Member, Meta, Name, State};

/// A probe-layer sequence number, chosen by the prober and echoed in acks.
pub type Seq = u32;

/// The most updates one packet carries (the count is one octet).
pub const MAX_UPDATES: usize = 255;

/// The most members one full-state message carries (the count is two
/// octets).
pub const MAX_MEMBERS: usize = u16::MAX as usize;

/// The probe-layer part of a packet (SWIM §3.1, Lifeguard §IV-A for nack).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Message {
    /// A direct probe. `target` lets a restarted node under another name
    /// at the same address ignore probes meant for its predecessor.
    Ping {
        /// Echoed in the ack.
        seq: Seq,
        /// The member the prober means to reach.
        target: Name,
    },
    /// The answer to a ping, or a relayed answer to a ping-req.
    Ack {
        /// The seq of the ping or ping-req answered.
        seq: Seq,
    },
    /// Asks the receiver to probe `target` and relay the ack (SWIM §3.1).
    PingReq {
        /// Echoed in the relayed ack or the nack.
        seq: Seq,
        /// The member to probe.
        target: Name,
        /// Its address.
        #[cfg_attr(feature = "arbitrary", arbitrary(with = arbitrary_addr))]
        addr: SocketAddr,
    },
    /// The relay got no ack in time (Lifeguard §IV-A): the requester
    /// learns that the relay, at least, hears it.
    Nack {
        /// The seq of the ping-req.
        seq: Seq,
    },
    /// No probe: the packet only carries updates.
    Gossip,
}

/// A membership update, piggybacked on packets (SWIM §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Update {
    /// The member is alive at this incarnation, with this address and
    /// metadata. Sent on join, on refutation and on a metadata change.
    Alive {
        /// Member.
        name: Name,
        /// Incarnation.
        incarnation: Incarnation,
        /// Address.
        #[cfg_attr(feature = "arbitrary", arbitrary(with = arbitrary_addr))]
        addr: SocketAddr,
        /// Metadata.
        meta: Meta,
    },
    /// `from` suspects the member at this incarnation.
    Suspect {
        /// Member.
        name: Name,
        /// Incarnation.
        incarnation: Incarnation,
        /// Suspecting member.
        from: Name,
    },
    /// `from` declared the member dead at this incarnation.
    Dead {
        /// Member.
        name: Name,
        /// Incarnation.
        incarnation: Incarnation,
        /// Declaring member.
        from: Name,
    },
    /// The member left gracefully at this incarnation.
    Left {
        /// Member.
        name: Name,
        /// Incarnation.
        incarnation: Incarnation,
    },
}

impl Update {
    /// The member the update is about.
    #[must_use]
    pub fn name(&self) -> &Name {
        match self {
            Self::Alive { name, .. }
            | Self::Suspect { name, .. }
            | Self::Dead { name, .. }
            | Self::Left { name, .. } => name,
        }
    }

    /// The incarnation the update is about.
    #[must_use]
    pub fn incarnation(&self) -> Incarnation {
        match self {
            Self::Alive { incarnation, .. }
            | Self::Suspect { incarnation, .. }
            | Self::Dead { incarnation, .. }
            | Self::Left { incarnation, .. } => *incarnation,
        }
    }

    /// Octets `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        1 + name_len(self.name())
            + 4
            + match self {
                Self::Alive { addr, meta, .. } => addr_len(addr) + 2 + meta.len(),
                Self::Suspect { from, .. } | Self::Dead { from, .. } => name_len(from),
                Self::Left { .. } => 0,
            }
    }

    /// Appends the update.
    pub fn emit(&self, buf: &mut BytesMut) {
        let kind = match self {
            Self::Alive { .. } => kind::ALIVE,
            Self::Suspect { .. } => kind::SUSPECT,
            Self::Dead { .. } => kind::DEAD,
            Self::Left { .. } => kind::LEFT,
        };
        buf.put_u8(kind);
        put_name(buf, self.name());
        buf.put_u32(self.incarnation());
        match self {
            Self::Alive { addr, meta, .. } => {
                put_addr(buf, addr);
                put_meta(buf, meta);
            }
            Self::Suspect { from, .. } | Self::Dead { from, .. } => put_name(buf, from),
            Self::Left { .. } => {}
        }
    }

    fn parse(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = r.pos;
        let k = r.u8()?;
        let name = r.name()?;
        let incarnation = r.u32()?;
        Ok(match k {
            kind::ALIVE => Self::Alive {
                name,
                incarnation,
                addr: r.addr()?,
                meta: r.meta()?,
            },
            kind::SUSPECT => Self::Suspect {
                name,
                incarnation,
                from: r.name()?,
            },
            kind::DEAD => Self::Dead {
                name,
                incarnation,
                from: r.name()?,
            },
            kind::LEFT => Self::Left { name, incarnation },
            value => return Err(DecodeError::UnknownUpdate { offset, value }),
        })
    }
}

impl fmt::Display for Update {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Alive {
                name,
                incarnation,
                addr,
                meta,
            } => write!(f, "alive {name}@{incarnation} {addr} meta={}", meta.len()),
            Self::Suspect {
                name,
                incarnation,
                from,
            } => write!(f, "suspect {name}@{incarnation} by {from}"),
            Self::Dead {
                name,
                incarnation,
                from,
            } => write!(f, "dead {name}@{incarnation} by {from}"),
            Self::Left { name, incarnation } => write!(f, "left {name}@{incarnation}"),
        }
    }
}

/// One UDP datagram's body: a probe message plus piggybacked updates.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Packet {
    /// The sender.
    pub from: Name,
    /// The probe part.
    pub message: Message,
    /// Piggybacked updates, at most [`MAX_UPDATES`].
    pub updates: Vec<Update>,
}

impl Packet {
    /// Parses a whole packet body.
    ///
    /// # Errors
    /// [`DecodeError`] for truncation, unknown codes, bad names, oversized
    /// metadata or trailing octets; never panics.
    pub fn parse(body: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let offset = r.pos;
        let ty = r.u8()?;
        let from = r.name()?;
        let message = match ty {
            ty::PING => Message::Ping {
                seq: r.u32()?,
                target: r.name()?,
            },
            ty::ACK => Message::Ack { seq: r.u32()? },
            ty::PING_REQ => Message::PingReq {
                seq: r.u32()?,
                target: r.name()?,
                addr: r.addr()?,
            },
            ty::NACK => Message::Nack { seq: r.u32()? },
            ty::GOSSIP => Message::Gossip,
            value => return Err(DecodeError::UnknownType { offset, value }),
        };
        let count = r.u8()?;
        let mut updates = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            updates.push(Update::parse(&mut r)?);
        }
        r.finish()?;
        Ok(Self {
            from,
            message,
            updates,
        })
    }

    /// Octets `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        Self::header_len(&self.from, &self.message)
            + self.updates.iter().map(Update::buffer_len).sum::<usize>()
    }

    /// Octets of a packet from `from` with `message` and no updates yet
    /// (the update count octet included).
    #[must_use]
    pub fn header_len(from: &Name, message: &Message) -> usize {
        1 + name_len(from)
            + match message {
                Message::Ping { target, .. } => 4 + name_len(target),
                Message::Ack { .. } | Message::Nack { .. } => 4,
                Message::PingReq { target, addr, .. } => 4 + name_len(target) + addr_len(addr),
                Message::Gossip => 0,
            }
            + 1
    }

    /// Appends the packet.
    ///
    /// # Errors
    /// [`EncodeError::TooManyUpdates`] past [`MAX_UPDATES`]; nothing is
    /// written then.
    pub fn emit(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let count = u8::try_from(self.updates.len()).map_err(|_| EncodeError::TooManyUpdates {
            count: self.updates.len(),
        })?;
        buf.reserve(self.buffer_len());
        let ty = match self.message {
            Message::Ping { .. } => ty::PING,
            Message::Ack { .. } => ty::ACK,
            Message::PingReq { .. } => ty::PING_REQ,
            Message::Nack { .. } => ty::NACK,
            Message::Gossip => ty::GOSSIP,
        };
        buf.put_u8(ty);
        put_name(buf, &self.from);
        match &self.message {
            Message::Ping { seq, target } => {
                buf.put_u32(*seq);
                put_name(buf, target);
            }
            Message::Ack { seq } | Message::Nack { seq } => buf.put_u32(*seq),
            Message::PingReq { seq, target, addr } => {
                buf.put_u32(*seq);
                put_name(buf, target);
                put_addr(buf, addr);
            }
            Message::Gossip => {}
        }
        buf.put_u8(count);
        for u in &self.updates {
            u.emit(buf);
        }
        Ok(())
    }
}

impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Message::Ping { seq, target } => write!(f, "ping seq={seq} target={target}")?,
            Message::Ack { seq } => write!(f, "ack seq={seq}")?,
            Message::PingReq { seq, target, addr } => {
                write!(f, "ping-req seq={seq} target={target} {addr}")?;
            }
            Message::Nack { seq } => write!(f, "nack seq={seq}")?,
            Message::Gossip => f.write_str("gossip")?,
        }
        write!(f, " from={}", self.from)?;
        for u in &self.updates {
            write!(f, "; {u}")?;
        }
        Ok(())
    }
}

/// A full-state message for the stream transport: push-pull anti-entropy
/// and join.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct PushPull {
    /// The sender.
    pub from: Name,
    /// Where the sender takes a reply.
    #[cfg_attr(feature = "arbitrary", arbitrary(with = arbitrary_addr))]
    pub addr: SocketAddr,
    /// The sender is joining.
    pub join: bool,
    /// The sender wants the receiver's state back.
    pub reply: bool,
    /// Everything the sender knows, itself included; at most
    /// [`MAX_MEMBERS`].
    pub members: Vec<Member>,
}

impl PushPull {
    /// Parses a whole stream body.
    ///
    /// # Errors
    /// As [`Packet::parse`], plus unknown flag bits and member states.
    pub fn parse(body: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let offset = r.pos;
        let ty = r.u8()?;
        if ty != ty::PUSH_PULL {
            return Err(DecodeError::UnknownType { offset, value: ty });
        }
        let from = r.name()?;
        let addr = r.addr()?;
        let offset = r.pos;
        let flags = r.u8()?;
        if flags & !(flag::JOIN | flag::REPLY) != 0 {
            return Err(DecodeError::Flags {
                offset,
                value: flags,
            });
        }
        let count = r.u16()?;
        // Each member takes at least 12 octets: never reserve more than the
        // input could hold.
        let mut members = Vec::with_capacity(usize::from(count).min(r.remaining() / 12));
        for _ in 0..count {
            let offset = r.pos;
            let state = match r.u8()? {
                0 => State::Alive,
                1 => State::Suspect,
                2 => State::Dead,
                3 => State::Left,
                value => return Err(DecodeError::UnknownState { offset, value }),
            };
            let name = r.name()?;
            let incarnation = r.u32()?;
            let addr = r.addr()?;
            let meta = r.meta()?;
            members.push(Member {
                name,
                addr,
                incarnation,
                meta,
                state,
            });
        }
        r.finish()?;
        Ok(Self {
            from,
            addr,
            join: flags & flag::JOIN != 0,
            reply: flags & flag::REPLY != 0,
            members,
        })
    }

    /// Octets `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        1 + name_len(&self.from)
            + addr_len(&self.addr)
            + 1
            + 2
            + self
                .members
                .iter()
                .map(|m| 1 + name_len(&m.name) + 4 + addr_len(&m.addr) + 2 + m.meta.len())
                .sum::<usize>()
    }

    /// Appends the message.
    ///
    /// # Errors
    /// [`EncodeError::TooManyMembers`] past [`MAX_MEMBERS`]; nothing is
    /// written then.
    pub fn emit(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let count = u16::try_from(self.members.len()).map_err(|_| EncodeError::TooManyMembers {
            count: self.members.len(),
        })?;
        buf.reserve(self.buffer_len());
        buf.put_u8(ty::PUSH_PULL);
        put_name(buf, &self.from);
        put_addr(buf, &self.addr);
        let mut flags = 0;
        if self.join {
            flags |= flag::JOIN;
        }
        if self.reply {
            flags |= flag::REPLY;
        }
        buf.put_u8(flags);
        buf.put_u16(count);
        for m in &self.members {
            buf.put_u8(match m.state {
                State::Alive => 0,
                State::Suspect => 1,
                State::Dead => 2,
                State::Left => 3,
            });
            put_name(buf, &m.name);
            buf.put_u32(m.incarnation);
            put_addr(buf, &m.addr);
            put_meta(buf, &m.meta);
        }
        Ok(())
    }
}

impl fmt::Display for PushPull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "push-pull from={} {}{}{} members={}",
            self.from,
            self.addr,
            if self.join { " join" } else { "" },
            if self.reply { " reply" } else { "" },
            self.members.len()
        )
    }
}

/// A message body that does not parse. Nothing is applied from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body ends inside a field.
    #[error("truncated at offset {offset}: {needed} more octets needed")]
    Truncated {
        /// Where the field starts.
        offset: usize,
        /// Octets missing.
        needed: usize,
    },
    /// Unknown message type (or a packet type on the stream transport and
    /// the reverse).
    #[error("unknown message type {value} at offset {offset}")]
    UnknownType {
        /// Where.
        offset: usize,
        /// The type octet.
        value: u8,
    },
    /// Unknown update kind.
    #[error("unknown update kind {value} at offset {offset}")]
    UnknownUpdate {
        /// Where.
        offset: usize,
        /// The kind octet.
        value: u8,
    },
    /// Unknown member state in a full-state message.
    #[error("unknown member state {value} at offset {offset}")]
    UnknownState {
        /// Where.
        offset: usize,
        /// The state octet.
        value: u8,
    },
    /// Unknown address family.
    #[error("unknown address family {value} at offset {offset}")]
    UnknownFamily {
        /// Where.
        offset: usize,
        /// The family octet.
        value: u8,
    },
    /// Reserved flag bits set.
    #[error("unknown flags {value:#04x} at offset {offset}")]
    Flags {
        /// Where.
        offset: usize,
        /// The flags octet.
        value: u8,
    },
    /// An empty or non-UTF-8 name.
    #[error("invalid member name at offset {offset}")]
    InvalidName {
        /// Where the name's length octet is.
        offset: usize,
    },
    /// Metadata longer than [`Meta::MAX_LEN`].
    #[error("metadata of {len} octets at offset {offset}")]
    MetadataTooLong {
        /// Where the length field is.
        offset: usize,
        /// The claimed length.
        len: usize,
    },
    /// Octets after the last field.
    #[error("{len} trailing octets at offset {offset}")]
    TrailingBytes {
        /// Where they start.
        offset: usize,
        /// How many.
        len: usize,
    },
}

/// A value that cannot be emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// More than [`MAX_UPDATES`] updates in one packet.
    #[error("{count} updates in one packet, more than 255")]
    TooManyUpdates {
        /// How many.
        count: usize,
    },
    /// More than [`MAX_MEMBERS`] members in one full-state message.
    #[error("{count} members in one full-state message, more than 65535")]
    TooManyMembers {
        /// How many.
        count: usize,
    },
}

/// Arbitrary socket addresses without IPv6 flow info or scope, which the
/// wire format does not carry.
#[cfg(feature = "arbitrary")]
pub(crate) fn arbitrary_addr(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<SocketAddr> {
    let ip: IpAddr = u.arbitrary()?;
    Ok(SocketAddr::new(ip, u.arbitrary()?))
}

/// A bounds-checked cursor over a body (`rustls: codec.rs` `Reader`).
struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` octets as a sub-slice; the cursor moves past them.
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let buf: &'a [u8] = self.buf;
        let Some(s) = buf.get(self.pos..self.pos.saturating_add(n)) else {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n - self.remaining(),
            });
        };
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn name(&mut self) -> Result<Name, DecodeError> {
        let offset = self.pos;
        let len = self.u8()?;
        let raw = self.take(usize::from(len))?;
        std::str::from_utf8(raw)
            .ok()
            .and_then(|s| Name::new(s).ok())
            .ok_or(DecodeError::InvalidName { offset })
    }

    fn addr(&mut self) -> Result<SocketAddr, DecodeError> {
        let offset = self.pos;
        let ip = match self.u8()? {
            4 => {
                let b = self.take(4)?;
                IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
            }
            6 => {
                let mut o = [0; 16];
                o.copy_from_slice(self.take(16)?);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            value => return Err(DecodeError::UnknownFamily { offset, value }),
        };
        Ok(SocketAddr::new(ip, self.u16()?))
    }

    fn meta(&mut self) -> Result<Meta, DecodeError> {
        let offset = self.pos;
        let len = usize::from(self.u16()?);
        if len > Meta::MAX_LEN {
            return Err(DecodeError::MetadataTooLong { offset, len });
        }
        let start = self.pos;
        self.take(len)?;
        // Zero-copy: a slice of the decrypted buffer. The length was
        // checked above, so `Meta::new` cannot fail.
        Meta::new(self.buf.slice(start..start + len))
            .map_err(|_| DecodeError::MetadataTooLong { offset, len })
    }

    fn finish(self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            len => Err(DecodeError::TrailingBytes {
                offset: self.pos,
                len,
            }),
        }
    }
}

fn name_len(n: &Name) -> usize {
    1 + n.as_str().len()
}

fn addr_len(a: &SocketAddr) -> usize {
    match a {
        SocketAddr::V4(_) => 1 + 4 + 2,
        SocketAddr::V6(_) => 1 + 16 + 2,
    }
}

fn put_name(buf: &mut BytesMut, n: &Name) {
    // `Name` holds at most 255 octets, so the cast cannot truncate.
    buf.put_u8(n.as_str().len() as u8);
    buf.put_slice(n.as_str().as_bytes());
}

fn put_addr(buf: &mut BytesMut, a: &SocketAddr) {
    match a.ip() {
        IpAddr::V4(ip) => {
            buf.put_u8(4);
            buf.put_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            buf.put_u8(6);
            buf.put_slice(&ip.octets());
        }
    }
    buf.put_u16(a.port());
}

fn put_meta(buf: &mut BytesMut, m: &Meta) {
    // `Meta` holds at most 512 octets, so the cast cannot truncate.
    buf.put_u16(m.len() as u16);
    buf.put_slice(m.as_bytes());
}

/// Message type codes (the first body octet).
mod ty {
    pub(super) const PING: u8 = 1;
    pub(super) const ACK: u8 = 2;
    pub(super) const PING_REQ: u8 = 3;
    pub(super) const NACK: u8 = 4;
    pub(super) const GOSSIP: u8 = 5;
    pub(super) const PUSH_PULL: u8 = 16;
}

/// Update kind codes.
mod kind {
    pub(super) const ALIVE: u8 = 1;
    pub(super) const SUSPECT: u8 = 2;
    pub(super) const DEAD: u8 = 3;
    pub(super) const LEFT: u8 = 4;
}

/// Push-pull flag bits.
mod flag {
    pub(super) const JOIN: u8 = 0x01;
    pub(super) const REPLY: u8 = 0x02;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    /// A ping from "a" to "b", seq 7, carrying one alive and one suspect.
    #[rustfmt::skip]
    static PING: [u8; 37] = [
        0x01,                               // type: ping
        0x01, b'a',                         // from: "a"
        0x00, 0x00, 0x00, 0x07,             // seq: 7
        0x01, b'b',                         // target: "b"
        0x02,                               // 2 updates
        0x01,                               // alive
        0x01, b'c',                         //   name "c"
        0x00, 0x00, 0x00, 0x03,             //   incarnation 3
        0x04, 10, 0, 0, 3, 0x1e, 0x61,      //   10.0.0.3:7777
        0x00, 0x02, 0xca, 0xfe,             //   meta: 2 octets
        0x02,                               // suspect
        0x01, b'b',                         //   name "b"
        0x00, 0x00, 0x00, 0x01,             //   incarnation 1
        0x01, b'a',                         //   from "a"
    ];

    fn ping() -> Packet {
        Packet {
            from: name("a"),
            message: Message::Ping {
                seq: 7,
                target: name("b"),
            },
            updates: vec![
                Update::Alive {
                    name: name("c"),
                    incarnation: 3,
                    addr: "10.0.0.3:7777".parse().unwrap(),
                    meta: Meta::new(vec![0xca, 0xfe]).unwrap(),
                },
                Update::Suspect {
                    name: name("b"),
                    incarnation: 1,
                    from: name("a"),
                },
            ],
        }
    }

    #[test]
    fn packet_parse() {
        let bytes = Bytes::from_static(&PING);
        assert_eq!(Packet::parse(&bytes).unwrap(), ping());
    }

    #[test]
    fn packet_emit() {
        let p = ping();
        assert_eq!(p.buffer_len(), PING.len());
        let mut buf = BytesMut::from(&[0xa5; 3][..]);
        p.emit(&mut buf).unwrap();
        assert_eq!(&buf[..3], &[0xa5; 3]);
        assert_eq!(&buf[3..], &PING[..]);
    }

    #[test]
    fn packet_trailing_and_truncated() {
        let mut b = PING.to_vec();
        b.extend_from_slice(&[0, 0]);
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::TrailingBytes { offset: 37, len: 2 })
        );
        for len in 0..PING.len() {
            let bytes = Bytes::copy_from_slice(&PING[..len]);
            assert!(
                matches!(Packet::parse(&bytes), Err(DecodeError::Truncated { .. })),
                "len {len}"
            );
        }
    }

    #[test]
    fn packet_bad_codes() {
        let mut b = PING[..].to_vec();
        b[0] = 16;
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::UnknownType {
                offset: 0,
                value: 16
            })
        );
        let mut b = PING[..].to_vec();
        b[10] = 9;
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::UnknownUpdate {
                offset: 10,
                value: 9
            })
        );
        let mut b = PING[..].to_vec();
        b[17] = 5;
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::UnknownFamily {
                offset: 17,
                value: 5
            })
        );
        let mut b = PING[..].to_vec();
        b[2] = 0xff;
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::InvalidName { offset: 1 })
        );
        let mut b = PING[..].to_vec();
        b[1] = 0;
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::InvalidName { offset: 1 })
        );
        let mut b = PING[..].to_vec();
        b[24] = 0x02;
        b[25] = 0x01;
        assert_eq!(
            Packet::parse(&Bytes::from(b)),
            Err(DecodeError::MetadataTooLong {
                offset: 24,
                len: 513
            })
        );
    }

    #[test]
    fn every_message_round_trips() {
        let addr6: SocketAddr = "[2001:db8::1]:7946".parse().unwrap();
        let messages = [
            Message::Ack { seq: u32::MAX },
            Message::Nack { seq: 0 },
            Message::PingReq {
                seq: 9,
                target: name("t"),
                addr: addr6,
            },
            Message::Gossip,
        ];
        for message in messages {
            let p = Packet {
                from: name("sender"),
                message,
                updates: vec![
                    Update::Dead {
                        name: name("x"),
                        incarnation: 2,
                        from: name("y"),
                    },
                    Update::Left {
                        name: name("z"),
                        incarnation: 0,
                    },
                ],
            };
            let mut buf = BytesMut::new();
            p.emit(&mut buf).unwrap();
            assert_eq!(buf.len(), p.buffer_len());
            assert_eq!(Packet::parse(&buf.freeze()).unwrap(), p);
        }
    }

    #[test]
    fn push_pull_round_trip() {
        let pp = PushPull {
            from: name("a"),
            addr: "10.0.0.1:7946".parse().unwrap(),
            join: true,
            reply: true,
            members: vec![
                Member {
                    name: name("a"),
                    addr: "10.0.0.1:7946".parse().unwrap(),
                    incarnation: 1,
                    meta: Meta::new(&b"node-a"[..]).unwrap(),
                    state: State::Alive,
                },
                Member {
                    name: name("b"),
                    addr: "[fd00::2]:7946".parse().unwrap(),
                    incarnation: 4,
                    meta: Meta::default(),
                    state: State::Dead,
                },
            ],
        };
        let mut buf = BytesMut::new();
        pp.emit(&mut buf).unwrap();
        assert_eq!(buf.len(), pp.buffer_len());
        #[rustfmt::skip]
        let head = [
            16,                                 // type: push-pull
            0x01, b'a',                         // from
            4, 10, 0, 0, 1, 0x1f, 0x0a,         // addr 10.0.0.1:7946
            0x03,                               // join | reply
            0x00, 0x02,                         // 2 members
            0x00, 0x01, b'a',                   // alive "a"
        ];
        assert_eq!(&buf[..head.len()], &head);
        let bytes = buf.freeze();
        assert_eq!(PushPull::parse(&bytes).unwrap(), pp);
        assert!(matches!(
            Packet::parse(&bytes),
            Err(DecodeError::UnknownType { value: 16, .. })
        ));
        let mut b = bytes.to_vec();
        b[10] = 0x04;
        assert_eq!(
            PushPull::parse(&Bytes::from(b)),
            Err(DecodeError::Flags {
                offset: 10,
                value: 4
            })
        );
        let mut b = bytes.to_vec();
        b[13] = 7;
        assert_eq!(
            PushPull::parse(&Bytes::from(b)),
            Err(DecodeError::UnknownState {
                offset: 13,
                value: 7
            })
        );
    }

    #[test]
    fn huge_count_does_not_allocate() {
        // 65535 members claimed, none present.
        let b = Bytes::from_static(&[16, 1, b'a', 4, 1, 2, 3, 4, 0, 1, 0, 0xff, 0xff]);
        assert!(matches!(
            PushPull::parse(&b),
            Err(DecodeError::Truncated { offset: 13, .. })
        ));
    }

    #[test]
    fn too_many_updates() {
        let mut p = ping();
        p.updates = vec![
            Update::Left {
                name: name("z"),
                incarnation: 0
            };
            256
        ];
        let mut buf = BytesMut::new();
        assert_eq!(
            p.emit(&mut buf),
            Err(EncodeError::TooManyUpdates { count: 256 })
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn display() {
        assert_eq!(
            ping().to_string(),
            "ping seq=7 target=b from=a; alive c@3 10.0.0.3:7777 meta=2; suspect b@1 by a"
        );
    }
}
