//! ferrolb's ARP responder (RFC 826) for layer 2 mode: the Ethernet and ARP
//! wire views, the announced set with its takeover bursts, and the pure
//! responder that answers requests for the addresses this node announces.
//!
//! This crate does no I/O: it never touches a socket, reads a clock, spawns
//! a task or draws random numbers. The speaker's AF_PACKET driver moves
//! frames and time in and out. The `ndp` crate reuses [`ethernet`] and
//! [`announce`], so both responders have the same shape:
//!
//! - configuration: [`Responder::set_interface`], [`Responder::announce`],
//!   [`Responder::withdraw`];
//! - input: [`Responder::handle_frame`] returns the reply to send, if any;
//!   [`Responder::handle_timer`] takes back the timers the core armed;
//! - output: [`Responder::poll_output`] yields gratuitous frames to send and
//!   [`Output::Arm`] timers (STYLE §3, dynamic timers with a generation).

pub mod announce;
pub mod ethernet;
pub mod responder;
pub mod wire;

pub use announce::Burst;
pub use announce::Config;
pub use ethernet::{EtherType, EthernetAddress};
pub use responder::{Arp, DropReason, Output, Responder, Stats, Timer, Transmit};
pub use wire::{FrameRepr, Operation, Packet, Repr};
