//! Route refresh (RFC 2918) and enhanced route refresh (RFC 7313): a
//! request from the peer makes the Adj-RIB-Out send a family again,
//! framed by BoRR and EoRR when both sides support the enhanced form.

use bytes::BytesMut;
use rand_core::RngCore;

use super::Session;
use crate::wire::{EncodeCtx, Family, Message, RefreshSubtype, RouteRefresh};

impl<R: RngCore> Session<R> {
    /// A ROUTE-REFRESH on the Established connection, whose negotiated
    /// families are `families`: schedules the re-send of the family asked
    /// for, which goes out with the next flush.
    pub(super) fn route_refresh_received(&mut self, families: &[Family], rr: &RouteRefresh) {
        // RFC 7313 §5: unknown subtypes are ignored; BoRR/EoRR from the
        // peer concern routes we do not keep.
        if rr.subtype != RefreshSubtype::Request {
            return;
        }
        match Family::from_afi_safi(rr.afi, rr.safi) {
            // RFC 2918 §4: a family not negotiated is ignored.
            Some(f) if families.contains(&f) => {
                self.stats.route_refreshes_received += 1;
                self.rib.resend(f);
                self.refresh = Some(f);
            }
            _ => {}
        }
    }
}

/// Appends the BoRR or EoRR marker (RFC 7313 §4) of `family`.
pub(super) fn emit_marker(
    family: Family,
    subtype: RefreshSubtype,
    ctx: &EncodeCtx,
    buf: &mut BytesMut,
) {
    let marker = RouteRefresh {
        afi: family.afi(),
        subtype,
        safi: family.safi(),
    };
    // Four octets of body: always within any maximum length.
    let _ = Message::RouteRefresh(marker).emit(ctx, buf);
}
