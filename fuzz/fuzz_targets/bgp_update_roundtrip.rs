//! Emits an arbitrary UPDATE and parses it back: emit then parse must give
//! the same value, with no RFC 7606 errors. Its AS path, sent to a 2-octet
//! peer with AS4_PATH, must read back whole (RFC 6793).
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use bgp::wire::{
    AttrType, AttrValue, EncodeCtx, Family, Message, MpReach, MpUnreach, NextHop, Nlri,
    PathAttribute, SegmentType, Update, as4,
};
use libfuzzer_sys::fuzz_target;

/// Values that emit normalises (so they cannot come back equal) are skipped.
fn canonical(ctx: &EncodeCtx, u: &Update) -> bool {
    let mut seen = [false; 256];
    u.attributes.iter().all(|a| {
        let t = u8::from(a.value.type_code());
        let first = !std::mem::replace(&mut seen[usize::from(t)], true);
        let value_ok = match &a.value {
            // 2-octet sessions replace large ASes with AS_TRANS.
            AttrValue::AsPath(p) => ctx.as4 || p.segments().all(|s| s.asns().all(|a| a <= 0xffff)),
            AttrValue::Aggregator(g) => ctx.as4 || g.asn <= 0xffff,
            AttrValue::MpReach(MpReach::Ipv6Unicast {
                next_hop: NextHop::V4(_),
                ..
            }) => false,
            AttrValue::NextHop(a) => {
                !(a.is_unspecified() || a.is_multicast() || a.octets()[0] >= 240)
            }
            AttrValue::Communities(v) => !v.is_empty(),
            AttrValue::ClusterList(v) => !v.is_empty(),
            AttrValue::ExtendedCommunities(v) => !v.is_empty(),
            AttrValue::Ipv6ExtendedCommunities(v) => !v.is_empty(),
            AttrValue::LargeCommunities(v) => !v.is_empty(),
            AttrValue::Unknown(_) => a.flags.0 & 0x80 != 0,
            _ => true,
        };
        first && value_ok
    })
}

/// Path identifiers travel only where ADD-PATH is negotiated, and a
/// missing one is sent as 0 (RFC 7911): set them as a parse will see them.
fn normalize_path_ids(ctx: &EncodeCtx, u: &mut Update) {
    fn fix<P>(list: &mut [Nlri<P>], on: bool) {
        for n in list {
            n.path_id = on.then(|| n.path_id.unwrap_or(0));
        }
    }
    let v4 = ctx.add_path.contains(Family::Ipv4Unicast);
    let v6 = ctx.add_path.contains(Family::Ipv6Unicast);
    fix(&mut u.withdrawn, v4);
    fix(&mut u.nlri, v4);
    for a in &mut u.attributes {
        match &mut a.value {
            AttrValue::MpReach(MpReach::Ipv4Unicast { nlri, .. }) => fix(nlri, v4),
            AttrValue::MpReach(MpReach::Ipv6Unicast { nlri, .. }) => fix(nlri, v6),
            AttrValue::MpUnreach(MpUnreach::Ipv4Unicast(v)) => fix(v, v4),
            AttrValue::MpUnreach(MpUnreach::Ipv6Unicast(v)) => fix(v, v6),
            _ => {}
        }
    }
}

/// RFC 6793 §4.2.2 then §4.2.3: a path of sequences and sets sent to a
/// peer without 4-octet AS numbers, with `as4::outbound`, reads back whole
/// at a NEW speaker.
fn as4_path_round_trip(ctx: &EncodeCtx, update: &Update) {
    let Some(AttrValue::AsPath(path)) = update.attribute(AttrType::AsPath) else {
        return;
    };
    if !path
        .segments()
        .all(|s| matches!(s.kind, SegmentType::Sequence | SegmentType::Set))
    {
        return;
    }
    let mut attributes = vec![PathAttribute::new(AttrValue::AsPath(path.clone()))];
    as4::outbound(&mut attributes, false);
    let two_octet = EncodeCtx { as4: false, ..*ctx };
    let msg = Message::Update(Update {
        attributes,
        ..Update::default()
    });
    let Ok(bytes) = msg.to_bytes(&two_octet) else {
        return;
    };
    let Ok(Message::Update(back)) = Message::parse(&bytes, &two_octet) else {
        panic!("emitted UPDATE must parse");
    };
    assert_eq!(as4::as_path(&back.attributes, false).as_ref(), Some(path));
}

fuzz_target!(|input: (EncodeCtx, Update)| {
    let (ctx, mut update) = input;
    as4_path_round_trip(&ctx, &update);
    if !canonical(&ctx, &update) {
        return;
    }
    normalize_path_ids(&ctx, &mut update);
    let msg = Message::Update(update);
    let Ok(bytes) = msg.to_bytes(&ctx) else {
        return;
    };
    let back = Message::parse(&bytes, &ctx).expect("emitted UPDATE must parse");
    let Message::Update(back_update) = &back else {
        panic!("not an UPDATE")
    };
    // Missing mandatory attributes are legal to emit but reported on parse.
    if back_update.errors.iter().any(|e| e.error.subcode != 3) {
        panic!("errors on re-parse: {:?}", back_update.errors);
    }
    let mut back = back;
    if let Message::Update(u) = &mut back {
        u.errors.clear();
    }
    // Flags are normalised on emit: compare the bytes of a second emit.
    assert_eq!(back.to_bytes(&ctx).expect("re-emit"), bytes);
    if let (Message::Update(a), Message::Update(b)) = (&back, &msg) {
        assert_eq!(a.withdrawn, b.withdrawn);
        assert_eq!(a.nlri, b.nlri);
        let values = |u: &Update| {
            u.attributes
                .iter()
                .map(|a| a.value.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(values(a), values(b));
    }
});
