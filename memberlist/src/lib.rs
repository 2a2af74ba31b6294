//! ferrolb's memberlist: SWIM membership with Lifeguard, encrypted, with
//! sub-second failure detection. It is the liveness layer of layer 2 mode:
//! each service IP is answered by one elected speaker, and when that
//! speaker dies the others must notice fast and agree.
//!
//! This crate is sans-IO, like `quinn-proto` and `foca`: it never touches a
//! socket, reads a clock, spawns a task or draws random numbers on its own.
//! Time is passed in as `now`, randomness comes from the `R: RngCore` the
//! core owns, and datagrams, stream frames, timers and events come out of
//! [`Swim::poll_output`]. With a seeded `R`, a run is reproducible; the
//! simulations in `tests/sim.rs` rely on it. The tokio driver lives in the
//! speaker (`speaker/src/driver/memberlist`).
//!
//! # Layers
//!
//! - [`message`]: the plaintext wire format (probes, piggybacked updates,
//!   full state), `parse`/`emit`, never panicking on input.
//! - [`envelope`], [`keyring`]: version octet, AES-256-GCM under a shared
//!   keyring with rotation, stream framing.
//! - [`swim`]: the protocol core ([`Swim`]); [`timer`] its timers;
//!   [`config`] the timings and the default LAN profile.
//!
//! # Driving a core
//!
//! ```
//! use std::time::{Duration, Instant};
//! use memberlist::{Config, Key, Keyring, Name, Output, Security, Swim};
//! # struct Rng(u64);
//! # impl rand_core::RngCore for Rng {
//! #     fn next_u32(&mut self) -> u32 { self.next_u64() as u32 }
//! #     fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1); self.0 }
//! #     fn fill_bytes(&mut self, d: &mut [u8]) { for b in d { *b = self.next_u64() as u8 } }
//! # }
//!
//! let key = Key::new([0x11; 32]); // from a Secret in real life
//! let config = Config::lan(
//!     Name::new("node-a")?,
//!     "192.0.2.1:7946".parse()?,
//!     Security::Encrypted(Keyring::new(key)),
//! );
//! let now = Instant::now();
//! // In production `R` is a CSPRNG: it draws the AES-GCM nonces.
//! let mut swim = Swim::new(config, Rng(1), now)?;
//! swim.join(now, ["192.0.2.2:7946".parse()?]);
//! while let Some(output) = swim.poll_output() {
//!     match output {
//!         Output::Send { to, packet } => { /* UDP send_to(to, packet) */ }
//!         Output::Stream { to, frame } => { /* TCP connect(to), write frame, close */ }
//!         Output::Arm { at, timer } => { /* at `at`: swim.handle_timer(now, timer) */ }
//!         Output::Event(event) => { /* hand to the speaker's election */ }
//!     }
//! }
//! // Then: handle_packet for each datagram, handle_stream for each frame
//! // (delimited by memberlist::frame::decode), handle_timer at each
//! // deadline, and drain poll_output after every call.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Protocol
//!
//! SWIM (Das, Gupta, Motivala, DSN 2002): every probe interval a member
//! pings the next member of a shuffled round-robin order (§4.3); without an
//! ack within the probe timeout it asks k others to ping it for it
//! (ping-req, §3.1); without any ack by the end of the interval it
//! suspects the member (§4.2). A suspect that hears of it refutes with a
//! higher incarnation; otherwise it is declared dead when the suspicion
//! times out. Updates are piggybacked on probe traffic and on gossip
//! rounds, each sent λ⌈log10(n + 1)⌉ times (§4.1), and members exchange
//! full state periodically and on join (push-pull, as hashicorp/memberlist).
//!
//! Lifeguard (Dadgar, Phillips, Currey, arXiv:1707.00788):
//! - local health (§IV-A): relays nack a ping-req they could not complete;
//!   a member that misses nacks, refutes suspicions about itself or wakes
//!   up late raises its health multiplier, which stretches its probe
//!   interval and timeout, so a slow member stops accusing others;
//! - dynamic suspicion (§IV-B): the timeout starts at `suspicion_max` and
//!   falls towards `suspicion_min` as independent members confirm, as
//!   `max − (max − min)·log(c + 1)/log(K + 1)`;
//! - buddy system (§IV-C): a ping to a suspect carries the suspicion, and
//!   the suspector tells the suspect directly, so it can refute at once.
//!
//! Additions, each for the sub-second goal or to avoid false deaths:
//! - **Confirmation probes**: a member that learns of a suspicion probes the
//!   suspect itself. A dead member is confirmed by everyone within one probe
//!   interval, so its timeout falls to the minimum at once; a live one
//!   passes, so a false suspicion keeps the maximum. A suspect that answers
//!   is probed again each interval until its refutation arrives. A failed
//!   probe of a suspect does not raise the local health multiplier (when
//!   many die at once its relays are often dead too), and confirmations
//!   past the K expected are neither counted nor relayed, so a death costs
//!   O(n) datagrams, not O(n²) (BENCHMARKS.md, memberlist at 1,000 members).
//! - **Stale-news correction**: a member told a suspicion, death or leave
//!   about itself that it already refuted answers the sender with its
//!   current incarnation, so a member that missed the refutation's gossip
//!   still gets it (the ack of the next buddy ping carries it). The same
//!   for others: a statement about an older incarnation of a member held
//!   alive is answered with that alive (at most 4 per datagram), so a
//!   member that missed a restart's alive, which spreads in one short
//!   burst, does not wait for push-pull (BENCHMARKS.md, the restart at
//!   150-250 members).
//! - **Direct retry**: at the probe timeout the ping is sent again along
//!   with the ping-reqs, which makes a false suspicion under random loss
//!   about ten times rarer.
//! - **Pause detection**: a probe timer that fires more than a probe
//!   timeout late means this member was paused (GC, CPU starvation); the
//!   probe is inconclusive rather than a failure. A late suspicion timer
//!   gets one probe timeout of grace for a refutation waiting unread.
//! - **Immediate gossip**: a new update is gossiped at once (then at most
//!   once per `gossip_interval`), not at the next tick.
//! - **Leave fan-out**: a leaving member tells every member directly.
//! - **Reconnect**: push-pull also picks dead members, so the two sides of
//!   a healed partition find each other again.
//! - **Rejoin and isolation**: the seeds given to [`Swim::join`] are where
//!   members are expected. While a seed has no live member the core joins
//!   it again, with a backoff from `rejoin_min` doubling to `rejoin_max`,
//!   each delay drawn from the upper half of its step; so a member whose
//!   first join was lost (a firewall, a seed not yet started, a wrong key
//!   since fixed) joins without being told. A member with seeds but no
//!   live member, once a join went unanswered or its last member was lost,
//!   is *isolated* ([`Event::Isolated`], [`Swim::isolated`]): it cannot
//!   tell whether the others are down or it is cut off.
//! - **Bounded table**: at most `max_members` members are remembered; a new
//!   name beyond takes the place of the oldest dead or left member, or is
//!   dropped and counted.
//! - **Serial incarnations**: incarnations are compared as RFC 1982 serial
//!   numbers ([`member::is_newer`]), so a refutation `i + 1` beats a
//!   suspicion or death at `i` for every `i`, `u32::MAX` included. No
//!   clock is needed at start: a restarted member learns its previous
//!   incarnation from the others and outbids it.
//!
//! # Default LAN profile
//!
//! [`Config::lan`] aims at: median time from a member's death to *every*
//! other member marking it dead ≤ 500 ms, p99 ≤ 1 s, no false death at 5%
//! random packet loss, and no false death from a 200 ms stall. For
//! comparison, hashicorp/memberlist's LAN profile (MetalLB today) takes
//! 5.4 to 8.1 s.
//!
//! | setting | value | why |
//! |---|---|---|
//! | `probe_interval` T | 100 ms | detection is about W + T + S (below); W's tail is ~4.6 T |
//! | `probe_timeout` τ | 40 ms | ≫ LAN RTT (< 1 ms) plus scheduling jitter; relay nacks at ~2τ = 80 ms land before T |
//! | `indirect_probes` k | 3 | with the retry, a live member is falsely suspected ~6·10⁻⁵ per probe at 5% loss |
//! | `suspicion_min` | 250 ms | > T + refutation spread, so a 200 ms stall is refuted in time (margin ~100 ms) |
//! | `suspicion_max` | 1 s | an unconfirmed (false) suspicion leaves ~1 s for the refutation to reach everyone |
//! | `suspicion_confirmations` K | 3 | Lifeguard's default (SuspicionMult 4 − 2), capped at n − 2 |
//! | `gossip_interval` / fanout | 20 ms / 3 | news spreads in ~log₃ n hops of milliseconds |
//! | `retransmit_mult` λ | 4 | 8 sends per update and member at n = 50 |
//! | `push_pull_interval` | 10 s | anti-entropy and partition healing within seconds |
//! | `gossip_to_dead` / `dead_retention` | 30 s / 5 min | a falsely dead member hears of it; healed partitions reconnect |
//! | `rejoin_min` / `rejoin_max` | 0.5 s / 10 s | a lost join is retried within a second; a seed back after a long outage is found within 10 s, at one join per seed per 5-10 s meanwhile |
//! | `max_members` | 5000 | Kubernetes' largest supported cluster; a few MiB at most |
//!
//! Detection time is about W + T + S + δ: W, until some member probes the
//! dead one (the cluster probes it about once per T, so W is roughly
//! geometric in rounds: median ≈ 0.7 T, p99 ≈ 4.6 T); T, the failed probe;
//! S, the suspicion timeout, which confirmation probes bring down to
//! `suspicion_min` within one T; δ, a few milliseconds of gossip. That is
//! ≈ 70 + 100 + 250 ms at the median and ≈ 460 + 100 + 250 ms at p99.
//!
//! A stalled member is suspected at worst about T after its stall begins
//! and would be declared dead at about T + `suspicion_min` = 350 ms; it
//! refutes as soon as it runs again, so stalls up to ~300 ms pass.
//!
//! Measured in simulation (`tests/sim.rs`, LAN latency 0.1 to 1 ms; see
//! `memberlist/README.md` for the full table): over 1700 deaths in clusters
//! of 3 to 100 members, median 419 ms, p99 721 ms, max 924 ms; zero false
//! deaths in 45 runs of 10 simulated minutes at 5% loss (10 to 100
//! members) and 5 at 10% loss; zero deaths from stalls up to 300 ms.
//! Steady-state cost per member: about 40 datagrams of ~100 octets per
//! second, plus one full-state exchange every 10 s.
//!
//! # Security
//!
//! Every datagram and stream frame is authenticated and encrypted with
//! AES-256-GCM under the primary key of a shared [`Keyring`]; the other
//! keys are accepted, so a rotation (install everywhere, then use
//! everywhere, then remove the old key everywhere) never splits the
//! cluster. Messages that fail are dropped and counted in [`Stats`]. A
//! plaintext node ([`Security::Plaintext`], explicit) and an encrypted
//! node drop each other's messages.
//!
//! Limits: whole captured messages can be replayed (incarnations make old
//! statements harmless once a member moved on); every key holder is
//! trusted, as in hashicorp/memberlist (it can fill the member table with
//! names, which is bounded and counted); names must be unique. A statement
//! about this member at any incarnation, even `u32::MAX`, can be refuted.

pub mod config;
pub mod envelope;
pub mod keyring;
pub mod member;
pub mod message;
pub mod swim;
pub mod timer;

mod broadcast;

pub use config::{Config, ConfigError};
pub use envelope::{OpenError, frame};
pub use keyring::{Key, Keyring, KeyringError, Security};
pub use member::{Incarnation, Member, Meta, MetaTooLong, Name, NameError, State};
pub use swim::{Event, InputError, Output, Stats, Swim};
pub use timer::{Timer, TimerKind};
