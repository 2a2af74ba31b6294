//! Pure BGP framing: find where the next message ends in a byte stream.
//!
//! The transport (in the speaker) buffers bytes from TCP and asks
//! [`decode`] whether a whole message is there. Lengths are checked before
//! anything is reserved, so a peer cannot make us allocate more than one
//! maximum-size message.

use crate::wire::{DecodeCtx, Header, HeaderError};

/// Returns `Ok(Some(len))` when `buf` starts with a whole message of `len`
/// octets, `Ok(None)` when more bytes are needed, and an error (to answer
/// with the matching NOTIFICATION, then close) for a bad marker or a length
/// outside 19..=max.
pub fn decode(buf: &[u8], ctx: &DecodeCtx) -> Result<Option<usize>, HeaderError> {
    // Check the marker as soon as it can be seen, not only once 19 octets
    // arrived: garbage is rejected early.
    let seen = buf.len().min(16);
    if buf[..seen].iter().any(|&b| b != 0xff) {
        return Err(HeaderError::NotSynchronized);
    }
    let Some(header) = Header::parse(buf, ctx)? else {
        return Ok(None);
    };
    let len = usize::from(header.length);
    Ok((buf.len() >= len).then_some(len))
}

/// How many more octets [`decode`] needs before it can answer, at least.
pub fn needed(buf: &[u8]) -> usize {
    if buf.len() < 19 {
        return 19 - buf.len();
    }
    let len = usize::from(u16::from_be_bytes([buf[16], buf[17]]));
    len.saturating_sub(buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEPALIVE: [u8; 19] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, // marker
        0x00, 0x13, // length 19
        0x04, // KEEPALIVE
    ];

    #[test]
    fn whole_partial_and_extra() {
        let ctx = DecodeCtx::default();
        assert_eq!(decode(&KEEPALIVE[..10], &ctx), Ok(None));
        assert_eq!(needed(&KEEPALIVE[..10]), 9);
        assert_eq!(decode(&KEEPALIVE, &ctx), Ok(Some(19)));
        let mut two = KEEPALIVE.to_vec();
        two.extend_from_slice(&KEEPALIVE[..5]);
        assert_eq!(decode(&two, &ctx), Ok(Some(19)));
    }

    #[test]
    fn bad_marker_and_lengths() {
        let ctx = DecodeCtx::default();
        assert_eq!(
            decode(&[0xff, 0xfe], &ctx),
            Err(HeaderError::NotSynchronized)
        );
        let mut m = KEEPALIVE;
        m[16..18].copy_from_slice(&18u16.to_be_bytes());
        assert_eq!(decode(&m, &ctx), Err(HeaderError::BadLength { length: 18 }));
        let mut m = KEEPALIVE;
        m[18] = 2;
        m[16..18].copy_from_slice(&4097u16.to_be_bytes());
        assert_eq!(
            decode(&m, &ctx),
            Err(HeaderError::BadLength { length: 4097 })
        );
        let ext = DecodeCtx {
            extended_message: true,
            ..ctx
        };
        assert_eq!(decode(&m, &ext), Ok(None));
        // KEEPALIVE never grows past 4096, even with extended messages.
        m[18] = 4;
        assert_eq!(
            decode(&m, &ext),
            Err(HeaderError::BadLength { length: 4097 })
        );
    }
}
