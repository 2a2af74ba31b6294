//! `metallb.io/v1beta1`: every MetalLB kind except the stored BGPPeer.
//!
//! Wire types only: strings stay strings (addresses, durations,
//! communities) so that objects round-trip byte for byte; [`crate::validate`]
//! parses them. No I/O.

// kube's `printcolumn(type_ = ..)` repeats keys across columns; clippy
// reads each as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

mod bfdprofile;
mod bgpadvertisement;
mod bgppeer;
mod community;
mod configurationstate;
mod ipaddresspool;
mod l2advertisement;
mod servicebgpstatus;
mod servicel2status;

pub use bfdprofile::{BFDProfile, BFDProfileSpec, BFDProfileStatus};
pub use bgpadvertisement::{BGPAdvertisement, BGPAdvertisementSpec, BGPAdvertisementStatus};
pub use bgppeer::{BGPPeer, BGPPeerSpec, BGPPeerStatus, MatchExpression, NodeSelector};
pub use community::{Community, CommunityAlias, CommunitySpec, CommunityStatus};
pub use configurationstate::{
    ConfigurationResult, ConfigurationState, ConfigurationStateSpec, ConfigurationStateStatus,
};
pub use ipaddresspool::{IPAddressPool, IPAddressPoolSpec, IPAddressPoolStatus, ServiceAllocation};
pub use l2advertisement::{
    L2Advertisement, L2AdvertisementSpec, L2AdvertisementStatus, PreferredNodeSelector,
};
pub use servicebgpstatus::{ServiceBGPStatus, ServiceBGPStatusSpec, ServiceBGPStatusStatus};
pub use servicel2status::{
    InterfaceInfo, ServiceL2Status, ServiceL2StatusSpec, ServiceL2StatusStatus,
};

/// The API version of this module's kinds.
pub const API_VERSION: &str = "metallb.io/v1beta1";
