//! Graceful restart as a restarting speaker (RFC 4724): the capability we
//! offer and the End-of-RIB markers after each initial sync.
//!
//! ferrolb only restarts; it never keeps a peer's routes (it keeps none),
//! so the receiving-speaker side of RFC 4724 is not needed. A restart
//! that preserves forwarding closes TCP without a NOTIFICATION
//! ([`StopMode::PreserveForwarding`]).

use std::time::Duration;

use bytes::BytesMut;
use rand_core::RngCore;

#[cfg(doc)]
use super::StopMode;
use super::{Negotiated, Session};
use crate::wire::UpdateEncoder;
use crate::wire::open::{GracefulRestart, GracefulRestartFamily};

/// Graceful restart as a restarting speaker (RFC 4724).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GracefulRestartConfig {
    /// How long the peer should keep our routes as stale after the session
    /// drops (at most 4095 s).
    pub restart_time: Duration,
    /// Set `R` in the first OPEN this session sends: it starts after our
    /// own restart, so the peer keeps the stale routes until our
    /// End-of-RIB. Once it has been Established, later reconnections of
    /// the same session are no restart of ours and send `R` = 0.
    pub restarting: bool,
    /// Set `F` per family: forwarding (the service IPs) kept working while
    /// the speaker was down.
    pub forwarding_preserved: bool,
}

impl<R: RngCore> Session<R> {
    /// The graceful restart capability for our OPEN, when configured.
    pub(super) fn graceful_restart_capability(&self) -> Option<GracefulRestart> {
        let c = &self.config;
        let gr = c.graceful_restart.as_ref()?;
        let families = c
            .families
            .iter()
            .map(|f| GracefulRestartFamily {
                afi: f.afi(),
                safi: f.safi(),
                flags: if gr.forwarding_preserved {
                    GracefulRestart::FORWARDING
                } else {
                    0
                },
            })
            .collect();
        Some(GracefulRestart {
            // Only the first session after our restart is one; see
            // `GracefulRestartConfig::restarting`.
            flags: if gr.restarting && self.stats.established == 0 {
                GracefulRestart::RESTART_STATE
            } else {
                0
            },
            restart_time: gr.restart_time.as_secs().min(4095) as u16,
            families,
        })
    }

    /// RFC 4724 §2: End-of-RIB for every negotiated family, after the
    /// initial update once the session is Established. Appends to `buf`
    /// and returns how many UPDATEs it added.
    pub(super) fn emit_end_of_rib(&mut self, n: &Negotiated, buf: &mut BytesMut) -> usize {
        if !std::mem::take(&mut self.pending_eor) {
            return 0;
        }
        let enc = UpdateEncoder::new(n.encode);
        for f in &n.families {
            enc.end_of_rib(*f, buf);
        }
        n.families.len()
    }
}
