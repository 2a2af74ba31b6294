//! The announced set and the takeover bursts, shared by the ARP and NDP
//! responders, so both have one shape and one schedule.
//!
//! Pure state: no I/O, no clock (`now` is passed in), no frames (the
//! responders build those). An address is announced per interface; each
//! interface has one MAC address that answers for it.
//!
//! # The burst schedule
//!
//! When an address becomes ours on an interface (takeover), neighbours
//! still hold the old owner's MAC, so we announce at once and then repeat,
//! like MetalLB: with the default [`Burst`] (5 rounds, 1.1 s apart) rounds
//! go out at `t`, `t+1.1s`, `t+2.2s`, `t+3.3s` and `t+4.4s`, all within the
//! 5 s MetalLB spends. Each next round is armed `interval` after the round
//! just sent, at the `now` it was sent (a late timer delays the rest, as
//! MetalLB's sleep loop does). A round is one or more frames (ARP sends a
//! request-form and a reply-form gratuitous ARP, NDP one unsolicited NA).
//!
//! Announcing an address that is already announced on that interface is a
//! no-op: resyncs must not restart the burst. Withdrawing it drops the
//! entry, and with it every timer still armed for it: each burst carries a
//! generation, and a [`Timer`] whose generation no longer matches is
//! stale and ignored (STYLE §3, dynamic timers).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::ethernet::EthernetAddress;
use crate::limit::Limit;

/// How announcements repeat after a takeover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// Rounds in all, the first sent at once; 0 sends none.
    pub count: u32,
    /// Time from one round to the next.
    pub interval: Duration,
}

impl Default for Burst {
    /// MetalLB's: 5 rounds, 1.1 s apart.
    fn default() -> Self {
        Self {
            count: DEFAULT_COUNT,
            interval: DEFAULT_INTERVAL,
        }
    }
}

/// A configuration call the announced set refused.
///
/// Nothing changed when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The interface has no MAC address yet: call `set_interface` first.
    #[error("interface {0} unknown: set its MAC address first")]
    UnknownInterface(u32),
    /// A MAC address we could answer from must be unicast.
    #[error("interface MAC {0} is not a unicast address")]
    NotUnicast(EthernetAddress),
}

/// A dynamic timer for the next round of one burst. The driver sleeps until
/// the `at` it came with, then hands it back through `handle_timer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timer<A> {
    addr: A,
    ifindex: u32,
    generation: u64,
}

impl<A: Copy> Timer<A> {
    /// The address being announced.
    pub fn addr(&self) -> A {
        self.addr
    }

    /// The interface it is announced on.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
}

/// One round to send now: frames announcing `addr` from `mac` on
/// `ifindex`, then arm `next` if it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round<A> {
    /// The announced address.
    pub addr: A,
    /// The interface to send on.
    pub ifindex: u32,
    /// The interface's MAC address, the one to announce.
    pub mac: EthernetAddress,
    /// When to send the next round, and the timer to hand back then.
    pub next: Option<(Instant, Timer<A>)>,
}

/// The addresses announced per interface, the interfaces' MAC addresses and
/// the bursts under way.
#[derive(Debug, Clone)]
pub struct Announced<A> {
    burst: Burst,
    /// Few interfaces (usually one or two): a vector beats a map.
    interfaces: Vec<(u32, EthernetAddress)>,
    entries: HashMap<(A, u32), Entry>,
    next_generation: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    generation: u64,
    /// Rounds of the burst not sent yet.
    remaining: u32,
}

impl<A: Copy + Eq + Hash + Ord + std::fmt::Display> Announced<A> {
    /// An empty set with this burst policy.
    pub fn new(burst: Burst) -> Self {
        Self {
            burst,
            interfaces: Vec::new(),
            entries: HashMap::new(),
            next_generation: 0,
        }
    }

    /// The burst policy.
    pub fn burst(&self) -> Burst {
        self.burst
    }

    /// Sets the MAC address of `ifindex`. If it replaces a different one,
    /// every address announced there starts a new burst (neighbours hold
    /// the old MAC); the first rounds are returned, sorted by address.
    pub fn set_interface(
        &mut self,
        now: Instant,
        ifindex: u32,
        mac: EthernetAddress,
    ) -> Result<Vec<Round<A>>, Error> {
        if !mac.is_unicast() {
            return Err(Error::NotUnicast(mac));
        }
        match self.interfaces.iter_mut().find(|(i, _)| *i == ifindex) {
            None => {
                self.interfaces.push((ifindex, mac));
                Ok(Vec::new())
            }
            Some((_, old)) if *old == mac => Ok(Vec::new()),
            Some((_, old)) => {
                debug!(ifindex, old = %old, new = %mac, "interface mac changed");
                *old = mac;
                let mut addrs: Vec<A> = self
                    .entries
                    .keys()
                    .filter(|(_, i)| *i == ifindex)
                    .map(|(a, _)| *a)
                    .collect();
                addrs.sort_unstable();
                let mut rounds = Vec::with_capacity(addrs.len());
                for addr in addrs {
                    let generation = self.generation();
                    self.entries.insert(
                        (addr, ifindex),
                        Entry {
                            generation,
                            remaining: self.burst.count,
                        },
                    );
                    rounds.extend(self.fire(now, addr, ifindex));
                }
                Ok(rounds)
            }
        }
    }

    /// Forgets `ifindex` and every address announced on it; returns how many
    /// addresses went.
    pub fn remove_interface(&mut self, ifindex: u32) -> usize {
        self.interfaces.retain(|(i, _)| *i != ifindex);
        let before = self.entries.len();
        self.entries.retain(|(_, i), _| *i != ifindex);
        before - self.entries.len()
    }

    /// Announces `addr` on `ifindex`. A new announcement starts a burst and
    /// returns its first round; one already there returns `None` and
    /// leaves its burst alone.
    pub fn announce(
        &mut self,
        now: Instant,
        addr: A,
        ifindex: u32,
    ) -> Result<Option<Round<A>>, Error> {
        if self.interface_mac(ifindex).is_none() {
            return Err(Error::UnknownInterface(ifindex));
        }
        if self.entries.contains_key(&(addr, ifindex)) {
            return Ok(None);
        }
        debug!(%addr, ifindex, "announce");
        let generation = self.generation();
        self.entries.insert(
            (addr, ifindex),
            Entry {
                generation,
                remaining: self.burst.count,
            },
        );
        Ok(self.fire(now, addr, ifindex))
    }

    /// Stops announcing `addr` on `ifindex` (its pending rounds too);
    /// returns whether it was announced.
    pub fn withdraw(&mut self, addr: A, ifindex: u32) -> bool {
        let removed = self.entries.remove(&(addr, ifindex)).is_some();
        if removed {
            debug!(%addr, ifindex, "withdraw");
        }
        removed
    }

    /// A timer armed earlier fired: the next round of its burst, or `None`
    /// if the timer is stale (withdrawn, re-announced or restarted since).
    pub fn handle_timer(&mut self, now: Instant, timer: Timer<A>) -> Option<Round<A>> {
        let entry = self.entries.get(&(timer.addr, timer.ifindex))?;
        if entry.generation != timer.generation {
            return None;
        }
        self.fire(now, timer.addr, timer.ifindex)
    }

    /// The MAC address to answer with if `addr` is announced on `ifindex`.
    pub fn lookup(&self, addr: A, ifindex: u32) -> Option<EthernetAddress> {
        if self.entries.contains_key(&(addr, ifindex)) {
            self.interface_mac(ifindex)
        } else {
            None
        }
    }

    /// Whether `addr` is announced on `ifindex`.
    pub fn contains(&self, addr: A, ifindex: u32) -> bool {
        self.entries.contains_key(&(addr, ifindex))
    }

    /// The MAC address of `ifindex`, if set.
    pub fn interface_mac(&self, ifindex: u32) -> Option<EthernetAddress> {
        self.interfaces
            .iter()
            .find(|(i, _)| *i == ifindex)
            .map(|(_, mac)| *mac)
    }

    /// Whether `mac` belongs to one of our interfaces.
    pub fn is_own_mac(&self, mac: EthernetAddress) -> bool {
        self.interfaces.iter().any(|(_, m)| *m == mac)
    }

    /// Every (address, interface) announced, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (A, u32)> + '_ {
        self.entries.keys().copied()
    }

    /// How many (address, interface) pairs are announced.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Nothing is announced.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn generation(&mut self) -> u64 {
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        generation
    }

    /// Sends one round of the burst of (addr, ifindex) if any is left.
    fn fire(&mut self, now: Instant, addr: A, ifindex: u32) -> Option<Round<A>> {
        let mac = self.interface_mac(ifindex)?;
        let entry = self.entries.get_mut(&(addr, ifindex))?;
        if entry.remaining == 0 {
            return None;
        }
        entry.remaining -= 1;
        let next = if entry.remaining == 0 {
            None
        } else {
            // An interval so large it overflows Instant ends the burst
            // rather than panicking.
            now.checked_add(self.burst.interval).map(|at| {
                (
                    at,
                    Timer {
                        addr,
                        ifindex,
                        generation: entry.generation,
                    },
                )
            })
        };
        Some(Round {
            addr,
            ifindex,
            mac,
            next,
        })
    }
}

/// Default rounds per burst (MetalLB's announcer sends 5 within 5 s).
pub const DEFAULT_COUNT: u32 = 5;
/// Default time between rounds (MetalLB sleeps 1.1 s between rounds).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1100);

/// What a responder is configured with (ARP's and NDP's alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Announcement bursts on takeover.
    pub burst: Burst,
    /// Answers per sender; `None`: no limit. The default is
    /// [`Limit::DEFAULT`] with seed 0 (drivers set a random seed).
    pub limit: Option<Limit>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            burst: Burst::default(),
            limit: Some(Limit::DEFAULT),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
    const IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

    fn set() -> (Instant, Announced<Ipv4Addr>) {
        let t0 = Instant::now();
        let mut set = Announced::new(Burst::default());
        assert!(set.set_interface(t0, 1, MAC).unwrap().is_empty());
        (t0, set)
    }

    #[test]
    fn default_schedule() {
        let (t0, mut set) = set();
        let mut round = set.announce(t0, IP, 1).unwrap().unwrap();
        let mut sent = vec![Duration::ZERO];
        while let Some((at, timer)) = round.next {
            round = set.handle_timer(at, timer).unwrap();
            sent.push(at - t0);
        }
        let ms: Vec<u128> = sent.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 1100, 2200, 3300, 4400]);
    }

    #[test]
    fn zero_count_sends_nothing() {
        let t0 = Instant::now();
        let mut set = Announced::new(Burst {
            count: 0,
            interval: Duration::from_secs(1),
        });
        set.set_interface(t0, 1, MAC).unwrap();
        assert_eq!(set.announce(t0, IP, 1), Ok(None));
        assert_eq!(set.lookup(IP, 1), Some(MAC));
    }

    #[test]
    fn huge_interval_ends_burst() {
        let t0 = Instant::now();
        let mut set = Announced::new(Burst {
            count: 3,
            interval: Duration::MAX,
        });
        set.set_interface(t0, 1, MAC).unwrap();
        let round = set.announce(t0, IP, 1).unwrap().unwrap();
        assert_eq!(round.next, None);
    }

    #[test]
    fn refuses_unknown_interface_and_bad_mac() {
        let (t0, mut set) = set();
        assert_eq!(set.announce(t0, IP, 2), Err(Error::UnknownInterface(2)));
        assert_eq!(
            set.set_interface(t0, 2, EthernetAddress::BROADCAST),
            Err(Error::NotUnicast(EthernetAddress::BROADCAST))
        );
        assert!(set.is_empty());
    }

    #[test]
    fn mac_change_restarts_and_stales_old_timers() {
        let (t0, mut set) = set();
        let first = set.announce(t0, IP, 1).unwrap().unwrap();
        let (_, old_timer) = first.next.unwrap();
        let new_mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
        let rounds = set.set_interface(t0, 1, new_mac).unwrap();
        assert_eq!(rounds.len(), 1);
        assert_eq!(rounds[0].mac, new_mac);
        assert_eq!(set.handle_timer(t0, old_timer), None);
        assert_eq!(set.remove_interface(1), 1);
        assert_eq!(set.lookup(IP, 1), None);
    }
}
