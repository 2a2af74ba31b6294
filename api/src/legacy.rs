//! MetalLB's legacy configuration (the `config` key of the
//! `metallb-system/config` ConfigMap, used before MetalLB 0.13) as
//! metallb.io objects: what `kubectl ferrolb migrate-configmap` prints.
//!
//! Pure: text in, objects out. The mapping is the one MetalLB's own
//! converter (`configmaptocrs`) made: every `peers` entry becomes a
//! BGPPeer named `peer1`, `peer2`, ...; every `address-pools` entry an
//! IPAddressPool of its name, with one BGPAdvertisement per
//! `bgp-advertisements` entry (a `bgp` pool without any gets one that
//! advertises it plainly), named `bgpadvertisement1`, ... across pools,
//! and a `layer2` pool an L2Advertisement (`l2advertisement1`, ...);
//! `bgp-communities` become one Community named `communities`, and
//! `bfd-profiles` BFDProfiles of their names. Where it differs: a key this
//! converter does not know is an error naming it (MetalLB's dropped it
//! silently), and the objects are checked with [`crate::validate::config`]
//! before they are printed, so every one is what ferrolb accepts.

use std::collections::BTreeMap;

use crate::meta::{LabelSelector, LabelSelectorRequirement};
use crate::v1beta1::{
    BFDProfile, BFDProfileSpec, BGPAdvertisement, BGPAdvertisementSpec, Community, CommunityAlias,
    CommunitySpec, IPAddressPool, IPAddressPoolSpec, L2Advertisement, L2AdvertisementSpec,
};
use crate::v1beta2::{BGPPeer, BGPPeerSpec};
use crate::validate::{self, Config};
use serde::Deserialize;
use serde_json::Value;

/// Why a legacy configuration cannot be converted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The legacy configuration file (MetalLB's `configFile`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Legacy {
    #[serde(default)]
    peers: Vec<Peer>,
    #[serde(default)]
    bgp_communities: BTreeMap<String, String>,
    #[serde(default)]
    address_pools: Vec<AddressPool>,
    #[serde(default)]
    bfd_profiles: Vec<BfdProfile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Peer {
    my_asn: u32,
    peer_asn: u32,
    peer_address: String,
    #[serde(default)]
    source_address: String,
    #[serde(default)]
    peer_port: Option<u16>,
    #[serde(default)]
    hold_time: Option<String>,
    #[serde(default)]
    keepalive_time: Option<String>,
    #[serde(default)]
    router_id: String,
    #[serde(default)]
    node_selectors: Vec<NodeSelector>,
    #[serde(default)]
    password: String,
    #[serde(default)]
    bfd_profile: String,
    #[serde(default)]
    ebgp_multihop: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct NodeSelector {
    #[serde(default)]
    match_labels: BTreeMap<String, String>,
    #[serde(default)]
    match_expressions: Vec<Requirement>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Requirement {
    key: String,
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct AddressPool {
    name: String,
    protocol: Protocol,
    addresses: Vec<String>,
    #[serde(default)]
    auto_assign: Option<bool>,
    #[serde(default)]
    avoid_buggy_ips: Option<bool>,
    #[serde(default)]
    bgp_advertisements: Vec<Advertisement>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Protocol {
    Layer2,
    Bgp,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Advertisement {
    #[serde(default)]
    aggregation_length: Option<i32>,
    #[serde(default)]
    aggregation_length_v6: Option<i32>,
    #[serde(default)]
    localpref: Option<u32>,
    #[serde(default)]
    communities: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct BfdProfile {
    name: String,
    #[serde(default)]
    receive_interval: Option<u32>,
    #[serde(default)]
    transmit_interval: Option<u32>,
    #[serde(default)]
    detect_multiplier: Option<u32>,
    #[serde(default)]
    echo_interval: Option<u32>,
    #[serde(default)]
    echo_mode: Option<bool>,
    #[serde(default)]
    passive_mode: Option<bool>,
    #[serde(default)]
    minimum_ttl: Option<u32>,
}

/// Converts `text`, a ConfigMap manifest (its `data.config`) or the bare
/// legacy configuration, into metallb.io objects in `namespace`, validated
/// together.
pub fn convert(text: &str, namespace: &str) -> Result<Config, Error> {
    let (config, what) = legacy_text(text)?;
    let legacy: Legacy = if config.trim().is_empty() {
        Legacy::default()
    } else {
        serde_saphyr::from_str(&config).map_err(|e| Error(format!("{what}: {e}")))?
    };
    let cfg = objects(legacy, namespace)?;
    let (_, problems) = validate::config(&cfg);
    if !problems.is_empty() {
        let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(Error(format!(
            "the converted objects are not valid:\n{}",
            lines.join("\n")
        )));
    }
    Ok(cfg)
}

/// The objects as multi-document YAML, in a fixed order: BGPPeers,
/// IPAddressPools, BGPAdvertisements, L2Advertisements, BFDProfiles,
/// Communities (MetalLB's), each kind in the order of the legacy file.
pub fn to_yaml(cfg: &Config) -> Result<String, Error> {
    let mut docs: Vec<String> = Vec::new();
    let mut push = |v: Result<String, serde_saphyr::ser::Error>| -> Result<(), Error> {
        docs.push(v.map_err(|e| Error(e.to_string()))?);
        Ok(())
    };
    for o in &cfg.peers {
        push(serde_saphyr::to_string(o))?;
    }
    for o in &cfg.pools {
        push(serde_saphyr::to_string(o))?;
    }
    for o in &cfg.bgp_advertisements {
        push(serde_saphyr::to_string(o))?;
    }
    for o in &cfg.l2_advertisements {
        push(serde_saphyr::to_string(o))?;
    }
    for o in &cfg.bfd_profiles {
        push(serde_saphyr::to_string(o))?;
    }
    for o in &cfg.communities {
        push(serde_saphyr::to_string(o))?;
    }
    Ok(docs
        .iter()
        .map(|d| format!("---\n{d}"))
        .collect::<Vec<_>>()
        .concat())
}

/// The legacy configuration's text: a ConfigMap's `data.config`, or the
/// text itself when it is not a ConfigMap; and what to call it in errors
/// (their line numbers count from its start).
fn legacy_text(text: &str) -> Result<(String, &'static str), Error> {
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| Error(format!("not YAML: {e}")))?;
    if doc.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
        return Ok((text.to_owned(), "the legacy configuration"));
    }
    match doc.pointer("/data/config") {
        Some(Value::String(s)) => Ok((s.clone(), "the ConfigMap's data.config")),
        Some(_) => Err(Error("ConfigMap data.config: expected a string".into())),
        None => Err(Error(
            "ConfigMap: no data.config (MetalLB's configuration is under that key)".into(),
        )),
    }
}

fn objects(legacy: Legacy, ns: &str) -> Result<Config, Error> {
    let meta = |name: String| kube::api::ObjectMeta {
        name: Some(name),
        namespace: Some(ns.to_owned()),
        ..Default::default()
    };
    let mut cfg = Config::default();
    for (i, p) in legacy.peers.into_iter().enumerate() {
        let spec = BGPPeerSpec {
            my_asn: p.my_asn,
            peer_asn: Some(p.peer_asn),
            peer_address: p.peer_address,
            source_address: p.source_address,
            peer_port: p.peer_port,
            hold_time: p.hold_time,
            keepalive_time: p.keepalive_time,
            router_id: p.router_id,
            node_selectors: p
                .node_selectors
                .into_iter()
                .map(|s| LabelSelector {
                    match_labels: s.match_labels,
                    match_expressions: s
                        .match_expressions
                        .into_iter()
                        .map(|r| LabelSelectorRequirement {
                            key: r.key,
                            operator: r.operator,
                            values: r.values,
                        })
                        .collect(),
                })
                .collect(),
            password: p.password,
            bfd_profile: p.bfd_profile,
            ebgp_multi_hop: p.ebgp_multihop,
            ..BGPPeerSpec::default()
        };
        cfg.peers.push(BGPPeer {
            metadata: meta(format!("peer{}", i + 1)),
            spec,
            status: None,
        });
    }
    let mut bgp_index = 0;
    let mut l2_index = 0;
    for (i, pool) in legacy.address_pools.into_iter().enumerate() {
        if pool.protocol == Protocol::Layer2 && !pool.bgp_advertisements.is_empty() {
            return Err(Error(format!(
                "address-pools[{i}] ({}): bgp-advertisements: only a bgp pool has them",
                pool.name
            )));
        }
        let mut ads: Vec<BGPAdvertisementSpec> = pool
            .bgp_advertisements
            .into_iter()
            .map(|a| BGPAdvertisementSpec {
                aggregation_length: a.aggregation_length,
                aggregation_length_v6: a.aggregation_length_v6,
                local_pref: a.localpref.filter(|l| *l != 0),
                communities: a.communities,
                ip_address_pools: vec![pool.name.clone()],
                ..BGPAdvertisementSpec::default()
            })
            .collect();
        if ads.is_empty() && pool.protocol == Protocol::Bgp {
            ads.push(BGPAdvertisementSpec {
                ip_address_pools: vec![pool.name.clone()],
                ..BGPAdvertisementSpec::default()
            });
        }
        for spec in ads {
            bgp_index += 1;
            cfg.bgp_advertisements.push(BGPAdvertisement {
                metadata: meta(format!("bgpadvertisement{bgp_index}")),
                spec,
                status: None,
            });
        }
        if pool.protocol == Protocol::Layer2 {
            l2_index += 1;
            cfg.l2_advertisements.push(L2Advertisement {
                metadata: meta(format!("l2advertisement{l2_index}")),
                spec: L2AdvertisementSpec {
                    ip_address_pools: vec![pool.name.clone()],
                    ..L2AdvertisementSpec::default()
                },
                status: None,
            });
        }
        cfg.pools.push(IPAddressPool {
            metadata: meta(pool.name),
            spec: IPAddressPoolSpec {
                addresses: pool.addresses,
                auto_assign: pool.auto_assign,
                avoid_buggy_ips: pool.avoid_buggy_ips,
                service_allocation: None,
            },
            status: None,
        });
    }
    for b in legacy.bfd_profiles {
        cfg.bfd_profiles.push(BFDProfile {
            metadata: meta(b.name),
            spec: BFDProfileSpec {
                receive_interval: b.receive_interval,
                transmit_interval: b.transmit_interval,
                detect_multiplier: b.detect_multiplier,
                echo_interval: b.echo_interval,
                echo_mode: b.echo_mode,
                passive_mode: b.passive_mode,
                minimum_ttl: b.minimum_ttl,
            },
            status: None,
        });
    }
    if !legacy.bgp_communities.is_empty() {
        cfg.communities.push(Community {
            metadata: meta("communities".into()),
            spec: CommunitySpec {
                communities: legacy
                    .bgp_communities
                    .into_iter()
                    .map(|(name, value)| CommunityAlias { name, value })
                    .collect(),
            },
            status: None,
        });
    }
    Ok(cfg)
}
