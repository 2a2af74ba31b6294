//! Checks shared by the golden tests (`golden_*.rs`).

use bgp::frame;
use bgp::wire::{DecodeCtx, Message};
use bytes::{Bytes, BytesMut};

/// Octets already in the output buffer before `emit` appends: it must
/// leave them alone (STYLE §7, "a buffer pre-filled with 0xa5").
const FILL: [u8; 7] = [0xa5; 7];

/// Checks one golden pair both ways and returns the parsed message:
/// `bytes` frames as exactly one whole message, parses to `expected`, and
/// `expected` emits exactly `bytes` (also through `to_bytes`).
pub(crate) fn assert_golden(bytes: &[u8], expected: &Message, ctx: &DecodeCtx) -> Message {
    assert_eq!(
        frame::decode(bytes, ctx),
        Ok(Some(bytes.len())),
        "framing of {}",
        hex::encode(bytes)
    );
    let parsed = Message::parse(bytes, ctx).unwrap_or_else(|e| panic!("parse failed: {e:?}"));
    assert_eq!(&parsed, expected, "parse");
    let shared = Message::parse_bytes(&Bytes::copy_from_slice(bytes), ctx);
    assert_eq!(shared.as_ref(), Ok(expected), "parse_bytes");
    assert_eq!(parsed.kind(), expected.kind());

    let mut out = BytesMut::from(&FILL[..]);
    expected
        .emit(ctx, &mut out)
        .unwrap_or_else(|e| panic!("emit failed: {e}"));
    assert_eq!(&out[..FILL.len()], &FILL[..], "emit touched earlier bytes");
    assert_eq!(hex::encode(&out[FILL.len()..]), hex::encode(bytes), "emit");
    let whole = expected
        .to_bytes(ctx)
        .unwrap_or_else(|e| panic!("to_bytes failed: {e}"));
    assert_eq!(&whole[..], bytes, "to_bytes");
    parsed
}
