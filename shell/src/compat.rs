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
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{info, warn};

use crate::http::review::{Gate, KubeReviewer};
use crate::http::secure::{CertSource, Secure, TlsOptions};
use crate::http::{Config, Handle, Routes, Server};

/// The port MetalLB's programs answer `/healthz` and `/readyz` on when
/// `--health-probe-port` is not given, and that its manifests probe.
pub const DEFAULT_HEALTH_PROBE_PORT: u16 = 17472;

/// The flags MetalLB's speaker and controller share: `#[command(flatten)]`
/// them into a binary's arguments.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "MetalLB compatibility")]
pub struct MetallbArgs {
    /// Also serve /metrics over HTTPS on this port, on every address, as
    /// MetalLB does (its manifests pass --port=9120, the port its
    /// ServiceMonitor and PodMonitor scrape): a request needs an
    /// `Authorization: Bearer` token that the Kubernetes API authenticates
    /// (TokenReview) and whose user may `get` the non-resource URL /metrics
    /// (SubjectAccessReview): 401 without or with a bad token, 403 when not
    /// allowed. Verdicts are cached (allowed 60 s, refused 10 s). This
    /// program's service account needs `create` on tokenreviews and
    /// subjectaccessreviews. Off when absent or 0 (MetalLB's default is
    /// 9120; ferrolb's plain HTTP on --metrics-addr stays either way). Not
    /// in the speaker's file mode (no API to ask).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Also answer /healthz, /readyz and /metrics on this port, on every
    /// address (IPv6 and IPv4), where MetalLB's pod specs point their
    /// probes. Default 17472, MetalLB's; 0 turns it off. Given explicitly,
    /// a port that cannot be bound is an error; the default one is a
    /// warning (--metrics-addr still answers).
    #[arg(long, value_name = "PORT")]
    pub health_probe_port: Option<u16>,
    /// Lowest TLS version of --port: VersionTLS12 or VersionTLS13 (the
    /// default, MetalLB's). VersionTLS10 and VersionTLS11 mean TLS 1.2
    /// (rustls has nothing older; logged).
    #[arg(long, value_name = "VERSION")]
    pub tls_min_version: Option<String>,
    /// TLS 1.2 cipher suites of --port, Go's names, comma-separated (needs
    /// --tls-min-version=VersionTLS12; TLS 1.3's suites are all offered,
    /// as in Go). rustls implements the ECDHE suites with AES-GCM and
    /// ChaCha20-Poly1305; others (CBC, RSA key exchange, 3DES, RC4) are
    /// logged once and left out. Default: rustls's.
    #[arg(long, value_name = "LIST")]
    pub tls_cipher_suites: Option<String>,
    /// Key exchange groups of --port, Go's numeric CurveIDs in order of
    /// preference: 29 (X25519), 23 (P-256), 24 (P-384). 25 (P-521) and the
    /// post-quantum hybrids are logged once and left out (not in rustls
    /// with ring). Default: rustls's.
    #[arg(long, value_name = "LIST")]
    pub tls_curve_preferences: Option<String>,
    /// Directory holding tls.crt and tls.key (PEM) for --port, as a
    /// kubernetes.io/tls Secret mounts them; re-read every 10 s, and a
    /// changed valid pair replaces the certificate without a restart.
    /// Default: a self-signed certificate made at start.
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
        if self.secure_port().is_none() {
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
                        "MetalLB flag has no effect without --port (the HTTPS metrics listener)"
                    );
                }
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

    /// The HTTPS metrics port, when one is asked for (`--port`, not 0).
    #[must_use]
    pub fn secure_port(&self) -> Option<u16> {
        self.port.filter(|p| *p != 0)
    }

    /// Starts the HTTPS metrics listener of `--port` on `[::]:PORT` (IPv4
    /// too where the host allows it, else `0.0.0.0:PORT`), answering
    /// `GET /metrics` from `routes` to bearer tokens `client`'s API allows
    /// (see [`crate::http::review`]); `None` without `--port`.
    ///
    /// # Errors
    /// `--port` without an API client (`client` is `None`), a TLS flag or a
    /// certificate directory that cannot be used, or a port that cannot be
    /// bound; each message names the flag.
    pub async fn serve_secure_metrics(
        &self,
        client: Option<kube::Client>,
        routes: Routes,
    ) -> Result<Option<Handle>, String> {
        let Some(port) = self.secure_port() else {
            return Ok(None);
        };
        let client = client.ok_or_else(|| {
            format!("--port {port}: the HTTPS metrics review bearer tokens with the Kubernetes API, which this mode does not use")
        })?;
        let options = TlsOptions::parse(
            self.tls_min_version.as_deref(),
            self.tls_cipher_suites.as_deref(),
            self.tls_curve_preferences.as_deref(),
        )?;
        let source = match self.metrics_cert_dir.as_deref().filter(|d| !d.is_empty()) {
            Some(dir) => CertSource::Dir(PathBuf::from(dir)),
            None => CertSource::SelfSigned,
        };
        let gate = Arc::new(Gate::new(Arc::new(KubeReviewer::new(client, "/metrics"))));
        let secure = Secure::new(&options, source, gate)?;
        let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
        let v4 = SocketAddr::from(([0, 0, 0, 0], port));
        let server = match Server::bind(v6, Config::default()).await {
            Ok(server) => Ok(server),
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
                Server::bind(v4, Config::default()).await
            }
            Err(e) => Err(e),
        };
        server
            .and_then(|s| s.spawn_secure(routes, secure))
            .map(Some)
            .map_err(|e| format!("--port {port}: {e}"))
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

    #[tokio::test]
    async fn the_https_port_needs_an_api_and_usable_tls_flags() {
        let routes = || Routes::new(Health::new(), String::new);
        let off = MetallbArgs {
            port: Some(0),
            ..MetallbArgs::default()
        };
        assert!(
            off.serve_secure_metrics(None, routes())
                .await
                .unwrap()
                .is_none()
        );
        let on = MetallbArgs {
            port: Some(9120),
            ..MetallbArgs::default()
        };
        let err = on.serve_secure_metrics(None, routes()).await.unwrap_err();
        assert!(err.starts_with("--port 9120"), "{err}");
        // A client to nowhere: nothing is asked before the listener starts.
        let client = || {
            let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
            Some(kube::Client::try_from(config).unwrap())
        };
        for (args, flag) in [
            (
                MetallbArgs {
                    tls_min_version: Some("TLS13".into()),
                    ..on.clone()
                },
                "--tls-min-version",
            ),
            (
                MetallbArgs {
                    metrics_cert_dir: Some("/nonexistent/ferrolb-certs".into()),
                    ..on.clone()
                },
                "--metrics-cert-dir",
            ),
        ] {
            let err = args
                .serve_secure_metrics(client(), routes())
                .await
                .unwrap_err();
            assert!(err.contains(flag), "{err}");
        }
    }
}
