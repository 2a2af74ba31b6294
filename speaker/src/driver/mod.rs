//! Tokio drivers for the sans-IO cores: one task owns one core, loops on
//! its inputs and drains its outputs after every input (STYLE.md §3).

pub mod bfd;
pub mod bgp;
pub mod l2;
pub mod memberlist;
pub mod peers;
pub mod unnumbered;
