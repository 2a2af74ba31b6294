//! Adj-RIB-Out (RFC 4271 §3.2): what we want the peer to have, what it
//! has, and the minimal UPDATEs between the two.
//!
//! The speaker hands over the desired routes; [`AdjRibOut::flush`] diffs
//! them against what was sent and encodes withdrawals, then announcements
//! grouped by identical attribute set and packed into full UPDATEs. Pure:
//! no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;
#[cfg(test)]
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::Arc;

use bytes::BytesMut;

use crate::wire::{
    AsPath, AttrValue, Community, EncodeCtx, Family, Ipv4Prefix, Ipv6Prefix, LargeCommunity,
    NextHop, Nlri, Origin, PathAttribute, UpdateEncoder, as4,
};

/// An IPv4 or IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpPrefix {
    /// IPv4 unicast.
    V4(Ipv4Prefix),
    /// IPv6 unicast.
    V6(Ipv6Prefix),
}

impl IpPrefix {
    /// A host route (/32 or /128).
    pub fn host(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(a) => Self::V4(Ipv4Prefix::host(a)),
            IpAddr::V6(a) => Self::V6(Ipv6Prefix::host(a)),
        }
    }

    /// The address family.
    pub fn family(&self) -> Family {
        match self {
            Self::V4(_) => Family::Ipv4Unicast,
            Self::V6(_) => Family::Ipv6Unicast,
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(p) => p.fmt(f),
            Self::V6(p) => p.fmt(f),
        }
    }
}

impl FromStr for IpPrefix {
    type Err = crate::wire::nlri::PrefixParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.contains(':') {
            s.parse().map(Self::V6)
        } else {
            s.parse().map(Self::V4)
        }
    }
}

/// The attributes the speaker chooses for a route. The session adds what
/// depends on the session: AS_PATH (our AS for eBGP), NEXT_HOP (next hop
/// self unless given), LOCAL_PREF only towards iBGP peers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RouteAttrs {
    /// Next hop; `None` means the session's local address of the family.
    pub next_hop: Option<IpAddr>,
    /// ORIGIN (MetalLB announces IGP... FRR-mode uses "incomplete";
    /// the native mode IGP).
    pub origin: Option<Origin>,
    /// MULTI_EXIT_DISC.
    pub med: Option<u32>,
    /// LOCAL_PREF, sent to iBGP peers only (RFC 4271 §5.1.5).
    pub local_pref: Option<u32>,
    /// COMMUNITIES.
    pub communities: Vec<Community>,
    /// LARGE_COMMUNITY.
    pub large_communities: Vec<LargeCommunity>,
}

/// What a session needs to turn [`RouteAttrs`] into path attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Egress {
    /// The AS the peer sees (ours, or the session's local-as override):
    /// first in the AS_PATH of what we send to an external peer.
    pub(crate) local_as: u32,
    /// Our real AS, after `local_as` in that AS_PATH (FRR's local-as
    /// without replace-as); `None` when `local_as` is alone.
    pub(crate) real_as: Option<u32>,
    /// Whether the peer is internal (same AS).
    pub(crate) ibgp: bool,
    /// Next hop self for IPv4 routes, if we have one.
    pub(crate) next_hop_v4: Option<NextHop>,
    /// Next hop self for IPv6 routes, if we have one.
    pub(crate) next_hop_v6: Option<NextHop>,
    /// Families negotiated with the peer.
    pub(crate) families: [bool; 2],
}

impl Egress {
    fn has(&self, family: Family) -> bool {
        self.families[family as usize]
    }
}

/// What a flush sent, for counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// UPDATE messages encoded.
    pub updates: usize,
    /// Prefixes announced (new or changed).
    pub announced: usize,
    /// Prefixes withdrawn.
    pub withdrawn: usize,
    /// Prefixes that could not be sent: no next hop for their family, or
    /// the family was not negotiated.
    pub skipped: usize,
}

/// IPv4 and IPv6 prefixes sharing one attribute set.
type Group = (Vec<Nlri<Ipv4Prefix>>, Vec<Nlri<Ipv6Prefix>>);

/// The desired and the sent routes of one peer.
///
/// A flush after [`AdjRibOut::announce`] and [`AdjRibOut::withdraw`] looks
/// only at the prefixes they named, so a change to one route of a large
/// table costs that route, not the table; [`AdjRibOut::set`], a new
/// session and a ROUTE-REFRESH compare everything.
///
/// What was sent is kept as its difference from what is desired: once a
/// flush has sent the table, the two are the same but for the routes
/// that could not be sent, and a second table as large as the first (a
/// B-tree slot per route) is not kept beside it.
#[derive(Debug, Default)]
pub struct AdjRibOut {
    desired: BTreeMap<IpPrefix, Arc<RouteAttrs>>,
    /// The prefixes whose sent route is not the desired one, with what
    /// was sent (`None`: nothing). A prefix absent here was sent as
    /// desired (or is neither desired nor sent).
    unsent: BTreeMap<IpPrefix, Option<Arc<RouteAttrs>>>,
    /// Whether the peer may have routes from us. Until a flush sends one
    /// (a new session, a peer that is down) it has none, and `unsent` is
    /// empty rather than a `None` per desired route.
    sent_any: bool,
    /// Prefixes changed one by one since the last flush.
    changed: BTreeSet<IpPrefix>,
    /// Everything may differ: the next flush compares whole tables.
    full: bool,
}

impl AdjRibOut {
    /// Replaces the desired routes.
    pub fn set(&mut self, routes: BTreeMap<IpPrefix, Arc<RouteAttrs>>) {
        if routes == self.desired {
            return;
        }
        let old = std::mem::replace(&mut self.desired, routes);
        self.full = true;
        if !self.sent_any {
            return;
        }
        // What was sent stays: each prefix whose desired route changed
        // keeps its sent route in `unsent`, unless that is the new one.
        for (prefix, attrs) in &old {
            if self.desired.get(prefix) != Some(attrs) {
                self.keep_sent(*prefix, Some(attrs));
            }
        }
        let added: Vec<IpPrefix> = self
            .desired
            .keys()
            .filter(|p| !old.contains_key(p))
            .copied()
            .collect();
        for prefix in added {
            self.keep_sent(prefix, None);
        }
        self.full = true;
    }

    /// Adds or changes one desired route.
    pub fn announce(&mut self, prefix: IpPrefix, attrs: Arc<RouteAttrs>) {
        if self.desired.get(&prefix) != Some(&attrs) {
            let before = self.desired.insert(prefix, attrs);
            self.keep_sent(prefix, before.as_ref());
            self.changed.insert(prefix);
        }
    }

    /// Removes one desired route.
    pub fn withdraw(&mut self, prefix: &IpPrefix) {
        if let Some(before) = self.desired.remove(prefix) {
            self.keep_sent(*prefix, Some(&before));
            self.changed.insert(*prefix);
        }
    }

    /// After the desired route of `prefix` changed from `before`: keeps
    /// what was sent for it (`before`, unless `unsent` had it already),
    /// or forgets it when it is now the desired one.
    fn keep_sent(&mut self, prefix: IpPrefix, before: Option<&Arc<RouteAttrs>>) {
        if !self.sent_any {
            return;
        }
        let sent = match self.unsent.get(&prefix) {
            Some(sent) => sent.clone(),
            None => before.cloned(),
        };
        if sent.as_ref() == self.desired.get(&prefix) {
            self.unsent.remove(&prefix);
        } else {
            self.unsent.insert(prefix, sent);
        }
    }

    /// The desired routes.
    pub fn desired(&self) -> &BTreeMap<IpPrefix, Arc<RouteAttrs>> {
        &self.desired
    }

    /// The route the peer has from us for `prefix`.
    pub fn sent_route(&self, prefix: &IpPrefix) -> Option<&Arc<RouteAttrs>> {
        if !self.sent_any {
            return None;
        }
        match self.unsent.get(prefix) {
            Some(sent) => sent.as_ref(),
            None => self.desired.get(prefix),
        }
    }

    /// The routes the peer has from us (a table built for the asking).
    pub fn sent(&self) -> BTreeMap<IpPrefix, Arc<RouteAttrs>> {
        if !self.sent_any {
            return BTreeMap::new();
        }
        let mut sent = self.desired.clone();
        for (prefix, route) in &self.unsent {
            match route {
                Some(attrs) => sent.insert(*prefix, Arc::clone(attrs)),
                None => sent.remove(prefix),
            };
        }
        sent
    }

    /// How many routes the peer has from us.
    pub fn sent_len(&self) -> usize {
        if !self.sent_any {
            return 0;
        }
        let mut n = self.desired.len();
        for (prefix, route) in &self.unsent {
            match (route, self.desired.contains_key(prefix)) {
                (Some(_), false) => n += 1,
                (None, true) => n -= 1,
                _ => {}
            }
        }
        n
    }

    /// Whether desired and sent may differ.
    pub fn is_dirty(&self) -> bool {
        self.full || !self.changed.is_empty()
    }

    /// Marks the peer as having nothing (new session).
    pub(crate) fn reset_sent(&mut self) {
        self.unsent.clear();
        self.sent_any = false;
        self.full = true;
    }

    /// Forgets that `family` was sent, so the next flush re-sends it (a
    /// ROUTE-REFRESH, RFC 2918 §4).
    pub(crate) fn resend(&mut self, family: Family) {
        self.full = true;
        if !self.sent_any {
            return;
        }
        // Sent and not desired: now neither.
        self.unsent
            .retain(|p, _| p.family() != family || self.desired.contains_key(p));
        for (prefix, sent) in self.unsent.iter_mut() {
            if prefix.family() == family {
                *sent = None;
            }
        }
        let sent_as_desired: Vec<IpPrefix> = self
            .desired
            .keys()
            .filter(|p| p.family() == family && !self.unsent.contains_key(p))
            .copied()
            .collect();
        self.unsent
            .extend(sent_as_desired.into_iter().map(|p| (p, None)));
        self.full = true;
    }

    /// Encodes the UPDATEs that bring the peer from `sent` to `desired`
    /// into `out`; afterwards `sent` is what the peer will have.
    pub(crate) fn flush(
        &mut self,
        ctx: &EncodeCtx,
        egress: &Egress,
        out: &mut BytesMut,
    ) -> FlushStats {
        let mut stats = FlushStats::default();
        if !self.is_dirty() {
            return stats;
        }
        let changed = std::mem::take(&mut self.changed);
        // With nothing sent, the changes one by one are the whole table
        // (each desired route was set or announced since): compared whole.
        let full = std::mem::take(&mut self.full) || !self.sent_any;
        let enc = UpdateEncoder::new(*ctx);
        let (desired, unsent) = (&self.desired, &self.unsent);
        let mut gone4 = Vec::new();
        let mut gone6 = Vec::new();
        let mut gone = |prefix: &IpPrefix| match prefix {
            IpPrefix::V4(p) => gone4.push(Nlri::new(*p)),
            IpPrefix::V6(p) => gone6.push(Nlri::new(*p)),
        };
        // The routes to send, in prefix order.
        let mut wanted: Vec<(IpPrefix, &Arc<RouteAttrs>)> = Vec::new();
        if full && !self.sent_any {
            wanted.extend(desired.iter().map(|(p, a)| (*p, a)));
        } else if full {
            // Every prefix whose sent route is not the desired one.
            for (prefix, _) in unsent
                .iter()
                .filter(|(p, sent)| sent.is_some() && !desired.contains_key(p))
            {
                gone(prefix);
            }
            for prefix in unsent.keys() {
                if let Some(attrs) = desired.get(prefix) {
                    wanted.push((*prefix, attrs));
                }
            }
        } else {
            for prefix in &changed {
                match (desired.get(prefix), self.sent_route(prefix)) {
                    (None, Some(_)) => gone(prefix),
                    (Some(attrs), before) if before != Some(attrs) => {
                        wanted.push((*prefix, attrs));
                    }
                    _ => {}
                }
            }
        }

        // Withdrawals first, so a route that moved never exists twice.
        // (Neither sent nor desired now.)
        for n in &gone4 {
            self.unsent.remove(&IpPrefix::V4(n.prefix));
        }
        for n in &gone6 {
            self.unsent.remove(&IpPrefix::V6(n.prefix));
        }
        stats.withdrawn = gone4.len() + gone6.len();
        if !gone4.is_empty() {
            // IPv4 announced with an IPv6 next hop (RFC 8950) went out in
            // MP_REACH_NLRI; withdraw them the same way.
            stats.updates += match egress.next_hop_v4 {
                Some(NextHop::V6 { .. }) => enc.withdraw_ipv4_mp(&gone4, out),
                _ => enc.withdraw_ipv4(&gone4, out),
            };
        }
        if !gone6.is_empty() {
            stats.updates += enc.withdraw_ipv6(&gone6, out);
        }

        // Announcements grouped by attribute set, in prefix order.
        let mut groups: HashMap<&Arc<RouteAttrs>, Group> = HashMap::new();
        let mut order: Vec<&Arc<RouteAttrs>> = Vec::new();
        let mut skipped = Vec::new();
        for (prefix, attrs) in wanted {
            if !egress.has(prefix.family()) {
                skipped.push(prefix);
                continue;
            }
            let entry = groups.entry(attrs).or_insert_with(|| {
                order.push(attrs);
                (Vec::new(), Vec::new())
            });
            match prefix {
                IpPrefix::V4(p) => entry.0.push(Nlri::new(p)),
                IpPrefix::V6(p) => entry.1.push(Nlri::new(p)),
            }
        }
        let mut sent_now: Vec<IpPrefix> = Vec::new();
        for attrs in order {
            let Some((v4, v6)) = groups.get(attrs) else {
                continue;
            };
            for (family, count) in [
                (Family::Ipv4Unicast, v4.len()),
                (Family::Ipv6Unicast, v6.len()),
            ] {
                if count == 0 {
                    continue;
                }
                let Some(next_hop) = next_hop(attrs, family, egress) else {
                    stats.skipped += count;
                    continue;
                };
                let path = path_attributes(attrs, egress, ctx.as4);
                let result = match family {
                    Family::Ipv4Unicast => enc.announce_ipv4(&path, next_hop, v4, out),
                    Family::Ipv6Unicast => enc.announce_ipv6(&path, next_hop, v6, out),
                };
                match result {
                    Ok(n) => {
                        stats.updates += n;
                        stats.announced += count;
                        match family {
                            Family::Ipv4Unicast => {
                                sent_now.extend(v4.iter().map(|n| IpPrefix::V4(n.prefix)));
                            }
                            Family::Ipv6Unicast => {
                                sent_now.extend(v6.iter().map(|n| IpPrefix::V6(n.prefix)));
                            }
                        }
                    }
                    // Attributes too large for one message: never sent.
                    Err(_) => stats.skipped += count,
                }
            }
        }
        stats.skipped += skipped.len();
        // Sent as desired now.
        if self.sent_any {
            for prefix in &sent_now {
                self.unsent.remove(prefix);
            }
        } else if !sent_now.is_empty() {
            // The first routes sent: those desired and not sent (skipped)
            // are the difference.
            sent_now.sort_unstable();
            self.unsent = self
                .desired
                .keys()
                .filter(|p| sent_now.binary_search(p).is_err())
                .map(|p| (*p, None))
                .collect();
            self.sent_any = true;
        }
        stats
    }
}

/// The next hop for a route of `family`.
fn next_hop(attrs: &RouteAttrs, family: Family, egress: &Egress) -> Option<NextHop> {
    match (attrs.next_hop, family) {
        (Some(IpAddr::V4(a)), Family::Ipv4Unicast) => Some(NextHop::V4(a)),
        (Some(IpAddr::V6(a)), Family::Ipv6Unicast) => Some(NextHop::V6 {
            global: a,
            link_local: None,
        }),
        // A next hop of the other family cannot be expressed here; fall
        // back to next hop self.
        (_, Family::Ipv4Unicast) => egress.next_hop_v4,
        (_, Family::Ipv6Unicast) => egress.next_hop_v6,
    }
}

/// The path attributes for a route, in type-code order, for a session
/// with 4-octet AS numbers (`as4`) or without: then with AS4_PATH beside
/// the AS_PATH when our AS does not fit in 2 octets (RFC 6793 §4.2.2).
fn path_attributes(attrs: &RouteAttrs, egress: &Egress, as4: bool) -> Vec<PathAttribute> {
    let mut out = Vec::with_capacity(6);
    out.push(PathAttribute::new(AttrValue::Origin(
        attrs.origin.unwrap_or(Origin::Igp),
    )));
    let path = if egress.ibgp {
        AsPath::default()
    } else {
        AsPath::sequence(
            std::iter::once(egress.local_as)
                .chain(egress.real_as)
                .collect(),
        )
    };
    out.push(PathAttribute::new(AttrValue::AsPath(path)));
    if let Some(med) = attrs.med {
        out.push(PathAttribute::new(AttrValue::MultiExitDisc(med)));
    }
    if egress.ibgp {
        // RFC 4271 §5.1.5: LOCAL_PREF goes to internal peers, 100 unless set.
        out.push(PathAttribute::new(AttrValue::LocalPref(
            attrs.local_pref.unwrap_or(100),
        )));
    }
    if !attrs.communities.is_empty() {
        out.push(PathAttribute::new(AttrValue::Communities(
            attrs.communities.as_slice().into(),
        )));
    }
    if !attrs.large_communities.is_empty() {
        out.push(PathAttribute::new(AttrValue::LargeCommunities(
            attrs.large_communities.as_slice().into(),
        )));
    }
    as4::outbound(&mut out, as4);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame;
    use crate::wire::{AttrType, DecodeCtx, Message, MpReach, MpUnreach, Update};

    fn egress(ibgp: bool) -> Egress {
        Egress {
            local_as: 64512,
            real_as: None,
            ibgp,
            next_hop_v4: Some(NextHop::V4(Ipv4Addr::new(192, 0, 2, 1))),
            next_hop_v6: Some(NextHop::V6 {
                global: "2001:db8::1".parse().unwrap(),
                link_local: None,
            }),
            families: [true, true],
        }
    }

    fn updates(buf: &[u8]) -> Vec<Update> {
        let ctx = DecodeCtx::default();
        let mut rest = buf;
        let mut out = Vec::new();
        while let Some(len) = frame::decode(rest, &ctx).unwrap() {
            if let Message::Update(u) = Message::parse(&rest[..len], &ctx).unwrap() {
                assert!(u.errors.is_empty(), "{:?}", u.errors);
                out.push(u);
            }
            rest = &rest[len..];
        }
        out
    }

    fn attrs(med: u32) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            med: Some(med),
            communities: vec![Community::new(64512, 1)],
            ..Default::default()
        })
    }

    /// RFC 6793 §4.2.2: with AS 4200000002 towards a peer without the
    /// 4-octet AS capability, AS_PATH carries AS_TRANS and AS4_PATH the
    /// real AS. Byte for byte; and the attributes are, value for value and
    /// in order, those FRR 8.4 sent in the same situation
    /// (`testdata/bgp/as-trans.as4.bin` message 4: AS 4200000002 to a
    /// 2-octet peer, 10.70.1.0/24, MED 0, next hop 10.0.7.1). Only the
    /// flags differ: FRR sets Extended Length on AS_PATH and AS4_PATH.
    #[test]
    fn two_octet_peer_gets_as_trans_and_as4_path() {
        const OURS: &str = concat!(
            "ffffffffffffffffffffffffffffffff", // marker
            "003d",                             // length 61
            "02",                               // UPDATE
            "0000",                             // no withdrawn routes
            "0022",                             // path attributes: 34 octets
            "40010100",                         // ORIGIN IGP
            "40020402015ba0",                   // AS_PATH SEQ 23456 (2-octet)
            "4003040a000701",                   // NEXT_HOP 10.0.7.1
            "80040400000000",                   // MED 0
            "c011060201fa56ea02",               // AS4_PATH SEQ 4200000002
            "180a4601",                         // NLRI 10.70.1.0/24
        );
        let two_octet = EncodeCtx {
            as4: false,
            ..EncodeCtx::default()
        };
        let mut e = egress(false);
        e.local_as = 4_200_000_002;
        let mut rib = AdjRibOut::default();
        rib.announce(
            "10.70.1.0/24".parse().unwrap(),
            Arc::new(RouteAttrs {
                next_hop: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 7, 1))),
                med: Some(0),
                ..Default::default()
            }),
        );
        let mut out = BytesMut::new();
        rib.flush(&two_octet, &e, &mut out);
        assert_eq!(hex::encode(&out), OURS);

        // FRR's message 4 of the capture: the same values in the same order.
        let capture = include_bytes!("../../../testdata/bgp/as-trans.as4.bin");
        // Past the OPEN, the KEEPALIVE and message 3.
        let frr = (0..3)
            .try_fold(&capture[..], |rest, _| {
                frame::decode(rest, &two_octet).unwrap().map(|n| &rest[n..])
            })
            .unwrap();
        let n = frame::decode(frr, &two_octet).unwrap().unwrap();
        let Message::Update(frr) = Message::parse(&frr[..n], &two_octet).unwrap() else {
            panic!("message 4 of the capture is an UPDATE");
        };
        let Message::Update(ours) = Message::parse(&out, &two_octet).unwrap() else {
            panic!("{out:02x?}");
        };
        let values = |u: &Update| {
            u.attributes
                .iter()
                .map(|a| a.value.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(values(&ours), values(&frr));
        assert_eq!(ours.nlri, frr.nlri);
        assert_eq!(
            ours.attribute(AttrType::As4Path),
            Some(&AttrValue::As4Path(AsPath::sequence(vec![4_200_000_002])))
        );

        // On a 4-octet session: the real AS in AS_PATH, no AS4_PATH.
        let mut rib4 = AdjRibOut::default();
        rib4.announce(
            "10.70.1.0/24".parse().unwrap(),
            Arc::new(RouteAttrs::default()),
        );
        let mut out = BytesMut::new();
        rib4.flush(&EncodeCtx::default(), &e, &mut out);
        let ups = updates(&out);
        assert_eq!(
            ups[0].attribute(AttrType::AsPath),
            Some(&AttrValue::AsPath(AsPath::sequence(vec![4_200_000_002])))
        );
        assert_eq!(ups[0].attribute(AttrType::As4Path), None);
    }

    #[test]
    fn diff_sends_minimum_grouped_by_attributes() {
        let mut rib = AdjRibOut::default();
        let a = attrs(1);
        let b = attrs(2);
        for i in 0..10u32 {
            rib.announce(
                IpPrefix::V4(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000 + i))),
                a.clone(),
            );
        }
        rib.announce("2001:db8::5/128".parse().unwrap(), b.clone());
        let mut out = BytesMut::new();
        let stats = rib.flush(&EncodeCtx::default(), &egress(false), &mut out);
        assert_eq!(
            stats,
            FlushStats {
                updates: 2,
                announced: 11,
                withdrawn: 0,
                skipped: 0
            }
        );
        let ups = updates(&out);
        assert_eq!(
            ups[0].nlri.len(),
            10,
            "one UPDATE for the whole attribute set"
        );
        assert_eq!(
            ups[0].attribute(AttrType::MultiExitDisc),
            Some(&AttrValue::MultiExitDisc(1))
        );
        assert_eq!(
            ups[0].attribute(AttrType::AsPath),
            Some(&AttrValue::AsPath(AsPath::sequence(vec![64512])))
        );
        assert!(
            ups[0].attribute(AttrType::LocalPref).is_none(),
            "no LOCAL_PREF to eBGP"
        );
        assert!(
            matches!(ups[1].mp_reach(), Some(MpReach::Ipv6Unicast { nlri, .. }) if nlri.len() == 1)
        );

        // Nothing changed: nothing sent.
        let mut out = BytesMut::new();
        assert_eq!(
            rib.flush(&EncodeCtx::default(), &egress(false), &mut out),
            FlushStats::default()
        );
        assert!(out.is_empty());

        // Change one route's attributes, withdraw two others.
        rib.announce(
            IpPrefix::V4(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000))),
            b.clone(),
        );
        rib.withdraw(&IpPrefix::V4(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0001))));
        rib.withdraw(&"2001:db8::5/128".parse().unwrap());
        let mut out = BytesMut::new();
        let stats = rib.flush(&EncodeCtx::default(), &egress(false), &mut out);
        assert_eq!(
            stats,
            FlushStats {
                updates: 3,
                announced: 1,
                withdrawn: 2,
                skipped: 0
            }
        );
        let ups = updates(&out);
        assert_eq!(ups[0].withdrawn.len(), 1);
        assert!(matches!(ups[1].mp_unreach(), Some(MpUnreach::Ipv6Unicast(v)) if v.len() == 1));
        assert_eq!(ups[2].nlri.len(), 1);
        assert_eq!(rib.sent().len(), 9);
    }

    #[test]
    fn ibgp_gets_local_pref_and_empty_path() {
        let mut rib = AdjRibOut::default();
        rib.announce(
            "10.0.0.1/32".parse().unwrap(),
            Arc::new(RouteAttrs::default()),
        );
        let mut out = BytesMut::new();
        rib.flush(&EncodeCtx::default(), &egress(true), &mut out);
        let ups = updates(&out);
        assert_eq!(
            ups[0].attribute(AttrType::LocalPref),
            Some(&AttrValue::LocalPref(100))
        );
        assert_eq!(
            ups[0].attribute(AttrType::AsPath),
            Some(&AttrValue::AsPath(AsPath::default()))
        );
    }

    #[test]
    fn unnegotiated_family_is_skipped_until_possible() {
        let mut rib = AdjRibOut::default();
        rib.announce(
            "2001:db8::1/128".parse().unwrap(),
            Arc::new(RouteAttrs::default()),
        );
        let mut e = egress(false);
        e.families = [true, false];
        let mut out = BytesMut::new();
        let stats = rib.flush(&EncodeCtx::default(), &e, &mut out);
        assert_eq!(stats.skipped, 1);
        assert!(out.is_empty());
        assert!(rib.sent().is_empty());
        assert_eq!(rib.sent_len(), 0);
        // Desired, not sent: the next full flush (a new session that has
        // the family) sends it.
        rib.reset_sent();
        let mut out = BytesMut::new();
        let stats = rib.flush(&EncodeCtx::default(), &egress(false), &mut out);
        assert_eq!(stats.announced, 1);
        assert_eq!(rib.sent(), *rib.desired());
        assert_eq!(rib.sent_len(), 1);
    }

    /// A peer that has nothing from us (down, or a new session) costs no
    /// table beside the desired one, whatever is desired; after the first
    /// flush sent it all, none either.
    #[test]
    fn nothing_sent_keeps_no_difference() {
        let host = |n: u32| IpPrefix::V4(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000 + n)));
        let mut rib = AdjRibOut::default();
        rib.set((0..100).map(|n| (host(n), attrs(1))).collect());
        rib.announce(host(1000), attrs(2));
        rib.resend(Family::Ipv4Unicast);
        assert!(rib.unsent.is_empty());
        assert_eq!(rib.sent_len(), 0);
        let mut out = BytesMut::new();
        let stats = rib.flush(&EncodeCtx::default(), &egress(false), &mut out);
        assert_eq!(stats.announced, 101);
        assert!(rib.unsent.is_empty());
        assert_eq!(rib.sent(), *rib.desired());
        assert_eq!(rib.sent_len(), 101);
        rib.reset_sent();
        assert!(rib.unsent.is_empty());
        assert_eq!(rib.sent_len(), 0);
    }

    #[test]
    fn resend_after_refresh() {
        let mut rib = AdjRibOut::default();
        rib.announce(
            "10.0.0.1/32".parse().unwrap(),
            Arc::new(RouteAttrs::default()),
        );
        rib.announce(
            "2001:db8::1/128".parse().unwrap(),
            Arc::new(RouteAttrs::default()),
        );
        let mut out = BytesMut::new();
        rib.flush(&EncodeCtx::default(), &egress(false), &mut out);
        rib.resend(Family::Ipv4Unicast);
        let mut out = BytesMut::new();
        let stats = rib.flush(&EncodeCtx::default(), &egress(false), &mut out);
        assert_eq!(stats.announced, 1);
        assert_eq!(updates(&out)[0].nlri.len(), 1);
    }

    /// A flush after changes one by one sends the very bytes a flush of
    /// the whole table does, over a seeded history of announcements,
    /// withdrawals, attribute changes and session resets.
    #[test]
    fn changes_one_by_one_flush_as_the_whole_table_does() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let sets = [attrs(1), attrs(2), attrs(3)];
        let (mut keyed, mut whole) = (AdjRibOut::default(), AdjRibOut::default());
        let mut sent_something = 0;
        for round in 0..300 {
            for _ in 0..next() % 6 {
                let n = (next() % 40) as u32;
                let prefix = if next() % 4 == 0 {
                    IpPrefix::V6(Ipv6Prefix::host(Ipv6Addr::from(
                        0x2001_0db8_u128 << 96 | u128::from(n),
                    )))
                } else {
                    IpPrefix::V4(Ipv4Prefix::host(Ipv4Addr::from(0x0a00_0000 + n)))
                };
                if next() % 3 == 0 {
                    keyed.withdraw(&prefix);
                } else {
                    keyed.announce(prefix, sets[(next() % 3) as usize].clone());
                }
            }
            whole.set(keyed.desired().clone());
            if round % 60 == 59 {
                keyed.reset_sent();
                whole.reset_sent();
            }
            let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
            let one_by_one = keyed.flush(&EncodeCtx::default(), &egress(true), &mut a);
            let all = whole.flush(&EncodeCtx::default(), &egress(true), &mut b);
            assert_eq!(one_by_one, all, "round {round}");
            assert_eq!(a, b, "round {round}");
            assert_eq!(keyed.sent(), whole.sent(), "round {round}");
            // Every route could be sent: nothing is kept beside the
            // desired table.
            assert_eq!(keyed.sent(), *keyed.desired(), "round {round}");
            assert!(
                keyed.unsent.is_empty() && whole.unsent.is_empty(),
                "round {round}"
            );
            assert_eq!(keyed.sent_len(), keyed.desired().len(), "round {round}");
            assert!(!keyed.is_dirty());
            sent_something += usize::from(!a.is_empty());
        }
        assert!(sent_something > 200, "{sent_something}");
    }
}
