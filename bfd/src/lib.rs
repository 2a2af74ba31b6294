//! Sans-IO Bidirectional Forwarding Detection for ferrolb.
//!
//! - [`wire`]: the BFD Control packet (RFC 5880 §4.1): a zero-copy
//!   [`wire::Packet`] view and the parsed [`wire::Repr`], with the
//!   §6.8.6 reception checks that need no session state.
//! - [`session`]: the asynchronous-mode state machine of one session
//!   (RFC 5880 §6.8), and [`Bfd`], every session of a speaker with
//!   demultiplexing, GTSM checks (RFC 5881 §5, RFC 5883 §2) and counters.
//! - [`echo`]: our BFD Echo packet (RFC 5880 §4, RFC 5881 §4), which only
//!   we read: the peer's forwarding plane sends it back.
//! - [`client`]: what a client of BFD (a BGP session, RFC 9384) does about
//!   a state change (RFC 5882 §3): act on a failure at once, ignore
//!   AdminDown, and give a peer that restarted its session time to come
//!   back Up.
//!
//! No I/O, no clock, no tasks: the driver passes `now` and received
//! datagrams (with their TTL), and drains [`Output`]s. Randomness (the
//! §6.8.7 transmit jitter, discriminators) comes from the `R: RngCore` the
//! core owns. Demand mode and authentication are not implemented: packets
//! with the A bit are dropped and counted.

pub mod client;
pub mod echo;
pub mod session;
pub mod wire;

pub use session::{
    Bfd, DownCause, EchoTransmit, Event, Output, PeerKey, Profile, SessionConfig, SessionInfo,
    Stats, Transmit,
};
pub use wire::{Diag, State};
