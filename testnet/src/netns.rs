//! Network namespaces, veth pairs and bridges, and the watchdog that cleans
//! up after a test process that was killed.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write as _;
use std::panic;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::Duration;

use nix::sched::{CloneFlags, setns};

use crate::proc::{Proc, owner_pid, unique_name};
use crate::{require_binary, require_root, wait_until};

/// A network namespace named `flb-<pid>-<counter>-<tag>`, deleted when the
/// last clone is dropped.
///
/// Creating one brings `lo` up and turns IPv6 duplicate address detection off
/// (`accept_dad=0` for `all` and `default`), so addresses are usable at once.
///
/// Dropping the last clone kills, by PID, every process still inside the
/// namespace (`ip netns pids`), then deletes it. Router guards hold a clone,
/// so a namespace outlives the routers running in it.
///
/// Every method panics with the failing command and its stderr when a
/// command fails: a broken lab is a test failure, not a result to handle.
#[derive(Debug, Clone)]
pub struct Netns(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    name: String,
    ip: PathBuf,
}

impl Netns {
    /// Creates a namespace. `tag` ends its name, for humans reading
    /// `ip netns list`.
    ///
    /// # Panics
    ///
    /// Without root, without `ip`, `setpriv` or `setsid`, or if `ip netns add`
    /// fails.
    pub fn new(tag: &str) -> Self {
        require_root();
        let ip = require_binary("ip");
        require_binary("setpriv");
        let name = unique_name(tag);
        // Registered first: a kill between `add` and the guard leaks nothing.
        watchdog_register(&ip, &name);
        check(Command::new(&ip).args(["netns", "add", &name]));
        let ns = Self(Arc::new(Inner { name, ip }));
        ns.link_up("lo");
        ns.sysctl("net.ipv6.conf.all.accept_dad", "0");
        ns.sysctl("net.ipv6.conf.default.accept_dad", "0");
        ns
    }

    /// The namespace's name, as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The namespace's bind mount, `/run/netns/<name>`.
    pub fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(self.name())
    }

    /// Runs `ip -n <name> <args>` and returns its stdout.
    pub fn ip<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> String {
        check(
            Command::new(&self.0.ip)
                .arg("-n")
                .arg(self.name())
                .args(args),
        )
    }

    /// A [`Command`] that runs `program` inside the namespace, with
    /// `PR_SET_PDEATHSIG=SIGKILL` (via `setpriv`) so it dies with the thread
    /// that spawns it. Add arguments, stdio and environment as usual.
    ///
    /// The death signal is lost when the program changes its user ID (FRR's
    /// daemons drop to user `frr`) or execs a set-user-ID binary; the
    /// namespace guard and the watchdog still kill such processes by PID.
    ///
    /// A bare program name is resolved with [`require_binary`], so a missing
    /// tool fails the test naming its package.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let program = program.as_ref();
        let resolved = match program.to_str() {
            Some(name) if !name.contains('/') => require_binary(name).into_os_string(),
            _ => program.to_owned(),
        };
        let mut cmd = Command::new(require_binary("setpriv"));
        cmd.args(["--pdeathsig", "KILL", "--"])
            .arg(&self.0.ip)
            .args(["netns", "exec", self.name()])
            .arg(resolved)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `argv` inside the namespace to completion and returns its output,
    /// whatever its exit status.
    pub fn exec<S: AsRef<OsStr>>(&self, argv: impl IntoIterator<Item = S>) -> Output {
        output(&mut self.argv_command(argv))
    }

    /// Runs `argv` inside the namespace and returns its stdout.
    ///
    /// # Panics
    ///
    /// If it exits unsuccessfully; the message has its stdout and stderr.
    pub fn run<S: AsRef<OsStr>>(&self, argv: impl IntoIterator<Item = S>) -> String {
        check(&mut self.argv_command(argv))
    }

    /// Drops every IPv4 packet between this namespace and `peers` (an
    /// nftables table `inet cut` on input and output) until
    /// [`Netns::reconnect`]: a network partition that leaves loopback, ARP
    /// and other addresses alone. Needs `nft`.
    ///
    /// # Panics
    ///
    /// If `nft` fails, or the namespace is cut off already.
    pub fn cut_off(&self, peers: &[&str]) {
        let set = peers.join(", ");
        self.run([
            "nft",
            &format!(
                "add table inet cut; \
                 add chain inet cut in {{ type filter hook input priority 0; }}; \
                 add chain inet cut out {{ type filter hook output priority 0; }}; \
                 add rule inet cut in ip saddr {{ {set} }} drop; \
                 add rule inet cut out ip daddr {{ {set} }} drop"
            ),
        ]);
    }

    /// Ends a [`Netns::cut_off`].
    ///
    /// # Panics
    ///
    /// If the namespace is not cut off.
    pub fn reconnect(&self) {
        self.run(["nft", "delete table inet cut"]);
    }

    /// Starts `argv` inside the namespace with stdout and stderr appended to
    /// `log`. The returned guard kills it by PID on drop.
    pub fn spawn<S: AsRef<OsStr>>(
        &self,
        argv: impl IntoIterator<Item = S>,
        log: impl AsRef<Path>,
    ) -> Proc {
        self.spawn_env(argv, &[], log)
    }

    /// [`Netns::spawn`] with `env` added to the environment.
    pub(crate) fn spawn_env<S: AsRef<OsStr>>(
        &self,
        argv: impl IntoIterator<Item = S>,
        env: &[(&str, &str)],
        log: impl AsRef<Path>,
    ) -> Proc {
        let log = log.as_ref();
        let file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("testnet: opening log {}: {e}", log.display()));
        let stderr = file
            .try_clone()
            .unwrap_or_else(|e| panic!("testnet: duplicating log fd: {e}"));
        let mut cmd = self.argv_command(argv);
        cmd.envs(env.iter().copied()).stdout(file).stderr(stderr);
        self.spawn_inner(&mut cmd, Some(log.to_owned()))
    }

    /// Starts a command made by [`Netns::command`] (with stdio of the caller's
    /// choice) and wraps it in a guard that kills it by PID on drop.
    pub fn spawn_command(&self, cmd: &mut Command) -> Proc {
        self.spawn_inner(cmd, None)
    }

    fn spawn_inner(&self, cmd: &mut Command, log: Option<PathBuf>) -> Proc {
        let label = format!("{} in netns {}", program_of(cmd), self.name());
        match cmd.spawn() {
            Ok(child) => Proc::new(child, label, log),
            Err(e) => panic!("testnet: starting {label}: {e} ({cmd:?})"),
        }
    }

    /// Runs `f` on a new thread that has entered the namespace (`setns`), and
    /// returns its result; a panic in `f` propagates.
    ///
    /// Sockets created in `f` stay in the namespace when handed back to other
    /// threads, so a test can bind a listener here and drive it from Tokio
    /// outside (`tokio::net::TcpListener::from_std`). Do not spawn long-lived
    /// children from `f` with [`Netns::command`]: their death signal fires when
    /// this thread ends.
    pub fn run_in<T, F>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let path = self.path();
        let file = File::open(&path)
            .unwrap_or_else(|e| panic!("testnet: opening {}: {e}", path.display()));
        thread::scope(|s| {
            let handle = s.spawn(move || {
                if let Err(e) = setns(&file, CloneFlags::CLONE_NEWNET) {
                    panic!("testnet: setns into {}: {e}", path.display());
                }
                f()
            });
            handle.join().unwrap_or_else(|p| panic::resume_unwind(p))
        })
    }

    /// `ip link set <ifname> up`.
    pub fn link_up(&self, ifname: &str) {
        self.ip(["link", "set", ifname, "up"]);
    }

    /// `ip link set <ifname> address <mac>`.
    pub fn set_mac(&self, ifname: &str, mac: &str) {
        self.ip(["link", "set", ifname, "address", mac]);
    }

    /// Adds an address in CIDR form, IPv4 or IPv6 (`fd00::1/64`). IPv6
    /// addresses get `nodad`: usable at once, never tentative.
    pub fn add_addr(&self, ifname: &str, cidr: &str) {
        if cidr.contains(':') {
            self.ip(["addr", "add", cidr, "dev", ifname, "nodad"]);
        } else {
            self.ip(["addr", "add", cidr, "dev", ifname]);
        }
    }

    /// `ip route add <dst> via <via>` (IPv4 or IPv6; `dst` may be `default`).
    pub fn add_route(&self, dst: &str, via: &str) {
        let family = if via.contains(':') { "-6" } else { "-4" };
        self.ip([family, "route", "add", dst, "via", via]);
    }

    /// Sets a sysctl inside the namespace: `key` in dotted form
    /// (`net.ipv4.ip_forward`) or as a path under `/proc/sys`
    /// (`net/ipv6/conf/eth0.100/forwarding`).
    pub fn sysctl(&self, key: &str, value: &str) {
        let rel = if key.contains('/') {
            key.to_owned()
        } else {
            key.replace('.', "/")
        };
        let path = format!("/proc/sys/{rel}");
        self.run([
            "sh",
            "-c",
            "printf '%s\\n' \"$1\" > \"$2\"",
            "sh",
            value,
            &path,
        ]);
    }

    /// Waits until something listens on TCP `port` inside the namespace.
    ///
    /// # Panics
    ///
    /// After `timeout`.
    pub fn wait_listening(&self, port: u16, timeout: Duration) {
        let filter = format!("sport = :{port}");
        let what = format!("a TCP listener on port {port} in netns {}", self.name());
        wait_until(&what, timeout, Duration::from_millis(50), || {
            let out = self.exec(["ss", "-Hltn", &filter]);
            String::from_utf8_lossy(&out.stdout)
                .contains("LISTEN")
                .then_some(())
        })
        .unwrap_or_else(|e| panic!("testnet: {e}"));
    }

    fn argv_command<S: AsRef<OsStr>>(&self, argv: impl IntoIterator<Item = S>) -> Command {
        let mut argv = argv.into_iter();
        let Some(program) = argv.next() else {
            panic!("testnet: empty argv for netns {}", self.name());
        };
        let mut cmd = self.command(program);
        cmd.args(argv);
        cmd
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        destroy(&self.ip, &self.name);
    }
}

/// Creates a veth pair with `a_if` in `a` and `b_if` in `b` (names of at most
/// 15 bytes), both up. Names live inside the namespaces, so `eth0` is fine.
pub fn veth_pair(a: &Netns, a_if: &str, b: &Netns, b_if: &str) {
    for ifname in [a_if, b_if] {
        assert!(
            !ifname.is_empty() && ifname.len() <= IFNAMSIZ_MAX,
            "testnet: interface name `{ifname}` must have 1 to {IFNAMSIZ_MAX} bytes"
        );
    }
    a.ip([
        "link",
        "add",
        a_if,
        "type",
        "veth",
        "peer",
        "name",
        b_if,
        "netns",
        b.name(),
    ]);
    a.link_up(a_if);
    b.link_up(b_if);
}

/// An L2 segment: a Linux bridge `br0` in a namespace of its own, with one
/// veth pair per attached namespace.
///
/// Multicast snooping is off (all multicast floods, so NDP and ARP never
/// depend on MLD state) and `br0` has no IPv6, so it sends nothing itself.
/// Capture the whole segment with `tcpdump -i br0` in [`Bridge::netns`].
#[derive(Debug)]
pub struct Bridge {
    ns: Netns,
    ports: AtomicU32,
}

impl Bridge {
    /// Creates the bridge namespace and `br0`.
    pub fn new(tag: &str) -> Self {
        let ns = Netns::new(tag);
        ns.ip([
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "mcast_snooping",
            "0",
            "stp_state",
            "0",
        ]);
        ns.sysctl("net.ipv6.conf.br0.disable_ipv6", "1");
        ns.link_up("br0");
        Self {
            ns,
            ports: AtomicU32::new(0),
        }
    }

    /// Connects `ns` to the bridge: `ifname` appears in `ns`, up; its peer is
    /// a port of `br0`. Returns the port's name in the bridge namespace.
    pub fn attach(&self, ns: &Netns, ifname: &str) -> String {
        let port = format!("p{}", self.ports.fetch_add(1, Ordering::Relaxed));
        veth_pair(&self.ns, &port, ns, ifname);
        self.ns.ip(["link", "set", &port, "master", "br0"]);
        port
    }

    /// The bridge's own namespace.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }
}

/// Kills every process inside namespace `name` by PID, then deletes it.
fn destroy(ip: &Path, name: &str) {
    let pids = Command::new(ip)
        .args(["netns", "pids", name])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for pid in pids
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let out = Command::new(ip).args(["netns", "del", name]).output();
    if let Ok(out) = out
        && !out.status.success()
        && Path::new("/run/netns").join(name).exists()
    {
        eprintln!(
            "testnet: ip netns del {name} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
}

/// Tells the watchdog about a namespace; starts the watchdog (after sweeping
/// namespaces of dead processes) on first use.
fn watchdog_register(ip: &Path, name: &str) {
    static WATCHDOG: OnceLock<Mutex<Child>> = OnceLock::new();
    let watchdog = WATCHDOG.get_or_init(|| {
        sweep_stale(ip);
        Mutex::new(start_watchdog(ip))
    });
    let mut watchdog = watchdog.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(w) = watchdog.stdin.as_mut()
        && writeln!(w, "{name}").and_then(|()| w.flush()).is_err()
    {
        panic!(
            "testnet: the cleanup watchdog died; namespaces would leak if this process is killed"
        );
    }
}

/// Starts `setsid sh -c WATCHDOG_SCRIPT`: it reads namespace names from its
/// stdin until EOF, which comes when this process exits however it exits,
/// then kills what still runs in those namespaces and deletes them.
/// `setsid` keeps it out of our process group, so Ctrl-C does not reach it.
///
/// Never waited for: it outlives this process on purpose, and init reaps it.
fn start_watchdog(ip: &Path) -> Child {
    Command::new(require_binary("setsid"))
        .args(["sh", "-c", WATCHDOG_SCRIPT, "testnet-watchdog"])
        .arg(ip)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("testnet: starting the cleanup watchdog: {e}"))
}

/// Deletes namespaces left by processes that are gone (a test binary killed
/// before its watchdog could run, e.g. by a reboot-less `kill -9` of both), or
/// by an earlier process with our PID.
fn sweep_stale(ip: &Path) {
    let me = std::process::id();
    let Ok(out) = Command::new(ip).args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if let Some(pid) = owner_pid(name)
            && (pid == me || !Path::new(&format!("/proc/{pid}")).exists())
        {
            destroy(ip, name);
        }
    }
}

fn check(cmd: &mut Command) -> String {
    let out = output(cmd);
    if !out.status.success() {
        panic!(
            "testnet: {cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn output(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("testnet: running {cmd:?}: {e}"))
}

/// The program a [`Netns::command`] runs (after `setpriv ... ip netns exec
/// <name>`), for labels: `bgpd`.
fn program_of(cmd: &Command) -> String {
    let args: Vec<&OsStr> = cmd.get_args().collect();
    let program = args
        .iter()
        .position(|a| *a == "exec")
        .and_then(|i| args.get(i + 2).copied())
        .unwrap_or_else(|| cmd.get_program());
    Path::new(program)
        .file_name()
        .unwrap_or(program)
        .to_string_lossy()
        .into_owned()
}

/// Linux's IFNAMSIZ (16) minus the NUL.
const IFNAMSIZ_MAX: usize = 15;

const WATCHDOG_SCRIPT: &str = r#"
ip=$1
names=
while IFS= read -r n; do names="$names $n"; done
for n in $names; do
  [ -e "/run/netns/$n" ] || continue
  for p in $("$ip" netns pids "$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  "$ip" netns del "$n" 2>/dev/null
done
"#;
