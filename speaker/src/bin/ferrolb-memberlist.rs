//! ferrolb-memberlist: run one member of ferrolb's memberlist (SWIM with
//! Lifeguard) without Kubernetes. For labs, the namespace tests and the
//! failover benchmark; the speaker proper builds on the same driver.
// The `Args` doc comment is clap's --help text, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use memberlist::{Event, Member, Meta, Name, Security, State};
use serde_json::{Value, json};
use speaker::driver::memberlist::{Config, MemberEvent, Memberlist, Stats};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

/// Run one member of ferrolb's memberlist (SWIM + Lifeguard, AES-256-GCM).
///
/// Prints one JSON object per line on standard output, each with "ts_ms"
/// (milliseconds since the UNIX epoch):
///   {"event":"started","name":..,"addr":..,"probe_interval_ms":..,
///    "probe_timeout_ms":..,"suspicion_min_ms":..,"suspicion_max_ms":..,
///    "max_health_multiplier":..}  (the timing profile in use)
///   {"event":"alive"|"suspect"|"dead"|"left"|"updated","member":NAME,
///    "addr":..,"incarnation":N,"meta":..,"refuted":BOOL (alive only)}
///   {"event":"stats",...}  {"event":"members","members":[...]}
///   {"event":"stopped"}    {"event":"error","message":..}
/// "alive" is a join (refuted=false) or a refuted suspicion (refuted=true).
///
/// Reads commands from standard input, one per line:
///   leave          leave gracefully (the leave is sent to every member,
///                  then a short drain) and exit
///   stats          print the counters
///   members        print every known member and its state
///   join ADDR:PORT join (more) members
///   meta STRING    replace this member's metadata
///
/// SIGTERM and SIGINT leave gracefully too; SIGKILL is a crash. While no
/// other member is known, the --join seeds are retried every second.
#[derive(Debug, Parser)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// This member's name, unique in the cluster (1 to 255 octets).
    #[arg(long)]
    name: String,
    /// Address and port for both UDP and TCP. Port 7946 (MetalLB's) if
    /// omitted.
    #[arg(long, default_value = "0.0.0.0:7946", value_parser = parse_addr)]
    bind: SocketAddr,
    /// Address (and port) other members reach this one at; default: the
    /// bind address, which must then not be 0.0.0.0 or ::.
    #[arg(long, value_parser = parse_addr)]
    advertise: Option<SocketAddr>,
    /// A member to join, ADDR[:PORT] (port 7946 if omitted); repeat for
    /// more seeds.
    #[arg(long = "join", value_parser = parse_addr)]
    seeds: Vec<SocketAddr>,
    /// File of 32-byte AES-256 keys, one per line, each in hex (64 digits)
    /// or base64 (44 characters); blank lines and lines starting with #
    /// are skipped. The first key is primary (encrypts); the others are
    /// accepted when decrypting (key rotation).
    #[arg(
        long,
        required_unless_present = "plaintext",
        conflicts_with = "plaintext"
    )]
    key_file: Option<PathBuf>,
    /// No encryption or authentication (lab use only). Plaintext members
    /// and encrypted ones ignore each other.
    #[arg(long)]
    plaintext: bool,
    /// Metadata other members see (at most 512 octets).
    #[arg(long, default_value = "")]
    meta: String,
    /// Timing profile: lan = 100 ms probes, 250 ms to 1 s suspicion.
    #[arg(long, value_enum, default_value_t = Profile::Lan)]
    profile: Profile,
    /// Log filter for standard error (tracing's env-filter syntax).
    #[arg(long, default_value = "info")]
    log_level: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Profile {
    /// The default LAN profile (`memberlist::Config::lan`).
    Lan,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&args.log_level))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("tokio runtime: {e}")),
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> ExitCode {
    emit(json!({"event": "error", "message": message}));
    eprintln!("ferrolb-memberlist: {message}");
    ExitCode::FAILURE
}

async fn run(args: Args) -> Result<(), String> {
    let security = if args.plaintext {
        Security::Plaintext
    } else {
        let path = args.key_file.as_ref().ok_or("--key-file or --plaintext")?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--key-file {}: {e}", path.display()))?;
        Security::Encrypted(
            speaker::source::keyring::parse(&text).map_err(|e| format!("--key-file: {e}"))?,
        )
    };
    let name = Name::new(&args.name).map_err(|e| format!("--name: {e}"))?;
    let advertise = args.advertise.unwrap_or(args.bind);
    let mut swim = match args.profile {
        Profile::Lan => memberlist::Config::lan(name, advertise, security),
    };
    swim.meta = Meta::new(args.meta.into_bytes()).map_err(|e| format!("--meta: {e}"))?;
    // Seconds since the epoch: a restarted member is taken back at once
    // instead of first refuting its recorded death.
    swim.incarnation = u32::try_from(unix_ms() / 1000).unwrap_or(u32::MAX);
    // The timing profile in use, for tests and labs to derive their bounds.
    let (probe_interval, probe_timeout) = (swim.probe_interval, swim.probe_timeout);
    let (suspicion_min, suspicion_max) = (swim.suspicion_min, swim.suspicion_max);
    let max_health_multiplier = swim.max_health_multiplier;
    let mut config = Config::new(swim, args.bind);
    config.seeds.clone_from(&args.seeds);
    let (ml, mut events) = Memberlist::start(config).map_err(|e| format!("start: {e}"))?;
    emit(json!({
        "event": "started",
        "name": args.name,
        "addr": ml.local_addr().to_string(),
        "probe_interval_ms": ms(probe_interval),
        "probe_timeout_ms": ms(probe_timeout),
        "suspicion_min_ms": ms(suspicion_min),
        "suspicion_max_ms": ms(suspicion_max),
        "max_health_multiplier": max_health_multiplier,
        "ts_ms": unix_ms(),
    }));

    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut rejoin = tokio::time::interval(Duration::from_secs(1));
    rejoin.tick().await;
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => emit(event_json(&ev)),
                None => break,
            },
            line = stdin.next_line(), if stdin_open => match line {
                Ok(Some(line)) => {
                    if command(&ml, line.trim()).await {
                        break;
                    }
                }
                // Without stdin, run until a signal.
                _ => stdin_open = false,
            },
            _ = rejoin.tick(), if !args.seeds.is_empty() => {
                let alone = ml.members().await.is_ok_and(|m| {
                    m.iter().skip(1).all(|m| !matches!(m.state, State::Alive | State::Suspect))
                });
                if alone {
                    let _ = ml.join(args.seeds.iter().copied());
                }
            }
            _ = sigterm.recv() => {
                ml.leave().await;
                break;
            }
            _ = sigint.recv() => {
                ml.leave().await;
                break;
            }
        }
    }
    // Events of the drain (none expected, but keep the stream complete).
    while let Ok(ev) = events.try_recv() {
        emit(event_json(&ev));
    }
    emit(json!({"event": "stopped", "ts_ms": unix_ms()}));
    Ok(())
}

/// Runs one stdin command; true when the member has left.
async fn command(ml: &Memberlist, line: &str) -> bool {
    let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
    match cmd {
        "" => {}
        "leave" => {
            ml.leave().await;
            return true;
        }
        "stats" => match ml.stats().await {
            Ok(s) => emit(stats_json(&s)),
            Err(e) => emit(json!({"event": "error", "message": e.to_string()})),
        },
        "members" => match ml.members().await {
            Ok(ms) => emit(json!({
                "event": "members",
                "ts_ms": unix_ms(),
                "members": ms.iter().map(member_json).collect::<Vec<_>>(),
            })),
            Err(e) => emit(json!({"event": "error", "message": e.to_string()})),
        },
        "join" => match parse_addr(arg.trim()) {
            Ok(a) => {
                let _ = ml.join([a]);
            }
            Err(e) => emit(json!({"event": "error", "message": e})),
        },
        "meta" => match Meta::new(arg.as_bytes().to_vec()) {
            Ok(m) => {
                let _ = ml.set_meta(m);
            }
            Err(e) => emit(json!({"event": "error", "message": e.to_string()})),
        },
        other => emit(json!({"event": "error", "message": format!("unknown command {other:?}")})),
    }
    false
}

fn emit(v: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn unix_ms() -> u64 {
    ms_since_epoch(SystemTime::now())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn ms_since_epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn member_json(m: &Member) -> Value {
    json!({
        "name": m.name.as_str(),
        "addr": m.addr.to_string(),
        "state": m.state.to_string(),
        "incarnation": m.incarnation,
        "meta": String::from_utf8_lossy(m.meta.as_bytes()),
    })
}

fn event_json(ev: &MemberEvent) -> Value {
    let (kind, refuted) = match &ev.event {
        Event::Up(_) => ("alive", Some(false)),
        Event::Alive(_) => ("alive", Some(true)),
        Event::Suspect(_) => ("suspect", None),
        Event::Down(_) => ("dead", None),
        Event::Left(_) => ("left", None),
        Event::Updated(_) => ("updated", None),
    };
    let m = ev.event.member();
    let mut v = json!({
        "event": kind,
        "member": m.name.as_str(),
        "addr": m.addr.to_string(),
        "incarnation": m.incarnation,
        "meta": String::from_utf8_lossy(m.meta.as_bytes()),
        "ts_ms": ms_since_epoch(ev.at),
    });
    if let Some(r) = refuted {
        v["refuted"] = json!(r);
    }
    v
}

fn stats_json(s: &Stats) -> Value {
    let c = &s.core;
    let io = &s.io;
    json!({
        "event": "stats",
        "ts_ms": unix_ms(),
        "members_up": s.members_up,
        "health_multiplier": s.health_multiplier,
        "packets_received": c.packets_received,
        "packets_sent": c.packets_sent,
        "streams_received": c.streams_received,
        "streams_sent": c.streams_sent,
        "auth_failures": c.auth_failures,
        "unknown_key": c.unknown_key,
        "mode_mismatch": c.mode_mismatch,
        "envelope_errors": c.envelope_errors,
        "decode_errors": c.decode_errors,
        "misdirected": c.misdirected,
        "probes": c.probes,
        "probe_failures": c.probe_failures,
        "suspicions": c.suspicions,
        "refutations": c.refutations,
        "late_timers": c.late_timers,
        "stale_timers": c.stale_timers,
        "udp_send_errors": io.udp_send_errors,
        "udp_recv_errors": io.udp_recv_errors,
        "streams_accepted": io.streams_accepted,
        "streams_opened": io.streams_opened,
        "stream_connect_failures": io.stream_connect_failures,
        "stream_timeouts": io.stream_timeouts,
        "stream_io_errors": io.stream_io_errors,
        "stream_oversize": io.stream_oversize,
        "streams_refused": io.streams_refused,
    })
}

/// ADDR:PORT, or ADDR alone for port 7946.
fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let ip: std::net::IpAddr = s
        .parse()
        .map_err(|_| format!("{s:?} is not ADDR or ADDR:PORT"))?;
    Ok(SocketAddr::new(ip, 7946))
}
