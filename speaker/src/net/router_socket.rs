//! The raw ICMPv6 socket of BGP unnumbered peering: Router Solicitations
//! and Advertisements in and out, on any interface.
//!
//! One socket serves every unnumbered interface: what it receives carries
//! the interface it came in on (`IPV6_PKTINFO`) and its hop limit
//! (`IPV6_HOPLIMIT`), and what it sends goes to a link-local multicast
//! group with the interface as scope. The kernel filters in only types 133
//! and 134 (`ICMP6_FILTER`), verifies checksums of what comes in, fills
//! them in on what goes out, and picks the interface's link-local address
//! as source. Our own multicast is not looped back (else we would learn
//! ourselves as the neighbor).

use std::io::{self, IoSliceMut};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::AsRawFd;

use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, SockaddrIn6, sockopt};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::unix::AsyncFd;

use crate::net::packet_socket::{register, setsockopt};

/// One received RS or RA.
#[derive(Debug)]
pub(crate) struct Received {
    /// The IPv6 source.
    pub(crate) src: Ipv6Addr,
    /// The interface it came in on.
    pub(crate) ifindex: u32,
    /// Its IPv6 hop limit.
    pub(crate) hop_limit: u8,
    /// Octets of the ICMPv6 message in the buffer given.
    pub(crate) len: usize,
}

/// The raw ICMPv6 socket (see the module docs).
#[derive(Debug)]
pub(crate) struct RouterSocket {
    fd: AsyncFd<Socket>,
}

impl RouterSocket {
    /// Opens the socket (needs `CAP_NET_RAW`). Must be called inside a
    /// tokio runtime.
    pub(crate) fn open() -> io::Result<Self> {
        let socket = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
        socket.set_nonblocking(true)?;
        // RFC 4861 §6.1: Neighbor Discovery is sent with hop limit 255,
        // and a receiver drops anything less (the core checks it).
        socket.set_multicast_hops_v6(255)?;
        socket.set_unicast_hops_v6(255)?;
        socket.set_multicast_loop_v6(false)?;
        let fd = socket.as_raw_fd();
        socket::setsockopt(&socket, sockopt::Ipv6RecvHopLimit, &true).map_err(io::Error::from)?;
        socket::setsockopt(&socket, sockopt::Ipv6RecvPacketInfo, &true).map_err(io::Error::from)?;
        // Block every type but RS and RA (a set bit blocks, as
        // ICMP6_FILTER_SETBLOCK sets it).
        let mut filter = [u32::MAX; 8];
        for t in [ROUTER_SOLICIT, ROUTER_ADVERT] {
            filter[usize::from(t >> 5)] &= !(1 << (t & 31));
        }
        setsockopt(fd, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &filter)?;
        Ok(Self {
            fd: register(socket)?,
        })
    }

    /// Joins ff02::2 on `ifindex`, so that solicitations reach us (a host
    /// that does not forward is not in the all-routers group).
    pub(crate) fn join_all_routers(&self, ifindex: u32) -> io::Result<()> {
        match self.fd.get_ref().join_multicast_v6(&ALL_ROUTERS, ifindex) {
            // Joined already (the interface was seen before).
            Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => Ok(()),
            other => other,
        }
    }

    /// Sends `message` to the link-local multicast `dst` on `ifindex`.
    pub(crate) fn send(&self, dst: Ipv6Addr, ifindex: u32, message: &[u8]) -> io::Result<()> {
        let to = SockAddr::from(SocketAddrV6::new(dst, 0, 0, ifindex));
        self.fd.get_ref().send_to(message, &to)?;
        Ok(())
    }

    /// Receives the next RS or RA into `buf`.
    pub(crate) async fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| recv_now(fd.get_ref().as_raw_fd(), buf)) {
                Ok(result) => return result,
                Err(_would_block) => {}
            }
        }
    }
}

fn recv_now(fd: std::os::fd::RawFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut cmsg = nix::cmsg_space!(libc::c_int, libc::in6_pktinfo);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = socket::recvmsg::<SockaddrIn6>(fd, &mut iov, Some(&mut cmsg), MsgFlags::empty())
        .map_err(io::Error::from)?;
    let (mut hop_limit, mut ifindex) = (0u8, None);
    for c in msg.cmsgs().map_err(io::Error::from)? {
        match c {
            ControlMessageOwned::Ipv6HopLimit(h) => hop_limit = u8::try_from(h).unwrap_or(0),
            ControlMessageOwned::Ipv6PacketInfo(info) => ifindex = Some(info.ipi6_ifindex),
            _ => {}
        }
    }
    let src = msg
        .address
        .map(|a| a.ip())
        .ok_or_else(|| io::Error::other("icmpv6 message without a source address"))?;
    let ifindex = ifindex.ok_or_else(|| io::Error::other("icmpv6 message without pktinfo"))?;
    Ok(Received {
        src,
        ifindex,
        hop_limit,
        len: msg.bytes,
    })
}

/// `ICMP6_FILTER` of linux/icmpv6.h (level `IPPROTO_ICMPV6`).
const ICMP6_FILTER: libc::c_int = 1;
const ROUTER_SOLICIT: u8 = 133;
const ROUTER_ADVERT: u8 = 134;
const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
