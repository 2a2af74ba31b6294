//! Interfaces and their addresses from rtnetlink, with change events.
//!
//! The socket is `netlink-sys`'s and the messages are
//! `netlink-packet-route`'s (the design card's packages); this module only
//! registers the socket with tokio, asks for dumps and turns the messages
//! it cares about into [`Event`]s. No `unsafe` here (registering the
//! socket with tokio is [`crate::net::packet_socket`]'s).
//!
//! One socket does both jobs: it is subscribed to the link and address
//! groups, then asked for a dump of links and then of addresses. Dump
//! replies and notifications are the same messages, so the caller treats
//! them alike. If the kernel drops notifications (`ENOBUFS`, the socket
//! buffer overran), [`RouteSocket::poll_recv`] reports [`Event::Resync`] and
//! the caller asks for fresh dumps.
//!
//! Only the kernel speaks on this socket: a datagram whose sender port id
//! is not 0 comes from another process (any local process may unicast to
//! our port id) and is dropped and counted ([`RouteSocket::foreign`]).

use std::io;
use std::net::IpAddr;
use std::task::{Context, Poll};

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkLayerType, LinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use tokio::io::unix::AsyncFd;
use tracing::trace;

use crate::net::packet_socket::register;

/// An interface as rtnetlink describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    /// Interface index.
    pub(crate) index: u32,
    /// Name (`eth0`).
    pub(crate) name: String,
    /// Hardware address, when it is a 6-octet one.
    pub(crate) mac: Option<[u8; 6]>,
    /// Administratively up (`IFF_UP`).
    pub(crate) up: bool,
    /// Operationally up (`IFF_RUNNING`): up, and the link has a carrier.
    pub(crate) running: bool,
    /// The loopback interface (`IFF_LOOPBACK`).
    pub(crate) loopback: bool,
    /// Supports broadcast (`IFF_BROADCAST`).
    pub(crate) broadcast: bool,
    /// Ethernet hardware type (`ARPHRD_ETHER`).
    pub(crate) ethernet: bool,
    /// The bond or bridge this interface is a member of.
    pub(crate) master: Option<u32>,
}

/// An address assigned to an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Addr {
    /// Interface index.
    pub(crate) index: u32,
    /// The local address.
    pub(crate) addr: IpAddr,
    /// Prefix length of its subnet.
    pub(crate) prefix_len: u8,
}

/// What a netlink message said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
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
pub(crate) struct RouteSocket {
    fd: AsyncFd<Socket>,
    seq: u32,
    buf: Vec<u8>,
    foreign: u64,
}

impl RouteSocket {
    /// Opens the socket, subscribed to link, IPv4 and IPv6 address groups.
    /// Must be called inside a tokio runtime.
    pub(crate) fn open() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        // A bigger buffer makes ENOBUFS (and so a resync) rarer when many
        // interfaces change at once; the kernel caps it at rmem_max.
        socket.set_rx_buf_sz::<libc::c_int>(1 << 20)?;
        let groups = libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR;
        socket.bind(&SocketAddr::new(0, groups as u32))?;
        socket.set_non_blocking(true)?;
        Ok(Self {
            fd: register(socket)?,
            seq: 0,
            buf: Vec::with_capacity(RECV_BUF),
            foreign: 0,
        })
    }

    /// Asks for every interface; the answer ends with [`Event::Done`]. One
    /// dump at a time: wait for `Done` before the next.
    pub(crate) fn request_links(&mut self) -> io::Result<()> {
        self.request(RouteNetlinkMessage::GetLink(LinkMessage::default()))
    }

    /// Asks for every address; the answer ends with [`Event::Done`].
    pub(crate) fn request_addrs(&mut self) -> io::Result<()> {
        self.request(RouteNetlinkMessage::GetAddress(AddressMessage::default()))
    }

    /// Datagrams dropped because they did not come from the kernel.
    pub(crate) fn foreign(&self) -> u64 {
        self.foreign
    }

    /// Reads one datagram and parses it into `events`; registers the waker
    /// when nothing is queued.
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        events: &mut Vec<Event>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            self.buf.clear();
            let buf = &mut self.buf;
            match guard.try_io(|fd| fd.get_ref().recv_from(buf, 0)) {
                Ok(Ok((_, from))) => {
                    if !from_kernel(&from) {
                        self.foreign += 1;
                        trace!(
                            port = from.port_number(),
                            "netlink datagram not from the kernel dropped"
                        );
                        continue;
                    }
                    parse(&self.buf, events);
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

    fn request(&mut self, message: RouteNetlinkMessage) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        msg.finalize();
        let mut bytes = vec![0; msg.buffer_len()];
        msg.serialize(&mut bytes);
        // Port id 0: the kernel.
        self.fd
            .get_ref()
            .send_to(&bytes, &SocketAddr::new(0, 0), 0)?;
        Ok(())
    }
}

/// Whether a datagram came from the kernel: sender port id 0. Another
/// process can unicast to our port id, and must not feed us interfaces.
fn from_kernel(from: &SocketAddr) -> bool {
    from.port_number() == 0
}

/// Parses the netlink messages of one datagram. Messages of other types
/// are skipped, and so are broken ones: a length that does not fit ends the
/// datagram.
pub(crate) fn parse(mut data: &[u8], events: &mut Vec<Event>) {
    while let Ok(buffer) = NetlinkBuffer::new_checked(data) {
        let len = buffer.length() as usize;
        match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&data[..len]) {
            Ok(msg) => match msg.payload {
                // An error answer to a dump request ends that dump too.
                NetlinkPayload::Done(_) | NetlinkPayload::Error(_) => events.push(Event::Done),
                NetlinkPayload::InnerMessage(inner) => events.extend(event(inner)),
                _ => {}
            },
            Err(e) => trace!(error = %e, "netlink message skipped"),
        }
        // Messages are 4-aligned; the last one may lack its padding.
        data = data.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
}

fn event(message: RouteNetlinkMessage) -> Option<Event> {
    Some(match message {
        RouteNetlinkMessage::NewLink(link) => Event::NewLink(self::link(link)),
        RouteNetlinkMessage::DelLink(link) => Event::DelLink(link.header.index),
        RouteNetlinkMessage::NewAddress(addr) => Event::NewAddr(self::addr(addr)?),
        RouteNetlinkMessage::DelAddress(addr) => Event::DelAddr(self::addr(addr)?),
        _ => return None,
    })
}

fn link(message: LinkMessage) -> Link {
    let h = message.header;
    let mut link = Link {
        index: h.index,
        name: String::new(),
        mac: None,
        up: h.flags.contains(LinkFlags::Up),
        running: h.flags.contains(LinkFlags::Running),
        loopback: h.flags.contains(LinkFlags::Loopback),
        broadcast: h.flags.contains(LinkFlags::Broadcast),
        ethernet: h.link_layer_type == LinkLayerType::Ether,
        master: None,
    };
    for attr in message.attributes {
        match attr {
            LinkAttribute::Address(mac) => link.mac = mac.as_slice().try_into().ok(),
            LinkAttribute::IfName(name) => link.name = name,
            LinkAttribute::Controller(master) => link.master = Some(master).filter(|m| *m != 0),
            _ => {}
        }
    }
    link
}

fn addr(message: AddressMessage) -> Option<Addr> {
    let (mut address, mut local) = (None, None);
    for attr in message.attributes {
        match attr {
            AddressAttribute::Address(ip) => address = Some(ip),
            AddressAttribute::Local(ip) => local = Some(ip),
            _ => {}
        }
    }
    // IFA_LOCAL is ours; IFA_ADDRESS is the peer on point-to-point links.
    Some(Addr {
        index: message.header.index,
        addr: local.or(address)?,
        prefix_len: message.header.prefix_len,
    })
}

/// Bytes read per datagram: more than a dump part (the kernel fills about
/// a page per datagram).
const RECV_BUF: usize = 32 * 1024;

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use netlink_packet_core::DoneMessage;
    use netlink_packet_route::AddressFamily;

    use super::*;

    fn bytes(payload: NetlinkPayload<RouteNetlinkMessage>) -> Vec<u8> {
        let mut msg = NetlinkMessage::new(NetlinkHeader::default(), payload);
        msg.finalize();
        let mut out = vec![0; msg.buffer_len()];
        msg.serialize(&mut out);
        out
    }

    fn link_msg() -> Vec<u8> {
        let mut link = LinkMessage::default();
        link.header.index = 7;
        link.header.link_layer_type = LinkLayerType::Ether;
        link.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
        link.attributes = vec![
            LinkAttribute::IfName("eth0".into()),
            LinkAttribute::Address(vec![2, 0, 0, 0, 0, 1]),
            LinkAttribute::Controller(9),
        ];
        bytes(NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(
            link,
        )))
    }

    fn addr_msg(
        new: bool,
        family: AddressFamily,
        prefix_len: u8,
        attrs: Vec<AddressAttribute>,
    ) -> Vec<u8> {
        let mut addr = AddressMessage::default();
        addr.header.family = family;
        addr.header.prefix_len = prefix_len;
        addr.header.index = 7;
        addr.attributes = attrs;
        bytes(NetlinkPayload::InnerMessage(if new {
            RouteNetlinkMessage::NewAddress(addr)
        } else {
            RouteNetlinkMessage::DelAddress(addr)
        }))
    }

    #[test]
    fn parses_links_addresses_and_done() {
        let v6: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut data = link_msg();
        data.extend(addr_msg(
            true,
            AddressFamily::Inet,
            24,
            vec![
                AddressAttribute::Address("10.0.0.9".parse().unwrap()),
                AddressAttribute::Local("10.0.0.2".parse().unwrap()),
            ],
        ));
        data.extend(addr_msg(
            false,
            AddressFamily::Inet6,
            64,
            vec![AddressAttribute::Address(v6.into())],
        ));
        data.extend(bytes(NetlinkPayload::Done(DoneMessage::default())));
        let mut events = Vec::new();
        parse(&data, &mut events);
        assert_eq!(
            events,
            [
                Event::NewLink(Link {
                    index: 7,
                    name: "eth0".into(),
                    mac: Some([2, 0, 0, 0, 0, 1]),
                    up: true,
                    running: false,
                    loopback: false,
                    broadcast: true,
                    ethernet: true,
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
    fn only_the_kernel_is_heard() {
        assert!(from_kernel(&SocketAddr::new(0, 0)));
        assert!(!from_kernel(&SocketAddr::new(4242, 0)));
    }

    /// A process that unicasts a fake RTM_NEWLINK to our port id is
    /// ignored and counted; the kernel's dump after it is heard.
    #[tokio::test]
    async fn a_message_from_another_process_is_dropped() {
        let mut ours = RouteSocket::open().unwrap();
        let mut port = SocketAddr::new(0, 0);
        ours.fd.get_ref().get_address(&mut port).unwrap();
        let mut liar = Socket::new(NETLINK_ROUTE).unwrap();
        liar.bind_auto().unwrap();
        let mut fake = LinkMessage::default();
        fake.header.index = 0xdead;
        fake.header.link_layer_type = LinkLayerType::Ether;
        fake.attributes = vec![LinkAttribute::IfName("fake0".into())];
        let msg = bytes(NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(
            fake,
        )));
        liar.send_to(&msg, &SocketAddr::new(port.port_number(), 0), 0)
            .unwrap();
        // Queued behind the fake: the kernel's answer to a dump.
        ours.request_links().unwrap();
        let mut events = Vec::new();
        while !events.contains(&Event::Done) {
            std::future::poll_fn(|cx| ours.poll_recv(cx, &mut events))
                .await
                .unwrap();
        }
        assert_eq!(ours.foreign(), 1);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::NewLink(l) if l.loopback))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::NewLink(l) if l.index == 0xdead))
        );
    }
}
