//! ferrolb's BFD (`ferrolb-bfd`) against FRR's bfdd in network namespaces:
//! sessions come Up over IPv4 and IPv6 with 50-300 ms intervals, a path
//! cut with nftables takes both sides Down within the detection time
//! (ours from our events' timestamps, FRR's from its log and
//! `show bfd peers json`), and the sessions come back Up when the path is
//! restored. Multihop with a passive ferrolb, and AdminDown, too.
//!
//! `BFD_CUTS=N` sets the number of cuts (default 3); the timings are
//! printed as `bfd-timing:` lines (BENCHMARKS.md uses N = 10).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use testnet::{Frr, Netns, Proc, RunDir, veth_pair, wait_until};

const T: Duration = Duration::from_secs(20);

/// FRR in `router` (10.0.0.1, fd00::1), ferrolb in `node` (10.0.0.2,
/// fd00::2), one veth link.
struct Lab {
    router: Netns,
    node: Netns,
}

impl Lab {
    fn new() -> Self {
        testnet::require_root();
        testnet::require_binary("nft");
        let router = Netns::new("bfd-rtr");
        let node = Netns::new("bfd-node");
        veth_pair(&router, "eth0", &node, "eth0");
        router.add_addr("eth0", "10.0.0.1/24");
        router.add_addr("eth0", "fd00::1/64");
        node.add_addr("eth0", "10.0.0.2/24");
        node.add_addr("eth0", "fd00::2/64");
        Self { router, node }
    }
}

/// A running `ferrolb-bfd`, its JSON lines on a channel.
struct Ferrolb {
    _proc: Proc,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    dir: RunDir,
}

impl Ferrolb {
    fn start(ns: &Netns, args: &[&str]) -> Self {
        let dir = RunDir::new("ferrolb-bfd");
        let stderr = std::fs::File::create(dir.join("ferrolb.log")).unwrap();
        let mut cmd = ns.command(env!("CARGO_BIN_EXE_ferrolb-bfd"));
        cmd.args(args)
            .args(["--log-level", "debug"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut proc = ns.spawn_command(&mut cmd);
        let stdin = proc.take_stdin().unwrap();
        let stdout = proc.take_stdout().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => eprintln!("ferrolb-bfd stdout: {line}"),
                }
            }
        });
        Self {
            _proc: proc,
            stdin,
            lines,
            seen: Vec::new(),
            dir,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The first line after `from` (an index into `seen`) matching `pred`.
    fn wait(&mut self, what: &str, from: usize, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + T;
        let mut i = from;
        loop {
            while i < self.seen.len() {
                if pred(&self.seen[i]) {
                    return self.seen[i].clone();
                }
                i += 1;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => {
                    self.dump_log();
                    panic!("timed out waiting for {what}; lines: {:#?}", self.seen)
                }
            }
        }
    }

    fn wait_state(&mut self, peer: &str, to: &str, from: usize) -> Value {
        self.wait(&format!("{peer} {to}"), from, |v| {
            v["event"] == "state" && v["peer"] == peer && v["to"] == to
        })
    }

    fn stats(&mut self) -> Value {
        let from = self.seen.len();
        self.send("stats");
        self.wait("stats", from, |v| v["event"] == "stats")
    }

    fn dump_log(&self) {
        if let Ok(text) = std::fs::read_to_string(self.dir.join("ferrolb.log")) {
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!("--- ferrolb-bfd log ---\n{}", tail.join("\n"));
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

fn frr_peer(frr: &Frr, peer: &str) -> Option<Value> {
    let v = frr.vtysh_json("show bfd peers json");
    v.as_array()?.iter().find(|p| p["peer"] == peer).cloned()
}

fn wait_frr_status(frr: &Frr, peer: &str, status: &str) -> Value {
    wait_until(
        &format!("FRR's session with {peer} to be {status}"),
        T,
        Duration::from_millis(20),
        || frr_peer(frr, peer).filter(|p| p["status"] == status),
    )
    .unwrap_or_else(|e| {
        frr.dump_logs();
        panic!("{e}")
    })
}

fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// Times (ms since midnight, UTC: the log's clock) of bfdd's
/// `state-change: [... peer:PEER ...] up -> down` lines.
fn frr_down_times(frr: &Frr, peer: &str) -> Vec<f64> {
    let log = std::fs::read_to_string(frr.dir().join("bfdd.log")).unwrap_or_default();
    let tag = format!("peer:{peer} ");
    log.lines()
        .filter(|l| l.contains("state-change") && l.contains(&tag) && l.contains("up -> down"))
        .filter_map(|l| {
            // "2026/11/21 23:10:40.123 BFD: ..."
            let time = l.split_whitespace().nth(1)?;
            let mut parts = time.split(':');
            let h: f64 = parts.next()?.parse().ok()?;
            let m: f64 = parts.next()?.parse().ok()?;
            let s: f64 = parts.next()?.parse().ok()?;
            Some(((h * 60.0 + m) * 60.0 + s) * 1000.0)
        })
        .collect()
}

fn ms_of_day(unix_ms: f64) -> f64 {
    unix_ms % 86_400_000.0
}

fn cut(ns: &Netns) {
    ns.run([
        "nft",
        "add table inet cut; \
         add chain inet cut in { type filter hook input priority 0; }; \
         add chain inet cut out { type filter hook output priority 0; }; \
         add rule inet cut in udp dport { 3784, 4784 } drop; \
         add rule inet cut out udp dport { 3784, 4784 } drop",
    ]);
}

fn restore(ns: &Netns) {
    ns.run(["nft", "delete table inet cut"]);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

const FRR_CONF: &str = "debug bfd peer
bfd
 peer 10.0.0.2 local-address 10.0.0.1 interface eth0
  receive-interval 50
  transmit-interval 50
  detect-multiplier 3
 !
 peer fd00::2 local-address fd00::1 interface eth0
  receive-interval 300
  transmit-interval 300
  detect-multiplier 3
 !
!
";

#[test]
fn frr_bfdd_up_cut_detect_restore_ipv4_ipv6() {
    let lab = Lab::new();
    let frr = Frr::start_daemons(&lab.router, &[("bfdd", FRR_CONF)]);
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--peer",
            "10.0.0.1",
            "--peer",
            "fd00::1",
            "--local",
            "10.0.0.2",
            "--local",
            "fd00::2",
            "--tx-ms",
            "50",
            "--rx-ms",
            "50",
            "--multiplier",
            "3",
        ],
    );
    let started = Instant::now();
    ours.wait_state("10.0.0.1", "Up", 0);
    ours.wait_state("fd00::1", "Up", 0);
    eprintln!("bfd-timing: both sessions up after {:?}", started.elapsed());
    let v4 = wait_frr_status(&frr, "10.0.0.2", "up");
    let v6 = wait_frr_status(&frr, "fd00::2", "up");

    // Discriminators and the negotiated timers, as FRR and we see them.
    let stats = eventually_polled(&mut ours, |s| {
        s["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["state"] == "Up" && x["polling"] == false)
    });
    let session = |peer: &str| -> Value {
        stats["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["peer"] == peer)
            .cloned()
            .unwrap()
    };
    let (s4, s6) = (session("10.0.0.1"), session("fd00::1"));
    assert_eq!(v4["remote-id"], s4["local_discriminator"], "{v4:#}");
    assert_eq!(v4["id"], s4["remote_discriminator"], "{v4:#}");
    assert_eq!(v6["remote-id"], s6["local_discriminator"], "{v6:#}");
    assert_eq!(s4["detection_time_ms"], 150.0, "{s4:#}");
    assert_eq!(s4["tx_interval_ms"], 50.0, "{s4:#}");
    // IPv6: FRR sends every 300 ms and wants no more than one per 300 ms.
    assert_eq!(s6["detection_time_ms"], 900.0, "{s6:#}");
    assert_eq!(s6["tx_interval_ms"], 300.0, "{s6:#}");
    let v4 = frr_peer(&frr, "10.0.0.2").unwrap();
    assert_eq!(v4["remote-receive-interval"], 50, "{v4:#}");
    assert_eq!(v4["remote-transmit-interval"], 50, "{v4:#}");
    assert_eq!(v4["remote-detect-multiplier"], 3, "{v4:#}");
    assert_eq!(stats["bad_ttl"], 0);
    assert_eq!(stats["malformed"], 0);
    assert_eq!(stats["unknown_session"], 0);

    let cuts: usize = std::env::var("BFD_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let (mut ours_ms, mut frr_ms, mut nft_total) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..cuts {
        // Let the session settle at the fast rate, at a random phase.
        std::thread::sleep(Duration::from_millis(500 + 37 * n as u64));
        let from = ours.seen.len();
        let frr_downs = frr_down_times(&frr, "10.0.0.2").len();
        let t_cut = unix_ms();
        cut(&lab.node);
        let nft_ms = unix_ms() - t_cut;
        let down = ours.wait_state("10.0.0.1", "Down", from);
        assert_eq!(down["diag"], "ControlDetectionTimeExpired", "{down}");
        let ours_det = down["ts_ms"].as_f64().unwrap() - t_cut;
        let p = wait_frr_status(&frr, "10.0.0.2", "down");
        assert_eq!(p["diagnostic"], "control detection time expired", "{p:#}");
        let frr_det = wait_until(
            "bfdd's state-change log line",
            T,
            Duration::from_millis(20),
            || frr_down_times(&frr, "10.0.0.2").get(frr_downs).copied(),
        )
        .unwrap()
            - ms_of_day(t_cut);
        // Measured from just before nft ran (an upper bound); the rule
        // took effect within the nft run time.
        eprintln!(
            "bfd-timing: cut {n}: ours detected in {ours_det:.1} ms, FRR in {frr_det:.1} ms \
             (nft took {nft_ms:.1} ms)"
        );
        nft_total.push(nft_ms);
        assert!(
            (0.0..=250.0).contains(&ours_det),
            "ours: {ours_det} ms for 3 x 50 ms"
        );
        assert!(
            (0.0..=250.0).contains(&frr_det),
            "FRR: {frr_det} ms for 3 x 50 ms"
        );
        ours_ms.push(ours_det);
        frr_ms.push(frr_det);

        let from = ours.seen.len();
        restore(&lab.node);
        let t_restore = Instant::now();
        ours.wait_state("10.0.0.1", "Up", from);
        wait_frr_status(&frr, "10.0.0.2", "up");
        eprintln!(
            "bfd-timing: cut {n}: Up again after {:?}",
            t_restore.elapsed()
        );
    }
    // The IPv6 session, with 900 ms detection, went down with most cuts
    // and is Up at the end.
    wait_frr_status(&frr, "fd00::2", "up");
    let s = eventually_polled(&mut ours, |s| {
        s["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["state"] == "Up")
    });
    eprintln!(
        "bfd-timing: {cuts} cuts at 50 ms x 3: median ours {:.1} ms, FRR {:.1} ms; \
         ours max {:.1}, FRR max {:.1}; nft run time median {:.1} ms",
        median(&mut ours_ms),
        median(&mut frr_ms),
        ours_ms.last().unwrap(),
        frr_ms.last().unwrap(),
        median(&mut nft_total),
    );
    assert_eq!(s["malformed"], 0, "{s:#}");
    assert_eq!(s["bad_ttl"], 0, "{s:#}");
}

/// Polls `stats` until `pred` holds.
fn eventually_polled(ours: &mut Ferrolb, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + T;
    loop {
        let s = ours.stats();
        if pred(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "stats never matched: {s:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn frr_bfdd_multihop_with_passive_ferrolb_and_admin_down() {
    let lab = Lab::new();
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--peer",
            "10.0.0.1",
            "--local",
            "10.0.0.2",
            "--multihop",
            "--passive",
            "--tx-ms",
            "100",
            "--rx-ms",
            "100",
            "--min-ttl",
            "254",
        ],
    );
    // Passive: nothing sent before FRR speaks.
    std::thread::sleep(Duration::from_millis(1500));
    let s = ours.stats();
    assert_eq!(s["sent"], 0, "{s:#}");
    let frr = Frr::start_daemons(
        &lab.router,
        &[(
            "bfdd",
            "debug bfd peer
bfd
 peer 10.0.0.2 multihop local-address 10.0.0.1
  receive-interval 100
  transmit-interval 100
 !
!
",
        )],
    );
    ours.wait_state("10.0.0.1", "Up", 0);
    let p = wait_frr_status(&frr, "10.0.0.2", "up");
    assert_eq!(p["multihop"], true, "{p:#}");

    // AdminDown on our side: FRR goes down at once, told why.
    let from = ours.seen.len();
    ours.send("admin-down 10.0.0.1");
    ours.wait_state("10.0.0.1", "AdminDown", from);
    let p = wait_frr_status(&frr, "10.0.0.2", "down");
    assert_eq!(p["remote-diagnostic"], "administratively down", "{p:#}");
    let from = ours.seen.len();
    ours.send("admin-up 10.0.0.1");
    ours.wait_state("10.0.0.1", "Up", from);
    wait_frr_status(&frr, "10.0.0.2", "up");

    // A peer that shuts its session (FRR `shutdown`) takes ours Down with
    // diag 3.
    let from = ours.seen.len();
    frr.configure(&[
        "bfd",
        "peer 10.0.0.2 multihop local-address 10.0.0.1",
        "shutdown",
    ]);
    let down = ours.wait_state("10.0.0.1", "Down", from);
    assert_eq!(down["diag"], "NeighborSignaledSessionDown", "{down}");
    let s = ours.stats();
    assert_eq!(s["bad_ttl"], 0, "{s:#}");
    assert_eq!(s["sessions"][0]["remote_state"], "AdminDown", "{s:#}");
}
