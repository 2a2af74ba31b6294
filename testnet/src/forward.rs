//! A TCP port of the test process's own loopback, made reachable on the
//! loopback of a namespace: how processes inside a node namespace reach the
//! test's kube-apiserver, which listens on the root namespace's 127.0.0.1.
//!
//! The listening socket is created inside the namespace (a socket stays in
//! the namespace it was created in); each accepted connection is relayed by
//! two threads to a connection made from the root namespace. Only loopback
//! addresses are involved on either side.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use crate::Netns;

/// Relays `127.0.0.1:<port>` inside a namespace to `127.0.0.1:<port>` of
/// the test process. Stops accepting when dropped (connections already
/// relayed end with their peers). Counts the octets it relays into the
/// namespace ([`Forward::octets_in`]).
#[derive(Debug)]
pub struct Forward {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    ns: Netns,
    into_ns: Arc<AtomicU64>,
}

impl Forward {
    /// Starts relaying `port` into `ns`.
    ///
    /// # Panics
    /// If the port cannot be bound inside the namespace.
    pub fn loopback_port(ns: &Netns, port: u16) -> Self {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        ns.ip(["link", "set", "lo", "up"]);
        let listener = ns
            .run_in(|| TcpListener::bind(addr))
            .unwrap_or_else(|e| panic!("testnet: binding {addr} in {}: {e}", ns.name()));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let into_ns = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&into_ns);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(inner) = conn else { continue };
                // Connected from this thread, so in the root namespace.
                match TcpStream::connect(addr) {
                    Ok(outer) => relay(inner, outer, &counter),
                    Err(_) => {
                        let _ = inner.shutdown(Shutdown::Both);
                    }
                }
            }
        });
        Self {
            stop,
            addr,
            ns: ns.clone(),
            into_ns,
        }
    }

    /// Octets relayed into the namespace so far (what its processes
    /// received from the port, TLS records included), over every
    /// connection.
    #[must_use]
    pub fn octets_in(&self) -> u64 {
        self.into_ns.load(Ordering::Relaxed)
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let addr = self.addr;
        let _ = self.ns.run_in(|| TcpStream::connect(addr));
    }
}

/// Relays `inner` (the namespace's side) and `outer` both ways, counting
/// what goes to `inner` in `into_ns`.
fn relay(inner: TcpStream, outer: TcpStream, into_ns: &Arc<AtomicU64>) {
    let pipe = |mut from: TcpStream, mut to: TcpStream, count: Option<Arc<AtomicU64>>| {
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match from.read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
                if let Some(c) = &count {
                    c.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    };
    match (inner.try_clone(), outer.try_clone()) {
        (Ok(inner2), Ok(outer2)) => {
            pipe(inner, outer2, None);
            pipe(outer, inner2, Some(Arc::clone(into_ns)));
        }
        _ => {
            let _ = inner.shutdown(Shutdown::Both);
            let _ = outer.shutdown(Shutdown::Both);
        }
    }
}
