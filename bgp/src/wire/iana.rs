//! IANA code points used on the BGP wire.
//!
//! Every registry that can carry values we do not know gets an `Unknown(n)`
//! variant so that parse followed by emit round-trips.

use codepoint::enum_with_unknown;

enum_with_unknown! {
    /// BGP message types (RFC 4271 §4.1, RFC 2918).
    pub enum MessageType(u8) {
        /// OPEN (RFC 4271 §4.2).
        Open = 1,
        /// UPDATE (RFC 4271 §4.3).
        Update = 2,
        /// NOTIFICATION (RFC 4271 §4.5).
        Notification = 3,
        /// KEEPALIVE (RFC 4271 §4.4).
        Keepalive = 4,
        /// ROUTE-REFRESH (RFC 2918).
        RouteRefresh = 5,
    }
}

enum_with_unknown! {
    /// Address Family Identifiers.
    pub enum Afi(u16) {
        /// IPv4.
        Ipv4 = 1,
        /// IPv6.
        Ipv6 = 2,
        /// Layer 2 VPN.
        L2vpn = 25,
        /// BGP-LS.
        LinkState = 16388,
    }
}

enum_with_unknown! {
    /// Subsequent Address Family Identifiers.
    pub enum Safi(u8) {
        /// Unicast forwarding.
        Unicast = 1,
        /// Multicast forwarding.
        Multicast = 2,
        /// NLRI with MPLS labels (RFC 8277).
        LabeledUnicast = 4,
        /// EVPN (RFC 7432).
        Evpn = 70,
        /// MPLS-labeled VPN (RFC 4364).
        MplsVpn = 128,
        /// Flow specification (RFC 8955).
        FlowSpec = 133,
    }
}

enum_with_unknown! {
    /// Capability codes (RFC 5492 registry).
    pub enum CapabilityCode(u8) {
        /// Multiprotocol extensions (RFC 4760).
        Multiprotocol = 1,
        /// Route refresh (RFC 2918).
        RouteRefresh = 2,
        /// Extended next hop encoding (RFC 8950).
        ExtendedNextHop = 5,
        /// Extended message (RFC 8654).
        ExtendedMessage = 6,
        /// BGP role (RFC 9234).
        Role = 9,
        /// Graceful restart (RFC 4724).
        GracefulRestart = 64,
        /// Support for 4-octet AS numbers (RFC 6793).
        FourOctetAs = 65,
        /// ADD-PATH (RFC 7911).
        AddPath = 69,
        /// Enhanced route refresh (RFC 7313).
        EnhancedRouteRefresh = 70,
        /// Long-lived graceful restart (RFC 9494).
        LongLivedGracefulRestart = 71,
        /// FQDN / hostname (draft-walton-bgp-hostname-capability).
        Fqdn = 73,
        /// Software version (draft-abraitis-bgp-version-capability).
        SoftwareVersion = 75,
        /// Pre-standard route refresh (Cisco).
        RouteRefreshCisco = 128,
    }
}

enum_with_unknown! {
    /// Path attribute type codes.
    pub enum AttrType(u8) {
        /// ORIGIN (RFC 4271).
        Origin = 1,
        /// AS_PATH (RFC 4271).
        AsPath = 2,
        /// NEXT_HOP (RFC 4271).
        NextHop = 3,
        /// MULTI_EXIT_DISC (RFC 4271).
        MultiExitDisc = 4,
        /// LOCAL_PREF (RFC 4271).
        LocalPref = 5,
        /// ATOMIC_AGGREGATE (RFC 4271).
        AtomicAggregate = 6,
        /// AGGREGATOR (RFC 4271).
        Aggregator = 7,
        /// COMMUNITIES (RFC 1997).
        Communities = 8,
        /// ORIGINATOR_ID (RFC 4456).
        OriginatorId = 9,
        /// CLUSTER_LIST (RFC 4456).
        ClusterList = 10,
        /// MP_REACH_NLRI (RFC 4760).
        MpReachNlri = 14,
        /// MP_UNREACH_NLRI (RFC 4760).
        MpUnreachNlri = 15,
        /// EXTENDED COMMUNITIES (RFC 4360).
        ExtendedCommunities = 16,
        /// AS4_PATH (RFC 6793).
        As4Path = 17,
        /// AS4_AGGREGATOR (RFC 6793).
        As4Aggregator = 18,
        /// IPv6 Address Specific Extended Community (RFC 5701).
        Ipv6ExtendedCommunities = 25,
        /// LARGE_COMMUNITY (RFC 8092).
        LargeCommunities = 32,
    }
}

enum_with_unknown! {
    /// NOTIFICATION error codes (RFC 4271 §4.5, RFC 7313, RFC 9687).
    pub enum ErrorCode(u8) {
        /// Message Header Error.
        MessageHeader = 1,
        /// OPEN Message Error.
        OpenMessage = 2,
        /// UPDATE Message Error.
        UpdateMessage = 3,
        /// Hold Timer Expired.
        HoldTimerExpired = 4,
        /// Finite State Machine Error (RFC 6608 subcodes).
        Fsm = 5,
        /// Cease (RFC 4486 subcodes).
        Cease = 6,
        /// ROUTE-REFRESH Message Error (RFC 7313).
        RouteRefresh = 7,
        /// Send Hold Timer Expired (RFC 9687).
        SendHoldTimerExpired = 8,
    }
}

/// Message Header Error subcodes (RFC 4271 §6.1).
pub mod header_subcode {
    /// Connection Not Synchronized.
    pub const CONNECTION_NOT_SYNCHRONIZED: u8 = 1;
    /// Bad Message Length.
    pub const BAD_MESSAGE_LENGTH: u8 = 2;
    /// Bad Message Type.
    pub const BAD_MESSAGE_TYPE: u8 = 3;
}

/// OPEN Message Error subcodes (RFC 4271 §6.2, RFC 5492, RFC 9234).
pub mod open_subcode {
    /// No more specific subcode applies.
    pub const UNSPECIFIC: u8 = 0;
    /// Unsupported Version Number.
    pub const UNSUPPORTED_VERSION: u8 = 1;
    /// Bad Peer AS.
    pub const BAD_PEER_AS: u8 = 2;
    /// Bad BGP Identifier.
    pub const BAD_BGP_IDENTIFIER: u8 = 3;
    /// Unsupported Optional Parameter.
    pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
    /// Unacceptable Hold Time.
    pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
    /// Unsupported Capability (RFC 5492).
    pub const UNSUPPORTED_CAPABILITY: u8 = 7;
    /// Role Mismatch (RFC 9234).
    pub const ROLE_MISMATCH: u8 = 11;
}

/// UPDATE Message Error subcodes (RFC 4271 §6.3).
pub mod update_subcode {
    /// Malformed Attribute List.
    pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
    /// Unrecognized Well-known Attribute.
    pub const UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE: u8 = 2;
    /// Missing Well-known Attribute.
    pub const MISSING_WELL_KNOWN_ATTRIBUTE: u8 = 3;
    /// Attribute Flags Error.
    pub const ATTRIBUTE_FLAGS_ERROR: u8 = 4;
    /// Attribute Length Error.
    pub const ATTRIBUTE_LENGTH_ERROR: u8 = 5;
    /// Invalid ORIGIN Attribute.
    pub const INVALID_ORIGIN_ATTRIBUTE: u8 = 6;
    /// Invalid NEXT_HOP Attribute.
    pub const INVALID_NEXT_HOP_ATTRIBUTE: u8 = 8;
    /// Optional Attribute Error.
    pub const OPTIONAL_ATTRIBUTE_ERROR: u8 = 9;
    /// Invalid Network Field.
    pub const INVALID_NETWORK_FIELD: u8 = 10;
    /// Malformed AS_PATH.
    pub const MALFORMED_AS_PATH: u8 = 11;
}

/// Finite State Machine Error subcodes (RFC 6608).
pub mod fsm_subcode {
    /// Unspecified error.
    pub const UNSPECIFIED: u8 = 0;
    /// Receive Unexpected Message in OpenSent State.
    pub const UNEXPECTED_IN_OPEN_SENT: u8 = 1;
    /// Receive Unexpected Message in OpenConfirm State.
    pub const UNEXPECTED_IN_OPEN_CONFIRM: u8 = 2;
    /// Receive Unexpected Message in Established State.
    pub const UNEXPECTED_IN_ESTABLISHED: u8 = 3;
}

/// Cease subcodes (RFC 4486, RFC 8538, RFC 9384).
pub mod cease_subcode {
    /// Maximum Number of Prefixes Reached.
    pub const MAX_PREFIXES: u8 = 1;
    /// Administrative Shutdown (RFC 9003 message allowed).
    pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
    /// Peer De-configured.
    pub const PEER_DECONFIGURED: u8 = 3;
    /// Administrative Reset (RFC 9003 message allowed).
    pub const ADMINISTRATIVE_RESET: u8 = 4;
    /// Connection Rejected.
    pub const CONNECTION_REJECTED: u8 = 5;
    /// Other Configuration Change.
    pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
    /// Connection Collision Resolution.
    pub const CONNECTION_COLLISION_RESOLUTION: u8 = 7;
    /// Out of Resources.
    pub const OUT_OF_RESOURCES: u8 = 8;
    /// Hard Reset (RFC 8538).
    pub const HARD_RESET: u8 = 9;
    /// BFD Down (RFC 9384).
    pub const BFD_DOWN: u8 = 10;
}

/// ROUTE-REFRESH Message Error subcodes (RFC 7313).
pub mod route_refresh_subcode {
    /// Invalid Message Length.
    pub const INVALID_MESSAGE_LENGTH: u8 = 1;
}

/// The AS number placed in 2-octet fields for a 4-octet AS (RFC 6793).
pub const AS_TRANS: u16 = 23456;

/// Human-readable name of an error code, as in the IANA registry.
pub fn error_code_name(code: u8) -> &'static str {
    match ErrorCode::from(code) {
        ErrorCode::MessageHeader => "Message Header Error",
        ErrorCode::OpenMessage => "OPEN Message Error",
        ErrorCode::UpdateMessage => "UPDATE Message Error",
        ErrorCode::HoldTimerExpired => "Hold Timer Expired",
        ErrorCode::Fsm => "Finite State Machine Error",
        ErrorCode::Cease => "Cease",
        ErrorCode::RouteRefresh => "ROUTE-REFRESH Message Error",
        ErrorCode::SendHoldTimerExpired => "Send Hold Timer Expired",
        ErrorCode::Unknown(_) => "Unknown",
    }
}

/// Human-readable name of an error subcode, as in the IANA registries.
pub fn error_subcode_name(code: u8, subcode: u8) -> &'static str {
    match (ErrorCode::from(code), subcode) {
        (ErrorCode::MessageHeader, 1) => "Connection Not Synchronized",
        (ErrorCode::MessageHeader, 2) => "Bad Message Length",
        (ErrorCode::MessageHeader, 3) => "Bad Message Type",
        (ErrorCode::OpenMessage, 1) => "Unsupported Version Number",
        (ErrorCode::OpenMessage, 2) => "Bad Peer AS",
        (ErrorCode::OpenMessage, 3) => "Bad BGP Identifier",
        (ErrorCode::OpenMessage, 4) => "Unsupported Optional Parameter",
        (ErrorCode::OpenMessage, 6) => "Unacceptable Hold Time",
        (ErrorCode::OpenMessage, 7) => "Unsupported Capability",
        (ErrorCode::OpenMessage, 11) => "Role Mismatch",
        (ErrorCode::UpdateMessage, 1) => "Malformed Attribute List",
        (ErrorCode::UpdateMessage, 2) => "Unrecognized Well-known Attribute",
        (ErrorCode::UpdateMessage, 3) => "Missing Well-known Attribute",
        (ErrorCode::UpdateMessage, 4) => "Attribute Flags Error",
        (ErrorCode::UpdateMessage, 5) => "Attribute Length Error",
        (ErrorCode::UpdateMessage, 6) => "Invalid ORIGIN Attribute",
        (ErrorCode::UpdateMessage, 8) => "Invalid NEXT_HOP Attribute",
        (ErrorCode::UpdateMessage, 9) => "Optional Attribute Error",
        (ErrorCode::UpdateMessage, 10) => "Invalid Network Field",
        (ErrorCode::UpdateMessage, 11) => "Malformed AS_PATH",
        (ErrorCode::Fsm, 1) => "Receive Unexpected Message in OpenSent State",
        (ErrorCode::Fsm, 2) => "Receive Unexpected Message in OpenConfirm State",
        (ErrorCode::Fsm, 3) => "Receive Unexpected Message in Established State",
        (ErrorCode::Cease, 1) => "Maximum Number of Prefixes Reached",
        (ErrorCode::Cease, 2) => "Administrative Shutdown",
        (ErrorCode::Cease, 3) => "Peer De-configured",
        (ErrorCode::Cease, 4) => "Administrative Reset",
        (ErrorCode::Cease, 5) => "Connection Rejected",
        (ErrorCode::Cease, 6) => "Other Configuration Change",
        (ErrorCode::Cease, 7) => "Connection Collision Resolution",
        (ErrorCode::Cease, 8) => "Out of Resources",
        (ErrorCode::Cease, 9) => "Hard Reset",
        (ErrorCode::Cease, 10) => "BFD Down",
        (ErrorCode::RouteRefresh, 1) => "Invalid Message Length",
        (_, 0) => "Unspecific",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_round_trip() {
        assert_eq!(MessageType::from(2), MessageType::Update);
        assert_eq!(MessageType::from(9), MessageType::Unknown(9));
        assert_eq!(u8::from(MessageType::Unknown(9)), 9);
        assert_eq!(u16::from(Afi::Ipv6), 2);
        assert_eq!(AttrType::from(32), AttrType::LargeCommunities);
    }

    #[test]
    fn names() {
        assert_eq!(error_code_name(6), "Cease");
        assert_eq!(error_subcode_name(6, 2), "Administrative Shutdown");
        assert_eq!(error_subcode_name(3, 11), "Malformed AS_PATH");
        assert_eq!(error_subcode_name(2, 0), "Unspecific");
    }
}
