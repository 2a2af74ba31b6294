//! `metallb.io/v1beta2`: the stored version of BGPPeer.
//!
//! Wire types only, as in [`crate::v1beta1`]. No I/O.

// kube's `printcolumn(type_ = ..)` repeats keys across columns; clippy
// reads each as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

mod bgppeer;

pub use bgppeer::{BGPPeer, BGPPeerSpec, BGPPeerStatus, DynamicASNMode};

/// The API version of this module's kinds.
pub const API_VERSION: &str = "metallb.io/v1beta2";
