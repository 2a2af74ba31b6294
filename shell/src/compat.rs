//! MetalLB's command line, as its manifests and Helm chart pass it: the
//! flags both of its programs take, and the health-probe listener its pod
//! specs probe.
//!
//! A MetalLB install becomes a ferrolb one by swapping the two image
//! names, so nothing MetalLB's pod specs pass may make a ferrolb binary
//! exit. Each flag here either maps to its ferrolb meaning or is accepted
//! and reported once, at info, with why it has no effect
//! ([`MetallbArgs::report_unused`]).

use std::net::{Ipv6Addr, SocketAddr};

use tracing::{info, warn};

use crate::http::{Config, Handle, Routes, Server};

/// The port MetalLB's programs answer `/healthz` and `/readyz` on when
/// `--health-probe-port` is not given, and that its manifests probe.
pub const DEFAULT_HEALTH_PROBE_PORT: u16 = 17472;

/// The flags MetalLB's speaker and controller share: `#[command(flatten)]`
/// them into a binary's arguments.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "MetalLB compatibility")]
pub struct MetallbArgs {
    /// MetalLB's HTTPS metrics port (its manifests pass --port=9120; 0
    /// disables its metrics). ferrolb serves its metrics over HTTP on
    /// --metrics-addr instead; this flag is accepted and has no effect.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Also answer /healthz, /readyz and /metrics on this port, on every
    /// address (IPv6 and IPv4), where MetalLB's pod specs point their
    /// probes. Default 17472, MetalLB's; 0 turns it off. Given explicitly,
    /// a port that cannot be bound is an error; the default one is a
    /// warning (--metrics-addr still answers).
    #[arg(long, value_name = "PORT")]
    pub health_probe_port: Option<u16>,
    /// MetalLB: lowest TLS version of its HTTPS metrics. No effect (no TLS
    /// listener in ferrolb).
    #[arg(long, value_name = "VERSION")]
    pub tls_min_version: Option<String>,
    /// MetalLB: TLS 1.2 cipher suites of its HTTPS metrics. No effect.
    #[arg(long, value_name = "LIST")]
    pub tls_cipher_suites: Option<String>,
    /// MetalLB: TLS curve preferences of its HTTPS metrics. No effect.
    #[arg(long, value_name = "LIST")]
    pub tls_curve_preferences: Option<String>,
    /// MetalLB: directory of tls.crt/tls.key for its HTTPS metrics. No
    /// effect.
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_dir: Option<String>,
    /// MetalLB: address of a Go pprof endpoint. No effect (ferrolb has no
    /// pprof; its metrics and logs say what it does).
    #[arg(long, value_name = "ADDR")]
    pub pprof_bind_address: Option<String>,
}

impl MetallbArgs {
    /// No MetalLB flags given, and no health-probe listener: for programs
    /// run in-process by tests.
    #[must_use]
    pub fn without_probes() -> Self {
        Self {
            health_probe_port: Some(0),
            ..Self::default()
        }
    }

    /// Logs, once each at info, the flags that were given and have no
    /// effect in ferrolb.
    pub fn report_unused(&self) {
        if let Some(port) = self.port {
            info!(
                port,
                "--port (MetalLB's HTTPS metrics port) has no effect: ferrolb serves its metrics over HTTP on --metrics-addr"
            );
        }
        let tls = [
            ("--tls-min-version", &self.tls_min_version),
            ("--tls-cipher-suites", &self.tls_cipher_suites),
            ("--tls-curve-preferences", &self.tls_curve_preferences),
            ("--metrics-cert-dir", &self.metrics_cert_dir),
        ];
        for (flag, value) in tls {
            if let Some(value) = value {
                info!(
                    flag,
                    value = %value,
                    "MetalLB flag has no effect: ferrolb has no TLS metrics listener"
                );
            }
        }
        if let Some(addr) = self.pprof_bind_address.as_ref().filter(|a| !a.is_empty()) {
            info!(addr = %addr, "--pprof-bind-address has no effect: ferrolb has no pprof endpoint");
        }
    }

    /// Starts the health-probe listener on `[::]:PORT` (IPv4 too where
    /// the host allows it, else `0.0.0.0:PORT`), serving `routes`.
    ///
    /// `None` when the port is 0, or when the default port cannot be bound
    /// (logged as a warning: a kubelet probing it would not reach this
    /// process).
    ///
    /// # Errors
    /// When an explicitly given port cannot be bound.
    pub async fn serve_probes(&self, routes: Routes) -> Result<Option<Handle>, String> {
        let (port, explicit) = match self.health_probe_port {
            Some(0) => return Ok(None),
            Some(port) => (port, true),
            None => (DEFAULT_HEALTH_PROBE_PORT, false),
        };
        let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
        let v4 = SocketAddr::from(([0, 0, 0, 0], port));
        let server = match Server::bind(v6, Config::default()).await {
            Ok(server) => Ok(server),
            // No IPv6 on this host: IPv4 alone.
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
                Server::bind(v4, Config::default()).await
            }
            Err(e) => Err(e),
        };
        let served = server.and_then(|s| s.spawn(routes));
        match served {
            Ok(handle) => Ok(Some(handle)),
            Err(e) if explicit => Err(format!("--health-probe-port {port}: {e}")),
            Err(e) => {
                warn!(
                    port,
                    error = %e,
                    "cannot serve the health probes on MetalLB's default port: a kubelet probing it will not reach this process (--metrics-addr still answers; --health-probe-port 0 turns this off)"
                );
                Ok(None)
            }
        }
    }
}

/// Where a Pod's service account namespace is mounted.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The namespace as MetalLB's programs find it: the flag (or
/// METALLB_NAMESPACE) when given, else the service account's when running
/// in a Pod, else `metallb-system`.
pub fn namespace(flag: Option<&str>) -> String {
    match flag {
        Some(ns) if !ns.is_empty() => ns.to_owned(),
        _ => std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "metallb-system".into()),
    }
}

/// MetalLB's `--log-level` names mapped to `tracing` filters: `all` is
/// `trace`, `none` is `off`; the others (`debug`, `info`, `warn`, `error`)
/// are the same words.
pub fn log_level(level: &str) -> &str {
    match level {
        "all" => "trace",
        "none" => "off",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::health::Health;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        compat: MetallbArgs,
    }

    #[test]
    fn metallb_manifest_flags_parse() {
        let cli = Cli::try_parse_from([
            "x",
            "--port=9120",
            "--health-probe-port=17472",
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--tls-curve-preferences=23,24",
            "--metrics-cert-dir=/tmp/certs",
            "--pprof-bind-address=127.0.0.1:6060",
        ])
        .unwrap();
        assert_eq!(cli.compat.port, Some(9120));
        assert_eq!(cli.compat.health_probe_port, Some(17472));
        assert_eq!(cli.compat.tls_curve_preferences.as_deref(), Some("23,24"));
        let none = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(none.compat.health_probe_port, None);
    }

    #[test]
    fn metallb_level_names_map_to_filters() {
        for (metallb, ours) in [
            ("all", "trace"),
            ("debug", "debug"),
            ("info", "info"),
            ("warn", "warn"),
            ("error", "error"),
            ("none", "off"),
        ] {
            assert_eq!(log_level(metallb), ours);
            assert!(tracing_subscriber::EnvFilter::try_new(log_level(metallb)).is_ok());
        }
    }

    #[tokio::test]
    async fn an_explicit_busy_port_is_an_error_the_default_one_a_warning() {
        let taken = std::net::TcpListener::bind("[::]:0")
            .or_else(|_| std::net::TcpListener::bind("0.0.0.0:0"))
            .unwrap();
        let port = taken.local_addr().unwrap().port();
        let routes = || Routes::new(Health::new(), String::new);
        let explicit = MetallbArgs {
            health_probe_port: Some(port),
            ..MetallbArgs::default()
        };
        let err = explicit.serve_probes(routes()).await.unwrap_err();
        assert!(err.contains("--health-probe-port"), "{err}");
        let off = MetallbArgs {
            health_probe_port: Some(0),
            ..MetallbArgs::default()
        };
        assert!(off.serve_probes(routes()).await.unwrap().is_none());
    }
}
