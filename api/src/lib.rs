//! MetalLB's `metallb.io` custom resources in Rust, and their validation.
//!
//! Users migrate from MetalLB, so every kind, version, field name, default,
//! enum and printer column follows MetalLB's CRDs: their YAML applies
//! unchanged. On top, [`crd::crds`] adds CEL rules so the apiserver rejects
//! bad objects without a webhook, and [`validate`] checks a whole
//! configuration, including the rules between objects, as pure functions
//! that return the parsed [`model`] the controller and the speaker decide
//! from.
//!
//! This crate holds types and pure functions only: no client calls, no I/O
//! (kube is used for its derive and resource traits).
//!
//! | kind | versions | module |
//! | --- | --- | --- |
//! | IPAddressPool, L2Advertisement, BGPAdvertisement, BFDProfile, Community, ServiceL2Status, ServiceBGPStatus, ConfigurationState | v1beta1 | [`v1beta1`] |
//! | BGPPeer | v1beta2 (stored), v1beta1 (served, deprecated) | [`v1beta2`], [`v1beta1`] |
//!
//! [`watched`] holds the core Kubernetes kinds the speaker watches (Nodes,
//! Services, EndpointSlices) as it reads them: only the fields it uses.

pub mod addr;
pub mod community;
pub mod crd;
pub mod duration;
pub mod event;
pub mod legacy;
pub mod meta;
pub mod model;
pub mod v1beta1;
pub mod v1beta2;
pub mod validate;
pub mod watched;

pub use crd::crds;

/// The API group of every kind here.
pub const GROUP: &str = "metallb.io";
