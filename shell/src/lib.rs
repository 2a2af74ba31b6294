//! ferrolb's process shell: what every binary of the project does around
//! its real work, written once.
//!
//! - [`LogArgs`]: the `--log-format` / `--log-level` flags and the
//!   `tracing` subscriber they set up (text without colour codes, or one
//!   JSON object per line, on standard error).
//! - [`main`]: logging, a tokio runtime, the program's future, and the exit
//!   code (0, or 1 with the error logged and printed).
//! - [`signal::Shutdown`]: SIGTERM or SIGINT.
//! - [`task`]: named and supervised long-lived tasks, and the panic hook
//!   that logs a panic and aborts.
//! - [`health`]: a registry of named components (task states, checks) that
//!   `/healthz` and `/readyz` report.
//! - [`compat`]: the flags MetalLB's manifests pass to both of its
//!   programs, and the health-probe listener its pod specs probe.
//! - [`http`]: the metrics/health HTTP server (hyper), with timeouts,
//!   connection caps and accept backoff, safe to expose on a host port;
//!   and its HTTPS form for MetalLB's `--port`, whose bearer tokens are
//!   reviewed by the Kubernetes API ([`http::review`], [`http::secure`]).
//! - [`procfs`]: the `process_*` metrics every Prometheus client exports.
//!
//! This is glue, not a sans-IO core: it owns sockets, clocks and tasks.

pub mod compat;
pub mod health;
pub mod http;
mod log;
pub mod metrics;
mod process;
pub mod procfs;
pub mod signal;
pub mod task;

pub use health::{Component, Health, State};
pub use log::{LogArgs, LogError, LogFormat};
pub use process::{Runtime, main};
