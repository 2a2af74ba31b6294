//! ROUTE-REFRESH (RFC 2918 §3) with the RFC 7313 message subtypes.
//!
//! ```text
//!  0       7      15      23      31
//! +-------+-------+-------+-------+
//! |      AFI      | Subtyp|  SAFI |
//! +-------+-------+-------+-------+
//! ```

use std::fmt;

use bytes::{BufMut, BytesMut};

use super::iana::{Afi, Safi};

/// A ROUTE-REFRESH message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RouteRefresh {
    /// Address family.
    pub afi: Afi,
    /// Message subtype (RFC 7313 §3).
    pub subtype: RefreshSubtype,
    /// Subsequent address family.
    pub safi: Safi,
}

/// ROUTE-REFRESH message subtypes (RFC 7313 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum RefreshSubtype {
    /// 0: a normal route refresh request.
    Request,
    /// 1: Beginning of Route Refresh.
    BeginningOfRefresh,
    /// 2: End of Route Refresh.
    EndOfRefresh,
    /// Any other value: RFC 7313 §5 says to ignore the message.
    Unknown(u8),
}

impl RefreshSubtype {
    fn from_wire(v: u8) -> Self {
        match v {
            0 => Self::Request,
            1 => Self::BeginningOfRefresh,
            2 => Self::EndOfRefresh,
            other => Self::Unknown(other),
        }
    }

    fn to_wire(self) -> u8 {
        match self {
            Self::Request => 0,
            Self::BeginningOfRefresh => 1,
            Self::EndOfRefresh => 2,
            Self::Unknown(v) => v,
        }
    }
}

impl RouteRefresh {
    /// A plain refresh request for an AFI/SAFI.
    pub fn request(afi: Afi, safi: Safi) -> Self {
        Self {
            afi,
            subtype: RefreshSubtype::Request,
            safi,
        }
    }

    /// Parses the 4-octet body (length checked by the caller).
    pub(crate) fn parse_body(b: [u8; 4]) -> Self {
        Self {
            afi: Afi::from(u16::from_be_bytes([b[0], b[1]])),
            subtype: RefreshSubtype::from_wire(b[2]),
            safi: Safi::from(b[3]),
        }
    }

    /// Appends the body.
    pub(crate) fn emit_body(&self, out: &mut BytesMut) {
        out.put_u16(self.afi.into());
        out.put_u8(self.subtype.to_wire());
        out.put_u8(self.safi.into());
    }
}

impl fmt::Display for RouteRefresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ROUTE-REFRESH {:?}/{:?} {:?}",
            self.afi, self.safi, self.subtype
        )
    }
}
