//! ferrolb's BGP-4: the wire codec, pure framing and (later) the sans-IO
//! session core.
//!
//! This crate does no I/O: it never touches a socket, reads a clock, spawns
//! a task or draws random numbers on its own. The speaker's drivers move
//! bytes and time in and out.

pub mod frame;
pub mod session;
pub mod wire;

pub use wire::{DecodeCtx, DecodeError, EncodeCtx, Message, Notification};
