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

/// Frames read by one `recvmmsg` ([`PacketSocket::poll_recv_batch`]) and
/// sent by one `sendmmsg` ([`PacketSocket::send_batch`]).
pub(crate) const BATCH: usize = 32;

/// Buffers for [`PacketSocket::poll_recv_batch`]: [`BATCH`] frames of up
/// to [`RECV_BUF`] octets (64 KiB, allocated once).
#[derive(Debug)]
pub(crate) struct RecvBatch {
    bufs: Box<[[u8; RECV_BUF]]>,
    recvs: [Recv; BATCH],
    len: usize,
}

impl RecvBatch {
    pub(crate) fn new() -> Self {
        Self {
            bufs: vec![[0; RECV_BUF]; BATCH].into_boxed_slice(),
            recvs: [Recv {
                len: 0,
                truncated: None,
            }; BATCH],
            len: 0,
        }
    }

    /// The frames of the last read, in order, each with how it was read.
    pub(crate) fn frames(&self) -> impl Iterator<Item = (Recv, &[u8])> + '_ {
        self.recvs
            .iter()
            .zip(self.bufs.iter())
            .take(self.len)
            .map(|(r, b)| (*r, b.get(..r.len).unwrap_or(b)))
    }
}

/// A non-blocking `AF_PACKET` socket on one interface, driven by tokio.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: AsyncFd<OwnedFd>,
    ifindex: u32,
}

/// How one frame of a [`RecvBatch`] was read.
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
        grow_receive_buffer(fd.as_raw_fd());
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

    /// Reads up to [`BATCH`] queued frames into `batch` with one
    /// `recvmmsg`, when at least one is queued; registers the waker
    /// otherwise. Returns how many were read (at least 1).
    pub(crate) fn poll_recv_batch(
        &self,
        cx: &mut Context<'_>,
        batch: &mut RecvBatch,
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match guard.try_io(|fd| recv_batch(fd.as_raw_fd(), batch)) {
                Ok(res) => return Poll::Ready(res),
                Err(_would_block) => {}
            }
        }
    }

    /// Sends whole Ethernet frames on the interface with as few `sendmmsg`
    /// calls as it takes ([`BATCH`] frames each), without waiting. Returns
    /// how many the kernel refused (full transmit queue or other errors),
    /// with the first error.
    pub(crate) fn send_batch<T>(
        &self,
        items: &[T],
        frame: impl Fn(&T) -> &[u8],
    ) -> (usize, Option<io::Error>) {
        let mut refused = 0;
        let mut first = None;
        let mut rest = items;
        while !rest.is_empty() {
            let chunk = rest.get(..BATCH).unwrap_or(rest);
            // `sendmmsg` stops at the first frame it refuses: it returns
            // the count sent before, or the error when it is the first.
            let skip = match send_chunk(self.fd.as_raw_fd(), chunk, &frame) {
                Ok(n) if n > 0 => n,
                Ok(_) => {
                    refused += 1;
                    1
                }
                Err(e) => {
                    refused += 1;
                    first.get_or_insert(e);
                    1
                }
            };
            rest = rest.get(skip..).unwrap_or_default();
        }
        (refused, first)
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

    /// Sets `SO_BUSY_POLL`: a read on an empty queue spins on the device
    /// queue for up to `usec` microseconds (needs `CAP_NET_ADMIN` above
    /// `net.core.busy_read`).
    pub(crate) fn busy_poll(&self, usec: u32) -> io::Result<()> {
        let v = libc::c_int::try_from(usec).unwrap_or(libc::c_int::MAX);
        setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            &v,
        )
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

/// Asks for a [`RCVBUF`] receive queue: past the kernel's
/// `net.core.rmem_max` with `SO_RCVBUFFORCE` when we may (`CAP_NET_ADMIN`),
/// else as much as `SO_RCVBUF` gives. Best effort: the default queue works,
/// it only overflows sooner.
fn grow_receive_buffer(fd: RawFd) {
    let size = libc::c_int::try_from(RCVBUF).unwrap_or(libc::c_int::MAX);
    if setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size).is_err() {
        let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &size);
    }
}

/// The receive queue asked for; the kernel doubles it (its own overhead), so
/// the queue holds 4 MiB of socket memory: about 4,000
/// minimum-size frames (the kernel charges each frame's buffer, about
/// 1 KiB, not its 60 octets), 40 ms of a 100k/s flood, so a responder
/// descheduled for that long on a loaded node loses nothing. The memory
/// is only used while frames wait; the default (`rmem_default`, 208 KiB)
/// held about 2 ms.
const RCVBUF: usize = 2 << 20;

fn recv_batch(fd: RawFd, batch: &mut RecvBatch) -> io::Result<usize> {
    // SAFETY: iovec and mmsghdr are plain old data; all zeroes is valid.
    let mut iovs: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
    for ((iov, msg), buf) in iovs
        .iter_mut()
        .zip(msgs.iter_mut())
        .zip(batch.bufs.iter_mut())
    {
        iov.iov_base = buf.as_mut_ptr().cast();
        iov.iov_len = buf.len();
        msg.msg_hdr.msg_iov = iov;
        msg.msg_hdr.msg_iovlen = 1;
    }
    // MSG_TRUNC: each message's length is the frame's real length, as in
    // `recv`. No timeout: the socket is non-blocking, so this returns what
    // is queued.
    // SAFETY: every msghdr points to one iovec of a live buffer of
    // `RECV_BUF` octets, all valid for writes until the call returns; the
    // count is the arrays' length.
    let n = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            BATCH as libc::c_uint,
            libc::MSG_TRUNC,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        batch.len = 0;
        return Err(io::Error::last_os_error());
    }
    let n = n.unsigned_abs() as usize;
    for (r, msg) in batch.recvs.iter_mut().zip(&msgs).take(n) {
        let len = msg.msg_len as usize;
        *r = if len > RECV_BUF {
            Recv {
                len: RECV_BUF,
                truncated: Some(len),
            }
        } else {
            Recv {
                len,
                truncated: None,
            }
        };
    }
    batch.len = n;
    Ok(n)
}

/// One `sendmmsg` of up to [`BATCH`] frames: how many were sent.
fn send_chunk<T>(fd: RawFd, items: &[T], frame: impl Fn(&T) -> &[u8]) -> io::Result<usize> {
    // SAFETY: iovec and mmsghdr are plain old data; all zeroes is valid.
    let mut iovs: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
    let n = items.len().min(BATCH);
    for ((iov, msg), item) in iovs.iter_mut().zip(msgs.iter_mut()).zip(items) {
        let f = frame(item);
        // The kernel only reads through this pointer.
        iov.iov_base = f.as_ptr().cast_mut().cast();
        iov.iov_len = f.len();
        msg.msg_hdr.msg_iov = iov;
        msg.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: the first `n` msghdrs each point to one iovec of a frame
    // borrowed from `items`, alive until the call returns; the socket is
    // bound, so no destination address is needed.
    let sent =
        unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent.unsigned_abs() as usize)
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
