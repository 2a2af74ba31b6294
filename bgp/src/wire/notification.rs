//! NOTIFICATION (RFC 4271 §4.5) with Cease subcodes (RFC 4486) and the
//! Shutdown Communication (RFC 9003).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Error code    | Error subcode |   Data (variable)             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::iana::{ErrorCode, cease_subcode, error_code_name, error_subcode_name};

/// A NOTIFICATION message. Any code, subcode and data parse; the meaning of
/// the data depends on them (see [`Notification::shutdown_message`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Notification {
    /// Error code.
    pub code: ErrorCode,
    /// Error subcode (registries in `iana`).
    pub subcode: u8,
    /// Data.
    #[cfg_attr(feature = "arbitrary", arbitrary(with = super::arbitrary_bytes))]
    pub data: Bytes,
}

/// Longest RFC 9003 Shutdown Communication, in octets.
pub const MAX_SHUTDOWN_MESSAGE: usize = 255;

impl Notification {
    /// A NOTIFICATION with the given fields.
    pub fn new(code: ErrorCode, subcode: u8, data: Bytes) -> Self {
        Self {
            code,
            subcode,
            data,
        }
    }

    /// Cease with a Shutdown Communication (RFC 9003 §2): `subcode` is
    /// Administrative Shutdown or Administrative Reset. The message is cut at
    /// a character boundary to fit 255 octets.
    pub fn cease_with_message(subcode: u8, message: &str) -> Self {
        let mut end = message.len().min(MAX_SHUTDOWN_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let mut data = BytesMut::with_capacity(1 + end);
        // `end <= 255` by construction.
        data.put_u8(end as u8);
        data.put_slice(&message.as_bytes()[..end]);
        Self::new(ErrorCode::Cease, subcode, data.freeze())
    }

    /// Cease / Administrative Shutdown with a message (RFC 9003).
    pub fn administrative_shutdown(message: &str) -> Self {
        Self::cease_with_message(cease_subcode::ADMINISTRATIVE_SHUTDOWN, message)
    }

    /// Cease / Administrative Reset with a message (RFC 9003).
    pub fn administrative_reset(message: &str) -> Self {
        Self::cease_with_message(cease_subcode::ADMINISTRATIVE_RESET, message)
    }

    /// The RFC 9003 Shutdown Communication of a Cease / Administrative
    /// Shutdown or Reset: `None` for other NOTIFICATIONs or without data,
    /// `Some(Err(()))` when the length overruns the data or the text is
    /// not UTF-8 (RFC 9003 §4: log it, do not fail).
    pub fn shutdown_message(&self) -> Option<Result<&str, ()>> {
        let shutdown_kind = matches!(
            self.subcode,
            cease_subcode::ADMINISTRATIVE_SHUTDOWN | cease_subcode::ADMINISTRATIVE_RESET
        );
        if self.code != ErrorCode::Cease || !shutdown_kind || self.data.is_empty() {
            return None;
        }
        let len = usize::from(self.data[0]);
        let Some(text) = self.data.get(1..1 + len) else {
            return Some(Err(()));
        };
        Some(std::str::from_utf8(text).map_err(|_| ()))
    }

    /// Name of the error code.
    pub fn code_name(&self) -> &'static str {
        error_code_name(self.code.into())
    }

    /// Name of the error subcode.
    pub fn subcode_name(&self) -> &'static str {
        error_subcode_name(self.code.into(), self.subcode)
    }

    /// Parses the body (after the header). The header already checked that
    /// it holds at least code and subcode.
    pub(crate) fn parse_body(body: &[u8]) -> Self {
        let code = ErrorCode::from(body.first().copied().unwrap_or(0));
        let subcode = body.get(1).copied().unwrap_or(0);
        let data = Bytes::copy_from_slice(body.get(2..).unwrap_or_default());
        Self {
            code,
            subcode,
            data,
        }
    }

    /// Length of the body.
    pub(crate) fn body_len(&self) -> usize {
        2 + self.data.len()
    }

    /// Appends the body.
    pub(crate) fn emit_body(&self, out: &mut BytesMut) {
        out.put_u8(self.code.into());
        out.put_u8(self.subcode);
        out.put_slice(&self.data);
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NOTIFICATION {}/{} ({} / {})",
            u8::from(self.code),
            self.subcode,
            self.code_name(),
            self.subcode_name()
        )?;
        match self.shutdown_message() {
            Some(Ok(text)) => write!(f, " \"{}\"", text.escape_debug()),
            Some(Err(())) => f.write_str(" (malformed shutdown communication)"),
            None if !self.data.is_empty() => write!(f, " data {}", super::HexBytes(&self.data)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_communication() {
        let n = Notification::administrative_shutdown("maintenance");
        assert_eq!(n.code, ErrorCode::Cease);
        assert_eq!(n.subcode, 2);
        assert_eq!(&n.data[..], b"\x0bmaintenance");
        assert_eq!(n.shutdown_message(), Some(Ok("maintenance")));
        assert_eq!(
            n.to_string(),
            "NOTIFICATION 6/2 (Cease / Administrative Shutdown) \"maintenance\""
        );
    }

    #[test]
    fn shutdown_message_is_cut_at_a_char_boundary() {
        let long = "é".repeat(200); // 400 octets
        let n = Notification::administrative_reset(&long);
        assert_eq!(n.data[0], 254);
        assert_eq!(n.shutdown_message(), Some(Ok("é".repeat(127).as_str())));
    }

    #[test]
    fn malformed_shutdown_message() {
        let n = Notification::new(ErrorCode::Cease, 2, Bytes::from_static(b"\x10short"));
        assert_eq!(n.shutdown_message(), Some(Err(())));
        let n = Notification::new(ErrorCode::Cease, 2, Bytes::from_static(b"\x02\xff\xfe"));
        assert_eq!(n.shutdown_message(), Some(Err(())));
        let n = Notification::new(ErrorCode::HoldTimerExpired, 0, Bytes::new());
        assert_eq!(n.shutdown_message(), None);
    }
}
