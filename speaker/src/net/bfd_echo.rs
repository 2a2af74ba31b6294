//! BFD Echo transport over IPv4 (RFC 5881 §4): an echo is a UDP datagram
//! to port 3785 whose IP source and destination are both our own address,
//! sent in an Ethernet frame to the peer's MAC address. The peer's kernel
//! forwards it (it is not for the peer) straight back to us, with the TTL
//! down from 255 to 254. FRR's bfdd (8.4, Linux) sends its IPv4 echoes the
//! same way, so the node must forward the peer's echoes in turn:
//! `net.ipv4.ip_forward = 1` (a Kubernetes node has it), nothing else.
//!
//! A normal socket cannot send such a packet (a datagram to our own
//! address never leaves the host), and the kernel drops the returning one
//! as a martian (our own source address, from outside) unless
//! `accept_local` is set; so both directions use `AF_PACKET` datagram
//! sockets, below the IP stack, as FRR does:
//!
//! - [`EchoSender`]: builds the IPv4 and UDP headers ([`datagram`]) and
//!   hands the packet to the link layer with the peer's MAC address (read
//!   from the kernel's neighbour table, [`neighbor_mac`]).
//! - [`EchoReceiver`]: bound to `ETH_P_IP` on every interface, so it sees
//!   incoming packets only, with a socket filter ([`FILTER`]) that keeps
//!   UDP to port 3785 with source equal to destination and a TTL below
//!   255: an echo that was forwarded. Echoes that the peer sends us to
//!   forward (TTL 255) stay out, and so does everything else.
//!
//! No protocol decisions: the BFD core says when to send and judges what
//! comes back.
#![allow(unsafe_code)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket as StdUdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

use super::packet_socket::{attach_filter, register, sockaddr_ll, socklen};

/// UDP port of BFD Echo packets (RFC 5881 §4), source and destination.
pub(crate) const ECHO_PORT: u16 = 3785;
/// TTL of an echo we send: one forwarding hop makes it 254.
pub(crate) const ECHO_TTL: u8 = 255;

const ETH_P_IP: u16 = libc::ETH_P_IP as u16;
const IP_HEADER: usize = 20;
const UDP_HEADER: usize = 8;

/// Where one session's echoes go: our address, the interface towards the
/// peer and the peer's MAC address on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path {
    /// Our address: the echo's source and destination.
    pub(crate) local: Ipv4Addr,
    /// The interface that holds it.
    pub(crate) ifindex: u32,
    /// The peer's MAC address there.
    pub(crate) mac: [u8; 6],
}

/// Finds the path of a session's echoes: our address (`local`, or the one
/// the kernel would send from to `peer`), the interface holding it, and
/// the peer's MAC address in the neighbour table. `Ok(None)` while the
/// peer's address is not resolved (the Control packets resolve it).
pub(crate) fn path(peer: Ipv4Addr, local: Option<Ipv4Addr>) -> io::Result<Option<Path>> {
    let local = match local {
        Some(l) => l,
        None => {
            // Route lookup without sending: connect a UDP socket.
            let s = StdUdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
            s.connect(SocketAddr::new(IpAddr::V4(peer), ECHO_PORT))?;
            match s.local_addr()?.ip() {
                IpAddr::V4(a) => a,
                IpAddr::V6(_) => return Err(io::Error::other("IPv4 route has an IPv6 source")),
            }
        }
    };
    let ifname = nix::ifaddrs::getifaddrs()
        .map_err(io::Error::from)?
        .find(|i| {
            i.address
                .as_ref()
                .and_then(|a| a.as_sockaddr_in())
                .is_some_and(|a| a.ip() == local)
        })
        .map(|i| i.interface_name)
        .ok_or_else(|| io::Error::other(format!("no interface has {local}")))?;
    let ifindex = nix::net::if_::if_nametoindex(ifname.as_str()).map_err(io::Error::from)?;
    let table = std::fs::read_to_string("/proc/net/arp")?;
    Ok(neighbor_mac(&table, peer, &ifname).map(|mac| Path {
        local,
        ifindex,
        mac,
    }))
}

/// The MAC address of `peer` on `ifname` in `/proc/net/arp` (the kernel's
/// IPv4 neighbour table), if the entry is complete (flag `ATF_COM`).
pub(crate) fn neighbor_mac(table: &str, peer: Ipv4Addr, ifname: &str) -> Option<[u8; 6]> {
    const ATF_COM: u32 = 0x02;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [ip, _hw_type, flags, mac, _mask, dev] = f[..] else {
            return None;
        };
        let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
        if ip.parse::<Ipv4Addr>().ok()? != peer || dev != ifname || flags & ATF_COM == 0 {
            return None;
        }
        let mut out = [0u8; 6];
        let mut parts = mac.split(':');
        for o in &mut out {
            *o = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        (parts.next().is_none() && out != [0; 6]).then_some(out)
    })
}

/// The IPv4 packet of an echo: `payload` in UDP from and to
/// [`ECHO_PORT`], from and to `local`, TTL 255, precedence "internetwork
/// control" (as Control packets, RFC 5881 §4 leaves it open), both
/// checksums filled in.
pub(crate) fn datagram(local: Ipv4Addr, id: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = UDP_HEADER + payload.len();
    let total = IP_HEADER + udp_len;
    let mut p = vec![0u8; total];
    p[0] = 0x45; // version 4, 5 words
    p[1] = 0xc0; // IPTOS_PREC_INTERNETCONTROL
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[8] = ECHO_TTL;
    p[9] = libc::IPPROTO_UDP as u8;
    p[12..16].copy_from_slice(&local.octets());
    p[16..20].copy_from_slice(&local.octets());
    let ip_sum = checksum(0, &p[..IP_HEADER]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    let u = &mut p[IP_HEADER..];
    u[0..2].copy_from_slice(&ECHO_PORT.to_be_bytes());
    u[2..4].copy_from_slice(&ECHO_PORT.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u[8..].copy_from_slice(payload);
    // Pseudo-header: source, destination, protocol, UDP length.
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&local.octets());
    pseudo[4..8].copy_from_slice(&local.octets());
    pseudo[9] = libc::IPPROTO_UDP as u8;
    pseudo[10..12].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let sum = checksum(sum_words(0, &pseudo), u);
    // RFC 768: a computed zero is sent as all ones.
    let sum = if sum == 0 { 0xffff } else { sum };
    u[6..8].copy_from_slice(&sum.to_be_bytes());
    p
}

/// A returned echo as [`EchoReceiver`] reads it (an IPv4 packet): the
/// address it went from and to, its TTL, and the UDP payload. `None` for
/// anything else (the socket filter already keeps the rest out; this
/// checks again, and checks the lengths).
pub(crate) fn returned(packet: &[u8]) -> Option<(Ipv4Addr, u8, &[u8])> {
    let ihl = usize::from(packet.first()? & 0x0f) * 4;
    if packet[0] >> 4 != 4 || ihl < IP_HEADER {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([*packet.get(2)?, *packet.get(3)?]));
    let packet = packet.get(..total)?;
    let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    let udp = packet.get(ihl..)?;
    let udp_len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    let dport = u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]);
    if packet[9] != libc::IPPROTO_UDP as u8 || src != dst || dport != ECHO_PORT {
        return None;
    }
    Some((src, packet[8], udp.get(UDP_HEADER..udp_len)?))
}

/// Sends echoes: an `AF_PACKET` datagram socket that receives nothing
/// (protocol 0).
#[derive(Debug)]
pub(crate) struct EchoSender {
    fd: OwnedFd,
    id: u16,
}

impl EchoSender {
    /// Opens the socket (needs `CAP_NET_RAW`).
    pub(crate) fn open() -> io::Result<Self> {
        Ok(Self {
            fd: packet_socket(0)?,
            id: 0,
        })
    }

    /// Sends one echo (`payload` from the core) on `path`, without
    /// waiting: a full queue drops it (`WouldBlock`), as a NIC would.
    pub(crate) fn send(&mut self, path: &Path, payload: &[u8]) -> io::Result<()> {
        self.id = self.id.wrapping_add(1);
        let packet = datagram(path.local, self.id, payload);
        let mut to = sockaddr_ll(path.ifindex, ETH_P_IP);
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&path.mac);
        // SAFETY: `packet` is valid for reads of its length and `to` is a
        // valid sockaddr_ll of the length given.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                libc::MSG_DONTWAIT,
                (&raw const to).cast(),
                socklen::<libc::sockaddr_ll>(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Receives returned echoes (see the module doc), driven by tokio.
#[derive(Debug)]
pub(crate) struct EchoReceiver {
    fd: AsyncFd<OwnedFd>,
}

impl EchoReceiver {
    /// Opens the socket: the filter is attached before it is bound, so
    /// nothing unfiltered is ever queued. Must be called inside a tokio
    /// runtime; needs `CAP_NET_RAW`.
    pub(crate) fn open() -> io::Result<Self> {
        let fd = packet_socket(0)?;
        attach_filter(fd.as_raw_fd(), &FILTER)?;
        let addr = sockaddr_ll(0, ETH_P_IP);
        // SAFETY: `addr` is a valid sockaddr_ll and the length is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                socklen::<libc::sockaddr_ll>(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd: register(fd)? })
    }

    /// Waits for one returned echo and reads its IPv4 packet into `buf`
    /// (see [`returned`]); returns its length.
    pub(crate) async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            let res = guard.try_io(|fd| {
                // SAFETY: `buf` is valid for writes of `buf.len()` octets.
                let n = unsafe {
                    libc::recv(
                        fd.as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n.unsigned_abs())
                }
            });
            if let Ok(r) = res {
                return r;
            }
        }
    }
}

fn packet_socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(protocol.to_be()),
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The one's complement sum of `data` as 16-bit words, added to `acc`.
fn sum_words(mut acc: u32, data: &[u8]) -> u32 {
    for w in data.chunks(2) {
        let hi = u32::from(w[0]) << 8;
        acc += hi | w.get(1).map_or(0, |b| u32::from(*b));
    }
    acc
}

/// The Internet checksum (RFC 1071) of `data`, starting from `acc`.
fn checksum(acc: u32, data: &[u8]) -> u16 {
    let mut sum = sum_words(acc, data);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

use super::bpf::{
    JEQ_K, JEQ_X, JGE_K, JSET_K, LD_B_ABS, LD_H_ABS, LD_H_IND, LD_W_ABS, LDX_B_MSH, RET_K, TAX, op,
};

/// The receiver's filter, on the IPv4 packet (a datagram packet socket
/// sees no link-layer header):
///
/// ```text
///  0: ldb [9]             ; protocol
///  1: jeq #17, 2, 14      ; UDP
///  2: ldh [6]             ; flags, fragment offset
///  3: jset #0x1fff, 14, 4 ; a later fragment: drop
///  4: ldb [8]             ; TTL
///  5: jge #255, 14, 6     ; 255: not forwarded (the peer's echo): drop
///  6: ld [12]             ; source
///  7: tax
///  8: ld [16]             ; destination
///  9: jeq x, 10, 14       ; source is destination
/// 10: ldxb 4*([0]&0xf)    ; header length
/// 11: ldh [x+2]           ; UDP destination port
/// 12: jeq #3785, 13, 14
/// 13: ret #256            ; accept (an echo is short)
/// 14: ret #0              ; drop
/// ```
pub(crate) const FILTER: [libc::sock_filter; 15] = [
    op(LD_B_ABS, 0, 0, 9),
    op(JEQ_K, 0, 12, 17),
    op(LD_H_ABS, 0, 0, 6),
    op(JSET_K, 10, 0, 0x1fff),
    op(LD_B_ABS, 0, 0, 8),
    op(JGE_K, 8, 0, 255),
    op(LD_W_ABS, 0, 0, 12),
    op(TAX, 0, 0, 0),
    op(LD_W_ABS, 0, 0, 16),
    op(JEQ_X, 0, 4, 0),
    op(LDX_B_MSH, 0, 0, 0),
    op(LD_H_IND, 0, 0, 2),
    op(JEQ_K, 0, 1, ECHO_PORT as u32),
    op(RET_K, 0, 0, 256),
    op(RET_K, 0, 0, 0),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter the way the kernel does (a load past the end drops
    /// the packet).
    fn run(filter: &[libc::sock_filter], p: &[u8]) -> u32 {
        let (mut pc, mut a, mut x) = (0usize, 0u32, 0u32);
        let load = |k: usize, width: usize| -> Option<u32> {
            let bytes = p.get(k..k + width)?;
            Some(bytes.iter().fold(0, |acc, b| (acc << 8) | u32::from(*b)))
        };
        loop {
            let i = filter[pc];
            pc += 1;
            let jump = |cond: bool| usize::from(if cond { i.jt } else { i.jf });
            match i.code {
                LD_W_ABS | LD_H_ABS | LD_B_ABS | LD_H_IND => {
                    let width = match i.code {
                        LD_W_ABS => 4,
                        LD_B_ABS => 1,
                        _ => 2,
                    };
                    let base = if i.code == LD_H_IND { x as usize } else { 0 };
                    let Some(v) = load(base + i.k as usize, width) else {
                        return 0;
                    };
                    a = v;
                }
                LDX_B_MSH => {
                    let Some(v) = load(i.k as usize, 1) else {
                        return 0;
                    };
                    x = (v & 0x0f) * 4;
                }
                TAX => x = a,
                JEQ_K => pc += jump(a == i.k),
                JEQ_X => pc += jump(a == x),
                JSET_K => pc += jump(a & i.k != 0),
                JGE_K => pc += jump(a >= i.k),
                RET_K => return i.k,
                other => panic!("opcode {other:#x}"),
            }
        }
    }

    const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn datagram_fields_and_checksums() {
        let payload = [1, 16, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1];
        let p = datagram(LOCAL, 0x1234, &payload);
        assert_eq!(p.len(), 20 + 8 + 16);
        assert_eq!(
            &p[..12],
            &[0x45, 0xc0, 0, 44, 0x12, 0x34, 0, 0, 255, 17, p[10], p[11]]
        );
        assert_eq!(&p[12..20], &[10, 0, 0, 2, 10, 0, 0, 2]);
        // A header with its checksum sums to zero.
        assert_eq!(checksum(0, &p[..20]), 0);
        // So does UDP with its pseudo-header.
        let pseudo = [10, 0, 0, 2, 10, 0, 0, 2, 0, 17, 0, 24];
        assert_eq!(checksum(sum_words(0, &pseudo), &p[20..]), 0);
        assert_eq!(&p[20..26], &[0x0e, 0xc9, 0x0e, 0xc9, 0, 24]);
        assert_eq!(returned(&p), Some((LOCAL, 255, &payload[..])));
    }

    #[test]
    fn filter_keeps_forwarded_echoes_only() {
        let payload = [0u8; 16];
        let mut ours = datagram(LOCAL, 1, &payload);
        // As sent (TTL 255): the peer's echo we are to forward; dropped.
        assert_eq!(run(&FILTER, &ours), 0);
        // Forwarded back (TTL 254): kept.
        ours[8] = 254;
        assert_eq!(run(&FILTER, &ours), 256);
        assert_eq!(returned(&ours).map(|r| r.1), Some(254));
        // Source not destination (a Control packet to us, or anyone's UDP
        // to 3785): dropped.
        let mut other = ours.clone();
        other[15] = 1;
        assert_eq!(run(&FILTER, &other), 0);
        assert_eq!(returned(&other), None);
        // Another port.
        let mut port = ours.clone();
        port[23] = 0xc8; // 3784
        assert_eq!(run(&FILTER, &port), 0);
        // TCP.
        let mut tcp = ours.clone();
        tcp[9] = 6;
        assert_eq!(run(&FILTER, &tcp), 0);
        // A later fragment.
        let mut frag = ours.clone();
        frag[7] = 1;
        assert_eq!(run(&FILTER, &frag), 0);
        // IP options move the UDP header: still found.
        let mut opts = ours[..20].to_vec();
        opts[0] = 0x46;
        opts.extend_from_slice(&[1, 1, 1, 1]);
        opts.extend_from_slice(&ours[20..]);
        let total = opts.len() as u16;
        opts[2..4].copy_from_slice(&total.to_be_bytes());
        assert_eq!(run(&FILTER, &opts), 256);
        assert_eq!(returned(&opts), Some((LOCAL, 254, &payload[..])));
        // Too short to hold a port: dropped by the kernel.
        assert_eq!(run(&FILTER, &ours[..21]), 0);
        assert_eq!(returned(&ours[..21]), None);
    }

    #[test]
    fn neighbor_table_lookup() {
        let table = "\
IP address       HW type     Flags       HW address            Mask     Device
10.0.0.1         0x1         0x2         12:34:56:78:9a:bc     *        eth0
10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        eth0
10.0.0.1         0x1         0x2         aa:aa:aa:aa:aa:aa     *        eth1
";
        let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            neighbor_mac(table, a("10.0.0.1"), "eth0"),
            Some([0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc])
        );
        assert_eq!(neighbor_mac(table, a("10.0.0.1"), "eth1"), Some([0xaa; 6]));
        // Incomplete, or not there.
        assert_eq!(neighbor_mac(table, a("10.0.0.3"), "eth0"), None);
        assert_eq!(neighbor_mac(table, a("10.0.0.9"), "eth0"), None);
    }
}
