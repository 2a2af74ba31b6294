//! BIRD 2 in a namespace.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::Duration;

use crate::proc::wait_ready;
use crate::{Netns, Proc, RunDir, require_binary, require_root, wait_until};

/// A BIRD 2 daemon (`bird -f`) in a namespace, with its config, control
/// socket, pid file and logs in a fresh [`RunDir`].
///
/// The harness puts `log "<dir>/bird.log" all;` and
/// `debug protocols { states, events };` in front of the test's config. BIRD needs `protocol device {}` and explicit `import`/`export` per
/// channel; without a `kernel` protocol it never touches the namespace's FIB.
/// Its connect delay is 5 s minus up to 25 % jitter: make it `passive on` or
/// set `connect delay time 1`.
///
/// Dropping the guard prints the logs when the thread is panicking, then
/// stops BIRD by PID.
#[derive(Debug)]
pub struct Bird {
    proc: Proc,
    dir: RunDir,
    ns: Netns,
}

impl Bird {
    /// Starts BIRD with `conf`; returns once its control socket answers.
    ///
    /// # Panics
    ///
    /// Without root, `bird` or `birdc`, or if BIRD exits (a config error, for
    /// example: its output is printed) or is not up within 10 s.
    pub fn start(ns: &Netns, conf: &str) -> Self {
        require_root();
        let bird = require_binary("bird");
        require_binary("birdc");
        let dir = RunDir::new("bird");
        let conf_path = dir.join("bird.conf");
        let text = config_file(dir.path(), conf);
        fs::write(&conf_path, text)
            .unwrap_or_else(|e| panic!("testnet: writing {}: {e}", conf_path.display()));
        let ctl = dir.join("bird.ctl");
        let argv = [
            bird,
            "-f".into(),
            "-c".into(),
            conf_path,
            "-s".into(),
            ctl.clone(),
            "-P".into(),
            dir.join("bird.pid"),
        ];
        let proc = ns.spawn(&argv, dir.join("bird.out"));
        let mut bird = Self {
            proc,
            dir,
            ns: ns.clone(),
        };
        // BIRD writes its PID file after it opens the control socket.
        let pid_file = bird.dir.join("bird.pid");
        wait_ready(
            &mut bird.proc,
            "its control socket and PID file",
            START_TIMEOUT,
            || ctl.exists() && fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n')),
        );
        bird
    }

    /// Runs one `birdc` command (`"show route all"`) and returns its output,
    /// without the `BIRD x.y.z ready.` banner. BIRD's error replies
    /// (`Network not found`) are output too.
    ///
    /// # Panics
    ///
    /// If birdc cannot talk to BIRD.
    pub fn birdc(&self, cmd: &str) -> String {
        let out = Command::new(require_binary("birdc"))
            .arg("-s")
            .arg(self.ctl())
            .args(cmd.split_whitespace())
            .output()
            .unwrap_or_else(|e| panic!("testnet: running birdc: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        // Exit status 1 also means "BIRD answered with an error" (`Network not
        // found`), which is an answer; only a missing banner means no BIRD.
        match stdout.split_once('\n') {
            Some((banner, rest)) if banner.starts_with("BIRD ") && banner.ends_with("ready.") => {
                rest.to_owned()
            }
            _ => panic!(
                "testnet: birdc {cmd} for BIRD in netns {} failed ({}):\n{stdout}{}",
                self.ns.name(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// Replaces the config (same header as [`Bird::start`]) and runs
    /// `birdc configure`.
    ///
    /// # Panics
    ///
    /// If BIRD does not report `Reconfigured`.
    pub fn configure(&self, conf: &str) {
        let conf_path = self.dir.join("bird.conf");
        let text = config_file(self.dir.path(), conf);
        fs::write(&conf_path, text)
            .unwrap_or_else(|e| panic!("testnet: writing {}: {e}", conf_path.display()));
        let out = self.birdc("configure");
        assert!(
            out.contains("Reconfigured"),
            "testnet: BIRD in netns {} rejected the new config:\n{out}",
            self.ns.name()
        );
    }

    /// Whether protocol `protocol` (a `protocol bgp <name>`) is Established.
    pub fn is_established(&self, protocol: &str) -> bool {
        self.birdc(&format!("show protocols {protocol}"))
            .contains("Established")
    }

    /// Waits until BGP protocol `protocol` is Established.
    ///
    /// # Panics
    ///
    /// After `timeout`, with BIRD's view of the protocol.
    pub fn wait_established(&self, protocol: &str, timeout: Duration) {
        let what = format!(
            "BIRD in netns {} to reach Established in protocol {protocol}",
            self.ns.name()
        );
        if let Err(e) = wait_until(&what, timeout, POLL, || {
            self.is_established(protocol).then_some(())
        }) {
            let state = self.birdc(&format!("show protocols all {protocol}"));
            panic!("testnet: {e}:\n{state}");
        }
    }

    /// The guard of the `bird` process, e.g. to SIGSTOP it.
    pub fn process(&mut self) -> &mut Proc {
        &mut self.proc
    }

    /// The run directory: `bird.conf`, `bird.log`, `bird.out`, `bird.ctl`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The namespace BIRD runs in.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// Prints BIRD's logs to stderr.
    pub fn dump_logs(&self) {
        self.dir
            .dump_logs(&format!("BIRD in netns {}", self.ns.name()));
    }

    fn ctl(&self) -> PathBuf {
        self.dir.join("bird.ctl")
    }
}

impl Drop for Bird {
    fn drop(&mut self) {
        if thread::panicking() {
            self.dump_logs();
        }
        self.proc.stop();
    }
}

/// The harness header, then the test's config. `debug protocols` logs each
/// protocol's state changes and events (connects, refusals) to `bird.log`.
fn config_file(dir: &Path, conf: &str) -> String {
    format!(
        "log \"{}\" all;\ndebug protocols {{ states, events }};\n{conf}\n",
        dir.join("bird.log").display()
    )
}

const START_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);
