//! Interface addresses (getifaddrs): the IPv6 next hop of IPv6 routes sent
//! over an IPv4 BGP session is a global IPv6 address of the interface that
//! holds the session's local IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nix::ifaddrs::getifaddrs;

/// A global IPv6 address (not link-local, loopback or multicast) on the
/// interface that has `local`, the first the kernel lists; `None` when the
/// interface has none or `local` is on no interface.
pub(crate) fn global_v6_beside(local: Ipv4Addr) -> Option<Ipv6Addr> {
    let addrs: Vec<(String, IpAddr)> = getifaddrs()
        .ok()?
        .filter_map(|a| {
            let sa = a.address?;
            let ip = if let Some(v4) = sa.as_sockaddr_in() {
                IpAddr::V4(v4.ip())
            } else {
                IpAddr::V6(sa.as_sockaddr_in6()?.ip())
            };
            Some((a.interface_name, ip))
        })
        .collect();
    let name = addrs
        .iter()
        .find(|(_, ip)| *ip == IpAddr::V4(local))
        .map(|(n, _)| n.clone())?;
    addrs.into_iter().find_map(|(n, ip)| match ip {
        IpAddr::V6(v6) if n == name && is_global(v6) => Some(v6),
        _ => None,
    })
}

fn is_global(a: Ipv6Addr) -> bool {
    !(a.is_loopback()
        || a.is_multicast()
        || a.is_unspecified()
        || a.is_unicast_link_local()
        || a.to_ipv4_mapped().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globals_only() {
        for (a, global) in [
            ("2001:db8::1", true),
            ("fd00::2", true),
            ("fe80::1", false),
            ("::1", false),
            ("ff02::1", false),
            ("::ffff:10.0.0.1", false),
        ] {
            let ip: Ipv6Addr = a.parse().unwrap_or_else(|e| panic!("{a}: {e}"));
            assert_eq!(is_global(ip), global, "{a}");
        }
    }

    #[test]
    fn loopback_v4_has_no_global_v6_beside_it() {
        // lo has 127.0.0.1 and ::1 only (::1 is not global).
        assert_eq!(global_v6_beside(Ipv4Addr::LOCALHOST), None);
    }
}
