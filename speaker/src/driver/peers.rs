//! Glue between the BGP decisions and the BGP driver: a decided
//! [`PeerPlan`] (plain data) becomes the driver's [`PeerConfig`] and its
//! socket options. No decisions are made here; the conversion is field by
//! field.

use crate::announce::{PeerPlan, Transport};
use crate::driver::bgp::PeerConfig;
use crate::net::tcp::ConnectOptions;

/// What [`crate::driver::bgp::BgpSpeaker::set_peer`] takes for a planned
/// peer.
#[must_use]
pub fn peer_config(plan: &PeerPlan) -> PeerConfig {
    PeerConfig {
        session: plan.session.clone(),
        address: plan.address,
        connect: connect_options(&plan.transport),
    }
}

/// The socket options of a decided transport. GTSM and a connect timeout
/// are not configured by BGPPeers, so they stay off.
fn connect_options(t: &Transport) -> ConnectOptions {
    ConnectOptions {
        bind: t.bind,
        device: t.device.clone(),
        ttl: t.ttl,
        min_ttl: None,
        md5_key: t.md5_key.clone(),
        timeout: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use bgp::session::{self, PeerAs};

    use super::*;

    #[test]
    fn plan_becomes_driver_config_field_by_field() {
        let plan = PeerPlan {
            session: session::Config::new(64512, PeerAs::Exact(65000), Ipv4Addr::new(10, 0, 0, 1)),
            address: "10.0.0.2:1179".parse().unwrap(),
            transport: Transport {
                bind: Some("10.0.0.1".parse().unwrap()),
                device: Some("red".into()),
                ttl: Some(1),
                md5_key: Some(b"key".to_vec()),
            },
            ibgp: false,
            bfd_profile: None,
            multihop: false,
            routes: BTreeMap::new(),
        };
        let c = peer_config(&plan);
        assert_eq!(c.session, plan.session);
        assert_eq!(c.address, plan.address);
        assert_eq!(
            c.connect,
            ConnectOptions {
                bind: plan.transport.bind,
                device: Some("red".into()),
                ttl: Some(1),
                min_ttl: None,
                md5_key: Some(b"key".to_vec()),
                timeout: None,
            }
        );
    }
}
