//! Prometheus metrics with MetalLB's names where the concept exists, and
//! `/healthz` and `/readyz`, over a minimal HTTP/1.1 server on tokio (one
//! request per connection).
//!
//! [`Snapshot::render`] is pure (values in, exposition text out); the
//! reconcile loop refreshes the [`Snapshot`] behind [`Shared`], and
//! [`spawn`] only moves bytes.
//!
//! The HTTP responder mirrors `controller/src/metrics.rs`; the two crates
//! share no tokio-using crate to hold it yet.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info};

/// The values the metrics report, refreshed by the reconcile loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// This node's name (the `node` label).
    pub node: String,
    /// Per BGP peer address.
    pub peers: BTreeMap<String, PeerMetrics>,
    /// What this node announces: (protocol, service, ip).
    pub announced: BTreeSet<(Protocol, String, IpAddr)>,
    /// MetalLB's `metallb_layer2_requests_received`.
    pub l2_requests_received: u64,
    /// MetalLB's `metallb_layer2_responses_sent`.
    pub l2_responses_sent: u64,
    /// MetalLB's `metallb_layer2_gratuitous_sent`.
    pub l2_gratuitous_sent: u64,
    /// Configuration errors seen: rejected reloads' errors and new problems
    /// found while planning.
    pub config_errors: u64,
    /// Whether the last reload was accepted.
    pub last_reload_success: bool,
    /// Whether a configuration has been applied (`/readyz`).
    pub ready: bool,
}

/// One BGP session's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerMetrics {
    /// The session is Established.
    pub up: bool,
    /// UPDATE messages sent.
    pub updates: u64,
    /// Prefixes the peer has from us.
    pub announced_prefixes: u64,
}

/// How a service IP is announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// BGP.
    Bgp,
    /// Layer 2 (ARP/NDP).
    Layer2,
}

impl Protocol {
    /// The label value, as MetalLB writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bgp => "bgp",
            Self::Layer2 => "layer2",
        }
    }
}

/// The snapshot the server reads and the reconcile loop writes.
pub type Shared = Arc<Mutex<Snapshot>>;

impl Snapshot {
    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        let per_peer: [Family<PeerMetrics>; 3] = [
            (
                "metallb_bgp_session_up",
                "gauge",
                "BGP session state (1 is up, 0 is down)",
                |p| u64::from(p.up),
            ),
            (
                "metallb_bgp_updates_total",
                "counter",
                "Number of BGP UPDATE messages sent",
                |p| p.updates,
            ),
            (
                "metallb_bgp_announced_prefixes_total",
                "gauge",
                "Number of prefixes currently being advertised on the BGP session",
                |p| p.announced_prefixes,
            ),
        ];
        for (name, kind, help, value) in per_peer {
            head(&mut out, name, kind, help);
            for (peer, m) in &self.peers {
                let _ = writeln!(out, "{name}{{peer=\"{}\"}} {}", escape(peer), value(m));
            }
        }
        head(
            &mut out,
            "metallb_speaker_announced",
            "gauge",
            "Services being announced from this node",
        );
        for (protocol, service, ip) in &self.announced {
            let _ = writeln!(
                out,
                "metallb_speaker_announced{{ip=\"{ip}\",node=\"{}\",protocol=\"{}\",service=\"{}\"}} 1",
                escape(&self.node),
                protocol.as_str(),
                escape(service)
            );
        }
        let scalars = [
            (
                "metallb_layer2_requests_received",
                "counter",
                "Number of layer 2 requests received for owned IPs",
                self.l2_requests_received,
            ),
            (
                "metallb_layer2_responses_sent",
                "counter",
                "Number of layer 2 responses sent for owned IPs",
                self.l2_responses_sent,
            ),
            (
                "metallb_layer2_gratuitous_sent",
                "counter",
                "Number of gratuitous layer 2 packets sent for owned IPs",
                self.l2_gratuitous_sent,
            ),
            (
                "ferrolb_config_errors_total",
                "counter",
                "Configuration errors found (rejected reloads and planning problems)",
                self.config_errors,
            ),
            (
                "ferrolb_config_last_reload_success",
                "gauge",
                "1 if the last configuration reload was accepted",
                u64::from(self.last_reload_success),
            ),
        ];
        for (name, kind, help, value) in scalars {
            head(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
        out
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz` and `/readyz` in a
/// background task. Returns the bound address.
pub async fn spawn(addr: SocketAddr, shared: Shared) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    info!(addr = %local, "metrics server listening");
    tokio::spawn(async move {
        loop {
            let Ok((conn, peer)) = listener.accept().await else {
                continue;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                if let Err(e) = handle(conn, &shared).await {
                    debug!(%peer, error = %e, "metrics connection failed");
                }
            });
        }
    });
    Ok(local)
}

async fn handle(mut conn: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // Read the request head only; bodies are not expected.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (ready, metrics) = {
        let snap = shared.lock().unwrap_or_else(PoisonError::into_inner);
        (snap.ready, (path == "/metrics").then(|| snap.render()))
    };
    let (code, ctype, body) = match (method, path, metrics) {
        ("GET", "/metrics", Some(text)) => ("200 OK", "text/plain; version=0.0.4", text),
        ("GET", "/healthz", _) => ("200 OK", "text/plain", "ok\n".to_owned()),
        ("GET", "/readyz", _) if ready => ("200 OK", "text/plain", "ok\n".to_owned()),
        ("GET", "/readyz", _) => (
            "503 Service Unavailable",
            "text/plain",
            "not ready\n".to_owned(),
        ),
        ("GET", _, _) => ("404 Not Found", "text/plain", "not found\n".to_owned()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "method not allowed\n".to_owned(),
        ),
    };
    let resp = format!(
        "HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(resp.as_bytes()).await?;
    conn.shutdown().await
}

/// A metric family: name, type, help, and how to read a value.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> u64);

/// Label values escape `\`, `"` and newlines.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_metallb_names() {
        let snap = Snapshot {
            node: "n1".into(),
            peers: BTreeMap::from([(
                "10.0.0.1:179".into(),
                PeerMetrics {
                    up: true,
                    updates: 3,
                    announced_prefixes: 2,
                },
            )]),
            announced: BTreeSet::from([(
                Protocol::Bgp,
                "default/web".into(),
                "192.0.2.10".parse().unwrap(),
            )]),
            config_errors: 4,
            last_reload_success: true,
            ..Snapshot::default()
        };
        let text = snap.render();
        for line in [
            "metallb_bgp_session_up{peer=\"10.0.0.1:179\"} 1\n",
            "metallb_bgp_updates_total{peer=\"10.0.0.1:179\"} 3\n",
            "metallb_bgp_announced_prefixes_total{peer=\"10.0.0.1:179\"} 2\n",
            "metallb_speaker_announced{ip=\"192.0.2.10\",node=\"n1\",protocol=\"bgp\",service=\"default/web\"} 1\n",
            "metallb_layer2_requests_received 0\n",
            "ferrolb_config_errors_total 4\n",
            "ferrolb_config_last_reload_success 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[tokio::test]
    async fn serves_metrics_and_readiness() {
        let shared = Shared::default();
        let addr = spawn("127.0.0.1:0".parse().unwrap(), shared.clone())
            .await
            .unwrap();
        let get = |path: &'static str| async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).await.unwrap();
            s
        };
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        shared.lock().unwrap().ready = true;
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(
            get("/metrics")
                .await
                .contains("ferrolb_config_errors_total 0")
        );
        assert!(get("/nope").await.starts_with("HTTP/1.1 404"));
    }
}
