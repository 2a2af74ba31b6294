//! Validation of MetalLB configuration as pure functions.
//!
//! Each function takes objects and returns every [`Problem`] it finds, not
//! just the first, so that an operator can fix a configuration in one pass.
//! Per-object rules are also CEL rules in the CRDs ([`crate::crd::RULES`]);
//! the cross-object rules (overlapping pools, duplicate peers, community
//! aliases, aggregation lengths against pool prefixes) exist only here.
//! The rules follow MetalLB's `internal/config` where this module does not
//! say otherwise. No I/O, no clock.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use kube::ResourceExt;

use crate::addr::AddressRange;
use crate::community::{Community as BgpCommunity, CommunityError};
use crate::duration;
use crate::meta::LabelSelector;
use crate::v1beta1::{BFDProfile, BGPAdvertisement, Community, IPAddressPool, L2Advertisement};
use crate::v1beta2::BGPPeer;

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
#[derive(Clone, Debug, Default)]
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
}

impl Config {
    /// Reads multi-document YAML as MetalLB's file configuration would be
    /// written: metallb.io documents go to their lists (v1beta1 BGPPeers are
    /// converted to v1beta2), other kinds (Secrets, Namespaces) are skipped.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        let mut cfg = Self::default();
        for (index, mut doc) in docs.into_iter().enumerate() {
            if doc.is_null() {
                continue;
            }
            // As the CRDs default it: MetalLB's specs are optional.
            if let Some(map) = doc.as_object_mut() {
                map.entry("spec").or_insert_with(|| serde_json::json!({}));
            }
            let field = |key: &str| {
                doc.get(key)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            let (api_version, kind) = (field("apiVersion"), field("kind"));
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
    /// A metallb.io kind or version this crate does not know, or a status kind.
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
/// objects.
pub fn config(cfg: &Config) -> Vec<Problem> {
    let mut out = Vec::new();
    cfg.pools
        .iter()
        .for_each(|p| out.extend(ip_address_pool(p)));
    cfg.peers.iter().for_each(|p| out.extend(bgp_peer(p)));
    cfg.bgp_advertisements
        .iter()
        .for_each(|a| out.extend(bgp_advertisement(a)));
    cfg.l2_advertisements
        .iter()
        .for_each(|a| out.extend(l2_advertisement(a)));
    cfg.bfd_profiles
        .iter()
        .for_each(|p| out.extend(bfd_profile(p)));
    cfg.communities
        .iter()
        .for_each(|c| out.extend(community(c)));
    out.extend(overlapping_pools(&cfg.pools));
    out.extend(duplicate_peers(&cfg.peers));
    out.extend(community_aliases(&cfg.bgp_advertisements, &cfg.communities));
    out.extend(aggregation_lengths(&cfg.bgp_advertisements, &cfg.pools));
    out
}

/// One IPAddressPool: address syntax, families within a range, and its
/// service allocation.
pub fn ip_address_pool(pool: &IPAddressPool) -> Vec<Problem> {
    let mut p = Found::new("IPAddressPool", pool.name_any());
    let spec = &pool.spec;
    if spec.addresses.is_empty() {
        p.push("spec.addresses", "at least one address range is required");
    }
    for (i, text) in spec.addresses.iter().enumerate() {
        if let Err(e) = AddressRange::parse(text) {
            p.push(format!("spec.addresses[{i}]"), format!("{text:?} {e}"));
        }
    }
    if let Some(alloc) = &spec.service_allocation {
        duplicates(
            &mut p,
            "spec.serviceAllocation.namespaces",
            &alloc.namespaces,
        );
        label_selectors(
            &mut p,
            "spec.serviceAllocation.namespaceSelectors",
            &alloc.namespace_selectors,
        );
        label_selectors(
            &mut p,
            "spec.serviceAllocation.serviceSelectors",
            &alloc.service_selectors,
        );
    }
    p.list
}

/// One BGPPeer: AS numbers, addresses, timers and mutually exclusive fields.
pub fn bgp_peer(peer: &BGPPeer) -> Vec<Problem> {
    let mut p = Found::new("BGPPeer", peer.name_any());
    let spec = &peer.spec;
    asn(&mut p, "spec.myASN", Some(spec.my_asn));
    // As in MetalLB, peerASN 0 means unset.
    let peer_asn = spec.peer_asn.filter(|&a| a != 0);
    asn(&mut p, "spec.peerASN", peer_asn);
    asn(&mut p, "spec.localASN", spec.local_asn);
    match (peer_asn, spec.dynamic_asn) {
        (None, None) => p.push("spec.peerASN", "one of peerASN and dynamicASN must be set"),
        (Some(_), Some(_)) => p.push(
            "spec.peerASN",
            "peerASN and dynamicASN are mutually exclusive",
        ),
        _ => {}
    }
    if spec.ebgp_multi_hop && peer_asn == Some(spec.my_asn) {
        p.push(
            "spec.ebgpMultiHop",
            "cannot be set for an iBGP peer (peerASN equal to myASN)",
        );
    }
    match (spec.peer_address.is_empty(), spec.interface.is_empty()) {
        (true, true) => p.push(
            "spec.peerAddress",
            "one of peerAddress and interface must be set",
        ),
        (false, false) => p.push(
            "spec.peerAddress",
            "peerAddress and interface are mutually exclusive",
        ),
        _ => {}
    }
    ip_field(&mut p, "spec.peerAddress", &spec.peer_address);
    ip_field(&mut p, "spec.sourceAddress", &spec.source_address);
    ip_field(&mut p, "spec.routerID", &spec.router_id);
    if spec.peer_port == Some(0) || spec.peer_port.is_some_and(|port| port > MAX_PEER_PORT) {
        p.push(
            "spec.peerPort",
            format!(
                "{} is not in 1..={MAX_PEER_PORT}",
                spec.peer_port.unwrap_or(0)
            ),
        );
    }
    timers(
        &mut p,
        spec.hold_time.as_deref(),
        spec.keepalive_time.as_deref(),
    );
    if let Some(text) = &spec.connect_time {
        match duration::parse(text) {
            Err(e) => p.push("spec.connectTime", format!("{text:?} {e}")),
            Ok(d) if d.subsec_nanos() != 0 => {
                p.push(
                    "spec.connectTime",
                    format!("{text:?} must be a whole number of seconds"),
                );
            }
            Ok(d) if !(1..=65535).contains(&d.as_secs()) => {
                p.push(
                    "spec.connectTime",
                    format!("{text:?} must be between 1s and 65535s"),
                );
            }
            Ok(_) => {}
        }
    }
    let secret_named = spec
        .password_secret
        .as_ref()
        .and_then(|s| s.name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !spec.password.is_empty() && secret_named {
        p.push(
            "spec.password",
            "password and passwordSecret are mutually exclusive",
        );
    }
    label_selectors(&mut p, "spec.nodeSelectors", &spec.node_selectors);
    p.list
}

/// One BGPAdvertisement on its own: lengths, list duplicates, selectors and
/// the syntax of community values (aliases are checked by [`config`]).
pub fn bgp_advertisement(adv: &BGPAdvertisement) -> Vec<Problem> {
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
    for (i, text) in spec.communities.iter().enumerate() {
        match BgpCommunity::parse(text) {
            // Not community-shaped: the name of an alias.
            Ok(_) | Err(CommunityError::Format) => {}
            Err(e) => p.push(format!("spec.communities[{i}]"), format!("{text:?} {e}")),
        }
    }
    duplicates(&mut p, "spec.ipAddressPools", &spec.ip_address_pools);
    duplicates(&mut p, "spec.communities", &spec.communities);
    duplicates(&mut p, "spec.peers", &spec.peers);
    label_selectors(
        &mut p,
        "spec.ipAddressPoolSelectors",
        &spec.ip_address_pool_selectors,
    );
    label_selectors(&mut p, "spec.nodeSelectors", &spec.node_selectors);
    label_selectors(&mut p, "spec.serviceSelectors", &spec.service_selectors);
    p.list
}

/// One L2Advertisement: list duplicates, selectors and preference weights.
pub fn l2_advertisement(adv: &L2Advertisement) -> Vec<Problem> {
    let mut p = Found::new("L2Advertisement", adv.name_any());
    let spec = &adv.spec;
    duplicates(&mut p, "spec.ipAddressPools", &spec.ip_address_pools);
    duplicates(&mut p, "spec.interfaces", &spec.interfaces);
    label_selectors(
        &mut p,
        "spec.ipAddressPoolSelectors",
        &spec.ip_address_pool_selectors,
    );
    label_selectors(&mut p, "spec.nodeSelectors", &spec.node_selectors);
    label_selectors(&mut p, "spec.serviceSelectors", &spec.service_selectors);
    for (i, pref) in spec.preferred_node_selectors.iter().enumerate() {
        if !(1..=100).contains(&pref.weight) {
            p.push(
                format!("spec.preferredNodeSelectors[{i}].weight"),
                format!("{} is not in 1..=100", pref.weight),
            );
        }
        label_selector(
            &mut p,
            &format!("spec.preferredNodeSelectors[{i}].preference"),
            &pref.preference,
        );
    }
    p.list
}

/// One BFDProfile: each interval and count within MetalLB's bounds.
pub fn bfd_profile(profile: &BFDProfile) -> Vec<Problem> {
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
    p.list
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

/// Pools whose addresses overlap, within one pool or across pools.
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
pub fn duplicate_peers(peers: &[BGPPeer]) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, peer) in peers.iter().enumerate() {
        let key = session_key(peer);
        if key.0.is_empty() {
            continue;
        }
        let first = peers[..i].iter().find(|other| {
            session_key(other) == key
                && (peer.spec.node_selectors.is_empty()
                    || other.spec.node_selectors.is_empty()
                    || peer.spec.node_selectors == other.spec.node_selectors)
        });
        if let Some(other) = first {
            let field = if peer.spec.peer_address.is_empty() {
                "spec.interface"
            } else {
                "spec.peerAddress"
            };
            out.push(Problem {
                kind: "BGPPeer",
                name: peer.name_any(),
                field: field.into(),
                message: format!(
                    "duplicates BGPPeer {:?}: same peer {}, port {} and vrf {:?} on the same nodes",
                    other.name_any(),
                    key.0,
                    key.1,
                    key.2
                ),
            });
        }
    }
    out
}

/// Community strings in advertisements that are neither communities,
/// well-known community names, nor aliases defined by a Community object,
/// and aliases defined twice.
pub fn community_aliases(advs: &[BGPAdvertisement], communities: &[Community]) -> Vec<Problem> {
    let mut out = Vec::new();
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
            } else {
                defined.insert(&alias.name, c.name_any());
            }
        }
    }
    for adv in advs {
        for (i, text) in adv.spec.communities.iter().enumerate() {
            let is_alias_shaped = BgpCommunity::parse(text) == Err(CommunityError::Format);
            let known =
                defined.contains_key(text.as_str()) || crate::community::well_known(text).is_some();
            if is_alias_shaped && !known {
                out.push(Problem {
                    kind: "BGPAdvertisement",
                    name: adv.name_any(),
                    field: format!("spec.communities[{i}]"),
                    message: format!(
                        "{text:?} is neither a community nor an alias defined by a Community"
                    ),
                });
            }
        }
    }
    out
}

/// Resolves an advertisement's community strings through the aliases.
///
/// Returns the communities in order, or the strings that resolve to nothing.
pub fn resolve_communities(
    adv: &BGPAdvertisement,
    communities: &[Community],
) -> Result<Vec<BgpCommunity>, Vec<String>> {
    let aliases: HashMap<&str, &str> = communities
        .iter()
        .flat_map(|c| &c.spec.communities)
        .map(|a| (a.name.as_str(), a.value.as_str()))
        .collect();
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for text in &adv.spec.communities {
        let parsed = match aliases.get(text.as_str()) {
            Some(value) => BgpCommunity::parse(value),
            None => BgpCommunity::parse(text),
        };
        match parsed {
            Ok(c) => ok.push(c),
            Err(_) => bad.push(text.clone()),
        }
    }
    if bad.is_empty() { Ok(ok) } else { Err(bad) }
}

/// Aggregation lengths shorter than a selected pool's prefixes.
///
/// MetalLB rejects an aggregation length below the shortest prefix of an
/// address entry (for a range, of the CIDRs that summarize it): aggregating
/// `10.0.0.0/24` to a `/16` would announce addresses outside the pool.
pub fn aggregation_lengths(advs: &[BGPAdvertisement], pools: &[IPAddressPool]) -> Vec<Problem> {
    let mut out = Vec::new();
    for adv in advs {
        let v4 = adv.spec.aggregation_length.unwrap_or(32);
        let v6 = adv.spec.aggregation_length_v6.unwrap_or(128);
        for pool in pools.iter().filter(|pool| selects_pool(adv, pool)) {
            for text in &pool.spec.addresses {
                let Ok(range) = AddressRange::parse(text) else {
                    continue;
                };
                let (len, field) = if range.is_ipv4() {
                    (v4, "spec.aggregationLength")
                } else {
                    (v6, "spec.aggregationLengthV6")
                };
                let prefix = range.shortest_prefix_len();
                if len < i32::from(prefix) {
                    out.push(Problem {
                        kind: "BGPAdvertisement",
                        name: adv.name_any(),
                        field: field.into(),
                        message: format!(
                            "{len} is shorter than prefix /{prefix} of {text:?} in IPAddressPool {:?}",
                            pool.name_any()
                        ),
                    });
                }
            }
        }
    }
    out
}

/// Whether a BGP advertisement applies to a pool: named, selected by label,
/// or every pool when it names and selects none.
pub fn selects_pool(adv: &BGPAdvertisement, pool: &IPAddressPool) -> bool {
    let spec = &adv.spec;
    if spec.ip_address_pools.is_empty() && spec.ip_address_pool_selectors.is_empty() {
        return true;
    }
    let name = pool.name_any();
    let labels = pool.labels();
    spec.ip_address_pools.contains(&name)
        || spec
            .ip_address_pool_selectors
            .iter()
            .any(|s| s.matches(labels))
}

/// The hold and keepalive times a peer asks for, after MetalLB's defaults:
/// a missing one is derived from the other (keepalive = hold / 3).
///
/// `Ok(None)` when neither is set.
pub fn peer_timers(
    hold: Option<&str>,
    keepalive: Option<&str>,
) -> Result<Option<(Duration, Duration)>, String> {
    let parse = |field: &str, text: Option<&str>| {
        text.map(|t| duration::parse(t).map_err(|e| format!("{field}: {t:?} {e}")))
            .transpose()
    };
    let (hold, keepalive) = (
        parse("spec.holdTime", hold)?,
        parse("spec.keepaliveTime", keepalive)?,
    );
    Ok(match (hold, keepalive) {
        (None, None) => None,
        (Some(h), Some(k)) => Some((h, k)),
        (Some(h), None) => Some((h, h / 3)),
        (None, Some(k)) => Some((k * 3, k)),
    })
}

/// Checks the timers: hold 0 or >= 3s, keepalive < hold (both 0 is allowed).
///
/// MetalLB truncates the hold time to whole seconds before comparing, so it
/// lets a sub-second hold time through; BGP negotiates whole seconds (RFC
/// 4271 §4.2), so here anything between 0 and 3s is rejected. MetalLB also
/// allows keepalive equal to hold; that makes every keepalive race the hold
/// timer, so it is rejected too.
fn timers(p: &mut Found, hold_text: Option<&str>, keepalive_text: Option<&str>) {
    let mut parsed = |field: &str, text: Option<&str>| match text.map(duration::parse) {
        Some(Err(e)) => {
            p.push(field, format!("{:?} {e}", text.unwrap_or_default()));
            Err(())
        }
        other => Ok(other.and_then(Result::ok)),
    };
    let (Ok(hold), Ok(keepalive)) = (
        parsed("spec.holdTime", hold_text),
        parsed("spec.keepaliveTime", keepalive_text),
    ) else {
        return;
    };
    let effective_hold = hold.or(keepalive.map(|k| k * 3));
    if let Some(h) = effective_hold.filter(|h| !h.is_zero() && *h < MIN_HOLD_TIME) {
        match (hold_text, keepalive_text) {
            (Some(text), _) => p.push("spec.holdTime", format!("{text:?} must be 0 or at least 3s")),
            (None, Some(text)) => p.push(
                "spec.keepaliveTime",
                format!("{text:?} implies a holdTime of {h:?} (3 × keepalive), which is neither 0 nor at least 3s"),
            ),
            (None, None) => {}
        }
    }
    if let (Some(h), Some(k)) = (hold, keepalive) {
        let both_zero = h.is_zero() && k.is_zero();
        if k >= h && !both_zero {
            p.push(
                "spec.keepaliveTime",
                format!(
                    "{:?} must be lower than holdTime {:?}",
                    keepalive_text.unwrap_or_default(),
                    hold_text.unwrap_or_default()
                ),
            );
        }
    }
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

fn asn(p: &mut Found, field: &str, value: Option<u32>) {
    if let Some(v) = value.filter(|v| !(1..=MAX_ASN).contains(v)) {
        p.push(
            field,
            format!("{v} is not a valid AS number (1..={MAX_ASN})"),
        );
    }
}

fn ip_field(p: &mut Found, field: &str, text: &str) {
    if !text.is_empty() && text.parse::<IpAddr>().is_err() {
        p.push(field, format!("{text:?} is not an IP address"));
    }
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

fn label_selectors(p: &mut Found, field: &str, selectors: &[LabelSelector]) {
    for (i, sel) in selectors.iter().enumerate() {
        label_selector(p, &format!("{field}[{i}]"), sel);
        if let Some(j) = selectors[..i].iter().position(|s| s == sel) {
            p.push(format!("{field}[{i}]"), format!("duplicates {field}[{j}]"));
        }
    }
}

/// A label selector is well-formed: valid keys and values, known
/// operators, and values present exactly for In and NotIn.
fn label_selector(p: &mut Found, field: &str, sel: &LabelSelector) {
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
fn session_key(peer: &BGPPeer) -> (String, u16, String) {
    let spec = &peer.spec;
    let id = if spec.peer_address.is_empty() {
        spec.interface.clone()
    } else {
        // Compare addresses, not spellings: "fc00::1" and "fc00:0::1" match.
        spec.peer_address
            .parse::<IpAddr>()
            .map_or_else(|_| spec.peer_address.clone(), |a| a.to_string())
    };
    (
        id,
        spec.peer_port.unwrap_or(DEFAULT_PEER_PORT),
        spec.vrf.clone(),
    )
}

/// The largest valid AS number; 4294967295 is reserved (RFC 7300).
const MAX_ASN: u32 = 4_294_967_294;
/// MetalLB's upper bound for `peerPort`.
const MAX_PEER_PORT: u16 = 16384;
const DEFAULT_PEER_PORT: u16 = 179;
/// The smallest non-zero hold time, RFC 4271 §4.2.
const MIN_HOLD_TIME: Duration = Duration::from_secs(3);

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

    fn aliases(name: &str, pairs: &[(&str, &str)]) -> Community {
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
        texts(&bgp_peer(&peer("p", spec)))
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
            texts(&ip_address_pool(&p)),
            [
                r#"IPAddressPool "pool-a": spec.addresses[1]: "10.0.0.0/33" is not a valid CIDR"#,
                r#"IPAddressPool "pool-a": spec.addresses[2]: "10.1.0.9-10.1.0.1" is not a valid range: start is after end"#,
                r#"IPAddressPool "pool-a": spec.addresses[3]: "fc00::1-10.0.0.1" is not a valid range: start and end are of different address families"#,
            ]
        );
        assert_eq!(
            texts(&ip_address_pool(&pool("empty", &[]))),
            [r#"IPAddressPool "empty": spec.addresses: at least one address range is required"#]
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
            texts(&ip_address_pool(&p)),
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
            [r#"BGPPeer "p": spec.myASN: 0 is not a valid AS number (1..=4294967294)"#]
        );
        assert_eq!(
            peer_with(json!({"myASN": 4294967295u32, "localASN": 0})),
            [
                r#"BGPPeer "p": spec.myASN: 4294967295 is not a valid AS number (1..=4294967294)"#,
                r#"BGPPeer "p": spec.localASN: 0 is not a valid AS number (1..=4294967294)"#,
            ]
        );
        assert!(peer_with(json!({"myASN": 4294967294u32, "localASN": 1})).is_empty());
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
        assert!(peer_with(json!({"holdTime": "90s", "keepaliveTime": "30s"})).is_empty());
        assert!(peer_with(json!({"holdTime": "0s", "keepaliveTime": "0s"})).is_empty());
        assert!(peer_with(json!({"holdTime": "3s"})).is_empty());
        assert!(peer_with(json!({"holdTime": "0"})).is_empty());
        assert!(peer_with(json!({"keepaliveTime": "1s"})).is_empty());
        assert_eq!(
            peer_with(json!({"holdTime": "2s"})),
            [r#"BGPPeer "p": spec.holdTime: "2s" must be 0 or at least 3s"#]
        );
        assert_eq!(peer_with(json!({"holdTime": "2999ms"})).len(), 1);
        assert_eq!(
            peer_with(json!({"holdTime": "60s", "keepaliveTime": "90s"})),
            [r#"BGPPeer "p": spec.keepaliveTime: "90s" must be lower than holdTime "60s""#]
        );
        assert_eq!(
            peer_with(json!({"holdTime": "1m", "keepaliveTime": "60s"})).len(),
            1
        );
        assert_eq!(
            peer_with(json!({"holdTime": "0s", "keepaliveTime": "10s"})),
            [r#"BGPPeer "p": spec.keepaliveTime: "10s" must be lower than holdTime "0s""#]
        );
        assert_eq!(
            peer_with(json!({"keepaliveTime": "500ms"})),
            [
                r#"BGPPeer "p": spec.keepaliveTime: "500ms" implies a holdTime of 1.5s (3 × keepalive), which is neither 0 nor at least 3s"#
            ]
        );
        assert_eq!(
            peer_with(json!({"holdTime": "90", "keepaliveTime": "1d"})),
            [
                r#"BGPPeer "p": spec.holdTime: "90" is missing a unit (ns, us, ms, s, m, h)"#,
                r#"BGPPeer "p": spec.keepaliveTime: "1d" has unknown unit "d""#,
            ]
        );
        assert_eq!(
            peer_timers(Some("90s"), None),
            Ok(Some((Duration::from_secs(90), Duration::from_secs(30))))
        );
        assert_eq!(peer_timers(None, None), Ok(None));
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
            texts(&duplicate_peers(&peers)),
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
        assert_eq!(
            texts(&bgp_advertisement(&a)),
            [
                r#"BGPAdvertisement "adv": spec.communities[1]: "65536:1" has part "65536", which is not a number in range"#,
                r#"BGPAdvertisement "adv": spec.communities[3]: "huge:1:2:3" has four parts but does not start with "large:""#,
                r#"BGPAdvertisement "adv": spec.communities[6]: "65000:100" duplicates spec.communities[0]"#,
            ]
        );
        let defs = [
            aliases("c1", &[("NO_ADVERTISE", "65535:65282")]),
            aliases("c2", &[("NO_ADVERTISE", "1:1"), ("", "x")]),
        ];
        assert_eq!(
            texts(&community_aliases(std::slice::from_ref(&a), &defs)),
            [
                r#"Community "c2": spec.communities[0].name: alias "NO_ADVERTISE" is already defined in Community "c1""#,
                r#"BGPAdvertisement "adv": spec.communities[5]: "missing" is neither a community nor an alias defined by a Community"#,
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
            texts(&community_aliases(std::slice::from_ref(&a), &[])),
            [
                r#"BGPAdvertisement "adv": spec.communities[2]: "not-a-name" is neither a community nor an alias defined by a Community"#
            ]
        );
        assert_eq!(crate::community::well_known("no-export"), Some(0xFFFF_FF01));
    }

    #[test]
    fn alias_resolution() {
        let defs = [aliases(
            "c",
            &[("NO_ADVERTISE", "65535:65282"), ("BIG", "large:1:2:3")],
        )];
        let a = adv(
            "adv",
            json!({"communities": ["NO_ADVERTISE", "BIG", "1:2"]}),
        );
        assert_eq!(
            resolve_communities(&a, &defs),
            Ok(vec![
                BgpCommunity::Standard(65535, 65282),
                BgpCommunity::Large(1, 2, 3),
                BgpCommunity::Standard(1, 2)
            ])
        );
        let a = adv("adv", json!({"communities": ["NOPE", "1:2"]}));
        assert_eq!(resolve_communities(&a, &defs), Err(vec!["NOPE".into()]));
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
            texts(&aggregation_lengths(&advs, &pools)),
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
            texts(&bgp_advertisement(&a)),
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
        assert!(bgp_advertisement(&a).is_empty());
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
            texts(&l2_advertisement(&l2)),
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
            texts(&bfd_profile(&p)),
            [
                r#"BFDProfile "b": spec.receiveInterval: 9 is not in 10..=60000"#,
                r#"BFDProfile "b": spec.transmitInterval: 60001 is not in 10..=60000"#,
                r#"BFDProfile "b": spec.detectMultiplier: 1 is not in 2..=255"#,
                r#"BFDProfile "b": spec.minimumTtl: 255 is not in 1..=254"#,
            ]
        );
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
            texts(&config(&cfg)),
            [
                r#"IPAddressPool "a": spec.addresses[1]: "10.0.0.0/33" is not a valid CIDR"#,
                r#"BGPPeer "old": spec.myASN: 0 is not a valid AS number (1..=4294967294)"#,
                r#"IPAddressPool "b": spec.addresses[0]: "10.0.0.0/25" overlaps "10.0.0.0/24" (IPAddressPool "a" spec.addresses[0])"#,
            ]
        );
        assert!(matches!(
            Config::from_yaml(
                "apiVersion: metallb.io/v1beta1\nkind: ServiceL2Status\nmetadata: {name: x}\n"
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
