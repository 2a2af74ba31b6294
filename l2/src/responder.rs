//! The responder shell shared by ARP and NDP: the announced set, the
//! output queue, multicast group bookkeeping and the counters. A
//! [`Protocol`] adds what differs: how a frame is answered and which frames
//! announce an address.
//!
//! Pure: no I/O, no clock (`now` is passed in). The driver hands received
//! frames to [`Responder::handle_frame`] and drains
//! [`Responder::poll_output`] after every call.
//!
//! Counters per announced address ([`IpCounters`], MetalLB's `ip` label)
//! are kept in a map whose entry is made when the address is first
//! announced, so a frame costs one lookup and one increment, never an
//! allocation. Entries stay after a withdrawal: a counter never goes back
//! (MetalLB's never drop a label either), and the map holds one entry per
//! address this node ever announced.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::time::Instant;

use tracing::trace;

use crate::announce::{Announced, Config, Error, Round, Timer};
use crate::ethernet::{EtherType, EthernetAddress, Frame};
use crate::limit::Limiter;

/// What a link-layer responder protocol (ARP for IPv4, NDP for IPv6) adds
/// to the shared [`Responder`]: how a received frame is answered, which
/// frames announce an address, and which multicast group asks for it. The
/// announced set, the bursts, the output queue and the counters are the
/// shell's.
pub trait Protocol {
    /// The protocol address (IPv4 or IPv6).
    type Addr: Copy + Eq + Hash + Ord + fmt::Display;
    /// A frame to send on an interface.
    type Transmit: AsFrame;
    /// Why a frame got no answer.
    type Drop: Reason;

    /// The EtherType of the frames this protocol answers; the dual-stack
    /// shell ([`crate::DualStack`]) hands frames of this type to it.
    const ETHERTYPE: EtherType;

    /// The answer to a frame received on `ifindex`, with the announced
    /// address it answers for, or why there is none.
    fn answer(
        announced: &Announced<Self::Addr>,
        ifindex: u32,
        frame: &[u8],
    ) -> Result<(Self::Addr, Self::Transmit), Self::Drop>;

    /// Hands the frames of one announcement round to `send`.
    fn announcements(round: &Round<Self::Addr>, send: &mut dyn FnMut(Self::Transmit));

    /// The Ethernet multicast group requests for `addr` are sent to, when
    /// the driver must join one to hear them (NDP's solicited-node groups,
    /// RFC 4861 §7.2.1); `None` when requests are broadcast (ARP).
    fn group(addr: Self::Addr) -> Option<EthernetAddress> {
        let _ = addr;
        None
    }
}

/// A frame to send, as the driver needs it.
pub trait AsFrame: Copy + fmt::Debug {
    /// The interface to send on.
    fn ifindex(&self) -> u32;
    /// The whole Ethernet frame.
    fn frame(&self) -> &[u8];
}

/// A frame of exactly `N` octets to send on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<const N: usize> {
    /// The interface to send on.
    pub ifindex: u32,
    /// The whole Ethernet frame (no padding: the NIC pads short frames).
    pub frame: [u8; N],
}

impl<const N: usize> AsFrame for Transmit<N> {
    fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn frame(&self) -> &[u8] {
        &self.frame
    }
}

/// Why a received frame got no answer: a fieldless enum whose variants
/// index one counter each in [`Stats`].
pub trait Reason: Copy + Eq + Hash + fmt::Debug + fmt::Display + 'static {
    /// One counter per reason: `[u64; number of reasons]`.
    type Counters: AsRef<[u64]> + AsMut<[u64]> + Copy + Default + Eq + fmt::Debug;
    /// Every reason, in [`index`](Self::index) order.
    const ALL: &'static [Self];
    /// The position of this reason's counter, below `ALL.len()`.
    fn index(self) -> usize;
}

/// Counters for metrics; they only grow (wrapping at `u64::MAX`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Stats<R: Reason> {
    /// Requests for an address we announce on that interface (MetalLB's
    /// `metallb_layer2_requests_received`).
    pub requests_received: u64,
    /// Answers returned by `handle_frame` (MetalLB's
    /// `metallb_layer2_responses_sent`).
    pub responses_sent: u64,
    /// Announcement frames emitted (gratuitous ARP, unsolicited NA).
    pub announcements_sent: u64,
    /// Requests we would have answered, dropped because their sender was
    /// over its budget ([`crate::limit`]); not in `requests_received`.
    pub rate_limited: u64,
    dropped: R::Counters,
}

impl<R: Reason> Stats<R> {
    /// The drop counter for `reason`.
    pub fn dropped(&self, reason: R) -> u64 {
        self.dropped
            .as_ref()
            .get(reason.index())
            .copied()
            .unwrap_or(0)
    }

    /// Frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped
            .as_ref()
            .iter()
            .fold(0, |sum, n| sum.wrapping_add(*n))
    }

    /// Every reason with its counter, in [`Reason::ALL`] order.
    pub fn drops(&self) -> impl Iterator<Item = (R, u64)> + '_ {
        R::ALL.iter().map(|r| (*r, self.dropped(*r)))
    }

    fn count_drop(&mut self, reason: R) {
        if let Some(n) = self.dropped.as_mut().get_mut(reason.index()) {
            *n = n.wrapping_add(1);
        }
    }
}

/// The counters of one announced address (MetalLB's layer 2 counters,
/// label `ip`); they only grow (wrapping at `u64::MAX`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpCounters {
    /// Requests for this address answered
    /// (`metallb_layer2_requests_received`).
    pub requests_received: u64,
    /// Answers sent for it (`metallb_layer2_responses_sent`).
    pub responses_sent: u64,
    /// Announcement frames sent for it (`metallb_layer2_gratuitous_sent`).
    pub gratuitous_sent: u64,
}

impl<R: Reason> Default for Stats<R> {
    fn default() -> Self {
        Self {
            requests_received: 0,
            responses_sent: 0,
            announcements_sent: 0,
            rate_limited: 0,
            dropped: R::Counters::default(),
        }
    }
}

impl<R: Reason> fmt::Debug for Stats<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Stats");
        s.field("requests_received", &self.requests_received)
            .field("responses_sent", &self.responses_sent)
            .field("announcements_sent", &self.announcements_sent)
            .field("rate_limited", &self.rate_limited);
        for (reason, n) in self.drops() {
            s.field(&format!("dropped {reason}"), &n);
        }
        s.finish()
    }
}

/// Something the driver must do, from [`Responder::poll_output`]; `K` is
/// the timer type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output<T, K> {
    /// Send this frame.
    Transmit(T),
    /// Call `handle_timer` with `timer` at `at`. Timers are not cancelled:
    /// a stale one is ignored when it comes back.
    Arm {
        /// When to hand the timer back.
        at: Instant,
        /// The timer.
        timer: K,
    },
    /// Receive frames sent to the Ethernet multicast `group` on `ifindex`
    /// from now on: an announced address is asked for there.
    Join {
        /// The interface.
        ifindex: u32,
        /// The group's Ethernet address.
        group: EthernetAddress,
    },
    /// No announced address on `ifindex` is asked for at `group` any more.
    Leave {
        /// The interface.
        ifindex: u32,
        /// The group's Ethernet address.
        group: EthernetAddress,
    },
}

/// The responder of one node for one protocol: which addresses it answers
/// for on which interfaces, the announcement bursts under way and the
/// multicast groups those addresses need. Sans-IO: the driver passes `now`,
/// hands received frames to [`handle_frame`](Self::handle_frame) and drains
/// [`poll_output`](Self::poll_output) after every call.
#[derive(Debug, Clone)]
pub struct Responder<P: Protocol> {
    announced: Announced<P::Addr>,
    outputs: VecDeque<Output<P::Transmit, Timer<P::Addr>>>,
    /// Groups joined per interface, with how many addresses need each.
    groups: HashMap<(u32, EthernetAddress), u32>,
    stats: Stats<P::Drop>,
    /// Per address ever announced; made by `announce`, never removed.
    per_ip: BTreeMap<P::Addr, IpCounters>,
    limiter: Option<Limiter>,
}

impl<P: Protocol> Responder<P> {
    /// A responder that announces nothing yet.
    pub fn new(config: Config) -> Self {
        Self {
            announced: Announced::new(config.burst),
            outputs: VecDeque::new(),
            groups: HashMap::new(),
            stats: Stats::default(),
            per_ip: BTreeMap::new(),
            limiter: config.limit.map(Limiter::new),
        }
    }

    /// Sets the MAC address of `ifindex`. If it changes, every address
    /// announced there starts a new burst. Drain
    /// [`poll_output`](Self::poll_output) afterwards.
    pub fn set_interface(
        &mut self,
        now: Instant,
        ifindex: u32,
        mac: EthernetAddress,
    ) -> Result<(), Error> {
        for round in self.announced.set_interface(now, ifindex, mac)? {
            self.queue_round(&round);
        }
        Ok(())
    }

    /// Forgets `ifindex` and withdraws every address on it. Its groups are
    /// forgotten without [`Output::Leave`]: the driver closes the socket.
    pub fn remove_interface(&mut self, ifindex: u32) {
        self.announced.remove_interface(ifindex);
        self.groups.retain(|(i, _), _| *i != ifindex);
    }

    /// Answers for `addr` on `ifindex` from now on. A new address starts an
    /// announcement burst, after an [`Output::Join`] of its group if it is
    /// the first address there to need it (drain
    /// [`poll_output`](Self::poll_output)); an address already announced
    /// there is left alone, burst included, so resyncs may call this freely.
    pub fn announce(&mut self, now: Instant, addr: P::Addr, ifindex: u32) -> Result<(), Error> {
        let new = !self.announced.contains(addr, ifindex);
        let round = self.announced.announce(now, addr, ifindex)?;
        // The counters' entry, once per address: frames only look it up.
        self.per_ip.entry(addr).or_default();
        if new && let Some(group) = P::group(addr) {
            let n = self.groups.entry((ifindex, group)).or_insert(0);
            if *n == 0 {
                self.outputs.push_back(Output::Join { ifindex, group });
            }
            *n += 1;
        }
        if let Some(round) = round {
            self.queue_round(&round);
        }
        Ok(())
    }

    /// Stops answering for `addr` on `ifindex` and cancels its pending
    /// announcements, with an [`Output::Leave`] if it was the last address
    /// there in its group; returns whether it was announced.
    pub fn withdraw(&mut self, addr: P::Addr, ifindex: u32) -> bool {
        let removed = self.announced.withdraw(addr, ifindex);
        if removed
            && let Some(group) = P::group(addr)
            && let Some(n) = self.groups.get_mut(&(ifindex, group))
        {
            *n -= 1;
            if *n == 0 {
                self.groups.remove(&(ifindex, group));
                self.outputs.push_back(Output::Leave { ifindex, group });
            }
        }
        removed
    }

    /// Whether `addr` is announced on `ifindex`.
    pub fn is_announced(&self, addr: P::Addr, ifindex: u32) -> bool {
        self.announced.contains(addr, ifindex)
    }

    /// Call with every frame received on `ifindex`, at the time it was
    /// read; returns the answer to send back on `ifindex`, if the frame is
    /// a request we answer and its sender (interface and Ethernet source)
    /// is within its [`Limit`](crate::Limit).
    ///
    /// Only requests we would answer spend a sender's budget: frames
    /// dropped for another reason cost nothing to answer.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        ifindex: u32,
        frame: &[u8],
    ) -> Option<P::Transmit> {
        match P::answer(&self.announced, ifindex, frame) {
            Ok((addr, reply)) => {
                // The real protocols answer only whole Ethernet frames; a
                // shorter one (test protocols) counts as one sender.
                let sender =
                    Frame::new_checked(frame).map_or(EthernetAddress([0; 6]), |f| f.src_addr());
                if let Some(l) = &mut self.limiter
                    && !l.allow(now, ifindex, sender)
                {
                    self.stats.rate_limited = self.stats.rate_limited.wrapping_add(1);
                    trace!(%addr, ifindex, %sender, "rate limited");
                    return None;
                }
                self.stats.requests_received = self.stats.requests_received.wrapping_add(1);
                self.stats.responses_sent = self.stats.responses_sent.wrapping_add(1);
                // Answered, so announced, so its entry exists.
                if let Some(c) = self.per_ip.get_mut(&addr) {
                    c.requests_received = c.requests_received.wrapping_add(1);
                    c.responses_sent = c.responses_sent.wrapping_add(1);
                }
                Some(reply)
            }
            Err(reason) => {
                self.stats.count_drop(reason);
                None
            }
        }
    }

    /// Call when a timer from [`Output::Arm`] expires: sends the next round
    /// of its burst, unless the timer is stale. Drain
    /// [`poll_output`](Self::poll_output) afterwards.
    pub fn handle_timer(&mut self, now: Instant, timer: Timer<P::Addr>) {
        if let Some(round) = self.announced.handle_timer(now, timer) {
            self.queue_round(&round);
        } else {
            trace!(addr = %timer.addr(), ifindex = timer.ifindex(), "stale timer");
        }
    }

    /// The next thing to do; call after every `announce`, `withdraw`,
    /// `set_interface` and `handle_timer` until it returns `None`.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output<P::Transmit, Timer<P::Addr>>> {
        self.outputs.pop_front()
    }

    /// The counters.
    pub fn stats(&self) -> &Stats<P::Drop> {
        &self.stats
    }

    /// The counters of every address ever announced, in address order.
    pub fn ip_counters(&self) -> &BTreeMap<P::Addr, IpCounters> {
        &self.per_ip
    }

    /// Queues the frames of one round and the timer of the next.
    fn queue_round(&mut self, round: &Round<P::Addr>) {
        let outputs = &mut self.outputs;
        let stats = &mut self.stats;
        let mut ip = self.per_ip.get_mut(&round.addr);
        P::announcements(round, &mut |t| {
            stats.announcements_sent = stats.announcements_sent.wrapping_add(1);
            if let Some(c) = ip.as_deref_mut() {
                c.gratuitous_sent = c.gratuitous_sent.wrapping_add(1);
            }
            outputs.push_back(Output::Transmit(t));
        });
        if let Some((at, timer)) = round.next {
            self.outputs.push_back(Output::Arm { at, timer });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    /// A protocol that answers any frame whose first octet is an announced
    /// address's last octet, with groups by the last octet too.
    #[derive(Debug)]
    struct Toy;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Why {
        Empty,
        NotOurs,
    }

    impl fmt::Display for Why {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fmt::Debug::fmt(self, f)
        }
    }

    impl Reason for Why {
        type Counters = [u64; 2];
        const ALL: &'static [Self] = &[Self::Empty, Self::NotOurs];
        fn index(self) -> usize {
            self as usize
        }
    }

    impl Protocol for Toy {
        type Addr = Ipv6Addr;
        type Transmit = Transmit<1>;
        type Drop = Why;
        const ETHERTYPE: EtherType = EtherType::Ipv6;

        fn answer(
            announced: &Announced<Ipv6Addr>,
            ifindex: u32,
            frame: &[u8],
        ) -> Result<(Ipv6Addr, Transmit<1>), Why> {
            let &[last] = frame else {
                return Err(Why::Empty);
            };
            let addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last.into());
            announced
                .lookup(addr, ifindex)
                .map(|_| {
                    (
                        addr,
                        Transmit {
                            ifindex,
                            frame: [last],
                        },
                    )
                })
                .ok_or(Why::NotOurs)
        }

        fn announcements(round: &Round<Ipv6Addr>, send: &mut dyn FnMut(Transmit<1>)) {
            send(Transmit {
                ifindex: round.ifindex,
                frame: [round.addr.octets()[15]],
            });
        }

        fn group(addr: Ipv6Addr) -> Option<EthernetAddress> {
            Some(EthernetAddress([
                0x33,
                0x33,
                0,
                0,
                0,
                addr.octets()[15] & 0xf0,
            ]))
        }
    }

    const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);

    fn addr(last: u8) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last.into())
    }

    fn drain(r: &mut Responder<Toy>) -> Vec<Output<Transmit<1>, Timer<Ipv6Addr>>> {
        std::iter::from_fn(|| r.poll_output()).collect()
    }

    fn responder() -> (Instant, Responder<Toy>) {
        let t0 = Instant::now();
        let mut r = Responder::new(Config::default());
        r.set_interface(t0, 1, MAC).unwrap();
        (t0, r)
    }

    #[test]
    fn joins_a_group_once_and_leaves_with_the_last_address() {
        let (t0, mut r) = responder();
        let group = Toy::group(addr(0x11)).unwrap();
        r.announce(t0, addr(0x11), 1).unwrap();
        let out = drain(&mut r);
        assert_eq!(out[0], Output::Join { ifindex: 1, group });
        assert!(matches!(out[1], Output::Transmit(_)));
        // Same group, and the same address again: no second join.
        r.announce(t0, addr(0x12), 1).unwrap();
        r.announce(t0, addr(0x12), 1).unwrap();
        assert!(
            drain(&mut r)
                .iter()
                .all(|o| !matches!(o, Output::Join { .. }))
        );
        assert!(r.withdraw(addr(0x11), 1));
        assert!(drain(&mut r).is_empty());
        assert!(!r.withdraw(addr(0x11), 1));
        assert!(r.withdraw(addr(0x12), 1));
        assert_eq!(drain(&mut r), [Output::Leave { ifindex: 1, group }]);
    }

    #[test]
    fn remove_interface_forgets_groups_quietly() {
        let (t0, mut r) = responder();
        r.announce(t0, addr(0x21), 1).unwrap();
        let _ = drain(&mut r);
        r.remove_interface(1);
        assert!(drain(&mut r).is_empty());
        r.set_interface(t0, 1, MAC).unwrap();
        r.announce(t0, addr(0x21), 1).unwrap();
        assert!(matches!(drain(&mut r)[0], Output::Join { .. }));
    }

    #[test]
    fn counts_answers_drops_and_announcements() {
        let (t0, mut r) = responder();
        r.announce(t0, addr(7), 1).unwrap();
        let _ = drain(&mut r);
        assert_eq!(
            r.handle_frame(t0, 1, &[7]),
            Some(Transmit {
                ifindex: 1,
                frame: [7]
            })
        );
        assert_eq!(r.handle_frame(t0, 1, &[8]), None);
        assert_eq!(r.handle_frame(t0, 1, &[]), None);
        assert_eq!(r.handle_frame(t0, 2, &[7]), None);
        let s = r.stats();
        assert_eq!((s.requests_received, s.responses_sent), (1, 1));
        assert_eq!(s.announcements_sent, 1);
        assert_eq!(s.dropped(Why::Empty), 1);
        assert_eq!(s.dropped(Why::NotOurs), 2);
        assert_eq!(s.dropped_total(), 3);
        assert_eq!(
            s.drops().collect::<Vec<_>>(),
            [(Why::Empty, 1), (Why::NotOurs, 2)]
        );
    }

    #[test]
    fn counts_per_announced_address_and_keeps_them_after_withdrawal() {
        let (t0, mut r) = responder();
        assert!(r.ip_counters().is_empty());
        r.announce(t0, addr(7), 1).unwrap();
        r.announce(t0, addr(9), 1).unwrap();
        let _ = drain(&mut r);
        for _ in 0..3 {
            assert!(r.handle_frame(t0, 1, &[7]).is_some());
        }
        assert!(r.handle_frame(t0, 1, &[9]).is_some());
        // Not ours, or on another interface: no address counts it.
        assert!(r.handle_frame(t0, 1, &[8]).is_none());
        assert!(r.handle_frame(t0, 2, &[9]).is_none());
        let want = |requests, gratuitous| IpCounters {
            requests_received: requests,
            responses_sent: requests,
            gratuitous_sent: gratuitous,
        };
        assert_eq!(
            r.ip_counters()
                .iter()
                .map(|(a, c)| (*a, *c))
                .collect::<Vec<_>>(),
            [(addr(7), want(3, 1)), (addr(9), want(1, 1))]
        );
        // The next round of a burst counts for its address.
        let (t1, mut r2) = responder();
        r2.announce(t1, addr(7), 1).unwrap();
        let arm = drain(&mut r2)
            .into_iter()
            .find_map(|o| match o {
                Output::Arm { at, timer } => Some((at, timer)),
                _ => None,
            })
            .unwrap();
        r2.handle_timer(arm.0, arm.1);
        let _ = drain(&mut r2);
        assert_eq!(r2.ip_counters()[&addr(7)].gratuitous_sent, 2);
        // A withdrawn address keeps its counters (they never go back), and
        // counts again when it comes back.
        assert!(r.withdraw(addr(7), 1));
        assert!(r.handle_frame(t0, 1, &[7]).is_none());
        assert_eq!(r.ip_counters()[&addr(7)], want(3, 1));
        r.announce(t0, addr(7), 1).unwrap();
        let _ = drain(&mut r);
        assert!(r.handle_frame(t0, 1, &[7]).is_some());
        assert_eq!(r.ip_counters()[&addr(7)], want(4, 2));
        // The totals are the sums.
        let s = r.stats();
        assert_eq!(s.requests_received, 5);
        assert_eq!(s.announcements_sent, 3);
    }
}
