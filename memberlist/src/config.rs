//! Configuration: identity, security and every timing, with the default
//! LAN profile of [`Config::lan`].
//!
//! Plain data; validation is a pure function. The reasoning behind the
//! default numbers is in the crate documentation ("Default LAN profile").

use std::net::SocketAddr;
use std::time::Duration;

use crate::keyring::Security;
use crate::member::{Incarnation, Meta, Name};

/// How a [`Swim`](crate::Swim) core behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// This member's unique name.
    pub name: Name,
    /// The address others reach this member at, on both transports.
    pub addr: SocketAddr,
    /// Initial metadata.
    pub meta: Meta,
    /// Initial incarnation; 0 unless a driver has a reason. A restarted
    /// member needs no memory of its previous life (and no clock): the
    /// others still hold its old incarnation, alive, suspect, dead or left,
    /// and hand it back in the join's full-state reply or in gossip; the
    /// member then outbids it (SWIM §4.2 refutation), metadata included.
    /// Until then its own statements, at the lower incarnation, are ignored
    /// as stale, which costs one join round trip.
    pub incarnation: Incarnation,
    /// Encryption and authentication.
    pub security: Security,

    /// Time between the starts of two probes (SWIM's protocol period T'),
    /// before the local health multiplier.
    pub probe_interval: Duration,
    /// How long to wait for the direct ack before asking for indirect
    /// probes; also how long a relay waits before it nacks. At most
    /// 0.4 × `probe_interval`, so the relay's nack (sent at about
    /// 2 × timeout) arrives before the probe ends.
    pub probe_timeout: Duration,
    /// Members asked to probe indirectly (SWIM's k).
    pub indirect_probes: usize,
    /// Largest local health multiplier (Lifeguard §IV-A, "LHM"): probe
    /// interval and timeout stretch up to this factor while this member
    /// itself misses acks and nacks.
    pub max_health_multiplier: u32,

    /// Shortest suspicion timeout, reached once `suspicion_confirmations`
    /// independent members confirm (Lifeguard §IV-B).
    pub suspicion_min: Duration,
    /// Suspicion timeout with no confirmation.
    pub suspicion_max: Duration,
    /// Independent confirmations expected to bring the timeout down to
    /// `suspicion_min` (Lifeguard's K), capped by cluster size.
    pub suspicion_confirmations: usize,
    /// Probe a member as soon as we learn that someone suspects it: a
    /// dead member is confirmed within one probe, a live one is not, so
    /// the dynamic timeout separates the two quickly.
    pub confirm_suspicions: bool,

    /// Shortest time between two gossip rounds; gossip only runs while
    /// updates are queued.
    pub gossip_interval: Duration,
    /// Members each gossip round sends to.
    pub gossip_fanout: usize,
    /// Each update is sent `retransmit_mult × ⌈log10(n + 1)⌉` times
    /// (SWIM §4.1's λ log n).
    pub retransmit_mult: usize,
    /// How long a member declared dead still receives gossip, so that it
    /// can learn of its death and refute.
    pub gossip_to_dead: Duration,

    /// Time between full-state exchanges with a random member
    /// (anti-entropy; also how partitions heal).
    pub push_pull_interval: Duration,
    /// How long dead and left members are remembered (and dead ones tried
    /// by push-pull) before they are forgotten.
    pub dead_retention: Duration,
    /// Largest datagram built, envelope included.
    pub max_packet_size: usize,

    /// First delay between two rejoins while a seed (an address given to
    /// [`Swim::join`](crate::Swim::join)) has no live member; it doubles
    /// with each attempt up to `rejoin_max`, and each delay is drawn
    /// uniformly from its upper half (jitter, so members cut off together
    /// do not rejoin in lockstep).
    pub rejoin_min: Duration,
    /// Longest delay between two rejoins: a member whose seeds were
    /// unreachable finds them at most this long after they are back.
    pub rejoin_max: Duration,
    /// Most members remembered (other than this one), in any state. A new
    /// name beyond it takes the place of the oldest dead or left member;
    /// with none to forget it is dropped and counted
    /// ([`Stats::members_rejected`](crate::Stats::members_rejected)).
    pub max_members: usize,
}

impl Config {
    /// The default LAN profile: about 100 ms probes, 200 ms to 1 s
    /// suspicion, aimed at a median of 0.5 s and a p99 of 1 s from a death
    /// to every member marking it dead, with no false deaths at 5% loss or
    /// under a 200 ms stall. See the crate docs for the derivation.
    #[must_use]
    pub fn lan(name: Name, addr: SocketAddr, security: Security) -> Self {
        Self {
            name,
            addr,
            meta: Meta::default(),
            incarnation: 0,
            security,
            probe_interval: Duration::from_millis(100),
            probe_timeout: Duration::from_millis(40),
            indirect_probes: 3,
            max_health_multiplier: 8,
            suspicion_min: Duration::from_millis(250),
            suspicion_max: Duration::from_millis(1000),
            suspicion_confirmations: 3,
            confirm_suspicions: true,
            gossip_interval: Duration::from_millis(20),
            gossip_fanout: 3,
            retransmit_mult: 4,
            gossip_to_dead: Duration::from_secs(30),
            push_pull_interval: Duration::from_secs(10),
            dead_retention: Duration::from_secs(300),
            max_packet_size: 1400,
            rejoin_min: Duration::from_millis(500),
            rejoin_max: Duration::from_secs(10),
            max_members: 5000,
        }
    }

    /// A profile for members across slow or lossy links (MetalLB's
    /// `--ml-wan-config`): the LAN timings ten times longer (1 s probes,
    /// 400 ms probe timeout, 2.5 to 10 s suspicion, 200 ms gossip), 30 s
    /// push-pull. Failover takes seconds instead of fractions of one.
    #[must_use]
    pub fn wan(name: Name, addr: SocketAddr, security: Security) -> Self {
        Self {
            probe_interval: Duration::from_secs(1),
            probe_timeout: Duration::from_millis(400),
            suspicion_min: Duration::from_millis(2500),
            suspicion_max: Duration::from_secs(10),
            gossip_interval: Duration::from_millis(200),
            push_pull_interval: Duration::from_secs(30),
            ..Self::lan(name, addr, security)
        }
    }

    /// Checks the invariants the core relies on.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first broken one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let nonzero = [
            ("probe_interval", self.probe_interval),
            ("probe_timeout", self.probe_timeout),
            ("suspicion_min", self.suspicion_min),
            ("gossip_interval", self.gossip_interval),
            ("push_pull_interval", self.push_pull_interval),
            ("rejoin_min", self.rejoin_min),
        ];
        if let Some((field, _)) = nonzero.iter().find(|(_, d)| d.is_zero()) {
            return Err(ConfigError::Zero { field });
        }
        // Relay nacks come at about 2 × timeout after the probe starts;
        // they must arrive before the probe interval ends.
        if self.probe_timeout.saturating_mul(5) > self.probe_interval.saturating_mul(2) {
            return Err(ConfigError::ProbeTimeout);
        }
        if self.suspicion_max < self.suspicion_min {
            return Err(ConfigError::Suspicion);
        }
        if self.rejoin_max < self.rejoin_min {
            return Err(ConfigError::Rejoin);
        }
        if self.max_members == 0 {
            return Err(ConfigError::Zero {
                field: "max_members",
            });
        }
        if self.max_health_multiplier == 0 || self.max_health_multiplier > 64 {
            return Err(ConfigError::HealthMultiplier);
        }
        if self.gossip_fanout == 0 || self.retransmit_mult == 0 {
            return Err(ConfigError::Zero {
                field: "gossip_fanout or retransmit_mult",
            });
        }
        // One update with the longest name, address and metadata, plus a
        // packet header naming two members, must fit.
        if self.max_packet_size < MIN_PACKET_SIZE {
            return Err(ConfigError::PacketSize);
        }
        Ok(())
    }
}

/// The smallest `max_packet_size` accepted: a ping-req between two
/// longest names carrying one alive update with the longest name and
/// metadata, in an encrypted envelope.
pub const MIN_PACKET_SIZE: usize = 1400;

/// A configuration the core refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A duration or count that must be positive is zero.
    #[error("{field} must not be zero")]
    Zero {
        /// Which.
        field: &'static str,
    },
    /// `probe_timeout` is more than 0.4 × `probe_interval`.
    #[error("probe_timeout must be at most 0.4 x probe_interval")]
    ProbeTimeout,
    /// `suspicion_max` is below `suspicion_min`.
    #[error("suspicion_max must be at least suspicion_min")]
    Suspicion,
    /// `rejoin_max` is below `rejoin_min`.
    #[error("rejoin_max must be at least rejoin_min")]
    Rejoin,
    /// `max_health_multiplier` outside 1..=64.
    #[error("max_health_multiplier must be in 1..=64")]
    HealthMultiplier,
    /// `max_packet_size` below [`MIN_PACKET_SIZE`].
    #[error("max_packet_size must be at least 1400")]
    PacketSize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lan() -> Config {
        Config::lan(
            Name::new("a").unwrap(),
            "10.0.0.1:7946".parse().unwrap(),
            Security::Plaintext,
        )
    }

    #[test]
    fn lan_is_valid() {
        assert_eq!(lan().validate(), Ok(()));
    }

    #[test]
    fn wan_is_valid_and_slower() {
        let l = lan();
        let w = Config::wan(l.name.clone(), l.addr, Security::Plaintext);
        assert_eq!(w.validate(), Ok(()));
        assert!(w.probe_interval > l.probe_interval);
        assert!(w.suspicion_max > l.suspicion_max);
    }

    #[test]
    fn invalid() {
        let mut c = lan();
        c.probe_timeout = Duration::from_millis(41);
        assert_eq!(c.validate(), Err(ConfigError::ProbeTimeout));
        let mut c = lan();
        c.suspicion_max = Duration::from_millis(100);
        assert_eq!(c.validate(), Err(ConfigError::Suspicion));
        let mut c = lan();
        c.probe_interval = Duration::ZERO;
        assert_eq!(
            c.validate(),
            Err(ConfigError::Zero {
                field: "probe_interval"
            })
        );
        let mut c = lan();
        c.max_packet_size = 512;
        assert_eq!(c.validate(), Err(ConfigError::PacketSize));
        let mut c = lan();
        c.max_health_multiplier = 0;
        assert_eq!(c.validate(), Err(ConfigError::HealthMultiplier));
        let mut c = lan();
        c.rejoin_max = Duration::from_millis(100);
        assert_eq!(c.validate(), Err(ConfigError::Rejoin));
        let mut c = lan();
        c.max_members = 0;
        assert_eq!(
            c.validate(),
            Err(ConfigError::Zero {
                field: "max_members"
            })
        );
    }
}
