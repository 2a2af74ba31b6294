//! Prometheus metrics with MetalLB's names, and `/healthz` and `/readyz`,
//! served by the shared server ([`shell::http`]: timeouts, connection
//! caps, accept backoff).
//!
//! [`render`] is pure (counts in, exposition text out); [`spawn`] only
//! moves bytes.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use shell::compat::MetallbArgs;
use shell::health::{Health, State};
use shell::http::{Config, Routes, Server};
use shell::metrics::escape;

use crate::state::PoolCounts;

/// What the HTTP server reads on each request.
pub trait Source: Send + Sync + 'static {
    /// The pools' counters, if this replica leads (else none).
    fn pool_counts(&self) -> Vec<PoolCounts>;
    /// Whether this replica leads.
    fn is_leader(&self) -> bool;
    /// Whether `/readyz` succeeds.
    fn is_ready(&self) -> bool;
    /// The configuration gauges and the refused-write counters.
    fn config(&self) -> ConfigGauges;
}

/// The configuration's state, the updates processed and the writes
/// refused, for [`render`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConfigGauges {
    /// This replica leads and has loaded the pools
    /// (`metallb_k8s_client_config_loaded_bool`).
    pub loaded: bool,
    /// Some pool object is refused and its last good version (or none)
    /// is in force (`metallb_k8s_client_config_stale_bool`).
    pub stale: bool,
    /// Writes refused by the `resourceVersion` precondition.
    pub conflicts: u64,
    /// Writes not sent, or cut short, because leadership may be lost.
    pub fenced: u64,
    /// Object updates processed: Service reconciles and pool changes
    /// (`metallb_k8s_client_updates_total`).
    pub updates: u64,
    /// Updates that failed: reconciles retried with backoff, pool changes
    /// refused (`metallb_k8s_client_update_errors_total`).
    pub update_errors: u64,
    /// LoadBalancer Services of ours without an address: none fits, or
    /// the request is invalid (`ferrolb_controller_services_pending`; 0
    /// unless this replica leads).
    pub pending: usize,
}

/// A per-pool gauge: name, help, and the value of one pool.
type PoolGauge = (&'static str, &'static str, fn(&PoolCounts) -> u128);

/// The per-pool gauges, as MetalLB's allocator exports them.
const POOL_GAUGES: [PoolGauge; 7] = [
    (
        "metallb_allocator_addresses_in_use_total",
        "Number of IP addresses in use, per pool",
        PoolCounts::in_use,
    ),
    (
        "metallb_allocator_addresses_total",
        "Number of usable IP addresses, per pool",
        PoolCounts::total,
    ),
    (
        "metallb_allocator_ipv4_addresses_in_use_total",
        "Number of IPV4 addresses in use, per pool",
        |p| p.assigned.v4,
    ),
    (
        "metallb_allocator_ipv4_addresses_total",
        "Number of usable IPV4 addresses, per pool",
        |p| p.capacity.v4,
    ),
    (
        "metallb_allocator_ipv6_addresses_in_use_total",
        "Number of IPV6 addresses in use, per pool",
        |p| p.assigned.v6,
    ),
    (
        "metallb_allocator_ipv6_addresses_total",
        "Number of usable IPV6 addresses, per pool",
        |p| p.capacity.v6,
    ),
    (
        "metallb_allocator_services_allocated_total",
        "Number of services allocated, per pool",
        |p| u128::from(p.services),
    ),
];

/// The exposition text: MetalLB's allocator gauges per `pool`
/// (`POOL_GAUGES`: addresses usable and in use, in all and per family,
/// and services allocated), and `ferrolb_controller_leader`; MetalLB's
/// `metallb_k8s_client_config_loaded_bool`,
/// `metallb_k8s_client_config_stale_bool`,
/// `metallb_k8s_client_updates_total` and
/// `metallb_k8s_client_update_errors_total`; and
/// `ferrolb_controller_writes_refused_total` by `reason` (`conflict`: the
/// object changed since it was read; `fenced`: leadership may be lost);
/// `ferrolb_controller_services_pending`.
pub fn render(pools: &[PoolCounts], leader: bool, config: ConfigGauges) -> String {
    let mut out = String::new();
    for (name, help, value) in POOL_GAUGES {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for p in pools {
            // Prometheus values are floats; a /64 is 1.8446744073709552e19.
            let _ = writeln!(
                out,
                "{name}{{pool=\"{}\"}} {}",
                escape(&p.name),
                value(p) as f64
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP ferrolb_controller_leader 1 if this replica holds the lease\n\
         # TYPE ferrolb_controller_leader gauge\nferrolb_controller_leader {}",
        u8::from(leader)
    );
    let _ = writeln!(
        out,
        "# HELP metallb_k8s_client_config_loaded_bool 1 if the configuration was loaded (this replica leads)\n\
         # TYPE metallb_k8s_client_config_loaded_bool gauge\n\
         metallb_k8s_client_config_loaded_bool {}\n\
         # HELP metallb_k8s_client_config_stale_bool 1 if running on a stale configuration: some pool object was refused and its last good version (or none) is in force\n\
         # TYPE metallb_k8s_client_config_stale_bool gauge\n\
         metallb_k8s_client_config_stale_bool {}\n\
         # HELP metallb_k8s_client_updates_total Number of k8s object updates that have been processed.\n\
         # TYPE metallb_k8s_client_updates_total counter\n\
         metallb_k8s_client_updates_total {}\n\
         # HELP metallb_k8s_client_update_errors_total Number of k8s object updates that failed for some reason.\n\
         # TYPE metallb_k8s_client_update_errors_total counter\n\
         metallb_k8s_client_update_errors_total {}",
        u8::from(config.loaded),
        u8::from(config.stale),
        config.updates,
        config.update_errors
    );
    let _ = writeln!(
        out,
        "# HELP ferrolb_controller_writes_refused_total Writes refused: conflict (the object changed since it was read), fenced (leadership may be lost)\n\
         # TYPE ferrolb_controller_writes_refused_total counter\n\
         ferrolb_controller_writes_refused_total{{reason=\"conflict\"}} {}\n\
         ferrolb_controller_writes_refused_total{{reason=\"fenced\"}} {}",
        config.conflicts, config.fenced
    );
    let _ = writeln!(
        out,
        "# HELP ferrolb_controller_services_pending LoadBalancer Services waiting for an address: no pool fits, or the request is invalid (the leader's count)\n\
         # TYPE ferrolb_controller_services_pending gauge\n\
         ferrolb_controller_services_pending {}",
        config.pending
    );
    out
}

/// Binds `addr` and serves `/metrics`, `/healthz` and `/readyz` in
/// background tasks for as long as the runtime runs. Readiness is the
/// component `lease` ([`Source::is_ready`]). The same answers on MetalLB's
/// health-probe port ([`MetallbArgs::serve_probes`]), and `/metrics` over
/// HTTPS to tokens `client`'s API allows on `--port`
/// ([`MetallbArgs::serve_secure_metrics`]). Returns the bound address.
///
/// # Errors
/// When `addr`, an explicitly given health-probe port or `--port` cannot
/// be bound, or the TLS flags or certificate cannot be used.
pub async fn spawn(
    addr: SocketAddr,
    source: Arc<dyn Source>,
    metallb: &MetallbArgs,
    client: kube::Client,
) -> std::io::Result<SocketAddr> {
    let health = Health::new();
    let ready = Arc::clone(&source);
    health.check("lease", move || {
        if ready.is_ready() {
            State::Ready
        } else {
            State::Starting(
                "no Lease round trip yet, or the leader's startup replay is not done".into(),
            )
        }
    });
    let routes = Routes::new(health, move || {
        let mut text = render(&source.pool_counts(), source.is_leader(), source.config());
        text.push_str(&shell::procfs::render());
        text.push_str(&shell::http::review::render());
        text
    });
    let handle = Server::bind(addr, Config::default())
        .await?
        .spawn(routes.clone())?;
    // Served for as long as the runtime runs, as the metrics are.
    let _secure = metallb
        .serve_secure_metrics(Some(client), routes.clone())
        .await
        .map_err(std::io::Error::other)?;
    let _probes = metallb
        .serve_probes(routes)
        .await
        .map_err(std::io::Error::other)?;
    Ok(handle.local_addr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::Capacity;

    #[test]
    fn renders_metallb_names() {
        let pools = vec![PoolCounts {
            name: "v6".into(),
            capacity: Capacity { v4: 4, v6: 1 << 64 },
            assigned: Capacity { v4: 1, v6: 2 },
            services: 2,
        }];
        let text = render(
            &pools,
            true,
            ConfigGauges {
                loaded: true,
                stale: true,
                conflicts: 2,
                fenced: 0,
                updates: 9,
                update_errors: 1,
                pending: 3,
            },
        );
        for line in [
            "metallb_allocator_ipv4_addresses_total{pool=\"v6\"} 4\n",
            "metallb_allocator_ipv4_addresses_in_use_total{pool=\"v6\"} 1\n",
            "metallb_allocator_ipv6_addresses_total{pool=\"v6\"} 18446744073709552000\n",
            "metallb_allocator_ipv6_addresses_in_use_total{pool=\"v6\"} 2\n",
            "metallb_allocator_services_allocated_total{pool=\"v6\"} 2\n",
            "# TYPE metallb_k8s_client_updates_total counter\n",
            "metallb_k8s_client_updates_total 9\n",
            "# TYPE metallb_k8s_client_update_errors_total counter\n",
            "metallb_k8s_client_update_errors_total 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // Every family has HELP and TYPE once, before its samples.
        for name in text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(['{', ' ']).next().unwrap())
        {
            let at = text.find(&format!("\n{name}")).unwrap();
            assert!(text[..at].contains(&format!("# TYPE {name} ")), "{name}");
            assert_eq!(
                text.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{name}"
            );
        }
        assert!(
            text.contains("metallb_allocator_addresses_in_use_total{pool=\"v6\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_addresses_total{pool=\"v6\"} 18446744073709552000\n"),
            "{text}"
        );
        assert!(text.contains("ferrolb_controller_leader 1\n"));
        assert!(text.contains("metallb_k8s_client_config_loaded_bool 1\n"));
        assert!(text.contains("metallb_k8s_client_config_stale_bool 1\n"));
        assert!(
            text.contains("ferrolb_controller_writes_refused_total{reason=\"conflict\"} 2\n"),
            "{text}"
        );
        assert!(
            text.ends_with("ferrolb_controller_services_pending 3\n"),
            "{text}"
        );
    }
}
