//! speaker: ferrolb's per-node program. Reads the cluster objects from a
//! source (the Kubernetes API, or a directory of YAML files), decides what
//! this node announces, and runs the BGP sessions and layer 2 responders
//! that do it.
// The `Args` doc comment is clap's --help text, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bgp::session::StopMode;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use memberlist::{Name, Security};
use shell::task::{Spawner, Supervisor};
use speaker::driver::l2::L2Config;
use speaker::driver::memberlist::{Config as MemberlistConfig, Events, Memberlist};
use speaker::metrics;
use speaker::publish;
use speaker::run::{self, Options};
use speaker::source::{Reload, file, k8s, keyring};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

/// ferrolb speaker: makes LoadBalancer service IPs reachable from this
/// node, over BGP and layer 2 (ARP/NDP), as MetalLB's speaker does.
///
/// Kubernetes mode (the default, as a DaemonSet with hostNetwork): watches
/// Nodes, Services, EndpointSlices, and in --namespace the metallb.io
/// objects, Secrets and the speaker Pods (memberlist seeds); writes
/// ServiceL2Status / ServiceBGPStatus objects, a ConfigurationState
/// speaker-<node> and nodeAssigned events. The API is found from
/// --kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster service
/// account.
///
/// File mode (standalone, no Kubernetes): --config-dir names a directory of
/// YAML files (*.yaml, *.yml, *.json) holding the metallb.io objects
/// (IPAddressPool, BGPPeer, BGPAdvertisement, L2Advertisement, Community,
/// BFDProfile) and the v1 Nodes, Services (with status.loadBalancer.ingress),
/// Secrets and discovery.k8s.io/v1 EndpointSlices. It is re-read every
/// --reload-interval-ms; a bad configuration is logged (object and field)
/// and counted, and the last good one stays in force.
///
/// A BGPPeer with a bfdProfile gets a BFD session (UDP 3784, or 4784 with
/// ebgpMultiHop) to its address; its BGP session waits for BFD Up and is
/// torn down (Cease / BFD Down) when BFD goes Down (see
/// --bgp-without-bfd-up).
///
/// SIGTERM or SIGINT: leave memberlist at once, end BGP sessions (Cease /
/// Administrative Shutdown, or --preserve-bgp-on-exit), stop answering ARP.
#[derive(Debug, Parser)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// This node's name, as in the Node objects.
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Directory of YAML configuration: run in file mode, without
    /// Kubernetes.
    #[arg(long, conflicts_with_all = ["kubeconfig", "pod_name"])]
    config_dir: Option<PathBuf>,
    /// Kubernetes mode: kubeconfig file (default: $KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubernetes mode: the namespace of the metallb.io objects, Secrets,
    /// speaker Pods and status objects.
    #[arg(long, env = "METALLB_NAMESPACE", default_value = "metallb-system")]
    namespace: String,
    /// Kubernetes mode: this speaker's Pod name (downward API), owner of
    /// its status objects so they go with the Pod.
    #[arg(long, env = "POD_NAME", requires = "pod_uid")]
    pod_name: Option<String>,
    /// Kubernetes mode: this speaker's Pod UID (downward API).
    #[arg(long, env = "POD_UID", requires = "pod_name")]
    pod_uid: Option<String>,
    /// Kubernetes mode: label selector of the speaker Pods whose IPs are
    /// memberlist seeds (joined on the --memberlist-bind port).
    #[arg(long, default_value = "app=metallb,component=speaker")]
    memberlist_labels: String,
    /// How often the directory is checked for changes, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    reload_interval_ms: u64,
    /// Serve only services of this spec.loadBalancerClass (default: those
    /// without a class).
    #[arg(long)]
    lb_class: Option<String>,
    /// Announce even from nodes labelled
    /// node.kubernetes.io/exclude-from-external-load-balancers.
    #[arg(long)]
    ignore_exclude_lb: bool,
    /// Also accept BGP connections on this address, e.g. 0.0.0.0:179
    /// (default: connect to peers only, as MetalLB's native mode).
    #[arg(long)]
    bgp_listen: Option<SocketAddr>,
    /// On exit, close BGP sessions without a NOTIFICATION so peers with
    /// graceful restart keep the routes (default: Cease / Administrative
    /// Shutdown, the peers withdraw at once).
    #[arg(long)]
    preserve_bgp_on_exit: bool,
    /// For a BGPPeer with a bfdProfile, connect even while its BFD session
    /// is not Up; BFD going Down still ends the session (Cease / BFD Down)
    /// and it reconnects at once. Default: BGP waits for BFD Up and stays
    /// down while BFD is Down (RFC 9384). MetalLB has no such option.
    #[arg(long)]
    bgp_without_bfd_up: bool,
    /// Run memberlist on this ADDR:PORT (UDP and TCP), for fast layer 2
    /// failover. Without it, every node in the configuration counts as
    /// running a speaker.
    #[arg(long)]
    memberlist_bind: Option<SocketAddr>,
    /// The address other members reach this one at: ADDR:PORT, or an IP
    /// alone to use the --memberlist-bind port (so a DaemonSet can pass
    /// $(POD_IP), IPv4 or IPv6). Default: the bind address, which must
    /// then not be 0.0.0.0 or ::.
    #[arg(long, requires = "memberlist_bind", value_parser = parse_advertise)]
    memberlist_advertise: Option<Advertise>,
    /// A member to join, ADDR:PORT; repeat for more (in Kubernetes mode
    /// the speaker Pods are joined as well). Seeds without a live member
    /// are joined again with backoff (0.5 s doubling to 10 s, jittered); a
    /// node with seeds but no live member reports itself isolated
    /// (ferrolb_memberlist_isolated).
    #[arg(long = "memberlist-join", requires = "memberlist_bind")]
    memberlist_join: Vec<SocketAddr>,
    /// Most memberlist members remembered; new names beyond it replace the
    /// oldest dead or left member, or are dropped (and counted).
    #[arg(long, default_value_t = 5000, requires = "memberlist_bind")]
    memberlist_max_members: usize,
    /// File of AES-256 keys, one per line (64 hex digits or base64 of 32
    /// octets; the first is primary, the others accepted, for rotation). Any
    /// other line is a passphrase whose SHA-256 is the key, so MetalLB's
    /// `memberlist` Secret (secretkey) works as it is. Re-read every
    /// --memberlist-key-reload-ms: a rotated Secret applies without a
    /// restart. Without it memberlist runs in plaintext (lab use only).
    #[arg(long, requires = "memberlist_bind")]
    memberlist_key_file: Option<PathBuf>,
    /// How often the memberlist key file is re-read, in milliseconds.
    #[arg(long, default_value_t = 10_000, requires = "memberlist_key_file")]
    memberlist_key_reload_ms: u64,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, default_value = "0.0.0.0:7472")]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    log: shell::LogArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    // One thread: every task is I/O-bound and small.
    shell::main("speaker", shell::Runtime::CurrentThread, &log, start(args))
}

async fn start(args: Args) -> Result<(), String> {
    match &args.config_dir {
        Some(dir) => {
            info!(node = %args.node_name, dir = %dir.display(), "speaker starting in file mode")
        }
        None => {
            info!(node = %args.node_name, namespace = %args.namespace, "speaker starting in kubernetes mode")
        }
    }
    let shared = metrics::Shared::default();
    let health = shell::Health::new();
    // Every long-lived task of the sources and the status writer must run
    // as long as the speaker: one that ends is a failure (exit code 1).
    // The drivers' tasks end only when asked (or by a panic, which the
    // panic hook turns into an abort); the reconcile loop sees their event
    // streams close.
    let mut supervisor = Supervisor::new(health.clone());
    let tasks = supervisor.spawner();
    let server = metrics::serve(args.metrics_addr, Arc::clone(&shared), health)
        .await
        .map_err(|e| format!("--metrics-addr {}: {e}", args.metrics_addr))?;
    let memberlist = match args.memberlist_bind {
        Some(bind) => Some(start_memberlist(&args, bind, &tasks)?),
        None => None,
    };
    let (tx, reloads) = mpsc::channel(1);
    let report = match &args.config_dir {
        Some(dir) => {
            tasks.spawn(
                "configuration source",
                file::watch(
                    dir.clone(),
                    Duration::from_millis(args.reload_interval_ms.max(10)),
                    tx,
                ),
            );
            None
        }
        None => Some(
            start_kubernetes(
                &args,
                memberlist.as_ref().map(|(m, _)| m.clone()),
                tx,
                &tasks,
            )
            .await?,
        ),
    };
    let opts = Options {
        node: args.node_name,
        load_balancer_class: args.lb_class,
        ignore_exclude_lb: args.ignore_exclude_lb,
        bgp_listen: args.bgp_listen,
        l2: L2Config::default(),
        exit: if args.preserve_bgp_on_exit {
            StopMode::PreserveForwarding
        } else {
            StopMode::Shutdown(EXIT_MESSAGE.into())
        },
        bfd: speaker::driver::bfd::Options::default(),
        bgp_without_bfd_up: args.bgp_without_bfd_up,
    };
    let signals = shell::signal::Shutdown::new().map_err(|e| format!("signal handlers: {e}"))?;
    let shutdown = async move {
        signals.recv().await;
    };
    let result = run::run(
        opts,
        reloads,
        memberlist,
        shared,
        report,
        shutdown,
        &mut supervisor,
    )
    .await
    .map_err(|e| e.to_string());
    server.shutdown().await;
    result
}

/// Connects to the API, starts the watches (and the memberlist seed
/// feed) and the status writer; returns where the loop reports to.
async fn start_kubernetes(
    args: &Args,
    memberlist: Option<Memberlist>,
    tx: mpsc::Sender<Reload>,
    tasks: &Spawner,
) -> Result<watch::Sender<publish::Report>, String> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes API found (and no --config-dir): {e}"))?,
    };
    let client = kube::Client::try_from(config).map_err(|e| format!("kubernetes client: {e}"))?;
    let seeds = match (&memberlist, args.memberlist_bind) {
        (Some(ml), Some(bind)) => {
            let (seeds_tx, mut seeds_rx) = mpsc::unbounded_channel();
            let ml = ml.clone();
            let own = advertise_addr(args.memberlist_advertise, bind);
            let fixed = args.memberlist_join.clone();
            tasks.spawn("memberlist seeds", async move {
                while let Some(ips) = seeds_rx.recv().await {
                    // The whole set each time: the seeds are where members
                    // are expected, and a Pod gone is no longer one.
                    let mut addrs = k8s::seed_addrs(&ips, own.port(), own);
                    addrs.extend(fixed.iter().copied());
                    if ml.join(addrs).is_err() {
                        return;
                    }
                }
            });
            Some(seeds_tx)
        }
        _ => None,
    };
    let source = k8s::Options {
        namespace: args.namespace.clone(),
        memberlist_labels: seeds.as_ref().map(|_| args.memberlist_labels.clone()),
    };
    let stores = k8s::start(&client, &source, tx, seeds, tasks);
    let (report_tx, reports) = watch::channel(publish::Report::default());
    let opts = publish::Options {
        node: args.node_name.clone(),
        namespace: args.namespace.clone(),
        pod: args.pod_name.clone().zip(args.pod_uid.clone()),
    };
    tasks.spawn(
        "status publisher",
        publish::run(client, opts, stores.services, reports),
    );
    Ok(report_tx)
}

fn start_memberlist(
    args: &Args,
    bind: SocketAddr,
    tasks: &Spawner,
) -> Result<(Memberlist, Events), String> {
    let security = match &args.memberlist_key_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--memberlist-key-file {}: {e}", path.display()))?;
            Security::Encrypted(
                keyring::parse(&text).map_err(|e| format!("--memberlist-key-file: {e}"))?,
            )
        }
        None => {
            warn!("memberlist runs without encryption (no --memberlist-key-file)");
            Security::Plaintext
        }
    };
    let name = Name::new(&args.node_name).map_err(|e| format!("--node-name: {e}"))?;
    let advertise = advertise_addr(args.memberlist_advertise, bind);
    // Incarnation 0, not the wall clock: a clock stepped back would make a
    // restart lower than its previous life anyway. The others hand the old
    // incarnation back on join and the core outbids it (see
    // `memberlist::Config::incarnation`).
    let mut swim = memberlist::Config::lan(name, advertise, security);
    swim.max_members = args.memberlist_max_members;
    let mut config = MemberlistConfig::new(swim, bind);
    config.seeds.clone_from(&args.memberlist_join);
    let started =
        Memberlist::start(config).map_err(|e| format!("--memberlist-bind {bind}: {e}"))?;
    if let Some(path) = &args.memberlist_key_file {
        let every = Duration::from_millis(args.memberlist_key_reload_ms.max(100));
        let ml = started.0.clone();
        tasks.spawn(
            "memberlist keyring",
            keyring::watch(path.clone(), every, move |ring| {
                ml.set_keyring(ring).is_ok()
            }),
        );
    }
    Ok(started)
}

/// `--memberlist-advertise`: a full address, or an IP for the bind port.
#[derive(Debug, Clone, Copy)]
enum Advertise {
    Addr(SocketAddr),
    Ip(IpAddr),
}

fn parse_advertise(s: &str) -> Result<Advertise, String> {
    s.parse::<SocketAddr>()
        .map(Advertise::Addr)
        .or_else(|_| s.parse::<IpAddr>().map(Advertise::Ip))
        .map_err(|_| format!("{s:?} is neither ADDR:PORT nor an IP address"))
}

fn advertise_addr(advertise: Option<Advertise>, bind: SocketAddr) -> SocketAddr {
    match advertise {
        Some(Advertise::Addr(a)) => a,
        Some(Advertise::Ip(ip)) => SocketAddr::new(ip, bind.port()),
        None => bind,
    }
}

/// The RFC 9003 Shutdown Communication sent to peers on exit.
const EXIT_MESSAGE: &str = "ferrolb speaker shutting down";
