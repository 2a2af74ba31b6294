//! The UPDATE encoder: packs as many prefixes as fit into each message.
//!
//! One attribute set is encoded once and copied into every message; the
//! prefixes fill each message up to the negotiated maximum (4096, or 65535
//! with RFC 8654), and the rest spill into further messages. IPv6, and IPv4
//! with an IPv6 next hop (RFC 8950), travel in MP_REACH_NLRI, placed first
//! as RFC 7606 §5.1 asks.

use bytes::{BufMut, BytesMut};

use super::attr::{AttrFlags, AttrValue, NextHop, PathAttribute};
use super::iana::{AttrType, MessageType};
use super::nlri::{self, Ipv4Prefix, Ipv6Prefix, Nlri, Prefix};
use super::update::Update;
use super::{EncodeCtx, EncodeError, Family, HEADER_LEN, Message};

/// Encodes announcements, withdrawals and End-of-RIB markers for one
/// session direction.
#[derive(Debug, Clone, Copy)]
pub struct UpdateEncoder {
    ctx: EncodeCtx,
    max: usize,
}

impl UpdateEncoder {
    /// An encoder filling messages up to `ctx.max_len()`.
    pub fn new(ctx: EncodeCtx) -> Self {
        Self {
            ctx,
            max: ctx.max_len(),
        }
    }

    /// An encoder with a smaller maximum message length (at least 64), for
    /// tests and for peers known to mishandle full messages.
    pub fn with_max_len(ctx: EncodeCtx, max: usize) -> Self {
        Self {
            ctx,
            max: max.clamp(64, ctx.max_len()),
        }
    }

    /// Appends UPDATEs announcing IPv4 `prefixes` with `attrs` (which must
    /// not hold NEXT_HOP or MP attributes: they are added here). An IPv4
    /// next hop uses the NLRI field; an IPv6 one uses MP_REACH_NLRI
    /// (RFC 8950). Returns the number of messages.
    pub fn announce_ipv4(
        &self,
        attrs: &[PathAttribute],
        next_hop: NextHop,
        prefixes: &[Nlri<Ipv4Prefix>],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        match next_hop {
            NextHop::V4(addr) => {
                let mut all: Vec<PathAttribute> = attrs.to_vec();
                let at = all
                    .iter()
                    .position(|a| u8::from(a.value.type_code()) > u8::from(AttrType::NextHop))
                    .unwrap_or(all.len());
                all.insert(at, PathAttribute::new(AttrValue::NextHop(addr)));
                let mut abuf = BytesMut::new();
                all.iter().for_each(|a| a.emit(&self.ctx, &mut abuf));
                self.pack_nlri_field(&abuf, prefixes, out)
            }
            NextHop::V6 { .. } => {
                self.pack_mp_reach(Family::Ipv4Unicast, attrs, next_hop, prefixes, out)
            }
        }
    }

    /// Appends UPDATEs announcing IPv6 `prefixes` in MP_REACH_NLRI.
    pub fn announce_ipv6(
        &self,
        attrs: &[PathAttribute],
        next_hop: NextHop,
        prefixes: &[Nlri<Ipv6Prefix>],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        self.pack_mp_reach(Family::Ipv6Unicast, attrs, next_hop, prefixes, out)
    }

    /// Appends UPDATEs withdrawing IPv4 `prefixes` (Withdrawn Routes field).
    pub fn withdraw_ipv4(&self, prefixes: &[Nlri<Ipv4Prefix>], out: &mut BytesMut) -> usize {
        let add_path = self.ctx.add_path.contains(Family::Ipv4Unicast);
        let mut count = 0;
        let mut rest = prefixes;
        while !rest.is_empty() {
            let n = fit(rest, add_path, self.max - HEADER_LEN - 4);
            let start = begin(out, MessageType::Update);
            let wlen_at = out.len();
            out.put_u16(0);
            nlri::emit_list(&rest[..n], add_path, out);
            patch_u16(out, wlen_at);
            out.put_u16(0);
            finish(out, start);
            rest = &rest[n..];
            count += 1;
        }
        count
    }

    /// Appends UPDATEs withdrawing IPv6 `prefixes` (MP_UNREACH_NLRI).
    pub fn withdraw_ipv6(&self, prefixes: &[Nlri<Ipv6Prefix>], out: &mut BytesMut) -> usize {
        self.pack_mp_unreach(Family::Ipv6Unicast, prefixes, out)
    }

    /// Appends UPDATEs withdrawing IPv4 `prefixes` in MP_UNREACH_NLRI (for
    /// sessions that announced them with an IPv6 next hop).
    pub fn withdraw_ipv4_mp(&self, prefixes: &[Nlri<Ipv4Prefix>], out: &mut BytesMut) -> usize {
        self.pack_mp_unreach(Family::Ipv4Unicast, prefixes, out)
    }

    /// Appends the End-of-RIB marker of `family` (RFC 4724 §2).
    pub fn end_of_rib(&self, family: Family, out: &mut BytesMut) {
        // An End-of-RIB marker is at most 30 octets: it always fits.
        let _ = Message::Update(Update::end_of_rib(family)).emit(&self.ctx, out);
    }

    fn pack_nlri_field(
        &self,
        attrs: &[u8],
        prefixes: &[Nlri<Ipv4Prefix>],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let add_path = self.ctx.add_path.contains(Family::Ipv4Unicast);
        let fixed = HEADER_LEN + 4 + attrs.len();
        check_room(fixed, self.max, prefixes, add_path)?;
        let mut count = 0;
        let mut rest = prefixes;
        while !rest.is_empty() {
            let n = fit(rest, add_path, self.max - fixed);
            let start = begin(out, MessageType::Update);
            out.put_u16(0);
            out.put_u16(attrs.len() as u16);
            out.put_slice(attrs);
            nlri::emit_list(&rest[..n], add_path, out);
            finish(out, start);
            rest = &rest[n..];
            count += 1;
        }
        Ok(count)
    }

    fn pack_mp_reach<P: Prefix>(
        &self,
        family: Family,
        attrs: &[PathAttribute],
        next_hop: NextHop,
        prefixes: &[Nlri<P>],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let add_path = self.ctx.add_path.contains(family);
        let mut abuf = BytesMut::new();
        attrs.iter().for_each(|a| a.emit(&self.ctx, &mut abuf));
        let mut nh = BytesMut::new();
        match next_hop {
            NextHop::V4(a) => nh.put_slice(&a.octets()),
            NextHop::V6 { global, link_local } => {
                nh.put_slice(&global.octets());
                if let Some(ll) = link_local {
                    nh.put_slice(&ll.octets());
                }
            }
        }
        // Header, withdrawn length, attribute length, MP_REACH_NLRI header
        // (flags, type, 2-octet length, AFI, SAFI, next hop length, next
        // hop, reserved), then the other attributes.
        let fixed = HEADER_LEN + 4 + 4 + 3 + 1 + nh.len() + 1 + abuf.len();
        check_room(fixed, self.max, prefixes, add_path)?;
        let mut count = 0;
        let mut rest = prefixes;
        while !rest.is_empty() {
            let n = fit(rest, add_path, self.max - fixed);
            let start = begin(out, MessageType::Update);
            out.put_u16(0);
            let alen_at = out.len();
            out.put_u16(0);
            out.put_u8(AttrFlags::OPTIONAL | AttrFlags::EXTENDED_LENGTH);
            out.put_u8(AttrType::MpReachNlri.into());
            let mp_at = out.len();
            out.put_u16(0);
            out.put_u16(family.afi().into());
            out.put_u8(family.safi().into());
            out.put_u8(nh.len() as u8);
            out.put_slice(&nh);
            out.put_u8(0);
            nlri::emit_list(&rest[..n], add_path, out);
            patch_u16(out, mp_at);
            out.put_slice(&abuf);
            patch_u16(out, alen_at);
            finish(out, start);
            rest = &rest[n..];
            count += 1;
        }
        Ok(count)
    }

    fn pack_mp_unreach<P: Prefix>(
        &self,
        family: Family,
        prefixes: &[Nlri<P>],
        out: &mut BytesMut,
    ) -> usize {
        let add_path = self.ctx.add_path.contains(family);
        let fixed = HEADER_LEN + 4 + 4 + 3;
        let mut count = 0;
        let mut rest = prefixes;
        while !rest.is_empty() {
            let n = fit(rest, add_path, self.max - fixed);
            let start = begin(out, MessageType::Update);
            out.put_u16(0);
            let alen_at = out.len();
            out.put_u16(0);
            out.put_u8(AttrFlags::OPTIONAL | AttrFlags::EXTENDED_LENGTH);
            out.put_u8(AttrType::MpUnreachNlri.into());
            let mp_at = out.len();
            out.put_u16(0);
            out.put_u16(family.afi().into());
            out.put_u8(family.safi().into());
            nlri::emit_list(&rest[..n], add_path, out);
            patch_u16(out, mp_at);
            patch_u16(out, alen_at);
            finish(out, start);
            rest = &rest[n..];
            count += 1;
        }
        count
    }
}

/// How many leading entries of `list` fit in `room` octets (at least one:
/// the callers checked that any single entry fits).
fn fit<P: Prefix>(list: &[Nlri<P>], add_path: bool, room: usize) -> usize {
    let mut used = 0;
    let mut n = 0;
    for e in list {
        let len = nlri::entry_len(e, add_path);
        if used + len > room {
            break;
        }
        used += len;
        n += 1;
    }
    n.max(1)
}

/// Fails when even the longest single prefix would not fit next to the
/// attributes.
fn check_room<P: Prefix>(
    fixed: usize,
    max: usize,
    list: &[Nlri<P>],
    add_path: bool,
) -> Result<(), EncodeError> {
    let longest = list
        .iter()
        .map(|e| nlri::entry_len(e, add_path))
        .max()
        .unwrap_or(0);
    if fixed + longest > max {
        return Err(EncodeError::TooLong {
            len: fixed + longest,
            max,
        });
    }
    Ok(())
}

/// Writes a header with a zero length; returns where the message starts.
fn begin(out: &mut BytesMut, kind: MessageType) -> usize {
    let start = out.len();
    out.put_slice(&[0xff; 16]);
    out.put_u16(0);
    out.put_u8(kind.into());
    start
}

/// Patches the length of the message starting at `start`.
fn finish(out: &mut BytesMut, start: usize) {
    let len = (out.len() - start) as u16;
    out[start + 16..start + 18].copy_from_slice(&len.to_be_bytes());
}

/// Patches a 2-octet length at `at` to cover everything after it.
fn patch_u16(out: &mut BytesMut, at: usize) {
    let len = (out.len() - at - 2) as u16;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;
    use crate::frame;
    use crate::wire::{AsPath, DecodeCtx, MpReach, MpUnreach, Origin};

    fn attrs() -> Vec<PathAttribute> {
        vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![64512]))),
        ]
    }

    fn split(mut buf: &[u8], ctx: &DecodeCtx) -> Vec<Update> {
        let mut out = Vec::new();
        while let Some(len) = frame::decode(buf, ctx).unwrap() {
            match Message::parse(&buf[..len], ctx).unwrap() {
                Message::Update(u) => {
                    assert!(u.errors.is_empty(), "{:?}", u.errors);
                    out.push(u);
                }
                other => panic!("not an UPDATE: {other:?}"),
            }
            buf = &buf[len..];
        }
        assert!(buf.is_empty());
        out
    }

    fn hosts4(n: u32) -> Vec<Nlri<Ipv4Prefix>> {
        (0..n)
            .map(|i| Nlri::new(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000 + i))))
            .collect()
    }

    #[test]
    fn packs_ipv4_hosts_into_full_messages() {
        let ctx = EncodeCtx::default();
        let enc = UpdateEncoder::new(ctx);
        let prefixes = hosts4(2000);
        let mut out = BytesMut::new();
        let n = enc
            .announce_ipv4(
                &attrs(),
                NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
                &prefixes,
                &mut out,
            )
            .unwrap();
        let updates = split(&out, &ctx);
        assert_eq!(updates.len(), n);
        // 4096 - 19 - 4 - attributes (4 + 9 + 7) = 4053 octets: 810 hosts.
        assert_eq!(updates[0].nlri.len(), 810);
        assert_eq!(n, 3);
        let all: Vec<_> = updates
            .iter()
            .flat_map(|u| u.nlri.iter().copied())
            .collect();
        assert_eq!(all, prefixes);
        assert_eq!(
            updates[0].attribute(AttrType::NextHop),
            Some(&AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)))
        );
        let types: Vec<u8> = updates[0]
            .attributes
            .iter()
            .map(|a| a.value.type_code().into())
            .collect();
        assert_eq!(types, [1, 2, 3]);
    }

    #[test]
    fn packs_ipv6_into_mp_reach_and_withdraws() {
        let ctx = EncodeCtx {
            extended_message: true,
            ..EncodeCtx::default()
        };
        let enc = UpdateEncoder::new(ctx);
        let prefixes: Vec<_> = (0..3000u128)
            .map(|i| Nlri::new(Ipv6Prefix::host(Ipv6Addr::from(0x2001_0db8_u128 << 96 | i))))
            .collect();
        let nh = NextHop::V6 {
            global: "2001:db8::1".parse().unwrap(),
            link_local: Some("fe80::1".parse().unwrap()),
        };
        let mut out = BytesMut::new();
        let n = enc
            .announce_ipv6(&attrs(), nh, &prefixes, &mut out)
            .unwrap();
        assert_eq!(n, 1, "3000 /128s (51000 octets) fit one extended message");
        let updates = split(&out, &ctx);
        match updates[0].mp_reach() {
            Some(MpReach::Ipv6Unicast { next_hop, nlri }) => {
                assert_eq!(*next_hop, nh);
                assert_eq!(nlri, &prefixes);
            }
            other => panic!("{other:?}"),
        }
        let mut out = BytesMut::new();
        let n = UpdateEncoder::new(EncodeCtx::default()).withdraw_ipv6(&prefixes, &mut out);
        let updates = split(&out, &EncodeCtx::default());
        assert_eq!(updates.len(), n);
        assert!(n > 1);
        let all: Vec<_> = updates
            .iter()
            .flat_map(|u| match u.mp_unreach() {
                Some(MpUnreach::Ipv6Unicast(v)) => v.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(all, prefixes);
    }

    #[test]
    fn ipv4_with_ipv6_next_hop_uses_mp_reach() {
        let ctx = EncodeCtx::default();
        let nh = NextHop::V6 {
            global: "2001:db8::1".parse().unwrap(),
            link_local: None,
        };
        let mut out = BytesMut::new();
        UpdateEncoder::new(ctx)
            .announce_ipv4(&attrs(), nh, &hosts4(3), &mut out)
            .unwrap();
        let updates = split(&out, &ctx);
        assert!(
            matches!(updates[0].mp_reach(), Some(MpReach::Ipv4Unicast { nlri, .. }) if nlri.len() == 3)
        );
        assert!(updates[0].nlri.is_empty());
    }

    #[test]
    fn add_path_ids_are_sent() {
        let ctx = EncodeCtx {
            add_path: crate::wire::AddPathSet::of(&[Family::Ipv4Unicast]),
            ..EncodeCtx::default()
        };
        let mut prefixes = hosts4(2);
        prefixes[1].path_id = Some(9);
        let mut out = BytesMut::new();
        UpdateEncoder::new(ctx).withdraw_ipv4(&prefixes, &mut out);
        let updates = split(&out, &ctx);
        assert_eq!(updates[0].withdrawn[0].path_id, Some(0));
        assert_eq!(updates[0].withdrawn[1].path_id, Some(9));
    }

    #[test]
    fn end_of_rib_markers() {
        let ctx = EncodeCtx::default();
        let enc = UpdateEncoder::new(ctx);
        let mut out = BytesMut::new();
        enc.end_of_rib(Family::Ipv4Unicast, &mut out);
        assert_eq!(out.len(), 23);
        enc.end_of_rib(Family::Ipv6Unicast, &mut out);
        let updates = split(&out, &ctx);
        assert_eq!(updates[0].end_of_rib_family(), Some(Family::Ipv4Unicast));
        assert_eq!(updates[1].end_of_rib_family(), Some(Family::Ipv6Unicast));
    }

    #[test]
    fn attributes_too_large_for_a_message() {
        let ctx = EncodeCtx::default();
        let big = PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![1; 1100])));
        let err = UpdateEncoder::new(ctx)
            .announce_ipv4(
                &[big],
                NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
                &hosts4(1),
                &mut BytesMut::new(),
            )
            .unwrap_err();
        assert!(matches!(err, EncodeError::TooLong { max: 4096, .. }));
    }
}
