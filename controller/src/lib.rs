//! ferrolb's controller: assigns external IPs to LoadBalancer Services
//! from MetalLB `IPAddressPool`s and keeps them stable.
//!
//! [`alloc`] is the pure allocator (pools and services in, decisions out);
//! the Kubernetes glue only reads objects, calls it and writes status.

pub mod alloc;
