//! Interfaces and their addresses from rtnetlink, with change events.
//!
//! A small hand-written `NETLINK_ROUTE` socket rather than the `rtnetlink`
//! crates: the layer 2 driver needs three messages (links, addresses, their
//! notifications), which take a few hundred lines here, against a dozen
//! crates with their own connection task and frequent API changes. The
//! parser ([`parse`]) is pure and bounds-checked; the socket part is glue.
//!
//! One socket does both jobs: it is subscribed to the link and address
//! groups, then asked for a dump of links and then of addresses. Dump
//! replies and notifications are the same messages, so the caller treats
//! them alike. If the kernel drops notifications (`ENOBUFS`, the socket
//! buffer overran), [`RouteSocket::poll_recv`] reports [`Event::Resync`] and
//! the caller asks for fresh dumps.
#![allow(unsafe_code)]

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::task::{Context, Poll};

use tokio::io::unix::AsyncFd;

use crate::net::packet_socket::register;

/// An interface as rtnetlink describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Name (`eth0`).
    pub name: String,
    /// Hardware address, when it is a 6-octet one.
    pub mac: Option<[u8; 6]>,
    /// `IFF_*` flags.
    pub flags: u32,
    /// ARPHRD type (1 for Ethernet).
    pub kind: u16,
    /// The bond or bridge this interface is a member of.
    pub master: Option<u32>,
}

impl Link {
    /// Administratively up (`IFF_UP`).
    pub fn is_up(&self) -> bool {
        self.flags & IFF_UP != 0
    }

    /// The loopback interface.
    pub fn is_loopback(&self) -> bool {
        self.flags & IFF_LOOPBACK != 0
    }

    /// Supports broadcast (Ethernet-like).
    pub fn is_broadcast(&self) -> bool {
        self.flags & IFF_BROADCAST != 0
    }

    /// Ethernet hardware type.
    pub fn is_ethernet(&self) -> bool {
        self.kind == ARPHRD_ETHER
    }
}

/// An address assigned to an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    /// Interface index.
    pub index: u32,
    /// The local address.
    pub addr: IpAddr,
    /// Prefix length of its subnet.
    pub prefix_len: u8,
}

impl Addr {
    /// Whether `ip` is in this address's subnet.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = prefix_mask::<32>(self.prefix_len) as u32;
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = prefix_mask::<128>(self.prefix_len);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

/// What a netlink message said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An interface exists, or changed.
    NewLink(Link),
    /// An interface is gone.
    DelLink(u32),
    /// An address was added (or is in a dump).
    NewAddr(Addr),
    /// An address was removed.
    DelAddr(Addr),
    /// A dump finished.
    Done,
    /// Notifications were lost: dump everything again.
    Resync,
}

/// A netlink route socket subscribed to link and address changes.
#[derive(Debug)]
pub struct RouteSocket {
    fd: AsyncFd<OwnedFd>,
    seq: u32,
}

impl RouteSocket {
    /// Opens the socket, subscribed to link, IPv4 and IPv6 address groups.
    /// Must be called inside a tokio runtime.
    pub fn open() -> io::Result<Self> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // A bigger buffer makes ENOBUFS (and so a resync) rarer when many
        // interfaces change at once; the kernel caps it at rmem_max.
        let size: libc::c_int = 1 << 20;
        // SAFETY: `size` is a live c_int and the length is its size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&raw const size).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        // SAFETY: sockaddr_nl is plain old data; all zeroes is valid.
        let mut addr: libc::sockaddr_nl = unsafe { mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups =
            (libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
        // SAFETY: `addr` is a valid sockaddr_nl and the length is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            fd: register(fd)?,
            seq: 0,
        })
    }

    /// Asks for every interface; the answer ends with [`Event::Done`]. One
    /// dump at a time: wait for `Done` before the next.
    pub fn request_links(&mut self) -> io::Result<()> {
        // struct ifinfomsg, all zero: any family.
        self.request(RTM_GETLINK, &[0; 16])
    }

    /// Asks for every address; the answer ends with [`Event::Done`].
    pub fn request_addrs(&mut self) -> io::Result<()> {
        // struct ifaddrmsg, all zero: any family.
        self.request(RTM_GETADDR, &[0; 8])
    }

    /// Reads one datagram and parses it into `events`; registers the waker
    /// when nothing is queued.
    pub fn poll_recv(&self, cx: &mut Context<'_>, events: &mut Vec<Event>) -> Poll<io::Result<()>> {
        let mut buf = [0u8; 32 * 1024];
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let res = guard.try_io(|fd| {
                // SAFETY: `buf` is valid for writes of its length.
                let n =
                    unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n.unsigned_abs())
                }
            });
            match res {
                Ok(Ok(n)) => {
                    parse(&buf[..n], events);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    events.push(Event::Resync);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }

    fn request(&mut self, kind: u16, body: &[u8]) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let len = NLMSG_HDRLEN + body.len();
        let mut msg = Vec::with_capacity(len);
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        msg.extend_from_slice(&self.seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(body);
        // SAFETY: sockaddr_nl is plain old data; all zeroes (pid 0) is the
        // kernel.
        let mut to: libc::sockaddr_nl = unsafe { mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `msg` and `to` are valid for reads of the stated lengths.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&raw const to).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Parses the netlink messages of one datagram. Messages of other types
/// are skipped, and so are broken ones: a length that does not fit ends the
/// datagram.
pub fn parse(mut data: &[u8], events: &mut Vec<Event>) {
    while data.len() >= NLMSG_HDRLEN {
        let len = u32_at(data, 0) as usize;
        let kind = u16_at(data, 4);
        if len < NLMSG_HDRLEN || len > data.len() {
            return;
        }
        let body = &data[NLMSG_HDRLEN..len];
        match kind {
            NLMSG_DONE => events.push(Event::Done),
            // An error answer to a dump request ends that dump too.
            NLMSG_ERROR => events.push(Event::Done),
            RTM_NEWLINK => events.extend(parse_link(body).map(Event::NewLink)),
            RTM_DELLINK => events.extend(parse_link(body).map(|l| Event::DelLink(l.index))),
            RTM_NEWADDR => events.extend(parse_addr(body).map(Event::NewAddr)),
            RTM_DELADDR => events.extend(parse_addr(body).map(Event::DelAddr)),
            _ => {}
        }
        data = data.get(align(len)..).unwrap_or_default();
    }
}

/// `struct ifinfomsg` then attributes.
fn parse_link(body: &[u8]) -> Option<Link> {
    if body.len() < IFINFOMSG_LEN {
        return None;
    }
    let mut link = Link {
        kind: u16_at(body, 2),
        index: u32_at(body, 4),
        flags: u32_at(body, 8),
        name: String::new(),
        mac: None,
        master: None,
    };
    for (kind, value) in attrs(&body[IFINFOMSG_LEN..]) {
        match kind {
            IFLA_ADDRESS => link.mac = value.try_into().ok(),
            IFLA_IFNAME => {
                let name = value.split(|b| *b == 0).next().unwrap_or_default();
                link.name = String::from_utf8_lossy(name).into_owned();
            }
            IFLA_MASTER if value.len() == 4 => {
                link.master = Some(u32_at(value, 0)).filter(|m| *m != 0);
            }
            _ => {}
        }
    }
    Some(link)
}

/// `struct ifaddrmsg` then attributes.
fn parse_addr(body: &[u8]) -> Option<Addr> {
    if body.len() < IFADDRMSG_LEN {
        return None;
    }
    let family = body[0];
    let prefix_len = body[1];
    let index = u32_at(body, 4);
    let (mut address, mut local) = (None, None);
    for (kind, value) in attrs(&body[IFADDRMSG_LEN..]) {
        let ip = match (i32::from(family), value.len()) {
            (libc::AF_INET, 4) => <[u8; 4]>::try_from(value)
                .ok()
                .map(|o| IpAddr::V4(Ipv4Addr::from(o))),
            (libc::AF_INET6, 16) => <[u8; 16]>::try_from(value)
                .ok()
                .map(|o| IpAddr::V6(Ipv6Addr::from(o))),
            _ => None,
        };
        match kind {
            IFA_ADDRESS => address = ip,
            IFA_LOCAL => local = ip,
            _ => {}
        }
    }
    // IFA_LOCAL is ours; IFA_ADDRESS is the peer on point-to-point links.
    let addr = local.or(address)?;
    Some(Addr {
        index,
        addr,
        prefix_len,
    })
}

/// The `(type, value)` pairs of a run of `struct rtattr`.
fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = usize::from(u16_at(data, 0));
        // NLA_F_NESTED and NLA_F_NET_BYTEORDER live in the top bits.
        let kind = u16_at(data, 2) & 0x3fff;
        if len < 4 || len > data.len() {
            return None;
        }
        let value = &data[4..len];
        data = data.get(align(len)..).unwrap_or_default();
        Some((kind, value))
    })
}

fn prefix_mask<const BITS: u32>(len: u8) -> u128 {
    let len = u32::from(len).min(BITS);
    if len == 0 {
        0
    } else {
        (u128::MAX << (128 - len)) >> (128 - BITS)
    }
}

const fn align(len: usize) -> usize {
    (len + 3) & !3
}

fn u16_at(data: &[u8], at: usize) -> u16 {
    let mut b = [0; 2];
    if let Some(s) = data.get(at..at + 2) {
        b.copy_from_slice(s);
    }
    u16::from_ne_bytes(b)
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    let mut b = [0; 4];
    if let Some(s) = data.get(at..at + 4) {
        b.copy_from_slice(s);
    }
    u32::from_ne_bytes(b)
}

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const IFADDRMSG_LEN: usize = 8;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFF_UP: u32 = 0x1;
const IFF_BROADCAST: u32 = 0x2;
const IFF_LOOPBACK: u32 = 0x8;
const ARPHRD_ETHER: u16 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align(a.len()), 0);
        a
    }

    fn msg(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m
    }

    fn link_msg() -> Vec<u8> {
        let mut body = vec![0u8; 16];
        body[2..4].copy_from_slice(&1u16.to_ne_bytes());
        body[4..8].copy_from_slice(&7u32.to_ne_bytes());
        body[8..12].copy_from_slice(&(IFF_UP | IFF_BROADCAST).to_ne_bytes());
        body.extend(attr(IFLA_IFNAME, b"eth0\0"));
        body.extend(attr(IFLA_ADDRESS, &[2, 0, 0, 0, 0, 1]));
        body.extend(attr(IFLA_MASTER, &9u32.to_ne_bytes()));
        msg(RTM_NEWLINK, &body)
    }

    #[test]
    fn parses_links_addresses_and_done() {
        let mut data = link_msg();
        let mut body = vec![libc::AF_INET as u8, 24, 0, 0];
        body.extend_from_slice(&7u32.to_ne_bytes());
        body.extend(attr(IFA_ADDRESS, &[10, 0, 0, 9]));
        body.extend(attr(IFA_LOCAL, &[10, 0, 0, 2]));
        data.extend(msg(RTM_NEWADDR, &body));
        let mut body = vec![libc::AF_INET6 as u8, 64, 0, 0];
        body.extend_from_slice(&7u32.to_ne_bytes());
        let v6: Ipv6Addr = "fd00::2".parse().unwrap();
        body.extend(attr(IFA_ADDRESS, &v6.octets()));
        data.extend(msg(RTM_DELADDR, &body));
        data.extend(msg(NLMSG_DONE, &[0; 4]));
        let mut events = Vec::new();
        parse(&data, &mut events);
        assert_eq!(
            events,
            [
                Event::NewLink(Link {
                    index: 7,
                    name: "eth0".into(),
                    mac: Some([2, 0, 0, 0, 0, 1]),
                    flags: IFF_UP | IFF_BROADCAST,
                    kind: 1,
                    master: Some(9),
                }),
                Event::NewAddr(Addr {
                    index: 7,
                    addr: "10.0.0.2".parse().unwrap(),
                    prefix_len: 24
                }),
                Event::DelAddr(Addr {
                    index: 7,
                    addr: v6.into(),
                    prefix_len: 64
                }),
                Event::Done,
            ]
        );
    }

    #[test]
    fn broken_input_never_panics() {
        let data = link_msg();
        for cut in 0..data.len() {
            let mut events = Vec::new();
            parse(&data[..cut], &mut events);
            let mut bad = data.clone();
            bad[cut] = 0xff;
            parse(&bad, &mut events);
        }
    }

    #[test]
    fn subnet_contains() {
        let a = Addr {
            index: 1,
            addr: "10.0.0.2".parse().unwrap(),
            prefix_len: 24,
        };
        assert!(a.contains("10.0.0.200".parse().unwrap()));
        assert!(!a.contains("10.0.1.1".parse().unwrap()));
        assert!(!a.contains("fd00::1".parse().unwrap()));
        let b = Addr {
            index: 1,
            addr: "fd00::2".parse().unwrap(),
            prefix_len: 64,
        };
        assert!(b.contains("fd00::ffff".parse().unwrap()));
        assert!(!b.contains("fd01::2".parse().unwrap()));
        let all = Addr { prefix_len: 0, ..a };
        assert!(all.contains("192.0.2.1".parse().unwrap()));
    }
}
