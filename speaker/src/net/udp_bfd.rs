//! BFD transport sockets: UDP 3784 (single-hop, RFC 5881) and 4784
//! (multihop, RFC 5883) receivers that report each datagram's TTL / hop
//! limit (`IP_RECVTTL`, `IPV6_RECVHOPLIMIT`, read with `recvmsg`), and
//! per-session senders bound to a source port in 49152-65535 that send
//! with TTL 255.
//!
//! The receivers keep garbage out of their queue in the kernel, so that a
//! flood from an on-link host cannot crowd out the peers' packets (a full
//! queue drops everything that follows, the peers' included):
//!
//! - a classic BPF socket filter ([`peer_filter`], `SO_ATTACH_FILTER`) that
//!   accepts only datagrams from the configured peers with their minimum
//!   TTL / hop limit: 255 single-hop (RFC 5881 §5, the GTSM of RFC 5082),
//!   the configured minimum multihop (RFC 5883 §2). It is replaced
//!   whenever the peer set changes ([`set_peers`]; the kernel swaps
//!   filters atomically). The core checks the TTL again.
//! - the minimum TTL socket option (`IP_MINTTL`, `IPV6_MINHOPCOUNT`), which
//!   Linux enforces for TCP only (see [`set_peers`]).
//! - an explicit receive buffer ([`RECV_BUFFER`]).
//!
//! What the kernel drops for a receiver (filter, and a full queue) is
//! reported with the next datagram that gets through ([`Datagram::kernel_drops`],
//! `SO_RXQ_OVFL`).
//!
//! Built on socket2 and nix; the one option neither offers (minimum TTL)
//! goes through `packet_socket`'s `setsockopt`.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    self, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage, sockopt,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use socket2::{Domain, Protocol, SockAddr, SockFilter, SockRef, Socket, Type};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// UDP destination port of single-hop Control packets (RFC 5881 §4).
pub(crate) const SINGLE_HOP_PORT: u16 = 3784;
/// UDP destination port of multihop Control packets (RFC 5883 §5).
pub(crate) const MULTIHOP_PORT: u16 = 4784;
/// Source ports (RFC 5881 §4: 49152 through 65535).
pub(crate) const SOURCE_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;
/// Receive buffer asked for (`SO_RCVBUF`) on each receiving socket.
///
/// Only the peers' packets reach the queue (see the module doc), at most
/// one per peer per transmit interval: 256 KiB holds a few hundred small
/// datagrams (each costs its buffer's true size, about 1 KiB), a burst of
/// several intervals of a hundred peers. The kernel doubles the value for
/// its bookkeeping and caps it at `net.core.rmem_max` (default 208 KiB, so
/// 416 KiB); [`listen`] logs what it got.
pub(crate) const RECV_BUFFER: usize = 256 * 1024;
/// Most peers of one family a receiver's socket filter holds (IPv6: 12
/// instructions per peer, within the kernel's 4,096).
pub(crate) const MAX_FILTER_PEERS: usize = 340;

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Datagram {
    /// Octets received (the first `len` of `buf`).
    pub(crate) len: usize,
    /// The payload; longer datagrams are cut (a BFD packet has at most
    /// 255 octets).
    pub(crate) buf: [u8; 256],
    /// The sender.
    pub(crate) from: SocketAddr,
    /// Received TTL / hop limit; 0 if the kernel gave none.
    pub(crate) ttl: u8,
    /// Datagrams the kernel dropped for this socket so far (filter,
    /// minimum TTL or full queue), as of this one's arrival; `None` while
    /// there were none.
    pub(crate) kernel_drops: Option<u32>,
}

impl Datagram {
    /// The payload.
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[..self.len.min(self.buf.len())]
    }
}

/// A source a receiver takes datagrams from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Peer {
    /// The peer's address.
    pub(crate) addr: IpAddr,
    /// The lowest TTL / hop limit accepted from it: 255 single-hop
    /// (RFC 5881 §5), the configured minimum multihop (RFC 5883 §2).
    pub(crate) min_ttl: u8,
}

/// Opens a receiving socket on `addr` (e.g. `0.0.0.0:3784`, `[::]:3784`)
/// that reports the TTL / hop limit of each datagram and takes only
/// datagrams from `peers` (see [`set_peers`]). The filter is attached
/// before the socket is bound, so nothing else is ever queued. IPv6
/// sockets are IPv6-only: IPv4 peers have their own socket.
pub(crate) fn listen(addr: SocketAddr, peers: &[Peer]) -> io::Result<UdpSocket> {
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
    socket::setsockopt(&socket, sockopt::RxqOvfl, &1)?;
    socket.set_recv_buffer_size(RECV_BUFFER)?;
    let socket = UdpSocket::from_std(socket.into())?;
    set_peers(&socket, peers)?;
    SockRef::from(&socket).bind(&SockAddr::from(addr))?;
    tracing::debug!(
        %addr,
        peers = peers.len(),
        rcvbuf = SockRef::from(&socket).recv_buffer_size()?,
        "bfd receiver"
    );
    Ok(socket)
}

/// Makes the receiver take only datagrams from `peers` (none if it is
/// empty), each with at least its TTL / hop limit: replaces the socket
/// filter ([`peer_filter`]; the kernel swaps it atomically) and sets the
/// socket's minimum TTL (`IP_MINTTL`, `IPV6_MINHOPCOUNT`) to the lowest
/// of them. Peers of the other family are ignored.
///
/// The minimum TTL option is RFC 5082's mechanism, but Linux applies it to
/// TCP only: on this kernel (6.18) a UDP socket with `IP_MINTTL` 255
/// still queues TTL 254 (`tests::kernel_drops_other_sources_and_low_ttl`
/// shows that the filter is what drops it). It is set for kernels that do.
pub(crate) fn set_peers(socket: &UdpSocket, peers: &[Peer]) -> io::Result<()> {
    let v6 = socket.local_addr()?.is_ipv6();
    let filter = peer_filter(v6, peers)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let filter: Vec<SockFilter> = filter
        .iter()
        .map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k))
        .collect();
    SockRef::from(socket).attach_filter(&filter)?;
    let min_ttl = peers
        .iter()
        .filter(|p| p.addr.is_ipv6() == v6)
        .map(|p| p.min_ttl)
        .min()
        .unwrap_or(255);
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT)
    } else {
        (libc::IPPROTO_IP, libc::IP_MINTTL)
    };
    super::packet_socket::setsockopt(socket.as_raw_fd(), level, name, &libc::c_int::from(min_ttl))
}

/// The filter would hold too many peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{peers} BFD peers of one family: a socket filter holds at most {MAX_FILTER_PEERS}")]
pub(crate) struct TooManyPeers {
    /// Peers asked for.
    pub(crate) peers: usize,
}

/// The classic BPF program of a receiver: accept a datagram whose IP
/// source address is one of `peers` (those of the family, `v6` or not)
/// and whose TTL / hop limit is at least that peer's minimum; drop the
/// rest. A UDP socket's filter runs on the datagram; the IP header is
/// reached through the kernel's `SKF_NET_OFF` offsets.
///
/// ```text
/// ldb [net+8]  (IPv6: [net+7])   ; TTL / hop limit
/// tax                            ; kept in X
/// IPv4: ld [net+12]              ; source address, once
///   per peer:  jeq #addr, 0, 4   ; not this one: next peer
///              txa
///              jge #min_ttl, 0, 1
///              ret #-1           ; accept
///              ret #0            ; TTL too low
/// IPv6, per peer:
///              ld [net+8];  jeq #w0, 0, 10
///              ld [net+12]; jeq #w1, 0, 8
///              ld [net+16]; jeq #w2, 0, 6
///              ld [net+20]; jeq #w3, 0, 4
///              txa; jge #min_ttl, 0, 1; ret #-1; ret #0
/// ret #0                         ; no peer
/// ```
///
/// Every jump is short, so the program grows linearly and stays within
/// the kernel's 4,096 instructions for up to [`MAX_FILTER_PEERS`]. A peer
/// listed twice keeps its lowest minimum.
pub(crate) fn peer_filter(
    v6: bool,
    peers: &[Peer],
) -> Result<Vec<libc::sock_filter>, TooManyPeers> {
    let mut mine: Vec<Peer> = peers
        .iter()
        .copied()
        .filter(|p| p.addr.is_ipv6() == v6)
        .collect();
    // Sorted by address, then TTL: the first of each address is the lowest.
    mine.sort_unstable();
    mine.dedup_by_key(|p| p.addr);
    if mine.len() > MAX_FILTER_PEERS {
        return Err(TooManyPeers { peers: mine.len() });
    }
    let mut prog = Vec::new();
    if !mine.is_empty() {
        prog.push(op(LD_B_ABS, 0, 0, net_off(if v6 { 7 } else { 8 })));
        prog.push(op(TAX, 0, 0, 0));
        if !v6 {
            prog.push(op(LD_W_ABS, 0, 0, net_off(12)));
        }
    }
    for p in mine {
        match p.addr {
            IpAddr::V4(a) => prog.push(op(JEQ_K, 0, 4, u32::from(a))),
            IpAddr::V6(a) => {
                let o = a.octets();
                for (w, off, skip) in [(0, 8, 10), (1, 12, 8), (2, 16, 6), (3, 20, 4)] {
                    let word =
                        u32::from_be_bytes([o[4 * w], o[4 * w + 1], o[4 * w + 2], o[4 * w + 3]]);
                    prog.push(op(LD_W_ABS, 0, 0, net_off(off)));
                    prog.push(op(JEQ_K, 0, skip, word));
                }
            }
        }
        prog.push(op(TXA, 0, 0, 0));
        prog.push(op(JGE_K, 0, 1, u32::from(p.min_ttl)));
        prog.push(op(RET_K, 0, 0, u32::MAX));
        prog.push(op(RET_K, 0, 0, 0));
    }
    prog.push(op(RET_K, 0, 0, 0));
    Ok(prog)
}

/// Opens a sending socket for one session towards `peer`: bound to
/// `local` (or the unspecified address) and a free source port in
/// 49152-65535, TTL / hop limit 255 (RFC 5881 §5, RFC 5883 §2).
pub(crate) fn sender(peer: IpAddr, local: Option<IpAddr>) -> io::Result<UdpSocket> {
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
pub(crate) async fn recv(socket: &UdpSocket) -> io::Result<Datagram> {
    socket
        .async_io(Interest::READABLE, || recv_now(socket))
        .await
}

fn recv_now(socket: &UdpSocket) -> io::Result<Datagram> {
    let mut buf = [0u8; 256];
    let mut cmsg = nix::cmsg_space!(libc::c_int, u32);
    let (len, from, ttl, kernel_drops) = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = socket::recvmsg::<SockaddrStorage>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::empty(),
        )
        .map_err(io::Error::from)?;
        let mut ttl = 0u8;
        let mut drops = None;
        for c in msg.cmsgs().map_err(io::Error::from)? {
            match c {
                ControlMessageOwned::Ipv4Ttl(t) | ControlMessageOwned::Ipv6HopLimit(t) => {
                    ttl = u8::try_from(t).unwrap_or(0);
                }
                ControlMessageOwned::RxqOvfl(n) => drops = Some(n),
                _ => {}
            }
        }
        let from = msg.address.as_ref().and_then(to_socket_addr);
        (msg.bytes, from, ttl, drops)
    };
    let from = from.ok_or_else(|| io::Error::other("datagram without a source address"))?;
    Ok(Datagram {
        len,
        buf,
        from,
        ttl,
        kernel_drops,
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

use super::bpf::{JEQ_K, JGE_K, LD_B_ABS, LD_W_ABS, RET_K, TAX, TXA, op};

/// `SKF_NET_OFF + off`: `off` octets into the network (IP) header.
const fn net_off(off: u32) -> u32 {
    (libc::SKF_NET_OFF as u32).wrapping_add(off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ttl_255_is_sent_and_seen() {
        let rx = listen("127.0.0.1:0".parse().unwrap(), &[peer([127, 0, 0, 1], 1)]).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = sender(to.ip(), Some(to.ip())).unwrap();
        let from = tx.local_addr().unwrap();
        assert!(SOURCE_PORTS.contains(&from.port()));
        tx.send_to(b"hello", to).await.unwrap();
        let d = recv(&rx).await.unwrap();
        assert_eq!(d.data(), b"hello");
        assert_eq!(d.from, from);
        assert_eq!(d.ttl, 255);
        assert_eq!(d.kernel_drops, None);
        // An ordinary socket's TTL (set here: the default is a sysctl) is
        // seen as it is.
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        plain.set_ttl(17).unwrap();
        plain.send_to(b"x", to).unwrap();
        assert_eq!(recv(&rx).await.unwrap().ttl, 17);
    }

    fn peer(addr: impl Into<IpAddr>, min_ttl: u8) -> Peer {
        Peer {
            addr: addr.into(),
            min_ttl,
        }
    }

    /// What this kernel really does with the receiver's filter: a
    /// datagram from an address outside the peer set, and one from a peer
    /// with TTL 254, never reach the queue; the next one that does reports
    /// both drops. 127.0.0.2 is on loopback without configuration.
    #[tokio::test]
    async fn kernel_drops_other_sources_and_low_ttl() {
        let me = Ipv4Addr::new(127, 0, 0, 1);
        let stranger = Ipv4Addr::new(127, 0, 0, 2);
        let rx = listen("127.0.0.1:0".parse().unwrap(), &[peer(me, 255)]).unwrap();
        let to = rx.local_addr().unwrap();
        let send = |from: Ipv4Addr, ttl: u32, payload: &[u8]| {
            let s = std::net::UdpSocket::bind((from, 0)).unwrap();
            s.set_ttl(ttl).unwrap();
            s.send_to(payload, to).unwrap();
        };
        send(stranger, 255, b"stranger");
        send(me, 254, b"low ttl");
        send(me, 255, b"peer");
        let d = recv(&rx).await.unwrap();
        assert_eq!((d.data(), d.ttl), (&b"peer"[..], 255));
        assert_eq!(d.kernel_drops, Some(2));

        // The peer set changes: the stranger is let in, the old peer not.
        set_peers(&rx, &[peer(stranger, 255), peer(Ipv6Addr::LOCALHOST, 1)]).unwrap();
        send(me, 255, b"old peer");
        send(stranger, 255, b"new peer");
        let d = recv(&rx).await.unwrap();
        assert_eq!((d.data(), d.from.ip()), (&b"new peer"[..], stranger.into()));
        assert_eq!(d.kernel_drops, Some(3));

        // No peers: nothing gets in. A multihop minimum is per peer.
        set_peers(&rx, &[]).unwrap();
        send(stranger, 255, b"nobody");
        set_peers(&rx, &[peer(me, 254), peer(stranger, 255), peer(me, 255)]).unwrap();
        send(stranger, 254, b"too low");
        send(me, 253, b"too low");
        send(me, 254, b"multihop");
        let d = recv(&rx).await.unwrap();
        assert_eq!((d.data(), d.ttl), (&b"multihop"[..], 254));
        assert_eq!(d.kernel_drops, Some(6));
    }

    #[tokio::test]
    async fn ipv6_hop_limit_and_filter() {
        let Ok(rx) = listen(
            "[::1]:0".parse().unwrap(),
            &[peer(Ipv6Addr::LOCALHOST, 255)],
        ) else {
            // No IPv6 loopback here; the namespace tests cover IPv6.
            return;
        };
        let to = rx.local_addr().unwrap();
        let tx = sender(to.ip(), None).unwrap();
        tx.send_to(b"v6", to).await.unwrap();
        let d = recv(&rx).await.unwrap();
        assert_eq!((d.data(), d.ttl), (&b"v6"[..], 255));
        // The same source once it is no longer a peer (a peer differing
        // only in the last word, and one only in the first), and with a
        // hop limit below 255.
        let near: Ipv6Addr = "::2".parse().unwrap();
        let far: Ipv6Addr = "2001:db8::1".parse().unwrap();
        set_peers(&rx, &[peer(near, 255), peer(far, 255)]).unwrap();
        tx.send_to(b"dropped", to).await.unwrap();
        set_peers(&rx, &[peer(near, 255), peer(Ipv6Addr::LOCALHOST, 255)]).unwrap();
        let low = std::net::UdpSocket::bind("[::1]:0").unwrap();
        SockRef::from(&low).set_unicast_hops_v6(64).unwrap();
        low.send_to(b"low", to).unwrap();
        tx.send_to(b"again", to).await.unwrap();
        let d = recv(&rx).await.unwrap();
        assert_eq!(d.data(), b"again");
        assert_eq!(d.kernel_drops, Some(2));
    }

    #[test]
    fn filter_size_is_bounded() {
        let many: Vec<Peer> = (0..=MAX_FILTER_PEERS as u128)
            .map(|i| peer(Ipv6Addr::from(i + 1), 255))
            .collect();
        assert_eq!(
            peer_filter(true, &many),
            Err(TooManyPeers {
                peers: MAX_FILTER_PEERS + 1
            })
        );
        let prog = peer_filter(true, &many[..MAX_FILTER_PEERS]).unwrap();
        assert!(prog.len() <= 4096, "{}", prog.len());
        // The other family's addresses and duplicates cost nothing.
        let v4 = peer_filter(
            false,
            &[many[0], peer([10, 0, 0, 1], 255), peer([10, 0, 0, 1], 1)],
        );
        assert_eq!(v4.map(|p| p.len()), Ok(9));
    }
}
