//! ferrolb's speaker: the DaemonSet program that makes service IPs
//! reachable, by BGP (our own RFC 4271 speaker) or by layer 2.
//!
//! Layers: `driver` runs the sans-IO protocol cores of the `bgp`, `arp`,
//! `ndp` and `memberlist` crates on tokio, moving bytes and timers without
//! making protocol decisions; `net` is the OS glue (sockets, socket
//! options), the only place with `unsafe`, and private to this crate (the
//! few of its types a driver's API takes are re-exported by that driver).
//! `source` reads the cluster objects (files or the Kubernetes API), `run`
//! is the reconcile loop that feeds the `announce` decisions to the
//! drivers, `publish` writes the status objects and events back, and
//! `metrics` serves Prometheus.

pub mod announce;
pub mod driver;
pub mod metrics;
mod net;
pub mod publish;
pub mod run;
pub mod source;
