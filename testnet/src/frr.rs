//! FRR (zebra, bgpd, optionally bfdd and others) in a namespace.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::proc::wait_ready;
use crate::{Netns, Proc, RunDir, require_binary, require_root, wait_until};

/// FRR daemons running in one namespace, each in the foreground with every
/// path (config, pid file, vty sockets, zserv socket, logs) inside a fresh
/// [`RunDir`].
///
/// Config files are `<daemon>.conf`; the harness puts a header in front of
/// the text the test gives: `frr defaults traditional` (unless the text has
/// its own `frr defaults` line), `hostname`, `log file <dir>/<daemon>.log`
/// and `log timestamp precision 3`. The daemons run with `TZ=UTC`, so their
/// log timestamps are UTC. Tests usually also want
/// `no bgp ebgp-requires-policy` (else eBGP routes are dropped silently),
/// `bgp log-neighbor-changes` and, for a quick first connect,
/// `neighbor X timers connect 2`.
///
/// zebra always runs (it installs learned routes into the namespace's FIB and
/// tells bgpd about interfaces). Dropping the guard prints the logs when the
/// thread is panicking, then stops the daemons by PID, newest first.
#[derive(Debug)]
pub struct Frr {
    daemons: Vec<(String, Proc)>,
    dir: RunDir,
    ns: Netns,
}

impl Frr {
    /// Starts zebra and bgpd with `bgpd_conf`.
    pub fn start(ns: &Netns, bgpd_conf: &str) -> Self {
        Self::start_daemons(ns, &[("bgpd", bgpd_conf)])
    }

    /// Starts zebra, then each `(daemon, config)` in order, e.g.
    /// `[("bfdd", bfd_conf), ("bgpd", bgp_conf)]`. A `("zebra", conf)` entry
    /// replaces zebra's default (empty) config.
    ///
    /// Returns once every daemon's vty socket exists and zebra knows every
    /// address of the namespace (so bgpd can resolve its peers and pick IPv6
    /// link-local next hops from the first UPDATE on).
    ///
    /// # Panics
    ///
    /// Without root or an FRR binary, or if a daemon exits or is not up
    /// within 10 s (its logs are printed).
    pub fn start_daemons(ns: &Netns, daemons: &[(&str, &str)]) -> Self {
        require_root();
        require_binary("vtysh");
        let chown = require_binary("chown");
        let mut list: Vec<(&str, &str)> = Vec::new();
        if !daemons.iter().any(|(d, _)| *d == "zebra") {
            list.push(("zebra", ""));
        }
        list.extend(daemons.iter().filter(|(d, _)| *d == "zebra"));
        list.extend(daemons.iter().filter(|(d, _)| *d != "zebra"));
        let bins: Vec<_> = list
            .iter()
            .map(|(d, _)| require_binary(&format!("{FRR_DIR}/{d}")))
            .collect();

        let dir = RunDir::new("frr");
        for (daemon, conf) in &list {
            let text = config_file(ns.name(), daemon, dir.path(), conf);
            let path = dir.join(&format!("{daemon}.conf"));
            fs::write(&path, text)
                .unwrap_or_else(|e| panic!("testnet: writing {}: {e}", path.display()));
        }
        // The daemons drop to user frr and must reach everything in here.
        let status = Command::new(chown)
            .args(["-R", "frr:frr"])
            .arg(dir.path())
            .status();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "testnet: chown -R frr:frr {}: {status:?}",
            dir.path().display()
        );

        let mut frr = Self {
            daemons: Vec::new(),
            dir,
            ns: ns.clone(),
        };
        for ((daemon, _), bin) in list.iter().zip(bins) {
            frr.start_daemon(daemon, &bin);
            if *daemon == "zebra" {
                frr.wait_zebra_knows_addrs();
            }
        }
        frr
    }

    /// Runs one vtysh command against all running daemons and returns its
    /// output.
    ///
    /// # Panics
    ///
    /// If vtysh fails (unknown command, daemon down).
    pub fn vtysh(&self, cmd: &str) -> String {
        self.vtysh_args(&["-c", cmd])
    }

    /// Runs a `show ... json` command and parses the output. Show commands
    /// exist in one daemon each, so the output is one JSON document.
    ///
    /// # Panics
    ///
    /// If vtysh fails or prints something that is not JSON.
    pub fn vtysh_json(&self, cmd: &str) -> Value {
        let out = self.vtysh(cmd);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("testnet: `{cmd}` did not print JSON ({e}):\n{out}"))
    }

    /// Runs `configure terminal` followed by `lines`, in one vtysh session.
    pub fn configure(&self, lines: &[&str]) -> String {
        let mut args = vec!["-c", "configure terminal"];
        for line in lines {
            args.extend(["-c", line]);
        }
        self.vtysh_args(&args)
    }

    /// bgpd's state for `peer` (`"Established"`, `"Active"`, ...), or `None`
    /// if bgpd does not know the peer.
    pub fn bgp_state(&self, peer: &str) -> Option<String> {
        let v = self.vtysh_json(&format!("show bgp neighbors {peer} json"));
        v.get(peer)?.get("bgpState")?.as_str().map(str::to_owned)
    }

    /// Waits until the BGP session to `peer` is Established.
    ///
    /// # Panics
    ///
    /// After `timeout`, naming the last state seen.
    pub fn wait_established(&self, peer: &str, timeout: Duration) {
        let mut last = None;
        let what = format!(
            "FRR in netns {} to reach Established with {peer}",
            self.ns.name()
        );
        let result = wait_until(&what, timeout, POLL, || {
            last = self.bgp_state(peer);
            (last.as_deref() == Some("Established")).then_some(())
        });
        if let Err(e) = result {
            panic!("testnet: {e} (last state: {last:?})");
        }
    }

    /// The guard of a running daemon (`"bgpd"`), e.g. to SIGSTOP it.
    pub fn daemon(&mut self, name: &str) -> Option<&mut Proc> {
        self.daemons
            .iter_mut()
            .find(|(d, _)| d == name)
            .map(|(_, p)| p)
    }

    /// Kills `daemon` with `signal` (e.g. SIGKILL, a crash), waits for it
    /// to exit, then starts it again with its config and `extra` arguments
    /// (e.g. `["-K"]`: bgpd comes back as a graceful restart). Returns once
    /// its new vty socket exists.
    ///
    /// # Panics
    ///
    /// If no such daemon runs, or it does not come back within 10 s.
    pub fn restart_daemon(&mut self, daemon: &str, signal: crate::Signal, extra: &[&str]) {
        let i = self
            .daemons
            .iter()
            .position(|(d, _)| d == daemon)
            .unwrap_or_else(|| panic!("testnet: no FRR daemon {daemon} runs"));
        let (_, mut old) = self.daemons.remove(i);
        old.signal(signal);
        let gone = wait_until(
            &format!("{daemon} to exit"),
            START_TIMEOUT,
            Duration::from_millis(5),
            || old.try_status(),
        );
        if let Err(e) = gone {
            panic!("testnet: {e}");
        }
        // A killed daemon leaves its socket and pid file behind.
        for stale in [format!("{daemon}.vty"), format!("{daemon}.pid")] {
            let _ = fs::remove_file(self.dir.join(&stale));
        }
        let bin = require_binary(&format!("{FRR_DIR}/{daemon}"));
        self.start_daemon_with(daemon, &bin, extra);
    }

    /// The run directory: configs, logs (`<daemon>.log`, `<daemon>.out`),
    /// sockets.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The namespace FRR runs in.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// Prints every daemon's log to stderr.
    pub fn dump_logs(&self) {
        self.dir
            .dump_logs(&format!("FRR in netns {}", self.ns.name()));
    }

    fn start_daemon(&mut self, daemon: &str, bin: &Path) {
        self.start_daemon_with(daemon, bin, &[]);
    }

    fn start_daemon_with(&mut self, daemon: &str, bin: &Path, extra: &[&str]) {
        let dir = self.dir.path();
        let s = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let mut argv = vec![
            bin.to_string_lossy().into_owned(),
            "-f".into(),
            s(&format!("{daemon}.conf")),
            "-i".into(),
            s(&format!("{daemon}.pid")),
            "--vty_socket".into(),
            s(""),
            "-z".into(),
            s("zserv.api"),
            "-P".into(),
            "0".into(),
        ];
        if daemon == "bfdd" {
            // Default /var/run/frr/bfdd.sock would be shared by parallel tests.
            argv.extend(["--bfdctl".into(), s("bfdd.sock")]);
        }
        argv.extend(extra.iter().map(|a| (*a).to_owned()));
        // Log timestamps in UTC, whatever the machine's zone: tests compare
        // them with their own clock.
        let mut proc = self.ns.spawn_env(
            &argv,
            &[("TZ", "UTC")],
            self.dir.join(&format!("{daemon}.out")),
        );
        let vty = self.dir.join(&format!("{daemon}.vty"));
        let zserv = self.dir.join("zserv.api");
        wait_ready(&mut proc, "its vty socket", START_TIMEOUT, || {
            vty.exists() && (daemon != "zebra" || zserv.exists())
        });
        self.daemons.push((daemon.to_owned(), proc));
    }

    fn wait_zebra_knows_addrs(&mut self) {
        let addrs: Vec<String> = self
            .ns
            .ip(["-o", "addr", "show"])
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 3 && f[1] != "lo").then(|| f[3].to_owned())
            })
            .collect();
        let what = format!("zebra in netns {} to list {addrs:?}", self.ns.name());
        let result = wait_until(&what, START_TIMEOUT, POLL, || {
            let out = self.vtysh_args(&["-d", "zebra", "-c", "show interface"]);
            addrs
                .iter()
                .all(|a| out.contains(&format!(" {a}")))
                .then_some(())
        });
        if let Err(e) = result {
            panic!("testnet: {e}");
        }
    }

    fn vtysh_args(&self, args: &[&str]) -> String {
        let out = Command::new(require_binary("vtysh"))
            .arg("--vty_socket")
            .arg(self.dir.path())
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("testnet: running vtysh: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            panic!(
                "testnet: vtysh {args:?} for FRR in netns {} failed ({}):\n{stdout}{}",
                self.ns.name(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        stdout
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        if thread::panicking() {
            self.dump_logs();
        }
        while let Some((_, mut proc)) = self.daemons.pop() {
            proc.stop();
        }
    }
}

/// One daemon's config file: the harness header, then the test's text.
fn config_file(hostname: &str, daemon: &str, dir: &Path, conf: &str) -> String {
    let is_defaults = |l: &&str| l.trim_start().starts_with("frr defaults");
    let defaults = conf
        .lines()
        .find(is_defaults)
        .unwrap_or("frr defaults traditional");
    let rest: Vec<&str> = conf.lines().filter(|l| !is_defaults(l)).collect();
    format!(
        "{defaults}\nhostname {hostname}\nlog file {}/{daemon}.log\nlog timestamp precision 3\n!\n{}\n",
        dir.display(),
        rest.join("\n")
    )
}

const FRR_DIR: &str = "/usr/lib/frr";
const START_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_goes_first_and_keeps_the_tests_defaults() {
        let text = config_file(
            "r1",
            "bgpd",
            Path::new("/run/x"),
            "frr defaults datacenter\nrouter bgp 1\n",
        );
        assert_eq!(
            text,
            "frr defaults datacenter\nhostname r1\nlog file /run/x/bgpd.log\n\
             log timestamp precision 3\n!\nrouter bgp 1\n"
        );
        let text = config_file("r1", "zebra", Path::new("/d"), "");
        assert!(text.starts_with("frr defaults traditional\n"), "{text}");
    }
}
