//! Hostile clients for the metrics/health server of a real process (the
//! speaker's and the controller's tests include this file with `#[path]`):
//! slowloris connections, held connections, a health probe from its own
//! source address, and the process's file descriptors and CPU time from
//! `/proc`.
//!
//! Every bound a test checks comes from what the process reports: the
//! server's limits from its `metrics server listening` log line, its CPU
//! time and file descriptors from `/proc`.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

/// The open-file soft limit of many container runtimes, under which the
/// hardening issue saw `/healthz` time out and the speaker spin.
pub const NOFILE: u64 = 1024;

/// A process started under `prlimit --nofile=1024:1024`, its log (JSON
/// lines on standard error) in a file. Killed on drop.
pub struct Process {
    child: Child,
    pub log: PathBuf,
}

impl Process {
    pub fn start(bin: &str, args: &[&str], log: PathBuf) -> Self {
        let stderr = std::fs::File::create(&log).unwrap();
        let child = Command::new("prlimit")
            .arg(format!("--nofile={NOFILE}:{NOFILE}"))
            .arg("--")
            .arg(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("prlimit (util-linux) {bin}: {e}"));
        Self { child, log }
    }

    /// prlimit execs the program: same PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// utime + stime, in clock ticks (`/proc/PID/stat` fields 14 and 15).
    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        // The command name may hold spaces: fields count from after ')'.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }

    /// Open file descriptors.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    /// Sets the running process's RLIMIT_NOFILE.
    pub fn set_nofile(&self, soft: u64, hard: u64) {
        let st = Command::new("prlimit")
            .args(["--pid", &self.pid().to_string()])
            .arg(format!("--nofile={soft}:{hard}"))
            .status()
            .unwrap();
        assert!(st.success(), "prlimit --pid: {st}");
    }

    /// The `fields` of every JSON log line whose message is `message`.
    pub fn logged(&self, message: &str) -> Vec<Value> {
        logged(&self.log, message)
    }

    pub fn dump_log(&self) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        eprintln!("--- {} ---\n{}", self.log.display(), tail.join("\n"));
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn logged(log: &Path, message: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("fields").cloned())
        .filter(|f| f["message"] == message)
        .collect()
}

/// The server's limits, as its `metrics server listening` line reports
/// them. A binary from before the shared server reports only its address;
/// its limits are then `shell::http::Config::default()` (which it did not
/// have: the figures a test prints for it are "before").
#[derive(Debug, Clone, Copy)]
pub struct Server {
    pub addr: SocketAddr,
    pub max_connections: usize,
    pub max_connections_per_source: usize,
    pub header_timeout: Duration,
    pub request_timeout: Duration,
}

/// Waits (up to `within`) for the server's listening line.
pub fn server(p: &mut Process, within: Duration) -> Server {
    let deadline = Instant::now() + within;
    loop {
        if let Some(f) = p.logged("metrics server listening").pop() {
            let d = shell::http::Config::default();
            let n = |k: &str, dflt: usize| f[k].as_u64().map_or(dflt, |v| v as usize);
            let ms = |k: &str, dflt: Duration| f[k].as_u64().map_or(dflt, Duration::from_millis);
            return Server {
                addr: f["addr"].as_str().unwrap().parse().unwrap(),
                max_connections: n("max_connections", d.max_connections),
                max_connections_per_source: n(
                    "max_connections_per_source",
                    d.max_connections_per_source,
                ),
                header_timeout: ms("header_timeout_ms", d.header_timeout),
                request_timeout: ms("request_timeout_ms", d.request_timeout),
            };
        }
        if !p.alive() || Instant::now() > deadline {
            p.dump_log();
            panic!("no `metrics server listening` line");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn loopback(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// The probe's own source address: what the kubelet's is to an attacker.
pub const PROBE_SOURCE: u8 = 2;

/// How long a probe under attack may wait before the run counts it as
/// starved (only a broken server gets near it).
pub const PROBE_FAILURE_BOUND: Duration = Duration::from_secs(60);

async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    sock.bind(SocketAddr::new(from, 0))?;
    sock.connect(to).await
}

/// `GET path` from 127.0.0.2 with `Connection: close`: the status line and
/// how long the whole exchange took, or why it failed within `timeout`.
pub async fn probe(
    to: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Result<(String, Duration), String> {
    let t0 = Instant::now();
    let exchange = async {
        let mut c = connect_from(loopback(PROBE_SOURCE), to)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        c.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .map_err(|e| format!("write: {e}"))?;
        let mut s = String::new();
        c.read_to_string(&mut s)
            .await
            .map_err(|e| format!("read: {e}"))?;
        Ok::<_, String>(s.lines().next().unwrap_or("").to_owned())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(status)) => Ok((status, t0.elapsed())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

/// Polls `path` until it answers 200 (each try bounded by `timeout`),
/// up to `within`.
pub async fn until_ok(to: SocketAddr, path: &str, timeout: Duration, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        if let Ok((status, _)) = probe(to, path, timeout).await
            && status.starts_with("HTTP/1.1 200")
        {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "{path} never answered 200 within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Slowloris connections from several sources: each sends a request head
/// one byte every `every` and never ends it (or, for the idle ones,
/// nothing), and reconnects at once when the server closes it.
pub struct Slowloris {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Connections made (reconnects included).
    pub connects: Arc<AtomicU64>,
}

impl Slowloris {
    pub fn start(to: SocketAddr, sources: &[IpAddr], per_source: usize, every: Duration) -> Self {
        let (stop, rx) = watch::channel(false);
        let connects = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for (i, src) in sources
            .iter()
            .flat_map(|s| std::iter::repeat_n(*s, per_source))
            .enumerate()
        {
            let mut rx = rx.clone();
            let connects = Arc::clone(&connects);
            let trickle = i % 2 == 0;
            tasks.push(tokio::spawn(async move {
                while !*rx.borrow() {
                    let attempt =
                        tokio::time::timeout(Duration::from_secs(1), connect_from(src, to));
                    let Ok(Ok(mut c)) = attempt.await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    connects.fetch_add(1, Ordering::Relaxed);
                    let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
                    let mut sent = 0usize;
                    let mut tick = tokio::time::interval(every);
                    let mut buf = [0u8; 256];
                    loop {
                        tokio::select! {
                            _ = rx.changed() => return,
                            r = c.read(&mut buf) => match r {
                                Ok(0) | Err(_) => break,
                                Ok(_) => {}
                            },
                            _ = tick.tick(), if trickle => {
                                let b = head.get(sent).copied().unwrap_or(b'a');
                                sent += 1;
                                if c.write_all(&[b]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                }
            }));
        }
        Self {
            stop,
            tasks,
            connects,
        }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// `n` plain connections, spread over sources 127.0.0.10 and up with at
/// most `per_source` each, held until dropped (the kernel completes them
/// into the listen backlog even while the process cannot accept).
pub async fn hold(to: SocketAddr, n: usize, per_source: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for i in 0..n {
        let src = loopback(10 + u8::try_from(i / per_source.max(1)).unwrap());
        if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(1), connect_from(src, to)).await
        {
            held.push(c);
        }
    }
    held
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`).
pub fn clk_tck() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether accept errors are met with sleeps, not a spin.
///
/// The window starts once the process's descriptors are at the limit
/// (what `/proc` shows) and lasts `window`. A process that retries
/// `accept` at once uses a whole core for it (the issue measured 96 %);
/// one that sleeps between tries uses almost none. The bound is half the
/// window: a spinning process on a loaded machine may get less than a
/// core, which can only make it pass, never the sleeping one fail.
pub struct Exhaustion {
    pub window: Duration,
    pub cpu_ticks: u64,
    pub share: f64,
}

pub async fn measure_exhausted(p: &Process, limit: u64, window: Duration) -> Exhaustion {
    let t0 = Instant::now();
    while (p.fds() as u64) < limit {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "descriptors never reached {limit}: {}",
            p.fds()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (c0, w0) = (p.cpu_ticks(), Instant::now());
    tokio::time::sleep(window).await;
    let (c1, w1) = (p.cpu_ticks(), Instant::now());
    let elapsed = w1 - w0;
    let cpu_ticks = c1 - c0;
    let share = cpu_ticks as f64 / (elapsed.as_secs_f64() * clk_tck() as f64);
    Exhaustion {
        window: elapsed,
        cpu_ticks,
        share,
    }
}

/// A directory for one test's files, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("ferrolb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Source addresses 127.0.0.10 and up.
pub fn sources(n: u8) -> Vec<IpAddr> {
    (10..10 + n).map(loopback).collect()
}

/// The slowloris case: more connections than the open-file limit allows
/// (1,100 against 1,024), from 50 sources, half trickling a head one byte
/// every 500 ms, half idle, all reconnecting when closed. Meanwhile
/// `/healthz` is asked 20 times from its own address; each must answer
/// 200 within the server's own header timeout, and the process's open
/// descriptors must stay under the limit (and, where `tight` says the
/// process opens nothing else meanwhile, within its base plus the
/// reported connection cap plus the one connection accepted while an
/// evicted one closes).
pub async fn slowloris_case(p: &mut Process, s: &Server, tight: bool) {
    let base = p.fds();
    let attack = Slowloris::start(s.addr, &sources(50), 22, Duration::from_millis(500));
    let t0 = Instant::now();
    while attack.connects.load(Ordering::Relaxed) < NOFILE && t0.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut worst = Duration::ZERO;
    let mut failures = Vec::new();
    let mut max_fds = 0;
    let mut answered = 0;
    for _ in 0..20 {
        // Starved means never answered: a probe waits up to a bound that
        // only ends a broken run. How fast it is answered depends on how
        // much CPU the attack (in this process) leaves the server; that is
        // the printed figure, not a pass mark.
        let r = probe(s.addr, "/healthz", PROBE_FAILURE_BOUND).await;
        max_fds = max_fds.max(p.fds());
        match r {
            Ok((status, took)) if status.starts_with("HTTP/1.1 200") => {
                answered += 1;
                worst = worst.max(took);
            }
            Ok((status, _)) => failures.push(status),
            Err(e) => failures.push(e),
        }
        if !failures.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let connects = attack.connects.load(Ordering::Relaxed);
    attack.stop().await;
    eprintln!(
        "slowloris: {connects} attacker connects; /healthz {answered} of 20 answered 200, slowest {worst:?} \
         (server's header timeout {:?}); open fds {base} before, at most {max_fds} during (limit {NOFILE}, cap {})",
        s.header_timeout, s.max_connections,
    );
    if !failures.is_empty() {
        p.dump_log();
    }
    assert!(
        failures.is_empty(),
        "/healthz failed under slowloris: {failures:?}"
    );
    assert!(
        (max_fds as u64) < NOFILE,
        "descriptors reached the limit: {max_fds}"
    );
    if tight {
        assert!(
            max_fds <= base + s.max_connections + 1,
            "{max_fds} fds, base {base}, cap {}",
            s.max_connections
        );
    }
    assert!(p.alive(), "the process died");
}

/// The descriptor-exhaustion case: the running process's soft limit is
/// lowered to what it has open plus 8 (fewer than the server's cap, so
/// the server runs out of descriptors, not of slots), 40 idle connections
/// are held, and the process's CPU share over 3 s with every descriptor
/// in use must stay under half a core. Then the connections close and
/// `/healthz` must answer again.
pub async fn exhaustion_case(p: &mut Process, s: &Server) {
    let base = p.fds() as u64;
    let room = 8;
    assert!(room < s.max_connections as u64);
    let limit = base + room;
    p.set_nofile(limit, NOFILE);
    let held = hold(s.addr, 40, s.max_connections_per_source).await;
    let ex = measure_exhausted(p, limit, Duration::from_secs(3)).await;
    let backoffs = p.logged("metrics server cannot accept; backing off");
    drop(held);
    let t0 = Instant::now();
    let recovered = tokio::time::timeout(
        Duration::from_secs(60),
        until_ok(
            s.addr,
            "/healthz",
            s.header_timeout,
            Duration::from_secs(60),
        ),
    )
    .await;
    eprintln!(
        "fd exhaustion: limit {limit} (base {base}); CPU {} ticks in {:?} = {:.0} % of a core; \
         backoff logged {} time(s); /healthz back {:?} after the connections closed",
        ex.cpu_ticks,
        ex.window,
        ex.share * 100.0,
        backoffs.len(),
        recovered.as_ref().map(|_| t0.elapsed()),
    );
    assert!(
        ex.share < 0.5,
        "the process spun: {:.0} % of a core",
        ex.share * 100.0
    );
    assert!(!backoffs.is_empty(), "no backoff was logged");
    assert!(recovered.is_ok(), "/healthz did not come back");
    assert!(!p.logged("metrics server accepting again").is_empty());
    assert!(p.alive(), "the process died");
}
