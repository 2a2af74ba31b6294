//! Interface selection: on which of this node's interfaces a layer 2 IP is
//! answered. Pure: plain values in (the node's links and addresses as
//! rtnetlink reports them, the advertisement's interface names, the IP),
//! the interface indexes out; no I/O, no clock.
//!
//! For each IP, in order:
//!
//! 1. the interfaces named by its advertisements, when they name any;
//! 2. else the interfaces with a subnet that contains the IP;
//! 3. else every usable interface.
//!
//! Usable means up, not loopback, broadcast-capable Ethernet with a unicast
//! MAC. A bond or bridge member (an interface with a master) is never
//! answered on; its master is, in its place. Every rule that takes
//! interfaces out (an exclusion list, for one) belongs in [`usable`], so
//! that the three steps above see the same candidates.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnetwork::IpNetwork;

/// One interface of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Name (`eth0`).
    pub name: String,
    /// Hardware address, when it is a 6-octet one.
    pub mac: Option<[u8; 6]>,
    /// Administratively up.
    pub up: bool,
    /// The loopback interface.
    pub loopback: bool,
    /// Supports broadcast.
    pub broadcast: bool,
    /// Ethernet hardware type.
    pub ethernet: bool,
    /// The bond or bridge this interface is a member of.
    pub master: Option<u32>,
    /// Its name is on the exclusion list: never answered on.
    pub excluded: bool,
}

/// An address of this node, with the subnet it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    /// The interface that has it.
    pub index: u32,
    /// The address and its prefix length.
    pub network: IpNetwork,
}

/// This node's interfaces and addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// Interfaces by index.
    pub links: BTreeMap<u32, Link>,
    /// Every address.
    pub addrs: BTreeSet<Addr>,
}

/// The interfaces `ip` is answered on (see the module docs). `names` is
/// the union of its advertisements' `interfaces`; `None` when one of them
/// lists none (every interface).
pub fn select_interfaces(
    ip: IpAddr,
    names: Option<&BTreeSet<String>>,
    host: &Host,
) -> BTreeSet<u32> {
    let links = &host.links;
    // A member answers through its master, if the master is usable.
    let answer_on = |index: u32| -> Option<u32> {
        let link = links.get(&index)?;
        let target = match link.master {
            Some(master) => links.get(&master)?,
            None => link,
        };
        usable(target).then_some(target.index)
    };
    if let Some(names) = names {
        return links
            .values()
            .filter(|l| names.contains(&l.name))
            .filter_map(|l| answer_on(l.index))
            .collect();
    }
    let on_subnet: BTreeSet<u32> = host
        .addrs
        .iter()
        .filter(|a| a.network.contains(ip))
        .filter_map(|a| answer_on(a.index))
        .collect();
    if !on_subnet.is_empty() {
        return on_subnet;
    }
    links
        .values()
        .filter(|l| l.master.is_none() && usable(l))
        .map(|l| l.index)
        .collect()
}

/// Up, not loopback, broadcast Ethernet with a unicast MAC, not excluded:
/// an interface the responders can answer on.
pub fn usable(link: &Link) -> bool {
    link.up
        && !link.excluded
        && !link.loopback
        && link.broadcast
        && link.ethernet
        && link.mac.is_some_and(|m| m[0] & 0x01 == 0 && m != [0; 6])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(index: u32, name: &str, master: Option<u32>) -> Link {
        Link {
            index,
            name: name.into(),
            mac: Some([2, 0, 0, 0, 0, index as u8]),
            up: true,
            loopback: false,
            broadcast: true,
            ethernet: true,
            master,
            excluded: false,
        }
    }

    fn addr(index: u32, cidr: &str) -> Addr {
        Addr {
            index,
            network: cidr.parse().unwrap(),
        }
    }

    /// lo, eth0 (10.0.0.2/24, fd00::2/64), eth1 in br0 (10.0.1.2/24), eth3
    /// down, eth4 in a master that does not exist, eth5 with a multicast
    /// MAC, tun0 not Ethernet, docker0 (10.0.9.2/24) excluded by name.
    fn lab() -> Host {
        let lo = Link {
            loopback: true,
            broadcast: false,
            ethernet: false,
            mac: Some([0; 6]),
            ..link(1, "lo", None)
        };
        let down = Link {
            up: false,
            ..link(5, "eth3", None)
        };
        let multicast = Link {
            mac: Some([1, 0, 0x5e, 0, 0, 1]),
            ..link(7, "eth5", None)
        };
        let tun = Link {
            ethernet: false,
            broadcast: false,
            mac: None,
            ..link(8, "tun0", None)
        };
        let excluded = Link {
            excluded: true,
            ..link(9, "docker0", None)
        };
        Host {
            links: [
                lo,
                link(2, "eth0", None),
                link(3, "eth1", Some(4)),
                link(4, "br0", None),
                down,
                link(6, "eth4", Some(99)),
                multicast,
                tun,
                excluded,
            ]
            .into_iter()
            .map(|l| (l.index, l))
            .collect(),
            addrs: [
                addr(1, "127.0.0.1/8"),
                addr(2, "10.0.0.2/24"),
                addr(2, "fd00::2/64"),
                addr(4, "10.0.1.2/24"),
                addr(5, "10.0.5.2/24"),
                addr(8, "10.0.8.2/24"),
                addr(9, "10.0.9.2/24"),
            ]
            .into_iter()
            .collect(),
        }
    }

    fn set(v: &[u32]) -> BTreeSet<u32> {
        v.iter().copied().collect()
    }

    fn names(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    /// An IP, the interface names asked for, the interfaces selected.
    type Case = (
        &'static str,
        Option<&'static [&'static str]>,
        &'static [u32],
    );

    #[test]
    fn table() {
        let host = lab();
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // On a subnet: that interface, for either family.
            ("10.0.0.10", None, &[2]),
            ("fd00::10", None, &[2]),
            // The subnet is on a bridge: the bridge.
            ("10.0.1.10", None, &[4]),
            // No subnet: every usable interface; not lo, not down, not
            // members, not a multicast MAC, not a tunnel, not excluded.
            ("192.0.2.1", None, &[2, 4]),
            ("2001:db8::1", None, &[2, 4]),
            // The only subnet is on an unusable interface: as no subnet.
            ("10.0.5.10", None, &[2, 4]),
            ("10.0.8.10", None, &[2, 4]),
            ("10.0.9.10", None, &[2, 4]),
            // Names restrict, whatever the subnet.
            ("10.0.0.10", Some(&["br0"]), &[4]),
            // A member named answers through its master.
            ("10.0.0.10", Some(&["eth1"]), &[4]),
            ("10.0.0.10", Some(&["eth0", "eth1", "br0"]), &[2, 4]),
            // Named but down, loopback, orphaned, multicast MAC, tunnel,
            // excluded or missing: nothing.
            ("10.0.0.10", Some(&["eth3", "lo", "eth4", "eth5", "tun0", "docker0", "nope"]), &[]),
            // An empty list names nothing.
            ("10.0.0.10", Some(&[]), &[]),
        ];
        for (ip, wanted, expected) in cases {
            let wanted = wanted.map(names);
            let got = select_interfaces(ip.parse().unwrap(), wanted.as_ref(), &host);
            assert_eq!(got, set(expected), "{ip} {wanted:?}");
        }
    }

    #[test]
    fn no_interfaces_no_answer() {
        let host = Host::default();
        assert!(select_interfaces("10.0.0.1".parse().unwrap(), None, &host).is_empty());
    }
}
