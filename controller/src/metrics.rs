//! Prometheus metrics with MetalLB's names, and `/healthz` and `/readyz`,
//! served by the shared server ([`shell::http`]: timeouts, connection
//! caps, accept backoff).
//!
//! [`render`] is pure (counts in, exposition text out); [`spawn`] only
//! moves bytes.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
    /// Where Services' time goes, stage by stage.
    fn stages(&self) -> &Stages;
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

/// Upper bounds of the stage histograms' buckets, in seconds: 1 ms to 10 s.
pub const STAGE_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A Prometheus histogram over [`STAGE_BUCKETS`], updated without a lock.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket, not cumulative; the last is above every
    /// bound.
    counts: [AtomicU64; STAGE_BUCKETS.len() + 1],
    /// The sum of the observations, in nanoseconds.
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Counts one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = STAGE_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(STAGE_BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// The family `name` in exposition text, its series labelled `labels`
    /// (`key="value"` pairs, or empty).
    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let sep = if labels.is_empty() { "" } else { "," };
        let mut total = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            total += c.load(Ordering::Relaxed);
            let le = STAGE_BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), ToString::to_string);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {total}");
        }
        let braces = |l: &str| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            }
        };
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {total}", braces(labels));
    }
}

/// Where a Service's time goes in the controller, from its watch event to
/// its status written (issue 18: create-to-status under churn).
#[derive(Debug, Default)]
pub struct Stages {
    /// From a Service's watch event reaching the controller to the start
    /// of its reconcile (`workqueue_queue_duration_seconds`).
    pub queue: Histogram,
    /// A reconcile, start to end, its status write included
    /// (`controller_runtime_reconcile_time_seconds`).
    pub reconcile: Histogram,
    /// The status write's round trip to the apiserver
    /// (`ferrolb_controller_status_write_seconds`).
    pub write: Histogram,
}

/// The stage histograms in exposition text, under controller-runtime's
/// names where it has the concept (the library MetalLB's controller is
/// built on, which names these per controller), so that dashboards made
/// for controller-runtime controllers read them.
pub fn render_stages(s: &Stages) -> String {
    let mut out = String::new();
    s.queue.render(
        &mut out,
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        "name=\"service\"",
    );
    s.reconcile.render(
        &mut out,
        "controller_runtime_reconcile_time_seconds",
        "Length of time per reconciliation per controller",
        "controller=\"service\"",
    );
    s.write.render(
        &mut out,
        "ferrolb_controller_status_write_seconds",
        "Round trip of a Service status write (PUT to /status), in seconds",
        "",
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
        text.push_str(&render_stages(source.stages()));
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

    /// Each observation lands in the first bucket whose bound it does not
    /// exceed; buckets are cumulative, `+Inf` and `_count` are the total.
    #[test]
    fn stage_histograms_count_cumulatively() {
        let s = Stages::default();
        for ms in [0.5, 1.0, 30.0, 300.0, 20_000.0] {
            s.write.observe(Duration::from_secs_f64(ms / 1e3));
        }
        s.queue.observe(Duration::from_millis(2));
        let text = render_stages(&s);
        for (line, want) in [
            (
                "ferrolb_controller_status_write_seconds_bucket{le=\"0.001\"}",
                "2",
            ),
            (
                "ferrolb_controller_status_write_seconds_bucket{le=\"0.025\"}",
                "2",
            ),
            (
                "ferrolb_controller_status_write_seconds_bucket{le=\"0.05\"}",
                "3",
            ),
            (
                "ferrolb_controller_status_write_seconds_bucket{le=\"0.5\"}",
                "4",
            ),
            (
                "ferrolb_controller_status_write_seconds_bucket{le=\"10\"}",
                "4",
            ),
            (
                "ferrolb_controller_status_write_seconds_bucket{le=\"+Inf\"}",
                "5",
            ),
            (
                concat!("ferrolb_controller_status_write_seconds", "_count"),
                "5",
            ),
            (
                concat!("ferrolb_controller_status_write_seconds", "_sum"),
                "20.3315",
            ),
            (
                "workqueue_queue_duration_seconds_bucket{name=\"service\",le=\"0.001\"}",
                "0",
            ),
            (
                "workqueue_queue_duration_seconds_bucket{name=\"service\",le=\"0.0025\"}",
                "1",
            ),
            (
                "workqueue_queue_duration_seconds_count{name=\"service\"}",
                "1",
            ),
            (
                "controller_runtime_reconcile_time_seconds_count{controller=\"service\"}",
                "0",
            ),
        ] {
            let got = text
                .lines()
                .find_map(|l| l.strip_prefix(line)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("{line} missing from\n{text}"));
            assert_eq!(got, want, "{line}");
        }
        assert_eq!(text.matches("# TYPE ").count(), 3);
        assert!(text.contains("# TYPE workqueue_queue_duration_seconds histogram\n"));
    }
}
