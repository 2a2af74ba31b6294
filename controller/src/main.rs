//! `controller`: ferrolb's MetalLB-compatible IP controller.
//!
//! `controller run` (the default) watches Services, IPAddressPools and
//! Namespaces and assigns addresses; `controller plan` prints what it would
//! assign for YAML files, with no cluster.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use controller::leader;
use controller::plan::{self, Source};
use controller::reconcile::{self, Options};
use tracing::info;

/// ferrolb controller: assigns LoadBalancer Service IPs from MetalLB
/// IPAddressPools.
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controller against the cluster (the default).
    Run(Box<RunArgs>),
    /// Print what the controller would assign for YAML files, with no
    /// cluster.
    Plan(PlanArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the IPAddressPools, the Lease and the memberlist
    /// Secret. Default: the service account's namespace when running in a
    /// Pod, else metallb-system.
    #[arg(long, env = "METALLB_NAMESPACE")]
    namespace: Option<String>,
    /// Serve only Services of this spec.loadBalancerClass (default: only
    /// Services without a class, as MetalLB does).
    #[arg(long)]
    lb_class: Option<String>,
    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:7472")]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    log: shell::LogArgs,
    /// Name of the coordination.k8s.io Lease used for leader election.
    #[arg(long, default_value = "ferrolb-controller")]
    lease_name: String,
    /// Our holderIdentity (default: $METALLB_POD_NAME or $POD_NAME, else
    /// hostname-pid).
    #[arg(long)]
    identity: Option<String>,
    /// How long a standby waits for a silent leader (Go duration).
    #[arg(long, default_value = "15s", value_parser = duration)]
    lease_duration: Duration,
    /// A leader that cannot renew for this long steps down, and stops
    /// writing: counted from the start of its last successful Lease round.
    /// Must be shorter than --lease-duration.
    #[arg(long, default_value = "10s", value_parser = duration)]
    renew_deadline: Duration,
    /// How often to try to acquire or renew the Lease (shorter than
    /// --renew-deadline).
    #[arg(long, default_value = "2s", value_parser = duration)]
    retry_period: Duration,
    /// Services reconciled at once.
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
    /// Longest wait before retrying a Service that got no address.
    #[arg(long, default_value = "5m", value_parser = duration)]
    max_backoff: Duration,
    /// How often changed IPAddressPool status counters are written.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pool_status_period: Duration,
    /// Create this memberlist Secret (key `secretkey`, a random 128-bit
    /// key) in --namespace when it is missing, as MetalLB's controller
    /// does (its manifests set METALLB_ML_SECRET_NAME=memberlist). An
    /// existing Secret is left as it is.
    #[arg(
        long,
        env = "METALLB_ML_SECRET_NAME",
        help_heading = "MetalLB compatibility"
    )]
    ml_secret_name: Option<String>,
    /// The controller Deployment, owner of the Secret it creates
    /// (METALLB_DEPLOYMENT).
    #[arg(
        long,
        env = "METALLB_DEPLOYMENT",
        help_heading = "MetalLB compatibility"
    )]
    deployment: Option<String>,
    /// MetalLB: webhook mode (enabled, disabled, onlywebhook). No effect:
    /// ferrolb validates with CEL rules in the CRDs and runs no webhook.
    #[arg(long, help_heading = "MetalLB compatibility")]
    webhook_mode: Option<String>,
    /// MetalLB: name of the webhook certificate Secret. No effect (no
    /// webhook).
    #[arg(long, help_heading = "MetalLB compatibility")]
    webhook_secret: Option<String>,
    /// MetalLB: HTTP/2 on the webhook. No effect (no webhook).
    #[arg(long, help_heading = "MetalLB compatibility")]
    webhook_http2: bool,
    /// MetalLB: do not rotate the webhook certificate. No effect (no
    /// webhook).
    #[arg(long, help_heading = "MetalLB compatibility")]
    disable_cert_rotation: bool,
    /// MetalLB: webhook certificate directory. No effect (no webhook).
    #[arg(long, help_heading = "MetalLB compatibility")]
    cert_dir: Option<String>,
    /// MetalLB: the webhook Service named in its certificate. No effect
    /// (no webhook).
    #[arg(long, help_heading = "MetalLB compatibility")]
    cert_service_name: Option<String>,
    #[command(flatten)]
    metallb: shell::compat::MetallbArgs,
}

impl RunArgs {
    /// --namespace, else the service account's, else metallb-system.
    fn namespace(&self) -> String {
        shell::compat::namespace(self.namespace.as_deref())
    }

    /// Logs, once each at info, the MetalLB flags that have no effect.
    fn report_unused(&self) {
        self.metallb.report_unused();
        let webhook = self.webhook_mode.is_some()
            || self.webhook_secret.is_some()
            || self.webhook_http2
            || self.disable_cert_rotation
            || self.cert_dir.is_some()
            || self.cert_service_name.is_some();
        if webhook {
            info!(
                "MetalLB's webhook flags have no effect: ferrolb validates with CEL rules in its CRDs and runs no webhook"
            );
        }
    }
}

#[derive(Debug, Args)]
struct PlanArgs {
    /// YAML files or directories (every *.yaml / *.yml in them, sorted), or
    /// `-` for standard input. Multi-document; `kind: List` is read too.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Yaml)]
    output: Output,
    /// Serve only Services of this spec.loadBalancerClass (default: only
    /// Services without a class).
    #[arg(long)]
    lb_class: Option<String>,
    /// Logs go to standard error (`--log-level debug` names every document
    /// left out, such as status-only objects).
    #[command(flatten)]
    log: shell::LogArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Yaml,
    Json,
}

fn duration(s: &str) -> Result<Duration, String> {
    api::duration::parse(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Plan(args)) => run_plan(&args),
        Some(Command::Run(args)) => run_controller(*args),
        None => run_controller(cli.run),
    }
}

fn run_plan(args: &PlanArgs) -> ExitCode {
    if let Err(e) = args.log.init() {
        eprintln!("controller plan: {e}");
        return ExitCode::from(2);
    }
    let sources = match read_sources(&args.files) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("controller plan: {e}");
            return ExitCode::from(2);
        }
    };
    let plan = match plan::plan(&sources, args.lb_class.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("controller plan: invalid input:\n{e}");
            return ExitCode::FAILURE;
        }
    };
    let text = match args.output {
        Output::Yaml => serde_saphyr::to_string(&plan).map_err(|e| e.to_string()),
        Output::Json => serde_json::to_string_pretty(&plan)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
    };
    match text {
        Ok(t) => {
            print!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("controller plan: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_sources(paths: &[PathBuf]) -> Result<Vec<Source>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p == Path::new("-") {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("stdin: {e}"))?;
            out.push(Source {
                name: "-".into(),
                text,
            });
        } else if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            files.sort();
            for f in files {
                out.push(read_file(&f)?);
            }
        } else {
            out.push(read_file(p)?);
        }
    }
    Ok(out)
}

fn read_file(p: &Path) -> Result<Source, String> {
    Ok(Source {
        name: p.display().to_string(),
        text: std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
    })
}

fn run_controller(args: RunArgs) -> ExitCode {
    let log = args.log.clone();
    // A worker per core: reconciles run in parallel.
    shell::main("controller", shell::Runtime::MultiThread, &log, serve(args))
}

async fn serve(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer().await?,
    };
    let client = kube::Client::try_from(config)?;
    args.report_unused();
    let namespace = args.namespace();
    if let Some(name) = args.ml_secret_name.as_deref().filter(|n| !n.is_empty()) {
        controller::mlsecret::ensure(&client, &namespace, name, args.deployment.as_deref()).await?;
    }
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let opts = Options {
        namespace: namespace.clone(),
        lb_class: args.lb_class.clone(),
        lease: leader::Config {
            namespace,
            name: args.lease_name.clone(),
            identity,
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
        },
        metrics_addr: Some(args.metrics_addr),
        metallb: args.metallb.clone(),
        concurrency: args.concurrency,
        max_backoff: args.max_backoff,
        pool_status_period: args.pool_status_period,
    };
    opts.lease.check()?;
    let (tx, rx) = tokio::sync::watch::channel(false);
    let signals = shell::signal::Shutdown::new()?;
    tokio::spawn(async move {
        signals.recv().await;
        info!("shutting down");
        let _ = tx.send(true);
    });
    reconcile::run(client, opts, rx).await?;
    Ok(())
}

fn default_identity() -> String {
    for var in ["METALLB_POD_NAME", "POD_NAME"] {
        if let Ok(pod) = std::env::var(var)
            && !pod.is_empty()
        {
            return pod;
        }
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "controller".into());
    format!("{host}-{}", std::process::id())
}
