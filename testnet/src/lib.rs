//! Network-namespace test harness for ferrolb's integration tests: private
//! namespaces, veth pairs and bridges, and FRR, BIRD 2 and GoBGP peers.
//!
//! Test glue only: a dev-dependency of other crates' `tests/`, never a
//! dependency of the product. It runs `ip`, `setpriv`, the routers and their
//! CLIs as child processes and sends traffic only inside namespaces it created.
//!
//! ```no_run
//! use std::time::Duration;
//! use testnet::{Bird, Frr, Netns, veth_pair};
//!
//! let a = Netns::new("frr");
//! let b = Netns::new("bird");
//! veth_pair(&a, "eth0", &b, "eth0");
//! a.add_addr("eth0", "10.0.1.1/24");
//! b.add_addr("eth0", "10.0.1.2/24");
//! let bird = Bird::start(&b, "router id 10.0.1.2; protocol device {} ...");
//! let frr = Frr::start(&a, "router bgp 64501 ...");
//! frr.wait_established("10.0.1.2", Duration::from_secs(30));
//! let rib = frr.vtysh_json("show bgp ipv4 unicast json");
//! # let _ = (bird, rib);
//! ```
//!
//! Rules (see `testnet/README.md`):
//! - A test that lacks root or a binary panics with a message naming what is
//!   missing ([`require_root`], [`require_binary`]); it never skips, under
//!   `CI=true` or not.
//! - Guards clean up on drop, also while unwinding from a panic: [`Proc`] kills
//!   its process by PID, [`Netns`] kills whatever still runs inside the
//!   namespace and deletes it. Router guards print their logs first when the
//!   thread is panicking.
//! - If the test process itself is killed, children die by
//!   `PR_SET_PDEATHSIG=SIGKILL` (set by `setpriv`), and a watchdog process
//!   started with the first namespace kills what is left in this process's
//!   namespaces and deletes them once the process is gone.
//! - Names are `flb-<pid>-<counter>-<tag>`, unique per process and per test.

mod bird;
mod forward;
mod frr;
mod gobgp;
mod netns;
mod proc;
mod tool;

use std::fmt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

pub use nix::sys::signal::Signal;

pub use bird::Bird;
pub use forward::Forward;
pub use frr::Frr;
pub use gobgp::Gobgp;
pub use netns::{Bridge, Netns, veth_pair};
pub use proc::{Proc, RunDir};
pub use tool::JsonTool;

/// Panics unless the process runs as root (effective UID 0).
///
/// Network namespaces, veth pairs and the routers all need it. The test
/// command is `sudo scripts/test`; a test never skips for lack of root.
pub fn require_root() {
    if !nix::unistd::geteuid().is_root() {
        panic!(
            "testnet: this test needs root (it creates network namespaces and runs \
             FRR, BIRD, GoBGP); run it as root, e.g. `sudo scripts/test` \
             (tests never skip, CI={})",
            std::env::var("CI").unwrap_or_default()
        );
    }
}

/// Returns the absolute path of an executable, or panics naming it and the
/// Debian package that provides it.
///
/// `name` is either a path (`/usr/lib/frr/bgpd`) or a bare name (`birdc`),
/// looked up in `PATH`, then in `/usr/sbin`, `/sbin`, `/usr/bin`, `/bin` and
/// `/usr/lib/frr` (root's `PATH` under `sudo` may lack the `sbin`s).
pub fn require_binary(name: &str) -> PathBuf {
    find_binary(name).unwrap_or_else(|| {
        let base = Path::new(name)
            .file_name()
            .and_then(|b| b.to_str())
            .unwrap_or(name);
        let package = match package_of(base) {
            Some(p) => format!(" (Debian package `{p}`)"),
            None => String::new(),
        };
        panic!(
            "testnet: required binary `{name}` not found{package}; \
             `scripts/install-deps` installs every package the tests need \
             (tests never skip, CI={})",
            std::env::var("CI").unwrap_or_default()
        )
    })
}

/// Calls `f` every `poll` until it returns `Some`, for at most `timeout`.
///
/// `f` runs at least once, even with a zero timeout. `what` names the awaited
/// condition in the error, e.g. `"BIRD to learn 10.1.0.0/16"`.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    poll: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T, Timeout> {
    let start = Instant::now();
    loop {
        if let Some(value) = f() {
            return Ok(value);
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            return Err(Timeout {
                what: what.to_owned(),
                timeout,
            });
        }
        thread::sleep(poll.min(timeout - elapsed));
    }
}

/// The condition given to [`wait_until`] did not hold in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    /// What was awaited.
    pub what: String,
    /// How long it was awaited.
    pub timeout: Duration,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:.1} s waiting for {}",
            self.timeout.as_secs_f64(),
            self.what
        )
    }
}

impl std::error::Error for Timeout {}

fn find_binary(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return is_executable(&path).then_some(path);
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(EXTRA_BIN_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The Debian package that ships a binary the tests use.
fn package_of(binary: &str) -> Option<&'static str> {
    Some(match binary {
        "zebra" | "bgpd" | "bfdd" | "staticd" | "vtysh" => "frr",
        "bird" | "birdc" => "bird2",
        "gobgpd" | "gobgp" => "gobgpd",
        "ip" | "ss" | "bridge" => "iproute2",
        "setpriv" | "setsid" => "util-linux",
        "ping" => "iputils-ping",
        "arping" => "arping",
        "ndisc6" | "rdisc6" => "ndisc6",
        "nft" => "nftables",
        "tcpdump" => "tcpdump",
        "promtool" => "prometheus",
        "frr-reload.py" => "frr-pythontools",
        "chown" | "sleep" => "coreutils",
        _ => return None,
    })
}

const EXTRA_BIN_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/lib/frr"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_returns_first_some() {
        let mut n = 0;
        let got = wait_until(
            "n to reach 3",
            Duration::from_secs(5),
            Duration::ZERO,
            || {
                n += 1;
                (n == 3).then_some(n)
            },
        );
        assert_eq!(got, Ok(3));
    }

    #[test]
    fn wait_until_times_out_with_message() {
        let err = wait_until(
            "nothing",
            Duration::from_millis(30),
            Duration::from_millis(10),
            || None::<()>,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "timed out after 0.0 s waiting for nothing");
    }

    #[test]
    #[should_panic(expected = "`/nonexistent/bgpd` not found (Debian package `frr`)")]
    fn missing_binary_names_package() {
        require_binary("/nonexistent/bgpd");
    }

    #[test]
    fn finds_sh() {
        assert!(require_binary("sh").is_absolute());
    }
}
