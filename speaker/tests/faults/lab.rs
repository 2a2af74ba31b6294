//! The pieces every fault case uses: the mode (bounded or full), figures,
//! a `speaker` process in a node namespace, its metrics and health over
//! HTTP, the FIB of a router namespace sampled in the background, and an
//! ARP client that records which MAC answers for an address and when.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use testnet::{Bridge, Netns, Proc, RunDir};

/// `FERROLB_FAULTS_FULL=1` (what `scripts/faults` sets): every case with
/// its repetitions and its long variants. Otherwise the bounded mode that
/// `cargo test` runs: each fault once, with short durations.
pub fn full() -> bool {
    std::env::var("FERROLB_FAULTS_FULL").is_ok_and(|v| v == "1")
}

/// Holds the suite's one lab slot: the cases of a test binary run one at a
/// time even when the harness runs tests in parallel (one fault at a time,
/// and a flood's CPU load must not show up in another case's figures).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SLOT: Mutex<()> = Mutex::new(());
    SLOT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many times a case repeats its fault.
pub fn repetitions() -> usize {
    if full() { 5 } else { 1 }
}

/// Prints one figure line, `FIGURE fault=<fault> k=v ...`, and appends it
/// to `$FERROLB_FAULTS_FIGURES` when set (`scripts/faults` collects them
/// there for RELIABILITY.md).
pub fn figure(fault: &str, values: &[(&str, String)]) {
    let mut line = format!("FIGURE fault={fault}");
    for (k, v) in values {
        line.push_str(&format!(" {k}={v}"));
    }
    println!("{line}");
    eprintln!("{line}");
    if let Ok(path) = std::env::var("FERROLB_FAULTS_FIGURES") {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Milliseconds, for figures.
pub fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// A running `speaker` in file mode inside its node namespace.
pub struct Speaker {
    pub ns: Netns,
    pub proc: Proc,
    pub log: PathBuf,
    /// Where /metrics, /healthz and /readyz are served (inside `ns`).
    pub metrics: SocketAddr,
}

impl Speaker {
    /// Starts `speaker --node-name <name> --config-dir <dir>` in `ns`, its
    /// metrics on `metrics_ip:7472`, with `extra` arguments.
    pub fn start(
        ns: &Netns,
        name: &str,
        dir: &Path,
        logs: &RunDir,
        metrics_ip: &str,
        extra: &[&str],
    ) -> Self {
        let log = logs.join(&format!("{name}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        let metrics: SocketAddr = format!("{metrics_ip}:7472").parse().unwrap();
        let mut cmd = ns.command(env!("CARGO_BIN_EXE_speaker"));
        cmd.env("NODE_NAME", name)
            .args(["--config-dir".as_ref(), dir.as_os_str()])
            .args([
                "--metrics-addr",
                &metrics.to_string(),
                "--log-level",
                "debug",
            ])
            .args(["--reload-interval-ms", "200"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(stderr);
        let proc = ns.spawn_command(&mut cmd);
        Self {
            ns: ns.clone(),
            proc,
            log,
            metrics,
        }
    }

    /// The whole response to `GET path` from inside the node.
    pub fn get(&self, path: &str, timeout: Duration) -> String {
        get(&self.ns, self.metrics, path, timeout)
    }

    pub fn metrics_text(&self) -> String {
        self.get("/metrics", Duration::from_secs(5))
    }

    /// `/healthz` answered 200 within `timeout`.
    pub fn healthy(&self, timeout: Duration) -> bool {
        self.get("/healthz", timeout).starts_with("HTTP/1.1 200")
    }

    pub fn ready(&self) -> bool {
        self.get("/readyz", Duration::from_secs(5))
            .starts_with("HTTP/1.1 200")
    }

    /// The value of metric line `name` (with its labels, if any).
    pub fn metric(&self, name: &str) -> Option<f64> {
        metric_in(&self.metrics_text(), name)
    }

    /// Whether the metrics show `service` announced by `protocol` here.
    pub fn announces(&self, protocol: &str, service: &str) -> bool {
        self.metrics_text().contains(&format!(
            "protocol=\"{protocol}\",service=\"{service}\"}} 1"
        ))
    }

    /// VmRSS of the process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.proc.pid()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn dump_log(&self) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(80)..];
        eprintln!("--- {} ---\n{}", self.log.display(), tail.join("\n"));
    }
}

/// The whole response to `GET path` at `addr`, from inside `ns` (empty
/// when nobody answers within `timeout`).
pub fn get(ns: &Netns, addr: SocketAddr, path: &str, timeout: Duration) -> String {
    ns.run_in(move || {
        let Ok(mut c) = TcpStream::connect_timeout(&addr, timeout) else {
            return String::new();
        };
        let _ = c.set_read_timeout(Some(timeout));
        let _ = c.set_write_timeout(Some(timeout));
        let mut s = String::new();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        if c.write_all(req.as_bytes()).is_ok() {
            let _ = c.read_to_string(&mut s);
        }
        s
    })
}

/// The value of the first line of `text` that starts with `name` followed
/// by a space.
pub fn metric_in(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Writes `text` to `dir/file` through a rename, as a ConfigMap update
/// does, so the speaker never reads half a file.
pub fn write_config(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

/// The MAC address of `ifname` in `ns`.
pub fn mac_of(ns: &Netns, ifname: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&ns.ip(["-j", "link", "show", ifname])).unwrap();
    v[0]["address"].as_str().unwrap().to_owned()
}

/// A namespace attached to `bridge` with `addr/24` on eth0.
pub fn host_on(bridge: &Bridge, tag: &str, addr: &str) -> Netns {
    let ns = Netns::new(tag);
    bridge.attach(&ns, "eth0");
    ns.add_addr("eth0", &format!("{addr}/24"));
    ns
}

/// Samples, every `every`, whether a predicate on the output of a command
/// holds, on a thread of its own; `stop` returns the samples.
pub struct Sampler {
    run: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<(Instant, bool)>>>,
}

impl Sampler {
    /// Samples whether `prefix` is in the kernel FIB of `ns`.
    pub fn fib(ns: &Netns, prefix: &str, every: Duration) -> Self {
        let ns = ns.clone();
        let prefix = prefix.to_owned();
        let run = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&run);
        let handle = thread::spawn(move || {
            let mut samples = Vec::new();
            while flag.load(Ordering::Relaxed) {
                let out = ns.ip(["route", "show", &prefix]);
                samples.push((Instant::now(), !out.trim().is_empty()));
                thread::sleep(every);
            }
            samples
        });
        Self {
            run,
            handle: Some(handle),
        }
    }

    pub fn stop(mut self) -> Vec<(Instant, bool)> {
        self.run.store(false, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.run.store(false, Ordering::Relaxed);
    }
}

/// The longest run of `false` samples: from the first absent sample to the
/// next present one (or the last sample). `None` when every sample holds.
pub fn longest_gap(samples: &[(Instant, bool)]) -> Option<Duration> {
    let mut worst: Option<Duration> = None;
    let mut since: Option<Instant> = None;
    for &(t, ok) in samples {
        match (ok, since) {
            (false, None) => since = Some(t),
            (true, Some(s)) => {
                worst = worst.max(Some(t - s));
                since = None;
            }
            _ => {}
        }
    }
    if let (Some(s), Some(&(last, _))) = (since, samples.last()) {
        worst = worst.max(Some(last - s));
    }
    worst
}

/// One ARP reply as the client saw it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub at: Instant,
    pub mac: String,
}

/// A layer 2 client in its namespace asking for one address every 50 ms
/// and recording every answer (with its MAC) as it arrives: `arping` for
/// IPv4 ([`L2Watch::arp`]), `ndisc6` for IPv6 ([`L2Watch::ndp`]).
pub struct L2Watch {
    _proc: Proc,
    replies: Arc<Mutex<Vec<Reply>>>,
    pub interval: Duration,
}

impl L2Watch {
    /// `arping`, one request every 50 ms (its `-W`).
    pub fn arp(client: &Netns, ip: &str) -> Self {
        testnet::require_binary("arping");
        testnet::require_binary("stdbuf");
        let mut cmd = client.command("stdbuf");
        cmd.args(["-oL", "arping", "-I", "eth0", "-W", "0.05", ip]);
        Self::start(client, cmd, parse_arping)
    }

    /// `ndisc6` in a loop: one Neighbor Solicitation per run, every answer
    /// within its 40 ms wait printed (`-m`), then 10 ms before the next
    /// run (about 50 ms a request, as `arp`). ndisc6 exits after each
    /// request, so its output is flushed by then.
    pub fn ndp(client: &Netns, ip: &str) -> Self {
        testnet::require_binary("ndisc6");
        let mut cmd = client.command("sh");
        cmd.args([
            "-c",
            &format!("while :; do ndisc6 -m -q -n -r 1 -w 40 {ip} eth0; sleep 0.01; done"),
        ]);
        Self::start(client, cmd, parse_ndisc6)
    }

    fn start(client: &Netns, mut cmd: Command, parse: fn(&str) -> Option<Reply>) -> Self {
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let mut proc = client.spawn_command(&mut cmd);
        let stdout = proc.take_stdout().unwrap();
        let replies = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&replies);
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(r) = parse(&line) {
                    sink.lock().unwrap().push(r);
                }
            }
        });
        Self {
            _proc: proc,
            replies,
            interval: Duration::from_millis(50),
        }
    }

    /// Every reply so far.
    pub fn replies(&self) -> Vec<Reply> {
        self.replies.lock().unwrap().clone()
    }

    /// Replies received in `[from, to]`.
    pub fn between(&self, from: Instant, to: Instant) -> Vec<Reply> {
        self.replies()
            .into_iter()
            .filter(|r| r.at >= from && r.at <= to)
            .collect()
    }

    /// Waits for a reply after `after` that `pred` accepts.
    pub fn wait_reply(
        &self,
        what: &str,
        after: Instant,
        timeout: Duration,
        pred: impl Fn(&Reply) -> bool,
    ) -> Reply {
        testnet::wait_until(what, timeout, Duration::from_millis(10), || {
            self.replies().into_iter().find(|r| r.at > after && pred(r))
        })
        .unwrap_or_else(|e| panic!("{e}; last replies: {:?}", tail(&self.replies(), 10)))
    }
}

fn tail(v: &[Reply], n: usize) -> &[Reply] {
    &v[v.len().saturating_sub(n)..]
}

/// `42 bytes from 02:00:00:00:00:01 (10.0.0.100): index=3 time=1.2 msec`.
fn parse_arping(line: &str) -> Option<Reply> {
    let rest = line.split_once(" bytes from ")?.1;
    let (mac, rest) = rest.split_once(' ')?;
    rest.split_once("index=")?;
    Some(Reply {
        at: Instant::now(),
        mac: mac.to_ascii_lowercase(),
    })
}

/// `ndisc6 -q`: the target's link-layer address alone, `02:FA:17:00:00:01`.
fn parse_ndisc6(line: &str) -> Option<Reply> {
    let mac = line.trim();
    let hex = mac.split(':').collect::<Vec<_>>();
    (hex.len() == 6
        && hex
            .iter()
            .all(|h| h.len() == 2 && u8::from_str_radix(h, 16).is_ok()))
    .then(|| Reply {
        at: Instant::now(),
        mac: mac.to_ascii_lowercase(),
    })
}

/// How many requests were answered by two MACs: replies from different
/// MACs that arrive less than half an interval apart answer one request
/// (arping's index counts replies, not requests).
pub fn requests_with_two_macs(replies: &[Reply], interval: Duration) -> usize {
    replies
        .windows(2)
        .filter(|w| w[0].mac != w[1].mac && w[1].at - w[0].at < interval / 2)
        .count()
}
