//! ferrolb-l2: answer ARP and Neighbor Discovery for a set of IPs with
//! ferrolb's layer 2 responders, without Kubernetes. For labs, the kernel
//! interop tests and benchmarks; the speaker proper builds on the same
//! driver.
// The `Args` doc comment is clap's --help text, not rustdoc: its brackets
// are command syntax, not links.
#![allow(rustdoc::broken_intra_doc_links)]

use std::collections::BTreeSet;
use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use l2::{Burst, Reason, Stats};
use serde_json::json;
use speaker::driver::l2::{L2Announcer, L2Config, L2Event, L2Stats};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

/// Answer ARP requests and IPv6 Neighbor Solicitations for service IPs
/// with ferrolb's layer 2 responders (gratuitous ARP and unsolicited
/// Neighbor Advertisements on takeover).
///
/// The IPs need not be configured on any interface: an AF_PACKET socket
/// per selected interface hears the requests. Interfaces: those named
/// after @ when given, else those with a subnet containing the IP, else
/// every usable one (up, not loopback, broadcast Ethernet; bond and bridge
/// members are answered on through their master). Interface changes are
/// followed at once (rtnetlink).
///
/// Prints one JSON object per event on standard output:
///   {"event":"selected","ip":IP,"interfaces":[NAME...]}
///   {"event":"interface_error","interface":NAME,"error":TEXT}
///   {"event":"stats", ...counters...}
///   {"event":"error","message":TEXT}   (a bad stdin command)
/// Reads commands from standard input, one per line:
///   announce IP[@IFACE,...]   answer for IP (replaces its interface list)
///   withdraw IP               stop answering for IP
///   stats                     print the counters
///   stop                      withdraw everything and exit
#[derive(Debug, Parser)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// An IP to answer for from the start, optionally restricted to the
    /// named interfaces: 192.0.2.10 or fd00::10@eth0,eth1. Repeat for more.
    #[arg(long = "announce")]
    announce: Vec<String>,
    /// Gratuitous ARP / unsolicited NA rounds sent when an IP is announced
    /// on an interface (0: none).
    #[arg(long, default_value_t = l2::announce::DEFAULT_COUNT)]
    burst_count: u32,
    /// Milliseconds between those rounds.
    #[arg(long, default_value_t = 1100)]
    burst_interval_ms: u64,
    /// Answers per second to one sender (interface and source MAC),
    /// sustained; 0: no limit.
    #[arg(long, default_value_t = l2::Limit::DEFAULT.rate)]
    rate_limit: u32,
    /// Answers one sender may get at once.
    #[arg(long, default_value_t = l2::Limit::DEFAULT.burst)]
    rate_burst: u32,
    /// SO_BUSY_POLL on the packet sockets, in microseconds (0: off).
    #[arg(long, default_value_t = 0)]
    busy_poll_us: u32,
    #[command(flatten)]
    log: shell::LogArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    // One thread: the driver is one task, and the benchmark pins it.
    shell::main("ferrolb-l2", shell::Runtime::CurrentThread, &log, run(args))
}

async fn run(args: Args) -> Result<(), String> {
    let mut initial = Vec::new();
    for spec in &args.announce {
        initial.push(parse_spec(spec).map_err(|e| format!("--announce {spec:?}: {e}"))?);
    }
    let config = L2Config {
        burst: Burst {
            count: args.burst_count,
            interval: Duration::from_millis(args.burst_interval_ms),
        },
        limit: (args.rate_limit > 0).then_some(l2::Limit {
            rate: args.rate_limit,
            burst: args.rate_burst,
            seed: 0,
        }),
        busy_poll_us: args.busy_poll_us,
        ..L2Config::default()
    };
    let (l2, mut events) = L2Announcer::start(config).map_err(|e| format!("netlink: {e}"))?;
    for (ip, names) in initial {
        l2.announce(ip, names);
    }
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            Some(ev) = events.recv() => emit(&event_json(&ev)),
            line = stdin.next_line(), if stdin_open => match line {
                Ok(Some(line)) => {
                    let line = line.trim();
                    if let Some(spec) = line.strip_prefix("announce ") {
                        match parse_spec(spec.trim()) {
                            Ok((ip, names)) => l2.announce(ip, names),
                            Err(e) => emit(&json!({"event": "error", "message": e})),
                        }
                    } else if let Some(ip) = line.strip_prefix("withdraw ") {
                        match ip.trim().parse::<IpAddr>() {
                            Ok(ip) => l2.withdraw(ip),
                            Err(e) => emit(&json!({"event": "error", "message": e.to_string()})),
                        }
                    } else if line == "stats" {
                        if let Some(st) = l2.stats().await {
                            emit(&stats_json(&st));
                        }
                    } else if line == "stop" {
                        l2.shutdown().await;
                        while let Ok(ev) = events.try_recv() {
                            emit(&event_json(&ev));
                        }
                        return Ok(());
                    } else if !line.is_empty() {
                        emit(&json!({"event": "error", "message": format!("unknown command {line:?}")}));
                    }
                }
                // End of input: keep running until a signal.
                Ok(None) | Err(_) => stdin_open = false,
            },
            _ = term.recv() => {
                l2.shutdown().await;
                return Ok(());
            }
            _ = int.recv() => {
                l2.shutdown().await;
                return Ok(());
            }
        }
    }
}

/// `IP[@IFACE,...]`.
fn parse_spec(spec: &str) -> Result<(IpAddr, Option<BTreeSet<String>>), String> {
    let (ip, names) = match spec.split_once('@') {
        Some((ip, names)) => {
            let names: BTreeSet<String> = names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect();
            if names.is_empty() {
                return Err("empty interface list after @".into());
            }
            (ip, Some(names))
        }
        None => (spec, None),
    };
    let ip = ip.trim().parse().map_err(|e| format!("{ip:?}: {e}"))?;
    Ok((ip, names))
}

fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn event_json(ev: &L2Event) -> serde_json::Value {
    match ev {
        L2Event::Selected { ip, interfaces } => {
            json!({"event": "selected", "ip": ip.to_string(), "interfaces": interfaces})
        }
        L2Event::InterfaceError { interface, error } => {
            json!({"event": "interface_error", "interface": interface, "error": error})
        }
    }
}

fn stats_json(st: &L2Stats) -> serde_json::Value {
    let per_ip: serde_json::Map<String, serde_json::Value> = st
        .per_ip
        .iter()
        .map(|(ip, c)| {
            let counters = json!({
                "requests_received": c.requests_received,
                "responses_sent": c.responses_sent,
                "gratuitous_sent": c.gratuitous_sent,
            });
            (ip.to_string(), counters)
        })
        .collect();
    json!({
        "event": "stats",
        "requests_received": st.requests_received(),
        "responses_sent": st.responses_sent(),
        "gratuitous_sent": st.gratuitous_sent(),
        "oversize": st.oversize,
        "send_errors": st.send_errors,
        "recv_errors": st.recv_errors,
        "kernel_drops": st.kernel_drops,
        "interfaces": st.interfaces,
        "netlink_foreign": st.netlink_foreign,
        "arp": protocol_json(&st.arp),
        "ndp": protocol_json(&st.ndp),
        "per_ip": per_ip,
    })
}

/// One responder's counters; drops by reason name (`not_ours`, ...).
fn protocol_json<R: Reason>(s: &Stats<R>) -> serde_json::Value {
    let dropped: serde_json::Map<String, serde_json::Value> = s
        .drops()
        .map(|(reason, n)| (reason.to_string(), n.into()))
        .collect();
    json!({
        "requests_received": s.requests_received,
        "responses_sent": s.responses_sent,
        "announcements_sent": s.announcements_sent,
        "rate_limited": s.rate_limited,
        "dropped": dropped,
    })
}
