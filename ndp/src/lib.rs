//! ferrolb's IPv6 Neighbor Discovery responder (RFC 4861) for layer 2
//! mode: NS/NA wire views with their validity checks, and the pure
//! responder that answers solicitations for the addresses this node
//! announces and sends unsolicited advertisements on takeover.
//!
//! This crate does no I/O: it never touches a socket, reads a clock, spawns
//! a task or draws random numbers. The speaker's AF_PACKET driver moves
//! frames and time in and out, and joins the solicited-node groups
//! ([`solicited_node_mac`]) of the announced addresses. Ethernet and the
//! announced set with its bursts come from the `l2` crate, as for `arp`, so both
//! responders have one shape: `set_interface`/`announce`/`withdraw`,
//! `handle_frame` returning the reply, `handle_timer`, and `poll_output`
//! yielding frames and [`Output::Arm`] timers (STYLE §3).
//!
//! [`unnumbered`] is the router-discovery half of BGP unnumbered peering:
//! Router Advertisements out, the neighbor's link-local address learned
//! from the ones that come in ([`wire::router`] reads and writes them).

pub mod responder;
pub mod unnumbered;
pub mod wire;

pub use l2::{Burst, Config, EtherType, EthernetAddress};
pub use responder::{DropReason, Ndp, Output, Responder, Stats, Timer, Transmit};
pub use wire::{
    ALL_NODES, FrameRepr, NdiscRepr, NeighborFlags, is_solicited_node, multicast_mac,
    solicited_node, solicited_node_mac,
};
