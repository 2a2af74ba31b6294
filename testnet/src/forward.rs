//! A TCP port of the test process's own loopback, made reachable on the
//! loopback of a namespace: how processes inside a node namespace reach the
//! test's kube-apiserver, which listens on the root namespace's 127.0.0.1.
//!
//! The listening socket is created inside the namespace (a socket stays in
//! the namespace it was created in); each accepted connection is relayed by
//! two threads to a connection made from the root namespace. Only loopback
//! addresses are involved on either side.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use crate::Netns;

/// Relays `127.0.0.1:<port>` inside a namespace to `127.0.0.1:<port>` of
/// the test process. Stops accepting when dropped (connections already
/// relayed end with their peers).
#[derive(Debug)]
pub struct Forward {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    ns: Netns,
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
        thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(inner) = conn else { continue };
                // Connected from this thread, so in the root namespace.
                match TcpStream::connect(addr) {
                    Ok(outer) => relay(inner, outer),
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
        }
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

fn relay(a: TcpStream, b: TcpStream) {
    let pipe = |mut from: TcpStream, mut to: TcpStream| {
        thread::spawn(move || {
            let _ = io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
        });
    };
    match (a.try_clone(), b.try_clone()) {
        (Ok(a2), Ok(b2)) => {
            pipe(a, b2);
            pipe(b, a2);
        }
        _ => {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }
}
