//! ferrolb's layer 2 base: what the ARP (`arp`) and NDP (`ndp`) responders
//! share, so both have one shape and neither imports the other.
//!
//! - [`ethernet`]: the Ethernet II wire view and [`EthernetAddress`];
//! - [`announce`]: the announced set, the takeover bursts and their timers;
//! - [`responder`]: the shell a [`Protocol`] plugs into, with its output
//!   queue, multicast group bookkeeping, [`Stats`] (drop counters in one
//!   array indexed by the protocol's [`Reason`]) and [`IpCounters`] per
//!   announced address;
//! - [`limit`]: the per-sender rate limit on answers;
//! - [`dual`]: both families behind one `IpAddr` API ([`DualStack`]).
//!
//! This crate does no I/O: it never touches a socket, reads a clock, spawns
//! a task or draws random numbers (STYLE §1). Every responder has the same
//! shape (STYLE §3):
//!
//! - configuration: `set_interface`, `announce`, `withdraw`;
//! - input: `handle_frame` returns the reply to send, if any;
//!   `handle_timer` takes back the timers the core armed;
//! - output: `poll_output` yields frames to send, [`Output::Arm`] timers
//!   (dynamic timers with a generation) and multicast groups to join or
//!   leave.

pub mod announce;
pub mod dual;
pub mod ethernet;
pub mod limit;
pub mod responder;

pub use announce::{Announced, Burst, Config, Round, Timer};
pub use dual::DualStack;
pub use ethernet::{EtherType, EthernetAddress};
pub use limit::{Limit, Limiter};
pub use responder::{AsFrame, IpCounters, Output, Protocol, Reason, Responder, Stats, Transmit};
