//! The shutdown signals: SIGTERM (the kubelet, systemd) and SIGINT (a
//! terminal).

use std::io;

use tokio::signal::unix::{self, SignalKind};
use tracing::info;

/// Listens for SIGTERM and SIGINT from the moment it is created, so that a
/// signal that arrives before [`Shutdown::recv`] is awaited is not lost.
#[derive(Debug)]
pub struct Shutdown {
    term: unix::Signal,
    int: unix::Signal,
}

/// Which signal asked for the shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM.
    Terminate,
    /// SIGINT.
    Interrupt,
}

impl Shutdown {
    /// Installs the handlers (inside a tokio runtime).
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            term: unix::signal(SignalKind::terminate())?,
            int: unix::signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for the first of the two signals and logs it.
    pub async fn recv(mut self) -> Signal {
        let signal = tokio::select! {
            _ = self.term.recv() => Signal::Terminate,
            _ = self.int.recv() => Signal::Interrupt,
        };
        match signal {
            Signal::Terminate => info!("SIGTERM"),
            Signal::Interrupt => info!("SIGINT"),
        }
        signal
    }
}
