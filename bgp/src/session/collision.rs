//! Connection collision detection (RFC 4271 §6.8): with two connections
//! to the same peer, keep one.

use std::net::Ipv4Addr;
use std::time::Instant;

use bytes::Bytes;
use rand_core::RngCore;
use tracing::debug;

use super::{ConnId, ConnState, DownReason, Session};
use crate::wire::iana::cease_subcode;
use crate::wire::{ErrorCode, Notification};

impl<R: RngCore> Session<R> {
    /// RFC 4271 §6.8: with two connections to the same peer, keep the one
    /// opened by the speaker with the higher BGP Identifier. Returns
    /// whether `conn` survives.
    pub(super) fn resolve_collision(
        &mut self,
        now: Instant,
        conn: ConnId,
        remote_id: Ipv4Addr,
    ) -> bool {
        let other_slot = 1 - conn.slot();
        let Some(other) = self.conns[other_slot].as_ref() else {
            return true;
        };
        let other_id = other.id;
        let cease = || {
            let n = Notification::new(
                ErrorCode::Cease,
                cease_subcode::CONNECTION_COLLISION_RESOLUTION,
                Bytes::new(),
            );
            (n.clone(), DownReason::NotificationSent(n))
        };
        match other.state {
            // A connection not yet in OpenSent loses to one that is.
            ConnState::Connecting | ConnState::DelayOpen => {
                self.close(now, other_id, None, DownReason::TransportClosed);
                true
            }
            // A collision with an Established session closes the new one.
            ConnState::Established(_) => {
                let (n, r) = cease();
                self.close(now, conn, Some(n), r);
                false
            }
            ConnState::OpenSent | ConnState::OpenConfirm(_) => {
                // The connection opened by the higher identifier survives.
                let keep_outbound = u32::from(self.config.router_id) > u32::from(remote_id);
                let loser = if keep_outbound == conn.is_outbound() {
                    other_id
                } else {
                    conn
                };
                debug!(winner = %if loser == conn { other_id } else { conn }, "connection collision");
                let (n, r) = cease();
                self.close(now, loser, Some(n), r);
                loser != conn
            }
        }
    }
}
