//! UPDATE (RFC 4271 §4.3), End-of-RIB markers (RFC 4724 §2).
//!
//! ```text
//! +-----------------------------------------------------+
//! |   Withdrawn Routes Length (2 octets)                |
//! +-----------------------------------------------------+
//! |   Withdrawn Routes (variable)                       |
//! +-----------------------------------------------------+
//! |   Total Path Attribute Length (2 octets)            |
//! +-----------------------------------------------------+
//! |   Path Attributes (variable)                        |
//! +-----------------------------------------------------+
//! |   Network Layer Reachability Information (variable) |
//! +-----------------------------------------------------+
//! ```

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::attr::{self, AttrValue, MpReach, MpUnreach, PathAttribute};
use super::error::{Action, AttrError, UpdateError};
use super::iana::{AttrType, update_subcode as sub};
use super::nlri::{self, Ipv4Prefix, Nlri, NlriError};
use super::reader::Reader;
use super::{DecodeCtx, EncodeCtx, Family};

/// An UPDATE message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Update {
    /// Withdrawn IPv4 unicast routes.
    pub withdrawn: Vec<Nlri<Ipv4Prefix>>,
    /// Path attributes in wire order.
    pub attributes: Vec<PathAttribute>,
    /// Reachable IPv4 unicast routes.
    pub nlri: Vec<Nlri<Ipv4Prefix>>,
    /// RFC 7606 errors found while parsing that did not need a session
    /// reset. Ignored by emit. When any has [`Action::TreatAsWithdraw`],
    /// every announced prefix of this UPDATE must be handled as withdrawn.
    pub errors: Vec<AttrError>,
}

impl Update {
    /// The End-of-RIB marker for `family` (RFC 4724 §2).
    pub fn end_of_rib(family: Family) -> Self {
        match family {
            Family::Ipv4Unicast => Self::default(),
            Family::Ipv6Unicast => Self {
                attributes: vec![PathAttribute::new(AttrValue::MpUnreach(
                    MpUnreach::Ipv6Unicast(Vec::new()),
                ))],
                ..Self::default()
            },
        }
    }

    /// The family this UPDATE marks the End-of-RIB of, if it is a marker.
    pub fn end_of_rib_family(&self) -> Option<Family> {
        if !self.withdrawn.is_empty() || !self.nlri.is_empty() {
            return None;
        }
        match &self.attributes[..] {
            [] => Some(Family::Ipv4Unicast),
            [
                PathAttribute {
                    value: AttrValue::MpUnreach(m),
                    ..
                },
            ] if m.is_empty() => {
                let (afi, safi) = m.afi_safi();
                Family::from_afi_safi(afi, safi)
            }
            _ => None,
        }
    }

    /// Whether RFC 7606 treat-as-withdraw applies to this UPDATE.
    pub fn treat_as_withdraw(&self) -> bool {
        self.errors
            .iter()
            .any(|e| e.action == Action::TreatAsWithdraw)
    }

    /// The first attribute of type `t`.
    pub fn attribute(&self, t: AttrType) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .map(|a| &a.value)
            .find(|v| v.type_code() == t)
    }

    /// MP_REACH_NLRI, if present.
    pub fn mp_reach(&self) -> Option<&MpReach> {
        match self.attribute(AttrType::MpReachNlri) {
            Some(AttrValue::MpReach(m)) => Some(m),
            _ => None,
        }
    }

    /// MP_UNREACH_NLRI, if present.
    pub fn mp_unreach(&self) -> Option<&MpUnreach> {
        match self.attribute(AttrType::MpUnreachNlri) {
            Some(AttrValue::MpUnreach(m)) => Some(m),
            _ => None,
        }
    }

    /// Parses the body `r` of the message `msg`.
    pub(crate) fn parse_body(
        mut r: Reader<'_>,
        msg: &[u8],
        view: attr::Backing<'_>,
        ctx: &DecodeCtx,
    ) -> Result<Self, UpdateError> {
        let malformed = |offset, reason| UpdateError {
            subcode: sub::MALFORMED_ATTRIBUTE_LIST,
            offset,
            reason,
            data: Bytes::new(),
        };
        let network = |e: NlriError| {
            let offset = match e {
                NlriError::BadLength { offset, .. } | NlriError::Truncated { offset } => offset,
            };
            UpdateError {
                subcode: sub::INVALID_NETWORK_FIELD,
                offset,
                reason: "malformed prefix",
                data: Bytes::new(),
            }
        };
        let add_path = ctx.add_path.contains(Family::Ipv4Unicast);

        let at = r.offset();
        let wlen = r
            .u16()
            .map_err(|_| malformed(at, "truncated withdrawn routes length"))?;
        // RFC 4271 §6.3: a length that is too large is a Malformed
        // Attribute List.
        let w = r
            .sub(usize::from(wlen))
            .map_err(|_| malformed(at, "withdrawn routes length overruns the message"))?;
        let withdrawn = nlri::parse_list(w, add_path).map_err(network)?;
        let at = r.offset();
        let alen = r
            .u16()
            .map_err(|_| malformed(at, "truncated total path attribute length"))?;
        let a = r
            .sub(usize::from(alen))
            .map_err(|_| malformed(at, "total path attribute length overruns the message"))?;
        let attr::Parsed {
            attributes,
            mut errors,
            seen,
        } = attr::parse_all(a, msg, view, ctx)?;
        let nlri = nlri::parse_list(r, add_path).map_err(network)?;

        let mut update = Self {
            withdrawn,
            attributes,
            nlri,
            errors: Vec::new(),
        };
        update.check_mandatory(&seen, &mut errors);
        update.errors = errors;
        Ok(update)
    }

    /// RFC 4271 §6.3 / RFC 7606 §3 (d): missing well-known mandatory
    /// attributes make the UPDATE treat-as-withdraw. `seen` holds every
    /// type code the attribute area had.
    fn check_mandatory(&self, seen: &attr::TypeSet, errors: &mut Vec<AttrError>) {
        let announces = !self.nlri.is_empty()
            || matches!(self.mp_reach(), Some(m) if !matches!(m, MpReach::Other(_)));
        if !announces {
            return;
        }
        let required = [AttrType::Origin, AttrType::AsPath, AttrType::NextHop];
        // NEXT_HOP is only needed for NLRI in the NLRI field (RFC 4760 §3).
        let needed = if self.nlri.is_empty() { 2 } else { 3 };
        for t in required.into_iter().take(needed) {
            let code = u8::from(t);
            // An attribute that was present but malformed (and dropped) is
            // already reported.
            if !seen.contains(code) {
                errors.push(AttrError {
                    action: Action::TreatAsWithdraw,
                    type_code: code,
                    error: UpdateError {
                        subcode: sub::MISSING_WELL_KNOWN_ATTRIBUTE,
                        offset: 0,
                        reason: "missing well-known mandatory attribute",
                        data: Bytes::copy_from_slice(&[code]),
                    },
                });
            }
        }
    }

    /// Length of the body.
    pub(crate) fn body_len(&self, ctx: &EncodeCtx) -> usize {
        let add_path = ctx.add_path.contains(Family::Ipv4Unicast);
        4 + nlri::list_len(&self.withdrawn, add_path)
            + self
                .attributes
                .iter()
                .map(|a| a.wire_len(ctx))
                .sum::<usize>()
            + nlri::list_len(&self.nlri, add_path)
    }

    /// Appends the body.
    pub(crate) fn emit_body(&self, ctx: &EncodeCtx, out: &mut BytesMut) {
        let add_path = ctx.add_path.contains(Family::Ipv4Unicast);
        let wlen = nlri::list_len(&self.withdrawn, add_path);
        out.put_u16(wlen as u16);
        nlri::emit_list(&self.withdrawn, add_path, out);
        let alen_at = out.len();
        out.put_u16(0);
        for a in &self.attributes {
            a.emit(ctx, out);
        }
        let alen = (out.len() - alen_at - 2) as u16;
        out[alen_at..alen_at + 2].copy_from_slice(&alen.to_be_bytes());
        nlri::emit_list(&self.nlri, add_path, out);
    }
}

impl fmt::Display for Update {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(family) = self.end_of_rib_family() {
            return write!(f, "UPDATE End-of-RIB {family}");
        }
        f.write_str("UPDATE")?;
        if !self.withdrawn.is_empty() {
            write!(f, " withdraw {}", self.withdrawn.len())?;
        }
        if let Some(m) = self.mp_unreach() {
            let n = match m {
                MpUnreach::Ipv4Unicast(v) => v.len(),
                MpUnreach::Ipv6Unicast(v) => v.len(),
                MpUnreach::Other(_) => 0,
            };
            write!(f, " mp-withdraw {n}")?;
        }
        for a in &self.attributes {
            match &a.value {
                AttrValue::AsPath(p) => write!(f, " as-path [{p}]")?,
                AttrValue::NextHop(nh) => write!(f, " next-hop {nh}")?,
                AttrValue::MpReach(MpReach::Ipv4Unicast { next_hop, nlri }) => {
                    write!(f, " mp-reach ipv4 via {next_hop} {}", nlri.len())?;
                }
                AttrValue::MpReach(MpReach::Ipv6Unicast { next_hop, nlri }) => {
                    write!(f, " mp-reach ipv6 via {next_hop} {}", nlri.len())?;
                }
                _ => {}
            }
        }
        if !self.nlri.is_empty() {
            write!(f, " nlri {}", self.nlri.len())?;
            if let Some(first) = self.nlri.first() {
                write!(f, " ({first}..)")?;
            }
        }
        if !self.errors.is_empty() {
            write!(f, " errors {}", self.errors.len())?;
        }
        Ok(())
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Update {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Self {
            withdrawn: u.arbitrary()?,
            attributes: u.arbitrary()?,
            nlri: u.arbitrary()?,
            errors: Vec::new(),
        })
    }
}
