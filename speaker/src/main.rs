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
use speaker::announce::{ApiSpeakers, MetallbSpeakers};
use speaker::driver::l2::{Exclude, L2Config};
use speaker::driver::memberlist::{Config as MemberlistConfig, Events, Memberlist};
use speaker::metrics;
use speaker::publish;
use speaker::run::{self, Options};
use speaker::source::{Reload, excludel2, file, k8s, keyring};
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
    /// This node's name, as in the Node objects (MetalLB's
    /// METALLB_NODE_NAME; NODE_NAME is read when it is not set).
    #[arg(long, env = "METALLB_NODE_NAME")]
    node_name: Option<String>,
    /// Directory of YAML configuration: run in file mode, without
    /// Kubernetes.
    #[arg(long, conflicts_with_all = ["kubeconfig", "pod_name"])]
    config_dir: Option<PathBuf>,
    /// Kubernetes mode: kubeconfig file (default: $KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubernetes mode: the namespace of the metallb.io objects, Secrets,
    /// speaker Pods and status objects. Default: the service account's
    /// namespace when running in a Pod, else metallb-system.
    #[arg(long, env = "METALLB_NAMESPACE")]
    namespace: Option<String>,
    /// Kubernetes mode: this speaker's Pod name (downward API; MetalLB's
    /// METALLB_POD_NAME, or POD_NAME), owner of its status objects so they
    /// go with the Pod.
    #[arg(long, env = "METALLB_POD_NAME")]
    pod_name: Option<String>,
    /// Kubernetes mode: this speaker's Pod UID (downward API). Without it
    /// the Pod is read from the API once at start to learn it.
    #[arg(long, env = "POD_UID")]
    pod_uid: Option<String>,
    /// Kubernetes mode: label selector of the speaker Pods whose IPs are
    /// memberlist seeds (joined on the memberlist port).
    #[arg(
        long,
        visible_alias = "ml-labels",
        env = "METALLB_ML_LABELS",
        default_value = "app=metallb,component=speaker"
    )]
    memberlist_labels: String,
    /// Kubernetes mode, while replacing MetalLB node by node: the label
    /// selector of MetalLB's speaker Pods (e.g. app=metallb,component=speaker;
    /// it must not select ferrolb's). Layer 2 services stay with MetalLB's
    /// speakers while one runs that can answer for them (its ServiceL2Status
    /// names it, or MetalLB's election can pick it); ferrolb takes each over,
    /// with gratuitous ARP / unsolicited NA, once none can. Until both are
    /// listed, no layer 2 service is answered. Harmless once MetalLB is gone
    /// (README, "Coming from MetalLB").
    #[arg(long, conflicts_with = "config_dir")]
    metallb_speaker_labels: Option<String>,
    /// With --metallb-speaker-labels: the namespace of MetalLB's speaker
    /// Pods, its ServiceL2Status objects and its L2Advertisements (default:
    /// --namespace). With a namespace of its own for ferrolb (a copy of the
    /// configuration), deleting MetalLB's L2Advertisements hands every
    /// layer 2 address over to ferrolb's speaker on the same node, and each
    /// node's BGP sessions wait for MetalLB's speaker Pod there to go
    /// (docs, "Node by node, without an outage").
    #[arg(long, conflicts_with = "config_dir")]
    metallb_namespace: Option<String>,
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
    /// Milliseconds after a change to give the memory allocator's free
    /// pages back to the kernel (glibc's malloc_trim), at most once per
    /// such period, so that the resident memory follows what is in use
    /// after a burst instead of keeping every page it touched. Also, at
    /// most once per period, when a burst with no change behind it (the
    /// status writes after a start, a re-list) grew the anonymous resident
    /// memory by more than a sixteenth (and 2 MiB) since the last trim. 0: never. Each trim's time is in
    /// ferrolb_heap_trim_seconds_total. Builds on another allocator (musl)
    /// ignore it.
    #[arg(long, default_value_t = 10_000)]
    heap_trim_ms: u64,
    /// Run memberlist on this ADDR:PORT (UDP and TCP), for fast layer 2
    /// failover. Without it (or --ml-bindaddr), every node in the
    /// configuration counts as running a speaker.
    #[arg(long, group = "memberlist")]
    memberlist_bind: Option<SocketAddr>,
    /// MetalLB's memberlist address (METALLB_ML_BIND_ADDR, the Pod IP):
    /// run memberlist on this IP and --ml-bindport, and advertise it. Same
    /// as --memberlist-bind IP:PORT --memberlist-advertise IP.
    #[arg(
        long = "ml-bindaddr",
        env = "METALLB_ML_BIND_ADDR",
        group = "memberlist",
        conflicts_with = "memberlist_bind"
    )]
    ml_bindaddr: Option<IpAddr>,
    /// MetalLB's memberlist port, with --ml-bindaddr.
    #[arg(
        long = "ml-bindport",
        env = "METALLB_ML_BIND_PORT",
        default_value_t = 7946
    )]
    ml_bindport: u16,
    /// MetalLB's memberlist key directory (METALLB_ML_SECRET_KEY_PATH,
    /// where the `memberlist` Secret is mounted): its file `secretkey` is
    /// the --memberlist-key-file.
    #[arg(
        long = "ml-secret-key-path",
        env = "METALLB_ML_SECRET_KEY_PATH",
        conflicts_with = "memberlist_key_file"
    )]
    ml_secret_key_path: Option<PathBuf>,
    /// Memberlist timings for slow links (MetalLB's --ml-wan-config): 1 s
    /// probes and 2.5 to 10 s suspicion instead of 100 ms and 0.25 to 1 s;
    /// layer 2 failover then takes seconds.
    #[arg(long = "ml-wan-config", requires = "memberlist")]
    ml_wan_config: bool,
    /// The address other members reach this one at: ADDR:PORT, or an IP
    /// alone to use the --memberlist-bind port (so a DaemonSet can pass
    /// $(POD_IP), IPv4 or IPv6). Default: the bind address, which must
    /// then not be 0.0.0.0 or ::.
    #[arg(long, requires = "memberlist", value_parser = parse_advertise)]
    memberlist_advertise: Option<Advertise>,
    /// A member to join, ADDR:PORT; repeat for more (in Kubernetes mode
    /// the speaker Pods are joined as well). Seeds without a live member
    /// are joined again with backoff (0.5 s doubling to 10 s, jittered); a
    /// node with seeds but no live member reports itself isolated
    /// (ferrolb_memberlist_isolated). In Kubernetes mode an isolated node's
    /// layer 2 elections count the speakers whose Pods are Ready, and it
    /// leaves a service to a Ready speaker whose ServiceL2Status says it
    /// answers for it; in file mode it elects among the members it reaches.
    #[arg(long = "memberlist-join", requires = "memberlist")]
    memberlist_join: Vec<SocketAddr>,
    /// Most memberlist members remembered; new names beyond it replace the
    /// oldest dead or left member, or are dropped (and counted).
    #[arg(long, default_value_t = 5000, requires = "memberlist")]
    memberlist_max_members: usize,
    /// File of AES-256 keys, one per line (64 hex digits or base64 of 32
    /// octets; the first is primary, the others accepted, for rotation). Any
    /// other line is a passphrase whose SHA-256 is the key, so MetalLB's
    /// `memberlist` Secret (secretkey) works as it is. Re-read every
    /// --memberlist-key-reload-ms: a rotated Secret applies without a
    /// restart. Without it memberlist runs in plaintext (lab use only).
    #[arg(long, requires = "memberlist")]
    memberlist_key_file: Option<PathBuf>,
    /// How often the memberlist key file is re-read, in milliseconds.
    #[arg(long, default_value_t = 10_000, requires = "memberlist_key_file")]
    memberlist_key_reload_ms: u64,
    /// MetalLB's metallb-excludel2 ConfigMap as mounted: the interfaces
    /// layer 2 never answers on (announcedInterfacesToExclude, regular
    /// expressions over interface names). Without the file, MetalLB's
    /// shipped list: docker*, cbr*, dummy*, virbr*, lxcbr*, veth*, lo,
    /// cali*, tunl*, flannel*, kube-ipvs*, cni*, nodelocaldns*, lxc*.
    #[arg(long, default_value = speaker::source::excludel2::PATH)]
    excludel2_path: PathBuf,
    /// Layer 2: ARP replies and Neighbor Advertisements per second to one
    /// sender (interface and source MAC), sustained; what exceeds it is
    /// dropped and counted (ferrolb_layer2_dropped_total{reason=
    /// "rate_limited"}). 0: no limit. A host resolving an address sends at
    /// most 6 requests for it, 1 s apart; the default leaves room for a
    /// router re-resolving 1,000 service addresses at once.
    #[arg(long, default_value_t = l2::Limit::DEFAULT.rate)]
    layer2_rate_limit: u32,
    /// Layer 2: answers one sender may get at once, after a quiet time.
    #[arg(long, default_value_t = l2::Limit::DEFAULT.burst)]
    layer2_rate_burst: u32,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, default_value = "0.0.0.0:7472")]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    log: shell::LogArgs,
    /// MetalLB: the node's host IP (METALLB_HOST). No effect (MetalLB no
    /// longer uses it either).
    #[arg(long, env = "METALLB_HOST", help_heading = "MetalLB compatibility")]
    host: Option<String>,
    /// MetalLB: which BGP implementation runs (native, frr, frr-k8s). ferrolb
    /// always runs its own; frr and frr-k8s are reported at start.
    #[arg(long, env = "METALLB_BGP_TYPE", help_heading = "MetalLB compatibility")]
    bgp_type: Option<String>,
    /// MetalLB: debounce of FRR configuration reloads (METALLB_BGP_DEBOUNCE_TIMEOUT,
    /// FRR mode only). No effect: ferrolb applies changes to its sessions
    /// directly.
    #[arg(
        long,
        env = "METALLB_BGP_DEBOUNCE_TIMEOUT",
        help_heading = "MetalLB compatibility"
    )]
    bgp_debounce_timeout: Option<String>,
    /// MetalLB: the namespace of frr-k8s (FRRK8S_NAMESPACE). No effect.
    #[arg(long, env = "FRRK8S_NAMESPACE", help_heading = "MetalLB compatibility")]
    frrk8s_namespace: Option<String>,
    /// MetalLB: pass BGP Secrets to frr-k8s unresolved. No effect.
    #[arg(long, help_heading = "MetalLB compatibility")]
    frrk8s_secret_passthrough: bool,
    #[command(flatten)]
    metallb: shell::compat::MetallbArgs,
    /// The node name, from the flag or the environment.
    #[arg(skip)]
    node: String,
    /// The namespace, from the flag, the environment or the service
    /// account.
    #[arg(skip)]
    ns: String,
}

impl Args {
    /// Fills in what MetalLB's names and the environment give, and logs
    /// the MetalLB flags that have no effect here.
    fn resolve(&mut self) -> Result<(), String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        self.node = self
            .node_name
            .clone()
            .or_else(|| env("NODE_NAME"))
            .ok_or("--node-name (or METALLB_NODE_NAME, NODE_NAME) is required")?;
        if self.config_dir.is_none() && self.pod_name.is_none() {
            self.pod_name = env("POD_NAME");
        }
        self.ns = shell::compat::namespace(self.namespace.as_deref());
        if self.metallb_speaker_labels.as_deref() == Some(self.memberlist_labels.as_str()) {
            return Err(format!(
                "--metallb-speaker-labels {:?} is also --memberlist-labels: it must select MetalLB's speaker Pods, not ferrolb's",
                self.memberlist_labels
            ));
        }
        if self.metallb_namespace.is_some() && self.metallb_speaker_labels.is_none() {
            return Err(
                "--metallb-namespace needs --metallb-speaker-labels (the selector of MetalLB's speaker Pods there)"
                    .into(),
            );
        }
        if let Some(ip) = self.ml_bindaddr {
            self.memberlist_bind = Some(SocketAddr::new(ip, self.ml_bindport));
            self.memberlist_advertise.get_or_insert(Advertise::Ip(ip));
        }
        if let Some(dir) = &self.ml_secret_key_path {
            if self.memberlist_bind.is_some() {
                self.memberlist_key_file = Some(dir.join("secretkey"));
            } else {
                info!(path = %dir.display(), "--ml-secret-key-path has no effect without a memberlist address (--ml-bindaddr)");
            }
        }
        self.metallb.report_unused();
        if let Some(host) = &self.host {
            info!(host = %host, "METALLB_HOST has no effect");
        }
        match self.bgp_type.as_deref() {
            None | Some("" | "native") => {}
            Some(other) => info!(
                bgp_type = other,
                "METALLB_BGP_TYPE: ferrolb always runs its own BGP implementation (MetalLB's native mode, with BFD, IPv6, communities and graceful restart); FRR is not used"
            ),
        }
        if let Some(t) = &self.bgp_debounce_timeout {
            info!(timeout = %t, "--bgp-debounce-timeout has no effect (FRR mode only)");
        }
        if self.frrk8s_namespace.is_some() || self.frrk8s_secret_passthrough {
            info!("the frr-k8s flags have no effect: ferrolb does not use frr-k8s");
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = args.log.clone();
    // One thread: every task is I/O-bound and small.
    shell::main("speaker", shell::Runtime::CurrentThread, &log, start(args))
}

async fn start(mut args: Args) -> Result<(), String> {
    args.resolve()?;
    // Before the first list: large blocks (a scrape's text) go back to the
    // kernel when freed.
    if !run::map_large_allocations() {
        tracing::debug!("the allocator keeps its own mmap threshold (not glibc's)");
    }
    match &args.config_dir {
        Some(dir) => {
            info!(node = %args.node, dir = %dir.display(), "speaker starting in file mode")
        }
        None => {
            info!(node = %args.node, namespace = %args.ns, "speaker starting in kubernetes mode")
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
    let routes = metrics::routes(Arc::clone(&shared), health);
    let server = shell::http::Server::bind(args.metrics_addr, shell::http::Config::default())
        .await
        .and_then(|s| s.spawn(routes.clone()))
        .map_err(|e| format!("--metrics-addr {}: {e}", args.metrics_addr))?;
    let probes = args.metallb.serve_probes(routes.clone()).await?;
    let memberlist = match args.memberlist_bind {
        Some(bind) => Some(start_memberlist(&args, bind, &tasks)?),
        None => None,
    };
    let (tx, reloads) = mpsc::channel(1);
    let (kube, client) = match &args.config_dir {
        Some(dir) => {
            tasks.spawn(
                "configuration source",
                file::watch(
                    dir.clone(),
                    Duration::from_millis(args.reload_interval_ms.max(10)),
                    tx,
                ),
            );
            (None, None)
        }
        None => {
            let client = kube_client(&args).await?;
            let kube = start_kubernetes(
                &args,
                client.clone(),
                memberlist.as_ref().map(|(m, _)| m.clone()),
                tx,
                &tasks,
            )
            .await?;
            (Some(kube), Some(client))
        }
    };
    let secure = args
        .metallb
        .serve_secure_metrics(client, routes.clone())
        .await?;
    let opts = Options {
        node: args.node,
        load_balancer_class: args.lb_class,
        ignore_exclude_lb: args.ignore_exclude_lb,
        bgp_listen: args.bgp_listen,
        l2: L2Config {
            exclude: l2_exclude(&args.excludel2_path)?,
            limit: (args.layer2_rate_limit > 0).then_some(l2::Limit {
                rate: args.layer2_rate_limit,
                burst: args.layer2_rate_burst,
                seed: 0,
            }),
            ..L2Config::default()
        },
        exit: if args.preserve_bgp_on_exit {
            StopMode::PreserveForwarding
        } else {
            StopMode::Shutdown(EXIT_MESSAGE.into())
        },
        bfd: speaker::driver::bfd::Options::default(),
        bgp_without_bfd_up: args.bgp_without_bfd_up,
        heap_trim: (args.heap_trim_ms > 0).then(|| Duration::from_millis(args.heap_trim_ms)),
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
        kube,
        shutdown,
        &mut supervisor,
    )
    .await
    .map_err(|e| e.to_string());
    server.shutdown().await;
    if let Some(probes) = probes {
        probes.shutdown().await;
    }
    if let Some(secure) = secure {
        secure.shutdown().await;
    }
    result
}

/// The Kubernetes client: from --kubeconfig, else as kubectl finds one
/// (in a Pod, the service account).
async fn kube_client(args: &Args) -> Result<kube::Client, String> {
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
    kube::Client::try_from(config).map_err(|e| format!("kubernetes client: {e}"))
}

/// Connects to the API, starts the watches (and the memberlist seed
/// feed, the Ready speakers and, while isolated, the ServiceL2Status
/// reader) and the status writer; returns the loop's link to them.
async fn start_kubernetes(
    args: &Args,
    client: kube::Client,
    memberlist: Option<Memberlist>,
    tx: mpsc::Sender<Reload>,
    tasks: &Spawner,
) -> Result<run::Kube, String> {
    let (speakers_tx, speakers) = watch::channel(Arc::new(ApiSpeakers {
        // Not listed yet: no layer 2 service is taken from MetalLB.
        metallb: args
            .metallb_speaker_labels
            .as_ref()
            .map(|_| MetallbSpeakers::default()),
        ..ApiSpeakers::default()
    }));
    let speakers_tx = Arc::new(speakers_tx);
    if let Some(labels) = &args.metallb_speaker_labels {
        let metallb_ns = args.metallb_namespace.as_deref().unwrap_or(&args.ns);
        tasks.spawn(
            "MetalLB speakers",
            k8s::metallb_feed(
                kube::Api::namespaced(client.clone(), metallb_ns),
                kube::Api::namespaced(client.clone(), metallb_ns),
                kube::Api::namespaced(client.clone(), metallb_ns),
                labels.clone(),
                Arc::clone(&speakers_tx),
            ),
        );
    }
    let (isolated, isolated_rx) = watch::channel(false);
    let seeds = match (&memberlist, args.memberlist_bind) {
        (Some(ml), Some(bind)) => {
            let (seeds_tx, mut seeds_rx) = mpsc::unbounded_channel::<k8s::SpeakerPods>();
            let ml = ml.clone();
            let own = advertise_addr(args.memberlist_advertise, bind);
            let fixed = args.memberlist_join.clone();
            let ready_tx = Arc::clone(&speakers_tx);
            tasks.spawn("memberlist seeds", async move {
                let mut joined = None;
                while let Some(pods) = seeds_rx.recv().await {
                    ready_tx.send_if_modified(|s| {
                        let changed = s.ready != pods.ready;
                        if changed {
                            Arc::make_mut(s).ready.clone_from(&pods.ready);
                        }
                        changed
                    });
                    if joined.as_ref() == Some(&pods.ips) {
                        continue;
                    }
                    // The whole set each time: the seeds are where members
                    // are expected, and a Pod gone is no longer one.
                    let mut addrs = k8s::seed_addrs(&pods.ips, own.port(), own);
                    addrs.extend(fixed.iter().copied());
                    if ml.join(addrs).is_err() {
                        return;
                    }
                    joined = Some(pods.ips);
                }
            });
            tasks.spawn(
                "isolated: ServiceL2Status reader",
                k8s::l2_claims(
                    kube::Api::namespaced(client.clone(), &args.ns),
                    isolated_rx,
                    Arc::clone(&speakers_tx),
                ),
            );
            Some(seeds_tx)
        }
        _ => None,
    };
    let source = k8s::Options {
        namespace: args.ns.clone(),
        memberlist_labels: seeds.as_ref().map(|_| args.memberlist_labels.clone()),
        isolated: seeds.as_ref().map(|_| isolated.subscribe()),
    };
    let stores = k8s::start(&client, &source, tx, seeds, tasks);
    let (report_tx, reports) = watch::channel(publish::Report::default());
    let opts = publish::Options {
        node: args.node.clone(),
        namespace: args.ns.clone(),
        pod: pod_owner(
            &client,
            &args.ns,
            args.pod_name.as_deref(),
            args.pod_uid.as_deref(),
        )
        .await,
    };
    tasks.spawn(
        "status publisher",
        publish::run(client, opts, stores.services, reports),
    );
    Ok(run::Kube {
        report: report_tx,
        speakers,
        isolated,
    })
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
    let name = Name::new(&args.node).map_err(|e| format!("--node-name: {e}"))?;
    let advertise = advertise_addr(args.memberlist_advertise, bind);
    // Incarnation 0, not the wall clock: a clock stepped back would make a
    // restart lower than its previous life anyway. The others hand the old
    // incarnation back on join and the core outbids it (see
    // `memberlist::Config::incarnation`).
    let mut swim = if args.ml_wan_config {
        memberlist::Config::wan(name, advertise, security)
    } else {
        memberlist::Config::lan(name, advertise, security)
    };
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

/// The interfaces layer 2 never answers on (`--excludel2-path`).
fn l2_exclude(path: &std::path::Path) -> Result<Exclude, String> {
    let patterns = excludel2::load(path).map_err(|e| format!("--excludel2-path {e}"))?;
    let exclude =
        Exclude::new(&patterns).map_err(|e| format!("--excludel2-path {}: {e}", path.display()))?;
    info!(patterns = ?exclude.patterns(), "layer 2 never answers on interfaces matching");
    Ok(exclude)
}

/// The speaker Pod's name and UID, the owner of its status objects: the
/// UID from the downward API, or read from the API once (MetalLB's pod
/// spec passes only the name). `None` outside a Pod, or when the Pod
/// cannot be read (logged: the status objects then get no owner).
async fn pod_owner(
    client: &kube::Client,
    ns: &str,
    name: Option<&str>,
    uid: Option<&str>,
) -> Option<(String, String)> {
    let name = name?;
    if let Some(uid) = uid.filter(|u| !u.is_empty()) {
        return Some((name.to_owned(), uid.to_owned()));
    }
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), ns);
    let mut delay = Duration::from_millis(200);
    for attempt in 1..=5 {
        match pods.get(name).await {
            Ok(pod) => return pod.metadata.uid.map(|uid| (name.to_owned(), uid)),
            Err(kube::Error::Api(e)) if e.code < 500 => {
                warn!(pod = name, error = %e, "cannot read this speaker's Pod: its status objects get no owner (give POD_UID)");
                return None;
            }
            Err(e) if attempt == 5 => {
                warn!(pod = name, error = %e, "cannot read this speaker's Pod: its status objects get no owner (give POD_UID)");
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    None
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
