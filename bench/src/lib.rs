//! Fixtures shared by ferrolb's benches: realistic UPDATE messages built
//! with our own encoder, so every parser under test reads the same bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use bgp::wire::{
    AsPath, AttrValue, Community, EncodeCtx, ExtendedCommunity, Ipv4Prefix, Ipv6Prefix,
    LargeCommunity, NextHop, Nlri, Origin, PathAttribute, UpdateEncoder,
};
use bytes::{Bytes, BytesMut};

/// A named message to parse.
pub struct Fixture {
    /// Short name for the report.
    pub name: &'static str,
    /// One whole BGP message.
    pub bytes: Bytes,
    /// How many prefixes it announces.
    pub prefixes: usize,
}

fn base_attrs() -> Vec<PathAttribute> {
    vec![
        PathAttribute::new(AttrValue::Origin(Origin::Igp)),
        PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![64512, 65001]))),
        PathAttribute::new(AttrValue::MultiExitDisc(0)),
    ]
}

/// The first message of an encoder run.
fn first(out: &BytesMut) -> Bytes {
    let len = usize::from(u16::from_be_bytes([out[16], out[17]]));
    Bytes::copy_from_slice(&out[..len])
}

/// A full 4096-octet UPDATE of IPv4 /32 host routes in the NLRI field.
pub fn ipv4_hosts() -> Fixture {
    let prefixes: Vec<_> = (0..2000u32)
        .map(|i| Nlri::new(Ipv4Prefix::host(Ipv4Addr::from(0xc633_6400 + i))))
        .collect();
    let mut out = BytesMut::new();
    UpdateEncoder::new(EncodeCtx::default())
        .announce_ipv4(
            &base_attrs(),
            NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
            &prefixes,
            &mut out,
        )
        .unwrap_or_default();
    let bytes = first(&out);
    let prefixes = count(&bytes);
    Fixture {
        name: "ipv4_32_packed",
        bytes,
        prefixes,
    }
}

/// A full UPDATE of IPv6 /128 routes in MP_REACH_NLRI (global and
/// link-local next hop).
pub fn ipv6_hosts() -> Fixture {
    let base: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0000;
    let prefixes: Vec<_> = (0..1000u128)
        .map(|i| Nlri::new(Ipv6Prefix::host(Ipv6Addr::from(base + i))))
        .collect();
    let next_hop = NextHop::V6 {
        global: Ipv6Addr::from(base + 0xffff),
        link_local: Some(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)),
    };
    let mut out = BytesMut::new();
    UpdateEncoder::new(EncodeCtx::default())
        .announce_ipv6(&base_attrs(), next_hop, &prefixes, &mut out)
        .unwrap_or_default();
    let bytes = first(&out);
    let prefixes = count(&bytes);
    Fixture {
        name: "ipv6_128_mp_reach",
        bytes,
        prefixes,
    }
}

/// An attribute-heavy UPDATE: a 40-AS path, 50 communities, 20 large
/// communities, 10 extended communities, 20 /24 prefixes.
pub fn attribute_heavy() -> Fixture {
    let mut attrs = vec![
        PathAttribute::new(AttrValue::Origin(Origin::Igp)),
        PathAttribute::new(AttrValue::AsPath(AsPath::sequence(
            (0..40).map(|i| 4_200_000_000 + i).collect(),
        ))),
        PathAttribute::new(AttrValue::MultiExitDisc(10)),
        PathAttribute::new(AttrValue::LocalPref(200)),
    ];
    attrs.push(PathAttribute::new(AttrValue::Communities(
        (0..50).map(|i| Community::new(65000, i)).collect(),
    )));
    attrs.push(PathAttribute::new(AttrValue::ExtendedCommunities(
        (0..10)
            .map(|i| ExtendedCommunity::route_target(65000, i))
            .collect(),
    )));
    attrs.push(PathAttribute::new(AttrValue::LargeCommunities(
        (0..20)
            .map(|i| LargeCommunity {
                global_admin: 4_200_000_000,
                local_data1: i,
                local_data2: i * 2,
            })
            .collect(),
    )));
    let prefixes: Vec<_> = (0..20u32)
        .filter_map(|i| Ipv4Prefix::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).ok())
        .map(Nlri::new)
        .collect();
    let mut out = BytesMut::new();
    UpdateEncoder::new(EncodeCtx::default())
        .announce_ipv4(
            &attrs,
            NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
            &prefixes,
            &mut out,
        )
        .unwrap_or_default();
    let bytes = first(&out);
    let prefixes = count(&bytes);
    Fixture {
        name: "attribute_heavy",
        bytes,
        prefixes,
    }
}

/// Every fixture.
pub fn all() -> Vec<Fixture> {
    vec![ipv4_hosts(), ipv6_hosts(), attribute_heavy()]
}

/// Prefixes announced by a message, per our own parser.
pub fn count(bytes: &[u8]) -> usize {
    match bgp::Message::parse(bytes, &EncodeCtx::default()) {
        Ok(bgp::Message::Update(u)) => {
            u.nlri.len()
                + match u.mp_reach() {
                    Some(bgp::wire::MpReach::Ipv4Unicast { nlri, .. }) => nlri.len(),
                    Some(bgp::wire::MpReach::Ipv6Unicast { nlri, .. }) => nlri.len(),
                    _ => 0,
                }
        }
        _ => 0,
    }
}

/// The speaker benches' configuration, as MetalLB YAML: one pool of
/// `addresses`, a BGP advertisement with a community, an L2 advertisement
/// and four BGP peers (192.168.0.1-4).
pub fn speaker_config_yaml(addresses: &str) -> String {
    let mut y = format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: pool, namespace: metallb-system}}\nspec: {{addresses: [{addresses}]}}\n\
         ---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: bgp, namespace: metallb-system}}\nspec: {{communities: ['64512:100']}}\n\
         ---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\n",
    );
    for i in 1..=4 {
        y.push_str(&format!(
            "---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {{name: r{i}, namespace: metallb-system}}\nspec: {{myASN: 64512, peerASN: 64500, peerAddress: 192.168.0.{i}}}\n"
        ));
    }
    y
}
