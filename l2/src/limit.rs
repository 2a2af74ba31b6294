//! A per-sender rate limit on answers, so that one host flooding requests
//! for an announced address cannot make us spend our time (and the link)
//! answering it while other senders wait.
//!
//! Pure: `now` is passed in and the hash seed comes from the driver. The
//! senders are hashed (seeded SipHash of interface and source MAC) into a
//! fixed table of [`SLOTS`] slots, so memory is bounded whatever the
//! number of senders: a flood from random MACs cannot grow it. Two senders
//! that share a slot share a budget, which can only make the limit stricter
//! for them; the seed is random per process, so a flooder cannot pick a MAC
//! that lands on a given victim's slot.
//!
//! Each slot is one `Instant`, the generic cell rate algorithm's
//! theoretical arrival time (ITU-T I.371 GCRA, the virtual-scheduling
//! form): an answer is allowed when that time is at most `burst - 1`
//! intervals ahead of `now`, and each allowed answer moves it one interval
//! on. That is a token bucket of `burst` tokens refilled at `rate` per
//! second, in one word per slot.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use crate::ethernet::EthernetAddress;

/// How many answers one sender (interface and source MAC) may get.
///
/// The default, [`Limit::DEFAULT`], is far above what a legitimate host
/// asks: a Linux neighbour resolution sends at most `mcast_solicit` +
/// `ucast_solicit` = 6 requests per address, one per `retrans_time`
/// (1 s), and a router re-ARPing every service address this node answers
/// for at once (after its own restart, or when its entries go stale
/// together) is covered by the burst up to [`Limit::DEFAULT`]'s 1,000
/// addresses; past that, what exceeds the burst is answered at 1,000/s
/// and the router's own retries (1 s apart) get the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Answers per second per sender, sustained; at least 1.
    pub rate: u32,
    /// Answers a sender may get at once after being quiet; at least 1.
    pub burst: u32,
    /// Mixed into the hash of senders; pick it at random per process.
    pub seed: u64,
}

impl Limit {
    /// 1,000 answers per second per sender, bursts of 1,000 (see the type's
    /// docs for why that is safe for legitimate traffic). The seed is 0:
    /// drivers set a random one.
    pub const DEFAULT: Self = Self {
        rate: 1000,
        burst: 1000,
        seed: 0,
    };
}

impl Default for Limit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The limiter: a fixed table of theoretical arrival times.
#[derive(Debug, Clone)]
pub struct Limiter {
    limit: Limit,
    /// One answer's worth of time: `1 s / rate`.
    interval: Duration,
    /// How far ahead of `now` the arrival time may run: `burst - 1`
    /// intervals.
    tolerance: Duration,
    slots: Box<[Option<Instant>]>,
}

impl Limiter {
    /// A limiter with every sender's budget full. A `rate` or `burst` of 0
    /// counts as 1.
    pub fn new(limit: Limit) -> Self {
        let interval = Duration::from_secs(1) / limit.rate.max(1);
        let tolerance = interval * (limit.burst.max(1) - 1);
        Self {
            limit,
            interval,
            tolerance,
            slots: vec![None; SLOTS].into_boxed_slice(),
        }
    }

    /// Call when the frame from `sender` on `ifindex` is to be answered at
    /// `now`: returns whether it may be, and if so spends one answer of
    /// the sender's budget.
    pub fn allow(&mut self, now: Instant, ifindex: u32, sender: EthernetAddress) -> bool {
        let slot = self.slot(ifindex, sender);
        let Some(cell) = self.slots.get_mut(slot) else {
            // `slot` is reduced modulo the table's length.
            return true;
        };
        // A slot last used long ago counts from now, so the budget never
        // exceeds `burst`.
        let tat = cell.map_or(now, |t| t.max(now));
        if tat.saturating_duration_since(now) > self.tolerance {
            return false;
        }
        // An Instant this far ahead cannot overflow in practice; if it did,
        // keeping the old time only makes the limit stricter.
        *cell = Some(tat.checked_add(self.interval).unwrap_or(tat));
        true
    }

    /// The limit this limiter applies.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    fn slot(&self, ifindex: u32, sender: EthernetAddress) -> usize {
        let mut h = DefaultHasher::new();
        self.limit.seed.hash(&mut h);
        ifindex.hash(&mut h);
        sender.0.hash(&mut h);
        // The remainder is below SLOTS, so it fits in usize.
        (h.finish() % SLOTS as u64) as usize
    }
}

/// Senders tracked apart. A slot is 16 octets, so the table is 8 KiB per
/// responder.
pub const SLOTS: usize = 512;

#[cfg(test)]
mod tests {
    use super::*;

    const A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
    const B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);

    fn limiter(rate: u32, burst: u32) -> Limiter {
        Limiter::new(Limit {
            rate,
            burst,
            seed: 7,
        })
    }

    /// Answers allowed out of `n` requests from `who` at `at`.
    fn allowed(l: &mut Limiter, at: Instant, who: EthernetAddress, n: u32) -> u32 {
        (0..n).filter(|_| l.allow(at, 1, who)).count() as u32
    }

    #[test]
    fn table() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // (rate, burst, steps of (offset from t0, requests, allowed)):
        // requests from one sender only.
        type Step = (Duration, u32, u32);
        let cases: &[(u32, u32, &[Step])] = &[
            // The burst at once, then nothing until an interval passes.
            (1000, 10, &[(ms(0), 20, 10), (ms(0), 5, 0), (ms(1), 5, 1)]),
            // Refill at the rate: 5 ms later, 5 more.
            (1000, 10, &[(ms(0), 10, 10), (ms(5), 10, 5)]),
            // A long quiet time refills only up to the burst.
            (1000, 10, &[(ms(0), 10, 10), (ms(60_000), 100, 10)]),
            // Burst 1: exactly one per interval.
            (10, 1, &[(ms(0), 3, 1), (ms(99), 3, 0), (ms(100), 3, 1)]),
            // 0 counts as 1.
            (0, 0, &[(ms(0), 3, 1), (ms(999), 1, 0), (ms(1000), 1, 1)]),
            // A steady sender under the rate is never limited.
            (
                1000,
                1000,
                &[
                    (ms(0), 500, 500),
                    (ms(1000), 500, 500),
                    (ms(2000), 500, 500),
                ],
            ),
        ];
        for (rate, burst, steps) in cases {
            let mut l = limiter(*rate, *burst);
            for (i, (at, n, want)) in steps.iter().enumerate() {
                let got = allowed(&mut l, t0 + *at, A, *n);
                assert_eq!(got, *want, "rate {rate} burst {burst} step {i}");
            }
        }
    }

    #[test]
    fn a_flooder_does_not_spend_another_senders_budget() {
        let t0 = Instant::now();
        let mut l = limiter(1000, 100);
        // Same seed, so same slots: pick a B that does not share A's.
        assert_ne!(l.slot(1, A), l.slot(1, B));
        assert_eq!(allowed(&mut l, t0, A, 100_000), 100);
        assert_eq!(allowed(&mut l, t0, B, 100), 100);
        // The same MAC on another interface is another sender.
        let other_if = (0..16).find(|i| l.slot(*i, A) != l.slot(1, A)).unwrap();
        assert!(l.allow(t0, other_if, A));
    }

    #[test]
    fn many_senders_use_a_bounded_table() {
        let t0 = Instant::now();
        let mut l = limiter(1, 1);
        let mut n = 0;
        for i in 0..100_000u32 {
            let b = i.to_be_bytes();
            if l.allow(t0, 1, EthernetAddress([0x02, 0, b[0], b[1], b[2], b[3]])) {
                n += 1;
            }
        }
        // One answer per slot: shared slots share a budget.
        assert_eq!(n, SLOTS);
        assert_eq!(l.slots.len(), SLOTS);
    }

    #[test]
    fn the_seed_moves_senders_between_slots() {
        let a = limiter(1, 1);
        let b = Limiter::new(Limit {
            seed: 8,
            ..a.limit()
        });
        let moved = (0..64u8)
            .filter(|i| {
                let mac = EthernetAddress([0x02, 0, 0, 0, 0, *i]);
                a.slot(1, mac) != b.slot(1, mac)
            })
            .count();
        assert!(moved > 32, "{moved} of 64 moved");
    }
}
