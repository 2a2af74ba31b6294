//! Member identity and state: names, metadata, incarnations and the SWIM
//! state of one member.
//!
//! Plain data shared by the wire layer and the core. Nothing here does I/O
//! or keeps time; the types only make invalid values unrepresentable (an
//! empty name, oversized metadata).

use std::borrow::Borrow;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

/// A member's incarnation number (SWIM §4.2): only the member itself raises
/// it, to refute a suspicion or to announce new metadata. A newer
/// incarnation overrides every older statement about the member.
///
/// Incarnations are serial numbers (RFC 1982, 32 bits): they wrap from
/// `u32::MAX` to 0 and are compared with [`is_newer`], never with `<`.
pub type Incarnation = u32;

/// Whether incarnation `a` is newer than `b` in RFC 1982 serial number
/// arithmetic: `a` is 1 to 2³¹ − 1 steps ahead of `b`, counting around the
/// wrap from `u32::MAX` to 0. Exactly 2³¹ apart, neither is newer (RFC 1982
/// §3.2 leaves that pair undefined); the core treats such a statement as
/// stale.
///
/// Why not `>`: a member refutes a statement about itself at incarnation
/// `i` with `i + 1`, and that must beat `i` for every `i`. With plain
/// integers a suspicion or death at `u32::MAX`, from a buggy or stale
/// member, could never be outbid, and the member would stay dead. With
/// serial numbers `i.wrapping_add(1)` is always newer than `i`. Two
/// incarnations compared are always close (one step per refutation or
/// metadata change), so the window of 2³¹ is never reached in practice.
#[must_use]
pub fn is_newer(a: Incarnation, b: Incarnation) -> bool {
    let ahead = a.wrapping_sub(b);
    ahead != 0 && ahead < 1 << 31
}

/// `a` is `b` or newer ([`is_newer`]): the rule for suspicions, deaths and
/// leaves, which override a statement of the same incarnation.
#[must_use]
pub fn is_current(a: Incarnation, b: Incarnation) -> bool {
    a == b || is_newer(a, b)
}

/// A member's unique name, 1 to [`Name::MAX_LEN`] octets of UTF-8.
///
/// The speaker uses the Kubernetes node name. Cloning is cheap (shared).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<str>);

impl Name {
    /// The longest name in octets: its wire length is one octet.
    pub const MAX_LEN: usize = 255;

    /// Checks and wraps a name.
    ///
    /// # Errors
    /// [`NameError`] if `name` is empty or longer than [`Name::MAX_LEN`].
    pub fn new(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if name.len() > Self::MAX_LEN {
            return Err(NameError::TooLong { len: name.len() });
        }
        Ok(Self(Arc::from(name)))
    }

    /// The name as a string slice.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Name {
    type Error = NameError;

    fn try_from(name: &str) -> Result<Self, NameError> {
        Self::new(name)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Name {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let s: &str = u.arbitrary()?;
        let mut end = s.len().min(Self::MAX_LEN);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        Self::new(&s[..end])
            .or_else(|_| Self::new("n").map_err(|_| arbitrary::Error::IncorrectFormat))
    }
}

/// Why a string is not a valid [`Name`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("member name is empty")]
    Empty,
    /// The name is longer than [`Name::MAX_LEN`] octets.
    #[error("member name is {len} octets, more than 255")]
    TooLong {
        /// The rejected length.
        len: usize,
    },
}

/// Opaque member metadata, at most [`Meta::MAX_LEN`] octets.
///
/// The speaker puts its node name and addresses here; a change is announced
/// with a higher incarnation and seen by the others as
/// [`Event::Updated`](crate::Event::Updated).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Meta(Bytes);

impl Meta {
    /// The largest metadata in octets. It bounds every update so that one
    /// always fits in a UDP packet with room to spare.
    pub const MAX_LEN: usize = 512;

    /// Checks and wraps metadata.
    ///
    /// # Errors
    /// [`MetaTooLong`] if `bytes` is longer than [`Meta::MAX_LEN`].
    pub fn new(bytes: impl Into<Bytes>) -> Result<Self, MetaTooLong> {
        let bytes = bytes.into();
        if bytes.len() > Self::MAX_LEN {
            return Err(MetaTooLong { len: bytes.len() });
        }
        Ok(Self(bytes))
    }

    /// The metadata octets.
    #[must_use]
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// The length in octets.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the metadata is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Meta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Meta({} octets)", self.0.len())
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Meta {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let v: &[u8] = u.arbitrary()?;
        let v = &v[..v.len().min(Self::MAX_LEN)];
        Ok(Self(Bytes::copy_from_slice(v)))
    }
}

/// Metadata longer than [`Meta::MAX_LEN`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("member metadata is {len} octets, more than 512")]
pub struct MetaTooLong {
    /// The rejected length.
    pub len: usize,
}

/// A member's SWIM state (SWIM §4.2, plus a graceful `Left`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum State {
    /// Answering probes.
    Alive,
    /// Missed a probe and its indirect probes; becomes `Dead` unless it
    /// refutes before the suspicion timeout.
    Suspect,
    /// Declared failed (the `Down` of the events).
    Dead,
    /// Left gracefully.
    Left,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Alive => "alive",
            Self::Suspect => "suspect",
            Self::Dead => "dead",
            Self::Left => "left",
        })
    }
}

/// What is known about one member: a snapshot, also carried in full-state
/// (push-pull) messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Member {
    /// Unique name.
    pub name: Name,
    /// Address for the packet and stream transports.
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::message::arbitrary_addr))]
    pub addr: SocketAddr,
    /// Incarnation of the statement this snapshot comes from.
    pub incarnation: Incarnation,
    /// Opaque metadata.
    pub meta: Meta,
    /// SWIM state.
    pub state: State,
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} inc={} meta={}",
            self.name,
            self.addr,
            self.state,
            self.incarnation,
            self.meta.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_bounds() {
        assert_eq!(Name::new(""), Err(NameError::Empty));
        assert!(Name::new(&"a".repeat(255)).is_ok());
        assert_eq!(
            Name::new(&"a".repeat(256)),
            Err(NameError::TooLong { len: 256 })
        );
        let n = Name::new("node-1").unwrap();
        assert_eq!(n.as_str(), "node-1");
        assert_eq!(n.to_string(), "node-1");
        assert_eq!(format!("{n:?}"), "\"node-1\"");
    }

    #[test]
    fn incarnations_are_serial_numbers() {
        assert!(is_newer(1, 0));
        assert!(!is_newer(0, 1));
        assert!(!is_newer(7, 7));
        // Around the wrap: 0 follows u32::MAX.
        assert!(is_newer(0, u32::MAX));
        assert!(!is_newer(u32::MAX, 0));
        assert!(is_newer(u32::MAX, u32::MAX - 1));
        // The farthest ahead that still counts as newer, and the undefined
        // pair exactly 2^31 apart, which is newer neither way.
        assert!(is_newer((1 << 31) - 1, 0));
        assert!(!is_newer(1 << 31, 0) && !is_newer(0, 1 << 31));
        // i + 1 beats i for every i: a refutation always wins.
        for i in [0, 1, 1 << 31, (1 << 31) - 1, u32::MAX - 1, u32::MAX] {
            assert!(is_newer(i.wrapping_add(1), i), "{i}");
            assert!(is_current(i, i) && is_current(i.wrapping_add(1), i));
        }
    }

    #[test]
    fn meta_bounds() {
        assert!(Meta::new(vec![0; 512]).is_ok());
        assert_eq!(Meta::new(vec![0; 513]), Err(MetaTooLong { len: 513 }));
        assert!(Meta::default().is_empty());
    }
}
