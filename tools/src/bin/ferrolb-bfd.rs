//! ferrolb-bfd: run BFD sessions with ferrolb's own BFD implementation,
//! without Kubernetes or BGP. For labs, interop tests and benchmarks; the
//! speaker proper builds on the same driver.
// The `Args` doc comment is clap's --help text, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

use std::io::Write;
use std::net::IpAddr;
use std::num::NonZeroU8;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bfd::{Event, PeerKey, Profile, SessionConfig};
use clap::Parser;
use serde_json::{Value, json};
use speaker::driver::bfd::{BfdSpeaker, Options};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

/// Run BFD sessions (RFC 5880 asynchronous mode) with ferrolb's BFD.
///
/// Single-hop sessions (RFC 5881) use UDP 3784 and require TTL 255 on
/// received packets; multihop sessions (RFC 5883, --multihop) use UDP 4784
/// and require at least --min-ttl. Packets go out from a source port in
/// 49152-65535 with TTL 255. With --echo-ms, single-hop IPv4 sessions also
/// run the echo function (RFC 5880 §6.4; RFC 5881 §4: UDP 3785, our own
/// address as destination, sent to the peer's MAC address so that its
/// forwarding plane loops it back; needs CAP_NET_RAW). Authentication and
/// demand mode are not supported (packets with the A bit are dropped and
/// counted).
///
/// Prints one JSON object per state change on standard output:
///   {"event":"state","peer":ADDR,"multihop":BOOL,"from":STATE,"to":STATE,
///    "diag":DIAG,"cause":CAUSE,"ts_ms":UNIX_MS,"mono_ms":MS_SINCE_START}
/// STATE is AdminDown, Down, Init or Up; DIAG is the RFC 5880 diagnostic
/// we set (e.g. ControlDetectionTimeExpired, NeighborSignaledSessionDown);
/// CAUSE is null, or why the session left Init or Up (`bfd::DownCause`,
/// e.g. DetectionTimeExpired, NeighborRestarted).
/// ts_ms is wall-clock time in milliseconds (with fractions), taken from
/// the monotonic time the state changed at.
///
/// Reads commands from standard input, one per line:
///   stats             print counters and every session ({"event":"stats"};
///                     a session's last_received_mono_ms is when its last
///                     packet arrived, on the clock of mono_ms)
///   admin-down ADDR   hold the session with ADDR in AdminDown
///   admin-up ADDR     release it
///   remove ADDR       remove it (the peer gets AdminDown)
///   quit              exit
#[derive(Debug, Parser)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// Peer address (IPv4 or IPv6); repeat for more sessions, all with the
    /// same settings.
    #[arg(long = "peer", required = true)]
    peers: Vec<IpAddr>,
    /// Source address of our packets (default: chosen by the kernel).
    /// Applies to the peers of its address family.
    #[arg(long)]
    local: Vec<IpAddr>,
    /// Multihop sessions (RFC 5883, UDP 4784) instead of single-hop.
    #[arg(long)]
    multihop: bool,
    /// Desired minimum transmit interval in milliseconds, once Up (while
    /// not Up, at least 1000 ms, RFC 5880 §6.8.3). MetalLB's
    /// transmitInterval.
    #[arg(long, default_value_t = 300)]
    tx_ms: u64,
    /// Required minimum receive interval in milliseconds: the fastest rate
    /// we accept from the peer. MetalLB's receiveInterval.
    #[arg(long, default_value_t = 300)]
    rx_ms: u64,
    /// Detect multiplier: the peer declares us Down after this many
    /// intervals without a packet. MetalLB's detectMultiplier.
    #[arg(long, default_value = "3")]
    multiplier: NonZeroU8,
    /// Passive mode: send nothing until the peer has sent a packet.
    /// MetalLB's passiveMode.
    #[arg(long)]
    passive: bool,
    /// Multihop only: the lowest TTL / hop limit accepted from the peer.
    /// MetalLB's minimumTtl. Single-hop sessions always require 255.
    #[arg(long, default_value_t = 254)]
    min_ttl: u8,
    /// Echo mode with this interval in milliseconds: our Required Min
    /// Echo RX Interval and the fastest we send echoes at. MetalLB's
    /// echoMode with echoInterval. Single-hop IPv4 peers only (IPv6 and
    /// multihop sessions run without it).
    #[arg(long)]
    echo_ms: Option<u64>,
    /// Seed for discriminators and jitter (default: from the OS).
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    log: shell::LogArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    // One thread: the driver is one task.
    shell::main(
        "ferrolb-bfd",
        shell::Runtime::CurrentThread,
        &log,
        run(args),
    )
}

async fn run(args: Args) -> Result<(), String> {
    let start = std::time::Instant::now();
    let (speaker, mut events) = BfdSpeaker::spawn(Options {
        seed: args.seed,
        ..Options::default()
    })
    .map_err(|e| format!("cannot start the bfd driver: {e}"))?;
    let profile = Profile {
        receive_interval: Duration::from_millis(args.rx_ms),
        transmit_interval: Duration::from_millis(args.tx_ms),
        detect_multiplier: args.multiplier,
        passive: args.passive,
        minimum_ttl: args.min_ttl,
        echo_interval: args.echo_ms.map(Duration::from_millis),
    };
    for &peer in &args.peers {
        let local = args
            .local
            .iter()
            .copied()
            .find(|l| l.is_ipv4() == peer.is_ipv4());
        let config = SessionConfig {
            key: key(&args, peer),
            local,
            profile: Profile {
                // The driver sends echoes over IPv4 only.
                echo_interval: profile.echo_interval.filter(|_| peer.is_ipv4()),
                ..profile
            },
        };
        speaker
            .add_session(config)
            .await
            .map_err(|e| format!("session with {peer}: {e}"))?;
    }
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            e = events.recv() => {
                let Some(e) = e else { return Err("driver stopped".into()) };
                print(&event_json(&e, start));
            }
            line = stdin.next_line(), if stdin_open => {
                match line {
                    Ok(Some(line)) => {
                        if !command(&speaker, &args, line.trim(), start).await? {
                            return Ok(());
                        }
                    }
                    _ => stdin_open = false,
                }
            }
            _ = term.recv() => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

fn key(args: &Args, peer: IpAddr) -> PeerKey {
    PeerKey {
        peer,
        multihop: args.multihop,
    }
}

/// Handles one stdin command; `false` to exit.
async fn command(
    speaker: &BfdSpeaker,
    args: &Args,
    line: &str,
    start: std::time::Instant,
) -> Result<bool, String> {
    let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
    let peer = || -> Result<PeerKey, String> {
        let ip: IpAddr = arg.trim().parse().map_err(|e| format!("{arg}: {e}"))?;
        Ok(key(args, ip))
    };
    let err = |e: std::io::Error| e.to_string();
    match cmd {
        "" => {}
        "quit" => return Ok(false),
        "stats" => {
            let (stats, sessions) = speaker.stats().await.map_err(err)?;
            let sessions: Vec<Value> = sessions
                .iter()
                .map(|s| {
                    json!({
                        "peer": s.key.peer.to_string(),
                        "multihop": s.key.multihop,
                        "state": s.state.to_string(),
                        "remote_state": s.remote_state.to_string(),
                        "diag": s.diag.to_string(),
                        "local_discriminator": s.local_discriminator,
                        "remote_discriminator": s.remote_discriminator,
                        "tx_interval_ms": ms(s.tx_interval),
                        "detection_time_ms": ms(s.detection_time),
                        "polling": s.polling,
                        "received": s.received,
                        "last_received_mono_ms": s
                            .last_received
                            .map(|t| ms(t.saturating_duration_since(start))),
                        "sent": s.sent,
                        "ups": s.ups,
                        "downs": s.downs,
                        "remote_min_echo_rx_ms": ms(s.remote_min_echo_rx),
                        "echo_interval_ms": ms(s.echo_interval),
                        "echo_detection_time_ms": ms(s.echo_detection_time),
                        "echo_sent": s.echo_sent,
                        "echo_received": s.echo_received,
                        "last_echo_received_mono_ms": s
                            .last_echo_received
                            .map(|t| ms(t.saturating_duration_since(start))),
                    })
                })
                .collect();
            let c = stats.core;
            print(&json!({
                "event": "stats",
                "received": c.received,
                "sent": c.sent,
                "malformed": c.malformed,
                "authenticated": c.authenticated,
                "bad_ttl": c.bad_ttl,
                "unknown_session": c.unknown_session,
                "send_errors": stats.send_errors,
                "kernel_drops": stats.kernel_drops,
                "echo_sent": c.echo_sent,
                "echo_received": c.echo_received,
                "echo_dropped": c.echo_dropped,
                "echo_send_errors": stats.echo_send_errors,
                "sessions": sessions,
            }));
        }
        "admin-down" | "admin-up" => {
            let found = speaker
                .set_admin_down(peer()?, cmd == "admin-down")
                .await
                .map_err(err)?;
            print(&json!({"event": "ack", "command": cmd, "found": found}));
        }
        "remove" => {
            let found = speaker.remove_session(peer()?).await.map_err(err)?;
            print(&json!({"event": "ack", "command": cmd, "found": found}));
        }
        other => print(&json!({"event": "error", "message": format!("unknown command {other:?}")})),
    }
    Ok(true)
}

fn event_json(e: &Event, start: std::time::Instant) -> Value {
    // Wall-clock time of the change: now, minus how long ago it happened.
    let ago = std::time::Instant::now().saturating_duration_since(e.at);
    let wall = SystemTime::now()
        .checked_sub(ago)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default();
    json!({
        "event": "state",
        "peer": e.key.peer.to_string(),
        "multihop": e.key.multihop,
        "from": e.from.to_string(),
        "to": e.to.to_string(),
        "diag": e.diag.to_string(),
        "cause": e.cause.map(|c| format!("{c:?}")),
        "ts_ms": wall.as_secs_f64() * 1000.0,
        "mono_ms": ms(e.at.saturating_duration_since(start)),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn print(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}
