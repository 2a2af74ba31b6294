//! OPEN (RFC 4271 §4.2) with optional parameters (RFC 5492, RFC 9072) and
//! capabilities.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+
//! |    Version    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     My Autonomous System      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Hold Time           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         BGP Identifier                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Opt Parm Len  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |             Optional Parameters (variable)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! RFC 9072: when `Opt Parm Len` is 255 and the first parameter type is
//! 255, a 2-octet length follows and every parameter has a 2-octet length.

use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use super::error::OpenError;
use super::iana::{AS_TRANS, Afi, CapabilityCode, Safi};
use super::reader::Reader;

/// BGP version 4, the only one.
pub const BGP_VERSION: u8 = 4;

/// An OPEN message. A parsed value has version 4, a hold time of 0 or at
/// least 3 s, a non-zero BGP Identifier and AS, and well-formed
/// capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Open {
    /// The 2-octet My Autonomous System field: `AS_TRANS` when the real AS
    /// needs 4 octets (see [`Open::asn`]).
    pub my_as: u16,
    /// Proposed hold time.
    pub hold_time: HoldTime,
    /// BGP Identifier.
    pub bgp_id: Ipv4Addr,
    /// Capabilities in wire order.
    pub capabilities: Vec<Capability>,
    /// How the capabilities were spread over optional parameters, so that
    /// parse then emit gives back the same bytes.
    pub layout: ParamLayout,
}

/// How capabilities are packed into Capabilities optional parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ParamLayout {
    /// One parameter holding every capability (what we send).
    #[default]
    Single,
    /// One parameter per capability.
    PerCapability,
    /// Any other split: the number of capabilities in each parameter.
    Groups(Vec<usize>),
    /// RFC 9072 extended format with one parameter holding every
    /// capability (used whatever the layout when the parameters exceed 255
    /// octets).
    Extended,
    /// RFC 9072 extended format with another split, as in `Groups`.
    ExtendedGroups(Vec<usize>),
}

/// A hold time: 0 (no keepalives) or 3..=65535 seconds (RFC 4271 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HoldTime(u16);

impl HoldTime {
    /// RFC 4271 §10 suggested value.
    pub const DEFAULT: Self = Self(90);

    /// A hold time in seconds, or `None` for 1 and 2.
    pub const fn from_secs(secs: u16) -> Option<Self> {
        if secs == 1 || secs == 2 {
            None
        } else {
            Some(Self(secs))
        }
    }

    /// The value in seconds.
    pub const fn secs(self) -> u16 {
        self.0
    }

    /// The value as a duration.
    pub fn as_duration(self) -> Duration {
        Duration::from_secs(u64::from(self.0))
    }

    /// Whether keepalives and the hold timer are disabled.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for HoldTime {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        Self::from_secs(u16::arbitrary(u)?).ok_or(arbitrary::Error::IncorrectFormat)
    }
}

/// A capability (RFC 5492). Unknown codes are kept as bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Capability {
    /// Multiprotocol extensions for one AFI/SAFI (RFC 4760 §8).
    Multiprotocol {
        /// Address family.
        afi: Afi,
        /// Subsequent address family.
        safi: Safi,
    },
    /// Route refresh (RFC 2918).
    RouteRefresh,
    /// Extended next hop encoding (RFC 8950 §3).
    ExtendedNextHop(Vec<ExtendedNextHop>),
    /// Extended messages up to 65535 octets (RFC 8654).
    ExtendedMessage,
    /// Graceful restart (RFC 4724 §3).
    GracefulRestart(GracefulRestart),
    /// 4-octet AS support, carrying our AS (RFC 6793).
    FourOctetAs(u32),
    /// ADD-PATH (RFC 7911 §4).
    AddPath(Vec<AddPath>),
    /// Enhanced route refresh (RFC 7313).
    EnhancedRouteRefresh,
    /// Hostname and domain name (draft-walton-bgp-hostname-capability).
    Fqdn {
        /// Host name octets (ASCII in practice).
        #[cfg_attr(feature = "arbitrary", arbitrary(with = short_bytes))]
        hostname: Bytes,
        /// Domain name octets.
        #[cfg_attr(feature = "arbitrary", arbitrary(with = short_bytes))]
        domain: Bytes,
    },
    /// Any other capability, or a malformed informational one.
    Unknown {
        /// Capability code.
        code: u8,
        /// Capability value.
        #[cfg_attr(feature = "arbitrary", arbitrary(with = short_bytes))]
        data: Bytes,
    },
}

/// One entry of the extended next hop capability (RFC 8950 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ExtendedNextHop {
    /// NLRI AFI.
    pub afi: Afi,
    /// NLRI SAFI (2 octets in this capability).
    pub safi: u16,
    /// AFI of the next hop.
    pub next_hop_afi: Afi,
}

/// The graceful restart capability (RFC 4724 §3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct GracefulRestart {
    /// The 4 restart flag bits (`R` = 0x8, `N` = 0x4 of RFC 8538).
    pub flags: u8,
    /// Restart time in seconds (12 bits).
    pub restart_time: u16,
    /// Address families whose forwarding state may be preserved.
    pub families: Vec<GracefulRestartFamily>,
}

/// One AFI/SAFI of the graceful restart capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct GracefulRestartFamily {
    /// Address family.
    pub afi: Afi,
    /// Subsequent address family.
    pub safi: Safi,
    /// Flags; 0x80 is `F`, forwarding state preserved.
    pub flags: u8,
}

/// One entry of the ADD-PATH capability (RFC 7911 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct AddPath {
    /// Address family.
    pub afi: Afi,
    /// Subsequent address family.
    pub safi: Safi,
    /// Send/Receive field: 1 receive, 2 send, 3 both.
    pub send_receive: u8,
}

impl GracefulRestart {
    /// `R`: the sender has restarted.
    pub const RESTART_STATE: u8 = 0x8;
    /// `N`: the sender supports NOTIFICATION handling (RFC 8538).
    pub const NOTIFICATION: u8 = 0x4;
    /// Per-family `F`: forwarding state was preserved.
    pub const FORWARDING: u8 = 0x80;

    /// Whether `R` is set.
    pub fn restart_state(&self) -> bool {
        self.flags & Self::RESTART_STATE != 0
    }

    /// Restart time as a duration.
    pub fn restart_time(&self) -> Duration {
        Duration::from_secs(u64::from(self.restart_time))
    }
}

impl AddPath {
    /// Whether the sender of the capability can receive path identifiers.
    pub fn can_receive(&self) -> bool {
        self.send_receive & 1 != 0
    }

    /// Whether the sender of the capability can send path identifiers.
    pub fn can_send(&self) -> bool {
        self.send_receive & 2 != 0
    }
}

impl Capability {
    /// The capability code.
    pub fn code(&self) -> CapabilityCode {
        match self {
            Self::Multiprotocol { .. } => CapabilityCode::Multiprotocol,
            Self::RouteRefresh => CapabilityCode::RouteRefresh,
            Self::ExtendedNextHop(_) => CapabilityCode::ExtendedNextHop,
            Self::ExtendedMessage => CapabilityCode::ExtendedMessage,
            Self::GracefulRestart(_) => CapabilityCode::GracefulRestart,
            Self::FourOctetAs(_) => CapabilityCode::FourOctetAs,
            Self::AddPath(_) => CapabilityCode::AddPath,
            Self::EnhancedRouteRefresh => CapabilityCode::EnhancedRouteRefresh,
            Self::Fqdn { .. } => CapabilityCode::Fqdn,
            Self::Unknown { code, .. } => CapabilityCode::from(*code),
        }
    }

    /// Encoded length of the value (without code and length octets).
    fn value_len(&self) -> usize {
        match self {
            Self::Multiprotocol { .. } | Self::FourOctetAs(_) => 4,
            Self::RouteRefresh | Self::ExtendedMessage | Self::EnhancedRouteRefresh => 0,
            Self::ExtendedNextHop(v) => 6 * v.len(),
            Self::GracefulRestart(gr) => 2 + 4 * gr.families.len(),
            Self::AddPath(v) => 4 * v.len(),
            Self::Fqdn { hostname, domain } => 2 + hostname.len() + domain.len(),
            Self::Unknown { data, .. } => data.len(),
        }
    }

    /// Parses one capability value. Malformed informational capabilities
    /// (FQDN) become `Unknown`; malformed ones we act on are errors.
    fn parse(code: u8, mut v: Reader<'_>) -> Result<Self, OpenError> {
        let offset = v.offset();
        let bad = |reason| OpenError::Malformed { offset, reason };
        let len = v.remaining();
        let cap = match CapabilityCode::from(code) {
            CapabilityCode::Multiprotocol if len == 4 => {
                let afi = Afi::from(v.u16().map_err(|_| bad("short multiprotocol"))?);
                let _reserved = v.u8();
                let safi = Safi::from(v.u8().map_err(|_| bad("short multiprotocol"))?);
                Self::Multiprotocol { afi, safi }
            }
            CapabilityCode::Multiprotocol => {
                return Err(bad("multiprotocol capability length is not 4"));
            }
            CapabilityCode::RouteRefresh if len == 0 => Self::RouteRefresh,
            CapabilityCode::ExtendedMessage if len == 0 => Self::ExtendedMessage,
            CapabilityCode::EnhancedRouteRefresh if len == 0 => Self::EnhancedRouteRefresh,
            CapabilityCode::RouteRefresh
            | CapabilityCode::ExtendedMessage
            | CapabilityCode::EnhancedRouteRefresh => {
                return Err(bad("capability length is not 0"));
            }
            CapabilityCode::FourOctetAs if len == 4 => {
                Self::FourOctetAs(v.u32().map_err(|_| bad("short 4-octet AS"))?)
            }
            CapabilityCode::FourOctetAs => {
                return Err(bad("4-octet AS capability length is not 4"));
            }
            CapabilityCode::ExtendedNextHop if len.is_multiple_of(6) => {
                let mut entries = Vec::with_capacity(len / 6);
                while !v.is_empty() {
                    let short = |_| bad("short extended next hop entry");
                    entries.push(ExtendedNextHop {
                        afi: Afi::from(v.u16().map_err(short)?),
                        safi: v.u16().map_err(short)?,
                        next_hop_afi: Afi::from(v.u16().map_err(short)?),
                    });
                }
                Self::ExtendedNextHop(entries)
            }
            CapabilityCode::ExtendedNextHop => {
                return Err(bad(
                    "extended next hop capability length is not a multiple of 6",
                ));
            }
            CapabilityCode::GracefulRestart if len >= 2 && (len - 2).is_multiple_of(4) => {
                let short = |_| bad("short graceful restart capability");
                let word = v.u16().map_err(short)?;
                let mut families = Vec::with_capacity((len - 2) / 4);
                while !v.is_empty() {
                    families.push(GracefulRestartFamily {
                        afi: Afi::from(v.u16().map_err(short)?),
                        safi: Safi::from(v.u8().map_err(short)?),
                        flags: v.u8().map_err(short)?,
                    });
                }
                Self::GracefulRestart(GracefulRestart {
                    flags: (word >> 12) as u8,
                    restart_time: word & 0x0fff,
                    families,
                })
            }
            CapabilityCode::GracefulRestart => {
                return Err(bad("graceful restart capability length is not 2 + 4n"));
            }
            CapabilityCode::AddPath if len.is_multiple_of(4) => {
                let short = |_| bad("short ADD-PATH entry");
                let mut entries = Vec::with_capacity(len / 4);
                while !v.is_empty() {
                    entries.push(AddPath {
                        afi: Afi::from(v.u16().map_err(short)?),
                        safi: Safi::from(v.u8().map_err(short)?),
                        send_receive: v.u8().map_err(short)?,
                    });
                }
                Self::AddPath(entries)
            }
            CapabilityCode::AddPath => {
                return Err(bad("ADD-PATH capability length is not a multiple of 4"));
            }
            CapabilityCode::Fqdn => match parse_fqdn(v.rest()) {
                Some((hostname, domain)) => Self::Fqdn { hostname, domain },
                None => Self::Unknown {
                    code,
                    data: Bytes::copy_from_slice(v.rest()),
                },
            },
            _ => Self::Unknown {
                code,
                data: Bytes::copy_from_slice(v.rest()),
            },
        };
        Ok(cap)
    }

    fn emit(&self, out: &mut BytesMut) {
        out.put_u8(self.code().into());
        // Values are bounded by construction to fit one octet when built by
        // parse; oversized values built by hand are truncated to 255.
        let len = self.value_len().min(255);
        out.put_u8(len as u8);
        let start = out.len();
        match self {
            Self::Multiprotocol { afi, safi } => {
                out.put_u16((*afi).into());
                out.put_u8(0);
                out.put_u8((*safi).into());
            }
            Self::RouteRefresh | Self::ExtendedMessage | Self::EnhancedRouteRefresh => {}
            Self::ExtendedNextHop(entries) => {
                for e in entries {
                    out.put_u16(e.afi.into());
                    out.put_u16(e.safi);
                    out.put_u16(e.next_hop_afi.into());
                }
            }
            Self::GracefulRestart(gr) => {
                out.put_u16((u16::from(gr.flags & 0xf) << 12) | (gr.restart_time & 0x0fff));
                for f in &gr.families {
                    out.put_u16(f.afi.into());
                    out.put_u8(f.safi.into());
                    out.put_u8(f.flags);
                }
            }
            Self::FourOctetAs(asn) => out.put_u32(*asn),
            Self::AddPath(entries) => {
                for e in entries {
                    out.put_u16(e.afi.into());
                    out.put_u8(e.safi.into());
                    out.put_u8(e.send_receive);
                }
            }
            Self::Fqdn { hostname, domain } => {
                out.put_u8(hostname.len().min(255) as u8);
                out.put_slice(&hostname[..hostname.len().min(255)]);
                out.put_u8(domain.len().min(255) as u8);
                out.put_slice(&domain[..domain.len().min(255)]);
            }
            Self::Unknown { data, .. } => out.put_slice(data),
        }
        out.truncate(start + len);
    }
}

fn parse_fqdn(v: &[u8]) -> Option<(Bytes, Bytes)> {
    let (&hlen, rest) = v.split_first()?;
    let host = rest.get(..usize::from(hlen))?;
    let rest = &rest[usize::from(hlen)..];
    let (&dlen, rest) = rest.split_first()?;
    let domain = rest.get(..usize::from(dlen))?;
    (rest.len() == usize::from(dlen))
        .then(|| (Bytes::copy_from_slice(host), Bytes::copy_from_slice(domain)))
}

/// Capabilities parameter type (RFC 5492).
const PARAM_CAPABILITIES: u8 = 2;
/// RFC 9072 marker in the Non-Ext OP Type position.
const PARAM_EXTENDED: u8 = 255;

impl Open {
    /// An OPEN for `asn`, with `my_as` set to `AS_TRANS` when `asn` needs 4
    /// octets. The caller lists the capabilities, including
    /// [`Capability::FourOctetAs`].
    pub fn new(
        asn: u32,
        hold_time: HoldTime,
        bgp_id: Ipv4Addr,
        capabilities: Vec<Capability>,
    ) -> Self {
        let my_as = u16::try_from(asn).unwrap_or(AS_TRANS);
        Self {
            my_as,
            hold_time,
            bgp_id,
            capabilities,
            layout: ParamLayout::Single,
        }
    }

    /// The sender's AS: the 4-octet AS capability when present (RFC 6793
    /// §4.1), else My Autonomous System.
    pub fn asn(&self) -> u32 {
        self.four_octet_as().unwrap_or(u32::from(self.my_as))
    }

    /// The AS of the 4-octet AS capability, if sent.
    pub fn four_octet_as(&self) -> Option<u32> {
        self.capabilities.iter().find_map(|c| match c {
            Capability::FourOctetAs(asn) => Some(*asn),
            _ => None,
        })
    }

    /// Parses the body (after the 19-octet header; offsets count from the
    /// start of the message).
    pub(crate) fn parse_body(mut r: Reader<'_>) -> Result<Self, OpenError> {
        let short = |s: super::reader::Short| OpenError::Malformed {
            offset: s.offset,
            reason: "truncated",
        };
        let version = r.u8().map_err(short)?;
        if version != BGP_VERSION {
            return Err(OpenError::UnsupportedVersion { version });
        }
        let my_as = r.u16().map_err(short)?;
        let hold = r.u16().map_err(short)?;
        let bgp_id = Ipv4Addr::from(r.u32().map_err(short)?);
        let opt_len_offset = r.offset();
        let opt_len = r.u8().map_err(short)?;
        // RFC 7607: AS 0 is never valid.
        if my_as == 0 {
            return Err(OpenError::BadPeerAs { asn: 0 });
        }
        let hold_time =
            HoldTime::from_secs(hold).ok_or(OpenError::UnacceptableHoldTime { hold_time: hold })?;
        if bgp_id.is_unspecified() {
            return Err(OpenError::BadBgpId { id: bgp_id });
        }
        let extended = opt_len == 255 && r.rest().first() == Some(&PARAM_EXTENDED);
        let mut params = if extended {
            r.u8().map_err(short)?;
            let len = r.u16().map_err(short)?;
            r.sub(usize::from(len)).map_err(|_| OpenError::Malformed {
                offset: opt_len_offset,
                reason: "extended optional parameters length overruns the message",
            })?
        } else {
            r.sub(usize::from(opt_len))
                .map_err(|_| OpenError::Malformed {
                    offset: opt_len_offset,
                    reason: "optional parameters length overruns the message",
                })?
        };
        if !r.is_empty() {
            return Err(OpenError::Malformed {
                offset: r.offset(),
                reason: "bytes after the optional parameters",
            });
        }
        let mut capabilities = Vec::new();
        let mut groups = Vec::new();
        while !params.is_empty() {
            let offset = params.offset();
            let param_type = params.u8().map_err(short)?;
            let len = if extended {
                params.u16()
            } else {
                params.u8().map(u16::from)
            };
            let len = len.map_err(|_| OpenError::Malformed {
                offset,
                reason: "truncated optional parameter",
            })?;
            let mut value = params
                .sub(usize::from(len))
                .map_err(|_| OpenError::Malformed {
                    offset,
                    reason: "optional parameter overruns the parameters",
                })?;
            if param_type != PARAM_CAPABILITIES {
                return Err(OpenError::UnsupportedOptionalParameter { param_type, offset });
            }
            let before = capabilities.len();
            while !value.is_empty() {
                let offset = value.offset();
                let code = value.u8().map_err(short)?;
                let len = value.u8().map_err(|_| OpenError::Malformed {
                    offset,
                    reason: "truncated capability",
                })?;
                let cap = value
                    .sub(usize::from(len))
                    .map_err(|_| OpenError::Malformed {
                        offset,
                        reason: "capability overruns its parameter",
                    })?;
                capabilities.push(Capability::parse(code, cap)?);
            }
            groups.push(capabilities.len() - before);
        }
        let layout = if extended {
            match groups[..] {
                [] => ParamLayout::Extended,
                [n] if n > 0 => ParamLayout::Extended,
                _ => ParamLayout::ExtendedGroups(groups),
            }
        } else if groups.contains(&0) {
            // An empty Capabilities parameter is kept so that it round-trips.
            ParamLayout::Groups(groups)
        } else if groups.len() <= 1 {
            ParamLayout::Single
        } else if groups.iter().all(|&n| n == 1) {
            ParamLayout::PerCapability
        } else {
            ParamLayout::Groups(groups)
        };
        let open = Self {
            my_as,
            hold_time,
            bgp_id,
            capabilities,
            layout,
        };
        if open.four_octet_as() == Some(0) {
            return Err(OpenError::BadPeerAs { asn: 0 });
        }
        Ok(open)
    }

    /// The capability groups to emit, one slice per parameter.
    fn groups(&self) -> Vec<&[Capability]> {
        let caps = &self.capabilities[..];
        match &self.layout {
            ParamLayout::Groups(sizes) | ParamLayout::ExtendedGroups(sizes) => {
                let mut out = Vec::with_capacity(sizes.len() + 1);
                let mut rest = caps;
                for &n in sizes {
                    let (head, tail) = rest.split_at(n.min(rest.len()));
                    out.push(head);
                    rest = tail;
                }
                if !rest.is_empty() {
                    out.push(rest);
                }
                out
            }
            _ if caps.is_empty() => Vec::new(),
            ParamLayout::Single | ParamLayout::Extended => vec![caps],
            ParamLayout::PerCapability => caps.chunks(1).collect(),
        }
    }

    /// Length of the body.
    pub(crate) fn body_len(&self) -> usize {
        let mut out = BytesMut::new();
        self.emit_body(&mut out);
        out.len()
    }

    /// Appends the body.
    pub(crate) fn emit_body(&self, out: &mut BytesMut) {
        out.put_u8(BGP_VERSION);
        out.put_u16(self.my_as);
        out.put_u16(self.hold_time.secs());
        out.put_u32(self.bgp_id.into());
        let groups = self.groups();
        let caps_len =
            |g: &[Capability]| g.iter().map(|c| 2 + c.value_len().min(255)).sum::<usize>();
        let regular: usize = groups.iter().map(|g| 2 + caps_len(g)).sum();
        let extended = matches!(
            self.layout,
            ParamLayout::Extended | ParamLayout::ExtendedGroups(_)
        ) || regular > 255
            || groups.iter().any(|g| caps_len(g) > 255);
        if extended {
            // RFC 9072 §2: Non-Ext OP Len 255, Non-Ext OP Type 255, then a
            // 2-octet length; parameters get 2-octet lengths.
            out.put_u8(255);
            out.put_u8(PARAM_EXTENDED);
            let len_at = out.len();
            out.put_u16(0);
            for g in &groups {
                out.put_u8(PARAM_CAPABILITIES);
                out.put_u16(caps_len(g) as u16);
                g.iter().for_each(|c| c.emit(out));
            }
            let len = (out.len() - len_at - 2) as u16;
            out[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
        } else {
            out.put_u8(regular as u8);
            for g in &groups {
                out.put_u8(PARAM_CAPABILITIES);
                out.put_u8(caps_len(g) as u8);
                g.iter().for_each(|c| c.emit(out));
            }
        }
    }
}

impl fmt::Display for Open {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "OPEN as {} hold {} id {} caps [",
            self.asn(),
            self.hold_time.secs(),
            self.bgp_id
        )?;
        for (i, c) in self.capabilities.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{c}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Multiprotocol { afi, safi } => write!(f, "mp {afi:?}/{safi:?}"),
            Self::RouteRefresh => f.write_str("route-refresh"),
            Self::ExtendedNextHop(v) => write!(f, "extended-nexthop x{}", v.len()),
            Self::ExtendedMessage => f.write_str("extended-message"),
            Self::GracefulRestart(gr) => write!(
                f,
                "graceful-restart {}s x{}",
                gr.restart_time,
                gr.families.len()
            ),
            Self::FourOctetAs(asn) => write!(f, "as4 {asn}"),
            Self::AddPath(v) => write!(f, "add-path x{}", v.len()),
            Self::EnhancedRouteRefresh => f.write_str("enhanced-route-refresh"),
            Self::Fqdn { hostname, .. } => write!(f, "fqdn {}", String::from_utf8_lossy(hostname)),
            Self::Unknown { code, data } => write!(f, "cap {code} len {}", data.len()),
        }
    }
}

#[cfg(feature = "arbitrary")]
fn short_bytes(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<Bytes> {
    let len = u.int_in_range(0..=60)?;
    Ok(Bytes::copy_from_slice(u.bytes(len)?))
}
