//! Layer 2 sockets for the ARP and NDP responders: one `AF_PACKET` raw
//! socket per interface, bound to it, with a classic BPF filter so that the
//! kernel hands us only ARP requests and ICMPv6 Neighbor Solicitations.
//!
//! Setup order matters: the socket is created with protocol 0 (it receives
//! nothing), the filter is attached, and only then is it bound to the
//! interface with `ETH_P_ALL`, so no unfiltered frame is ever queued. Our own
//! transmissions are not looped back (`PACKET_IGNORE_OUTGOING`).
//!
//! The kernel's IPv6 stack is not involved for announced addresses: the
//! solicited-node groups are joined on this socket
//! ([`PacketSocket::join_multicast`], `PACKET_ADD_MEMBERSHIP`), which programs
//! the NIC's multicast filter and is undone when the socket closes.
#![allow(unsafe_code)]

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Largest frame read: a 1500-octet MTU frame with its header fits; a longer
/// one is reported by [`Recv::truncated`].
pub(crate) const RECV_BUF: usize = 2048;

/// A non-blocking `AF_PACKET` socket on one interface, driven by tokio.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: AsyncFd<OwnedFd>,
    ifindex: u32,
}

/// One frame read by [`PacketSocket::poll_recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recv {
    /// Octets written to the buffer.
    pub(crate) len: usize,
    /// The frame was longer than the buffer (its real length).
    pub(crate) truncated: Option<usize>,
}

/// Kernel counters of one packet socket (`PACKET_STATISTICS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct KernelStats {
    /// Frames that passed the filter, since the last read.
    pub(crate) packets: u64,
    /// Of those, frames dropped because the receive buffer was full.
    pub(crate) drops: u64,
}

impl PacketSocket {
    /// Opens a socket on interface `ifindex` with [`FILTER`] attached. Must
    /// be called inside a tokio runtime.
    pub(crate) fn open(ifindex: u32) -> io::Result<Self> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        attach_filter(fd.as_raw_fd(), &FILTER)?;
        // Best effort: kernels before 4.20 lack it, and then our own
        // gratuitous requests come back and the core drops them (own MAC).
        let _ = setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &1_i32,
        );
        let addr = sockaddr_ll(ifindex, ETH_P_ALL);
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
        Ok(Self {
            fd: register(fd)?,
            ifindex,
        })
    }

    /// Reads one frame into `buf` when one is queued; registers the waker
    /// otherwise. Call again after `Ready` to read the next.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<Recv>> {
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match guard.try_io(|fd| recv(fd.as_raw_fd(), buf)) {
                Ok(res) => return Poll::Ready(res),
                // Readiness cleared: poll again to register the waker.
                Err(_would_block) => {}
            }
        }
    }

    /// Sends one whole Ethernet frame on the interface, without waiting: a
    /// full transmit queue drops it (`WouldBlock`), as a NIC would.
    pub(crate) fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is a valid buffer of `frame.len()` octets; the
        // socket is bound, so no destination address is needed.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives frames sent to the Ethernet multicast address `mac` (the
    /// solicited-node group 33:33:ff:xx:xx:xx of an announced IPv6 address).
    /// The kernel counts joins per socket, so join once per address and
    /// leave as often.
    pub(crate) fn join_multicast(&self, mac: [u8; 6]) -> io::Result<()> {
        self.membership(libc::PACKET_ADD_MEMBERSHIP, mac)
    }

    /// Undoes one [`join_multicast`](Self::join_multicast).
    pub(crate) fn leave_multicast(&self, mac: [u8; 6]) -> io::Result<()> {
        self.membership(libc::PACKET_DROP_MEMBERSHIP, mac)
    }

    /// Reads and resets the kernel's counters for this socket.
    pub(crate) fn kernel_stats(&self) -> io::Result<KernelStats> {
        // SAFETY: tpacket_stats is plain old data; all zeroes is valid.
        let mut st: libc::tpacket_stats = unsafe { mem::zeroed() };
        let mut len = socklen::<libc::tpacket_stats>();
        // SAFETY: `st` and `len` are valid for writes of the stated size.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&raw mut st).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(KernelStats {
            packets: u64::from(st.tp_packets),
            drops: u64::from(st.tp_drops),
        })
    }

    fn membership(&self, op: libc::c_int, mac: [u8; 6]) -> io::Result<()> {
        // SAFETY: packet_mreq is plain old data; all zeroes is valid.
        let mut mreq: libc::packet_mreq = unsafe { mem::zeroed() };
        mreq.mr_ifindex = self.ifindex as libc::c_int;
        mreq.mr_type = libc::PACKET_MR_MULTICAST as libc::c_ushort;
        mreq.mr_alen = 6;
        mreq.mr_address[..6].copy_from_slice(&mac);
        setsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, op, &mreq)
    }
}

use super::bpf::{JEQ_K, LD_B_ABS, LD_H_ABS, RET_K, op};

/// The socket filter: accept ARP requests and ICMPv6 Neighbor
/// Solicitations, drop everything else in the kernel.
///
/// ```text
///  0: ldh [12]             ; EtherType
///  1: jeq #0x0806, 2, 4
///  2: ldh [20]             ; ARP operation
///  3: jeq #1, 9, 10        ; request -> accept
///  4: jeq #0x86dd, 5, 10
///  5: ldb [20]             ; IPv6 next header
///  6: jeq #58, 7, 10       ; ICMPv6 (extension headers are not followed)
///  7: ldb [54]             ; ICMPv6 type
///  8: jeq #135, 9, 10      ; Neighbor Solicitation -> accept
///  9: ret #262144          ; accept the whole frame
/// 10: ret #0               ; drop
/// ```
///
/// Only the fields needed to pick the message are checked: a request with a
/// wrong hardware type, a bad checksum or hop limit still reaches the core,
/// which drops and counts it. A load past the end of the frame makes the
/// kernel drop it (frames too short to hold the operation or type).
pub(crate) const FILTER: [libc::sock_filter; 11] = [
    op(LD_H_ABS, 0, 0, 12),
    op(JEQ_K, 0, 2, 0x0806),
    op(LD_H_ABS, 0, 0, 20),
    op(JEQ_K, 5, 6, 1),
    op(JEQ_K, 0, 5, 0x86dd),
    op(LD_B_ABS, 0, 0, 20),
    op(JEQ_K, 0, 3, 58),
    op(LD_B_ABS, 0, 0, 54),
    op(JEQ_K, 0, 1, 135),
    op(RET_K, 0, 0, 0x40000),
    op(RET_K, 0, 0, 0),
];

const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;

pub(crate) fn attach_filter(fd: RawFd, filter: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as libc::c_ushort,
        // The kernel copies the program; it only reads through this pointer.
        filter: filter.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

pub(crate) fn sockaddr_ll(ifindex: u32, protocol: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data; all zeroes is valid.
    let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as libc::c_ushort;
    addr.sll_protocol = protocol.to_be();
    addr.sll_ifindex = ifindex as libc::c_int;
    addr
}

fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<Recv> {
    // MSG_TRUNC: return the frame's real length, so an oversize frame is
    // seen as such instead of parsed cut short.
    // SAFETY: `buf` is valid for writes of `buf.len()` octets.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_TRUNC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n.unsigned_abs();
    Ok(if n > buf.len() {
        Recv {
            len: buf.len(),
            truncated: Some(n),
        }
    } else {
        Recv {
            len: n,
            truncated: None,
        }
    })
}

pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` and the length is its size.
    let rc =
        unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), socklen::<T>()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers a socket with tokio's reactor, for reading. `T` owns its
/// descriptor (`AsFd`: it stays open while `T` lives), as `OwnedFd` and
/// `netlink_sys::Socket` do.
pub(crate) fn register<T: AsFd + AsRawFd>(fd: T) -> io::Result<AsyncFd<T>> {
    // SAFETY: `fd` is moved into the `AsyncFd`; an `AsFd` value keeps its
    // descriptor open and unchanged until it is dropped, which is when the
    // `AsyncFd` is.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

pub(crate) const fn socklen<T>() -> libc::socklen_t {
    size_of::<T>() as libc::socklen_t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter the way the kernel does, for the frames we care
    /// about (a load past the end drops the frame).
    fn run(filter: &[libc::sock_filter], frame: &[u8]) -> u32 {
        let mut pc = 0;
        let mut a: u32 = 0;
        loop {
            let i = filter[pc];
            match i.code {
                LD_H_ABS | LD_B_ABS => {
                    let k = i.k as usize;
                    let width = if i.code == LD_H_ABS { 2 } else { 1 };
                    let Some(bytes) = frame.get(k..k + width) else {
                        return 0;
                    };
                    a = bytes.iter().fold(0, |acc, b| (acc << 8) | u32::from(*b));
                    pc += 1;
                }
                JEQ_K => {
                    let off = if a == i.k { i.jt } else { i.jf };
                    pc += 1 + usize::from(off);
                }
                RET_K => return i.k,
                other => panic!("opcode {other:#x}"),
            }
        }
    }

    fn frame(ethertype: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0; len];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f
    }

    #[test]
    fn filter_accepts_arp_requests_and_neighbor_solicitations() {
        let mut arp = frame(0x0806, 42);
        arp[20..22].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(run(&FILTER, &arp), 0x40000);
        arp[21] = 2; // reply
        assert_eq!(run(&FILTER, &arp), 0);
        // Too short to hold the operation.
        assert_eq!(run(&FILTER, &arp[..21]), 0);

        let mut ns = frame(0x86dd, 86);
        ns[20] = 58;
        ns[54] = 135;
        assert_eq!(run(&FILTER, &ns), 0x40000);
        ns[54] = 136; // advertisement
        assert_eq!(run(&FILTER, &ns), 0);
        ns[54] = 135;
        ns[20] = 0; // hop-by-hop options first
        assert_eq!(run(&FILTER, &ns), 0);
        assert_eq!(run(&FILTER, &frame(0x0800, 60)), 0);
        assert_eq!(run(&FILTER, &[0; 10]), 0);
    }
}
