//! JSON rendering of decoded messages, for `bgp-decode` and golden tests.
//!
//! The shape is stable: tests and operators' scripts depend on it.

use serde_json::{Map, Value, json};

use super::attr::{AsPath, AttrFlags, AttrValue, MpReach, MpUnreach, NextHop, Origin, SegmentType};
use super::error::{Action, DecodeError};
use super::iana::{Afi, Safi};
use super::nlri::Nlri;
use super::open::Capability;
use super::route_refresh::RefreshSubtype;
use super::{HexBytes, Message, Notification, Update};

/// The JSON form of a message.
pub fn message(msg: &Message) -> Value {
    match msg {
        Message::Open(o) => {
            let caps: Vec<Value> = o.capabilities.iter().map(capability).collect();
            json!({
                "type": "OPEN",
                "version": super::open::BGP_VERSION,
                "asn": o.asn(),
                "my_as": o.my_as,
                "hold_time": o.hold_time.secs(),
                "bgp_id": o.bgp_id.to_string(),
                "capabilities": caps,
            })
        }
        Message::Update(u) => update(u),
        Message::Notification(n) => notification(n),
        Message::Keepalive => json!({ "type": "KEEPALIVE" }),
        Message::RouteRefresh(r) => json!({
            "type": "ROUTE-REFRESH",
            "afi": afi(r.afi),
            "safi": safi(r.safi),
            "subtype": match r.subtype {
                RefreshSubtype::Request => json!("request"),
                RefreshSubtype::BeginningOfRefresh => json!("BoRR"),
                RefreshSubtype::EndOfRefresh => json!("EoRR"),
                RefreshSubtype::Unknown(v) => json!(v),
            },
        }),
    }
}

/// The JSON form of a decode error: `{"error": {"code", "subcode", "reason"}}`.
pub fn error(err: &DecodeError) -> Value {
    let n = Notification::from(err);
    json!({
        "error": {
            "code": u8::from(n.code),
            "subcode": n.subcode,
            "name": format!("{} / {}", n.code_name(), n.subcode_name()),
            "reason": err.to_string(),
            "data": HexBytes(&n.data).to_string(),
        }
    })
}

fn notification(n: &Notification) -> Value {
    let mut v = json!({
        "type": "NOTIFICATION",
        "code": u8::from(n.code),
        "subcode": n.subcode,
        "code_name": n.code_name(),
        "subcode_name": n.subcode_name(),
        "data": HexBytes(&n.data).to_string(),
    });
    if let Some(Ok(text)) = n.shutdown_message() {
        v["message"] = json!(text);
    }
    v
}

fn afi(a: Afi) -> Value {
    match a {
        Afi::Ipv4 => json!("ipv4"),
        Afi::Ipv6 => json!("ipv6"),
        Afi::L2vpn => json!("l2vpn"),
        Afi::LinkState => json!("bgp-ls"),
        Afi::Unknown(v) => json!(v),
    }
}

fn safi(s: Safi) -> Value {
    match s {
        Safi::Unicast => json!("unicast"),
        Safi::Multicast => json!("multicast"),
        Safi::LabeledUnicast => json!("labeled-unicast"),
        Safi::Evpn => json!("evpn"),
        Safi::MplsVpn => json!("mpls-vpn"),
        Safi::FlowSpec => json!("flowspec"),
        Safi::Unknown(v) => json!(v),
    }
}

fn capability(c: &Capability) -> Value {
    let code = u8::from(c.code());
    match c {
        Capability::Multiprotocol { afi: a, safi: s } => {
            json!({ "code": code, "name": "multiprotocol", "afi": afi(*a), "safi": safi(*s) })
        }
        Capability::RouteRefresh => json!({ "code": code, "name": "route-refresh" }),
        Capability::EnhancedRouteRefresh => {
            json!({ "code": code, "name": "enhanced-route-refresh" })
        }
        Capability::ExtendedMessage => json!({ "code": code, "name": "extended-message" }),
        Capability::FourOctetAs(asn) => json!({ "code": code, "name": "4-octet-as", "asn": asn }),
        Capability::ExtendedNextHop(entries) => {
            let e: Vec<Value> = entries
                .iter()
                .map(|e| json!({ "afi": afi(e.afi), "safi": e.safi, "next_hop_afi": afi(e.next_hop_afi) }))
                .collect();
            json!({ "code": code, "name": "extended-next-hop", "entries": e })
        }
        Capability::GracefulRestart(gr) => {
            let families: Vec<Value> = gr
                .families
                .iter()
                .map(|f| {
                    json!({
                        "afi": afi(f.afi),
                        "safi": safi(f.safi),
                        "forwarding": f.flags & super::open::GracefulRestart::FORWARDING != 0,
                    })
                })
                .collect();
            json!({
                "code": code,
                "name": "graceful-restart",
                "restart_state": gr.restart_state(),
                "notification": gr.flags & super::open::GracefulRestart::NOTIFICATION != 0,
                "restart_time": gr.restart_time,
                "families": families,
            })
        }
        Capability::AddPath(entries) => {
            let e: Vec<Value> = entries
                .iter()
                .map(|e| {
                    let mode = match e.send_receive {
                        1 => json!("receive"),
                        2 => json!("send"),
                        3 => json!("both"),
                        v => json!(v),
                    };
                    json!({ "afi": afi(e.afi), "safi": safi(e.safi), "send_receive": mode })
                })
                .collect();
            json!({ "code": code, "name": "add-path", "entries": e })
        }
        Capability::Fqdn { hostname, domain } => json!({
            "code": code,
            "name": "fqdn",
            "hostname": String::from_utf8_lossy(hostname),
            "domain": String::from_utf8_lossy(domain),
        }),
        Capability::Unknown { code, data } => {
            json!({ "code": code, "data": HexBytes(data).to_string() })
        }
    }
}

fn nlri_list<P: std::fmt::Display>(list: &[Nlri<P>]) -> Value {
    Value::Array(
        list.iter()
            .map(|n| match n.path_id {
                None => json!(n.prefix.to_string()),
                Some(id) => json!({ "path_id": id, "prefix": n.prefix.to_string() }),
            })
            .collect(),
    )
}

fn next_hop(nh: &NextHop) -> Value {
    match nh {
        NextHop::V4(a) => json!(a.to_string()),
        NextHop::V6 {
            global,
            link_local: None,
        } => json!(global.to_string()),
        NextHop::V6 {
            global,
            link_local: Some(ll),
        } => json!([global.to_string(), ll.to_string()]),
    }
}

fn as_path(p: &AsPath) -> Value {
    Value::Array(
        p.segments()
            .map(|s| {
                let kind = match s.kind {
                    SegmentType::Set => "AS_SET",
                    SegmentType::Sequence => "AS_SEQUENCE",
                    SegmentType::ConfedSequence => "AS_CONFED_SEQUENCE",
                    SegmentType::ConfedSet => "AS_CONFED_SET",
                };
                json!({ "type": kind, "asns": s.asns().collect::<Vec<_>>() })
            })
            .collect(),
    )
}

fn update(u: &Update) -> Value {
    let mut attrs = Map::new();
    for a in &u.attributes {
        let (name, value) = match &a.value {
            AttrValue::Origin(o) => (
                "origin",
                json!(match o {
                    Origin::Igp => "IGP",
                    Origin::Egp => "EGP",
                    Origin::Incomplete => "INCOMPLETE",
                }),
            ),
            AttrValue::AsPath(p) => ("as_path", as_path(p)),
            AttrValue::As4Path(p) => ("as4_path", as_path(p)),
            AttrValue::NextHop(a) => ("next_hop", json!(a.to_string())),
            AttrValue::MultiExitDisc(v) => ("med", json!(v)),
            AttrValue::LocalPref(v) => ("local_pref", json!(v)),
            AttrValue::AtomicAggregate => ("atomic_aggregate", json!(true)),
            AttrValue::Aggregator(g) => (
                "aggregator",
                json!({ "asn": g.asn, "address": g.addr.to_string() }),
            ),
            AttrValue::As4Aggregator(g) => (
                "as4_aggregator",
                json!({ "asn": g.asn, "address": g.addr.to_string() }),
            ),
            AttrValue::Communities(v) => (
                "communities",
                json!(v.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
            ),
            AttrValue::LargeCommunities(v) => (
                "large_communities",
                json!(v.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
            ),
            AttrValue::ExtendedCommunities(v) => (
                "extended_communities",
                Value::Array(
                    v.iter()
                        .map(|c| {
                            json!({
                                "type": c.type_high(),
                                "subtype": c.subtype(),
                                "value": HexBytes(&c.0).to_string(),
                                "text": c.to_string(),
                            })
                        })
                        .collect(),
                ),
            ),
            AttrValue::Ipv6ExtendedCommunities(v) => (
                "ipv6_extended_communities",
                Value::Array(
                    v.iter()
                        .map(|c| {
                            json!({
                                "type": c.0[0],
                                "subtype": c.0[1],
                                "global_admin": c.global_admin().to_string(),
                                "local_admin": c.local_admin(),
                            })
                        })
                        .collect(),
                ),
            ),
            AttrValue::OriginatorId(a) => ("originator_id", json!(a.to_string())),
            AttrValue::ClusterList(v) => (
                "cluster_list",
                json!(v.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
            ),
            AttrValue::MpReach(m) => ("mp_reach", mp_reach(m)),
            AttrValue::MpUnreach(m) => ("mp_unreach", mp_unreach(m)),
            AttrValue::Unknown(u) => {
                let entry = json!({
                    "type_code": u.type_code,
                    "flags": a.flags.0,
                    "partial": a.flags.has(AttrFlags::PARTIAL),
                    "data": HexBytes(&u.data).to_string(),
                });
                match attrs.get_mut("unknown") {
                    Some(Value::Array(list)) => list.push(entry),
                    _ => {
                        attrs.insert("unknown".into(), json!([entry]));
                    }
                }
                continue;
            }
        };
        attrs.insert(name.into(), value);
    }
    // AS4_PATH comes only from a speaker that thinks we lack 4-octet AS
    // numbers: the path it means is AS_PATH and AS4_PATH put back together
    // (RFC 6793 §4.2.3), which the two attributes alone do not show.
    if attrs.contains_key("as4_path")
        && let Some(path) = super::as4::as_path(&u.attributes, false)
    {
        attrs.insert("as_path_reconstructed".into(), as_path(&path));
    }
    let mut v = json!({
        "type": "UPDATE",
        "withdrawn": nlri_list(&u.withdrawn),
        "attributes": attrs,
        "nlri": nlri_list(&u.nlri),
    });
    if let Some(family) = u.end_of_rib_family() {
        v["end_of_rib"] = json!(family.to_string());
    }
    if !u.errors.is_empty() {
        v["errors"] = Value::Array(
            u.errors
                .iter()
                .map(|e| {
                    json!({
                        "action": match e.action {
                            Action::TreatAsWithdraw => "treat-as-withdraw",
                            Action::Discard => "attribute-discard",
                        },
                        "type_code": e.type_code,
                        "code": 3,
                        "subcode": e.error.subcode,
                        "reason": e.error.reason,
                    })
                })
                .collect(),
        );
    }
    v
}

fn mp_reach(m: &MpReach) -> Value {
    let (a, s) = m.afi_safi();
    match m {
        MpReach::Ipv4Unicast { next_hop: nh, nlri } => {
            json!({ "afi": afi(a), "safi": safi(s), "next_hop": next_hop(nh), "nlri": nlri_list(nlri) })
        }
        MpReach::Ipv6Unicast { next_hop: nh, nlri } => {
            json!({ "afi": afi(a), "safi": safi(s), "next_hop": next_hop(nh), "nlri": nlri_list(nlri) })
        }
        MpReach::Other(raw) => json!({
            "afi": afi(a),
            "safi": safi(s),
            "next_hop_raw": HexBytes(&raw.next_hop).to_string(),
            "nlri_raw": HexBytes(&raw.nlri).to_string(),
        }),
    }
}

fn mp_unreach(m: &MpUnreach) -> Value {
    let (a, s) = m.afi_safi();
    match m {
        MpUnreach::Ipv4Unicast(v) => {
            json!({ "afi": afi(a), "safi": safi(s), "withdrawn": nlri_list(v) })
        }
        MpUnreach::Ipv6Unicast(v) => {
            json!({ "afi": afi(a), "safi": safi(s), "withdrawn": nlri_list(v) })
        }
        MpUnreach::Other(raw) => {
            json!({ "afi": afi(a), "safi": safi(s), "withdrawn_raw": HexBytes(&raw.nlri).to_string() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::attr::PathAttribute;

    fn update(attrs: Vec<AttrValue>) -> Value {
        message(&Message::Update(Update {
            attributes: attrs.into_iter().map(PathAttribute::new).collect(),
            ..Update::default()
        }))
    }

    #[test]
    fn as4_path_is_shown_put_back_together() {
        // An OLD speaker (64496) prepended itself after the AS4_PATH was
        // made: the path meant is 64496, then AS4_PATH.
        let v = update(vec![
            AttrValue::AsPath(AsPath::sequence(vec![64496, 23456, 64999])),
            AttrValue::As4Path(AsPath::sequence(vec![4_200_000_002, 64999])),
        ]);
        assert_eq!(
            v["attributes"]["as_path_reconstructed"],
            json!([{"type": "AS_SEQUENCE", "asns": [64496, 4_200_000_002u32, 64999]}])
        );
        // AS_PATH and AS4_PATH stay as received.
        assert_eq!(
            v["attributes"]["as_path"][0]["asns"],
            json!([64496, 23456, 64999])
        );
        // No AS4_PATH: nothing to put together, no extra field.
        let v = update(vec![AttrValue::AsPath(AsPath::sequence(vec![64999]))]);
        assert!(
            v["attributes"].get("as_path_reconstructed").is_none(),
            "{v}"
        );
    }
}
