//! BGP peers and BFD profiles: what `BGPPeer` and `BFDProfile` say, parsed.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::ObjectKey;
use super::selector::Selectors;

/// A `BGPPeer`, parsed (v1beta1 ones are converted to v1beta2 first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The object's name.
    pub name: String,
    /// The object's namespace (where its password Secret is looked up).
    pub namespace: String,
    /// `spec.myASN`: our AS number, 1..=4294967295.
    pub my_asn: u32,
    /// `spec.peerASN` or `spec.dynamicASN`: the peer's AS.
    pub peer_asn: PeerAsn,
    /// `spec.localASN`, when set.
    pub local_asn: Option<u32>,
    /// `spec.peerAddress` and `spec.peerPort`, or `spec.interface`.
    pub target: PeerTarget,
    /// `spec.sourceAddress`.
    pub source_address: Option<IpAddr>,
    /// `spec.routerID`.
    pub router_id: Option<IpAddr>,
    /// `spec.holdTime` and `spec.keepaliveTime`, after MetalLB's defaults.
    pub timers: Option<Timers>,
    /// `spec.connectTime`: whole seconds, 1..=65535.
    pub connect_time: Option<Duration>,
    /// `spec.password` or `spec.passwordSecret`.
    pub password: Option<PasswordSource>,
    /// `spec.bfdProfile`: the name of a BFDProfile.
    pub bfd_profile: Option<String>,
    /// `spec.enableGracefulRestart`.
    pub graceful_restart: bool,
    /// `spec.ebgpMultiHop`: the peer is not directly connected.
    pub ebgp_multi_hop: bool,
    /// `spec.vrf`.
    pub vrf: Option<String>,
    /// `spec.disableMP`.
    pub disable_mp: bool,
    /// `spec.dualStackAddressFamily`: carry both families on one session.
    pub dual_stack_address_family: bool,
    /// `spec.nodeSelectors`: the nodes that run this session.
    pub nodes: Selectors,
}

/// The peer's AS number, or which kind of AS it must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerAsn {
    /// `peerASN`.
    Exact(u32),
    /// `dynamicASN: internal`: the peer's AS equals ours.
    Internal,
    /// `dynamicASN: external`: the peer's AS differs from ours.
    External,
}

/// Where the session goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerTarget {
    /// `peerAddress` and `peerPort` (default 179).
    Address(SocketAddr),
    /// `interface`: unnumbered peering over a node interface.
    Interface {
        /// The interface name.
        name: String,
        /// `peerPort` (default 179).
        port: u16,
    },
}

/// Hold and keepalive times.
///
/// Invariant: `hold` is a whole number of seconds, zero or at least 3 s
/// (RFC 4271 §4.2), and `keepalive` is not greater than `hold` (zero when
/// `hold` is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// The hold time we propose.
    pub hold: Duration,
    /// How often we send KEEPALIVE.
    pub keepalive: Duration,
}

/// Where a peer's TCP MD5 password comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// `spec.password`, written in the object.
    Inline(Vec<u8>),
    /// `spec.passwordSecret`: the `password` key of this Secret (the
    /// peer's namespace when the reference names none, as MetalLB reads
    /// it).
    Secret(ObjectKey),
}

/// The data key of a `passwordSecret` that holds the password (MetalLB's
/// `kubernetes.io/basic-auth` layout); the only key the speaker reads.
pub const PASSWORD_SECRET_KEY: &str = "password";

/// The `password` values of the Secrets that peers may name, by Secret.
pub type Secrets = BTreeMap<ObjectKey, Md5Key>;

/// Key material (a BGP password, the TCP MD5 key of RFC 2385): compared,
/// cloned and read like bytes, but its `Debug` never shows them, so a
/// configuration or a Secret that reaches a log does not leak it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Md5Key(Vec<u8>);

impl Md5Key {
    /// The key's octets, for the one place that hands them to the kernel.
    #[must_use]
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Md5Key {
    fn from(key: Vec<u8>) -> Self {
        Self(key)
    }
}

impl From<&[u8]> for Md5Key {
    fn from(key: &[u8]) -> Self {
        Self(key.to_vec())
    }
}

impl std::ops::Deref for Md5Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Md5Key {
    /// `<redacted>` and the length, never the octets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted {} octets>", self.0.len())
    }
}

/// Why a peer's password cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// The Secret is missing, or has no `password` key.
    #[error("Secret {0} with a \"password\" key is not available")]
    Missing(ObjectKey),
    /// Empty, or longer than a TCP MD5 key may be.
    #[error("a TCP MD5 key must be 1..={MAX_PASSWORD} bytes")]
    Length,
}

/// A `BFDProfile`, parsed, with MetalLB's defaults for unset fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfdProfile {
    /// Slowest rate at which we want to receive Control packets
    /// (default 300 ms).
    pub receive_interval: Duration,
    /// Fastest rate at which we want to send Control packets
    /// (default 300 ms).
    pub transmit_interval: Duration,
    /// Detection multiplier, 2..=255 (default 3).
    pub detect_multiplier: u8,
    /// Echo interval (default 50 ms).
    pub echo_interval: Duration,
    /// Echo mode.
    pub echo_mode: bool,
    /// Passive mode: wait for the peer's first packet.
    pub passive: bool,
    /// Lowest TTL accepted from a multihop peer, 1..=254 (default 254).
    pub minimum_ttl: u8,
}

impl Peer {
    /// The AS the session presents to the peer: `localASN` when set (FRR's
    /// `local-as`), else `myASN`.
    pub fn session_asn(&self) -> u32 {
        self.local_asn.unwrap_or(self.my_asn)
    }

    /// Whether the session is internal (same AS): LOCAL_PREF goes only there.
    /// Decided against [`Peer::session_asn`], as FRR decides a `local-as`
    /// session's kind against the local-as.
    pub fn is_ibgp(&self) -> bool {
        match self.peer_asn {
            PeerAsn::Exact(asn) => asn == self.session_asn(),
            PeerAsn::Internal => true,
            PeerAsn::External => false,
        }
    }
}

impl PasswordSource {
    /// The password's octets: inline, or looked up in `secrets`. A TCP MD5
    /// key is 1..=[`MAX_PASSWORD`] octets (Linux's `TCP_MD5SIG_MAXKEYLEN`).
    pub fn resolve<'a>(&'a self, secrets: &'a Secrets) -> Result<&'a [u8], PasswordError> {
        let key = match self {
            Self::Inline(key) => key.as_slice(),
            Self::Secret(secret) => secrets
                .get(secret)
                .map(Md5Key::expose)
                .ok_or_else(|| PasswordError::Missing(secret.clone()))?,
        };
        if key.is_empty() || key.len() > MAX_PASSWORD {
            return Err(PasswordError::Length);
        }
        Ok(key)
    }
}

impl fmt::Debug for PasswordSource {
    /// Never the password itself: configurations end up in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Inline(_) => f.write_str("Inline(..)"),
            Self::Secret(key) => f.debug_tuple("Secret").field(key).finish(),
        }
    }
}

impl Default for BfdProfile {
    /// MetalLB's defaults.
    fn default() -> Self {
        Self {
            receive_interval: Duration::from_millis(300),
            transmit_interval: Duration::from_millis(300),
            detect_multiplier: 3,
            echo_interval: Duration::from_millis(50),
            echo_mode: false,
            passive: false,
            minimum_ttl: 254,
        }
    }
}

/// The longest TCP MD5 key Linux takes (`TCP_MD5SIG_MAXKEYLEN`).
pub const MAX_PASSWORD: usize = 80;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_resolve_inline_or_from_secrets() {
        let key = ObjectKey::new("metallb-system", "auth");
        let secrets = Secrets::from([(key.clone(), Md5Key::from(b"s3cret".to_vec()))]);
        assert_eq!(
            PasswordSource::Inline(b"x".to_vec()).resolve(&secrets),
            Ok(&b"x"[..])
        );
        assert_eq!(
            PasswordSource::Secret(key.clone()).resolve(&secrets),
            Ok(&b"s3cret"[..])
        );
        let other = ObjectKey::new("other", "auth");
        assert_eq!(
            PasswordSource::Secret(other.clone()).resolve(&secrets),
            Err(PasswordError::Missing(other))
        );
        assert_eq!(
            PasswordSource::Inline(vec![b'k'; 81]).resolve(&secrets),
            Err(PasswordError::Length)
        );
        assert_eq!(
            PasswordSource::Inline(Vec::new()).resolve(&secrets),
            Err(PasswordError::Length)
        );
        assert_eq!(
            format!("{:?}", PasswordSource::Inline(b"s3cret".to_vec())),
            "Inline(..)"
        );
        assert_eq!(
            format!("{:?}", secrets),
            format!("{{{key:?}: <redacted 6 octets>}}")
        );
    }
}
