//! GoBGP 3 (`gobgpd`) in a namespace.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::proc::wait_ready;
use crate::{Netns, Proc, RunDir, require_binary, require_root, wait_until};

/// A `gobgpd` in a namespace, its gRPC API on `127.0.0.1:50051` of that
/// namespace (so parallel instances never share a port), config and log in a
/// fresh [`RunDir`].
///
/// GoBGP 3 waits a random 5-9 s before its first active connect: make its
/// neighbors passive (`[neighbors.transport.config] passive-mode = true`)
/// when the test is in a hurry.
///
/// Dropping the guard prints the log when the thread is panicking, then
/// stops gobgpd by PID.
#[derive(Debug)]
pub struct Gobgp {
    proc: Proc,
    dir: RunDir,
    ns: Netns,
}

impl Gobgp {
    /// Starts gobgpd with a TOML config; returns once its API answers.
    ///
    /// # Panics
    ///
    /// Without root, `gobgpd` or `gobgp`, or if gobgpd exits or its API does
    /// not answer within 15 s.
    pub fn start(ns: &Netns, toml: &str) -> Self {
        require_root();
        let gobgpd = require_binary("gobgpd");
        require_binary("gobgp");
        let dir = RunDir::new("gobgp");
        let conf = dir.join("gobgpd.toml");
        fs::write(&conf, toml)
            .unwrap_or_else(|e| panic!("testnet: writing {}: {e}", conf.display()));
        let argv = [
            gobgpd.into_os_string(),
            "-f".into(),
            conf.into_os_string(),
            "-t".into(),
            "toml".into(),
            "-p".into(),
            "-l".into(),
            "info".into(),
            "--pprof-disable".into(),
            format!("--api-hosts={API}").into(),
        ];
        let proc = ns.spawn(argv, dir.join("gobgpd.log"));
        let mut gobgp = Self {
            proc,
            dir,
            ns: ns.clone(),
        };
        let ns = gobgp.ns.clone();
        wait_ready(&mut gobgp.proc, "its API to answer", START_TIMEOUT, || {
            ns.exec(["gobgp", "--target", API, "global"])
                .status
                .success()
        });
        gobgp
    }

    /// Runs the `gobgp` CLI with `args` inside the namespace and returns its
    /// stdout.
    ///
    /// # Panics
    ///
    /// If the CLI fails.
    pub fn gobgp(&self, args: &[&str]) -> String {
        let mut argv = vec!["gobgp", "--target", API];
        argv.extend(args);
        self.ns.run(argv)
    }

    /// Runs `gobgp <args> -j` and parses the output
    /// (`["global", "rib", "-a", "ipv6"]`, `["neighbor", "10.0.0.1"]`).
    ///
    /// # Panics
    ///
    /// If the CLI fails or prints something that is not JSON.
    pub fn gobgp_json(&self, args: &[&str]) -> Value {
        let mut argv = args.to_vec();
        argv.push("-j");
        let out = self.gobgp(&argv);
        serde_json::from_str(&out).unwrap_or_else(|e| {
            panic!("testnet: gobgp {args:?} -j did not print JSON ({e}):\n{out}")
        })
    }

    /// The session state GoBGP reports for `peer` (`"established"`,
    /// `"active"`, ...), or `None` if it has no such neighbor.
    pub fn session_state(&self, peer: &str) -> Option<String> {
        let out = self
            .ns
            .exec(["gobgp", "--target", API, "neighbor", peer, "-j"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let state = v.get("state")?.get("session_state")?;
        match state {
            Value::String(s) => Some(s.to_ascii_lowercase()),
            Value::Number(n) => n.as_u64().map(session_state_name),
            _ => None,
        }
    }

    /// Waits until the session to `peer` is Established.
    ///
    /// # Panics
    ///
    /// After `timeout`, naming the last state seen.
    pub fn wait_established(&self, peer: &str, timeout: Duration) {
        let mut last = None;
        let what = format!(
            "GoBGP in netns {} to reach Established with {peer}",
            self.ns.name()
        );
        let result = wait_until(&what, timeout, POLL, || {
            last = self.session_state(peer);
            (last.as_deref() == Some("established")).then_some(())
        });
        if let Err(e) = result {
            panic!("testnet: {e} (last state: {last:?})");
        }
    }

    /// The guard of the `gobgpd` process.
    pub fn process(&mut self) -> &mut Proc {
        &mut self.proc
    }

    /// The run directory: `gobgpd.toml`, `gobgpd.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The namespace gobgpd runs in.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// Prints gobgpd's log to stderr.
    pub fn dump_logs(&self) {
        self.dir
            .dump_logs(&format!("GoBGP in netns {}", self.ns.name()));
    }
}

impl Drop for Gobgp {
    fn drop(&mut self) {
        if thread::panicking() {
            self.dump_logs();
        }
        self.proc.stop();
    }
}

/// GoBGP's `SessionState` enum (api/gobgp.proto) as the CLI's JSON may give
/// it, lower-cased like its text form.
fn session_state_name(n: u64) -> String {
    match n {
        1 => "idle",
        2 => "connect",
        3 => "active",
        4 => "opensent",
        5 => "openconfirm",
        6 => "established",
        _ => "unknown",
    }
    .to_owned()
}

const API: &str = "127.0.0.1:50051";
const START_TIMEOUT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(100);
