//! The router-discovery side of BGP unnumbered peering, for one interface:
//! learn the neighbor's IPv6 link-local address from its Router
//! Advertisements, and advertise ourselves so it learns ours.
//!
//! FRR's `neighbor IFACE interface` works the same way: zebra sends RAs on
//! the interface and takes the source of the RAs it receives there as the
//! BGP neighbor's address. [`Link`] is that logic without I/O or clock: the
//! driver passes in the ICMPv6 messages its raw socket receives (with
//! their source and hop limit), the interface's up/down changes and the
//! time, and takes out the messages to send and the neighbor address
//! changes ([`Output`]). STYLE §3: `handle_*` in, `poll_*` out.
//!
//! What it sends: on link up, a Router Solicitation (a router answers with
//! an RA at once, RFC 4861 §6.2.6) and an RA; then RAs every
//! [`LinkConfig::fast_interval`] for the first [`LinkConfig::fast_count`],
//! every [`LinkConfig::interval`] after (as RFC 4861 §6.2.4's initial
//! advertisements). A new neighbor, or a solicitation, gets an RA at once,
//! at most one per [`MIN_DELAY_BETWEEN_RAS`], so the router learns our
//! address as soon as we learn its. Our RAs have a router lifetime of 0:
//! a load balancer is not anybody's default router (RFC 4861 §6.2.3).

use std::collections::VecDeque;
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use l2::EthernetAddress;
use tracing::{debug, trace};

use crate::wire::icmpv6::Packet;
use crate::wire::router::{self, Repr, RouterFlags};
use crate::wire::{ALL_NODES, HOP_LIMIT};

/// The link-local all-routers multicast address, where solicitations go.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// Shortest time between two RAs we send on the link, except the
/// scheduled ones (RFC 4861 §10 `MIN_DELAY_BETWEEN_RAS`).
pub const MIN_DELAY_BETWEEN_RAS: Duration = Duration::from_secs(3);

/// How one interface advertises itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// Our MAC, sent as the Source Link-layer Address option (so the
    /// router needs no Neighbor Solicitation to reach us).
    pub lladdr: Option<EthernetAddress>,
    /// Time between RAs once the first ones are sent (FRR's BGP
    /// unnumbered default is 10 s).
    pub interval: Duration,
    /// Time between the first RAs.
    pub fast_interval: Duration,
    /// How many RAs go at `fast_interval` after the link comes up.
    pub fast_count: u32,
}

impl Default for LinkConfig {
    /// FRR's figures: 10 s, after 3 at 1 s (RFC 4861's
    /// `MAX_INITIAL_RTR_ADVERTISEMENTS`).
    fn default() -> Self {
        Self {
            lladdr: None,
            interval: Duration::from_secs(10),
            fast_interval: Duration::from_secs(1),
            fast_count: 3,
        }
    }
}

/// What the driver must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Send `message` to `dst` (ff02::1 or ff02::2) on the interface, with
    /// hop limit 255, from the interface's link-local address.
    Send {
        /// The IPv6 destination.
        dst: Ipv6Addr,
        /// The RS or RA.
        message: Repr,
    },
    /// The neighbor's address changed: `Some` learned (or replaced),
    /// `None` gone (the link went down).
    Neighbor(Option<Ipv6Addr>),
}

/// Why a received message was not used; the driver logs it at `trace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Ignored {
    /// Not a valid RS or RA.
    #[error(transparent)]
    Malformed(#[from] router::Error),
    /// Hop limit below 255: it may come from off-link (RFC 4861 §6.1).
    #[error("hop limit {0}, not 255")]
    HopLimit(u8),
    /// An RA's source must be link-local (RFC 4861 §6.1.2), and only a
    /// link-local address can be the neighbor of an unnumbered session.
    #[error("source {0} is not link-local")]
    NotLinkLocal(Ipv6Addr),
    /// The link is down: nothing is learned.
    #[error("link down")]
    LinkDown,
}

/// One interface's router discovery (see the module docs).
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    up: bool,
    neighbor: Option<Ipv6Addr>,
    /// When the next scheduled RA goes.
    next_ra: Option<Instant>,
    /// Scheduled RAs sent since the link came up.
    sent: u32,
    /// The last RA sent, scheduled or not.
    last_ra: Option<Instant>,
    out: VecDeque<Output>,
}

impl Link {
    /// A link that is down, with no neighbor; call
    /// [`handle_up`](Self::handle_up) when the interface is up.
    #[must_use]
    pub fn new(config: LinkConfig) -> Self {
        Self {
            config,
            up: false,
            neighbor: None,
            next_ra: None,
            sent: 0,
            last_ra: None,
            out: VecDeque::new(),
        }
    }

    /// The interface is up (or its MAC changed): solicit, advertise at
    /// once, and restart the schedule. Calling it again while up restarts
    /// the schedule too.
    pub fn handle_up(&mut self, now: Instant, lladdr: Option<EthernetAddress>) {
        self.config.lladdr = lladdr;
        self.up = true;
        self.sent = 0;
        self.out.push_back(Output::Send {
            dst: ALL_ROUTERS,
            message: Repr::RouterSolicit { lladdr },
        });
        self.send_ra(now);
        self.schedule(now);
    }

    /// The interface is down: the neighbor is forgotten (a session over
    /// it cannot live), nothing is sent until it is up again.
    pub fn handle_down(&mut self) {
        self.up = false;
        self.next_ra = None;
        self.set_neighbor(None);
    }

    /// A Router Solicitation or Advertisement the raw socket received on
    /// the interface, from `src` with `hop_limit`. An RA from a link-local
    /// address makes its source the neighbor; an RS is answered.
    ///
    /// # Errors
    /// Why the message was dropped; nothing changed then.
    pub fn handle_message(
        &mut self,
        now: Instant,
        src: Ipv6Addr,
        hop_limit: u8,
        message: &[u8],
    ) -> Result<(), Ignored> {
        if !self.up {
            return Err(Ignored::LinkDown);
        }
        if hop_limit != HOP_LIMIT {
            return Err(Ignored::HopLimit(hop_limit));
        }
        let repr = Repr::parse(&Packet::new_unchecked(message))?;
        if !src.is_unicast_link_local() {
            return Err(Ignored::NotLinkLocal(src));
        }
        match repr {
            Repr::RouterAdvert { .. } => {
                let new = self.neighbor != Some(src);
                self.set_neighbor(Some(src));
                if new {
                    self.answer(now);
                }
            }
            Repr::RouterSolicit { .. } => self.answer(now),
        }
        Ok(())
    }

    /// Sends the scheduled RA when it is due; spurious calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_ra.is_some_and(|at| at <= now) {
            self.send_ra(now);
            self.schedule(now);
        }
    }

    /// The next output; call after every `handle_*` until `None`.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_ra
    }

    /// The neighbor's link-local address, once learned.
    #[must_use]
    pub fn neighbor(&self) -> Option<Ipv6Addr> {
        self.neighbor
    }

    /// An RA now, unless one went less than [`MIN_DELAY_BETWEEN_RAS`] ago
    /// (the schedule sends the next soon enough).
    fn answer(&mut self, now: Instant) {
        let recent = self
            .last_ra
            .is_some_and(|at| now.saturating_duration_since(at) < MIN_DELAY_BETWEEN_RAS);
        if recent {
            trace!("ra not sent: one went less than 3 s ago");
        } else {
            self.send_ra(now);
        }
    }

    fn send_ra(&mut self, now: Instant) {
        self.last_ra = Some(now);
        self.out.push_back(Output::Send {
            dst: ALL_NODES,
            message: Repr::RouterAdvert {
                hop_limit: 0,
                flags: RouterFlags::EMPTY,
                router_lifetime: Duration::ZERO,
                reachable_time: Duration::ZERO,
                retrans_time: Duration::ZERO,
                lladdr: self.config.lladdr,
            },
        });
    }

    /// Counts the scheduled RA just sent and sets the next.
    fn schedule(&mut self, now: Instant) {
        self.sent = self.sent.saturating_add(1);
        let gap = if self.sent < self.config.fast_count {
            self.config.fast_interval
        } else {
            self.config.interval
        };
        self.next_ra = Some(now + gap);
    }

    fn set_neighbor(&mut self, addr: Option<Ipv6Addr>) {
        if self.neighbor != addr {
            debug!(from = ?self.neighbor, to = ?addr, "unnumbered neighbor");
            self.neighbor = addr;
            self.out.push_back(Output::Neighbor(addr));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const FRR: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xa);
    const OTHER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xb);
    const GLOBAL: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xa);

    fn bytes(repr: Repr) -> Vec<u8> {
        let mut v = vec![0; repr.buffer_len()];
        repr.emit(FRR, ALL_NODES, &mut Packet::new_unchecked(&mut v[..]));
        v
    }

    fn ra() -> Vec<u8> {
        bytes(Repr::RouterAdvert {
            hop_limit: 64,
            flags: RouterFlags::EMPTY,
            router_lifetime: Duration::from_secs(1800),
            reachable_time: Duration::ZERO,
            retrans_time: Duration::ZERO,
            lladdr: None,
        })
    }

    fn rs() -> Vec<u8> {
        bytes(Repr::RouterSolicit { lladdr: None })
    }

    /// The outputs, with our RAs and RSs written as "ra" and "rs".
    fn drain(l: &mut Link) -> Vec<String> {
        std::iter::from_fn(|| l.poll_output())
            .map(|o| match o {
                Output::Send {
                    dst,
                    message: Repr::RouterAdvert { lladdr, .. },
                } => {
                    assert_eq!(dst, ALL_NODES);
                    assert_eq!(lladdr, Some(MAC));
                    "ra".to_owned()
                }
                Output::Send {
                    dst,
                    message: Repr::RouterSolicit { .. },
                } => {
                    assert_eq!(dst, ALL_ROUTERS);
                    "rs".to_owned()
                }
                Output::Neighbor(n) => format!("neighbor {n:?}"),
            })
            .collect()
    }

    enum Step {
        Up,
        Down,
        Msg(Ipv6Addr, u8, Vec<u8>),
        Timeout,
    }

    /// At `ms` after the start, a step, the outputs it gives and the
    /// result of a received message.
    type Row = (u64, Step, &'static [&'static str], Result<(), Ignored>);

    /// Table: named scenarios of [`Row`]s.
    #[test]
    fn learning_and_advertising() {
        use Step::*;
        let cases: Vec<(&str, Vec<Row>)> = vec![
            (
                "ra learns the neighbor and is answered at once",
                vec![
                    (0, Up, &["rs", "ra"], Ok(())),
                    (
                        3_500,
                        Msg(FRR, 255, ra()),
                        &["neighbor Some(fe80::a)", "ra"],
                        Ok(()),
                    ),
                    // The same neighbor again: nothing new.
                    (3_600, Msg(FRR, 255, ra()), &[], Ok(())),
                ],
            ),
            (
                "a new neighbor within 3 s of our last ra waits for the schedule",
                vec![
                    (0, Up, &["rs", "ra"], Ok(())),
                    (
                        100,
                        Msg(FRR, 255, ra()),
                        &["neighbor Some(fe80::a)"],
                        Ok(()),
                    ),
                    (1_000, Timeout, &["ra"], Ok(())),
                ],
            ),
            (
                "another router replaces the neighbor",
                vec![
                    (0, Up, &["rs", "ra"], Ok(())),
                    (
                        100,
                        Msg(FRR, 255, ra()),
                        &["neighbor Some(fe80::a)"],
                        Ok(()),
                    ),
                    (
                        5_000,
                        Msg(OTHER, 255, ra()),
                        &["neighbor Some(fe80::b)", "ra"],
                        Ok(()),
                    ),
                ],
            ),
            (
                "a solicitation is answered, rate limited",
                vec![
                    (0, Up, &["rs", "ra"], Ok(())),
                    (500, Msg(FRR, 255, rs()), &[], Ok(())),
                    (3_000, Msg(FRR, 255, rs()), &["ra"], Ok(())),
                ],
            ),
            (
                "off-link, global or malformed messages teach nothing",
                vec![
                    (0, Up, &["rs", "ra"], Ok(())),
                    (10, Msg(FRR, 64, ra()), &[], Err(Ignored::HopLimit(64))),
                    (
                        20,
                        Msg(GLOBAL, 255, ra()),
                        &[],
                        Err(Ignored::NotLinkLocal(GLOBAL)),
                    ),
                    (
                        30,
                        Msg(FRR, 255, ra()[..10].to_vec()),
                        &[],
                        Err(Ignored::Malformed(router::Error::Truncated {
                            len: 10,
                            need: 16,
                        })),
                    ),
                ],
            ),
            (
                "link down forgets the neighbor; up solicits again",
                vec![
                    (0, Up, &["rs", "ra"], Ok(())),
                    (
                        100,
                        Msg(FRR, 255, ra()),
                        &["neighbor Some(fe80::a)"],
                        Ok(()),
                    ),
                    (200, Down, &["neighbor None"], Ok(())),
                    (300, Msg(FRR, 255, ra()), &[], Err(Ignored::LinkDown)),
                    (400, Timeout, &[], Ok(())),
                    (5_000, Up, &["rs", "ra"], Ok(())),
                    (
                        5_100,
                        Msg(FRR, 255, ra()),
                        &["neighbor Some(fe80::a)"],
                        Ok(()),
                    ),
                ],
            ),
        ];
        for (name, steps) in cases {
            let t0 = Instant::now();
            let mut l = Link::new(LinkConfig::default());
            for (ms, step, want, result) in steps {
                let now = t0 + Duration::from_millis(ms);
                let got = match step {
                    Up => {
                        l.handle_up(now, Some(MAC));
                        Ok(())
                    }
                    Down => {
                        l.handle_down();
                        Ok(())
                    }
                    Msg(src, hop, m) => l.handle_message(now, src, hop, &m),
                    Timeout => {
                        l.handle_timeout(now);
                        Ok(())
                    }
                };
                assert_eq!(got, result, "{name}, at {ms} ms");
                assert_eq!(drain(&mut l), want, "{name}, at {ms} ms");
            }
        }
    }

    #[test]
    fn schedule_is_fast_then_steady() {
        let t0 = Instant::now();
        let mut l = Link::new(LinkConfig::default());
        assert_eq!(l.poll_timeout(), None);
        l.handle_up(t0, Some(MAC));
        let mut at = Vec::new();
        let mut now = t0;
        for _ in 0..5 {
            now = l.poll_timeout().unwrap();
            // Early calls do nothing.
            l.handle_timeout(now - Duration::from_millis(1));
            let _ = drain(&mut l);
            l.handle_timeout(now);
            assert_eq!(drain(&mut l), ["ra"]);
            at.push(now.duration_since(t0).as_secs());
        }
        // The first RA went with link up; two more at 1 s, then every 10 s.
        assert_eq!(at, [1, 2, 12, 22, 32]);
        l.handle_down();
        assert_eq!(l.poll_timeout(), None);
        l.handle_timeout(now + Duration::from_secs(60));
        assert!(drain(&mut l).is_empty());
    }
}
