//! What a session gives back: the [`Output`]s the driver drains with
//! [`Session::poll_output`], and the counters behind the metrics.

use bytes::Bytes;

#[cfg(doc)]
use super::Session;
use super::{ConnId, Negotiated, State};
use crate::wire::{DecodeCtx, Notification};

/// Why an Established session went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    /// We sent this NOTIFICATION.
    NotificationSent(Notification),
    /// The peer sent this NOTIFICATION.
    NotificationReceived(Notification),
    /// The TCP connection closed or failed.
    TransportClosed,
    /// [`Session::stop`] without a NOTIFICATION (graceful restart).
    Stopped,
}

/// Something the driver must do or may report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open a TCP connection to the peer for this connection id, then call
    /// [`Session::handle_connected`] or [`Session::handle_connect_failed`].
    Connect(ConnId),
    /// Write these bytes (one or more whole messages) on the connection.
    Send {
        /// Connection.
        conn: ConnId,
        /// Bytes to write, in order.
        bytes: Bytes,
    },
    /// Flush what was sent, then close the connection.
    Disconnect(ConnId),
    /// Decode further messages of this connection with this context.
    Negotiated {
        /// Connection.
        conn: ConnId,
        /// Decode context.
        decode: DecodeCtx,
    },
    /// The session's RFC state changed.
    StateChanged {
        /// Old state.
        from: State,
        /// New state.
        to: State,
    },
    /// The session reached Established.
    Established(Box<Negotiated>),
    /// The Established session went down.
    Down(DownReason),
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// OPEN messages sent.
    pub opens_sent: u64,
    /// KEEPALIVE messages sent.
    pub keepalives_sent: u64,
    /// UPDATE messages sent.
    pub updates_sent: u64,
    /// NOTIFICATION messages sent.
    pub notifications_sent: u64,
    /// Messages received, any type.
    pub messages_received: u64,
    /// OPEN messages received.
    pub opens_received: u64,
    /// KEEPALIVE messages received.
    pub keepalives_received: u64,
    /// UPDATE messages received.
    pub updates_received: u64,
    /// NOTIFICATION messages received.
    pub notifications_received: u64,
    /// ROUTE-REFRESH requests honoured.
    pub route_refreshes_received: u64,
    /// Prefixes the peer announced to us (dropped).
    pub prefixes_received: u64,
    /// Prefixes the peer withdrew.
    pub withdrawals_received: u64,
    /// UPDATEs handled as treat-as-withdraw (RFC 7606).
    pub treat_as_withdraw: u64,
    /// Prefixes we announced.
    pub prefixes_announced: u64,
    /// Prefixes we withdrew.
    pub prefixes_withdrawn: u64,
    /// Prefixes we could not send (family not negotiated, no next hop).
    pub prefixes_skipped: u64,
    /// Times the session reached Established.
    pub established: u64,
    /// Times the SendHoldTimer expired (RFC 9687): the peer stopped
    /// reading.
    pub send_hold_expired: u64,
}
