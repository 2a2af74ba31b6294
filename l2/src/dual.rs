//! One entry point for both address families: an IPv4 and an IPv6
//! [`Responder`] behind one API that takes `IpAddr`s and whole frames, so a
//! driver never branches on the family.
//!
//! Pure like the responders: no I/O, no clock. Frames are handed to the
//! protocol whose EtherType they carry ([`Protocol::ETHERTYPE`] of the IPv6
//! protocol); every other frame goes to the IPv4 protocol, which counts it
//! as not its own (the driver's socket filter passes ARP and IPv6 only).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use crate::announce::{self, Config, Error};
use crate::ethernet::{self, EthernetAddress};
use crate::responder::{AsFrame, IpCounters, Output as ProtocolOutput, Protocol, Responder, Stats};

/// An IPv4 and an IPv6 responder that share interfaces and configuration.
/// `V4` is ARP and `V6` NDP in the speaker.
#[derive(Debug, Clone)]
pub struct DualStack<V4: Protocol<Addr = Ipv4Addr>, V6: Protocol<Addr = Ipv6Addr>> {
    v4: Responder<V4>,
    v6: Responder<V6>,
}

/// A frame from one of the two protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transmit<A, B> {
    /// From the IPv4 protocol.
    V4(A),
    /// From the IPv6 protocol.
    V6(B),
}

impl<A: AsFrame, B: AsFrame> AsFrame for Transmit<A, B> {
    fn ifindex(&self) -> u32 {
        match self {
            Self::V4(t) => t.ifindex(),
            Self::V6(t) => t.ifindex(),
        }
    }

    fn frame(&self) -> &[u8] {
        match self {
            Self::V4(t) => t.frame(),
            Self::V6(t) => t.frame(),
        }
    }
}

/// The timer of an announcement burst of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// An IPv4 burst.
    V4(announce::Timer<Ipv4Addr>),
    /// An IPv6 burst.
    V6(announce::Timer<Ipv6Addr>),
}

/// Something the driver must do, from [`DualStack::poll_output`].
pub type Output<V4, V6> =
    ProtocolOutput<Transmit<<V4 as Protocol>::Transmit, <V6 as Protocol>::Transmit>, Timer>;

impl<V4: Protocol<Addr = Ipv4Addr>, V6: Protocol<Addr = Ipv6Addr>> DualStack<V4, V6> {
    /// Responders that announce nothing yet.
    pub fn new(config: Config) -> Self {
        Self {
            v4: Responder::new(config),
            v6: Responder::new(config),
        }
    }

    /// Sets the MAC address of `ifindex` for both families (see
    /// [`Responder::set_interface`]). Drain
    /// [`poll_output`](Self::poll_output) afterwards.
    pub fn set_interface(
        &mut self,
        now: Instant,
        ifindex: u32,
        mac: EthernetAddress,
    ) -> Result<(), Error> {
        // Both check the MAC alike: the first refuses or neither does.
        self.v4.set_interface(now, ifindex, mac)?;
        self.v6.set_interface(now, ifindex, mac)
    }

    /// Forgets `ifindex` and withdraws every address on it.
    pub fn remove_interface(&mut self, ifindex: u32) {
        self.v4.remove_interface(ifindex);
        self.v6.remove_interface(ifindex);
    }

    /// Answers for `ip` on `ifindex` from now on (see
    /// [`Responder::announce`]). Drain [`poll_output`](Self::poll_output)
    /// afterwards.
    pub fn announce(&mut self, now: Instant, ip: IpAddr, ifindex: u32) -> Result<(), Error> {
        match ip {
            IpAddr::V4(ip) => self.v4.announce(now, ip, ifindex),
            IpAddr::V6(ip) => self.v6.announce(now, ip, ifindex),
        }
    }

    /// Stops answering for `ip` on `ifindex`; returns whether it was
    /// announced. Drain [`poll_output`](Self::poll_output) afterwards.
    pub fn withdraw(&mut self, ip: IpAddr, ifindex: u32) -> bool {
        match ip {
            IpAddr::V4(ip) => self.v4.withdraw(ip, ifindex),
            IpAddr::V6(ip) => self.v6.withdraw(ip, ifindex),
        }
    }

    /// Whether `ip` is announced on `ifindex`.
    pub fn is_announced(&self, ip: IpAddr, ifindex: u32) -> bool {
        match ip {
            IpAddr::V4(ip) => self.v4.is_announced(ip, ifindex),
            IpAddr::V6(ip) => self.v6.is_announced(ip, ifindex),
        }
    }

    /// Call with every frame received on `ifindex`; returns the answer to
    /// send back, if the frame is a request we answer.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        ifindex: u32,
        frame: &[u8],
    ) -> Option<Transmit<V4::Transmit, V6::Transmit>> {
        if ethernet::ethertype_of(frame) == Some(V6::ETHERTYPE) {
            self.v6.handle_frame(now, ifindex, frame).map(Transmit::V6)
        } else {
            self.v4.handle_frame(now, ifindex, frame).map(Transmit::V4)
        }
    }

    /// Call when a timer from [`ProtocolOutput::Arm`] expires. Drain
    /// [`poll_output`](Self::poll_output) afterwards.
    pub fn handle_timer(&mut self, now: Instant, timer: Timer) {
        match timer {
            Timer::V4(t) => self.v4.handle_timer(now, t),
            Timer::V6(t) => self.v6.handle_timer(now, t),
        }
    }

    /// The next thing to do, IPv4's first; call after every other call
    /// until it returns `None`.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output<V4, V6>> {
        if let Some(out) = self.v4.poll_output() {
            return Some(map(out, Transmit::V4, Timer::V4));
        }
        self.v6
            .poll_output()
            .map(|out| map(out, Transmit::V6, Timer::V6))
    }

    /// The IPv4 protocol's counters.
    pub fn v4_stats(&self) -> &Stats<V4::Drop> {
        self.v4.stats()
    }

    /// The IPv6 protocol's counters.
    pub fn v6_stats(&self) -> &Stats<V6::Drop> {
        self.v6.stats()
    }

    /// The counters of every address ever announced, IPv4 first, each
    /// family in address order.
    pub fn ip_counters(&self) -> impl Iterator<Item = (IpAddr, IpCounters)> + '_ {
        let v4 = self.v4.ip_counters().iter().map(|(a, c)| ((*a).into(), *c));
        let v6 = self.v6.ip_counters().iter().map(|(a, c)| ((*a).into(), *c));
        v4.chain(v6)
    }
}

fn map<T, K, U, L>(
    out: ProtocolOutput<T, K>,
    transmit: impl FnOnce(T) -> U,
    timer: impl FnOnce(K) -> L,
) -> ProtocolOutput<U, L> {
    match out {
        ProtocolOutput::Transmit(t) => ProtocolOutput::Transmit(transmit(t)),
        ProtocolOutput::Arm { at, timer: k } => ProtocolOutput::Arm {
            at,
            timer: timer(k),
        },
        ProtocolOutput::Join { ifindex, group } => ProtocolOutput::Join { ifindex, group },
        ProtocolOutput::Leave { ifindex, group } => ProtocolOutput::Leave { ifindex, group },
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;
    use crate::announce::{Announced, Round};
    use crate::ethernet::EtherType;
    use crate::responder::{Reason, Transmit as Frame};

    /// Answers a frame of its EtherType when any address is announced on
    /// the interface; announces with one frame holding the address's last
    /// octet.
    #[derive(Debug)]
    struct Toy<A>(std::marker::PhantomData<A>);

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Why {
        NotOurs,
    }

    impl fmt::Display for Why {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("not_ours")
        }
    }

    impl Reason for Why {
        type Counters = [u64; 1];
        const ALL: &'static [Self] = &[Self::NotOurs];
        fn index(self) -> usize {
            0
        }
    }

    trait Last: Copy {
        fn last(self) -> u8;
    }
    impl Last for Ipv4Addr {
        fn last(self) -> u8 {
            self.octets()[3]
        }
    }
    impl Last for Ipv6Addr {
        fn last(self) -> u8 {
            self.octets()[15]
        }
    }

    macro_rules! toy {
        ($addr:ty, $ethertype:expr) => {
            impl Protocol for Toy<$addr> {
                type Addr = $addr;
                type Transmit = Frame<1>;
                type Drop = Why;
                const ETHERTYPE: EtherType = $ethertype;

                fn answer(
                    announced: &Announced<$addr>,
                    ifindex: u32,
                    _frame: &[u8],
                ) -> Result<($addr, Frame<1>), Why> {
                    announced
                        .iter()
                        .find(|(_, i)| *i == ifindex)
                        .map(|(a, _)| {
                            (
                                a,
                                Frame {
                                    ifindex,
                                    frame: [a.last()],
                                },
                            )
                        })
                        .ok_or(Why::NotOurs)
                }

                fn announcements(round: &Round<$addr>, send: &mut dyn FnMut(Frame<1>)) {
                    send(Frame {
                        ifindex: round.ifindex,
                        frame: [round.addr.last()],
                    });
                }
            }
        };
    }
    toy!(Ipv4Addr, EtherType::Arp);
    toy!(Ipv6Addr, EtherType::Ipv6);

    type Dual = DualStack<Toy<Ipv4Addr>, Toy<Ipv6Addr>>;

    const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);

    fn frame(ethertype: [u8; 2]) -> [u8; 14] {
        let mut f = [0; 14];
        f[12..].copy_from_slice(&ethertype);
        f
    }

    #[test]
    fn one_api_for_both_families() {
        let t0 = Instant::now();
        let mut d = Dual::new(Config::default());
        d.set_interface(t0, 1, MAC).unwrap();
        let v4: IpAddr = "192.0.2.4".parse().unwrap();
        let v6: IpAddr = "2001:db8::6".parse().unwrap();
        d.announce(t0, v4, 1).unwrap();
        d.announce(t0, v6, 1).unwrap();
        assert!(d.is_announced(v4, 1) && d.is_announced(v6, 1));
        // IPv4's outputs first, each with its own timer kind.
        let outs: Vec<_> = std::iter::from_fn(|| d.poll_output()).collect();
        let [
            ProtocolOutput::Transmit(a),
            ProtocolOutput::Arm {
                timer: Timer::V4(t4),
                ..
            },
            ProtocolOutput::Transmit(b),
            ProtocolOutput::Arm {
                timer: Timer::V6(t6),
                at,
            },
        ] = outs[..]
        else {
            panic!("unexpected outputs {outs:?}")
        };
        assert_eq!((a.ifindex(), a.frame()), (1, &[4][..]));
        assert_eq!((b.ifindex(), b.frame()), (1, &[6][..]));
        d.handle_timer(at, Timer::V6(t6));
        assert!(matches!(
            d.poll_output(),
            Some(ProtocolOutput::Transmit(Transmit::V6(_)))
        ));
        assert_eq!(t4.addr(), Ipv4Addr::new(192, 0, 2, 4));
        assert_eq!(t6.ifindex(), 1);
        // Frames go by EtherType: IPv6 to V6, everything else to V4.
        let reply = d.handle_frame(t0, 1, &frame([0x86, 0xdd])).unwrap();
        assert_eq!(reply.frame(), [6]);
        let reply = d.handle_frame(t0, 1, &frame([0x08, 0x06])).unwrap();
        assert_eq!(reply.frame(), [4]);
        assert!(matches!(
            d.handle_frame(t0, 1, &[0; 3]),
            Some(Transmit::V4(_))
        ));
        assert_eq!(d.v4_stats().responses_sent, 2);
        // Per address, both families, IPv4 first.
        let per_ip: Vec<_> = d
            .ip_counters()
            .map(|(a, c)| (a, c.responses_sent, c.gratuitous_sent))
            .collect();
        assert_eq!(per_ip, [(v4, 2, 1), (v6, 1, 2)]);
        assert_eq!(d.v6_stats().responses_sent, 1);
        assert!(d.withdraw(v6, 1));
        assert!(!d.withdraw(v6, 1));
        assert_eq!(d.handle_frame(t0, 1, &frame([0x86, 0xdd])), None);
        assert_eq!(d.v6_stats().dropped(Why::NotOurs), 1);
        d.remove_interface(1);
        assert!(!d.is_announced(v4, 1));
        assert_eq!(
            d.set_interface(t0, 2, EthernetAddress::BROADCAST),
            Err(Error::NotUnicast(EthernetAddress::BROADCAST))
        );
    }
}
