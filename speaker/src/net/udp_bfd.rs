//! BFD transport sockets: UDP 3784 (single-hop, RFC 5881) and 4784
//! (multihop, RFC 5883) receivers that report each datagram's TTL / hop
//! limit (`IP_RECVTTL`, `IPV6_RECVHOPLIMIT`, read with `recvmsg`), and
//! per-session senders bound to a source port in 49152-65535 that send
//! with TTL 255.
//!
//! Built on socket2 and nix: no `unsafe` here.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    self, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage, sockopt,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// UDP destination port of single-hop Control packets (RFC 5881 §4).
pub const SINGLE_HOP_PORT: u16 = 3784;
/// UDP destination port of multihop Control packets (RFC 5883 §5).
pub const MULTIHOP_PORT: u16 = 4784;
/// Source ports (RFC 5881 §4: 49152 through 65535).
pub const SOURCE_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Datagram {
    /// Octets received (the first `len` of `buf`).
    pub len: usize,
    /// The payload; longer datagrams are cut (a BFD packet has at most
    /// 255 octets).
    pub buf: [u8; 256],
    /// The sender.
    pub from: SocketAddr,
    /// Received TTL / hop limit; 0 if the kernel gave none.
    pub ttl: u8,
}

impl Datagram {
    /// The payload.
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.len.min(self.buf.len())]
    }
}

/// Opens a receiving socket on `addr` (e.g. `0.0.0.0:3784`, `[::]:3784`)
/// that reports the TTL / hop limit of each datagram. IPv6 sockets are
/// IPv6-only: IPv4 peers have their own socket.
pub fn listen(addr: SocketAddr) -> io::Result<UdpSocket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
        socket::setsockopt(&socket, sockopt::Ipv6RecvHopLimit, &true)?;
    } else {
        socket::setsockopt(&socket, sockopt::Ipv4RecvTtl, &true)?;
    }
    socket.bind(&SockAddr::from(addr))?;
    UdpSocket::from_std(socket.into())
}

/// Opens a sending socket for one session towards `peer`: bound to
/// `local` (or the unspecified address) and a free source port in
/// 49152-65535, TTL / hop limit 255 (RFC 5881 §5, RFC 5883 §2).
pub fn sender(peer: IpAddr, local: Option<IpAddr>) -> io::Result<UdpSocket> {
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    if peer.is_ipv4() {
        socket.set_ttl_v4(255)?;
    } else {
        socket.set_only_v6(true)?;
        socket.set_unicast_hops_v6(255)?;
    }
    let ip = local.unwrap_or(match peer {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    let mut rng = SmallRng::from_os_rng();
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "no free BFD source port");
    for _ in 0..64 {
        let port = rng.random_range(SOURCE_PORTS);
        match socket.bind(&SockAddr::from(SocketAddr::new(ip, port))) {
            Ok(()) => return UdpSocket::from_std(socket.into()),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Receives one datagram with its TTL / hop limit.
pub async fn recv(socket: &UdpSocket) -> io::Result<Datagram> {
    socket
        .async_io(Interest::READABLE, || recv_now(socket))
        .await
}

fn recv_now(socket: &UdpSocket) -> io::Result<Datagram> {
    let mut buf = [0u8; 256];
    let mut cmsg = nix::cmsg_space!(libc::c_int);
    let (len, from, ttl) = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = socket::recvmsg::<SockaddrStorage>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::empty(),
        )
        .map_err(io::Error::from)?;
        let mut ttl = 0u8;
        for c in msg.cmsgs().map_err(io::Error::from)? {
            match c {
                ControlMessageOwned::Ipv4Ttl(t) | ControlMessageOwned::Ipv6HopLimit(t) => {
                    ttl = u8::try_from(t).unwrap_or(0);
                }
                _ => {}
            }
        }
        let from = msg.address.as_ref().and_then(to_socket_addr);
        (msg.bytes, from, ttl)
    };
    let from = from.ok_or_else(|| io::Error::other("datagram without a source address"))?;
    Ok(Datagram {
        len,
        buf,
        from,
        ttl,
    })
}

fn to_socket_addr(addr: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::new(IpAddr::V4(v4.ip()), v4.port()));
    }
    let v6 = addr.as_sockaddr_in6()?;
    // Keep only the address: the family is that of the socket.
    let _ = addr.len();
    Some(SocketAddr::new(IpAddr::V6(v6.ip()), v6.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ttl_255_is_sent_and_seen() {
        let rx = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = sender(to.ip(), Some(to.ip())).unwrap();
        let from = tx.local_addr().unwrap();
        assert!(SOURCE_PORTS.contains(&from.port()));
        tx.send_to(b"hello", to).await.unwrap();
        let d = recv(&rx).await.unwrap();
        assert_eq!(d.data(), b"hello");
        assert_eq!(d.from, from);
        assert_eq!(d.ttl, 255);
        // An ordinary socket's TTL (set here: the default is a sysctl) is
        // seen as it is.
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        plain.set_ttl(17).unwrap();
        plain.send_to(b"x", to).unwrap();
        assert_eq!(recv(&rx).await.unwrap().ttl, 17);
    }

    #[tokio::test]
    async fn ipv6_hop_limit() {
        let Ok(rx) = listen("[::1]:0".parse().unwrap()) else {
            // No IPv6 loopback here; the namespace tests cover IPv6.
            return;
        };
        let to = rx.local_addr().unwrap();
        let tx = sender(to.ip(), None).unwrap();
        tx.send_to(b"v6", to).await.unwrap();
        let d = recv(&rx).await.unwrap();
        assert_eq!((d.data(), d.ttl), (&b"v6"[..], 255));
    }
}
