//! Decode errors, one type per layer, and their NOTIFICATION mapping.
//!
//! Every error says where it was found (a byte offset from the start of the
//! message, header included) and converts into the exact NOTIFICATION of
//! RFC 4271 §6 through `From<&DecodeError> for Notification`. UPDATE errors
//! that RFC 7606 handles without a session reset are not errors of the
//! message: they come back inside [`Update::errors`](super::Update) as
//! [`AttrError`]s with their [`Action`].

use std::net::Ipv4Addr;

use bytes::Bytes;

use super::iana::{
    ErrorCode, error_subcode_name, header_subcode, open_subcode, route_refresh_subcode,
};
use super::notification::Notification;

/// A message that must be answered with a NOTIFICATION (session reset).
///
/// Decoding is pure: no state changed when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Message header error (RFC 4271 §6.1).
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// OPEN message error (RFC 4271 §6.2).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// UPDATE message error that RFC 7606 still handles by session reset.
    #[error(transparent)]
    Update(#[from] UpdateError),
    /// ROUTE-REFRESH message error (RFC 7313 §5).
    #[error(transparent)]
    RouteRefresh(#[from] RouteRefreshError),
}

/// Message header errors (RFC 4271 §6.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The marker is not 16 octets of ones: 1/1 Connection Not Synchronized.
    #[error("connection not synchronized: marker is not all ones")]
    NotSynchronized,
    /// The length field is out of range for the message or its type, or
    /// does not match the bytes given: 1/2 Bad Message Length.
    #[error("bad message length {length}")]
    BadLength {
        /// The length field as received.
        length: u16,
    },
    /// The type field is unknown: 1/3 Bad Message Type.
    #[error("bad message type {type_code}")]
    BadType {
        /// The type field as received.
        type_code: u8,
    },
}

/// OPEN message errors (RFC 4271 §6.2, RFC 5492, RFC 9072).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Version other than 4: 2/1, data = the version we support.
    #[error("unsupported version {version}")]
    UnsupportedVersion {
        /// The version received.
        version: u8,
    },
    /// My AS is 0 (RFC 7607), in the header or the 4-octet AS capability: 2/2.
    #[error("bad peer AS {asn}")]
    BadPeerAs {
        /// The AS received.
        asn: u32,
    },
    /// BGP Identifier 0.0.0.0 (RFC 6286 §2.1): 2/3.
    #[error("bad BGP identifier {id}")]
    BadBgpId {
        /// The identifier received.
        id: Ipv4Addr,
    },
    /// Hold time 1 or 2 seconds: 2/6.
    #[error("unacceptable hold time {hold_time}")]
    UnacceptableHoldTime {
        /// The hold time received, in seconds.
        hold_time: u16,
    },
    /// An optional parameter other than Capabilities: 2/4.
    #[error("unsupported optional parameter {param_type} at byte {offset}")]
    UnsupportedOptionalParameter {
        /// The parameter type.
        param_type: u8,
        /// Offset of the parameter.
        offset: usize,
    },
    /// Inconsistent lengths in the optional parameters or a capability
    /// whose value does not fit its code: 2/0 Unspecific.
    #[error("malformed OPEN at byte {offset}: {reason}")]
    Malformed {
        /// Offset of the offending field.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// An UPDATE message error (RFC 4271 §6.3) with its NOTIFICATION data.
///
/// Returned as [`DecodeError::Update`] when RFC 7606 requires a session
/// reset, and inside an [`AttrError`] otherwise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason} at byte {offset}", error_subcode_name(3, *.subcode))]
pub struct UpdateError {
    /// UPDATE Message Error subcode (`iana::update_subcode`).
    pub subcode: u8,
    /// Offset of the offending field or attribute.
    pub offset: usize,
    /// What is wrong, for logs.
    pub reason: &'static str,
    /// NOTIFICATION data as RFC 4271 §6.3 specifies for the subcode
    /// (usually the whole offending attribute).
    pub data: Bytes,
}

/// What RFC 7606 says to do about a malformed attribute that does not need
/// a session reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// RFC 7606 §2 "treat-as-withdraw": every prefix of the UPDATE (NLRI
    /// field and MP_REACH_NLRI) is handled as withdrawn.
    TreatAsWithdraw,
    /// RFC 7606 §2 "attribute discard": the attribute was dropped, the rest
    /// of the UPDATE stands.
    Discard,
}

/// A non-fatal attribute error of an UPDATE (RFC 7606).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("attribute {type_code}: {error} ({action:?})")]
pub struct AttrError {
    /// What to do about it.
    pub action: Action,
    /// Type code of the attribute concerned.
    pub type_code: u8,
    /// The error that a session reset would have reported.
    pub error: UpdateError,
}

/// ROUTE-REFRESH message errors (RFC 7313 §5).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteRefreshError {
    /// A ROUTE-REFRESH whose body is not 4 octets: 7/1, data = the message.
    #[error("invalid ROUTE-REFRESH length {length}")]
    InvalidLength {
        /// The length field of the header.
        length: u16,
        /// The complete message.
        message: Bytes,
    },
}

impl From<&DecodeError> for Notification {
    fn from(err: &DecodeError) -> Self {
        match err {
            DecodeError::Header(e) => Self::from(e),
            DecodeError::Open(e) => Self::from(e),
            DecodeError::Update(e) => Self::from(e),
            DecodeError::RouteRefresh(RouteRefreshError::InvalidLength { message, .. }) => {
                Self::new(
                    ErrorCode::RouteRefresh,
                    route_refresh_subcode::INVALID_MESSAGE_LENGTH,
                    message.clone(),
                )
            }
        }
    }
}

impl From<&HeaderError> for Notification {
    fn from(err: &HeaderError) -> Self {
        let code = ErrorCode::MessageHeader;
        match *err {
            HeaderError::NotSynchronized => Self::new(
                code,
                header_subcode::CONNECTION_NOT_SYNCHRONIZED,
                Bytes::new(),
            ),
            HeaderError::BadLength { length } => Self::new(
                code,
                header_subcode::BAD_MESSAGE_LENGTH,
                Bytes::copy_from_slice(&length.to_be_bytes()),
            ),
            HeaderError::BadType { type_code } => Self::new(
                code,
                header_subcode::BAD_MESSAGE_TYPE,
                Bytes::copy_from_slice(&[type_code]),
            ),
        }
    }
}

impl From<&OpenError> for Notification {
    fn from(err: &OpenError) -> Self {
        let code = ErrorCode::OpenMessage;
        let (subcode, data) = match *err {
            // RFC 4271 §6.2: data is the largest locally supported version.
            OpenError::UnsupportedVersion { .. } => (
                open_subcode::UNSUPPORTED_VERSION,
                Bytes::from_static(&[0, 4]),
            ),
            OpenError::BadPeerAs { .. } => (open_subcode::BAD_PEER_AS, Bytes::new()),
            OpenError::BadBgpId { .. } => (open_subcode::BAD_BGP_IDENTIFIER, Bytes::new()),
            OpenError::UnacceptableHoldTime { .. } => {
                (open_subcode::UNACCEPTABLE_HOLD_TIME, Bytes::new())
            }
            OpenError::UnsupportedOptionalParameter { .. } => {
                (open_subcode::UNSUPPORTED_OPTIONAL_PARAMETER, Bytes::new())
            }
            OpenError::Malformed { .. } => (open_subcode::UNSPECIFIC, Bytes::new()),
        };
        Self::new(code, subcode, data)
    }
}

impl From<&UpdateError> for Notification {
    fn from(err: &UpdateError) -> Self {
        Self::new(ErrorCode::UpdateMessage, err.subcode, err.data.clone())
    }
}

impl From<DecodeError> for Notification {
    fn from(err: DecodeError) -> Self {
        Self::from(&err)
    }
}
