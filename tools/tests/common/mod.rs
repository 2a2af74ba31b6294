//! Shared pieces of the BGP namespace integration tests: a
//! `ferrolb-bgp` process driven over stdin/stdout, and the two-namespace
//! lab (router <-> node) on one veth link.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::Value;
use testnet::{JsonTool, Netns, RunDir, veth_pair};

/// A router namespace and a node namespace joined by one link:
/// router 10.0.0.1/24, fd00::1/64; node 10.0.0.2/24, fd00::2/64.
pub struct Lab {
    pub router: Netns,
    pub node: Netns,
}

impl Lab {
    pub fn new() -> Self {
        testnet::require_root();
        let router = Netns::new("rtr");
        let node = Netns::new("node");
        veth_pair(&router, "eth0", &node, "eth0");
        router.add_addr("eth0", "10.0.0.1/24");
        router.add_addr("eth0", "fd00::1/64");
        node.add_addr("eth0", "10.0.0.2/24");
        node.add_addr("eth0", "fd00::2/64");
        Self { router, node }
    }
}

/// A running `ferrolb-bgp`: its JSON events ([`JsonTool`], which it
/// derefs to) and its log.
pub struct Ferrolb {
    tool: JsonTool,
    dir: RunDir,
}

impl std::ops::Deref for Ferrolb {
    type Target = JsonTool;
    fn deref(&self) -> &JsonTool {
        &self.tool
    }
}

impl std::ops::DerefMut for Ferrolb {
    fn deref_mut(&mut self) -> &mut JsonTool {
        &mut self.tool
    }
}

impl Ferrolb {
    /// Starts `ferrolb-bgp` with `args` inside `ns`.
    pub fn start(ns: &Netns, args: &[&str]) -> Self {
        let dir = RunDir::new("ferrolb");
        let stderr = std::fs::File::create(dir.join("ferrolb.log")).unwrap();
        let mut cmd = ns.command(env!("CARGO_BIN_EXE_ferrolb-bgp"));
        cmd.args(args).args(["--log-level", "debug"]).stderr(stderr);
        let tool = JsonTool::spawn(ns, &mut cmd, "ferrolb-bgp");
        Self { tool, dir }
    }

    /// Waits for an event matching `pred`, keeping every event seen.
    pub fn wait_event(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_event_from(what, 0, timeout, pred)
    }

    /// Waits for an event matching `pred` among `seen[from..]` and the
    /// events still to come: `from = seen.len()` ignores everything seen
    /// so far.
    pub fn wait_event_from(
        &mut self,
        what: &str,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        match self.tool.wait_from(from, deadline, pred) {
            Some(v) => v,
            None => {
                self.dump_log();
                panic!(
                    "timed out after {timeout:?} waiting for {what}; events: {:#?}",
                    self.seen
                )
            }
        }
    }

    /// Waits until the session with `peer` is Established (again): the
    /// `nth` established event (1-based).
    pub fn wait_established(&mut self, nth: usize, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let count = self
                .seen
                .iter()
                .filter(|v| v["event"] == "established")
                .count();
            if count >= nth {
                return self
                    .seen
                    .iter()
                    .filter(|v| v["event"] == "established")
                    .nth(nth - 1)
                    .cloned()
                    .unwrap();
            }
            if self.tool.next(deadline).is_none() {
                self.dump_log();
                panic!(
                    "timed out waiting for Established #{nth}; events: {:#?}",
                    self.seen
                )
            }
        }
    }

    /// The counters of the (single) peer.
    pub fn stats(&mut self) -> Value {
        self.seen.retain(|v| v["event"] != "stats");
        self.send("stats");
        self.wait_event("stats", Duration::from_secs(5), |v| v["event"] == "stats")
    }

    pub fn dump_log(&self) {
        let log = self.dir.join("ferrolb.log");
        if let Ok(text) = std::fs::read_to_string(&log) {
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "--- ferrolb-bgp log (last {} lines) ---\n{}",
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

impl Drop for Ferrolb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_log();
        }
    }
}

/// Polls `f` every 100 ms until it returns `Some`, or panics after
/// `timeout` naming `what`.
pub fn eventually<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    testnet::wait_until(what, timeout, Duration::from_millis(100), f)
        .unwrap_or_else(|e| panic!("{e}"))
}
