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
use memberlist::{Event, Member, Meta, Name, Security};
use serde_json::{Value, json};
use speaker::driver::memberlist::{Config, MemberEvent, Memberlist, Stats};
use speaker::source::keyring;
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
///   {"event":"isolated"}   {"event":"connected"}
///   {"event":"stats",...}  {"event":"members","members":[...]}
///   {"event":"stopped"}    {"event":"error","message":..}
/// "alive" is a join (refuted=false) or a refuted suspicion (refuted=true).
/// "isolated": this member has seeds but no live member, and a join went
/// unanswered or its last member was lost (a blocked network, a wrong key);
/// "connected" ends it.
///
/// Reads commands from standard input, one per line:
///   leave          leave gracefully (the leave is sent to every member,
///                  then a short drain) and exit
///   stats          print the counters
///   members        print every known member and its state
///   join ADDR:PORT add a seed and join it
///   meta STRING    replace this member's metadata
///
/// SIGTERM and SIGINT leave gracefully too; SIGKILL is a crash. Seeds
/// without a live member are joined again with backoff (0.5 s doubling to
/// 10 s, jittered), for as long as the member runs.
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
    /// accepted when decrypting (key rotation). Re-read every
    /// --key-reload-ms; a changed file replaces the keyring.
    #[arg(
        long,
        required_unless_present = "plaintext",
        conflicts_with = "plaintext"
    )]
    key_file: Option<PathBuf>,
    /// How often the key file is re-read, in milliseconds (at least 100).
    #[arg(long, default_value_t = 10_000, requires = "key_file")]
    key_reload_ms: u64,
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
    /// Most members remembered; new names beyond it replace the oldest
    /// dead or left member, or are dropped (stats: members_rejected).
    #[arg(long, default_value_t = 5000)]
    max_members: usize,
    /// Initial incarnation. No clock is needed: a restarted member learns
    /// its previous incarnation from the others and outbids it. Set it to
    /// test exactly that (a restart "earlier" than its previous life).
    #[arg(long, default_value_t = 0)]
    incarnation: u32,
    #[command(flatten)]
    log: shell::LogArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Profile {
    /// The default LAN profile (`memberlist::Config::lan`).
    Lan,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    let program = async move {
        // Errors are an event on standard output too, for the tools that
        // drive this program.
        run(args).await.inspect_err(|message| {
            emit(json!({"event": "error", "message": message}));
        })
    };
    shell::main(
        "ferrolb-memberlist",
        shell::Runtime::CurrentThread,
        &log,
        program,
    )
}

async fn run(args: Args) -> Result<(), String> {
    let security = if args.plaintext {
        Security::Plaintext
    } else {
        let path = args.key_file.as_ref().ok_or("--key-file or --plaintext")?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--key-file {}: {e}", path.display()))?;
        Security::Encrypted(keyring::parse(&text).map_err(|e| format!("--key-file: {e}"))?)
    };
    let name = Name::new(&args.name).map_err(|e| format!("--name: {e}"))?;
    let advertise = args.advertise.unwrap_or(args.bind);
    let mut swim = match args.profile {
        Profile::Lan => memberlist::Config::lan(name, advertise, security),
    };
    swim.meta = Meta::new(args.meta.into_bytes()).map_err(|e| format!("--meta: {e}"))?;
    swim.incarnation = args.incarnation;
    swim.max_members = args.max_members;
    // The timing profile in use, for tests and labs to derive their bounds.
    let (probe_interval, probe_timeout) = (swim.probe_interval, swim.probe_timeout);
    let (suspicion_min, suspicion_max) = (swim.suspicion_min, swim.suspicion_max);
    let max_health_multiplier = swim.max_health_multiplier;
    let mut config = Config::new(swim, args.bind);
    config.seeds.clone_from(&args.seeds);
    let (ml, mut events) = Memberlist::start(config).map_err(|e| format!("start: {e}"))?;
    if let Some(path) = &args.key_file {
        let every = Duration::from_millis(args.key_reload_ms.max(100));
        let handle = ml.clone();
        tokio::spawn(keyring::watch(path.clone(), every, move |ring| {
            handle.set_keyring(ring).is_ok()
        }));
    }
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
    let mut seeds = args.seeds.clone();
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => emit(event_json(&ev)),
                None => break,
            },
            line = stdin.next_line(), if stdin_open => match line {
                Ok(Some(line)) => {
                    if command(&ml, &mut seeds, line.trim()).await {
                        break;
                    }
                }
                // Without stdin, run until a signal.
                _ => stdin_open = false,
            },
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
    while let Some(ev) = events.try_recv() {
        emit(event_json(&ev));
    }
    emit(json!({"event": "stopped", "ts_ms": unix_ms()}));
    Ok(())
}

/// Runs one stdin command; true when the member has left.
async fn command(ml: &Memberlist, seeds: &mut Vec<SocketAddr>, line: &str) -> bool {
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
                // The core takes the whole set of seeds each time.
                if !seeds.contains(&a) {
                    seeds.push(a);
                }
                let _ = ml.join(seeds.iter().copied());
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
        Event::Isolated => ("isolated", None),
        Event::Connected => ("connected", None),
    };
    let Some(m) = ev.event.member() else {
        return json!({"event": kind, "ts_ms": ms_since_epoch(ev.at)});
    };
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
        "members_known": s.members_known,
        "isolated": s.isolated,
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
        "rejoins": c.rejoins,
        "isolations": c.isolations,
        "members_rejected": c.members_rejected,
        "members_evicted": c.members_evicted,
        "udp_send_errors": io.udp_send_errors,
        "udp_recv_errors": io.udp_recv_errors,
        "streams_accepted": io.streams_accepted,
        "streams_opened": io.streams_opened,
        "stream_connect_failures": io.stream_connect_failures,
        "stream_timeouts": io.stream_timeouts,
        "stream_io_errors": io.stream_io_errors,
        "stream_oversize": io.stream_oversize,
        "streams_refused": io.streams_refused,
        "streams_refused_source": io.streams_refused_source,
        "streams_rejected": io.streams_rejected,
        "streams_dropped": io.streams_dropped,
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
