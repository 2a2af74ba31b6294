//! The BGP-4 wire format: parse and emit every message (RFC 4271 and its
//! extensions).
//!
//! Pure code: no I/O, no clock. Parsing reads `&[u8]` without copying
//! until values are built, never panics on any input and never allocates
//! in proportion to a length field before the bytes it claims are present.
//! Leaf reads go through a small bounded cursor (`reader`), the fallback
//! STYLE.md §4 names: nom's were measurably slower on the hot path.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                           Marker                              |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Length               |      Type     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

pub mod as4;
pub mod attr;
pub mod error;
pub mod iana;
#[cfg(feature = "json")]
pub mod json;
pub mod nlri;
pub mod notification;
pub mod open;
pub mod pack;
mod reader;
pub mod records;
pub mod route_refresh;
pub mod update;

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

pub use self::attr::{
    Aggregator, AsPath, AsSegment, AttrFlags, AttrValue, Community, ExtendedCommunity,
    Ipv6ExtendedCommunity, LargeCommunity, MpReach, MpUnreach, NextHop, Origin, PathAttribute,
    RawMp, SegmentType, Segments, UnknownAttr,
};
pub use self::error::{
    Action, AttrError, DecodeError, HeaderError, OpenError, RouteRefreshError, UpdateError,
};
pub use self::iana::{Afi, AttrType, CapabilityCode, ErrorCode, MessageType, Safi};
pub use self::nlri::{Ipv4Prefix, Ipv6Prefix, Nlri};
pub use self::notification::Notification;
pub use self::open::{Capability, HoldTime, Open, ParamLayout};
pub use self::pack::UpdateEncoder;
use self::reader::Reader;
pub use self::records::{
    ClusterList, Communities, ExtendedCommunities, Ipv6ExtendedCommunities, LargeCommunities,
    Record, Records,
};
pub use self::route_refresh::{RefreshSubtype, RouteRefresh};
pub use self::update::Update;

/// Length of the message header.
pub const HEADER_LEN: usize = 19;
/// Largest message without RFC 8654 extended messages.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// Largest message with RFC 8654 extended messages.
pub const MAX_EXTENDED_MESSAGE_LEN: usize = 65535;

/// What a session negotiated that changes how messages in one direction
/// are decoded (RFC 6793, RFC 7911, RFC 8654).
///
/// ADD-PATH is per direction: decode with the families the peer may send
/// path identifiers for, encode with those we may send them for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct DecodeCtx {
    /// 4-octet AS numbers in AS_PATH and AGGREGATOR.
    pub as4: bool,
    /// Messages up to 65535 octets (never OPEN or KEEPALIVE).
    pub extended_message: bool,
    /// Families whose NLRI carry path identifiers.
    pub add_path: AddPathSet,
}

/// The encoding side of [`DecodeCtx`]: the same facts, for what we send.
pub type EncodeCtx = DecodeCtx;

impl Default for DecodeCtx {
    /// The context before OPENs are exchanged, and with a modern peer:
    /// 4-octet AS on, no ADD-PATH, 4096-octet messages.
    fn default() -> Self {
        Self {
            as4: true,
            extended_message: false,
            add_path: AddPathSet::EMPTY,
        }
    }
}

impl DecodeCtx {
    /// Largest message length for UPDATE, NOTIFICATION and ROUTE-REFRESH.
    pub fn max_len(&self) -> usize {
        if self.extended_message {
            MAX_EXTENDED_MESSAGE_LEN
        } else {
            MAX_MESSAGE_LEN
        }
    }
}

/// The address families ferrolb decodes and originates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Family {
    /// AFI 1, SAFI 1.
    Ipv4Unicast,
    /// AFI 2, SAFI 1.
    Ipv6Unicast,
}

impl Family {
    /// Every family.
    pub const ALL: [Self; 2] = [Self::Ipv4Unicast, Self::Ipv6Unicast];

    /// The family of an AFI/SAFI pair, if we decode it.
    pub fn from_afi_safi(afi: Afi, safi: Safi) -> Option<Self> {
        match (afi, safi) {
            (Afi::Ipv4, Safi::Unicast) => Some(Self::Ipv4Unicast),
            (Afi::Ipv6, Safi::Unicast) => Some(Self::Ipv6Unicast),
            _ => None,
        }
    }

    /// Its AFI.
    pub fn afi(self) -> Afi {
        match self {
            Self::Ipv4Unicast => Afi::Ipv4,
            Self::Ipv6Unicast => Afi::Ipv6,
        }
    }

    /// Its SAFI.
    pub fn safi(self) -> Safi {
        Safi::Unicast
    }

    fn bit(self) -> u8 {
        match self {
            Self::Ipv4Unicast => 1,
            Self::Ipv6Unicast => 2,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ipv4Unicast => "ipv4-unicast",
            Self::Ipv6Unicast => "ipv6-unicast",
        })
    }
}

/// A set of [`Family`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct AddPathSet(u8);

impl AddPathSet {
    /// No family.
    pub const EMPTY: Self = Self(0);

    /// Adds a family.
    pub fn insert(&mut self, family: Family) {
        self.0 |= family.bit();
    }

    /// Whether a family is in the set.
    pub fn contains(self, family: Family) -> bool {
        self.0 & family.bit() != 0
    }

    /// A set of the given families.
    pub fn of(families: &[Family]) -> Self {
        let mut set = Self::EMPTY;
        families.iter().for_each(|f| set.insert(*f));
        set
    }
}

/// A BGP message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Message {
    /// OPEN.
    Open(Open),
    /// UPDATE.
    Update(Update),
    /// NOTIFICATION.
    Notification(Notification),
    /// KEEPALIVE.
    Keepalive,
    /// ROUTE-REFRESH.
    RouteRefresh(RouteRefresh),
}

/// A message that cannot be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The message would exceed the negotiated maximum length.
    #[error("message of {len} octets exceeds the maximum of {max}")]
    TooLong {
        /// Length it would have.
        len: usize,
        /// Maximum allowed.
        max: usize,
    },
}

/// The fixed part of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The length field: the whole message, header included.
    pub length: u16,
    /// The type field.
    pub kind: MessageType,
}

impl Header {
    /// Reads and checks a header at the start of `buf`: `Ok(None)` when
    /// fewer than 19 octets are there. Checks the marker and that the
    /// length is within 19..=max for the type (RFC 4271 §6.1, RFC 8654 §4).
    pub fn parse(buf: &[u8], ctx: &DecodeCtx) -> Result<Option<Self>, HeaderError> {
        let Some((marker, [l0, l1, kind])) = buf
            .first_chunk::<HEADER_LEN>()
            .and_then(|h| h.split_first_chunk::<16>())
        else {
            return Ok(None);
        };
        // One comparison of two words, not a loop over sixteen octets.
        if *marker != [0xff; 16] {
            return Err(HeaderError::NotSynchronized);
        }
        let length = u16::from_be_bytes([*l0, *l1]);
        let kind = MessageType::from(*kind);
        let max = match kind {
            // RFC 8654 §3: OPEN and KEEPALIVE never exceed 4096.
            MessageType::Open | MessageType::Keepalive => MAX_MESSAGE_LEN,
            _ => ctx.max_len(),
        };
        if usize::from(length) < HEADER_LEN || usize::from(length) > max {
            return Err(HeaderError::BadLength { length });
        }
        Ok(Some(Self { length, kind }))
    }
}

impl Message {
    /// Parses exactly one whole message (header included), as cut by
    /// [`crate::frame::decode`].
    ///
    /// UPDATE attribute errors that RFC 7606 handles without a reset are
    /// returned inside the [`Update`]; everything else is a
    /// [`DecodeError`] that converts into the NOTIFICATION to send.
    ///
    /// Values that keep octets (unknown attributes, raw MP attributes,
    /// AS paths and community lists) copy them out of `buf`;
    /// [`Self::parse_bytes`] shares them instead.
    pub fn parse(buf: &[u8], ctx: &DecodeCtx) -> Result<Self, DecodeError> {
        Self::parse_in(buf, attr::Backing(None), ctx)
    }

    /// Parses exactly one whole message, as [`Self::parse`], with the
    /// values that keep octets holding slices of `buf` instead of copies:
    /// no allocation per AS path, community list or unknown attribute.
    /// Keeping such a value keeps all of `buf`'s allocation alive (for a
    /// frame cut from a read buffer, that buffer): copy what is stored for
    /// long.
    pub fn parse_bytes(buf: &Bytes, ctx: &DecodeCtx) -> Result<Self, DecodeError> {
        Self::parse_in(buf, attr::Backing(Some(buf)), ctx)
    }

    fn parse_in(buf: &[u8], view: attr::Backing<'_>, ctx: &DecodeCtx) -> Result<Self, DecodeError> {
        let Some(header) = Header::parse(buf, ctx)? else {
            let length = u16::try_from(buf.len()).unwrap_or(u16::MAX);
            return Err(HeaderError::BadLength { length }.into());
        };
        let length = header.length;
        if usize::from(length) != buf.len() {
            return Err(HeaderError::BadLength { length }.into());
        }
        let body = Reader::with_base(&buf[HEADER_LEN..], HEADER_LEN);
        let bad_length = HeaderError::BadLength { length };
        // RFC 4271 §6.1 minimum lengths per type.
        let body_len = body.remaining();
        match header.kind {
            MessageType::Open if body_len < 10 => Err(bad_length.into()),
            MessageType::Open => Ok(Self::Open(Open::parse_body(body)?)),
            MessageType::Update if body_len < 4 => Err(bad_length.into()),
            MessageType::Update => Ok(Self::Update(Update::parse_body(body, buf, view, ctx)?)),
            MessageType::Notification if body_len < 2 => Err(bad_length.into()),
            MessageType::Notification => {
                Ok(Self::Notification(Notification::parse_body(body.rest())))
            }
            MessageType::Keepalive if body_len != 0 => Err(bad_length.into()),
            MessageType::Keepalive => Ok(Self::Keepalive),
            MessageType::RouteRefresh => match <[u8; 4]>::try_from(body.rest()) {
                Ok(b) => Ok(Self::RouteRefresh(RouteRefresh::parse_body(b))),
                Err(_) => Err(RouteRefreshError::InvalidLength {
                    length,
                    message: Bytes::copy_from_slice(buf),
                }
                .into()),
            },
            MessageType::Unknown(type_code) => Err(HeaderError::BadType { type_code }.into()),
        }
    }

    /// The message type.
    pub fn kind(&self) -> MessageType {
        match self {
            Self::Open(_) => MessageType::Open,
            Self::Update(_) => MessageType::Update,
            Self::Notification(_) => MessageType::Notification,
            Self::Keepalive => MessageType::Keepalive,
            Self::RouteRefresh(_) => MessageType::RouteRefresh,
        }
    }

    /// Appends the whole message (header included) to `out`. On error
    /// `out` is left as it was.
    pub fn emit(&self, ctx: &EncodeCtx, out: &mut BytesMut) -> Result<(), EncodeError> {
        let start = out.len();
        let body_len = match self {
            Self::Open(o) => o.body_len(),
            Self::Update(u) => u.body_len(ctx),
            Self::Notification(n) => n.body_len(),
            Self::Keepalive => 0,
            Self::RouteRefresh(_) => 4,
        };
        let len = HEADER_LEN + body_len;
        let max = match self {
            Self::Open(_) | Self::Keepalive => MAX_MESSAGE_LEN,
            _ => ctx.max_len(),
        };
        if len > max {
            return Err(EncodeError::TooLong { len, max });
        }
        out.reserve(len);
        out.put_slice(&[0xff; 16]);
        out.put_u16(len as u16);
        out.put_u8(self.kind().into());
        match self {
            Self::Open(o) => o.emit_body(out),
            Self::Update(u) => u.emit_body(ctx, out),
            Self::Notification(n) => n.emit_body(out),
            Self::Keepalive => {}
            Self::RouteRefresh(r) => r.emit_body(out),
        }
        debug_assert_eq!(out.len() - start, len, "body_len and emit disagree");
        Ok(())
    }

    /// The message as bytes, or an error if it is too long.
    pub fn to_bytes(&self, ctx: &EncodeCtx) -> Result<Bytes, EncodeError> {
        let mut out = BytesMut::new();
        self.emit(ctx, &mut out)?;
        Ok(out.freeze())
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(o) => o.fmt(f),
            Self::Update(u) => u.fmt(f),
            Self::Notification(n) => n.fmt(f),
            Self::Keepalive => f.write_str("KEEPALIVE"),
            Self::RouteRefresh(r) => r.fmt(f),
        }
    }
}

/// Formats bytes as lowercase hex.
pub struct HexBytes<'a>(pub &'a [u8]);

impl fmt::Display for HexBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

#[cfg(feature = "arbitrary")]
pub(crate) fn arbitrary_bytes(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<Bytes> {
    let len = u.int_in_range(0..=64)?;
    Ok(Bytes::copy_from_slice(u.bytes(len)?))
}
