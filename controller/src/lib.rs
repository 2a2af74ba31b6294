//! ferrolb's controller: assigns external IPs to LoadBalancer Services
//! from MetalLB `IPAddressPool`s and keeps them stable.
//!
//! [`alloc`] is the pure allocator (pools and services in, decisions out);
//! [`convert`] reads Kubernetes objects into its types and [`state`] makes
//! the controller's decisions, both pure too. [`plan`] runs them over files
//! with no cluster. The Kubernetes glue only reads objects, calls them and
//! writes status: [`reconcile`] (the kube-runtime controller), [`leader`]
//! (Lease election), [`metrics`] (Prometheus text and health over HTTP),
//! [`mlsecret`] (the memberlist Secret, created when missing). [`watched`]
//! is the packed form the controller keeps each Service in between reads
//! and decisions.

pub mod alloc;
pub mod convert;
pub mod leader;
pub mod metrics;
pub mod mlsecret;
pub mod plan;
pub mod pools;
pub mod reconcile;
pub mod state;
pub mod watched;
