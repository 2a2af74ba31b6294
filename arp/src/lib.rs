//! ferrolb's ARP responder (RFC 826) for layer 2 mode: the ARP wire view
//! and the protocol that answers requests for the addresses this node
//! announces.
//!
//! This crate does no I/O: it never touches a socket, reads a clock, spawns
//! a task or draws random numbers. The speaker's AF_PACKET driver moves
//! frames and time in and out. Ethernet, the announced set with its bursts
//! and the responder shell come from the `l2` crate, which `ndp` shares, so
//! both responders have the same shape:
//!
//! - configuration: [`Responder::set_interface`], [`Responder::announce`],
//!   [`Responder::withdraw`];
//! - input: [`Responder::handle_frame`] returns the reply to send, if any;
//!   [`Responder::handle_timer`] takes back the timers the core armed;
//! - output: [`Responder::poll_output`] yields gratuitous frames to send and
//!   [`l2::Output::Arm`] timers (STYLE §3, dynamic timers with a generation).

pub mod responder;
pub mod wire;

pub use l2::{Burst, Config, EtherType, EthernetAddress, Limit};
pub use responder::{Arp, DropReason, Output, Responder, Stats, Timer, Transmit};
pub use wire::{FrameRepr, Operation, Packet, Repr};
