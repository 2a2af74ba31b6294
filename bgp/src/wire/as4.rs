//! RFC 6793 §4.2: a NEW (4-octet AS) speaker talking to an OLD one.
//!
//! On a session where the 4-octet AS capability was not negotiated the
//! AS_PATH and AGGREGATOR carry 2-octet AS numbers, and every AS that does
//! not fit is sent as AS_TRANS (23456; the codec does that when it encodes
//! an [`AttrValue`] for such a session). The real path travels beside it
//! in AS4_PATH, the real aggregator in AS4_AGGREGATOR: [`outbound`] adds
//! them to the attributes of a route (§4.2.2), [`as_path`] and
//! [`aggregator`] put a received route's path and aggregator back together
//! (§4.2.3). Between two NEW speakers neither attribute is sent, and
//! received ones are ignored (§4.1). Pure functions of the attributes; the
//! codec itself stays a faithful encoding of what it is given.
//!
//! ```text
//! AS_PATH   (2-octet)  SEQ 64999 23456            count 2
//! AS4_PATH  (4-octet)  SEQ       4200000001       count 1
//! real path            SEQ 64999 4200000001       (leading 2 - 1 ASes of
//!                                                  AS_PATH, then AS4_PATH)
//! ```

use super::attr::{Aggregator, AsPath, AttrValue, PathAttribute, SegmentType};
use super::iana::{AS_TRANS, AttrType};

/// Whether `asn` needs AS_TRANS in a 2-octet field.
fn mappable(asn: u32) -> bool {
    asn <= u32::from(u16::MAX)
}

/// Makes `attrs`, the attributes of a route with its real (4-octet) AS
/// path and aggregator, what a NEW speaker sends on a session with
/// 4-octet AS numbers (`as4`) or without (RFC 6793 §4.2.2).
///
/// - `as4`: any AS4_PATH and AS4_AGGREGATOR are removed (§4.1: never sent
///   to a NEW speaker).
/// - otherwise AS4_PATH and AS4_AGGREGATOR are rebuilt from AS_PATH and
///   AGGREGATOR: AS4_PATH when the AS_PATH holds an AS above 65535 (the
///   codec sends AS_TRANS for it in AS_PATH), without the confederation
///   segments; AS4_AGGREGATOR when the aggregating AS is above 65535 (the
///   codec sends AS_TRANS in AGGREGATOR). A path or aggregator of 2-octet
///   ASes only gets neither ("SHOULD NOT send").
///
/// New attributes go in type-code order, before the first attribute with
/// a higher code.
pub fn outbound(attrs: &mut Vec<PathAttribute>, as4: bool) {
    attrs.retain(|a| !matches!(a.value, AttrValue::As4Path(_) | AttrValue::As4Aggregator(_)));
    if as4 {
        return;
    }
    let mut extra = Vec::new();
    for a in attrs.iter() {
        match &a.value {
            AttrValue::AsPath(p) if p.segments().any(|s| s.asns().any(|n| !mappable(n))) => {
                let real = AsPath::from_segments(
                    p.segments()
                        .filter(|s| matches!(s.kind, SegmentType::Sequence | SegmentType::Set))
                        .map(|s| (s.kind, s.asns().collect::<Vec<_>>())),
                );
                extra.push(PathAttribute::new(AttrValue::As4Path(real)));
            }
            AttrValue::Aggregator(g) if !mappable(g.asn) => {
                extra.push(PathAttribute::new(AttrValue::As4Aggregator(*g)));
            }
            _ => {}
        }
    }
    for a in extra {
        let code = u8::from(a.value.type_code());
        let at = attrs
            .iter()
            .position(|b| u8::from(b.value.type_code()) > code)
            .unwrap_or(attrs.len());
        attrs.insert(at, a);
    }
}

/// The AS path of a route received with `attrs` on a session with
/// 4-octet AS numbers (`as4`) or without (RFC 6793 §4.2.3); `None`
/// without an AS_PATH.
///
/// - `as4`: the AS_PATH; AS4_PATH is ignored (§4.1).
/// - With an AGGREGATOR whose AS is not AS_TRANS beside an
///   AS4_AGGREGATOR, the AS_PATH (the route was aggregated by an OLD
///   speaker after the AS4_PATH was made).
/// - Without AS4_PATH, or when AS4_PATH counts more ASes than AS_PATH,
///   the AS_PATH.
/// - Otherwise the leading ASes of AS_PATH that AS4_PATH lacks (an OLD
///   speaker prepended them), then AS4_PATH. Counts are those of route
///   selection ([`AsPath::path_len`]: a set counts 1, confederation
///   segments 0); a confederation segment of AS_PATH goes along when it
///   leads the path or follows a segment taken. Confederation segments
///   of AS4_PATH are dropped (§6: they never belong there).
pub fn as_path(attrs: &[PathAttribute], as4: bool) -> Option<AsPath> {
    let as_path = attrs.iter().find_map(|a| match &a.value {
        AttrValue::AsPath(p) => Some(p),
        _ => None,
    })?;
    if as4 || aggregated_by_old(attrs) {
        return Some(as_path.clone());
    }
    let Some(as4_path) = attrs.iter().find_map(|a| match &a.value {
        AttrValue::As4Path(p) => Some(p),
        _ => None,
    }) else {
        return Some(as_path.clone());
    };
    let tail: Vec<(SegmentType, Vec<u32>)> = as4_path
        .segments()
        .filter(|s| matches!(s.kind, SegmentType::Sequence | SegmentType::Set))
        .map(|s| (s.kind, s.asns().collect()))
        .collect();
    let tail_len: usize = tail
        .iter()
        .map(|(kind, asns)| match kind {
            SegmentType::Set => 1,
            _ => asns.len(),
        })
        .sum();
    let Some(mut need) = as_path.path_len().checked_sub(tail_len) else {
        return Some(as_path.clone());
    };
    let mut head: Vec<(SegmentType, Vec<u32>)> = Vec::new();
    // Every segment before this one was taken whole, so a confederation
    // segment here leads the path or follows a segment taken: it goes
    // along (counting 0).
    for s in as_path.segments() {
        match s.kind {
            SegmentType::ConfedSequence | SegmentType::ConfedSet => {
                head.push((s.kind, s.asns().collect()));
            }
            _ if need == 0 => break,
            SegmentType::Set => {
                head.push((s.kind, s.asns().collect()));
                need -= 1;
            }
            SegmentType::Sequence => {
                let take = need.min(s.len());
                head.push((s.kind, s.asns().take(take).collect()));
                need -= take;
                if take < s.len() {
                    break;
                }
            }
        }
    }
    // One sequence where the head's last and the tail's first meet.
    let mut tail = tail.into_iter().peekable();
    if let (Some((SegmentType::Sequence, last)), Some((SegmentType::Sequence, first))) =
        (head.last_mut(), tail.peek())
        && last.len() + first.len() <= 255
    {
        last.extend_from_slice(first);
        tail.next();
    }
    head.extend(tail);
    Some(AsPath::from_segments(head))
}

/// The aggregator of a route received with `attrs` (RFC 6793 §4.2.3):
/// AS4_AGGREGATOR on a 2-octet session when the AGGREGATOR's AS is
/// AS_TRANS, otherwise AGGREGATOR; `None` without an AGGREGATOR.
pub fn aggregator(attrs: &[PathAttribute], as4: bool) -> Option<Aggregator> {
    let (agg, agg4) = aggregators(attrs);
    let agg = agg?;
    match agg4 {
        Some(real) if !as4 && agg.asn == u32::from(AS_TRANS) => Some(real),
        _ => Some(agg),
    }
}

/// AGGREGATOR and AS4_AGGREGATOR, if present.
fn aggregators(attrs: &[PathAttribute]) -> (Option<Aggregator>, Option<Aggregator>) {
    let find = |t: AttrType| {
        attrs.iter().find_map(|a| match (&a.value, t) {
            (AttrValue::Aggregator(g), AttrType::Aggregator)
            | (AttrValue::As4Aggregator(g), AttrType::As4Aggregator) => Some(*g),
            _ => None,
        })
    };
    (find(AttrType::Aggregator), find(AttrType::As4Aggregator))
}

/// §4.2.3: an AGGREGATOR that is not AS_TRANS beside an AS4_AGGREGATOR
/// means an OLD speaker aggregated the route: AS4_PATH and AS4_AGGREGATOR
/// are stale and ignored.
fn aggregated_by_old(attrs: &[PathAttribute]) -> bool {
    matches!(aggregators(attrs), (Some(g), Some(_)) if g.asn != u32::from(AS_TRANS))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::wire::Origin;

    const BIG: u32 = 4_200_000_001;

    fn path(segments: &[(SegmentType, &[u32])]) -> AsPath {
        AsPath::from_segments(segments.iter().map(|(k, a)| (*k, a.to_vec())))
    }

    fn attrs(values: Vec<AttrValue>) -> Vec<PathAttribute> {
        values.into_iter().map(PathAttribute::new).collect()
    }

    use SegmentType::{ConfedSequence as CSEQ, ConfedSet as CSET, Sequence as SEQ, Set as SET};

    #[test]
    fn outbound_adds_as4_path_only_when_needed() {
        let route = |p: AsPath| {
            attrs(vec![
                AttrValue::Origin(Origin::Igp),
                AttrValue::AsPath(p),
                AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
                AttrValue::LargeCommunities(Default::default()),
            ])
        };
        // A 4-octet AS: AS4_PATH (type 17) before LARGE_COMMUNITY (32),
        // without the confederation segment.
        let mut a = route(path(&[(CSEQ, &[65010]), (SEQ, &[BIG, 64999])]));
        outbound(&mut a, false);
        let codes: Vec<u8> = a.iter().map(|a| a.value.type_code().into()).collect();
        assert_eq!(codes, [1, 2, 3, 17, 32]);
        assert_eq!(
            a[3].value,
            AttrValue::As4Path(path(&[(SEQ, &[BIG, 64999])]))
        );
        // 2-octet ASes only: nothing added. A 4-octet session: nothing
        // added, and a stale AS4_PATH is removed.
        let mut a = route(AsPath::sequence(vec![64999]));
        let before = a.clone();
        outbound(&mut a, false);
        assert_eq!(a, before);
        let mut a = route(AsPath::sequence(vec![BIG]));
        a.push(PathAttribute::new(AttrValue::As4Path(AsPath::sequence(
            vec![1],
        ))));
        outbound(&mut a, true);
        assert_eq!(a, route(AsPath::sequence(vec![BIG])));
    }

    #[test]
    fn outbound_adds_as4_aggregator_for_a_4_octet_aggregator() {
        let g = |asn| Aggregator {
            asn,
            addr: Ipv4Addr::new(192, 0, 2, 9),
        };
        let mut a = attrs(vec![
            AttrValue::AsPath(AsPath::sequence(vec![64999])),
            AttrValue::Aggregator(g(BIG)),
            AttrValue::Communities(Default::default()),
        ]);
        outbound(&mut a, false);
        let codes: Vec<u8> = a.iter().map(|a| a.value.type_code().into()).collect();
        assert_eq!(codes, [2, 7, 8, 18]);
        assert_eq!(a[3].value, AttrValue::As4Aggregator(g(BIG)));
        let mut a = attrs(vec![AttrValue::Aggregator(g(64999))]);
        outbound(&mut a, false);
        assert_eq!(a.len(), 1);
    }

    /// Each case: AS_PATH, AS4_PATH, the reconstructed path.
    #[test]
    fn as_path_reconstruction() {
        type Path = &'static [(SegmentType, &'static [u32])];
        let cases: &[(&str, Path, Path, Path)] = &[
            (
                "same count: AS4_PATH is the path",
                &[(SEQ, &[23456, 23456, 64999])],
                &[(SEQ, &[BIG, BIG + 1, 64999])],
                &[(SEQ, &[BIG, BIG + 1, 64999])],
            ),
            (
                "OLD speakers prepended two ASes: they lead, one sequence",
                &[(SEQ, &[65001, 65002, 23456])],
                &[(SEQ, &[BIG])],
                &[(SEQ, &[65001, 65002, BIG])],
            ),
            (
                "AS4_PATH longer than AS_PATH: ignored",
                &[(SEQ, &[23456])],
                &[(SEQ, &[BIG, 64999])],
                &[(SEQ, &[23456])],
            ),
            (
                "a set counts 1 and is taken whole",
                &[(SET, &[65001, 65002]), (SEQ, &[23456])],
                &[(SEQ, &[BIG])],
                &[(SET, &[65001, 65002]), (SEQ, &[BIG])],
            ),
            (
                "a leading confed segment goes along, counting 0",
                &[(CSEQ, &[65010]), (SEQ, &[65001, 23456])],
                &[(SEQ, &[BIG])],
                &[(CSEQ, &[65010]), (SEQ, &[65001, BIG])],
            ),
            (
                "a leading confed segment goes along even when nothing is taken",
                &[(CSET, &[65010, 65011]), (SEQ, &[23456])],
                &[(SEQ, &[BIG])],
                &[(CSET, &[65010, 65011]), (SEQ, &[BIG])],
            ),
            (
                "confed segments in AS4_PATH are dropped",
                &[(SEQ, &[65001, 23456])],
                &[(CSEQ, &[65020]), (SEQ, &[BIG])],
                &[(SEQ, &[65001, BIG])],
            ),
            (
                "the head's sequence is cut inside",
                &[(SEQ, &[65001, 65002, 65003]), (SET, &[23456, 64999])],
                &[(SEQ, &[65003]), (SET, &[BIG, 64999])],
                &[(SEQ, &[65001, 65002, 65003]), (SET, &[BIG, 64999])],
            ),
        ];
        for (what, p2, p4, want) in cases {
            let a = attrs(vec![
                AttrValue::AsPath(path(p2)),
                AttrValue::As4Path(path(p4)),
            ]);
            assert_eq!(as_path(&a, false), Some(path(want)), "{what}");
            // On a 4-octet session AS4_PATH is ignored.
            assert_eq!(as_path(&a, true), Some(path(p2)), "{what}, as4");
        }
        assert_eq!(as_path(&[], false), None);
    }

    #[test]
    fn aggregator_and_path_after_old_aggregation() {
        let g = |asn| Aggregator {
            asn,
            addr: Ipv4Addr::new(192, 0, 2, 9),
        };
        let with = |agg: u32| {
            attrs(vec![
                AttrValue::AsPath(AsPath::sequence(vec![65001, 23456])),
                AttrValue::Aggregator(g(agg)),
                AttrValue::As4Path(AsPath::sequence(vec![BIG])),
                AttrValue::As4Aggregator(g(BIG)),
            ])
        };
        // AGGREGATOR is AS_TRANS: the 4-octet ones hold.
        let a = with(u32::from(AS_TRANS));
        assert_eq!(aggregator(&a, false), Some(g(BIG)));
        assert_eq!(as_path(&a, false), Some(AsPath::sequence(vec![65001, BIG])));
        assert_eq!(aggregator(&a, true), Some(g(u32::from(AS_TRANS))));
        // An OLD speaker aggregated (AGGREGATOR 65001): both AS4_* ignored.
        let a = with(65001);
        assert_eq!(aggregator(&a, false), Some(g(65001)));
        assert_eq!(
            as_path(&a, false),
            Some(AsPath::sequence(vec![65001, 23456]))
        );
        assert_eq!(aggregator(&a[..1], false), None);
    }

    /// What `outbound` sends, read back by a NEW speaker through an OLD
    /// one that prepended its AS: the real path.
    #[test]
    fn outbound_then_as_path_through_an_old_speaker() {
        let real = path(&[(SEQ, &[BIG, 64999, BIG + 7])]);
        let mut a = attrs(vec![AttrValue::AsPath(real.clone())]);
        outbound(&mut a, false);
        // The OLD speaker sees AS_PATH with AS_TRANS and prepends 65001.
        let AttrValue::AsPath(p) = &a[0].value else {
            panic!("{a:?}")
        };
        let two: Vec<u32> = std::iter::once(65001)
            .chain(p.segments().flat_map(|s| {
                s.asns()
                    .map(|n| if mappable(n) { n } else { u32::from(AS_TRANS) })
                    .collect::<Vec<_>>()
            }))
            .collect();
        a[0].value = AttrValue::AsPath(AsPath::sequence(two));
        assert_eq!(
            as_path(&a, false),
            Some(path(&[(SEQ, &[65001, BIG, 64999, BIG + 7])]))
        );
    }
}
