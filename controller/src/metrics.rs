//! Prometheus metrics with MetalLB's names, and `/healthz` and `/readyz`,
//! over a minimal HTTP/1.1 server on tokio (one request per connection).
//!
//! [`render`] is pure (counts in, exposition text out); [`serve`] only
//! moves bytes.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info};

use crate::state::PoolCounts;

/// What the HTTP server reads on each request.
pub trait Source: Send + Sync + 'static {
    /// The pools' counters, if this replica leads (else none).
    fn pool_counts(&self) -> Vec<PoolCounts>;
    /// Whether this replica leads.
    fn is_leader(&self) -> bool;
    /// Whether `/readyz` succeeds.
    fn is_ready(&self) -> bool;
}

/// The exposition text: MetalLB's `metallb_allocator_addresses_in_use_total`
/// and `metallb_allocator_addresses_total` per `pool`, and
/// `ferrolb_controller_leader`.
pub fn render(pools: &[PoolCounts], leader: bool) -> String {
    let mut out = String::new();
    let gauge = |out: &mut String, name: &str, help: &str, f: &dyn Fn(&PoolCounts) -> u128| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for p in pools {
            // Prometheus values are floats; a /64 is 1.8446744073709552e19.
            let _ = writeln!(
                out,
                "{name}{{pool=\"{}\"}} {}",
                escape(&p.name),
                f(p) as f64
            );
        }
    };
    gauge(
        &mut out,
        "metallb_allocator_addresses_in_use_total",
        "Number of IP addresses in use, per pool",
        &PoolCounts::in_use,
    );
    gauge(
        &mut out,
        "metallb_allocator_addresses_total",
        "Number of usable IP addresses, per pool",
        &PoolCounts::total,
    );
    let _ = writeln!(
        out,
        "# HELP ferrolb_controller_leader 1 if this replica holds the lease\n\
         # TYPE ferrolb_controller_leader gauge\nferrolb_controller_leader {}",
        u8::from(leader)
    );
    out
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` forever.
pub async fn serve(listener: TcpListener, source: Arc<dyn Source>) {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "metrics server listening");
    }
    loop {
        let Ok((conn, peer)) = listener.accept().await else {
            continue;
        };
        let source = source.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(conn, source.as_ref()).await {
                debug!(%peer, error = %e, "metrics connection failed");
            }
        });
    }
}

/// Binds `addr` and serves it in a background task.
pub async fn spawn(addr: SocketAddr, source: Arc<dyn Source>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(serve(listener, source));
    Ok(local)
}

async fn handle(mut conn: TcpStream, source: &dyn Source) -> std::io::Result<()> {
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
    let (code, ctype, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4",
            render(&source.pool_counts(), source.is_leader()),
        ),
        ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_owned()),
        ("GET", "/readyz") if source.is_ready() => ("200 OK", "text/plain", "ok\n".to_owned()),
        ("GET", "/readyz") => (
            "503 Service Unavailable",
            "text/plain",
            "not ready\n".to_owned(),
        ),
        ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_owned()),
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

/// Label values escape `\`, `"` and newlines.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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
        }];
        let text = render(&pools, true);
        assert!(
            text.contains("metallb_allocator_addresses_in_use_total{pool=\"v6\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_addresses_total{pool=\"v6\"} 18446744073709552000\n"),
            "{text}"
        );
        assert!(text.contains("ferrolb_controller_leader 1\n"));
    }
}
