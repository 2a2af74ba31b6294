//! ferrolb's BFD (`ferrolb-bfd`) against FRR's bfdd in network namespaces:
//! sessions come Up over IPv4 and IPv6 with 50-300 ms intervals, a path
//! cut with nftables takes both sides Down by detection time expiry, and
//! the sessions come back Up when the path is restored. Multihop with a
//! passive ferrolb, and AdminDown, too. Echo mode both ways, with loss of
//! either side's echoes detected by echo while Control packets flow
//! (`frr_bfdd_echo_mode_both_ways_detection_and_recovery`, which has the
//! lab notes for FRR's echo).
//!
//! A cut is judged by what the programs report, not by the wall clock:
//! each side declares the IPv4 session (150 ms detection) Down before the
//! IPv6 one (900 ms), with diagnostic 1; ours not before its detection
//! time had passed since the session's last packet (`last_received` in
//! our stats, on the clock of our events). The times from the cut to each
//! side's Down (ours from our events, FRR's from its log, in UTC) are
//! printed as `bfd-timing:` lines; `BFD_CUTS=N` sets the number of cuts
//! (default 3; BENCHMARKS.md uses N = 10).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Lab;
use serde_json::Value;
use testnet::{Frr, JsonTool, Netns, RunDir, wait_until};

const T: Duration = Duration::from_secs(20);

/// FRR in `router` (10.0.0.1, fd00::1), ferrolb in `node` (10.0.0.2,
/// fd00::2), one veth link; `nft` for the cuts.
fn lab() -> Lab {
    testnet::require_binary("nft");
    Lab::new()
}

/// A running `ferrolb-bfd`, its JSON lines on a channel.
struct Ferrolb {
    tool: JsonTool,
    dir: RunDir,
}

impl Ferrolb {
    fn start(ns: &Netns, args: &[&str]) -> Self {
        let dir = RunDir::new("ferrolb-bfd");
        let stderr = std::fs::File::create(dir.join("ferrolb.log")).unwrap();
        let mut cmd = ns.command(env!("CARGO_BIN_EXE_ferrolb-bfd"));
        cmd.args(args).args(["--log-level", "debug"]).stderr(stderr);
        let tool = JsonTool::spawn(ns, &mut cmd, "ferrolb-bfd");
        Self { tool, dir }
    }

    fn send(&mut self, line: &str) {
        self.tool.send(line);
    }

    /// Every line received so far.
    fn seen(&self) -> &[Value] {
        &self.tool.seen
    }

    /// The first line after `from` (an index into `seen`) matching `pred`.
    fn wait(&mut self, what: &str, from: usize, pred: impl Fn(&Value) -> bool) -> Value {
        match self.tool.wait_from(from, Instant::now() + T, pred) {
            Some(v) => v,
            None => {
                self.dump_log();
                panic!("timed out waiting for {what}; lines: {:#?}", self.seen())
            }
        }
    }

    fn wait_state(&mut self, peer: &str, to: &str, from: usize) -> Value {
        self.wait(&format!("{peer} {to}"), from, |v| {
            v["event"] == "state" && v["peer"] == peer && v["to"] == to
        })
    }

    fn stats(&mut self) -> Value {
        let from = self.seen().len();
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

/// bfdd's `state-change: [... peer:PEER ...] up -> down` lines: (line
/// number in bfdd.log, time in ms since the UNIX epoch).
fn frr_downs(frr: &Frr, peer: &str) -> Vec<(usize, f64)> {
    let log = std::fs::read_to_string(frr.dir().join("bfdd.log")).unwrap_or_default();
    let tag = format!("peer:{peer} ");
    log.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("state-change") && l.contains(&tag) && l.contains("up -> down"))
        .map(|(i, l)| {
            let at = frr_log_unix_ms(l)
                .unwrap_or_else(|| panic!("bfdd.log line without a timestamp: {l}"));
            (i, at)
        })
        .collect()
}

/// The timestamp of an FRR log line, "2026/11/21 23:10:40.123 BFD: ...",
/// in ms since the UNIX epoch (testnet runs FRR with TZ=UTC).
fn frr_log_unix_ms(line: &str) -> Option<f64> {
    let mut words = line.split_whitespace();
    let mut date = words.next()?.split('/').map(str::parse::<i64>);
    let (y, m, d) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let mut time = words.next()?.split(':');
    let h: f64 = time.next()?.parse().ok()?;
    let min: f64 = time.next()?.parse().ok()?;
    let sec: f64 = time.next()?.parse().ok()?;
    // Days from the civil date (proleptic Gregorian), after H. Hinnant.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days as f64 * 24.0 + h) * 60.0 + min) * 60_000.0 + sec * 1000.0)
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
    let lab = lab();
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
    let peers = [
        ("10.0.0.1", "10.0.0.2", 150.0),
        ("fd00::1", "fd00::2", 900.0),
    ];
    for n in 0..cuts {
        // Both sessions settled at the fast rate: Up on both sides, no Poll
        // Sequence, the negotiated detection times in use.
        for (_, theirs, _) in peers {
            wait_frr_status(&frr, theirs, "up");
        }
        eventually_polled(&mut ours, |s| {
            s["sessions"].as_array().unwrap().iter().all(|x| {
                let det = if x["peer"] == "10.0.0.1" {
                    150.0
                } else {
                    900.0
                };
                x["state"] == "Up" && x["polling"] == false && x["detection_time_ms"] == det
            })
        });
        let from = ours.seen().len();
        let frr_before = peers.map(|(_, theirs, _)| frr_downs(&frr, theirs).len());
        let t_cut = unix_ms();
        cut(&lab.node);
        let nft_ms = unix_ms() - t_cut;
        nft_total.push(nft_ms);

        // Ours: both Down by detection time expiry, IPv4 first, each not
        // before its detection time had passed since its last packet.
        let downs = peers.map(|(peer, _, _)| {
            let down = ours.wait_state(peer, "Down", from);
            assert_eq!(down["diag"], "ControlDetectionTimeExpired", "{down}");
            down
        });
        let index = |d: &Value| ours.seen()[from..].iter().position(|v| v == d).unwrap();
        assert!(
            index(&downs[0]) < index(&downs[1])
                && downs[0]["mono_ms"].as_f64() <= downs[1]["mono_ms"].as_f64(),
            "IPv6 (900 ms) went Down before IPv4 (150 ms): {downs:#?}"
        );
        // The cut still holds: nothing was received since.
        let s = ours.stats();
        for ((peer, _, det), down) in peers.iter().zip(&downs) {
            let session = s["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["peer"] == *peer)
                .unwrap();
            let last = session["last_received_mono_ms"].as_f64().unwrap();
            let silent = down["mono_ms"].as_f64().unwrap() - last;
            // (A nanosecond of slack for the conversion to float ms.)
            assert!(
                silent >= *det - 1e-6,
                "{peer}: Down {silent:.3} ms after its last packet, detection time {det} ms"
            );
        }

        // FRR: both Down by detection time expiry, IPv4 first (bfdd logs
        // state changes in order).
        let frr_down = peers.map(|(_, theirs, _)| {
            let p = wait_frr_status(&frr, theirs, "down");
            assert_eq!(p["diagnostic"], "control detection time expired", "{p:#}");
            p
        });
        let logged: Vec<(usize, f64)> = peers
            .iter()
            .zip(frr_before)
            .map(|((_, theirs, _), before)| {
                wait_until(
                    &format!("bfdd's state-change line for {theirs}"),
                    T,
                    Duration::from_millis(20),
                    || frr_downs(&frr, theirs).get(before).copied(),
                )
                .unwrap_or_else(|e| {
                    frr.dump_logs();
                    panic!("{e}")
                })
            })
            .collect();
        assert!(
            logged[0].0 < logged[1].0,
            "FRR: IPv6 (900 ms) went Down before IPv4 (150 ms): {logged:?} {frr_down:#?}"
        );
        let ours_det = downs[0]["ts_ms"].as_f64().unwrap() - t_cut;
        let frr_det = logged[0].1 - t_cut;
        // Measured from just before nft ran (an upper bound); the rule
        // took effect within the nft run time.
        eprintln!(
            "bfd-timing: cut {n}: IPv4 (3 x 50 ms): ours Down after {ours_det:.1} ms, FRR after \
             {frr_det:.1} ms; IPv6 (3 x 300 ms): ours {:.1} ms, FRR {:.1} ms (nft took {nft_ms:.1} ms)",
            downs[1]["ts_ms"].as_f64().unwrap() - t_cut,
            logged[1].1 - t_cut,
        );
        ours_ms.push(ours_det);
        frr_ms.push(frr_det);

        let from = ours.seen().len();
        restore(&lab.node);
        let t_restore = Instant::now();
        for (peer, theirs, _) in peers {
            ours.wait_state(peer, "Up", from);
            wait_frr_status(&frr, theirs, "up");
        }
        eprintln!(
            "bfd-timing: cut {n}: Up again after {:?}",
            t_restore.elapsed()
        );
    }
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
        ours_ms.iter().copied().fold(f64::MIN, f64::max),
        frr_ms.iter().copied().fold(f64::MIN, f64::max),
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
    let lab = lab();
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
    // Passive: the session exists and says it is not sending (transmit
    // interval 0) until FRR speaks; nothing was sent.
    let s = eventually_polled(&mut ours, |s| {
        s["sessions"][0]["peer"] == "10.0.0.1" && s["sessions"][0]["state"] == "Down"
    });
    assert_eq!(s["sessions"][0]["tx_interval_ms"], 0.0, "{s:#}");
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
    let from = ours.seen().len();
    ours.send("admin-down 10.0.0.1");
    ours.wait_state("10.0.0.1", "AdminDown", from);
    let p = wait_frr_status(&frr, "10.0.0.2", "down");
    assert_eq!(p["remote-diagnostic"], "administratively down", "{p:#}");
    let from = ours.seen().len();
    ours.send("admin-up 10.0.0.1");
    ours.wait_state("10.0.0.1", "Up", from);
    wait_frr_status(&frr, "10.0.0.2", "up");

    // A peer that shuts its session (FRR `shutdown`) takes ours Down with
    // diag 3.
    let from = ours.seen().len();
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

/// FRR's `show bfd peers counters json` entry for `peer`.
fn frr_counters(frr: &Frr, peer: &str) -> Value {
    let v = frr.vtysh_json("show bfd peers counters json");
    v.as_array()
        .and_then(|a| a.iter().find(|p| p["peer"] == peer).cloned())
        .unwrap_or_else(|| panic!("no counters for {peer}: {v:#}"))
}

/// Our one session in a `stats` line.
fn our_session(stats: &Value) -> &Value {
    &stats["sessions"][0]
}

/// Drops BFD Echo packets (UDP 3785) that `ns` would forward, and nothing
/// else: the echoes the *other* side sends through this one. A forwarded
/// packet passes the forward hook only; `AF_PACKET` sockets (where bfdd
/// and ferrolb send and read echoes) and Control packets (3784) are not
/// touched.
fn cut_echo_forwarding(ns: &Netns) {
    ns.run([
        "nft",
        "add table inet echocut; \
         add chain inet echocut forwarded { type filter hook forward priority 0; }; \
         add rule inet echocut forwarded udp dport 3785 drop",
    ]);
}

fn restore_echo_forwarding(ns: &Netns) {
    ns.run(["nft", "delete table inet echocut"]);
}

const FRR_ECHO_CONF: &str = "debug bfd peer
bfd
 peer 10.0.0.2 local-address 10.0.0.1 interface eth0
  receive-interval 300
  transmit-interval 300
  detect-multiplier 3
  echo-mode
  echo transmit-interval 200
  echo receive-interval 200
 !
!
";

/// BFD echo mode against FRR's bfdd (RFC 5880 §6.4, RFC 5881 §4).
///
/// Lab notes (FRR 8.4.4, Linux 6.18, checked here):
/// - bfdd sends IPv4 echoes as ferrolb does: an Ethernet frame to the
///   peer's MAC address (from its ARP table; it needs `interface eth0` in
///   the peer statement to know where), IP source = destination = its own
///   address, TTL 255, UDP 3785 -> 3785, through an `AF_PACKET` socket;
///   it reads returned ones on an `AF_PACKET` socket too, and keeps only
///   TTL 254. So each side's kernel must *forward* the other's echoes:
///   `net.ipv4.ip_forward = 1` in both namespaces, and nothing else (no
///   `accept_local`: neither side's IP stack receives its own returning
///   echo, the packet sockets below it do). `send_redirects` is off so
///   that a forward out of the arrival interface sends no ICMP redirect.
/// - bfdd advertises its echo receive interval whether or not echo-mode
///   is on; ferrolb advertises 0 without echo mode (it cannot know that
///   the node forwards).
/// - bfdd does not slow its Control packets while echo is active; we ask
///   it to (Required Min RX 1 s, RFC 5880 §6.8.3), and it honours that.
/// - Cutting one direction's echoes: drop UDP 3785 in the forward hook of
///   the namespace that loops them. nftables' input/output hooks do not
///   see echoes at all (packet sockets sit below them).
///
/// Proves: echoes flow both ways (our counters and FRR's), the session
/// stays Up while they do, loss of our echoes takes our session Down by
/// echo detection (diag 2) while Control packets still flow, loss of
/// FRR's takes FRR's Down the same way, and both recover when the path is
/// restored. Each Down is checked against the detection time the core
/// reports, not against a guess; times from the cut are printed as
/// `bfd-echo-timing:` lines.
#[test]
fn frr_bfdd_echo_mode_both_ways_detection_and_recovery() {
    let lab = lab();
    for ns in [&lab.router, &lab.node] {
        ns.sysctl("net.ipv4.ip_forward", "1");
        ns.sysctl("net.ipv4.conf.all.send_redirects", "0");
        ns.sysctl("net.ipv4.conf.eth0.send_redirects", "0");
    }
    let frr = Frr::start_daemons(&lab.router, &[("bfdd", FRR_ECHO_CONF)]);
    let mut ours = Ferrolb::start(
        &lab.node,
        &[
            "--peer",
            "10.0.0.1",
            "--local",
            "10.0.0.2",
            "--tx-ms",
            "300",
            "--rx-ms",
            "300",
            "--multiplier",
            "3",
            "--echo-ms",
            "200",
        ],
    );
    ours.wait_state("10.0.0.1", "Up", 0);
    wait_frr_status(&frr, "10.0.0.2", "up");

    let s = settle(&mut ours, 0);
    let x = our_session(&s);
    assert_eq!(x["remote_min_echo_rx_ms"], 200.0, "{x:#}");
    assert_eq!(x["echo_interval_ms"], 200.0, "{x:#}");
    assert_eq!(x["echo_detection_time_ms"], 600.0, "{x:#}");
    // Control detection: 3 x max(our Required Min RX raised to 1 s, FRR's 300 ms).
    assert_eq!(x["detection_time_ms"], 3000.0, "{x:#}");
    assert_eq!(s["echo_send_errors"], 0, "{s:#}");
    assert_eq!(s["echo_dropped"], 0, "{s:#}");
    let v = frr_peer(&frr, "10.0.0.2").unwrap();
    // FRR sees what we advertise: Required Min RX 1 s while echo is
    // active, Required Min Echo RX 200 ms.
    assert_eq!(v["remote-receive-interval"], 1000, "{v:#}");
    assert_eq!(v["remote-echo-receive-interval"], 200, "{v:#}");
    stays_up(&mut ours, &frr, 10);

    // 1. Our echoes stop coming back (FRR's kernel stops forwarding
    // them): our session goes Down by echo detection, not before the
    // echo detection time had passed since the last echo came back.
    let from = ours.seen().len();
    let frr_ctl = n(&frr_counters(&frr, "10.0.0.2"), "control-packet-input");
    let frr_before = frr_down_reasons(&frr).len();
    let t_cut = unix_ms();
    cut_echo_forwarding(&lab.router);
    let down = ours.wait_state("10.0.0.1", "Down", from);
    assert_eq!(down["diag"], "EchoFunctionFailed", "{down}");
    assert_eq!(down["cause"], "EchoFunctionFailed", "{down}");
    let s = ours.stats();
    let last_echo = our_session(&s)["last_echo_received_mono_ms"]
        .as_f64()
        .unwrap();
    let silent = down["mono_ms"].as_f64().unwrap() - last_echo;
    assert!(
        silent >= 600.0 - 1e-6,
        "Down {silent:.3} ms after the last echo came back, echo detection time 600 ms"
    );
    eprintln!(
        "bfd-echo-timing: our echoes cut: ours Down after {:.1} ms ({silent:.1} ms after the last echo)",
        down["ts_ms"].as_f64().unwrap() - t_cut
    );
    // FRR heard it from us (it still has its own echoes).
    let reasons = wait_frr_down(&frr, frr_before);
    assert_eq!(reasons[0], "neighbor-down", "{reasons:?}");
    // Control packets still flow: the handshake brings the session Up
    // again at once, and echo detection takes it Down again while the cut
    // holds; FRR kept receiving our Control packets.
    let index = |ours: &Ferrolb, v: &Value| ours.seen().iter().rposition(|x| x == v).unwrap();
    let up = ours.wait_state("10.0.0.1", "Up", index(&ours, &down));
    let again = ours.wait_state("10.0.0.1", "Down", index(&ours, &up));
    assert_eq!(again["diag"], "EchoFunctionFailed", "{again}");
    assert!(n(&frr_counters(&frr, "10.0.0.2"), "control-packet-input") > frr_ctl);
    restore_echo_forwarding(&lab.router);
    let back = n(our_session(&ours.stats()), "echo_received");
    settle(&mut ours, back);
    stays_up(&mut ours, &frr, 5);

    // 2. FRR's echoes stop coming back (our kernel stops forwarding them):
    // FRR goes Down by echo detection and tells us so (diag 2: a failure).
    let frr_before = frr_down_reasons(&frr).len();
    let from = ours.seen().len();
    let t_cut = unix_ms();
    cut_echo_forwarding(&lab.node);
    let down = ours.wait_state("10.0.0.1", "Down", from);
    assert_eq!(down["diag"], "NeighborSignaledSessionDown", "{down}");
    assert_eq!(down["cause"], "NeighborDown", "{down}");
    let reasons = wait_frr_down(&frr, frr_before);
    assert_eq!(reasons[0], "echo-failed", "{reasons:?}");
    eprintln!(
        "bfd-echo-timing: FRR's echoes cut: ours told Down after {:.1} ms",
        down["ts_ms"].as_f64().unwrap() - t_cut
    );
    restore_echo_forwarding(&lab.node);
    let back = n(our_session(&ours.stats()), "echo_received");
    let s = settle(&mut ours, back);
    stays_up(&mut ours, &frr, 5);
    assert_eq!(s["malformed"], 0, "{s:#}");
    assert_eq!(s["bad_ttl"], 0, "{s:#}");
    // (echo_dropped may count an echo of ours that came back just after
    // the session went Down: the core drops it, as FRR does.)
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Polls until our session is Up, out of its Poll Sequence, with more
/// than three echoes back since `back` came back; returns the stats.
fn settle(ours: &mut Ferrolb, back: u64) -> Value {
    eventually_polled(ours, |s| {
        let x = our_session(s);
        x["state"] == "Up" && x["polling"] == false && x["echo_received"].as_u64() > Some(back + 3)
    })
}

/// The session stays Up for `times` echo detection times (600 ms): no
/// state change on either side, and both sides' echoes keep coming back.
fn stays_up(ours: &mut Ferrolb, frr: &Frr, times: u32) {
    let from = ours.seen().len();
    let (before, frr_before) = (ours.stats(), frr_counters(frr, "10.0.0.2"));
    std::thread::sleep(Duration::from_millis(600) * times);
    let (after, frr_after) = (ours.stats(), frr_counters(frr, "10.0.0.2"));
    let changes: Vec<&Value> = ours.seen()[from..]
        .iter()
        .filter(|v| v["event"] == "state")
        .collect();
    assert!(changes.is_empty(), "{changes:#?}");
    assert_eq!(
        n(&frr_after, "session-down"),
        n(&frr_before, "session-down")
    );
    let delta = |k: &str| n(our_session(&after), k) - n(our_session(&before), k);
    let frr_delta = |k: &str| n(&frr_after, k) - n(&frr_before, k);
    eprintln!(
        "bfd-echo-timing: Up for {times} x 600 ms: ours sent {} echoes, {} came back; \
         FRR sent {}, {} came back; FRR received {} Control packets",
        delta("echo_sent"),
        delta("echo_received"),
        frr_delta("echo-packet-output"),
        frr_delta("echo-packet-input"),
        frr_delta("control-packet-input"),
    );
    assert!(delta("echo_received") > 0 && frr_delta("echo-packet-input") > 0);
}

/// bfdd's reasons for each `up -> down` of the session with 10.0.0.2, in
/// order (`reason:echo-failed`, `reason:neighbor-down`, ...).
fn frr_down_reasons(frr: &Frr) -> Vec<String> {
    let log = std::fs::read_to_string(frr.dir().join("bfdd.log")).unwrap_or_default();
    log.lines()
        .filter(|l| {
            l.contains("state-change") && l.contains("peer:10.0.0.2 ") && l.contains("up -> down")
        })
        .map(|l| l.rsplit("reason:").next().unwrap_or("").trim().to_string())
        .collect()
}

/// Waits for bfdd to log a Down after the first `before`; returns the
/// reasons from there on.
fn wait_frr_down(frr: &Frr, before: usize) -> Vec<String> {
    wait_until("bfdd to log a Down", T, Duration::from_millis(20), || {
        let r = frr_down_reasons(frr);
        (r.len() > before).then(|| r[before..].to_vec())
    })
    .unwrap_or_else(|e| {
        frr.dump_logs();
        panic!("{e}")
    })
}
