//! ferrolb-bgp: announce a set of routes to BGP peers with ferrolb's own
//! BGP speaker, without Kubernetes. For labs, interop tests and
//! benchmarks; the speaker proper builds on the same driver.
// The `Args` doc comment is clap's --help text, not rustdoc: its brackets
// are command syntax, not links.
#![allow(rustdoc::broken_intra_doc_links)]

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow_lite::{Context, Result, bail};
use api::model::Md5Key;
use bgp::session::{
    Config, ConnectMode, DownReason, GracefulRestartConfig, IpPrefix, PeerAs, RouteAttrs, StopMode,
};
use bgp::wire::{Community, HoldTime, LargeCommunity, Origin};
use clap::{Parser, ValueEnum};
use serde_json::json;
use speaker::driver::bgp::{
    BgpSpeaker, CLOSE_TIMEOUT, ConnectOptions, MAX_MD5_KEY, PeerClosed, PeerConfig, PeerEvent,
    PeerStatus,
};
use tokio::signal::unix::{SignalKind, signal};

/// Announce routes to BGP peers with ferrolb's BGP speaker.
///
/// Prints one JSON object per session event on standard output
/// ({"event":"state"|"established"|"down", ...}), and on exit one
/// {"event":"closed","peer":...,"flushed":BOOL,"close_timeout_ms":N} per
/// peer: the sessions close concurrently, each flushing its last message
/// for at most N ms. Reads commands from standard input, one per line:
///   announce ROUTE     add or change a route (ROUTE syntax below)
///   withdraw PREFIX    remove a route
///   announce-file PATH add the routes of a file (one ROUTE per line)
///   withdraw-all       remove every route
///   stop [MESSAGE]     Cease/Administrative Shutdown with MESSAGE, exit
///   stop-preserve      close without NOTIFICATION (graceful restart), exit
///   stats              print each peer's state and counters
///
/// ROUTE is PREFIX[,key=value...] with keys med, local-pref, community
/// (ASN:VALUE or a well-known name such as no-export), large-community
/// (A:B:C), next-hop, origin (igp, egp, incomplete); community and
/// large-community may repeat. Example: 192.0.2.10/32,community=64512:100,med=10
#[derive(Debug, Parser)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// Our AS number.
    #[arg(long)]
    local_as: u32,
    /// Our BGP Identifier (router ID).
    #[arg(long)]
    router_id: Ipv4Addr,
    /// Peer address, optionally with a port (default 179); repeat for more
    /// peers.
    #[arg(long = "peer", required = true)]
    peers: Vec<String>,
    /// The peers' AS: a number, "internal" (ours) or "external" (any other).
    #[arg(long, default_value = "external")]
    peer_as: String,
    /// Proposed hold time in seconds (0, or 3 and more).
    #[arg(long, default_value_t = 90)]
    hold_time: u16,
    /// Keepalive interval in seconds (default: a third of the hold time).
    #[arg(long)]
    keepalive: Option<u64>,
    /// Seconds between outbound connection attempts.
    #[arg(long, default_value_t = 5)]
    connect_retry: u64,
    /// Who opens the TCP connection.
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    mode: Mode,
    /// Address (and port) to accept connections on, e.g. 0.0.0.0:179.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Source address of outbound connections.
    #[arg(long)]
    source: Option<IpAddr>,
    /// IP TTL of our packets (1 for directly connected eBGP; more for
    /// multihop).
    #[arg(long)]
    ttl: Option<u32>,
    /// GTSM (RFC 5082): accept only packets with TTL 255 from the peer.
    #[arg(long)]
    gtsm: bool,
    /// TCP MD5 signature key (RFC 2385). Given as a flag, the key is on
    /// the command line, which every local user can read (`ps`,
    /// /proc/PID/cmdline): prefer --md5-key-file or the environment
    /// variable, which are not.
    #[arg(
        long,
        env = "FERROLB_BGP_MD5_KEY",
        hide_env_values = true,
        value_parser = md5_key_arg,
        conflicts_with = "md5_key_file"
    )]
    md5_key: Option<Md5Key>,
    /// Read the TCP MD5 signature key from this file (its whole content,
    /// less one trailing newline), e.g. a mounted Secret.
    #[arg(long)]
    md5_key_file: Option<PathBuf>,
    /// Enable graceful restart with this restart time in seconds.
    #[arg(long)]
    graceful_restart: Option<u64>,
    /// With graceful restart: set the Restart State bit (we are coming back
    /// after a restart; the peer keeps our stale routes until End-of-RIB).
    #[arg(long)]
    restarting: bool,
    /// Offer IPv4 routes with IPv6 next hops (RFC 8950).
    #[arg(long)]
    extended_next_hop: bool,
    /// SendHoldTime in seconds (RFC 9687): give a peer up when what we send
    /// has not moved for this long. Default: 8 minutes or twice the hold
    /// time, whichever is larger.
    #[arg(long)]
    send_hold_time: Option<u64>,
    /// Next hop for IPv4 routes (default: the local transport address).
    #[arg(long)]
    next_hop_v4: Option<Ipv4Addr>,
    /// Global next hop for IPv6 routes (default: the local IPv6 transport
    /// address, or the IPv4-mapped IPv4 one).
    #[arg(long)]
    next_hop_v6: Option<Ipv6Addr>,
    /// Link-local next hop to add to IPv6 routes (single-hop peers).
    #[arg(long)]
    link_local: Option<Ipv6Addr>,
    /// Negotiate IPv4 unicast only, without multiprotocol capabilities.
    #[arg(long)]
    disable_mp: bool,
    /// A route to announce from the start (ROUTE syntax above); repeat.
    #[arg(long = "route")]
    routes: Vec<String>,
    /// A file with one ROUTE per line to announce from the start.
    #[arg(long)]
    routes_file: Option<PathBuf>,
    /// On SIGTERM/SIGINT, close without NOTIFICATION so graceful-restart
    /// peers keep the routes (default: Cease/Administrative Shutdown).
    #[arg(long)]
    preserve_on_exit: bool,
    #[command(flatten)]
    log: shell::LogArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// Connect and accept.
    Both,
    /// Only connect.
    Active,
    /// Only accept.
    Passive,
}

/// A tiny error type for main: a message with context.
mod anyhow_lite {
    use std::fmt;

    #[derive(Debug)]
    pub(crate) struct Error(pub(crate) String);

    impl fmt::Display for Error {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    pub(crate) type Result<T> = std::result::Result<T, Error>;

    pub(crate) trait Context<T> {
        fn context(self, what: impl fmt::Display) -> Result<T>;
    }

    impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
        fn context(self, what: impl fmt::Display) -> Result<T> {
            self.map_err(|e| Error(format!("{what}: {e}")))
        }
    }

    macro_rules! bail {
        ($($t:tt)*) => { return Err($crate::anyhow_lite::Error(format!($($t)*))) };
    }
    pub(crate) use bail;
}

/// Parses `--md5-key` (or its environment variable): 1 to 80 octets.
fn md5_key_arg(s: &str) -> std::result::Result<Md5Key, String> {
    if s.is_empty() || s.len() > MAX_MD5_KEY {
        return Err(format!(
            "a TCP MD5 key must be 1..={MAX_MD5_KEY} octets, not {}",
            s.len()
        ));
    }
    Ok(Md5Key::from(s.as_bytes()))
}

/// The key in a `--md5-key-file`: its content less one trailing newline
/// (`\n` or `\r\n`, as editors and `echo` leave), 1 to 80 octets.
fn md5_key_file(mut raw: Vec<u8>) -> std::result::Result<Md5Key, String> {
    if raw.ends_with(b"\n") {
        raw.pop();
        if raw.ends_with(b"\r") {
            raw.pop();
        }
    }
    if raw.is_empty() || raw.len() > MAX_MD5_KEY {
        return Err(format!(
            "a TCP MD5 key must be 1..={MAX_MD5_KEY} octets, not {}",
            raw.len()
        ));
    }
    Ok(Md5Key::from(raw))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    shell::main(
        "ferrolb-bgp",
        shell::Runtime::CurrentThread,
        &log,
        run(args),
    )
}

async fn run(args: Args) -> Result<()> {
    let peer_as = match args.peer_as.as_str() {
        "internal" => PeerAs::Internal,
        "external" => PeerAs::External,
        n => PeerAs::Exact(n.parse().context(format!("--peer-as {n:?}"))?),
    };
    let Some(hold_time) = HoldTime::from_secs(args.hold_time) else {
        bail!("--hold-time must be 0 or at least 3");
    };
    let mut session = Config::new(args.local_as, peer_as, args.router_id);
    session.hold_time = hold_time;
    session.keepalive = args.keepalive.map(Duration::from_secs);
    session.connect_retry = Duration::from_secs(args.connect_retry.max(1));
    session.mode = match args.mode {
        Mode::Both => ConnectMode::Both,
        Mode::Active => ConnectMode::Active,
        Mode::Passive => ConnectMode::Passive,
    };
    session.disable_mp = args.disable_mp;
    session.extended_next_hop = args.extended_next_hop;
    session.next_hop_v4 = args.next_hop_v4;
    session.next_hop_v6 = args.next_hop_v6;
    session.link_local_v6 = args.link_local;
    session.send_hold_time = args.send_hold_time.map(Duration::from_secs);
    session.graceful_restart = args.graceful_restart.map(|secs| GracefulRestartConfig {
        restart_time: Duration::from_secs(secs),
        restarting: args.restarting,
        forwarding_preserved: true,
    });
    let md5_key = match (&args.md5_key, &args.md5_key_file) {
        (Some(key), _) => Some(key.clone()),
        (None, Some(path)) => {
            let raw = std::fs::read(path).context(format!("--md5-key-file {}", path.display()))?;
            Some(md5_key_file(raw).context(format!("--md5-key-file {}", path.display()))?)
        }
        (None, None) => None,
    };
    let connect = ConnectOptions {
        bind: args.source,
        ttl: args.ttl,
        min_ttl: args.gtsm.then_some(255),
        md5_key,
        timeout: Some(Duration::from_secs(10)),
        ..ConnectOptions::default()
    };

    let mut routes = BTreeMap::new();
    for spec in &args.routes {
        let (p, a) = parse_route(spec)?;
        routes.insert(p, a);
    }
    if let Some(path) = &args.routes_file {
        load_routes(path, &mut routes)?;
    }

    let (mut speaker, mut events) = BgpSpeaker::new();
    if let Some(addr) = args.listen {
        let bound = speaker
            .listen(addr)
            .context(format!("listening on {addr}"))?;
        emit(&json!({"event": "listening", "address": bound.to_string()}));
    }
    let mut names = Vec::new();
    for peer in &args.peers {
        let address = parse_peer(peer)?;
        let name = address.to_string();
        let config = PeerConfig {
            session: session.clone(),
            address,
            connect: connect.clone(),
        };
        speaker
            .set_peer(&name, config)
            .await
            .context(format!("peer {name}"))?;
        speaker.set_routes(&name, routes.clone());
        names.push(name);
    }

    // Commands are read on a thread of their own: tokio's stdin reads on
    // its blocking pool, and dropping the runtime waits for a read in
    // progress, so an exit after SIGTERM would wait for the next line.
    let (line_tx, mut stdin) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin_open = true;
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let exit_mode = if args.preserve_on_exit {
        StopMode::PreserveForwarding
    } else {
        StopMode::Shutdown(String::new())
    };
    loop {
        tokio::select! {
            Some(ev) = events.recv() => emit(&event_json(&ev)),
            line = stdin.recv(), if stdin_open => match line {
                Some(line) => {
                    let line = line.trim();
                    if let Some(spec) = line.strip_prefix("announce ") {
                        match parse_route(spec.trim()) {
                            Ok((p, a)) => {
                                routes.insert(p, Arc::clone(&a));
                                names.iter().for_each(|n| speaker.update_routes(n, vec![(p, Some(Arc::clone(&a)))]));
                            }
                            Err(e) => emit(&json!({"event": "error", "message": e.to_string()})),
                        }
                    } else if let Some(p) = line.strip_prefix("withdraw ") {
                        match p.trim().parse::<IpPrefix>() {
                            Ok(p) => {
                                routes.remove(&p);
                                names.iter().for_each(|n| speaker.update_routes(n, vec![(p, None)]));
                            }
                            Err(e) => emit(&json!({"event": "error", "message": e.to_string()})),
                        }
                    } else if let Some(path) = line.strip_prefix("announce-file ") {
                        match load_routes(std::path::Path::new(path.trim()), &mut routes) {
                            Ok(()) => names.iter().for_each(|n| speaker.set_routes(n, routes.clone())),
                            Err(e) => emit(&json!({"event": "error", "message": e.to_string()})),
                        }
                    } else if line == "withdraw-all" {
                        routes.clear();
                        names.iter().for_each(|n| speaker.set_routes(n, routes.clone()));
                    } else if line == "stats" {
                        for n in &names {
                            if let Some(st) = speaker.status(n) {
                                emit(&status_json(n, &st));
                            }
                        }
                    } else if line == "stop-preserve" {
                        emit_closed(speaker.shutdown(StopMode::PreserveForwarding).await);
                        return Ok(());
                    } else if line == "stop" || line.starts_with("stop ") {
                        let msg = line.strip_prefix("stop").unwrap_or_default().trim().to_owned();
                        emit_closed(speaker.shutdown(StopMode::Shutdown(msg)).await);
                        drain_events(&mut events);
                        return Ok(());
                    } else if !line.is_empty() {
                        emit(&json!({"event": "error", "message": format!("unknown command {line:?}")}));
                    }
                }
                // End of input: keep running until a signal.
                None => stdin_open = false,
            },
            _ = term.recv() => {
                emit_closed(speaker.shutdown(exit_mode).await);
                drain_events(&mut events);
                return Ok(());
            }
            _ = int.recv() => {
                emit_closed(speaker.shutdown(exit_mode).await);
                drain_events(&mut events);
                return Ok(());
            }
        }
    }
}

/// Adds the routes of a file, one ROUTE per line (# comments allowed).
fn load_routes(
    path: &std::path::Path,
    routes: &mut BTreeMap<IpPrefix, Arc<RouteAttrs>>,
) -> Result<()> {
    let text = std::fs::read_to_string(path).context(format!("reading {}", path.display()))?;
    // Routes with identical attributes share one allocation.
    let mut shared: HashSet<Arc<RouteAttrs>> = routes.values().cloned().collect();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (p, a) = parse_route(line)?;
        let a = match shared.get(&a) {
            Some(k) => Arc::clone(k),
            None => {
                shared.insert(Arc::clone(&a));
                a
            }
        };
        routes.insert(p, a);
    }
    Ok(())
}

fn drain_events(events: &mut tokio::sync::mpsc::UnboundedReceiver<PeerEvent>) {
    while let Ok(ev) = events.try_recv() {
        emit(&event_json(&ev));
    }
}

/// One `closed` event per peer after a shutdown, with the per-peer flush
/// bound the driver applied.
fn emit_closed(closed: Vec<PeerClosed>) {
    for c in closed {
        emit(&json!({
            "event": "closed",
            "peer": c.name,
            "flushed": c.flushed,
            "close_timeout_ms": CLOSE_TIMEOUT.as_millis(),
        }));
    }
}

fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn event_json(ev: &PeerEvent) -> serde_json::Value {
    match ev {
        PeerEvent::StateChanged { peer, from, to } => {
            json!({"event": "state", "peer": peer, "from": from.to_string(), "to": to.to_string()})
        }
        PeerEvent::Established {
            peer,
            negotiated: n,
        } => json!({
            "event": "established",
            "peer": peer,
            "remote_as": n.remote_as,
            "remote_id": n.remote_id.to_string(),
            "hold_time": n.hold_time.as_secs(),
            "families": n.families.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "local": n.local.to_string(),
            "remote": n.remote.to_string(),
        }),
        PeerEvent::Down { peer, reason } => {
            let reason = match reason {
                DownReason::NotificationSent(n) => format!("sent {n}"),
                DownReason::NotificationReceived(n) => format!("received {n}"),
                DownReason::TransportClosed => "transport closed".into(),
                DownReason::Stopped => "stopped".into(),
            };
            json!({"event": "down", "peer": peer, "reason": reason})
        }
    }
}

fn status_json(peer: &str, st: &PeerStatus) -> serde_json::Value {
    let s = &st.stats;
    json!({
        "event": "stats",
        "peer": peer,
        "state": st.state.map(|s| s.to_string()),
        "advertised": st.advertised,
        "unsent_bytes": st.unsent,
        "send_blocked": st.send_blocked,
        "opens_sent": s.opens_sent,
        "keepalives_sent": s.keepalives_sent,
        "messages_received": s.messages_received,
        "updates_sent": s.updates_sent,
        "updates_received": s.updates_received,
        "prefixes_announced": s.prefixes_announced,
        "prefixes_withdrawn": s.prefixes_withdrawn,
        "prefixes_received": s.prefixes_received,
        "withdrawals_received": s.withdrawals_received,
        "treat_as_withdraw": s.treat_as_withdraw,
        "prefixes_skipped": s.prefixes_skipped,
        "route_refreshes_received": s.route_refreshes_received,
        "notifications_sent": s.notifications_sent,
        "send_hold_expired": s.send_hold_expired,
        "notifications_received": s.notifications_received,
        "established": s.established,
    })
}

fn parse_peer(s: &str) -> Result<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let ip: IpAddr = s.parse().context(format!("--peer {s:?}"))?;
    Ok(SocketAddr::new(ip, 179))
}

fn parse_route(spec: &str) -> Result<(IpPrefix, Arc<RouteAttrs>)> {
    let mut parts = spec.split(',');
    let prefix_text = parts.next().unwrap_or_default().trim();
    let prefix: IpPrefix = prefix_text.parse().context(format!("route {spec:?}"))?;
    let mut attrs = RouteAttrs::default();
    for kv in parts {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("route {spec:?}: {kv:?} is not key=value")
        };
        let bad = |e: String| anyhow_lite::Error(format!("route {spec:?}: {k}={v}: {e}"));
        match k.trim() {
            "med" => attrs.med = Some(v.parse().map_err(|e| bad(format!("{e}")))?),
            "local-pref" => attrs.local_pref = Some(v.parse().map_err(|e| bad(format!("{e}")))?),
            "next-hop" => attrs.next_hop = Some(v.parse().map_err(|e| bad(format!("{e}")))?),
            "origin" => {
                attrs.origin = Some(match v {
                    "igp" => Origin::Igp,
                    "egp" => Origin::Egp,
                    "incomplete" => Origin::Incomplete,
                    _ => return Err(bad("origin is igp, egp or incomplete".into())),
                })
            }
            "community" => attrs.communities.push(parse_community(v).map_err(bad)?),
            "large-community" => attrs.large_communities.push(parse_large(v).map_err(bad)?),
            other => bail!("route {spec:?}: unknown key {other:?}"),
        }
    }
    Ok((prefix, Arc::new(attrs)))
}

fn parse_community(v: &str) -> std::result::Result<Community, String> {
    let named = match v {
        "no-export" => Some(Community::NO_EXPORT),
        "no-advertise" => Some(Community::NO_ADVERTISE),
        "no-export-subconfed" => Some(Community::NO_EXPORT_SUBCONFED),
        "nopeer" => Some(Community::NOPEER),
        "graceful-shutdown" => Some(Community::GRACEFUL_SHUTDOWN),
        "blackhole" => Some(Community::BLACKHOLE),
        _ => None,
    };
    if let Some(c) = named {
        return Ok(c);
    }
    let (a, b) = v
        .split_once(':')
        .ok_or("community is ASN:VALUE or a well-known name")?;
    Ok(Community::new(
        a.parse().map_err(|e| format!("{e}"))?,
        b.parse().map_err(|e| format!("{e}"))?,
    ))
}

fn parse_large(v: &str) -> std::result::Result<LargeCommunity, String> {
    let parts: Vec<&str> = v.split(':').collect();
    let [a, b, c] = parts[..] else {
        return Err("large community is A:B:C".into());
    };
    let n = |s: &str| s.parse::<u32>().map_err(|e| format!("{e}"));
    Ok(LargeCommunity {
        global_admin: n(a)?,
        local_data1: n(b)?,
        local_data2: n(c)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_keys_come_from_a_file_and_never_show_in_debug() {
        assert_eq!(
            md5_key_file(b"s3cret-key\n".to_vec()).unwrap().expose(),
            b"s3cret-key"
        );
        assert_eq!(
            md5_key_file(b"s3cret-key\r\n".to_vec()).unwrap().expose(),
            b"s3cret-key"
        );
        assert_eq!(
            md5_key_file(b"a b\n\n".to_vec()).unwrap().expose(),
            b"a b\n"
        );
        assert!(md5_key_file(b"\n".to_vec()).is_err());
        assert!(md5_key_file(vec![b'k'; 81]).is_err());
        assert!(md5_key_arg("").is_err());

        let args = Args::try_parse_from([
            "ferrolb-bgp",
            "--local-as",
            "64512",
            "--router-id",
            "10.0.0.2",
            "--peer",
            "10.0.0.1",
            "--md5-key",
            "s3cret-key",
        ])
        .unwrap();
        assert_eq!(args.md5_key.as_deref(), Some(&b"s3cret-key"[..]));
        let shown = format!("{args:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            Args::try_parse_from([
                "ferrolb-bgp",
                "--local-as",
                "1",
                "--router-id",
                "10.0.0.2",
                "--peer",
                "10.0.0.1",
                "--md5-key",
                "a",
                "--md5-key-file",
                "/dev/null",
            ])
            .is_err(),
            "one key source"
        );
    }
}
