//! What this node reports about its announcements: the content of its
//! `ServiceL2Status` and `ServiceBGPStatus` objects, and when to record a
//! `nodeAssigned` event. Pure: derived from the plans, compared as values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::bgp::BgpPlan;
use super::l2::{Interfaces, L2Plan};
use super::view::ObjectKey;

/// Per service, what this node announces. A service this node does not
/// announce at all is absent.
pub type Announcements = BTreeMap<ObjectKey, ServiceAnnouncement>;

/// One service's announcement from this node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceAnnouncement {
    /// Announced over layer 2 from here (this node won the election), on
    /// these interfaces; an empty list means every interface, as MetalLB
    /// leaves `status.interfaces` empty then.
    pub l2: Option<Vec<String>>,
    /// The BGP peers (BGPPeer names) the service's IPs go to from here,
    /// sorted, each once. The names are the keyed plan's, and the list
    /// too: one copy of each distinct list, shared by the services that
    /// announce to the same peers (most to all of them), where a `Vec`
    /// was an allocation per service.
    pub bgp: Arc<[Arc<str>]>,
}

/// The protocols a `nodeAssigned` event names, spelled as MetalLB does.
pub const LAYER2: &str = "layer2";
/// See [`LAYER2`].
pub const BGP: &str = "bgp";

/// What this node announces, from its plans. A node that is excluded
/// announces nothing, whatever the plans' per-service fields say.
pub fn announcements(bgp: &BgpPlan, l2: Option<&L2Plan>) -> Announcements {
    let mut out = Announcements::new();
    if bgp.excluded.is_none() {
        for (key, peers) in &bgp.services {
            if !peers.is_empty() {
                out.entry(key.clone()).or_default().bgp =
                    peers.iter().map(|p| Arc::from(p.as_str())).collect();
            }
        }
    }
    if let Some(l2) = l2.filter(|p| p.excluded.is_none()) {
        for a in l2.announce.values() {
            for key in &a.services {
                let slot = &mut out.entry(key.clone()).or_default().l2;
                match (&a.interfaces, slot.as_ref()) {
                    // "All" wins over any list: the status names none.
                    (Interfaces::All, _) => *slot = Some(Vec::new()),
                    (Interfaces::Only(_), Some(list)) if list.is_empty() => {}
                    (Interfaces::Only(only), _) => {
                        let mut names: BTreeSet<String> =
                            slot.take().unwrap_or_default().into_iter().collect();
                        names.extend(only.iter().cloned());
                        *slot = Some(names.into_iter().collect());
                    }
                }
            }
        }
    }
    out
}

/// The services whose announcement differs between `old` and `new`
/// (changed, new, or gone), in key order: one walk over both maps, no
/// lookups.
pub fn changed<'a>(old: &'a Announcements, new: &'a Announcements) -> Vec<&'a ObjectKey> {
    use std::cmp::Ordering;
    let mut out = Vec::new();
    let (mut a, mut b) = (old.iter().peekable(), new.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => return out,
            (Some((ka, _)), None) => {
                out.push(*ka);
                a.next();
            }
            (None, Some((kb, _))) => {
                out.push(*kb);
                b.next();
            }
            (Some((ka, va)), Some((kb, vb))) => match ka.cmp(kb) {
                Ordering::Less => {
                    out.push(*ka);
                    a.next();
                }
                Ordering::Greater => {
                    out.push(*kb);
                    b.next();
                }
                Ordering::Equal => {
                    if va != vb {
                        out.push(*kb);
                    }
                    a.next();
                    b.next();
                }
            },
        }
    }
}

/// The (service, protocol) pairs that `new` announces and `old` did not:
/// where MetalLB's speaker records `nodeAssigned` ("announcing from node
/// X with protocol Y"). Only changes count, so a resync records nothing.
pub fn newly_assigned<'a>(
    old: &Announcements,
    new: &'a Announcements,
    changed: &[&'a ObjectKey],
) -> Vec<(&'a ObjectKey, &'static str)> {
    let mut out = Vec::new();
    for (key, a) in changed.iter().filter_map(|k| new.get_key_value(*k)) {
        let before = old.get(key);
        if a.l2.is_some() && before.is_none_or(|b| b.l2.is_none()) {
            out.push((key, LAYER2));
        }
        if !a.bgp.is_empty() && before.is_none_or(|b| b.bgp.is_empty()) {
            out.push((key, BGP));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::announce::l2::L2Announcement;
    use crate::announce::view::Exclusion;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn l2(entries: &[(&str, Interfaces, &[&str])]) -> L2Plan {
        L2Plan {
            announce: entries
                .iter()
                .map(|(addr, interfaces, services)| {
                    (
                        ip(addr),
                        L2Announcement {
                            interfaces: interfaces.clone(),
                            services: services.iter().map(|s| key(s)).collect(),
                        },
                    )
                })
                .collect(),
            ..L2Plan::default()
        }
    }

    fn only(names: &[&str]) -> Interfaces {
        Interfaces::Only(names.iter().map(|s| (*s).to_owned()).collect())
    }

    fn peers(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn names(names: &[&str]) -> Arc<[Arc<str>]> {
        names.iter().map(|s| Arc::from(*s)).collect()
    }

    #[test]
    fn bgp_services_list_their_peers() {
        let plan = BgpPlan {
            services: BTreeMap::from([
                (key("web"), peers(&["spine1", "spine2"])),
                (key("idle"), peers(&[])),
            ]),
            ..BgpPlan::default()
        };
        let a = announcements(&plan, None);
        assert_eq!(a.len(), 1, "a service with no peer is not announced: {a:?}");
        assert_eq!(a[&key("web")].bgp, names(&["spine1", "spine2"]));
        assert_eq!(a[&key("web")].l2, None);
    }

    #[test]
    fn l2_interfaces_all_is_an_empty_list_and_wins() {
        // Two IPs of one service (dual stack): one on eth0 only, one on
        // every interface. The status names no interface: all of them.
        let plan = l2(&[
            ("192.0.2.1", only(&["eth0"]), &["dual"]),
            ("2001:db8::1", Interfaces::All, &["dual"]),
            ("192.0.2.2", only(&["eth1", "eth0"]), &["pinned"]),
        ]);
        let a = announcements(&BgpPlan::default(), Some(&plan));
        assert_eq!(a[&key("dual")].l2, Some(vec![]));
        assert_eq!(
            a[&key("pinned")].l2,
            Some(vec!["eth0".to_owned(), "eth1".to_owned()])
        );
    }

    #[test]
    fn l2_interface_lists_merge_across_ips() {
        let plan = l2(&[
            ("192.0.2.1", only(&["eth1"]), &["svc"]),
            ("2001:db8::1", only(&["eth0"]), &["svc"]),
        ]);
        let a = announcements(&BgpPlan::default(), Some(&plan));
        assert_eq!(
            a[&key("svc")].l2,
            Some(vec!["eth0".to_owned(), "eth1".to_owned()])
        );
    }

    #[test]
    fn shared_ip_reports_every_service() {
        let plan = l2(&[("192.0.2.1", Interfaces::All, &["a", "b"])]);
        let a = announcements(&BgpPlan::default(), Some(&plan));
        assert_eq!(a.keys().collect::<Vec<_>>(), vec![&key("a"), &key("b")]);
    }

    #[test]
    fn excluded_node_announces_nothing() {
        let bgp = BgpPlan {
            services: BTreeMap::from([(key("web"), peers(&["spine1"]))]),
            excluded: Some(Exclusion::NetworkUnavailable),
            ..BgpPlan::default()
        };
        let mut l2p = l2(&[("192.0.2.1", Interfaces::All, &["lan"])]);
        l2p.excluded = Some(Exclusion::NetworkUnavailable);
        assert!(announcements(&bgp, Some(&l2p)).is_empty());
    }

    #[test]
    fn both_protocols_for_one_service() {
        let bgp = BgpPlan {
            services: BTreeMap::from([(key("svc"), peers(&["spine1"]))]),
            ..BgpPlan::default()
        };
        let l2p = l2(&[("192.0.2.1", Interfaces::All, &["svc"])]);
        let a = announcements(&bgp, Some(&l2p));
        assert_eq!(
            a[&key("svc")],
            ServiceAnnouncement {
                l2: Some(vec![]),
                bgp: names(&["spine1"])
            }
        );
    }

    #[test]
    fn node_assigned_only_on_change() {
        let a = |l2: Option<Vec<String>>, bgp: &[&str]| ServiceAnnouncement {
            l2,
            bgp: names(bgp),
        };
        let old = Announcements::from([
            (key("kept"), a(Some(vec![]), &["p"])),
            (key("gone"), a(Some(vec![]), &[])),
            (key("moved"), a(None, &["p"])),
        ]);
        let new = Announcements::from([
            // Same protocols, other interfaces and peers: no new event.
            (key("kept"), a(Some(vec!["eth0".into()]), &["q"])),
            (key("moved"), a(Some(vec![]), &["p"])),
            (key("fresh"), a(None, &["p"])),
        ]);
        let diff = changed(&old, &new);
        assert_eq!(
            diff,
            [&key("fresh"), &key("gone"), &key("kept"), &key("moved")]
        );
        assert_eq!(
            newly_assigned(&old, &new, &diff),
            vec![(&key("fresh"), BGP), (&key("moved"), LAYER2)]
        );
        assert!(changed(&new, &new).is_empty());
        assert!(newly_assigned(&new, &new, &[]).is_empty());
    }
}
