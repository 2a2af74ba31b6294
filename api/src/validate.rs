//! Validation of MetalLB configuration as pure functions: objects in, the
//! parsed [`Model`] and every [`Problem`] out.
//!
//! Each function parses what it can and returns every problem it finds,
//! not just the first, so that an operator can fix a configuration in one
//! pass. Per-object rules are also CEL rules in the CRDs
//! ([`crate::crd::RULES`]); the cross-object rules (overlapping pools,
//! duplicate peers, community aliases, aggregation lengths against pool
//! prefixes) exist only here. The rules follow MetalLB's `internal/config`
//! where this module does not say otherwise. No I/O, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use kube::ResourceExt;

use crate::addr::{self, AddressRange, Entry};
use crate::community::{Community as BgpCommunity, CommunityError};
use crate::duration;
use crate::meta::LabelSelector;
use crate::model::{
    BfdProfile, BgpAdvertisement as AdvModel, L2Advertisement as L2Model, Model, ObjectKey,
    PasswordSource, Peer, PeerAsn, PeerTarget, Pool, Scope, Selector, Selectors, ServiceAllocation,
    Timers,
};
use crate::v1beta1::{BFDProfile, BGPAdvertisement, Community, IPAddressPool, L2Advertisement};
use crate::v1beta2::{BGPPeer, DynamicASNMode};

/// One thing wrong with a configuration, naming the object and the field.
///
/// Displays as `IPAddressPool "pool-a": spec.addresses[1]: "10.0.0.0/33" is
/// not a valid CIDR`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name:?}: {field}: {message}")]
pub struct Problem {
    /// The kind of the object at fault, such as `IPAddressPool`.
    pub kind: &'static str,
    /// The object's name.
    pub name: String,
    /// The field at fault, as a path such as `spec.addresses[1]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// The metallb.io objects of one MetalLB namespace, validated together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// IPAddressPools.
    pub pools: Vec<IPAddressPool>,
    /// BGPPeers, v1beta1 ones converted to v1beta2.
    pub peers: Vec<BGPPeer>,
    /// BGPAdvertisements.
    pub bgp_advertisements: Vec<BGPAdvertisement>,
    /// L2Advertisements.
    pub l2_advertisements: Vec<L2Advertisement>,
    /// BFDProfiles.
    pub bfd_profiles: Vec<BFDProfile>,
    /// Communities (alias definitions).
    pub communities: Vec<Community>,
    /// The status-only objects read and left out (see [`STATUS_ONLY_KINDS`]),
    /// for the caller to log.
    pub status_only: Vec<StatusOnly>,
}

/// The metallb.io kinds that hold only what a program observed
/// (ServiceL2Status, ServiceBGPStatus, ConfigurationState, all
/// `metallb.io/v1beta1`): no configuration. `kubectl get -o yaml` dumps
/// them with the rest, so backups of a MetalLB cluster contain them.
pub const STATUS_ONLY_KINDS: [&str; 3] =
    ["ServiceL2Status", "ServiceBGPStatus", "ConfigurationState"];

/// A status-only object that [`Config::from_yaml`] read and left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusOnly {
    /// Position of the document, from 0.
    pub index: usize,
    /// Its kind, one of [`STATUS_ONLY_KINDS`].
    pub kind: &'static str,
    /// `metadata.namespace`, when set.
    pub namespace: Option<String>,
    /// `metadata.name` (empty when missing).
    pub name: String,
}

impl Config {
    /// Reads multi-document YAML as MetalLB's file configuration would be
    /// written: metallb.io documents go to their lists (v1beta1 BGPPeers are
    /// converted to v1beta2), status-only kinds are listed in
    /// [`Config::status_only`] and otherwise left out, other kinds (Secrets,
    /// Namespaces) are skipped.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        let mut cfg = Self::default();
        for (index, mut doc) in docs.into_iter().enumerate() {
            if doc.is_null() {
                continue;
            }
            let field = |key: &str| {
                doc.get(key)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            let (api_version, kind) = (field("apiVersion"), field("kind"));
            if api_version == "metallb.io/v1beta1"
                && let Some(kind) = STATUS_ONLY_KINDS.into_iter().find(|k| *k == kind)
            {
                // Its status is all it has, and never configuration: not
                // even its shape is checked.
                let meta = |key: &str| {
                    doc.pointer(&format!("/metadata/{key}"))
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                };
                cfg.status_only.push(StatusOnly {
                    index,
                    kind,
                    namespace: meta("namespace"),
                    name: meta("name").unwrap_or_default(),
                });
                continue;
            }
            if let Some(map) = doc.as_object_mut() {
                // As the CRDs default it: MetalLB's specs are optional.
                map.entry("spec").or_insert_with(|| serde_json::json!({}));
                // A status in a file is what some program observed once, not
                // configuration: MetalLB's ConfigMap-to-CRD converter writes
                // `status: {}` (a pool's with four zero counters), dumps of
                // a cluster carry the controller's counters, possibly
                // partial. It is never read from a file, so any mapping goes;
                // anything else is not what the schema allows.
                if api_version.starts_with("metallb.io/") {
                    match map.remove("status") {
                        None | Some(serde_json::Value::Null | serde_json::Value::Object(_)) => {}
                        Some(other) => {
                            return Err(ConfigError::Document {
                                index,
                                kind,
                                message: format!("status: expected a mapping, found {other}"),
                            });
                        }
                    }
                }
            }
            let bad = |e: serde_json::Error| ConfigError::Document {
                index,
                kind: kind.clone(),
                message: e.to_string(),
            };
            match (api_version.as_str(), kind.as_str()) {
                ("metallb.io/v1beta1", "IPAddressPool") => {
                    cfg.pools.push(serde_json::from_value(doc).map_err(bad)?)
                }
                ("metallb.io/v1beta2", "BGPPeer") => {
                    cfg.peers.push(serde_json::from_value(doc).map_err(bad)?)
                }
                ("metallb.io/v1beta1", "BGPPeer") => {
                    let old: crate::v1beta1::BGPPeer = serde_json::from_value(doc).map_err(bad)?;
                    cfg.peers.push(old.into());
                }
                ("metallb.io/v1beta1", "BGPAdvertisement") => {
                    cfg.bgp_advertisements
                        .push(serde_json::from_value(doc).map_err(bad)?);
                }
                ("metallb.io/v1beta1", "L2Advertisement") => {
                    cfg.l2_advertisements
                        .push(serde_json::from_value(doc).map_err(bad)?);
                }
                ("metallb.io/v1beta1", "BFDProfile") => cfg
                    .bfd_profiles
                    .push(serde_json::from_value(doc).map_err(bad)?),
                ("metallb.io/v1beta1", "Community") => cfg
                    .communities
                    .push(serde_json::from_value(doc).map_err(bad)?),
                (group_version, _) if group_version.starts_with("metallb.io/") => {
                    return Err(ConfigError::Unknown {
                        index,
                        api_version,
                        kind,
                    });
                }
                _ => {}
            }
        }
        Ok(cfg)
    }
}

/// Why YAML could not be read as a [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not YAML.
    #[error("not YAML: {0}")]
    Yaml(String),
    /// A document does not match its kind's type.
    #[error("document {index} ({kind}): {message}")]
    Document {
        /// Position of the document, from 0.
        index: usize,
        /// Its kind.
        kind: String,
        /// The deserialization error.
        message: String,
    },
    /// A metallb.io kind or version this crate does not know.
    #[error("document {index}: unsupported {api_version} {kind}")]
    Unknown {
        /// Position of the document, from 0.
        index: usize,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
}

/// Validates a whole configuration: every object, then the rules between
/// objects. Returns the model of everything that parsed, and the problems.
///
/// An object with a problem in a value the model holds is left out of it;
/// a pool is kept while its addresses and selectors parse (the controller
/// keeps allocating from it, whatever else is wrong).
pub fn config(cfg: &Config) -> (Model, Vec<Problem>) {
    let mut out = Vec::new();
    let pools: Vec<Pool> = cfg
        .pools
        .iter()
        .filter_map(|p| keep(ip_address_pool(p), &mut out))
        .collect();
    let peers: Vec<Peer> = cfg
        .peers
        .iter()
        .filter_map(|p| keep(bgp_peer(p), &mut out))
        .collect();
    let (table, alias_problems) = aliases(&cfg.communities);
    let bgp_advertisements: Vec<AdvModel> = cfg
        .bgp_advertisements
        .iter()
        .filter_map(|a| keep(bgp_advertisement(a, &table), &mut out))
        .collect();
    let l2_advertisements = cfg
        .l2_advertisements
        .iter()
        .filter_map(|a| keep(l2_advertisement(a), &mut out))
        .collect();
    let bfd_profiles = cfg
        .bfd_profiles
        .iter()
        .filter_map(|p| keep(bfd_profile(p), &mut out).map(|v| (p.name_any(), v)))
        .collect();
    cfg.communities
        .iter()
        .for_each(|c| out.extend(community(c)));
    out.extend(alias_problems);
    out.extend(overlapping_pools(&cfg.pools));
    out.extend(duplicate_peers(&peers));
    out.extend(aggregation_lengths(&bgp_advertisements, &pools));
    let mut pools = pools;
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    let model = Model {
        pools,
        peers,
        bgp_advertisements,
        l2_advertisements,
        bfd_profiles,
    };
    (model, out)
}

/// One IPAddressPool: address syntax, families within a range, and its
/// service allocation. The pool is `None` when an address or a selector
/// operator does not parse.
pub fn ip_address_pool(pool: &IPAddressPool) -> (Option<Pool>, Vec<Problem>) {
    let mut p = Found::new("IPAddressPool", pool.name_any());
    let spec = &pool.spec;
    if spec.addresses.is_empty() {
        p.push("spec.addresses", "at least one address range is required");
    }
    let mut ranges = Some(Vec::new());
    for (i, text) in spec.addresses.iter().enumerate() {
        match Entry::parse(text) {
            Ok(Entry::Range(r)) => ranges.iter_mut().for_each(|v| v.push(r)),
            // An IPv4-to-IPv6 range: MetalLB takes it, and it gives nothing.
            Ok(Entry::Empty) => {}
            Err(e) => {
                p.push(format!("spec.addresses[{i}]"), format!("{text:?} {e}"));
                ranges = None;
            }
        }
    }
    let mut allocation = Some(None);
    if let Some(alloc) = &spec.service_allocation {
        duplicates(
            &mut p,
            "spec.serviceAllocation.namespaces",
            &alloc.namespaces,
        );
        let namespace_selectors = label_selectors(
            &mut p,
            "spec.serviceAllocation.namespaceSelectors",
            &alloc.namespace_selectors,
        );
        let service_selectors = label_selectors(
            &mut p,
            "spec.serviceAllocation.serviceSelectors",
            &alloc.service_selectors,
        );
        allocation = namespace_selectors.zip(service_selectors).map(
            |(namespace_selectors, service_selectors)| {
                Some(ServiceAllocation {
                    priority: alloc
                        .priority
                        .map_or(i32::MAX, |v| i32::try_from(v).unwrap_or(i32::MAX)),
                    namespaces: alloc.namespaces.clone(),
                    namespace_selectors,
                    service_selectors,
                })
            },
        );
    }
    let value = ranges.zip(allocation).map(|(ranges, allocation)| Pool {
        name: pool.name_any(),
        labels: pool.labels().clone(),
        ranges,
        auto_assign: spec.auto_assign.unwrap_or(true),
        avoid_buggy_ips: spec.avoid_buggy_ips.unwrap_or(false),
        allocation,
    });
    (value, p.list)
}

/// One BGPPeer: AS numbers, addresses, timers and mutually exclusive
/// fields. The peer is `None` when any of them is wrong.
pub fn bgp_peer(peer: &BGPPeer) -> (Option<Peer>, Vec<Problem>) {
    let mut p = Found::new("BGPPeer", peer.name_any());
    let spec = &peer.spec;
    let my_asn = asn(&mut p, "spec.myASN", Some(spec.my_asn));
    // As in MetalLB, peerASN 0 means unset.
    let peer_asn = spec.peer_asn.filter(|&a| a != 0);
    let exact = asn(&mut p, "spec.peerASN", peer_asn);
    asn(&mut p, "spec.localASN", spec.local_asn);
    let peer_as = match (peer_asn, spec.dynamic_asn) {
        (None, None) => {
            p.push("spec.peerASN", "one of peerASN and dynamicASN must be set");
            None
        }
        (Some(_), Some(_)) => {
            p.push(
                "spec.peerASN",
                "peerASN and dynamicASN are mutually exclusive",
            );
            None
        }
        (Some(_), None) => exact.map(PeerAsn::Exact),
        (None, Some(DynamicASNMode::Internal)) => Some(PeerAsn::Internal),
        (None, Some(DynamicASNMode::External)) => Some(PeerAsn::External),
    };
    if spec.ebgp_multi_hop && peer_asn == Some(spec.my_asn) {
        p.push(
            "spec.ebgpMultiHop",
            "cannot be set for an iBGP peer (peerASN equal to myASN)",
        );
    }
    let port = spec.peer_port.unwrap_or(DEFAULT_PEER_PORT);
    if port == 0 || port > MAX_PEER_PORT {
        p.push(
            "spec.peerPort",
            format!("{port} is not in 1..={MAX_PEER_PORT}"),
        );
    }
    let address = ip_field(&mut p, "spec.peerAddress", &spec.peer_address);
    let target = match (spec.peer_address.is_empty(), spec.interface.is_empty()) {
        (true, true) => {
            p.push(
                "spec.peerAddress",
                "one of peerAddress and interface must be set",
            );
            None
        }
        (false, false) => {
            p.push(
                "spec.peerAddress",
                "peerAddress and interface are mutually exclusive",
            );
            None
        }
        (false, true) => address.map(|a| PeerTarget::Address(SocketAddr::new(a, port))),
        (true, false) => Some(PeerTarget::Interface {
            name: spec.interface.clone(),
            port,
        }),
    };
    let source_address = ip_field(&mut p, "spec.sourceAddress", &spec.source_address);
    let router_id = ip_field(&mut p, "spec.routerID", &spec.router_id);
    let timers = timers(
        &mut p,
        spec.hold_time.as_deref(),
        spec.keepalive_time.as_deref(),
    );
    let connect_time = spec
        .connect_time
        .as_ref()
        .and_then(|text| match duration::parse(text) {
            Err(e) => {
                p.push("spec.connectTime", format!("{text:?} {e}"));
                None
            }
            Ok(d) if d.subsec_nanos() != 0 => {
                p.push(
                    "spec.connectTime",
                    format!("{text:?} must be a whole number of seconds"),
                );
                None
            }
            Ok(d) if !(1..=65535).contains(&d.as_secs()) => {
                p.push(
                    "spec.connectTime",
                    format!("{text:?} must be between 1s and 65535s"),
                );
                None
            }
            Ok(d) => Some(d),
        });
    let namespace = peer.namespace().unwrap_or_default();
    let secret = spec
        .password_secret
        .as_ref()
        .and_then(|s| s.name.as_deref().filter(|n| !n.is_empty()).map(|n| (s, n)))
        .map(|(s, name)| {
            // MetalLB reads the Secret from its own namespace, where the
            // peer lives too.
            let ns = s.namespace.clone().unwrap_or_else(|| namespace.clone());
            PasswordSource::Secret(ObjectKey::new(ns, name))
        });
    let password = match (spec.password.is_empty(), secret) {
        (true, secret) => secret,
        (false, None) => Some(PasswordSource::Inline(spec.password.as_bytes().to_vec())),
        (false, Some(_)) => {
            p.push(
                "spec.password",
                "password and passwordSecret are mutually exclusive",
            );
            None
        }
    };
    let nodes = label_selectors(&mut p, "spec.nodeSelectors", &spec.node_selectors);
    let value = match (my_asn, peer_as, target, nodes, timers) {
        (Some(my_asn), Some(peer_asn), Some(target), Some(nodes), Ok(timers))
            if p.list.is_empty() =>
        {
            Some(Peer {
                name: peer.name_any(),
                namespace,
                my_asn,
                peer_asn,
                local_asn: spec.local_asn,
                target,
                source_address,
                router_id,
                timers,
                connect_time,
                password,
                bfd_profile: (!spec.bfd_profile.is_empty()).then(|| spec.bfd_profile.clone()),
                graceful_restart: spec.enable_graceful_restart == Some(true),
                ebgp_multi_hop: spec.ebgp_multi_hop,
                vrf: (!spec.vrf.is_empty()).then(|| spec.vrf.clone()),
                disable_mp: spec.disable_mp == Some(true),
                dual_stack_address_family: spec.dual_stack_address_family == Some(true),
                nodes,
            })
        }
        _ => None,
    };
    (value, p.list)
}

/// One BGPAdvertisement: lengths, list duplicates, selectors, and its
/// communities, resolved through `aliases` (see [`aliases`]): a
/// `Community` alias first, as MetalLB does, then a well-known name, then
/// the literal syntax. The advertisement is `None` when anything is wrong.
pub fn bgp_advertisement(
    adv: &BGPAdvertisement,
    aliases: &Aliases,
) -> (Option<AdvModel>, Vec<Problem>) {
    let mut p = Found::new("BGPAdvertisement", adv.name_any());
    let spec = &adv.spec;
    if let Some(len) = spec.aggregation_length.filter(|l| !(1..=32).contains(l)) {
        p.push("spec.aggregationLength", format!("{len} is not in 1..=32"));
    }
    if let Some(len) = spec
        .aggregation_length_v6
        .filter(|l| !(0..=128).contains(l))
    {
        p.push(
            "spec.aggregationLengthV6",
            format!("{len} is not in 0..=128"),
        );
    }
    let custom_v4 = spec.aggregation_length.is_some_and(|l| l != 32);
    let custom_v6 = spec.aggregation_length_v6.is_some_and(|l| l != 128);
    if !spec.service_selectors.is_empty() && (custom_v4 || custom_v6) {
        p.push(
            "spec.serviceSelectors",
            "serviceSelectors and a non-default aggregationLength or aggregationLengthV6 are mutually exclusive",
        );
    }
    let mut communities = BTreeSet::new();
    for (i, text) in spec.communities.iter().enumerate() {
        let value = match aliases.0.get(text) {
            Some(c) => Ok(*c),
            None => match crate::community::well_known(text) {
                Some(v) => Ok(BgpCommunity::Standard((v >> 16) as u16, v as u16)),
                None => BgpCommunity::parse(text),
            },
        };
        match value {
            Ok(c) => {
                communities.insert(c);
            }
            // Not community-shaped: the name of an alias, and none is
            // defined.
            Err(CommunityError::Format) => p.push(
                format!("spec.communities[{i}]"),
                format!("{text:?} is neither a community nor an alias defined by a Community"),
            ),
            Err(e) => p.push(format!("spec.communities[{i}]"), format!("{text:?} {e}")),
        }
    }
    duplicates(&mut p, "spec.ipAddressPools", &spec.ip_address_pools);
    duplicates(&mut p, "spec.communities", &spec.communities);
    duplicates(&mut p, "spec.peers", &spec.peers);
    let scope = scope(
        &mut p,
        &spec.ip_address_pools,
        &spec.ip_address_pool_selectors,
        &spec.node_selectors,
        &spec.service_selectors,
    );
    let value = scope.filter(|_| p.list.is_empty()).map(|scope| AdvModel {
        name: adv.name_any(),
        scope,
        // Both checked to be in range above.
        aggregation_v4: spec.aggregation_length.unwrap_or(32) as u8,
        aggregation_v6: spec.aggregation_length_v6.unwrap_or(128) as u8,
        local_pref: spec.local_pref.filter(|&lp| lp != 0),
        communities,
        peers: spec.peers.clone(),
    });
    (value, p.list)
}

/// One L2Advertisement: list duplicates, selectors and preference weights.
/// The advertisement is `None` when anything is wrong.
pub fn l2_advertisement(adv: &L2Advertisement) -> (Option<L2Model>, Vec<Problem>) {
    let mut p = Found::new("L2Advertisement", adv.name_any());
    let spec = &adv.spec;
    duplicates(&mut p, "spec.ipAddressPools", &spec.ip_address_pools);
    duplicates(&mut p, "spec.interfaces", &spec.interfaces);
    let scope = scope(
        &mut p,
        &spec.ip_address_pools,
        &spec.ip_address_pool_selectors,
        &spec.node_selectors,
        &spec.service_selectors,
    );
    let mut preferred_nodes = Vec::new();
    for (i, pref) in spec.preferred_node_selectors.iter().enumerate() {
        if !(1..=100).contains(&pref.weight) {
            p.push(
                format!("spec.preferredNodeSelectors[{i}].weight"),
                format!("{} is not in 1..=100", pref.weight),
            );
        }
        let field = format!("spec.preferredNodeSelectors[{i}].preference");
        if let Some(s) = label_selector(&mut p, &field, &pref.preference) {
            // In 1..=100 when no problem was found.
            preferred_nodes.push((pref.weight.unsigned_abs(), s));
        }
    }
    let value = scope.filter(|_| p.list.is_empty()).map(|scope| L2Model {
        name: adv.name_any(),
        scope,
        interfaces: spec.interfaces.iter().cloned().collect(),
        preferred_nodes,
    });
    (value, p.list)
}

/// One BFDProfile: each interval and count within MetalLB's bounds. The
/// profile (MetalLB's defaults for unset fields) is `None` when one is
/// out of bounds.
pub fn bfd_profile(profile: &BFDProfile) -> (Option<BfdProfile>, Vec<Problem>) {
    let mut p = Found::new("BFDProfile", profile.name_any());
    let spec = &profile.spec;
    let fields = [
        ("spec.receiveInterval", spec.receive_interval, 10, 60000),
        ("spec.transmitInterval", spec.transmit_interval, 10, 60000),
        ("spec.detectMultiplier", spec.detect_multiplier, 2, 255),
        ("spec.echoInterval", spec.echo_interval, 10, 60000),
        ("spec.minimumTtl", spec.minimum_ttl, 1, 254),
    ];
    for (field, value, min, max) in fields {
        if let Some(v) = value.filter(|v| !(min..=max).contains(v)) {
            p.push(field, format!("{v} is not in {min}..={max}"));
        }
    }
    let d = BfdProfile::default();
    let ms = |v: Option<u32>, default| v.map_or(default, |v| Duration::from_millis(v.into()));
    let byte = |v: Option<u32>, default| v.and_then(|v| u8::try_from(v).ok()).unwrap_or(default);
    let value = p.list.is_empty().then(|| BfdProfile {
        receive_interval: ms(spec.receive_interval, d.receive_interval),
        transmit_interval: ms(spec.transmit_interval, d.transmit_interval),
        detect_multiplier: byte(spec.detect_multiplier, d.detect_multiplier),
        echo_interval: ms(spec.echo_interval, d.echo_interval),
        echo_mode: spec.echo_mode.unwrap_or(d.echo_mode),
        passive: spec.passive_mode.unwrap_or(d.passive),
        minimum_ttl: byte(spec.minimum_ttl, d.minimum_ttl),
    });
    (value, p.list)
}

/// One Community: every alias has a name and a valid community value.
pub fn community(c: &Community) -> Vec<Problem> {
    let mut p = Found::new("Community", c.name_any());
    for (i, alias) in c.spec.communities.iter().enumerate() {
        if alias.name.is_empty() {
            p.push(
                format!("spec.communities[{i}].name"),
                "an alias needs a name",
            );
        }
        if let Err(e) = BgpCommunity::parse(&alias.value) {
            p.push(
                format!("spec.communities[{i}].value"),
                format!("{:?} {e}", alias.value),
            );
        }
    }
    p.list
}

/// The community aliases that `Community` objects define, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aliases(pub BTreeMap<String, BgpCommunity>);

/// The aliases of `communities`, and the names defined twice (the first
/// definition counts). Aliases without a name or with a bad value are left
/// out ([`community`] reports them).
pub fn aliases(communities: &[Community]) -> (Aliases, Vec<Problem>) {
    let mut out = Vec::new();
    let mut table = Aliases::default();
    let mut defined: HashMap<&str, String> = HashMap::new();
    for c in communities {
        for (i, alias) in c.spec.communities.iter().enumerate() {
            if alias.name.is_empty() {
                continue;
            }
            if let Some(first) = defined.get(alias.name.as_str()) {
                out.push(Problem {
                    kind: "Community",
                    name: c.name_any(),
                    field: format!("spec.communities[{i}].name"),
                    message: format!(
                        "alias {:?} is already defined in Community {first:?}",
                        alias.name
                    ),
                });
                continue;
            }
            defined.insert(&alias.name, c.name_any());
            if let Ok(value) = BgpCommunity::parse(&alias.value) {
                table.0.insert(alias.name.clone(), value);
            }
        }
    }
    (table, out)
}

/// Pools whose addresses overlap, within one pool or across pools. The
/// entries that parse count, also those of a pool with a bad entry.
///
/// Each overlap is reported once, on the later entry.
pub fn overlapping_pools(pools: &[IPAddressPool]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen: Vec<(AddressRange, &str, String, usize)> = Vec::new();
    for pool in pools {
        let name = pool.name_any();
        for (i, text) in pool.spec.addresses.iter().enumerate() {
            let Ok(range) = AddressRange::parse(text) else {
                continue;
            };
            for (other, other_text, other_pool, j) in &seen {
                if range.overlaps(other) {
                    out.push(Problem {
                        kind: "IPAddressPool",
                        name: name.clone(),
                        field: format!("spec.addresses[{i}]"),
                        message: format!(
                            "{text:?} overlaps {other_text:?} (IPAddressPool {other_pool:?} spec.addresses[{j}])"
                        ),
                    });
                }
            }
            seen.push((range, text, name.clone(), i));
        }
    }
    out
}

/// Peers that would open the same session: the same address (or interface),
/// port and VRF, on nodes that can overlap.
///
/// Without the node list this cannot tell whether two different non-empty
/// node selectors pick disjoint nodes, so such pairs are not reported;
/// equal selectors, or either selecting every node, are.
pub fn duplicate_peers(peers: &[Peer]) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, peer) in peers.iter().enumerate() {
        let key = session_key(peer);
        let first = peers[..i].iter().find(|other| {
            session_key(other) == key
                && (peer.nodes.is_empty() || other.nodes.is_empty() || peer.nodes == other.nodes)
        });
        if let Some(other) = first {
            let field = match peer.target {
                PeerTarget::Address(_) => "spec.peerAddress",
                PeerTarget::Interface { .. } => "spec.interface",
            };
            out.push(Problem {
                kind: "BGPPeer",
                name: peer.name.clone(),
                field: field.into(),
                message: format!(
                    "duplicates BGPPeer {:?}: same peer {}, port {} and vrf {:?} on the same nodes",
                    other.name, key.0, key.1, key.2
                ),
            });
        }
    }
    out
}

/// Aggregation lengths shorter than a selected pool's prefixes.
///
/// MetalLB rejects an aggregation length below the shortest prefix of an
/// address entry (for a range, of the CIDRs that summarize it): aggregating
/// `10.0.0.0/24` to a `/16` would announce addresses outside the pool.
pub fn aggregation_lengths(advs: &[AdvModel], pools: &[Pool]) -> Vec<Problem> {
    let mut out = Vec::new();
    for adv in advs {
        for pool in pools.iter().filter(|pool| adv.scope.selects_pool(pool)) {
            for range in &pool.ranges {
                let (len, field) = if range.is_ipv4() {
                    (adv.aggregation_v4, "spec.aggregationLength")
                } else {
                    (adv.aggregation_v6, "spec.aggregationLengthV6")
                };
                let prefix = range.shortest_prefix_len();
                if len < prefix {
                    out.push(Problem {
                        kind: "BGPAdvertisement",
                        name: adv.name.clone(),
                        field: field.into(),
                        message: format!(
                            "{len} is shorter than prefix /{prefix} of \"{range}\" in IPAddressPool {:?}",
                            pool.name
                        ),
                    });
                }
            }
        }
    }
    out
}

/// Checks the timers as MetalLB does and returns them after its defaults:
/// a missing one is derived from the other (keepalive = hold / 3, hold =
/// 3 × keepalive). `Ok(None)` when neither is set; `Err` when a problem was
/// reported.
///
/// MetalLB rounds the hold time down to whole seconds (BGP negotiates whole
/// seconds, RFC 4271 §4.2; its FRR configuration truncates the same way)
/// and then wants 0 or at least 3s: `2.5s` is refused, `500ms` means no
/// hold timer, `3.7s` means 3s. Keepalive may equal the hold time, as in
/// MetalLB (the session sends keepalives at most every third of the
/// negotiated hold time anyway); it may not exceed it. The model holds the
/// rounded hold time, and a keepalive no longer than it (zero when the hold
/// time rounds to zero: no keepalives without a hold timer).
fn timers(
    p: &mut Found,
    hold_text: Option<&str>,
    keepalive_text: Option<&str>,
) -> Result<Option<Timers>, ()> {
    let before = p.list.len();
    let mut parsed = |field: &str, text: Option<&str>| match text.map(duration::parse) {
        Some(Err(e)) => {
            p.push(field, format!("{:?} {e}", text.unwrap_or_default()));
            Err(())
        }
        other => Ok(other.and_then(Result::ok)),
    };
    let (hold, keepalive) = (
        parsed("spec.holdTime", hold_text),
        parsed("spec.keepaliveTime", keepalive_text),
    );
    let (Ok(hold), Ok(keepalive)) = (hold, keepalive) else {
        return Err(());
    };
    let (hold, keepalive) = match (hold, keepalive) {
        (None, None) => return Ok(None),
        (Some(h), Some(k)) => (h, k),
        (Some(h), None) => (h, h / 3),
        (None, Some(k)) => (k.saturating_mul(3), k),
    };
    let rounded = Duration::from_secs(hold.as_secs());
    if !rounded.is_zero() && rounded < MIN_HOLD_TIME {
        match (hold_text, keepalive_text) {
            (Some(text), _) => p.push(
                "spec.holdTime",
                format!("{text:?} must be 0 or at least 3s once rounded down to whole seconds"),
            ),
            (None, Some(text)) => p.push(
                "spec.keepaliveTime",
                format!("{text:?} implies a holdTime of {hold:?} (3 × keepalive), which rounded down to whole seconds is neither 0 nor at least 3s"),
            ),
            (None, None) => {}
        }
    }
    if let (Some(h), Some(k)) = (hold_text, keepalive_text)
        && keepalive > hold
    {
        p.push(
            "spec.keepaliveTime",
            format!("{k:?} must not be greater than holdTime {h:?}"),
        );
    }
    if p.list.len() != before {
        return Err(());
    }
    Ok(Some(Timers {
        hold: rounded,
        keepalive: keepalive.min(rounded),
    }))
}

/// Adds a check's problems to `out` and passes its value on.
fn keep<T>((value, problems): (Option<T>, Vec<Problem>), out: &mut Vec<Problem>) -> Option<T> {
    out.extend(problems);
    value
}

/// The pools, nodes and services an advertisement applies to; `None` when a
/// selector has an unknown operator.
fn scope(
    p: &mut Found,
    pool_names: &[String],
    pool_selectors: &[LabelSelector],
    node_selectors: &[LabelSelector],
    service_selectors: &[LabelSelector],
) -> Option<Scope> {
    let pools = label_selectors(p, "spec.ipAddressPoolSelectors", pool_selectors);
    let nodes = label_selectors(p, "spec.nodeSelectors", node_selectors);
    let services = label_selectors(p, "spec.serviceSelectors", service_selectors);
    Some(Scope {
        pool_names: pool_names.to_vec(),
        pool_selectors: pools?.0,
        nodes: nodes?,
        services: services?,
    })
}

/// The problems found so far on one object.
struct Found {
    kind: &'static str,
    name: String,
    list: Vec<Problem>,
}

impl Found {
    fn new(kind: &'static str, name: String) -> Self {
        Self {
            kind,
            name,
            list: Vec::new(),
        }
    }

    fn push(&mut self, field: impl Into<String>, message: impl fmt::Display) {
        self.list.push(Problem {
            kind: self.kind,
            name: self.name.clone(),
            field: field.into(),
            message: message.to_string(),
        });
    }
}

/// An AS number in 1..=4294967295, or `None` (a problem when it is not).
fn asn(p: &mut Found, field: &str, value: Option<u32>) -> Option<u32> {
    let v = value?;
    if (1..=MAX_ASN).contains(&v) {
        return Some(v);
    }
    p.push(
        field,
        format!("{v} is not a valid AS number (1..={MAX_ASN})"),
    );
    None
}

/// An optional IP address field: `None` when empty or (a problem) not an
/// address.
fn ip_field(p: &mut Found, field: &str, text: &str) -> Option<IpAddr> {
    if text.is_empty() {
        return None;
    }
    let Ok(parsed) = text.parse::<IpAddr>() else {
        p.push(field, format!("{text:?} is not an IP address"));
        return None;
    };
    // The CRDs refuse these (as `isIP` does); Go would read the IPv4 address.
    if let Some(ipv4) = addr::ipv4_mapped(parsed) {
        p.push(
            field,
            format!("{text:?} is an IPv4-mapped IPv6 address: write it as IPv4 ({ipv4})"),
        );
        return None;
    }
    Some(parsed)
}

fn duplicates(p: &mut Found, field: &str, items: &[String]) {
    for (i, item) in items.iter().enumerate() {
        if let Some(j) = items[..i].iter().position(|x| x == item) {
            p.push(
                format!("{field}[{i}]"),
                format!("{item:?} duplicates {field}[{j}]"),
            );
        }
    }
}

/// A list of selectors, each well-formed and none twice; `None` when one
/// has an unknown operator.
fn label_selectors(p: &mut Found, field: &str, selectors: &[LabelSelector]) -> Option<Selectors> {
    let mut out = Some(Vec::new());
    for (i, sel) in selectors.iter().enumerate() {
        let parsed = label_selector(p, &format!("{field}[{i}]"), sel);
        if let Some(j) = selectors[..i].iter().position(|s| s == sel) {
            p.push(format!("{field}[{i}]"), format!("duplicates {field}[{j}]"));
        }
        match (parsed, out.as_mut()) {
            (Some(s), Some(list)) => list.push(s),
            _ => out = None,
        }
    }
    out.map(Selectors)
}

/// A label selector is well-formed: valid keys and values, known
/// operators, and values present exactly for In and NotIn. Returns it
/// parsed, or `None` when an operator is unknown.
fn label_selector(p: &mut Found, field: &str, sel: &LabelSelector) -> Option<Selector> {
    for (key, value) in &sel.match_labels {
        if let Err(e) = qualified_name(key) {
            p.push(format!("{field}.matchLabels"), format!("key {key:?} {e}"));
        }
        if let Err(e) = label_value(value) {
            p.push(
                format!("{field}.matchLabels[{key:?}]"),
                format!("value {value:?} {e}"),
            );
        }
    }
    for (i, req) in sel.match_expressions.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        if let Err(e) = qualified_name(&req.key) {
            p.push(format!("{at}.key"), format!("{:?} {e}", req.key));
        }
        match req.operator.as_str() {
            "In" | "NotIn" if req.values.is_empty() => {
                p.push(
                    format!("{at}.values"),
                    format!("operator {} needs at least one value", req.operator),
                );
            }
            "Exists" | "DoesNotExist" if !req.values.is_empty() => {
                p.push(
                    format!("{at}.values"),
                    format!("operator {} takes no values", req.operator),
                );
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => p.push(
                format!("{at}.operator"),
                format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
            ),
        }
        for value in &req.values {
            if let Err(e) = label_value(value) {
                p.push(format!("{at}.values"), format!("{value:?} {e}"));
            }
        }
    }
    // Unknown operators were reported above.
    Selector::parse(sel).ok()
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at
/// most 63 characters.
fn qualified_name(key: &str) -> Result<(), &'static str> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if prefix.len() > 253 || !prefix.split('.').all(label_ok) {
            return Err("has a prefix that is not a DNS subdomain");
        }
    }
    if name.is_empty() {
        return Err("has an empty name");
    }
    label_value(name).map_err(|_| "has a name that is not 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric")
}

/// A label value: empty, or at most 63 characters of alphanumerics, `-`,
/// `_` and `.`, starting and ending with an alphanumeric.
fn label_value(value: &str) -> Result<(), &'static str> {
    let ok = value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(
            "is not a label value (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)",
        )
    }
}

/// What makes two peers the same session: address or interface, port, VRF.
/// Addresses are compared as values, not spellings ("fc00::1" is
/// "fc00:0::1").
fn session_key(peer: &Peer) -> (String, u16, String) {
    let (id, port) = match &peer.target {
        PeerTarget::Address(a) => (a.ip().to_string(), a.port()),
        PeerTarget::Interface { name, port } => (name.clone(), *port),
    };
    (id, port, peer.vrf.clone().unwrap_or_default())
}

/// The largest AS number. RFC 7300 reserves 4294967295, but MetalLB takes
/// it (it refuses only 0), and so do BGP speakers that do not check: a
/// configuration that works with MetalLB works here.
const MAX_ASN: u32 = u32::MAX;
/// MetalLB's upper bound for `peerPort`.
const MAX_PEER_PORT: u16 = 16384;
const DEFAULT_PEER_PORT: u16 = 179;
/// The smallest non-zero hold time, RFC 4271 §4.2.
const MIN_HOLD_TIME: Duration = Duration::from_secs(3);

/// The hold and keepalive times a peer asks for, after MetalLB's defaults:
/// a missing one is derived from the other (keepalive = hold / 3).
///
/// `Ok(None)` when neither is set. Kept for the speaker until it reads
/// [`Peer::timers`] from the model.
pub fn peer_timers(
    hold: Option<&str>,
    keepalive: Option<&str>,
) -> Result<Option<(Duration, Duration)>, String> {
    let mut p = Found::new("BGPPeer", String::new());
    match timers(&mut p, hold, keepalive) {
        Ok(t) => Ok(t.map(|t| (t.hold, t.keepalive))),
        Err(()) => Err(p
            .list
            .first()
            .map(|e| format!("{}: {}", e.field, e.message))
            .unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj<T: serde::de::DeserializeOwned>(
        api_version: &str,
        kind: &str,
        name: &str,
        spec: serde_json::Value,
    ) -> T {
        serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    }

    fn pool(name: &str, addresses: &[&str]) -> IPAddressPool {
        obj(
            "metallb.io/v1beta1",
            "IPAddressPool",
            name,
            json!({"addresses": addresses}),
        )
    }

    fn peer(name: &str, spec: serde_json::Value) -> BGPPeer {
        obj("metallb.io/v1beta2", "BGPPeer", name, spec)
    }

    fn adv(name: &str, spec: serde_json::Value) -> BGPAdvertisement {
        obj("metallb.io/v1beta1", "BGPAdvertisement", name, spec)
    }

    fn alias_defs(name: &str, pairs: &[(&str, &str)]) -> Community {
        let list: Vec<_> = pairs
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v}))
            .collect();
        obj(
            "metallb.io/v1beta1",
            "Community",
            name,
            json!({"communities": list}),
        )
    }

    fn models(pools: &[IPAddressPool]) -> Vec<Pool> {
        pools
            .iter()
            .map(|p| ip_address_pool(p).0.unwrap())
            .collect()
    }

    fn peer_models(peers: &[BGPPeer]) -> Vec<Peer> {
        peers.iter().map(|p| bgp_peer(p).0.unwrap()).collect()
    }

    fn texts(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    fn good_peer() -> serde_json::Value {
        json!({"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1"})
    }

    fn peer_with(extra: serde_json::Value) -> Vec<String> {
        let mut spec = good_peer();
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                spec.as_object_mut().unwrap().remove(k);
            } else {
                spec[k] = v.clone();
            }
        }
        texts(&bgp_peer(&peer("p", spec)).1)
    }

    #[test]
    fn pool_address_syntax_reports_every_bad_entry() {
        let p = pool(
            "pool-a",
            &[
                "10.0.0.0/24",
                "10.0.0.0/33",
                "10.1.0.9-10.1.0.1",
                "fc00::1-10.0.0.1",
                "fc00::/64",
            ],
        );
        assert_eq!(
            texts(&ip_address_pool(&p).1),
            [
                r#"IPAddressPool "pool-a": spec.addresses[1]: "10.0.0.0/33" is not a valid CIDR"#,
                r#"IPAddressPool "pool-a": spec.addresses[2]: "10.1.0.9-10.1.0.1" is a reversed range: its first address is after its last"#,
                r#"IPAddressPool "pool-a": spec.addresses[3]: "fc00::1-10.0.0.1" is a reversed range: its first address is after its last"#,
            ]
        );
        assert_eq!(
            texts(&ip_address_pool(&pool("empty", &[])).1),
            [r#"IPAddressPool "empty": spec.addresses: at least one address range is required"#]
        );
    }

    #[test]
    fn pool_entries_metallb_accepts_or_refuses() {
        // MetalLB takes an IPv4-to-IPv6 range in its 16-byte order and
        // gives nothing for it; the rest of the pool stays.
        let p = pool(
            "mixed",
            &["10.0.0.1-fc00::1", "10.0.0.0/30", "::1 - 10.0.0.1"],
        );
        let (model, problems) = ip_address_pool(&p);
        assert_eq!(problems, []);
        assert_eq!(
            model.unwrap().ranges,
            [AddressRange::parse("10.0.0.0/30").unwrap()]
        );
        let (model, problems) = ip_address_pool(&pool("nothing", &["10.0.0.1-fc00::1"]));
        assert_eq!((problems, model.unwrap().ranges), (vec![], vec![]));
        // IPv4-mapped IPv6 addresses are refused, as the CRD's rules (and
        // isCIDR and isIP) refuse them.
        let p = pool(
            "mapped",
            &[
                "::ffff:10.0.0.0/120",
                "10.0.0.1-::ffff:10.0.0.9",
                "10.0.0.1-::1",
            ],
        );
        assert_eq!(
            texts(&ip_address_pool(&p).1),
            [
                r#"IPAddressPool "mapped": spec.addresses[0]: "::ffff:10.0.0.0/120" holds the IPv4-mapped IPv6 address "::ffff:10.0.0.0": write it as IPv4 (10.0.0.0)"#,
                r#"IPAddressPool "mapped": spec.addresses[1]: "10.0.0.1-::ffff:10.0.0.9" holds the IPv4-mapped IPv6 address "::ffff:10.0.0.9": write it as IPv4 (10.0.0.9)"#,
                r#"IPAddressPool "mapped": spec.addresses[2]: "10.0.0.1-::1" is a reversed range: its first address is after its last"#,
            ]
        );
    }

    #[test]
    fn peer_addresses_refuse_ipv4_mapped() {
        assert_eq!(
            peer_with(json!({
                "peerAddress": "::ffff:10.0.0.1",
                "sourceAddress": "::FFFF:a00:2",
                "routerID": "0:0:0:0:0:ffff:10.0.0.3",
            })),
            [
                r#"BGPPeer "p": spec.peerAddress: "::ffff:10.0.0.1" is an IPv4-mapped IPv6 address: write it as IPv4 (10.0.0.1)"#,
                r#"BGPPeer "p": spec.sourceAddress: "::FFFF:a00:2" is an IPv4-mapped IPv6 address: write it as IPv4 (10.0.0.2)"#,
                r#"BGPPeer "p": spec.routerID: "0:0:0:0:0:ffff:10.0.0.3" is an IPv4-mapped IPv6 address: write it as IPv4 (10.0.0.3)"#,
            ]
        );
        assert!(
            peer_with(json!({"peerAddress": "fc00::1", "sourceAddress": "::10.0.0.1"})).is_empty()
        );
    }

    #[test]
    fn pool_service_allocation() {
        let p: IPAddressPool = obj(
            "metallb.io/v1beta1",
            "IPAddressPool",
            "p",
            json!({
                "addresses": ["10.0.0.0/24"],
                "serviceAllocation": {
                    "namespaces": ["a", "b", "a"],
                    "serviceSelectors": [{"matchExpressions": [{"key": "app", "operator": "In"}]}],
                },
            }),
        );
        assert_eq!(
            texts(&ip_address_pool(&p).1),
            [
                r#"IPAddressPool "p": spec.serviceAllocation.namespaces[2]: "a" duplicates spec.serviceAllocation.namespaces[0]"#,
                r#"IPAddressPool "p": spec.serviceAllocation.serviceSelectors[0].matchExpressions[0].values: operator In needs at least one value"#,
            ]
        );
    }

    #[test]
    fn overlapping_pools_across_and_within_objects() {
        let pools = [
            pool("a", &["10.0.0.0/24", "fc00::/64"]),
            pool(
                "b",
                &["10.0.0.128/25", "10.0.1.0-10.0.1.9", "fc00:0:0:1::/64"],
            ),
            pool("c", &["10.0.1.5/32", "10.0.1.5/32"]),
        ];
        assert_eq!(
            texts(&overlapping_pools(&pools)),
            [
                r#"IPAddressPool "b": spec.addresses[0]: "10.0.0.128/25" overlaps "10.0.0.0/24" (IPAddressPool "a" spec.addresses[0])"#,
                r#"IPAddressPool "c": spec.addresses[0]: "10.0.1.5/32" overlaps "10.0.1.0-10.0.1.9" (IPAddressPool "b" spec.addresses[1])"#,
                r#"IPAddressPool "c": spec.addresses[1]: "10.0.1.5/32" overlaps "10.0.1.0-10.0.1.9" (IPAddressPool "b" spec.addresses[1])"#,
                r#"IPAddressPool "c": spec.addresses[1]: "10.0.1.5/32" overlaps "10.0.1.5/32" (IPAddressPool "c" spec.addresses[0])"#,
            ]
        );
    }

    #[test]
    fn asn_ranges() {
        assert!(peer_with(json!({})).is_empty());
        assert_eq!(
            peer_with(json!({"myASN": 0})),
            [r#"BGPPeer "p": spec.myASN: 0 is not a valid AS number (1..=4294967295)"#]
        );
        assert_eq!(
            peer_with(json!({"localASN": 0})),
            [r#"BGPPeer "p": spec.localASN: 0 is not a valid AS number (1..=4294967295)"#]
        );
        // RFC 7300 reserves 4294967295; MetalLB takes it in every ASN field.
        for field in ["myASN", "peerASN", "localASN"] {
            assert!(
                peer_with(json!({ field: 4294967295u32 })).is_empty(),
                "{field}"
            );
        }
        let (p, _) = bgp_peer(&peer(
            "p",
            json!({"myASN": 4294967295u32, "peerASN": 4294967295u32, "localASN": 4294967295u32, "peerAddress": "10.0.0.1"}),
        ));
        let p = p.unwrap();
        assert_eq!(
            (p.my_asn, p.peer_asn, p.local_asn),
            (u32::MAX, PeerAsn::Exact(u32::MAX), Some(u32::MAX))
        );
    }

    #[test]
    fn peer_asn_or_dynamic_asn() {
        assert_eq!(
            peer_with(json!({"peerASN": null})),
            [r#"BGPPeer "p": spec.peerASN: one of peerASN and dynamicASN must be set"#]
        );
        // 0 means unset, as in MetalLB.
        assert_eq!(peer_with(json!({"peerASN": 0})).len(), 1);
        assert_eq!(
            peer_with(json!({"dynamicASN": "internal"})),
            [r#"BGPPeer "p": spec.peerASN: peerASN and dynamicASN are mutually exclusive"#]
        );
        assert!(peer_with(json!({"peerASN": null, "dynamicASN": "external"})).is_empty());
    }

    #[test]
    fn peer_addresses() {
        assert_eq!(
            peer_with(
                json!({"peerAddress": "10.0.0.256", "sourceAddress": "x", "routerID": "fc00::1"})
            ),
            [
                r#"BGPPeer "p": spec.peerAddress: "10.0.0.256" is not an IP address"#,
                r#"BGPPeer "p": spec.sourceAddress: "x" is not an IP address"#,
            ]
        );
        assert_eq!(
            peer_with(json!({"interface": "eth0"})),
            [r#"BGPPeer "p": spec.peerAddress: peerAddress and interface are mutually exclusive"#]
        );
        assert_eq!(
            peer_with(json!({"peerAddress": null})),
            [r#"BGPPeer "p": spec.peerAddress: one of peerAddress and interface must be set"#]
        );
        assert!(peer_with(json!({"peerAddress": null, "interface": "eth0"})).is_empty());
        assert_eq!(
            peer_with(json!({"peerPort": 0})),
            [r#"BGPPeer "p": spec.peerPort: 0 is not in 1..=16384"#]
        );
        assert_eq!(peer_with(json!({"peerPort": 16385})).len(), 1);
    }

    #[test]
    fn hold_and_keepalive() {
        // (holdTime, keepaliveTime) -> the model's (hold, keepalive), as
        // MetalLB's parseTimers and its FRR configuration read them.
        let secs = Duration::from_secs;
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<(Duration, Duration)>,
        );
        let accepted: &[Case<'_>] = &[
            (None, None, None),
            (Some("90s"), Some("30s"), Some((secs(90), secs(30)))),
            (Some("0s"), Some("0s"), Some((secs(0), secs(0)))),
            (Some("0"), None, Some((secs(0), secs(0)))),
            (Some("3s"), None, Some((secs(3), secs(1)))),
            (None, Some("1s"), Some((secs(3), secs(1)))),
            (Some("90s"), None, Some((secs(90), secs(30)))),
            (None, Some("20s"), Some((secs(60), secs(20)))),
            // Keepalive equal to hold, as MetalLB allows.
            (Some("60s"), Some("60s"), Some((secs(60), secs(60)))),
            (Some("1m"), Some("60s"), Some((secs(60), secs(60)))),
            // Sub-second hold times round down to 0: no hold timer.
            (Some("500ms"), None, Some((secs(0), secs(0)))),
            (Some("999ms"), Some("100ms"), Some((secs(0), secs(0)))),
            (None, Some("300ms"), Some((secs(0), secs(0)))),
            // Fractions of a second above 3s round down too.
            // The keepalive comes from the hold time as written, as in MetalLB.
            (
                Some("3.7s"),
                None,
                Some((secs(3), Duration::from_nanos(1_233_333_333))),
            ),
            (Some("3.5s"), Some("3.2s"), Some((secs(3), secs(3)))),
            (Some("90.9s"), Some("30s"), Some((secs(90), secs(30)))),
        ];
        for &(hold, keepalive, want) in accepted {
            assert_eq!(
                peer_timers(hold, keepalive),
                Ok(want),
                "{hold:?} {keepalive:?}"
            );
            let mut spec = good_peer();
            if let Some(h) = hold {
                spec["holdTime"] = json!(h);
            }
            if let Some(k) = keepalive {
                spec["keepaliveTime"] = json!(k);
            }
            let (model, problems) = bgp_peer(&peer("p", spec));
            assert!(problems.is_empty(), "{problems:?}");
            assert_eq!(
                model.unwrap().timers,
                want.map(|(hold, keepalive)| Timers { hold, keepalive })
            );
        }
        let refused: &[(serde_json::Value, &[&str])] = &[
            (
                json!({"holdTime": "2s"}),
                &[
                    r#"BGPPeer "p": spec.holdTime: "2s" must be 0 or at least 3s once rounded down to whole seconds"#,
                ],
            ),
            (
                json!({"holdTime": "1s"}),
                &[
                    r#"BGPPeer "p": spec.holdTime: "1s" must be 0 or at least 3s once rounded down to whole seconds"#,
                ],
            ),
            (
                json!({"holdTime": "2999ms"}),
                &[
                    r#"BGPPeer "p": spec.holdTime: "2999ms" must be 0 or at least 3s once rounded down to whole seconds"#,
                ],
            ),
            (
                json!({"holdTime": "60s", "keepaliveTime": "90s"}),
                &[
                    r#"BGPPeer "p": spec.keepaliveTime: "90s" must not be greater than holdTime "60s""#,
                ],
            ),
            (
                json!({"holdTime": "60s", "keepaliveTime": "60001ms"}),
                &[
                    r#"BGPPeer "p": spec.keepaliveTime: "60001ms" must not be greater than holdTime "60s""#,
                ],
            ),
            (
                json!({"holdTime": "0s", "keepaliveTime": "10s"}),
                &[
                    r#"BGPPeer "p": spec.keepaliveTime: "10s" must not be greater than holdTime "0s""#,
                ],
            ),
            (
                json!({"keepaliveTime": "500ms"}),
                &[
                    r#"BGPPeer "p": spec.keepaliveTime: "500ms" implies a holdTime of 1.5s (3 × keepalive), which rounded down to whole seconds is neither 0 nor at least 3s"#,
                ],
            ),
            (
                json!({"holdTime": "90", "keepaliveTime": "1d"}),
                &[
                    r#"BGPPeer "p": spec.holdTime: "90" is missing a unit (ns, us, ms, s, m, h)"#,
                    r#"BGPPeer "p": spec.keepaliveTime: "1d" has unknown unit "d""#,
                ],
            ),
        ];
        for (spec, want) in refused {
            assert_eq!(peer_with(spec.clone()), *want, "{spec}");
        }
    }

    #[test]
    fn peers_parse_into_the_model() {
        let (p, problems) = bgp_peer(&peer(
            "p",
            json!({"myASN": 64500, "dynamicASN": "internal", "peerAddress": "fc00:0::1",
                   "peerPort": 1179, "keepaliveTime": "10s", "connectTime": "5s",
                   "passwordSecret": {"name": "auth"}, "bfdProfile": "fast", "vrf": "red",
                   "sourceAddress": "fc00::2",
                   "nodeSelectors": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}),
        ));
        assert!(problems.is_empty(), "{problems:?}");
        let p = p.unwrap();
        assert_eq!(p.peer_asn, PeerAsn::Internal);
        assert!(p.is_ibgp());
        assert_eq!(
            p.target,
            PeerTarget::Address("[fc00::1]:1179".parse().unwrap())
        );
        assert_eq!(p.source_address, Some("fc00::2".parse().unwrap()));
        // A missing hold time is three keepalives.
        assert_eq!(
            p.timers,
            Some(Timers {
                hold: Duration::from_secs(30),
                keepalive: Duration::from_secs(10)
            })
        );
        assert_eq!(p.connect_time, Some(Duration::from_secs(5)));
        // The Secret is looked up in the peer's namespace.
        assert_eq!(
            p.password,
            Some(PasswordSource::Secret(ObjectKey::new("", "auth")))
        );
        assert_eq!(p.bfd_profile.as_deref(), Some("fast"));
        assert_eq!(p.vrf.as_deref(), Some("red"));
        let rack = |r: &str| BTreeMap::from([("rack".to_owned(), r.to_owned())]);
        assert!(p.nodes.matches(&rack("r1")) && !p.nodes.matches(&rack("r2")));
        // Any problem leaves the peer out of the model.
        let (p, problems) = bgp_peer(&peer("p", json!({"myASN": 1, "peerAddress": "x"})));
        assert_eq!((p, problems.len()), (None, 2));
    }

    #[test]
    fn pools_keep_what_parses() {
        let p: IPAddressPool = obj(
            "metallb.io/v1beta1",
            "IPAddressPool",
            "p",
            json!({"addresses": ["10.0.0.0/24"], "autoAssign": false,
                   "serviceAllocation": {"namespaces": ["a", "a"],
                                         "serviceSelectors": [{"matchLabels": {"app": "web"}}]}}),
        );
        // A duplicate namespace is a problem, but the pool still serves.
        let (pool, problems) = ip_address_pool(&p);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let pool = pool.unwrap();
        assert!(!pool.auto_assign && pool.contains("10.0.0.9".parse().unwrap()));
        let alloc = pool.allocation.unwrap();
        assert_eq!(alloc.priority, i32::MAX);
        assert!(alloc.selects(
            "a",
            &BTreeMap::new(),
            &[("app".to_owned(), "web".to_owned())].into()
        ));
        let (pool, _) = ip_address_pool(&pool_with_operator("Equals"));
        assert_eq!(pool, None);
    }

    fn pool_with_operator(operator: &str) -> IPAddressPool {
        obj(
            "metallb.io/v1beta1",
            "IPAddressPool",
            "p",
            json!({"addresses": ["10.0.0.0/24"],
                   "serviceAllocation": {"serviceSelectors": [{"matchExpressions": [{"key": "a", "operator": operator}]}]}}),
        )
    }

    #[test]
    fn bfd_profiles_take_metallb_defaults() {
        let p: BFDProfile = obj(
            "metallb.io/v1beta1",
            "BFDProfile",
            "b",
            json!({"receiveInterval": 50, "detectMultiplier": 5, "passiveMode": true}),
        );
        let (profile, problems) = bfd_profile(&p);
        assert!(problems.is_empty());
        let profile = profile.unwrap();
        assert_eq!(profile.receive_interval, Duration::from_millis(50));
        assert_eq!(profile.transmit_interval, Duration::from_millis(300));
        assert_eq!((profile.detect_multiplier, profile.minimum_ttl), (5, 254));
        assert!(profile.passive && !profile.echo_mode);
    }

    #[test]
    fn connect_time_and_exclusive_fields() {
        assert!(peer_with(json!({"connectTime": "10s"})).is_empty());
        assert_eq!(
            peer_with(json!({"connectTime": "1500ms"})),
            [r#"BGPPeer "p": spec.connectTime: "1500ms" must be a whole number of seconds"#]
        );
        assert_eq!(peer_with(json!({"connectTime": "0s"})).len(), 1);
        assert_eq!(peer_with(json!({"connectTime": "20h"})).len(), 1);
        assert_eq!(
            peer_with(json!({"password": "x", "passwordSecret": {"name": "s"}})),
            [r#"BGPPeer "p": spec.password: password and passwordSecret are mutually exclusive"#]
        );
        assert!(peer_with(json!({"password": "x", "passwordSecret": {}})).is_empty());
        assert_eq!(
            peer_with(json!({"peerASN": 64500, "ebgpMultiHop": true})),
            [
                r#"BGPPeer "p": spec.ebgpMultiHop: cannot be set for an iBGP peer (peerASN equal to myASN)"#
            ]
        );
    }

    #[test]
    fn duplicate_peers_by_address_port_vrf() {
        let peers = [
            peer("a", good_peer()),
            peer(
                "b",
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "peerPort": 179}),
            ),
            peer(
                "c",
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "peerPort": 1179}),
            ),
            peer(
                "d",
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1", "vrf": "red"}),
            ),
            peer(
                "e",
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "fc00:0::1",
                             "nodeSelectors": [{"matchLabels": {"rack": "1"}}]}),
            ),
            peer(
                "f",
                json!({"myASN": 1, "peerASN": 2, "peerAddress": "fc00::1",
                             "nodeSelectors": [{"matchLabels": {"rack": "2"}}]}),
            ),
            peer("g", json!({"myASN": 1, "peerASN": 2, "interface": "eth0"})),
            peer("h", json!({"myASN": 1, "peerASN": 3, "interface": "eth0"})),
        ];
        assert_eq!(
            texts(&duplicate_peers(&peer_models(&peers))),
            [
                r#"BGPPeer "b": spec.peerAddress: duplicates BGPPeer "a": same peer 10.0.0.1, port 179 and vrf "" on the same nodes"#,
                r#"BGPPeer "h": spec.interface: duplicates BGPPeer "g": same peer eth0, port 179 and vrf "" on the same nodes"#,
            ]
        );
    }

    #[test]
    fn community_syntax_and_aliases() {
        let a = adv(
            "adv",
            json!({"communities": ["65000:100", "65536:1", "large:1:2:3", "huge:1:2:3", "NO_ADVERTISE", "missing", "65000:100"]}),
        );
        let defs = [
            alias_defs("c1", &[("NO_ADVERTISE", "65535:65282")]),
            alias_defs("c2", &[("NO_ADVERTISE", "1:1"), ("", "x")]),
        ];
        let (table, dups) = aliases(&defs);
        assert_eq!(
            texts(&dups),
            [
                r#"Community "c2": spec.communities[0].name: alias "NO_ADVERTISE" is already defined in Community "c1""#
            ]
        );
        // The first definition counts.
        assert_eq!(
            table.0.get("NO_ADVERTISE"),
            Some(&BgpCommunity::Standard(65535, 65282))
        );
        assert_eq!(
            texts(&bgp_advertisement(&a, &table).1),
            [
                r#"BGPAdvertisement "adv": spec.communities[1]: "65536:1" has part "65536", which is not a number in range"#,
                r#"BGPAdvertisement "adv": spec.communities[3]: "huge:1:2:3" has four parts but does not start with "large:""#,
                r#"BGPAdvertisement "adv": spec.communities[5]: "missing" is neither a community nor an alias defined by a Community"#,
                r#"BGPAdvertisement "adv": spec.communities[6]: "65000:100" duplicates spec.communities[0]"#,
            ]
        );
        assert_eq!(
            texts(&community(&defs[1])),
            [
                r#"Community "c2": spec.communities[1].name: an alias needs a name"#,
                r#"Community "c2": spec.communities[1].value: "x" is not of the form <0-65535>:<0-65535> or large:<uint32>:<uint32>:<uint32>"#,
            ]
        );
    }

    #[test]
    fn well_known_community_names_need_no_alias() {
        let a = adv(
            "adv",
            json!({"communities": ["no-export", "blackhole", "not-a-name"]}),
        );
        assert_eq!(
            texts(&bgp_advertisement(&a, &Aliases::default()).1),
            [
                r#"BGPAdvertisement "adv": spec.communities[2]: "not-a-name" is neither a community nor an alias defined by a Community"#
            ]
        );
        assert_eq!(crate::community::well_known("no-export"), Some(0xFFFF_FF01));
    }

    #[test]
    fn alias_resolution() {
        let defs = [alias_defs(
            "c",
            &[("NO_ADVERTISE", "65535:65282"), ("BIG", "large:1:2:3")],
        )];
        let (table, _) = aliases(&defs);
        let a = adv(
            "adv",
            json!({"communities": ["NO_ADVERTISE", "BIG", "1:2", "no-export"],
                   "localPref": 0, "aggregationLength": 28}),
        );
        let (model, problems) = bgp_advertisement(&a, &table);
        assert!(problems.is_empty(), "{problems:?}");
        let model = model.unwrap();
        assert_eq!(
            model.communities,
            BTreeSet::from([
                BgpCommunity::Standard(1, 2),
                BgpCommunity::Standard(65535, 65281),
                BgpCommunity::Standard(65535, 65282),
                BgpCommunity::Large(1, 2, 3),
            ])
        );
        // localPref 0 is unset, as in MetalLB; lengths default per family.
        assert_eq!(
            (model.local_pref, model.aggregation_v4, model.aggregation_v6),
            (None, 28, 128)
        );
        let a = adv("adv", json!({"communities": ["NOPE", "1:2"]}));
        assert_eq!(bgp_advertisement(&a, &table).0, None);
    }

    #[test]
    fn aggregation_length_against_pool_prefixes() {
        let mut labelled = pool("labelled", &["10.1.0.0-10.1.0.255", "fc00::/64"]);
        labelled.metadata.labels = Some([("zone".to_owned(), "east".to_owned())].into());
        let pools = [pool("a", &["10.0.0.0/24"]), labelled];
        let advs = [
            adv(
                "ok",
                json!({"aggregationLength": 24, "ipAddressPools": ["a"]}),
            ),
            adv(
                "too-short",
                json!({"aggregationLength": 16, "ipAddressPools": ["a"]}),
            ),
            adv(
                "all-pools",
                json!({"aggregationLength": 23, "aggregationLengthV6": 48}),
            ),
            adv(
                "by-label",
                json!({"aggregationLengthV6": 64, "ipAddressPoolSelectors": [{"matchLabels": {"zone": "east"}}]}),
            ),
        ];
        assert_eq!(
            texts(&aggregation_lengths(
                &advs
                    .iter()
                    .map(|a| bgp_advertisement(a, &Aliases::default()).0.unwrap())
                    .collect::<Vec<_>>(),
                &models(&pools)
            )),
            [
                r#"BGPAdvertisement "too-short": spec.aggregationLength: 16 is shorter than prefix /24 of "10.0.0.0/24" in IPAddressPool "a""#,
                r#"BGPAdvertisement "all-pools": spec.aggregationLength: 23 is shorter than prefix /24 of "10.0.0.0/24" in IPAddressPool "a""#,
                r#"BGPAdvertisement "all-pools": spec.aggregationLength: 23 is shorter than prefix /24 of "10.1.0.0-10.1.0.255" in IPAddressPool "labelled""#,
                r#"BGPAdvertisement "all-pools": spec.aggregationLengthV6: 48 is shorter than prefix /64 of "fc00::/64" in IPAddressPool "labelled""#,
            ]
        );
    }

    #[test]
    fn advertisement_fields() {
        let a = adv(
            "a",
            json!({"aggregationLength": 33, "aggregationLengthV6": 129, "peers": ["x", "x"],
                               "serviceSelectors": [{"matchLabels": {"app": "web"}}]}),
        );
        assert_eq!(
            texts(&bgp_advertisement(&a, &Aliases::default()).1),
            [
                r#"BGPAdvertisement "a": spec.aggregationLength: 33 is not in 1..=32"#,
                r#"BGPAdvertisement "a": spec.aggregationLengthV6: 129 is not in 0..=128"#,
                r#"BGPAdvertisement "a": spec.serviceSelectors: serviceSelectors and a non-default aggregationLength or aggregationLengthV6 are mutually exclusive"#,
                r#"BGPAdvertisement "a": spec.peers[1]: "x" duplicates spec.peers[0]"#,
            ]
        );
        // Default lengths written out are fine with service selectors.
        let a = adv(
            "b",
            json!({"aggregationLength": 32, "aggregationLengthV6": 128,
                               "serviceSelectors": [{"matchLabels": {"app": "web"}}]}),
        );
        assert!(bgp_advertisement(&a, &Aliases::default()).1.is_empty());
    }

    #[test]
    fn label_selectors_well_formed() {
        let l2: L2Advertisement = obj(
            "metallb.io/v1beta1",
            "L2Advertisement",
            "l2",
            json!({
                "nodeSelectors": [
                    {"matchLabels": {"kubernetes.io/hostname": "node-a", "-bad": "x", "ok": "-bad-"}},
                    {"matchExpressions": [
                        {"key": "zone", "operator": "Exists", "values": ["a"]},
                        {"key": "zone", "operator": "Equals", "values": ["a"]},
                        {"key": "Bad.Prefix/name", "operator": "DoesNotExist"},
                    ]},
                    {"matchLabels": {"kubernetes.io/hostname": "node-a", "-bad": "x", "ok": "-bad-"}},
                ],
                "interfaces": ["eth0", "eth0"],
                "preferredNodeSelectors": [{"weight": 0, "preference": {}}],
            }),
        );
        assert_eq!(
            texts(&l2_advertisement(&l2).1),
            [
                r#"L2Advertisement "l2": spec.interfaces[1]: "eth0" duplicates spec.interfaces[0]"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[0].matchLabels: key "-bad" has a name that is not 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[0].matchLabels["ok"]: value "-bad-" is not a label value (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[1].matchExpressions[0].values: operator Exists takes no values"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[1].matchExpressions[1].operator: "Equals" is not one of In, NotIn, Exists, DoesNotExist"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[1].matchExpressions[2].key: "Bad.Prefix/name" has a prefix that is not a DNS subdomain"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[2].matchLabels: key "-bad" has a name that is not 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[2].matchLabels["ok"]: value "-bad-" is not a label value (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"#,
                r#"L2Advertisement "l2": spec.nodeSelectors[2]: duplicates spec.nodeSelectors[0]"#,
                r#"L2Advertisement "l2": spec.preferredNodeSelectors[0].weight: 0 is not in 1..=100"#,
            ]
        );
    }

    #[test]
    fn bfd_profile_bounds() {
        let p: BFDProfile = obj(
            "metallb.io/v1beta1",
            "BFDProfile",
            "b",
            json!({
                "receiveInterval": 9, "transmitInterval": 60001, "detectMultiplier": 1,
                "echoInterval": 300, "minimumTtl": 255,
            }),
        );
        assert_eq!(
            texts(&bfd_profile(&p).1),
            [
                r#"BFDProfile "b": spec.receiveInterval: 9 is not in 10..=60000"#,
                r#"BFDProfile "b": spec.transmitInterval: 60001 is not in 10..=60000"#,
                r#"BFDProfile "b": spec.detectMultiplier: 1 is not in 2..=255"#,
                r#"BFDProfile "b": spec.minimumTtl: 255 is not in 1..=254"#,
            ]
        );
    }

    #[test]
    fn status_in_files_is_ignored() {
        // One document per kind read from files, each with the status
        // MetalLB's converter writes and with a partial one.
        let objects = [
            (
                "metallb.io/v1beta1",
                "IPAddressPool",
                "spec: {addresses: [10.0.0.0/24]}",
                "{assignedIPv4: 3}",
            ),
            (
                "metallb.io/v1beta2",
                "BGPPeer",
                "spec: {myASN: 64500, peerASN: 64501, peerAddress: 10.0.0.1}",
                "{conditions: []}",
            ),
            (
                "metallb.io/v1beta1",
                "BGPPeer",
                "spec: {myASN: 64500, peerASN: 64501, peerAddress: 10.0.0.1}",
                "{observedGeneration: 1}",
            ),
            (
                "metallb.io/v1beta1",
                "BGPAdvertisement",
                "spec: {ipAddressPools: [p]}",
                "{x: 1}",
            ),
            (
                "metallb.io/v1beta1",
                "L2Advertisement",
                "spec: {}",
                "{x: 1}",
            ),
            ("metallb.io/v1beta1", "BFDProfile", "spec: {}", "{x: 1}"),
            (
                "metallb.io/v1beta1",
                "Community",
                "spec: {communities: [{name: a, value: '1:1'}]}",
                "{x: 1}",
            ),
        ];
        let full_pool_status =
            "{assignedIPv4: 0, assignedIPv6: 0, availableIPv4: 0, availableIPv6: 0}";
        for (api_version, kind, spec, partial) in objects {
            for status in ["{}", partial, full_pool_status, "null"] {
                let text = format!(
                    "apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\n{spec}\nstatus: {status}\n"
                );
                let cfg = Config::from_yaml(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                let read = cfg.pools.len()
                    + cfg.peers.len()
                    + cfg.bgp_advertisements.len()
                    + cfg.l2_advertisements.len()
                    + cfg.bfd_profiles.len()
                    + cfg.communities.len();
                assert_eq!(read, 1, "{text}");
                assert!(cfg.pools.iter().all(|p| p.status.is_none()), "{text}");
            }
            let text = format!(
                "apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\n{spec}\nstatus: ready\n"
            );
            assert_eq!(
                Config::from_yaml(&text),
                Err(ConfigError::Document {
                    index: 0,
                    kind: kind.into(),
                    message: r#"status: expected a mapping, found "ready""#.into(),
                }),
            );
        }
    }

    /// What `kubectl get -o yaml` writes for MetalLB's status-only kinds
    /// (and so what backups hold): read, listed, left out of the model.
    #[test]
    fn status_only_kinds_are_listed_and_left_out() {
        let text = r#"
apiVersion: metallb.io/v1beta1
kind: ServiceL2Status
metadata:
  name: l2-abcde
  namespace: metallb-system
  labels: {metallb.io/node: node-1, metallb.io/service-name: web, metallb.io/service-namespace: default}
spec: {}
status:
  node: node-1
  serviceName: web
  serviceNamespace: default
  interfaces: [{name: eth0}]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec: {addresses: [10.0.0.0/24]}
---
apiVersion: metallb.io/v1beta1
kind: ServiceBGPStatus
metadata: {name: bgp-fghij, namespace: metallb-system}
status: {node: node-1, serviceName: web, serviceNamespace: default, peers: [peer-a]}
---
apiVersion: metallb.io/v1beta1
kind: ConfigurationState
metadata:
  name: controller
  namespace: metallb-system
  labels: {metallb.io/component-type: controller}
status:
  result: Valid
  conditions: [{type: Ready, status: "True", reason: SyncStateSuccess, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}]
---
apiVersion: metallb.io/v1beta1
kind: ConfigurationState
status: not even a mapping
"#;
        let cfg = Config::from_yaml(text).unwrap();
        assert_eq!(cfg.pools.len(), 1);
        let ns = Some("metallb-system".to_owned());
        assert_eq!(
            cfg.status_only,
            [
                StatusOnly {
                    index: 0,
                    kind: "ServiceL2Status",
                    namespace: ns.clone(),
                    name: "l2-abcde".into(),
                },
                StatusOnly {
                    index: 2,
                    kind: "ServiceBGPStatus",
                    namespace: ns.clone(),
                    name: "bgp-fghij".into(),
                },
                StatusOnly {
                    index: 3,
                    kind: "ConfigurationState",
                    namespace: ns,
                    name: "controller".into(),
                },
                StatusOnly {
                    index: 4,
                    kind: "ConfigurationState",
                    namespace: None,
                    name: String::new(),
                },
            ]
        );
        let (model, problems) = config(&cfg);
        assert_eq!(problems, []);
        assert_eq!(model.pools.len(), 1);
    }

    #[test]
    fn config_collects_everything() {
        let text = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: a}
spec: {addresses: [10.0.0.0/24, 10.0.0.0/33]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: b}
spec: {addresses: [10.0.0.0/25]}
---
apiVersion: metallb.io/v1beta1
kind: BGPPeer
metadata: {name: old}
spec: {myASN: 0, peerASN: 1, peerAddress: 10.0.0.1}
---
apiVersion: v1
kind: Secret
metadata: {name: ignored}
"#;
        let cfg = Config::from_yaml(text).unwrap();
        assert_eq!((cfg.pools.len(), cfg.peers.len()), (2, 1));
        assert_eq!(
            texts(&config(&cfg).1),
            [
                r#"IPAddressPool "a": spec.addresses[1]: "10.0.0.0/33" is not a valid CIDR"#,
                r#"BGPPeer "old": spec.myASN: 0 is not a valid AS number (1..=4294967295)"#,
                r#"IPAddressPool "b": spec.addresses[0]: "10.0.0.0/25" overlaps "10.0.0.0/24" (IPAddressPool "a" spec.addresses[0])"#,
            ]
        );
        assert!(matches!(
            Config::from_yaml(
                "apiVersion: metallb.io/v1beta1\nkind: ServiceL3Status\nmetadata: {name: x}\n"
            ),
            Err(ConfigError::Unknown { index: 0, .. })
        ));
        // A status-only kind at a version MetalLB never had is unknown too.
        assert!(matches!(
            Config::from_yaml(
                "apiVersion: metallb.io/v1beta2\nkind: ServiceL2Status\nmetadata: {name: x}\n"
            ),
            Err(ConfigError::Unknown { index: 0, .. })
        ));
        assert!(matches!(
            Config::from_yaml(
                "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: x}\nspec: {addresses: 5}\n"
            ),
            Err(ConfigError::Document { index: 0, .. })
        ));
    }
}
