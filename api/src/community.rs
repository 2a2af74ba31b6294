//! BGP community strings, as in `BGPAdvertisement.spec.communities` and
//! `Community.spec.communities[].value`.
//!
//! MetalLB's syntax: a standard community (RFC 1997) is `<u16>:<u16>`, such
//! as `65535:65282`; a large community (RFC 8092) is
//! `large:<u32>:<u32>:<u32>`. Anything with another number of colon-separated
//! parts is not a community at all, and in an advertisement it is read as
//! the name of an alias defined in a `Community` object. Pure parsing.

use std::fmt;

/// A parsed BGP community.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Community {
    /// RFC 1997: the high 16 bits (usually an AS number) and the low 16 bits.
    Standard(u16, u16),
    /// RFC 8092: global administrator, local data part 1, local data part 2.
    Large(u32, u32, u32),
}

impl Community {
    /// Parses `a:b` or `large:a:b:c`.
    pub fn parse(text: &str) -> Result<Self, CommunityError> {
        let parts: Vec<&str> = text.split(':').collect();
        match parts.as_slice() {
            [high, low] => Ok(Self::Standard(number(high)?, number(low)?)),
            [marker, a, b, c] => {
                if *marker != LARGE_MARKER {
                    return Err(CommunityError::LargeMarker);
                }
                Ok(Self::Large(number(a)?, number(b)?, number(c)?))
            }
            _ => Err(CommunityError::Format),
        }
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Standard(high, low) => write!(f, "{high}:{low}"),
            Self::Large(a, b, c) => write!(f, "{LARGE_MARKER}:{a}:{b}:{c}"),
        }
    }
}

/// Well-known communities (RFC 1997, RFC 3765, RFC 7999, RFC 8326) by the
/// names routers use. An extension over MetalLB, which needs a Community
/// alias for them: `no-export` in a BGPAdvertisement just works.
pub const WELL_KNOWN: [(&str, u32); 6] = [
    ("graceful-shutdown", 0xFFFF_0000),
    ("blackhole", 0xFFFF_029A),
    ("no-export", 0xFFFF_FF01),
    ("no-advertise", 0xFFFF_FF02),
    ("no-export-subconfed", 0xFFFF_FF03),
    ("no-peer", 0xFFFF_FF04),
];

/// The value of a well-known community name.
pub fn well_known(name: &str) -> Option<u32> {
    WELL_KNOWN.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}

/// Why a string is not a community.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommunityError {
    /// Neither two nor four colon-separated parts. In an advertisement, such
    /// a string names a `Community` alias instead.
    #[error("is not of the form <0-65535>:<0-65535> or large:<uint32>:<uint32>:<uint32>")]
    Format,
    /// Four parts, but the first is not `large`.
    #[error("has four parts but does not start with \"large:\"")]
    LargeMarker,
    /// A part is not a decimal number that fits its field.
    #[error("has part {0:?}, which is not a number in range")]
    Value(String),
}

/// Parses one decimal part: digits only, as Go's `strconv.ParseUint` (no sign).
fn number<T: TryFrom<u64>>(part: &str) -> Result<T, CommunityError> {
    let bad = || CommunityError::Value(part.into());
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let wide: u64 = part.parse().map_err(|_| bad())?;
    T::try_from(wide).map_err(|_| bad())
}

const LARGE_MARKER: &str = "large";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_and_large() {
        assert_eq!(
            Community::parse("65000:100"),
            Ok(Community::Standard(65000, 100))
        );
        assert_eq!(Community::parse("0:0"), Ok(Community::Standard(0, 0)));
        assert_eq!(
            Community::parse("65535:65282"),
            Ok(Community::Standard(65535, 65282))
        );
        assert_eq!(
            Community::parse("large:1:2:3"),
            Ok(Community::Large(1, 2, 3))
        );
        assert_eq!(
            Community::parse("large:4294967295:0:4294967295"),
            Ok(Community::Large(u32::MAX, 0, u32::MAX))
        );
        assert_eq!(Community::Large(1, 2, 3).to_string(), "large:1:2:3");
        assert_eq!(Community::Standard(65000, 1).to_string(), "65000:1");
    }

    #[test]
    fn errors() {
        assert_eq!(
            Community::parse("65536:1"),
            Err(CommunityError::Value("65536".into()))
        );
        assert_eq!(
            Community::parse("1:-1"),
            Err(CommunityError::Value("-1".into()))
        );
        assert_eq!(
            Community::parse("1:+1"),
            Err(CommunityError::Value("+1".into()))
        );
        assert_eq!(
            Community::parse("1:"),
            Err(CommunityError::Value(String::new()))
        );
        assert_eq!(
            Community::parse("huge:1:2:3"),
            Err(CommunityError::LargeMarker)
        );
        assert_eq!(
            Community::parse("large:1:2:4294967296"),
            Err(CommunityError::Value("4294967296".into()))
        );
        // Not a community: in an advertisement, an alias name.
        assert_eq!(
            Community::parse("no-advertise"),
            Err(CommunityError::Format)
        );
        assert_eq!(Community::parse("1:2:3"), Err(CommunityError::Format));
    }
}
