//! BGP transport sockets: TCP with the options a data-center router
//! expects: source address or interface binding, IP TTL (1 for directly
//! connected eBGP, more for multihop), GTSM (RFC 5082) minimum TTL, and
//! TCP MD5 signatures (RFC 2385) on connecting and listening sockets.
#![allow(unsafe_code)]

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use api::model::Md5Key;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Longest TCP MD5 key Linux accepts (`TCP_MD5SIG_MAXKEYLEN`).
pub const MAX_MD5_KEY: usize = 80;

/// Options of an outbound BGP connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local address to bind (source address); port 0 picks one.
    pub bind: Option<IpAddr>,
    /// Interface to bind to (`SO_BINDTODEVICE`).
    pub device: Option<String>,
    /// IP TTL / hop limit of our packets; `None` leaves the system default.
    pub ttl: Option<u32>,
    /// GTSM (RFC 5082): drop packets from the peer whose TTL is below this.
    pub min_ttl: Option<u8>,
    /// TCP MD5 key shared with the peer (RFC 2385).
    pub md5_key: Option<Md5Key>,
    /// Give up connecting after this long.
    pub timeout: Option<Duration>,
}

/// Opens a TCP connection to `peer` with `opts`.
pub(crate) async fn connect(peer: SocketAddr, opts: &ConnectOptions) -> io::Result<TcpStream> {
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    socket.set_tcp_nodelay(true)?;
    if let Some(dev) = &opts.device {
        socket.bind_device(Some(dev.as_bytes()))?;
    }
    if let Some(addr) = opts.bind {
        socket.bind(&SockAddr::from(SocketAddr::new(addr, 0)))?;
    }
    if let Some(ttl) = opts.ttl {
        set_ttl(&socket, peer.ip(), ttl)?;
    }
    if let Some(min) = opts.min_ttl {
        set_min_ttl(socket.as_raw_fd(), peer.ip(), min)?;
    }
    if let Some(key) = &opts.md5_key {
        set_md5_key(socket.as_raw_fd(), peer.ip(), key)?;
    }
    let socket = TcpSocket::from_std_stream(socket.into());
    let connect = socket.connect(peer);
    match opts.timeout {
        Some(t) => tokio::time::timeout(t, connect)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?,
        None => connect.await,
    }
}

/// Opens a listening socket for BGP (port 179 unless told otherwise).
pub(crate) fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // Dual-stack: IPv4 peers arrive as IPv4-mapped addresses.
        socket.set_only_v6(false)?;
    }
    socket.bind(&SockAddr::from(addr))?;
    socket.listen(128)?;
    TcpListener::from_std(socket.into())
}

/// Sets (non-empty `key`) or clears (empty `key`) the MD5 key for `peer`
/// on a socket: a listening socket keeps one key per peer address.
///
/// The address is given in the socket's own family, as Linux wants it: an
/// IPv4 peer on an IPv6 socket (a dual-stack listener, `[::]:179`) is keyed
/// by its IPv4-mapped address `::ffff:a.b.c.d`, the form its connections
/// arrive in; an AF_INET address there is refused with EINVAL.
pub(crate) fn set_md5_key(fd: RawFd, peer: IpAddr, key: &[u8]) -> io::Result<()> {
    if key.len() > MAX_MD5_KEY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TCP MD5 key longer than 80 octets",
        ));
    }
    let peer = in_family(socket_family(fd)?, peer)?;
    let addr = SockAddr::from(SocketAddr::new(peer, 0));
    let mut sig = TcpMd5Sig {
        // SAFETY: sockaddr_storage is plain old data; all zeros is valid.
        addr: unsafe { std::mem::zeroed() },
        flags: 0,
        prefixlen: 0,
        keylen: key.len() as u16,
        ifindex: 0,
        key: [0; MAX_MD5_KEY],
    };
    sig.key[..key.len()].copy_from_slice(key);
    let len = (addr.len() as usize).min(size_of::<libc::sockaddr_storage>());
    // SAFETY: `addr.as_ptr()` points to `addr.len()` valid bytes, and the
    // destination is a sockaddr_storage of at least `len` bytes; the two do
    // not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr().cast::<u8>(),
            (&raw mut sig.addr).cast::<u8>(),
            len,
        );
    }
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_MD5SIG, &sig)
}

/// The address family of a socket (`SO_DOMAIN`).
fn socket_family(fd: RawFd) -> io::Result<libc::c_int> {
    let mut family: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `family` and `len` are valid for writes of the sizes given;
    // the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&raw mut family).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    if rc == 0 {
        Ok(family)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `peer` as a socket of `family` sees it: IPv4 on an IPv6 socket is
/// IPv4-mapped; an IPv4-mapped address on an IPv4 socket is plain IPv4.
fn in_family(family: libc::c_int, peer: IpAddr) -> io::Result<IpAddr> {
    match (family, peer) {
        (libc::AF_INET6, IpAddr::V4(v4)) => Ok(IpAddr::V6(v4.to_ipv6_mapped())),
        (libc::AF_INET, IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("IPv6 peer {v6} on an IPv4 socket"),
            )
        }),
        _ => Ok(peer),
    }
}

fn set_ttl(socket: &Socket, peer: IpAddr, ttl: u32) -> io::Result<()> {
    match peer {
        IpAddr::V4(_) => socket.set_ttl_v4(ttl),
        IpAddr::V6(_) => socket.set_unicast_hops_v6(ttl),
    }
}

/// GTSM: the kernel drops segments whose TTL / hop limit is below `min`.
pub(crate) fn set_min_ttl(fd: RawFd, peer: IpAddr, min: u8) -> io::Result<()> {
    let v = libc::c_int::from(min);
    match peer {
        IpAddr::V4(_) => setsockopt(fd, libc::IPPROTO_IP, libc::IP_MINTTL, &v),
        IpAddr::V6(_) => setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT, &v),
    }
}

/// `struct tcp_md5sig` of linux/tcp.h.
#[repr(C)]
struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: libc::c_int,
    key: [u8; MAX_MD5_KEY],
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a valid, initialised `T` for the duration of the
    // call and its size is passed along; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(value).cast::<libc::c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn md5_struct_matches_the_kernel_layout() {
        // 128 (sockaddr_storage) + 1 + 1 + 2 + 4 + 80.
        assert_eq!(size_of::<TcpMd5Sig>(), 216);
    }

    #[tokio::test]
    async fn loopback_connection_with_options() {
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = ConnectOptions {
            bind: Some("127.0.0.1".parse().unwrap()),
            ttl: Some(1),
            timeout: Some(Duration::from_secs(5)),
            ..ConnectOptions::default()
        };
        let (a, b) = tokio::join!(connect(addr, &opts), listener.accept());
        let a = a.unwrap();
        let (_b, from) = b.unwrap();
        assert_eq!(a.local_addr().unwrap(), from);
    }

    #[tokio::test]
    async fn gtsm_drops_segments_below_the_minimum_ttl() {
        // The listener answers with TTL 64 (set: the default is a sysctl):
        // a minimum of 255 refuses its SYN-ACK.
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        socket2::SockRef::from(&listener).set_ttl_v4(64).unwrap();
        let addr = listener.local_addr().unwrap();
        let strict = ConnectOptions {
            min_ttl: Some(255),
            timeout: Some(Duration::from_millis(500)),
            ..ConnectOptions::default()
        };
        let accept = tokio::time::timeout(Duration::from_millis(700), listener.accept());
        let (c, a) = tokio::join!(connect(addr, &strict), accept);
        assert!(c.is_err(), "SYN-ACK with TTL 64 must be dropped");
        drop(a);
        // With the listener sending TTL 255 (inherited by accepted sockets),
        // the same options connect.
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        socket2::SockRef::from(&listener).set_ttl_v4(255).unwrap();
        let addr = listener.local_addr().unwrap();
        // A connect that must succeed gets time enough for a busy machine.
        let strict = ConnectOptions {
            timeout: Some(Duration::from_secs(10)),
            ..strict
        };
        let accept = tokio::time::timeout(Duration::from_secs(10), listener.accept());
        let (c, a) = tokio::join!(connect(addr, &strict), accept);
        assert!(c.is_ok(), "{c:?}");
        assert!(a.is_ok());
    }

    #[tokio::test]
    async fn md5_mismatch_never_connects() {
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        set_md5_key(listener.as_raw_fd(), "127.0.0.1".parse().unwrap(), b"right").unwrap();
        let wrong = ConnectOptions {
            md5_key: Some(b"wrong".to_vec().into()),
            timeout: Some(Duration::from_millis(500)),
            ..ConnectOptions::default()
        };
        let accept = tokio::time::timeout(Duration::from_millis(700), listener.accept());
        let (c, a) = tokio::join!(connect(addr, &wrong), accept);
        assert!(c.is_err(), "wrong key must not connect");
        assert!(a.is_err(), "nothing accepted");
        let right = ConnectOptions {
            md5_key: Some(b"right".to_vec().into()),
            timeout: Some(Duration::from_secs(10)),
            ..wrong
        };
        let (c, a) = tokio::join!(connect(addr, &right), listener.accept());
        assert!(c.is_ok() && a.is_ok());
        assert!(set_md5_key(0, "127.0.0.1".parse().unwrap(), &[0; 81]).is_err());
    }

    #[tokio::test]
    async fn md5_on_a_dual_stack_listener_keys_ipv4_peers_mapped() {
        // Issue 14 finding 4: an AF_INET address on an AF_INET6 socket is
        // EINVAL; the key must be set for ::ffff:127.0.0.1.
        let listener = listen("[::]:0".parse().unwrap()).unwrap();
        let port = listener.local_addr().unwrap().port();
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        set_md5_key(listener.as_raw_fd(), v4, b"right").unwrap();
        let addr = SocketAddr::new(v4, port);
        let wrong = ConnectOptions {
            md5_key: Some(b"wrong".to_vec().into()),
            timeout: Some(Duration::from_millis(500)),
            ..ConnectOptions::default()
        };
        let accept = tokio::time::timeout(Duration::from_millis(700), listener.accept());
        let (c, a) = tokio::join!(connect(addr, &wrong), accept);
        assert!(c.is_err() && a.is_err(), "wrong key must not connect");
        let right = ConnectOptions {
            md5_key: Some(b"right".to_vec().into()),
            timeout: Some(Duration::from_secs(10)),
            ..wrong
        };
        let (c, a) = tokio::join!(connect(addr, &right), listener.accept());
        assert!(c.is_ok(), "{c:?}");
        let (_, from) = a.unwrap();
        assert_eq!(from.ip(), IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()));
        // Clearing works the same way; an IPv6 peer on an IPv4 socket is
        // refused with a reason, not EINVAL.
        set_md5_key(listener.as_raw_fd(), v4, &[]).unwrap();
        let v4_listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        set_md5_key(v4_listener.as_raw_fd(), mapped, b"k").unwrap();
        let err = set_md5_key(
            v4_listener.as_raw_fd(),
            "2001:db8::1".parse().unwrap(),
            b"k",
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn md5_keys_do_not_show_in_debug() {
        let opts = ConnectOptions {
            md5_key: Some(b"s3cret-key".to_vec().into()),
            ..ConnectOptions::default()
        };
        let shown = format!("{opts:?} {opts:#?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
